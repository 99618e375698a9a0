"""AIConfigurator's disaggregated search, over any :class:`LatencyModel`.

Per tensor-parallel size, prefill workers are rated at batch 1 and decode workers over a batch grid;
the SLA filters them; rate matching picks x prefill : y decode workers maximising output tokens/s per
GPU. The constants below are AIConfigurator 0.12's (docs/planner.md, reference §4), so a run with its
latencies reproduces its choice; the aggregated plan is our approximation of its in-flight batching.
"""

from __future__ import annotations

import bisect
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from aiplane.planner.latency import BuiltinLatency, kv_capacity_tokens, layout_kv_capacity, max_batch
from aiplane.planner.types import (
    Backend,
    DecodeSimulating,
    EnginePlan,
    LatencyModel,
    ModelSpec,
    Plan,
    ProfilePoint,
    SystemSpec,
)

#: AIC multiplies the modelled context (prefill) time by 1.1 and the generation time by 1.08.
PREFILL_LATENCY_CORRECTION = 1.1
DECODE_LATENCY_CORRECTION = 1.08
#: Queueing under load: a prefill worker's corrected latency x 1.8 must stay under the TTFT target.
PREFILL_QUEUE_FACTOR = 1.8
#: Rate matching derates each side's nominal rate (prefill 0.9, decode 0.92), as AIC does.
PREFILL_RATE_DERATE = 0.9
DECODE_RATE_DERATE = 0.92
#: Workers of each kind considered per replica: AIC's 32 under a GPU budget; 8 when sizing one replica.
MAX_WORKERS_WITH_BUDGET = 32
MAX_WORKERS_WITHOUT_BUDGET = 8
#: GPUs one replica (x prefill + y decode workers) may total: AIC's ``num_gpu_per_replica`` default
#: (task_v2 ``_resolve_replica_budget``), capped at the budget. Whole nodes past 8, so no GPU is stranded
#: on 8-GPU nodes by an odd replica (a 5-GPU replica would leave 3 of a node idle).
REPLICA_GPUS: tuple[int, ...] = (1, 2, 4, 8, *range(16, 129, 8))
#: Decode batch sizes tried: AIC's ``_DEFAULT_DECODE_BATCH_SCHEDULE`` (sdk/sweep.py).
BATCH_GRID: tuple[int, ...] = (
    *range(1, 16),
    *range(16, 32, 2),
    *range(32, 128, 4),
    *range(128, 512, 8),
    512,
)
#: AIC's CLI sweeps these TPOT targets, ms (task_v2 ``_LEGACY_TPOT_SWEEP``), then picks among the rows.
TPOT_SWEEP: tuple[int, ...] = (*range(1, 20), *range(20, 300, 5))
#: Decode workers per TP and swept target that AIC pairs (``_MAX_DECODE_WORKERS_PER_CATEGORY``).
MAX_DECODE_WORKERS_PER_TP = 16
#: Prefill workers (best throughput per GPU first) AIC pairs with each decode worker (``_MAX_PREFILL_WORKERS``).
MAX_PREFILL_CANDIDATES = 32
PROFILE_LENGTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


@dataclass(frozen=True)
class Workload:
    model: ModelSpec
    system: SystemSpec
    backend: Backend
    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float
    total_gpus: int | None

    @property
    def decode_context(self) -> int:
        """Average context over a request's decode: prompt plus half the output."""
        return self.isl + self.osl // 2


@dataclass(frozen=True)
class Layout:
    """How one worker spreads over its GPUs: attention TP x attention data-parallel ranks, and the
    MoE layers' TP x expert parallelism over the same GPUs (tp x dp == moe_tp x moe_ep; 1s when dense)."""

    tp: int
    dp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def label(self) -> str:
        """AIC's name for the layout (its ``parallel`` column): its picker groups and orders by it."""
        return f"tp{self.tp}pp1dp{self.dp}etp{self.moe_tp}ep{self.moe_ep}"


def backend_runs(model: ModelSpec, backend: Backend, layout: Layout) -> bool:
    """Whether the backend can run the model in ``layout``. TensorRT-LLM's weight-only 4-bit (MXFP4)
    MoE path splits experts by expert parallelism only: aiconfigurator-core 0.12.0 measured it
    (``w4a16_mxfp4`` in every system's trtllm ``moe_perf.parquet``) at MoE TP 1 alone, where its other
    MoE dtypes and the other backends' MXFP4 kernels run MoE TP 1-32."""
    return not (backend == "trtllm" and model.fp4_weight_only and layout.moe_tp > 1)


@dataclass(frozen=True)
class PrefillWorker:
    tp: int
    latency_ms: float  # corrected, without queueing
    ttft_ms: float  # with the queueing factor: what the SLA compares
    rate: float  # requests/s one worker prefills
    layout: Layout | None = None  # None: tensor parallelism only (tp GPUs)

    @cached_property
    def par(self) -> Layout:
        return self.layout if self.layout is not None else Layout(self.tp)

    @cached_property
    def gpus(self) -> int:
        return self.par.gpus


@dataclass(frozen=True)
class DecodeWorker:
    tp: int
    batch: int  # per attention data-parallel rank, as AIC's ``bs``
    tpot_ms: float
    rate: float  # requests/s one worker completes
    layout: Layout | None = None

    @cached_property
    def par(self) -> Layout:
        return self.layout if self.layout is not None else Layout(self.tp)

    @cached_property
    def gpus(self) -> int:
        return self.par.gpus


@dataclass(frozen=True)
class Match:
    """x prefill and y decode workers rate-matched. Derived figures are cached on the instance: the
    search compares hundreds of thousands of them (equality and hashing stay the fields')."""

    prefill: PrefillWorker
    decode: DecodeWorker
    x: int
    y: int
    throughput: float  # requests/s of one replica (x prefill + y decode workers)

    @cached_property
    def gpus(self) -> int:
        return self.x * self.prefill.gpus + self.y * self.decode.gpus

    @cached_property
    def per_gpu(self) -> float:
        return self.throughput / self.gpus


def tp_sizes(lo: int, hi: int, cap: int | None) -> list[int]:
    """Powers of two in [lo, hi] (and <= cap)."""
    top = hi if cap is None else min(hi, cap)
    return [1 << k for k in range(0, 12) if lo <= (1 << k) <= top]


def prefill_workers(w: Workload, latency: LatencyModel, tps: Iterable[int]) -> list[PrefillWorker]:
    out = []
    for tp in tps:
        if kv_capacity_tokens(w.model, w.system, tp) < w.isl:
            continue
        ms = latency.prefill_ms(w.model, w.system, tp, 1, w.isl) * PREFILL_LATENCY_CORRECTION
        # AIC's summary frame rounds TTFT and rate to 3 decimals before it filters and rate-matches.
        out.append(PrefillWorker(tp, ms, round(ms, 3) * PREFILL_QUEUE_FACTOR, round(1000.0 / ms, 3)))
    return out


def decode_step(w: Workload, latency: LatencyModel, tp: int, batch: int) -> float:
    """Uncorrected mean decode step of ``batch`` requests: simulated over the decode when the model
    can (:class:`DecodeSimulating`, as AIC's CLI does), else one step at the mean context."""
    if isinstance(latency, DecodeSimulating):
        return latency.decode_tpot_ms(w.model, w.system, tp, batch, w.isl, w.osl)
    return latency.decode_step_ms(w.model, w.system, tp, batch, w.decode_context)


def decode_workers(w: Workload, latency: LatencyModel, tps: Iterable[int]) -> list[DecodeWorker]:
    """Decode workers per TP over the batch grid, up to the largest batch that fits. Like AIC's
    summary frame, TPOT and rate are rounded to 3 decimals: its ties and cut-offs are on those."""
    out = []
    for tp in tps:
        for batch in BATCH_GRID[: _batches_that_fit(w, latency, tp)]:
            tpot = decode_step(w, latency, tp, batch) * DECODE_LATENCY_CORRECTION
            # A request's first token comes from the prefill: its decode is OSL - 1 steps (AIC's seq/s).
            rate = batch * 1000.0 / (tpot * (w.osl - 1))
            out.append(DecodeWorker(tp, batch, round(tpot, 3), round(rate, 3)))
    return out


def _batches_that_fit(w: Workload, latency: LatencyModel, tp: int) -> int:
    """How many of :data:`BATCH_GRID` fit: by the model's own memory model when it has one (memory
    grows with the batch, so a bisection asks it ~7 times, not once per batch), else ours."""
    if not isinstance(latency, DecodeSimulating):
        fits = max_batch(w.model, w.system, tp, w.decode_context)
        return bisect.bisect_right(BATCH_GRID, fits)
    lo, hi = 0, len(BATCH_GRID)  # BATCH_GRID[:lo] fit; BATCH_GRID[hi:] do not
    while lo < hi:
        mid = (lo + hi) // 2
        if latency.decode_fits(w.model, w.system, tp, BATCH_GRID[mid], w.isl, w.osl):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _par(layout: Layout) -> tuple[int, int, int, int]:
    return (layout.tp, layout.dp, layout.moe_tp, layout.moe_ep)


def layout_workers(
    w: Workload, latency: BuiltinLatency, layouts: Iterable[Layout]
) -> tuple[list[PrefillWorker], list[DecodeWorker]]:
    """Prefill and decode workers of every layout (mixture-of-experts: attention DP, MoE TP / EP) from
    the built-in model, rated as AIC rates its candidates: a prefill worker prefills one prompt per
    attention rank at a time, a decode worker's batch is per attention rank."""
    prefills: list[PrefillWorker] = []
    decodes: list[DecodeWorker] = []
    for par in layouts:
        capacity = layout_kv_capacity(w.model, w.system, _par(par))
        if capacity < w.isl:
            continue
        ms = latency.layout_prefill_ms(w.model, w.system, _par(par), w.isl) * PREFILL_LATENCY_CORRECTION
        rate = round(par.dp * 1000.0 / ms, 3)
        prefills.append(PrefillWorker(par.tp, ms, round(ms, 3) * PREFILL_QUEUE_FACTOR, rate, par))
        fits = bisect.bisect_right(BATCH_GRID, capacity // max(1, w.decode_context))
        for batch in BATCH_GRID[:fits]:
            step = latency.layout_decode_ms(w.model, w.system, _par(par), batch, w.decode_context)
            tpot = step * DECODE_LATENCY_CORRECTION
            rate = batch * par.dp * 1000.0 / (tpot * (w.osl - 1))
            decodes.append(DecodeWorker(par.tp, batch, round(tpot, 3), round(rate, 3), par))
    return prefills, decodes


@lru_cache(maxsize=1024)
def _combos(tp_p: int, tp_d: int, workers: int, budget: int | None) -> tuple[tuple[int, int, int], ...]:
    """(x, y, GPUs) replicas whose GPUs AIC allows, in AIC's order: decode workers outer, prefill inner."""
    cap = min(REPLICA_GPUS[-1], budget) if budget is not None else REPLICA_GPUS[-1]
    allowed = {g for g in REPLICA_GPUS if g <= cap}
    rng = range(1, workers + 1)
    return tuple((x, y, x * tp_p + y * tp_d) for y in rng for x in rng if x * tp_p + y * tp_d in allowed)


@lru_cache(maxsize=1 << 16)
def match(p: PrefillWorker, d: DecodeWorker, max_workers: int, budget: int | None) -> Match | None:
    """The best x:y for one prefill/decode pair: AIC's ``_match_workers``.

    Highest throughput per GPU of the replica, over replicas whose GPU total is one AIC allows
    (:data:`REPLICA_GPUS`, within the budget); ties keep the first in AIC's order (fewest decode
    workers, then fewest prefill workers).
    """
    best: Match | None = None
    best_per_gpu = 0.0
    for x, y, gpus in _combos(p.gpus, d.gpus, max_workers, budget):
        # AIC's arithmetic order (rate x workers x derate), so that its exact ties stay ties.
        throughput = min(p.rate * x * PREFILL_RATE_DERATE, d.rate * y * DECODE_RATE_DERATE)
        if throughput / gpus > best_per_gpu:
            best_per_gpu, best = throughput / gpus, Match(p, d, x, y, throughput)
    return best


def cluster_per_gpu(m: Match, budget: int | None) -> float:
    """Throughput per GPU of the whole budget when the replica repeats (AIC's tokens/s/gpu_cluster)."""
    if budget is None:
        return m.per_gpu
    return m.per_gpu * (budget // m.gpus) * m.gpus / budget


def _rank(m: Match, budget: int | None) -> tuple[float, ...]:
    """AIC's pick: throughput per budget GPU, then tokens/s/user; then (its per-category choice) the
    replica's own throughput per GPU and fewer GPUs; then fewer decode, fewer prefill workers."""
    return (cluster_per_gpu(m, budget), -m.decode.tpot_ms, m.per_gpu, -m.gpus, -m.y, -m.x)


def _better(a: Match, b: Match, budget: int | None = None) -> bool:
    return _rank(a, budget) > _rank(b, budget)


def max_workers(w: Workload) -> int:
    return MAX_WORKERS_WITHOUT_BUDGET if w.total_gpus is None else MAX_WORKERS_WITH_BUDGET


def best_match(
    w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> Match | None:
    best: Match | None = None
    for p in prefills:
        for d in decodes:
            if not _pairable(w, p, d):
                continue
            m = match(p, d, max_workers(w), w.total_gpus)
            if m is not None and (best is None or _better(m, best, w.total_gpus)):
                best = m
    return best


def disagg_plan(m: Match, w: Workload, meets: bool) -> Plan:
    replicas = 1 if w.total_gpus is None else max(1, w.total_gpus // m.gpus)
    return Plan(
        tokens_per_second_per_gpu=m.per_gpu * w.osl,
        tokens_per_second_per_user=1000.0 / m.decode.tpot_ms,
        ttft_ms=m.prefill.ttft_ms,
        itl_ms=m.decode.tpot_ms,
        gpus=replicas * m.gpus,
        meets_sla=meets,
        prefill=_engine(m.prefill.par, m.x * replicas, None),
        decode=_engine(m.decode.par, m.y * replicas, m.decode.batch),
    )


def _engine(par: Layout, workers: int, batch: int | None) -> EnginePlan:
    return EnginePlan(
        tp=par.tp, workers=workers, batch=batch, dp=par.dp, moe_tp=par.moe_tp, moe_ep=par.moe_ep
    )


def _pairable(w: Workload, p: PrefillWorker, d: DecodeWorker) -> bool:
    if w.backend == "sglang" and p.tp != d.tp:
        return False  # AIC: SGLang's disaggregation pairs equal TP sizes
    return w.total_gpus is None or p.gpus + d.gpus <= w.total_gpus


def search_disagg(
    w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> tuple[Match | None, bool]:
    """AIC's disaggregated pick: the best of its candidate rows (:func:`candidate_rows`) by throughput
    per budget GPU, then tokens/s/user, among rows meeting the ITL target (``True``); unless some pair
    meeting both targets does better per budget GPU (:func:`_budget_optimum`), which is then answered.

    When no row meets the ITL target, AIC's best effort: per decode TP the row with the best
    throughput per budget GPU, and of those the one with the lowest ITL (``False``). Rows exist only
    when the TTFT target can be met; otherwise AIC answers nothing and we answer the pair that misses
    least (:func:`_closest`).
    """
    ok_prefills = [p for p in prefills if p.ttft_ms < w.ttft_ms]
    rows = candidate_rows(w, ok_prefills, decodes)
    if not rows:
        return _closest(w, prefills, decodes), False
    meeting = [r for r in rows if round(r.decode.tpot_ms, 3) <= w.itl_ms]
    optimum = _budget_optimum(w, ok_prefills, decodes)
    if optimum is not None:
        # AIC's rows keep per decode worker the partner best for the replica, not for the budget, and
        # cap the workers they pair: a looser TTFT can swap a partner that fills the budget for one that
        # strands GPUs of it. AIC's pick stands unless a plan meeting both targets beats it.
        aic_pick = _aic_pick(w, meeting) if meeting else None
        if aic_pick is None or _picked_value(optimum, w) > _picked_value(aic_pick, w):
            return optimum, True
        return aic_pick, True
    return _aic_pick(w, rows), False


def _aic_pick(w: Workload, rows: Sequence[Match]) -> Match:
    """AIC's picker over its rows: the best per budget GPU of meeting rows, ties to the lower ITL;
    over rows none of which meets the ITL target, the lowest ITL of each layout's best."""
    meeting = [r for r in rows if round(r.decode.tpot_ms, 3) <= w.itl_ms]
    per_layout: dict[str, Match] = {}  # AIC's picker groups by the decode layout's name, in its order
    for r in meeting or rows:  # in row order: the first of equals stays (pandas idxmax)
        kept = per_layout.get(r.decode.par.label)
        if kept is None or _picked_value(r, w) > _picked_value(kept, w):
            per_layout[r.decode.par.label] = r
    best = [per_layout[label] for label in sorted(per_layout)]
    if meeting:
        return max(best, key=lambda m: (_picked_value(m, w), -round(m.decode.tpot_ms, 3)))
    return min(best, key=lambda m: round(m.decode.tpot_ms, 3))


def _budget_optimum(
    w: Workload, ok_prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> Match | None:
    """The plan meeting both targets with the most throughput per budget GPU, over every TTFT-meeting
    prefill worker and ITL-meeting decode worker. Of one layout's workers only the highest rate can
    win (same GPUs, so at least its throughput in every x:y), which keeps the pairs to layouts^2."""
    fastest_p: dict[Layout, PrefillWorker] = {}
    for p in ok_prefills:
        if p.par not in fastest_p or p.rate > fastest_p[p.par].rate:
            fastest_p[p.par] = p
    fastest_d: dict[Layout, DecodeWorker] = {}
    for d in decodes:
        kept = fastest_d.get(d.par)
        faster = kept is None or (d.rate, -d.tpot_ms) > (kept.rate, -kept.tpot_ms)
        if faster and round(d.tpot_ms, 3) <= w.itl_ms:
            fastest_d[d.par] = d
    best: Match | None = None
    for p in fastest_p.values():
        for d in fastest_d.values():
            m = _budget_match(p, d, max_workers(w), w.total_gpus) if _pairable(w, p, d) else None
            if m is not None and (best is None or _picked_value(m, w) > _picked_value(best, w)):
                best = m
    return best


def _budget_match(p: PrefillWorker, d: DecodeWorker, workers: int, budget: int | None) -> Match | None:
    """The x:y of one pair with the most throughput per budget GPU (the replica repeated), fewer GPUs
    among equals; without a budget, :func:`match`'s (per GPU of the one replica)."""
    if budget is None:
        return match(p, d, workers, budget)
    best: Match | None = None
    best_total = 0.0
    for x, y, gpus in _combos(p.gpus, d.gpus, workers, budget):
        throughput = min(p.rate * x * PREFILL_RATE_DERATE, d.rate * y * DECODE_RATE_DERATE)
        if throughput * (budget // gpus) > best_total:
            best_total, best = throughput * (budget // gpus), Match(p, d, x, y, throughput)
    return best


def _picked_value(m: Match, w: Workload) -> float:
    """What AIC's picker compares: tokens/s/GPU rounded to 3 decimals, per GPU of the budget."""
    tokens = round(m.per_gpu * w.osl, 3)
    return tokens if w.total_gpus is None else tokens * (w.total_gpus // m.gpus) * m.gpus / w.total_gpus


def candidate_rows(
    w: Workload, ok_prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> list[Match]:
    """AIC's candidate rows (sdk/sweep.py ``_find_best_disagg_under_constraint``, TPOT swept).

    For each swept TPOT target t and each decode TP: of the (up to 16) decode workers with TPOT < t
    and the highest throughput per GPU, paired with every TTFT-meeting prefill worker (highest
    throughput per GPU first), the rate-matched pair with the best throughput per GPU of the replica
    (as AIC, not per budget GPU), then fewer GPUs; the first of equals. The rows come in the order of
    AIC's frame (targets in turn, each sorted by tokens/s/GPU, repeats dropped, then sorted again),
    because its picker names the first of equal rows.
    """
    budget = w.total_gpus
    # AIC keeps the 32 best prefill workers per GPU (fewer attention ranks first among equals).
    prefs = sorted(ok_prefills, key=lambda p: (-p.rate / p.gpus, p.par.dp))[:MAX_PREFILL_CANDIDATES]
    by_tp: dict[str, list[tuple[DecodeWorker, Match]]] = {}
    for d in sorted(decodes, key=lambda d: -d.rate / d.gpus):
        best: Match | None = None  # the first best prefill partner, in AIC's order
        for p in prefs:
            m = match(p, d, max_workers(w), budget) if _pairable(w, p, d) else None
            if m is not None and (best is None or _row_key(m, budget) > _row_key(best, budget)):
                best = m
        if best is not None:
            by_tp.setdefault(d.par.label, []).append((d, best))
    rows: list[Match] = []
    seen: set[Match] = set()
    for target in TPOT_SWEEP:
        per_target: list[Match] = []  # one row per decode layout (AIC's groupby over "parallel", by name)
        for tp in sorted(by_tp):
            eligible = [m for d, m in by_tp[tp] if d.tpot_ms < target][:MAX_DECODE_WORKERS_PER_TP]
            if eligible:
                row = eligible[0]
                for m in eligible[1:]:
                    if _row_key(m, budget) > _row_key(row, budget):
                        row = m
                per_target.append(row)
        # AIC sorts each target's rows by tokens/s/GPU, then concatenates the targets and drops repeats.
        for i in pandas_descending([round(m.per_gpu * w.osl, 3) for m in per_target], boxed=False):
            if per_target[i] not in seen:
                seen.add(per_target[i])
                rows.append(per_target[i])
    # The concatenated frame (object columns: it grew from an empty one) is sorted once more; its
    # order is the one the picker's first-of-equals sees.
    order = pandas_descending([round(m.per_gpu * w.osl, 3) for m in rows], boxed=True)
    return [rows[i] for i in order]


def pandas_descending(values: Sequence[float], *, boxed: bool) -> list[int]:
    """Indices of ``values`` from high to low in the order pandas' ``sort_values(ascending=False)``
    gives them, equal values included: AIC's first-of-equals is that order.

    pandas reverses the column, argsorts it with numpy's (unstable) quicksort and reverses the result;
    ``boxed`` is an object column (numpy's generic introsort), else float64 (numpy's SIMD sort where
    the CPU has one). numpy comes with the aic extra; without it, a stable sort (equal values in
    their given order), which differs from AIC only in which of equal plans is named.
    """
    n = len(values)
    try:
        np: Any = importlib.import_module("numpy")
    except ImportError:
        return sorted(range(n), key=lambda i: -values[i])
    column = np.array(list(values)[::-1], dtype=object if boxed else float)
    return [n - 1 - int(i) for i in column.argsort(kind="quicksort")][::-1]


def _row_key(m: Match, budget: int | None) -> tuple[float, int]:
    del budget  # AIC ranks a category's pairs by the replica's own throughput per GPU
    return (m.per_gpu, -m.gpus)


def _closest(w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]) -> Match | None:
    """Among pairs that fit the budget, the least max(1, TTFT / target) + max(1, ITL / target): each
    side as close to its target as the budget allows; then the best rate-matched of those."""
    overshoot = {
        (p, d): max(1.0, p.ttft_ms / w.ttft_ms) + max(1.0, d.tpot_ms / w.itl_ms)
        for p in prefills
        for d in decodes
        if _pairable(w, p, d)
    }
    if not overshoot:
        return None
    least = min(overshoot.values())
    closest: Match | None = None
    for (p, d), value in overshoot.items():
        if value <= least:
            m = match(p, d, max_workers(w), w.total_gpus)
            if m is not None and (closest is None or _better(m, closest, w.total_gpus)):
                closest = m
    return closest


def frontier(
    w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> tuple[tuple[float, float], ...]:
    """(tokens/s/user, tokens/s/GPU) points no other decode choice beats on both axes."""
    ok_p = [p for p in prefills if p.ttft_ms < w.ttft_ms] or list(prefills)
    points = []
    for d in decodes:
        m = best_match(w, ok_p, [d])
        if m is not None:
            points.append((1000.0 / d.tpot_ms, m.per_gpu * w.osl))
    points.sort(key=lambda pt: (-pt[0], -pt[1]))
    kept: list[tuple[float, float]] = []
    for user, gpu in points:
        if not kept or gpu > kept[-1][1]:
            kept.append((user, gpu))
    return tuple((round(user, 3), round(gpu, 3)) for user, gpu in reversed(kept))


def _agg_point(w: Workload, latency: LatencyModel, tp: int, batch: int) -> tuple[float, float]:
    """(TTFT, ITL) of one engine serving both phases with in-flight batching.

    Each request's prompt is prefilled once over its OSL decode steps, so every step carries on average
    batch / OSL prefills: ITL = decode step + prefill time x batch / OSL (AIC's interference estimate).
    """
    prefill = latency.prefill_ms(w.model, w.system, tp, 1, w.isl) * PREFILL_LATENCY_CORRECTION
    step = decode_step(w, latency, tp, batch) * DECODE_LATENCY_CORRECTION
    return prefill * PREFILL_QUEUE_FACTOR, step + prefill * batch / w.osl


def search_agg(w: Workload, latency: LatencyModel, tps: Iterable[int]) -> Plan | None:
    best: tuple[tuple[float, ...], Plan] | None = None
    for tp in tps:
        fits = max_batch(w.model, w.system, tp, w.decode_context)
        for batch in BATCH_GRID:
            if batch > fits:
                break
            ttft, itl = _agg_point(w, latency, tp, batch)
            meets = ttft <= w.ttft_ms and itl <= w.itl_ms
            per_gpu = batch * 1000.0 / itl / tp
            workers = 1 if w.total_gpus is None else max(1, w.total_gpus // tp)
            plan = Plan(
                tokens_per_second_per_gpu=per_gpu,
                tokens_per_second_per_user=1000.0 / itl,
                ttft_ms=ttft,
                itl_ms=itl,
                gpus=workers * tp,
                meets_sla=meets,
                agg=EnginePlan(tp=tp, workers=workers, batch=batch),
            )
            # Meeting the SLA first; then throughput; when none meets it, the least SLA overshoot.
            overshoot = max(ttft / w.ttft_ms, itl / w.itl_ms)
            key = (1.0, per_gpu, -tp) if meets else (0.0, -overshoot, -tp)
            if best is None or key > best[0]:
                best = (key, plan)
    return None if best is None else best[1]


def prefill_profile(w: Workload, latency: LatencyModel, tp: int) -> tuple[ProfilePoint, ...]:
    points = []
    for isl in sorted({*PROFILE_LENGTHS, w.isl}):
        if kv_capacity_tokens(w.model, w.system, tp) < isl:
            continue
        ms = latency.prefill_ms(w.model, w.system, tp, 1, isl) * PREFILL_LATENCY_CORRECTION
        points.append(ProfilePoint(isl, round(ms, 4), round(isl * 1000.0 / ms / tp, 3)))
    return tuple(points)


def decode_profile(w: Workload, latency: LatencyModel, tp: int, batch: int) -> tuple[ProfilePoint, ...]:
    points = []
    for context in sorted({*PROFILE_LENGTHS, w.decode_context}):
        if max_batch(w.model, w.system, tp, context) < batch:
            continue
        ms = latency.decode_step_ms(w.model, w.system, tp, batch, context) * DECODE_LATENCY_CORRECTION
        points.append(ProfilePoint(context, round(ms, 4), round(batch * 1000.0 / ms / tp, 3)))
    return tuple(points)

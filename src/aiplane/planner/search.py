"""AIConfigurator's disaggregated search, over any :class:`LatencyModel`.

Per tensor-parallel size, prefill workers are rated at batch 1 and decode workers over a batch grid;
the SLA filters them; rate matching picks x prefill : y decode workers maximising output tokens/s per
GPU. The constants below are AIConfigurator 0.12's (docs/planner.md, reference §4), so a run with its
latencies reproduces its choice; the aggregated plan is our approximation of its in-flight batching.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiplane.planner.latency import kv_capacity_tokens, max_batch
from aiplane.planner.types import (
    Backend,
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
#: Decode batch sizes tried (AIC: 1..512 on a coarsening grid).
BATCH_GRID: tuple[int, ...] = (
    *range(1, 9),
    *range(12, 33, 4),
    *range(40, 129, 8),
    *range(144, 257, 16),
    *range(288, 513, 32),
)
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
class PrefillWorker:
    tp: int
    latency_ms: float  # corrected, without queueing
    ttft_ms: float  # with the queueing factor: what the SLA compares
    rate: float  # requests/s one worker prefills


@dataclass(frozen=True)
class DecodeWorker:
    tp: int
    batch: int
    tpot_ms: float
    rate: float  # requests/s one worker completes


@dataclass(frozen=True)
class Match:
    prefill: PrefillWorker
    decode: DecodeWorker
    x: int
    y: int
    throughput: float  # requests/s of one replica (x prefill + y decode workers)

    @property
    def gpus(self) -> int:
        return self.x * self.prefill.tp + self.y * self.decode.tp

    @property
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
        out.append(PrefillWorker(tp, ms, ms * PREFILL_QUEUE_FACTOR, 1000.0 / ms))
    return out


def decode_workers(w: Workload, latency: LatencyModel, tps: Iterable[int]) -> list[DecodeWorker]:
    out = []
    for tp in tps:
        fits = max_batch(w.model, w.system, tp, w.decode_context)
        for batch in BATCH_GRID:
            if batch > fits:
                break
            step = latency.decode_step_ms(w.model, w.system, tp, batch, w.decode_context)
            tpot = step * DECODE_LATENCY_CORRECTION
            out.append(DecodeWorker(tp, batch, tpot, batch * 1000.0 / (tpot * w.osl)))
    return out


def match(p: PrefillWorker, d: DecodeWorker, max_workers: int, budget: int | None) -> Match | None:
    """The best x:y for one prefill/decode pair, in O(max_workers).

    For a fixed x the replica's throughput grows with y until decode matches prefill and is flat
    after, while its GPUs keep growing: so per GPU the optimum y is one of the two integers around the
    crossing x * prefill rate / decode rate (clamped to the budget).
    """
    best: Match | None = None
    pr, dr = p.rate * PREFILL_RATE_DERATE, d.rate * DECODE_RATE_DERATE
    for x in range(1, max_workers + 1):
        y_max = max_workers
        if budget is not None:
            y_max = min(y_max, (budget - x * p.tp) // d.tp)
        if y_max < 1:
            break
        crossing = x * pr / dr
        for y in {min(y_max, max(1, math.floor(crossing))), min(y_max, max(1, math.ceil(crossing)))}:
            candidate = Match(p, d, x, y, min(x * pr, y * dr))
            if best is None or _better(candidate, best):
                best = candidate
    return best


def _better(a: Match, b: Match) -> bool:
    """Higher throughput per GPU; ties: fewer GPUs, then fewer prefill workers (deterministic)."""
    return (a.per_gpu, -a.gpus, -a.x) > (b.per_gpu, -b.gpus, -b.x)


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
            if m is not None and (best is None or _better(m, best)):
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
        prefill=EnginePlan(tp=m.prefill.tp, workers=m.x * replicas),
        decode=EnginePlan(tp=m.decode.tp, workers=m.y * replicas, batch=m.decode.batch),
    )


def _pairable(w: Workload, p: PrefillWorker, d: DecodeWorker) -> bool:
    if w.backend == "sglang" and p.tp != d.tp:
        return False  # AIC: SGLang's disaggregation pairs equal TP sizes
    return w.total_gpus is None or p.tp + d.tp <= w.total_gpus


def search_disagg(
    w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> tuple[Match | None, bool]:
    """The best rate-matched pair meeting the SLA, else the best of the pairs that miss it least.

    "Least" is the smallest max(1, TTFT / target) + max(1, ITL / target) over pairs that fit the budget:
    each side gets as close to its target as the budget allows, a side that can meet its target does,
    and among equally close pairs the best throughput per GPU wins.
    """
    ok_p = [p for p in prefills if p.ttft_ms <= w.ttft_ms]
    ok_d = [d for d in decodes if d.tpot_ms <= w.itl_ms]
    found = best_match(w, ok_p, ok_d)
    if found is not None:
        return found, True
    overshoot = {
        (p, d): max(1.0, p.ttft_ms / w.ttft_ms) + max(1.0, d.tpot_ms / w.itl_ms)
        for p in prefills
        for d in decodes
        if _pairable(w, p, d)
    }
    if not overshoot:
        return None, False
    least = min(overshoot.values())
    closest: Match | None = None
    for (p, d), value in overshoot.items():
        if value <= least:
            m = match(p, d, max_workers(w), w.total_gpus)
            if m is not None and (closest is None or _better(m, closest)):
                closest = m
    return closest, False


def frontier(
    w: Workload, prefills: Sequence[PrefillWorker], decodes: Sequence[DecodeWorker]
) -> tuple[tuple[float, float], ...]:
    """(tokens/s/user, tokens/s/GPU) points no other decode choice beats on both axes."""
    ok_p = [p for p in prefills if p.ttft_ms <= w.ttft_ms] or list(prefills)
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
    step = latency.decode_step_ms(w.model, w.system, tp, batch, w.decode_context) * DECODE_LATENCY_CORRECTION
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

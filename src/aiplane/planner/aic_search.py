"""Workers as AIConfigurator's CLI sizes them: every layout it searches, each timed by its static runs.

AIC's disaggregated search (``aiconfigurator`` 0.12, sdk/sweep.py) rates a prefill worker by one
context run at batch 1 and a decode worker by a generation run per batch, for every parallel layout
its task enumerates: tensor parallelism for dense models; for mixture-of-experts models also attention
data parallelism and the MoE layers' tensor and expert parallelism (sdk/task_v2.py
``build_disagg_parallel_lists``, the "fused" lists; its multi-node wide-EP ladder is not searched
here). The rows here are the numbers its frame holds, so :mod:`aiplane.planner.search` picks among
the same candidates. The runs are memoised per process: a controller plans from them again for free.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiplane.planner.search import (
    BATCH_GRID,
    DECODE_LATENCY_CORRECTION,
    PREFILL_LATENCY_CORRECTION,
    PREFILL_QUEUE_FACTOR,
    TPOT_SWEEP,
    DecodeWorker,
    Layout,
    PrefillWorker,
    Workload,
)
from aiplane.planner.types import EnginePlan, Plan, PlannerError

#: Worker sizes (GPUs) AIC searches by default: dense models up to one 8-GPU node (16 on GB200/GB300's
#: NVL domains), mixture-of-experts models up to 16 (task_v2 ``build_disagg_parallel_lists``).
DENSE_SIZES = (1, 2, 4, 8)
WIDE_DENSE_SIZES = (1, 2, 4, 8, 16)
MOE_SIZES = (1, 2, 4, 8, 16)
_WIDE_DENSE_SYSTEMS = ("gb200", "gb300")

#: aiconfigurator-core's release (aic.AIC_VERSION): the cache is per release, its data changes.
AIC_RELEASE = "0.12.0"
_MEMO: dict[str, Any] = {}
MISSING = object()


#: The modules that ask AIC and shape what is kept of its answers (its runs, their grids, the large-EP
#: pricing, the search's corrections): a change to any may change an answer.
_ASKING_CODE = ("aic.py", "aic_search.py", "aic_moe_comm.py", "search.py")


@functools.cache
def _code_digest() -> str | None:
    """A digest of :data:`_ASKING_CODE` (None when unreadable: then nothing is kept on disk)."""
    digest = hashlib.sha256()
    try:
        for name in _ASKING_CODE:
            digest.update(Path(__file__).with_name(name).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()[:12]


def cache_dir() -> Path | None:
    """Where AIC's answers are kept between processes: ``$AIPLANE_CACHE_DIR`` (``off``: nowhere),
    else ``$XDG_CACHE_HOME/aiplane``, else ``~/.cache/aiplane``; per aiconfigurator-core release and
    per digest of the code that asks it, so answers kept by another aiplane are never read back."""
    configured = os.environ.get("AIPLANE_CACHE_DIR")
    code = _code_digest()
    if configured == "off" or code is None:
        return None
    root = (
        Path(configured) if configured else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    )
    return (root if configured else root / "aiplane") / f"aic-{AIC_RELEASE}-{code}"


def recall(key: tuple[Any, ...]) -> Any:
    """An answer AIC gave before, in this process or (its runs are deterministic) an earlier one;
    ``MISSING`` when never asked."""
    text = json.dumps(key, default=str)
    found = _MEMO.get(text, MISSING)
    if found is MISSING and (where := cache_dir()) is not None:
        path = where / (hashlib.sha256(text.encode()).hexdigest() + ".json")
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return MISSING
        if stored.get("key") == text:
            found = _MEMO[text] = stored["value"]
    return found


def remember(key: tuple[Any, ...], value: Any) -> Any:
    """Keep ``value`` in memory and, where the cache directory is writable, on disk (else only in
    memory: a read-only root filesystem is no error)."""
    text = json.dumps(key, default=str)
    _MEMO[text] = value
    where = cache_dir()
    if where is not None:
        try:
            where.mkdir(parents=True, exist_ok=True)
            path = where / (hashlib.sha256(text.encode()).hexdigest() + ".json")
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": text, "value": value}), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass
    return value


def layouts(
    *, moe: bool, backend: str, aic_system: str, budget: int | None, lo: int = 1, hi: int | None = None
) -> list[Layout]:
    """The layouts AIC enumerates for one role, in its order (TP outer, then DP, MoE TP, MoE EP),
    within the GPU budget and the [lo, hi] worker sizes asked for."""
    sizes = MOE_SIZES if moe else (WIDE_DENSE_SIZES if aic_system in _WIDE_DENSE_SYSTEMS else DENSE_SIZES)
    gpus = [g for g in sizes if lo <= g and (hi is None or g <= hi) and (budget is None or g <= budget)]
    if not gpus:
        return []
    if not moe:
        return [Layout(tp) for tp in sizes if tp in gpus]
    # AIC's enumeration (aiconfigurator_core sdk/utils.py ``enumerate_parallel_config``): TP, DP, MoE
    # TP, MoE EP in turn; the worker's GPUs (tp x dp) within the sizes, tp x dp == moe_tp x moe_ep;
    # TensorRT-LLM has no attention TP with attention DP, vLLM no MoE TP together with EP.
    out = []
    for tp in sizes:
        for dp in sizes:
            for moe_tp in sizes:
                for moe_ep in sizes:
                    if tp * dp not in gpus or tp * dp != moe_tp * moe_ep:
                        continue
                    if backend == "trtllm" and dp > 1 and tp > 1:
                        continue
                    if backend == "vllm" and moe_tp > 1 and moe_ep > 1:
                        continue
                    out.append(Layout(tp, dp, moe_tp, moe_ep))
    return out


def _summary_row(summary: Any, fields: tuple[str, ...]) -> dict[str, float]:
    """The ``fields`` of a static run's summary row, rounded to 3 decimals as AIC's frame rounds them.

    AIC builds that one-row pandas frame lazily from a deferred row; read the row itself (numpy's
    rounding, which the frame's ``round(3)`` uses): building 100-300 frames was most of a cold plan.
    """
    deferred = getattr(summary, "_deferred_row", None)
    if deferred is None:
        row = summary.get_summary_df().to_dict("records")[0]
        return {f: float(row[f]) for f in fields}
    data, columns = deferred
    values = dict(zip(columns, data[0], strict=False))
    return {f: float(_np().round(float(values[f]), 3)) for f in fields}


def _np() -> Any:
    """numpy (comes with aiconfigurator-core), imported only once AIC runs."""
    return importlib.import_module("numpy")


def prefill_workers(session: Any, w: Workload, found: Sequence[Layout]) -> list[PrefillWorker]:
    """One context run per layout at batch 1 (AIC's prefill candidates), those that fit in memory.

    A layout AIC cannot model (its quantised MoE needs whole 128-wide blocks per MoE TP rank, say) is
    skipped, as its sweep skips it; only when every layout fails is its error the answer.
    """
    out = []
    failure: PlannerError | None = None
    for par in found:
        key = ("prefill", *session.key(w.model, w.system), par.label, w.isl, w.osl)
        row = recall(key)
        if row is MISSING:
            try:
                summary = session.run(
                    w.model, w.system, par, "static_ctx", 1, w.isl, w.osl, PREFILL_LATENCY_CORRECTION
                )
            except PlannerError as err:
                failure = failure or err
                continue
            fits = not (summary.check_oom() or summary.check_kv_cache_oom())
            row = remember(key, _summary_row(summary, ("ttft", "seq/s")) if fits else None)
        if row is None:
            continue
        ttft = float(row["ttft"])
        out.append(PrefillWorker(par.tp, ttft, ttft * PREFILL_QUEUE_FACTOR, float(row["seq/s"]), par))
    if not out and failure is not None:
        raise failure
    return out


def decode_workers(session: Any, w: Workload, found: Sequence[Layout]) -> list[DecodeWorker]:
    """Generation runs per layout over AIC's batch schedule, up to the first that does not fit."""
    out = []
    for par in found:
        key = ("decode", *session.key(w.model, w.system), par.label, w.isl, w.osl)
        rows = recall(key)
        if rows is MISSING:
            rows = []
            for batch in BATCH_GRID:
                try:
                    summary = session.run(
                        w.model, w.system, par, "static_gen", batch, w.isl, w.osl, DECODE_LATENCY_CORRECTION
                    )
                except PlannerError:
                    break  # a layout AIC cannot model: skipped, as its sweep does
                if summary.check_oom() or summary.check_kv_cache_oom():
                    break  # memory grows with the batch: no larger one fits either
                rows.append((batch, _summary_row(summary, ("tpot", "seq/s"))))
            remember(key, rows)
        for batch, row in rows:
            out.append(DecodeWorker(par.tp, batch, float(row["tpot"]), float(row["seq/s"]), par))
    return out


#: AIC's aggregated batch schedule (sdk/sweep.py ``_DEFAULT_AGG_BATCH_SCHEDULE``), up to its default
#: maximum batch of 512.
AGG_BATCHES: tuple[int, ...] = (
    *range(1, 16),
    *range(16, 32, 4),
    *range(32, 64, 8),
    *range(64, 256, 16),
    *range(256, 512, 32),
    512,
)
#: Rows AIC keeps per layout and swept TPOT target (``top_k``).
AGG_TOP_K = 10


def agg_ctx_tokens(isl: int) -> list[int]:
    """AIC's context-token budgets per step, without chunked prefill (``_agg_ctx_tokens_list``,
    stride 512): steps of ISL up to 8192 tokens, then coarser, up to max(8192, 2 x ISL)."""
    top = max(8192, 2 * isl)
    stride = max(isl, 512)
    large = -(-max(1024, 512, top // 8) // isl) * isl
    out: list[int] = []
    tokens = 0
    while True:
        tokens += stride if tokens < 8192 else large
        if tokens > top:
            break
        out.append(tokens)
    out += [v for v in (isl, 2 * isl) if v not in out]
    return sorted(out)


def _agg_points(session: Any, w: Workload, par: Layout) -> list[dict[str, Any]]:
    """Every (batch, context tokens) point AIC's aggregated sweep times for one layout, those that
    fit; its balance guards and its skipping of equivalent generation slices kept."""
    key = ("agg", *session.key(w.model, w.system), par.label, w.isl, w.osl)
    cached = recall(key)
    if cached is not MISSING:
        return list(cached)
    found: list[dict[str, Any]] = []
    capped: list[float] = []
    for batch in AGG_BATCHES:
        for ctx in agg_ctx_tokens(w.isl):
            prefills = -(-ctx // w.isl)
            if batch - prefills < 0 or (batch > 1 and batch - prefills < 1):
                break
            balance = w.isl * batch / ctx / w.osl
            if balance > 1:
                gen = batch // balance
                if gen > 1 and gen in capped:
                    continue
                capped.append(gen)
            try:
                summary = session.run_agg(w.model, w.system, par, batch, w.isl, w.osl, ctx)
            except PlannerError:
                return list(remember(key, []))  # a layout AIC cannot model: skipped
            if summary.check_oom() or summary.check_kv_cache_oom():
                break  # more context tokens only need more memory
            row = summary.get_result_dict()
            if row:
                found.append({k: round(float(row[k]), 3) for k in _AGG_FIELDS})
    return list(remember(key, found))


_AGG_FIELDS = ("ttft", "tpot", "seq/s", "tokens/s/gpu", "tokens/s/user", "bs")


def agg_plan(session: Any, w: Workload, found: Sequence[Layout]) -> Plan | None:
    """AIC's aggregated pick: over its TPOT sweep, each layout's 10 fastest points within the TTFT
    target and the swept TPOT; of those within the ITL target, the best throughput per GPU of the
    budget (per layout first, as its picker groups). When none is within the ITL target, its best
    effort: per layout the best throughput, and of those the lowest ITL. None when no point meets
    the TTFT target at all (AIC answers nothing then)."""
    budget = w.total_gpus
    rows: list[tuple[Layout, dict[str, Any]]] = []
    for par in found:
        points = [p for p in _agg_points(session, w, par) if p["ttft"] <= w.ttft_ms]
        kept: dict[int, dict[str, Any]] = {}
        for target in TPOT_SWEEP:
            within = sorted((p for p in points if p["tpot"] <= target), key=lambda p: -p["seq/s"])
            kept.update((id(p), p) for p in within[:AGG_TOP_K])
        rows += [(par, p) for p in kept.values()]
    if not rows:
        return None

    def value(row: tuple[Layout, dict[str, Any]]) -> float:
        par, p = row
        per_gpu = float(p["tokens/s/gpu"])
        return per_gpu if budget is None else per_gpu * (budget // par.gpus) * par.gpus / budget

    meeting = [r for r in rows if r[1]["tpot"] <= w.itl_ms]
    per_layout: dict[str, tuple[Layout, dict[str, Any]]] = {}
    for r in meeting or rows:
        kept_row = per_layout.get(r[0].label)
        if kept_row is None or value(r) > value(kept_row):
            per_layout[r[0].label] = r
    best_rows = [per_layout[label] for label in sorted(per_layout)]
    if meeting:
        par, p = max(best_rows, key=lambda r: (value(r), -r[1]["tpot"]))
    else:
        par, p = min(best_rows, key=lambda r: r[1]["tpot"])
    replicas = 1 if budget is None else max(1, budget // par.gpus)
    return Plan(
        tokens_per_second_per_gpu=float(p["tokens/s/gpu"]),
        tokens_per_second_per_user=float(p["tokens/s/user"]),
        ttft_ms=float(p["ttft"]),
        itl_ms=float(p["tpot"]),
        gpus=replicas * par.gpus,
        meets_sla=bool(meeting),
        agg=EnginePlan(
            tp=par.tp, workers=replicas, batch=int(p["bs"]), dp=par.dp, moe_tp=par.moe_tp, moe_ep=par.moe_ep
        ),
    )

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

import importlib
from collections.abc import Sequence
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
from aiplane.planner.types import EnginePlan, Plan

#: Worker sizes (GPUs) AIC searches by default: dense models up to one 8-GPU node (16 on GB200/GB300's
#: NVL domains), mixture-of-experts models up to 16 (task_v2 ``build_disagg_parallel_lists``).
DENSE_SIZES = (1, 2, 4, 8)
WIDE_DENSE_SIZES = (1, 2, 4, 8, 16)
MOE_SIZES = (1, 2, 4, 8, 16)
_WIDE_DENSE_SYSTEMS = ("gb200", "gb300")

_MEMO: dict[tuple[Any, ...], Any] = {}


def layouts(
    *, moe: bool, backend: str, aic_system: str, budget: int | None, lo: int = 1, hi: int | None = None
) -> list[Layout]:
    """The layouts AIC enumerates for one role, in its order (TP outer, then DP, MoE TP, MoE EP),
    within the GPU budget and the [lo, hi] worker sizes asked for."""
    sizes = MOE_SIZES if moe else (WIDE_DENSE_SIZES if aic_system in _WIDE_DENSE_SYSTEMS else DENSE_SIZES)
    gpus = [g for g in sizes if lo <= g and (hi is None or g <= hi) and (budget is None or g <= budget)]
    if not gpus:
        return []
    utils = importlib.import_module("aiconfigurator_core.sdk.utils")
    common = importlib.import_module("aiconfigurator_core.sdk.common")
    found = utils.enumerate_parallel_config(
        num_gpu_list=gpus,
        tp_list=list(sizes),
        pp_list=[1],
        dp_list=list(sizes) if moe else [1],
        moe_tp_list=list(sizes) if moe else [1],
        moe_ep_list=list(sizes) if moe else [1],
        is_moe=moe,
        backend=common.BackendName[backend],
    )
    return [Layout(int(tp), int(dp), int(moe_tp), int(moe_ep)) for tp, _pp, dp, moe_tp, moe_ep, _cp in found]


def _summary_row(summary: Any) -> dict[str, Any]:
    frame = summary.get_summary_df()
    row: dict[str, Any] = frame.to_dict("records")[0]
    return row


def prefill_workers(session: Any, w: Workload, found: Sequence[Layout]) -> list[PrefillWorker]:
    """One context run per layout at batch 1 (AIC's prefill candidates), those that fit in memory."""
    out = []
    for par in found:
        key = ("prefill", session.key(w.model, w.system, par), w.isl, w.osl)
        row = _MEMO.get(key)
        if key not in _MEMO:
            summary = session.run(
                w.model, w.system, par, "static_ctx", 1, w.isl, w.osl, PREFILL_LATENCY_CORRECTION
            )
            row = None if summary.check_oom() or summary.check_kv_cache_oom() else _summary_row(summary)
            _MEMO[key] = row
        if row is None:
            continue
        ttft = float(row["ttft"])
        out.append(PrefillWorker(par.tp, ttft, ttft * PREFILL_QUEUE_FACTOR, float(row["seq/s"]), par))
    return out


def decode_workers(session: Any, w: Workload, found: Sequence[Layout]) -> list[DecodeWorker]:
    """Generation runs per layout over AIC's batch schedule, up to the first that does not fit."""
    out = []
    for par in found:
        key = ("decode", session.key(w.model, w.system, par), w.isl, w.osl)
        rows = _MEMO.get(key)
        if rows is None:
            rows = []
            for batch in BATCH_GRID:
                summary = session.run(
                    w.model, w.system, par, "static_gen", batch, w.isl, w.osl, DECODE_LATENCY_CORRECTION
                )
                if summary.check_oom() or summary.check_kv_cache_oom():
                    break  # memory grows with the batch: no larger one fits either
                rows.append((batch, _summary_row(summary)))
            _MEMO[key] = rows
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
    key = ("agg", session.key(w.model, w.system, par), w.isl, w.osl)
    found: list[dict[str, Any]] | None = _MEMO.get(key)
    if found is not None:
        return found
    found = []
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
            summary = session.run_agg(w.model, w.system, par, batch, w.isl, w.osl, ctx)
            if summary.check_oom() or summary.check_kv_cache_oom():
                break  # more context tokens only need more memory
            row = summary.get_result_dict()
            if row:
                found.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
    _MEMO[key] = found
    return found


def agg_plan(session: Any, w: Workload, found: Sequence[Layout]) -> Plan | None:
    """AIC's aggregated pick: over its TPOT sweep, each layout's 10 fastest points within the TTFT
    target and the swept TPOT; of those within the ITL target, the best throughput per GPU of the
    budget (per layout first, as its picker groups). None when no point meets the targets."""
    budget = w.total_gpus
    best: tuple[tuple[float, float], Layout, dict[str, Any]] | None = None
    for par in found:
        points = [p for p in _agg_points(session, w, par) if p["ttft"] <= w.ttft_ms]
        kept: dict[int, dict[str, Any]] = {}
        for target in TPOT_SWEEP:
            within = sorted((p for p in points if p["tpot"] <= target), key=lambda p: -p["seq/s"])
            kept.update((id(p), p) for p in within[:AGG_TOP_K])
        for p in kept.values():
            if p["tpot"] > w.itl_ms:
                continue
            gpus = par.gpus
            value = (
                p["tokens/s/gpu"] if budget is None else p["tokens/s/gpu"] * (budget // gpus) * gpus / budget
            )
            rank = (value, -p["tpot"])
            if best is None or rank > best[0]:
                best = (rank, par, p)
    if best is None:
        return None
    _, par, p = best
    replicas = 1 if budget is None else max(1, budget // par.gpus)
    return Plan(
        tokens_per_second_per_gpu=float(p["tokens/s/gpu"]),
        tokens_per_second_per_user=float(p["tokens/s/user"]),
        ttft_ms=float(p["ttft"]),
        itl_ms=float(p["tpot"]),
        gpus=replicas * par.gpus,
        meets_sla=True,
        agg=EnginePlan(
            tp=par.tp, workers=replicas, batch=int(p["bs"]), dp=par.dp, moe_tp=par.moe_tp, moe_ep=par.moe_ep
        ),
    )

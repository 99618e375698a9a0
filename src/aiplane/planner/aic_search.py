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
    DecodeWorker,
    Layout,
    PrefillWorker,
    Workload,
)

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

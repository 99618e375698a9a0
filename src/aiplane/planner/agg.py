"""The built-in model's aggregated (in-flight batching) plan, formulated as AIConfigurator's run_agg.

AIC (aiconfigurator-core 0.12, sdk/backends/base_backend.py ``run_agg``) rates one engine serving
both phases by a batch b and a context-token budget per step: the b prompts take
ceil(ISL x b / budget) "mixed" steps (the budget's prefill tokens plus some decoding sequences),
the rest of the OSL decode steps are decode only; TPOT is the steps' mean, TTFT a prompt's prefill
steps times a queueing factor, throughput b x (OSL - 1) over the steps' total. Its aggregated
search sweeps the same batches and budgets (:data:`aic_search.AGG_BATCHES`,
:func:`aic_search.agg_ctx_tokens`) and keeps the best throughput per GPU within both targets. Here
each step is the built-in roofline's (:func:`aiplane.planner.latency.mixed_ms`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from aiplane.planner.aic_search import AGG_BATCHES, agg_ctx_tokens
from aiplane.planner.latency import BuiltinLatency, layout_kv_capacity
from aiplane.planner.search import Layout, Workload, _engine
from aiplane.planner.types import Plan


def _queueing(backend: str, batch: int, steps_to_finish_ctx: float) -> float:
    """AIC's TTFT queueing factor for a batch arriving at once: vLLM's backend has its own, the
    others the default (sdk/backends ``_ttft_queuing_factor``)."""
    if backend == "vllm":
        return 1.0 if batch <= 1 else min(1.0 + math.log2(batch) / 8.0, 2.0)
    return min(2 + (steps_to_finish_ctx - 3) / 2 / 10, 4)


#: vLLM's per-request dispatch cost added to a prefill, ms per layer (AIC's vllm_backend).
VLLM_DISPATCH_MS_PER_LAYER = 0.8


def _point(w: Workload, lat: BuiltinLatency, par: Layout, batch: int, ctx: int) -> tuple[float, float, float]:
    """(TTFT, TPOT, requests/s per worker) of ``batch`` requests per attention rank at a budget of
    ``ctx`` context tokens a step, with each backend's scheduling policy as AIC models it (vLLM: one
    partial prefill per step, its dispatch cost and a Little's-law cap; SGLang and TensorRT-LLM: the
    first mixed steps' pipeline bubble left out of TPOT)."""
    p4 = (par.tp, par.dp, par.moe_tp, par.moe_ep)
    isl, osl = w.isl, w.osl
    steps_ctx = math.ceil(isl * batch / ctx)
    iterations = float(osl)  # the first token from the prefill, then OSL - 1 decode steps
    tpot_mix_steps: float
    if batch > 1:
        if w.backend == "vllm" or steps_ctx < iterations:
            gen_in_mix = max(1, batch - math.ceil(ctx / isl))
        else:
            gen_in_mix = max(1, int(batch // (steps_ctx / iterations)))
        mix_steps = steps_ctx
        gen_steps = 0.0 if steps_ctx >= iterations else iterations - steps_ctx
        tpot_mix_steps = (
            mix_steps if steps_ctx >= iterations or w.backend == "vllm" else max(1, mix_steps - 3)
        )
    else:
        gen_in_mix, mix_steps, gen_steps, tpot_mix_steps = 0, 1, max(iterations - 1.0, 0.0), 0
    prompts = ctx / isl
    context = w.decode_context
    mix = lat.layout_mixed_ms(w.model, w.system, p4, prompts, isl, gen_in_mix, context)
    gen = lat.layout_decode_ms(w.model, w.system, p4, batch, context) if gen_steps else 0.0
    prefill_step = lat.layout_mixed_ms(w.model, w.system, p4, prompts, isl, 0, context)
    dispatch = VLLM_DISPATCH_MS_PER_LAYER * w.model.layers if w.backend == "vllm" else 0.0
    ttft = (prefill_step * math.ceil(isl / ctx) + dispatch) * _queueing(w.backend, batch, steps_ctx)
    tpot = (mix * tpot_mix_steps + gen * gen_steps) / max(tpot_mix_steps + gen_steps, 1e-9)
    throughput = 1000.0 * batch / (mix * mix_steps + gen * gen_steps)  # requests/s per rank
    if w.backend == "vllm":  # Little's law: no more than the batch's requests finish per request latency
        throughput = min(throughput, 1000.0 * batch / (ttft + tpot * max(osl - 1, 0)))
    return ttft, tpot, throughput * par.dp


def search(w: Workload, lat: BuiltinLatency, layouts: Iterable[Layout]) -> Plan | None:
    """The best aggregated plan: within both targets the best throughput per GPU of the budget; when
    no point meets them, the one that misses least (the larger of TTFT and ITL over target)."""
    best: tuple[tuple[float, ...], Plan] | None = None
    budget = w.total_gpus
    for par in layouts:
        capacity = layout_kv_capacity(w.model, w.system, (par.tp, par.dp, par.moe_tp, par.moe_ep))
        if capacity < w.isl:
            continue
        fits = capacity // max(1, w.decode_context)
        for batch in (b for b in AGG_BATCHES if b <= fits):
            for ctx in agg_ctx_tokens(w.isl):
                prefills = -(-ctx // w.isl)
                if batch - prefills < 0 or (batch > 1 and batch - prefills < 1):
                    break
                ttft, tpot, rate = _point(w, lat, par, batch, ctx)
                per_gpu = rate * (w.osl - 1) / par.gpus
                workers = 1 if budget is None else max(1, budget // par.gpus)
                value = per_gpu if budget is None else per_gpu * workers * par.gpus / budget
                meets = ttft <= w.ttft_ms and tpot <= w.itl_ms
                overshoot = max(ttft / w.ttft_ms, tpot / w.itl_ms)
                key = (1.0, value, -tpot) if meets else (0.0, -overshoot, value)
                if best is None or key > best[0]:
                    plan = Plan(
                        tokens_per_second_per_gpu=per_gpu,
                        tokens_per_second_per_user=1000.0 / tpot,
                        ttft_ms=ttft,
                        itl_ms=tpot,
                        gpus=workers * par.gpus,
                        meets_sla=meets,
                        agg=_engine(par, workers, batch),
                    )
                    best = (key, plan)
    return None if best is None else best[1]

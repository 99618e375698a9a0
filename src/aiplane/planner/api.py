"""``plan()``: the one entry point ``aiplane plan`` and the DGDR controller call."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from aiplane.planner import agg as builtin_agg_search
from aiplane.planner import search
from aiplane.planner.latency import BuiltinLatency, kv_capacity_tokens
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import partition, resolve_system
from aiplane.planner.types import (
    Backend,
    LatencyModel,
    ModelSpec,
    Plan,
    PlannerError,
    PlanRequest,
    PlanResult,
    ProfilePoint,
    SystemSpec,
)

_BACKENDS = ("vllm", "sglang", "trtllm")


def load_latency_model(name: str, backend: str = "vllm") -> LatencyModel:
    """The latency model called ``name``; "aic" needs aiconfigurator-core (an optional install) and
    answers from ``backend``'s measured tables (vLLM, SGLang and TRT-LLM differ)."""
    if name == "builtin":
        return BuiltinLatency(cast(Backend, backend))
    if name != "aic":
        raise PlannerError(f"latencyModel: unknown latency model {name!r}; use builtin or aic")
    try:
        module = importlib.import_module("aiplane.planner.aic")
    except ModuleNotFoundError as err:
        if err.name == "aiplane.planner.aic":
            raise PlannerError("latencyModel: aic latency model not available in this build") from err
        raise PlannerError(f"latencyModel: aic latency model not available: {err}") from err
    except ImportError as err:
        raise PlannerError(f"latencyModel: aic latency model not available: {err}") from err
    # One per backend and process: its compiled models and sessions (per model, system and layout) and
    # the tables they read are kept, so a controller planning many requests loads each once.
    model: LatencyModel | None = _AIC_LATENCY.get(backend)
    if model is None:
        model = _AIC_LATENCY[backend] = module.AicLatency(backend)
    return model


_AIC_LATENCY: dict[str, LatencyModel] = {}


def aic_has_data(model: ModelSpec, system: SystemSpec, backend: str) -> str | None:
    """Why AIC's engine cannot plan (model, system, backend), or None when it has measured data."""
    try:
        module = importlib.import_module("aiplane.planner.aic")
        aic_sys = module.aic_system(system)
        module.aic_model(model)
    except PlannerError as err:
        return str(err)
    if not module.installed():
        return "aiconfigurator-core is not installed"
    cache = importlib.import_module("aiplane.planner.aic_search")
    key = ("data", aic_sys, backend)
    version = cache.recall(key)
    if version is cache.MISSING:
        try:
            version = module.literal_version(aic_sys, backend, None)
        except Exception:  # AIC's own lookup failure: no data
            version = None
        cache.remember(key, version)
    return None if version is not None else f"AIConfigurator has no {backend} data for {system.name}"


def _validate(r: PlanRequest) -> None:
    checks = (
        (r.backend in _BACKENDS, "backend", f"must be one of {', '.join(_BACKENDS)} (got {r.backend!r})"),
        (r.isl >= 1, "isl", f"must be at least 1 token (got {r.isl})"),
        (r.osl >= 2, "osl", f"must be at least 2 tokens (got {r.osl})"),
        (r.ttft_ms > 0, "ttft", f"must be positive milliseconds (got {r.ttft_ms})"),
        (r.itl_ms > 0, "itl", f"must be positive milliseconds (got {r.itl_ms})"),
        (r.min_gpus_per_engine >= 1, "minGpusPerEngine", f"must be at least 1 (got {r.min_gpus_per_engine})"),
        (
            r.max_gpus_per_engine is None or r.max_gpus_per_engine >= r.min_gpus_per_engine,
            "maxGpusPerEngine",
            f"must be at least minGpusPerEngine {r.min_gpus_per_engine} (got {r.max_gpus_per_engine})",
        ),
        (r.total_gpus is None or r.total_gpus >= 1, "totalGpus", f"must be at least 1 (got {r.total_gpus})"),
        (r.partitions_per_gpu >= 1, "partitionsPerGpu", f"must be at least 1 (got {r.partitions_per_gpu})"),
    )
    for ok, field, rule in checks:
        if not ok:
            raise PlannerError(f"{field}: {rule}")


#: Backends that run on each vendor: TensorRT-LLM is NVIDIA-only.
_VENDOR_BACKENDS = {"nvidia": ("vllm", "sglang", "trtllm"), "amd": ("vllm", "sglang")}


def _check_backend(backend: str, system: SystemSpec) -> None:
    allowed = _VENDOR_BACKENDS[system.vendor]
    if backend not in allowed:
        raise PlannerError(
            f"backend: {backend} does not run on {system.name} ({system.vendor.upper()} GPUs); "
            f"use one of {', '.join(allowed)}"
        )


def _no_engine_size(r: PlanRequest, per_node: int | None) -> str:
    """Why no power of two lies in [min, max] under the budget and the node (named by the first culprit)."""
    lo = r.min_gpus_per_engine
    if r.total_gpus is not None and r.total_gpus < lo:
        return f"totalGpus: {r.total_gpus} is fewer than minGpusPerEngine {lo}"
    if per_node is not None and per_node < lo:
        return (
            f"minGpusPerEngine: {lo} exceeds the {per_node} GPUs of one node, the largest engine the "
            "builtin latency model sizes"
        )
    return (
        f"maxGpusPerEngine: no engine size between minGpusPerEngine {lo} and {r.max_gpus_per_engine} "
        "(and within totalGpus)"
    )


def _aic_workers(
    request: PlanRequest, w: search.Workload, lat: LatencyModel
) -> tuple[list[search.PrefillWorker], list[search.DecodeWorker], list[int], list[search.Layout]]:
    """AIC's candidate workers over every layout its CLI searches (MoE: also DP attention and EP)."""
    aic_search = importlib.import_module("aiplane.planner.aic_search")
    aic = importlib.import_module("aiplane.planner.aic")
    found = aic_search.layouts(
        moe=bool(w.model.num_experts),
        backend=request.backend,
        aic_system=aic.aic_system(w.system),
        budget=request.total_gpus,
        lo=request.min_gpus_per_engine,
        hi=request.max_gpus_per_engine,
    )
    if not found:
        raise PlannerError(_no_engine_size(request, None))
    prefills: list[search.PrefillWorker] = aic_search.prefill_workers(lat, w, found)
    decodes: list[search.DecodeWorker] = aic_search.decode_workers(lat, w, found)
    # The aggregated search and the profiles time tensor-parallel engines of the sizes that fit.
    fitting = {p.tp for p in prefills if p.par.dp == 1}
    tps = sorted({par.tp for par in found if par.dp == 1 and par.tp in fitting})
    return prefills, decodes, tps, found


def _fits_nowhere(request: PlanRequest, w: search.Workload, lat: LatencyModel) -> str:
    """Why no worker fits, naming the smallest GPU count that would hold one (weights and one prompt)."""
    budget = "" if request.total_gpus is None else f" within `totalGpus` {request.total_gpus}"
    for gpus in (1, 2, 4, 8, 16, 32, 64, 128):
        if kv_capacity_tokens(w.model, w.system, gpus) >= w.isl:
            break
    else:
        return f"model: {w.model.name} does not fit {w.system.name} GPUs at any engine size up to 128"
    unit = "partitions" if request.partitions_per_gpu > 1 else "GPUs"
    return (
        f"totalGpus: {w.model.name} with {w.isl}-token prompts fits no engine of {w.system.name}{budget} "
        f"({lat.name} latency model); the smallest engine that holds it has {gpus} {unit}, so at least "
        f"{gpus} {unit} (aggregated) or {2 * gpus} (disaggregated)"
    )


def plan(request: PlanRequest, latency: LatencyModel | None = None) -> PlanResult:
    """Size disaggregated (and aggregated) serving of ``request``; deterministic, no I/O.

    With ``partitions_per_gpu > 1`` every GPU count (engine sizes, budget) is in partitions of the
    partitioned system. Raises :class:`PlannerError` for bad input; an unmeetable SLA is not an error
    but a best-effort plan with ``meets_sla=False``.
    """
    _validate(request)
    model = resolve_model(request.model, request.model_config)
    system = partition(resolve_system(request.system), request.partitions_per_gpu)
    _check_backend(request.backend, system)
    name = request.latency_model
    if latency is None and name == "auto":
        # AIC's measured engine wherever it has data; the analytic model for the rest (AMD, models and
        # systems AIC does not list, partitioned GPUs).
        why_not = None if request.partitions_per_gpu == 1 else "partitioned GPUs"
        name = "aic" if (why_not or aic_has_data(model, system, request.backend)) is None else "builtin"
    lat = latency if latency is not None else load_latency_model(name, request.backend)
    w = search.Workload(
        model=model,
        system=system,
        backend=request.backend,
        isl=request.isl,
        osl=request.osl,
        ttft_ms=request.ttft_ms,
        itl_ms=request.itl_ms,
        total_gpus=request.total_gpus,
    )
    aic_agg: Plan | None = None
    builtin_agg: Plan | None = None
    if lat.name == "aic":
        prefills, decodes, tps, layouts = _aic_workers(request, w, lat)
        aic_agg = importlib.import_module("aiplane.planner.aic_search").agg_plan(lat, w, layouts)
    else:
        # The analytic model knows only intra-node links: engines stay within one node (another model
        # plugged in may span nodes).
        node = system.gpus_per_node if lat.name == "builtin" else None
        cap = node
        if request.total_gpus is not None:
            cap = request.total_gpus if cap is None else min(cap, request.total_gpus)
        hi = request.max_gpus_per_engine if request.max_gpus_per_engine is not None else system.gpus_per_node
        tps = search.tp_sizes(request.min_gpus_per_engine, hi, cap)
        if not tps:
            raise PlannerError(_no_engine_size(request, node))
        if model.num_experts and isinstance(lat, BuiltinLatency):
            # Mixture of experts: the layouts AIC searches (attention DP, MoE TP / EP) within a node.
            layouts = importlib.import_module("aiplane.planner.aic_search").layouts(
                moe=True, backend=request.backend, aic_system=system.name, budget=cap, lo=tps[0], hi=tps[-1]
            )
            layouts = [par for par in layouts if search.backend_runs(model, request.backend, par)]
            prefills, decodes = search.layout_workers(w, lat, layouts)
            builtin_agg = builtin_agg_search.search(w, lat, layouts)
        else:
            prefills = search.prefill_workers(w, lat, tps)
            decodes = search.decode_workers(w, lat, tps)
            if isinstance(lat, BuiltinLatency):
                builtin_agg = builtin_agg_search.search(w, lat, [search.Layout(tp) for tp in tps])
    found, meets = search.search_disagg(w, prefills, decodes)
    disagg = None if found is None else search.disagg_plan(found, w, meets)
    # AIC's own aggregated sweep when some point meets the SLA; else our closest (best-effort) plan.
    agg = aic_agg or builtin_agg or (search.search_agg(w, lat, tps) if tps else None)
    if disagg is None and agg is None:
        raise PlannerError(_fits_nowhere(request, w, lat))
    return PlanResult(
        model=model.name,
        system=system.name,
        backend=request.backend,
        latency_model=lat.name,
        disagg=disagg,
        agg=agg,
        total_gpus=request.total_gpus,
        frontier=search.frontier(w, prefills, decodes),
        prefill_profile=() if found is None else _profile(search.prefill_profile, w, lat, found.prefill.tp),
        decode_profile=(
            ()
            if found is None
            else _profile(search.decode_profile, w, lat, found.decode.tp, found.decode.batch)
        ),
    )


def _profile(build: Callable[..., tuple[ProfilePoint, ...]], *args: Any) -> tuple[ProfilePoint, ...]:
    """A profile at the chosen sizes, or none where the latency model cannot time that tensor-parallel
    engine (AIC lacks MoE data for some TP-only layouts its search never needed): the plan stands."""
    try:
        return build(*args)
    except PlannerError:
        return ()

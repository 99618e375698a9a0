"""``plan()``: the one entry point ``aiplane plan`` and the DGDR controller call."""

from __future__ import annotations

import importlib
from typing import cast

from aiplane.planner import search
from aiplane.planner.latency import BuiltinLatency
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import partition, resolve_system
from aiplane.planner.types import Backend, LatencyModel, PlannerError, PlanRequest, PlanResult

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
    model: LatencyModel = module.AicLatency(backend)
    return model


def _validate(r: PlanRequest) -> None:
    checks = (
        (r.backend in _BACKENDS, "backend", f"must be one of {', '.join(_BACKENDS)} (got {r.backend!r})"),
        (r.isl >= 1, "isl", f"must be at least 1 token (got {r.isl})"),
        (r.osl >= 2, "osl", f"must be at least 2 tokens (got {r.osl})"),
        (r.ttft_ms > 0, "ttft", f"must be positive milliseconds (got {r.ttft_ms})"),
        (r.itl_ms > 0, "itl", f"must be positive milliseconds (got {r.itl_ms})"),
        (r.min_gpus_per_engine >= 1, "minGpusPerEngine", f"must be at least 1 (got {r.min_gpus_per_engine})"),
        (
            r.max_gpus_per_engine >= r.min_gpus_per_engine,
            "maxGpusPerEngine",
            f"must be at least minGpusPerEngine {r.min_gpus_per_engine} (got {r.max_gpus_per_engine})",
        ),
        (r.total_gpus is None or r.total_gpus >= 1, "totalGpus", f"must be at least 1 (got {r.total_gpus})"),
        (r.partitions_per_gpu >= 1, "partitionsPerGpu", f"must be at least 1 (got {r.partitions_per_gpu})"),
    )
    for ok, field, rule in checks:
        if not ok:
            raise PlannerError(f"{field}: {rule}")


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
        f"maxGpusPerEngine: no power of two between minGpusPerEngine {lo} and {r.max_gpus_per_engine} "
        "(and within totalGpus)"
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
    lat = latency if latency is not None else load_latency_model(request.latency_model, request.backend)
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
    # The analytic model knows only intra-node links: engines stay within one node.
    cap = system.gpus_per_node if lat.name == "builtin" else None
    if request.total_gpus is not None:
        cap = request.total_gpus if cap is None else min(cap, request.total_gpus)
    tps = search.tp_sizes(request.min_gpus_per_engine, request.max_gpus_per_engine, cap)
    if not tps:
        raise PlannerError(_no_engine_size(request, system.gpus_per_node if lat.name == "builtin" else None))
    prefills = search.prefill_workers(w, lat, tps)
    decodes = search.decode_workers(w, lat, tps)
    found, meets = search.search_disagg(w, prefills, decodes)
    disagg = None if found is None else search.disagg_plan(found, w, meets)
    return PlanResult(
        model=model.name,
        system=system.name,
        backend=request.backend,
        latency_model=lat.name,
        disagg=disagg,
        agg=search.search_agg(w, lat, tps),
        frontier=search.frontier(w, prefills, decodes),
        prefill_profile=() if found is None else search.prefill_profile(w, lat, found.prefill.tp),
        decode_profile=(
            () if found is None else search.decode_profile(w, lat, found.decode.tp, found.decode.batch)
        ),
    )

"""Which MoE all-to-all AIConfigurator's CLI prices a layout with ("large EP"), from its own data.

AIC's CLI (``aiconfigurator`` 0.12, sdk/task_v2.py ``_large_ep_coverage`` and
sdk/moe_comm_resolver.py) does not time every expert-parallel layout with the fused MoE path: where
aiconfigurator-core's database has all-to-all rows (DeepEP, NVLink one/two-sided) and expert-compute
rows for the model's MoE shape at that EP size, it sets the layout's ``moe_comm_backend`` and its
engine prices the dispatch and combine from them. Only pure EP qualifies (MoE TP 1, EP > 1), and
TensorRT-LLM only with attention data parallelism; an EP wider than one node without such data is
not a layout AIC can run. This module reproduces that choice with aiconfigurator-core's own probes
(the CLI's selection code is not in the core package).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Phases whose coverage a role needs: a worker's weights are sized from its context ops, so every
#: role needs the context phase covered; a decode or aggregated worker also the generation phase.
PREFILL_PHASES = ("context",)
DECODE_PHASES = ("context", "generation")

_COVERAGE: dict[tuple[str, str, str, str | None], dict[str, dict[str, set[int]]]] = {}


def _module(name: str) -> Any:
    return importlib.import_module(f"aiconfigurator_core.sdk.{name}")


def coverage(
    model_id: str, backend: str, database: Any, gemm_quant_mode: str | None
) -> dict[str, dict[str, set[int]]]:
    """``{phase: {comm backend: {EP sizes}}}`` the database covers for the model's MoE shape."""
    spec = getattr(database, "system_spec", {}) or {}
    key = (model_id, backend, str(getattr(database, "system", "")), gemm_quant_mode)
    found = _COVERAGE.get(key)
    if found is not None:
        return found
    helpers, blocks = _module("models.helpers"), _module("models.blocks.moe")
    comm = _module("operations.moe_comm")
    info = helpers._get_model_info(model_id)
    found = {}
    a2a_probe = getattr(database, "moe_a2a_coverage", None)
    gpus_per_node = int(spec.get("node", {}).get("num_gpus_per_node", 0) or 0)
    family = helpers._architecture_to_model_family(info["architecture"])
    if a2a_probe is not None and gpus_per_node and family in blocks.LARGE_EP_READY_FAMILIES:
        shape = blocks.MoEBlockShape.from_model_info(info)
        quant = _moe_quant_mode(info, backend, gemm_quant_mode)
        sm = spec.get("gpu", {}).get("sm_version")
        for phase in ("context", "generation"):
            a2a = a2a_probe(shape.hidden_size, shape.topk, shape.num_experts, quant, phase)
            per_backend: dict[str, set[int]] = {}
            compute: set[int] | None = None
            for name, backend_spec in comm.MOE_A2A_BACKENDS.items():
                if backend not in backend_spec.frameworks or phase not in backend_spec.inference_phases:
                    continue
                if not a2a.get(name):
                    # No all-to-all rows: _a2a_covers is False for every EP, so the expert-compute
                    # tables (a Python load of AIC's MoE tables, ~2 s) are not read for it.
                    continue
                if compute is None:
                    compute = _compute_eps(database, backend, shape, quant, phase)
                eps = {
                    ep
                    for ep in compute
                    if _a2a_covers(
                        a2a.get(name, set()),
                        backend,
                        name,
                        ep,
                        comm.nodes_for(ep, gpus_per_node),
                        gpus_per_node,
                    )
                    and backend_spec.feasible(
                        topk=shape.topk,
                        num_experts=shape.num_experts,
                        moe_tp_size=1,
                        moe_ep_size=ep,
                        sm_version=None if sm is None else int(sm),
                    )
                }
                if eps:
                    per_backend[name] = eps
            if per_backend:
                found[phase] = per_backend
    _COVERAGE[key] = found
    return found


def _moe_quant_mode(info: dict[str, Any], backend: str, gemm_quant_mode: str | None) -> Any:
    """The MoE quantisation AIC infers for the checkpoint (its CLI's role ``moe_quant_mode``)."""
    config = _module("config_builders").build_model_config(
        tp_size=1,
        pp_size=1,
        attention_dp_size=1,
        moe_tp_size=1,
        moe_ep_size=1,
        gemm_quant_mode=gemm_quant_mode,
    )
    _module("models.helpers")._apply_model_quant_defaults(
        config, info.get("raw_config", {}), info["architecture"], backend
    )
    return config.moe_quant_mode


def _compute_eps(database: Any, backend: str, shape: Any, quant: Any, phase: str) -> set[int]:
    """EP sizes the expert-compute tables cover (the wide-EP table; vLLM/TRT-LLM also the regular one)."""
    args = (shape.hidden_size, shape.moe_inter_size, shape.topk, shape.num_experts, quant)
    probe = getattr(database, "moe_expert_compute_coverage", None)
    covered = set(probe(*args, phase)) if probe is not None else set()
    legacy = getattr(database, "legacy_moe_compute_coverage", None)
    if backend in {"vllm", "trtllm"} and legacy is not None:
        covered.update(legacy(*args))
    return covered


_DEEPEP_NODE1 = frozenset(("deepep_ht", "deepep_ll", "trtllm_deepep_ht", "trtllm_deepep_ll"))


def _a2a_covers(
    pairs: set[tuple[int, int]], framework: str, name: str, ep: int, nodes: int, per_node: int
) -> bool:
    """AIC's rule: an exact (EP, nodes) row, or DeepEP's one-node row standing in for more nodes."""
    if (ep, nodes) in pairs:
        return True
    if name not in _DEEPEP_NODE1 or nodes <= 1:
        return False
    if framework == "sglang":
        return (8, 1) in pairs
    return framework in {"vllm", "trtllm"} and (per_node, 1) in pairs


def resolve(
    found: dict[str, dict[str, set[int]]],
    backend: str,
    dp: int,
    moe_tp: int,
    moe_ep: int,
    phases: tuple[str, ...],
) -> dict[str, str] | None:
    """The layout's per-phase comm backend (the first that covers its EP), or None: the fused path."""
    if moe_tp != 1 or moe_ep <= 1 or (backend == "trtllm" and dp <= 1) or not found:
        return None
    resolved: dict[str, str] = {}
    for phase, per_backend in found.items():
        for name, eps in per_backend.items():
            if moe_ep in eps:
                resolved[phase] = name
                break
    return resolved if set(phases) <= set(resolved) else None


def context_fmha_bf16(
    model_id: str, backend: str, database: Any, gemm_quant_mode: str | None, phases: tuple[str, ...]
) -> bool:
    """Whether AIC's CLI times a role's context attention at BF16 although the checkpoint's is FP8
    (task_v2 ``_apply_fmha_data_fallback``): one choice per role, from the context-attention tables
    its layouts can reach (the fused one; the large-EP one too when some expert-parallel layout of the
    role is priced with all-to-all data, :func:`resolve`), FP8 kept unless BF16 has data in strictly
    more of them. A layout whose table then lacks the chosen mode is no layout, as in the CLI's sweep.
    ``phases`` names the role (:data:`PREFILL_PHASES`, :data:`DECODE_PHASES`; a decode reads no
    context table, so it is asked as the aggregated role it shares sessions with)."""
    helpers = _module("models.helpers")
    info = helpers._get_model_info(model_id)
    inferred = helpers._infer_quant_modes_from_raw_config(
        info.get("raw_config", {}), info.get("architecture")
    )
    fp8 = _module("common").FMHAQuantMode.fp8
    if inferred.get("fmha_quant_mode") != fp8:
        return False
    family = helpers._architecture_to_model_family(info["architecture"])
    found = coverage(model_id, backend, database, gemm_quant_mode)
    eps = {ep for per_backend in found.values() for covered in per_backend.values() for ep in covered}
    large = any(resolve(found, backend, ep, 1, ep, phases) is not None for ep in eps)
    # Shipped per (system, backend, version): asking AIC loads its attention tables (seconds).
    supported = importlib.import_module("aiplane.planner.aic_facts").fmha_modes
    kv_mode = inferred.get("kvcache_quant_mode")
    modes = [
        supported(database, helpers.attention_op_keys(family, backend, regime)[0], kv_mode)
        for regime in sorted({False, large})
    ]
    informative = [m for m in modes if m]
    bf16_hits = sum("bfloat16" in m for m in informative)
    return bf16_hits > sum(fp8.name in m for m in informative)

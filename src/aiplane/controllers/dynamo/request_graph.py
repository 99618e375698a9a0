"""The DGD a DGDR generates: a base graph with the plan written into it (pure, no I/O).

Upstream's profiler (``generate_dgd_config_with_planner``) patches the prefill and decode workers'
tensor-parallel size into the base config and adds a ``Planner`` service; it leaves the replica
counts as the base config had them and lets the SLA planner scale at run time. We also write the
plan's worker counts (the plan was sized for the cluster's GPU budget, so starting there is better
than starting at the base's 1 + 1), and the GPU resources follow the TP (per node, with
``multinode.nodeCount`` when an engine spans nodes, as upstream's profiler does). Workers are found
by ``subComponentType`` (prefill / decode), falling back to upstream's default service names.

The function is idempotent: generating from a generated graph with the same plan gives it back
(tests/unit/dynamo_request: a hypothesis property).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiplane.controllers.dynamo.naming import COMPONENT_FRONTEND, COMPONENT_PLANNER, default_dynamo_namespace
from aiplane.controllers.dynamo.podtemplate import GPU_RESOURCE
from aiplane.controllers.dynamo.request_templates import DEFAULT_SERVICE_NAMES, TP_FLAGS

__all__ = [
    "LABEL_DGDR_NAME",
    "LABEL_DGDR_NAMESPACE",
    "LABEL_MANAGED_BY",
    "MANAGED_BY",
    "PLANNER_SERVICE",
    "PROFILE_MOUNT",
    "GraphPlan",
    "generate_graph",
    "patch_tp",
    "worker_services",
]

Obj = dict[str, Any]

LABEL_DGDR_NAME: Final = "dgdr.nvidia.com/name"
LABEL_DGDR_NAMESPACE: Final = "dgdr.nvidia.com/namespace"
LABEL_MANAGED_BY: Final = "nvidia.com/managed-by"
MANAGED_BY: Final = "dynamo-operator"
PLANNER_SERVICE: Final = "Planner"
#: Where the Planner service finds the profile data (the output ConfigMap, mounted).
PROFILE_MOUNT: Final = "/data/profiling_results"
PROFILE_VOLUME: Final = "planner-profile-data"


@dataclass(frozen=True)
class GraphPlan:
    """What the generated graph takes from a plan and from the request."""

    backend: str
    prefill_tp: int
    prefill_workers: int
    decode_tp: int
    decode_workers: int
    ttft_ms: int
    itl_ms: int
    #: The extended resource the workers request (``nvidia.com/gpu``, ``amd.com/gpu``).
    gpu_resource: str = GPU_RESOURCE
    #: GPUs (or partitions) one node offers: engines larger than this span nodes.
    gpus_per_node: int = 8
    #: The ConfigMap holding the profile data the Planner service mounts (None: no Planner data).
    profile_configmap: str | None = None
    #: Mixture-of-experts layouts: attention data-parallel ranks and expert parallelism per worker
    #: (1: tensor parallelism only). A worker then has tp x dp GPUs.
    prefill_dp: int = 1
    prefill_ep: int = 1
    decode_dp: int = 1
    decode_ep: int = 1

    @property
    def prefill_gpus(self) -> int:
        return self.prefill_tp * self.prefill_dp

    @property
    def decode_gpus(self) -> int:
        return self.decode_tp * self.decode_dp


def worker_services(services: Mapping[str, Any], backend: str) -> tuple[str, str]:
    """(prefill key, decode key): by ``subComponentType``, else upstream's default names."""
    found: dict[str, str] = {}
    for key, svc in services.items():
        role = svc.get("subComponentType") if isinstance(svc, Mapping) else None
        if role in ("prefill", "decode") and role not in found:
            found[str(role)] = key
    defaults = DEFAULT_SERVICE_NAMES.get(backend, ("", ""))
    for role, default in zip(("prefill", "decode"), defaults, strict=True):
        if role not in found and default in services:
            found[role] = default
    missing = [role for role in ("prefill", "decode") if role not in found]
    if missing:
        raise ValueError(
            f"spec.services: no {' or '.join(missing)} worker (a service with subComponentType "
            f"{'/'.join(missing)}, or one named {' / '.join(defaults)})"
        )
    return found["prefill"], found["decode"]


def patch_tp(args: list[str], backend: str, tp: int) -> list[str]:
    """``args`` with the backend's tensor-parallel flag set to ``tp`` (added when absent).

    Handles both a shell line (``"python3 -m dynamo.vllm ... --tensor-parallel-size 2"``) and
    separate tokens (``["--tensor-parallel-size", "2"]``).
    """
    return patch_flag(args, backend, TP_FLAGS[backend], tp)


#: Each backend's flags for attention data parallelism and expert parallelism (its launcher's
#: arguments: vLLM's ``--data-parallel-size`` / ``--enable-expert-parallel``, SGLang's
#: ``--dp-size`` / ``--enable-dp-attention`` / ``--ep-size``, TensorRT-LLM's Dynamo launcher's
#: ``--enable-attention-dp`` / ``--expert-parallel-size``).
DP_FLAGS: Final = {"vllm": "--data-parallel-size", "sglang": "--dp-size"}
DP_SWITCHES: Final = {"sglang": "--enable-dp-attention", "trtllm": "--enable-attention-dp"}
EP_FLAGS: Final = {"sglang": "--ep-size", "trtllm": "--expert-parallel-size"}
EP_SWITCHES: Final = {"vllm": "--enable-expert-parallel"}


def patch_layout(args: list[str], backend: str, tp: int, dp: int, ep: int) -> list[str]:
    """``args`` for a worker of ``tp`` x ``dp`` GPUs with ``ep``-way experts. vLLM counts TP per
    data-parallel rank; SGLang and TensorRT-LLM count the worker's GPUs as its TP size."""
    out = patch_tp(args, backend, tp if backend == "vllm" or dp == 1 else tp * dp)
    if dp > 1:
        if backend in DP_FLAGS:
            out = patch_flag(out, backend, (DP_FLAGS[backend],), dp)
        if backend in DP_SWITCHES:
            out = _switch(out, backend, DP_SWITCHES[backend])
    if ep > 1:
        if backend in EP_FLAGS:
            out = patch_flag(out, backend, (EP_FLAGS[backend],), ep)
        if backend in EP_SWITCHES:
            out = _switch(out, backend, EP_SWITCHES[backend])
    return out


def _switch(args: list[str], backend: str, flag: str) -> list[str]:
    """``args`` with the boolean ``flag`` present (appended to the launcher's line when absent)."""
    if any(flag in token.split() for token in args):
        return list(args)
    out = list(args)
    for i, token in enumerate(out):
        if f"dynamo.{backend}" in token:
            out[i] = f"{token} {flag}"
            return out
    return [*out, flag]


def patch_flag(args: list[str], backend: str, flags: tuple[str, ...], value: int) -> list[str]:
    """``args`` with the first of ``flags`` set to ``value`` (added when absent)."""
    tp = value
    out = list(args)
    for i, token in enumerate(out):
        if token in flags and i + 1 < len(out):
            out[i + 1] = str(tp)
            return out
    pattern = re.compile(r"(?<!\S)(" + "|".join(re.escape(f) for f in flags) + r")(\s+|=)\d+")
    for i, token in enumerate(out):
        if pattern.search(token):
            out[i] = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{tp}", token)
            return out
    for i, token in enumerate(out):
        if f"dynamo.{backend}" in token:
            out[i] = f"{token} {flags[0]} {tp}"
            return out
    return [*out, flags[0], str(tp)]


def _set_engine(svc: Obj, plan: GraphPlan, tp: int, workers: int, dp: int = 1, ep: int = 1) -> None:
    main = svc.setdefault("extraPodSpec", {}).setdefault("mainContainer", {})
    main["args"] = patch_layout(list(main.get("args") or []), plan.backend, tp, dp, ep)
    gpus = tp * dp
    nodes = max(1, math.ceil(gpus / plan.gpus_per_node))
    per_node = gpus if nodes == 1 else plan.gpus_per_node
    resources = svc.setdefault("resources", {})
    for side in ("requests", "limits"):
        item = resources.get(side) or {}
        item["gpu"] = str(per_node)
        # Always explicit: the plan was made for this system's GPUs, and an absent gpuType would let a
        # platform default (KaiwoConfig's defaultGpuResourceKey) move the graph onto other GPUs.
        item["gpuType"] = plan.gpu_resource
        resources[side] = item
    if nodes > 1:
        svc["multinode"] = {"nodeCount": nodes}
    else:
        svc.pop("multinode", None)
    svc["replicas"] = workers


def _frontend(services: Mapping[str, Any]) -> Mapping[str, Any]:
    for svc in services.values():
        if isinstance(svc, Mapping) and svc.get("componentType") == COMPONENT_FRONTEND:
            return svc
    return {}


def _planner(services: Mapping[str, Any], plan: GraphPlan, dgd_name: str) -> Obj:
    """Upstream's added Planner service: image copied from the Frontend, ``planner_sla``."""
    frontend = _frontend(services)
    main = (frontend.get("extraPodSpec") or {}).get("mainContainer") or {}
    dyn_ns = frontend.get("dynamoNamespace") or default_dynamo_namespace(dgd_name)
    args = [
        f"--namespace={dyn_ns}",
        "--environment=kubernetes",
        f"--backend={plan.backend}",
        f"--prefill-engine-num-gpu={plan.prefill_gpus}",
        f"--decode-engine-num-gpu={plan.decode_gpus}",
        f"--ttft={plan.ttft_ms}",
        f"--itl={plan.itl_ms}",
        f"--profile-results-dir={PROFILE_MOUNT}",
    ]
    container: Obj = {"command": ["python3", "-m", "planner_sla"], "args": args}
    if main.get("image"):
        container["image"] = main["image"]
    planner: Obj = {
        "componentType": COMPONENT_PLANNER,
        "replicas": 1,
        "extraPodSpec": {"mainContainer": container},
    }
    if frontend.get("dynamoNamespace"):
        planner["dynamoNamespace"] = frontend["dynamoNamespace"]
    if plan.profile_configmap:
        container["volumeMounts"] = [{"name": PROFILE_VOLUME, "mountPath": PROFILE_MOUNT, "readOnly": True}]
        planner["extraPodSpec"]["volumes"] = [
            {"name": PROFILE_VOLUME, "configMap": {"name": plan.profile_configmap}}
        ]
    return planner


def generate_graph(base: Mapping[str, Any], plan: GraphPlan, name: str, namespace: str) -> Obj:
    """The DGD to deploy: ``base`` named ``name`` in ``namespace``, with the plan written in.

    Raises ValueError (naming the field) when the base has no prefill or decode worker.
    """
    graph = copy.deepcopy(dict(base))
    graph["apiVersion"] = "nvidia.com/v1alpha1"
    graph["kind"] = "DynamoGraphDeployment"
    meta = {k: v for k, v in (graph.get("metadata") or {}).items() if k in ("labels", "annotations")}
    graph["metadata"] = {"name": name, "namespace": namespace, **meta}
    graph.pop("status", None)
    spec = graph.setdefault("spec", {})
    spec["backendFramework"] = plan.backend
    services = spec.get("services")
    if not isinstance(services, dict) or not services:
        raise ValueError("spec.services: the base graph has no services")
    prefill, decode = worker_services(services, plan.backend)
    _set_engine(
        services[prefill], plan, plan.prefill_tp, plan.prefill_workers, plan.prefill_dp, plan.prefill_ep
    )
    _set_engine(services[decode], plan, plan.decode_tp, plan.decode_workers, plan.decode_dp, plan.decode_ep)
    services[PLANNER_SERVICE] = _planner(services, plan, name)
    return graph


def with_request_metadata(
    graph: Mapping[str, Any],
    dgdr_name: str,
    dgdr_namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """Upstream's labels on a DGD a DGDR creates (generated, then ours, then the overrides')."""
    out = copy.deepcopy(dict(graph))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {
        **(meta.get("labels") or {}),
        LABEL_DGDR_NAME: dgdr_name,
        LABEL_DGDR_NAMESPACE: dgdr_namespace,
        LABEL_MANAGED_BY: MANAGED_BY,
        **(labels or {}),
    }
    if annotations or meta.get("annotations"):
        meta["annotations"] = {**(meta.get("annotations") or {}), **(annotations or {})}
    return out

"""Node pools and the default ClusterQueue's quotas, decided from Node views alone (pure, no I/O).

Pools are discovered the way upstream Kaiwo does (GPU vendor/model/count from the node labeller's
labels, 90 % of CPU and memory capacity), so a pool's name — and its ResourceFlavor — stays the same
when a node is repartitioned. Quotas differ from upstream on purpose: they are the sum of the pool's
nodes' ``status.allocatable``, under the GPU resource names the nodes really advertise, so a CPX node
counts 64 ``amd.com/gpu`` (upstream counted the physical-count label, 8).

The cordon rule: a node cordoned by the partitioning controller (its ``cordoned-by`` annotation) stays
in its pool, and while any node of a pool is being partitioned the pool's quota never goes below what
the ClusterQueue already has (the device plugin restarting reports 0 GPUs for a moment); once the
rollout is over the computed value is applied as is, up or down. Nodes cordoned by anyone else are left
out, as upstream does (their capacity is not available).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity, parse_resource_list
from aiplane.controllers.partitioning.vocabulary import (
    CONTROL_PLANE_LABELS,
    CORDONED_BY_ANNOTATION,
)

AMD_PRODUCT_LABEL: Final = "amd.com/gpu.product-name"
AMD_COUNT_LABEL: Final = "beta.amd.com/gpu.family.AI"
NVIDIA_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
NVIDIA_COUNT_LABEL: Final = "nvidia.com/gpu.count"
#: Resource name prefixes counted as GPU resources (any naming strategy: ``amd.com/gpu``, ``amd.com/cpx_nps4``).
GPU_PREFIXES: Final = ("amd.com/", "nvidia.com/")
#: Words upstream strips from a product name to get the model (``AMD_Instinct_MI300X_OAM`` → ``mi300x``).
_STRIP: Final = re.compile(r"instinct|radeon|oam|amd|nvidia|series|gpu|_")


@dataclass(frozen=True)
class NodeView:
    """What pool discovery and tainting read from a Node."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, Quantity]
    allocatable: Mapping[str, Quantity]
    unschedulable: bool = False
    partitioning: bool = False  # cordoned by the partitioning controller
    taints: tuple[Mapping[str, Any], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @property
    def control_plane(self) -> bool:
        return any(label in self.labels for label in CONTROL_PLANE_LABELS)


def node_view(node: Mapping[str, Any]) -> NodeView:
    """A :class:`NodeView` of a Node object; unparsable quantities count as absent."""
    status = objects.status(node)
    spec = objects.spec(node)
    annotations = objects.annotations(node)
    taints = spec.get("taints")
    return NodeView(
        name=objects.name(node),
        labels=objects.labels(node),
        capacity=_resources(status.get("capacity")),
        allocatable=_resources(status.get("allocatable")),
        unschedulable=spec.get("unschedulable") is True,
        partitioning=CORDONED_BY_ANNOTATION in annotations,
        taints=tuple(t for t in taints if isinstance(t, Mapping)) if isinstance(taints, list) else (),
        annotations=annotations,
        resource_version=objects.resource_version(node),
    )


def _resources(raw: Any) -> dict[str, Quantity]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Quantity] = {}
    for key, value in raw.items():
        found = _quantity(str(key), value) if isinstance(value, str) else _parse(str(key), value)
        if found is not None:
            out[str(key)] = found
    return out


@functools.lru_cache(maxsize=4096)
def _quantity(key: str, value: str) -> Quantity | None:
    """A fleet repeats the same few amounts on every Node, and each Node event builds a view
    (parsing them was a tenth of the KaiwoConfig's cost per event); quantities are immutable."""
    return _parse(key, value)


def _parse(key: str, value: Any) -> Quantity | None:
    try:
        return parse_resource_list({key: value})[key]
    except ValueError:
        return None


@dataclass(frozen=True)
class GpuInfo:
    vendor: str  # "amd", "nvidia" or "cpu"
    model: str  # "mi300x", … or "only"
    count: int  # physical GPUs (the labeller's count), 0 for CPU-only nodes


def _model(product: str) -> str:
    cleaned = _STRIP.sub("", product.lower())
    return re.sub(r"[^a-z0-9]+", "-", cleaned).strip("-") or "unknown"


def _count(text: str | None) -> int:
    try:
        return max(int(text or "0"), 0)
    except ValueError:
        return 0


def gpu_info(labels: Mapping[str, str]) -> GpuInfo:
    """The node's GPUs from the AMD node labeller's or NVIDIA GPU feature discovery's labels."""
    if AMD_PRODUCT_LABEL in labels and _count(labels.get(AMD_COUNT_LABEL)) > 0:
        return GpuInfo("amd", _model(labels[AMD_PRODUCT_LABEL]), _count(labels.get(AMD_COUNT_LABEL)))
    if NVIDIA_PRODUCT_LABEL in labels and _count(labels.get(NVIDIA_COUNT_LABEL)) > 0:
        return GpuInfo("nvidia", _model(labels[NVIDIA_PRODUCT_LABEL]), _count(labels.get(NVIDIA_COUNT_LABEL)))
    return GpuInfo("cpu", "only", 0)


def is_gpu_resource(name: str) -> bool:
    return name.startswith(GPU_PREFIXES)


def is_gpu_node(node: NodeView) -> bool:
    """A GPU node: the labeller counts GPUs on it, or it advertises a GPU resource."""
    return gpu_info(node.labels).count > 0 or any(
        is_gpu_resource(k) and q.sign() > 0 for k, q in node.capacity.items()
    )


def ninety_percent(q: Quantity | None, unit: int) -> int:
    if q is None:
        return 0
    return int((q.as_decimal() * Decimal("0.9") / unit).to_integral_value(rounding=ROUND_FLOOR))


def pool_name(node: NodeView) -> str:
    """``<vendor>-<model>-<N>gpu-<cpu>core-<mem>gi`` from 90 % of capacity, as upstream names flavors."""
    gpu = gpu_info(node.labels)
    cpu = ninety_percent(node.capacity.get("cpu"), 1)
    mem = ninety_percent(node.capacity.get("memory"), 1024**3)
    name = f"{gpu.vendor}-{gpu.model}-{gpu.count}gpu-{cpu}core-{mem}gi"
    return name[:63].strip("-")


def counted(node: NodeView, exclude_control_plane: bool) -> bool:
    """Whether the node's capacity belongs in a pool (see the module docstring for the cordon rule)."""
    if exclude_control_plane and node.control_plane:
        return False
    return not node.unschedulable or node.partitioning


@dataclass(frozen=True)
class Pool:
    name: str
    gpu: GpuInfo
    cpu_cores: int
    memory_gi: int
    nodes: tuple[str, ...]
    quota: Mapping[str, Quantity]  # nominal quota per resource (cpu, memory, GPU resources)
    partitioning: bool  # a node of this pool is being partitioned


def pool_resource(name: str) -> bool:
    return name in ("cpu", "memory") or is_gpu_resource(name)


def discover_pools(nodes: Iterable[NodeView], exclude_control_plane: bool) -> list[Pool]:
    """The pools of the counted nodes, each with the sum of its nodes' allocatable, in queue order:
    CPU-only first, then by GPU count, CPU and memory (upstream's flavor order), then name."""
    members: dict[str, list[NodeView]] = {}
    for node in nodes:
        if counted(node, exclude_control_plane):
            members.setdefault(pool_name(node), []).append(node)
    pools = []
    for name, group in members.items():
        quota: dict[str, Quantity] = {}
        for node in group:
            for resource, amount in node.allocatable.items():
                if pool_resource(resource):
                    quota[resource] = quota[resource] + amount if resource in quota else amount
        first = group[0]
        pools.append(
            Pool(
                name=name,
                gpu=gpu_info(first.labels),
                cpu_cores=ninety_percent(first.capacity.get("cpu"), 1),
                memory_gi=ninety_percent(first.capacity.get("memory"), 1024**3),
                nodes=tuple(sorted(n.name for n in group)),
                quota=quota,
                partitioning=any(n.partitioning for n in group),
            )
        )
    pools.sort(key=lambda p: (p.gpu.count > 0, p.gpu.count, p.cpu_cores, p.memory_gi, p.name))
    return pools


def covered_resources(pools: Sequence[Pool]) -> list[str]:
    """``cpu``, ``memory``, then the GPU resource names any pool advertises (sorted): one resource group."""
    gpu = sorted({r for p in pools for r in p.quota if is_gpu_resource(r)})
    return ["cpu", "memory", *gpu]


def held_quota(pool: Pool, current: Mapping[str, Quantity] | None) -> dict[str, Quantity]:
    """The pool's quota after the cordon rule: while it is being partitioned, never below ``current``."""
    quota = dict(pool.quota)
    if not pool.partitioning or not current:
        return quota
    for resource, amount in current.items():
        if resource not in quota or quota[resource] < amount:
            quota[resource] = amount
    return quota


def current_quotas(cluster_queue: Mapping[str, Any] | None) -> dict[str, dict[str, Quantity]]:
    """Nominal quotas per flavor of an existing ClusterQueue (for the cordon rule)."""
    out: dict[str, dict[str, Quantity]] = {}
    if not cluster_queue:
        return out
    for group in objects.spec(cluster_queue).get("resourceGroups") or []:
        for flavor in (group or {}).get("flavors") or []:
            quotas: dict[str, Quantity] = {}
            for res in flavor.get("resources") or []:
                try:
                    quotas[str(res["name"])] = Quantity(res["nominalQuota"])
                except (KeyError, TypeError, ValueError):
                    continue
            out[str(flavor.get("name"))] = quotas
    return out

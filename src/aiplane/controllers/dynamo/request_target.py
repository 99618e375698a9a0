"""Which GPUs a DGDR plans for, and how many the cluster can give it (pure, over Node objects).

**GPU type.** ``spec.gpu.type`` when given (any name the planner's system table knows: ``h100``,
``h100_sxm``, ``mi300x``…). When omitted it is *discovered*: each node's GPU product is read from the
labels its vendor's daemon sets — GPU feature discovery's ``nvidia.com/gpu.product``
(``NVIDIA-H100-80GB-HBM3``) or the AMD node labeller's ``amd.com/gpu.product-name``
(``AMD_Instinct_MI300X_OAM``) — and the type with the largest budget wins (ties: by name). The
choice is stated in the ``Validation`` condition's message.

**Budget.** The sum of ``status.allocatable[<resource>]`` over the schedulable nodes of that type:
not cordoned (``spec.unschedulable``) and ``Ready=True``. Taints are not considered (GPU nodes are
commonly tainted and GPU workloads tolerate it), nor what running pods already use: the budget is
what the cluster can schedule, as a capacity plan, not what is free right now.

**Partitions.** An AMD node whose allocatable ``amd.com/gpu`` is a whole multiple (>1) of its
physical GPU count (``beta.amd.com/gpu.family.AI``, else the system's GPUs per node) is partitioned:
an MI300X node in CPX shows 64. The plan is then made in partitions (``partitions_per_gpu``), over
the nodes in the most common partition mode of that type (nodes in another mode are left out of the
budget, so one engine never mixes modes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity

__all__ = ["NODE_PRODUCTS", "Target", "find_target", "node_product"]

#: Vendor product labels → the planner's system names.
NODE_PRODUCTS: Final = {
    "NVIDIA-H100-80GB-HBM3": "h100_sxm",
    "NVIDIA-H100-SXM5-80GB": "h100_sxm",
    "NVIDIA-H200": "h200_sxm",
    "NVIDIA-H200-141GB-HBM3E": "h200_sxm",
    "NVIDIA-A100-SXM4-80GB": "a100_sxm",
    "NVIDIA-B200": "b200_sxm",
    "NVIDIA-GB200": "gb200",
    "AMD_Instinct_MI300X_OAM": "mi300x",
    "AMD_Instinct_MI325X_OAM": "mi325x",
    "AMD_Instinct_MI355X_OAM": "mi355x",
}
NVIDIA_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
AMD_PRODUCT_LABEL: Final = "amd.com/gpu.product-name"
AMD_PHYSICAL_LABEL: Final = "beta.amd.com/gpu.family.AI"


@dataclass(frozen=True)
class Target:
    """The GPUs a plan is made for."""

    system: str
    resource: str
    #: GPUs (partitions when partitioned) the schedulable nodes of this type offer in all.
    budget: int
    nodes: int
    partitions_per_gpu: int = 1
    #: GPUs (or partitions) one node offers: an engine larger than this spans nodes.
    per_node: int = 8
    discovered: bool = False

    def describe(self) -> str:
        unit = f"{self.resource} partitions" if self.partitions_per_gpu > 1 else self.resource
        how = "discovered from the cluster's nodes" if self.discovered else "from spec.gpu.type"
        mode = f" ({self.partitions_per_gpu} partitions per GPU)" if self.partitions_per_gpu > 1 else ""
        return (
            f"gpu.type {self.system} {how}: budget {self.budget} {unit} on {self.nodes} schedulable "
            f"node(s){mode}"
        )


def node_product(node: Mapping[str, Any]) -> str | None:
    """The node's GPU product label, NVIDIA's or AMD's; None for a node without GPUs."""
    labels = objects.labels(node)
    return labels.get(NVIDIA_PRODUCT_LABEL) or labels.get(AMD_PRODUCT_LABEL) or None


def _schedulable(node: Mapping[str, Any]) -> bool:
    if objects.spec(node).get("unschedulable"):
        return False
    conditions = objects.status(node).get("conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    raw = (objects.status(node).get("allocatable") or {}).get(resource)
    try:
        return Quantity(str(raw)).value() if raw is not None else 0
    except ValueError:
        return 0


def _partitions(node: Mapping[str, Any], allocatable: int, default_physical: int) -> int:
    raw = objects.labels(node).get(AMD_PHYSICAL_LABEL)
    physical = int(raw) if raw and raw.isdigit() and int(raw) > 0 else default_physical
    if physical > 0 and allocatable > physical and allocatable % physical == 0:
        return allocatable // physical
    return 1


def find_target(
    nodes: Iterable[Mapping[str, Any]],
    wanted: str | None,
    canonical: Callable[[str], tuple[str, str, int]],
) -> Target | str:
    """The target for ``wanted`` (None: discover), or a problem naming ``spec.gpu.type``.

    ``canonical(name)`` gives (system name, resource, GPUs per node) for any name the planner knows
    and raises ValueError (naming the known ones) for the rest.
    """
    by_system: dict[str, list[tuple[Mapping[str, Any], int]]] = {}
    info: dict[str, tuple[str, int]] = {}
    for node in nodes:
        product = node_product(node)
        if product is None or not _schedulable(node):
            continue
        try:
            system, resource, per_node = canonical(NODE_PRODUCTS.get(product, product))
        except ValueError:
            continue
        info[system] = (resource, per_node)
        by_system.setdefault(system, []).append((node, _allocatable(node, resource)))
    if wanted:
        try:
            system, resource, per_node = canonical(wanted)
        except ValueError as exc:
            return f"spec.gpu.type: {exc}"
        if system not in by_system:
            present = ", ".join(sorted(by_system)) or "none"
            return f"spec.gpu.type: no schedulable node has {system} GPUs (the cluster has: {present})"
        return _target(system, resource, per_node, by_system[system], discovered=False)
    if not by_system:
        return "spec.gpu.type: not given, and no schedulable node carries a known GPU product label"
    targets = [_target(s, *info[s], by_system[s], discovered=True) for s in sorted(by_system)]
    return max(targets, key=lambda t: (t.budget, [-ord(c) for c in t.system]))


def _target(
    system: str, resource: str, per_node: int, nodes: list[tuple[Mapping[str, Any], int]], *, discovered: bool
) -> Target:
    modes = Counter(_partitions(n, a, per_node) for n, a in nodes if a > 0)
    mode = max(modes, key=lambda m: (modes[m], -m)) if modes else 1
    chosen = [(n, a) for n, a in nodes if a > 0 and _partitions(n, a, per_node) == mode]
    return Target(
        system=system,
        resource=resource,
        budget=sum(a for _, a in chosen),
        nodes=len(chosen),
        partitions_per_gpu=mode,
        per_node=per_node * mode,
        discovered=discovered,
    )

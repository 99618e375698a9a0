"""Which GPUs a DGDR plans for, and how many the cluster can give it (pure, over Node objects).

**GPU type.** ``spec.gpu.type`` when given (any name the planner's system table knows: ``h100``,
``h100_sxm``, ``mi300x``…). When omitted it is *discovered*: each node's GPU product is read from the
labels its vendor's daemon sets — GPU feature discovery's ``nvidia.com/gpu.product``
(``NVIDIA-H100-80GB-HBM3``) or the AMD node labeller's ``amd.com/gpu.product-name``
(``AMD_Instinct_MI300X_OAM``) — and the type with the largest budget wins (ties: by name). The
choice is stated in the ``Validation`` condition's message.

**Budget.** What the request can get: over the schedulable nodes of that type (not cordoned,
``Ready=True``), ``status.allocatable[<resource>]`` less what the pods bound to each node already
request (pods not yet finished: another graph's workers hold their GPUs), capped by
``spec.gpu.totalGpus`` when set (upstream Dynamo's v1beta1 DGDR has the same cap as
``spec.hardware.totalGpus``). Taints are not considered (GPU nodes are commonly tainted and GPU
workloads tolerate it).

**Partitions.** An AMD node whose allocatable ``amd.com/gpu`` is a whole multiple (>1) of its
physical GPU count (``beta.amd.com/gpu.family.AI``, else the system's GPUs per node) is partitioned:
an MI300X node in CPX shows 64. The plan is then made in partitions (``partitions_per_gpu``), over
the nodes in the most common partition mode of that type (nodes in another mode are left out of the
budget, so one engine never mixes modes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
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
    #: GPUs (partitions when partitioned) the schedulable nodes of this type have free, capped.
    budget: int
    nodes: int
    partitions_per_gpu: int = 1
    #: GPUs (or partitions) one node offers: an engine larger than this spans nodes.
    per_node: int = 8
    discovered: bool = False
    #: Allocatable in all on those nodes, and how much of it other pods already request.
    allocatable: int = 0
    in_use: int = 0
    #: ``spec.gpu.totalGpus`` when it lowered the budget.
    capped_at: int | None = None

    def describe(self) -> str:
        unit = f"{self.resource} partitions" if self.partitions_per_gpu > 1 else self.resource
        how = "discovered from the cluster's nodes" if self.discovered else "from spec.gpu.type"
        mode = f" ({self.partitions_per_gpu} partitions per GPU)" if self.partitions_per_gpu > 1 else ""
        free = f"{self.allocatable - self.in_use} free of {self.allocatable} ({self.in_use} requested by other pods)"
        cap = f", capped by spec.gpu.totalGpus {self.capped_at}" if self.capped_at is not None else ""
        return (
            f"gpu.type {self.system} {how}: budget {self.budget} {unit}: {free} on {self.nodes} schedulable "
            f"node(s){mode}{cap}"
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


def _requested(pod: Mapping[str, Any], resource: str) -> int:
    """What a pod holds of ``resource``: its containers' requests (limits when no request: extended
    resources are requested by their limit), or the largest init container's if larger."""

    def of(containers: Any) -> list[int]:
        out = []
        for c in containers or []:
            res = c.get("resources") or {} if isinstance(c, Mapping) else {}
            raw = (res.get("requests") or {}).get(resource) or (res.get("limits") or {}).get(resource)
            try:
                out.append(Quantity(str(raw)).value() if raw is not None else 0)
            except ValueError:
                out.append(0)
        return out

    spec = objects.spec(pod)
    return max(sum(of(spec.get("containers"))), max(of(spec.get("initContainers")), default=0))


def in_use(pods: Iterable[Mapping[str, Any]], resource: str) -> dict[str, int]:
    """``resource`` requested per node by the pods bound there that have not finished."""
    used: dict[str, int] = {}
    for pod in pods:
        node = objects.spec(pod).get("nodeName")
        if not node or objects.status(pod).get("phase") in ("Succeeded", "Failed"):
            continue
        amount = _requested(pod, resource)
        if amount:
            used[node] = used.get(node, 0) + amount
    return used


def find_target(
    nodes: Iterable[Mapping[str, Any]],
    wanted: str | None,
    canonical: Callable[[str], tuple[str, str, int]],
    pods: Iterable[Mapping[str, Any]] = (),
    cap: int | None = None,
) -> Target | str:
    """The target for ``wanted`` (None: discover), or a problem naming ``spec.gpu.type``.

    ``canonical(name)`` gives (system name, resource, GPUs per node) for any name the planner knows
    and raises ValueError (naming the known ones) for the rest. ``pods`` hold GPUs that are not free;
    ``cap`` is ``spec.gpu.totalGpus``.
    """
    found = _find(list(nodes), wanted, canonical)
    if isinstance(found, str):
        return found
    used = in_use(pods, found.resource)
    chosen = _chosen_nodes(list(nodes), found, canonical)
    taken = sum(min(used.get(objects.name(n), 0), a) for n, a in chosen)
    free = found.budget - taken
    budget = free if cap is None else min(free, cap)
    target = replace(
        found,
        budget=budget,
        allocatable=found.budget,
        in_use=taken,
        capped_at=cap if cap is not None and cap < free else None,
    )
    if budget <= 0:
        return (
            f"spec.gpu.type: all {found.budget} {found.resource} of the schedulable {found.system} nodes are "
            "requested by other pods; nothing to plan for until some are released"
        )
    return target


def _chosen_nodes(
    nodes: list[Mapping[str, Any]], target: Target, canonical: Callable[[str], tuple[str, str, int]]
) -> list[tuple[Mapping[str, Any], int]]:
    """The nodes whose GPUs make up ``target``'s budget (its type, schedulable, its partition mode)."""
    out = []
    physical = target.per_node // target.partitions_per_gpu
    for node in nodes:
        product = node_product(node)
        if product is None or not _schedulable(node):
            continue
        try:
            system = canonical(NODE_PRODUCTS.get(product, product))[0]
        except ValueError:
            continue
        allocatable = _allocatable(node, target.resource)
        mode = _partitions(node, allocatable, physical) if allocatable > 0 else 0
        if system == target.system and mode == target.partitions_per_gpu:
            out.append((node, allocatable))
    return out


def _find(
    nodes: Iterable[Mapping[str, Any]],
    wanted: str | None,
    canonical: Callable[[str], tuple[str, str, int]],
) -> Target | str:
    """The target by allocatable GPUs (before what pods use)."""
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

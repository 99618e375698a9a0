"""The KaiwoConfig controller's view of the fleet, kept current by Node events instead of rebuilt.

The controller is a singleton that every Node event wakes, and it reads every Node: rebuilding the
node views (quantity parsing) and the pool sums on each reconcile cost O(fleet) per Node event, so a
partitioning rollout, which changes each node several times, cost the controller O(fleet²)
(three quarters of the operator's CPU at 300 nodes). Here each Node event costs O(1): the node's view
is built once, its contribution to its pool's sums is subtracted and the new one added, and the node
is marked for the taint/label check. A reconcile then costs O(changed nodes + pools): the pools
(with their sorted member names) and the sorted tainted names are kept until an event changes what
they read, since most Node events of a rollout (cordon, taint, uncordon) change neither, and sorting
the fleet on every reconcile was again O(fleet) per event (second round).

The result is what :func:`~aiplane.controllers.kaiwo.pools.discover_pools` computes from the same
nodes (a property test holds the two together); that pure function stays the specification.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION
from aiplane.controllers.kaiwo.pools import (
    GpuInfo,
    NodeView,
    Pool,
    gpu_info,
    ninety_percent,
    node_view,
    pool_name,
    pool_resource,
)

__all__ = ["Fleet"]


@dataclass
class _Sum:
    """One pool's members of one kind (control-plane or not): how many hold each resource, and the sum."""

    gpu: GpuInfo
    cpu_cores: int
    memory_gi: int
    members: set[str] = field(default_factory=set)
    partitioning: set[str] = field(default_factory=set)
    holders: dict[str, int] = field(default_factory=dict)
    quota: dict[str, Quantity] = field(default_factory=dict)
    #: ``members`` sorted, kept until a member joins or leaves (most events change neither).
    sorted_members: tuple[str, ...] | None = None

    def add(self, node: NodeView) -> None:
        if node.name not in self.members:
            self.members.add(node.name)
            self.sorted_members = None
        if node.partitioning:
            self.partitioning.add(node.name)
        for resource, amount in node.allocatable.items():
            if pool_resource(resource):
                held = self.holders.get(resource, 0)
                self.holders[resource] = held + 1
                self.quota[resource] = self.quota[resource] + amount if held else amount

    def remove(self, node: NodeView, *, staying: bool = False) -> None:
        """Take ``node``'s share out; ``staying`` when the same node is added back at once (an update
        in the same slot), so the member list is left as it is."""
        if not staying and node.name in self.members:
            self.members.discard(node.name)
            self.sorted_members = None
        self.partitioning.discard(node.name)
        for resource, amount in node.allocatable.items():
            if pool_resource(resource):
                held = self.holders[resource] - 1
                if held:
                    self.holders[resource] = held
                    self.quota[resource] = self.quota[resource] - amount
                else:
                    del self.holders[resource]
                    del self.quota[resource]


#: A node's place in the sums: its pool name and whether it is a control-plane node; None when it is
#: cordoned by someone other than the partitioning controller (never counted).
_Slot = tuple[str, bool] | None


def _slot(node: NodeView) -> _Slot:
    if node.unschedulable and not node.partitioning:
        return None
    return pool_name(node), node.control_plane


class Fleet:
    """Node views, pool sums and tainted nodes, updated per Node event (see the module docstring).

    ``builds`` counts the node views built (each Node event builds one): what a test counts to hold a
    reconcile to O(changed) work.
    """

    def __init__(self) -> None:
        self.views: dict[str, NodeView] = {}
        self.builds = 0
        self._slots: dict[str, _Slot] = {}
        self._sums: dict[tuple[str, bool], _Sum] = {}
        self._tainted: set[str] = set()
        #: Nodes changed since the controller last checked their labels and taints.
        self.dirty: set[str] = set()
        #: Bumped by an event that changes what :meth:`pools` or :meth:`tainted_names` read; what they
        #: built is kept until then (``pool_builds`` counts the rebuilds, for the tests).
        self.version = 0
        self.pool_builds = 0
        self._keys: dict[str, tuple[Any, ...]] = {}
        self._pools_memo: dict[bool, tuple[int, list[Pool]]] = {}
        self._tainted_memo: tuple[int, tuple[str, ...]] = (0, ())

    # --- informer handlers --------------------------------------------------------------------------

    def put(self, obj: Mapping[str, Any]) -> None:
        name = objects.name(obj)
        node = node_view(obj)
        slot = _slot(node)
        self._forget(name, staying_in=slot)
        self.builds += 1
        self.views[name] = node
        self._slots[name] = slot
        if slot is not None:
            found = self._sums.get(slot)
            if found is None:
                found = self._sums[slot] = _Sum(
                    gpu_info(node.labels),
                    ninety_percent(node.capacity.get("cpu"), 1),
                    ninety_percent(node.capacity.get("memory"), 1024**3),
                )
            found.add(node)
        if node.annotations.get(TAINTED_ANNOTATION):
            self._tainted.add(name)
        self.dirty.add(name)
        key = _key(node, slot)
        if self._keys.get(name) != key:
            self._keys[name] = key
            self.version += 1

    def update(self, _old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.put(new)

    def delete(self, obj: Mapping[str, Any]) -> None:
        name = objects.name(obj)
        self._forget(name)
        self.dirty.discard(name)
        if self._keys.pop(name, None) is not None:
            self.version += 1

    def _forget(self, name: str, staying_in: _Slot = None) -> None:
        node = self.views.pop(name, None)
        if node is None:
            return
        slot = self._slots.pop(name, None)
        if slot is not None:
            found = self._sums[slot]
            found.remove(node, staying=slot == staying_in)
            if not found.members:
                del self._sums[slot]
        self._tainted.discard(name)

    # --- reads --------------------------------------------------------------------------------------

    def pool_of(self, name: str, exclude_control_plane: bool) -> str | None:
        """The pool ``name`` counts in, or None (not counted, or an excluded control-plane node)."""
        slot = self._slots.get(name)
        if slot is None or (exclude_control_plane and slot[1]):
            return None
        return slot[0]

    def tainted(self) -> set[str]:
        """Nodes whose cached state carries the tainted-by-us annotation."""
        return set(self._tainted)

    def tainted_names(self) -> tuple[str, ...]:
        """:meth:`tainted`, sorted, rebuilt only after an event that changed it."""
        version, names = self._tainted_memo
        if version != self.version:
            names = tuple(sorted(self._tainted))
            self._tainted_memo = (self.version, names)
        return names

    def pools(self, exclude_control_plane: bool) -> list[Pool]:
        """What ``discover_pools(all node views, exclude_control_plane)`` returns, from the sums
        (rebuilt only after an event that changed a sum)."""
        memo = self._pools_memo.get(exclude_control_plane)
        if memo is not None and memo[0] == self.version:
            return list(memo[1])
        self.pool_builds += 1
        merged: dict[str, list[_Sum]] = {}
        for (name, control_plane), found in self._sums.items():
            if not (exclude_control_plane and control_plane):
                merged.setdefault(name, []).append(found)
        pools = [_pool(name, parts) for name, parts in merged.items()]
        pools.sort(key=lambda p: (p.gpu.count > 0, p.gpu.count, p.cpu_cores, p.memory_gi, p.name))
        self._pools_memo[exclude_control_plane] = (self.version, pools)
        return list(pools)


def _members(parts: list[_Sum]) -> tuple[str, ...]:
    for part in parts:
        if part.sorted_members is None:
            part.sorted_members = tuple(sorted(part.members))
    if len(parts) == 1:
        return parts[0].sorted_members or ()
    return tuple(sorted(n for part in parts for n in part.sorted_members or ()))


def _key(node: NodeView, slot: _Slot) -> tuple[Any, ...]:
    """Everything of ``node`` that the sums, the pools built from them and the tainted set read: an
    event that leaves it equal leaves both unchanged (a sum's GPU, CPU and memory come from the node
    that created it, so they are in the key too)."""
    resources = tuple(sorted((r, str(q)) for r, q in node.allocatable.items() if pool_resource(r)))
    return (
        slot,
        node.partitioning,
        resources,
        bool(node.annotations.get(TAINTED_ANNOTATION)),
        gpu_info(node.labels),
        str(node.capacity.get("cpu")),
        str(node.capacity.get("memory")),
    )


def _pool(name: str, parts: Iterable[_Sum]) -> Pool:
    parts = list(parts)
    quota: dict[str, Quantity] = {}
    for part in parts:
        for resource, amount in part.quota.items():
            quota[resource] = quota[resource] + amount if resource in quota else amount
    first = parts[0]
    return Pool(
        name=name,
        gpu=first.gpu,
        cpu_cores=first.cpu_cores,
        memory_gi=first.memory_gi,
        nodes=_members(parts),
        quota=quota,
        partitioning=any(part.partitioning for part in parts),
    )

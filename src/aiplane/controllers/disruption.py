"""Group-aware disruption budgets: drains take down at most a workload's budget of *groups*.

Why this exists: a PodDisruptionBudget counts pods, but an inference group (a ModelInfer InferGroup,
a multinode Dynamo replica run as one LeaderWorkerSet) serves only while *all* its pods do. A pod
budget of "one unavailable" lets a drain evict one pod from each of two groups and take both down.
No pod-level budget expresses "at most one group".

The protocol, which works with every drain that honours budgets (our partitioning drain,
``kubectl drain``, a cluster autoscaler), because they all evict through the Eviction API:

1. The workload's controller keeps one PodDisruptionBudget per group, selecting exactly the group's
   pods. A **protected** group's budget has ``minAvailable`` = the group's pod count, so the
   Eviction API refuses (429) to evict any of its ready pods.
2. Cordoning is the universal first step of a drain. When a group has a live pod on a cordoned node,
   the controller (the arbiter) decides whether it may go: a group that is not available anyway is
   **released** at once (evicting it costs no serving capacity); an available one is released only
   while the available, not released groups stay at or above the floor
   (``replicas - maxUnavailable``) after releasing it. Releasing sets ``minAvailable: 0``.
3. A released group stays released while any of its pods still stands on a cordoned node (the drain
   may be evicting it; revoking mid-eviction would only leave a half-evicted group behind). Once
   none does — it was rebuilt elsewhere, or the node was uncordoned — it is protected again, which
   frees its place in the budget for the next group.

The kube-apiserver side makes this safe against races: the Eviction API refuses while a budget's
status has not observed its latest spec (``observedGeneration < generation``), so a group protected
again is never evicted on the strength of the old, released status.

Availability is the workload's own notion (every pod of the group running and ready), so groups
already unavailable count against the floor, as the issue asks ("counting groups already
unavailable"). Nothing here does I/O: :func:`arbitrate` is a pure decision over :class:`GroupView`
records, :func:`group_budget` builds the budget object, :func:`budget_differs` says whether the live
one must be rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "Arbitration",
    "GroupView",
    "arbitrate",
    "budget_differs",
    "budget_min_available",
    "group_budget",
    "is_released",
]

Obj = dict[str, Any]

#: Unhealthy pods (not Ready) may always be evicted: they serve nothing, and a budget that kept
#: them would block every drain behind a crash-looping pod (kube's recommended policy since 1.27).
UNHEALTHY_POD_EVICTION_POLICY: Final = "AlwaysAllow"


@dataclass(frozen=True)
class GroupView:
    """One group as the arbiter needs it.

    ``name`` is the group's budget name (unique within the workload); ``order`` sorts candidates
    (lowest first, so the choice is deterministic); ``available`` is the workload's own notion;
    ``cordoned_nodes`` are the cordoned nodes its live (not terminating) pods stand on; ``released``
    is what its budget currently says (from the cache, or from our own write not yet cached).
    """

    name: str
    order: int
    available: bool
    cordoned_nodes: tuple[str, ...] = ()
    released: bool = False

    @property
    def on_cordoned(self) -> bool:
        return bool(self.cordoned_nodes)


@dataclass(frozen=True)
class Arbitration:
    """The groups whose budgets allow disruption now, and those a drain is waiting for.

    ``serving`` counts the available groups that stay protected: what the workload keeps serving
    whatever the drains do; it never drops below ``floor`` because of a release (only a failure
    the arbiter cannot prevent lowers it).
    """

    released: frozenset[str]
    waiting: tuple[str, ...]
    floor: int
    serving: int

    def is_released(self, name: str) -> bool:
        return name in self.released


def arbitrate(groups: Iterable[GroupView], floor: int) -> Arbitration:
    """Which groups may be disrupted now (see the module docstring for the protocol)."""
    ordered = sorted(groups, key=lambda g: (g.order, g.name))
    released: set[str] = set()
    candidates: list[GroupView] = []
    for group in ordered:
        if not group.on_cordoned:
            continue  # protected: nothing asks to move it (or it has been rebuilt elsewhere)
        if not group.available or group.released:
            released.add(group.name)  # costs nothing, or a release already granted and in flight
        else:
            candidates.append(group)
    serving = sum(1 for g in ordered if g.available and g.name not in released)
    waiting: list[str] = []
    for group in candidates:
        if serving - 1 >= floor:
            released.add(group.name)
            serving -= 1
        else:
            waiting.append(group.name)
    return Arbitration(frozenset(released), tuple(waiting), floor, serving)


def budget_min_available(pods: int, released: bool) -> int:
    """``minAvailable`` of a group's budget: every pod while protected, none once released."""
    return 0 if released else max(0, pods)


def group_budget(
    *,
    name: str,
    namespace: str,
    selector: Mapping[str, str],
    pods: int,
    released: bool,
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
) -> Obj:
    """The PodDisruptionBudget of one group, controlled by ``owner`` (its workload, for GC).

    An integer ``minAvailable`` needs no scale lookup; ``maxUnavailable`` would make the disruption
    controller read the owner's scale subresource, which for a ModelInfer counts groups, not pods.
    """
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [ref],
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "minAvailable": budget_min_available(pods, released),
            "unhealthyPodEvictionPolicy": UNHEALTHY_POD_EVICTION_POLICY,
        },
    }


def budget_differs(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether the live budget's spec or our labels differ from ``desired`` (fields others own kept)."""
    spec = live.get("spec") or {}
    want = desired["spec"]
    if any(spec.get(key) != value for key, value in want.items()):
        return True
    labels = (live.get("metadata") or {}).get("labels") or {}
    return any(labels.get(k) != v for k, v in desired["metadata"]["labels"].items())


def is_released(live: Mapping[str, Any] | None) -> bool:
    """What a live budget says: released when it exists and asks for no available pod."""
    if live is None:
        return False
    value = (live.get("spec") or {}).get("minAvailable")
    return value == 0 and not isinstance(value, bool)

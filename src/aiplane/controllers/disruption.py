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
unavailable"). :func:`arbitrate` is a pure decision over :class:`GroupView` records,
:func:`group_budget` builds the budget object, :func:`budget_differs` says whether the live one must
be rewritten.

**What a user sees is the same for every workload** (ModelInfer and multinode DCD alike; the one
executor, :func:`write_budget`, and the one condition rule, :func:`held_condition`):

* condition ``DisruptionHeld``: ``True`` (reason ``FloorReached``) while a drain waits for a group;
  ``False`` (reason ``NoDisruptionHeld``) once nothing waits any more; absent on a workload no drain
  ever waited for. False rather than removed, so that ``kubectl wait
  --for=condition=DisruptionHeld=false`` ends and ``kubectl describe`` still says when the last hold
  ended (``lastTransitionTime``); absent until the first hold, so a workload never drained gets no
  status write for it;
* Events: Warning ``DisruptionHeld`` when the condition turns True (:data:`HELD_EVENT`), Normal
  ``DisruptionAllowed`` when a group's budget is released, Normal ``DisruptionProtected`` when it is
  protected again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery.conditions import set_condition
from aiplane.kube.children import ChildWriter
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.resources import PDBS
from aiplane.kube.status import ConditionEvent

__all__ = [
    "CONDITION",
    "HELD_EVENT",
    "REASON_ALLOWED",
    "REASON_FLOOR_REACHED",
    "REASON_NOT_HELD",
    "REASON_PROTECTED",
    "Arbitration",
    "BudgetFlip",
    "GroupView",
    "arbitrate",
    "budget_differs",
    "budget_flip",
    "budget_min_available",
    "group_budget",
    "held_condition",
    "is_released",
    "updated_budget",
    "write_budget",
]

Obj = dict[str, Any]

#: Unhealthy pods (not Ready) may always be evicted: they serve nothing, and a budget that kept
#: them would block every drain behind a crash-looping pod (kube's recommended policy since 1.27).
UNHEALTHY_POD_EVICTION_POLICY: Final = "AlwaysAllow"

#: The condition on the workload, its reasons, and the Event reasons (module docstring).
CONDITION: Final = "DisruptionHeld"
REASON_FLOOR_REACHED: Final = "FloorReached"
REASON_NOT_HELD: Final = "NoDisruptionHeld"
REASON_ALLOWED: Final = "DisruptionAllowed"
REASON_PROTECTED: Final = "DisruptionProtected"
#: The Warning Event when a drain starts waiting (the condition's message says for what).
HELD_EVENT: Final = ConditionEvent(CONDITION, "True", WARNING, reason=CONDITION)


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


def held_condition(
    conditions: Sequence[Mapping[str, Any]] | None, message: str | None, *, generation: int, now: datetime
) -> list[dict[str, Any]]:
    """``conditions`` with ``DisruptionHeld`` set: True with ``message`` while something is held,
    False once nothing is (only when the condition exists: a workload never drained keeps the
    conditions it had)."""
    current = [dict(c) for c in conditions or () if isinstance(c, Mapping)]
    if message is not None:
        status, reason = "True", REASON_FLOOR_REACHED
    elif any(c.get("type") == CONDITION for c in current):
        status, reason, message = "False", REASON_NOT_HELD, "No drain waits for a group"
    else:
        return current
    out, _ = set_condition(
        current, CONDITION, status, reason, message, observed_generation=generation, now=now
    )
    return out


class BudgetFlip(enum.Enum):
    """What a budget write does to a group: released for eviction, or protected again."""

    RELEASED = REASON_ALLOWED
    PROTECTED = REASON_PROTECTED


def budget_flip(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> BudgetFlip | None:
    """Whether writing ``desired`` over ``live`` releases or protects the group (``None``: neither)."""
    was, now = is_released(live), is_released(desired)
    if was == now or live is None:
        return None
    return BudgetFlip.RELEASED if now else BudgetFlip.PROTECTED


def updated_budget(live: Mapping[str, Any], desired: Mapping[str, Any]) -> Obj:
    """``live`` with our spec fields and labels (fields others own are kept)."""
    meta = dict(live.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **desired["metadata"]["labels"]}
    return {**live, "metadata": meta, "spec": {**(live.get("spec") or {}), **desired["spec"]}}


async def write_budget(
    writer: ChildWriter,
    recorder: EventRecorder,
    workload: Mapping[str, Any],
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    owner: str,
    message: Callable[[BudgetFlip], str],
) -> BudgetFlip | None:
    """The one executor of a group budget: create it when absent, replace it when
    :func:`budget_differs`, and report a release or protection as a Normal Event on ``workload``
    (``message(flip)`` says which group and why, in the workload's words)."""
    written = await writer.ensure(
        PDBS, live, desired, differs=budget_differs, updated=updated_budget, owner=owner
    )
    flip = budget_flip(live, desired) if written is not None else None
    if flip is not None:
        recorder.emit(dict(workload), NORMAL, flip.value, message(flip))
    return flip

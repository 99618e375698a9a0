"""Group-level disruption protection for a multinode DCD's replicas: the Dynamo side of
:mod:`aiplane.controllers.disruption` (its docstring is the protocol), built by pure functions.

Why a budget per replica: a multinode replica is one LeaderWorkerSet group (leader + workers); it
serves only while every one of its pods does, so a pod-level budget of "one unavailable" would let
a drain take one pod of each replica and every replica down. Each replica (LeaderWorkerSet
``<dcd>-<i>``) gets a PodDisruptionBudget ``<dcd>-<i>`` over exactly its pods, and the DCD controller
arbitrates which replicas on cordoned nodes may go, keeping ``replicas - maxUnavailable`` serving.

Choices, each on purpose:

* **Availability from the pods, not the LeaderWorkerSet status.** A replica is available when it has
  all its pods (``nodeCount``: the leader and ``nodeCount - 1`` workers), none terminating, every one
  Running and Ready. The cordon information comes from the same pod cache, so the arbiter never
  combines a fresh "rebuilt elsewhere" with a stale "ready" from the LWS status (a different watch
  stream), which would count a replica that is still starting as serving and release the next one.
* **maxUnavailable as the single-node rule** (:func:`group_max_unavailable`): the Deployment
  strategy's rolling ``maxUnavailable``, a percentage of the replicas rounded up (as the disruption
  controller rounds a PDB's), 0 ramped to 1 (a drain has no surge; a budget of 0 would hold every
  drain for ever, and one replica at a time is the least that lets it finish), ``Recreate``: no
  protection (its owner accepts the whole component down at every update).
* **The selector** is the labels the LeaderWorkerSet controller puts on every pod of a group
  (``leaderworkerset.sigs.k8s.io/name`` and ``group-index``; each of our LWSs has one group, index 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition
from aiplane.controllers.disruption import (
    CONDITION,
    Arbitration,
    GroupView,
    group_budget,
    held_condition,
    is_released,
)
from aiplane.controllers.dynamo.podtemplate import LABEL_SELECTOR

__all__ = [
    "CONDITION_DISRUPTION_HELD",
    "LWS_GROUP_INDEX_LABEL",
    "LWS_NAME_LABEL",
    "POD_SELECTOR",
    "Held",
    "group_max_unavailable",
    "held",
    "held_message",
    "pod_available",
    "replica_budget",
    "replica_floor",
    "replica_view",
    "with_held",
]

Obj = dict[str, Any]

LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/group-index"
#: The pods the controller watches: LeaderWorkerSet pods of a DCD (they keep ``nvidia.com/selector``).
POD_SELECTOR: Final = f"{LWS_NAME_LABEL},{LABEL_SELECTOR}"
#: True while a replica on a cordoned node is held by the floor (the shared semantics).
CONDITION_DISRUPTION_HELD: Final = CONDITION


def _scaled_up(value: int | str, total: int) -> int:
    """``GetScaledValueFromIntOrPercent(value, total, roundUp=true)``; raises ValueError on garbage."""
    if isinstance(value, str):
        if value.endswith("%"):
            return math.ceil(int(value[:-1]) * total / 100)
        return int(value)
    return int(value)


def group_max_unavailable(strategy: Mapping[str, Any], replicas: int) -> int | None:
    """Replicas a drain may take at once for a Deployment ``strategy``; ``None``: no protection."""
    if strategy.get("type") == "Recreate":
        return None
    rolling = strategy.get("rollingUpdate")
    value = rolling.get("maxUnavailable") if isinstance(rolling, Mapping) else None
    try:
        scaled = 0 if value is None else _scaled_up(value, replicas)
    except (TypeError, ValueError):
        scaled = 0
    return max(scaled, 1)


def replica_floor(strategy: Mapping[str, Any], replicas: int) -> int | None:
    """``replicas - maxUnavailable`` (never negative); ``None``: ``Recreate``, no budgets."""
    max_unavailable = group_max_unavailable(strategy, replicas)
    return None if max_unavailable is None else max(0, replicas - max_unavailable)


def pod_available(pod: Mapping[str, Any]) -> bool:
    """Running, Ready and not terminating."""
    if objects.is_deleting(pod) or objects.status(pod).get("phase") != "Running":
        return False
    ready = get_condition(objects.status(pod).get("conditions"), "Ready")
    return ready is not None and ready.get("status") == "True"


def replica_view(
    name: str,
    order: int,
    pods: Iterable[Mapping[str, Any]],
    size: int,
    cordoned: frozenset[str] | set[str],
    budget: Mapping[str, Any] | None,
) -> GroupView:
    """One replica for the arbiter: its live pods, the cordoned nodes they stand on, its budget."""
    live = [p for p in pods if not objects.is_deleting(p)]
    nodes = {str(objects.spec(p).get("nodeName") or "") for p in live}
    return GroupView(
        name=name,
        order=order,
        available=len(live) == size and all(pod_available(p) for p in live),
        cordoned_nodes=tuple(sorted(n for n in nodes if n and n in cordoned)),
        released=is_released(budget),
    )


def replica_budget(
    dcd: Mapping[str, Any], lws: str, pods: int, released: bool, labels: Mapping[str, str]
) -> Obj:
    """The budget ``<lws>`` over the pods of LeaderWorkerSet ``lws`` (its one group, index 0)."""
    return group_budget(
        name=lws,
        namespace=objects.namespace(dcd),
        selector={LWS_NAME_LABEL: lws, LWS_GROUP_INDEX_LABEL: "0"},
        pods=pods,
        released=released,
        labels=labels,
        owner=dcd,
    )


@dataclass(frozen=True)
class Held:
    """A replica on a cordoned node that the floor keeps: its budget and the nodes it stands on."""

    budget: str
    nodes: tuple[str, ...]


def held(arbitration: Arbitration, views: Sequence[GroupView]) -> list[Held]:
    by_name = {v.name: v for v in views}
    return [Held(name, by_name[name].cordoned_nodes) for name in arbitration.waiting if name in by_name]


def held_message(
    dcd: Mapping[str, Any], holds: Sequence[Held], arbitration: Arbitration, replicas: int
) -> str:
    """Names the DCD, each held replica's budget and its cordoned nodes, and the floor."""
    namespace, name = objects.namespace(dcd), objects.name(dcd)
    parts = [f"budget {namespace}/{h.budget} on cordoned node(s) {', '.join(h.nodes)}" for h in holds]
    return (
        f"DynamoComponentDeployment {namespace}/{name}: holding {'; '.join(parts)}: "
        f"{arbitration.serving}/{replicas} replicas serving, floor {arbitration.floor} "
        f"(replicas - maxUnavailable); the drain waits until a released replica is available again"
    )


def with_held(status: Obj, message: str | None, *, generation: int, now: datetime) -> Obj:
    """``status`` with ``DisruptionHeld`` as every workload reports it
    (:func:`~aiplane.controllers.disruption.held_condition`: True with ``message`` while a replica
    is held, False once none is, absent on a DCD no drain ever waited for)."""
    conditions = status.get("conditions")
    updated = held_condition(
        conditions if isinstance(conditions, list) else None, message, generation=generation, now=now
    )
    if updated or "conditions" in status:
        status["conditions"] = updated
    return status

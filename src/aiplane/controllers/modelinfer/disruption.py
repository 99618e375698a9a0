"""ModelInfer disruption: one PodDisruptionBudget per InferGroup, released within the floor.

Why: a pod-level budget lets a drain take one pod from each of two groups and take both down; an
InferGroup serves only while all its pods do. The shared arbiter
(:mod:`aiplane.controllers.disruption`, whose docstring is the protocol) decides per group; this
module feeds it the ModelInfer's groups and carries out its verdict:

::

    observe   cordoned nodes (Node informer) under the group's live pods; each group's availability
              as the decision sees it *before* acting (so a drain wins over the template rollout:
              the arbiter spends the budget first, the rolling update gets what is left); what each
              group's budget says (the cached PDB, or our own write the cache does not show yet)
    decide    :func:`decide` → released ordinals (fed to the decision: spent capacity) and held
              ordinals (waiting; with maxSurge the decision builds replacements for them)
    act       :class:`GroupBudgets.sync`, before any pod delete of the plan: creates and
              protections first, then releases, then budgets of ordinals that are gone; each write
              only when :func:`~aiplane.controllers.disruption.budget_differs` (zero at steady state)
    report    condition ``DisruptionHeld`` (:func:`disruption_condition`), Events
              ``DisruptionAllowed`` / ``DisruptionProtected`` per budget write

Budget writes are recorded in their own :class:`~aiplane.kube.expectations.Expectations` (with the
objects, for :meth:`~aiplane.kube.expectations.Expectations.view`): a second release is never
decided on a cache that does not show the first, and the executor does not decide at all while a
budget write is not in its cache.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.controllers.disruption import (
    CONDITION,
    Arbitration,
    BudgetFlip,
    GroupView,
    arbitrate,
    budget_differs,
    group_budget,
    held_condition,
    is_released,
    write_budget,
)
from aiplane.controllers.modelinfer.naming import (
    KIND,
    LABEL_GROUP_NAME,
    LABEL_NAME,
    group_name,
    group_ordinal,
)
from aiplane.controllers.modelinfer.plan_types import (
    DeleteGroup,
    DeletePods,
    DeleteRoleReplica,
    GroupSummary,
    Plan,
)
from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.client import KubeClient
from aiplane.kube.events import EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.resources import PDBS

__all__ = [
    "CONDITION",
    "BudgetWrite",
    "Decision",
    "GroupBudgets",
    "budget_writes",
    "cordoned_groups",
    "decide",
    "desired_budgets",
    "disruption_condition",
    "left_to_the_drain",
    "pods_by_node",
    "spends_floor",
]

Obj = dict[str, Any]

#: Index of the pods informer: ``spec.nodeName``.
BY_NODE: Final = "nodeName"
MODELINFER_API_VERSION: Final = "workload.volcano.sh/v1alpha1"


def pods_by_node(pod: Mapping[str, Any]) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if isinstance(node, str) and node else []


def unschedulable_changed(old: Obj, new: Obj) -> bool:
    """Node updates that matter here: cordon and uncordon (a status heartbeat is not one)."""
    return bool((old.get("spec") or {}).get("unschedulable")) != bool(
        (new.get("spec") or {}).get("unschedulable")
    )


def cordoned_groups(
    mi_name: str, pods: Iterable[Mapping[str, Any]], cordoned: set[str]
) -> dict[int, tuple[str, ...]]:
    """Ordinal → the cordoned nodes its live (not terminating) pods stand on."""
    out: dict[int, set[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in cordoned or objects.is_deleting(pod):
            continue
        ordinal = group_ordinal(mi_name, str(objects.labels(pod).get(LABEL_GROUP_NAME) or ""))
        if ordinal is not None:
            out.setdefault(ordinal, set()).add(str(node))
    return {o: tuple(sorted(nodes)) for o, nodes in out.items()}


def left_to_the_drain(
    mi_name: str, pods: Iterable[Mapping[str, Any]], cordoned: set[str], released: frozenset[int]
) -> frozenset[str]:
    """Ready pods of released groups on cordoned nodes: the controller does not delete them, the
    drain evicts them (their budget allows it).

    Why: ``kubectl drain`` retries a refused eviction by pod *name* every 5 s, and a ModelInfer
    recreates pods under the same names. Were the controller to delete such a pod itself (a sibling
    of an evicted pod, under RoleRecreate) and rebuild it elsewhere, the drain's next retry would
    hit the new, protected pod and wait until its timeout. A not-ready pod is never refused (the
    budgets' ``AlwaysAllow``), so no drain retries it: those are deleted as usual.
    """
    out: set[str] = set()
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") not in cordoned or objects.is_deleting(pod):
            continue
        ordinal = group_ordinal(mi_name, str(objects.labels(pod).get(LABEL_GROUP_NAME) or ""))
        if ordinal in released and _ready(pod):
            out.add(objects.name(pod))
    return frozenset(out)


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def spends_floor(
    decision: Decision, the_plan: Plan, already_released: frozenset[int], pods: Iterable[Mapping[str, Any]]
) -> bool:
    """Does acting on this decision take serving capacity: release an available group's budget that
    is not released yet, or delete a pod of an available group (scale down, rolling update)?

    Such a step must rest on the pods as the API server has them, not on a Pod cache that may lag
    the Node cache (the executor confirms with a LIST and decides again). Everything else — deleting
    pods of groups already unavailable, creating, protecting — costs nothing and needs no LIST.
    """
    available = {o for o, up in decision.available.items() if up}
    if any(o in available and o not in already_released for o in decision.released):
        return True
    mi_name = decision.mi_name
    ordinal_of = {
        objects.name(p): group_ordinal(mi_name, str(objects.labels(p).get(LABEL_GROUP_NAME) or ""))
        for p in pods
    }
    for action in the_plan.actions:
        if isinstance(action, DeleteGroup | DeleteRoleReplica) and action.ordinal in available:
            return True
        if isinstance(action, DeletePods) and any(ordinal_of.get(n) in available for n, _ in action.pods):
            return True
    return False


@dataclass(frozen=True)
class Decision:
    """The arbiter's verdict in ordinals, with what the report needs."""

    arbitration: Arbitration
    mi_name: str
    replicas: int
    available: Mapping[int, bool]
    cordoned: Mapping[int, tuple[str, ...]]
    released: frozenset[int]
    held: frozenset[int]

    @property
    def floor(self) -> int:
        return self.arbitration.floor

    def held_message(self) -> str:
        """One sentence per waiting group: the group, its budget, the node, and the arithmetic."""
        serving = self.arbitration.serving
        parts = []
        for ordinal in sorted(self.held):
            name = group_name(self.mi_name, ordinal)
            nodes = self.cordoned.get(ordinal, ())
            where = f"cordoned node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"
            parts.append(
                f"group {name} (PodDisruptionBudget {name}) on {where} waits: releasing it would leave "
                f"{serving - 1} of {self.replicas} groups available, below replicas - maxUnavailable = {self.floor}"
            )
        return "; ".join(parts)


def decide(
    *,
    mi_name: str,
    replicas: int,
    max_unavailable: int,
    available: Mapping[int, bool],
    cordoned: Mapping[int, tuple[str, ...]],
    released: Iterable[int],
) -> Decision:
    """Run the arbiter over the groups: ``available`` as observed (live groups), ``released`` what
    the budgets say now. The floor is ``replicas - maxUnavailable``, never below 0."""
    floor = max(0, replicas - max(0, max_unavailable))
    already = frozenset(released)
    ordinals = sorted(set(available) | set(cordoned) | already)
    views = [
        GroupView(
            name=group_name(mi_name, o),
            order=o,
            available=available.get(o, False),
            cordoned_nodes=tuple(cordoned.get(o, ())),
            released=o in already,
        )
        for o in ordinals
    ]
    arbitration = arbitrate(views, floor)
    by_name = {group_name(mi_name, o): o for o in ordinals}
    return Decision(
        arbitration=arbitration,
        mi_name=mi_name,
        replicas=replicas,
        available=dict(available),
        cordoned=dict(cordoned),
        released=frozenset(by_name[n] for n in arbitration.released),
        held=frozenset(by_name[n] for n in arbitration.waiting),
    )


def disruption_condition(
    conditions: Sequence[Mapping[str, Any]] | None, decision: Decision, *, generation: int, now: datetime
) -> list[dict[str, Any]]:
    """``DisruptionHeld`` as every workload reports it (:func:`~aiplane.controllers.disruption.held_condition`)."""
    return held_condition(
        conditions, decision.held_message() if decision.held else None, generation=generation, now=now
    )


# --- the budgets -----------------------------------------------------------------------------------


def _owner(mi: Mapping[str, Any]) -> Obj:
    # apiVersion/kind are ours: items of a list response may lack them.
    return {
        "apiVersion": MODELINFER_API_VERSION,
        "kind": "ModelInfer",
        "metadata": {"name": objects.name(mi), "uid": objects.uid(mi)},
    }


def desired_budgets(
    mi: Mapping[str, Any], groups: Iterable[GroupSummary], released: frozenset[int]
) -> tuple[dict[str, Obj], set[str]]:
    """The budgets every group that is not Deleting should have, and the names of Deleting groups'
    budgets, which are kept as they are until the group is gone (like their PodGroups).

    A Deleting group the arbiter released is the exception: its budget is released too. The executor
    leaves the Ready pods of a released group on a cordoned node to the drain
    (:func:`left_to_the_drain`); were the budget kept protected, the drain could not evict them
    and the controller would not delete them — a rolling update that deletes a group a failure made
    unavailable, while a drain waits for it, stalled until the drain timed out.
    """
    mi_name = objects.name(mi)
    desired: dict[str, Obj] = {}
    keep: set[str] = set()
    for g in groups:
        name = group_name(mi_name, g.ordinal)
        if g.state == "Deleting" and g.ordinal not in released:
            keep.add(name)
            continue
        labels = {LABEL_NAME: mi_name, LABEL_GROUP_NAME: name}
        desired[name] = group_budget(
            name=name,
            namespace=objects.namespace(mi),
            selector=labels,
            pods=g.expected_pods,
            released=g.ordinal in released,
            labels=labels,
            owner=_owner(mi),
        )
    return desired, keep


class BudgetOp(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class BudgetWrite:
    """One budget write: create, update (``release``: to minAvailable 0; ``protect``: from 0 back
    to the group's pod count) or delete."""

    op: BudgetOp
    name: str
    body: Obj | None
    live: Obj | None
    release: bool = False
    protect: bool = False


def budget_writes(live: Mapping[str, Obj], desired: Mapping[str, Obj], keep: set[str]) -> list[BudgetWrite]:
    """The writes, in the order that never double-spends: creates and protections first, then
    releases, then deletions of budgets whose group is gone."""
    first: list[BudgetWrite] = []
    releases: list[BudgetWrite] = []
    for name in sorted(desired):
        body = desired[name]
        current = live.get(name)
        if current is None:
            first.append(BudgetWrite(BudgetOp.CREATE, name, body, None))
        elif budget_differs(current, body):
            release = is_released(body) and not is_released(current)
            protect = is_released(current) and not is_released(body)
            (releases if release else first).append(
                BudgetWrite(BudgetOp.UPDATE, name, body, current, release, protect)
            )
    deletes = [
        BudgetWrite(BudgetOp.DELETE, name, None, current)
        for name, current in sorted(live.items())
        if name not in desired and name not in keep and not objects.is_deleting(current)
    ]
    return [*first, *releases, *deletes]


class GroupBudgets:
    """The executor's side of the budgets: observe them (through our own writes), write them."""

    def __init__(
        self,
        client: KubeClient,
        pdbs: Informer,
        recorder: EventRecorder,
        expectations: Expectations,
        field_manager: str,
    ) -> None:
        self.client = client
        self.pdbs = pdbs
        self.recorder = recorder
        self.expectations = expectations
        self.field_manager = field_manager
        self.writer = ChildWriter(client, field_manager, expectations)

    def _lookup(self, child: str) -> Obj | None:
        return self.pdbs.get(child.partition("/")[2])

    def pending(self, owner: str) -> bool:
        """Does the ModelInfer (its expectation key) have a budget write its cache does not show?"""
        return self.expectations.pending(owner, self._lookup)

    def live(self, mi: Mapping[str, Any], owned: Iterable[Obj]) -> dict[str, Obj]:
        """Our budgets by name, as our latest writes left them."""
        namespace = objects.namespace(mi)
        out: dict[str, Obj] = {}
        names = {objects.name(p) for p in owned} | {
            k.rsplit("/", 1)[1]
            for k in self.expectations.keys(expectation_key(KIND, namespace, objects.name(mi)))
        }
        for name in names:
            cached = self.pdbs.get(f"{namespace}/{name}")
            if cached is not None and not _controlled(cached, mi):
                continue
            viewed = self.expectations.view(expectation_key("PodDisruptionBudget", namespace, name), cached)
            if viewed is not None:
                out[name] = viewed
        return out

    def released(self, mi: Mapping[str, Any], live: Mapping[str, Obj]) -> frozenset[int]:
        mi_name = objects.name(mi)
        return frozenset(
            o
            for name, pdb in live.items()
            if is_released(pdb) and (o := group_ordinal(mi_name, name)) is not None
        )

    async def sync(self, mi: Obj, writes: Iterable[BudgetWrite], decision: Decision) -> None:
        """Carry out the decided budget writes (:func:`budget_writes`' order), each a Normal Event
        when it releases or protects a group."""
        namespace = objects.namespace(mi)
        owner = expectation_key(KIND, namespace, objects.name(mi))
        serving = _serving_before(decision)
        for write in writes:
            if write.op is BudgetOp.DELETE:
                assert write.live is not None
                await self.writer.delete(PDBS, write.live, owner=owner)
                continue
            assert write.body is not None
            await write_budget(
                self.writer,
                self.recorder,
                mi,
                write.live,
                write.body,
                owner=owner,
                message=partial(_flip_message, write=write, decision=decision, serving=serving),
            )


def _flip_message(flip: BudgetFlip, write: BudgetWrite, decision: Decision, serving: int) -> str:
    if flip is BudgetFlip.RELEASED:
        ordinal = group_ordinal(decision.mi_name, write.name)
        nodes = ", ".join(decision.cordoned.get(ordinal, ())) if ordinal is not None else ""
        return (
            f"Released group {write.name} for eviction from cordoned node {nodes}: {serving} of "
            f"{decision.replicas} groups available, floor {decision.floor}"
        )
    return (
        f"Protected group {write.name} again (PodDisruptionBudget minAvailable "
        f"{write.body['spec']['minAvailable'] if write.body else 0}): none of its pods is on a cordoned node"
    )


def _serving_before(decision: Decision) -> int:
    """The groups available now, released or not (the Event's arithmetic)."""
    return sum(1 for available in decision.available.values() if available)


def _controlled(obj: Mapping[str, Any], mi: Mapping[str, Any]) -> bool:
    return any(
        ref.get("controller") and ref.get("uid") == objects.uid(mi)
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )

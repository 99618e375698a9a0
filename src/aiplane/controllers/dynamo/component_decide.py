"""What the DynamoComponentDeployment controller does for one component, decided without writing.

:func:`decide` is pure: from a :class:`ComponentObserved` (the DCD, its children as cached and
overlaid with our own writes, and what the children are built from) it returns the writes in the order
they are made and the status wanted after them. The status reads the children as the writes will leave
them (:func:`~aiplane.kube.children.after_write`), so one reconcile reports on what it wrote, as it
did when it read them back from the cache after writing.

* **Children** come from :func:`~.component_children.desired_children`; each is created when absent,
  replaced when its spec hash differs (the Deployment keeps its replica count when the HPA owns it),
  and a replica budget (no spec hash) is rewritten when :func:`~..disruption.budget_differs`. An object
  of a wanted name that this DCD does not control is never touched and is reported
  (``ChildNotControlled``). What the DCD controls and no longer wants is deleted.
* **Replica budgets** (multinode): the shared arbiter releases the budget of a LeaderWorkerSet whose pods
  stand on a cordoned node while the floor (``replicas - maxUnavailable``) allows
  (:mod:`.component_disruption`).
* **Status**: ``Available`` from the Deployment or the LeaderWorkerSets; while Kueue has not admitted
  the component, Kueue's words (:mod:`~aiplane.controllers.queueing`); what holds its pods
  (``waitingFor``); ``DisruptionHeld`` while a drain waits for a replica.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import has_finalizer, is_controlled_by
from aiplane.controllers import causes, queueing
from aiplane.controllers.disruption import Arbitration, arbitrate, budget_differs
from aiplane.controllers.dynamo import component_disruption as cdis
from aiplane.controllers.dynamo.component_children import (
    ANNOTATION_HASH,
    REASON_INVALID,
    REASON_NO_ORCHESTRATOR,
    ChildrenError,
    ChildrenInput,
    Desired,
    child_labels,
    desired_children,
    needs_update,
    node_count,
    updated,
)
from aiplane.controllers.dynamo.component_status import (
    Availability,
    compute_status,
    deployment_availability,
    lws_availability,
)
from aiplane.controllers.dynamo.naming import lws_name
from aiplane.controllers.dynamo.podtemplate import deployment_strategy
from aiplane.kube.children import after_write, key_of

Obj = dict[str, Any]

FINALIZER: Final = "nvidia.com/finalizer"
REASON_CHILD_NOT_CONTROLLED: Final = "ChildNotControlled"
#: Reasons that mean "fix something", not "still rolling out".
FAILURE_REASONS: Final = (REASON_INVALID, REASON_NO_ORCHESTRATOR, REASON_CHILD_NOT_CONTROLLED)


@dataclass(frozen=True)
class ReplicaPods:
    """What the multinode replica budgets read: each LeaderWorkerSet's pods, and the cordoned nodes."""

    pods: Mapping[str, tuple[Obj, ...]]
    cordoned: frozenset[str]


@dataclass(frozen=True)
class ComponentObserved:
    """One DCD and what its decision reads, from the caches overlaid with our own writes.

    ``children``: kind → name → child, for every kind the cluster serves: those this DCD controls and
    those at a name it wants (``<dcd>``, ``<dcd>-<i>``), so a stranger in the way is seen.
    ``replica_pods``: ``None`` where replica budgets are not kept (no LeaderWorkerSet API, or a
    single-node DCD). ``workloads``: the namespace's Kueue Workloads (``None``: Kueue not served).
    ``held``: what holds the component's pods now.
    """

    dcd: Obj
    inputs: ChildrenInput
    children: Mapping[str, Mapping[str, Obj]]
    etcd: bool = False
    replica_pods: ReplicaPods | None = None
    workloads: tuple[Obj, ...] | None = None
    held: tuple[causes.Held, ...] = ()


class ChildOp(Enum):
    CREATE = "create"
    #: The live child brought to the desired one (``updated``): its spec hash differs.
    REPLACE = "replace"
    #: A replica budget (no spec hash) whose ``minAvailable`` or selector differs.
    BUDGET = "budget"


@dataclass(frozen=True)
class ChildWrite:
    op: ChildOp
    #: The object to create, the replacement, or the desired budget.
    body: Obj
    live: Obj | None = None


@dataclass(frozen=True)
class ComponentDecision:
    """The writes, in the order they are made, and the status wanted after them (``None``: none)."""

    #: The DCD is being deleted: clean its etcd keys and drop our finalizer (when it is there).
    deleting: bool = False
    remove_finalizer: bool = False
    add_finalizer: bool = False
    writes: tuple[ChildWrite, ...] = ()
    deletes: tuple[Obj, ...] = ()
    status: Obj | None = None
    #: What holds the pods, as ``status.waitingFor`` says it (a new cause is a Warning Event).
    waiting: tuple[causes.Held, ...] = ()


def child_names(dcd: Mapping[str, Any]) -> frozenset[str]:
    """Every name a child of ``dcd`` can have: ``<dcd>``, and ``<dcd>-<i>`` per multinode replica."""
    name = objects.name(dcd)
    try:
        replicas = int(objects.spec(dcd).get("replicas", 1))
    except (TypeError, ValueError):
        replicas = 0  # the decision reports the bad field
    return frozenset({name, *(lws_name(name, i) for i in range(max(0, replicas)))})


def decide(observed: ComponentObserved, now: datetime) -> ComponentDecision:
    """Everything the controller does for one component (module docstring)."""
    dcd = observed.dcd
    if objects.is_deleting(dcd):
        return ComponentDecision(deleting=True, remove_finalizer=has_finalizer(dcd, FINALIZER))
    base = ComponentDecision(add_finalizer=observed.etcd and not has_finalizer(dcd, FINALIZER))
    try:
        desired = desired_children(observed.inputs)
    except ChildrenError as exc:
        # Retrying cannot fix the spec; a change to the DCD brings it back.
        return _reported(observed, base, Availability("False", exc.reason, str(exc)), None, now)
    budgets, held = _replica_budgets(observed, desired)
    writes, after, conflicts = _child_writes(observed, [*desired.children, *budgets], desired)
    wanted = {key_of(c) for c in (*desired.children, *budgets)}
    remade = _podgroups_to_remake(observed)
    gone = {key_of(pg) for pg in remade}
    deletes = remade + tuple(
        child
        for views in observed.children.values()
        for child in views.values()
        if key_of(child) not in wanted
        and is_controlled_by(child, objects.uid(dcd))
        and not objects.is_deleting(child)
    )
    writes = [w for w in writes if w.live is None or key_of(w.live) not in gone]
    decision = replace(base, writes=tuple(writes), deletes=deletes)
    if conflicts:
        failed = Availability("False", REASON_CHILD_NOT_CONTROLLED, "; ".join(conflicts))
        return _reported(observed, decision, failed, held, now)
    return _reported(observed, decision, _availability(observed, desired, after), held, now)


def _podgroups_to_remake(observed: ComponentObserved) -> tuple[Obj, ...]:
    """Our PodGroups in a phase their own controller never leaves (Coscheduling's Failed: a member
    ended Failed, as a drained pod does) whose LeaderWorkerSet group stands whole again, none of its
    pods failed. Deleted now, each is created anew by the next pass and followed by its controller
    again; otherwise it would say Failed of a running group for ever."""
    gang = observed.inputs.gang
    if not gang.final_phases or observed.replica_pods is None:
        return ()
    out = []
    for name, podgroup in observed.children.get(gang.resource.kind, {}).items():
        if (
            not gang.stuck(podgroup)
            or objects.is_deleting(podgroup)
            or not is_controlled_by(podgroup, objects.uid(observed.dcd))
        ):
            continue
        pods = [p for p in observed.replica_pods.pods.get(name, ()) if not objects.is_deleting(p)]
        members = int(objects.spec(podgroup).get("minMember") or 1)
        if len(pods) >= members and all(objects.status(p).get("phase") != "Failed" for p in pods):
            out.append(podgroup)
    return tuple(out)


def _child_writes(
    observed: ComponentObserved, children: Sequence[Obj], desired: Desired
) -> tuple[list[ChildWrite], dict[str, dict[str, Obj]], list[str]]:
    """The writes of the wanted children, the children as those writes leave them, and the objects in
    the way (same name, not ours)."""
    uid = objects.uid(observed.dcd)
    after = {kind: dict(views) for kind, views in observed.children.items()}
    writes: list[ChildWrite] = []
    conflicts: list[str] = []
    for body in children:
        kind, name = str(body["kind"]), objects.name(body)
        if kind not in observed.children:
            continue  # an API the cluster does not serve (an optional child of it)
        live = observed.children[kind].get(name)
        if live is None:
            writes.append(ChildWrite(ChildOp.CREATE, body))
            after[kind][name] = after_write(None, body)
        elif not is_controlled_by(live, uid):
            conflicts.append(f"{kind} {name} exists and is not controlled by this DCD")
        elif ANNOTATION_HASH not in objects.annotations(body):
            if budget_differs(live, body):  # a replica budget: its minAvailable flips with the arbiter
                writes.append(ChildWrite(ChildOp.BUDGET, body, live))
        elif needs_update(live, body):
            keep = desired.hpa_owns_replicas and kind == "Deployment"
            replacement = updated(live, body, keep_replicas=keep)
            writes.append(ChildWrite(ChildOp.REPLACE, replacement, live))
            after[kind][name] = after_write(live, replacement)
    return writes, after, conflicts


def _replica_budgets(observed: ComponentObserved, desired: Desired) -> tuple[list[Obj], str | None]:
    """The replica budgets the arbiter wants now, and the DisruptionHeld message (None: none held)."""
    inputs = observed.replica_pods
    if not desired.multinode or inputs is None:
        return [], None
    dcd = observed.dcd
    floor = cdis.replica_floor(deployment_strategy(dcd), desired.replicas)
    if floor is None:
        return [], None  # Recreate: the owner accepts the whole component down
    names = _lws_names(desired)
    size = node_count(dcd)
    budgets = observed.children.get("PodDisruptionBudget", {})
    views = [
        cdis.replica_view(name, index, inputs.pods.get(name, ()), size, inputs.cordoned, budgets.get(name))
        for index, name in enumerate(names)
    ]
    arbitration: Arbitration = arbitrate(views, floor)
    labels = child_labels(dcd)
    wanted = [cdis.replica_budget(dcd, name, size, arbitration.is_released(name), labels) for name in names]
    holds = cdis.held(arbitration, views)
    message = cdis.held_message(dcd, holds, arbitration, desired.replicas) if holds else None
    return wanted, message


def _lws_names(desired: Desired) -> list[str]:
    return [objects.name(c) for c in desired.children if c["kind"] == "LeaderWorkerSet"]


def _availability(
    observed: ComponentObserved, desired: Desired, after: Mapping[str, Mapping[str, Obj]]
) -> Availability:
    name = objects.name(observed.dcd)
    if not desired.multinode:
        found = deployment_availability(after.get("Deployment", {}).get(name), name)
    else:
        sets = after.get("LeaderWorkerSet", {})
        names = _lws_names(desired)
        found = lws_availability(names, {n: sets.get(n) for n in names})
    waits = _queue_waits(observed, desired, after) if found.status != "True" else []
    if not waits:
        return found
    # Not available because Kueue has not admitted it: say so, in Kueue's words.
    return replace(found, reason=queueing.REASON_PENDING, message=queueing.wait_message(waits))


def _queue_waits(
    observed: ComponentObserved, desired: Desired, after: Mapping[str, Mapping[str, Obj]]
) -> list[tuple[str, queueing.QuotaWait]]:
    """The component's Kueue Workloads that wait: a LeaderWorkerSet's own, or its Deployment's pods'
    (Kueue gives each pod of a Deployment a Workload owned by the pod)."""
    if observed.workloads is None:
        return []
    name = objects.name(observed.dcd)
    if desired.multinode:
        waits = []
        sets = after.get("LeaderWorkerSet", {})
        for lws in (sets.get(n) for n in _lws_names(desired)):
            if lws is None or queueing.QUEUE_LABEL not in objects.labels(lws):
                continue
            for wl in queueing.owned_workloads(observed.workloads, [objects.uid(lws)]):
                wait = queueing.quota_wait(wl)
                if wait is not None:
                    waits.append((f"LeaderWorkerSet {objects.name(lws)}", wait))
        return waits
    deployment = after.get("Deployment", {}).get(name)
    if deployment is None or queueing.QUEUE_LABEL not in objects.labels(deployment):
        return []
    return [
        (f"pod {pod}", wait)
        for wl in observed.workloads
        if (pod := deployment_pod_owner(wl, name)) and (wait := queueing.quota_wait(wl)) is not None
    ]


def _reported(
    observed: ComponentObserved,
    decision: ComponentDecision,
    availability: Availability,
    held: str | None,
    now: datetime,
) -> ComponentDecision:
    """``decision`` with the status wanted: availability, what holds the pods, DisruptionHeld."""
    dcd = observed.dcd
    blocked = availability.status == "True" or availability.reason in FAILURE_REASONS
    waiting = () if blocked else observed.held
    status = compute_status(dcd, availability, now=now, waiting=waiting)
    status = cdis.with_held(status, held, generation=objects.generation(dcd) or 0, now=now)
    return replace(decision, status=status, waiting=waiting)


def deployment_of_pod_name(pod: str) -> str | None:
    """``<deployment>-<pod-template-hash>-<5 random>``: the Deployment a ReplicaSet's pod is named after."""
    parts = pod.rsplit("-", 2)
    return parts[0] if len(parts) == 3 and len(parts[2]) == 5 else None


def deployment_pod_owner(workload: Mapping[str, Any], deployment: str) -> str | None:
    """The name of the pod owning ``workload`` when it is a pod of ``deployment``, else None."""
    for ref in objects.meta(workload).get("ownerReferences") or []:
        name = str(ref.get("name") or "")
        if ref.get("kind") == "Pod" and deployment_of_pod_name(name) == deployment:
            return name
    return None


__all__ = [
    "FAILURE_REASONS",
    "FINALIZER",
    "REASON_CHILD_NOT_CONTROLLED",
    "ChildOp",
    "ChildWrite",
    "ComponentDecision",
    "ComponentObserved",
    "ReplicaPods",
    "child_names",
    "decide",
    "deployment_of_pod_name",
    "deployment_pod_owner",
]

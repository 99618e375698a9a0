"""Volcano gang scheduler-lite: all-or-nothing placement of the pods of a Volcano PodGroup.

Why: ModelInfer (and any Volcano workload) creates a ``scheduling.volcano.sh/v1beta1`` PodGroup per
group of pods that must start together, and pods with ``schedulerName: volcano`` and the annotation
``scheduling.k8s.io/group-name``. Controllers watch the PodGroup's ``status.phase`` and the pods'
``PodScheduled`` conditions; without a gang scheduler those pods would never run, and with the default
scheduler a gang that does not fit would start partially and deadlock.

**Pods**: ``schedulerName: volcano`` with ``scheduling.k8s.io/group-name: <podgroup>``; the task is the
``volcano.sh/task-spec`` annotation (or label). A pod whose annotation names a PodGroup that does not
exist stays Pending, untouched. A pod without the annotation gets what Volcano's PodGroup controller
(vc-controller-manager) gives it: a PodGroup ``podgroup-<uid of its controller, or its own uid>`` with
``minMember: 1``, ``minResources`` its requests and its controller's owner references (or one to the
pod), and the annotation naming it (``create_podgroups=False`` turns that off).

**One scheduling pass per PodGroup** (Volcano's session, for one job):

1. *Valid*: fewer valid pods (pending, bound, running, succeeded) than ``spec.minMember`` → condition
   ``Unschedulable``/``NotEnoughTasks`` ("Not enough valid tasks for gang-scheduling, valid: 2, min:
   4"); a ``spec.minTaskMember`` task short of pods (checked only when ``minMember`` ≥ their sum) →
   ``NotEnoughPodsOfTask``. Nothing is placed.
2. *Enqueue*: a ``Pending`` group moves to ``Inqueue`` when it has no ``spec.minResources``, or when
   those (cpu, memory and extended resources) fit in the Ready nodes' allocatable * ``overcommit_factor``
   (1.2, Volcano's default) minus what is requested and what other Inqueue/Running groups still
   reserve; otherwise a Normal ``Unschedulable`` event "resource in cluster is overused", and the
   group and its pods are reported unschedulable as in 3 (nobody tried: all pods ``Unschedulable``).
3. *Allocate* (``Inqueue``, ``Running``, ``Unknown``): pending pods in priority/creation/name order are
   placed tentatively, one after the other, with running accounting (the same filters as
   :mod:`.scheduler`, Volcano's way: resources first, only the first insufficient one named). Volcano
   stops at the first pod that fits nowhere when ``minMember`` equals the number of pods, and skips
   the rest of that pod's task otherwise. If bound + tentative pods reach ``minMember`` (and every
   ``minTaskMember``), all tentative placements are bound (``pods/binding``), each with a ``Scheduled``
   event, the PodGroup gets the ``Scheduled`` condition ("tasks in gang are ready to be scheduled") and
   a ``Scheduled`` event "pod group is ready". Otherwise nothing is bound: the PodGroup gets
   ``Unschedulable``/``NotEnoughResources`` "3/4 tasks in gang unschedulable: pod group is not ready,
   4 Pending, 4 minAvailable; Pending: 1 Schedulable, 3 Unschedulable. Origin reason is p-1: 0/9 nodes
   are unavailable: 9 Insufficient amd.com/gpu." and a Warning ``Unschedulable`` event, and every
   pending pod ``PodScheduled=False``: reason ``Schedulable`` ("Pod ns/p can possibly be assigned to
   n, once minAvailable is satisfied") for the tentatively placed ones, ``Unschedulable`` with its own
   fit error for the one that failed and with the group's message for the others, each with a
   ``FailedScheduling`` event. Once the gang is formed, later pods are bound one by one as they fit.
4. *Status*: ``phase`` ``Running`` when bound + finished pods ≥ ``minMember`` (``Completed`` when they
   all succeeded), ``Unknown`` when some run but the gang could not be re-formed, else ``Pending`` or
   ``Inqueue`` as it was; ``running``/``succeeded``/``failed`` pod counts (omitted when 0). Written
   through ``/status`` only when something changed; conditions keep their ``lastTransitionTime`` and
   ``transitionID`` until their status, reason or message changes. Like Volcano, a group that formed
   keeps its old ``Unschedulable`` condition next to ``Scheduled``.

A group waiting for capacity is retried when one of its pending pods passes the filters on a node
that appeared or changed, or had a bound pod deleted or finished (:func:`.scheduler.capacity_node`);
a group waiting for admission (``Pending``) on any such change; all of them every ``retry_interval``
seconds (30).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import (
    PODS,
    Obj,
    Work,
    record_event,
    write_status,
)
from aiplane.sim.agents.scheduler import (
    ERR_NODE_AFFINITY,
    ERR_NODE_UNSCHEDULABLE,
    TAINT_UNSCHEDULABLE,
    Ledger,
    NodeInfo,
    NodeStatus,
    PodInfo,
    PodKey,
    ResourceList,
    SchedulerCache,
    SchedulingLoop,
    find_node,
    fits_on_any,
    insufficient,
    resource_list,
    scheduling_order,
    taint_reason,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions, rfc3339
from aiplane.sim.apiserver.store import ADDED, DELETED, Event

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

VOLCANO = "volcano"
#: Event source of the Volcano scheduler, and the field manager its status writes show.
COMPONENT = "volcano"
FIELD_MANAGER = "vc-scheduler"
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
PODGROUPS = "scheduling.volcano.sh/podgroups"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

#: PodGroup condition types and reasons (volcano.sh/apis scheduling/v1beta1).
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
GANG_READY_REASON = "tasks in gang are ready to be scheduled"
POD_GROUP_NOT_READY = "pod group is not ready"
POD_GROUP_READY = "pod group is ready"
OVERUSED = "resource in cluster is overused"
#: Volcano's predicate reason when a node runs as many pods as it may.
ERR_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"

#: What Volcano's PodGroup controller names the PodGroups it creates (``podgroup-<uid>``), and its manager.
PODGROUP_PREFIX = "podgroup-"
CONTROLLER_MANAGER = "vc-controller-manager"

#: Volcano's task statuses that hold resources (``AllocatedStatus``) and count as "ready".
ALLOCATED = frozenset({"Allocated", "Binding", "Bound", "Running"})


# --- pure decisions ------------------------------------------------------------------------------------


def task_status(pod: Obj) -> str:
    """Volcano's ``TaskStatus`` of a pod: Pending, Bound, Running, Releasing, Succeeded, Failed."""
    phase = objects.status(pod).get("phase")
    if phase == "Succeeded":
        return "Succeeded"
    if phase == "Failed":
        return "Failed"
    if objects.is_deleting(pod):
        return "Releasing"
    if objects.spec(pod).get("nodeName"):
        return "Running" if phase == "Running" else "Bound"
    return "Pending"


def volcano_filter_node(
    pod: PodInfo, node: NodeInfo, requested: Mapping[str, int], pods: int, *, taint_details: bool = True
) -> NodeStatus | None:
    """Volcano's allocate-time checks: resources first (only the first insufficient one is named:
    cpu, memory, then the others by name), then the pod count, ``NodeUnschedulable``, ``NodeAffinity``
    and ``TaintToleration`` predicates."""
    reasons = insufficient(pod, node, requested, pods)
    resources = [r for r in reasons if r.startswith("Insufficient ")]
    if resources:
        return NodeStatus((resources[0],), resolvable=True)
    if reasons:
        return NodeStatus((ERR_POD_NUMBER_EXCEEDED,), resolvable=True)
    if node.unschedulable and not pod.tolerates({"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}):
        return NodeStatus((ERR_NODE_UNSCHEDULABLE,))
    if not pod.affinity.matches(node):
        return NodeStatus((ERR_NODE_AFFINITY,))
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not pod.tolerates(taint):
            return NodeStatus((taint_reason(taint, taint_details),))
    return None


def volcano_fit_error(total_nodes: int, statuses: Sequence[NodeStatus]) -> str:
    """``FitErrors.Error()``: ``0/N nodes are unavailable: <sorted "count reason" histogram>.``"""
    head = f"0/{total_nodes} nodes are unavailable"
    counts = Counter(r for s in statuses for r in s.reasons)
    if not counts:
        return head
    return f"{head}: {', '.join(sorted(f'{n} {r}' for r, n in counts.items()))}."


def _histogram(counts: Mapping[str, int]) -> str:
    return ", ".join(sorted(f"{n} {k}" for k, n in counts.items() if n))


def job_fit_error(
    statuses: Mapping[str, int],
    min_member: int,
    pending_reasons: Mapping[str, int],
    origin: tuple[str, str] | None = None,
) -> str:
    """``JobInfo.FitError()``: "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable.
    Origin reason is p-0: 0/9 nodes are unavailable: …" (histograms sorted as strings, as Go does)."""
    message = f"{POD_GROUP_NOT_READY}, {_histogram({**statuses, 'minAvailable': min_member})}"
    if any(pending_reasons.values()):
        message += f"; Pending: {_histogram(pending_reasons)}"
    if origin is not None:
        message += f". Origin reason is {origin[0]}: {origin[1]}"
    return message


def schedulable_message(pod: PodInfo, node: str) -> str:
    return (
        f"Pod {pod.namespace}/{pod.name} can possibly be assigned to {node}, once minAvailable is satisfied"
    )


def task_minimums_met(counts: Mapping[str, int], min_member: int, min_task: Mapping[str, int]) -> bool:
    """``CheckTaskReady``: every ``minTaskMember`` is met — skipped when ``minMember`` is below their sum."""
    if min_member < sum(min_task.values()):
        return True
    return all(counts.get(task, 0) >= need for task, need in min_task.items() if need > 0)


@dataclass
class GangPlan:
    """The outcome of one allocation pass over a gang's pending pods."""

    #: Bind ``assignments`` now (the gang reaches minMember, or had already formed).
    ready: bool
    #: Tentative placements, in the order they were made.
    assignments: dict[PodKey, str] = field(default_factory=dict)
    #: Pods tried that fit nowhere, with every node's status.
    failures: dict[PodKey, list[NodeStatus]] = field(default_factory=dict)


def plan_gang(
    pending: Sequence[PodInfo],
    ready_by_task: Mapping[str, int],
    min_member: int,
    min_task: Mapping[str, int],
    nodes: Sequence[NodeInfo],
    ledger: Ledger,
    *,
    total_tasks: int | None = None,
    taint_details: bool = True,
) -> GangPlan:
    """Place ``pending`` (in that order) tentatively on ``nodes`` with running accounting in ``ledger``
    and say whether the gang may be bound: ready pods (``ready_by_task``: bound, running or succeeded
    per task) plus placed ones reach ``min_member`` and every task minimum (pure; ``ledger`` gets the
    tentative placements)."""
    total = len(pending) + sum(ready_by_task.values()) if total_tasks is None else total_tasks
    formed = sum(ready_by_task.values()) >= min_member and task_minimums_met(
        ready_by_task, min_member, min_task
    )
    plan = GangPlan(ready=False)
    failed_tasks: set[str] = set()
    for pod in pending:
        if pod.task and pod.task in failed_tasks:
            continue  # Volcano skips the rest of a task that already failed to fit
        node, statuses = find_node(
            pod, nodes, ledger, filter_fn=volcano_filter_node, taint_details=taint_details
        )
        if node is None:
            plan.failures[pod.key] = statuses
            if not formed and min_member >= total:
                break  # every pod is needed: no point trying the others
            failed_tasks.add(pod.task)
            continue
        ledger.add(node, pod.requests)
        plan.assignments[pod.key] = node
    counts = Counter(ready_by_task)
    by_key = {p.key: p for p in pending}
    for key in plan.assignments:
        counts[by_key[key].task] += 1
    plan.ready = formed or (
        sum(counts.values()) >= min_member and task_minimums_met(counts, min_member, min_task)
    )
    return plan


def gang_resource(name: str) -> bool:
    """Whether a ``minResources`` key is a resource Volcano compares (not ``pods``, ``count/…``, or
    quota-style ``requests.``/``limits.`` keys)."""
    return name != "pods" and not name.startswith(("count/", "requests.", "limits."))


def enqueueable(
    min_resources: Mapping[str, int] | None,
    total: Mapping[str, int],
    used: Mapping[str, int],
    reserved: Mapping[str, int],
    overcommit_factor: float = 1.2,
) -> bool:
    """Volcano's ``overcommit`` enqueue check: ``reserved + minResources <= total * factor - used`` in each
    dimension ``minResources`` names; no ``minResources``: always."""
    if min_resources is None:
        return True
    for name, amount in min_resources.items():
        if amount <= 0 or not gang_resource(name):
            continue
        idle = total.get(name, 0) * overcommit_factor - used.get(name, 0)
        if reserved.get(name, 0) + amount > idle:
            return False
    return True


def podgroup_phase(current: str, statuses: Mapping[str, int], min_member: int, unschedulable: bool) -> str:
    """Volcano's ``jobStatus`` phase: ``Unknown`` if pods run but the gang is unschedulable now; ``Running``
    when allocated + finished pods reach ``minMember`` (``Completed`` when all of them succeeded); else
    ``Inqueue`` stays, anything else becomes ``Pending``."""
    if statuses.get("Running", 0) and unschedulable:
        return "Unknown"
    allocated = sum(n for s, n in statuses.items() if s in ALLOCATED or s in ("Succeeded", "Failed"))
    if allocated and allocated >= min_member:
        return "Completed" if statuses.get("Succeeded", 0) == allocated else "Running"
    return "Inqueue" if current == "Inqueue" else "Pending"


def set_condition(
    conditions: Sequence[Mapping[str, Any]], kind: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """``UpdatePodGroupCondition`` with ``status: True``; an unchanged condition keeps its time and
    ``transitionID``."""
    out = [dict(c) for c in conditions]
    new = {
        "type": kind,
        "status": "True",
        "lastTransitionTime": now,
        "transitionID": str(uuid.uuid4()),
        "reason": reason,
    }
    if message:
        new["message"] = message
    for i, cond in enumerate(out):
        if cond.get("type") != kind:
            continue
        if (
            cond.get("status") == "True"
            and cond.get("reason") == reason
            and (cond.get("message") or "") == message
        ):
            return out
        out[i] = new
        return out
    out.append(new)
    return out


def podgroup_name_for(pod: Obj) -> str:
    """``GeneratePodgroupName``: ``podgroup-`` + the uid of the pod's controller, or of the pod."""
    for ref in objects.meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return f"{PODGROUP_PREFIX}{ref.get('uid')}"
    return f"{PODGROUP_PREFIX}{objects.uid(pod)}"


def podgroup_for(pod: Obj, requests: Mapping[str, int]) -> Obj:
    """The PodGroup Volcano's controller creates for a Volcano pod without one (``minMember: 1``)."""
    meta = objects.meta(pod)
    refs = meta.get("ownerReferences") or []
    if not any(ref.get("controller") for ref in refs):
        refs = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    minimum = {
        name: Quantity.from_milli(value).canonical() if name == "cpu" else str(value)
        for name, value in sorted(requests.items())
    }
    spec: Obj = {"minMember": 1, "minResources": minimum}
    priority_class = objects.spec(pod).get("priorityClassName")
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name_for(pod),
            "namespace": meta.get("namespace"),
            "ownerReferences": [dict(r) for r in refs],
        },
        "spec": spec,
    }


# --- the agent -------------------------------------------------------------------------------------------


def group_of(pod: Obj) -> str | None:
    """The PodGroup a Volcano pod belongs to (``None`` for pods of other schedulers or without one)."""
    if objects.spec(pod).get("schedulerName") != VOLCANO:
        return None
    name = objects.annotations(pod).get(GROUP_NAME_KEY)
    return str(name) if name else None


def _gang_view(pod: Obj | None) -> tuple[Any, ...]:
    """The parts of a member pod whose change matters to its group (not its conditions)."""
    if pod is None:
        return ()
    return (
        objects.spec(pod).get("nodeName"),
        objects.status(pod).get("phase"),
        objects.meta(pod).get("deletionTimestamp"),
        group_of(pod),
        objects.spec(pod).get("schedulingGates"),
        objects.spec(pod).get("tolerations"),
    )


class GangScheduler(SchedulingLoop):
    """Volcano-lite: schedules the pods of each PodGroup all-or-nothing and keeps the PodGroup's status."""

    name = "gang"
    component = COMPONENT
    field_manager = FIELD_MANAGER

    def __init__(
        self,
        api: Api,
        cache: SchedulerCache,
        *,
        overcommit_factor: float = 1.2,
        retry_interval: float | None = 30.0,
        taint_details: bool = True,
        settle_delay: float = 0.05,
        create_podgroups: bool = True,
    ) -> None:
        # taint_details: as the Kubernetes plugins Volcano vendors do.
        super().__init__(api, cache, retry_interval=retry_interval, taint_details=taint_details)
        #: Play Volcano's PodGroup controller: a one-pod PodGroup for a Volcano pod without one.
        self.create_podgroups = create_podgroups
        #: Seconds a new PodGroup or member pod waits before its group is looked at, so that a
        #: controller creating a gang pod by pod is seen whole (Volcano schedules in periodic sessions).
        self.settle_delay = settle_delay
        self._settling: set[tuple[str, str]] = set()
        #: Volcano's ``overcommit-factor`` for the enqueue check.
        self.overcommit_factor = overcommit_factor
        self._members: dict[tuple[str, str], set[str]] = {}
        self._group: dict[PodKey, str] = {}
        self._waiting: dict[tuple[str, str], None] = {}
        self._group_events: dict[tuple[str, str], tuple[str, str]] = {}
        self._pg_rt: ResourceType | None = None

    # --- index and events ---------------------------------------------------------------------------

    def _index(self, pod: Obj, removed: bool) -> None:
        meta = objects.meta(pod)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        old = self._group.pop(key, None)
        if old is not None:
            members = self._members.get((key[0], old))
            if members is not None:
                members.discard(key[1])
                if not members:
                    del self._members[(key[0], old)]
        group = None if removed else group_of(pod)
        if group is not None:
            self._group[key] = group
            self._members.setdefault((key[0], group), set()).add(key[1])

    def resync(self) -> None:
        for pod in self.store.items(PODS):
            self._index(pod, removed=False)
        for pg in self.store.items(PODGROUPS):
            meta = objects.meta(pg)
            self.enqueue(("group", str(meta.get("namespace", "")), str(meta["name"])))

    def on_event(self, event: Event) -> None:
        if event.key == PODS:
            pod = event.obj
            self._index(pod, removed=event.type == DELETED)
            if event.type == DELETED:
                self.reporter.forget(objects.uid(pod))
            if self.create_podgroups and event.type != DELETED and self._needs_podgroup(pod):
                meta = objects.meta(pod)
                self.enqueue(("adopt", str(meta.get("namespace", "")), str(meta.get("name", ""))))
            groups = {group_of(event.old) if event.old is not None else None, group_of(pod)} - {None}
            if groups and (event.type in (ADDED, DELETED) or _gang_view(event.old) != _gang_view(pod)):
                namespace = objects.namespace(pod)
                for group in sorted(str(g) for g in groups):
                    if event.type == ADDED:
                        self._settle((namespace, group))
                    else:
                        self.enqueue(("group", namespace, group))
        elif event.key == PODGROUPS:
            meta = objects.meta(event.obj)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            old = event.old or {}
            if event.type == ADDED:
                self._settle(key)
            elif event.type == DELETED or old.get("spec") != event.obj.get("spec"):
                self.enqueue(("group", *key))
            if event.type == DELETED:
                self._waiting.pop(key, None)
                self._group_events.pop(key, None)
        if self._waiting:
            self._note_capacity(event)

    def _settle(self, key: tuple[str, str]) -> None:
        if key not in self._settling:
            self._settling.add(key)
            self.later(self.settle_delay, ("settled", *key))

    # --- work -----------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        if work[0] == "settled":
            self._settling.discard((work[1], work[2]))
            self._sync(work[1], work[2])
        elif work[0] == "group":
            self._sync(work[1], work[2])
        elif work[0] == "nodes":
            self._nodes_changed()
        elif work[0] == "adopt":
            self._adopt(work[1], work[2])
        elif work[0] == "retry":
            self._periodic = None
            groups = []
            for namespace, name in self._waiting:
                pg = self.store.get(PODGROUPS, namespace, name)
                if pg is not None:
                    groups.append((str(objects.meta(pg).get("creationTimestamp") or ""), namespace, name))
            for _, namespace, name in sorted(groups):
                self.enqueue(("group", namespace, name))

    @staticmethod
    def _needs_podgroup(pod: Obj) -> bool:
        return (
            objects.spec(pod).get("schedulerName") == VOLCANO
            and not objects.annotations(pod).get(GROUP_NAME_KEY)
            and not objects.is_deleting(pod)
            and task_status(pod) not in ("Succeeded", "Failed")
        )

    def _adopt(self, namespace: str, name: str) -> None:
        """What Volcano's PodGroup controller does for a Volcano pod without a group: create
        ``podgroup-<uid>`` (unless it exists) and annotate the pod with it."""
        pod = self.store.get(PODS, namespace, name)
        if pod is None or not self._needs_podgroup(pod):
            return
        group = podgroup_name_for(pod)
        pg_rt = self._podgroup_rt()
        if self.store.get(PODGROUPS, namespace, group) is None:
            try:
                self.api.create(
                    pg_rt,
                    namespace,
                    podgroup_for(pod, self.cache.requests_of(pod)),
                    WriteOptions(field_manager=CONTROLLER_MANAGER),
                )
            except ApiError as err:
                if err.code == 404:
                    return  # its namespace is going away
                if err.code != 409:
                    raise
        meta = objects.meta(pod)
        annotations = {**(meta.get("annotations") or {}), GROUP_NAME_KEY: group}
        try:
            self.api.update(
                self.reporter.pod_rt,
                namespace,
                name,
                {**pod, "metadata": {**meta, "annotations": annotations}},
                WriteOptions(field_manager=CONTROLLER_MANAGER),
            )
        except ApiError as err:
            if err.code == 409:
                self.later(0.05, ("adopt", namespace, name))
            elif err.code not in (404, 422):
                raise

    def _nodes_changed(self) -> None:
        """Queue the waiting groups a node change may help: those waiting for admission, and those with
        a pending pod that passes the filters on a changed node."""
        changed, self._changed_nodes = self._changed_nodes, set()
        ledger = self.cache.ledger()
        for namespace, name in list(self._waiting):
            pg = self.store.get(PODGROUPS, namespace, name)
            if pg is None:
                continue
            if objects.status(pg).get("phase") in (None, "", "Pending"):
                self.enqueue(("group", namespace, name))
                continue
            for pod in self._members_of(namespace, name):
                if task_status(pod) == "Pending" and fits_on_any(
                    self.cache.pod_info(pod), changed, self.cache.nodes, ledger
                ):
                    self.enqueue(("group", namespace, name))
                    break

    def _members_of(self, namespace: str, group: str) -> list[Obj]:
        out = []
        for name in sorted(self._members.get((namespace, group), ())):
            pod = self.store.get(PODS, namespace, name)
            if pod is not None and group_of(pod) == group:
                out.append(pod)
        return out

    def _sync(self, namespace: str, group: str) -> None:
        key = (namespace, group)
        pg = self.store.get(PODGROUPS, namespace, group)
        if pg is None:
            self._waiting.pop(key, None)
            return
        spec = pg.get("spec") or {}
        status = dict(objects.status(pg))
        min_member = int(spec.get("minMember") or 0)
        min_task = {str(k): int(v or 0) for k, v in (spec.get("minTaskMember") or {}).items()}
        members = self._members_of(namespace, group)
        statuses = Counter(task_status(p) for p in members)
        pending_pods = [
            p for p in members if task_status(p) == "Pending" and not objects.spec(p).get("schedulingGates")
        ]
        infos = {id(p): self.cache.pod_info(p) for p in members}
        ready_by_task: Counter[str] = Counter()
        valid_by_task: Counter[str] = Counter()
        for pod in members:
            state = task_status(pod)
            if state in ALLOCATED or state == "Succeeded":
                ready_by_task[infos[id(pod)].task] += 1
            if state in ALLOCATED or state in ("Succeeded", "Pending"):
                valid_by_task[infos[id(pod)].task] += 1
        now = rfc3339(self.api.clock())
        conditions: list[dict[str, Any]] = [dict(c) for c in status.get("conditions") or []]
        phase = str(status.get("phase") or "Pending")
        unschedulable = False
        waiting = False
        valid = sum(valid_by_task.values())
        if valid < min_member:
            conditions = set_condition(
                conditions,
                UNSCHEDULABLE,
                NOT_ENOUGH_TASKS,
                f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {min_member}",
                now,
            )
        elif not task_minimums_met(valid_by_task, min_member, min_task):
            conditions = set_condition(
                conditions,
                UNSCHEDULABLE,
                NOT_ENOUGH_PODS_OF_TASK,
                "Not enough valid pods of each task for gang-scheduling",
                now,
            )
        else:
            if phase == "Pending":
                if self._enqueueable(pg, members):
                    phase = "Inqueue"
                else:
                    unschedulable = waiting = True
                    self._group_event(pg, "Normal", UNSCHEDULABLE, OVERUSED)
                    conditions = self._report_unschedulable(
                        pg,
                        conditions,
                        members,
                        statuses,
                        scheduling_order(infos[id(p)] for p in pending_pods),
                        {(namespace, objects.name(p)): p for p in pending_pods},
                        GangPlan(ready=False),
                        [],
                        min_member,
                        now,
                    )
            if phase != "Pending" and pending_pods:
                pending = scheduling_order(infos[id(p)] for p in pending_pods)
                formed = sum(ready_by_task.values()) >= min_member and task_minimums_met(
                    ready_by_task, min_member, min_task
                )
                nodes = [n for n in self.cache.nodes.values() if n.ready == "True"]
                plan = plan_gang(
                    pending,
                    ready_by_task,
                    min_member,
                    min_task,
                    nodes,
                    self.cache.ledger(),
                    total_tasks=len(members),
                    taint_details=self.taint_details,
                )
                pods_by_key = {(namespace, objects.name(p)): p for p in pending_pods}
                if plan.ready:
                    for pod_key, node in plan.assignments.items():
                        self._bind(pods_by_key[pod_key], node)
                    for pod_key, failed in plan.failures.items():
                        self.reporter.report(
                            pods_by_key[pod_key], "Unschedulable", volcano_fit_error(len(nodes), failed)
                        )
                    waiting = bool(plan.failures)
                    if not formed:
                        conditions = set_condition(conditions, SCHEDULED, GANG_READY_REASON, "", now)
                        self._group_event(pg, "Normal", SCHEDULED, POD_GROUP_READY)
                else:
                    unschedulable = waiting = True
                    conditions = self._report_unschedulable(
                        pg,
                        conditions,
                        members,
                        statuses,
                        pending,
                        pods_by_key,
                        plan,
                        nodes,
                        min_member,
                        now,
                    )
        # status after any bindings
        members = self._members_of(namespace, group)
        statuses = Counter(task_status(p) for p in members)
        phase = podgroup_phase(phase, statuses, min_member, unschedulable)
        if phase in ("Running", "Completed") and not any(c.get("type") == SCHEDULED for c in conditions):
            conditions = set_condition(conditions, SCHEDULED, GANG_READY_REASON, "", now)
        new_status: dict[str, Any] = {
            k: v
            for k, v in status.items()
            if k not in ("phase", "conditions", "running", "succeeded", "failed")
        }
        new_status["phase"] = phase
        if conditions:
            new_status["conditions"] = conditions
        for field_name, state in (("running", "Running"), ("succeeded", "Succeeded"), ("failed", "Failed")):
            if statuses.get(state):
                new_status[field_name] = statuses[state]
        if new_status != objects.status(pg):
            self._write_status(pg, new_status)
        if waiting:
            self._waiting[key] = None
            self._schedule_periodic_retry()
        else:
            self._waiting.pop(key, None)

    def _report_unschedulable(
        self,
        pg: Obj,
        conditions: list[dict[str, Any]],
        members: list[Obj],
        statuses: Mapping[str, int],
        pending: list[PodInfo],
        pods_by_key: Mapping[PodKey, Obj],
        plan: GangPlan,
        nodes: Sequence[NodeInfo],
        min_member: int,
        now: str,
    ) -> list[dict[str, Any]]:
        origin = None
        fit_errors: dict[PodKey, str] = {}
        for pod_key, failed in plan.failures.items():
            fit_errors[pod_key] = volcano_fit_error(len(nodes), failed)
            if origin is None:
                origin = (pod_key[1], fit_errors[pod_key])
        reasons = Counter("Schedulable" if p.key in plan.assignments else "Unschedulable" for p in pending)
        job_fit = job_fit_error(statuses, min_member, reasons, origin)
        ready = sum(n for s, n in statuses.items() if s in ALLOCATED or s == "Succeeded")
        unready = min_member - ready - len(plan.assignments)
        conditions = set_condition(
            conditions,
            UNSCHEDULABLE,
            NOT_ENOUGH_RESOURCES,
            f"{unready}/{len(members)} tasks in gang unschedulable: {job_fit}",
            now,
        )
        self._group_event(
            pg,
            "Warning",
            UNSCHEDULABLE,
            f"{len(pending)}/{len(members)} tasks in gang unschedulable: {job_fit}",
        )
        for info in pending:
            pod = pods_by_key[info.key]
            if info.key in plan.assignments:
                self.reporter.report(
                    pod, "Schedulable", schedulable_message(info, plan.assignments[info.key])
                )
            elif info.key in fit_errors:
                self.reporter.report(pod, "Unschedulable", fit_errors[info.key])
            else:
                self.reporter.report(pod, "Unschedulable", job_fit)
        return conditions

    # --- helpers ---------------------------------------------------------------------------------------

    def _enqueueable(self, pg: Obj, members: Iterable[Obj]) -> bool:
        spec = pg.get("spec") or {}
        if spec.get("minResources") is None:
            return True
        minimum = resource_list(spec["minResources"])
        total: ResourceList = Counter()
        used: ResourceList = Counter()
        for node in self.cache.nodes.values():
            if node.ready != "True":
                continue
            for name, value in node.allocatable.items():
                total[name] += value
            for name, value in (self.cache.requested.get(node.name) or {}).items():
                used[name] += value
        reserved: ResourceList = Counter()
        own = objects.meta(pg)
        for other in self.store.items(PODGROUPS):
            meta = objects.meta(other)
            if (meta.get("namespace"), meta.get("name")) == (own.get("namespace"), own.get("name")):
                continue
            other_phase = objects.status(other).get("phase")
            other_min = objects.spec(other).get("minResources")
            # Only Inqueue jobs hold a reservation beyond what they have allocated (Volcano's
            # overcommit plugin counts inqueue jobs); a Running group's pods are already in ``used``.
            if other_phase != "Inqueue" or other_min is None:
                continue
            allocated: ResourceList = Counter()
            for pod in self._members_of(str(meta.get("namespace", "")), str(meta["name"])):
                if task_status(pod) in ALLOCATED:
                    for name, value in self.cache.requests_of(pod).items():
                        allocated[name] += value
            for name, value in resource_list(other_min).items():
                reserved[name] += max(value - allocated.get(name, 0), 0)
        return enqueueable(minimum, total, used, reserved, self.overcommit_factor)

    def _group_event(self, pg: Obj, type_: str, reason: str, message: str) -> None:
        meta = objects.meta(pg)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if self._group_events.get(key) == (reason, message):
            return
        self._group_events[key] = (reason, message)
        record_event(self.api, pg, type_, reason, message, component=COMPONENT)

    def _podgroup_rt(self) -> ResourceType:
        """The PodGroup resource type, looked up on first use."""
        if self._pg_rt is None:
            self._pg_rt = self.api.resource(PODGROUP_API_VERSION, "PodGroup")
        return self._pg_rt

    def _write_status(self, pg: Obj, status: dict[str, Any]) -> None:
        try:
            write_status(self.api, self._podgroup_rt(), pg, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code == 409:
                meta = objects.meta(pg)
                self.later(0.05, ("group", str(meta.get("namespace", "")), str(meta["name"])))
            elif err.code != 404:
                raise

    @property
    def waiting(self) -> list[tuple[str, str]]:
        """PodGroups (namespace, name) waiting for capacity."""
        return list(self._waiting)


__all__ = [
    "GangPlan",
    "GangScheduler",
    "enqueueable",
    "job_fit_error",
    "plan_gang",
    "podgroup_for",
    "podgroup_name_for",
    "podgroup_phase",
    "set_condition",
    "task_minimums_met",
    "task_status",
    "volcano_filter_node",
    "volcano_fit_error",
]

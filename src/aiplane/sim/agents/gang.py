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
3. *Allocate* (``Inqueue``, ``Running``, ``Unknown``): pending pods in Volcano's task order (priority,
   pod index, creation) are placed tentatively, one after the other, each on the fitting node with the
   best ``binpack`` + ``nodeorder`` score (:func:`.gang_plan.volcano_find_node`; packing, so gangs do
   not fragment GPU nodes), with running accounting (the same filters as
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

The rules (placement plan, admission, phase, conditions) are pure functions in
:mod:`aiplane.sim.agents.gang_plan`; this module is the agent that applies them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents.base import (
    PODS,
    Obj,
    Work,
    record_event,
    write_status,
)
from aiplane.sim.agents.gang_plan import (
    ALLOCATED,
    COMPONENT,
    CONTROLLER_MANAGER,
    FIELD_MANAGER,
    GANG_READY_REASON,
    GPU_BINPACK_SCORING,
    GROUP_NAME_KEY,
    NOT_ENOUGH_PODS_OF_TASK,
    NOT_ENOUGH_RESOURCES,
    NOT_ENOUGH_TASKS,
    OVERUSED,
    POD_GROUP_READY,
    PODGROUP_API_VERSION,
    PODGROUPS,
    READY_STATES,
    SCHEDULED,
    UNSCHEDULABLE,
    VALID_STATES,
    VOLCANO,
    GangPlan,
    VolcanoScoring,
    enqueueable,
    gang_view,
    group_of,
    job_fit_error,
    plan_gang,
    podgroup_for,
    podgroup_name_for,
    podgroup_phase,
    schedulable_message,
    set_condition,
    task_minimums_met,
    task_order,
    task_status,
    volcano_fit_error,
)
from aiplane.sim.agents.scheduler import SchedulerCache, SchedulingLoop
from aiplane.sim.agents.scheduler_filters import (
    NodeInfo,
    PodInfo,
    PodKey,
    ResourceList,
    fits_on_any,
    resource_list,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.store import ADDED, DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)


@dataclass
class _GroupSync:
    """One look at a PodGroup: what its members are doing, and what the look has decided so far."""

    pg: Obj
    namespace: str
    members: list[Obj]
    statuses: Counter[str]
    infos: dict[int, PodInfo]
    pending_pods: list[Obj]
    min_member: int
    min_task: dict[str, int]
    now: str
    conditions: list[dict[str, Any]]
    phase: str
    unschedulable: bool = False
    waiting: bool = False

    def tasks_in(self, states: frozenset[str]) -> Counter[str]:
        """Members in ``states``, counted by task."""
        return Counter(self.infos[id(p)].task for p in self.members if task_status(p) in states)

    def pending(self) -> list[PodInfo]:
        """The schedulable pending members, in scheduling order."""
        return task_order([self.infos[id(p)] for p in self.pending_pods])

    def pods_by_key(self) -> dict[PodKey, Obj]:
        return {(self.namespace, objects.name(p)): p for p in self.pending_pods}


def _gang_gate(run: _GroupSync) -> tuple[str, str] | None:
    """Volcano's gang check before any placement: (reason, message) when too few members can run."""
    valid_by_task = run.tasks_in(VALID_STATES)
    valid = sum(valid_by_task.values())
    if valid < run.min_member:
        return (
            NOT_ENOUGH_TASKS,
            f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {run.min_member}",
        )
    if not task_minimums_met(valid_by_task, run.min_member, run.min_task):
        return NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
    return None


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
        scoring: VolcanoScoring = GPU_BINPACK_SCORING,
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
        #: The ``binpack``/``nodeorder`` arguments nodes are scored with.
        self.scoring = scoring
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
            if groups and (event.type in (ADDED, DELETED) or gang_view(event.old) != gang_view(pod)):
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
        """One Volcano session for one PodGroup: gate, enqueue, place the gang, then write its status."""
        key = (namespace, group)
        pg = self.store.get(PODGROUPS, namespace, group)
        if pg is None:
            self._waiting.pop(key, None)
            return
        run = self._begin(pg, namespace, group)
        gate = _gang_gate(run)
        if gate is not None:
            run.conditions = set_condition(run.conditions, UNSCHEDULABLE, *gate, run.now)
        else:
            if run.phase == "Pending":
                self._admit(run)
            if run.phase != "Pending" and run.pending_pods:
                self._place(run)
        self._conclude(key, group, run)

    def _begin(self, pg: Obj, namespace: str, group: str) -> _GroupSync:
        spec = objects.spec(pg)
        status = objects.status(pg)
        members = self._members_of(namespace, group)
        return _GroupSync(
            pg=pg,
            namespace=namespace,
            members=members,
            statuses=Counter(task_status(p) for p in members),
            infos={id(p): self.cache.pod_info(p) for p in members},
            pending_pods=[
                p
                for p in members
                if task_status(p) == "Pending" and not objects.spec(p).get("schedulingGates")
            ],
            min_member=int(spec.get("minMember") or 0),
            min_task={str(k): int(v or 0) for k, v in (spec.get("minTaskMember") or {}).items()},
            now=rfc3339(self.api.clock()),
            conditions=[dict(c) for c in status.get("conditions") or []],
            phase=str(status.get("phase") or "Pending"),
        )

    def _admit(self, run: _GroupSync) -> None:
        """Volcano's enqueue action: ``Pending`` → ``Inqueue`` when the cluster can hold the gang."""
        if self._enqueueable(run.pg, run.members):
            run.phase = "Inqueue"
            return
        run.unschedulable = run.waiting = True
        self._group_event(run.pg, "Normal", UNSCHEDULABLE, OVERUSED)
        self._report_unschedulable(run, run.pending(), GangPlan(ready=False), [])

    def _place(self, run: _GroupSync) -> None:
        """Volcano's allocate action: bind the whole gang, or report why it does not fit."""
        pending = run.pending()
        ready_by_task = run.tasks_in(READY_STATES)
        formed = sum(ready_by_task.values()) >= run.min_member and task_minimums_met(
            ready_by_task, run.min_member, run.min_task
        )
        nodes = [n for n in self.cache.nodes.values() if n.ready == "True"]
        plan = plan_gang(
            pending,
            ready_by_task,
            run.min_member,
            run.min_task,
            nodes,
            self.cache.ledger(),
            total_tasks=len(run.members),
            taint_details=self.taint_details,
            scoring=self.scoring,
        )
        if not plan.ready:
            run.unschedulable = run.waiting = True
            self._report_unschedulable(run, pending, plan, nodes)
            return
        pods_by_key = run.pods_by_key()
        for pod_key, node in plan.assignments.items():
            self._bind(pods_by_key[pod_key], node)
        for pod_key, failed in plan.failures.items():
            self.reporter.report(pods_by_key[pod_key], "Unschedulable", volcano_fit_error(len(nodes), failed))
        run.waiting = bool(plan.failures)
        if not formed:
            run.conditions = set_condition(run.conditions, SCHEDULED, GANG_READY_REASON, "", run.now)
            self._group_event(run.pg, "Normal", SCHEDULED, POD_GROUP_READY)

    def _conclude(self, key: tuple[str, str], group: str, run: _GroupSync) -> None:
        """The PodGroup's status after any bindings, and whether it waits for a retry."""
        members = self._members_of(run.namespace, group)
        statuses = Counter(task_status(p) for p in members)
        phase = podgroup_phase(run.phase, statuses, run.min_member, run.unschedulable)
        conditions = run.conditions
        if phase in ("Running", "Completed") and not any(c.get("type") == SCHEDULED for c in conditions):
            conditions = set_condition(conditions, SCHEDULED, GANG_READY_REASON, "", run.now)
        status = objects.status(run.pg)
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
        if new_status != status:
            self._write_status(run.pg, new_status)
        if run.waiting:
            self._waiting[key] = None
            self._schedule_periodic_retry()
        else:
            self._waiting.pop(key, None)

    def _report_unschedulable(
        self, run: _GroupSync, pending: list[PodInfo], plan: GangPlan, nodes: Sequence[NodeInfo]
    ) -> None:
        """The gang does not fit: the PodGroup's condition and event, and each pending pod's reason."""
        origin = None
        fit_errors: dict[PodKey, str] = {}
        for pod_key, failed in plan.failures.items():
            fit_errors[pod_key] = volcano_fit_error(len(nodes), failed)
            if origin is None:
                origin = (pod_key[1], fit_errors[pod_key])
        reasons = Counter("Schedulable" if p.key in plan.assignments else "Unschedulable" for p in pending)
        job_fit = job_fit_error(run.statuses, run.min_member, reasons, origin)
        ready = sum(n for s, n in run.statuses.items() if s in READY_STATES)
        unready = run.min_member - ready - len(plan.assignments)
        run.conditions = set_condition(
            run.conditions,
            UNSCHEDULABLE,
            NOT_ENOUGH_RESOURCES,
            f"{unready}/{len(run.members)} tasks in gang unschedulable: {job_fit}",
            run.now,
        )
        self._group_event(
            run.pg,
            "Warning",
            UNSCHEDULABLE,
            f"{len(pending)}/{len(run.members)} tasks in gang unschedulable: {job_fit}",
        )
        pods_by_key = run.pods_by_key()
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


__all__ = ["GangScheduler"]

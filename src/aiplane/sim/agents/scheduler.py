"""Kube-scheduler-lite: binds unbound pods to nodes, as kube-scheduler's default profile would.

Why: controllers create pods without ``spec.nodeName`` (Deployments, ModelInfer roles, Jobs) and wait for
them to run; an operator also reads *why* a pod is Pending (``PodScheduled=False``, ``Unschedulable``,
the ``0/13 nodes are available: …`` message) and reacts to ``FailedScheduling`` events. Without a
scheduler every such pod would stay Pending with no reason.

**What it schedules**: pods without ``spec.nodeName`` whose ``spec.schedulerName`` is empty or
``default-scheduler``, not being deleted, not Succeeded/Failed. Pods with scheduling gates get
``PodScheduled=False``/``SchedulingGated`` and wait. Pods naming another scheduler are left alone (the
gang scheduler in :mod:`.gang` takes ``volcano``).

**Filters**, in kube's plugin order, the first failing one giving the node's reasons:
``NodeUnschedulable`` (``spec.unschedulable`` unless the pod tolerates
``node.kubernetes.io/unschedulable:NoSchedule``), ``TaintToleration`` (``NoSchedule``/``NoExecute``
taints; a node whose ``Ready`` condition is ``False`` has the ``node.kubernetes.io/not-ready:NoSchedule``
taint and one whose condition is ``Unknown`` or missing ``node.kubernetes.io/unreachable:NoSchedule``,
as the node lifecycle controller would add), ``NodeAffinity`` (``spec.nodeSelector`` and the required
node-affinity terms: ``matchExpressions`` In/NotIn/Exists/DoesNotExist/Gt/Lt, ``matchFields``
``metadata.name``), ``NodeResourcesFit`` (every requested resource against ``status.allocatable`` minus
the requests of the non-terminal pods bound to the node; ``pods`` against the pod count).

**Score** (our choice, deterministic; kube sums weighted plugin scores): fewest untolerated
``PreferNoSchedule`` taints, then the highest sum of matching preferred node-affinity weights, then the
least allocated node (mean free fraction after placement over cpu, memory and the extended resources
the pod requests), then the node name.

**Reporting**: a fitting pod is bound through ``POST pods/{name}/binding`` (:meth:`Api.bind`) and gets a
``Scheduled`` event ("Successfully assigned ns/pod to node"); an unfitting one gets
``PodScheduled=False``/``Unschedulable`` with kube's ``FitError`` message (``0/N nodes are available:
<histogram>. preemption: 0/N nodes are available: <histogram>.``) and a ``FailedScheduling`` Warning
event, both only when the message changes. An unschedulable pod is retried when a
node it now passes the filters on appears or changes (a node added, uncordoned, untainted, relabelled,
Ready again, or with more allocatable; a bound pod on it deleted or finished: kube's queueing hints,
checked against that one node), and every ``retry_interval`` seconds (30) with all pending pods,
which also refreshes their messages. Nothing is preempted.

The cluster state (nodes, requests per node) is kept incrementally by :class:`SchedulerCache` from
store events, shared with the gang scheduler, so a scheduling attempt costs O(nodes) and an unrelated
event costs O(1).

The filters, scores and the node/pod views they read are pure functions in
:mod:`aiplane.sim.agents.scheduler_filters`, shared with the gang scheduler; this module holds the
cluster cache both schedulers read, the pending-pod reporting and the scheduling loops.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    StoreIndex,
    Work,
    pod_terminal,
    record_event,
    write_status,
)
from aiplane.sim.agents.scheduler_filters import (
    SCHEDULING_GATED_MESSAGE,
    SELECTED_NODE,
    Ledger,
    NodeInfo,
    PodInfo,
    PodKey,
    ResourceList,
    add_into,
    find_node,
    fit_error_message,
    fits_on_any,
    node_scheduling_view,
    pod_requests,
    prefilter_message,
    scheduling_order,
    volume_prefilter,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions, upsert_condition
from aiplane.sim.apiserver.store import ADDED, DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
#: Event source of kube-scheduler (its profile's scheduler name) and its field manager.
COMPONENT = "default-scheduler"
FIELD_MANAGER = "kube-scheduler"

# --- the cluster state both schedulers read ----------------------------------------------------------


def pod_counts_on_node(pod: Obj | None) -> str | None:
    """The node whose capacity ``pod`` uses: its ``spec.nodeName`` unless it is Succeeded or Failed."""
    if pod is None or pod_terminal(pod):
        return None
    node = objects.spec(pod).get("nodeName")
    return str(node) if node else None


class SchedulerCache(StoreIndex):
    """Nodes and the requests bound to each, kept current from store events (kube-scheduler's cache).

    Shared by :class:`Scheduler` and the gang scheduler. Unlike :class:`~aiplane.sim.agents.PodIndex` it
    counts only the pods that use capacity (:func:`pod_counts_on_node`), with their requests, parsed
    once per pod uid (a pod's resources cannot change).
    """

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.nodes: dict[str, NodeInfo] = {}
        self.requested: dict[str, ResourceList] = defaultdict(dict)
        self.pod_counts: Counter[str] = Counter()
        self._bound: dict[PodKey, tuple[str, ResourceList]] = {}
        self._requests: dict[str, ResourceList] = {}

    def _load(self) -> None:
        for node in self.store.items(NODES):
            self._set_node(node)
        for pod in self.store.items(PODS):
            self._update_pod(pod, removed=False)

    def _clear(self) -> None:
        self.nodes.clear()
        self.requested.clear()
        self.pod_counts.clear()
        self._bound.clear()
        self._requests.clear()

    def _on_event(self, event: Event) -> None:
        if event.key == NODES:
            if event.type == DELETED:
                self.nodes.pop(objects.name(event.obj), None)
            else:
                self._set_node(event.obj)
        elif event.key == PODS:
            self._update_pod(event.obj, removed=event.type == DELETED)

    def _set_node(self, node: Obj) -> None:
        info = NodeInfo.from_node(node)
        self.nodes[info.name] = info

    def requests_of(self, pod: Obj) -> ResourceList:
        uid = objects.uid(pod)
        cached = self._requests.get(uid) if uid else None
        if cached is None:
            cached = pod_requests(objects.spec(pod))
            if uid:
                self._requests[uid] = cached
        return cached

    def _update_pod(self, pod: Obj, *, removed: bool) -> None:
        meta = objects.meta(pod)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        previous = self._bound.pop(key, None)
        if previous is not None:
            node, requests = previous
            used = self.requested[node]
            for name, value in requests.items():
                left = used.get(name, 0) - value
                if left:
                    used[name] = left
                else:
                    used.pop(name, None)
            self.pod_counts[node] -= 1
            if self.pod_counts[node] <= 0:
                del self.pod_counts[node]
            if not used:
                del self.requested[node]
        if removed:
            self._requests.pop(str(meta.get("uid", "")), None)
            return
        node_name = pod_counts_on_node(pod)
        if node_name:
            requests = self.requests_of(pod)
            self._bound[key] = (node_name, requests)
            add_into(self.requested[node_name], requests)
            self.pod_counts[node_name] += 1

    def ledger(self) -> Ledger:
        """A ledger over the current bound requests (tentative additions do not touch the cache)."""
        return Ledger(self.requested, self.pod_counts)

    def pod_info(self, pod: Obj) -> PodInfo:
        return PodInfo.from_pod(pod, self.requests_of(pod))


def capacity_node(event: Event) -> str | None:
    """The node on which a store event may let a pending pod fit (kube's queueing hints, narrowed to one
    node): a node added, or changed in a way scheduling sees (labels, taints, cordon, Ready,
    allocatable); the node of a bound pod that was deleted or finished. ``None`` for anything else."""
    if event.key == NODES:
        if event.type == DELETED:
            return None
        if (
            event.type == ADDED
            or event.old is None
            or node_scheduling_view(event.old) != node_scheduling_view(event.obj)
        ):
            return objects.name(event.obj)
        return None
    if event.key == PODS:
        before = pod_counts_on_node(event.obj if event.type == DELETED else event.old)
        if before and (event.type == DELETED or pod_counts_on_node(event.obj) is None):
            return before
    return None


# --- conditions --------------------------------------------------------------------------------------


def with_pod_scheduled_false(
    status: Mapping[str, Any], reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """``status`` with ``PodScheduled=False`` (``reason``, ``message``), or ``None`` if it already says so
    (``lastTransitionTime`` moves only when the status flips, as ``UpdatePodCondition`` does)."""
    conditions = status.get("conditions") or []
    current: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if (
        current.get("status") == "False"
        and current.get("reason") == reason
        and current.get("message") == message
    ):
        return None
    wanted = {
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    return {**status, "conditions": upsert_condition(conditions, wanted)}


def binding_for(pod: Obj, node: str) -> Obj:
    meta = objects.meta(pod)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


class PendingPodReporter:
    """Writes ``PodScheduled=False`` and ``FailedScheduling`` events for one scheduler, only on change."""

    def __init__(self, api: Api, *, component: str, field_manager: str) -> None:
        self.api = api
        self.component = component
        self.field_manager = field_manager
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self._reported: dict[str, str] = {}  # pod uid -> last message with an event

    def forget(self, uid: str) -> None:
        self._reported.pop(uid, None)

    def report(self, pod: Obj, reason: str, message: str, *, event: bool = True) -> bool:
        """Set the condition (when it differs) and send a ``FailedScheduling`` event (when the message
        differs from the last one sent). False when the pod changed meanwhile (retry later)."""
        meta = objects.meta(pod)
        uid = str(meta.get("uid", ""))
        status = with_pod_scheduled_false(pod.get("status") or {}, reason, message, rfc3339(self.api.clock()))
        written = pod
        if status is not None:
            try:
                written = write_status(self.api, self.pod_rt, pod, status, self.field_manager)
            except ApiError as err:
                if err.code in (404, 409):
                    return False
                raise
        if event and self._reported.get(uid) != message:
            self._reported[uid] = message
            record_event(self.api, written, "Warning", "FailedScheduling", message, component=self.component)
        return True


# --- the agent -----------------------------------------------------------------------------------------


def is_pending(pod: Obj) -> bool:
    """Unbound, not being deleted, not finished: a pod a scheduler may still place."""
    return not objects.spec(pod).get("nodeName") and not objects.is_deleting(pod) and not pod_terminal(pod)


class SchedulingLoop(AgentLoop):
    """What both schedulers share: the :class:`SchedulerCache`, a :class:`PendingPodReporter`, the
    periodic retry (``("retry",)`` work every ``retry_interval`` seconds while something waits), the
    nodes whose capacity changed (``("nodes",)`` work) and binding a pod with its ``Scheduled`` event."""

    #: Event source and field manager of the scheduler's writes.
    component = COMPONENT
    field_manager = FIELD_MANAGER

    def __init__(
        self, api: Api, cache: SchedulerCache, *, retry_interval: float | None, taint_details: bool
    ) -> None:
        super().__init__(api)
        self.cache = cache
        #: Seconds between full retries of what waits for capacity (which also refreshes its messages);
        #: ``None``/0: only events retry it.
        self.retry_interval: float | None = retry_interval
        #: Name the untolerated taint in messages (``{key: value}``).
        self.taint_details = taint_details
        self.reporter = PendingPodReporter(api, component=self.component, field_manager=self.field_manager)
        self._changed_nodes: set[str] = set()
        self._periodic: asyncio.TimerHandle | None = None

    def _note_capacity(self, event: Event) -> None:
        """Queue ``("nodes",)`` work if ``event`` may let a waiting pod fit (:func:`capacity_node`)."""
        node = capacity_node(event)
        if node:
            self._changed_nodes.add(node)
            self.enqueue(("nodes",))

    def _schedule_periodic_retry(self) -> None:
        if self._periodic is None and self.retry_interval and self.running:
            self._periodic = self.later(self.retry_interval, ("retry",))

    def retry_now(self) -> None:
        """Try everything that waits again now (what the periodic retry does)."""
        self.cancel(self._periodic)
        self._periodic = None
        self.enqueue(("retry",))

    def _bind(self, pod: Obj, node: str) -> bool:
        """Bind ``pod`` to ``node`` (``pods/binding``) with a ``Scheduled`` event; ``False`` if the pod was
        deleted or changed meanwhile (its own event brings it back if still pending)."""
        meta = objects.meta(pod)
        namespace, name = str(meta["namespace"]), str(meta["name"])
        try:
            self.api.bind(
                namespace, name, binding_for(pod, node), WriteOptions(field_manager=self.field_manager)
            )
        except ApiError as err:
            if err.code in (404, 409):
                return False
            raise
        self.reporter.forget(str(meta.get("uid", "")))
        record_event(
            self.api,
            self.store.get(PODS, namespace, name) or pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {node}",
            component=self.component,
        )
        return True


class Scheduler(SchedulingLoop):
    """kube-scheduler-lite for pods whose ``schedulerName`` is empty or ``default-scheduler``."""

    name = "scheduler"

    def __init__(
        self,
        api: Api,
        cache: SchedulerCache,
        *,
        retry_interval: float | None = 30.0,
        taint_details: bool = False,
    ) -> None:
        # taint_details: kube-scheduler before 1.34.2 named the taint.
        super().__init__(api, cache, retry_interval=retry_interval, taint_details=taint_details)
        self._pending: dict[PodKey, None] = {}
        self._pvc_rt = api.resource("v1", "PersistentVolumeClaim")
        self._pvc_key = self._pvc_rt.storage_key
        self._sc_key = api.resource("storage.k8s.io/v1", "StorageClass").storage_key
        #: The pods found unschedulable, as last tried (the queueing hints check them node by node).
        self._unschedulable: dict[PodKey, PodInfo] = {}

    @staticmethod
    def responsible_for(pod: Obj) -> bool:
        return objects.spec(pod).get("schedulerName") in (None, "", DEFAULT_SCHEDULER)

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for pod in self.store.items(PODS):
            if self.responsible_for(pod) and is_pending(pod):
                meta = objects.meta(pod)
                key = (str(meta["namespace"]), str(meta["name"]))
                self._pending[key] = None
                self.enqueue(("pod", *key))

    def on_event(self, event: Event) -> None:
        if event.key == PODS:
            pod = event.obj
            meta = objects.meta(pod)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event.type == DELETED or not self.responsible_for(pod) or not is_pending(pod):
                self._forget(key)
                if event.type == DELETED:
                    self.reporter.forget(str(meta.get("uid", "")))
            else:
                old_spec = (event.old or {}).get("spec")
                if key not in self._pending or event.type == ADDED or old_spec != pod.get("spec"):
                    self._pending[key] = None
                    self.enqueue(("pod", *key))
        elif event.key in (self._pvc_key, self._sc_key):
            # a claim made, bound or deleted, or a class added: retry the pods that wait in its namespace
            namespace = objects.namespace(event.obj)
            for key in self._pending:
                if key[0] == namespace or event.key == self._sc_key:
                    self.enqueue(("pod", *key))
        if self._unschedulable:
            self._note_capacity(event)

    def _forget(self, key: PodKey) -> None:
        self._pending.pop(key, None)
        self._unschedulable.pop(key, None)

    # --- work -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        if work[0] == "pod":
            self._schedule(work[1], work[2])
        elif work[0] == "nodes":
            # Retry the unschedulable pods that now pass the filters on a node that changed.
            changed, self._changed_nodes = self._changed_nodes, set()
            ledger = self.cache.ledger()
            hopeful = [
                info
                for info in self._unschedulable.values()
                if fits_on_any(info, changed, self.cache.nodes, ledger)
            ]
            for info in scheduling_order(hopeful):
                self.enqueue(("pod", *info.key))
        elif work[0] == "retry":
            self._periodic = None
            pods = [self.store.get(PODS, ns, name) for ns, name in self._pending]
            for info in scheduling_order(self.cache.pod_info(p) for p in pods if p is not None):
                self.enqueue(("pod", *info.key))

    def _schedule(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        pod = self.store.get(PODS, namespace, name)
        if pod is None or not self.responsible_for(pod) or not is_pending(pod):
            self._forget(key)
            return
        self._pending[key] = None
        if objects.spec(pod).get("schedulingGates"):
            self._unschedulable.pop(key, None)
            self.reporter.report(pod, "SchedulingGated", SCHEDULING_GATED_MESSAGE, event=False)
            return
        blocked, delayed = volume_prefilter(pod, self._claim(namespace), self._binding_mode)
        if blocked is not None:
            self._unschedulable.pop(key, None)
            if not self.reporter.report(
                pod, "Unschedulable", prefilter_message(len(self.cache.nodes), blocked)
            ):
                self.later(0.05, ("pod", namespace, name))
            return
        info = self.cache.pod_info(pod)
        nodes = list(self.cache.nodes.values())
        node, failed = find_node(info, nodes, self.cache.ledger(), taint_details=self.taint_details)
        if node is not None and delayed:
            self._select_node(delayed, node)
        if node is None:
            self._unschedulable[key] = info
            if not self.reporter.report(pod, "Unschedulable", fit_error_message(len(nodes), failed)):
                self.later(0.05, ("pod", namespace, name))
            self._schedule_periodic_retry()
            return
        if self._bind(pod, node):
            self._forget(key)

    def _claim(self, namespace: str) -> Callable[[str], Obj | None]:
        return lambda name: self.store.get(self._pvc_key, namespace, name)

    def _binding_mode(self, class_name: str) -> str | None:
        storage_class = self.store.get(self._sc_key, "", class_name)
        return None if storage_class is None else str(storage_class.get("volumeBindingMode") or "Immediate")

    def _select_node(self, claims: list[Obj], node: str) -> None:
        """VolumeBinding's PreBind for ``WaitForFirstConsumer`` claims: name the chosen node in
        ``volume.kubernetes.io/selected-node`` for the provisioner (the pod is bound without waiting
        for the volume; docs/sim.md)."""
        for claim in claims:
            if objects.annotations(claim).get(SELECTED_NODE) == node:
                continue
            meta = objects.meta(claim)
            body = {
                **claim,
                "metadata": {**meta, "annotations": {**objects.annotations(claim), SELECTED_NODE: node}},
            }
            try:
                self.api.update(
                    self._pvc_rt,
                    meta["namespace"],
                    meta["name"],
                    body,
                    WriteOptions(field_manager=self.field_manager),
                )
            except ApiError as err:
                if err.code not in (404, 409):
                    raise

    @property
    def pending(self) -> list[PodKey]:
        """The pods waiting for this scheduler (unschedulable or not tried yet)."""
        return list(self._pending)


__all__ = [
    "DEFAULT_SCHEDULER",
    "Scheduler",
    "SchedulerCache",
    "SchedulingLoop",
    "capacity_node",
    "with_pod_scheduled_false",
]

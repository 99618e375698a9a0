"""Kubelet-lite, and the NoExecute taint eviction of kube-controller-manager.

Why: controllers wait for pods to be Running and Ready (rollouts, DaemonSet status, "the device plugin
is back"), and the partitioning workflow drains a node with a ``NoExecute`` taint. Without a kubelet
every pod stays Pending forever and a taint evicts nothing.

**Kubelet** — for a pod bound to a node (``spec.nodeName`` set; scheduling unbound pods is not done
here): once the node is ``Ready``, after ``ready_delay`` seconds (0: at once) the pod's status becomes
what a kubelet reports for a started pod whose containers are up: ``phase: Running``, the conditions
``PodReadyToStartContainers``, ``Initialized``, ``Ready``, ``ContainersReady``, ``PodScheduled`` (all
``True``), one ``containerStatuses`` entry per container (``state.running``, ``ready``, ``started``,
``restartCount: 0``, image and ids), init containers ``terminated``/``Completed``, ``podIP`` (from a
per-node range, the node's address for ``hostNetwork`` pods), ``hostIP`` (the node's InternalIP) and
``startTime``. When a node stops being Ready its pods are marked NotReady (``Ready`` condition
``False``: what the node lifecycle controller does for a silent kubelet), and Ready again when the
node is. Containers never exit on their own. Deleted pods go at once (the GC module's default: no
``pod_terminator`` is claimed) unless ``termination_delay`` is set: then the kubelet claims graceful
termination of every bound pod, which stays Terminating (``deletionTimestamp`` set) for
``min(termination_delay, grace period)`` seconds before the kubelet removes it (a DELETE with grace 0),
as a real kubelet does once the containers stopped. Clients that act on a pod by name while it
terminates (``kubectl drain``'s eviction retries) need that window. A deleted pod whose finalizer keeps
it in the API (Kueue's ``kueue.x-k8s.io/managed``) is reported ``phase: Failed`` once its containers
stopped, as the kubelet reports it (for a pod never bound, kube-controller-manager's pod GC does).

**Faults** (for tests; also over HTTP at ``/_sim/faults/…``): :meth:`Kubelet.restart_container` (the
container exits and is restarted: ``restartCount`` + 1, ``lastState.terminated``, container, pod
``Ready`` and ``ContainersReady`` ``False`` for ``not_ready_for`` seconds), :meth:`Kubelet.fail_pod`
(``phase: Failed``, every container ``terminated`` with a non-zero exit code) and
:meth:`Kubelet.set_node_ready` (the node's ``Ready`` condition ``False``/``Unknown`` and back; its pods
follow).

**Taint eviction** (``pkg/controller/tainteviction``) — a pod bound to a node with a ``NoExecute`` taint
it does not tolerate gets the ``DisruptionTarget`` condition (``DeletionByTaintManager``) and is
deleted, with the ``TaintManagerEviction`` event; a toleration with ``tolerationSeconds`` delays that
by the smallest such value.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    node_ready,
    pod_terminal,
    record_event,
    write_status,
)
from aiplane.sim.agents.daemonsets import EXECUTE_EFFECTS, untolerated_taints
from aiplane.sim.agents.kubelet_refs import missing_for_containers, missing_for_volumes
from aiplane.sim.agents.kubelet_status import (
    RUNTIME,
    internal_ip,
    min_toleration_seconds,
    running_status,
    terminated_state,
    waiting_status,
    with_container_readiness,
    with_ready,
)
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import DeleteOptions, upsert_condition
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

FIELD_MANAGER = "kubelet"
EVICTION_COMPONENT = "taint-eviction-controller"
EVICTION_MANAGER = "kube-controller-manager"

SECRETS = "/secrets"
CONFIGMAPS = "/configmaps"


class Kubelet(AgentLoop):
    """Runs bound pods on every node, and evicts pods from ``NoExecute``-tainted nodes."""

    name = "kubelet"

    def __init__(
        self, api: Api, pods: PodIndex, *, ready_delay: float = 0.5, taint_eviction: bool = True
    ) -> None:
        super().__init__(api)
        self.pods = pods
        #: Seconds from binding (node Ready) to Running/Ready; changeable at runtime.
        self.ready_delay = ready_delay
        #: Whether ``NoExecute`` taints evict pods (kube-controller-manager's taint eviction).
        self.taint_eviction = taint_eviction
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self._starting: dict[str, asyncio.TimerHandle | None] = {}  # pod uid -> pending start
        self._evicting: dict[str, tuple[float, asyncio.TimerHandle | None]] = {}  # uid -> (deadline, timer)
        self._node_index: dict[str, int] = {}  # node -> its pod range (10.244.<n>.0/24)
        self._ranges = itertools.count()
        self._next_ip: dict[str, int] = {}
        self._unready: dict[str, dict[str, asyncio.TimerHandle | None]] = {}  # pod uid -> container -> timer
        self.node_rt: ResourceType = api.resource("v1", "Node")
        #: namespace -> {pod name: uid} of pods waiting for a Secret or ConfigMap to exist.
        self._blocked: dict[str, dict[str, str]] = {}
        self._warned: set[tuple[str, str]] = set()  # (pod uid, message): one Event per reason
        #: Seconds a deleted bound pod stays Terminating (capped by its grace period); None: pods go at
        #: once. Changeable at runtime.
        self.termination_delay: float | None = None
        self._terminating: dict[str, asyncio.TimerHandle | None] = {}  # pod uid -> pending removal

    # --- graceful termination (the GC's PodTerminator) ----------------------------------------------

    def start(self) -> None:
        super().start()
        deletion = getattr(self.api, "deletion", None)
        if deletion is not None:
            deletion.pod_terminator = self

    async def stop(self) -> None:
        deletion = getattr(self.api, "deletion", None)
        if deletion is not None and deletion.pod_terminator is self:
            deletion.pod_terminator = None
        await super().stop()

    def claims(self, pod: Obj) -> bool:
        """Graceful termination for bound pods, when ``termination_delay`` is set."""
        return self.termination_delay is not None and bool(objects.spec(pod).get("nodeName"))

    def _schedule_termination(self, pod: Obj) -> None:
        meta = objects.meta(pod)
        uid = str(meta.get("uid"))
        grace = meta.get("deletionGracePeriodSeconds")
        if uid in self._terminating or not isinstance(grace, int) or grace <= 0:
            return
        delay = min(float(grace), self.termination_delay or 0.0)
        work = ("terminate", meta["namespace"], meta["name"], uid)
        self._terminating[uid] = self.later(delay, work)

    def _terminate(self, namespace: str, name: str, uid: str) -> None:
        """The containers stopped: remove the pod (grace 0), as the kubelet's status manager does."""
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.uid(pod) != uid:
            return
        try:
            self.api.delete(
                self.pod_rt, namespace, name, DeleteOptions(grace_period_seconds=0, precondition_uid=uid)
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for node in self.store.items(NODES):
            self.enqueue(("node", objects.name(node)))

    def on_event(self, event: Event) -> None:
        if event.key == PODS:
            self._on_pod(event)
        elif event.key in (SECRETS, CONFIGMAPS):
            if event.type != DELETED:
                namespace = str(objects.meta(event.obj).get("namespace") or "")
                for name in list(self._blocked.get(namespace, {})):
                    self.enqueue(("pod", namespace, name))
        elif event.key == NODES:
            name = objects.name(event.obj)
            if event.type == DELETED:
                return
            old = event.old
            if (
                old is None
                or node_ready(old) != node_ready(event.obj)
                or objects.spec(old).get("taints") != objects.spec(event.obj).get("taints")
                or internal_ip(old) != internal_ip(event.obj)
            ):
                self.enqueue(("node", name))

    def _on_pod(self, event: Event) -> None:
        pod = event.obj
        meta = objects.meta(pod)
        uid = str(meta.get("uid"))
        if event.type == DELETED:
            blocked = self._blocked.get(str(meta.get("namespace")), {})
            if blocked.get(str(meta.get("name"))) == uid:
                del blocked[str(meta.get("name"))]
            self._warned = {w for w in self._warned if w[0] != uid}
            self.cancel(self._starting.pop(uid, None))
            self.cancel(self._terminating.pop(uid, None))
            _, timer = self._evicting.pop(uid, (0.0, None))
            self.cancel(timer)
            for restart in self._unready.pop(uid, {}).values():
                self.cancel(restart)
            return
        node = objects.spec(pod).get("nodeName")
        if _held_after_stop(pod, self.termination_delay):
            self.enqueue(("ended", meta["namespace"], meta["name"], uid))
        if not node:
            return
        if objects.is_deleting(pod) and self.termination_delay is not None:
            self._schedule_termination(pod)
        old_node = ((event.old or {}).get("spec") or {}).get("nodeName")
        if (
            event.old is None
            or old_node != node
            or objects.spec(pod).get("tolerations")
            != ((event.old or {}).get("spec") or {}).get("tolerations")
            or (objects.status(pod).get("phase") == "Pending" and uid not in self._starting)
        ):
            self.enqueue(("pod", meta["namespace"], meta["name"]))

    # --- work -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        kind = work[0]
        if kind == "node":
            self._sync_node(work[1])
        elif kind == "pod":
            self._sync_pod(work[1], work[2])
        elif kind == "start":
            self._start(work[1], work[2], work[3])
        elif kind == "evict":
            self._evict_check(work[1], work[2], work[3])
        elif kind == "recover":
            self._recover(work[1], work[2], work[3], work[4])
        elif kind == "ended":
            self._ended(work[1], work[2], work[3])
        elif kind == "terminate":
            self._terminating.pop(work[3], None)
            self._terminate(work[1], work[2], work[3])

    def _sync_node(self, name: str) -> None:
        for pod in self.pods.on_node(name):
            meta = objects.meta(pod)
            self._sync_pod(meta["namespace"], meta["name"])

    def _sync_pod(self, namespace: str, name: str) -> None:
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.is_deleting(pod) or pod_terminal(pod):
            return
        node_name = objects.spec(pod).get("nodeName")
        if not node_name:
            return
        node = self.store.get(NODES, "", node_name)
        if self.taint_eviction and node is not None and self._taint_check(pod, node):
            return  # evicted
        uid = objects.uid(pod)
        phase = objects.status(pod).get("phase")
        if phase == "Pending":
            if node_ready(node) and uid not in self._starting:
                self._starting[uid] = self.later(self.ready_delay, ("start", namespace, name, uid))
            return
        if phase == "Running":
            self._report_ready(pod, node_ready(node))

    def _start(self, namespace: str, name: str, uid: str) -> None:
        self._starting.pop(uid, None)
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.uid(pod) != uid or objects.is_deleting(pod):
            return
        if objects.status(pod).get("phase") != "Pending":
            return
        node_name = str(objects.spec(pod).get("nodeName") or "")
        node = self.store.get(NODES, "", node_name)
        if not node_ready(node):
            return  # started when the node is Ready again (its node event re-syncs the pod)
        if self._missing_references(pod):
            return  # retried when a Secret or ConfigMap of its namespace appears
        host_ip = internal_ip(node)
        pod_ip = host_ip if objects.spec(pod).get("hostNetwork") and host_ip else self._pod_ip(node_name)
        status = running_status(
            pod, host_ip=host_ip, pod_ip=pod_ip, now=rfc3339(self.api.clock()), ready=True
        )
        self._write_status(pod, status)

    def _missing_references(self, pod: Obj) -> bool:
        """Whether the pod waits for a Secret or ConfigMap; if so, report it as the kubelet does."""
        meta = objects.meta(pod)
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))

        def lookup(kind: str, ref: str) -> Obj | None:
            return self.store.get(SECRETS if kind == "Secret" else CONFIGMAPS, namespace, ref)

        missing = missing_for_volumes(pod, lookup) or missing_for_containers(pod, lookup)
        blocked = self._blocked.setdefault(namespace, {})
        if not missing:
            blocked.pop(name, None)
            return False
        blocked[name] = objects.uid(pod)
        status = waiting_status(pod, missing, now=rfc3339(self.api.clock()))
        if status != objects.status(pod):
            self._write_status(pod, status)
        for item in missing:
            if (objects.uid(pod), item.message) in self._warned:
                continue
            self._warned.add((objects.uid(pod), item.message))
            reason, message = (
                ("FailedMount", item.message)
                if item.container is None
                else ("Failed", f"Error: {item.message}")
            )
            record_event(self.api, pod, "Warning", reason, message, component=FIELD_MANAGER)
        return True

    def _report_ready(self, pod: Obj, ready: bool) -> None:
        status = pod.get("status") or {}
        new = with_container_readiness(status, ready, rfc3339(self.api.clock()))
        if new != status:
            self._write_status(pod, new)

    def _pod_ip(self, node_name: str) -> str:
        """Addresses from a per-node /24 of 10.244.0.0/16, as a pod CIDR allocator would hand out."""
        index = self._node_index.get(node_name)
        if index is None:  # a range is never handed to another node, so pod IPs stay unique
            index = self._node_index[node_name] = next(self._ranges)
        host = self._next_ip.get(node_name, 1) % 253 + 1
        self._next_ip[node_name] = host
        return f"10.{244 + index // 256}.{index % 256}.{host}"

    def _ended(self, namespace: str, name: str, uid: str) -> None:
        """A deleted pod a finalizer still holds, its containers stopped: ``phase: Failed``, as the kubelet
        reports it (or, for a pod never bound, kube-controller-manager's pod GC). A controller waiting
        for the pod to end (Kueue's pod group) then sees it end."""
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.uid(pod) != uid or not _held_after_stop(pod, self.termination_delay):
            return
        status = {
            **objects.status(pod),
            "phase": "Failed",
            "reason": "Terminated",
            "message": "the pod was deleted and its containers stopped",
        }
        self._write_status(pod, status)

    def _write_status(self, pod: Obj, status: dict[str, Any], manager: str = FIELD_MANAGER) -> Obj | None:
        try:
            return write_status(self.api, self.pod_rt, pod, status, manager)
        except ApiError as err:
            if err.code in (404, 409):
                return None  # gone, or changed meanwhile: the pod's own event re-syncs it
            raise

    # --- fault injection --------------------------------------------------------------------------

    def _pod_for_fault(self, namespace: str, name: str) -> Obj:
        pod = self.store.get(PODS, namespace, name)
        if pod is None:
            raise errors.not_found("pods", "", name)
        return pod

    def restart_container(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        *,
        not_ready_for: float = 1.0,
        exit_code: int = 1,
        reason: str = "Error",
    ) -> Obj:
        """The container (default: the first) of a Running pod exits with ``exit_code`` and is restarted
        at once: ``restartCount`` + 1, ``lastState.terminated`` (exit code, ``reason``, when it started
        and finished, the old ``containerID``), a new ``containerID`` and ``state.running``, ``ready:
        false``; the pod's ``ContainersReady`` and ``Ready`` are ``False`` (``ContainersNotReady``) until,
        ``not_ready_for`` seconds later, the container is ready again (its readiness probe passing).
        Returns the pod as written. 404: no such pod/container; 409: the pod is not Running."""
        pod = self._pod_for_fault(namespace, name)
        status = dict(objects.status(pod))
        if status.get("phase") != "Running" or objects.is_deleting(pod):
            raise errors.conflict(
                "pods", "", name, f"pod {name} is not running (phase {status.get('phase')})"
            )
        entries = [dict(c) for c in status.get("containerStatuses") or []]
        if not entries:
            raise errors.not_found("pods", "", name)
        names = [str(c.get("name")) for c in entries]
        target = container or names[0]
        if target not in names:
            raise ApiError(404, "NotFound", f'container "{target}" not found in pod {namespace}/{name}')
        now = rfc3339(self.api.clock())
        index = names.index(target)
        entry = entries[index]
        restarts = int(entry.get("restartCount") or 0) + 1
        seed = f"{objects.uid(pod)}/{target}/{restarts}"
        entries[index] = {
            **entry,
            "lastState": {"terminated": terminated_state(entry, exit_code=exit_code, reason=reason, now=now)},
            "state": {"running": {"startedAt": now}},
            "ready": False,
            "started": True,
            "restartCount": restarts,
            "containerID": f"{RUNTIME}://" + hashlib.sha256(seed.encode()).hexdigest(),
        }
        status["containerStatuses"] = entries
        node = self.store.get(NODES, "", str(objects.spec(pod).get("nodeName") or ""))
        status = with_container_readiness(status, node_ready(node), now)
        written = self._write_status(pod, status)
        if written is None:
            raise errors.conflict("pods", "", name, errors.MODIFIED)
        uid = objects.uid(pod)
        if self.running:  # (a kubelet that is not running recovers nothing)
            timers = self._unready.setdefault(uid, {})
            self.cancel(timers.pop(target, None))
            timers[target] = self.later(max(not_ready_for, 0.0), ("recover", namespace, name, uid, target))
        return written

    def _recover(self, namespace: str, name: str, uid: str, container: str) -> None:
        timers = self._unready.get(uid) or {}
        timers.pop(container, None)
        if not timers:
            self._unready.pop(uid, None)
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.uid(pod) != uid or objects.is_deleting(pod) or pod_terminal(pod):
            return
        status = dict(objects.status(pod))
        entries = [dict(c) for c in status.get("containerStatuses") or []]
        for entry in entries:
            if entry.get("name") == container:
                entry["ready"] = True
        status["containerStatuses"] = entries
        node = self.store.get(NODES, "", str(objects.spec(pod).get("nodeName") or ""))
        new = with_container_readiness(status, node_ready(node), rfc3339(self.api.clock()))
        if new != objects.status(pod) and self._write_status(pod, new) is None:
            self.later(0.05, ("recover", namespace, name, uid, container))

    def fail_pod(
        self,
        namespace: str,
        name: str,
        *,
        exit_code: int = 1,
        reason: str = "Error",
        message: str | None = None,
    ) -> Obj:
        """The pod's containers all exit with ``exit_code`` and the pod fails: ``phase: Failed``, every
        container ``state.terminated`` (``reason``, ``message``), ``ready: false``, ``started: false``;
        conditions ``Ready``/``ContainersReady`` ``False`` (``PodFailed``), ``PodReadyToStartContainers``
        ``False``. The kubelet leaves it there (whatever the restart policy: this is the fault). Returns
        the pod as written. 404: no such pod; 409: not bound to a node, or already finished."""
        pod = self._pod_for_fault(namespace, name)
        if pod_terminal(pod) or not objects.spec(pod).get("nodeName"):
            raise errors.conflict(
                "pods",
                "",
                name,
                f"pod {name} is not running on a node (phase {(pod.get('status') or {}).get('phase')})",
            )
        uid = objects.uid(pod)
        self.cancel(self._starting.pop(uid, None))
        for timer in self._unready.pop(uid, {}).values():
            self.cancel(timer)
        now = rfc3339(self.api.clock())
        status = dict(objects.status(pod))
        known = {str(c.get("name")): dict(c) for c in status.get("containerStatuses") or []}
        entries = []
        for container in objects.spec(pod).get("containers") or []:
            entry = known.get(container["name"]) or {
                "name": container["name"],
                "image": container.get("image"),
                "imageID": "",
                "restartCount": 0,
                "lastState": {},
            }
            entries.append(
                {
                    **entry,
                    "state": {
                        "terminated": terminated_state(
                            entry, exit_code=exit_code, reason=reason, now=now, message=message
                        )
                    },
                    "ready": False,
                    "started": False,
                }
            )
        status["containerStatuses"] = entries
        status["phase"] = "Failed"
        conditions = []
        for cond in status.get("conditions") or []:
            kind = cond.get("type")
            if kind in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                new = {k: v for k, v in cond.items() if k not in ("reason", "message")}
                new["status"] = "False"
                if kind != "PodReadyToStartContainers":
                    new["reason"] = "PodFailed"
                if cond.get("status") != "False":
                    new["lastTransitionTime"] = now
                conditions.append(new)
            else:
                conditions.append(cond)
        status["conditions"] = conditions
        written = self._write_status(pod, status)
        if written is None:
            raise errors.conflict("pods", "", name, errors.MODIFIED)
        return written

    def set_node_ready(self, node: str, ready: bool = True, *, unknown: bool = False) -> Obj:
        """Set the node's ``Ready`` condition: ``True`` (``KubeletReady``), ``False`` (``KubeletNotReady``,
        the kubelet reporting a broken runtime) or, with ``unknown=True``, ``Unknown``
        (``NodeStatusUnknown``, the node lifecycle controller's verdict on a silent kubelet). The pods
        on it follow (their ``Ready`` goes ``False`` and back); the schedulers treat a node that is not
        Ready as tainted ``not-ready``/``unreachable``. No taints are written. Returns the node."""
        current = self.store.get(NODES, "", node)
        if current is None:
            raise errors.not_found("nodes", "", node)
        now = rfc3339(self.api.clock())
        if ready:
            value, reason, message = "True", "KubeletReady", "kubelet is posting ready status"
        elif unknown:
            value, reason, message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
        else:
            value, reason, message = "False", "KubeletNotReady", "container runtime is down"
        status = dict(objects.status(current))
        wanted = {
            "type": "Ready",
            "status": value,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        status["conditions"] = upsert_condition(status.get("conditions") or [], wanted)
        manager = EVICTION_MANAGER if unknown and not ready else FIELD_MANAGER
        return write_status(self.api, self.node_rt, current, status, manager)

    # --- taint eviction ---------------------------------------------------------------------------

    def _taint_check(self, pod: Obj, node: Obj) -> bool:
        """Evict ``pod`` now, schedule it for later, or forget a scheduled eviction. True if evicted."""
        uid = objects.uid(pod)
        taints = [t for t in objects.spec(node).get("taints") or [] if t.get("effect") in EXECUTE_EFFECTS]
        tolerations = list(objects.spec(pod).get("tolerations") or [])
        if not taints:
            self._forget_eviction(uid)
            return False
        if untolerated_taints(taints, tolerations, EXECUTE_EFFECTS):
            self._forget_eviction(uid)
            self._evict(pod)
            return True
        seconds = min_toleration_seconds(taints, tolerations)
        if seconds is None:
            self._forget_eviction(uid)
            return False
        now = time.monotonic()
        deadline, timer = self._evicting.get(uid, (now + seconds, None))
        deadline = min(deadline, now + seconds)  # a shorter toleration (new taint) brings it forward
        if deadline <= now + 0.001:
            self._forget_eviction(uid)
            self._evict(pod)
            return True
        self.cancel(timer)
        meta = objects.meta(pod)
        self._evicting[uid] = (
            deadline,
            self.later(deadline - now, ("evict", meta["namespace"], meta["name"], uid)),
        )
        return False

    def _forget_eviction(self, uid: str) -> None:
        _, timer = self._evicting.pop(uid, (0.0, None))
        self.cancel(timer)

    def _evict_check(self, namespace: str, name: str, uid: str) -> None:
        """A ``tolerationSeconds`` timer fired: evict if the pod still only tolerates for a while."""
        pod = self.store.get(PODS, namespace, name)
        if pod is None or objects.uid(pod) != uid or objects.is_deleting(pod):
            self._forget_eviction(uid)
            return
        node = self.store.get(NODES, "", str(objects.spec(pod).get("nodeName") or ""))
        if node is None:
            self._forget_eviction(uid)
            return
        self._taint_check(pod, node)

    def _evict(self, pod: Obj) -> None:
        """What the taint eviction controller does: a ``DisruptionTarget`` condition, then DELETE."""
        meta = objects.meta(pod)
        now = rfc3339(self.api.clock())
        status = dict(objects.status(pod))
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now,
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
            }
        )
        status["conditions"] = conditions
        updated = self._write_status(pod, status, manager=EVICTION_MANAGER) or pod
        record_event(
            self.api,
            updated,
            "Normal",
            "TaintManagerEviction",
            f"Marking for deletion Pod {meta['namespace']}/{meta['name']}",
            component=EVICTION_COMPONENT,
        )
        try:
            self.api.delete(
                self.pod_rt, meta["namespace"], meta["name"], DeleteOptions(precondition_uid=meta.get("uid"))
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise


__all__ = [
    "Kubelet",
    "internal_ip",
    "min_toleration_seconds",
    "running_status",
    "terminated_state",
    "waiting_status",
    "with_container_readiness",
    "with_ready",
]


def _held_after_stop(pod: Obj, termination_delay: float | None) -> bool:
    """Deleted, its containers stopped (at once, or the graceful termination over: grace 0 now), not
    ended yet, and a finalizer keeps it in the API."""
    meta = objects.meta(pod)
    if not objects.is_deleting(pod) or not meta.get("finalizers") or pod_terminal(pod):
        return False
    bound = bool(objects.spec(pod).get("nodeName"))
    return not bound or termination_delay is None or int(meta.get("deletionGracePeriodSeconds") or 0) == 0

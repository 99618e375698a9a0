"""What every simulated agent shares: the store-fed work loop, the pod index, status and Event writes.

The agents themselves (:mod:`aiplane.sim.agents`) build on this module; it knows none of them.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import DeleteOptions, WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.workloop import WorkLoop
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: A unit of queued work: a hashable tuple whose first item says what to do.
Work = tuple[str, ...]

PODS = "/pods"
NODES = "/nodes"


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controller (the ownerReference with ``controller: true``)."""
    for ref in objects.meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return None


def node_ready(node: Obj | None) -> bool:
    """The node's ``Ready`` condition is ``True`` (what "the kubelet is up" means to everyone else)."""
    if node is None:
        return False
    for cond in objects.status(node).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def pod_terminal(pod: Obj) -> bool:
    return objects.status(pod).get("phase") in ("Succeeded", "Failed")


def pod_ready(pod: Obj) -> bool:
    for cond in objects.status(pod).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


class StoreIndex:
    """State kept current from store events, for several agents to read.

    :meth:`start` fills it from the store (:meth:`_load`) and subscribes :meth:`_on_event`; :meth:`stop`
    unsubscribes and empties it (:meth:`_clear`).
    """

    def __init__(self, api: Api) -> None:
        self.store = api.store
        self._subscribed = False

    def start(self) -> None:
        self._load()
        self.store.subscribe(self._on_event)
        self._subscribed = True

    def stop(self) -> None:
        if self._subscribed:
            self.store.unsubscribe(self._on_event)
            self._subscribed = False
        self._clear()

    def _load(self) -> None:
        raise NotImplementedError

    def _on_event(self, event: Event) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError


class PodIndex(StoreIndex):
    """Pods by node and by controller uid, kept current from store events.

    Agents look pods up by the node they are bound to (kubelet, taint eviction, DCM's "is the GPU
    busy") and by their controller (DaemonSet); scanning every pod for each of those would make a
    burst of pod events quadratic.
    """

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self._by_node: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._by_owner: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._where: dict[tuple[str, str], tuple[str, str | None]] = {}

    def _load(self) -> None:
        for pod in self.store.items(PODS):
            self._add(pod)

    def _clear(self) -> None:
        self._by_node.clear()
        self._by_owner.clear()
        self._where.clear()

    def _on_event(self, event: Event) -> None:
        if event.key != PODS:
            return
        self._remove(event.obj)
        if event.type != DELETED:
            self._add(event.obj)

    def _add(self, pod: Obj) -> None:
        ident = (objects.namespace(pod), objects.name(pod))
        node = str(objects.spec(pod).get("nodeName") or "")
        owner = controller_uid(pod)
        self._where[ident] = (node, owner)
        if node:
            self._by_node[node].add(ident)
        if owner:
            self._by_owner[owner].add(ident)

    def _remove(self, pod: Obj) -> None:
        ident = (objects.namespace(pod), objects.name(pod))
        where = self._where.pop(ident, None)
        if where is None:
            return
        node, owner = where
        if node:
            self._by_node[node].discard(ident)
            if not self._by_node[node]:
                del self._by_node[node]
        if owner:
            self._by_owner[owner].discard(ident)
            if not self._by_owner[owner]:
                del self._by_owner[owner]

    def _objects(self, idents: Iterable[tuple[str, str]]) -> list[Obj]:
        out = []
        for ns, name in sorted(idents):
            pod = self.store.get(PODS, ns, name)
            if pod is not None:
                out.append(pod)
        return out

    def on_node(self, node: str) -> list[Obj]:
        """The pods bound to ``node`` (as stored now)."""
        return self._objects(self._by_node.get(node, ()))

    def owned_by(self, uid: str) -> list[Obj]:
        """The pods whose controller has ``uid``."""
        return self._objects(self._by_owner.get(uid, ()))

    def owned_on_node(self, uid: str, node: str) -> list[Obj]:
        """The pods bound to ``node`` whose controller has ``uid`` (costs the pods on the node)."""
        return self._objects(ident for ident in self._by_node.get(node, ()) if self._where[ident][1] == uid)


def write_status(api: Api, rt: ResourceType, obj: Obj, status: Obj, field_manager: str) -> Obj:
    """PUT ``obj`` with ``status`` to its ``/status`` subresource as ``field_manager``: the object as
    written. :class:`ApiError` (404 gone, 409 changed meanwhile …) is the caller's to handle."""
    return api.update(
        rt,
        objects.namespace(obj) or None,
        objects.name(obj),
        {**obj, "status": status},
        WriteOptions(field_manager=field_manager),
        subresource="status",
    ).obj


_event_seq = itertools.count()


def record_event(
    api: Api,
    involved: Obj,
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str | None = None,
) -> Obj | None:
    """Create a core/v1 Event about ``involved`` the way client-go's recorder names and fills it.

    The Event lives in the involved object's namespace, ``default`` for cluster-scoped objects (a
    Node), as kube's recorder puts it. Failures (e.g. a namespace being deleted) are logged, never
    raised: an agent must not stop because it could not report.
    """
    meta = objects.meta(involved)
    namespace = str(meta.get("namespace") or "default")
    now = rfc3339(api.clock())
    ref = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{time.time_ns() + next(_event_seq):x}",
            "namespace": namespace,
        },
        "involvedObject": {k: v for k, v in ref.items() if v},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component, **({"host": host} if host else {})},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    try:
        return api.create(
            api.resource("v1", "Event"), namespace, body, WriteOptions(field_manager=component)
        ).obj
    except ApiError as err:
        log.info("%s: could not record event %s on %s: %s", component, reason, meta.get("name"), err)
        return None


class AgentLoop(WorkLoop[Work]):
    """A :class:`WorkLoop` fed by store events.

    Subclasses implement :meth:`on_event` (synchronous, inside the store's fan-out: only queue work
    there, never write), :meth:`resync` (queue everything once at start) and :meth:`process` (do one
    piece of work through ``self.api``). Failing work is retried with backoff, like the GC's worker.
    """

    name = "agent"

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api
        self.store = api.store
        self._subscribed = False

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to the store and start the worker on the running loop."""
        if self._task is not None:
            return
        self.store.subscribe(self._dispatch)
        self._subscribed = True
        self.start_worker()
        self.resync()

    async def stop(self) -> None:
        if self._subscribed:
            self.store.unsubscribe(self._dispatch)
            self._subscribed = False
        await self.stop_worker()

    # --- to implement -----------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        raise NotImplementedError

    def resync(self) -> None:
        raise NotImplementedError

    # --- queue ------------------------------------------------------------------------------------

    def _dispatch(self, event: Event) -> None:
        try:
            self.on_event(event)
        except Exception:  # a bug here must not break the writer whose commit we are told about
            log.exception("%s: handling a %s event of %s failed", self.name, event.type, event.key)


@dataclass
class AgentOptions:
    """Timing of the simulated agents (all changeable at runtime on the agents themselves)."""

    #: Seconds between a pod being bound to a Ready node and the kubelet reporting it Running and Ready.
    ready_delay: float = 0.5
    #: Seconds between full retries of the pods (default scheduler) and PodGroups (gang scheduler) that
    #: do not fit, which refresh their messages; node and pod changes that may help retry them at once
    #: anyway. ``0``: event-driven only.
    scheduler_retry_interval: float = 30.0
    #: Volcano's ``overcommit-factor`` for admitting PodGroups (``Pending`` → ``Inqueue``).
    gang_overcommit_factor: float = 1.2


def create_owned_pod(
    api: Api, pod_rt: ResourceType, owner: Obj, body: Obj, *, field_manager: str, component: str
) -> None:
    """Create a workload controller's pod and record kube's ``SuccessfulCreate``/``FailedCreate``.

    A 403 (the namespace is being deleted) is not an error: the pod is not wanted any more.
    """
    namespace = objects.namespace(owner)
    try:
        created = api.create(pod_rt, namespace, body, WriteOptions(field_manager=field_manager)).obj
    except ApiError as err:
        if err.code == 403:
            return
        record_event(api, owner, "Warning", "FailedCreate", f"Error creating: {err}", component=component)
        raise
    record_event(
        api, owner, "Normal", "SuccessfulCreate", f"Created pod: {objects.name(created)}", component=component
    )


def delete_owned_pod(api: Api, pod_rt: ResourceType, owner: Obj, pod: Obj, *, component: str) -> None:
    """Delete a workload controller's pod (UID precondition) and record ``SuccessfulDelete``.

    A pod already gone or replaced by a namesake (404, 409) is what was wanted: nothing is recorded.
    """
    try:
        api.delete(
            pod_rt,
            objects.namespace(pod),
            objects.name(pod),
            DeleteOptions(precondition_uid=objects.uid(pod)),
        )
    except ApiError as err:
        if err.code in (404, 409):
            return
        raise
    record_event(
        api, owner, "Normal", "SuccessfulDelete", f"Deleted pod: {objects.name(pod)}", component=component
    )

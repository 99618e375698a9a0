"""The ReplicaSet controller of kube-controller-manager (``pkg/controller/replicaset``), lite.

For every apps/v1 ReplicaSet: ``spec.replicas`` live pods (not terminating, not ``Succeeded``/``Failed``)
whose controller it is, created from its template with ``generateName: <rs>-`` and a controller owner
reference; surplus pods are deleted in kube's order (``ActivePodsWithRanks``: unscheduled before
scheduled, ``Pending`` before ``Running``, not ready before ready, newer before older). The status
(``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas`` after
``minReadySeconds``, ``observedGeneration``) is written through ``/status`` when it differs.

Deployments (:mod:`.deployments`) drive it only through ``spec.replicas``, as in kube.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.apimachinery.selectors import selector_matches
from aiplane.sim.agents.base import (
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    controller_uid,
    create_owned_pod,
    delete_owned_pod,
    pod_ready,
    pod_terminal,
    write_status,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.store import DELETED, Event

if TYPE_CHECKING:
    from datetime import datetime

    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

COMPONENT = "replicaset-controller"
FIELD_MANAGER = "kube-controller-manager"
#: ``burstReplicas``: pods created or deleted per sync at most (the rest on the next sync).
BURST_REPLICAS = 500
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def live_pods(pods: Iterable[Obj]) -> list[Obj]:
    """``FilterActivePods``: not finished, not being deleted."""
    return [p for p in pods if not objects.is_deleting(p) and not pod_terminal(p)]


def ready_since(pod: Obj) -> datetime | None:
    """When the pod became Ready (``None``: not Ready)."""
    for cond in objects.status(pod).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return objects.parse_time(cond.get("lastTransitionTime")) or objects.creation_time(pod)
    return None


def available_in(pod: Obj, min_ready_seconds: int, now: datetime) -> float | None:
    """``IsPodAvailable``: 0.0 when available now, the seconds until it will be when Ready but younger
    than ``min_ready_seconds``, ``None`` when not Ready."""
    if not pod_ready(pod):
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = ready_since(pod)
    if since is None:
        return 0.0
    return max((since - now).total_seconds() + min_ready_seconds, 0.0)


def deletion_order(pods: Iterable[Obj]) -> list[Obj]:
    """The pods a scale-down removes first come first (kube's ``ActivePodsWithRanks``, simplified)."""
    newest_first = sorted(pods, key=lambda p: str(objects.meta(p).get("creationTimestamp", "")), reverse=True)
    return sorted(
        newest_first,
        key=lambda p: (
            bool(objects.spec(p).get("nodeName")),
            _PHASE_RANK.get(str(objects.status(p).get("phase") or "Pending"), 0),
            pod_ready(p),
        ),
    )


class ReplicaSetController(AgentLoop):
    """Keeps ``spec.replicas`` pods for every ReplicaSet (see the module doc)."""

    name = "replicaset-controller"

    def __init__(self, api: Api, pods: PodIndex) -> None:
        super().__init__(api)
        self.pods = pods
        self.rs_rt: ResourceType = api.resource("apps/v1", "ReplicaSet")
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self._by_uid: dict[str, tuple[str, str]] = {}

    def resync(self) -> None:
        for rs in self.store.items(self.rs_rt.storage_key):
            self._track(rs)

    def _track(self, rs: Obj) -> None:
        meta = objects.meta(rs)
        self._by_uid[str(meta.get("uid"))] = (meta["namespace"], meta["name"])
        self.enqueue(("rs", meta["namespace"], meta["name"]))

    def on_event(self, event: Event) -> None:
        if event.key == self.rs_rt.storage_key:
            if event.type == DELETED:
                self._by_uid.pop(objects.uid(event.obj), None)
            else:
                self._track(event.obj)
        elif event.key == PODS:
            for obj in (event.obj, event.old):
                where = self._by_uid.get(controller_uid(obj) or "") if obj is not None else None
                if where is not None:
                    self.enqueue(("rs", *where))

    def process(self, work: Work) -> None:
        _, namespace, name = work
        rs = self.store.get(self.rs_rt.storage_key, namespace, name)
        if rs is None or objects.is_deleting(rs):
            return  # the garbage collector removes its pods through their ownerReferences
        pods = live_pods(self.pods.owned_by(objects.uid(rs)))
        diff = len(pods) - int(objects.spec(rs).get("replicas", 1) or 0)
        if diff < 0:
            for _ in range(min(-diff, BURST_REPLICAS)):
                self._create_pod(rs)
        elif diff > 0:
            for pod in deletion_order(pods)[: min(diff, BURST_REPLICAS)]:
                self._delete_pod(rs, pod)
        self._update_status(namespace, name)

    def _create_pod(self, rs: Obj) -> None:
        meta = objects.meta(rs)
        template = objects.spec(rs).get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "ownerReferences": [controller_owner_reference(rs)],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": dict(template.get("spec") or {}),
        }
        create_owned_pod(self.api, self.pod_rt, rs, body, field_manager=FIELD_MANAGER, component=COMPONENT)

    def _delete_pod(self, rs: Obj, pod: Obj) -> None:
        delete_owned_pod(self.api, self.pod_rt, rs, pod, component=COMPONENT)

    def _update_status(self, namespace: str, name: str) -> None:
        """``calculateStatus``: the counters from the pods as stored now; a timer re-checks a pod that
        becomes available once ``minReadySeconds`` have passed."""
        rs = self.store.get(self.rs_rt.storage_key, namespace, name)
        if rs is None:
            return
        spec = objects.spec(rs)
        pods = live_pods(self.pods.owned_by(objects.uid(rs)))
        template_labels = objects.labels(spec.get("template") or {})
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.api.clock()
        ready = available = 0
        wait: float | None = None
        for pod in pods:
            left = available_in(pod, min_ready, now)
            ready += pod_ready(pod)
            if left == 0.0:
                available += 1
            elif left is not None:
                wait = left if wait is None else min(wait, left)
        if wait is not None:
            self.later(wait + 0.01, ("rs", namespace, name))
        old = rs.get("status") or {}
        status: dict[str, Any] = {
            **{k: v for k, v in old.items() if k == "conditions"},
            "replicas": len(pods),
            "fullyLabeledReplicas": sum(
                1 for p in pods if selector_matches({"matchLabels": template_labels}, objects.labels(p))
            ),
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": int(objects.meta(rs).get("generation", 1)),
        }
        for key in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            if not status[key]:
                del status[key]  # omitempty, as kube serialises them
        if status == old:
            return
        try:
            write_status(self.api, self.rs_rt, rs, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code not in (404, 409):
                raise

"""The LeaderWorkerSet controller (``kubernetes-sigs/lws``: ``pkg/controllers`` and its pod webhook), lite.

Why it matters here: Dynamo's operator runs multi-node workers as LeaderWorkerSets and reads what LWS
produces — pods named and labelled by group, the ``LWS_*`` environment its webhook injects, the
headless Service behind ``LWS_LEADER_ADDRESS`` and the LWS status (``readyReplicas``, ``Available``).
Without a controller an LWS in the embedded cluster would sit there with no pods, so the sim plays it.

For each ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet with ``spec.replicas`` groups of
``leaderWorkerTemplate.size`` pods: leader ``<lws>-<i>`` (from ``leaderTemplate``, else the worker
template) and workers ``<lws>-<i>-<j>``, ``j`` = 1 … size-1, labelled and annotated as the leader and
worker StatefulSets and the pod webhook label them, with the webhook's env in every container; workers
come with the leader (``LeaderCreated``) or once it is Ready (``LeaderReady``). Real LWS creates a leader
StatefulSet and one worker StatefulSet per group; here the pods are made directly, owned by the LWS
(leaders) and by their leader (workers), so deleting a leader takes its group with it as deleting the
leader takes its worker StatefulSet in LWS. A template change replaces groups from the highest index
down, ``maxUnavailable`` at a time; ``RecreateGroupOnPodRestart`` (the default) recreates a group whose
pod restarted a container or was deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents.base import (
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    controller_uid,
    pod_ready,
    write_status,
)
from aiplane.sim.agents.daemonsets import template_hash
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import DeleteOptions, WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
FIELD_MANAGER = "lws-controller-manager"
SERVICES = "/services"

_P = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = _P + "name"
GROUP_INDEX_LABEL = _P + "group-index"
WORKER_INDEX_LABEL = _P + "worker-index"
GROUP_KEY_LABEL = _P + "group-key"
REVISION_LABEL = _P + "template-revision-hash"
SIZE_ANNOTATION = _P + "size"
LEADER_NAME_ANNOTATION = _P + "leader-name"
#: What the StatefulSet controller puts on every pod it makes (the index label since kube 1.28).
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"

#: ``makeCondition``: type → (reason, message).
CONDITIONS = {
    "Available": ("AllGroupsReady", "All replicas are ready"),
    "Progressing": ("GroupsProgressing", "Replicas are progressing"),
    "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress"),
}
_EXCLUSIVE = ({"Available", "Progressing"}, {"Available", "UpdateInProgress"})

_WORKER_NAME = re.compile(r"^(.*)-(\d+)$")


# --- the pure parts: names, labels, env, spec --------------------------------------------------------


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def replicas(lws: Mapping[str, Any]) -> int:
    """``spec.replicas``: groups (default 1, as the CRD defaults it)."""
    return max(_int(objects.spec(lws).get("replicas"), 1), 0)


def size(lws: Mapping[str, Any]) -> int:
    """``leaderWorkerTemplate.size``: pods per group, leader included (default 1)."""
    return max(_int((objects.spec(lws).get("leaderWorkerTemplate") or {}).get("size"), 1), 1)


def leader_name(lws_name: str, group: int) -> str:
    return f"{lws_name}-{group}"


def worker_name(lws_name: str, group: int, worker: int) -> str:
    return f"{lws_name}-{group}-{worker}"


def group_key(namespace: str, leader: str) -> str:
    """``genGroupUniqueKey``: sha1 of ``<namespace>/<leader pod>``, shared by the whole group."""
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


def revision_key(lws: Mapping[str, Any]) -> str:
    """The template revision: changes whenever what a group is made from changes."""
    spec = objects.spec(lws)
    return template_hash(
        {"leaderWorkerTemplate": spec.get("leaderWorkerTemplate") or {}, "net": spec.get("networkConfig")}
    )


def hpa_pod_selector(lws_name: str) -> str:
    """The leaders' selector, as ``LabelSelectorAsSelector(...).String()`` prints it (keys sorted)."""
    return f"{NAME_LABEL}={lws_name},{WORKER_INDEX_LABEL}=0"


def leader_address(lws_name: str, group: int, subdomain: str, namespace: str) -> str:
    return f"{lws_name}-{group}.{subdomain}.{namespace}"


def inject_env(
    containers: Iterable[Mapping[str, Any]], address: str, group_size: int, worker: int
) -> list[Obj]:
    """``AddLWSVariables``: the three variables first, in this order, then the container's other env
    (a variable of the same name the user set is replaced)."""
    first = [
        {"name": LEADER_ADDRESS_ENV, "value": address},
        {"name": GROUP_SIZE_ENV, "value": str(group_size)},
        {"name": WORKER_INDEX_ENV, "value": str(worker)},
    ]
    names = {e["name"] for e in first}
    out = []
    for container in containers:
        rest = [dict(e) for e in container.get("env") or [] if e.get("name") not in names]
        out.append({**container, "env": [dict(e) for e in first] + rest})
    return out


def leader_template(lws: Mapping[str, Any]) -> Mapping[str, Any]:
    tpl = objects.spec(lws).get("leaderWorkerTemplate") or {}
    return tpl.get("leaderTemplate") or tpl.get("workerTemplate") or {}


def worker_template(lws: Mapping[str, Any]) -> Mapping[str, Any]:
    return (objects.spec(lws).get("leaderWorkerTemplate") or {}).get("workerTemplate") or {}


def _owner(obj: Mapping[str, Any], api_version: str, kind: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": objects.name(obj),
        "uid": objects.uid(obj),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def subdomain(lws: Mapping[str, Any], group: int) -> str:
    """The headless Service of a group's pods: the LWS's, or with ``subdomainPolicy: UniquePerReplica``
    the group's own (named after its leader)."""
    lws_name = objects.name(lws)
    if unique_per_replica(lws):
        return leader_name(lws_name, group)
    return lws_name


def unique_per_replica(lws: Mapping[str, Any]) -> bool:
    network = objects.spec(lws).get("networkConfig") or {}
    return bool(network.get("subdomainPolicy") == "UniquePerReplica")


def _pod(lws: Mapping[str, Any], template: Mapping[str, Any], group: int, worker: int, revision: str) -> Obj:
    """A pod of ``template`` as the StatefulSet makes it and the LWS pod webhook completes it."""
    ns, lws_name = objects.namespace(lws), objects.name(lws)
    name = worker_name(lws_name, group, worker) if worker else leader_name(lws_name, group)
    tmeta = template.get("metadata") or {}
    spec = dict(template.get("spec") or {})
    spec["hostname"], spec["subdomain"] = name, subdomain(lws, group)
    address = leader_address(lws_name, group, spec["subdomain"], ns)
    for key in ("containers", "initContainers"):
        if spec.get(key):
            spec[key] = inject_env(spec[key], address, size(lws), worker)
    leader = leader_name(lws_name, group)
    labels = {
        **(tmeta.get("labels") or {}),
        NAME_LABEL: lws_name,
        GROUP_INDEX_LABEL: str(group),
        WORKER_INDEX_LABEL: str(worker),
        GROUP_KEY_LABEL: group_key(ns, leader),
        REVISION_LABEL: revision,
        STS_POD_NAME_LABEL: name,
        STS_POD_INDEX_LABEL: str(group if worker == 0 else worker),
    }
    annotations = {**(tmeta.get("annotations") or {}), SIZE_ANNOTATION: str(size(lws))}
    if worker:
        annotations[LEADER_NAME_ANNOTATION] = leader
    meta = {"name": name, "namespace": ns, "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def leader_pod(lws: Mapping[str, Any], group: int, revision: str) -> Obj:
    """Leader ``<lws>-<group>``, owned by the LWS (the leader StatefulSet's pod in real LWS)."""
    pod = _pod(lws, leader_template(lws), group, 0, revision)
    pod["metadata"]["ownerReferences"] = [_owner(lws, API_VERSION, KIND)]
    return pod


def worker_pod(lws: Mapping[str, Any], leader: Mapping[str, Any], worker: int) -> Obj:
    """Worker ``<leader>-<worker>``, owned by its leader (which owns the worker StatefulSet in real LWS),
    with the leader's revision."""
    labels = objects.labels(leader)
    group = _int(labels.get(GROUP_INDEX_LABEL), 0)
    pod = _pod(lws, worker_template(lws), group, worker, str(labels.get(REVISION_LABEL, "")))
    pod["metadata"]["ownerReferences"] = [_owner(leader, "v1", "Pod")]
    return pod


def headless_service(lws: Mapping[str, Any], leader: Mapping[str, Any] | None = None) -> Obj:
    """``CreateHeadlessServiceIfNotExists``: ``<lws>`` selecting every pod of the set, owned by the LWS;
    with ``leader`` (``UniquePerReplica``) ``<leader>`` selecting its group, owned by the leader. Not-ready
    addresses are published, so workers resolve the leader before it is Ready."""
    lws_name = objects.name(lws)
    name, selector, owner = lws_name, {NAME_LABEL: lws_name}, _owner(lws, API_VERSION, KIND)
    if leader is not None:
        name, owner = objects.name(leader), _owner(leader, "v1", "Pod")
        selector = {**selector, GROUP_INDEX_LABEL: str(objects.labels(leader).get(GROUP_INDEX_LABEL, ""))}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": objects.namespace(lws),
            "labels": {NAME_LABEL: lws_name},
            "ownerReferences": [owner],
        },
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True},
    }


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    return objects.status(pod).get("phase") == "Running" and pod_ready(dict(pod))


def container_restarted(pod: Mapping[str, Any]) -> bool:
    """``ContainerRestarted``: a Running or Pending pod with a container restart."""
    status = objects.status(pod)
    if status.get("phase") not in ("Running", "Pending"):
        return False
    statuses = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    return any(_int(s.get("restartCount"), 0) > 0 for s in statuses)


# --- status ------------------------------------------------------------------------------------------


@dataclass
class Group:
    """One group as stored: its leader and live workers."""

    index: int
    leader: Obj
    workers: list[Obj]
    #: The worker "StatefulSet" exists: workers were started (always when size is 1).
    started: bool

    def ready(self, group_size: int) -> bool:
        live = [w for w in self.workers if not objects.is_deleting(w)]
        return (
            running_and_ready(self.leader)
            and len(live) == group_size - 1
            and all(running_and_ready(w) for w in live)
        )

    def updated(self, revision: str) -> bool:
        pods = [self.leader, *self.workers]
        return all(objects.labels(p).get(REVISION_LABEL) == revision for p in pods)


def set_condition(conditions: list[Obj], new: Obj, now: str) -> bool:
    """LWS's ``setCondition`` (``new`` is always True): replace a condition of the same type whose status
    or observedGeneration differ, add a missing one, and turn the exclusive True ones False."""
    changed, found = False, False
    for i, cur in enumerate(conditions):
        if cur.get("type") == new["type"]:
            found = True
            if (
                cur.get("status") != new["status"]
                or cur.get("observedGeneration") != new["observedGeneration"]
            ):
                conditions[i] = {**new, "lastTransitionTime": now}
                changed = True
        elif {cur.get("type"), new["type"]} in _EXCLUSIVE and cur.get("status") == "True":
            conditions[i] = {
                **cur,
                "status": "False",
                "lastTransitionTime": now,
                "observedGeneration": new["observedGeneration"],
            }
            changed = True
    if not found:
        conditions.append({**new, "lastTransitionTime": now})
        changed = True
    return changed


def lws_status(lws: Mapping[str, Any], groups: Iterable[Group], revision: str, now: str) -> Obj:
    """The status ``updateStatus``/``updateConditions`` write (rolling-update partition 0)."""
    old = objects.status(lws)
    generation = objects.generation(lws) or 0
    want, group_size = replicas(lws), size(lws)
    groups = list(groups)
    ready = updated = current = updated_current = ready_current = updated_ready = 0
    for group in groups:
        if not group.started:
            continue  # LWS skips a leader whose worker StatefulSet does not exist yet
        is_ready, is_updated = group.ready(group_size), group.updated(revision)
        in_range = group.index < want
        ready += is_ready
        updated += is_updated
        current += in_range
        updated_current += in_range and is_updated
        ready_current += in_range and is_ready
        updated_ready += in_range and is_ready and is_updated
    if updated_current < current:
        wanted = ["UpdateInProgress", "Progressing"]
    elif ready_current == want and updated_ready == current:
        wanted = ["Available"]
    else:
        wanted = ["Progressing"]
    conditions = [dict(c) for c in old.get("conditions") or []]
    for kind in wanted:
        reason, message = CONDITIONS[kind]
        new = {
            "type": kind,
            "status": "True",
            "observedGeneration": generation,
            "reason": reason,
            "message": message,
        }
        set_condition(conditions, new, now)
    for cond in conditions:
        cond["observedGeneration"] = generation
    status: Obj = {
        **{k: v for k, v in old.items() if k not in ("readyReplicas", "updatedReplicas", "replicas")},
        "conditions": conditions,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "replicas": sum(1 for g in groups if not objects.is_deleting(g.leader)),
        "hpaPodSelector": old.get("hpaPodSelector") or hpa_pod_selector(objects.name(lws)),
        "observedGeneration": generation,
    }
    for key in ("readyReplicas", "updatedReplicas", "replicas"):  # omitempty
        if not status[key]:
            del status[key]
    return status


# --- the controller ----------------------------------------------------------------------------------


class LeaderWorkerSetController(AgentLoop):
    """Keeps every LeaderWorkerSet's groups, headless Service and status (see the module doc)."""

    name = "lws-controller"

    def __init__(self, api: Api, pods: PodIndex) -> None:
        super().__init__(api)
        self.pods = pods
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self.svc_rt: ResourceType = api.resource("v1", "Service")
        self.storage_key = "leaderworkerset.x-k8s.io/leaderworkersets"

    def _lws_rt(self) -> ResourceType:
        return self.api.resource(API_VERSION, KIND)

    # --- events -------------------------------------------------------------------------------------

    def resync(self) -> None:
        for lws in self.store.items(self.storage_key):
            self.enqueue(("lws", objects.namespace(lws), objects.name(lws)))

    def on_event(self, event: Event) -> None:
        if event.key == self.storage_key:
            if event.type != DELETED:
                self.enqueue(("lws", objects.namespace(event.obj), objects.name(event.obj)))
        elif event.key in (PODS, SERVICES):
            lws_name = objects.labels(event.obj).get(NAME_LABEL)
            if not lws_name:
                return
            ns = objects.namespace(event.obj)
            if event.key == PODS and self._group_broken(event):
                self.enqueue(("recreate", ns, lws_name, *self._leader_of(event.obj)))
            self.enqueue(("lws", ns, lws_name))

    @staticmethod
    def _group_broken(event: Event) -> bool:
        """The pod was deleted or restarted a container (what ``handleRestartPolicy`` reacts to)."""
        pod = event.obj
        return event.type == DELETED or objects.is_deleting(pod) or container_restarted(pod)

    @staticmethod
    def _leader_of(pod: Mapping[str, Any]) -> tuple[str, str]:
        """(leader name, leader uid) of a pod of a group."""
        if objects.labels(pod).get(WORKER_INDEX_LABEL) == "0":
            return objects.name(pod), objects.uid(pod)
        match = _WORKER_NAME.match(objects.name(pod))
        return (match.group(1) if match else "", controller_uid(dict(pod)) or "")

    # --- work ---------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        if work[0] == "lws":
            self.sync(work[1], work[2])
        elif work[0] == "recreate":
            self.recreate_group(*work[1:])

    def _live_lws(self, namespace: str, name: str) -> Obj | None:
        lws = self.store.get(self.storage_key, namespace, name)
        return None if lws is None or objects.is_deleting(lws) else lws

    def recreate_group(self, namespace: str, lws_name: str, leader: str, leader_uid: str) -> None:
        """``RecreateGroupOnPodRestart``: delete the group's leader (its workers follow it)."""
        lws = self._live_lws(namespace, lws_name)
        if lws is None or not leader_uid:
            return
        policy = (objects.spec(lws).get("leaderWorkerTemplate") or {}).get("restartPolicy")
        if policy not in (None, "", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart"):
            return
        pod = self.store.get(PODS, namespace, leader)
        if pod is None or objects.uid(pod) != leader_uid or objects.is_deleting(pod):
            return
        if policy == "RecreateGroupAfterStart" and self._pending(pod):
            return
        self._delete(pod, "Foreground")

    def _pending(self, leader: Obj) -> bool:
        pods = [leader, *self.pods.owned_by(objects.uid(leader))]
        return any(objects.status(p).get("phase") == "Pending" for p in pods)

    def sync(self, namespace: str, name: str) -> None:
        lws = self._live_lws(namespace, name)
        if lws is None:
            return  # the garbage collector removes what it owns
        if not unique_per_replica(lws):
            self._ensure_service(lws)
        revision = revision_key(lws)
        groups = self._groups(lws)
        want = replicas(lws)
        for index, group in sorted(groups.items(), reverse=True):
            if index >= want and not objects.is_deleting(group.leader):
                self._delete(group.leader, "Background")  # scale down: highest groups go
        self._roll(lws, groups, revision)
        for index in range(want):
            if index not in groups:
                self._create(leader_pod(lws, index, revision))
        for group in groups.values():
            if group.index < want:
                self._ensure_workers(lws, group)
        self._update_status(namespace, name, revision)

    def _groups(self, lws: Obj) -> dict[int, Group]:
        out: dict[int, Group] = {}
        needs_workers = size(lws) > 1
        for leader in self.pods.owned_by(objects.uid(lws)):
            labels = objects.labels(leader)
            if labels.get(WORKER_INDEX_LABEL) != "0":
                continue
            index = _int(labels.get(GROUP_INDEX_LABEL), -1)
            if index < 0:
                continue
            workers = self.pods.owned_by(objects.uid(leader))
            out[index] = Group(index, leader, workers, started=bool(workers) or not needs_workers)
        return out

    def _roll(self, lws: Obj, groups: Mapping[int, Group], revision: str) -> None:
        """Replace outdated groups, highest index first: unready ones at once, ready ones while fewer
        than ``maxUnavailable`` groups are unavailable."""
        want, group_size = replicas(lws), size(lws)
        rolling = (objects.spec(lws).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
        max_unavailable = max(_scaled(rolling.get("maxUnavailable", 1), want), 1)
        live = [g for g in groups.values() if g.index < want and not objects.is_deleting(g.leader)]
        unavailable = want - sum(1 for g in live if g.ready(group_size))
        for group in sorted(live, key=lambda g: -g.index):
            if objects.labels(group.leader).get(REVISION_LABEL) == revision:
                continue
            if group.ready(group_size):
                if unavailable >= max_unavailable:
                    continue
                unavailable += 1
            self._delete(group.leader, "Background")

    def _ensure_workers(self, lws: Obj, group: Group) -> None:
        leader = group.leader
        if objects.is_deleting(leader):
            return
        if unique_per_replica(lws):
            self._ensure_service(lws, leader)
        if objects.spec(lws).get("startupPolicy") == "LeaderReady" and not pod_ready(leader):
            return
        have = {_int(objects.labels(w).get(WORKER_INDEX_LABEL), -1) for w in group.workers}
        for worker in range(1, size(lws)):
            if worker not in have:
                self._create(worker_pod(lws, leader, worker))

    # --- writes -------------------------------------------------------------------------------------

    def _ensure_service(self, lws: Obj, leader: Obj | None = None) -> None:
        name = objects.name(leader if leader is not None else lws)
        if self.store.get(SERVICES, objects.namespace(lws), name) is None:
            self._create(headless_service(lws, leader), self.svc_rt)

    def _create(self, body: Obj, rt: ResourceType | None = None) -> None:
        try:
            self.api.create(
                rt or self.pod_rt,
                body["metadata"]["namespace"],
                body,
                WriteOptions(field_manager=FIELD_MANAGER),
            )
        except ApiError as err:
            if err.code in (403, 409):  # namespace terminating; a pod of that name not yet gone
                log.info("%s: not creating %s: %s", self.name, body["metadata"]["name"], err)
                return
            raise

    def _delete(self, pod: Obj, propagation: str) -> None:
        meta = objects.meta(pod)
        try:
            self.api.delete(
                self.pod_rt,
                meta["namespace"],
                meta["name"],
                DeleteOptions(propagation_policy=propagation, precondition_uid=meta.get("uid")),
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise

    def _update_status(self, namespace: str, name: str, revision: str) -> None:
        lws = self._live_lws(namespace, name)
        if lws is None:
            return
        status = lws_status(lws, self._groups(lws).values(), revision, rfc3339(self.api.clock()))
        if objects.status(lws) == status:
            return
        try:
            write_status(self.api, self._lws_rt(), lws, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code not in (404, 409):
                raise
            self.enqueue(("lws", namespace, name))


def _scaled(value: Any, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounding down."""
    if isinstance(value, str) and value.endswith("%"):
        return _int(value[:-1], 0) * total // 100
    return _int(value, 1)

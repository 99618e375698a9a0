"""Kueue (``kubernetes-sigs/kueue`` v0.19), lite: its webhooks, its Workloads and its quota admission.

What our controllers and the users see of Kueue, played for the three integrations our workloads use:

* **Webhooks** (``pkg/controller/jobs/{pod,deployment,leaderworkerset}/*_webhook.go``), as mutating hooks
  of the in-process API (``Api.mutating_hooks``): a Pod with ``kueue.x-k8s.io/queue-name`` (or whose
  parent's webhook marked it with ``kueue.x-k8s.io/pod-suspending-parent``) gets the scheduling gate
  ``kueue.x-k8s.io/admission`` and the annotation ``kueue.x-k8s.io/role-hash``; one queued by its own label
  also the label and the finalizer ``kueue.x-k8s.io/managed`` (released as :mod:`.kueue_finalizers`
  says: a pod group's deleted member only once its replacement is there); a Deployment or
  LeaderWorkerSet with the queue label gets the queue label, the managed label and the
  suspending-parent annotation on its pod templates (LeaderWorkerSets also
  ``kueue.x-k8s.io/pod-group-serving``). Namespaces ``kube-system`` and ``kueue-system`` are left out
  (Kueue's default ``managedJobsNamespaceSelector``).
* **Workloads** (``kueue.x-k8s.io/v1beta1``): a plain pod group (``kueue.x-k8s.io/pod-group-name`` +
  annotation ``kueue.x-k8s.io/pod-group-total-count``) gets one, named like the group, once all its
  pods exist, with one pod set per distinct pod shape and every pod as an owner (so it goes when the
  pods go); a LeaderWorkerSet one per group index, ``leaderworkerset-<name>-<i>-<hash>``, owned by
  it, with pod sets ``leader`` and ``worker``; any other gated pod (a Deployment's) one of its own,
  ``pod-<name>-<hash>``, owned by the pod.
* **Admission** (:mod:`.kueue_rules`): pending Workloads of each ClusterQueue in creation order against
  its nominal quota; admitted → ``status.admission``, ``QuotaReserved`` and ``Admitted`` ``True``, and
  the pods ungated with the flavor's ``nodeLabels`` added to their ``nodeSelector``; not admitted →
  ``QuotaReserved=False`` with Kueue's reason and message (``Pending``, or ``Inadmissible`` for a
  missing LocalQueue or ClusterQueue) and a Warning Event of that reason on the Workload when the
  message changes. Admitted workloads are never evicted.

Differences from Kueue (docs/sim.md, "Kueue"): no ``WaitingForReplacementPods`` condition, no excess
pods deleted, no cohorts/borrowing, preemption, priorities, admission checks, fair sharing, topology-aware scheduling,
``waitForPodsReady``, partial admission, no ClusterQueue/LocalQueue status; a pod group's shape is
read from its pods once, when its Workload is created.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents import kueue_finalizers as finalizers
from aiplane.sim.agents import kueue_rules as rules
from aiplane.sim.agents.base import AgentLoop, Obj, Work, record_event, write_status
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions, upsert_condition
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

COMPONENT = "kueue-admission"
FIELD_MANAGER = "kueue"
API = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
GATE = "kueue.x-k8s.io/admission"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
UNMANAGED_NAMESPACES = ("kube-system", "kueue-system")
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

_WATCHED = (
    "/pods",
    "kueue.x-k8s.io/workloads",
    "kueue.x-k8s.io/clusterqueues",
    "kueue.x-k8s.io/localqueues",
    "kueue.x-k8s.io/resourceflavors",
    "leaderworkerset.x-k8s.io/leaderworkersets",
)


# --- webhooks (pure) ---------------------------------------------------------------------------------


def _managed_namespace(obj: Mapping[str, Any]) -> bool:
    return objects.namespace(obj) not in UNMANAGED_NAMESPACES


def default_pod(pod: Obj) -> None:
    """The pod webhook's ``Default``: gate a pod Kueue manages."""
    meta = pod.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    by_parent = PARENT_ANNOTATION in (meta.get("annotations") or {})
    if not _managed_namespace(pod) or not (by_parent or labels.get(QUEUE_LABEL)):
        return
    if labels.get(QUEUE_LABEL):
        meta.setdefault("labels", {})[MANAGED_LABEL] = "true"
    if not by_parent and finalizers.FINALIZER not in (meta.get("finalizers") or []):
        meta["finalizers"] = [*(meta.get("finalizers") or []), finalizers.FINALIZER]
    spec = pod.setdefault("spec", {})
    gates = list(spec.get("schedulingGates") or [])
    if not any(g.get("name") == GATE for g in gates):
        spec["schedulingGates"] = [*gates, {"name": GATE}]
    # The pod set a member belongs to, fixed before admission adds a flavor's node labels to its spec.
    meta.setdefault("annotations", {})[ROLE_HASH_ANNOTATION] = _shape_hash(spec)


def _default_template(template: Obj, queue: str, parent: str, *, serving: bool = False) -> None:
    meta = template.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    labels[MANAGED_LABEL] = "true"
    labels[QUEUE_LABEL] = queue
    annotations = meta.setdefault("annotations", {})
    annotations[PARENT_ANNOTATION] = parent
    if serving:
        annotations[SERVING_ANNOTATION] = "true"


def default_deployment(deployment: Obj) -> None:
    """The Deployment webhook: the queue reaches every pod through the template."""
    queue = objects.labels(deployment).get(QUEUE_LABEL)
    if queue and _managed_namespace(deployment):
        _default_template(deployment.setdefault("spec", {}).setdefault("template", {}), queue, "deployment")


def default_lws(lws: Obj) -> None:
    """The LeaderWorkerSet webhook: leader and worker templates carry the queue."""
    queue = objects.labels(lws).get(QUEUE_LABEL)
    if not queue or not _managed_namespace(lws):
        return
    lwt = lws.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
    for key in ("leaderTemplate", "workerTemplate"):
        if isinstance(lwt.get(key), dict):
            _default_template(lwt[key], queue, LWS_FRAMEWORK, serving=True)


def mutating_hook(rt: ResourceType, obj: Obj, _old: Obj | None) -> None:
    """Kueue's webhooks, for ``Api.mutating_hooks`` (a create, or an update of the main resource)."""
    key = (rt.group, rt.kind)
    if key == ("", "Pod") and _old is None:
        default_pod(obj)
    elif key == ("apps", "Deployment"):
        default_deployment(obj)
    elif key == ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"):
        default_lws(obj)


# --- names (jobframework/workload_names.go) ----------------------------------------------------------


def workload_name(
    owner_name: str, owner_uid: str, kind: str, group: str, extra: str = "", base: str = ""
) -> str:
    """``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>`` (63 at most with the hash) and 5 hex of a
    SHA-1 over kind, group, name, uid."""
    h = hashlib.sha1(f"{kind}\n{group}\n{base or owner_name}\n{owner_uid}".encode(), usedforsecurity=False)
    if extra:
        h.update(f"\n{extra}".encode())
    prefix = f"{kind.lower()}-{owner_name}"[: 63 - 6]
    return f"{prefix}-{h.hexdigest()[:5]}"


def _shape_hash(spec: Mapping[str, Any]) -> str:
    """A pod set name for one pod shape: Kueue's role hash (``utilpod.GenerateRoleHash``), the first 8
    hex of a SHA-256 over what admission reads (requests, ports, placement); env and images do not count."""

    def containers(key: str) -> list[Obj]:
        return [
            {"resources": {"requests": (c.get("resources") or {}).get("requests")}, "ports": c.get("ports")}
            for c in spec.get(key) or []
        ]

    shape = {
        "initContainers": containers("initContainers"),
        "containers": containers("containers"),
        **{
            k: spec.get(k)
            for k in (
                "nodeSelector",
                "affinity",
                "tolerations",
                "runtimeClassName",
                "priority",
                "topologySpreadConstraints",
                "overhead",
                "resourceClaims",
            )
        },
    }
    text = json.dumps({"spec": shape}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def role_of(pod: Mapping[str, Any]) -> str:
    """``getRoleHash``: the webhook's annotation, else the hash of the spec as it is."""
    return str(objects.annotations(pod).get(ROLE_HASH_ANNOTATION) or _shape_hash(objects.spec(pod)))


def _condition(wl: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in objects.status(wl).get("conditions") or []:
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return None


def is_admitted(wl: Mapping[str, Any]) -> bool:
    cond = _condition(wl, "QuotaReserved")
    return cond is not None and cond.get("status") == "True" and bool(objects.status(wl).get("admission"))


def is_finished(wl: Mapping[str, Any]) -> bool:
    cond = _condition(wl, "Finished")
    return cond is not None and cond.get("status") == "True"


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in objects.spec(pod).get("schedulingGates") or [])


def _active(pod: Mapping[str, Any]) -> bool:
    return not objects.is_deleting(pod) and objects.status(pod).get("phase") not in ("Succeeded", "Failed")


class KueueController(AgentLoop):
    """Kueue's job integrations and scheduler for pod groups, Deployments' pods and LeaderWorkerSets."""

    name = "kueue"

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        #: Pods Kueue manages (label ``kueue.x-k8s.io/managed`` or the gate), by (namespace, name).
        self._pods: dict[tuple[str, str], Obj] = {}

    def _rt(self, api_version: str, kind: str) -> ResourceType | None:
        return self.api.registry.for_kind(api_version, kind)

    def start(self) -> None:
        if mutating_hook not in self.api.mutating_hooks:
            self.api.mutating_hooks.append(mutating_hook)
        super().start()

    async def stop(self) -> None:
        if mutating_hook in self.api.mutating_hooks:
            self.api.mutating_hooks.remove(mutating_hook)
        await super().stop()

    def resync(self) -> None:
        self._pods = {
            (objects.namespace(p), objects.name(p)): p
            for p in self.store.items("/pods")
            if self._kueue_pod(p)
        }
        self.enqueue(("sync",))

    @staticmethod
    def _kueue_pod(pod: Mapping[str, Any]) -> bool:
        return objects.labels(pod).get(MANAGED_LABEL) == "true" or _gated(pod)

    def on_event(self, event: Event) -> None:
        if event.key not in _WATCHED:
            return
        if event.key == "/pods":
            key = (objects.namespace(event.obj), objects.name(event.obj))
            if event.type == DELETED or not self._kueue_pod(event.obj):
                if self._pods.pop(key, None) is None:
                    return
            else:
                self._pods[key] = event.obj
        self.enqueue(("sync",))

    # --- one pass ---------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        wl_rt = self._rt(API, "Workload")
        if wl_rt is None:
            return
        workloads = {(objects.namespace(w), objects.name(w)): w for w in self.store.items(wl_rt.storage_key)}
        self._create_workloads(wl_rt, workloads)
        self._admit(wl_rt, list(workloads.values()))
        self._ungate(wl_rt)
        self._finalize(wl_rt)

    # --- Workloads --------------------------------------------------------------------------------

    def _create_workloads(self, wl_rt: ResourceType, existing: dict[tuple[str, str], Obj]) -> None:
        groups: dict[tuple[str, str], list[Obj]] = {}
        for (ns, _name), pod in self._pods.items():
            if not _active(pod):
                continue
            group = objects.labels(pod).get(POD_GROUP_LABEL)
            if group:
                groups.setdefault((ns, group), []).append(pod)
            elif objects.labels(pod).get(LWS_NAME_LABEL) is None and _gated(pod):
                wl = self._single(pod)
                if (ns, objects.name(wl)) not in existing:
                    self._create(wl_rt, wl, existing)
        for (ns, group), pods in groups.items():
            if (ns, group) in existing:
                self._own(wl_rt, existing[(ns, group)], pods)
                continue
            total = int(objects.annotations(pods[0]).get(TOTAL_COUNT_ANNOTATION) or len(pods))
            if len(pods) >= total:
                self._create(wl_rt, self._group(ns, group, pods[:total]), existing)
        lws_rt = self._rt("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
        if lws_rt is None:
            return
        for lws in self.store.items(lws_rt.storage_key):
            queue = objects.labels(lws).get(QUEUE_LABEL)
            if not queue or objects.is_deleting(lws) or not _managed_namespace(lws):
                continue
            replicas = int(objects.spec(lws).get("replicas", 1) or 0)
            wanted = set()
            for i in range(replicas):
                wl = self._lws(lws, i, queue)
                wanted.add(objects.name(wl))
                if (objects.namespace(lws), objects.name(wl)) not in existing:
                    self._create(wl_rt, wl, existing)
            self._delete_unwanted(wl_rt, lws, wanted, existing)

    def _delete_unwanted(
        self, wl_rt: ResourceType, owner: Obj, wanted: set[str], existing: dict[tuple[str, str], Obj]
    ) -> None:
        """A LeaderWorkerSet scaled down: the Workloads of the groups it no longer has go."""
        ns, uid = objects.namespace(owner), objects.uid(owner)
        for (wl_ns, name), wl in list(existing.items()):
            refs = objects.meta(wl).get("ownerReferences") or []
            if wl_ns != ns or name in wanted or not any(r.get("uid") == uid for r in refs):
                continue
            try:
                self.api.delete(wl_rt, ns, name)
            except ApiError as err:
                if err.code != 404:
                    raise
            existing.pop((wl_ns, name), None)

    def _own(self, wl_rt: ResourceType, wl: Obj, pods: list[Obj]) -> None:
        """Kueue's ``EnsureWorkloadOwnedByAllMembers``: a pod that joined the group (a replacement) owns
        its Workload too. As in Kueue, a member's reference is matched by kind and *name*
        (``controllerutil.SetOwnerReference``) and the Workload is written only when the count of owners
        grows: a replacement reusing its predecessor's name is never recorded, so once every original
        member is gone the garbage collector deletes the Workload (unless another owner holds it)."""
        refs = [dict(r) for r in objects.meta(wl).get("ownerReferences") or []]
        before = len(refs)
        index = {(r.get("kind"), r.get("name")): i for i, r in enumerate(refs)}
        for pod in pods:
            ref = self._owner(pod, "v1", "Pod", controller=False)
            at = index.get(("Pod", objects.name(pod)))
            if at is None:
                index[("Pod", objects.name(pod))] = len(refs)
                refs.append(ref)
            else:
                refs[at] = ref
        if len(refs) <= before:
            return
        body = {**wl, "metadata": {**objects.meta(wl), "ownerReferences": refs}}
        try:
            self.api.update(
                wl_rt,
                objects.namespace(wl),
                objects.name(wl),
                body,
                WriteOptions(field_manager=FIELD_MANAGER),
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise
            self.enqueue(("sync",))

    def _create(self, wl_rt: ResourceType, wl: Obj, existing: dict[tuple[str, str], Obj]) -> None:
        ns = objects.namespace(wl)
        try:
            created = self.api.create(wl_rt, ns, wl, WriteOptions(field_manager=FIELD_MANAGER)).obj
        except ApiError as err:
            if err.code not in (403, 404, 409):
                raise
            return
        existing[(ns, objects.name(created))] = created

    @staticmethod
    def _owner(obj: Mapping[str, Any], api_version: str, kind: str, *, controller: bool) -> Obj:
        ref: Obj = {
            "apiVersion": api_version,
            "kind": kind,
            "name": objects.name(obj),
            "uid": objects.uid(obj),
        }
        if controller:
            ref.update(controller=True, blockOwnerDeletion=True)
        return ref

    @staticmethod
    def _podset(name: str, count: int, template_spec: Mapping[str, Any]) -> Obj:
        return {"name": name, "count": count, "template": {"spec": dict(template_spec)}}

    def _single(self, pod: Obj) -> Obj:
        name = workload_name(objects.name(pod), objects.uid(pod), "Pod", "")
        return self._workload(
            pod,
            name,
            objects.labels(pod).get(QUEUE_LABEL, ""),
            [self._podset("main", 1, objects.spec(pod))],
            [self._owner(pod, "v1", "Pod", controller=True)],
        )

    def _group(self, ns: str, group: str, pods: list[Obj]) -> Obj:
        sets: dict[str, Obj] = {}
        for pod in pods:
            role = role_of(pod)
            if role in sets:
                sets[role]["count"] += 1
            else:
                sets[role] = self._podset(role, 1, objects.spec(pod))
        owners = [self._owner(p, "v1", "Pod", controller=False) for p in pods]
        wl = self._workload(
            pods[0],
            group,
            objects.labels(pods[0]).get(QUEUE_LABEL, ""),
            [sets[k] for k in sorted(sets)],
            owners,
        )
        wl["metadata"]["annotations"] = {"kueue.x-k8s.io/is-group-workload": "true"}
        return wl

    def _lws(self, lws: Obj, index: int, queue: str) -> Obj:
        spec = objects.spec(lws)
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size", 1) or 1)
        leader = lwt.get("leaderTemplate")
        worker_spec = (lwt.get("workerTemplate") or {}).get("spec") or {}
        podsets = []
        if isinstance(leader, Mapping):
            podsets.append(self._podset("leader", 1, leader.get("spec") or {}))
            if size > 1:
                podsets.append(self._podset("worker", size - 1, worker_spec))
        else:
            podsets.append(self._podset("main", size, worker_spec))
        name = workload_name(
            f"{objects.name(lws)}-{index}", objects.uid(lws), "LeaderWorkerSet", "leaderworkerset.x-k8s.io"
        )
        owner = self._owner(lws, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", controller=True)
        wl = self._workload(lws, name, queue, podsets, [owner])
        wl["metadata"]["annotations"] = {
            "kueue.x-k8s.io/is-group-workload": "true",
            "kueue.x-k8s.io/component-workload-index": str(index),
        }
        return wl

    @staticmethod
    def _workload(
        source: Mapping[str, Any], name: str, queue: str, podsets: list[Obj], owners: list[Obj]
    ) -> Obj:
        return {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": objects.namespace(source), "ownerReferences": owners},
            "spec": {"queueName": queue, "podSets": podsets, "active": True},
        }

    # --- admission --------------------------------------------------------------------------------

    def _queues(self) -> tuple[dict[tuple[str, str], Obj], dict[str, Obj], dict[str, Obj]]:
        lq_rt, cq_rt, rf_rt = (self._rt(API, k) for k in ("LocalQueue", "ClusterQueue", "ResourceFlavor"))
        lqs = (
            {(objects.namespace(q), objects.name(q)): q for q in self.store.items(lq_rt.storage_key)}
            if lq_rt
            else {}
        )
        cqs = {objects.name(q): q for q in self.store.items(cq_rt.storage_key)} if cq_rt else {}
        rfs = {objects.name(f): f for f in self.store.items(rf_rt.storage_key)} if rf_rt else {}
        return lqs, cqs, rfs

    def _admit(self, wl_rt: ResourceType, workloads: list[Obj]) -> None:
        lqs, cqs, rfs = self._queues()
        usage: dict[str, rules.Usage] = {}
        for wl in workloads:
            if is_admitted(wl) and not is_finished(wl):
                admission = objects.status(wl).get("admission") or {}
                cq_usage = usage.setdefault(str(admission.get("clusterQueue")), {})
                for (flavor, res), amount in rules.usage_of([admission]).items():
                    cq_usage[(flavor, res)] = cq_usage.get((flavor, res), 0) + amount
        pending = [
            w for w in workloads if not is_admitted(w) and not is_finished(w) and not objects.is_deleting(w)
        ]
        pending.sort(key=lambda w: (objects.meta(w).get("creationTimestamp") or "", objects.name(w)))
        for wl in pending:
            ns = objects.namespace(wl)
            queue = str(objects.spec(wl).get("queueName") or "")
            lq = lqs.get((ns, queue))
            if lq is None:
                self._pending(wl_rt, wl, "Inadmissible", f"LocalQueue {queue} doesn't exist")
                continue
            cq_name = str(objects.spec(lq).get("clusterQueue") or "")
            cq = cqs.get(cq_name)
            if cq is None:
                self._pending(wl_rt, wl, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
                continue
            cq_usage = usage.setdefault(cq_name, {})
            decision = rules.assign(rules.podsets_of(wl), rules.resource_groups(cq, rfs), cq_usage)
            if not decision.admitted:
                self._pending(wl_rt, wl, "Pending", decision.message)
                continue
            if self._admitted(wl_rt, wl, rules.admission_of(cq_name, decision)):
                rules.add_usage(cq_usage, decision.assigned)

    def _write(self, wl_rt: ResourceType, wl: Obj, status: Obj) -> bool:
        try:
            write_status(self.api, wl_rt, wl, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code in (404, 409):
                self.enqueue(("sync",))
                return False
            raise
        return True

    def _pending(self, wl_rt: ResourceType, wl: Obj, reason: str, message: str) -> None:
        status = dict(objects.status(wl))
        cond = _condition(wl, "QuotaReserved")
        if cond is not None and cond.get("reason") == reason and cond.get("message") == message:
            return
        now = rfc3339(self.api.clock())
        wanted = {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}
        status["conditions"] = upsert_condition(
            status.get("conditions") or [], {**wanted, "lastTransitionTime": now}
        )
        if self._write(wl_rt, wl, status):
            record_event(self.api, wl, "Warning", reason, message, component=COMPONENT)

    def _admitted(self, wl_rt: ResourceType, wl: Obj, admission: Obj) -> bool:
        now = rfc3339(self.api.clock())
        status = dict(objects.status(wl))
        status["admission"] = admission
        conditions = status.get("conditions") or []
        cq = admission["clusterQueue"]
        for wanted in (
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cq}",
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
            },
        ):
            conditions = upsert_condition(conditions, {**wanted, "lastTransitionTime": now})
        status["conditions"] = conditions
        if not self._write(wl_rt, wl, status):
            return False
        record_event(
            self.api,
            wl,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq}",
            component=COMPONENT,
        )
        record_event(
            self.api, wl, "Normal", "Admitted", f"Admitted by ClusterQueue {cq}", component=COMPONENT
        )
        return True

    # --- ungating ---------------------------------------------------------------------------------

    def _workload_of(self, pod: Mapping[str, Any], workloads: Mapping[tuple[str, str], Obj]) -> Obj | None:
        ns = objects.namespace(pod)
        labels = objects.labels(pod)
        group = labels.get(POD_GROUP_LABEL)
        if group:
            return workloads.get((ns, group))
        lws = labels.get(LWS_NAME_LABEL)
        if lws is not None:
            lws_rt = self._rt("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
            owner = self.store.get(lws_rt.storage_key, ns, lws) if lws_rt else None
            if owner is None:
                return None
            index = labels.get(LWS_GROUP_LABEL, "0")
            name = workload_name(
                f"{lws}-{index}", objects.uid(owner), "LeaderWorkerSet", "leaderworkerset.x-k8s.io"
            )
            return workloads.get((ns, name))
        return workloads.get((ns, workload_name(objects.name(pod), objects.uid(pod), "Pod", "")))

    def _ungate(self, wl_rt: ResourceType) -> None:
        workloads = {(objects.namespace(w), objects.name(w)): w for w in self.store.items(wl_rt.storage_key)}
        rfs = self._queues()[2]
        pod_rt = self.api.resource("v1", "Pod")
        for pod in list(self._pods.values()):
            if not _gated(pod) or not _active(pod):
                continue
            wl = self._workload_of(pod, workloads)
            if wl is None or not is_admitted(wl):
                continue
            selector = dict(objects.spec(pod).get("nodeSelector") or {})
            for flavor in self._flavors_for(pod, wl):
                for k, v in ((rfs.get(flavor) or {}).get("spec") or {}).get("nodeLabels", {}).items():
                    selector.setdefault(k, v)
            spec = dict(objects.spec(pod))
            spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
            if not spec["schedulingGates"]:
                del spec["schedulingGates"]
            if selector:
                spec["nodeSelector"] = selector
            try:
                self.api.update(
                    pod_rt,
                    objects.namespace(pod),
                    objects.name(pod),
                    {**pod, "spec": spec},
                    WriteOptions(field_manager=FIELD_MANAGER),
                )
            except ApiError as err:
                if err.code not in (404, 409, 422):
                    raise

    @staticmethod
    def _flavors_for(pod: Mapping[str, Any], wl: Mapping[str, Any]) -> Iterable[str]:
        """The flavors assigned to the pod set the pod belongs to (by role, else the only one)."""
        assignments = (objects.status(wl).get("admission") or {}).get("podSetAssignments") or []
        labels = objects.labels(pod)
        if labels.get(LWS_NAME_LABEL) is not None:
            wanted = "leader" if labels.get(LWS_WORKER_LABEL, "0") == "0" else "worker"
        elif labels.get(POD_GROUP_LABEL):
            wanted = role_of(pod)
        else:
            wanted = "main"
        chosen = [a for a in assignments if a.get("name") == wanted] or assignments[:1]
        return sorted({str(f) for a in chosen for f in (a.get("flavors") or {}).values()})

    # --- finalizers (:mod:`.kueue_finalizers`) -----------------------------------------------------

    def _finalize(self, wl_rt: ResourceType) -> None:
        workloads = {(objects.namespace(w), objects.name(w)): w for w in self.store.items(wl_rt.storage_key)}
        groups: dict[tuple[str, str], list[Obj]] = {}
        for (ns, _name), pod in list(self._pods.items()):
            group = objects.labels(pod).get(POD_GROUP_LABEL)
            if group:
                groups.setdefault((ns, group), []).append(pod)
            elif finalizers.lone_pod_released(pod):
                self._release(pod)
        for (ns, group), pods in groups.items():
            wl = workloads.get((ns, group))
            verdict = finalizers.group_verdict(pods, wl, role_of)
            if verdict.finished and wl is not None and not is_finished(wl):
                self._finish(wl_rt, wl, pods)
            by_name = {objects.name(p): p for p in pods}
            for name in verdict.delete:
                self._delete_pod(by_name[name])
            for name in verdict.release:
                self._release(by_name[name])

    def _finish(self, wl_rt: ResourceType, wl: Obj, pods: list[Obj]) -> None:
        """``workload.Finish``: ``Finished=True`` (the group's quota is free again)."""
        total = objects.annotations(pods[0]).get(finalizers.TOTAL_COUNT_ANNOTATION, "")
        succeeded = sum(1 for p in pods if objects.status(p).get("phase") == "Succeeded")
        status = dict(objects.status(wl))
        status["conditions"] = upsert_condition(
            status.get("conditions") or [],
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": f"Pods succeeded: {succeeded}/{total}.",
                "lastTransitionTime": rfc3339(self.api.clock()),
            },
        )
        self._write(wl_rt, wl, status)

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self.api.delete(self.api.resource("v1", "Pod"), objects.namespace(pod), objects.name(pod))
        except ApiError as err:
            if err.code != 404:
                raise

    def _release(self, pod: Obj) -> None:
        """``removePodFinalizers``: the pod without Kueue's finalizer (a pod being deleted then goes)."""
        meta = objects.meta(pod)
        rest = [f for f in meta.get("finalizers") or [] if f != finalizers.FINALIZER]
        try:
            self.api.update(
                self.api.resource("v1", "Pod"),
                objects.namespace(pod),
                objects.name(pod),
                {**pod, "metadata": {**meta, "finalizers": rest}},
                WriteOptions(field_manager=FIELD_MANAGER),
            )
        except ApiError as err:
            if err.code not in (404, 409, 422):
                raise
            self.enqueue(("sync",))

"""The DaemonSet controller of kube-controller-manager (``pkg/controller/daemon``), lite.

Why it matters here: the AMD GPU operator's device plugin is a DaemonSet that must *not* tolerate the
``amd-dcm=up:NoExecute`` partitioning taint, so that it leaves a node while the Device Config Manager
repartitions the GPUs and comes back (re-registering the new devices) when the taint goes. Our
partitioning controllers depend on exactly that cycle, so the sim runs it.

For every apps/v1 DaemonSet: one pod on every node the pod template may run on — node selector and
required node affinity match (:func:`aiplane.apimachinery.selectors.required_node_affinity_matches`), and the
node's ``NoSchedule``/``NoExecute`` taints are tolerated (:func:`tolerates`, with the tolerations the
controller adds to every daemon pod) — named ``<ds>-<5 random chars>``, bound to its node, owned by
the DaemonSet, labelled with the template's labels plus ``controller-revision-hash`` and
``pod-template-generation``. Pods on nodes that stop matching, or that get a ``NoExecute`` taint the
pod does not tolerate, are deleted; deleted pods are recreated as soon as their node fits again.
``RollingUpdate`` replaces outdated pods ``maxUnavailable`` at a time; the status counters are kept
current.

Work is incremental, so that a node change costs O(pods on that node), not O(nodes). A full sync
(``("ds", ns, name)``: every node checked, rolling update, status) runs when the DaemonSet's spec
changes, at start, when the DaemonSet has no :class:`Placement` cache (built by the full sync) and while
a rolling update is in progress. Otherwise, as kube's ``updateNode`` does, a node event re-syncs a
DaemonSet only when ``node_should_run`` changed for that node, and only on that node
(``("node", ns, name, node)``), as does an event of one of its pods bound to a node; the status is then
refreshed (``("status", ns, name)``) from the cached placement and the DaemonSet's own pods.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.apimachinery.selectors import required_node_affinity_matches
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    controller_uid,
    create_owned_pod,
    delete_owned_pod,
    pod_ready,
    write_status,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.store import ADDED, DELETED, Event

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

#: Field manager / event source of kube-controller-manager's DaemonSet controller.
COMPONENT = "daemonset-controller"
FIELD_MANAGER = "kube-controller-manager"
#: The label the controller puts on pods and ControllerRevisions (``apps.DefaultDaemonSetUniqueLabelKey``).
REVISION_HASH_LABEL = "controller-revision-hash"
#: The label with the DaemonSet's generation when the pod was made (``extensions.DaemonSetTemplateGenerationKey``).
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
#: Effects a daemon pod must tolerate to be placed (``NoSchedule`` and ``NoExecute``); to keep running,
#: only ``NoExecute`` counts.
SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
EXECUTE_EFFECTS = ("NoExecute",)

#: The tolerations ``util.AddOrUpdateDaemonPodTolerations`` gives every daemon pod: daemons keep running
#: on NotReady/unreachable nodes, under node pressure, and on cordoned nodes.
DAEMON_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# --- taints and tolerations (k8s.io/api/core/v1 toleration.go, component-helpers taints) -------------


def toleration_tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``: effect (empty = all), key (empty with ``Exists`` = all keys) and
    operator (``Equal``, the default, compares values; ``Exists`` ignores them)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool((toleration.get("value") or "") == (taint.get("value") or ""))
    return False


def untolerated_taints(
    taints: Iterable[Mapping[str, Any]] | None,
    tolerations: Iterable[Mapping[str, Any]] | None,
    effects: Sequence[str] = SCHEDULE_EFFECTS,
) -> list[Mapping[str, Any]]:
    """The taints with one of ``effects`` that no toleration tolerates."""
    tols = list(tolerations or [])
    return [
        taint
        for taint in taints or []
        if taint.get("effect") in effects and not any(toleration_tolerates_taint(t, taint) for t in tols)
    ]


def tolerates(
    taints: Iterable[Mapping[str, Any]] | None,
    tolerations: Iterable[Mapping[str, Any]] | None,
    effects: Sequence[str] = SCHEDULE_EFFECTS,
) -> bool:
    """Whether ``tolerations`` tolerate every taint whose effect is in ``effects`` (by default
    ``NoSchedule`` and ``NoExecute``: what placing a pod needs; ``PreferNoSchedule`` never blocks)."""
    return not untolerated_taints(taints, tolerations, effects)


def daemon_pod_tolerations(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The template's tolerations plus :data:`DAEMON_TOLERATIONS` (added when no toleration with the
    same key and effect exists, as ``AddOrUpdateTolerationInPodSpec`` does)."""
    out = [dict(t) for t in pod_spec.get("tolerations") or []]
    extra = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        extra.append(HOST_NETWORK_TOLERATION)
    for toleration in extra:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"] for t in out
        ):
            out.append(dict(toleration))
    return out


def node_should_run(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (should run a new pod, should keep an existing one running).

    ``pod_spec`` is the template's spec; the daemon tolerations are added here. A pod is placed only
    where node selector, required node affinity and ``NoSchedule``/``NoExecute`` taints allow; an
    existing pod keeps running despite a new ``NoSchedule`` taint, but not on a node that stopped
    matching its node selector or affinity, or got an untolerated ``NoExecute`` taint.
    """
    wanted_node = pod_spec.get("nodeName")
    if wanted_node and wanted_node != objects.meta(node).get("name"):
        return False, False
    if not required_node_affinity_matches(pod_spec, node):
        return False, False
    taints = objects.spec(node).get("taints") or []
    tolerations = daemon_pod_tolerations(pod_spec)
    return tolerates(taints, tolerations, SCHEDULE_EFFECTS), tolerates(taints, tolerations, EXECUTE_EFFECTS)


def replace_node_affinity(affinity: Mapping[str, Any] | None, node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required node affinity of a daemon pod becomes
    exactly ``metadata.name In [node]`` (the template's terms were already checked)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    out = dict(affinity or {})
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    out["nodeAffinity"] = node_affinity
    return out


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """A stable hash of the pod template, spelled like kube's ``controller.ComputeHash`` (a 32-bit
    number written with the "safe" alphabet ``bcdfghjklmnpqrstvwxz2456789``).

    kube hashes the Go struct with fnv; we hash canonical JSON, so values differ from a real
    cluster's but are as stable (the same template always gives the same hash)."""
    digest = hashlib.blake2b(orjson.dumps(template, option=orjson.OPT_SORT_KEYS), digest_size=4)
    if collision_count:
        digest.update(str(collision_count).encode())
    number = str(int.from_bytes(digest.digest(), "big"))
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in number)


def max_unavailable(ds: Mapping[str, Any], desired: int) -> int:
    """``rollingUpdate.maxUnavailable`` as a number of pods (percentages round up; default 1; at least
    1 unless ``maxSurge`` is used, which we treat as 1 too)."""
    rolling = (objects.spec(ds).get("updateStrategy") or {}).get("rollingUpdate") or {}
    value = rolling.get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            return 1
        number = -(-pct * desired // 100)
    else:
        try:
            number = int(value)
        except (TypeError, ValueError):
            return 1
    return max(number, 1)


#: A node's part in the status counters: (currentNumberScheduled, numberMisscheduled, numberReady,
#: updatedNumberScheduled).
Counts = tuple[int, int, int, int]
_NO_COUNTS: Counts = (0, 0, 0, 0)


@dataclass
class Placement:
    """Where one DaemonSet's pods belong and the status counters, as its last full sync found them and
    node and pod events keep them, so that neither a node sync nor a status refresh looks at other nodes.

    Valid while the DaemonSet has ``uid`` and its template still hashes to ``template_hash`` (any spec
    change drops it).
    """

    uid: str
    template_hash: str
    #: The template's pod spec the placement was computed with.
    pod_spec: Mapping[str, Any]
    #: ``updateStrategy`` is ``RollingUpdate``.
    rolling: bool
    #: Every node → ``node_should_run`` (should run a new pod, should keep an existing one).
    nodes: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    #: The nodes that should run a pod (``desiredNumberScheduled`` is its size).
    run: set[str] = field(default_factory=set)
    #: Nodes whose kept pod has an older template: a rolling update is in progress when not empty.
    outdated: set[str] = field(default_factory=set)
    #: Node → the pod the status counts there (the first live one by name, as stored when last counted).
    counted: dict[str, Obj] = field(default_factory=dict)
    #: Nodes whose pods changed since they were counted (recounted before the status is computed).
    dirty: set[str] = field(default_factory=set)
    #: Node → its part in ``totals`` (nodes that count nothing are left out).
    counts: dict[str, Counts] = field(default_factory=dict)
    totals: Counts = _NO_COUNTS

    def set_node(self, node: str, should: tuple[bool, bool] | None) -> tuple[bool, bool] | None:
        """Record ``node_should_run`` for ``node`` (``None``: the node is gone); returns the old value."""
        old = self.nodes.pop(node, None) if should is None else self.nodes.get(node)
        if should is not None:
            self.nodes[node] = should
        if should is not None and should[0]:
            self.run.add(node)
        else:
            self.run.discard(node)
        self._recount(node)
        return old

    def set_pods(self, node: str, pods: Iterable[Obj]) -> None:
        """Count the first live pod of ``pods`` (the DaemonSet's pods on ``node``, by name) there."""
        pod = next((p for p in pods if not objects.is_deleting(p)), None)
        if pod is None:
            self.counted.pop(node, None)
        else:
            self.counted[node] = pod
        self.dirty.discard(node)
        self._recount(node)

    def count_all(self, pods: Iterable[Obj]) -> None:
        """Count every node afresh from all the DaemonSet's pods (by name)."""
        self.counted, self.counts, self.totals = {}, {}, _NO_COUNTS
        self.dirty.clear()
        for pod in pods:
            node = str(objects.spec(pod).get("nodeName") or "")
            if node and not objects.is_deleting(pod):
                self.counted.setdefault(node, pod)
        for node in self.counted:
            self._recount(node)

    def _recount(self, node: str) -> None:
        pod = self.counted.get(node)
        if pod is None:
            new = _NO_COUNTS
        elif node in self.run:
            updated = objects.labels(pod).get(REVISION_HASH_LABEL) == self.template_hash
            new = (1, 0, int(pod_ready(pod)), int(updated))
        elif node in self.nodes:
            new = (0, 1, 0, 0)
        else:
            new = _NO_COUNTS  # pods on nodes that are gone count nowhere
        old = self.counts.pop(node, _NO_COUNTS)
        if new != _NO_COUNTS:
            self.counts[node] = new
        if new != old:
            t, o, n = self.totals, old, new
            self.totals = (t[0] - o[0] + n[0], t[1] - o[1] + n[1], t[2] - o[2] + n[2], t[3] - o[3] + n[3])

    @property
    def needs_full_sync(self) -> bool:
        """A rolling update is in progress: its budget spans every node, so only a full sync decides."""
        return self.rolling and bool(self.outdated)


def _plan_node(
    should_run: bool, should_continue: bool, existing: list[Obj]
) -> tuple[bool, Obj | None, list[Obj]]:
    """For one node and the DaemonSet's live pods there (oldest first): (create a pod, the pod kept, the
    pods to delete)."""
    if should_run and not existing:
        return True, None, []
    if not should_continue:
        return False, None, list(existing)
    if existing:
        return False, existing[0], list(existing[1:])  # duplicates: keep the oldest, as kube does
    return False, None, []


def _by_creation(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda p: str(objects.meta(p).get("creationTimestamp", "")))


class DaemonSetController(AgentLoop):
    """Keeps one pod per eligible node for every DaemonSet (see the module doc)."""

    name = "daemonset-controller"

    def __init__(self, api: Api, pods: PodIndex) -> None:
        super().__init__(api)
        self.pods = pods
        self.ds_rt: ResourceType = api.resource("apps/v1", "DaemonSet")
        self.rev_rt: ResourceType = api.resource("apps/v1", "ControllerRevision")
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self._by_uid: dict[str, tuple[str, str]] = {}
        #: (namespace, name) → the DaemonSet's placement, from its last full sync (absent: sync fully).
        self.placements: dict[tuple[str, str], Placement] = {}
        #: The DaemonSet whose status this controller is writing (its own event needs no refresh).
        self._writing_status: tuple[str, str] | None = None

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        self.placements.clear()  # events may have been missed while stopped
        for ds in self.store.items(self.ds_rt.storage_key):
            meta = objects.meta(ds)
            self._by_uid[str(meta.get("uid"))] = (meta["namespace"], meta["name"])
            self.enqueue(("ds", meta["namespace"], meta["name"]))

    def on_event(self, event: Event) -> None:
        if event.key == self.ds_rt.storage_key:
            self._on_daemonset(event)
        elif event.key == PODS:
            for obj in (event.obj, event.old):
                owner = controller_uid(obj) if obj is not None else None
                where = self._by_uid.get(owner or "")
                if where is None or obj is None:
                    continue
                node_name = str(objects.spec(obj).get("nodeName") or "")
                placement = self._placement(where, owner)
                if node_name and placement is not None:
                    placement.dirty.add(node_name)
                    self.enqueue(("node", *where, node_name))
                else:  # unbound pods (and DaemonSets without a placement) need a full sync
                    self.enqueue(("ds", *where))
        elif event.key == NODES and self._node_changed(event):
            node_name = objects.name(event.obj)
            for uid, where in list(self._by_uid.items()):
                placement = self._placement(where, uid)
                if placement is None:
                    self.enqueue(("ds", *where))
                elif self._placement_changed(placement, event, node_name):
                    self.enqueue(("node", *where, node_name))

    def _on_daemonset(self, event: Event) -> None:
        meta = objects.meta(event.obj)
        uid = str(meta.get("uid"))
        where = (meta["namespace"], meta["name"])
        if event.type == DELETED:
            self._by_uid.pop(uid, None)
            if self._placement(where, uid) is not None:
                del self.placements[where]
            return
        self._by_uid[uid] = where
        if (
            event.type != ADDED
            and event.old is not None
            and self._placement(where, uid) is not None
            and not self._spec_changed(event.old, event.obj)
        ):
            if self._writing_status != where:  # someone else's write: the status may need putting back
                self.enqueue(("status", *where))
            return
        self.placements.pop(where, None)
        self.enqueue(("ds", *where))

    def _placement(self, where: tuple[str, str], uid: str | None) -> Placement | None:
        placement = self.placements.get(where)
        return placement if placement is not None and placement.uid == uid else None

    @staticmethod
    def _spec_changed(old: Obj, new: Obj) -> bool:
        """What the placement and the pods depend on: spec (template, strategy …), deletion, and the
        ``collisionCount`` the template hash includes."""
        return bool(
            old.get("spec") != new.get("spec")
            or objects.meta(old).get("deletionTimestamp") != objects.meta(new).get("deletionTimestamp")
            or objects.status(old).get("collisionCount") != objects.status(new).get("collisionCount")
        )

    @staticmethod
    def _node_changed(event: Event) -> bool:
        """Only what placement depends on (labels, taints, existence) can change where daemons run."""
        if event.type != "MODIFIED" or event.old is None:
            return True
        old, new = event.old, event.obj
        return bool(
            objects.labels(old) != objects.labels(new)
            or objects.spec(old).get("taints") != objects.spec(new).get("taints")
        )

    def _placement_changed(self, placement: Placement, event: Event, node_name: str) -> bool:
        """Record the node's ``node_should_run`` for the DaemonSet; whether that node needs a sync (kube's
        ``updateNode`` compares old and new the same way): its result changed, or the node came or went
        with a pod of the DaemonSet there or one to put there."""
        if event.type == DELETED:
            old = placement.set_node(node_name, None)
            return bool(old and old[0]) or bool(self.pods.owned_on_node(placement.uid, node_name))
        should = node_should_run(placement.pod_spec, event.obj)
        old = placement.set_node(node_name, should)
        if event.type == ADDED or old is None:
            return should[0] or bool(self.pods.owned_on_node(placement.uid, node_name))
        return old != should

    # --- sync -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        kind = work[0]
        if kind == "ds":
            self.sync(work[1], work[2])
        elif kind == "node":
            self.sync_node(work[1], work[2], work[3])
        elif kind == "status":
            self.refresh_status(work[1], work[2])

    def _current(self, namespace: str, name: str) -> tuple[Obj, Obj, str] | None:
        """The DaemonSet (unless gone or being deleted), its template and the template's hash."""
        ds = self.store.get(self.ds_rt.storage_key, namespace, name)
        if ds is None or objects.is_deleting(ds):
            return None  # the garbage collector removes its pods through their ownerReferences
        template = objects.spec(ds).get("template") or {}
        status = ds.get("status") or {}
        return ds, template, template_hash(template, int(status.get("collisionCount") or 0))

    def _valid_placement(self, ds: Obj, current_hash: str) -> Placement | None:
        """The DaemonSet's placement if an incremental sync can use it (else a full sync is due)."""
        meta = objects.meta(ds)
        placement = self._placement((meta["namespace"], meta["name"]), str(meta["uid"]))
        if placement is None or placement.template_hash != current_hash or placement.needs_full_sync:
            return None
        return placement

    def sync(self, namespace: str, name: str) -> None:
        """The full sync: every node, the rolling update, the status; rebuilds the placement."""
        current = self._current(namespace, name)
        if current is None:
            return
        ds, template, current_hash = current
        spec = ds.get("spec") or {}
        pod_spec = template.get("spec") or {}
        self._ensure_revision(ds, template, current_hash)

        uid = objects.uid(ds)
        strategy = (spec.get("updateStrategy") or {}).get("type") or "RollingUpdate"
        placement = Placement(uid, current_hash, pod_spec, rolling=strategy == "RollingUpdate")
        pods_by_node: dict[str, list[Obj]] = {}
        for pod in self.pods.owned_by(uid):
            if objects.is_deleting(pod):
                continue
            pods_by_node.setdefault(str(objects.spec(pod).get("nodeName") or ""), []).append(pod)

        create_on: list[str] = []
        delete: list[Obj] = []
        keep: dict[str, Obj] = {}
        for node in self.store.items(NODES):
            node_name = objects.name(node)
            should_run, should_continue = node_should_run(pod_spec, node)
            placement.set_node(node_name, (should_run, should_continue))
            create, kept, doomed = _plan_node(
                should_run, should_continue, _by_creation(pods_by_node.pop(node_name, []))
            )
            if create:
                create_on.append(node_name)
            if kept is not None:
                keep[node_name] = kept
            delete.extend(doomed)
        for leftover in pods_by_node.values():  # unbound, or bound to a node that no longer exists
            delete.extend(leftover)

        delete.extend(self._rolling_update(ds, keep, placement.run, current_hash))
        placement.outdated = {
            n for n, pod in keep.items() if objects.labels(pod).get(REVISION_HASH_LABEL) != current_hash
        }
        # in place before the writes, so that the events of this sync's pods cost a node sync each
        self.placements[(namespace, name)] = placement
        try:
            for node_name in create_on:
                self._create_pod(ds, template, node_name, current_hash)
            for pod in delete:
                self._delete_pod(ds, pod)
        except Exception:
            self.placements.pop((namespace, name), None)  # the retry (or any later event) syncs fully
            raise
        placement.count_all(self.pods.owned_by(uid))  # as stored after this sync's writes
        self._update_status(ds, placement)

    def _placed(self, namespace: str, name: str) -> tuple[Obj, Obj, str, Placement] | None:
        """The DaemonSet, its template and hash, and a placement still valid for them; ``None`` when
        the DaemonSet is gone, or when there is no such placement (a full sync has then been done)."""
        current = self._current(namespace, name)
        if current is None:
            return None
        ds, template, current_hash = current
        placement = self._valid_placement(ds, current_hash)
        if placement is None:
            self.sync(namespace, name)
            return None
        return ds, template, current_hash, placement

    def sync_node(self, namespace: str, name: str, node_name: str) -> None:
        """What the full sync does for one node, then a status refresh."""
        found = self._placed(namespace, name)
        if found is None:
            return
        ds, template, current_hash, placement = found
        self._ensure_revision(ds, template, current_hash)
        existing = _by_creation(
            p for p in self.pods.owned_on_node(placement.uid, node_name) if not objects.is_deleting(p)
        )
        node = self.store.get(NODES, "", node_name)
        if node is None:  # gone: its pods are leftovers
            placement.set_node(node_name, None)
            create, kept, doomed = False, None, existing
        else:
            should_run, should_continue = node_should_run(placement.pod_spec, node)
            placement.set_node(node_name, (should_run, should_continue))
            create, kept, doomed = _plan_node(should_run, should_continue, existing)
        placement.outdated.discard(node_name)
        if kept is not None and objects.labels(kept).get(REVISION_HASH_LABEL) != current_hash:
            placement.outdated.add(node_name)
        try:
            if create:
                self._create_pod(ds, template, node_name, current_hash)
            for pod in doomed:
                self._delete_pod(ds, pod)
        except Exception:
            self.placements.pop((namespace, name), None)
            raise
        placement.set_pods(node_name, self.pods.owned_on_node(placement.uid, node_name))
        self.enqueue(("ds" if placement.needs_full_sync else "status", namespace, name))

    def refresh_status(self, namespace: str, name: str) -> None:
        """Write the status from the placement (a full sync when there is none to use)."""
        found = self._placed(namespace, name)
        if found is not None:
            self._update_status(found[0], found[3])

    def _rolling_update(self, ds: Obj, keep: dict[str, Obj], run: set[str], current_hash: str) -> list[Obj]:
        """Outdated pods to delete now: unavailable ones at once, others within ``maxUnavailable``."""
        strategy = (objects.spec(ds).get("updateStrategy") or {}).get("type") or "RollingUpdate"
        if strategy != "RollingUpdate":
            return []  # OnDelete: new pods get the new template only when old ones are deleted
        desired = len(run)
        available = sum(1 for node, pod in keep.items() if node in run and self._available(ds, pod))
        budget = max_unavailable(ds, desired) - (desired - available)
        out: list[Obj] = []
        for node_name, pod in sorted(keep.items()):
            if objects.labels(pod).get(REVISION_HASH_LABEL) == current_hash:
                continue
            if not self._available(ds, pod):
                out.append(pod)
            elif budget > 0:
                out.append(pod)
                budget -= 1
            else:
                continue
            del keep[node_name]
        return out

    def _available(self, ds: Obj, pod: Obj) -> bool:
        """Ready for ``minReadySeconds`` (re-checked by a timer when that time is still to come)."""
        if not pod_ready(pod):
            return False
        min_ready = int(objects.spec(ds).get("minReadySeconds") or 0)
        if min_ready <= 0:
            return True
        since = None
        for cond in objects.status(pod).get("conditions") or []:
            if cond.get("type") == "Ready":
                since = objects.parse_time(cond.get("lastTransitionTime"))
        if since is None:
            return True
        left = (since - self.api.clock()).total_seconds() + min_ready
        if left > 0:
            meta = objects.meta(ds)  # the refresh syncs fully while a rolling update waits for this pod
            self.later(left + 0.01, ("status", meta["namespace"], meta["name"]))
            return False
        return True

    def _ensure_revision(self, ds: Obj, template: Obj, current_hash: str) -> None:
        """The ControllerRevision ``<ds>-<hash>`` holding the template (``kubectl rollout history``)."""
        meta = objects.meta(ds)
        name = f"{meta['name']}-{current_hash}"
        if self.store.get(self.rev_rt.storage_key, meta["namespace"], name) is not None:
            return
        revisions = [
            r
            for r in self.store.items(self.rev_rt.storage_key, meta["namespace"])
            if controller_uid(r) == meta["uid"]
        ]
        revision = max((int(r.get("revision") or 0) for r in revisions), default=0) + 1
        body = {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {**objects.labels(template), REVISION_HASH_LABEL: current_hash},
                "ownerReferences": [controller_owner_reference(ds)],
            },
            "data": {"spec": {"template": {**template, "$patch": "replace"}}},
            "revision": revision,
        }
        try:
            self.api.create(self.rev_rt, meta["namespace"], body, WriteOptions(field_manager=FIELD_MANAGER))
        except ApiError as err:
            if err.code != 409:
                raise

    def _create_pod(self, ds: Obj, template: Obj, node_name: str, current_hash: str) -> None:
        meta = objects.meta(ds)
        tmeta = template.get("metadata") or {}
        spec = dict(objects.spec(template))
        spec["tolerations"] = daemon_pod_tolerations(spec)
        spec["affinity"] = replace_node_affinity(spec.get("affinity"), node_name)
        spec["nodeName"] = node_name
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": {
                **(tmeta.get("labels") or {}),
                REVISION_HASH_LABEL: current_hash,
                TEMPLATE_GENERATION_LABEL: str(meta.get("generation", 1)),
            },
            "ownerReferences": [controller_owner_reference(ds)],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
        create_owned_pod(self.api, self.pod_rt, ds, body, field_manager=FIELD_MANAGER, component=COMPONENT)

    def _delete_pod(self, ds: Obj, pod: Obj) -> None:
        delete_owned_pod(self.api, self.pod_rt, ds, pod, component=COMPONENT)

    def _update_status(self, ds: Obj, placement: Placement) -> None:
        """The counters ``kubectl get ds`` prints, from the pods as stored now (the placement's counts,
        once the nodes whose pods changed are recounted)."""
        meta = objects.meta(ds)
        fresh = self.store.get(self.ds_rt.storage_key, meta["namespace"], meta["name"])
        if fresh is None:
            return
        for node_name in list(placement.dirty):
            placement.set_pods(node_name, self.pods.owned_on_node(placement.uid, node_name))
        desired = len(placement.run)
        current, misscheduled, ready, updated = placement.totals
        if int(objects.spec(fresh).get("minReadySeconds") or 0) > 0:
            available = sum(
                self._available(fresh, pod)
                for node, pod in placement.counted.items()
                if node in placement.run
            )
        else:
            available = ready  # available = Ready without minReadySeconds
        old = fresh.get("status") or {}
        status: dict[str, Any] = {
            **{k: v for k, v in old.items() if k in ("collisionCount", "conditions")},
            "currentNumberScheduled": current,
            "desiredNumberScheduled": desired,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "observedGeneration": int(objects.meta(fresh).get("generation", 1)),
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
        }
        if desired - available:
            status["numberUnavailable"] = desired - available
        # kube omits zero counters (omitempty) except the four required ones
        for key in ("numberAvailable", "updatedNumberScheduled"):
            if not status[key]:
                del status[key]
        if status == old:
            return
        self._writing_status = (meta["namespace"], meta["name"])
        try:
            write_status(self.api, self.ds_rt, fresh, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code not in (404, 409):
                raise
        finally:
            self._writing_status = None

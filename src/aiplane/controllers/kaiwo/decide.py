"""What the KaiwoConfig asks of the cluster, decided before anything is written (pure).

From an :class:`Observed` (the config, the node views the fleet keeps, our Kueue objects and the
namespaces that run workloads, all from caches) :func:`decide` returns a :class:`Decision`: the node
merge patches (pool labels, the GPU taint), the Kueue writes in the order they are made (Topology →
ResourceFlavors → ClusterQueue → stale ClusterQueues and flavors → LocalQueues → stale LocalQueues),
and the status those writes leave behind — the tainted nodes, the pools and their quotas, and the
Ready condition (``NotOurs`` when a foreign object stands where one of ours should be).

A flavor's ``nodeTaints`` are computed from the nodes as the decided patches leave them, so a GPU
taint being added and the flavor that must carry it are decided together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Final

from aiplane.api.config import KaiwoConfigSpec
from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import set_condition
from aiplane.apimachinery.quantity import format_resource_list
from aiplane.controllers.kaiwo import kueue
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION, node_patch
from aiplane.controllers.kaiwo.pools import NodeView, Pool, current_quotas, held_quota
from aiplane.kube.resources import CLUSTERQUEUES, LOCALQUEUES, RESOURCEFLAVORS, Resource

__all__ = [
    "NOT_CONSUMED",
    "READY",
    "TOPOLOGIES",
    "Decision",
    "KueueOp",
    "KueueWrite",
    "NodeCheck",
    "Observed",
    "decide",
]

Obj = dict[str, Any]

READY: Final = "Ready"
TOPOLOGIES: Final = Resource("kueue.x-k8s.io", "v1beta1", "topologies", "Topology", False)
#: Spec fields accepted and reported, but read by nothing in this suite (no Ray or duration workloads).
NOT_CONSUMED: Final = (
    "ray.defaultRayImage",
    "ray.headPodMemory",
    "scheduling.pendingThresholdForPreemption",
)


@dataclass(frozen=True)
class NodeCheck:
    """A node changed since it was last checked: its view (None: gone) and the pool it counts in."""

    name: str
    view: NodeView | None
    pool: str | None


@dataclass(frozen=True)
class Observed:
    config: Obj
    #: A KaiwoConfig not named ``kaiwo``: only a Warning that it is ignored.
    ignored: bool
    spec: KaiwoConfigSpec | None
    #: Why the spec is invalid (``spec.<path>: <message>``) when ``spec`` is None.
    invalid: str | None
    pools: tuple[Pool, ...] = ()
    #: The nodes to check, sorted by name.
    dirty: tuple[NodeCheck, ...] = ()
    #: Every node's view (read, never changed, by :func:`decide`).
    views: Mapping[str, NodeView] = dataclasses.field(default_factory=dict)
    #: The nodes whose cached state carries our taint annotation, sorted.
    tainted: tuple[str, ...] = ()
    #: Our Kueue objects by cache key; ``None``: the kind is not served.
    flavors: Mapping[str, Obj] | None = None
    queues: Mapping[str, Obj] | None = None
    local_queues: Mapping[str, Obj] | None = None
    topologies: Mapping[str, Obj] | None = None
    #: The namespaces holding a workload (each gets a LocalQueue), sorted.
    workload_namespaces: tuple[str, ...] = ()


class KueueOp(Enum):
    CREATE = "create"
    #: A merge patch of the spec, guarded by the live object's resourceVersion (the ClusterQueue).
    PATCH = "patch"
    #: Ours and not wanted.
    DELETE = "delete"
    #: Ours, wanted, and differing where Kueue forbids an update: deleted, and created again once gone.
    #: Kueue's ``resource-in-use`` finalizer is removed first (a flavor's name stays in our ClusterQueue,
    #: so Kueue would hold the delete for ever), as upstream Kaiwo does.
    RECREATE = "recreate"


@dataclass(frozen=True)
class KueueWrite:
    op: KueueOp
    resource: Resource
    #: The object created, or the body of a patch; the object deleted.
    body: Obj
    live: Obj | None = None


@dataclass(frozen=True)
class Decision:
    ignored: bool
    #: Every node checked, each with its merge patch (None: already as wanted).
    nodes: tuple[tuple[NodeCheck, Obj | None], ...] = ()
    kueue: tuple[KueueWrite, ...] = ()
    #: The status wanted (None: an ignored config, whose status is not ours to write).
    status: Obj | None = None


def decide(observed: Observed, now: datetime) -> Decision:
    """Node patches, Kueue writes and the status they leave (module docstring)."""
    if observed.ignored:
        return Decision(ignored=True)
    spec = observed.spec
    if spec is None:
        return Decision(
            False, status=_status(observed.config, {}, "False", "InvalidSpec", observed.invalid or "", now)
        )
    nodes = spec.nodes
    checks = tuple(
        (
            check,
            None
            if check.view is None
            else node_patch(check.view, check.pool, nodes.addTaintsToGpuNodes, nodes.defaultGpuTaintKey),
        )
        for check in observed.dirty
    )
    applied: dict[str, Any] = {
        "taintedNodes": list(_tainted(observed, checks)) or None,
        "notConsumed": list(NOT_CONSUMED),
    }

    def done(writes: tuple[KueueWrite, ...], status: str, reason: str, message: str) -> Decision:
        return Decision(
            False, checks, writes, _status(observed.config, applied, status, reason, message, now)
        )

    if observed.queues is None:
        return done((), "False", "KueueNotInstalled", "Kueue's CRDs are not served")
    problem = kueue.check_limits(observed.pools)
    if problem:
        return done((), "False", "TooManyPools", problem)
    writes, conflicts = _queues(observed, spec, _after(observed.views, checks), applied)
    if conflicts:
        message = "; ".join(f"{c} exists and is not managed by this KaiwoConfig" for c in conflicts)
        return done(writes, "False", "NotOurs", message)
    return done(writes, "True", "Applied", "queues and taints applied")


def _tainted(observed: Observed, checks: tuple[tuple[NodeCheck, Obj | None], ...]) -> tuple[str, ...]:
    """The nodes tainted by us once the patches land (a patch sets or clears our annotation)."""
    patched = {
        check.name: bool(patch["metadata"]["annotations"][TAINTED_ANNOTATION])
        for check, patch in checks
        if patch is not None and TAINTED_ANNOTATION in (patch.get("metadata") or {}).get("annotations", {})
    }
    if not patched:
        return observed.tainted
    tainted = set(observed.tainted)
    tainted.update(n for n, on in patched.items() if on)
    tainted.difference_update(n for n, on in patched.items() if not on)
    return tuple(sorted(tainted))


def _after(
    views: Mapping[str, NodeView], checks: tuple[tuple[NodeCheck, Obj | None], ...]
) -> Mapping[str, NodeView]:
    """The node views as the patches leave their taints."""
    changed = {
        check.name: dataclasses.replace(check.view, taints=tuple(patch["spec"]["taints"] or ()))
        for check, patch in checks
        if check.view is not None and patch is not None and "spec" in patch
    }
    return {**views, **changed} if changed else views


def _queues(
    observed: Observed, spec: KaiwoConfigSpec, views: Mapping[str, NodeView], applied: dict[str, Any]
) -> tuple[tuple[KueueWrite, ...], list[str]]:
    """Our Kueue objects' writes, and the foreign objects in their way."""
    assert observed.flavors is not None and observed.queues is not None and observed.local_queues is not None
    config = observed.config
    uid = objects.uid(config)
    pools = observed.pools
    name = spec.defaultClusterQueueName
    existing_cq = observed.queues.get(name)
    writes: list[KueueWrite] = []
    conflicts: list[str] = []
    if existing_cq is not None and not kueue.is_ours(existing_cq, uid):
        conflicts.append(f"ClusterQueue {name}")
    dynamic = spec.dynamicallyUpdateDefaultClusterQueue
    manage = not conflicts and (dynamic or existing_cq is None)
    current = current_quotas(existing_cq)
    quotas = current

    def ensure(resource: Resource, live: Mapping[str, Obj], desired: Obj, *, update: bool = False) -> None:
        writes.extend(_ensure(resource, live, desired, uid, conflicts, update=update))

    if manage:
        if observed.topologies is not None:
            ensure(TOPOLOGIES, observed.topologies, kueue.topology(config))
        for pool in pools:
            taints = kueue.pool_taints(views[n] for n in pool.nodes if n in views)
            ensure(
                RESOURCEFLAVORS, observed.flavors, kueue.resource_flavor(pool, config, taints), update=True
            )
        quotas = {p.name: held_quota(p, current.get(p.name)) for p in pools}
        desired_cq = kueue.cluster_queue(
            name, spec.defaultClusterQueueCohortName, list(pools), current, config
        )
        ensure(CLUSTERQUEUES, observed.queues, desired_cq, update=True)
        if dynamic:
            writes.extend(_prune(CLUSTERQUEUES, observed.queues, {name}, uid))
            writes.extend(_prune(RESOURCEFLAVORS, observed.flavors, {p.name for p in pools}, uid))
    namespaces = observed.workload_namespaces
    for namespace in namespaces:
        ensure(LOCALQUEUES, observed.local_queues, kueue.local_queue(name, namespace, config))
    writes.extend(_prune(LOCALQUEUES, observed.local_queues, {f"{ns}/{name}" for ns in namespaces}, uid))
    applied["clusterQueue"] = name
    applied["localQueues"] = list(namespaces) or None
    applied["nodePools"] = [
        {"name": p.name, "nodes": len(p.nodes), "nominalQuota": format_resource_list(quotas.get(p.name, {}))}
        for p in pools
    ] or None
    return tuple(writes), conflicts


def _ensure(
    resource: Resource, live: Mapping[str, Obj], desired: Obj, uid: str, conflicts: list[str], *, update: bool
) -> list[KueueWrite]:
    """Create ``desired``, or fix ours when it differs (patch in place when ``update``, else delete to
    recreate: Kueue makes a LocalQueue's ``clusterQueue`` and a flavor with ``topologyName`` immutable);
    never touch one not ours."""
    meta = desired["metadata"]
    namespace = meta.get("namespace")
    actual = live.get(f"{namespace}/{meta['name']}" if namespace else meta["name"])
    if actual is None:
        return [KueueWrite(KueueOp.CREATE, resource, desired)]
    if not kueue.is_ours(actual, uid):
        conflicts.append(f"{resource.kind} {meta['name']}")
        return []
    if not kueue.spec_differs(desired, actual) or objects.is_deleting(actual):
        return []
    if update and "topologyName" not in objects.spec(actual):
        spec = dict(desired["spec"])
        # A merge patch keeps what it does not name: a field of ours now unwanted is nulled out.
        for field in kueue.OWNED_SPEC_FIELDS.get(resource.kind, ()):
            if field in objects.spec(actual) and field not in spec:
                spec[field] = None
        body = {"metadata": {"resourceVersion": objects.resource_version(actual)}, "spec": spec}
        return [KueueWrite(KueueOp.PATCH, resource, body, actual)]
    return [KueueWrite(KueueOp.RECREATE, resource, actual, actual)]


def _prune(resource: Resource, live: Mapping[str, Obj], wanted: set[str], uid: str) -> list[KueueWrite]:
    return [
        KueueWrite(KueueOp.DELETE, resource, obj, obj)
        for obj in live.values()
        if objects.key(obj) not in wanted and kueue.is_ours(obj, uid) and not objects.is_deleting(obj)
    ]


def _status(
    config: Obj, applied: Mapping[str, Any], status: str, reason: str, message: str, now: datetime
) -> Obj:
    current = dict(objects.status(config))
    generation = objects.generation(config)
    conditions, _ = set_condition(
        list(current.get("conditions") or []),
        READY,
        status,
        reason,
        message,
        observed_generation=generation,
        now=now,
    )
    desired = {k: v for k, v in {**current, **applied}.items() if v is not None}
    desired["conditions"] = conditions
    if generation is not None:
        desired["observedGeneration"] = generation
    return desired

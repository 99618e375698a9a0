"""KaiwoConfig controller: the cluster singleton ``kaiwo`` drives Kueue queues and GPU node taints.

::

    observe   the KaiwoConfig, Nodes, our Kueue objects and the namespaces that run a ModelInfer, a
              DynamoGraphDeployment or a DynamoComponentDeployment or hold an AIMNamespaceConfig (a
              LocalQueue goes to each: our workloads are queued there), all from informer caches
    decide    pools.discover_pools (node pools, allocatable quotas, the cordon rule), kueue.* (desired
              objects), nodes.node_patch (pool labels, the GPU taint) — pure
    act       Node merge patches (guarded by resourceVersion); Topology → ResourceFlavors →
              ClusterQueue → LocalQueues created or fixed only when they differ; stale objects of ours
              deleted; never an object without our label and owner reference
    report    status (pools, queue, local queues, tainted nodes, fields without a consumer) and the
              Ready condition, written only on change; a KaiwoConfig with another name gets a
              Warning Event saying it is ignored

Every request is collapsed onto the singleton, so one reconcile sees the whole cluster; with
``dynamicallyUpdateDefaultClusterQueue: false`` the Kueue objects are created once (when the
ClusterQueue is absent) and never updated, as upstream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import pydantic

from aiplane.api.config import KAIWO_CONFIG_NAME, KaiwoConfigSpec
from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import set_condition
from aiplane.apimachinery.quantity import format_resource_list
from aiplane.controllers.kaiwo import kueue
from aiplane.controllers.kaiwo.fleet import Fleet
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION, node_patch
from aiplane.controllers.kaiwo.pools import Pool, current_quotas, held_quota
from aiplane.kube.children import ChildWriter
from aiplane.kube.client import KubeClient
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import CLUSTERQUEUES, LOCALQUEUES, NODES, RESOURCEFLAVORS, Resource
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "kaiwoconfig"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)
READY: Final = "Ready"
KAIWOCONFIGS: Final = Resource("config.kaiwo.silogen.ai", "v1alpha1", "kaiwoconfigs", "KaiwoConfig", False)
AIMNAMESPACECONFIGS: Final = Resource(
    "config.kaiwo.silogen.ai", "v1alpha1", "aimnamespaceconfigs", "AIMNamespaceConfig", True
)
MODELINFERS: Final = Resource("workload.volcano.sh", "v1alpha1", "modelinfers", "ModelInfer", True)
DGDS: Final = Resource("nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment", True)
DCDS: Final = Resource(
    "nvidia.com", "v1alpha1", "dynamocomponentdeployments", "DynamoComponentDeployment", True
)
#: The kinds whose namespaces get a LocalQueue (their workloads are queued there).
WORKLOAD_KINDS: Final = (MODELINFERS, DGDS, DCDS, AIMNAMESPACECONFIGS)
TOPOLOGIES: Final = Resource("kueue.x-k8s.io", "v1beta1", "topologies", "Topology", False)
#: Spec fields accepted and reported, but read by nothing in this suite (no Ray or duration workloads).
NOT_CONSUMED: Final = (
    "ray.defaultRayImage",
    "ray.headPodMemory",
    "scheduling.pendingThresholdForPreemption",
)
TRANSITION_EVENTS: Final = (
    ConditionEvent(READY, "False", WARNING, on_reason_change=True),
    ConditionEvent(READY, "True", NORMAL, reason="Applied", message="queues and taints applied"),
)


def _singleton(_: Obj) -> Iterable[Request]:
    return [Request(None, KAIWO_CONFIG_NAME)]


class KaiwoConfigReconciler:
    def __init__(self, manager: Manager, *, kueue_served: bool, topology_served: bool) -> None:
        self.client: KubeClient = manager.client
        self.clock = manager.clock
        factory = manager.informers
        self.configs = factory.informer(KAIWOCONFIGS)
        self.nodes = factory.informer(NODES)
        self.fleet = Fleet()
        self.nodes.add_handler(
            on_add=self.fleet.put, on_update=self.fleet.update, on_delete=self.fleet.delete
        )
        self._settings: tuple[bool, bool, str] | None = None
        self.workloads = [factory.informer(r) for r in WORKLOAD_KINDS]
        self.kueue_served = kueue_served
        self.topology_served = topology_served
        self.flavors: Informer | None = factory.informer(RESOURCEFLAVORS) if kueue_served else None
        self.queues: Informer | None = factory.informer(CLUSTERQUEUES) if kueue_served else None
        self.local_queues: Informer | None = factory.informer(LOCALQUEUES) if kueue_served else None
        self.topologies: Informer | None = factory.informer(TOPOLOGIES) if topology_served else None
        self.recorder = EventRecorder(self.client, COMPONENT)
        self.status = StatusWriter(self.client, KAIWOCONFIGS, FIELD_MANAGER)
        #: Kueue objects: created when absent, deleted (and recreated) when ours differ.
        self.writer = ChildWriter(self.client, FIELD_MANAGER)

    async def __call__(self, request: Request) -> Result | None:
        config = self.configs.get(request.name)
        if config is None or objects.is_deleting(config):
            return None
        if request.name != KAIWO_CONFIG_NAME:
            self.recorder.emit(
                config,
                WARNING,
                "Ignored",
                f'only the KaiwoConfig named "{KAIWO_CONFIG_NAME}" is read; {request.name} is ignored',
            )
            return None
        try:
            spec = KaiwoConfigSpec.model_validate(objects.spec(config))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            await self._report(config, {}, "False", "InvalidSpec", f"spec.{where}: {first['msg']}")
            return None
        exclude = spec.nodes.excludeMasterNodesFromNodePools
        pools = self.fleet.pools(exclude)
        tainted = await self._patch_nodes(
            exclude, spec.nodes.addTaintsToGpuNodes, spec.nodes.defaultGpuTaintKey
        )
        applied: dict[str, Any] = {"taintedNodes": list(tainted) or None, "notConsumed": list(NOT_CONSUMED)}
        if not self.kueue_served:
            await self._report(config, applied, "False", "KueueNotInstalled", "Kueue's CRDs are not served")
            return None
        problem = kueue.check_limits(pools)
        if problem:
            await self._report(config, applied, "False", "TooManyPools", problem)
            return None
        conflict = await self._sync_queues(config, spec, pools, applied)
        if conflict:
            await self._report(config, applied, "False", "NotOurs", conflict)
        else:
            await self._report(config, applied, "True", "Applied", "queues and taints applied")
        return None

    async def _patch_nodes(self, exclude: bool, add_taints: bool, key: str) -> tuple[str, ...]:
        """Pool labels and the GPU taint on the nodes changed since the last check (all of them when
        the settings changed); the sorted names of the nodes tainted by us (the fleet's, unless a
        patch here changed them before its event arrived)."""
        settings = (exclude, add_taints, key)
        if settings != self._settings:
            self.fleet.dirty.update(self.fleet.views)
            self._settings = settings
        written_taints: dict[str, bool] = {}
        for name in sorted(self.fleet.dirty):
            node = self.fleet.views.get(name)
            patch = (
                None if node is None else node_patch(node, self.fleet.pool_of(name, exclude), add_taints, key)
            )
            if patch is not None:
                written = await self.client.patch(NODES, name, patch, field_manager=FIELD_MANAGER)
                written_taints[name] = bool(objects.annotations(written).get(TAINTED_ANNOTATION))
            # Checked: a node whose patch failed stays dirty, and one we patched comes back as an event.
            self.fleet.dirty.discard(name)
        if not written_taints:
            return self.fleet.tainted_names()
        tainted = set(self.fleet.tainted_names())
        tainted.update(n for n, on in written_taints.items() if on)
        tainted.difference_update(n for n, on in written_taints.items() if not on)
        return tuple(sorted(tainted))

    # --- Kueue ------------------------------------------------------------------------------------

    async def _sync_queues(
        self, config: Obj, spec: KaiwoConfigSpec, pools: list[Pool], applied: dict[str, Any]
    ) -> str | None:
        """Bring our Kueue objects in line; the name of a foreign object in our way, if any."""
        assert self.flavors is not None and self.queues is not None and self.local_queues is not None
        uid = objects.uid(config)
        name = spec.defaultClusterQueueName
        existing_cq = self.queues.get(name)
        conflicts: list[str] = []
        if existing_cq is not None and not kueue.is_ours(existing_cq, uid):
            conflicts.append(f"ClusterQueue {name}")
        dynamic = spec.dynamicallyUpdateDefaultClusterQueue
        manage = not conflicts and (dynamic or existing_cq is None)
        current = current_quotas(existing_cq)
        quotas = current
        if manage:
            if self.topologies is not None:
                await self._ensure(TOPOLOGIES, self.topologies, kueue.topology(config), uid, conflicts)
            for pool in pools:
                views = self.fleet.views
                taints = kueue.pool_taints(views[n] for n in pool.nodes if n in views)
                await self._ensure(
                    RESOURCEFLAVORS, self.flavors, kueue.resource_flavor(pool, config, taints), uid, conflicts
                )
            quotas = {p.name: held_quota(p, current.get(p.name)) for p in pools}
            desired_cq = kueue.cluster_queue(name, spec.defaultClusterQueueCohortName, pools, current, config)
            await self._ensure(CLUSTERQUEUES, self.queues, desired_cq, uid, conflicts, update=True)
            if dynamic:
                await self._prune(CLUSTERQUEUES, self.queues, {name}, uid)
                await self._prune(RESOURCEFLAVORS, self.flavors, {p.name for p in pools}, uid)
        namespaces = sorted({objects.namespace(o) for inf in self.workloads for o in inf.list()} - {""})
        for namespace in namespaces:
            lq = kueue.local_queue(name, namespace, config)
            await self._ensure(LOCALQUEUES, self.local_queues, lq, uid, conflicts, immutable=True)
        wanted = {f"{ns}/{name}" for ns in namespaces}
        await self._prune(LOCALQUEUES, self.local_queues, wanted, uid)
        applied["clusterQueue"] = name
        applied["localQueues"] = namespaces or None
        applied["nodePools"] = [
            {
                "name": p.name,
                "nodes": len(p.nodes),
                "nominalQuota": format_resource_list(quotas.get(p.name, {})),
            }
            for p in pools
        ] or None
        return "; ".join(f"{c} exists and is not managed by this KaiwoConfig" for c in conflicts) or None

    async def _ensure(
        self,
        resource: Resource,
        informer: Informer,
        desired: Obj,
        uid: str,
        conflicts: list[str],
        *,
        update: bool = False,
        immutable: bool = False,
    ) -> None:
        """Create ``desired``, or fix ours when it differs (update in place, or delete and recreate
        when Kueue makes its spec immutable); never touch an object that is not ours."""
        meta = desired["metadata"]
        namespace = meta.get("namespace")
        actual = informer.get(f"{namespace}/{meta['name']}" if namespace else meta["name"])
        if actual is None:
            await self.writer.create(resource, desired)
            return
        if not kueue.is_ours(actual, uid):
            conflicts.append(f"{resource.kind} {meta['name']}")
            return
        if not kueue.spec_differs(desired, actual) or objects.is_deleting(actual):
            return
        if update and not immutable:
            body = {
                "metadata": {"resourceVersion": objects.resource_version(actual)},
                "spec": desired["spec"],
            }
            await self.client.patch(resource, meta["name"], body, field_manager=FIELD_MANAGER)
            return
        await self.writer.delete(resource, actual)

    async def _prune(self, resource: Resource, informer: Informer, wanted: set[str], uid: str) -> None:
        for obj in informer.list():
            if objects.key(obj) not in wanted and kueue.is_ours(obj, uid) and not objects.is_deleting(obj):
                await self.writer.delete(resource, obj)

    # --- report -----------------------------------------------------------------------------------

    async def _report(
        self, config: Obj, applied: dict[str, Any], status: str, reason: str, message: str
    ) -> None:
        current = dict(objects.status(config))
        generation = objects.generation(config)
        conditions, _ = set_condition(
            list(current.get("conditions") or []),
            READY,
            status,
            reason,
            message,
            observed_generation=generation,
            now=self.clock.now(),
        )
        desired = {k: v for k, v in {**current, **applied}.items() if v is not None}
        desired["conditions"] = conditions
        if generation is not None:
            desired["observedGeneration"] = generation
        if await self.status.write(config, desired) is not None:
            emit_transitions(self.recorder, config, TRANSITION_EVENTS, objects.status(config), desired)


async def ensure_singleton(client: KubeClient) -> None:
    """Create the KaiwoConfig ``kaiwo`` with defaults when absent (as upstream does at start).

    By server-side apply of the bare object, not a create: the CRD's defaults then belong to no field
    manager, so a user's ``kubectl apply --server-side`` of their own KaiwoConfig sets any field without
    a conflict (a create would make the operator the owner of every defaulted field)."""
    found = await client.list(KAIWOCONFIGS, field_selector=f"metadata.name={KAIWO_CONFIG_NAME}")
    if found.get("items"):
        return  # the user's (or an earlier start's): never touched here
    body = {
        "apiVersion": KAIWOCONFIGS.api_version,
        "kind": "KaiwoConfig",
        # A field of its own keeps the operator in managedFields: an object with none is taken, at the
        # first apply, to be wholly owned by "before-first-apply", which conflicts with every field.
        "metadata": {"name": KAIWO_CONFIG_NAME, "labels": {"app.kubernetes.io/created-by": "aiplane"}},
        "spec": {},
    }
    await client.apply(KAIWOCONFIGS, body, field_manager=FIELD_MANAGER)


def setup_controller(manager: Manager, *, kueue_served: bool, topology_served: bool) -> Controller:
    reconciler = KaiwoConfigReconciler(manager, kueue_served=kueue_served, topology_served=topology_served)
    builder = Controller.build(NAME).for_(KAIWOCONFIGS).watches(NODES, _singleton)
    for resource in WORKLOAD_KINDS:
        builder = builder.watches(resource, _singleton)
    if kueue_served:
        for resource in (RESOURCEFLAVORS, CLUSTERQUEUES, LOCALQUEUES):
            builder = builder.watches(resource, _singleton)
    if topology_served:
        builder = builder.watches(TOPOLOGIES, _singleton)
    return builder.workers(1, fixed="one reconcile sees the whole cluster; a second would race it").reconcile(
        reconciler
    )


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    # The default KaiwoConfig is created at start-up when none exists (server-side apply: a patch that
    # creates, which kube authorizes as both patch and create).
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs",), ("list", "watch", "create", "patch")),
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs/status",), ("patch",)),
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs/finalizers",), ("update",)),
    # GPU nodes: pools from labels; the GPU taint when addTaintsToGpuNodes (a patch).
    Permission("", ("nodes",), ("list", "watch", "patch")),
    # Namespaces that need a LocalQueue: those holding workloads.
    Permission("config.kaiwo.silogen.ai", ("aimnamespaceconfigs",), READ),
    Permission("workload.volcano.sh", ("modelinfers",), READ),
    Permission("nvidia.com", ("dynamographdeployments", "dynamocomponentdeployments"), READ),
    # Kueue objects it owns: created, patched when they differ, deleted (UID precondition).
    Permission(
        "kueue.x-k8s.io",
        ("clusterqueues", "localqueues", "resourceflavors", "topologies"),
        ("list", "watch", "create", "patch", "delete"),
    ),
    EVENTS_WRITE,
)


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers kaiwoconfig`` (also part of ``all``)."""
    await ensure_singleton(manager.client)
    kueue_served = await manager.client.served(CLUSTERQUEUES)
    topology_served = kueue_served and await manager.client.served(TOPOLOGIES)
    manager.add_controller(setup_controller(manager, kueue_served=kueue_served, topology_served=topology_served))

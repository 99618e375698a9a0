"""KaiwoConfig controller: the cluster singleton ``kaiwo`` drives Kueue queues and GPU node taints.

::

    observe   the KaiwoConfig, Nodes, our Kueue objects and the namespaces that run a ModelInfer, a
              DynamoGraphDeployment or a DynamoComponentDeployment or hold an AIMNamespaceConfig (a
              LocalQueue goes to each: our workloads are queued there), all from informer caches
    decide    decide.decide (pure): the node patches (nodes.node_patch: pool labels, the GPU taint), the
              Kueue writes (kueue.*: desired objects) and the status they leave, before any write
    act       Node merge patches (guarded by resourceVersion); through the ChildWriter: Topology → ResourceFlavors →
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
from datetime import datetime
from typing import Any, Final

import pydantic

from aiplane.api.config import KAIWO_CONFIG_NAME, KaiwoConfigSpec
from aiplane.apimachinery import objects
from aiplane.controllers.kaiwo.decide import READY, TOPOLOGIES, Decision, KueueOp, NodeCheck, Observed, decide
from aiplane.controllers.kaiwo.fleet import Fleet
from aiplane.controllers.kaiwo.kueue import IN_USE_FINALIZER
from aiplane.kube.children import ChildWriter
from aiplane.kube.client import KubeClient
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import NORMAL, WARNING
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import CLUSTERQUEUES, LOCALQUEUES, NODES, RESOURCEFLAVORS, Resource
from aiplane.kube.shape import Shaped
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "kaiwoconfig"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)
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
TRANSITION_EVENTS: Final = (
    ConditionEvent(READY, "False", WARNING, on_reason_change=True),
    ConditionEvent(READY, "True", NORMAL, reason="Applied", message="queues and taints applied"),
)


def _singleton(_: Obj) -> Iterable[Request]:
    return [Request(None, KAIWO_CONFIG_NAME)]


class KaiwoConfigReconciler:
    """The cluster's one KaiwoConfig (a :class:`~aiplane.kube.shape.Shape`; decisions in :mod:`.decide`)."""

    def __init__(self, manager: Manager, *, kueue_served: bool, topology_served: bool) -> None:
        self.client: KubeClient = manager.client
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
        self.recorder = manager.recorder(NAME)
        self.status = StatusWriter(self.client, KAIWOCONFIGS, FIELD_MANAGER)
        #: Kueue objects: created when absent, patched or deleted (and recreated) when ours differ.
        self.writer = ChildWriter(self.client, FIELD_MANAGER)

    async def observe(self, request: Request) -> Observed | None:
        config = self.configs.get(request.name)
        if config is None or objects.is_deleting(config):
            return None
        if request.name != KAIWO_CONFIG_NAME:
            return Observed(config, ignored=True, spec=None, invalid=None)
        try:
            spec = KaiwoConfigSpec.model_validate(objects.spec(config))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return Observed(config, ignored=False, spec=None, invalid=f"spec.{where}: {first['msg']}")
        nodes = spec.nodes
        exclude = nodes.excludeMasterNodesFromNodePools
        settings = (exclude, nodes.addTaintsToGpuNodes, nodes.defaultGpuTaintKey)
        if settings != self._settings:  # new settings: every node is checked again
            self.fleet.dirty.update(self.fleet.views)
            self._settings = settings
        fleet = self.fleet
        return Observed(
            config,
            ignored=False,
            spec=spec,
            invalid=None,
            pools=tuple(fleet.pools(exclude)),
            dirty=tuple(
                NodeCheck(n, fleet.views.get(n), fleet.pool_of(n, exclude)) for n in sorted(fleet.dirty)
            ),
            views=fleet.views,
            tainted=fleet.tainted_names(),
            flavors=_by_key(self.flavors),
            queues=_by_key(self.queues),
            local_queues=_by_key(self.local_queues),
            topologies=_by_key(self.topologies),
            workload_namespaces=tuple(
                sorted({objects.namespace(o) for inf in self.workloads for o in inf.list()} - {""})
            ),
        )

    def decide(self, observed: Observed, now: datetime) -> Decision:
        return decide(observed, now)

    async def act(self, observed: Observed, decision: Decision) -> None:
        if decision.ignored:
            name = objects.name(observed.config)
            self.recorder.emit(
                observed.config,
                WARNING,
                "Ignored",
                f'only the KaiwoConfig named "{KAIWO_CONFIG_NAME}" is read; {name} is ignored',
            )
            return
        for check, patch in decision.nodes:
            if patch is not None:
                await self.client.patch(NODES, check.name, patch, field_manager=FIELD_MANAGER)
            # Checked: a node whose patch failed stays dirty, and one we patched comes back as an event.
            self.fleet.dirty.discard(check.name)
        for write in decision.kueue:
            if write.op is KueueOp.CREATE:
                await self.writer.create(write.resource, write.body)
            elif write.op is KueueOp.PATCH:
                assert write.live is not None
                await self.writer.patch(write.resource, write.live, write.body)
            else:
                if write.op is KueueOp.RECREATE:
                    await self._release(write.resource, write.body)
                await self.writer.delete(write.resource, write.body)

    async def _release(self, resource: Resource, obj: Obj) -> None:
        """Drop Kueue's in-use finalizer from an object of ours about to be deleted and created again:
        our ClusterQueue keeps naming it, so Kueue would otherwise hold the delete for ever."""
        finalizers = objects.meta(obj).get("finalizers") or []
        if IN_USE_FINALIZER not in finalizers:
            return
        rest = [f for f in finalizers if f != IN_USE_FINALIZER] or None
        body = {"metadata": {"resourceVersion": objects.resource_version(obj), "finalizers": rest}}
        await self.writer.patch(resource, obj, body)

    async def report(self, observed: Observed, decision: Decision) -> Result | None:
        config = observed.config
        if decision.status is not None and await self.status.write(config, decision.status) is not None:
            emit_transitions(
                self.recorder, config, TRANSITION_EVENTS, objects.status(config), decision.status
            )
        return None


def _by_key(informer: Informer | None) -> dict[str, Obj] | None:
    return None if informer is None else {objects.key(o): o for o in informer.list()}


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
        Shaped(reconciler, manager.clock)
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
    manager.add_controller(
        setup_controller(manager, kueue_served=kueue_served, topology_served=topology_served)
    )

"""DynamoComponentDeployment controller: the four steps (:class:`~aiplane.kube.shape.Shape`) around
:mod:`.component_decide` (what to write and report, pure), :mod:`.component_children` (what should
exist) and :mod:`.component_status` (what to report).

::

    observe   the DCD, its children (Deployments, PodDisruptionBudgets, Services, Ingresses,
              VirtualServices, HPAs, LeaderWorkerSets, PodGroups it controls or that stand at a name it
              wants) from informer caches, overlaid with our own writes (Expectations.view); the
              parent DGD's backend; the component ServiceAccount; the namespace's Kueue Workloads; what
              holds its pods; for multinode, its LeaderWorkerSet pods and the cordoned Nodes
    decide    component_decide.decide: the children's creates, replaces, budget flips and deletes, in
              order, and the status as those writes leave the children
    act       through the shared ChildWriter (fewest writes: only what differs); the etcd finalizer
    report    StatusWriter (only when changed) + transition Events + one Warning per new cause

Why the pieces are the way they are:

* **Spec hash.** Children are rewritten only when ``nvidia.com/last-applied-hash`` differs from the
  hash of what we would write, so server defaulting, other controllers' fields and the HPA's replica
  count never cause a write: at steady state the controller writes nothing.
* **A spec we cannot build** (a bad field, a multinode DCD on a cluster without LeaderWorkerSet) is
  reported as ``Available=False`` with the message and a Warning Event, and not retried: only a
  change to the DCD brings it back.
* **APIs that may be absent.** An informer on an API the cluster does not serve would never sync
  and would hold every controller of the manager back, so ``setup`` asks the server once which of
  LeaderWorkerSet, Volcano PodGroup and Istio VirtualService it serves (a list request: 404 means
  not served) and watches only those; a DCD that needs a missing one says so in its status.
* **Replica budgets** (multinode): one PodDisruptionBudget per LeaderWorkerSet, released
  (``minAvailable: 0``) by the shared arbiter when its pods stand on a cordoned node and the floor
  allows, protected again once none does (``component_disruption``). They are rewritten only when
  ``budget_differs``; whether a budget is released is read through Expectations, so a second release
  is never decided on a cache that does not show the first. Pods are watched only for what the
  arbiter reads (node, phase, readiness, deletion), Nodes only for ``spec.unschedulable``, and a
  node's change requeues only the DCDs with pods on it.
* **Finalizer** only when the operator has etcd endpoints (``--etcd-endpoints``): it exists to
  delete the component's etcd keys, and without etcd it would only delay deletion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_of, finalizer_patch_add, finalizer_patch_remove
from aiplane.controllers import causes, queueing
from aiplane.controllers.disruption import HELD_EVENT, BudgetFlip, write_budget
from aiplane.controllers.dynamo import component_disruption as cdis
from aiplane.controllers.dynamo import etcd
from aiplane.controllers.dynamo.component_children import ChildrenInput, node_count
from aiplane.controllers.dynamo.component_decide import (
    FAILURE_REASONS,
    FINALIZER,
    ChildOp,
    ComponentDecision,
    ComponentObserved,
    ReplicaPods,
    child_names,
    decide,
    deployment_of_pod_name,
)
from aiplane.controllers.dynamo.component_status import CONDITION_AVAILABLE
from aiplane.controllers.dynamo.naming import DCD_KIND, DGD_KIND
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.dynamo.podtemplate import LABEL_SELECTOR, as_dcd, dynamo_namespace
from aiplane.controllers.gang import VOLCANO, GangBackend, GangOptions
from aiplane.controllers.platform import Platform
from aiplane.controllers.platform_source import PERMISSIONS as PLATFORM_PERMISSIONS
from aiplane.controllers.platform_source import PlatformSource, platform_source, watch_platform
from aiplane.kube.children import ChildWriter, expectation_key, key_of
from aiplane.kube.client import KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import Controller, Request, Result, field_manager_for
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, WRITE_CHILD, Permission
from aiplane.kube.resources import (
    DEPLOYMENTS,
    HPAS,
    INGRESSES,
    LEADERWORKERSETS,
    NODES,
    PDBS,
    PODS,
    PVCS,
    SERVICEACCOUNTS,
    SERVICES,
    STORAGECLASSES,
    Resource,
)
from aiplane.kube.shape import Shaped
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "dynamocomponentdeployment"
FIELD_MANAGER: Final = field_manager_for(NAME)
#: ServiceAccounts with this label run component pods (upstream: the first one found).
LABEL_COMPONENT_POD_SA: Final = "nvidia.com/dynamo-component-pod"
#: Index of the child informers: the uid of the DCD that controls the object.
BY_DCD: Final = "dynamocomponentdeployment-uid"
#: Index of the LeaderWorkerSet pods: the node they stand on.
BY_NODE: Final = "pod-node"
#: Index of the LeaderWorkerSet pods: ``<namespace>/<LeaderWorkerSet>``.
BY_LWS: Final = "pod-leaderworkerset"
#: Index of every component pod: ``<namespace>/<DCD>`` (what holds them goes into the status).
BY_COMPONENT: Final = "pod-component"
#: Istio's GA VirtualService API (the resource table knows v1beta1).
VIRTUALSERVICES_V1: Final = Resource("networking.istio.io", "v1", "virtualservices", "VirtualService", True)

log = structlog.get_logger("aiplane.dynamo.component")


def _by_dcd(obj: Mapping[str, Any]) -> list[str]:
    owner = controller_of(obj)
    if owner is None or owner.get("kind") != DCD_KIND or not owner.get("uid"):
        return []
    return [str(owner["uid"])]


def _dcd_key(dcd: Mapping[str, Any]) -> str:
    return expectation_key(DCD_KIND, objects.namespace(dcd), objects.name(dcd))


#: Events for the Available condition flipping (DynamoComponentReady always follows it): Normal when
#: it turns True; Warning when a ready component loses availability, or for a failure. A component
#: that is still starting (Unknown → False, DeploymentNotReady) is progress, not a warning.
TRANSITION_EVENTS: Final = (
    ConditionEvent(CONDITION_AVAILABLE, "True", NORMAL),
    ConditionEvent(CONDITION_AVAILABLE, "False", WARNING, on_reason_change=True, from_statuses=("True",)),
    ConditionEvent(CONDITION_AVAILABLE, "False", WARNING, on_reason_change=True, reasons=FAILURE_REASONS),
    HELD_EVENT,
    # It starts waiting for Kueue's quota: once per wait, with Kueue's reason.
    ConditionEvent(
        CONDITION_AVAILABLE, "False", WARNING, on_reason_change=True, reasons=(queueing.REASON_PENDING,)
    ),
)


def _by_node(pod: Mapping[str, Any]) -> list[str]:
    node = objects.spec(pod).get("nodeName")
    return [str(node)] if node else []


def _by_lws(pod: Mapping[str, Any]) -> list[str]:
    lws = objects.labels(pod).get(cdis.LWS_NAME_LABEL)
    return [f"{objects.namespace(pod)}/{lws}"] if lws else []


def _by_component(pod: Mapping[str, Any]) -> list[str]:
    dcd = objects.labels(pod).get(LABEL_SELECTOR)
    return [f"{objects.namespace(pod)}/{dcd}"] if dcd else []


def _dcd_of_pod(pod: Mapping[str, Any]) -> list[Request]:
    dcd = objects.labels(pod).get(LABEL_SELECTOR)
    return [Request(objects.namespace(pod) or None, str(dcd))] if dcd else []


def _pod_arbiter_state(pod: Obj) -> tuple[Any, ...]:
    status = objects.status(pod)
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return (objects.spec(pod).get("nodeName"), status.get("phase"), ready, objects.is_deleting(pod))


def pod_changed_for_arbiter(old: Obj, new: Obj) -> bool:
    """Only what the arbiter reads: a pod's node, phase, readiness, deletion."""
    return _pod_arbiter_state(old) != _pod_arbiter_state(new)


def pod_changed(old: Obj, new: Obj) -> bool:
    """What this controller reads of a pod: the arbiter's fields, and what holds the pod."""
    return pod_changed_for_arbiter(old, new) or causes.waiting_changed(old, new)


def unschedulable_changed(old: Obj, new: Obj) -> bool:
    return bool(objects.spec(old).get("unschedulable")) != bool(objects.spec(new).get("unschedulable"))


def _nodes_of(dcd: Mapping[str, Any]) -> int:
    """``spec.multinode.nodeCount`` (1 when absent or not a number: the decision reports a bad one)."""
    try:
        return node_count(dcd)
    except (TypeError, ValueError):
        return 1


def _cordoned(nodes: Informer) -> frozenset[str]:
    return frozenset(objects.name(n) for n in nodes.list() if objects.spec(n).get("unschedulable") is True)


class ComponentController:
    """The DCD controller's four steps (:class:`~aiplane.kube.shape.Shape`)."""

    def __init__(
        self,
        client: KubeClient,
        dcds: Informer,
        children: Mapping[str, tuple[Resource, Informer]],
        dgds: Informer,
        service_accounts: Informer,
        recorder: EventRecorder,
        clock: Clock,
        options: DynamoOptions,
        *,
        missing_multinode_api: str | None = None,
        platform: PlatformSource | None = None,
        pods: Informer | None = None,
        nodes: Informer | None = None,
        claims: Informer | None = None,
        storage_classes: Informer | None = None,
        gang: GangBackend = VOLCANO,
    ) -> None:
        self.client = client
        self.gang = gang
        self.platform = platform
        self.dcds = dcds
        #: kind → (resource, informer) of every child kind this cluster serves.
        self.children = dict(children)
        self.dgds = dgds
        self.service_accounts = service_accounts
        self.recorder = recorder
        self.clock = clock
        self.options = options
        self.missing_multinode_api = missing_multinode_api
        self.status = StatusWriter(client, kinds.DCDS, FIELD_MANAGER)
        self.expectations = Expectations(clock=clock.monotonic)
        self.writer = ChildWriter(client, FIELD_MANAGER, self.expectations)
        #: The component pods (what holds them; with LeaderWorkerSets, multinode replica budgets).
        self.pods = pods
        #: Nodes (multinode replica budgets); None: LeaderWorkerSet is not served here.
        self.nodes = nodes
        #: Claims and StorageClasses: an unbound claim of a pod names the StorageClass it lacks.
        self.claims = claims
        self.storage_classes = storage_classes
        if pods is not None:
            pods.add_indexer(BY_NODE, _by_node)
            pods.add_indexer(BY_LWS, _by_lws)
            pods.add_indexer(BY_COMPONENT, _by_component)
        for _, informer in self.children.values():
            informer.add_indexer(BY_DCD, _by_dcd)
            informer.add_handler(on_delete=self._child_deleted)
        dcds.add_handler(on_delete=lambda obj: self.expectations.forget_owner(_dcd_key(obj)))

    def dcds_on_node(self, node: Obj) -> list[Request]:
        """The DCDs with pods on ``node`` (the Node watch's map)."""
        if self.pods is None:
            return []
        requests = {r for pod in self.pods.by_index(BY_NODE, objects.name(node)) for r in _dcd_of_pod(pod)}
        return sorted(requests, key=lambda r: (r.namespace or "", r.name))

    def _child_deleted(self, obj: Obj) -> None:
        self.expectations.deleted(key_of(obj), obj)

    # --- observe ----------------------------------------------------------------------------------

    async def observe(self, request: Request) -> ComponentObserved | None:
        """The DCD and what its decision reads; our own writes overlay the cache until it shows them."""
        namespace, name = request.namespace or "", request.name
        dcd = self.expectations.view(
            expectation_key(DCD_KIND, namespace, name), self.dcds.get(f"{namespace}/{name}")
        )
        if dcd is None:
            return None
        platform = self.platform.platform(namespace) if self.platform else Platform()
        inputs = ChildrenInput(
            dcd,
            self.options,
            graph_backend=self._graph_backend(dcd),
            service_account=self._service_account(namespace),
            missing_multinode_api=self.missing_multinode_api,
            virtual_services="VirtualService" in self.children,
            platform=platform,
            queue=queueing.queue_for(platform, dcd, self._graph(dcd)) if self.platform else None,
            gang=self.gang,
        )
        workloads = self.platform.workloads if self.platform is not None else None
        return ComponentObserved(
            dcd,
            inputs,
            self._children(dcd),
            etcd=bool(self.options.etcd_endpoints),
            replica_pods=self._replica_pods(dcd),
            workloads=tuple(workloads.list(namespace)) if workloads is not None else None,
            held=self._held(dcd),
        )

    def _view(self, kind: str, namespace: str, name: str) -> Obj | None:
        _, informer = self.children[kind]
        return self.expectations.view(
            expectation_key(kind, namespace, name), informer.get(f"{namespace}/{name}")
        )

    def _children(self, dcd: Obj) -> dict[str, dict[str, Obj]]:
        """Per served kind, the children this DCD controls and those at a name it may want."""
        namespace, uid = objects.namespace(dcd), objects.uid(dcd)
        names = child_names(dcd)
        out: dict[str, dict[str, Obj]] = {}
        for kind, (_, informer) in self.children.items():
            found = names | {objects.name(o) for o in informer.by_index(BY_DCD, uid)}
            views = ((n, self._view(kind, namespace, n)) for n in sorted(found))
            out[kind] = {n: v for n, v in views if v is not None}
        return out

    def _replica_pods(self, dcd: Obj) -> ReplicaPods | None:
        """The multinode replicas' pods and the cordoned nodes (None: no budgets are kept here)."""
        if self.pods is None or self.nodes is None or _nodes_of(dcd) <= 1:
            return None
        namespace = objects.namespace(dcd)
        pods = {n: tuple(self.pods.by_index(BY_LWS, f"{namespace}/{n}")) for n in child_names(dcd)}
        return ReplicaPods(pods, _cordoned(self.nodes))

    def _held(self, dcd: Obj) -> tuple[causes.Held, ...]:
        """What holds the component's pods (the decision reports it while the component is not up)."""
        if self.pods is None:
            return ()
        namespace = objects.namespace(dcd)
        claims, classes = self.claims, self.storage_classes
        return causes.collect(
            self.pods.by_index(BY_COMPONENT, objects.key(dcd)),
            claims=(lambda name: claims.get(f"{namespace}/{name}")) if claims is not None else None,
            storage_classes=(lambda name: classes.get(name) is not None) if classes is not None else None,
        )

    def _graph(self, dcd: Mapping[str, Any]) -> Obj | None:
        for ref in objects.meta(dcd).get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == DGD_KIND and ref.get("name"):
                return self.dgds.get(f"{objects.namespace(dcd)}/{ref['name']}")
        return None

    def _graph_backend(self, dcd: Mapping[str, Any]) -> str | None:
        dgd = self._graph(dcd)
        backend = objects.spec(dgd).get("backendFramework") if dgd else None
        return str(backend) if backend else None

    def _service_account(self, namespace: str) -> str | None:
        names = sorted(objects.name(sa) for sa in self.service_accounts.list(namespace))
        return names[0] if names else None

    def workload_to_dcd(self, workload: Obj) -> list[Request]:
        """A Kueue Workload's DCD: its LeaderWorkerSet's owner, or the Deployment its pod is named after."""
        ns = objects.namespace(workload)
        for ref in objects.meta(workload).get("ownerReferences") or []:
            if ref.get("kind") == "LeaderWorkerSet" and "LeaderWorkerSet" in self.children:
                lws = self.children["LeaderWorkerSet"][1].get(f"{ns}/{ref.get('name')}")
                owner = controller_of(lws) if lws is not None else None
                if owner is not None and owner.get("kind") == DCD_KIND and owner.get("name"):
                    return [Request(ns or None, str(owner["name"]))]
                return []
            if ref.get("kind") == "Pod":
                deployment = deployment_of_pod_name(str(ref.get("name") or ""))
                if deployment and self.dcds.get(f"{ns}/{deployment}") is not None:
                    return [Request(ns or None, deployment)]
        return []

    # --- decide -----------------------------------------------------------------------------------

    def decide(self, observed: ComponentObserved, now: datetime) -> ComponentDecision:
        return decide(observed, now)

    # --- act --------------------------------------------------------------------------------------

    async def act(self, observed: ComponentObserved, decision: ComponentDecision) -> None:
        dcd = observed.dcd
        if decision.deleting:
            if decision.remove_finalizer:
                await self._finalize(dcd)
            return  # owner references cascade the children's deletion
        if decision.add_finalizer:
            patched = await self.client.patch(
                kinds.DCDS,
                objects.name(dcd),
                finalizer_patch_add(dcd, FINALIZER),
                namespace=objects.namespace(dcd),
                patch_type="json",
                field_manager=FIELD_MANAGER,
            )
            self.expectations.wrote(_dcd_key(dcd), dcd, patched, conditional=True)
        owner = _dcd_key(dcd)
        for write in decision.writes:
            res, _ = self.children[str(write.body["kind"])]
            if write.op is ChildOp.CREATE:
                await self.writer.create(res, write.body, owner=owner)
            elif write.op is ChildOp.REPLACE:
                assert write.live is not None
                await self.writer.replace(res, write.live, write.body, owner=owner)
            else:
                await write_budget(
                    self.writer,
                    self.recorder,
                    dcd,
                    write.live,
                    write.body,
                    owner=owner,
                    message=_flip_message(write.body),
                )
        for child in decision.deletes:
            res, _ = self.children[str(child["kind"])]
            await self.writer.delete(res, child, owner=owner)

    async def _finalize(self, dcd: Obj) -> None:
        """Delete the component's etcd keys, then let the DCD go."""
        service = str(objects.spec(dcd).get("serviceName") or "")
        if self.options.etcd_endpoints and service:
            await etcd.delete_component_keys(
                self.options.etcd_endpoints, dynamo_namespace(as_dcd(dcd)), service
            )
        await self.client.patch(
            kinds.DCDS,
            objects.name(dcd),
            finalizer_patch_remove(dcd, FINALIZER),
            namespace=objects.namespace(dcd),
            patch_type="json",
            field_manager=FIELD_MANAGER,
        )

    # --- report -----------------------------------------------------------------------------------

    async def report(self, observed: ComponentObserved, decision: ComponentDecision) -> Result | None:
        """Write the status if it changed, with its transition Events and one per new cause."""
        if decision.status is None:
            return None
        # The DCD as our finalizer write left it: the status write is guarded by it.
        dcd = self.expectations.view(_dcd_key(observed.dcd), observed.dcd) or observed.dcd
        old = objects.status(dcd)
        written = await self.status.write(dcd, decision.status)
        if written is not None:
            self.expectations.wrote(_dcd_key(dcd), dcd, written, conditional=True)
            emit_transitions(self.recorder, dcd, TRANSITION_EVENTS, old, decision.status)
            causes.emit_new(self.recorder, dcd, old.get("waitingFor"), decision.waiting)
        return None


def _flip_message(budget: Obj) -> Callable[[BudgetFlip], str]:
    """The Event message of a replica budget released or protected again."""
    ref = f"{objects.namespace(budget)}/{objects.name(budget)}"

    def message(flip: BudgetFlip) -> str:
        if flip is BudgetFlip.RELEASED:
            return (
                f"Released replica budget {ref} (minAvailable 0): its pods stand on a cordoned node "
                f"and the other replicas keep the floor"
            )
        pods = objects.spec(budget).get("minAvailable")
        return f"Protected replica budget {ref} again (minAvailable {pods}): no pod of it stands on a cordoned node"

    return message


def _missing_multinode_api(lws: bool, podgroups: bool, gang: GangBackend = VOLCANO) -> str | None:
    missing = [
        label for label, ok in (("LeaderWorkerSet", lws), (f"{gang.title} PodGroup", podgroups)) if not ok
    ]
    return " and ".join(missing) + " API" if missing else None


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    # The etcd-cleanup finalizer is a JSON patch on the component.
    Permission("nvidia.com", ("dynamocomponentdeployments",), ("list", "watch", "patch")),
    Permission("nvidia.com", ("dynamocomponentdeployments/status",), ("patch",)),
    Permission("nvidia.com", ("dynamocomponentdeployments/finalizers",), ("update",)),
    Permission("nvidia.com", ("dynamographdeployments",), READ),
    Permission("", ("serviceaccounts",), READ),
    # Pods: what holds them goes into the status; for multinode replicas, they and the nodes they
    # stand on decide the per-replica budgets.
    Permission("", ("pods", "nodes"), READ),
    # An unbound claim a pod waits for is named with the StorageClass it lacks.
    Permission("", ("persistentvolumeclaims",), READ),
    Permission("storage.k8s.io", ("storageclasses",), READ),
    # Children, each created, replaced when it differs, deleted when no longer wanted.
    Permission("", ("services",), WRITE_CHILD),
    Permission("apps", ("deployments",), WRITE_CHILD),
    Permission("policy", ("poddisruptionbudgets",), WRITE_CHILD),
    Permission("networking.k8s.io", ("ingresses",), WRITE_CHILD),
    Permission("autoscaling", ("horizontalpodautoscalers",), WRITE_CHILD),
    Permission("leaderworkerset.x-k8s.io", ("leaderworkersets",), WRITE_CHILD),
    # The gang scheduler's PodGroups (Volcano's or scheduler-plugins' Coscheduling, --gang-scheduler).
    Permission("scheduling.volcano.sh", ("podgroups",), WRITE_CHILD),
    Permission("scheduling.x-k8s.io", ("podgroups",), WRITE_CHILD),
    Permission("networking.istio.io", ("virtualservices",), WRITE_CHILD),
    *PLATFORM_PERMISSIONS,
    EVENTS_WRITE,
)


def setup_controller(
    manager: Manager,
    *,
    lws: bool = True,
    podgroups: bool = True,
    virtual_services: bool = True,
    platform: PlatformSource | None = None,
    gang: GangBackend = VOLCANO,
) -> Controller:
    """The controller, watching only the child kinds the cluster serves (see the module docstring)."""
    options = manager.options(DynamoOptions)
    informers = manager.informers
    child_kinds: list[Resource] = [DEPLOYMENTS, PDBS, SERVICES, INGRESSES, HPAS]
    if lws:
        child_kinds.append(LEADERWORKERSETS)
    if podgroups:
        child_kinds.append(gang.resource)
    if virtual_services and options.istio_gateway:
        child_kinds.append(VIRTUALSERVICES_V1)
    children = {res.kind: (res, informers.informer(res)) for res in child_kinds}
    dcds = informers.informer(kinds.DCDS)
    # Every component pod (what holds it goes into the status); replica budgets also need the Nodes,
    # and without LWS there are none.
    pods = informers.informer(PODS, label_selector=LABEL_SELECTOR)
    nodes = informers.informer(NODES) if lws else None
    shape = ComponentController(
        manager.client,
        dcds,
        children,
        informers.informer(kinds.DGDS),
        informers.informer(SERVICEACCOUNTS, label_selector=f"{LABEL_COMPONENT_POD_SA}=true"),
        manager.recorder(NAME),
        manager.clock,
        options,
        missing_multinode_api=_missing_multinode_api(lws, podgroups, gang),
        platform=platform,
        pods=pods,
        nodes=nodes,
        claims=informers.informer(PVCS),
        storage_classes=informers.informer(STORAGECLASSES),
        gang=gang,
    )
    builder = Controller.build(NAME).for_(kinds.DCDS)
    for res in child_kinds:
        builder = builder.owns(res)
    builder = builder.watches(PODS, _dcd_of_pod, predicates=[pod_changed], label_selector=LABEL_SELECTOR)
    if lws:
        builder = builder.watches(NODES, shape.dcds_on_node, predicates=[unschedulable_changed])
    if platform is not None and platform.workloads is not None:
        builder = builder.watches(platform.workloads.resource, shape.workload_to_dcd)
    if platform is not None:
        builder = watch_platform(
            builder,
            platform,
            lambda: [Request.for_object(o) for o in dcds.list()],
            lambda ns: [Request.for_object(o) for o in dcds.list(ns)],
        )
    # Four workers by default: components are independent; --max-concurrent-reconciles overrides it.
    return builder.workers(4).reconcile(Shaped(shape, manager.clock))


def _log_missing(names: Iterable[tuple[str, bool]]) -> None:
    for label, ok in names:
        if not ok:
            log.warning(f"{label} API is not served: multinode DynamoComponentDeployments report it")


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers dynamocomponentdeployment`` (also part of ``all``)."""
    client = manager.client
    lws = await client.served(LEADERWORKERSETS)
    gang = manager.options(GangOptions).backend()
    podgroups = await client.served(gang.resource)
    options = manager.options(DynamoOptions)
    virtual_services = bool(options.istio_gateway) and await client.served(VIRTUALSERVICES_V1)
    _log_missing((("LeaderWorkerSet", lws), (f"{gang.title} PodGroup", podgroups)))
    if options.istio_gateway and not virtual_services:
        log.warning("an Istio gateway is configured but the VirtualService API is not served")
    platform = await platform_source(manager)
    manager.add_controller(
        setup_controller(
            manager,
            lws=lws,
            podgroups=podgroups,
            virtual_services=virtual_services,
            platform=platform,
            gang=gang,
        )
    )

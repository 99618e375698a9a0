"""DynamoComponentDeployment controller: the executor around :mod:`.component_children` (what should
exist) and :mod:`.component_status` (what to report).

::

    observe   the DCD, its children (Deployments, PodDisruptionBudgets, Services, Ingresses,
              VirtualServices, HPAs, LeaderWorkerSets, PodGroups it controls) from informer caches, overlaid with our own
              writes (Expectations.view); the parent DGD's backend; the component ServiceAccount;
              for multinode, its LeaderWorkerSet pods and the cordoned Nodes they stand on
    decide    component_children.desired_children → disruption.arbitrate (multinode replica budgets,
              component_disruption) → component_status.*_availability
    act       create what is missing, replace what carries another spec hash, delete what this DCD
              controls but no longer wants (surplus LeaderWorkerSets, an HPA turned off, …)
    report    StatusWriter (only when changed) + transition Events

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
from dataclasses import replace
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import (
    controller_of,
    finalizer_patch_add,
    finalizer_patch_remove,
    has_finalizer,
    is_controlled_by,
)
from aiplane.controllers import causes, queueing
from aiplane.controllers.disruption import HELD_EVENT, Arbitration, BudgetFlip, arbitrate, write_budget
from aiplane.controllers.dynamo import component_disruption as cdis
from aiplane.controllers.dynamo import etcd
from aiplane.controllers.dynamo.component_children import (
    ANNOTATION_HASH,
    REASON_INVALID,
    REASON_NO_ORCHESTRATOR,
    ChildrenError,
    ChildrenInput,
    Desired,
    child_labels,
    desired_children,
    needs_update,
    node_count,
    updated,
)
from aiplane.controllers.dynamo.component_status import (
    CONDITION_AVAILABLE,
    Availability,
    compute_status,
    deployment_availability,
    lws_availability,
)
from aiplane.controllers.dynamo.naming import DCD_KIND, DGD_KIND
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.dynamo.podtemplate import (
    LABEL_SELECTOR,
    as_dcd,
    deployment_strategy,
    dynamo_namespace,
)
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
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "dynamocomponentdeployment"
FIELD_MANAGER: Final = field_manager_for(NAME)
FINALIZER: Final = "nvidia.com/finalizer"
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


REASON_CHILD_NOT_CONTROLLED: Final = "ChildNotControlled"
#: Reasons that mean "fix something", not "still rolling out".
FAILURE_REASONS: Final = (REASON_INVALID, REASON_NO_ORCHESTRATOR, REASON_CHILD_NOT_CONTROLLED)

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


def _deployment_of_pod_name(pod: str) -> str | None:
    """``<deployment>-<pod-template-hash>-<5 random>``: the Deployment a ReplicaSet's pod is named after."""
    parts = pod.rsplit("-", 2)
    return parts[0] if len(parts) == 3 and len(parts[2]) == 5 else None


def _deployment_pod_owner(workload: Mapping[str, Any], deployment: str) -> str | None:
    """The name of the pod owning ``workload`` when it is a pod of ``deployment``, else None."""
    for ref in objects.meta(workload).get("ownerReferences") or []:
        name = str(ref.get("name") or "")
        if ref.get("kind") == "Pod" and _deployment_of_pod_name(name) == deployment:
            return name
    return None


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


def _cordoned(nodes: Informer) -> frozenset[str]:
    return frozenset(objects.name(n) for n in nodes.list() if objects.spec(n).get("unschedulable") is True)


class ComponentReconciler:
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
        self.expectations = Expectations()
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

    async def __call__(self, request: Any) -> Result | None:
        return await self.reconcile(request.namespace or "", request.name)

    # --- observe ----------------------------------------------------------------------------------

    def _view(self, kind: str, namespace: str, name: str) -> Obj | None:
        _, informer = self.children[kind]
        return self.expectations.view(
            expectation_key(kind, namespace, name), informer.get(f"{namespace}/{name}")
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

    # --- Kueue --------------------------------------------------------------------------------------

    def _queue_waits(self, dcd: Obj, desired: Desired) -> list[tuple[str, queueing.QuotaWait]]:
        """The component's Kueue Workloads that wait: a LeaderWorkerSet's own, or its Deployment's pods'
        (Kueue gives each pod of a Deployment a Workload owned by the pod)."""
        workloads = self.platform.workloads if self.platform is not None else None
        if workloads is None:
            return []
        namespace, name = objects.namespace(dcd), objects.name(dcd)
        listed = workloads.list(namespace)
        if desired.multinode:
            waits = []
            for child in desired.children:
                if child["kind"] != "LeaderWorkerSet":
                    continue
                lws = self._view("LeaderWorkerSet", namespace, objects.name(child))
                if lws is None or queueing.QUEUE_LABEL not in objects.labels(lws):
                    continue
                for wl in queueing.owned_workloads(listed, [objects.uid(lws)]):
                    wait = queueing.quota_wait(wl)
                    if wait is not None:
                        waits.append((f"LeaderWorkerSet {objects.name(lws)}", wait))
            return waits
        deployment = self._view("Deployment", namespace, name)
        if deployment is None or queueing.QUEUE_LABEL not in objects.labels(deployment):
            return []
        return [
            (f"pod {pod}", wait)
            for wl in listed
            if (pod := _deployment_pod_owner(wl, name)) and (wait := queueing.quota_wait(wl)) is not None
        ]

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
                deployment = _deployment_of_pod_name(str(ref.get("name") or ""))
                if deployment and self.dcds.get(f"{ns}/{deployment}") is not None:
                    return [Request(ns or None, deployment)]
        return []

    def _service_account(self, namespace: str) -> str | None:
        names = sorted(objects.name(sa) for sa in self.service_accounts.list(namespace))
        return names[0] if names else None

    # --- reconcile --------------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Result | None:
        key = f"{namespace}/{name}"
        dcd = self.expectations.view(expectation_key(DCD_KIND, namespace, name), self.dcds.get(key))
        if dcd is None:
            return None
        if objects.is_deleting(dcd):
            await self._finalize(dcd)
            return None  # owner references cascade the children's deletion
        if self.options.etcd_endpoints and not has_finalizer(dcd, FINALIZER):
            before = dcd
            dcd = await self.client.patch(
                kinds.DCDS,
                name,
                finalizer_patch_add(dcd, FINALIZER),
                namespace=namespace,
                patch_type="json",
                field_manager=FIELD_MANAGER,
            )
            self.expectations.wrote(expectation_key(DCD_KIND, namespace, name), before, dcd, conditional=True)
        # No status write before the children exist (upstream writes Unknown first): the first status
        # is written once they are, Unknown/Reconciling until the Deployment controller has observed
        # them — one write fewer per new component, and the same first answer.
        try:
            desired = desired_children(
                ChildrenInput(
                    dcd,
                    self.options,
                    graph_backend=self._graph_backend(dcd),
                    service_account=self._service_account(namespace),
                    missing_multinode_api=self.missing_multinode_api,
                    virtual_services="VirtualService" in self.children,
                    platform=self.platform.platform(namespace) if self.platform else Platform(),
                    queue=queueing.queue_for(self.platform.platform(namespace), dcd, self._graph(dcd))
                    if self.platform
                    else None,
                    gang=self.gang,
                )
            )
        except ChildrenError as exc:
            await self._report(dcd, Availability("False", exc.reason, str(exc)))
            return None  # retrying cannot fix the spec; a change to the DCD brings it back
        budgets, held = self._replica_budgets(dcd, desired)
        conflicts = await self._sync(
            dcd, key, [*desired.children, *budgets], hpa_owns_replicas=desired.hpa_owns_replicas
        )
        if conflicts:
            message = "; ".join(conflicts)
            await self._report(dcd, Availability("False", REASON_CHILD_NOT_CONTROLLED, message), held)
            return None
        await self._report(dcd, self._availability(dcd, desired), held)
        return None

    # --- decide: multinode replica budgets --------------------------------------------------------

    def _replica_budgets(self, dcd: Obj, desired: Desired) -> tuple[list[Obj], str | None]:
        """The replica budgets the arbiter wants now, and the DisruptionHeld message (None: none held)."""
        if not desired.multinode or self.pods is None or self.nodes is None:
            return [], None
        floor = cdis.replica_floor(deployment_strategy(dcd), desired.replicas)
        if floor is None:
            return [], None  # Recreate: the owner accepts the whole component down
        namespace = objects.namespace(dcd)
        names = [objects.name(c) for c in desired.children if c["kind"] == "LeaderWorkerSet"]
        size = node_count(dcd)
        cordoned = _cordoned(self.nodes)
        views = [
            cdis.replica_view(
                name,
                index,
                self.pods.by_index(BY_LWS, f"{namespace}/{name}"),
                size,
                cordoned,
                self._view("PodDisruptionBudget", namespace, name),
            )
            for index, name in enumerate(names)
        ]
        arbitration: Arbitration = arbitrate(views, floor)
        labels = child_labels(dcd)
        budgets = [
            cdis.replica_budget(dcd, name, size, arbitration.is_released(name), labels) for name in names
        ]
        holds = cdis.held(arbitration, views)
        message = cdis.held_message(dcd, holds, arbitration, desired.replicas) if holds else None
        return budgets, message

    # --- act --------------------------------------------------------------------------------------

    async def _sync(self, dcd: Obj, key: str, children: list[Obj], *, hpa_owns_replicas: bool) -> list[str]:
        """Create, update and delete children; returns the objects in the way (same name, not ours).

        Replica budgets carry no spec hash (their ``minAvailable`` flips with the arbiter): they are
        compared with ``budget_differs`` and their flips are reported as Events."""
        namespace, uid = objects.namespace(dcd), objects.uid(dcd)
        wanted: set[str] = set()
        conflicts: list[str] = []
        for body in children:
            kind = str(body["kind"])
            if kind not in self.children:
                continue
            wanted.add(key_of(body))
            live = self._view(kind, namespace, objects.name(body))
            if live is None:
                await self._create(key, body)
            elif not is_controlled_by(live, uid):
                conflicts.append(f"{kind} {objects.name(body)} exists and is not controlled by this DCD")
            elif ANNOTATION_HASH not in objects.annotations(body):
                # A replica budget: no spec hash (its minAvailable flips with the arbiter).
                await write_budget(
                    self.writer,
                    self.recorder,
                    dcd,
                    live,
                    body,
                    owner=f"{DCD_KIND}/{key}",
                    message=_flip_message(body),
                )
            elif needs_update(live, body):
                keep = hpa_owns_replicas and kind == "Deployment"
                await self._replace(key, live, updated(live, body, keep_replicas=keep))
        for kind, (_, informer) in self.children.items():
            for cached in informer.by_index(BY_DCD, uid):
                child = key_of(cached)
                if child in wanted or objects.is_deleting(cached):
                    continue
                if self._view(kind, namespace, objects.name(cached)) is not None:
                    await self._delete(key, cached)
        return conflicts

    # ``owner`` is the DCD's ``namespace/name``; its writes are recorded under its expectation key.

    async def _create(self, owner: str, body: Obj) -> None:
        res, _ = self.children[str(body["kind"])]
        await self.writer.create(res, body, owner=f"{DCD_KIND}/{owner}")

    async def _replace(self, owner: str, live: Obj, body: Obj) -> None:
        res, _ = self.children[str(body["kind"])]
        await self.writer.replace(res, live, body, owner=f"{DCD_KIND}/{owner}")

    async def _delete(self, owner: str, obj: Obj) -> None:
        res, _ = self.children[str(obj["kind"])]
        await self.writer.delete(res, obj, owner=f"{DCD_KIND}/{owner}")

    async def _finalize(self, dcd: Obj) -> None:
        """Delete the component's etcd keys, then let the DCD go."""
        if not has_finalizer(dcd, FINALIZER):
            return
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

    def _availability(self, dcd: Obj, desired: Desired) -> Availability:
        namespace, name = objects.namespace(dcd), objects.name(dcd)
        if not desired.multinode:
            found = deployment_availability(self._view("Deployment", namespace, name), name)
        else:
            names = [objects.name(c) for c in desired.children if c["kind"] == "LeaderWorkerSet"]
            observed = {n: self._view("LeaderWorkerSet", namespace, n) for n in names}
            found = lws_availability(names, observed)
        waits = self._queue_waits(dcd, desired) if found.status != "True" else []
        if not waits:
            return found
        # Not available because Kueue has not admitted it: say so, in Kueue's words.
        return replace(found, reason=queueing.REASON_PENDING, message=queueing.wait_message(waits))

    def _waiting(self, dcd: Obj, availability: Availability) -> tuple[causes.Held, ...]:
        """What holds the component's pods, while it is not available for want of them."""
        if self.pods is None or availability.status == "True" or availability.reason in FAILURE_REASONS:
            return ()
        namespace = objects.namespace(dcd)
        claims, classes = self.claims, self.storage_classes
        return causes.collect(
            self.pods.by_index(BY_COMPONENT, objects.key(dcd)),
            claims=(lambda name: claims.get(f"{namespace}/{name}")) if claims is not None else None,
            storage_classes=(lambda name: classes.get(name) is not None) if classes is not None else None,
        )

    async def _report(self, dcd: Obj, availability: Availability, held: str | None = None) -> Obj:
        """Write the status if it changed; returns the DCD as written (or as it was)."""
        old = objects.status(dcd)
        now = self.clock.now()
        waiting = self._waiting(dcd, availability)
        status = compute_status(dcd, availability, now=now, waiting=waiting)
        status = cdis.with_held(status, held, generation=objects.generation(dcd) or 0, now=now)
        written = await self.status.write(dcd, status)
        if written is None:
            return dcd
        self.expectations.wrote(_dcd_key(dcd), dcd, written, conditional=True)
        emit_transitions(self.recorder, dcd, TRANSITION_EVENTS, old, status)
        causes.emit_new(self.recorder, dcd, old.get("waitingFor"), waiting)
        return written


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
    reconciler = ComponentReconciler(
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
        builder = builder.watches(NODES, reconciler.dcds_on_node, predicates=[unschedulable_changed])
    if platform is not None and platform.workloads is not None:
        builder = builder.watches(platform.workloads.resource, reconciler.workload_to_dcd)
    if platform is not None:
        builder = watch_platform(
            builder,
            platform,
            lambda: [Request.for_object(o) for o in dcds.list()],
            lambda ns: [Request.for_object(o) for o in dcds.list(ns)],
        )
    # Four workers by default: components are independent; --max-concurrent-reconciles overrides it.
    return builder.workers(4).reconcile(reconciler)


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

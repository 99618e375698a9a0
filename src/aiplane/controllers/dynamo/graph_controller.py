"""DynamoGraphDeployment controller (the DCD path): one DynamoComponentDeployment per service.

::

    observe   the DGD, the DCDs it controls (indexed by owner uid), PVCs by name, the namespace's
              planner ServiceAccount, all from informer caches, overlaid with our own DCD writes
              (Expectations.view); whether LeaderWorkerSet is served (one cached probe)
    decide    graph.validate_graph → graph.multinode_problem → graph.desired_dcds / stale_dcds →
              graph_sync (what to write) → graph_status.decide (state, Ready, readyServices)
    act       finalizer first; planner ServiceAccount; PVCs; DCD creates/updates (spec-hash guarded);
              stale DCDs deleted with a uid precondition
    report    /status merge patch only when it changed; Events from graph_status.graph_events

Upstream's order (ai-dynamo/dynamo ``dynamographdeployment_controller.go``; docs/dynamo.md) is kept: finalizer,
planner account, PVCs, orchestrator choice, DCDs. Validation comes before any of it, so an invalid
graph creates nothing. The orchestrator is always the DCD path: Grove is not supported, and the
``nvidia.com/enable-grove`` annotation is ignored (docs/dynamo.md).

Deletion: the finalizer ``nvidia.com/finalizer`` is kept for upstream compatibility, but upstream's
``FinalizeResource`` for a DGD does nothing, and neither do we. Every DCD and every PVC the graph
created carries a controller ownerReference to it, so the garbage collector removes them (and the
DCDs' own children) once the DGD is gone; the planner ServiceAccount is shared by the namespace's
graphs and, as upstream, stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import (
    controller_of,
    finalizer_patch_add,
    finalizer_patch_remove,
    has_finalizer,
)
from aiplane.controllers.dynamo.graph import (
    desired_dcds,
    multinode_problem,
    node_count,
    services,
    stale_dcds,
    validate_graph,
)
from aiplane.controllers.dynamo.graph_status import (
    REASON_FAILED,
    REASON_FINALIZER,
    REASON_INVALID,
    DcdView,
    Failure,
    WantedDcd,
    dcd_view,
    decide,
    graph_events,
    status_of,
)
from aiplane.controllers.dynamo.graph_sync import (
    needs_planner_account,
    plan_dcd,
    plan_pvcs,
    planner_service_account,
    wanted_dcd,
)
from aiplane.controllers.dynamo.naming import DCD_KIND, DGD_KIND, PLANNER_SERVICE_ACCOUNT
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.platform_source import PlatformSource
from aiplane.kube.children import ChildWriter, expectation_key, key_of
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import (
    Controller,
    Request,
    Result,
    TerminalError,
    event_source_for,
    field_manager_for,
)
from aiplane.kube.events import NORMAL, EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import LEADERWORKERSETS, PVCS, SERVICEACCOUNTS
from aiplane.kube.status import StatusWriter

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "dynamographdeployment"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)
FINALIZER: Final = "nvidia.com/finalizer"
#: How long a "LeaderWorkerSet is (not) served" answer is trusted; a graph refused for want of LWS
#: is looked at again after this long, so installing LWS later is noticed without a restart.
LWS_RECHECK_SECONDS: Final = 60.0
BY_OWNER: Final = "dgd-owner"
BY_PVC: Final = "dgd-pvc"


def _by_owner(obj: Mapping[str, Any]) -> list[str]:
    owner = controller_of(obj)
    return (
        [str(owner["uid"])]
        if owner is not None and owner.get("kind") == DGD_KIND and owner.get("uid")
        else []
    )


def _by_pvc(dgd: Mapping[str, Any]) -> list[str]:
    raw = objects.spec(dgd).get("pvcs")
    entries = raw if isinstance(raw, list) else ()
    return [
        f"{objects.namespace(dgd)}/{e['name']}"
        for e in entries
        if isinstance(e, Mapping) and isinstance(e.get("name"), str)
    ]


class LwsProbe:
    """Is ``leaderworkerset.x-k8s.io/v1`` served? One list call, its answer cached for a while and
    asked only when a graph has a multinode service (a cheap stand-in for upstream's discovery)."""

    def __init__(self, client: KubeClient, clock: Clock, ttl: float = LWS_RECHECK_SECONDS) -> None:
        self.client = client
        self.clock = clock
        self.ttl = ttl
        self._answer: tuple[float, bool] | None = None

    async def served(self) -> bool:
        now = self.clock.monotonic()
        if self._answer is not None and now - self._answer[0] < self.ttl:
            return self._answer[1]
        served = await self.client.served(LEADERWORKERSETS)
        self._answer = (now, served)
        return served


class GraphReconciler:
    def __init__(
        self,
        client: KubeClient,
        dgds: Informer,
        dcds: Informer,
        pvcs: Informer,
        accounts: Informer,
        recorder: EventRecorder,
        clock: Clock,
        options: DynamoOptions,
        lws: LwsProbe,
        kaiwo: Informer | None = None,
    ) -> None:
        self.client = client
        #: The KaiwoConfig cache: ``storage.defaultStorageClass`` for the PVCs we create.
        self.kaiwo = kaiwo
        self.dgds = dgds
        self.dcds = dcds
        self.pvcs = pvcs
        self.accounts = accounts
        self.recorder = recorder
        self.clock = clock
        self.options = options
        self.lws = lws
        self.status = StatusWriter(client, kinds.DGDS, FIELD_MANAGER)
        # Our own DGD and DCD writes, served in place of the cache until it shows them (or the
        # object's delete event comes; a re-list also shows a newer version). No timeout: a view is
        # dropped only when the cache has caught up, never because a watch event is late.
        self.expectations = Expectations(clock=clock.monotonic)
        #: DCDs: recorded, so the next reconcile decides on what we wrote.
        self.children = ChildWriter(client, FIELD_MANAGER, self.expectations)
        #: The planner ServiceAccount and PVCs: created once, never read back through expectations.
        self.creates = ChildWriter(client, FIELD_MANAGER)
        dcds.add_indexer(BY_OWNER, _by_owner)
        dgds.add_indexer(BY_PVC, _by_pvc)
        for informer in (dcds, dgds):
            informer.add_handler(on_delete=lambda obj: self.expectations.deleted(key_of(obj), obj))

    async def __call__(self, request: Request) -> Result | None:
        return await self.reconcile(request.namespace or "", request.name)

    def _default_storage_class(self) -> str | None:
        spec = PlatformSource(self.kaiwo, None, None, None).kaiwo_spec()
        return spec.effective_storage().defaultStorageClass if spec is not None else None

    # --- reconcile --------------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Result | None:
        # Our own finalizer and status writes overlay the cache until it shows them, so the next
        # reconcile neither repeats them nor sends a write guarded by a stale resourceVersion.
        dgd = self.expectations.view(_dgd_key(namespace, name), self.dgds.get(f"{namespace}/{name}"))
        if dgd is None:
            return None
        if objects.is_deleting(dgd):
            await self._finalize(dgd)
            return None
        dgd = await self._ensure_finalizer(dgd)
        problems = validate_graph(dgd)
        if problems:
            listed = "; ".join(str(p) for p in problems)
            await self._report(dgd, [], {}, Failure(REASON_INVALID, f"invalid spec: {listed}"))
            return None
        if any(node_count(s) > 1 for s in services(dgd).values()):
            problem = multinode_problem(dgd, await self.lws.served())
            if problem is not None:
                await self._report(dgd, [], {}, Failure(REASON_FAILED, problem))
                return Result(requeue_after=LWS_RECHECK_SECONDS)
        if needs_planner_account(dgd):
            await self._ensure_planner_account(namespace)
        desired = desired_dcds(dgd, self.options)
        wanted = [wanted_dcd(body) for body in desired.values()]
        views = {n: dcd_view(o, objects.uid(dgd)) for n, o in self._observed(dgd, desired).items()}
        missing = await self._sync_pvcs(dgd)
        if missing:
            await self._report(dgd, wanted, views, Failure(REASON_FAILED, "; ".join(missing)))
            return None
        views = await self._sync_dcds(dgd, desired)
        await self._report(dgd, wanted, views)
        return None

    # --- finalizer --------------------------------------------------------------------------------

    async def _patch_finalizer(self, dgd: Obj, patch: list[dict[str, Any]]) -> Obj:
        try:
            patched = await self.client.patch(
                kinds.DGDS,
                objects.name(dgd),
                patch,
                namespace=objects.namespace(dgd),
                patch_type="json",
                field_manager=FIELD_MANAGER,
            )
        except ApiError as exc:
            if exc.not_found or exc.invalid or exc.transient:
                raise  # races (a failed JSON-patch test is a 422) and outages: the runtime retries
            await self._report(dgd, [], {}, Failure(REASON_FINALIZER, f"finalizer {FINALIZER}: {exc}"))
            raise
        self.expectations.wrote(_dgd_key_of(dgd), dgd, patched, conditional=True)
        return patched

    async def _ensure_finalizer(self, dgd: Obj) -> Obj:
        """Added before anything is created, as upstream; the patched object (with its new
        resourceVersion) is what the status write is then guarded by."""
        patch = finalizer_patch_add(dgd, FINALIZER)
        return await self._patch_finalizer(dgd, patch) if patch else dgd

    async def _finalize(self, dgd: Obj) -> None:
        """Nothing outside the cluster to clean up (upstream's FinalizeResource is empty): drop the
        finalizer and let owner references take the DCDs and PVCs."""
        if has_finalizer(dgd, FINALIZER):
            await self._patch_finalizer(dgd, finalizer_patch_remove(dgd, FINALIZER))
        self.expectations.forget_owner(_dgd_key_of(dgd))

    # --- planner ServiceAccount and PVCs ----------------------------------------------------------

    async def _ensure_planner_account(self, namespace: str) -> None:
        if self.accounts.get(f"{namespace}/{PLANNER_SERVICE_ACCOUNT}") is not None:
            return
        await self.creates.create(SERVICEACCOUNTS, planner_service_account(namespace), namespace=namespace)

    async def _sync_pvcs(self, dgd: Obj) -> list[str]:
        """Create the claims the graph may create; return the entries naming a missing claim."""
        namespace = objects.namespace(dgd)
        plan = plan_pvcs(dgd, lambda pvc: self.pvcs.get(f"{namespace}/{pvc}"), self._default_storage_class())
        for body in plan.create:
            if await self.creates.create(PVCS, body, namespace=namespace) is None:
                continue
            self.recorder.emit(
                dgd, NORMAL, "PVCCreated", f"Created PersistentVolumeClaim {body['metadata']['name']}"
            )
        return plan.missing

    # --- DCDs -------------------------------------------------------------------------------------

    def _observed(self, dgd: Obj, desired: Mapping[str, Any]) -> dict[str, Obj]:
        """The DCDs this graph wants or controls, as cached overlaid with our own writes."""
        namespace = objects.namespace(dgd)
        found = {objects.name(o): o for o in self.dcds.by_index(BY_OWNER, objects.uid(dgd))}
        for dcd_name in desired:
            cached = self.dcds.get(f"{namespace}/{dcd_name}")
            if cached is not None:
                found[dcd_name] = cached
        observed: dict[str, Obj] = {}
        for dcd_name in sorted(set(found) | set(desired)):
            view = self.expectations.view(expectation_key(DCD_KIND, namespace, dcd_name), found.get(dcd_name))
            if view is not None:
                observed[dcd_name] = view
        return observed

    async def _sync_dcds(self, dgd: Obj, desired: Mapping[str, Obj]) -> dict[str, DcdView]:
        """Create or update each wanted DCD, delete the stale ones; return the views the status is
        decided on (a DCD just written is judged by what the write returned: its new generation is
        not yet observed, so it is not ready — the #3567 fix)."""
        uid = objects.uid(dgd)
        observed = self._observed(dgd, desired)
        for dcd_name, body in desired.items():
            write = plan_dcd(body, observed.get(dcd_name), uid)
            if write is None:
                continue
            after = await self._write_dcd(dgd, write.verb, observed.get(dcd_name), write.body)
            if after is None:
                continue
            observed[dcd_name] = after
            if write.overrode_replicas is not None:
                self.recorder.emit(
                    dgd,
                    NORMAL,
                    "ReplicasOverridden",
                    f"DynamoComponentDeployment {dcd_name} was scaled to {write.overrode_replicas}; set back "
                    f"to {objects.spec(body).get('replicas')} from the graph's service replicas (remove "
                    "replicas from the service to scale the DCD directly)",
                )
        for stale in stale_dcds(dgd, observed.values()):
            await self._delete_dcd(dgd, observed[stale])
        return {n: dcd_view(o, uid) for n, o in observed.items() if n in desired}

    async def _write_dcd(self, dgd: Obj, verb: str, before: Obj | None, body: Obj) -> Obj | None:
        """Create (AlreadyExists: the cache will show it) or replace one DCD. A DCD the API server
        rejects stops the graph as failed until the graph changes; races propagate."""
        owner = _dgd_key_of(dgd)
        try:
            if verb == "create" or before is None:
                return await self.children.create(
                    kinds.DCDS, body, namespace=objects.namespace(dgd), owner=owner
                )
            return await self.children.replace(kinds.DCDS, before, body, owner=owner)
        except ApiError as exc:
            if exc.invalid or exc.status == 400:
                message = f"DynamoComponentDeployment {objects.name(body)}: {exc}"
                await self._report(dgd, [], {}, Failure(REASON_FAILED, message))
                raise TerminalError(message) from exc
            raise

    async def _delete_dcd(self, dgd: Obj, dcd: Obj) -> None:
        if not await self.children.delete(kinds.DCDS, dcd, owner=_dgd_key_of(dgd)):
            return
        self.recorder.emit(
            dgd,
            NORMAL,
            "DeletedDCD",
            f"Deleted DynamoComponentDeployment {objects.name(dcd)}: its service left spec.services",
        )

    # --- report -----------------------------------------------------------------------------------

    async def _report(
        self, dgd: Obj, wanted: list[WantedDcd], views: Mapping[str, DcdView], failure: Failure | None = None
    ) -> None:
        before = objects.status(dgd)
        report = decide(wanted, views, failure)
        status = status_of(report, objects.generation(dgd) or 0, before, self.clock.now())
        written = await self.status.write(dgd, status)
        if written is not None:
            self.expectations.wrote(_dgd_key_of(dgd), dgd, written, conditional=True)
            for type_, reason, message in graph_events(before, status):
                self.recorder.emit(dgd, type_, reason, message)


def _dgd_key(namespace: str, name: str) -> str:
    return expectation_key(DGD_KIND, namespace, name)


def _dgd_key_of(dgd: Mapping[str, Any]) -> str:
    return _dgd_key(objects.namespace(dgd), objects.name(dgd))


def _to_dgds(dgds: Informer) -> Any:
    """A PVC's graphs: those whose ``spec.pvcs`` name it (a missing claim being created brings a
    refused graph back) and the one controlling it."""

    def map_pvc(pvc: Obj) -> Iterable[Request]:
        namespace = objects.namespace(pvc)
        requests = {
            Request(namespace or None, objects.name(d))
            for d in dgds.by_index(BY_PVC, f"{namespace}/{objects.name(pvc)}")
        }
        owner = controller_of(pvc)
        if owner is not None and owner.get("kind") == DGD_KIND:
            requests.add(Request(namespace or None, str(owner.get("name"))))
        return sorted(requests)

    return map_pvc


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    # The finalizer is a JSON patch on the graph.
    Permission("nvidia.com", ("dynamographdeployments",), ("list", "watch", "patch")),
    Permission("nvidia.com", ("dynamographdeployments/status",), ("patch",)),
    Permission("nvidia.com", ("dynamographdeployments/finalizers",), ("update",)),
    Permission(
        "nvidia.com", ("dynamocomponentdeployments",), ("list", "watch", "create", "update", "delete")
    ),
    # The planner's ServiceAccount and the graph's PVCs are created once, never changed here.
    Permission("", ("persistentvolumeclaims", "serviceaccounts"), ("list", "watch", "create")),
    # Whether multinode is possible: a one-item LIST of LeaderWorkerSets.
    Permission("leaderworkerset.x-k8s.io", ("leaderworkersets",), ("list",)),
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs",), READ),
    EVENTS_WRITE,
)


def setup_controller(manager: Manager, *, kaiwo: bool = False) -> Controller:
    informers = manager.informers
    dgds = informers.informer(kinds.DGDS)
    reconciler = GraphReconciler(
        manager.client,
        dgds,
        informers.informer(kinds.DCDS),
        informers.informer(PVCS),
        informers.informer(SERVICEACCOUNTS, field_selector=f"metadata.name={PLANNER_SERVICE_ACCOUNT}"),
        EventRecorder(manager.client, COMPONENT),
        manager.clock,
        manager.options(DynamoOptions),
        LwsProbe(manager.client, manager.clock),
        informers.informer(kinds.KAIWOCONFIGS) if kaiwo else None,
    )
    builder = Controller.build(NAME).for_(kinds.DGDS).owns(kinds.DCDS).watches(PVCS, _to_dgds(dgds))
    # Four workers by default: graphs are independent; --max-concurrent-reconciles overrides it.
    return builder.workers(4).reconcile(reconciler)


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers dynamographdeployment`` (also part of ``all``)."""
    kaiwo = await manager.client.served(kinds.KAIWOCONFIGS)
    manager.add_controller(setup_controller(manager, kaiwo=kaiwo))

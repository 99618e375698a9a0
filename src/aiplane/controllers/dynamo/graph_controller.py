"""DynamoGraphDeployment controller (the DCD path): one DynamoComponentDeployment per service.

::

    observe   the DGD, the DCDs it controls (indexed by owner uid) or wants (by name), the PVCs it
              names, the ServiceAccount of Dynamo's Planner service, all from informer caches, overlaid with
              our own DGD and DCD writes (Expectations.view); whether LeaderWorkerSet is served (one
              cached probe, only for a multinode graph)
    decide    graph_decide.decide (pure): graph.validate_graph → graph.multinode_problem →
              graph.desired_dcds / stale_dcds → graph_sync (what to write) → the status wanted after
              those writes (state, Ready, readyServices)
    act       finalizer first; the Planner service's ServiceAccount; PVCs; DCD creates/updates (spec-hash guarded);
              stale DCDs deleted with a uid precondition; Events for what was done
    report    /status merge patch only when it changed; Events from graph_decide.graph_events

Upstream's order (ai-dynamo/dynamo ``dynamographdeployment_controller.go``; docs/dynamo.md) is kept: finalizer,
Planner service account, PVCs, orchestrator choice, DCDs. Validation comes before any of it, so an invalid
graph creates nothing. The orchestrator is always the DCD path: Grove is not supported, and the
``nvidia.com/enable-grove`` annotation is ignored (docs/dynamo.md).

Deletion: the finalizer ``nvidia.com/finalizer`` is kept for upstream compatibility, but upstream's
``FinalizeResource`` for a DGD does nothing, and neither do we. Every DCD and every PVC the graph
created carries a controller ownerReference to it, so the garbage collector removes them (and the
DCDs' own children) once the DGD is gone; the Planner service's ServiceAccount is shared by the namespace's
graphs and, as upstream, stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_of, finalizer_patch_add, finalizer_patch_remove
from aiplane.controllers.dynamo.graph import node_count, services
from aiplane.controllers.dynamo.graph_decide import (
    FINALIZER,
    LWS_RECHECK_SECONDS,
    REASON_FAILED,
    REASON_FINALIZER,
    DcdChange,
    Failure,
    GraphDecision,
    GraphObserved,
    decide,
    failure_status,
    graph_events,
)
from aiplane.controllers.dynamo.naming import DCD_KIND, DGD_KIND, PLANNER_SERVICE_ACCOUNT, dcd_name
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.platform_source import PlatformSource
from aiplane.kube.children import ChildWriter, expectation_key, key_of
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import Controller, Request, Result, TerminalError, field_manager_for
from aiplane.kube.events import NORMAL, EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import LEADERWORKERSETS, PVCS, SERVICEACCOUNTS
from aiplane.kube.shape import Shaped
from aiplane.kube.status import StatusWriter

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "dynamographdeployment"
FIELD_MANAGER: Final = field_manager_for(NAME)
__all__ = [
    "FINALIZER",
    "LWS_RECHECK_SECONDS",
    "NAME",
    "GraphController",
    "LwsProbe",
    "setup",
    "setup_controller",
]
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


class GraphController:
    """The DGD controller's four steps (:class:`~aiplane.kube.shape.Shape`)."""

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
        #: The Planner service's ServiceAccount and PVCs: created once, never read back through expectations.
        self.creates = ChildWriter(client, FIELD_MANAGER)
        dcds.add_indexer(BY_OWNER, _by_owner)
        dgds.add_indexer(BY_PVC, _by_pvc)
        for informer in (dcds, dgds):
            informer.add_handler(on_delete=lambda obj: self.expectations.deleted(key_of(obj), obj))

    def _default_storage_class(self) -> str | None:
        spec = PlatformSource(self.kaiwo, None, None, None).kaiwo_spec()
        return spec.effective_storage().defaultStorageClass if spec is not None else None

    # --- observe ----------------------------------------------------------------------------------

    async def observe(self, request: Request) -> GraphObserved | None:
        """The graph and what its decision reads; our own finalizer, status and DCD writes overlay
        the cache until it shows them, so the decision neither repeats them nor sends a write guarded
        by a stale resourceVersion."""
        namespace, name = request.namespace or "", request.name
        dgd = self.expectations.view(_dgd_key(namespace, name), self.dgds.get(f"{namespace}/{name}"))
        if dgd is None:
            return None
        multinode = any(node_count(s) > 1 for s in services(dgd).values())
        lws = await self.lws.served() if multinode and not objects.is_deleting(dgd) else None
        return GraphObserved(
            dgd=dgd,
            dcds=self._dcds(dgd),
            pvcs=frozenset(n for n in _pvc_names(dgd) if self.pvcs.get(f"{namespace}/{n}") is not None),
            planner_account=self.accounts.get(f"{namespace}/{PLANNER_SERVICE_ACCOUNT}") is not None,
            lws_served=lws,
            default_storage_class=self._default_storage_class(),
            options=self.options,
        )

    def _dcds(self, dgd: Obj) -> dict[str, Obj]:
        """The DCDs this graph wants (by name) or controls, as cached overlaid with our own writes."""
        namespace = objects.namespace(dgd)
        found = {objects.name(o): o for o in self.dcds.by_index(BY_OWNER, objects.uid(dgd))}
        wanted = {dcd_name(objects.name(dgd), key) for key in services(dgd)}
        for dcd in wanted:
            cached = self.dcds.get(f"{namespace}/{dcd}")
            if cached is not None:
                found[dcd] = cached
        observed: dict[str, Obj] = {}
        for dcd in sorted(set(found) | wanted):
            view = self.expectations.view(expectation_key(DCD_KIND, namespace, dcd), found.get(dcd))
            if view is not None:
                observed[dcd] = view
        return observed

    def decide(self, observed: GraphObserved, now: datetime) -> GraphDecision:
        return decide(observed, now)

    # --- act --------------------------------------------------------------------------------------

    async def act(self, observed: GraphObserved, decision: GraphDecision) -> None:
        dgd = dict(observed.dgd)
        if decision.deleting:
            # Nothing outside the cluster to clean up (upstream's FinalizeResource is empty): drop
            # the finalizer and let owner references take the DCDs and PVCs.
            if decision.remove_finalizer:
                await self._patch_finalizer(observed, finalizer_patch_remove(dgd, FINALIZER))
            self.expectations.forget_owner(_dgd_key_of(dgd))
            return
        if decision.add_finalizer:
            dgd = await self._patch_finalizer(observed, finalizer_patch_add(dgd, FINALIZER))
        namespace = objects.namespace(dgd)
        if decision.planner_account is not None:
            await self.creates.create(SERVICEACCOUNTS, decision.planner_account, namespace=namespace)
        for body in decision.pvcs:
            if await self.creates.create(PVCS, body, namespace=namespace) is not None:
                self.recorder.emit(
                    dgd, NORMAL, "PVCCreated", f"Created PersistentVolumeClaim {body['metadata']['name']}"
                )
        for change in decision.dcds:
            await self._write_dcd(observed, dgd, change)
        for stale in decision.stale:
            if await self.children.delete(kinds.DCDS, stale, owner=_dgd_key_of(dgd)):
                self.recorder.emit(
                    dgd,
                    NORMAL,
                    "DeletedDCD",
                    f"Deleted DynamoComponentDeployment {objects.name(stale)}: its service left spec.services",
                )

    async def _patch_finalizer(self, observed: GraphObserved, patch: list[dict[str, Any]]) -> Obj:
        dgd = observed.dgd
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
            # The status depends on this error: a refusal other than a race or an outage is reported.
            if exc.not_found or exc.invalid or exc.transient:
                raise  # races (a failed JSON-patch test is a 422) and outages: the runtime retries
            failure = Failure(REASON_FINALIZER, f"finalizer {FINALIZER}: {exc}")
            await self._write_status(dgd, failure_status(observed, failure, self.clock.now()))
            raise
        self.expectations.wrote(_dgd_key_of(dgd), dgd, patched, conditional=True)
        return patched

    async def _write_dcd(self, observed: GraphObserved, dgd: Obj, change: DcdChange) -> None:
        """Create (AlreadyExists: the cache will show it) or replace one DCD, recording the replicas
        Event when the graph's count overrode a direct scale."""
        write, owner = change.write, _dgd_key_of(dgd)
        try:
            if change.live is None:
                after = await self.children.create(
                    kinds.DCDS, write.body, namespace=objects.namespace(dgd), owner=owner
                )
            else:
                after = await self.children.replace(kinds.DCDS, change.live, write.body, owner=owner)
        except ApiError as exc:
            # The status depends on this error: a DCD the API server rejects stops the graph as
            # failed until the graph changes (retrying cannot help); races propagate.
            if exc.invalid or exc.status == 400:
                message = f"DynamoComponentDeployment {objects.name(write.body)}: {exc}"
                failure = failure_status(observed, Failure(REASON_FAILED, message), self.clock.now())
                await self._write_status(dgd, failure)
                raise TerminalError(message) from exc
            raise
        if after is not None and write.overrode_replicas is not None:
            self.recorder.emit(
                dgd,
                NORMAL,
                "ReplicasOverridden",
                f"DynamoComponentDeployment {objects.name(write.body)} was scaled to {write.overrode_replicas}; "
                f"set back to {objects.spec(write.body).get('replicas')} from the graph's service replicas "
                "(remove replicas from the service to scale the DCD directly)",
            )

    # --- report -----------------------------------------------------------------------------------

    async def report(self, observed: GraphObserved, decision: GraphDecision) -> Result | None:
        if decision.status is not None:
            dgd = dict(observed.dgd)
            if decision.add_finalizer:
                # The graph as our finalizer write left it: the status write is guarded by it.
                dgd = self.expectations.view(_dgd_key_of(dgd), dgd) or dgd
            await self._write_status(dgd, decision.status)
        return Result(requeue_after=decision.requeue_after) if decision.requeue_after is not None else None

    async def _write_status(self, dgd: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        before = objects.status(dgd)
        written = await self.status.write(dgd, status)
        if written is not None:
            self.expectations.wrote(_dgd_key_of(dgd), dgd, written, conditional=True)
            for type_, reason, message in graph_events(before, status):
                self.recorder.emit(dict(dgd), type_, reason, message)


def _pvc_names(dgd: Mapping[str, Any]) -> list[str]:
    raw = objects.spec(dgd).get("pvcs")
    entries = raw if isinstance(raw, list) else ()
    return [str(e["name"]) for e in entries if isinstance(e, Mapping) and isinstance(e.get("name"), str)]


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
    # The Planner service's ServiceAccount and the graph's PVCs are created once, never changed here.
    Permission("", ("persistentvolumeclaims", "serviceaccounts"), ("list", "watch", "create")),
    # Whether multinode is possible: a one-item LIST of LeaderWorkerSets.
    Permission("leaderworkerset.x-k8s.io", ("leaderworkersets",), ("list",)),
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs",), READ),
    EVENTS_WRITE,
)


def setup_controller(manager: Manager, *, kaiwo: bool = False) -> Controller:
    informers = manager.informers
    dgds = informers.informer(kinds.DGDS)
    shape = GraphController(
        manager.client,
        dgds,
        informers.informer(kinds.DCDS),
        informers.informer(PVCS),
        informers.informer(SERVICEACCOUNTS, field_selector=f"metadata.name={PLANNER_SERVICE_ACCOUNT}"),
        manager.recorder(NAME),
        manager.clock,
        manager.options(DynamoOptions),
        LwsProbe(manager.client, manager.clock),
        informers.informer(kinds.KAIWOCONFIGS) if kaiwo else None,
    )
    builder = Controller.build(NAME).for_(kinds.DGDS).owns(kinds.DCDS).watches(PVCS, _to_dgds(dgds))
    # Four workers by default: graphs are independent; --max-concurrent-reconciles overrides it.
    return builder.workers(4).reconcile(Shaped(shape, manager.clock))


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers dynamographdeployment`` (also part of ``all``)."""
    kaiwo = await manager.client.served(kinds.KAIWOCONFIGS)
    manager.add_controller(setup_controller(manager, kaiwo=kaiwo))

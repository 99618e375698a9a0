"""The AIMNamespaceConfig controller (registry name ``aimnamespaceconfig``): one reconcile per namespace.

Upstream had the CRD and no controller. Here, per namespace: which config applies
(:func:`~aiplane.controllers.platform.effective_namespace_config`), each config's status (Applied,
SecretsResolved, GatewayResolved; Warning Events ``SecretNotFound``/``SecretKeyNotFound``/
``GatewayNotFound`` when a problem is new), and the HTTPRoutes of the effective config's gateway,
owned by the workloads (so they go with them) and removed when the gateway is unset. The pods
themselves are decorated by the workload controllers (:mod:`aiplane.controllers.platform`).

Observe from caches (Secrets as keys only) → decide in :mod:`.decide` → write the HTTPRoutes that differ
(act) → write each config's status that changed and its Warnings (report).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers.aimns.decide import LABEL_ROUTE, Decision, Observed, decide, route_needs_update
from aiplane.kube.children import ChildWriter
from aiplane.kube.client import KubeClient
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import WARNING
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, WRITE_CHILD, Permission
from aiplane.kube.resources import GATEWAYS, HTTPROUTES, SECRETS, Resource
from aiplane.kube.shape import Shaped
from aiplane.kube.status import StatusWriter

__all__ = ["COMPONENT", "FIELD_MANAGER", "AIMNamespaceReconciler", "setup", "setup_controller"]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "aimnamespaceconfig"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)

log = structlog.get_logger("aiplane.aimns")
Obj = dict[str, Any]


def _namespace_request(obj: Obj) -> Iterable[Request]:
    namespace = objects.namespace(obj)
    return [Request(None, namespace)] if namespace else []


class AIMNamespaceReconciler:
    """One namespace: its HTTPRoutes, then its configs' status (a :class:`~aiplane.kube.shape.Shape`)."""

    def __init__(
        self,
        manager: Manager,
        *,
        gateways: Informer | None,
        routes: Informer | None,
        dgds: Informer | None,
        modelinfers: Informer | None,
    ) -> None:
        self.client: KubeClient = manager.client
        self.configs = manager.informers.informer(kinds.AIMNAMESPACECONFIGS)
        self.secrets = manager.informers.informer(SECRETS)
        self.gateways = gateways
        self.routes = routes
        self.dgds = dgds
        self.modelinfers = modelinfers
        self.status = StatusWriter(self.client, kinds.AIMNAMESPACECONFIGS, FIELD_MANAGER)
        #: HTTPRoutes: created, replaced when they differ, deleted when no longer wanted.
        self.writer = ChildWriter(self.client, FIELD_MANAGER)
        self.recorder = manager.recorder(NAME)

    async def observe(self, request: Request) -> Observed | None:
        namespace = request.name
        return Observed(
            namespace=namespace,
            configs=tuple(c for c in self.configs.list(namespace) if not objects.is_deleting(c)),
            secret_keys={
                objects.name(s): frozenset(s.get("data") or {}) | frozenset(s.get("stringData") or {})
                for s in self.secrets.list(namespace)
            },
            gateways=(
                frozenset(objects.key(g) for g in self.gateways.list()) if self.gateways is not None else None
            ),
            routes_served=self.routes is not None,
            live_routes={objects.name(r): r for r in self.routes.list(namespace)}
            if self.routes is not None
            else {},
            dgds=tuple(self.dgds.list(namespace)) if self.dgds is not None else (),
            modelinfers=tuple(self.modelinfers.list(namespace)) if self.modelinfers is not None else (),
        )

    def decide(self, observed: Observed, now: datetime) -> Decision:
        return decide(observed, now)

    async def act(self, observed: Observed, decision: Decision) -> None:
        for change in decision.ensure:
            await self.writer.ensure(
                HTTPROUTES, change.live, change.desired, differs=route_needs_update, updated=_with_version_of
            )
        for stale in decision.delete:
            await self.writer.delete(HTTPROUTES, stale)

    async def report(self, observed: Observed, decision: Decision) -> Result | None:
        for config, wanted in decision.configs:
            if wanted.changed and await self.status.write(config, wanted.status) is not None:
                # A problem's Warning fires once: with the status write that first records it.
                for problem in wanted.events:
                    self.recorder.emit(config, WARNING, problem.reason, problem.message)
        return None


def _with_version_of(found: Mapping[str, Any], route: Mapping[str, Any]) -> dict[str, Any]:
    """``route`` as a replacement of ``found`` (guarded by its resourceVersion)."""
    return {**route, "metadata": {**route["metadata"], "resourceVersion": objects.resource_version(found)}}


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("config.kaiwo.silogen.ai", ("aimnamespaceconfigs",), READ),
    Permission("config.kaiwo.silogen.ai", ("aimnamespaceconfigs/status",), ("patch",)),
    Permission("config.kaiwo.silogen.ai", ("aimnamespaceconfigs/finalizers",), ("update",)),
    # Which secret keys exist (names and keys only; values never leave the cluster).
    Permission("", ("secrets",), READ),
    Permission("gateway.networking.k8s.io", ("gateways",), READ),
    Permission("gateway.networking.k8s.io", ("httproutes",), WRITE_CHILD),
    Permission("nvidia.com", ("dynamographdeployments",), READ),
    Permission("workload.volcano.sh", ("modelinfers",), READ),
    EVENTS_WRITE,
)


def setup_controller(
    manager: Manager, *, gateway_api: bool = True, dgds: bool = True, modelinfers: bool = True
) -> Controller:
    informers = manager.informers
    optional: dict[str, tuple[Resource, str | None] | None] = {
        "gateways": (GATEWAYS, None) if gateway_api else None,
        "routes": (HTTPROUTES, LABEL_ROUTE) if gateway_api else None,
        "dgds": (kinds.DGDS, None) if dgds else None,
        "modelinfers": (kinds.MODELINFERS, None) if modelinfers else None,
    }
    got = {k: informers.informer(v[0], label_selector=v[1]) if v else None for k, v in optional.items()}
    reconciler = AIMNamespaceReconciler(manager, **got)
    # Every event, a config's own included, arrives as its namespace's request: the work queue
    # never runs two reconciles of one key at once, so namespaces reconcile in parallel safely.
    builder = (
        Controller.build(NAME)
        .for_(kinds.AIMNAMESPACECONFIGS, map_fn=_namespace_request)
        .watches(SECRETS, _namespace_request)
    )
    if gateway_api:
        configs = reconciler.configs

        def every_namespace(_: Obj) -> Iterable[Request]:
            return sorted({Request(None, objects.namespace(c)) for c in configs.list()}, key=str)

        builder = builder.watches(GATEWAYS, every_namespace).watches(
            HTTPROUTES, _namespace_request, label_selector=LABEL_ROUTE
        )
    for flag, res in ((dgds, kinds.DGDS), (modelinfers, kinds.MODELINFERS)):
        if flag:
            builder = builder.watches(res, _namespace_request)
    return builder.reconcile(Shaped(reconciler, manager.clock))


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers aimnamespaceconfig`` (also part of ``all``)."""
    client = manager.client
    gateway_api = await client.served(GATEWAYS) and await client.served(HTTPROUTES)
    if not gateway_api:
        log.warning("the Gateway API is not served: AIMNamespaceConfig gateways get no HTTPRoutes")
    manager.add_controller(
        setup_controller(
            manager,
            gateway_api=gateway_api,
            dgds=await client.served(kinds.DGDS),
            modelinfers=await client.served(kinds.MODELINFERS),
        )
    )

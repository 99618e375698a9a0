"""The AIMNamespaceConfig controller (registry name ``aimnamespaceconfig``): one reconcile per namespace.

Upstream had the CRD and no controller. Here, per namespace: which config applies
(:func:`~aiplane.controllers.platform.effective_namespace_config`), each config's status (Applied,
SecretsResolved, GatewayResolved; Warning Events ``SecretNotFound``/``SecretKeyNotFound``/
``GatewayNotFound`` when a problem is new), and the HTTPRoutes of the effective config's gateway,
owned by the workloads (so they go with them) and removed when the gateway is unset. The pods
themselves are decorated by the workload controllers (:mod:`aiplane.controllers.platform`).

Observe from caches (Secrets as keys only) → decide in :mod:`.logic` → write only what differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers.aimns.logic import LABEL_ROUTE, decide_config, desired_routes, route_needs_update
from aiplane.controllers.platform import effective_namespace_config
from aiplane.kube.children import ChildWriter
from aiplane.kube.client import KubeClient
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import WARNING, EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, WRITE_CHILD, Permission
from aiplane.kube.resources import GATEWAYS, HTTPROUTES, SECRETS, Resource
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
        self.clock = manager.clock
        self.configs = manager.informers.informer(kinds.AIMNAMESPACECONFIGS)
        self.secrets = manager.informers.informer(SECRETS)
        self.gateways = gateways
        self.routes = routes
        self.dgds = dgds
        self.modelinfers = modelinfers
        self.status = StatusWriter(self.client, kinds.AIMNAMESPACECONFIGS, FIELD_MANAGER)
        #: HTTPRoutes: created, replaced when they differ, deleted when no longer wanted.
        self.writer = ChildWriter(self.client, FIELD_MANAGER)
        self.recorder = EventRecorder(self.client, COMPONENT)

    async def __call__(self, request: Request) -> Result | None:
        namespace = request.name
        configs = [c for c in self.configs.list(namespace) if not objects.is_deleting(c)]
        route_names = await self._sync_routes(namespace, configs)
        secret_keys = {
            objects.name(s): frozenset(s.get("data") or {}) | frozenset(s.get("stringData") or {})
            for s in self.secrets.list(namespace)
        }
        gateways = (
            frozenset(objects.key(g) for g in self.gateways.list()) if self.gateways is not None else None
        )
        now = self.clock.now()
        for config in configs:
            decision = decide_config(config, configs, secret_keys, gateways, route_names, now)
            if decision.changed and await self.status.write(config, decision.status) is not None:
                for problem in decision.events:
                    self.recorder.emit(config, WARNING, problem.reason, problem.message)
        return None

    async def _sync_routes(self, namespace: str, configs: list[Obj]) -> list[str]:
        """Create, update and delete our HTTPRoutes in the namespace; the names that should exist."""
        if self.routes is None:
            return []
        chosen, _ = effective_namespace_config(configs)
        desired = desired_routes(
            chosen,
            self.dgds.list(namespace) if self.dgds is not None else [],
            self.modelinfers.list(namespace) if self.modelinfers is not None else [],
        )
        live = {objects.name(r): r for r in self.routes.list(namespace)}
        for route in desired:
            name = objects.name(route)
            found = live.pop(name, None)
            await self.writer.ensure(
                HTTPROUTES, found, route, differs=route_needs_update, updated=_with_version_of, owner=None
            )
        for stale in live.values():
            if objects.labels(stale).get(LABEL_ROUTE) == "true" and not objects.is_deleting(stale):
                await self.writer.delete(HTTPROUTES, stale)
        return [objects.name(r) for r in desired]


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
    configs = kinds.AIMNAMESPACECONFIGS
    builder = Controller.build(NAME).for_(configs).watches(SECRETS, _namespace_request)
    if gateway_api:
        gateways = reconciler.gateways
        assert gateways is not None

        def every_namespace(_: Obj) -> Iterable[Request]:
            return sorted({Request(None, objects.namespace(c)) for c in reconciler.configs.list()}, key=str)

        builder = builder.watches(GATEWAYS, every_namespace).watches(
            HTTPROUTES, _namespace_request, label_selector=LABEL_ROUTE
        )
    for flag, res in ((dgds, kinds.DGDS), (modelinfers, kinds.MODELINFERS)):
        if flag:
            builder = builder.watches(res, _namespace_request)
    # One worker: a config's own events arrive keyed by the config, the rest by namespace; both
    # reconcile the namespace, and one worker keeps two reconciles of one namespace from racing.
    return builder.workers(1, fixed="namespace reconciles arrive under two keys").reconcile(
        _by_namespace(reconciler)
    )


def _by_namespace(reconciler: AIMNamespaceReconciler) -> Any:
    """The primary source maps a config to its own key; every request here is a namespace."""

    async def reconcile(request: Request) -> Result | None:
        if request.namespace:  # a config's own event: reconcile its namespace
            return await reconciler(Request(None, request.namespace))
        return await reconciler(request)

    return reconcile


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

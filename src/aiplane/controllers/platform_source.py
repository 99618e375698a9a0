"""Where a workload controller reads the platform configuration from: shared informers, never the API.

:class:`PlatformSource` turns the informer caches (the ``kaiwo`` KaiwoConfig, AIMNamespaceConfigs,
Secrets — keys only, the informer drops values — and Nodes' allocatable resource names) into the
:class:`~aiplane.controllers.platform.Platform` of a namespace. :func:`watch_platform` adds the
watches that re-queue a controller's workloads when any of those change, so a config edit reaches
them through their own reconcile and rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from aiplane.api import kinds
from aiplane.api.config import KAIWO_CONFIG_NAME, AIMNamespaceConfigSpec, KaiwoConfigSpec
from aiplane.apimachinery import objects
from aiplane.controllers.platform import Platform, effective_namespace_config
from aiplane.kube.controller import ControllerBuilder, Request, generation_changed
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import READ, Permission
from aiplane.kube.resources import CLUSTERQUEUES, NODES, SECRETS, WORKLOADS

__all__ = [
    "PlatformSource",
    "advertised_resources",
    "platform_source",
    "watch_platform",
]

Obj = dict[str, Any]


def advertised_resources(nodes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Resource names some node has in ``status.allocatable`` with a non-zero amount."""
    out: set[str] = set()
    for node in nodes:
        allocatable = objects.status(node).get("allocatable")
        if isinstance(allocatable, Mapping):
            out.update(str(k) for k, v in allocatable.items() if str(v) not in ("0", "", "0m"))
    return frozenset(out)


@dataclass(frozen=True)
class PlatformSource:
    """The informers the platform is read from (None: that API is not served; it then never applies)."""

    kaiwo: Informer | None
    namespace_configs: Informer | None
    secrets: Informer | None
    nodes: Informer | None
    #: Kueue's Workloads and ClusterQueues (None: Kueue is not served; nothing is queued).
    workloads: Informer | None = None
    cluster_queues: Informer | None = None

    def kaiwo_spec(self) -> KaiwoConfigSpec | None:
        obj = self.kaiwo.get(KAIWO_CONFIG_NAME) if self.kaiwo is not None else None
        if obj is None or objects.is_deleting(obj):
            return None
        try:
            return KaiwoConfigSpec.model_validate(objects.spec(obj))
        except ValidationError:
            return None  # the KaiwoConfig controller reports it; workloads keep running unconfigured

    def namespace_config(self, namespace: str) -> AIMNamespaceConfigSpec | None:
        if self.namespace_configs is None:
            return None
        chosen, _ = effective_namespace_config(self.namespace_configs.list(namespace))
        if chosen is None:
            return None
        try:
            return AIMNamespaceConfigSpec.model_validate(objects.spec(chosen))
        except ValidationError:
            return None

    def secret_keys(self, namespace: str) -> dict[str, frozenset[str]]:
        if self.secrets is None:
            return {}
        return {
            objects.name(s): frozenset(s.get("data") or {}) | frozenset(s.get("stringData") or {})
            for s in self.secrets.list(namespace)
        }

    def platform(self, namespace: str) -> Platform:
        return Platform(
            kaiwo=self.kaiwo_spec(),
            namespace_config=self.namespace_config(namespace),
            advertised_resources=advertised_resources(self.nodes.list())
            if self.nodes is not None
            else frozenset(),
            secret_keys=self.secret_keys(namespace),
            kueue_served=self.workloads is not None,
            cluster_queues=frozenset(objects.name(q) for q in self.cluster_queues.list())
            if self.cluster_queues is not None
            else frozenset(),
        )


#: What reading the platform configuration needs; the controllers that use it include these.
PERMISSIONS: Final = (
    Permission("config.kaiwo.silogen.ai", ("aimnamespaceconfigs", "kaiwoconfigs"), READ),
    # Image pull secrets and credentials named by the configs (keys only reach the pod specs).
    Permission("", ("nodes", "secrets"), READ),
    # Kueue: is the default ClusterQueue there (then workloads are queued), and why a queued one waits.
    Permission("kueue.x-k8s.io", ("workloads", "clusterqueues"), READ),
)


async def platform_source(manager: Manager) -> PlatformSource:
    """The shared informers, for the config APIs the cluster serves."""
    informers = manager.informers
    kaiwo_res, ns_res = kinds.KAIWOCONFIGS, kinds.AIMNAMESPACECONFIGS
    kaiwo = informers.informer(kaiwo_res) if await manager.client.served(kaiwo_res) else None
    nscfg = informers.informer(ns_res) if await manager.client.served(ns_res) else None
    kueue = await manager.client.served(WORKLOADS) and await manager.client.served(CLUSTERQUEUES)
    workloads = informers.informer(WORKLOADS) if kueue else None
    queues = informers.informer(CLUSTERQUEUES) if kueue else None
    return PlatformSource(
        kaiwo, nscfg, informers.informer(SECRETS), informers.informer(NODES), workloads, queues
    )


def _allocatable_names_changed(old: Obj, new: Obj) -> bool:
    return advertised_resources([old]) != advertised_resources([new])


def _data_keys_changed(old: Obj, new: Obj) -> bool:
    return set(old.get("data") or {}) != set(new.get("data") or {})


def watch_platform(
    builder: ControllerBuilder,
    source: PlatformSource,
    all_workloads: Callable[[], Iterable[Request]],
    in_namespace: Callable[[str], Iterable[Request]],
) -> ControllerBuilder:
    """Re-queue the workloads a platform change can affect: all of them for the KaiwoConfig and Node
    resource names, those of the namespace for its AIMNamespaceConfigs and Secrets (keys only)."""

    def every(_: Obj) -> Iterable[Request]:
        return list(all_workloads())

    def namespaced(obj: Obj) -> Iterable[Request]:
        return list(in_namespace(objects.namespace(obj)))

    if source.kaiwo is not None:
        builder = builder.watches(source.kaiwo.resource, every, predicates=(generation_changed,))
    if source.namespace_configs is not None:
        builder = builder.watches(
            source.namespace_configs.resource, namespaced, predicates=(generation_changed,)
        )
    if source.secrets is not None:
        builder = builder.watches(SECRETS, namespaced, predicates=(_data_keys_changed,))
    if source.nodes is not None:
        builder = builder.watches(NODES, every, predicates=(_allocatable_names_changed,))
    return builder

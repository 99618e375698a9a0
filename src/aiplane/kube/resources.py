"""The resources controllers talk about, and how their URLs are built.

A controller names a kind once (``PODS``, ``resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")``)
and the client builds kube-apiserver paths from it; no discovery round trip is needed for the kinds we
know, which is every kind aiplane reads or writes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        """``plural.group`` as kube and kubectl name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


def _r(group: str, version: str, plural: str, kind: str, namespaced: bool = True) -> Resource:
    return Resource(group, version, plural, kind, namespaced)


NAMESPACES = _r("", "v1", "namespaces", "Namespace", False)
NODES = _r("", "v1", "nodes", "Node", False)
PODS = _r("", "v1", "pods", "Pod")
SERVICES = _r("", "v1", "services", "Service")
CONFIGMAPS = _r("", "v1", "configmaps", "ConfigMap")
SECRETS = _r("", "v1", "secrets", "Secret")
EVENTS = _r("", "v1", "events", "Event")
EVENTS_V1 = _r("events.k8s.io", "v1", "events", "Event")
SERVICEACCOUNTS = _r("", "v1", "serviceaccounts", "ServiceAccount")
PVCS = _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
STORAGECLASSES = _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
DEPLOYMENTS = _r("apps", "v1", "deployments", "Deployment")
STATEFULSETS = _r("apps", "v1", "statefulsets", "StatefulSet")
DAEMONSETS = _r("apps", "v1", "daemonsets", "DaemonSet")
CONTROLLERREVISIONS = _r("apps", "v1", "controllerrevisions", "ControllerRevision")
JOBS = _r("batch", "v1", "jobs", "Job")
PDBS = _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
LEASES = _r("coordination.k8s.io", "v1", "leases", "Lease")
HPAS = _r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
INGRESSES = _r("networking.k8s.io", "v1", "ingresses", "Ingress")
CRDS = _r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
PVS = _r("", "v1", "persistentvolumes", "PersistentVolume", False)
STORAGECLASSES = _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)

PODGROUPS = _r("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
#: The scheduler-plugins Coscheduling plugin's PodGroup (kubernetes-sigs/scheduler-plugins).
COSCHEDULING_PODGROUPS = _r("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
RESOURCEFLAVORS = _r("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", False)
CLUSTERQUEUES = _r("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False)
LOCALQUEUES = _r("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue")
#: Kueue's admission units (served as v1beta1 by every Kueue release since v0.14, beside v1beta2).
WORKLOADS = _r("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")
GATEWAYS = _r("gateway.networking.k8s.io", "v1", "gateways", "Gateway")
HTTPROUTES = _r("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute")
VIRTUALSERVICES = _r("networking.istio.io", "v1beta1", "virtualservices", "VirtualService")
LEADERWORKERSETS = _r("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
DEVICECONFIGS = _r("amd.com", "v1alpha1", "deviceconfigs", "DeviceConfig")

_BUILTIN = (
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    CONFIGMAPS,
    SECRETS,
    EVENTS,
    EVENTS_V1,
    SERVICEACCOUNTS,
    PVCS,
    DEPLOYMENTS,
    STATEFULSETS,
    DAEMONSETS,
    CONTROLLERREVISIONS,
    JOBS,
    PDBS,
    LEASES,
    HPAS,
    INGRESSES,
    CRDS,
    PVS,
    STORAGECLASSES,
    PODGROUPS,
    COSCHEDULING_PODGROUPS,
    RESOURCEFLAVORS,
    CLUSTERQUEUES,
    LOCALQUEUES,
    WORKLOADS,
    GATEWAYS,
    HTTPROUTES,
    VIRTUALSERVICES,
    LEADERWORKERSETS,
    DEVICECONFIGS,
)

_BY_KIND: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in _BUILTIN}


@functools.cache
def _ours() -> None:
    """Add aiplane's own kinds, once, on the first lookup. Imported then, not at the top: the pydantic API
    models cost more to import than the whole runtime, and most importers never look a kind up."""
    from aiplane.api.registry import RESOURCES  # noqa: PLC0415

    for model in RESOURCES:
        info = model.crd
        res = Resource(info.group, info.version, info.plural, info.kind, info.scope == "Namespaced")
        _BY_KIND.setdefault((res.api_version, res.kind), res)


def resource_for(api_version: str, kind: str) -> Resource:
    """The resource serving ``kind`` at ``api_version``; ``KeyError`` for kinds aiplane does not know."""
    _ours()
    return _BY_KIND[(api_version, kind)]


def register(resource: Resource) -> Resource:
    """Make a further kind known (tests, third-party kinds)."""
    _BY_KIND[(resource.api_version, resource.kind)] = resource
    return resource

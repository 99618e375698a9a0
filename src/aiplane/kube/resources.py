"""The resources controllers talk about, and how their URLs are built.

A controller names a kind once (``PODS`` here for a built-in kind, ``aiplane.api.kinds.MODELINFERS`` for
one of ours: each of our kinds is defined there, once) and the client builds kube-apiserver paths from it; no discovery round trip is needed for the kinds we
know, which is every kind aiplane reads or writes.
"""

from __future__ import annotations

import functools

from aiplane.apimachinery.resource import Resource

__all__ = [
    "CLUSTERQUEUES",
    "CONFIGMAPS",
    "CONTROLLERREVISIONS",
    "CRDS",
    "DAEMONSETS",
    "DEPLOYMENTS",
    "DEVICECONFIGS",
    "EVENTS",
    "EVENTS_V1",
    "GATEWAYS",
    "HPAS",
    "HTTPROUTES",
    "INGRESSES",
    "JOBS",
    "LEADERWORKERSETS",
    "LEASES",
    "LOCALQUEUES",
    "NAMESPACES",
    "NODES",
    "PDBS",
    "PODGROUPS",
    "PODS",
    "PVCS",
    "PVS",
    "RESOURCEFLAVORS",
    "SECRETS",
    "SERVICEACCOUNTS",
    "SERVICES",
    "STATEFULSETS",
    "STORAGECLASSES",
    "VIRTUALSERVICES",
    "WORKLOADS",
    "WORKLOADS_V1BETA2",
    "Resource",
    "register",
    "resource_for",
]


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
#: Writes go through Kueue's storage version: v1beta1's CEL rules read ``spec.priorityClassSource``
#: unguarded, so any update of an admitted Workload through v1beta1 is refused when that field is unset.
WORKLOADS_V1BETA2 = _r("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
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
    """Add aiplane's own kinds (``aiplane.api.kinds``, where each is defined once), on the first lookup:
    a runtime that serves none of them (``aiplane run --controllers echo``) loads nothing of ``aiplane.api``."""
    from aiplane.api import kinds  # noqa: PLC0415

    for res in kinds.OURS:
        _BY_KIND.setdefault((res.api_version, res.kind), res)


def resource_for(api_version: str, kind: str) -> Resource:
    """The resource serving ``kind`` at ``api_version``; ``KeyError`` for kinds aiplane does not know."""
    _ours()
    return _BY_KIND[(api_version, kind)]


def register(resource: Resource) -> Resource:
    """Make a further kind known (tests, third-party kinds)."""
    _BY_KIND[(resource.api_version, resource.kind)] = resource
    return resource

"""The kinds the embedded API server serves: built-in ones, and whatever CustomResourceDefinitions add.

A :class:`ResourceType` is one (group, version, resource); objects of all versions of a resource share
storage (keyed by group and plural), as in kube-apiserver, and are served with the apiVersion asked for.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import builtin

# Where a built-in kind's schema lives in the Kubernetes OpenAPI document.
_DEF = {
    ("", "Namespace"): "io.k8s.api.core.v1.Namespace",
    ("", "Node"): "io.k8s.api.core.v1.Node",
    ("", "Pod"): "io.k8s.api.core.v1.Pod",
    ("", "Service"): "io.k8s.api.core.v1.Service",
    ("", "ConfigMap"): "io.k8s.api.core.v1.ConfigMap",
    ("", "Secret"): "io.k8s.api.core.v1.Secret",
    ("", "Event"): "io.k8s.api.core.v1.Event",
    ("", "ServiceAccount"): "io.k8s.api.core.v1.ServiceAccount",
    ("", "PersistentVolumeClaim"): "io.k8s.api.core.v1.PersistentVolumeClaim",
    ("", "Endpoints"): "io.k8s.api.core.v1.Endpoints",
    ("events.k8s.io", "Event"): "io.k8s.api.events.v1.Event",
    ("apps", "Deployment"): "io.k8s.api.apps.v1.Deployment",
    ("apps", "StatefulSet"): "io.k8s.api.apps.v1.StatefulSet",
    ("apps", "DaemonSet"): "io.k8s.api.apps.v1.DaemonSet",
    ("apps", "ReplicaSet"): "io.k8s.api.apps.v1.ReplicaSet",
    ("apps", "ControllerRevision"): "io.k8s.api.apps.v1.ControllerRevision",
    ("batch", "Job"): "io.k8s.api.batch.v1.Job",
    ("batch", "CronJob"): "io.k8s.api.batch.v1.CronJob",
    ("", "ResourceQuota"): "io.k8s.api.core.v1.ResourceQuota",
    ("", "LimitRange"): "io.k8s.api.core.v1.LimitRange",
    ("", "PersistentVolume"): "io.k8s.api.core.v1.PersistentVolume",
    ("scheduling.k8s.io", "PriorityClass"): "io.k8s.api.scheduling.v1.PriorityClass",
    ("storage.k8s.io", "StorageClass"): "io.k8s.api.storage.v1.StorageClass",
    ("policy", "PodDisruptionBudget"): "io.k8s.api.policy.v1.PodDisruptionBudget",
    ("policy", "Eviction"): "io.k8s.api.policy.v1.Eviction",
    ("coordination.k8s.io", "Lease"): "io.k8s.api.coordination.v1.Lease",
    ("autoscaling", "HorizontalPodAutoscaler"): "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    ("networking.k8s.io", "Ingress"): "io.k8s.api.networking.v1.Ingress",
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
    ),
    ("rbac.authorization.k8s.io", "Role"): "io.k8s.api.rbac.v1.Role",
    ("rbac.authorization.k8s.io", "RoleBinding"): "io.k8s.api.rbac.v1.RoleBinding",
    ("rbac.authorization.k8s.io", "ClusterRole"): "io.k8s.api.rbac.v1.ClusterRole",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "io.k8s.api.rbac.v1.ClusterRoleBinding",
}


@dataclass(frozen=True)
class ResourceType:
    """One served (group, version, resource) and everything the server needs to know about it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    #: ``generation`` is maintained (bumped on spec changes); kube does so for most workload kinds.
    has_generation: bool = True
    #: Set for kinds served from a CustomResourceDefinition (its ``metadata.name``).
    crd_name: str | None = None
    #: The CRD's version schema, or ``None`` for a built-in kind (see :meth:`schema`).
    crd_schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: Scale subresource paths (``specReplicasPath`` …) for CRDs; built-ins use spec/status.replicas.
    scale_paths: dict[str, str] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    #: The version objects of this resource are stored in (others are served by rewriting apiVersion).
    storage_version: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def storage_key(self) -> str:
        """Objects of every version of this resource are stored under this key."""
        return f"{self.group}/{self.plural}"

    @property
    def is_custom(self) -> bool:
        return self.crd_name is not None

    def schema(self) -> dict[str, Any] | None:
        """The structural schema objects of this type are pruned, defaulted and validated against."""
        if self.crd_schema is not None:
            return self.crd_schema
        definition = _DEF.get((self.group, self.kind))
        return _builtin_schema(definition) if definition else None

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


@functools.cache
def _builtin_schema(definition: str) -> dict[str, Any]:
    return builtin.structural(definition)


def _b(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    generation: bool = True,
) -> ResourceType:
    return ResourceType(
        group,
        version,
        kind,
        plural,
        namespaced,
        short,
        categories,
        frozenset(sub),
        generation,
        storage_version=version,
    )


_ALL = ("all",)

BUILTINS: tuple[ResourceType, ...] = (
    _b(
        "",
        "v1",
        "Namespace",
        "namespaces",
        namespaced=False,
        short=("ns",),
        sub=("status", "finalize"),
        generation=False,
    ),
    _b("", "v1", "Node", "nodes", namespaced=False, short=("no",), sub=("status",), generation=False),
    _b("", "v1", "Pod", "pods", short=("po",), categories=_ALL, sub=("status", "eviction", "binding")),
    _b("", "v1", "Service", "services", short=("svc",), categories=_ALL, sub=("status",), generation=False),
    _b("", "v1", "ConfigMap", "configmaps", short=("cm",), generation=False),
    _b("", "v1", "Secret", "secrets", generation=False),
    _b("", "v1", "Event", "events", short=("ev",), generation=False),
    _b("", "v1", "ServiceAccount", "serviceaccounts", short=("sa",), sub=("token",), generation=False),
    _b(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        short=("pvc",),
        sub=("status",),
        generation=False,
    ),
    _b("", "v1", "Endpoints", "endpoints", short=("ep",), generation=False),
    _b("events.k8s.io", "v1", "Event", "events", short=("ev",), generation=False),
    _b(
        "apps", "v1", "Deployment", "deployments", short=("deploy",), categories=_ALL, sub=("status", "scale")
    ),
    _b("apps", "v1", "StatefulSet", "statefulsets", short=("sts",), categories=_ALL, sub=("status", "scale")),
    _b("apps", "v1", "DaemonSet", "daemonsets", short=("ds",), categories=_ALL, sub=("status",)),
    _b("apps", "v1", "ReplicaSet", "replicasets", short=("rs",), categories=_ALL, sub=("status", "scale")),
    _b("apps", "v1", "ControllerRevision", "controllerrevisions", generation=False),
    _b("batch", "v1", "Job", "jobs", categories=_ALL, sub=("status",)),
    _b("batch", "v1", "CronJob", "cronjobs", short=("cj",), categories=_ALL, sub=("status",)),
    _b("", "v1", "ResourceQuota", "resourcequotas", short=("quota",), sub=("status",), generation=False),
    _b("", "v1", "LimitRange", "limitranges", short=("limits",), generation=False),
    _b(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        namespaced=False,
        short=("pv",),
        sub=("status",),
        generation=False,
    ),
    _b(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        short=("pc",),
        generation=False,
    ),
    _b(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        namespaced=False,
        short=("sc",),
        generation=False,
    ),
    _b("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short=("pdb",), sub=("status",)),
    _b("coordination.k8s.io", "v1", "Lease", "leases", generation=False),
    _b(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        short=("hpa",),
        categories=_ALL,
        sub=("status",),
    ),
    _b("networking.k8s.io", "v1", "Ingress", "ingresses", short=("ing",), sub=("status",)),
    _b(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short=("crd", "crds"),
        categories=("api-extensions",),
        sub=("status",),
    ),
    _b("rbac.authorization.k8s.io", "v1", "Role", "roles", generation=False),
    _b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", generation=False),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False, generation=False),
    _b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
        generation=False,
    ),
)


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves (one per served version)."""
    spec = crd["spec"]
    names = spec["names"]
    storage = next((v["name"] for v in spec["versions"] if v.get("storage")), spec["versions"][0]["name"])
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                kind=names["kind"],
                plural=names["plural"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames", [])),
                categories=tuple(names.get("categories", [])),
                subresources=frozenset(k for k in ("status", "scale") if k in subresources),
                has_generation=True,
                crd_name=crd["metadata"]["name"],
                crd_schema=(version.get("schema") or {}).get("openAPIV3Schema")
                or {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                scale_paths=subresources.get("scale"),
                printer_columns=tuple(version.get("additionalPrinterColumns", [])),
                storage_version=storage,
            )
        )
    return out


class Registry:
    """Lookup of served resource types by path segments and by kind."""

    def __init__(self) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}
        #: Bumped whenever the served types change (a CRD added, updated or removed); caches key on it.
        self.generation = 0
        for rt in BUILTINS:
            self._add(rt)

    def _add(self, rt: ResourceType) -> None:
        self._by_resource[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.group, rt.version, rt.kind)] = rt

    def add_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """Serve (or re-serve, after an update) the resources of ``crd``."""
        self.remove_crd(crd["metadata"]["name"])
        types = types_from_crd(crd)
        for rt in types:
            self._add(rt)
        self._crd_types[crd["metadata"]["name"]] = types
        self.generation += 1
        return types

    def remove_crd(self, name: str) -> list[ResourceType]:
        types = self._crd_types.pop(name, [])
        for rt in types:
            self._by_resource.pop((rt.group, rt.version, rt.plural), None)
            self._by_kind.pop((rt.group, rt.version, rt.kind), None)
        self.generation += 1
        return types

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_resource.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return self._by_kind.get((group, version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._by_resource.values())

    def groups(self) -> dict[str, list[str]]:
        """Served versions per group, preferred version first (the storage one for CRDs)."""
        out: dict[str, list[str]] = {}
        for rt in self._by_resource.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                if rt.version == rt.storage_version:
                    versions.insert(0, rt.version)
                else:
                    versions.append(rt.version)
        return out

    def versions_of(self, rt: ResourceType) -> list[ResourceType]:
        """All served versions of ``rt``'s resource (they share storage)."""
        return [t for t in self._by_resource.values() if t.storage_key == rt.storage_key]

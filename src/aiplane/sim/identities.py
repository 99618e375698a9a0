"""Act as a ServiceAccount on an embedded cluster: grant it roles, get a client or kubeconfig as it,
and read what it did from the audit log.

What a least-privilege test needs in one place: start ``EmbeddedCluster(authorization_mode="RBAC")``,
``access = grant(cluster, "aiplane-system", "aiplane", manifests)`` with the chart's ServiceAccount,
ClusterRole, Role and bindings (or :func:`cluster_role_for` around a list of rules), run the operator
on ``access.client()`` (in-memory) or ``access.kubeconfig()`` (HTTP, kubectl), then assert on
``access.denied()`` (nothing refused) and ``access.permissions()`` (which permissions were used, every
request counted; ``access.records()`` holds the newest requests in full).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiplane.sim.apiserver import rbac
from aiplane.sim.apiserver.audit import AuditRecord, Permission
from aiplane.sim.apiserver.authn import UserInfo, service_account_user
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster

_RBAC_V1 = f"{rbac.GROUP}/v1"
_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


@dataclass(frozen=True)
class ServiceAccountAccess:
    """A ServiceAccount of ``cluster``, and the ways to act as it."""

    cluster: EmbeddedCluster
    namespace: str
    name: str

    @property
    def user(self) -> UserInfo:
        sa = self.cluster.server.store.get("/serviceaccounts", self.namespace, self.name)
        return service_account_user(self.namespace, self.name, sa["metadata"].get("uid", "") if sa else "")

    def client(self, **kw: Any) -> InMemoryKubeClient:
        """An in-memory client authenticated as the ServiceAccount (authorized and audited)."""
        return InMemoryKubeClient.for_cluster(self.cluster, user=self.user, **kw)

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig with a fresh token of the ServiceAccount (the cluster must be serving)."""
        return self.cluster.service_account_kubeconfig(self.namespace, self.name)

    def write_kubeconfig(self, path: Path) -> Path:
        self.cluster.write_kubeconfig(path, self.kubeconfig())
        return path

    def records(self) -> list[AuditRecord]:
        """The audit records of the ServiceAccount's requests, oldest first."""
        return self.cluster.audit.for_user(self.user.name)

    def permissions(self) -> dict[Permission, int]:
        """Every kind of request it made, counted (complete however many requests there were)."""
        return self.cluster.audit.permissions_of(self.user.name)

    def denied(self) -> list[Permission]:
        """The kinds of request it was refused (403), however long ago."""
        return [key for key in self.permissions() if not key[-1]]


def cluster_role_for(name: str, rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ClusterRole manifest holding ``rules``."""
    return {
        "apiVersion": _RBAC_V1,
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [dict(r) for r in rules],
    }


def _binding_for(role: Mapping[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """A binding of ``role`` to ServiceAccount ``namespace/name``: cluster-wide for a ClusterRole,
    in the Role's namespace for a Role."""
    role_name = role["metadata"]["name"]
    cluster_wide = role["kind"] == "ClusterRole"
    # A ClusterRoleBinding's name carries the ServiceAccount's namespace: same-named accounts of two
    # namespaces must not replace each other's binding.
    meta: dict[str, Any] = {
        "name": f"{role_name}-{namespace}-{name}" if cluster_wide else f"{role_name}-{name}"
    }
    if not cluster_wide:
        meta["namespace"] = role["metadata"].get("namespace", namespace)
    return {
        "apiVersion": _RBAC_V1,
        "kind": "ClusterRoleBinding" if cluster_wide else "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": rbac.GROUP, "kind": role["kind"], "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def apply_objects(cluster: EmbeddedCluster, manifests: Iterable[Mapping[str, Any]]) -> None:
    """Create (or replace) ServiceAccounts, Roles, ClusterRoles and bindings as the admin; other
    kinds are ignored, so a rendered chart can be passed whole."""
    api = cluster.server.api
    for manifest in manifests:
        if manifest.get("kind") not in _KINDS:
            continue
        rt = api.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        namespace = meta.get("namespace", "default") if rt.namespaced else None
        body = {**manifest, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
        try:
            api.create(rt, namespace, body)
        except ApiError as err:
            if err.code != 409:
                raise
            current = api.get(rt, namespace, meta["name"])
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            api.update(rt, namespace, meta["name"], body)


def grant(
    cluster: EmbeddedCluster, namespace: str, name: str, manifests: Iterable[Mapping[str, Any]] = ()
) -> ServiceAccountAccess:
    """ServiceAccount ``namespace/name`` (created if missing, and its namespace) with ``manifests`` applied: Roles and
    ClusterRoles that no binding in ``manifests`` names are bound to it (ClusterRoles cluster-wide,
    Roles in their namespace); bindings are applied as given."""
    docs = [dict(m) for m in manifests]
    bound = {
        (d["roleRef"]["kind"], d["roleRef"]["name"]) for d in docs if d.get("kind", "").endswith("Binding")
    }
    extra = [
        _binding_for(d, namespace, name)
        for d in docs
        if d.get("kind") in ("Role", "ClusterRole") and (d["kind"], d["metadata"]["name"]) not in bound
    ]
    api = cluster.server.api
    if api.store.get("/namespaces", "", namespace) is None:
        namespace_doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        api.create(api.resource("v1", "Namespace"), None, namespace_doc)
    cluster.service_account_token(namespace, name)  # creates the ServiceAccount if missing
    apply_objects(cluster, docs + extra)
    return ServiceAccountAccess(cluster, namespace, name)

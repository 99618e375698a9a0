"""Reading the missing permission back from kube-apiserver's 403 messages (responsewriters.forbiddenMessage)."""

from __future__ import annotations

from aiplane.kube.client import ApiError
from aiplane.kube.forbidden import MissingPermission, ReportLimiter, missing_permission

SA = "system:serviceaccount:aiplane-system:aiplane"


def test_a_namespaced_resource_a_cluster_scoped_subresource_and_a_path() -> None:
    namespaced = ApiError(
        403,
        "Forbidden",
        f'pods "p" is forbidden: User "{SA}" cannot create resource "pods/eviction" in API group "" '
        'in the namespace "team-a"',
    )
    assert missing_permission(namespaced) == MissingPermission(SA, "create", "", "pods/eviction", "team-a")
    assert (
        str(missing_permission(namespaced))
        == 'create on "pods/eviction" in API group "" in namespace "team-a"'
    )
    cluster = ApiError(
        403,
        "Forbidden",
        f'partitioningprofiles.infrastructure.silogen.ai "p" is forbidden: User "{SA}" cannot patch resource '
        '"partitioningprofiles/status" in API group "infrastructure.silogen.ai" at the cluster scope',
    )
    found = missing_permission(cluster)
    assert found is not None and found.namespace == "" and found.resource == "partitioningprofiles/status"
    assert found.rule() == (
        'apiGroups: ["infrastructure.silogen.ai"], resources: ["partitioningprofiles/status"], verbs: ["patch"]'
    )
    path = ApiError(403, "Forbidden", f'forbidden: User "{SA}" cannot get path "/metrics"')
    assert missing_permission(path) == MissingPermission(SA, "get", path="/metrics")


def test_other_errors_and_foreign_403s() -> None:
    assert missing_permission(ApiError(409, "Conflict", "x")) is None
    assert missing_permission(ValueError("x")) is None
    webhook = ApiError(
        403, "Forbidden", "denied by policy", body={"details": {"group": "apps", "kind": "deployments"}}
    )
    assert missing_permission(webhook) == MissingPermission("", "?", "apps", "deployments")


def test_reports_once_per_interval_per_key() -> None:
    now = [0.0]
    limiter = ReportLimiter(interval=60, clock=lambda: now[0])
    assert limiter.allow("a") and not limiter.allow("a") and limiter.allow("b")
    now[0] = 59.9
    assert not limiter.allow("a")
    now[0] = 60.0
    assert limiter.allow("a")

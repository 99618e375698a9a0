"""RBAC conformance of the embedded API server: allow/deny decided as kube-apiserver's RBAC authorizer
decides (plugin/pkg/auth/authorizer/rbac), with its exact 403 ``Status``; tokens; the audit log.

Requests go through ``InMemoryKubeClient`` as a ServiceAccount, which the server authorizes and audits
exactly as it does over HTTP (the HTTP side and kubectl are in tests/integration/test_sim_rbac.py).
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.kube.client import ApiError
from aiplane.sim.apiserver import authn, rbac
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.identities import cluster_role_for, grant

NS, OTHER, SA = "team-a", "team-b", "runner"
USER = f"system:serviceaccount:{NS}:{SA}"
RBAC_V1 = "rbac.authorization.k8s.io/v1"
PODS = ["pods"]


def role(name: str, rules: list[dict[str, Any]], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_V1,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": rules,
    }


def role_binding(
    name: str, kind: str, ref: str, subjects: list[dict[str, Any]], namespace: str = NS
) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_V1,
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": rbac.GROUP, "kind": kind, "name": ref},
        "subjects": subjects,
    }


def rule(
    verbs: list[str], resources: list[str], groups: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    return {"apiGroups": [""] if groups is None else groups, "resources": resources, "verbs": verbs, **extra}


class Calls:
    """The verbs on raw paths (what these tests are about: the URL a request is authorized by)."""

    def __init__(self, client: InMemoryKubeClient) -> None:
        self.client = client

    async def get(self, path: str) -> dict[str, Any]:
        return await self.client.request("GET", path)

    async def list(self, path: str, field_selector: str | None = None) -> dict[str, Any]:
        return await self.client.request(
            "GET", path, query={"fieldSelector": field_selector} if field_selector else None
        )

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.client.request("POST", path, body=body)

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.client.request(
            "PATCH", path, body=body, content_type="application/merge-patch+json"
        )

    async def delete(self, path: str) -> dict[str, Any]:
        return await self.client.request("DELETE", path)


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    sim = EmbeddedCluster(install_crds=False, authorization_mode="RBAC")
    client = InMemoryKubeClient.for_cluster(sim)
    admin = Calls(client)
    for ns in (NS, OTHER):
        await admin.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        for pod in ("web", "db"):
            await admin.create(
                f"/api/v1/namespaces/{ns}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            )
    yield sim
    await client.close()


async def refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await call
    assert caught.value.status == 403
    return caught.value


async def test_nothing_bound_is_kubes_exact_403(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA).client())
    err = await refused(sa.list(f"/api/v1/namespaces/{NS}/pods"))
    assert err.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{USER}" cannot list resource "pods" in API group "" in the namespace "{NS}"',
        "reason": "Forbidden",
        "details": {"kind": "pods"},
        "code": 403,
    }
    named = await refused(sa.get(f"/apis/apps/v1/namespaces/{NS}/deployments/web"))
    assert named.message == (
        f'deployments.apps "web" is forbidden: User "{USER}" cannot get resource "deployments" '
        f'in API group "apps" in the namespace "{NS}"'
    )
    assert named.body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    cluster_scope = await refused(sa.list("/api/v1/nodes"))
    assert cluster_scope.message == (
        f'nodes is forbidden: User "{USER}" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    # The URL is authorized before anything is looked up: an unknown resource is a 403, not a 404.
    unknown = await refused(sa.list(f"/apis/example.com/v1/namespaces/{NS}/widgets"))
    assert 'cannot list resource "widgets" in API group "example.com"' in unknown.message


async def test_a_role_grants_in_its_namespace_only(cluster: EmbeddedCluster) -> None:
    access = grant(cluster, NS, SA, [role("reader", [rule(["get", "list", "watch"], PODS)])])
    sa = Calls(access.client())
    assert len((await sa.list(f"/api/v1/namespaces/{NS}/pods"))["items"]) == 2
    await sa.get(f"/api/v1/namespaces/{NS}/pods/web")
    await refused(sa.list(f"/api/v1/namespaces/{OTHER}/pods"))
    all_ns = await refused(sa.list("/api/v1/pods"))
    assert all_ns.message.endswith('cannot list resource "pods" in API group "" at the cluster scope')
    await refused(sa.delete(f"/api/v1/namespaces/{NS}/pods/web"))


async def test_a_clusterrole_bound_by_a_rolebinding_is_namespaced(cluster: EmbeddedCluster) -> None:
    reader = cluster_role_for("pod-reader", [rule(["list"], PODS)])
    binding = role_binding(
        "read", "ClusterRole", "pod-reader", [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]
    )
    sa = Calls(grant(cluster, NS, SA, [reader, binding]).client())
    await sa.list(f"/api/v1/namespaces/{NS}/pods")
    await refused(sa.list(f"/api/v1/namespaces/{OTHER}/pods"))
    await refused(sa.list("/api/v1/pods"))


async def test_a_clusterrole_bound_cluster_wide_grants_everywhere(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA, [cluster_role_for("pod-reader", [rule(["list"], PODS)])]).client())
    for path in (f"/api/v1/namespaces/{NS}/pods", f"/api/v1/namespaces/{OTHER}/pods", "/api/v1/pods"):
        await sa.list(path)


async def test_resource_names_limit_get_but_not_list_or_create(cluster: EmbeddedCluster) -> None:
    sa = Calls(
        grant(
            cluster,
            NS,
            SA,
            [role("one", [rule(["get", "list", "create", "delete"], PODS, resourceNames=["web"])])],
        ).client()
    )
    await sa.get(f"/api/v1/namespaces/{NS}/pods/web")
    other = await refused(sa.get(f"/api/v1/namespaces/{NS}/pods/db"))
    assert other.message == (
        f'pods "db" is forbidden: User "{USER}" cannot get resource "pods" in API group "" in the namespace "{NS}"'
    )
    await refused(sa.list(f"/api/v1/namespaces/{NS}/pods"))
    # kube's RequestInfo takes the name of a list from an exact metadata.name field selector.
    listed = await sa.list(f"/api/v1/namespaces/{NS}/pods", field_selector="metadata.name=web")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    created = await refused(sa.create(f"/api/v1/namespaces/{NS}/pods", pod))
    assert 'cannot create resource "pods"' in created.message


async def test_subresources_need_their_own_rule(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA, [role("pods", [rule(["*"], PODS)])]).client())
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web", "namespace": NS}}
    err = await refused(sa.create(f"/api/v1/namespaces/{NS}/pods/web/eviction", eviction))
    assert err.message == (
        f'pods "web" is forbidden: User "{USER}" cannot create resource "pods/eviction" in API group "" '
        f'in the namespace "{NS}"'
    )
    await refused(sa.patch(f"/api/v1/namespaces/{NS}/pods/web/status", {"status": {"phase": "Running"}}))
    grant(
        cluster,
        NS,
        SA,
        [
            role("evict", [rule(["create"], ["pods/eviction"])]),
            role("status", [rule(["patch"], ["*/status"], ["*"])]),
        ],
    )
    await sa.create(f"/api/v1/namespaces/{NS}/pods/web/eviction", eviction)
    await sa.patch(f"/api/v1/namespaces/{NS}/pods/db/status", {"status": {"message": "x"}})
    await refused(sa.patch(f"/api/v1/namespaces/{NS}/pods/db/binding", {}))


async def test_wildcards_and_api_groups(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA, [role("core", [rule(["*"], ["*"])])]).client())
    await sa.list(f"/api/v1/namespaces/{NS}/pods")
    await sa.list(f"/api/v1/namespaces/{NS}/configmaps")
    apps = await refused(sa.list(f"/apis/apps/v1/namespaces/{NS}/deployments"))
    assert 'in API group "apps"' in apps.message
    grant(cluster, NS, SA, [role("any", [rule(["list"], ["deployments"], ["*"])])])
    await sa.list(f"/apis/apps/v1/namespaces/{NS}/deployments")
    await refused(sa.list(f"/apis/apps/v1/namespaces/{NS}/replicasets"))


async def test_groups_users_and_defaulted_service_account_namespaces(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA).client())
    subjects_that_apply = [
        {"kind": "Group", "name": f"system:serviceaccounts:{NS}"},
        {"kind": "Group", "name": "system:serviceaccounts"},
        {"kind": "Group", "name": "system:authenticated"},
        {"kind": "User", "name": USER},
        {"kind": "ServiceAccount", "name": SA},  # no namespace: the binding's
    ]
    reader = role("reader", [rule(["list"], PODS)])
    for i, subject in enumerate(subjects_that_apply):
        binding = role_binding(f"b{i}", "Role", "reader", [subject])
        grant(cluster, NS, "someone-else", [reader, binding])
        await sa.list(f"/api/v1/namespaces/{NS}/pods")
        cluster.server.api.delete(cluster.server.api.resource(RBAC_V1, "RoleBinding"), NS, f"b{i}")
        await refused(sa.list(f"/api/v1/namespaces/{NS}/pods"))
    for subject in (
        {"kind": "Group", "name": f"system:serviceaccounts:{OTHER}"},
        {"kind": "ServiceAccount", "name": SA, "namespace": OTHER},
        {"kind": "User", "name": SA},
    ):
        grant(cluster, NS, "someone-else", [reader, role_binding("no", "Role", "reader", [subject])])
        await refused(sa.list(f"/api/v1/namespaces/{NS}/pods"))


async def test_a_missing_role_is_named_in_the_denial(cluster: EmbeddedCluster) -> None:
    binding = role_binding("dangling", "Role", "missing", [{"kind": "ServiceAccount", "name": SA}])
    sa = Calls(grant(cluster, NS, SA, [binding]).client())
    err = await refused(sa.list(f"/api/v1/namespaces/{NS}/pods"))
    assert err.message.endswith(
        f'in the namespace "{NS}": RBAC: role.rbac.authorization.k8s.io "missing" not found'
    )


async def test_the_admin_is_in_system_masters_and_anonymous_is_nobody(cluster: EmbeddedCluster) -> None:
    assert (
        authn.authenticate(
            f"Bearer {cluster.server.token}", cluster.server.token, cluster.server.tokens, cluster.server.api
        )
        == authn.ADMIN
    )
    admin = Calls(InMemoryKubeClient.for_cluster(cluster, user=authn.ADMIN))
    await admin.list("/api/v1/pods")
    await admin.delete(f"/api/v1/namespaces/{NS}/pods/db")
    anonymous = Calls(InMemoryKubeClient.for_cluster(cluster, user=authn.ANONYMOUS))
    err = await refused(anonymous.list("/api/v1/namespaces"))
    assert (
        err.message
        == 'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope'
    )


async def test_self_subject_access_review_answers_as_the_authorizer(cluster: EmbeddedCluster) -> None:
    sa = Calls(grant(cluster, NS, SA, [role("reader", [rule(["list"], PODS)])]).client())

    async def review(**attrs: str) -> dict[str, Any]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        return (await sa.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body))["status"]

    allowed = await review(verb="list", resource="pods", namespace=NS)
    assert allowed == {
        "allowed": True,
        "reason": f'RBAC: allowed by RoleBinding "reader-{SA}/{NS}" of Role "reader" to ServiceAccount "{SA}/{NS}"',
    }
    assert await review(verb="delete", resource="pods", namespace=NS) == {"allowed": False}
    with pytest.raises(ApiError) as invalid:
        await sa.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"spec": {}})
    assert invalid.value.status == 422
    assert (
        "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        in invalid.value.message
    )


async def test_tokens_authenticate_until_expiry_or_deletion(cluster: EmbeddedCluster) -> None:
    server = cluster.server
    token = cluster.service_account_token(NS, SA)
    user = authn.authenticate(f"Bearer {token}", server.token, server.tokens, server.api)
    assert user.name == USER
    assert user.groups == ("system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated")
    with pytest.raises(Exception) as forged:
        authn.authenticate(f"Bearer {token[:-2]}xx", server.token, server.tokens, server.api)
    assert getattr(forged.value, "code", None) == 401
    other = EmbeddedCluster(install_crds=False)
    assert other.server.tokens.verify(token, other.server.api) is None  # another cluster's key
    real_clock = server.api.clock
    server.api.clock = lambda: real_clock() + datetime.timedelta(hours=2)
    assert server.tokens.verify(token, server.api) is None
    server.api.clock = real_clock
    admin = Calls(InMemoryKubeClient.for_cluster(cluster))
    minted = await admin.create(
        f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token", {"spec": {"expirationSeconds": 900}}
    )
    assert minted["kind"] == "TokenRequest"
    assert minted["spec"]["audiences"] == [authn.AUDIENCE]
    assert server.tokens.verify(minted["status"]["token"], server.api) == user
    vault = await admin.create(
        f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token", {"spec": {"audiences": ["vault"]}}
    )
    assert server.tokens.verify(vault["status"]["token"], server.api) is None  # not meant for the API server
    with pytest.raises(ApiError) as short:
        await admin.create(
            f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token", {"spec": {"expirationSeconds": 60}}
        )
    assert short.value.message == (
        f'TokenRequest.authentication.k8s.io "{SA}" is invalid: spec.expirationSeconds: Invalid value: 60: '
        "may not specify a duration less than 10 minutes"
    )
    await admin.delete(f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}")
    assert server.tokens.verify(token, server.api) is None


async def test_the_audit_log_records_each_request_of_a_user(cluster: EmbeddedCluster, tmp_path: Any) -> None:
    access = grant(cluster, NS, SA, [role("reader", [rule(["get"], PODS)])])
    sa = Calls(access.client())
    await sa.get(f"/api/v1/namespaces/{NS}/pods/web")
    await refused(sa.patch(f"/api/v1/namespaces/{NS}/pods/web/status", {"status": {}}))
    with pytest.raises(ApiError):
        await sa.get(f"/api/v1/namespaces/{NS}/pods/gone")
    got, patched, missing = access.records()
    assert (got.verb, got.resource, got.subresource, got.namespace, got.name, got.code, got.allowed) == (
        "get", "pods", "", NS, "web", 200, True,
    )  # fmt: skip
    assert (patched.verb, patched.subresource, patched.code, patched.allowed) == (
        "patch",
        "status",
        403,
        False,
    )
    assert (missing.code, missing.allowed) == (404, True)
    assert access.denied() == [(USER, "patch", "", "pods", "status", NS, False)]
    assert access.permissions()[(USER, "get", "", "pods", "", NS, True)] == 2  # the 200 and the 404
    assert got.groups == authn.service_account_user(NS, SA).groups


async def test_grant_creates_the_namespace_and_the_service_account(cluster: EmbeddedCluster) -> None:
    access = grant(
        cluster, "operator-system", "operator", [cluster_role_for("lister", [rule(["list"], PODS)])]
    )
    assert access.user.name == "system:serviceaccount:operator-system:operator"
    assert access.user.uid  # the ServiceAccount exists
    await Calls(access.client()).list("/api/v1/pods")


async def test_a_watch_is_authorized_as_watch(cluster: EmbeddedCluster) -> None:
    access = grant(cluster, NS, SA, [role("lister", [rule(["list"], PODS)])])
    client = access.client()
    with pytest.raises(ApiError) as refused_watch:
        async for _event in client.stream(f"/api/v1/namespaces/{NS}/pods", {"resourceVersion": "0"}):
            break
    assert refused_watch.value.message == (
        f'pods is forbidden: User "{USER}" cannot watch resource "pods" in API group "" in the namespace "{NS}"'
    )
    grant(cluster, NS, SA, [role("watcher", [rule(["watch"], PODS)])])
    async for event in client.stream(f"/api/v1/namespaces/{NS}/pods", {"resourceVersion": "0"}):
        assert event["type"] == "ADDED"
        break
    assert [(r.verb, r.code) for r in access.records()] == [("watch", 403), ("watch", 200)]


async def test_a_server_side_apply_that_creates_needs_create_too(cluster: EmbeddedCluster) -> None:
    access = grant(cluster, NS, SA, [role("patcher", [rule(["patch"], ["configmaps"])])])
    client = access.client()
    path = f"/api/v1/namespaces/{NS}/configmaps/settings"
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}}

    async def apply() -> dict[str, Any]:
        return await client.request(
            "PATCH",
            path,
            query={"fieldManager": "op"},
            body=manifest,
            content_type="application/apply-patch+yaml",
        )

    with pytest.raises(ApiError) as refused_create:
        await apply()
    # kube's patch handler: NewForbidden(resource, name, <the authorizer's reason, empty for RBAC>)
    assert refused_create.value.status == 403
    assert refused_create.value.message == 'configmaps "settings" is forbidden: '
    assert refused_create.value.body["details"] == {"name": "settings", "kind": "configmaps"}
    await InMemoryKubeClient.for_cluster(cluster).request(
        "POST", f"/api/v1/namespaces/{NS}/configmaps", body=manifest
    )
    assert (await apply())["data"] == {"a": "1"}  # patch alone updates an existing object
    grant(cluster, NS, SA, [role("creator", [rule(["create"], ["configmaps"])])])
    path = f"/api/v1/namespaces/{NS}/configmaps/other"
    manifest["metadata"]["name"] = "other"
    assert (await apply())["metadata"]["name"] == "other"

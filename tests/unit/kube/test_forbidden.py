"""Reading the missing permission back from kube-apiserver's 403 messages (responsewriters.forbiddenMessage)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

from aiplane.api.base import Resource as ApiResource
from aiplane.api.crdgen import crd_for
from aiplane.api.registry import RESOURCES
from aiplane.kube.client import JSON, ApiError, KubeClient
from aiplane.kube.forbidden import (
    PERMISSION_DENIED,
    MissingPermission,
    PermissionConditions,
    ReportLimiter,
    accepts_permission_condition,
    missing_permission,
)
from aiplane.kube.informer import Backoff, Informer
from aiplane.kube.resources import NODES, Resource
from tests.polling import eventually

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


class _StatusClient:
    """Records status patches; refuses them with ``error`` when set."""

    def __init__(self, error: ApiError | None = None) -> None:
        self.error = error
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.patches.append(body)
        if self.error is not None:
            raise self.error
        return body


NOW = datetime(2026, 1, 1, tzinfo=UTC)
NODE_UPDATE = MissingPermission(SA, "update", "", "nodes")


def _np(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status = {"phase": "Pending", **({"conditions": conditions} if conditions is not None else {})}
    return {"metadata": {"name": "np-a", "resourceVersion": "7", "generation": 2}, "status": status}


def _crd_accepts_the_condition(model: type[ApiResource], version_name: str) -> bool:
    """The definition on the generated CRD: a /status subresource whose conditions have a reason."""
    for version in crd_for(model)["spec"]["versions"]:
        if version["name"] != version_name:
            continue
        status = version["schema"]["openAPIV3Schema"].get("properties", {}).get("status", {})
        conditions = status.get("properties", {}).get("conditions", {})
        has_subresource = "status" in (version.get("subresources") or {})
        return has_subresource and "reason" in conditions.get("items", {}).get("properties", {})
    return False


def test_every_kind_we_serve_accepts_the_condition_and_builtin_kinds_do_not() -> None:
    for model in RESOURCES:
        group, version = model.crd.api_version.split("/")
        resource = Resource(group, version, model.crd.plural, model.crd.kind, True)
        assert accepts_permission_condition(resource), model.crd.kind
        # The operator reads the model's types (cheap); the generated CRD must say the same.
        assert _crd_accepts_the_condition(model, version), model.crd.kind
        other_version = Resource(group, "v0", model.crd.plural, model.crd.kind, True)
        assert not accepts_permission_condition(other_version)
    assert not accepts_permission_condition(NODES)


async def test_the_condition_names_the_permission_and_is_written_once() -> None:
    client = _StatusClient()
    conditions = PermissionConditions(cast(Any, client), NODES, "test", lambda: NOW)
    assert await conditions.set(_np(), NODE_UPDATE) == "set"
    (patch,) = client.patches
    (written,) = patch["status"]["conditions"]
    assert (written["type"], written["status"], written["reason"]) == (PERMISSION_DENIED, "True", "Forbidden")
    assert written["observedGeneration"] == 2
    assert 'update on "nodes" in API group "" at the cluster scope' in written["message"]
    assert 'resources: ["nodes"], verbs: ["update"]' in written["message"]
    # Shown already: no second write at the next retry; cleared once, and never written when absent.
    assert await conditions.set(_np([written]), NODE_UPDATE) == "unchanged"
    assert await conditions.clear(_np([written])) is True
    assert client.patches[-1]["status"] == {"conditions": []}
    assert await conditions.clear(_np()) is False
    assert len(client.patches) == 2


async def test_a_refused_status_write_is_not_retried_within_the_interval() -> None:
    refused = ApiError(403, "Forbidden", f'User "{SA}" cannot patch resource "nodepartitionings/status"')
    client = _StatusClient(refused)
    clock = [0.0]
    conditions = PermissionConditions(cast(Any, client), NODES, "t", lambda: NOW, monotonic=lambda: clock[0])
    assert await conditions.set(_np(), NODE_UPDATE) == "refused"
    clock[0] = 30.0
    assert await conditions.set(_np(), NODE_UPDATE) == "refused"
    assert len(client.patches) == 1
    clock[0] = 61.0
    client.error = ApiError(409, "Conflict", "the object has been modified")
    assert await conditions.set(_np(), NODE_UPDATE) == "failed"
    assert len(client.patches) == 2


class _RefusedWatchClient(KubeClient):
    """Lists are allowed; watches are refused (403) until ``allowed``, then accepted and quiet."""

    def __init__(self) -> None:
        self.allowed = False
        #: What the informer reported as refused when each watch was opened.
        self.seen: list[MissingPermission | None] = []
        self.informer: Informer | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        assert self.informer is not None
        self.seen.append(self.informer.forbidden)
        if not self.allowed:
            message = f'nodes is forbidden: User "{SA}" cannot watch resource "nodes" in API group "" at the cluster scope'
            raise ApiError(403, "Forbidden", message)
        if on_open is not None:
            on_open()
        await asyncio.Event().wait()  # accepted; a quiet resource: no event for a long while
        yield {}  # never reached


async def test_a_refused_watch_stays_reported_across_the_lists_between_and_clears_once_allowed() -> None:
    client = _RefusedWatchClient()
    informer = client.informer = Informer(client, NODES, backoff=Backoff(initial=0.001, cap=0.01))
    informer.start()
    try:
        await eventually(lambda: len(client.seen) >= 5, what="watch retries")
        # Every watch after the first refusal was opened with the refusal still reported, although a
        # list succeeded before each one (readiness and the metric would flap otherwise).
        assert informer.forbidden is not None and informer.forbidden.verb == "watch"
        assert all(seen is not None and seen.verb == "watch" for seen in client.seen[1:])
        client.allowed = True
        await eventually(
            lambda: informer.forbidden is None, timeout=5, what="cleared once a watch stays open"
        )
    finally:
        await informer.stop()

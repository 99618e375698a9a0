"""``/metrics`` behind TokenReview + SubjectAccessReview (``--metrics-secure``, the default), with the
chart's RBAC: the operator's ServiceAccount may create the reviews, the scraper's is bound to
``<release>-metrics-reader``; and the embedded cluster answers both reviews as kube-apiserver does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.metrics_auth import SUBJECTACCESSREVIEWS, TOKENREVIEWS, MetricsAuth
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.identities import grant
from tests import chart_helpers
from tests.integration import operator_rbac
from tests.integration.sim_helpers import http_client
from tests.polling import eventually


def _metrics_reader() -> dict[str, Any]:
    (role,) = [
        d
        for d in chart_helpers.render()
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-metrics-reader")
    ]
    return role


async def _get(port: int, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    sim = operator_rbac.cluster()
    await sim.start()
    yield sim
    await sim.stop()


async def _serve(cluster: EmbeddedCluster, *, secure: bool) -> tuple[Manager, Any]:
    client = operator_rbac.operator_client(cluster)
    manager = Manager(
        client,
        handle_signals=False,
        metrics_bind_address="127.0.0.1:0",
        metrics_auth=MetricsAuth(client) if secure else None,
    )
    task = asyncio.create_task(manager.run())
    await eventually(lambda: manager.metrics_port, what="metrics served")
    return manager, task


async def test_metrics_need_a_token_allowed_to_get_metrics(cluster: EmbeddedCluster) -> None:
    manager, task = await _serve(cluster, secure=True)
    port = manager.metrics_port
    assert port is not None
    grant(cluster, "monitoring", "prometheus", [_metrics_reader()])
    reader = cluster.service_account_token("monitoring", "prometheus")
    stranger = cluster.service_account_token("default", "stranger")
    try:
        assert await _get(port, None) == (401, "Unauthorized\n")
        assert await _get(port, "not-a-token") == (401, "Unauthorized\n")
        assert await _get(port, stranger) == (
            403,
            "Authorization denied for user system:serviceaccount:default:stranger\n",
        )
        status, body = await _get(port, reader)
        assert (status == 200 and "controller_runtime_" in body) or "rest_client" in body
        # Cached for a scrape interval: the second scrape asks the API server nothing.
        reviews = len(cluster.audit.records)
        assert (await _get(port, reader))[0] == 200
        assert len(cluster.audit.records) == reviews
    finally:
        manager.stop()
        assert await task == 0


async def test_no_metrics_secure_serves_anyone(cluster: EmbeddedCluster) -> None:
    manager, task = await _serve(cluster, secure=False)
    assert manager.metrics_port is not None
    try:
        assert (await _get(manager.metrics_port, None))[0] == 200
    finally:
        manager.stop()
        assert await task == 0


async def test_the_sim_answers_token_and_subject_access_reviews_as_kube_does(
    cluster: EmbeddedCluster,
) -> None:
    access = grant(cluster, "aiplane-system", "aiplane", operator_rbac.chart_rbac())
    grant(cluster, "monitoring", "prometheus")
    token = cluster.service_account_token("monitoring", "prometheus")
    async with http_client(cluster, access.kubeconfig()) as client:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        answer = await client.create(TOKENREVIEWS, {**review, "spec": {"token": token}})
        assert answer["status"]["authenticated"] is True
        user = answer["status"]["user"]
        assert user["username"] == "system:serviceaccount:monitoring:prometheus"
        assert {"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"} <= set(
            user["groups"]
        )
        bad = await client.create(TOKENREVIEWS, {**review, "spec": {"token": "x"}})
        assert "authenticated" not in bad["status"] and bad["status"]["error"]
        other = await client.create(
            TOKENREVIEWS, {**review, "spec": {"token": token, "audiences": ["vault"]}}
        )
        assert "authenticated" not in other["status"]
        with pytest.raises(ApiError) as empty:
            await client.create(TOKENREVIEWS, {**review, "spec": {}})
        assert (empty.value.status, empty.value.message) == (
            400,
            "token is required for TokenReview in authentication",
        )

        sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
        metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
        spec = {"user": user["username"], "groups": user["groups"], **metrics}
        assert (await client.create(SUBJECTACCESSREVIEWS, {**sar, "spec": spec}))["status"][
            "allowed"
        ] is False
        grant(cluster, "monitoring", "prometheus", [_metrics_reader()])
        assert (await client.create(SUBJECTACCESSREVIEWS, {**sar, "spec": spec}))["status"]["allowed"] is True
        pods = {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}
        masters = {"user": "someone", "groups": ["system:masters"], **pods}
        assert (await client.create(SUBJECTACCESSREVIEWS, {**sar, "spec": masters}))["status"][
            "allowed"
        ] is True
        with pytest.raises(ApiError) as nobody:
            await client.create(SUBJECTACCESSREVIEWS, {**sar, "spec": metrics})
        assert nobody.value.status == 422
        assert nobody.value.message == (
            'SubjectAccessReview.authorization.k8s.io "" is invalid: '
            'spec.user: Invalid value: "": at least one of user or group must be specified'
        )
    # Without create on the reviews (a role that does not grant it), the request itself is refused.
    async with http_client(cluster, cluster.service_account_kubeconfig("default", "stranger")) as client:
        with pytest.raises(ApiError) as refused:
            await client.create(TOKENREVIEWS, {**review, "spec": {"token": token}})
        assert refused.value.status == 403
        assert (
            'cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope'
            in (refused.value.message)
        )

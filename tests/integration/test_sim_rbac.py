"""RBAC over HTTP, as users meet it: the real kubectl as a ServiceAccount (``Error from server
(Forbidden): …``, ``kubectl auth can-i``, ``kubectl create token``), discovery for a ServiceAccount,
non-resource URLs, anonymous requests, and the audit log file."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from typer.testing import CliRunner

from aiplane.cli import app
from aiplane.kube.client import ApiError
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.identities import ServiceAccountAccess, cluster_role_for, grant
from tests.integration.sim_helpers import http_client, rbac_cluster

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
NS, SA = "default", "operator"
USER = f"system:serviceaccount:{NS}:{SA}"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    sim = EmbeddedCluster(install_crds=False, authorization_mode="RBAC", audit_log=tmp_path / "audit.jsonl")
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


async def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_kubectl_as_a_service_account_is_refused_as_kube_refuses(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    access = grant(cluster, NS, SA)
    kubeconfig = access.write_kubeconfig(tmp_path / "sa.kubeconfig")
    denied = await kubectl(kubeconfig, "get", "pods")
    assert denied.returncode == 1
    assert denied.stderr.strip().splitlines()[-1] == (
        f'Error from server (Forbidden): pods is forbidden: User "{USER}" cannot list resource "pods" '
        f'in API group "" in the namespace "{NS}"'
    )
    # Discovery works for any authenticated user (system:discovery), so kubectl resolved "pods" first.
    assert not any(r.code == 403 and not r.resource for r in access.records())
    can_i = await kubectl(kubeconfig, "auth", "can-i", "list", "pods")
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")
    whoami = await kubectl(kubeconfig, "auth", "whoami")
    assert whoami.returncode == 0, whoami.stderr
    rows = [line.split() for line in whoami.stdout.splitlines()]
    assert ["Username", USER] in rows
    assert [
        "Groups",
        "[system:serviceaccounts",
        f"system:serviceaccounts:{NS}",
        "system:authenticated]",
    ] in rows
    grant(
        cluster,
        NS,
        SA,
        [cluster_role_for("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])],
    )
    can_i = await kubectl(kubeconfig, "auth", "can-i", "list", "pods", "--all-namespaces")
    assert (can_i.returncode, can_i.stdout.strip()) == (0, "yes")
    listed = await kubectl(kubeconfig, "get", "pods", "-A")
    assert listed.returncode == 0, listed.stderr
    cannot_delete = await kubectl(kubeconfig, "auth", "can-i", "delete", "pods/x")
    assert cannot_delete.stdout.strip() == "no"
    listing = await kubectl(kubeconfig, "auth", "can-i", "--list")
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.splitlines()]
    assert ["pods", "[]", "[]", "[list]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/api/*]", "[]", "[get]"] in rows


async def test_kubectl_as_impersonates_when_allowed(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    access = grant(cluster, NS, SA)
    admin_config = tmp_path / "admin.kubeconfig"
    cluster.write_kubeconfig(admin_config)
    as_sa = (f"--as={USER}",)
    assert (await kubectl(admin_config, *as_sa, "auth", "can-i", "list", "pods")).stdout.strip() == "no"
    denied = await kubectl(admin_config, *as_sa, "get", "pods")
    assert f'User "{USER}" cannot list resource "pods"' in denied.stderr
    grant(
        cluster,
        NS,
        SA,
        [cluster_role_for("pod-lister", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])],
    )
    assert (await kubectl(admin_config, *as_sa, "auth", "can-i", "list", "pods")).stdout.strip() == "yes"
    # The ServiceAccount itself may not impersonate anyone.
    sa_config = access.write_kubeconfig(tmp_path / "sa.kubeconfig")
    refused = await kubectl(sa_config, "--as=system:serviceaccount:kube-system:admin", "get", "pods")
    assert refused.stderr.strip().splitlines()[-1] == (
        f'Error from server (Forbidden): serviceaccounts "admin" is forbidden: User "{USER}" cannot impersonate '
        'resource "serviceaccounts" in API group "" in the namespace "kube-system"'
    )
    refused = await kubectl(sa_config, "--as=jane", "--as-group=devs", "get", "pods")
    assert 'users "jane" is forbidden: User' in refused.stderr
    assert 'cannot impersonate resource "users" in API group "" at the cluster scope' in refused.stderr


async def test_kubectl_create_token_gives_a_token_that_authenticates_as_the_service_account(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    admin_config = tmp_path / "admin.kubeconfig"
    cluster.write_kubeconfig(admin_config)
    assert (await kubectl(admin_config, "create", "serviceaccount", "bot")).returncode == 0
    minted = await kubectl(admin_config, "create", "token", "bot", "--duration=15m")
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    bot_config = tmp_path / "bot.kubeconfig"
    cluster.write_kubeconfig(bot_config, cluster.kubeconfig(token=token, user="bot"))
    whoami = await kubectl(bot_config, "get", "configmaps")
    assert f'User "system:serviceaccount:{NS}:bot" cannot list resource "configmaps"' in whoami.stderr
    # The admin is in system:masters: allowed everything.
    assert (await kubectl(admin_config, "auth", "can-i", "*", "*")).stdout.strip() == "yes"
    # A token of a deleted ServiceAccount no longer authenticates.
    assert (await kubectl(admin_config, "delete", "serviceaccount", "bot")).returncode == 0
    gone = await kubectl(bot_config, "get", "configmaps")
    assert "error: You must be logged in to the server (Unauthorized)" in gone.stderr


async def test_non_resource_urls_and_anonymous_requests(cluster: EmbeddedCluster) -> None:
    access: ServiceAccountAccess = grant(cluster, NS, SA)
    async with http_client(cluster) as admin:
        await admin.request("GET", "/api/v1/nodes")  # system:masters
    context = ssl.create_default_context(cadata=cluster.tls.ca_pem.decode())
    token = access.kubeconfig()["users"][0]["user"]["token"]
    async with aiohttp.ClientSession() as session:

        async def get(path: str, bearer: str | None) -> tuple[int, dict[str, object] | str]:
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            async with session.get(f"{cluster.url}{path}", headers=headers, ssl=context) as resp:
                text = await resp.text()
                return resp.status, orjson.loads(text) if text.startswith("{") else text

        assert (await get("/api", token))[0] == 200
        assert (await get("/apis/apps/v1", token))[0] == 200
        assert (await get("/version", None))[0] == 200
        assert (await get("/healthz", None))[0] == 200
        status, body = await get("/api", None)
        assert status == 403
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/api"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }
        status, body = await get("/_sim/stats", token)
        assert status == 403
        assert isinstance(body, dict)
        assert body["message"] == f'forbidden: User "{USER}" cannot get path "/_sim/stats"'
        assert (await get("/api/v1/pods", "not-a-token"))[0] == 401
        assert (await get("/api/v1/pods?limit=1", token))[0] == 403
    lines = [orjson.loads(line) for line in (cluster.audit.path or Path()).read_text().splitlines()]
    denied = [
        e
        for e in lines
        if e["user"]["username"] == USER and e["annotations"]["authorization.k8s.io/decision"] == "forbid"
    ]
    assert [(e["verb"], e["requestURI"], e["responseStatus"]["code"]) for e in denied] == [
        ("get", "/_sim/stats", 403),
        ("list", "/api/v1/pods?limit=1", 403),
    ]
    assert all(e["kind"] == "Event" and e["apiVersion"] == "audit.k8s.io/v1" for e in lines)


async def test_an_http_client_as_a_service_account_and_the_rbac_cluster_helper() -> None:
    reader = cluster_role_for(
        "node-reader", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    )
    async with (
        rbac_cluster([reader], install_crds=False) as (sim, access),
        http_client(sim, access.kubeconfig()) as client,
    ):
        assert (await client.request("GET", "/api/v1/nodes"))["items"]
        with pytest.raises(ApiError) as refused:
            await client.request("DELETE", "/api/v1/nodes/x")
        assert refused.value.status == 403
        assert refused.value.message == (
            f'nodes "x" is forbidden: User "{USER}" cannot delete resource "nodes" in API group "" at the cluster scope'
        )
        assert access.denied() == [(USER, "delete", "", "nodes", "", "", False)]
        assert access.permissions()[(USER, "list", "", "nodes", "", "", True)] == 1


def test_the_sim_command_takes_the_authorization_mode_and_audit_log() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["sim", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    mode_line = next(line for line in shown.output.splitlines() if "--authorization-mode" in line)
    assert "MODE" in mode_line and "AlwaysAllow" in mode_line
    assert "PATH" in next(line for line in shown.output.splitlines() if "--audit-log" in line)
    wrong = runner.invoke(
        app, ["sim", "--kubeconfig", "x", "--authorization-mode", "Webhook"], env={"COLUMNS": "200"}
    )
    assert wrong.exit_code == 2
    assert "'Webhook' is not one of 'AlwaysAllow', 'RBAC'" in wrong.output

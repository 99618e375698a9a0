"""AIMNamespaceConfig end to end on the embedded cluster: credentials by reference in ModelInfer pods,
rolled under maxUnavailable; Warning Events; the gateway HTTPRoute; no Secret value anywhere but its
Secret (objects, Events, logs); zero writes once converged."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from aiplane.controllers.aimns import controller as aimns_controller
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, GATEWAYS, HTTPROUTES, NAMESPACES, SECRETS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration import operator_rbac
from tests.integration.test_modelinfer_e2e import MI, NAME_LABEL, GroupWatch, _fleet, _ready, modelinfer
from tests.polling import eventually

NSCFG = resource_for("config.kaiwo.silogen.ai/v1alpha1", "AIMNamespaceConfig")
NS = "team-a"
MARKER = "S3CR3T-MARKER-7f1c"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(name: str, data: dict[str, str], type_: str = "Opaque") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type_,
        "metadata": {"name": name, "namespace": NS},
        "data": {k: _b64(v) for k, v in data.items()},
    }


def _config(name: str, *, hf_secret: str = "hf", gateway: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "credentials": {
            "huggingFaceToken": {"secretName": hf_secret, "secretKey": "token"},
            "s3": [
                {
                    "endpointUrl": "https://s3.example",
                    "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                    "secretAccessKey": {"secretName": "s3", "secretKey": "secret"},
                }
            ],
        },
        "images": {"imagePullSecrets": ["regcred"]},
    }
    if gateway:
        spec["gateway"] = {"name": "inference", "namespace": NS}
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient
    logs: LogCapture
    manager: Manager

    async def pods(self) -> list[dict[str, Any]]:
        return (await self.client.list(resource_for("v1", "Pod"), namespace=NS, label_selector=NAME_LABEL))[
            "items"
        ]

    async def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in (await self.client.list(EVENTS, NS))["items"] if e.get("reason") == reason]

    async def converged(self, replicas: int, *, with_creds: bool) -> bool:
        mi = await self.client.get(MI, "pd", NS)
        status = mi.get("status") or {}
        pods = await self.pods()
        if not (
            status.get("observedGeneration") == mi["metadata"]["generation"]
            and status.get("updatedReplicas") == replicas
            and status.get("availableReplicas") == replicas
            and len(pods) == replicas * 6
            and all(_ready(p) for p in pods)
        ):
            return False
        return all(("imagePullSecrets" in p["spec"]) == with_creds for p in pods)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    capture = LogCapture()
    structlog.configure(processors=[capture], cache_logger_on_first_use=False)
    cluster = operator_rbac.cluster(fleet=_fleet(4), agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    manager = Manager(operator, leader_election=None, handle_signals=False)
    await modelinfer_controller.setup(manager)
    await aimns_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    try:
        yield World(cluster, client, operator, capture, manager)
    finally:
        manager.stop()
        assert await task == 0
        await client.close()
        await cluster.stop()
        structlog.reset_defaults()


def _env(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}


async def test_credentials_pull_secret_and_route_reach_a_running_modelinfer(world: World) -> None:
    c = world.client
    await c.create(SECRETS, _secret("hf", {"token": MARKER + "-hf"}), namespace=NS)
    await c.create(SECRETS, _secret("s3", {"id": "AKIA" + MARKER, "secret": MARKER + "-s3"}), namespace=NS)
    docker = json.dumps({"auths": {"registry.example": {"auth": _b64("u:" + MARKER)}}})
    await c.create(
        SECRETS,
        _secret("regcred", {".dockerconfigjson": docker}, "kubernetes.io/dockerconfigjson"),
        namespace=NS,
    )
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "inference", "namespace": NS},
        "spec": {"gatewayClassName": "any", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
    await c.create(GATEWAYS, gateway, namespace=NS)
    await c.create(MI, modelinfer(replicas=3, max_unavailable=1), namespace=NS)
    await eventually(lambda: world.converged(3, with_creds=False), 30, "ModelInfer converged without config")
    before = (await c.get(MI, "pd", NS))["status"]["updateRevision"]

    # A config that is not the default one, pointing at a Secret that does not exist: two Warnings.
    await c.create(NSCFG, _config("other", hf_secret="nope"), namespace=NS)
    watch = GroupWatch(world.cluster, "pd")
    for pod in await world.pods():
        watch.pods[pod["metadata"]["name"]] = pod
    world.cluster.server.store.subscribe(watch)
    await c.create(NSCFG, _config("default"), namespace=NS)
    await eventually(lambda: world.converged(3, with_creds=True), 60, "ModelInfer rolled onto the config")
    world.cluster.server.store.unsubscribe(watch)
    assert watch.min_available is not None and watch.min_available >= 2  # maxUnavailable 1 of 3
    assert (await c.get(MI, "pd", NS))["status"]["updateRevision"] != before

    for pod in await world.pods():
        env = _env(pod)
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
        assert env["HUGGING_FACE_HUB_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
        assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "s3", "key": "secret"}
        assert env["AWS_ENDPOINT_URL"]["value"] == "https://s3.example"
        assert env["GROUP_SIZE"]["value"] == "2"  # the controller's own variables are untouched
        assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]

    async def warned() -> bool:
        return bool(await world.events("SecretNotFound")) and bool(await world.events("NotDefault"))

    await eventually(warned, 10, "Warning Events for the ignored config")
    [missing] = await world.events("SecretNotFound")
    assert missing["type"] == "Warning" and missing["involvedObject"]["name"] == "other"
    assert "spec.credentials.huggingFaceToken" in missing["message"] and "'nope'" in missing["message"]

    async def route() -> dict[str, Any] | None:
        items = (await c.list(HTTPROUTES, NS))["items"]
        return items[0] if items else None

    found = await eventually(route, 10, "the ModelInfer's HTTPRoute")
    assert found["metadata"]["ownerReferences"][0]["kind"] == "ModelInfer"
    assert found["spec"]["parentRefs"][0]["name"] == "inference"
    assert [b["name"] for b in found["spec"]["rules"][0]["backendRefs"]] == [
        f"pd-{g}-prefill-0-0" for g in range(3)
    ]
    default = await c.get(NSCFG, "default", NS)
    conditions = {x["type"]: x["status"] for x in default["status"]["conditions"]}
    assert conditions == {"Applied": "True", "SecretsResolved": "True", "GatewayResolved": "True"}

    # Converged: the operator writes nothing more.
    await asyncio.sleep(0.5)
    world.operator.reset_counts()
    end = time.monotonic() + 5
    while time.monotonic() < end:
        await asyncio.sleep(0.25)
    assert world.operator.writes == 0

    # No Secret value anywhere but in its Secret: every stored object, every Event, every log line.
    store = world.cluster.server.store
    secrets = store.items("/secrets", NS)
    values = [MARKER] + [v for s in secrets for v in (s.get("data") or {}).values()]
    assert len(values) == 5
    for key in store.storage_keys():
        if key == "/secrets":
            continue
        for obj in store.items(key):
            text = json.dumps(obj)
            assert not any(v in text for v in values), (
                f"a Secret value in {key} {obj['metadata'].get('name')}"
            )
    assert world.logs.entries, "no log captured: the search below would prove nothing"
    assert not any(v in repr(entry) for entry in world.logs.entries for v in values)
    cached = world.manager.informers.informer(SECRETS).list(NS)
    assert cached and all(v == "" for s in cached for v in (s.get("data") or {}).values())  # keys only

    # Unsetting the gateway removes the route; the pods keep their credentials.
    await c.patch(NSCFG, "default", {"spec": {"gateway": None}}, namespace=NS)
    await eventually(lambda: _no_routes(c), 10, "the HTTPRoute removed with the gateway")


async def _no_routes(client: InMemoryKubeClient) -> bool:
    return not (await client.list(HTTPROUTES, NS))["items"]

"""The platform configuration reaching Dynamo components on the embedded cluster: the default GPU
resource on AMD and NVIDIA clusters, the scheduler rule, the GPU-taint toleration, credentials by
reference in a DCD's pods, and the HTTPRoute of a DGD's frontend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from aiplane.controllers.aimns import controller as aimns_controller
from aiplane.controllers.dynamo import component_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import DEPLOYMENTS, GATEWAYS, HTTPROUTES, NAMESPACES, PODS, SECRETS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_dynamo_dcd_e2e import DCD, frontend, worker
from tests.polling import eventually

KAIWO = resource_for("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig")
NSCFG = resource_for("config.kaiwo.silogen.ai/v1alpha1", "AIMNamespaceConfig")
DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
NS = "llm"
Obj = dict[str, Any]


def _fleet(vendor: str) -> Fleet:
    product = "MI300X" if vendor == "amd" else "H100-SXM"
    return Fleet(
        nodePools=[
            NodePool(name=vendor, count=2, gpu=GpuSpec(vendor=vendor, product=product, count=8), cpu="96")
        ]
    )


@dataclass
class World:
    client: InMemoryKubeClient

    async def template(self, name: str) -> Obj | None:
        found = (await self.client.list(DEPLOYMENTS, NS))["items"]
        deploy = next((d for d in found if d["metadata"]["name"] == name), None)
        return deploy["spec"]["template"] if deploy else None

    async def running(self, name: str, count: int) -> bool:
        pods = (await self.client.list(PODS, NS, label_selector=f"nvidia.com/selector={name}"))["items"]
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


@pytest.fixture
async def start(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    cleanups: list[Any] = []

    async def _start(vendor: str, kaiwo: Obj | None) -> World:
        cluster = operator_rbac.cluster(fleet=_fleet(vendor), agents=True, ready_delay=0.0)
        await cluster.start()
        client = InMemoryKubeClient.for_cluster(cluster)
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        if kaiwo is not None:
            body = {"apiVersion": "config.kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig"}
            await client.create(KAIWO, {**body, "metadata": {"name": "kaiwo"}, "spec": kaiwo})
        manager = Manager(operator_rbac.operator_client(cluster), leader_election=None, handle_signals=False)
        await component_controller.setup(manager)
        await aimns_controller.setup(manager)
        task = asyncio.create_task(manager.run())
        cleanups.append((cluster, client, manager, task))
        return World(client)

    yield _start
    for cluster, client, manager, task in cleanups:
        manager.stop()
        assert await task == 0
        await client.close()
        await cluster.stop()


@pytest.mark.parametrize(("vendor", "resource"), [("amd", "amd.com/gpu"), ("nvidia", "nvidia.com/gpu")])
async def test_defaulted_kaiwoconfig_picks_an_advertised_gpu_resource_and_pods_run(
    start: Any, vendor: str, resource: str
) -> None:
    world: World = await start(vendor, {})
    await world.client.create(DCD, worker(replicas=1, gpus="2"), namespace=NS)
    template = await eventually(lambda: world.template("dec"), 30, "the worker Deployment")
    assert template["spec"]["containers"][0]["resources"]["limits"] == {resource: "2"}
    assert "schedulerName" not in template["spec"]  # kaiwo-scheduler (the default) runs nowhere here
    await eventually(lambda: world.running("dec", 1), 30, "the worker pod Running")


async def test_named_scheduler_taint_toleration_and_credentials(start: Any) -> None:
    kaiwo = {"scheduling": {"kubeSchedulerName": "volcano"}, "nodes": {"addTaintsToGpuNodes": True}}
    world: World = await start("amd", kaiwo)
    c = world.client
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"}, "data": {"token": "eHh4"}}
    await c.create(SECRETS, secret, namespace=NS)
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {
            "credentials": {"huggingFaceToken": {"secretName": "hf", "secretKey": "token"}},
            "gateway": {"name": "gw"},
        },
    }
    await c.create(NSCFG, config, namespace=NS)
    await c.create(DCD, worker(replicas=1, gpus="1"), namespace=NS)
    await c.create(DCD, frontend(replicas=1), namespace=NS)
    dec = await eventually(lambda: world.template("dec"), 30, "the worker Deployment")
    fe = await eventually(lambda: world.template("fe"), 30, "the frontend Deployment")
    assert dec["spec"]["schedulerName"] == "volcano" and fe["spec"]["schedulerName"] == "volcano"
    toleration = {"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert dec["spec"]["tolerations"] == [toleration]
    assert "tolerations" not in fe["spec"]  # no GPU request, no toleration
    for t in (dec, fe):
        env = {e["name"]: e for e in t["spec"]["containers"][0]["env"]}
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
        assert env["HF_HOME"]["value"] == "/hf_cache"

    # A DGD with a frontend gets an HTTPRoute to the frontend's Service, owned by the DGD. Only the
    # AIMNamespaceConfig controller runs here: the route follows from the DGD's spec.
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": NS},
        "spec": {"gatewayClassName": "any", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
    await c.create(GATEWAYS, gateway, namespace=NS)
    dgd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": NS},
        "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": 1}}},
    }
    created = await c.create(DGD, dgd, namespace=NS)

    async def route() -> Obj | None:
        items = (await c.list(HTTPROUTES, NS))["items"]
        return items[0] if items else None

    found = await eventually(route, 10, "the DGD's HTTPRoute")
    assert found["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert found["spec"]["rules"][0]["backendRefs"] == [{"name": "g-frontend", "port": 8000}]

    async def gateway_resolved() -> bool:
        status = (await c.get(NSCFG, "default", NS)).get("status") or {}
        return any(
            x["type"] == "GatewayResolved" and x["status"] == "True" for x in status.get("conditions") or []
        )

    await eventually(gateway_resolved, 10, "GatewayResolved after the Gateway was created")

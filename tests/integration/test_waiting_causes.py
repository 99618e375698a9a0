"""Status names what holds the pods: a DCD, its DGD and a ModelInfer on the embedded cluster with
its scheduler, Volcano stand-in and kubelet, as a user reads them (``waitingFor``, the Ready message,
one Warning Event per cause)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.controllers.dynamo import component_controller, graph_controller
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, NAMESPACES, SECRETS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_modelinfer_e2e import modelinfer
from tests.polling import eventually

DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
NS = "llm"
Obj = dict[str, Any]


def _fleet() -> Fleet:
    return Fleet(
        nodePools=[
            NodePool(
                name="h100", count=1, gpu=GpuSpec(vendor="nvidia", product="H100-SXM", count=8), cpu="96"
            ),
            NodePool(name="mi300x", count=1, gpu=GpuSpec(vendor="amd", product="MI300X", count=8), cpu="96"),
        ]
    )


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    cluster = operator_rbac.cluster(fleet=_fleet(), agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(operator_rbac.operator_client(cluster), leader_election=None, handle_signals=False)
    await component_controller.setup(manager)
    await graph_controller.setup(manager)
    await modelinfer_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    yield client
    manager.stop()
    assert await task == 0
    await client.close()
    await cluster.stop()


def graph(gpus: str, secret: str | None = None) -> Obj:
    worker: Obj = {
        "componentType": "worker",
        "replicas": 1,
        "resources": {"limits": {"gpu": gpus, "gpuType": "nvidia.com/gpu"}},
        "extraPodSpec": {"mainContainer": {"image": "vllm:1"}},
    }
    if secret:
        worker["envFromSecret"] = secret
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {"backendFramework": "vllm", "services": {"VllmWorker": worker}},
    }


async def _status(client: InMemoryKubeClient, res: Any, name: str) -> Obj:
    return dict((await client.get(res, name, NS)).get("status") or {})


async def _warnings(client: InMemoryKubeClient, name: str) -> list[tuple[str, str]]:
    items = (await client.list(EVENTS, NS))["items"]
    return [
        (e["reason"], e["message"])
        for e in items
        if e["involvedObject"]["name"] == name and e["type"] == "Warning"
    ]


async def test_a_missing_secret_is_named_by_the_component_its_graph_and_an_event(
    client: InMemoryKubeClient,
) -> None:
    await client.create(DGD, graph("1", secret="hf-token-secret"), namespace=NS)

    async def held() -> Obj | None:
        status = await _status(client, DGD, "g")
        return status if status.get("waitingFor") else None

    status = await eventually(held, 20, "the graph names what its pods wait for")
    assert status["waitingFor"] == 'secret "hf-token-secret" not found'
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert 'waiting for: secret "hf-token-secret" not found' in ready["message"]
    component = await _status(client, DCD, "g-vllmworker")
    assert component["waitingFor"] == 'secret "hf-token-secret" not found'
    available = next(c for c in component["conditions"] if c["type"] == "Available")
    assert available["message"].endswith('waiting for: secret "hf-token-secret" not found (1 pod)')

    async def one_event() -> list[tuple[str, str]] | None:
        found = [w for w in await _warnings(client, "g-vllmworker") if w[0] == "CreateContainerConfigError"]
        return found or None

    events = await eventually(one_event, 10, "a Warning Event for the cause")
    assert len(events) == 1 and 'secret "hf-token-secret" not found (pod g-vllmworker-' in events[0][1]

    # Created, the Secret lets the pod start: the cause is gone and the graph is ready.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret"}, "data": {}}
    await client.create(SECRETS, secret, namespace=NS)

    async def ready_graph() -> Obj | None:
        status = await _status(client, DGD, "g")
        return status if status.get("state") == "successful" else None

    status = await eventually(ready_graph, 20, "the graph ready once the Secret exists")
    assert "waitingFor" not in status
    assert "waitingFor" not in await _status(client, DCD, "g-vllmworker")


async def test_no_free_gpu_is_named_with_the_resource(client: InMemoryKubeClient) -> None:
    await client.create(DGD, graph("16"), namespace=NS)

    async def held() -> str | None:
        return (await _status(client, DGD, "g")).get("waitingFor")

    waiting = await eventually(held, 20, "the graph names the scheduler's message")
    assert waiting == (await _status(client, DCD, "g-vllmworker"))["waitingFor"]
    assert "Insufficient nvidia.com/gpu" in waiting and "preemption" not in waiting


async def test_a_gang_too_big_for_the_cluster_is_named_by_its_modelinfer(client: InMemoryKubeClient) -> None:
    await client.create(MI, modelinfer("big", replicas=1, gpus=100), namespace=NS)

    async def held() -> Obj | None:
        status = await _status(client, MI, "big")
        return status if status.get("waitingFor") else None

    status = await eventually(held, 20, "the ModelInfer names what holds its gang")
    assert status["waitingFor"].startswith("PodGroup big-0: ")
    assert "amd.com/gpu" in status["waitingFor"]
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    assert "waiting for: PodGroup big-0: " in available["message"]

    async def event() -> list[tuple[str, str]] | None:
        found = [
            w for w in await _warnings(client, "big") if w[0] == "Unschedulable" and "PodGroup big-0" in w[1]
        ]
        return found or None

    assert len(await eventually(event, 10, "a Warning Event for the gang")) == 1


async def test_an_unbound_claim_names_the_storage_class_it_lacks(client: InMemoryKubeClient) -> None:
    body = graph("1")
    body["spec"]["pvcs"] = [
        {
            "name": "cache",
            "create": True,
            "storageClass": "fast-nvme",
            "size": "10Gi",
            "volumeAccessMode": "ReadWriteOnce",
        }
    ]
    body["spec"]["services"]["VllmWorker"]["volumeMounts"] = [{"name": "cache", "mountPoint": "/cache"}]
    await client.create(DGD, body, namespace=NS)

    async def held() -> str | None:
        return (await _status(client, DGD, "g")).get("waitingFor")

    waiting = await eventually(held, 20, "the graph names the claim its pods wait for")
    assert waiting == 'persistentvolumeclaim "cache" is not bound: storageclass "fast-nvme" not found'

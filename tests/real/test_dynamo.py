"""Dynamo on the real control plane, as the chart's ServiceAccount: a single-node graph
(DynamoGraphDeployment → one DynamoComponentDeployment per service → Deployments, Services) reaches
``successful`` once kube's Deployment controller and kwok make its pods Ready; an offline, auto-applied
DynamoGraphDeploymentRequest plans a graph for the H100 nodes, creates it, and becomes Ready."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import CONFIGMAPS, DEPLOYMENTS, SERVICES, resource_for
from tests.polling import eventually
from tests.real import operator as op
from tests.real.watching import apply

pytestmark = pytest.mark.real

DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
DGDR = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeploymentRequest")
DYNAMO = "dynamographdeployment,dynamocomponentdeployment"


async def _get(admin: HttpKubeClient, res: Any, name: str, namespace: str) -> dict[str, Any] | None:
    items = (await admin.list(res, namespace))["items"]
    return next((o for o in items if o["metadata"]["name"] == name), None)


async def test_a_single_node_graph_becomes_successful_with_its_pods_ready(
    admin: HttpKubeClient, start_operator: Callable[[str], op.Process], namespace: str
) -> None:
    operator = start_operator(DYNAMO)
    graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": "dynamo-frontend:1"}},
                },
                "VllmWorker": {
                    "componentType": "worker",
                    "replicas": 2,
                    "resources": {"limits": {"gpu": "1"}},
                    "extraPodSpec": {"mainContainer": {"image": "vllm:1"}},
                },
            },
        },
    }
    await apply(admin, [graph])

    async def successful() -> dict[str, Any] | None:
        dgd = await _get(admin, DGD, "g", namespace)
        status = (dgd or {}).get("status") or {}
        return dgd if status.get("state") == "successful" else None

    try:
        dgd = await eventually(successful, timeout=60, what="the graph successful", interval=0.2)
    except AssertionError as failed:
        dcds = (await admin.list(DCD, namespace))["items"]
        pods = (await admin.list(resource_for("v1", "Pod"), namespace))["items"]
        raise AssertionError(
            f"{failed}: {await _get(admin, DGD, 'g', namespace)}\n{[d.get('status') for d in dcds]}\n"
            f"{[(p['metadata']['name'], p['spec'].get('nodeName'), p.get('status')) for p in pods]}"
        ) from None
    assert dgd["status"]["readyServices"] == "2/2"
    assert dgd["status"]["observedGeneration"] == dgd["metadata"]["generation"]
    dcds = {d["metadata"]["name"] for d in (await admin.list(DCD, namespace))["items"]}
    assert dcds == {"g-frontend", "g-vllmworker"}
    deployments = {d["metadata"]["name"]: d for d in (await admin.list(DEPLOYMENTS, namespace))["items"]}
    assert set(deployments) == {"g-frontend", "g-vllmworker"}
    assert deployments["g-vllmworker"]["status"]["readyReplicas"] == 2
    assert "g-frontend" in {s["metadata"]["name"] for s in (await admin.list(SERVICES, namespace))["items"]}
    assert operator.alive(), operator.tail()


async def test_an_offline_auto_applied_request_plans_creates_and_readies_its_graph(
    admin: HttpKubeClient, start_operator: Callable[[str], op.Process], namespace: str
) -> None:
    operator = start_operator(f"{DYNAMO},dynamographdeploymentrequest")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf-token-secret", "namespace": namespace},
    }
    await apply(admin, [{**secret, "stringData": {"HF_TOKEN": "hf_x"}}])
    request = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": "qwen", "namespace": namespace},
        "spec": {
            "modelName": "Qwen/Qwen3-8B",
            "backend": "vllm",
            "sla": {"ttft": 200, "itl": 20},
            "gpu": {"type": "h100"},
            "online": False,
            "autoApply": True,
        },
    }
    await apply(admin, [request])

    async def ready() -> dict[str, Any] | None:
        dgdr = await _get(admin, DGDR, "qwen", namespace)
        return dgdr if ((dgdr or {}).get("status") or {}).get("state") == "Ready" else None

    try:
        dgdr = await eventually(ready, timeout=90, what="the request Ready", interval=0.2)
    except AssertionError as failed:
        dcds = (await admin.list(DCD, namespace))["items"]
        raise AssertionError(
            f"{failed}: {(await _get(admin, DGDR, 'qwen', namespace) or {}).get('status')}\n"
            f"{[(d['metadata']['name'], d.get('status')) for d in dcds]}"
        ) from None
    status = dgdr["status"]
    assert status["deployment"] == {
        "name": "qwen",
        "namespace": namespace,
        "state": "successful",
        "created": True,
    }
    assert status["profilingResults"] == "configmap/dgdr-output-qwen"
    assert await _get(admin, CONFIGMAPS, "dgdr-output-qwen", namespace) is not None
    dgd = await _get(admin, DGD, "qwen", namespace)
    assert dgd is not None and dgd["status"]["state"] == "successful"
    assert dgd["spec"] == status["generatedDeployment"]["spec"]
    assert operator.alive(), operator.tail()

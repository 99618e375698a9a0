"""Serving-safe drains with the real ``kubectl drain`` on the real control plane: a single-node Dynamo
worker (a DynamoComponentDeployment: a Deployment and its PodDisruptionBudget, made by the operator as
the chart's ServiceAccount) on the two H100 nodes, drained node by node. kube-apiserver's Eviction API
enforces the budget, kubectl retries on its 429s, the real ReplicaSet controller and scheduler replace
the evicted pods, kwok makes them Ready; the ready pods are counted on every pod change a watch
delivers, so one moment below the budget fails the test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import NODES, PDBS, PODS, resource_for
from aiplane.realcluster import RealCluster
from tests.conformance.conftest import KUBECTL
from tests.polling import eventually
from tests.real import operator as op
from tests.real.watching import apply, following

pytestmark = pytest.mark.real

DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
REPLICAS = 4
SELECTOR = "nvidia.com/selector=decode"


def decode_worker(namespace: str) -> dict[str, Any]:
    """Four single-node vLLM decode workers of 2 GPUs each: half an H100 node's worth per node."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "decode", "namespace": namespace},
        "spec": {
            "componentType": "worker",
            "serviceName": "Decode",
            "replicas": REPLICAS,
            "resources": {"limits": {"gpu": "2"}},
            "extraPodSpec": {
                "mainContainer": {"image": "vllm:1", "args": ["python3 -m dynamo.vllm --model m"]}
            },
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


@dataclass
class ReadyPods:
    """The worker's ready pods after every change of the namespace's pods; the fewest once armed."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    fewest: int | None = None
    changes: int = 0

    def __call__(self, kind: str, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("labels", {}).get("nvidia.com/selector") != "decode":
            return
        self.changes += 1
        if kind == "DELETED":
            self.pods.pop(pod["metadata"]["name"], None)
        else:
            self.pods[pod["metadata"]["name"]] = pod
        if self.fewest is not None:
            self.fewest = min(self.fewest, self.ready())

    def ready(self) -> int:
        return sum(1 for p in self.pods.values() if _ready(p))

    def nodes(self) -> set[str]:
        return {p["spec"].get("nodeName", "") for p in self.pods.values() if _ready(p)}


async def kubectl(cluster: RealCluster, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        f"--kubeconfig={cluster.kubeconfig}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def test_kubectl_drain_of_each_h100_node_keeps_the_worker_within_its_budget(
    admin: HttpKubeClient,
    real_cluster: RealCluster,
    namespace: str,
    start_operator: Callable[[str], op.Process],
) -> None:
    operator = start_operator("dynamocomponentdeployment")
    watch = ReadyPods()
    async with following(admin, PODS, watch):
        await apply(admin, [decode_worker(namespace)])

        async def serving() -> bool:
            pdbs = (await admin.list(PDBS, namespace))["items"]
            healthy = [(p.get("status") or {}).get("disruptionsAllowed") for p in pdbs]
            return watch.ready() == REPLICAS and healthy == [1]

        await eventually(
            serving, timeout=60, what="4 decode workers Ready, their budget allowing 1", interval=0.2
        )
        pdb = (await admin.list(PDBS, namespace))["items"][0]
        assert pdb["spec"]["maxUnavailable"] == "25%"
        # kube-scheduler packs GPUs (docs/real-cluster.md), so the workers may share one node: drain a
        # node holding workers first, then the node they moved to; each drain evicts every worker on it.
        first = min(watch.nodes())
        second = ({"h100-0", "h100-1"} - {first}).pop()
        watch.fewest = watch.ready()
        for node, other in ((first, second), (second, first)):
            await kubectl(
                real_cluster, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"
            )

            async def moved(other: str = other) -> bool:
                return watch.ready() == REPLICAS and watch.nodes() == {other}

            await eventually(moved, timeout=60, what=f"every worker Ready on {other}", interval=0.2)
            await kubectl(real_cluster, "uncordon", node)
    assert watch.fewest == REPLICAS - 1, f"fewest ready {watch.fewest} over {watch.changes} pod changes"
    nodes = (await admin.list(NODES))["items"]
    assert not [n["metadata"]["name"] for n in nodes if n["spec"].get("unschedulable")]
    assert operator.alive(), operator.tail()

"""The KaiwoConfig's Kueue queue governs our workloads, end to end on the embedded cluster.

Written against API behaviour only (Workloads, conditions, Events, pod gates), so it holds for a
cluster running real Kueue as well: two MI300X nodes in SPX give the ClusterQueue 16 ``amd.com/gpu``;
a ModelInfer whose group needs 24 waits with Kueue's reason in its own status and one Warning Event;
a repartition to CPX raises the quota to 128 and the group is admitted and runs. A ModelInfer with the
opt-out annotation is never queued, and a queued Dynamo component's Deployment waits the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.dynamo import component_controller
from aiplane.controllers.kaiwo import controller as kaiwo_controller
from aiplane.controllers.kaiwo.controller import KAIWOCONFIGS
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.controllers.queueing import GATE, POD_GROUP_LABEL, QUEUE_LABEL, SKIP_QUEUE_ANNOTATION
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CLUSTERQUEUES, EVENTS, NAMESPACES, PODS, WORKLOADS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_kaiwo_e2e import gpu_quota
from tests.integration.test_partitioning_e2e import PLANS, plan, profile
from tests.polling import eventually

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
NS = "serving"
NODES = 2
Obj = dict[str, Any]


def modelinfer(name: str, gpus: int, *, skip: bool = False) -> Obj:
    """One group of one role replica: an entry and two workers of ``gpus`` GPUs each."""
    template = {
        "spec": {
            "containers": [
                {"name": "vllm", "image": "vllm:v1", "resources": {"limits": {"amd.com/gpu": str(gpus)}}}
            ]
        }
    }
    meta: Obj = {"name": name, "namespace": NS}
    if skip:
        meta["annotations"] = {SKIP_QUEUE_ANNOTATION: "true"}
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {
                        "name": "serve",
                        "replicas": 1,
                        "workerReplicas": 2,
                        "entryTemplate": template,
                        "workerTemplate": template,
                    }
                ]
            },
        },
    }


@dataclass
class World:
    client: InMemoryKubeClient

    async def condition(self, name: str, kind: str) -> Obj | None:
        mi = await self.client.get(MI, name, namespace=NS)
        for cond in (mi.get("status") or {}).get("conditions") or []:
            if cond["type"] == kind:
                return dict(cond)
        return None

    async def pods(self, name: str) -> list[Obj]:
        listed = await self.client.list(
            PODS, namespace=NS, label_selector=f"modelinfer.volcano.sh/name={name}"
        )
        return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]

    async def running(self, name: str, count: int) -> bool:
        pods = await self.pods(name)
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)

    async def events(self, name: str, reason: str) -> list[Obj]:
        items = (await self.client.list(EVENTS, namespace=NS))["items"]
        return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    fleet = Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=NODES,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
            ),
        ]
    )
    cluster = operator_rbac.cluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.05)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    manager = Manager(
        operator_rbac.operator_client(cluster),
        leader_election=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    for setup in (
        profile_controller.setup,
        plan_controller.setup,
        node_controller.setup,
        kaiwo_controller.setup,
        modelinfer_controller.setup,
        component_controller.setup,
    ):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await eventually(lambda: client.get(KAIWOCONFIGS, "kaiwo"), 30, "the KaiwoConfig singleton")
    await client.patch(KAIWOCONFIGS, "kaiwo", {"spec": {"dynamicallyUpdateDefaultClusterQueue": True}})

    async def quota() -> bool:
        cqs = (await client.list(CLUSTERQUEUES))["items"]
        return any(cq["metadata"]["name"] == "kaiwo" and gpu_quota(cq) == 8 * NODES for cq in cqs)

    await eventually(quota, 30, "the ClusterQueue with the SPX quota")
    yield World(client)
    manager.stop()
    assert await task == 0
    await cluster.stop()


async def test_a_group_over_quota_waits_in_kueues_words_until_cpx_raises_the_quota(world: World) -> None:
    client = world.client
    await client.create(MI, modelinfer("big", gpus=8), namespace=NS)  # 24 > 16

    async def waiting() -> Obj | None:
        cond = await world.condition("big", "QuotaReserved")
        return cond if cond and cond["status"] == "False" else None

    cond = await eventually(waiting, 30, "the ModelInfer reports the quota wait")
    assert cond["reason"] == "QuotaPending"
    assert "waits in Kueue LocalQueue kaiwo" in cond["message"]
    assert "insufficient quota for amd.com/gpu in flavor amd-mi300x-8gpu-" in cond["message"]
    assert "> maximum capacity (16)" in cond["message"]
    pods = await world.pods("big")
    assert len(pods) == 3
    assert all(p["metadata"]["labels"][QUEUE_LABEL] == "kaiwo" for p in pods)
    assert {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods} == {
        f"big-0-{pods[0]['metadata']['labels']['modelinfer.volcano.sh/revision']}"
    }
    assert all(p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3" for p in pods)
    assert all(any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or []) for p in pods)
    assert len(await eventually(lambda: world.events("big", "QuotaPending"), 30, "a QuotaPending Event")) == 1

    await client.create(kinds.PARTITIONINGPROFILES, profile("mi300x-cpx", "cpx", "64"))
    await client.create(PLANS, plan("cpx", "mi300x-cpx", max_parallel=1, max_unavailable=1))
    await eventually(lambda: world.running("big", 3), 120, "the group admitted and running after CPX")

    async def admitted() -> Obj | None:
        cond = await world.condition("big", "QuotaReserved")
        return cond if cond and cond["status"] == "True" else None

    await eventually(admitted, 30, "QuotaReserved=True")
    workloads = (await client.list(WORKLOADS, namespace=NS))["items"]
    (wl,) = [w for w in workloads if w["metadata"]["name"].startswith("big-0-")]
    assert [c["status"] for c in wl["status"]["conditions"] if c["type"] == "Admitted"] == ["True"]
    assert len(await world.events("big", "QuotaPending")) == 1, "one Warning when it started waiting"


async def test_the_opt_out_annotation_keeps_a_modelinfer_out_of_the_queue(world: World) -> None:
    await world.client.create(MI, modelinfer("free", gpus=2, skip=True), namespace=NS)
    await eventually(lambda: world.running("free", 3), 60, "the opted-out group runs")
    pods = await world.pods("free")
    assert not any(QUEUE_LABEL in p["metadata"]["labels"] for p in pods)
    assert await world.condition("free", "QuotaReserved") is None


async def test_a_queued_component_waits_with_kueues_reason(world: World) -> None:
    client = world.client
    dcd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "worker", "namespace": NS},
        "spec": {
            "componentType": "worker",
            "replicas": 3,
            "resources": {"limits": {"gpu": "8"}},
            "extraPodSpec": {"mainContainer": {"image": "vllm:v1"}},
        },
    }
    await client.create(DCD, dcd, namespace=NS)

    async def waiting() -> Obj | None:
        got = await client.get(DCD, "worker", namespace=NS)
        for cond in (got.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Available" and cond["reason"] == "QuotaPending":
                return dict(cond)
        return None

    cond = await eventually(waiting, 60, "the component's third pod waits for quota")
    assert "waits in Kueue LocalQueue kaiwo" in cond["message"]
    assert "insufficient unused quota for amd.com/gpu" in cond["message"]
    deployment = await client.get(resource_for("apps/v1", "Deployment"), "worker", namespace=NS)
    assert deployment["metadata"]["labels"][QUEUE_LABEL] == "kaiwo"
    assert await eventually(lambda: world.events("worker", "QuotaPending"), 30, "a QuotaPending Event")

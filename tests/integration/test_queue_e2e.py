"""The KaiwoConfig's Kueue queue governs our workloads, end to end on the embedded cluster.

Written against API behaviour only (Workloads, conditions, Events, pod gates): two MI300X nodes in SPX
give the ClusterQueue 16 ``amd.com/gpu``. The scenarios are tests/queue_scenarios.py, which the real tier
runs on upstream Kueue too (tests/real/test_queue.py); a queued component's third pod waiting is checked
here only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from aiplane.controllers.dynamo import component_controller
from aiplane.controllers.kaiwo import controller as kaiwo_controller
from aiplane.controllers.kaiwo.controller import KAIWOCONFIGS
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.controllers.queueing import QUEUE_LABEL
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CLUSTERQUEUES, EVENTS, NAMESPACES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests import queue_scenarios as scenario
from tests.integration import operator_rbac
from tests.integration.test_kaiwo_e2e import gpu_quota
from tests.polling import eventually
from tests.real.watching import following

DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
NS = "serving"
NODES = 2
Obj = dict[str, Any]


@dataclass
class World:
    client: InMemoryKubeClient

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


async def test_a_modelinfer_group_over_quota_waits_in_kueues_words_until_cpx(world: World) -> None:
    await scenario.modelinfer_group_waits_in_kueues_words_until_cpx(world.client, NS)


async def test_a_queued_modelinfers_groups_are_replaced_and_admitted(world: World) -> None:
    await scenario.queued_modelinfer_groups_are_replaced(world.client, NS, following)


async def test_a_queued_group_replaced_whole_keeps_its_workload_and_its_pods(world: World) -> None:
    await scenario.a_wholly_replaced_group_keeps_its_workload(world.client, NS, following)


async def test_the_opt_out_annotation_keeps_a_modelinfer_out_of_the_queue(world: World) -> None:
    await scenario.modelinfer_opt_out_is_never_queued(world.client, NS)


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


# The scenarios both tiers run (tests/queue_scenarios.py).


async def test_a_component_over_quota_waits_in_kueues_words_until_cpx_admits_it(world: World) -> None:
    await scenario.over_quota_waits_in_kueues_words_until_cpx(world.client, NS)


async def test_lowering_the_quota_evicts_nothing(world: World) -> None:
    await scenario.lowering_the_quota_evicts_nothing(world.client, NS)


async def test_an_opted_out_component_is_never_queued(world: World) -> None:
    await scenario.opt_out_is_never_queued(world.client, NS)


async def test_leaderworkerset_groups_are_admitted_whole(world: World) -> None:
    await scenario.leaderworkerset_groups_are_admitted_whole(world.client, NS)

"""KaiwoConfig end to end on the embedded cluster: partition-aware queues, GPU taints, ownership.

A partitioning plan to CPX raises the default ClusterQueue's ``amd.com/gpu`` quota from 8 to 64 per
node as nodes finish; every committed ClusterQueue change is recorded (a store listener), so a single
dip while nodes are cordoned fails the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.kaiwo import controller as kaiwo_controller
from aiplane.controllers.kaiwo.controller import KAIWOCONFIGS
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CLUSTERQUEUES, EVENTS, LOCALQUEUES, NAMESPACES, NODES, RESOURCEFLAVORS
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_partitioning_e2e import PLANS, plan, profile
from tests.polling import eventually

NODE_COUNT = 4
TAINT = "kaiwo.silogen.ai/gpu"


@dataclass
class QuotaWatch:
    """Every committed value of the ClusterQueue ``kaiwo``'s total ``amd.com/gpu`` nominal quota."""

    values: list[int] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if not event.key.endswith("/clusterqueues") or event.obj["metadata"]["name"] != "kaiwo":
            return
        if event.type == "DELETED":
            self.values.append(-1)
            return
        self.values.append(gpu_quota(event.obj))


def gpu_quota(cq: dict[str, Any]) -> int:
    total = 0
    for group in cq["spec"].get("resourceGroups") or []:
        for flavor in group["flavors"]:
            total += sum(int(r["nominalQuota"]) for r in flavor["resources"] if r["name"] == "amd.com/gpu")
    return total


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    quotas: QuotaWatch

    async def config(self) -> dict[str, Any]:
        return await self.client.get(KAIWOCONFIGS, "kaiwo")

    async def cq(self) -> dict[str, Any] | None:
        try:
            return await self.client.get(CLUSTERQUEUES, "kaiwo")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def nodes(self) -> list[dict[str, Any]]:
        return list((await self.client.list(NODES))["items"])


@pytest.fixture
async def world() -> AsyncIterator[World]:
    fleet = Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=NODE_COUNT,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
            ),
            NodePool(name="control", count=1, controlPlane=True),
        ]
    )
    cluster = operator_rbac.cluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.05)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    quotas = QuotaWatch()
    cluster.server.store.subscribe(quotas)
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
    ):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    yield World(cluster, client, quotas)
    manager.stop()
    assert await task == 0
    await cluster.stop()


async def test_cpx_rollout_raises_the_queue_quota_without_a_dip(world: World) -> None:
    client = world.client
    # The singleton exists with defaults (static queues): created once, 8 GPUs per node.
    config = await world.config()
    assert config["spec"]["dynamicallyUpdateDefaultClusterQueue"] is False

    async def initial_queue() -> bool:
        cq = await world.cq()
        return cq is not None and gpu_quota(cq) == 8 * NODE_COUNT

    await eventually(initial_queue, 30)
    cq = await world.cq()
    assert cq is not None and cq["spec"]["cohort"] == "kaiwo"
    flavors = [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]]
    # The control plane is a CPU-only pool (first, as upstream orders flavors) unless excluded.
    assert flavors[0].startswith("cpu-only-0gpu-") and flavors[1].startswith("amd-mi300x-8gpu-"), flavors
    rf = await client.get(RESOURCEFLAVORS, flavors[1])
    # No topologyName: a TAS-only ClusterQueue would pin every admitted pod to the nodes chosen at
    # admission, so a drained serving pod could never come back elsewhere.
    assert rf["spec"] == {"nodeLabels": {"kaiwo/nodepool": flavors[1]}}
    await client.patch(KAIWOCONFIGS, "kaiwo", {"spec": {"dynamicallyUpdateDefaultClusterQueue": True}})

    for p in (profile("mi300x-cpx", "cpx", "64"),):
        await client.create(kinds.PARTITIONINGPROFILES, p)
    await client.create(PLANS, plan("roll", "mi300x-cpx", max_parallel=2, max_unavailable=2))

    async def done() -> bool:
        got = await client.get(PLANS, "roll")
        cq = await world.cq()
        return (
            (got.get("status") or {}).get("phase") == "Completed"
            and cq is not None
            and gpu_quota(cq) == 64 * NODE_COUNT
        )

    await eventually(done, 90)
    values = [v for v in world.quotas.values]
    assert values == sorted(values), f"the quota dipped: {values}"
    assert any(8 * NODE_COUNT < v < 64 * NODE_COUNT for v in values), values  # it rose node by node
    status = (await world.config())["status"]
    assert status["nodePools"][1]["nominalQuota"]["amd.com/gpu"] == str(64 * NODE_COUNT)
    cq = await world.cq()
    assert cq is not None
    cpu_only = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {"name": "amd.com/gpu", "nominalQuota": "0"} in cpu_only  # zero-filled, as Kueue requires
    assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["True"]

    client.reset_counts()
    await asyncio.sleep(3)  # a measurement window, not a wait for anything
    assert client.writes == 0, client.requests


async def test_gpu_taints_on_and_off_keep_other_taints(world: World) -> None:
    client = world.client
    foreign = {"key": "team", "value": "a", "effect": "NoSchedule"}
    await client.patch(NODES, "mi300x-0", {"spec": {"taints": [foreign]}})
    await client.patch(KAIWOCONFIGS, "kaiwo", {"spec": {"nodes": {"addTaintsToGpuNodes": True}}})

    def ours(node: dict[str, Any]) -> bool:
        return any(t.get("key") == TAINT for t in node["spec"].get("taints") or [])

    async def tainted() -> bool:
        nodes = await world.nodes()
        return sorted(n["metadata"]["name"] for n in nodes if ours(n)) == [
            f"mi300x-{i}" for i in range(NODE_COUNT)
        ]

    await eventually(tainted, 30)
    node0 = await client.get(NODES, "mi300x-0")
    assert foreign in node0["spec"]["taints"]
    assert not ours(await client.get(NODES, "control-0"))

    async def reported() -> bool:
        return (await world.config()).get("status", {}).get("taintedNodes") == [
            f"mi300x-{i}" for i in range(NODE_COUNT)
        ]

    await eventually(reported, 30)

    await client.patch(KAIWOCONFIGS, "kaiwo", {"spec": {"nodes": {"addTaintsToGpuNodes": False}}})

    async def untainted() -> bool:
        return not any(ours(n) for n in await world.nodes())

    await eventually(untainted, 30)
    assert (await client.get(NODES, "mi300x-0"))["spec"]["taints"] == [foreign]


async def test_local_queues_foreign_queues_and_other_names(world: World) -> None:
    client = world.client
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    await client.create(
        kaiwo_controller.AIMNAMESPACECONFIGS,
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "default", "namespace": "team-a"},
            "spec": {},
        },
    )
    foreign = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "someone-elses"},
        "spec": {"namespaceSelector": {}},
    }
    await client.create(CLUSTERQUEUES, foreign)
    await client.patch(KAIWOCONFIGS, "kaiwo", {"spec": {"dynamicallyUpdateDefaultClusterQueue": True}})
    await client.create(
        KAIWOCONFIGS,
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "other"},
        },
    )

    async def local_queue() -> bool:
        try:
            lq = await client.get(LOCALQUEUES, "kaiwo", namespace="team-a")
        except ApiError:
            return False
        return bool(lq["spec"] == {"clusterQueue": "kaiwo"})

    await eventually(local_queue, 30)

    async def ignored_event() -> bool:
        items = (await client.list(EVENTS, namespace="default"))["items"]
        return any(e["reason"] == "Ignored" and e["involvedObject"]["name"] == "other" for e in items)

    await eventually(ignored_event, 30)
    assert (await client.get(CLUSTERQUEUES, "someone-elses"))["spec"] == {"namespaceSelector": {}}
    status = (await world.config())["status"]
    assert status["localQueues"] == ["team-a"]
    assert status["notConsumed"] == [
        "ray.defaultRayImage",
        "ray.headPodMemory",
        "scheduling.pendingThresholdForPreemption",
    ]

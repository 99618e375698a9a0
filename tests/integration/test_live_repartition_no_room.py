"""No room to rebuild: a PartitioningPlan drains the only node a ModelInfer can run on.

What a user must see: capacity wins over the rollout only within the ModelInfer's budget.
The arbiter releases one group (the floor allows it), which cannot be rebuilt anywhere; the other
group's budget holds the drain, and the drain says so — ``DrainCompleted=False EvictionBlocked``, a
Warning Event and ``kubectl get np``'s Blocked-By column name the budget and the ModelInfer. A short
DrainTimeout then fails the node and uncordons it; the released group comes back on it. The floor
(``replicas - maxUnavailable``) is checked on every committed pod change, not sampled.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.demo.serving import FloorWatch
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, NAMESPACES, NODES, PODS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_modelinfer_e2e import KUBECTL, MI, NS, modelinfer
from tests.integration.test_partitioning_e2e import plan, profile
from tests.polling import eventually

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
NODE = "mi300x-0"
NP = f"roll-{NODE}"
DRAIN_TIMEOUT = 8.0


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    floor: FloorWatch

    async def np(self) -> dict[str, Any] | None:
        try:
            return await self.client.get(kinds.NODEPARTITIONINGS, NP)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def condition(self, type_: str) -> dict[str, Any]:
        np = await self.np()
        for c in ((np or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return {}


@pytest.fixture
async def world() -> AsyncIterator[World]:
    fleet = Fleet(
        nodePools=[
            NodePool(name="mi300x", count=1, gpu=GpuSpec(vendor="amd", product="MI300X", count=8)),
            NodePool(name="control", count=1, controlPlane=True),
        ]
    )
    cluster = operator_rbac.cluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.05)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    manager = Manager(operator_rbac.operator_client(cluster), leader_election=None, handle_signals=False)
    manager.set_options(PartitioningOptions(drain_timeout=DRAIN_TIMEOUT))
    for setup in (
        profile_controller.setup,
        plan_controller.setup,
        node_controller.setup,
        modelinfer_controller.setup,
    ):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.create(kinds.PARTITIONINGPROFILES, profile("mi300x-cpx", "cpx", "64"))
    floor = FloorWatch(namespace=NS)
    cluster.server.store.subscribe(floor)
    yield World(cluster, client, floor)
    cluster.server.store.unsubscribe(floor)
    manager.stop()
    assert await task == 0
    await client.close()
    await cluster.stop()


def kubectl(world: World, tmp_path: Path, *args: str) -> str:
    kubeconfig = tmp_path / "kubeconfig"
    world.cluster.write_kubeconfig(kubeconfig)
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_no_room_holds_the_drain_names_the_budget_then_the_timeout_releases_the_node(
    world: World, tmp_path: Path
) -> None:
    # Two groups of 6 pods on the only node they can run on (the other is the tainted control plane).
    await world.client.create(MI, modelinfer(replicas=2, gang=False, gpus=0, max_unavailable=1), namespace=NS)
    key = f"{NS}/pd"
    await eventually(lambda: world.floor.available(key) == 2, 30, "both groups available")
    assert world.floor.track([key]) == [key]
    await world.client.create(PLANS, plan("roll", "mi300x-cpx", max_parallel=1, max_unavailable=1))

    async def blocked() -> bool:
        np = await world.np()
        return (np or {}).get("status", {}).get("blockedBy") == f"{NS}/pd-1"

    # The arbiter released pd-0 (2 → 1 available, the floor allows it); pd-1 holds the drain.
    await eventually(blocked, DRAIN_TIMEOUT - 2, "the drain held by pd-1's budget")
    drain = await world.condition("DrainCompleted")
    assert (drain["status"], drain["reason"]) == ("False", "EvictionBlocked")
    assert f"PodDisruptionBudget {NS}/pd-1 (ModelInfer {NS}/pd)" in drain["message"]

    # The Warning is posted after the status write that shows the block (asynchronously): wait for it.
    async def blocked_warnings() -> list[dict[str, Any]]:
        return [
            e
            for e in (await world.client.list(EVENTS))["items"]
            if e["involvedObject"].get("name") == NP
            and e["reason"] == "EvictionBlocked"
            and f"PodDisruptionBudget {NS}/pd-1 " in e["message"]
        ]

    await eventually(blocked_warnings, 10, "the EvictionBlocked Warning naming pd-1")
    warnings = [
        e
        for e in (await world.client.list(EVENTS))["items"]
        if e["involvedObject"].get("name") == NP and e["reason"] == "EvictionBlocked"
    ]
    # One Warning per budget newly holding the drain: pd-1's, and possibly pd-0's from the first
    # evictions, which can reach the API before the arbiter has released pd-0.
    assert warnings and all(w["type"] == "Warning" for w in warnings)
    assert all(f"ModelInfer {NS}/pd" in w["message"] for w in warnings)
    holding = [w for w in warnings if f"PodDisruptionBudget {NS}/pd-1 " in w["message"]]
    assert len(holding) == 1 and holding[0].get("count", 1) == 1
    table = await asyncio.to_thread(kubectl, world, tmp_path, "get", "np", NP)
    header, row = table.splitlines()[:2]
    assert header.split()[4] == "BLOCKED-BY" and row.split()[4] == f"{NS}/pd-1"
    mi = await world.client.get(MI, "pd", NS)
    held = next(c for c in mi["status"]["conditions"] if c["type"] == "DisruptionHeld")
    assert held["status"] == "True" and "pd-1" in held["message"]
    # The released group could not be rebuilt: its pods wait, unscheduled (cordoned node).
    pods = (
        await world.client.list(PODS, namespace=NS, label_selector="modelinfer.volcano.sh/group-name=pd-0")
    )["items"]
    assert pods and not any(p["spec"].get("nodeName") for p in pods)

    # DrainTimeout: the node fails and is released (uncordoned); the group comes back on it.
    async def failed() -> bool:
        np = await world.np()
        return (np or {}).get("status", {}).get("phase") == "Failed"

    await eventually(failed, DRAIN_TIMEOUT + 5, "the node failed by DrainTimeout")
    drain = await world.condition("DrainCompleted")
    assert (drain["status"], drain["reason"]) == ("False", "DrainTimeout")

    async def uncordoned() -> bool:
        node = await world.client.get(NODES, NODE)
        return not node["spec"].get("unschedulable")

    await eventually(uncordoned, 10, "the failed node uncordoned")
    await eventually(lambda: world.floor.available(key) == 2, 20, "both groups available again")
    assert world.floor.breaches == []
    assert world.floor.minimum[key] == 1  # one group went, never both

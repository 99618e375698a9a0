"""After an API outage, nodes held out of service return within seconds.

Per-item backoff doubles on every failed attempt (client-go: 5 ms → 1000 s), so after an outage of
T seconds the next attempt can come up to about T seconds after the API recovered, while the node
stays cordoned and tainted. The partitioning controllers cap it (``RETRY_BACKOFF_CAP``, 2 s).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiplane.api import kinds
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NODES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.polling import eventually

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
PRODUCT = "AMD_Instinct_MI300X_OAM"
OUTAGE = 6.0  # after the first failed node write: uncapped, the next attempt comes ~4 s after recovery
NODE = "mi300x-0"


def _profile() -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningProfile",
        "metadata": {"name": "cpx"},
        "spec": {
            "dcmProfileName": "cpx",
            "targetSelector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
            "expectedResources": {"amd.com/gpu": "64"},
        },
    }


def _plan() -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": "roll"},
        "spec": {
            "rollout": {"maxParallel": 1, "maxUnavailable": 1},
            "rules": [
                {
                    "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
                    "profileRef": {"name": "cpx"},
                }
            ],
        },
    }


async def test_a_held_node_returns_within_seconds_of_a_write_outage_ending() -> None:
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=1, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    cluster = EmbeddedCluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.05)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    manager = Manager(client, handle_signals=False)
    for setup in (profile_controller.setup, plan_controller.setup, node_controller.setup):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    try:
        await client.create(kinds.PARTITIONINGPROFILES, _profile())

        async def held() -> bool:
            node = await client.get(NODES, NODE)
            return bool(node["spec"].get("unschedulable"))

        await client.create(PLANS, _plan())
        await eventually(held, 20, "the node cordoned")
        # Once the node is held, every Node write fails (503) for OUTAGE s after the first refusal.
        outage = cluster.server.faults.add(verb="update", resource="nodes", error=503)
        await eventually(lambda: outage.applied >= 1, 20, "a node write refused")
        await asyncio.sleep(OUTAGE)  # the outage itself, not a wait for anything
        outage.remove()
        recovered = time.monotonic()

        async def returned() -> bool:
            node = await client.get(NODES, NODE)
            return not node["spec"].get("unschedulable") and not node["spec"].get("taints")

        await eventually(returned, 20, "the node back in service")
        assert time.monotonic() - recovered < 3.5  # the cap (2 s) and the remaining steps
    finally:
        manager.stop()
        assert await task == 0
        await cluster.stop()

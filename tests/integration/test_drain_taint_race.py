"""A drain never taints a node its cache believes empty while the API server still has a pod on it.

The interleaving that broke the serving floor of a ModelInfer under a live repartition: a group was
rebuilt on a node a moment before the plan cordoned it; the NodePartitioning controller's Pod informer
had not delivered those pods yet, so the drain found "no workload pod left", wrote the cordon and the
``amd-dcm=up:NoExecute`` taint in one node update, and the taint manager deleted the whole group
(``DeletionByTaintManager``) although its PodDisruptionBudget allowed no disruption — while the
ModelInfer's arbiter, which still counted that group as serving, released the other group to the drain.

Here the schedule is scripted, not hoped for: the controller's Pod watch is held back (its cache lags
the API server, as under CPU contention), a Ready pod protected by a budget stands on the node, and
the plan rolls over it. The drain must find the pod (a LIST after the committed cordon), ask the
Eviction API, be refused by the budget, and leave the node untainted; once the budget allows it, the
pod leaves through the Eviction API and only then is the node tainted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, NODES, PDBS, PODS, resource_for
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration.test_partitioning_e2e import plan, profile
from tests.polling import eventually

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
NS = "serving"
NODE = "mi300x-0"


class LaggingPodWatch(InMemoryKubeClient):
    """The operator's client, whose cluster-wide Pod watch delivers nothing until :attr:`caught_up`
    is set: the drain's cache lags the API server (the initial LIST still fills it)."""

    caught_up: asyncio.Event

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        held = path == PODS.path() and not query.get("labelSelector") and not query.get("fieldSelector")
        async for event in super().stream(path, query, on_open=on_open):
            if held:
                await self.caught_up.wait()
            yield event


def _tainted(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == "amd-dcm" for t in objects.spec(node).get("taints") or [])


class Journal:
    """Committed changes: how the guarded pod went, and whether the node was tainted while it stood."""

    def __init__(self) -> None:
        self.pod_alive = False
        self.node_tainted = False
        self.tainted_over_the_pod = False
        self.removed_by: list[str] = []

    def __call__(self, event: Event) -> None:
        if event.key == "/nodes" and objects.name(event.obj) == NODE:
            self.node_tainted = _tainted(event.obj)
        elif event.key == "/pods" and objects.name(event.obj) == "guarded":
            self.pod_alive = event.type != "DELETED" and not objects.is_deleting(event.obj)
            if objects.is_deleting(event.obj) and not self.removed_by:
                conditions = objects.status(event.obj).get("conditions") or []
                self.removed_by = [
                    str(c.get("reason")) for c in conditions if c.get("type") == "DisruptionTarget"
                ]
        else:
            return
        if self.pod_alive and self.node_tainted:
            self.tainted_over_the_pod = True


async def _guarded_pod(client: InMemoryKubeClient) -> None:
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
        namespace=NS,
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guarded", "namespace": NS, "labels": {"app": "guarded"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "vllm", "image": "vllm:v1"}]},
    }
    await client.create(PODS, pod, namespace=NS)

    async def protected() -> bool:
        budget = await client.get(PDBS, "guarded", namespace=NS)
        status = budget.get("status") or {}
        return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

    await eventually(protected, 10, "the pod Ready and its budget allowing no disruption")


async def test_a_drain_on_a_lagging_pod_cache_asks_the_budget_instead_of_tainting_over_the_pod() -> None:
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=1, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    cluster = EmbeddedCluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = LaggingPodWatch.for_cluster(cluster)
    operator.caught_up = asyncio.Event()
    manager = Manager(operator, leader_election=None, handle_signals=False)
    for setup in (profile_controller.setup, plan_controller.setup, node_controller.setup):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    journal = Journal()
    cluster.server.store.subscribe(journal)
    try:
        await manager.cache_synced.wait()
        # Bound after the drain's cache was filled, and never delivered to it until caught_up.
        await _guarded_pod(client)
        await client.create(kinds.PARTITIONINGPROFILES, profile("to-cpx", "cpx", "64"))
        await client.create(PLANS, plan("p", "to-cpx", max_parallel=1, max_unavailable=1))

        async def held() -> dict[str, Any] | None:
            nps = (await client.list(kinds.NODEPARTITIONINGS))["items"]
            for np in nps:
                for c in objects.status(np).get("conditions") or []:
                    if c.get("type") == "DrainCompleted" and c.get("reason") == "EvictionBlocked":
                        return dict(c)
            return None if journal.pod_alive else {"message": f"pod removed by {journal.removed_by}"}

        blocked = await eventually(held, 20, "the drain held by the budget (or the pod gone)")
        assert journal.pod_alive, blocked["message"]
        assert "PodDisruptionBudget serving/guarded" in blocked["message"], blocked
        node = await client.get(NODES, NODE)
        assert node["spec"].get("unschedulable") is True and not _tainted(node)
        assert not journal.tainted_over_the_pod

        # The cache catches up and the budget allows the disruption: the pod leaves through the
        # Eviction API, and only then is the node tainted and repartitioned.
        operator.caught_up.set()
        await client.patch(PDBS, "guarded", {"spec": {"minAvailable": 0}}, namespace=NS)

        async def completed() -> bool:
            got = await client.get(PLANS, "p")
            return (got.get("status") or {}).get("phase") == "Completed"

        await eventually(completed, 30, "the plan Completed")
        assert journal.removed_by == ["EvictionByEvictionAPI"]
        assert not journal.tainted_over_the_pod
    finally:
        manager.stop()
        await task
        await client.close()
        await operator.close()
        await cluster.stop()

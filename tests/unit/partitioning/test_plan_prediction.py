"""The plan admits in the reconcile that deletes a child, on the view the delete leaves, and only then.

A node relabelled out of the plan while its admitted child has not started yet: deleting that child
frees its slot, and the next node is admitted in the same reconcile. If the delete leaves something
else than the decision foresaw (the NodePartitioning controller added its finalizer, which the cache
did not show yet, so the child is terminating and still holds its slot), nothing is admitted on the
prediction and the plan is looked at again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from aiplane.controllers.partitioning.plan import PlanController
from aiplane.controllers.partitioning.vocabulary import FINALIZER
from aiplane.kube.clock import FakeClock
from aiplane.kube.controller import Request, Result
from aiplane.kube.events import EventRecorder
from aiplane.kube.resources import NODES
from aiplane.kube.shape import Shaped
from aiplane.sim.client import InMemoryKubeClient
from tests.unit.partitioning.test_plan_controller import (
    FLEET,
    NPS,
    PLANS,
    POOL,
    PROFILE_DOCS,
    PROFILES,
    is_admitted,
    make_ready,
    plan_body,
)
from tests.unit.partitioning.test_plan_index import EventInformer

ROLLOUT = Request(None, "rollout")


class Harness:
    """The plan controller on informers the test feeds (``deliver``: the watch catches up)."""

    def __init__(self, client: InMemoryKubeClient, plans: EventInformer, nodes: EventInformer) -> None:
        self.client = client
        self.plans = plans
        self.nodes = nodes
        self.nps = EventInformer()
        profiles = EventInformer()
        self.controller = PlanController(
            client,
            cast(Any, plans),
            cast(Any, nodes),
            cast(Any, profiles),
            cast(Any, self.nps),
            EventRecorder(client, "test"),
            FakeClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC)),
        )
        self.profiles = profiles
        self.reconcile = Shaped(self.controller, self.controller.clock)

    async def deliver(self) -> None:
        for np in (await self.client.list(NPS))["items"]:
            if self.nps.get(np["metadata"]["name"]) != np:
                self.nps.put(np)
        self.plans.put(await self.client.get(PLANS, "rollout"))

    async def admitted(self) -> list[str]:
        items = (await self.client.list(NPS))["items"]
        return sorted(np["spec"]["nodeName"] for np in items if is_admitted(np))

    async def relabel_out(self, node: str) -> None:
        """The node leaves the inference pool (the watch shows it at once)."""
        obj = await self.client.get(NODES, node)
        del obj["metadata"]["labels"][POOL]
        self.nodes.put(await self.client.replace(NODES, obj))


async def _rolling(client: InMemoryKubeClient) -> Harness:
    """A plan over the fleet with one node admitted (``mi300x-0``), the caches caught up."""
    for name in ("mi300x-cpx", "mi300x-spx"):
        await client.create(PROFILES, PROFILE_DOCS[name])
        await make_ready(client, name)
    plan = await client.create(PLANS, plan_body())
    harness = Harness(client, EventInformer([plan]), EventInformer((await client.list(NODES))["items"]))
    for name in ("mi300x-cpx", "mi300x-spx"):
        harness.profiles.put(await client.get(PROFILES, name))
    for _ in range(3):
        await harness.reconcile(ROLLOUT)
        await harness.deliver()
    assert await harness.admitted() == ["mi300x-0"]
    return harness


async def test_deleting_a_child_that_never_started_admits_the_next_node_in_the_same_reconcile() -> None:
    client = InMemoryKubeClient.fresh(fleet=FLEET)
    try:
        harness = await _rolling(client)
        await harness.relabel_out("mi300x-0")
        assert await harness.reconcile(ROLLOUT) is None
        assert await harness.admitted() == ["mi300x-1"]
        assert "rollout-mi300x-0" not in {np["metadata"]["name"] for np in (await client.list(NPS))["items"]}
    finally:
        await client.close()


async def test_a_delete_that_leaves_the_child_terminating_admits_nothing_and_looks_again() -> None:
    client = InMemoryKubeClient.fresh(fleet=FLEET)
    try:
        harness = await _rolling(client)
        # The NodePartitioning controller picked the node up: its finalizer, not yet in the cache.
        await client.patch(NPS, "rollout-mi300x-0", {"metadata": {"finalizers": [FINALIZER]}})
        await harness.relabel_out("mi300x-0")
        assert await harness.reconcile(ROLLOUT) == Result(requeue=True)
        assert await harness.admitted() == ["mi300x-0"]  # terminating, its slot still held
        await harness.deliver()
        assert await harness.reconcile(ROLLOUT) is None
        assert await harness.admitted() == ["mi300x-0"]  # maxParallel 1: mi300x-1 waits for it
        client.reset_counts()
        assert await harness.reconcile(ROLLOUT) is None
        assert client.writes == 0
    finally:
        await client.close()

"""The plan controller's incremental index equals the from-scratch decisions, and an event costs O(1).

``PlanIndex`` keeps one plan's selection, children and rollup counts up to date per Node and
NodePartitioning event (recomputing them over the fleet on every event made a rollout cost
O(fleet²)). The pure functions are the specification: after any sequence of events, the index must
say exactly what ``select_nodes``, ``rollup``, ``children_by_node`` and ``node_statuses`` say over
the same objects. The counting tests hold the work per event to a constant as the fleet grows.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.partitioning import admission, plan_status
from aiplane.controllers.partitioning.identity import children_by_node, np_name
from aiplane.controllers.partitioning.plan_index import PlanIndex, build_index, index_key
from aiplane.controllers.partitioning.selection import select_nodes
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    NodeView,
    node_partitioning_view,
    node_view,
    plan_view,
    profile_view,
)
from aiplane.controllers.partitioning.vocabulary import ADMITTED_ANNOTATION
from tests.unit.partitioning.test_plan_decide import (
    T0,
    make_node,
    make_np,
    make_plan,
    other_plan_np,
    profiles,
)

NODES = [f"gpu-{i}" for i in range(5)]
PHASES = [
    "",
    "Pending",
    "Draining",
    "Applying",
    "WaitingOperator",
    "Verifying",
    "Succeeded",
    "Failed",
    "Skipped",
]


def _node(name: str, variant: int) -> dict[str, Any]:
    """Variants: inference MI300X (selected), training (another rule), no pool (not selected),
    an inference control-plane node (excluded), both pools' labels cannot be had on one key."""
    if variant == 0:
        return make_node(name)
    if variant == 1:
        return make_node(name, pool="training")
    if variant == 2:
        return make_node(name, pool=None)
    return make_node(name, **{"node-role.kubernetes.io/control-plane": ""})


def _child(plan: dict[str, Any], node: str, phase: str, flags: int) -> dict[str, Any]:
    np = make_np(
        plan,
        node,
        phase or None,
        admitted=bool(flags & 1),
        dry_run=bool(flags & 2),
        deleting=bool(flags & 4),
        profile="mi300x-spx" if flags & 8 else "mi300x-cpx",
    )
    if flags & 16:
        np["status"] = {**np.get("status", {}), "lastError": "boom", "retries": 2}
    return np


_event = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), st.integers(0, 4)),  # 4: delete
    st.tuples(st.just("child"), st.sampled_from(NODES), st.sampled_from(PHASES), st.integers(0, 31)),
    st.tuples(st.just("gone"), st.sampled_from(NODES)),
    st.tuples(st.just("other"), st.sampled_from(NODES), st.booleans()),  # another plan's NP on it
    st.tuples(st.just("oldname"), st.sampled_from(NODES), st.booleans()),  # a second child, other name
    st.tuples(st.just("collide"), st.sampled_from(NODES), st.booleans()),  # our name, another plan
)


class World:
    """Nodes and NodePartitionings by name, and an index fed with the same events."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.view = plan_view(plan)
        self.profiles = {name: profile_view(p) for name, p in profiles().items()}
        self.nodes: dict[str, NodeView] = {}
        self.nps: dict[str, NodePartitioningView] = {}
        self.index = PlanIndex(self.view, self.profiles, index_key(self.view, self.profiles))

    def put_node(self, name: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.nodes.pop(name, None)
            self.index.put_node(name, None)
        else:
            self.nodes[name] = node_view(obj)
            self.index.put_node(name, self.nodes[name])

    def put_np(self, name: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.nps.pop(name, None)
            self.index.put_np(name, None)
        else:
            self.nps[name] = node_partitioning_view(obj)
            self.index.put_np(name, self.nps[name])

    def apply(self, event: tuple[Any, ...]) -> None:
        kind, node = event[0], event[1]
        if kind == "node":
            self.put_node(node, None if event[2] == 4 else _node(node, event[2]))
        elif kind == "child":
            self.put_np(np_name("mi300x-inference-cpx", node), _child(self.plan, node, event[2], event[3]))
        elif kind == "gone":
            self.put_np(np_name("mi300x-inference-cpx", node), None)
        elif kind == "other":
            self.put_np(f"other-plan-{node}", other_plan_np(node) if event[2] else None)
        elif kind == "oldname":
            np = _child(self.plan, node, "Succeeded", 0)
            np["metadata"]["name"] = f"legacy-{node}"
            self.put_np(f"legacy-{node}", np if event[2] else None)
        else:
            # Another plan's object holding this plan's name for `node`, on some other node.
            name = np_name("mi300x-inference-cpx", node)
            holder = other_plan_np("gpu-elsewhere")
            holder["metadata"]["name"] = name
            self.put_np(name, holder if event[2] else None)

    def check(self) -> None:
        view, index = self.view, self.index
        sel = select_nodes(view, list(self.nodes.values()), self.profiles, list(self.nps.values()))
        assert index.selection() == sel
        children = plan_status.this_plans(view, self.nps.values())
        assert index.rollup(view) == plan_status.rollup(view, sel, children)
        assert index.entries() == plan_status.node_entries(children)
        kept = children_by_node(view, children)
        assert index.kept == kept
        assert index.awaiting == sorted(n for n, np in kept.items() if admission.awaiting_admission(np))
        assert index.revocable == {n for n, np in kept.items() if admission.admitted_not_started(np)}
        assert index.slots == admission.rollout_counts(kept.values())


@settings(max_examples=150, deadline=None)
@given(st.lists(_event, max_size=30))
def test_the_index_says_what_the_pure_functions_say_after_any_events(events: list[tuple[Any, ...]]) -> None:
    world = World(make_plan())
    for event in events:
        world.apply(event)
        world.check()


@settings(max_examples=100, deadline=None)
@given(st.lists(_event, max_size=20), st.lists(st.booleans(), min_size=20, max_size=20))
def test_node_statuses_are_restamped_as_from_scratch(
    events: list[tuple[Any, ...]], writes: list[bool]
) -> None:
    """The index restamps only changed entries when the previous status is the one it last made; the
    from-scratch ``node_statuses`` over the same entries and previous status must agree exactly."""
    world = World(make_plan())
    previous: dict[str, Any] = {}
    rv = "1"
    for i, (event, written) in enumerate(zip(events, writes, strict=False)):
        world.apply(event)
        now = T0 + timedelta(seconds=i + 1)
        listed, changed = world.index.node_statuses(previous, rv, now)
        expected = plan_status.node_statuses(world.index.entries(), previous, plan_status.format_time(now))
        assert listed == expected
        assert changed == (expected != previous.get("nodeStatuses", []))
        if written:  # the status write went through: the next previous status is this list
            previous = {"nodeStatuses": copy.deepcopy(listed)}
            rv = str(i + 2)
            world.index.written(rv, listed)


def test_a_rebuild_equals_the_events_that_led_there() -> None:
    world = World(make_plan())
    for i, node in enumerate(NODES):
        world.apply(("node", node, i % 4))
        world.apply(("child", node, PHASES[i], i))
    world.apply(("other", NODES[0], True))
    rebuilt = build_index(
        world.view, world.profiles, world.index.key, list(world.nodes.items()), list(world.nps.items())
    )
    assert rebuilt.selection() == world.index.selection()
    assert rebuilt.rollup(world.view) == world.index.rollup(world.view)


# --- counting: the work of one event does not grow with the fleet ----------------------------------


def _rolled_out_index(size: int) -> tuple[PlanIndex, dict[str, Any]]:
    plan = make_plan()
    view = plan_view(plan)
    profs = {name: profile_view(p) for name, p in profiles().items()}
    names = [f"gpu-{i:04d}" for i in range(size)]
    index = build_index(
        view,
        profs,
        index_key(view, profs),
        [(n, node_view(make_node(n))) for n in names],
        [(np_name("mi300x-inference-cpx", n), node_partitioning_view(make_np(plan, n))) for n in names],
    )
    index.selection()
    return index, plan


def _visits_per_event(size: int) -> int:
    index, plan = _rolled_out_index(size)
    node = f"gpu-{size // 2:04d}"
    before = index.visits
    # A rollout's events for one node: admitted, its phases, its node relabelled by the DCM step.
    for phase in ("Pending", "Draining", "Applying", "WaitingOperator", "Verifying", "Succeeded"):
        np = make_np(plan, node, phase, admitted=True)
        index.put_np(np["metadata"]["name"], node_partitioning_view(np))
    index.put_node(node, node_view(make_node(node, **{"dcm.amd.com/gpu-config-profile": "cpx"})))
    index.selection()
    index.rollup(plan_view(plan))
    return index.visits - before


def test_an_event_costs_the_index_the_same_work_on_10_and_on_100_nodes() -> None:
    small, large = _visits_per_event(10), _visits_per_event(100)
    assert small == large
    assert small <= 14  # two visits per NodePartitioning event (out, in) and one per Node event


def test_admission_reads_only_as_many_candidates_as_it_admits() -> None:
    index, plan = _rolled_out_index(100)
    view = plan_view(plan)
    assert len(index.awaiting) == 100
    read: list[str] = []

    class Counted(list[str]):
        def __iter__(self) -> Any:
            for node in super().__iter__():
                read.append(node)
                yield node

    admitted = admission.admit_from(
        view, index.slots, Counted(index.awaiting), eligible=index.selection().admissible
    )
    assert admitted == index.awaiting[: view.limits.max_parallel]
    assert len(read) == view.limits.max_parallel


def test_the_admission_annotation_moves_a_node_out_of_the_candidates() -> None:
    index, plan = _rolled_out_index(3)
    np = make_np(plan, "gpu-0001", "Pending")
    np["metadata"]["annotations"] = {ADMITTED_ANNOTATION: np["spec"]["desiredHash"]}
    index.put_np(np["metadata"]["name"], node_partitioning_view(np))
    assert index.awaiting == ["gpu-0000", "gpu-0002"]
    assert index.revocable == {"gpu-0001"}
    assert index.slots.in_progress == 1


# --- the controller: a NodePartitioning event costs its plan reconcile O(1) ----------------------


class EventInformer:
    """An informer the test feeds: it keeps objects and calls the handlers, as a watch would."""

    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects or []}
        self.handlers: list[dict[str, Any]] = []
        self.stale = False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)

    def list(self) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def keys(self) -> list[str]:
        return list(self.objects)

    def add_handler(self, **handlers: Any) -> None:
        self.handlers.append(handlers)
        for obj in self.objects.values():
            if handlers.get("on_add"):
                handlers["on_add"](obj)

    def put(self, obj: dict[str, Any]) -> None:
        old = self.objects.get(obj["metadata"]["name"])
        self.objects[obj["metadata"]["name"]] = obj
        for handlers in self.handlers:
            if old is None and handlers.get("on_add"):
                handlers["on_add"](obj)
            elif old is not None and handlers.get("on_update"):
                handlers["on_update"](old, obj)


async def _work_of_one_status_change(size: int) -> tuple[int, int, int]:
    """(index visits, NodePartitioning views built, index rebuilds) of the plan reconcile that follows
    one NodePartitioning's phase change, on a fleet of ``size`` nodes the plan selects."""
    from aiplane.controllers.partitioning import plan as plan_module
    from aiplane.kube.clock import FakeClock
    from aiplane.kube.controller import Request
    from aiplane.kube.events import EventRecorder
    from aiplane.kube.resources import NODES
    from aiplane.kube.shape import Shaped
    from aiplane.sim.client import InMemoryKubeClient
    from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
    from tests.unit.partitioning.test_plan_controller import NPS, PLANS, PROFILE_DOCS, PROFILES, make_ready

    fleet = Fleet(
        nodePools=[NodePool(name="gpu", count=size, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    client = InMemoryKubeClient.fresh(fleet=fleet)
    try:
        await client.create(PROFILES, PROFILE_DOCS["mi300x-cpx"])
        await make_ready(client, "mi300x-cpx")
        body = {
            "apiVersion": "infrastructure.silogen.ai/v1alpha1",
            "kind": "PartitioningPlan",
            "metadata": {"name": "rollout"},
            "spec": {
                "rollout": {"maxParallel": 2, "maxUnavailable": 2},
                "rules": [{"selector": {"matchLabels": {}}, "profileRef": {"name": "mi300x-cpx"}}],
            },
        }
        plans = EventInformer([await client.create(PLANS, body)])
        nodes = EventInformer((await client.list(NODES))["items"])
        profiles = EventInformer([await client.get(PROFILES, "mi300x-cpx")])
        nps = EventInformer()
        reconciler = plan_module.PlanController(
            client,
            cast(Any, plans),
            cast(Any, nodes),
            cast(Any, profiles),
            cast(Any, nps),
            EventRecorder(client, "test"),
            FakeClock(T0),
        )
        reconcile = Shaped(reconciler, reconciler.clock)

        async def settle() -> None:
            for _ in range(4):  # the controller writes, the "watch" delivers, until nothing moves
                await reconcile(Request(None, "rollout"))
                for np in (await client.list(NPS))["items"]:
                    if nps.get(np["metadata"]["name"]) != np:
                        nps.put(np)
                plans.put(await client.get(PLANS, "rollout"))

        await settle()
        admitted = [np for np in nps.list() if np["metadata"].get("annotations")]
        assert len(admitted) == 2 and len(nps.list()) == size
        index = reconciler.indexes["rollout"]
        visits, rebuilds = index.visits, reconciler.rebuilds
        built: list[Any] = []
        real = plan_module.node_partitioning_view
        plan_module.node_partitioning_view = lambda obj: built.append(obj) or real(obj)  # type: ignore[assignment]
        try:
            # The NodePartitioning controller takes the first admitted node: Draining.
            np = admitted[0]
            np = await client.patch(
                NPS, np["metadata"]["name"], {"status": {"phase": "Draining"}}, subresource="status"
            )
            nps.put(np)
            await reconcile(Request(None, "rollout"))
        finally:
            plan_module.node_partitioning_view = real  # type: ignore[assignment]
        status = (await client.get(PLANS, "rollout"))["status"]
        assert status["summary"]["applying"] == 1  # it did see the change
        return index.visits - visits, len(built), reconciler.rebuilds - rebuilds
    finally:
        await client.close()


async def test_a_node_partitioning_event_costs_the_plan_the_same_on_10_and_100_nodes() -> None:
    small = await _work_of_one_status_change(10)
    large = await _work_of_one_status_change(100)
    assert small == large
    visits, views, rebuilds = large
    assert rebuilds == 0  # no pass over the caches
    assert views <= 2  # the changed object (and the status write's own overlay at most)
    assert visits <= 4

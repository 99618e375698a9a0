"""The PartitioningPlan controller's decision (``plan_decide.decide``) as a pure function.

Built on the index of ``test_plan_index`` fed with random Nodes and NodePartitionings: the decision
must admit what the from-scratch specification (``children_by_node``, ``revoke``, ``admit``) admits
on the view its own deletes and revocations leave, never more nodes than ``maxParallel`` and
``maxUnavailable`` allow, and nothing on a view it cannot trust (stale informers, an apply of its
own, a child whose view rests on an unconditional write).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.partitioning import admission
from aiplane.controllers.partitioning.identity import children_by_node, is_child
from aiplane.controllers.partitioning.plan_decide import PlanDecision, PlanObserved, decide
from aiplane.controllers.partitioning.views import NodePartitioningView
from tests.unit.partitioning.test_plan_decide import T0, make_node, make_np, make_plan
from tests.unit.partitioning.test_plan_index import NODES, World, _event

NOW = T0 + timedelta(minutes=5)


def _observed(world: World, *, fresh: bool = True, inexact: frozenset[str] = frozenset()) -> PlanObserved:
    index = world.index
    return PlanObserved(
        plan=world.plan,
        view=world.view,
        profiles=world.profiles,
        index=index,
        selection=index.selection(),
        unchecked=tuple(sorted(index.unchecked)),
        fresh=fresh,
        inexact=inexact,
    )


def _after(world: World, decision: PlanDecision) -> dict[str, NodePartitioningView]:
    """This plan's children once the decision's deletes, revocations and admissions are done."""
    children = {n: np for n, np in world.nps.items() if is_child(world.view, np)}
    for delete in decision.deletes:
        if delete.gone:
            children.pop(delete.np.name, None)
        else:
            children[delete.np.name] = dataclasses.replace(delete.np, deleting=True)
    for np in decision.revoke:
        children[np.name] = dataclasses.replace(children[np.name], admitted_hash="")
    for np in decision.admit:
        children[np.name] = dataclasses.replace(children[np.name], admitted_hash=np.desired_hash)
    return children


#: A rollout in flight: selected, unselected and deleted nodes; children Pending (admitted or not),
#: in progress, failed, done or being deleted.
_rollout_event = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from([0, 0, 0, 2, 4])),
    st.tuples(
        st.just("child"),
        st.sampled_from(NODES),
        st.sampled_from(["", "Pending", "Pending", "Draining", "Applying", "Failed", "Succeeded"]),
        st.sampled_from([0, 0, 1, 1, 4, 5]),
    ),
    st.tuples(st.just("gone"), st.sampled_from(NODES)),
)
_events = st.one_of(st.lists(_event, max_size=30), st.lists(_rollout_event, max_size=30))
_limits = st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans())


def _world(events: list[tuple[Any, ...]], limits: tuple[int, int, bool]) -> World:
    parallel, unavailable, paused = limits
    world = World(make_plan(rollout={"maxParallel": parallel, "maxUnavailable": unavailable}, paused=paused))
    for event in events:
        world.apply(event)
    # Every target node with a child (otherwise the decision creates one and admits nothing).
    for node in world.index.selection().targets:
        if node not in world.index.kept:
            world.put_np(f"mi300x-inference-cpx-{node}", make_np(world.plan, node))
    return world


@settings(max_examples=300, deadline=None)
@given(_events, _limits, st.sets(st.sampled_from(NODES), max_size=2))
def test_admission_never_exceeds_the_rollout_limits(
    events: list[tuple[Any, ...]], limits: tuple[int, int, bool], inexact_nodes: set[str]
) -> None:
    world = _world(events, limits)
    inexact = frozenset(n.name for n in world.nps.values() if n.node_name in inexact_nodes)
    decision = decide(_observed(world, inexact=inexact), NOW)
    if not decision.admit:
        return
    view = world.view
    kept = children_by_node(view, list(_after(world, decision).values()))
    counts = admission.rollout_counts(kept.values())
    assert counts.in_progress <= view.limits.max_parallel
    assert counts.unavailable <= view.limits.max_unavailable
    admitted = [np.node_name for np in decision.admit]
    assert admitted == sorted(admitted)
    assert set(admitted) <= world.index.selection().admissible
    assert not view.paused and not view.dry_run


@settings(max_examples=300, deadline=None)
@given(_events, _limits)
def test_the_decision_admits_what_the_specification_admits_after_its_own_writes(
    events: list[tuple[Any, ...]], limits: tuple[int, int, bool]
) -> None:
    world = _world(events, limits)
    decision = decide(_observed(world), NOW)
    if decision.applies:
        assert not decision.admission  # an apply leaves its child inexact: nothing admitted on it
        return
    view = world.view
    # The from-scratch view after the deletes: a terminating kept child is inexact (no admission).
    after_deletes = _after(world, dataclasses.replace(decision, revoke=(), admit=()))
    kept = children_by_node(view, list(after_deletes.values()))
    terminating = {d.np.name for d in decision.deletes if not d.gone}
    if any(np.name in terminating for np in kept.values()):
        assert not decision.admission
        return
    assert decision.admission
    eligible = world.index.selection().admissible
    revoked = admission.revoke(view, kept, eligible=eligible)
    assert [np.node_name for np in decision.revoke] == revoked
    for node in revoked:
        kept[node] = dataclasses.replace(kept[node], admitted_hash="")
    assert [np.node_name for np in decision.admit] == admission.admit(view, kept, eligible=eligible)


@settings(max_examples=100, deadline=None)
@given(_events, _limits)
def test_nothing_is_admitted_or_revoked_on_stale_informers(
    events: list[tuple[Any, ...]], limits: tuple[int, int, bool]
) -> None:
    world = _world(events, limits)
    decision = decide(_observed(world, fresh=False), NOW)
    assert decision.stale and not decision.admission and not decision.admit and not decision.revoke
    # The children are still converged: staleness holds back admission only.
    assert decision.applies == decide(_observed(world), NOW).applies


def test_a_kept_child_with_an_unconditional_write_pending_holds_admission_back() -> None:
    world = _world([], (2, 2, False))
    for node in NODES:
        world.put_node(node, make_node(node))
        world.put_np(f"mi300x-inference-cpx-{node}", make_np(world.plan, node))
    assert [np.node_name for np in decide(_observed(world), NOW).admit] == NODES[:2]
    held = decide(_observed(world, inexact=frozenset({f"mi300x-inference-cpx-{NODES[3]}"})), NOW)
    assert not held.admission and not held.admit


def test_a_gone_child_frees_its_slot_in_the_same_decision() -> None:
    """A node relabelled out of the plan whose admitted child never started (no finalizer): its
    delete frees the slot, and the next node is admitted in the same reconcile."""
    world = _world([], (1, 1, False))
    for node in NODES:
        world.put_node(node, make_node(node))
        world.put_np(f"mi300x-inference-cpx-{node}", make_np(world.plan, node, admitted=node == NODES[0]))
    assert decide(_observed(world), NOW).admit == ()
    world.put_node(NODES[0], None)
    decision = decide(_observed(world), NOW)
    assert [d.np.node_name for d in decision.deletes] == [NODES[0]] and decision.deletes[0].gone
    assert [np.node_name for np in decision.admit] == [NODES[1]]

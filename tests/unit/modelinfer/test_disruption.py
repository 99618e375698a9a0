"""ModelInfer disruption: the group views, the arbiter's verdict in ordinals, the budget writes, the
condition, and the decision's released/held/surge rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.modelinfer.decide import CreateRoleReplica, DeleteGroup, GroupSummary, plan
from aiplane.controllers.modelinfer.disruption import (
    budget_writes,
    cordoned_groups,
    decide,
    desired_budgets,
    disruption_condition,
    left_to_the_drain,
    spends_floor,
    unschedulable_changed,
)
from aiplane.controllers.modelinfer.plan_types import Plan
from tests.unit.modelinfer.test_decide import cluster, inp

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MI = {"metadata": {"name": "mi", "namespace": "ns", "uid": "u1"}}


def pod(group: str, node: str, *, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{group}-x", "labels": {"modelinfer.volcano.sh/group-name": group}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}}


def test_a_group_stands_on_the_cordoned_nodes_of_its_live_pods() -> None:
    pods = [pod("mi-0", "n1"), pod("mi-0", "n2"), pod("mi-1", "n2", terminating=True), pod("mi-2", "n3")]
    assert cordoned_groups("mi", pods, {"n1", "n2"}) == {0: ("n1", "n2")}


def test_only_cordon_and_uncordon_reconcile() -> None:
    node = {"metadata": {"name": "n"}, "spec": {}, "status": {"conditions": []}}
    heartbeat = {**node, "status": {"conditions": [{"type": "Ready"}]}}
    assert not unschedulable_changed(node, heartbeat)
    assert unschedulable_changed(node, {**node, "spec": {"unschedulable": True}})
    assert not unschedulable_changed({**node, "spec": {"unschedulable": False}}, node)


def test_one_group_released_within_the_floor_the_other_held_and_named() -> None:
    d = decide(
        mi_name="mi",
        replicas=2,
        max_unavailable=1,
        available={0: True, 1: True},
        cordoned={0: ("n1",), 1: ("n1",)},
        released=(),
    )
    assert (d.released, d.held, d.floor) == (frozenset({0}), frozenset({1}), 1)
    assert d.held_message() == (
        "group mi-1 (PodDisruptionBudget mi-1) on cordoned node n1 waits: releasing it would leave "
        "0 of 2 groups available, below replicas - maxUnavailable = 1"
    )


def test_a_release_in_flight_stays_and_the_floor_never_goes_below_zero() -> None:
    d = decide(
        mi_name="mi", replicas=1, max_unavailable=3, available={0: True}, cordoned={0: ("n",)}, released=(0,)
    )
    assert (d.released, d.held, d.floor) == (frozenset({0}), frozenset(), 0)
    # Released, but no pod on a cordoned node any more (rebuilt): protected again.
    d = decide(mi_name="mi", replicas=1, max_unavailable=0, available={0: True}, cordoned={}, released=(0,))
    assert d.released == frozenset()


def summaries(*states: tuple[int, str]) -> list[GroupSummary]:
    return [GroupSummary(o, "r1", state, state == "Running", 4, 4) for o, state in states]  # type: ignore[arg-type]


def test_budget_writes_protect_first_release_later_and_nothing_at_steady_state() -> None:
    groups = summaries((0, "Running"), (1, "Running"), (2, "Deleting"))
    protected, keep = desired_budgets(MI, groups, frozenset())
    assert keep == {"mi-2"}
    assert protected["mi-0"]["spec"]["minAvailable"] == 4
    assert budget_writes({**protected, "mi-2": {"metadata": {"name": "mi-2"}}}, protected, keep) == []
    released, _ = desired_budgets(MI, groups, frozenset({0}))
    live = {"mi-0": protected["mi-0"]}
    live["mi-1"] = {**protected["mi-1"], "spec": {**protected["mi-1"]["spec"], "minAvailable": 0}}
    live["mi-9"] = {"metadata": {"name": "mi-9", "uid": "x"}}
    writes = budget_writes(live, released, keep)
    assert [(w.op.value, w.name, w.release, w.protect) for w in writes] == [
        ("update", "mi-1", False, True),  # protect again first
        ("update", "mi-0", True, False),  # then release
        ("delete", "mi-9", False, False),  # its group is gone
    ]


def test_a_group_being_deleted_that_the_drain_may_take_has_its_budget_released() -> None:
    """Its Ready pods on the cordoned node are left to the drain; a protected budget would refuse the
    drain and nobody would remove them (a rolling update deleting a failed group stalled a drain)."""
    groups = summaries((0, "Deleting"), (1, "Running"))
    desired, keep = desired_budgets(MI, groups, frozenset({0}))
    assert keep == set() and desired["mi-0"]["spec"]["minAvailable"] == 0
    live = {name: {**body, "spec": {**body["spec"], "minAvailable": 4}} for name, body in desired.items()}
    live["mi-1"] = desired["mi-1"]
    writes = budget_writes(live, desired, keep)
    assert [(w.op.value, w.name, w.release) for w in writes] == [("update", "mi-0", True)]
    # Not released by the arbiter: kept as it is until the group is gone.
    assert desired_budgets(MI, groups, frozenset())[1] == {"mi-0"}


def test_budgets_select_exactly_the_group() -> None:
    body = desired_budgets(MI, summaries((3, "Creating")), frozenset())[0]["mi-3"]
    assert body["metadata"]["name"] == "mi-3"
    assert body["spec"] == {
        "selector": {
            "matchLabels": {"modelinfer.volcano.sh/name": "mi", "modelinfer.volcano.sh/group-name": "mi-3"}
        },
        "minAvailable": 4,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    ref = body["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("ModelInfer", "mi", "u1", True)


def test_condition_appears_only_once_something_waited() -> None:
    quiet = decide(mi_name="mi", replicas=2, max_unavailable=1, available={0: True}, cordoned={}, released=())
    assert disruption_condition([], quiet, generation=1, now=NOW) == []
    held = decide(
        mi_name="mi",
        replicas=1,
        max_unavailable=0,
        available={0: True},
        cordoned={0: ("n",)},
        released=(),
    )
    conditions = disruption_condition([], held, generation=1, now=NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("DisruptionHeld", "True", "FloorReached")
    ]
    again = disruption_condition(conditions, quiet, generation=1, now=NOW)
    assert [(c["status"], c["reason"]) for c in again] == [("False", "NoDisruptionHeld")]


# --- the decision's side ------------------------------------------------------------------------------


def test_a_released_group_is_spent_capacity_for_the_rolling_update() -> None:
    pods, services = cluster([0, 1, 2], revision="r0")
    rollout = plan(inp(pods, services, max_unavailable=1))
    assert [a for a in rollout.actions if isinstance(a, DeleteGroup)] == [
        DeleteGroup(2, "rolling update to revision r1")
    ]
    drained = plan(inp(pods, services, max_unavailable=1, released=frozenset({0}), cordoned=frozenset({0})))
    assert not [a for a in drained.actions if isinstance(a, DeleteGroup)]  # the drain took the budget


def test_held_groups_get_surge_replacements_that_go_once_the_drain_is_over() -> None:
    pods, services = cluster([0, 1])
    limits: dict[str, Any] = {"replicas": 2, "max_unavailable": 0, "max_surge": 1}
    held = plan(inp(pods, services, **limits, cordoned=frozenset({0, 1}), held=frozenset({0, 1})))
    assert {a.ordinal for a in held.actions if isinstance(a, CreateRoleReplica)} == {2}  # min(maxSurge, held)
    pods, services = cluster([0, 1, 2])
    # The surge group stays while a group stands on a cordoned node...
    assert plan(inp(pods, services, **limits, cordoned=frozenset({1}), released=frozenset({1}))).actions == ()
    # ... and goes once none does.
    assert plan(inp(pods, services, **limits)).actions == (DeleteGroup(2, "scale down"),)


def test_ready_pods_of_released_groups_on_cordoned_nodes_are_left_to_the_drain() -> None:
    def ready(p: dict[str, Any], value: str = "True") -> dict[str, Any]:
        return {**p, "status": {"conditions": [{"type": "Ready", "status": value}]}}

    pods = [
        ready(pod("mi-0", "n1")),  # released, ready, on the cordoned node: the drain's
        ready(pod("mi-0", "n2")),  # elsewhere: ours to delete
        ready(pod("mi-1", "n1")),  # protected group
        ready(pod("mi-2", "n1"), "False"),  # not ready: never refused, so no drain retries it
    ]
    pods[1]["metadata"] = {**pods[1]["metadata"], "name": "mi-0-y"}
    assert left_to_the_drain("mi", pods, {"n1"}, frozenset({0, 2})) == {"mi-0-x"}


def test_only_steps_that_take_serving_capacity_are_confirmed_against_the_api_server() -> None:
    """Releasing an available group, or deleting a pod of one, is decided again on a LIST (the Pod
    cache may lag the Node cache); deleting what is down already, creating or protecting is not."""
    d = decide(
        mi_name="mi",
        replicas=3,
        max_unavailable=1,
        available={0: True, 1: True, 2: True},
        cordoned={0: ("n1",)},
        released=(),
    )
    empty = Plan(actions=(), requeue_after=None, groups=())
    assert d.released == frozenset({0})
    assert spends_floor(d, empty, frozenset(), [])  # a new release of an available group
    assert not spends_floor(d, empty, frozenset({0}), [])  # the same release, already written
    held = decide(
        mi_name="mi", replicas=3, max_unavailable=1, available={0: True, 1: True}, cordoned={}, released=()
    )
    gone = Plan(actions=(DeleteGroup(1, "scale down"),), requeue_after=None, groups=())
    assert spends_floor(held, gone, frozenset(), [])  # deleting an available group
    down = Plan(actions=(DeleteGroup(2, "rolling update"),), requeue_after=None, groups=())
    assert not spends_floor(held, down, frozenset(), [])  # group 2 serves nothing: no LIST needed
    make = Plan(actions=(CreateRoleReplica(2, "r", 0, "r1", (0,), False),), requeue_after=None, groups=())
    assert not spends_floor(held, make, frozenset(), [])

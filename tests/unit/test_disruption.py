"""The group-aware disruption arbiter: floors held, releases granted in order, idempotent, and a
drain that keeps asking eventually gets every group when the floor leaves room."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.disruption import (
    GroupView,
    arbitrate,
    budget_differs,
    group_budget,
    is_released,
)

OWNER = {
    "apiVersion": "workload.volcano.sh/v1alpha1",
    "kind": "ModelInfer",
    "metadata": {"name": "mi", "uid": "u1"},
}


def g(i: int, *, available: bool = True, cordoned: bool = False, released: bool = False) -> GroupView:
    return GroupView(f"mi-{i}", i, available, ("n1",) if cordoned else (), released)


def test_one_group_at_a_time_with_max_unavailable_one() -> None:
    result = arbitrate([g(0, cordoned=True), g(1, cordoned=True)], floor=1)
    assert result.released == {"mi-0"}
    assert result.waiting == ("mi-1",)
    assert result.serving == 1


def test_groups_not_on_cordoned_nodes_stay_protected_even_when_released_before() -> None:
    result = arbitrate([g(0, released=True), g(1, available=False)], floor=0)
    assert result.released == frozenset()


def test_unavailable_groups_go_at_once_and_count_against_the_floor() -> None:
    # Group 1 is already down: with floor 1 of 3 groups, one more available group may go.
    groups = [g(0, cordoned=True), g(1, available=False, cordoned=True), g(2, cordoned=True)]
    result = arbitrate(groups, floor=1)
    assert result.released == {"mi-0", "mi-1"}
    assert result.waiting == ("mi-2",)


def test_a_release_in_flight_is_kept_and_spends_the_budget() -> None:
    result = arbitrate([g(0, cordoned=True), g(1, cordoned=True, released=True)], floor=1)
    assert result.released == {"mi-1"}
    assert result.waiting == ("mi-0",)


def test_no_room_when_the_floor_is_every_group() -> None:
    result = arbitrate([g(0, cordoned=True), g(1)], floor=2)
    assert result.released == frozenset()
    assert result.waiting == ("mi-0",)


def test_budget_object_and_release_reading() -> None:
    body = group_budget(
        name="mi-0",
        namespace="ns",
        selector={"modelinfer.volcano.sh/group-name": "mi-0"},
        pods=4,
        released=False,
        labels={"modelinfer.volcano.sh/name": "mi"},
        owner=OWNER,
    )
    assert body["spec"]["minAvailable"] == 4
    assert body["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert not is_released(body)
    released = group_budget(
        name="mi-0",
        namespace="ns",
        selector={"modelinfer.volcano.sh/group-name": "mi-0"},
        pods=4,
        released=True,
        labels={"modelinfer.volcano.sh/name": "mi"},
        owner=OWNER,
    )
    assert is_released(released)
    assert budget_differs(body, released)
    live = {**body, "status": {"disruptionsAllowed": 0}, "spec": {**body["spec"], "extra": 1}}
    assert not budget_differs(live, body)


group_views = st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=0, max_size=8).map(
    lambda xs: [g(i, available=a, cordoned=c, released=r) for i, (a, c, r) in enumerate(xs)]
)


@given(group_views, st.integers(0, 8))
def test_a_release_never_takes_serving_below_the_floor(groups: list[GroupView], floor: int) -> None:
    before = sum(1 for x in groups if x.available and not (x.released and x.on_cordoned))
    result = arbitrate(groups, floor)
    assert result.serving == sum(1 for x in groups if x.available and x.name not in result.released)
    assert result.serving >= min(before, floor)
    for x in groups:
        if not x.on_cordoned:
            assert x.name not in result.released
        elif not x.available:
            assert x.name in result.released
    # Maximal: a group waits only when releasing it would cross the floor.
    if result.waiting:
        assert result.serving - 1 < floor


@given(group_views, st.integers(0, 8))
def test_arbitration_is_idempotent(groups: list[GroupView], floor: int) -> None:
    first = arbitrate(groups, floor)
    applied = [replace(x, released=x.name in first.released) for x in groups]
    assert arbitrate(applied, floor) == first


@given(st.integers(1, 6), st.data())
def test_a_persistent_drain_moves_every_group_while_the_floor_holds(n: int, data: st.DataObject) -> None:
    """Every group starts on cordoned nodes. Each step, the arbiter decides, then one random thing
    happens: the drain evicts a released group (down, gone from the cordoned node) or a group being
    rebuilt elsewhere comes back. Serving never drops below the floor, and every group moves."""
    floor = data.draw(st.integers(0, n - 1))
    groups = {i: g(i, cordoned=True) for i in range(n)}
    for _ in range(6 * n):
        result = arbitrate(groups.values(), floor)
        groups = {i: replace(x, released=x.name in result.released) for i, x in groups.items()}
        assert sum(1 for x in groups.values() if x.available and not x.released) >= floor
        evictable = [i for i, x in groups.items() if x.released and x.on_cordoned]
        rebuilding = [i for i, x in groups.items() if not x.available and not x.on_cordoned]
        moves = [("evict", i) for i in evictable] + [("rebuild", i) for i in rebuilding]
        if not moves:
            break
        kind, i = data.draw(st.sampled_from(moves))
        x = groups[i]
        if kind == "evict":
            groups[i] = replace(x, available=False, cordoned_nodes=())
        else:
            groups[i] = replace(x, available=True)
    assert all(not x.on_cordoned and x.available for x in groups.values())


# --- the one DisruptionHeld rule and budget flips (shared by ModelInfer and the DCD) ---------------


def test_disruption_held_true_while_held_false_after_absent_if_never() -> None:
    from datetime import UTC, datetime

    from aiplane.controllers.disruption import held_condition

    now = datetime(2026, 1, 1, tzinfo=UTC)
    others = [{"type": "Available", "status": "True"}]
    assert held_condition(others, None, generation=1, now=now) == others  # never drained: no condition
    held = held_condition(others, "group x waits", generation=2, now=now)
    assert [(c["type"], c["status"], c.get("reason")) for c in held] == [
        ("Available", "True", None),
        ("DisruptionHeld", "True", "FloorReached"),
    ]
    released = held_condition(held, None, generation=2, now=now)
    assert (released[1]["status"], released[1]["reason"]) == ("False", "NoDisruptionHeld")
    assert held_condition(released, None, generation=2, now=now) == released  # steady: unchanged


def test_budget_flip_names_the_event() -> None:
    from aiplane.controllers.disruption import BudgetFlip, budget_flip

    protected = {"spec": {"minAvailable": 2}}
    released = {"spec": {"minAvailable": 0}}
    assert budget_flip(protected, released) is BudgetFlip.RELEASED
    assert BudgetFlip.RELEASED.value == "DisruptionAllowed"
    assert budget_flip(released, protected) is BudgetFlip.PROTECTED
    assert BudgetFlip.PROTECTED.value == "DisruptionProtected"
    assert budget_flip(None, released) is None  # a budget created released is not a flip
    assert budget_flip(protected, protected) is None

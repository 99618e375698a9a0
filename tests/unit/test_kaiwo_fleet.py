"""The KaiwoConfig controller's incremental fleet view: the same pools as ``discover_pools``, O(1) per event.

A singleton controller that rebuilt every node view and every pool sum on each Node event would make
a rollout cost it O(fleet²). These tests hold the incremental sums to the pure specification after
any sequence of adds, updates and deletes, and count the work one event costs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.kaiwo.fleet import Fleet
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION
from aiplane.controllers.kaiwo.pools import discover_pools, node_view
from tests.unit.test_kaiwo_pools import MIXES, node

CONTROL = {"node-role.kubernetes.io/control-plane": ""}
CPU_ONLY: dict[str, str] = {}

# One event: (node index, None to delete it, or (mix, cordoned by partitioning, cordoned by someone
# else, labels)).
states = st.tuples(
    st.sampled_from(MIXES),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, CONTROL, CPU_ONLY]),
)
events = st.lists(st.tuples(st.integers(0, 5), st.none() | states), max_size=40)


def _node(i: int, state: tuple[tuple[str, int], bool, bool, dict[str, str] | None]) -> dict[str, Any]:
    (resource, count), partitioning, cordoned, labels = state
    return node(
        f"n{i}",
        resource,
        count,
        cordoned_by="np/x" if partitioning else None,
        unschedulable=cordoned,
        labels=labels,
    )


@given(events, st.booleans())
def test_incremental_pools_equal_the_pure_discovery(script: list[Any], exclude: bool) -> None:
    fleet = Fleet()
    nodes: dict[str, dict[str, Any]] = {}
    for i, state in script:
        name = f"n{i}"
        if state is None:
            if name in nodes:
                fleet.delete(nodes.pop(name))
            continue
        obj = _node(i, state)
        if name in nodes:
            fleet.update(nodes[name], obj)
        else:
            fleet.put(obj)
        nodes[name] = obj
        # Read between events too: what the fleet keeps between reads must follow every event.
        assert fleet.pools(exclude) == discover_pools([node_view(n) for n in nodes.values()], exclude)
    expected = discover_pools([node_view(n) for n in nodes.values()], exclude)
    assert fleet.pools(exclude) == expected
    members = {n: p.name for p in expected for n in p.nodes}
    assert {n: fleet.pool_of(n, exclude) for n in nodes} == {n: members.get(n) for n in nodes}


def test_one_node_event_builds_one_view_whatever_the_fleet() -> None:
    fleet = Fleet()
    for i in range(500):
        fleet.put(node(f"n{i}"))
    fleet.dirty.clear()
    before = fleet.builds
    fleet.update(node("n7"), node("n7", "amd.com/gpu", 64, cordoned_by="np/x"))
    (pool,) = fleet.pools(False)
    assert fleet.builds - before == 1
    assert fleet.dirty == {"n7"}  # the taint/label check then looks at that node only
    assert str(pool.quota["amd.com/gpu"]) == str(499 * 8 + 64)
    assert pool.partitioning


def test_events_that_change_no_pool_rebuild_nothing_and_others_rebuild_once() -> None:
    """A rollout's events mostly leave the pools as they were, and none changes their members: the
    reconcile each of them wakes must not sort the whole fleet again (O(fleet) per event)."""
    fleet = Fleet()
    for i in range(200):
        fleet.put(node(f"n{i}", annotations={TAINTED_ANNOTATION: "true"} if i % 2 else None))
    (pool,) = fleet.pools(False)
    tainted = fleet.tainted_names()
    assert tainted == tuple(sorted(f"n{i}" for i in range(1, 200, 2)))
    builds = fleet.pool_builds
    fleet.update(node("n7"), node("n7", annotations={TAINTED_ANNOTATION: "true"}, labels=None))
    assert fleet.pools(False) == [pool] and fleet.pool_builds == builds  # nothing a pool reads changed
    assert fleet.tainted_names() is tainted
    # Cordoned by the partitioning controller: the pool now says so, but its members are not re-sorted.
    fleet.update(node("n7"), node("n7", cordoned_by="np/x", annotations={TAINTED_ANNOTATION: "true"}))
    (cordoned,) = fleet.pools(False)
    assert cordoned.partitioning and cordoned.nodes is pool.nodes
    fleet.update(node("n7"), node("n7", annotations={TAINTED_ANNOTATION: "true"}))
    builds = fleet.pool_builds
    fleet.update(node("n7"), node("n7", "amd.com/gpu", 64, annotations={TAINTED_ANNOTATION: "true"}))
    (changed,) = fleet.pools(False)
    fleet.pools(False)
    assert fleet.pool_builds == builds + 1
    assert str(changed.quota["amd.com/gpu"]) == str(199 * 8 + 64)
    fleet.update(node("n8"), node("n8", annotations={TAINTED_ANNOTATION: "true"}))
    assert "n8" in fleet.tainted_names()
    fleet.delete(node("n9"))
    assert "n9" not in fleet.tainted_names() and "n9" not in fleet.pools(False)[0].nodes


def test_node_events_parse_each_distinct_amount_once(monkeypatch: Any) -> None:
    """Every Node event builds a view; a fleet repeats the same few amounts, so the quantities are
    parsed once per distinct amount, not once per event (a tenth of the controller's cost)."""
    from aiplane.controllers.kaiwo import pools

    pools._quantity.cache_clear()
    parsed: list[str] = []
    real = pools.parse_resource_list

    def counting(resources: Any) -> Any:
        parsed.extend(str(v) for v in resources.values())
        return real(resources)

    monkeypatch.setattr(pools, "parse_resource_list", counting)
    fleet = Fleet()
    for i in range(300):
        fleet.put(node(f"n{i}"))
    for i in range(300):
        fleet.update(node(f"n{i}"), node(f"n{i}", cordoned_by="np/x"))
    # capacity cpu 192, memory 2Ti, GPUs 8; allocatable cpu 190, memory 2000Gi, GPUs 8 (the same pair)
    assert sorted(parsed) == sorted(["192", "2Ti", "8", "190", "2000Gi"])
    (pool,) = fleet.pools(False)
    assert str(pool.quota["amd.com/gpu"]) == str(300 * 8)

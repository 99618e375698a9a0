"""The pure parts of the Volcano gang scheduler-lite: task statuses, Volcano's messages, all-or-nothing
planning with running accounting (a hypothesis property), the enqueue check and the PodGroup phase."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.sim.agents.gang_plan import (
    GPU_BINPACK_SCORING,
    VOLCANO_DEFAULT_SCORING,
    VolcanoScoring,
    binpack_score,
    enqueueable,
    job_fit_error,
    nodeorder_score,
    plan_gang,
    podgroup_for,
    podgroup_name_for,
    podgroup_phase,
    set_condition,
    task_minimums_met,
    task_order,
    task_status,
    volcano_filter_node,
    volcano_find_node,
    volcano_fit_error,
)
from aiplane.sim.agents.scheduler_filters import Ledger, NodeInfo, NodeStatus, PodInfo, add_into

Obj = dict[str, Any]


def gpu_node(name: str, gpus: int = 8, **kw: Any) -> NodeInfo:
    return NodeInfo(name=name, allocatable={"cpu": 96_000, "amd.com/gpu": gpus, "pods": 110}, **kw)


def gpu_pod(name: str, gpus: int = 8, task: str = "", **kw: Any) -> PodInfo:
    return PodInfo("ns", name, requests={"amd.com/gpu": gpus}, task=task, **kw)


def test_task_status_follows_volcano() -> None:
    assert task_status({"spec": {}, "status": {"phase": "Pending"}}) == "Pending"
    assert task_status({"spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}) == "Bound"
    assert task_status({"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}) == "Running"
    assert task_status({"metadata": {"deletionTimestamp": "t"}, "spec": {"nodeName": "n"}}) == "Releasing"
    assert task_status({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}}) == "Succeeded"
    assert task_status({"spec": {"nodeName": "n"}, "status": {"phase": "Failed"}}) == "Failed"


def test_volcano_messages() -> None:
    statuses = [NodeStatus(("Insufficient amd.com/gpu",), True)] * 3 + [
        NodeStatus(("node(s) were unschedulable",))
    ]
    assert volcano_fit_error(4, statuses) == (
        "0/4 nodes are unavailable: 1 node(s) were unschedulable, 3 Insufficient amd.com/gpu."
    )
    assert volcano_fit_error(0, []) == "0/0 nodes are unavailable"
    assert (
        job_fit_error({"Pending": 4}, 4, {"Unschedulable": 4})
        == "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable"
    )
    assert job_fit_error(
        {"Pending": 3, "Running": 1},
        4,
        {"Schedulable": 1, "Unschedulable": 2},
        ("p-1", "0/2 nodes are unavailable"),
    ) == (
        "pod group is not ready, 1 Running, 3 Pending, 4 minAvailable; Pending: 1 Schedulable, 2 Unschedulable."
        " Origin reason is p-1: 0/2 nodes are unavailable"
    )


def test_volcano_checks_resources_first_and_names_only_the_first() -> None:
    big = PodInfo("ns", "p", requests={"cpu": 200_000, "amd.com/gpu": 9})
    cordoned = gpu_node("n", unschedulable=True)
    assert volcano_filter_node(big, cordoned, {}, 0) == NodeStatus(("Insufficient cpu",), True)
    assert volcano_filter_node(gpu_pod("p"), cordoned, {}, 0) == NodeStatus(("node(s) were unschedulable",))
    tainted = gpu_node("n", taints=({"key": "k", "value": "v", "effect": "NoSchedule"},))
    assert volcano_filter_node(gpu_pod("p"), tainted, {}, 0) == NodeStatus(
        ("node(s) had untolerated taint {k: v}",)
    )
    full = NodeInfo(name="n", allocatable={"pods": 1, "amd.com/gpu": 8})
    assert volcano_filter_node(gpu_pod("p", 1), full, {}, 1) == NodeStatus(
        ("node(s) pod number exceeded",), True
    )


def test_a_gang_that_fits_is_planned_whole() -> None:
    nodes = [gpu_node("a"), gpu_node("b")]
    pods = [gpu_pod(f"p-{i}", 4) for i in range(4)]
    ledger = Ledger()
    plan = plan_gang(pods, {}, 4, {}, nodes, ledger)
    assert plan.ready and not plan.failures
    assert sorted(plan.assignments.values()) == ["a", "a", "b", "b"]
    assert ledger.requested("a") == {"amd.com/gpu": 8}


def test_a_gang_that_does_not_fit_stops_at_the_first_pod_that_fits_nowhere() -> None:
    nodes = [gpu_node("a"), gpu_node("b")]
    pods = [gpu_pod(f"p-{i}") for i in range(4)]
    plan = plan_gang(pods, {}, 4, {}, nodes, Ledger())
    assert not plan.ready
    assert list(plan.assignments) == [("ns", "p-0"), ("ns", "p-1")]
    assert list(plan.failures) == [("ns", "p-2")]  # p-3 is undetermined


def test_a_formed_gang_binds_later_pods_one_by_one() -> None:
    plan = plan_gang([gpu_pod("extra-0"), gpu_pod("extra-1")], {"": 4}, 4, {}, [gpu_node("a")], Ledger())
    assert (
        plan.ready
        and plan.assignments == {("ns", "extra-0"): "a"}
        and list(plan.failures) == [("ns", "extra-1")]
    )


def test_min_member_below_the_pods_lets_a_partial_allocation_form_the_gang() -> None:
    pods = [gpu_pod(f"p-{i}") for i in range(3)]
    plan = plan_gang(pods, {}, 2, {}, [gpu_node("a"), gpu_node("b")], Ledger())
    assert plan.ready and len(plan.assignments) == 2 and list(plan.failures) == [("ns", "p-2")]


def test_task_minimums() -> None:
    assert task_minimums_met({"entry": 1, "worker": 3}, 4, {"entry": 1, "worker": 3})
    assert not task_minimums_met({"entry": 0, "worker": 4}, 4, {"entry": 1, "worker": 3})
    assert task_minimums_met(
        {"worker": 1}, 1, {"entry": 1, "worker": 3}
    )  # minMember below their sum: skipped
    # The entry does not fit anywhere (16 GPUs), the workers do: enough pods, but not the entry's task.
    pods = [gpu_pod("entry-0", 16, task="entry")] + [gpu_pod(f"w-{i}", 2, task="worker") for i in range(4)]
    plan = plan_gang(pods, {}, 4, {"entry": 1, "worker": 3}, [gpu_node("a")], Ledger(), total_tasks=5)
    assert len(plan.assignments) == 4 and not plan.ready


def test_enqueue_check_uses_the_overcommit_factor() -> None:
    total = {"amd.com/gpu": 16, "cpu": 96_000}
    assert enqueueable(None, total, {}, {})
    assert enqueueable({"amd.com/gpu": 16}, total, {}, {})
    assert enqueueable({"amd.com/gpu": 19}, total, {}, {})  # 16 * 1.2 = 19.2
    assert not enqueueable({"amd.com/gpu": 20}, total, {}, {})
    assert not enqueueable({"amd.com/gpu": 8}, total, {"amd.com/gpu": 8}, {"amd.com/gpu": 4})
    assert enqueueable({"amd.com/gpu": 8, "pods": 1000, "count/pods": 9}, total, {}, {})
    assert not enqueueable({"nvidia.com/gpu": 1}, total, {}, {})


def test_podgroup_phase() -> None:
    assert podgroup_phase("Pending", {"Pending": 4}, 4, False) == "Pending"
    assert podgroup_phase("Inqueue", {"Pending": 4}, 4, True) == "Inqueue"
    assert podgroup_phase("Inqueue", {"Bound": 4}, 4, False) == "Running"
    assert podgroup_phase("Inqueue", {"Running": 2, "Bound": 2}, 4, False) == "Running"
    assert podgroup_phase("Running", {"Running": 3, "Pending": 1}, 4, True) == "Unknown"
    assert podgroup_phase("Running", {"Running": 3}, 4, False) == "Pending"
    assert podgroup_phase("Running", {"Succeeded": 4}, 4, False) == "Completed"
    assert podgroup_phase("Running", {"Succeeded": 3, "Failed": 1}, 4, False) == "Running"
    assert podgroup_phase("Pending", {}, 0, False) == "Pending"


def test_conditions_keep_their_transition_until_they_change() -> None:
    first = set_condition([], "Unschedulable", "NotEnoughResources", "m", "t1")
    assert first[0]["type"] == "Unschedulable" and first[0]["status"] == "True"
    assert set_condition(first, "Unschedulable", "NotEnoughResources", "m", "t2") == first
    changed = set_condition(first, "Unschedulable", "NotEnoughResources", "m2", "t2")
    assert changed[0]["lastTransitionTime"] == "t2" and changed[0]["transitionID"] != first[0]["transitionID"]
    both = set_condition(changed, "Scheduled", "tasks in gang are ready to be scheduled", "", "t3")
    assert [c["type"] for c in both] == ["Unschedulable", "Scheduled"] and "message" not in both[1]


# --- all or nothing, never over-committed -----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=0, max_size=5),  # GPUs free per node
    st.lists(st.integers(1, 8), min_size=1, max_size=8),  # GPUs per gang pod
    st.data(),
)
def test_a_gang_is_planned_whole_or_not_at_all(
    free: list[int], requests: list[int], data: st.DataObject
) -> None:
    nodes = [gpu_node(f"n{i}", gpus=8) for i in range(len(free))]
    base = {f"n{i}": {"amd.com/gpu": 8 - f} for i, f in enumerate(free)}
    min_member = data.draw(st.integers(1, len(requests)))
    pods = [gpu_pod(f"p-{i}", r) for i, r in enumerate(requests)]
    ledger = Ledger(base)
    plan = plan_gang(pods, {}, min_member, {}, nodes, ledger)
    assert plan.ready is (len(plan.assignments) >= min_member)
    if min_member == len(pods):
        assert plan.ready is (len(plan.assignments) == len(pods))
    for n in nodes:
        assert ledger.requested(n.name).get("amd.com/gpu", 0) <= 8
    # Binding only a ready plan (what the agent does) never leaves a gang partially bound.
    bound = plan.assignments if plan.ready else {}
    assert len(bound) == 0 or len(bound) >= min_member


def test_the_podgroup_volcanos_controller_creates_for_a_lone_pod() -> None:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u-rs", "controller": True}]
    owned: Obj = {
        "metadata": {
            "name": "web-1",
            "namespace": "ns",
            "uid": "u-pod",
            "ownerReferences": refs,
        },
        "spec": {"priorityClassName": "high"},
    }
    assert podgroup_name_for(owned) == "podgroup-u-rs"  # one group for all pods of a controller
    group = podgroup_for(owned, {"cpu": 1500, "amd.com/gpu": 1})
    assert group["metadata"]["name"] == "podgroup-u-rs"
    assert group["metadata"]["ownerReferences"] == refs
    assert group["spec"] == {
        "minMember": 1,
        "minResources": {"amd.com/gpu": "1", "cpu": "1500m"},
        "priorityClassName": "high",
    }
    lone = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-p"}, "spec": {}}
    assert podgroup_name_for(lone) == "podgroup-u-p"
    assert podgroup_for(lone, {})["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "p",
            "uid": "u-p",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


# --- node scoring (binpack + nodeorder) and task order ------------------------------------------------


def place_gangs(
    gangs: list[list[int]], nodes: list[NodeInfo], scoring: VolcanoScoring = GPU_BINPACK_SCORING
) -> tuple[list[bool], dict[str, dict[str, int]]]:
    """Schedule GPU gangs one after the other as the agent does: each planned on the committed state,
    committed only when the whole gang fits."""
    used: dict[str, dict[str, int]] = {}
    placed = []
    for g, sizes in enumerate(gangs):
        pods = [gpu_pod(f"g{g}-w-{i}", gpus) for i, gpus in enumerate(sizes)]
        plan = plan_gang(task_order(pods), {}, len(pods), {}, nodes, Ledger(used), scoring=scoring)
        placed.append(plan.ready)
        if plan.ready:
            by_key = {p.key: p for p in pods}
            for key, node in plan.assignments.items():
                add_into(used.setdefault(node, {}), by_key[key].requests)
    return placed, used


def test_binpack_keeps_whole_nodes_free_so_a_third_4_4_2_2_gang_fits() -> None:
    nodes = [gpu_node(f"n{i}") for i in range(5)]
    placed, used = place_gangs([[4, 4, 2, 2]] * 3, nodes)
    assert placed == [True, True, True]
    # packed: n0-n2 full, the third gang on the last two
    assert sorted(u["amd.com/gpu"] for u in used.values()) == [4, 8, 8, 8, 8]


def test_binpack_score_follows_volcanos_formula() -> None:
    node = NodeInfo("n", allocatable={"cpu": 10_000, "memory": 100, "amd.com/gpu": 8})
    pod = PodInfo("ns", "p", requests={"cpu": 1_000, "memory": 10, "amd.com/gpu": 2})
    used = {"cpu": 4_000, "memory": 40, "amd.com/gpu": 2}
    # (5/10 + 50/100 + 4/8) / 3 * 100
    assert binpack_score(pod, node, used, GPU_BINPACK_SCORING) == 50.0
    # default weights: cpu and memory only
    assert binpack_score(pod, node, used, VOLCANO_DEFAULT_SCORING) == 50.0
    assert binpack_score(gpu_pod("g", 2), node, used, VOLCANO_DEFAULT_SCORING) == 0.0
    assert binpack_score(gpu_pod("g", 2), node, used, GPU_BINPACK_SCORING) == 50.0
    # a resource that would overflow scores 0 but still counts its weight
    assert binpack_score(gpu_pod("g", 8), node, used, GPU_BINPACK_SCORING) == 0.0


def test_nodeorder_least_allocated_and_balanced_allocation() -> None:
    node = NodeInfo("n", allocatable={"cpu": 10_000, "memory": 1_000})
    pod = PodInfo("ns", "p", requests={"cpu": 5_000, "memory": 500})
    no_binpack = VolcanoScoring(binpack_weight=0, balanced_resource=0)
    assert nodeorder_score(pod, node, {}, no_binpack) == 50  # (50 + 50) / 2
    assert nodeorder_score(pod, node, {"cpu": 5_000}, no_binpack) == 25  # (0 + 50) / 2
    balanced_only = VolcanoScoring(least_requested=0)
    assert nodeorder_score(pod, node, {"cpu": 5_000}, balanced_only) == 75  # 100 * (1 - |1 - .5| / 2)


def test_volcano_prefers_the_most_packed_node_but_taint_toleration_outweighs_it() -> None:
    soft = ({"key": "k", "value": "v", "effect": "PreferNoSchedule"},)
    nodes = [gpu_node("a"), gpu_node("b", taints=soft), gpu_node("c")]
    ledger = Ledger({"b": {"amd.com/gpu": 6}, "c": {"amd.com/gpu": 4}})
    assert volcano_find_node(gpu_pod("p", 2), nodes, ledger)[0] == "c"
    # tainttoleration (weight 3, normalized to 0..100) beats binpack's 100 vs 25
    assert volcano_find_node(gpu_pod("p", 2), nodes[:2], Ledger({"b": {"amd.com/gpu": 6}}))[0] == "a"
    assert volcano_find_node(gpu_pod("p", 2), [gpu_node("y"), gpu_node("x")], Ledger())[0] == "x"


def test_task_order_is_volcanos_priority_then_pod_index_then_creation() -> None:
    pods = [
        gpu_pod("job-w-10", created="1"),
        gpu_pod("job-w-2", created="2"),
        gpu_pod("job-m-0", created="3"),
        gpu_pod("job-w-1", created="0", priority=5),
        gpu_pod("lonely", created="0"),
    ]
    order = [p.name for p in task_order(pods)]
    assert order[0] == "job-w-1"
    assert order.index("job-m-0") < order.index("job-w-2") < order.index("job-w-10")


def ffd_fits(sizes: list[int], free: list[int]) -> bool:
    free = list(free)
    for size in sorted(sizes, reverse=True):
        for i, room in enumerate(free):
            if room >= size:
                free[i] -= size
                break
        else:
            return False
    return True


@settings(max_examples=200, deadline=None)
@given(
    used=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=6),
)
def test_a_gang_that_one_node_can_hold_is_always_placed(used: list[int], sizes: list[int]) -> None:
    """Guaranteed whatever the scores: if one node has room for the whole gang, every pod finds a node
    in its turn (that node at least), so the gang is placed; and no node is ever overcommitted."""
    nodes = [gpu_node(f"n{i}") for i in range(len(used))]
    base = {f"n{i}": {"amd.com/gpu": u} for i, u in enumerate(used)}
    pods = [gpu_pod(f"g-w-{i}", s) for i, s in enumerate(sizes)]
    ledger = Ledger(base)
    plan = plan_gang(task_order(pods), {}, len(pods), {}, nodes, ledger)
    for node in nodes:
        assert ledger.requested(node.name).get("amd.com/gpu", 0) <= 8
    if max(8 - u for u in used) >= sum(sizes):
        assert plan.ready


@settings(max_examples=300, deadline=None)
@given(
    gangs=st.lists(
        st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4).map(
            lambda s: sorted(s, reverse=True)
        ),
        min_size=1,
        max_size=6,
    ),
    node_count=st.integers(1, 5),
)
def test_power_of_two_gangs_that_fit_by_ffd_are_all_placed(gangs: list[list[int]], node_count: int) -> None:
    """On equal 8-GPU nodes with power-of-two requests, tasks listed largest first: whenever first-fit
    decreasing packs every gang's pods into the nodes, binpack places every gang (best fit with
    divisible sizes never strands capacity that a later pod could use)."""
    nodes = [gpu_node(f"n{i}") for i in range(node_count)]
    if not ffd_fits([s for g in gangs for s in g], [8] * node_count):
        return
    placed, _ = place_gangs(gangs, nodes)
    assert all(placed)

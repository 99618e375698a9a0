"""Pool discovery, quota maths and the GPU taint decision of the KaiwoConfig controller (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.quantity import Quantity
from aiplane.controllers.kaiwo import kueue
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION, node_patch
from aiplane.controllers.kaiwo.pools import discover_pools, held_quota, node_view
from aiplane.controllers.partitioning.vocabulary import CORDONED_BY_ANNOTATION

# Partition mixes a MI300X node can advertise: (resource name, count per node).
MIXES = [
    ("amd.com/gpu", 8),
    ("amd.com/gpu", 16),
    ("amd.com/gpu", 32),
    ("amd.com/gpu", 64),
    ("amd.com/cpx_nps4", 64),
]


def node(
    name: str,
    resource: str = "amd.com/gpu",
    count: int = 8,
    *,
    cordoned_by: str | None = None,
    unschedulable: bool = False,
    taints: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if cordoned_by:
        ann[CORDONED_BY_ANNOTATION] = cordoned_by
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "7",
            "labels": labels
            if labels is not None
            else {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "beta.amd.com/gpu.family.AI": "8"},
            "annotations": ann,
        },
        "spec": {"unschedulable": unschedulable or bool(cordoned_by), "taints": taints or []},
        "status": {
            "capacity": {"cpu": "192", "memory": "2Ti", "amd.com/gpu": "8"},
            "allocatable": {"cpu": "190", "memory": "2000Gi", resource: str(count)},
        },
    }


@given(st.lists(st.sampled_from(MIXES), min_size=1, max_size=12))
def test_quota_is_the_sum_of_allocatable_whatever_the_partition_mix(mix: list[tuple[str, int]]) -> None:
    views = [node_view(node(f"n{i}", r, c)) for i, (r, c) in enumerate(mix)]
    pools = discover_pools(views, exclude_control_plane=False)
    assert [p.name for p in pools] == ["amd-mi300x-8gpu-172core-1843gi"]  # partitioning keeps the pool
    for resource in {r for r, _ in mix}:
        assert pools[0].quota[resource] == Quantity(sum(c for r, c in mix if r == resource))
    assert pools[0].quota["cpu"] == Quantity(190 * len(mix))


@given(st.lists(st.sampled_from(MIXES), min_size=1, max_size=8), st.integers(0, 512))
def test_a_pool_being_partitioned_never_drops_below_the_queue(
    mix: list[tuple[str, int]], current: int
) -> None:
    views = [
        node_view(node(f"n{i}", r, c, cordoned_by="np/x" if i == 0 else None)) for i, (r, c) in enumerate(mix)
    ]
    (pool,) = discover_pools(views, exclude_control_plane=False)
    held = held_quota(pool, {"amd.com/gpu": Quantity(current)})
    assert held["amd.com/gpu"] == max(pool.quota.get("amd.com/gpu", Quantity(0)), Quantity(current))
    # Without a node in flight the computed quota applies, up or down.
    (settled,) = discover_pools([node_view(node(f"n{i}", r, c)) for i, (r, c) in enumerate(mix)], False)
    assert held_quota(settled, {"amd.com/gpu": Quantity(current)}) == dict(settled.quota)


def test_cordoned_by_someone_else_leaves_the_pool_and_control_plane_can_be_excluded() -> None:
    control = node("cp", labels={"node-role.kubernetes.io/control-plane": ""})
    views = [
        node_view(n)
        for n in (node("a"), node("b", unschedulable=True), node("c", cordoned_by="np/c"), control)
    ]
    pools = discover_pools(views, exclude_control_plane=True)
    assert [(p.name, p.nodes) for p in pools] == [("amd-mi300x-8gpu-172core-1843gi", ("a", "c"))]
    assert [p.gpu.vendor for p in discover_pools(views, exclude_control_plane=False)] == ["cpu", "amd"]


def test_cluster_queue_zero_fills_and_orders_like_kueue_requires() -> None:
    views = [node_view(node("a", "amd.com/cpx_nps4", 64)), node_view(node("b"))]
    views.append(node_view(node("cpu", labels={})))
    pools = discover_pools(views, False)
    owner = {"metadata": {"name": "kaiwo", "uid": "u1"}}
    cq = kueue.cluster_queue("kaiwo", "kaiwo", pools, {}, owner)
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "amd.com/cpx_nps4", "amd.com/gpu"]
    for flavor in group["flavors"]:  # Kueue's CEL rule: each flavor lists every covered resource, in order
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    assert group["flavors"][0]["name"].startswith("cpu-only-")
    assert cq["spec"]["cohort"] == "kaiwo" and cq["spec"]["namespaceSelector"] == {}
    assert kueue.is_ours(cq, "u1") and not kueue.is_ours(cq, "u2")
    # A real Kueue adds defaults and may respell quantities: not a difference.
    served = {"spec": {**cq["spec"], "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None"}}
    assert not kueue.spec_differs(cq, served)


def test_taint_added_removed_and_never_someone_elses() -> None:
    key = "kaiwo.silogen.ai/gpu"
    dcm = {"key": "amd-dcm", "value": "up", "effect": "NoExecute"}
    fresh = node_view(node("a", taints=[dcm]))
    patch = node_patch(fresh, "pool", True, key)
    assert patch is not None
    assert patch["spec"]["taints"] == [dcm, {"key": key, "value": "true", "effect": "NoSchedule"}]
    assert patch["metadata"]["annotations"] == {TAINTED_ANNOTATION: key}
    assert patch["metadata"]["resourceVersion"] == "7"  # a concurrent partitioning write is a conflict
    labels = {**fresh.labels, **patch["metadata"]["labels"]}
    ours = node_view(
        node("a", taints=patch["spec"]["taints"], annotations={TAINTED_ANNOTATION: key}, labels=labels)
    )
    assert node_patch(ours, "pool", True, key) is None  # steady state: nothing to write
    off = node_patch(ours, "pool", False, key)
    assert off is not None and off["spec"]["taints"] == [dcm]
    assert off["metadata"]["annotations"] == {TAINTED_ANNOTATION: None}
    # An administrator's taint with our key is not ours: never removed, never claimed.
    theirs = node_view(node("b", taints=[{"key": key, "value": "x", "effect": "NoSchedule"}], labels=labels))
    assert node_patch(theirs, "pool", True, key) is None
    assert node_patch(theirs, "pool", False, key) is None
    # CPU-only nodes are never tainted.
    cpu = node_view(
        {**node("c", labels={}), "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}
    )
    patch = node_patch(cpu, None, True, key)
    assert patch is None or "spec" not in patch

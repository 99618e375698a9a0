"""The pure parts of kube-scheduler-lite: pod requests, node affinity, filters in kube's plugin order, the
FitError message, node choice, and the capacity ledger (never over-committed: a hypothesis property)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.sim.agents.scheduler import capacity_node, with_pod_scheduled_false
from aiplane.sim.agents.scheduler_filters import (
    ERR_NO_NODES,
    Ledger,
    NodeAffinity,
    NodeInfo,
    NodeStatus,
    PodInfo,
    container_requests,
    filter_node,
    find_node,
    fit_error_message,
    fits_on_any,
    node_selector_requirement_matches,
    node_selector_term_matches,
    pod_requests,
    quantity_int,
    scheduling_order,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import Api, WriteOptions
from aiplane.sim.apiserver.store import ADDED, DELETED, MODIFIED, Event
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import DEFAULT_FLEET, Fleet, node_objects

Obj = dict[str, Any]
CONTROL_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def node(
    name: str = "n",
    *,
    cpu: str = "8",
    memory: str = "64Gi",
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
    ready: str = "True",
    pods: str = "110",
) -> NodeInfo:
    allocatable = {
        "cpu": quantity_int("cpu", cpu),
        "memory": quantity_int("memory", memory),
        "pods": int(pods),
    }
    if gpus:
        allocatable["amd.com/gpu"] = gpus
    return NodeInfo(
        name=name,
        labels=labels or {},
        taints=tuple(taints or ()),
        unschedulable=unschedulable,
        ready=ready,
        allocatable=allocatable,
    )


def pod(
    name: str = "p",
    *,
    gpus: int = 0,
    cpu: str | None = None,
    tolerations: list[Obj] | None = None,
    spec: Obj | None = None,
) -> PodInfo:
    limits: dict[str, str] = {}
    if gpus:
        limits["amd.com/gpu"] = str(gpus)
    if cpu:
        limits["cpu"] = cpu
    full: Obj = {"containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}], **(spec or {})}
    if tolerations:
        full["tolerations"] = tolerations
    return PodInfo.from_pod({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": full})


# --- requests --------------------------------------------------------------------------------------


def test_quantities_count_cpu_in_millicores_and_round_other_units_up() -> None:
    assert quantity_int("cpu", "1.5") == 1500
    assert quantity_int("cpu", "250m") == 250
    assert quantity_int("memory", "1Gi") == 2**30
    assert quantity_int("memory", "1.5") == 2  # Value() rounds up
    assert quantity_int("amd.com/gpu", 8) == 8
    assert quantity_int("cpu", "garbage") == 0


def test_limits_stand_in_for_missing_requests() -> None:
    container = {"resources": {"limits": {"cpu": "2", "amd.com/gpu": "1"}, "requests": {"cpu": "500m"}}}
    assert container_requests(container) == {"cpu": 500, "amd.com/gpu": 1}
    assert container_requests({}) == {}


def test_pod_requests_are_the_larger_of_containers_and_init_containers_plus_overhead() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"amd.com/gpu": "2"}}},
        ],
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
            {"name": "small", "resources": {"requests": {"cpu": "100m"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 3100, "memory": 2**30, "amd.com/gpu": 2}
    assert pod_requests({"containers": [{"name": "c", "image": "i"}]}) == {}


def test_sidecar_init_containers_add_to_the_containers() -> None:
    spec = {
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "migrate", "resources": {"requests": {"cpu": "2"}}},
        ],
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
    }
    # The sidecar runs beside the app (1 + 1) and beside the later init container (1 + 2).
    assert pod_requests(spec) == {"cpu": 3000}


# --- node affinity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["c"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["c"]}, True),
        ({"key": "missing", "operator": "NotIn", "values": ["c"]}, True),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "Exists"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "gpus", "operator": "Gt", "values": ["8"]}, False),
        ({"key": "gpus", "operator": "Lt", "values": ["9"]}, True),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not a number: no match
        ({"key": "missing", "operator": "Lt", "values": ["1"]}, False),
    ],
)
def test_node_selector_requirements(expr: Obj, expected: bool) -> None:
    assert node_selector_requirement_matches(expr, {"zone": "a", "gpus": "8"}) is expected


def test_invalid_requirements_fail_their_term() -> None:
    with pytest.raises(ValueError):
        node_selector_requirement_matches({"key": "gpus", "operator": "Gt", "values": ["x"]}, {"gpus": "8"})
    with pytest.raises(ValueError):
        node_selector_requirement_matches({"key": "gpus", "operator": "Near"}, {})
    bad = {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["1", "2"]}]}
    assert not node_selector_term_matches(bad, {"gpus": "8"}, "n")


def test_terms_and_match_fields() -> None:
    assert not node_selector_term_matches({}, {"a": "b"}, "n")  # an empty term matches nothing
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert node_selector_term_matches(by_name, {}, "n1")
    assert not node_selector_term_matches(by_name, {}, "n2")
    not_name = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
    assert node_selector_term_matches(not_name, {}, "n2") and not node_selector_term_matches(
        not_name, {}, "n1"
    )
    both = {**by_name, "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert node_selector_term_matches(both, {"zone": "a"}, "n1")
    assert not node_selector_term_matches(both, {"zone": "b"}, "n1")


def test_node_affinity_combines_selector_and_required_terms() -> None:
    required = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        ]
    }
    spec = {
        "nodeSelector": {"gpu": "amd"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
    }
    affinity = NodeAffinity.from_spec(spec)
    assert affinity.matches(node(labels={"gpu": "amd", "zone": "b"}))  # terms are ORed
    assert not affinity.matches(node(labels={"gpu": "amd", "zone": "c"}))
    assert not affinity.matches(node(labels={"gpu": "nvidia", "zone": "a"}))  # and ANDed with the selector
    assert NodeAffinity.from_spec({}).matches(node())
    none = NodeAffinity.from_spec(
        {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
            }
        }
    )
    assert not none.matches(node())


# --- nodes and filters -------------------------------------------------------------------------------


def test_node_info_from_the_fleet() -> None:
    nodes = {n["metadata"]["name"]: NodeInfo.from_node(n) for n in node_objects(DEFAULT_FLEET)}
    assert nodes["mi300x-0"].allocatable["amd.com/gpu"] == 8
    assert nodes["mi300x-0"].allocatable["cpu"] == 192_000
    assert nodes["h100-0"].allocatable["nvidia.com/gpu"] == 8
    assert nodes["control-0"].taints == (CONTROL_TAINT,)
    assert all(n.ready == "True" and not n.unschedulable for n in nodes.values())


def test_a_node_that_is_not_ready_has_the_lifecycle_controllers_taint() -> None:
    assert node(ready="True").effective_taints() == ()
    assert node(ready="False").effective_taints() == (
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    )
    assert node(ready="Unknown").effective_taints() == (
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    )
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}])
    assert filter_node(tolerant, node(ready="False"), {}, 0) is None


def test_filters_run_in_kube_plugin_order() -> None:
    gpu_pod = pod(gpus=4)
    cordoned = node(gpus=2, unschedulable=True, taints=[CONTROL_TAINT], labels={})
    assert filter_node(gpu_pod, cordoned, {}, 0) == NodeStatus(("node(s) were unschedulable",))
    tainted = node(gpus=2, taints=[CONTROL_TAINT])
    assert filter_node(gpu_pod, tainted, {}, 0) == NodeStatus(("node(s) had untolerated taint(s)",))
    assert filter_node(gpu_pod, tainted, {}, 0, taint_details=True) == NodeStatus(
        ("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",)
    )
    picky = pod(gpus=4, spec={"nodeSelector": {"pool": "x"}})
    assert filter_node(picky, node(gpus=2), {}, 0) == NodeStatus(
        ("node(s) didn't match Pod's node affinity/selector",)
    )
    assert filter_node(gpu_pod, node(gpus=2), {}, 0) == NodeStatus(
        ("Insufficient amd.com/gpu",), resolvable=True
    )
    assert filter_node(gpu_pod, node(gpus=8), {"amd.com/gpu": 4}, 0) is None
    assert filter_node(gpu_pod, node(gpus=8), {"amd.com/gpu": 5}, 0) is not None


def test_a_cordon_is_tolerated_with_the_unschedulable_taint_toleration() -> None:
    daemon = pod(
        tolerations=[
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
        ]
    )
    assert filter_node(daemon, node(unschedulable=True), {}, 0) is None


@pytest.mark.parametrize(
    ("taint", "blocks"),
    [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v", "effect": "NoExecute"}, True),
        ({"key": "k", "value": "v", "effect": "PreferNoSchedule"}, False),
    ],
)
def test_only_noschedule_and_noexecute_taints_block(taint: Obj, blocks: bool) -> None:
    assert (filter_node(pod(), node(taints=[taint]), {}, 0) is not None) is blocks
    tolerated = pod(tolerations=[{"key": "k", "operator": "Equal", "value": "v"}])
    assert filter_node(tolerated, node(taints=[taint]), {}, 0) is None


def test_every_insufficient_resource_is_named_after_too_many_pods() -> None:
    big = pod(gpus=9, cpu="16")
    status = filter_node(big, node(cpu="8", gpus=8, pods="3"), {}, 3)
    assert status == NodeStatus(
        ("Too many pods", "Insufficient cpu", "Insufficient amd.com/gpu"), resolvable=True
    )
    # A resource the node does not have at all is insufficient too.
    assert filter_node(pod(gpus=1), node(), {}, 0) == NodeStatus(
        ("Insufficient amd.com/gpu",), resolvable=True
    )


# --- the message -------------------------------------------------------------------------------------


def test_fit_error_message_matches_kube_scheduler() -> None:
    statuses = (
        [NodeStatus(("Insufficient amd.com/gpu",), resolvable=True)] * 4
        + [NodeStatus(("node(s) had untolerated taint(s)",))]
        + [NodeStatus(("node(s) didn't match Pod's node affinity/selector",))] * 8
    )
    assert fit_error_message(13, statuses) == (
        "0/13 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient amd.com/gpu, "
        "8 node(s) didn't match Pod's node affinity/selector. preemption: 0/13 nodes are available: "
        "4 No preemption victims found for incoming pod, 9 Preemption is not helpful for scheduling."
    )
    # Reasons of one node all count; the histogram sorts as strings ("12 …" before "3 …").
    many = [NodeStatus(("Insufficient cpu", "Insufficient memory"), resolvable=True)] * 12 + [
        NodeStatus(("node(s) were unschedulable",))
    ] * 3
    assert fit_error_message(15, many) == (
        "0/15 nodes are available: 12 Insufficient cpu, 12 Insufficient memory, 3 node(s) were unschedulable. "
        "preemption: 0/15 nodes are available: 12 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    assert fit_error_message(0, []) == ERR_NO_NODES == "no nodes available to schedule pods"


# --- choosing ------------------------------------------------------------------------------------------


def test_find_node_prefers_the_least_allocated_then_the_name() -> None:
    nodes = [node("b", gpus=8), node("a", gpus=8), node("c", gpus=8)]
    ledger = Ledger({"a": {"amd.com/gpu": 4}})
    chosen, failed = find_node(pod(gpus=2), nodes, ledger)
    assert (chosen, failed) == ("b", [])  # a is busier; b and c tie, b sorts first
    ledger.add("b", {"amd.com/gpu": 2})
    assert find_node(pod(gpus=2), nodes, ledger)[0] == "c"


def test_find_node_avoids_prefer_no_schedule_taints_and_follows_preferred_affinity() -> None:
    soft = {"key": "soft", "effect": "PreferNoSchedule"}
    nodes = [node("a", taints=[soft]), node("b", labels={"zone": "x"}), node("c")]
    assert find_node(pod(), nodes, Ledger())[0] == "b"
    preferred = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]
                        },
                    }
                ]
            }
        }
    }
    assert find_node(pod(spec=preferred), [node("a"), node("b", labels={"zone": "x"})], Ledger())[0] == "b"


def test_find_node_reports_every_node_that_does_not_fit() -> None:
    nodes = [node("a", gpus=1), node("b", taints=[CONTROL_TAINT]), node("c", gpus=8, unschedulable=True)]
    chosen, failed = find_node(pod(gpus=2), nodes, Ledger())
    assert chosen is None
    assert fit_error_message(len(nodes), failed) == (
        "0/3 nodes are available: 1 Insufficient amd.com/gpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    )


def test_scheduling_order_is_priority_then_age_then_name() -> None:
    old = PodInfo("ns", "b", created="2026-01-01T00:00:00Z")
    new = PodInfo("ns", "a", created="2026-01-02T00:00:00Z")
    urgent = PodInfo("ns", "z", priority=100, created="2026-01-03T00:00:00Z")
    assert [p.name for p in scheduling_order([new, old, urgent])] == ["z", "b", "a"]


def test_the_ledger_adds_tentative_placements_without_touching_its_base() -> None:
    base = {"a": {"amd.com/gpu": 2}}
    ledger = Ledger(base, {"a": 1})
    ledger.add("a", {"amd.com/gpu": 3, "cpu": 100})
    assert ledger.requested("a") == {"amd.com/gpu": 5, "cpu": 100} and ledger.pods("a") == 2
    assert base == {"a": {"amd.com/gpu": 2}}
    assert ledger.requested("b") == {} and ledger.pods("b") == 0


# --- events and conditions -----------------------------------------------------------------------------


def _event(type_: str, key: str, obj: Obj, old: Obj | None) -> Event:
    return Event(type_, key, obj, old, 1)


def test_capacity_events_name_the_node_that_may_now_take_a_pod() -> None:
    n = node_objects(DEFAULT_FLEET)[0]
    name = n["metadata"]["name"]
    assert capacity_node(_event(ADDED, "/nodes", n, None)) == name
    heartbeat = {**n, "metadata": {**n["metadata"], "annotations": {"x": "y"}}}
    assert capacity_node(_event(MODIFIED, "/nodes", heartbeat, n)) is None
    cordoned = {**n, "spec": {**n["spec"], "unschedulable": True}}
    assert capacity_node(_event(MODIFIED, "/nodes", n, cordoned)) == name
    assert capacity_node(_event(DELETED, "/nodes", n, n)) is None
    bound = {"metadata": {"name": "p"}, "spec": {"nodeName": "a"}, "status": {"phase": "Running"}}
    pending = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    failed = {**bound, "status": {"phase": "Failed"}}
    assert capacity_node(_event(DELETED, "/pods", bound, bound)) == "a"
    assert capacity_node(_event(MODIFIED, "/pods", failed, bound)) == "a"
    assert capacity_node(_event(DELETED, "/pods", pending, pending)) is None
    assert capacity_node(_event(MODIFIED, "/pods", bound, bound)) is None
    assert capacity_node(_event(MODIFIED, "/pods", bound, pending)) is None


def test_fits_on_any_checks_only_the_named_nodes() -> None:
    nodes = {"a": node("a", gpus=8), "b": node("b", gpus=1)}
    assert fits_on_any(pod(gpus=2), ["a", "gone"], nodes, Ledger())
    assert not fits_on_any(pod(gpus=2), ["b", "gone"], nodes, Ledger())
    assert not fits_on_any(pod(gpus=2), ["a"], nodes, Ledger({"a": {"amd.com/gpu": 7}}))


def test_pod_scheduled_false_is_written_only_when_it_changes() -> None:
    status = {"phase": "Pending", "conditions": []}
    first = with_pod_scheduled_false(status, "Unschedulable", "m1", "t1")
    assert first is not None
    assert first["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": "t1",
            "reason": "Unschedulable",
            "message": "m1",
        }
    ]
    assert with_pod_scheduled_false(first, "Unschedulable", "m1", "t2") is None
    second = with_pod_scheduled_false(first, "Unschedulable", "m2", "t2")
    assert second is not None and second["conditions"][0]["lastTransitionTime"] == "t1"  # no flip
    assert second["conditions"][0]["message"] == "m2"


# --- never over-commit ----------------------------------------------------------------------------------

node_strategy = st.builds(
    lambda i, cpu, gpus, pods: NodeInfo(
        name=f"n{i}", allocatable={"cpu": cpu, "amd.com/gpu": gpus, "pods": pods}
    ),
    st.integers(0, 1000),
    st.integers(0, 16_000),
    st.integers(0, 8),
    st.integers(0, 6),
)
pod_strategy = st.builds(
    lambda cpu, gpus: PodInfo(
        "ns", "p", requests={k: v for k, v in {"cpu": cpu, "amd.com/gpu": gpus}.items() if v}
    ),
    st.integers(0, 8000),
    st.integers(0, 4),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(node_strategy, min_size=0, max_size=6, unique_by=lambda n: n.name),
    st.lists(pod_strategy, max_size=25),
)
def test_placements_never_over_commit_a_node(nodes: list[NodeInfo], pods: list[PodInfo]) -> None:
    ledger = Ledger()
    for p in pods:
        chosen, failed = find_node(p, nodes, ledger)
        fits_somewhere = any(
            ledger.pods(n.name) + 1 <= n.allocatable["pods"]
            and all(
                ledger.requested(n.name).get(r, 0) + v <= n.allocatable.get(r, 0)
                for r, v in p.requests.items()
            )
            for n in nodes
        )
        assert (chosen is not None) is fits_somewhere  # complete: a pod is placed whenever it can be
        if chosen is None:
            assert len(failed) == len(nodes)
        else:
            ledger.add(chosen, p.requests)
    for n in nodes:
        assert ledger.pods(n.name) <= n.allocatable["pods"]
        for resource, amount in ledger.requested(n.name).items():
            assert amount <= n.allocatable.get(resource, 0)


# --- pods/binding ----------------------------------------------------------------------------------------


@pytest.fixture
def sim_api() -> Api:
    return EmbeddedCluster(fleet=Fleet(nodePools=[]), install_crds=False).server.api


def _binding(name: str, node_name: str = "n1", **meta: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **meta},
        "target": {"kind": "Node", "name": node_name},
    }


def _error(call: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    return info.value


def test_bind_sets_the_node_the_condition_and_the_annotations_in_one_write(sim_api: Api) -> None:
    pods = sim_api.resource("v1", "Pod")
    created = sim_api.create(
        pods, "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    before = created.obj
    answer = sim_api.bind("default", "p", _binding("p", annotations={"sched": "yes"}))
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = sim_api.get(pods, "default", "p")
    assert pod["spec"]["nodeName"] == "n1" and pod["metadata"]["annotations"] == {"sched": "yes"}
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [("PodScheduled", "True")]
    assert pod["metadata"]["generation"] == before["metadata"].get("generation")
    assert pod["metadata"].get("managedFields") == before["metadata"].get("managedFields")
    assert int(pod["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    err = _error(lambda: sim_api.bind("default", "p", _binding("p", "n2")))
    assert (err.code, err.message) == (
        409,
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"',
    )


def test_bind_checks_preconditions_gates_and_dry_run(sim_api: Api) -> None:
    pods = sim_api.resource("v1", "Pod")
    spec = {"containers": [{"name": "c", "image": "i"}]}
    sim_api.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})
    err = _error(lambda: sim_api.bind("default", "p", _binding("p", uid="other")))
    assert err.code == 409 and "Precondition failed: UID in precondition: other" in err.message
    err = _error(lambda: sim_api.bind("default", "p", _binding("p", resourceVersion="1")))
    assert err.code == 409 and "Precondition failed: ResourceVersion in precondition: 1" in err.message
    sim_api.bind("default", "p", _binding("p"), WriteOptions(dry_run=True))
    assert not sim_api.get(pods, "default", "p")["spec"].get("nodeName")
    gated = {**spec, "schedulingGates": [{"name": "wait"}]}
    sim_api.create(pods, "default", {"metadata": {"name": "g"}, "spec": gated})
    err = _error(lambda: sim_api.bind("default", "g", _binding("g")))
    assert err.message.endswith("pod g has non-empty .spec.schedulingGates")
    assert _error(lambda: sim_api.bind("default", "x", _binding("x"))).code == 404
    assert _error(lambda: sim_api.bind("default", "p", _binding("q"))).code == 400
    assert _error(lambda: sim_api.bind("default", "p", {**_binding("p"), "kind": "Pod"})).code == 400
    invalid = _error(lambda: sim_api.bind("default", "p", {**_binding("p"), "target": {"kind": "Pod"}}))
    assert invalid.code == 500 and "reason" not in invalid.status()
    assert invalid.message == (
        '[target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>", target.name: Required value]'
    )


def test_a_pod_or_a_deployment_whose_container_has_no_image_is_refused_as_kube_does(sim_api: Api) -> None:
    pods = sim_api.resource("v1", "Pod")
    err = _error(
        lambda: sim_api.create(
            pods, "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
        )
    )
    assert (err.code, err.message) == (422, 'Pod "p" is invalid: spec.containers[0].image: Required value')
    deployments = sim_api.resource("apps/v1", "Deployment")
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": ""}]}}
    body = {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template},
    }
    err = _error(lambda: sim_api.create(deployments, "default", body))
    assert (
        err.message
        == 'Deployment.apps "d" is invalid: spec.template.spec.containers[0].image: Required value'
    )

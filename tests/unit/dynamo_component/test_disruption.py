"""Replica budgets of multinode DCDs (controllers/dynamo/component_disruption.py): the floor from the
Deployment strategy, the arbiter's view of a replica built from its pods, the budget object and the
DisruptionHeld report."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.disruption import arbitrate
from aiplane.controllers.dynamo import component_disruption as cdis
from aiplane.controllers.dynamo.component_controller import pod_changed_for_arbiter, unschedulable_changed
from aiplane.controllers.dynamo.podtemplate import deployment_strategy

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Obj = dict[str, Any]


def dcd(strategy: str | None = None, replicas: int = 2) -> Obj:
    annotations = {"nvidia.com/deployment-strategy": strategy} if strategy else {}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "dec", "namespace": "llm", "uid": "u-1", "annotations": annotations},
        "spec": {"replicas": replicas, "multinode": {"nodeCount": 2}},
    }


def pod(
    node: str | None = "n1", *, ready: bool = True, deleting: bool = False, phase: str = "Running"
) -> Obj:
    meta: Obj = {"name": "p", "namespace": "llm"}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


@pytest.mark.parametrize(
    ("strategy", "replicas", "max_unavailable", "floor"),
    [
        (None, 2, 1, 1),  # 25% of 2 rounds up to 1
        (None, 8, 2, 6),
        (None, 1, 1, 0),  # a single replica may always be drained
        ("BestEffortControlledRollout", 10, 2, 8),
        ("RampedSlowRollout", 4, 1, 3),  # 0 → 1: a drain has no surge; 0 would hold it for ever
        ("Recreate", 4, None, None),  # the owner accepts the component down: no protection
    ],
)
def test_floor_follows_the_deployment_strategy(
    strategy: str | None, replicas: int, max_unavailable: int | None, floor: int | None
) -> None:
    chosen = deployment_strategy(dcd(strategy, replicas))
    assert cdis.group_max_unavailable(chosen, replicas) == max_unavailable
    assert cdis.replica_floor(chosen, replicas) == floor


def test_a_garbage_max_unavailable_still_lets_one_replica_go() -> None:
    assert cdis.group_max_unavailable({"rollingUpdate": {"maxUnavailable": "lots"}}, 3) == 1


def test_replica_view_reads_availability_and_cordons_from_live_pods() -> None:
    cordoned = {"n1"}
    view = cdis.replica_view("dec-0", 0, [pod("n1"), pod("n2")], 2, cordoned, None)
    assert (view.available, view.cordoned_nodes, view.released) == (True, ("n1",), False)
    # A terminating pod neither counts as serving nor keeps the replica on the cordoned node.
    view = cdis.replica_view("dec-0", 0, [pod("n1", deleting=True), pod("n2")], 2, cordoned, None)
    assert (view.available, view.cordoned_nodes) == (False, ())
    # Not ready, pending (no node yet), or a pod missing: not available.
    assert not cdis.replica_view("d", 0, [pod("n2", ready=False), pod("n2")], 2, set(), None).available
    assert not cdis.replica_view("d", 0, [pod(None, phase="Pending"), pod("n2")], 2, set(), None).available
    assert not cdis.replica_view("d", 0, [pod("n2")], 2, set(), None).available
    released = {"spec": {"minAvailable": 0}}
    assert cdis.replica_view("d", 0, [pod("n1")], 2, cordoned, released).released


def test_replica_budget_selects_the_lws_group_and_is_owned_by_the_dcd() -> None:
    budget = cdis.replica_budget(dcd(), "dec-1", 2, False, {"nvidia.com/selector": "dec"})
    assert budget["metadata"]["name"] == "dec-1" and budget["metadata"]["namespace"] == "llm"
    assert budget["spec"] == {
        "selector": {
            "matchLabels": {
                "leaderworkerset.sigs.k8s.io/name": "dec-1",
                "leaderworkerset.sigs.k8s.io/group-index": "0",
            }
        },
        "minAvailable": 2,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    owner = budget["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("DynamoComponentDeployment", "u-1", True)
    assert cdis.replica_budget(dcd(), "dec-1", 2, True, {})["spec"]["minAvailable"] == 0


def test_held_names_the_dcd_the_budget_and_the_node() -> None:
    views = [
        cdis.replica_view("dec-0", 0, [pod("n1"), pod("n1")], 2, {"n1"}, None),
        cdis.replica_view("dec-1", 1, [pod("n1"), pod("n1")], 2, {"n1"}, None),
    ]
    arbitration = arbitrate(views, 1)
    assert arbitration.released == {"dec-0"}
    holds = cdis.held(arbitration, views)
    assert holds == [cdis.Held("dec-1", ("n1",))]
    message = cdis.held_message(dcd(), holds, arbitration, 2)
    assert "llm/dec:" in message and "budget llm/dec-1" in message and "n1" in message
    assert "floor 1" in message


def test_disruption_held_is_set_then_false_once_released() -> None:
    status: Obj = {"conditions": [{"type": "Available", "status": "True"}]}
    held = cdis.with_held(dict(status), "held", generation=3, now=NOW)
    cond = held["conditions"][-1]
    assert (cond["type"], cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "DisruptionHeld",
        "True",
        "FloorReached",
        3,
    )
    released = cdis.with_held(held, None, generation=3, now=NOW)["conditions"]
    assert released[0] == status["conditions"][0]
    assert [(c["type"], c["status"], c["reason"]) for c in released[1:]] == [
        ("DisruptionHeld", "False", "NoDisruptionHeld")
    ]
    # Nothing held and nothing to remove: the status is left as it was (no write).
    assert cdis.with_held(dict(status), None, generation=3, now=NOW) == status


def test_watch_predicates_see_only_what_the_arbiter_reads() -> None:
    assert not unschedulable_changed({"spec": {}}, {"spec": {"unschedulable": False}})
    assert unschedulable_changed({"spec": {}}, {"spec": {"unschedulable": True}})
    same = pod("n1")
    relabelled = {**same, "metadata": {**same["metadata"], "labels": {"x": "y"}}}
    assert not pod_changed_for_arbiter(same, relabelled)
    assert pod_changed_for_arbiter(same, pod("n1", ready=False))
    assert pod_changed_for_arbiter(same, pod("n1", deleting=True))
    assert pod_changed_for_arbiter(pod(None, phase="Pending"), pod("n2", phase="Pending"))


replica_states = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.booleans()),  # (ready, on cordoned node, released)
    min_size=1,
    max_size=8,
)


@given(replica_states, st.sampled_from([None, "BestEffortControlledRollout", "RampedSlowRollout"]))
def test_releases_never_take_serving_replicas_below_the_floor(
    states: list[tuple[bool, bool, bool]], strategy: str | None
) -> None:
    """Whatever the replicas' state, the replicas available and not released stay at the floor, or
    at what was available without the arbiter's releases when that is already lower."""
    replicas = len(states)
    floor = cdis.replica_floor(deployment_strategy(dcd(strategy, replicas)), replicas)
    assert floor is not None and 0 <= floor < replicas
    views = []
    for i, (ready, cordoned, released) in enumerate(states):
        node = "bad" if cordoned else "good"
        budget = {"spec": {"minAvailable": 0 if released else 2}}
        views.append(cdis.replica_view(f"dec-{i}", i, [pod(node, ready=ready)] * 2, 2, {"bad"}, budget))
    arbitration = arbitrate(views, floor)
    serving = sum(1 for v in views if v.available and not arbitration.is_released(v.name))
    already = sum(1 for v in views if v.available and not (v.released and v.on_cordoned))
    assert serving >= min(floor, already)
    assert serving == arbitration.serving
    # A replica on no cordoned node is never released.
    assert all(v.on_cordoned for v in views if arbitration.is_released(v.name))

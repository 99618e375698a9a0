"""When a DynamoComponentDeployment is Available, and what its status says (reference dynamo.md §2)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.dynamo.component_status import (
    Availability,
    compute_status,
    deployment_availability,
    lws_availability,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
Obj = dict[str, Any]


def deployment(
    desired: int = 3,
    *,
    generation: int = 2,
    observed: int | None = 2,
    updated: int = 3,
    available: int = 3,
    condition: str = "True",
) -> Obj:
    status: Obj = {
        "replicas": max(updated, available),
        "readyReplicas": available,
        "updatedReplicas": updated,
        "availableReplicas": available,
        "conditions": [{"type": "Available", "status": condition}],
    }
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {"name": "d", "generation": generation},
        "spec": {"replicas": desired},
        "status": status,
    }


def test_deployment_ready_only_when_current_generation_is_fully_rolled_out() -> None:
    ready = deployment_availability(deployment(), "d")
    assert (ready.status, ready.reason) == ("True", "DeploymentReady")
    assert (ready.replicas, ready.ready_replicas) == (3, 3)
    stale = deployment_availability(deployment(generation=3), "d")
    assert (stale.status, stale.reason) == ("False", "DeploymentNotReady")
    assert "generation 3" in stale.message
    partial = deployment_availability(deployment(updated=2, available=1), "d")
    assert partial.status == "False" and "2/3 updated, 1/3 available" in partial.message
    assert deployment_availability(deployment(condition="False"), "d").status == "False"


def test_a_surge_rollout_in_flight_is_not_ready() -> None:
    """Upstream #3567 (one replica, maxSurge 1): the new pod is created (updated 1) but not ready, the
    old one still serves (available 1). updated >= desired and available >= desired both hold, yet the
    rollout is in flight: two pods exist, one of them old."""
    surging = deployment(1, updated=1, available=1)
    surging["status"]["replicas"] = 2
    verdict = deployment_availability(surging, "d")
    assert (verdict.status, verdict.reason) == ("False", "DeploymentNotReady")
    assert "1 old replica(s) pending termination" in verdict.message
    done = deployment(1, updated=1, available=1)
    assert deployment_availability(done, "d").status == "True"


def test_zero_desired_is_ready_and_unknown_before_the_deployment_controller_reports() -> None:
    assert deployment_availability(deployment(0, updated=0, available=0), "d").status == "True"
    assert deployment_availability(None, "d").reason == "Reconciling"
    fresh = deployment_availability(deployment(observed=None), "d")
    assert (fresh.status, fresh.reason) == ("Unknown", "Reconciling")


def lws(ready: int, available: str = "True") -> Obj:
    return {
        "spec": {"replicas": 1},
        "status": {
            "replicas": 1,
            "readyReplicas": ready,
            "conditions": [{"type": "Available", "status": available}],
        },
    }


def test_lws_all_ready_or_names_the_laggards() -> None:
    names = ["w-0", "w-1"]
    ok = lws_availability(names, {"w-0": lws(1), "w-1": lws(1)})
    assert (ok.status, ok.reason, ok.replicas, ok.ready_replicas) == (
        "True",
        "AllLeaderWorkerSetsReady",
        2,
        2,
    )
    bad = lws_availability(names, {"w-0": lws(1), "w-1": lws(0, "False")})
    assert (bad.status, bad.reason) == ("False", "LeaderWorkerSetsNotReady")
    assert bad.message.endswith("not ready: w-1")
    assert lws_availability(names, {"w-0": None, "w-1": None}).status == "Unknown"
    assert lws_availability([], {}).status == "True"


def test_status_has_both_conditions_and_the_scale_selector() -> None:
    dcd = {"metadata": {"name": "fe", "generation": 4}, "status": {"replicas": 9}}
    status = compute_status(dcd, Availability("False", "DeploymentNotReady", "1/2 updated", 2, 1), now=NOW)
    conds = {c["type"]: c for c in status["conditions"]}
    for type_ in ("Available", "DynamoComponentReady"):
        assert conds[type_]["status"] == "False" and conds[type_]["reason"] == "DeploymentNotReady"
        assert conds[type_]["observedGeneration"] == 4
    assert status["labelSelector"] == "nvidia.com/selector=fe"
    assert status["podSelector"] == {"nvidia.com/selector": "fe"}
    assert (status["replicas"], status["readyReplicas"], status["observedGeneration"]) == (2, 1, 4)
    kept = compute_status(dcd, Availability("False", "InvalidSpec", "bad"), now=NOW)
    assert kept["replicas"] == 9  # an invalid spec keeps the last counts it knew

"""The DGD's status decision: which DCD counts as ready, the state, the Ready condition and Events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from aiplane.controllers.dynamo.graph_decide import (
    ANNOTATION_LAST_APPLIED_HASH,
    MAX_MESSAGE,
    REASON_ALL_READY,
    REASON_FAILED,
    REASON_INVALID,
    REASON_NOT_READY,
    STATE_FAILED,
    STATE_PENDING,
    STATE_SUCCESSFUL,
    DcdView,
    Failure,
    WantedDcd,
    dcd_view,
    graph_events,
    not_ready_reason,
    report_of,
    status_of,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UID = "dgd-uid"


def view(name: str = "g-a", **kw: Any) -> DcdView:
    fields: dict[str, Any] = {
        "name": name,
        "generation": 3,
        "controlled": True,
        "deleting": False,
        "applied_hash": "h",
        "replicas": 2,
        "available": "True",
        "available_reason": "Ready",
        "available_generation": 3,
    }
    fields.update(kw)
    return DcdView(**fields)


def dcd(generation: int = 2, observed: int | None = 2, status: str = "True") -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Available", "status": status, "reason": "Ready"}
    if observed is not None:
        condition["observedGeneration"] = observed
    return {
        "metadata": {
            "name": "g-a",
            "generation": generation,
            "annotations": {ANNOTATION_LAST_APPLIED_HASH: "h"},
            "ownerReferences": [
                {"uid": UID, "controller": True, "kind": "DynamoGraphDeployment", "name": "g"}
            ],
        },
        "spec": {"replicas": 1},
        "status": {"conditions": [condition]},
    }


def test_dcd_view_reads_the_available_condition_and_its_generation() -> None:
    got = dcd_view(dcd(generation=4, observed=3), UID)
    assert got == DcdView("g-a", 4, True, False, "h", 1, "True", "Ready", 3)
    assert not dcd_view(dcd(), "someone-else").controlled
    assert dcd_view({"metadata": {"name": "x"}}, UID).available is None


@pytest.mark.parametrize(
    ("dcd_view_", "wanted", "expected"),
    [
        (None, WantedDcd("g-a", "h"), "not created yet"),
        (
            view(controlled=False),
            WantedDcd("g-a", "h"),
            "exists but is not controlled by this DynamoGraphDeployment",
        ),
        (view(deleting=True), WantedDcd("g-a", "h"), "being deleted"),
        (view(applied_hash="old"), WantedDcd("g-a", "h"), "not yet updated to the graph's spec"),
        (view(replicas=5), WantedDcd("g-a", "h", replicas=2), "not yet updated to the graph's spec"),
        (view(available=None), WantedDcd("g-a", "h"), "Reconciling"),
        (
            view(generation=4, available_generation=3),
            WantedDcd("g-a", "h"),
            "generation 4 not yet observed by its controller (Available observed generation 3)",
        ),
        (
            view(available_generation=None),
            WantedDcd("g-a", "h"),
            "generation 3 not yet observed by its controller (Available observed generation 0)",
        ),
        (view(available="False", available_reason="PodsNotReady"), WantedDcd("g-a", "h"), "PodsNotReady"),
        (view(replicas=7), WantedDcd("g-a", "h"), None),  # replicas not owned: a direct scale is fine
        (view(), WantedDcd("g-a", "h", replicas=2), None),
    ],
)
def test_not_ready_reason(dcd_view_: DcdView | None, wanted: WantedDcd, expected: str | None) -> None:
    assert not_ready_reason(wanted, dcd_view_) == expected


def test_available_at_an_old_generation_is_not_successful() -> None:
    """Upstream #3567: a DCD the graph just changed still says Available=True for its old spec."""
    wanted = [WantedDcd("g-a", "h"), WantedDcd("g-b", "h")]
    views = {"g-a": view("g-a"), "g-b": view("g-b", generation=5, available_generation=4)}
    report = report_of(wanted, views)
    assert report.state == STATE_PENDING and not report.ready
    assert report.reason == REASON_NOT_READY
    assert report.message == (
        "1 of 2 resources not ready: g-b: generation 5 not yet observed by its controller "
        "(Available observed generation 4)"
    )
    assert report.ready_services == "1/2"


def test_every_dcd_available_at_its_generation_is_successful() -> None:
    report = report_of([WantedDcd("g-a", "h")], {"g-a": view()})
    assert (report.state, report.reason, report.ready_services) == (STATE_SUCCESSFUL, REASON_ALL_READY, "1/1")


def test_a_failure_wins_and_keeps_the_ready_count() -> None:
    report = report_of(
        [WantedDcd("g-a", "h")], {"g-a": view()}, Failure(REASON_FAILED, "spec.pvcs[0]: missing")
    )
    assert (report.state, report.reason, report.message) == (
        STATE_FAILED,
        REASON_FAILED,
        "spec.pvcs[0]: missing",
    )
    assert report.ready_services == "1/1"
    invalid = report_of([], {}, Failure(REASON_INVALID, "x" * (MAX_MESSAGE + 10)))
    assert invalid.ready_services is None and len(invalid.message) == MAX_MESSAGE


def test_status_of_sets_state_condition_and_generation_and_keeps_the_transition_time() -> None:
    report = report_of([WantedDcd("g-a", "h")], {"g-a": view()})
    first = status_of(report, 7, None, NOW)
    assert first["state"] == STATE_SUCCESSFUL and first["observedGeneration"] == 7
    assert first["readyServices"] == "1/1"
    (ready,) = first["conditions"]
    assert ready["type"] == "Ready" and ready["status"] == "True" and ready["observedGeneration"] == 7
    again = status_of(report, 7, first, NOW + timedelta(minutes=5))
    assert again == first, "an unchanged decision is an unchanged status (no write)"
    failed = status_of(
        report_of([], {}, Failure(REASON_INVALID, "bad")), 8, first, NOW + timedelta(minutes=5)
    )
    assert "readyServices" not in failed
    assert failed["conditions"][0]["lastTransitionTime"] != ready["lastTransitionTime"]


def _status(state: str, ready: str, reason: str, message: str = "m") -> dict[str, Any]:
    return {
        "state": state,
        "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": message}],
    }


def test_events_for_ready_failure_and_lost_readiness_but_not_for_coming_up() -> None:
    pending = _status(STATE_PENDING, "False", REASON_NOT_READY)
    ready = _status(STATE_SUCCESSFUL, "True", REASON_ALL_READY, "All resources are ready")
    failed = _status(STATE_FAILED, "False", REASON_FAILED, "spec.pvcs[0]: missing")
    assert graph_events(None, pending) == []
    assert graph_events(pending, ready) == [("Normal", REASON_ALL_READY, "All resources are ready")]
    assert graph_events(ready, ready) == []
    assert graph_events(ready, pending) == [("Warning", REASON_NOT_READY, "m")]
    assert graph_events(None, failed) == [("Warning", REASON_FAILED, "spec.pvcs[0]: missing")]
    assert graph_events(failed, failed) == []
    other = _status(STATE_FAILED, "False", REASON_FAILED, "no multinode orchestrator available")
    assert graph_events(failed, other) == [("Warning", REASON_FAILED, "no multinode orchestrator available")]


def test_status_of_keeps_the_resource_monitors_conditions() -> None:
    monitor = [
        {
            "type": "ResourceUnderutilization",
            "status": "True",
            "reason": "GpuUtilizationLow",
            "message": "1 of 2 GPUs below 1% utilisation: p GPU 0",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        },
        {
            "type": "WorkloadTerminatedEarly",
            "status": "True",
            "reason": "GpuUtilizationLow",
            "message": "Scaled to zero",
            "lastTransitionTime": "2026-01-02T00:00:00Z",
        },
    ]
    existing = {"state": STATE_SUCCESSFUL, "conditions": monitor}
    failed = status_of(report_of([], {}, Failure(REASON_INVALID, "bad")), 8, existing, NOW)
    assert failed["conditions"][:2] == monitor
    assert [c["type"] for c in failed["conditions"]] == [*(c["type"] for c in monitor), "Ready"]

"""The DGDR state machine (pure), including the fixes over upstream."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.dynamo.request_decide import (
    DgdSeen,
    JobSeen,
    Observed,
    Profile,
    RequestAction,
    RequestObserved,
    RequestView,
    decide,
    next_step,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GRAPH = {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"services": {}}}


def view(state: str = "", generation: int = 1, observed: int = 0, **kw: Any) -> RequestView:
    status: dict[str, Any] = {"state": state, "observedGeneration": observed} if state else {}
    status.update(kw.pop("status", {}))
    return RequestView("r", "ns", generation, kw.pop("online", False), kw.pop("auto_apply", False), status)


def conds(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions", [])}


def test_new_request_is_validated_and_starts_planning() -> None:
    d = next_step(view(), Observed(validated="gpu.type h100_sxm"), NOW)
    assert d.status["state"] == "Profiling"
    assert d.actions == ["start_plan"]
    assert [e[1] for e in d.events] == ["Initialized"]
    assert conds(d.status)["Validation"]["message"] == "gpu.type h100_sxm"


def test_decide_reads_one_observation_and_returns_typed_actions() -> None:
    d = decide(RequestObserved(view(online=True), Observed()), NOW)
    assert d.actions == [RequestAction.CREATE_JOB]
    assert d == next_step(view(online=True), Observed(), NOW)


def test_online_request_creates_the_job() -> None:
    d = next_step(view(online=True), Observed(), NOW)
    assert d.actions == ["create_job"]
    assert [e[1] for e in d.events] == ["Initialized", "ProfilingJobCreated"]


def test_validation_failure_names_the_problem_and_is_terminal_until_the_spec_changes() -> None:
    d = next_step(view(), Observed(problems=("spec.gpu.type: unknown",)), NOW)
    assert d.status["state"] == "Failed" and d.actions == []
    assert conds(d.status)["Validation"]["reason"] == "ValidationFailed"
    failed = view("Failed", 1, 1, status={"conditions": d.status["conditions"]})
    assert next_step(failed, Observed(), NOW).status == failed.status
    edited = view("Failed", 2, 1)
    assert next_step(edited, Observed(), NOW).status["state"] == "Profiling"


def test_plan_done_generates_the_spec_and_deploys_with_auto_apply() -> None:
    profiling = view("Profiling", 1, 1, auto_apply=True)
    d = next_step(profiling, Observed(profile=Profile(generated=GRAPH, results="configmap/x")), NOW)
    assert d.actions == ["write_output", "create_dgd"]
    assert d.status["state"] == "Deploying"
    assert d.status["deployment"] == {"name": "g", "namespace": "ns", "state": "pending", "created": True}
    assert conds(d.status)["SpecGenerated"]["status"] == "True"


def test_without_auto_apply_ready_with_the_spec() -> None:
    d = next_step(view("Profiling", 1, 1), Observed(profile=Profile(generated=GRAPH)), NOW)
    assert d.status["state"] == "Ready" and "create_dgd" not in d.actions


def test_unknown_model_is_a_validation_failure() -> None:
    d = next_step(
        view("Profiling", 1, 1), Observed(profile=Profile(error="model: unknown", invalid=True)), NOW
    )
    assert d.status["state"] == "Failed"
    assert conds(d.status)["Validation"]["message"] == "model: unknown"


def test_job_failure_fails_the_request() -> None:
    d = next_step(
        view("Profiling", 1, 1, online=True), Observed(job=JobSeen(failed=True, message="OOM")), NOW
    )
    assert d.status["state"] == "Failed" and [e[1] for e in d.events] == ["ProfilingJobFailed"]


DEPLOYED = {"deployment": {"name": "g", "namespace": "ns", "state": "pending", "created": True}}


def test_successful_means_ready_upstream_bug_fixed() -> None:
    d = next_step(
        view("Deploying", 1, 1, auto_apply=True, status=DEPLOYED),
        Observed(dgd=DgdSeen(True, "successful")),
        NOW,
    )
    assert d.status["state"] == "Ready"
    assert conds(d.status)["DeploymentReady"]["status"] == "True"


def test_deploying_says_what_its_graph_waits_for() -> None:
    deploying = view("Deploying", 1, 1, auto_apply=True, status=DEPLOYED)
    waiting = 'secret "hf-token-secret" not found'
    d = next_step(deploying, Observed(dgd=DgdSeen(True, "pending", waiting)), NOW)
    cond = conds(d.status)["DeploymentReady"]
    assert (cond["status"], cond["reason"]) == ("False", "DeploymentPending")
    assert cond["message"].endswith(f"is pending, waiting for: {waiting}")
    assert d.status["state"] == "Deploying" and d.events == []  # the DGD's own Events say it once
    # Steady: the same cause decides the same status.
    again = next_step(
        view("Deploying", 1, 1, auto_apply=True, status=d.status),
        Observed(dgd=DgdSeen(True, "pending", waiting)),
        NOW,
    )
    assert again.status == d.status


def test_degraded_goes_back_to_deploying_and_deleted_is_terminal() -> None:
    ready = view("Ready", 1, 1, auto_apply=True, status=DEPLOYED)
    d = next_step(ready, Observed(dgd=DgdSeen(True, "pending")), NOW)
    assert d.status["state"] == "Deploying" and d.events[0][1] == "DeploymentDegraded"
    d = next_step(ready, Observed(dgd=DgdSeen(False)), NOW)
    assert d.status["state"] == "DeploymentDeleted" and d.actions == []
    gone = view("DeploymentDeleted", 1, 1, status=d.status)
    assert next_step(gone, Observed(dgd=DgdSeen(False)), NOW).actions == []


def test_spec_change_in_an_immutable_state_is_rejected_with_a_condition_and_applies_nothing() -> None:
    ready = view("Ready", 3, 1, auto_apply=True, status=DEPLOYED)
    d = next_step(ready, Observed(dgd=DgdSeen(True, "successful"), profile=Profile(generated={"x": 1})), NOW)
    cond = conds(d.status)["SpecChangeRejected"]
    assert "generation 3" in cond["message"] and "generation 1" in cond["message"]
    assert d.status["observedGeneration"] == 1 and d.actions == []
    assert [e[1] for e in d.events] == ["SpecChangeRejected"]
    again = view("Ready", 3, 1, auto_apply=True, status=d.status)
    assert (
        next_step(again, Observed(dgd=DgdSeen(True, "successful")), NOW).events == []
    )  # once per generation


MISS = "the best plan misses the SLA: TTFT 40.0 ms against spec.sla.ttft 5 ms (+700%)"


def test_a_plan_missing_the_sla_is_not_auto_applied_and_warns() -> None:
    profiling = view("Profiling", 1, 1, auto_apply=True)
    d = next_step(
        profiling, Observed(profile=Profile(generated=GRAPH, results="configmap/x", sla_miss=MISS)), NOW
    )
    assert d.actions == ["write_output"]  # the spec is generated, no DGD created
    assert d.status["state"] == "Ready"
    assert ("Warning", "SLANotMet", MISS) in d.events
    sla = conds(d.status)["SLAMet"]
    assert (sla["status"], sla["reason"], sla["message"]) == ("False", "SLANotMet", MISS)
    assert "autoApplyBestEffort" in conds(d.status)["SpecGenerated"]["message"]


def test_a_plan_missing_the_sla_is_applied_when_the_request_opts_in() -> None:
    profiling = RequestView("r", "ns", 1, False, True, {"state": "Profiling", "observedGeneration": 1}, True)
    d = next_step(
        profiling, Observed(profile=Profile(generated=GRAPH, results="configmap/x", sla_miss=MISS)), NOW
    )
    assert d.actions == ["write_output", "create_dgd"]
    assert [e[0] for e in d.events if e[1] == "SLANotMet"] == ["Warning"]


def test_a_plan_meeting_the_sla_says_so() -> None:
    profiling = view("Profiling", 1, 1, auto_apply=True)
    d = next_step(profiling, Observed(profile=Profile(generated=GRAPH, results="configmap/x")), NOW)
    assert conds(d.status)["SLAMet"]["status"] == "True"
    assert all(e[0] == "Normal" for e in d.events)

"""The GPU-utilisation monitor's pure parts: options from the environment, the exposition parser,
and the per-workload decision (conditions, scale to zero, restore)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.conditions import format_time
from aiplane.controllers.monitoring.decide import (
    ANNOTATION_RESTORE,
    ANNOTATION_SCALED_FROM,
    DGD,
    MODELINFER,
    RESOURCE_UNDERUTILIZATION,
    WORKLOAD_TERMINATED_EARLY,
    Observed,
    Thresholds,
    WorkloadView,
    decide,
    decide_workload,
    in_target_namespace,
)
from aiplane.controllers.monitoring.options import MonitoringOptions, parse_duration
from aiplane.controllers.monitoring.scrape import AMD_METRIC, NVIDIA_METRIC, GpuSample, parse_samples

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

EXPOSITION = """\
# HELP gpu_gfx_activity GPU GFX activity
# TYPE gpu_gfx_activity gauge
gpu_gfx_activity{namespace="serving",pod="pd-0",container="vllm",gpu_id="0",gpu_partition_id="1"} 0
gpu_gfx_activity{gpu_id="3",hostname="n1"} 0
gpu_gfx_activity{namespace="serving",pod="pd-1",container="vllm",gpu_id="1"} 87.5
# HELP gpu_power_usage power
# TYPE gpu_power_usage gauge
gpu_power_usage{namespace="serving",pod="pd-0",gpu_id="0"} 300
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-x",namespace="team",pod="w-0",container="main"} 12
"""


# --- options -----------------------------------------------------------------------------------------


def test_monitoring_is_off_unless_the_environment_turns_it_on() -> None:
    assert not MonitoringOptions.from_env({}).enabled
    assert not MonitoringOptions.from_env({"RESOURCE_MONITORING_ENABLED": "false"}).enabled
    on = MonitoringOptions.from_env(
        {
            "RESOURCE_MONITORING_ENABLED": "true",
            "RESOURCE_MONITORING_METRICS_ENDPOINT": "http://exporter:5000/metrics",
            "RESOURCE_MONITORING_POLLING_INTERVAL": "1m30s",
        }
    )
    assert on.enabled and on.endpoint == "http://exporter:5000/metrics" and on.interval == 90


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RESOURCE_MONITORING_POLLING_INTERVAL": "30s"}, "RESOURCE_MONITORING_METRICS_ENDPOINT"),
        (
            {"RESOURCE_MONITORING_METRICS_ENDPOINT": "http://e/metrics"},
            "RESOURCE_MONITORING_POLLING_INTERVAL",
        ),
        (
            {
                "RESOURCE_MONITORING_METRICS_ENDPOINT": "http://e/metrics",
                "RESOURCE_MONITORING_POLLING_INTERVAL": "soon",
            },
            "RESOURCE_MONITORING_POLLING_INTERVAL",
        ),
    ],
)
def test_a_bad_environment_names_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        MonitoringOptions.from_env({"RESOURCE_MONITORING_ENABLED": "true", **env})


def test_durations_in_go_syntax() -> None:
    assert parse_duration("24h", "x") == 86400
    assert parse_duration("1h30m10s", "x") == 5410
    assert parse_duration("15", "x") == 15
    with pytest.raises(ValueError, match="x:"):
        parse_duration("1d", "x")


# --- scrape ------------------------------------------------------------------------------------------


def test_amd_and_nvidia_samples_are_read_by_pod_and_unheld_gpus_dropped() -> None:
    samples = sorted(parse_samples(EXPOSITION))
    assert samples == [
        GpuSample("serving", "pd-0", "0/1", 0.0, "vllm", AMD_METRIC),
        GpuSample("serving", "pd-1", "1", 87.5, "vllm", AMD_METRIC),
        GpuSample("team", "w-0", "2", 12.0, "main", NVIDIA_METRIC),
    ]


def test_a_malformed_exposition_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_samples('gpu_gfx_activity{pod="x" 1\n')


# --- decide ------------------------------------------------------------------------------------------


def view(
    *,
    kind: str = MODELINFER,
    conditions: tuple[dict[str, Any], ...] = (),
    annotations: dict[str, str] | None = None,
    scale: dict[str, Any] | None = None,
) -> WorkloadView:
    return WorkloadView(
        kind=kind,
        namespace="serving",
        name="pd",
        generation=3,
        conditions=conditions,
        annotations=annotations or {},
        scale=scale if scale is not None else {"replicas": 2},
    )


def low_since(moment: datetime) -> dict[str, Any]:
    return {
        "type": RESOURCE_UNDERUTILIZATION,
        "status": "True",
        "reason": "GpuUtilizationLow",
        "message": "",
        "lastTransitionTime": format_time(moment),
    }


def sample(value: float, pod: str = "pd-0-entry", gpu: str = "0") -> GpuSample:
    return GpuSample("serving", pod, gpu, value)


TERMINATE = Thresholds(low=5, terminate=True, terminate_after=timedelta(hours=1))


def test_one_low_gpu_makes_the_workload_underutilised_naming_it() -> None:
    decision = decide_workload(view(), [sample(50, gpu="0"), sample(1, gpu="1")], TERMINATE, NOW)
    (change,) = decision.conditions
    assert (change.type, change.status, change.reason) == (
        RESOURCE_UNDERUTILIZATION,
        "True",
        "GpuUtilizationLow",
    )
    assert "pd-0-entry GPU 1" in change.message and "GPU 0" not in change.message
    assert decision.patch is None


def test_the_message_does_not_churn_with_the_values() -> None:
    a = decide_workload(view(), [sample(1)], TERMINATE, NOW)
    b = decide_workload(view(), [sample(2)], TERMINATE, NOW)
    assert a.conditions == b.conditions


def test_all_gpus_busy_is_normal() -> None:
    (change,) = decide_workload(view(), [sample(5), sample(90, gpu="1")], TERMINATE, NOW).conditions
    assert (change.status, change.reason) == ("False", "GpuUtilizationNormal")


def test_no_samples_leave_a_workload_without_the_condition_alone_and_make_an_old_one_unknown() -> None:
    assert decide_workload(view(), [], TERMINATE, NOW).conditions == ()
    (change,) = decide_workload(
        view(conditions=(low_since(NOW - timedelta(days=3)),)), [], TERMINATE, NOW
    ).conditions
    assert (change.status, change.reason) == ("Unknown", "NoGpuSamples")


def test_low_for_less_than_the_limit_is_not_scaled() -> None:
    decision = decide_workload(
        view(conditions=(low_since(NOW - timedelta(minutes=59)),)), [sample(0)], TERMINATE, NOW
    )
    assert decision.patch is None


def test_termination_needs_terminate_underutilized() -> None:
    keep = Thresholds(low=5, terminate=False, terminate_after=timedelta(hours=1))
    decision = decide_workload(view(conditions=(low_since(NOW - timedelta(days=2)),)), [sample(0)], keep, NOW)
    assert decision.patch is None


def test_low_past_the_limit_scales_a_modelinfer_to_zero_and_records_its_replicas() -> None:
    scale = {"replicas": 3, "partition": 1}
    decision = decide_workload(
        view(conditions=(low_since(NOW - timedelta(hours=1)),), scale=scale), [sample(0)], TERMINATE, NOW
    )
    assert decision.patch is not None
    assert decision.patch["spec"] == {
        "replicas": 0,
        "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": None}},
    }
    assert json.loads(decision.patch["metadata"]["annotations"][ANNOTATION_SCALED_FROM]) == scale
    terminated = next(c for c in decision.conditions if c.type == WORKLOAD_TERMINATED_EARLY)
    assert (terminated.status, terminated.reason) == ("True", "GpuUtilizationLow")
    assert ANNOTATION_RESTORE in terminated.message


def test_a_dgd_is_scaled_to_zero_service_by_service() -> None:
    scale = {"services": {"Frontend": None, "VllmWorker": 2}}
    decision = decide_workload(
        view(kind=DGD, conditions=(low_since(NOW - timedelta(hours=2)),), scale=scale),
        [sample(0)],
        TERMINATE,
        NOW,
    )
    assert decision.patch is not None
    assert decision.patch["spec"] == {
        "services": {"Frontend": {"replicas": 0}, "VllmWorker": {"replicas": 0}}
    }


def scaled(kind: str, record: dict[str, Any], now_scale: dict[str, Any], restore: bool) -> WorkloadView:
    annotations = {ANNOTATION_SCALED_FROM: json.dumps(record)}
    if restore:
        annotations[ANNOTATION_RESTORE] = "true"
    return view(
        kind=kind, annotations=annotations, scale=now_scale, conditions=(low_since(NOW - timedelta(days=1)),)
    )


def test_a_scaled_down_workload_waits_for_someone_to_bring_it_back() -> None:
    waiting = scaled(MODELINFER, {"replicas": 3}, {"replicas": 0}, restore=False)
    assert decide_workload(waiting, [], TERMINATE, NOW + timedelta(days=5)).patch is None
    assert decide_workload(waiting, [], TERMINATE, NOW + timedelta(days=5)).conditions == ()


def test_the_restore_annotation_puts_the_recorded_replicas_back() -> None:
    record = {"replicas": 3, "partition": 1}
    decision = decide_workload(scaled(MODELINFER, record, {"replicas": 0}, restore=True), [], TERMINATE, NOW)
    assert decision.patch == {
        "metadata": {"annotations": {ANNOTATION_SCALED_FROM: None, ANNOTATION_RESTORE: None}},
        "spec": {"replicas": 3, "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 1}}},
    }
    by_type = {c.type: c for c in decision.conditions}
    assert by_type[WORKLOAD_TERMINATED_EARLY].status == "False"
    assert by_type[RESOURCE_UNDERUTILIZATION].status == "Unknown"  # the low streak starts again


def test_a_dgd_restore_unsets_what_was_unset_and_skips_removed_services() -> None:
    record = {"services": {"Frontend": None, "VllmWorker": 2, "Gone": 1}}
    now_scale = {"services": {"Frontend": 0, "VllmWorker": 0}}
    decision = decide_workload(scaled(DGD, record, now_scale, restore=True), [], TERMINATE, NOW)
    assert decision.patch is not None
    assert decision.patch["spec"] == {
        "services": {"Frontend": {"replicas": None}, "VllmWorker": {"replicas": 2}}
    }


def test_scaling_up_by_hand_counts_as_restored_and_keeps_the_users_replicas() -> None:
    decision = decide_workload(
        scaled(MODELINFER, {"replicas": 3}, {"replicas": 1}, restore=False), [], TERMINATE, NOW
    )
    assert decision.patch is not None and "spec" not in decision.patch
    assert any(c.type == WORKLOAD_TERMINATED_EARLY and c.status == "False" for c in decision.conditions)


@given(
    replicas=st.integers(min_value=1, max_value=50),
    partition=st.one_of(st.none(), st.integers(min_value=0, max_value=49)),
)
def test_scale_to_zero_then_restore_is_the_identity(replicas: int, partition: int | None) -> None:
    scale: dict[str, Any] = {"replicas": replicas}
    if partition is not None and partition < replicas:
        scale["partition"] = partition
    low = view(conditions=(low_since(NOW - timedelta(days=1)),), scale=scale)
    down = decide_workload(low, [sample(0)], TERMINATE, NOW).patch
    assert down is not None
    record = down["metadata"]["annotations"][ANNOTATION_SCALED_FROM]
    back = decide_workload(
        view(annotations={ANNOTATION_SCALED_FROM: record, ANNOTATION_RESTORE: "true"}, scale={"replicas": 0}),
        [],
        TERMINATE,
        NOW,
    ).patch
    assert back is not None
    restored = {"replicas": back["spec"]["replicas"]}
    if "rolloutStrategy" in back["spec"]:
        restored["partition"] = back["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"]
    assert restored == scale


def test_target_namespaces() -> None:
    assert in_target_namespace("serving", Thresholds())
    assert not in_target_namespace("kube-system", Thresholds())
    only = Thresholds(target_namespaces=("team-a",))
    assert in_target_namespace("team-a", only) and not in_target_namespace("serving", only)


def test_the_decided_status_carries_the_condition_and_its_generation_and_keeps_the_rest() -> None:
    owned = {"replicas": 2, "conditions": [{"type": "Available", "status": "True", "reason": "Up"}]}
    observed = Observed(view(), (sample(1),), TERMINATE, owned, 4)
    status = decide(observed, NOW).status
    assert status is not None and status["replicas"] == 2
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Available"]["reason"] == "Up"  # the owning controller's condition stays
    assert (
        by_type[RESOURCE_UNDERUTILIZATION]["status"],
        by_type[RESOURCE_UNDERUTILIZATION]["observedGeneration"],
    ) == ("True", 4)
    assert decide(Observed(view(), (), TERMINATE, owned, 4), NOW).status is None  # nothing to report

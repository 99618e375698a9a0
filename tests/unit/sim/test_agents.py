"""The pure parts of the simulated agents: taints and tolerations with Kubernetes semantics, DaemonSet
placement, kubelet pod status, and the AMD Device Config Manager's decisions and partition arithmetic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.sim.agents.daemonsets import (
    DAEMON_TOLERATIONS,
    daemon_pod_tolerations,
    max_unavailable,
    node_should_run,
    replace_node_affinity,
    template_hash,
    tolerates,
    toleration_tolerates_taint,
    untolerated_taints,
)
from aiplane.sim.agents.kubelet import min_toleration_seconds, running_status, with_ready
from aiplane.sim.hardware import amd_dcm, amd_gpu

DCM_TAINT = {"key": "amd-dcm", "value": "up", "effect": "NoExecute"}


# --- tolerations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "amd-dcm", "operator": "Equal", "value": "up", "effect": "NoExecute"}, DCM_TAINT, True),
        ({"key": "amd-dcm", "value": "up", "effect": "NoExecute"}, DCM_TAINT, True),  # Equal is the default
        ({"key": "amd-dcm", "value": "down", "effect": "NoExecute"}, DCM_TAINT, False),
        ({"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute"}, DCM_TAINT, True),
        ({"key": "amd-dcm", "operator": "Exists"}, DCM_TAINT, True),  # empty effect: every effect
        ({"key": "amd-dcm", "operator": "Exists", "effect": "NoSchedule"}, DCM_TAINT, False),
        ({"operator": "Exists"}, DCM_TAINT, True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, DCM_TAINT, True),
        # API validation only allows an empty key with Exists; ToleratesTaint itself compares values.
        ({"operator": "Equal", "value": "up"}, DCM_TAINT, True),
        ({"key": "other", "operator": "Exists"}, DCM_TAINT, False),
        ({"key": "amd-dcm", "operator": "Gt", "value": "1"}, DCM_TAINT, False),
        (
            {"key": "k", "operator": "Equal", "effect": "NoSchedule"},
            {"key": "k", "effect": "NoSchedule"},
            True,
        ),
    ],
)
def test_toleration_tolerates_taint(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert toleration_tolerates_taint(toleration, taint) is expected


def test_tolerates_needs_every_noschedule_and_noexecute_taint_tolerated() -> None:
    taints = [DCM_TAINT, {"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert not tolerates(taints, [{"key": "amd-dcm", "operator": "Exists"}])
    assert tolerates(taints, [{"key": "amd-dcm", "operator": "Exists"}, {"key": "gpu", "value": "true"}])
    assert untolerated_taints(taints, [{"key": "gpu", "value": "true"}]) == [DCM_TAINT]
    # PreferNoSchedule never keeps a pod off a node; no taints at all is tolerated by anything.
    assert tolerates([{"key": "soft", "effect": "PreferNoSchedule"}], [])
    assert tolerates([], None) and tolerates(None, [])
    # Only NoExecute counts for keeping a pod running.
    assert tolerates(taints[1:], [], effects=("NoExecute",))
    assert not tolerates(taints, [], effects=("NoExecute",))


taint_strategy = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["a", "b", "amd-dcm"]),
        "value": st.sampled_from(["", "up", "x"]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
    }
)


@given(st.lists(taint_strategy, max_size=5))
def test_an_empty_key_exists_toleration_tolerates_everything(taints: list[dict[str, str]]) -> None:
    assert tolerates(taints, [{"operator": "Exists"}])
    assert tolerates(taints, [{"key": t["key"], "operator": "Exists"} for t in taints])
    blocking = [t for t in taints if t["effect"] != "PreferNoSchedule"]
    assert tolerates(taints, []) is (not blocking)


# --- DaemonSet placement --------------------------------------------------------------------------


def node(
    name: str = "n", labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> Any:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


AMD = {"feature.node.kubernetes.io/amd-gpu": "true"}
PLUGIN_SPEC = {"nodeSelector": AMD, "containers": [{"name": "c", "image": "i"}]}


def test_node_should_run_follows_selector_affinity_and_taints() -> None:
    assert node_should_run(PLUGIN_SPEC, node(labels=AMD)) == (True, True)
    assert node_should_run(PLUGIN_SPEC, node(labels={})) == (False, False)
    # A new NoSchedule taint keeps the existing pod; an untolerated NoExecute one removes it.
    assert node_should_run(PLUGIN_SPEC, node(labels=AMD, taints=[{"key": "x", "effect": "NoSchedule"}])) == (
        False,
        True,
    )
    assert node_should_run(PLUGIN_SPEC, node(labels=AMD, taints=[DCM_TAINT])) == (False, False)
    dcm = {
        **PLUGIN_SPEC,
        "tolerations": [{"key": "amd-dcm", "operator": "Equal", "value": "up", "effect": "NoExecute"}],
    }
    assert node_should_run(dcm, node(labels=AMD, taints=[DCM_TAINT])) == (True, True)
    # Daemons tolerate cordoned, NotReady and control-plane-free pressure taints by themselves.
    cordoned = node(labels=AMD, taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    assert node_should_run(PLUGIN_SPEC, cordoned) == (True, True)
    not_ready = node(labels=AMD, taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
    assert node_should_run(PLUGIN_SPEC, not_ready) == (True, True)
    affinity = {
        "containers": [{"name": "c", "image": "i"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
    }
    assert node_should_run(affinity, node(labels={"zone": "a"}))[0]
    assert not node_should_run(affinity, node(labels={"zone": "b"}))[0]
    assert not node_should_run({**PLUGIN_SPEC, "nodeName": "other"}, node(labels=AMD))[0]


def test_daemon_pods_get_kubes_default_tolerations_once() -> None:
    mine = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    out = daemon_pod_tolerations({"tolerations": [mine]})
    assert len(out) == len(DAEMON_TOLERATIONS)
    assert {(t["key"], t["effect"]) for t in out} == {(t["key"], t["effect"]) for t in DAEMON_TOLERATIONS}
    with_host = daemon_pod_tolerations({"hostNetwork": True})
    assert any(t["key"] == "node.kubernetes.io/network-unavailable" for t in with_host)


def test_daemon_pod_affinity_pins_the_node_by_name() -> None:
    affinity = replace_node_affinity({"podAntiAffinity": {"x": 1}}, "mi300x-0")
    assert affinity["podAntiAffinity"] == {"x": 1}
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["mi300x-0"]}]}
        ]
    }


def test_template_hash_is_stable_and_safe_encoded() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    first = template_hash(template)
    assert first == template_hash(json.loads(json.dumps(template)))
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(first) <= 10
    assert template_hash({**template, "spec": {"containers": [{"name": "c", "image": "j"}]}}) != first
    assert template_hash(template, 1) != first


@pytest.mark.parametrize(
    ("rolling", "desired", "expected"),
    [
        ({}, 6, 1),
        ({"maxUnavailable": 2}, 6, 2),
        ({"maxUnavailable": "50%"}, 5, 3),
        ({"maxUnavailable": 0}, 6, 1),
    ],
)
def test_max_unavailable(rolling: dict[str, Any], desired: int, expected: int) -> None:
    ds = {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}}
    assert max_unavailable(ds, desired) == expected


# --- kubelet ----------------------------------------------------------------------------------------


def test_running_status_is_what_a_kubelet_reports() -> None:
    pod = {
        "metadata": {"uid": "u1"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "app", "image": "ghcr.io/x/app:1"}, {"name": "side", "image": "nginx"}],
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    status = running_status(
        pod, host_ip="192.0.2.2", pod_ip="10.244.0.2", now="2026-01-01T00:00:00Z", ready=True
    )
    assert status["phase"] == "Running"
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c["status"] == "True" for c in status["conditions"])
    assert status["hostIP"] == "192.0.2.2" and status["podIPs"] == [{"ip": "10.244.0.2"}]
    assert status["startTime"] == "2026-01-01T00:00:00Z" and status["qosClass"] == "BestEffort"
    app, side = status["containerStatuses"]
    assert app["ready"] and app["started"] and app["restartCount"] == 0 and "running" in app["state"]
    assert app["image"] == "ghcr.io/x/app:1" and side["image"] == "docker.io/library/nginx"
    assert app["containerID"].startswith("containerd://")
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

    not_ready = with_ready(status, False, "2026-01-01T00:01:00Z")
    ready_cond = next(c for c in not_ready["conditions"] if c["type"] == "Ready")
    assert ready_cond == {**ready_cond, "status": "False", "lastTransitionTime": "2026-01-01T00:01:00Z"}
    assert with_ready(not_ready, False, "later") == not_ready  # no flip, no change


def test_min_toleration_seconds() -> None:
    taints = [DCM_TAINT]
    assert min_toleration_seconds(taints, [{"key": "amd-dcm", "operator": "Exists"}]) is None
    tols = [
        {"key": "amd-dcm", "operator": "Exists", "tolerationSeconds": 30},
        {"operator": "Exists", "tolerationSeconds": 10},
        {"key": "other", "operator": "Exists", "tolerationSeconds": 1},
    ]
    assert min_toleration_seconds(taints, tols) == 10
    assert min_toleration_seconds(taints, [{"operator": "Exists", "tolerationSeconds": -5}]) == 0


# --- partition arithmetic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "logical"), [("spx", 8), ("dpx", 16), ("qpx", 32), ("cpx", 64), ("cpx_nps4", 64)]
)
def test_default_profiles_give_mi300x_partition_counts(profile: str, logical: int) -> None:
    profiles = amd_dcm.parse_config(json.dumps(amd_gpu.DEFAULT_CONFIG))
    targets = amd_dcm.validate_profile(profiles[profile], 8)
    modes = [t for t in targets if t is not None]
    assert len(modes) == 8
    assert amd_gpu.logical_gpus(modes) == logical
    assert amd_gpu.advertised_resources(modes) == {"amd.com/gpu": logical}


def test_partitions_per_gpu_and_mixed_resource_names() -> None:
    assert [amd_gpu.partitions_per_gpu(c) for c in ("SPX", "DPX", "QPX", "CPX")] == [1, 2, 4, 8]
    assert amd_gpu.partitions_per_gpu("CPX", xcds=4) == 4
    modes = [("SPX", "NPS1")] * 5 + [("CPX", "NPS1")] * 3
    assert amd_gpu.advertised_resources(modes, strategy="mixed") == {
        "amd.com/spx_nps1": 5,
        "amd.com/cpx_nps1": 24,
    }
    assert amd_gpu.advertised_resources(modes) == {"amd.com/gpu": 29}
    assert amd_gpu.advertised_resources([("CPX", "NPS4")] * 8, strategy="mixed") == {"amd.com/cpx_nps4": 64}
    assert amd_gpu.advertised_resources([("", "")] * 4, amd_gpu.UNPARTITIONABLE, "mixed") == {
        "amd.com/gpu": 4
    }


def test_initial_modes_follow_the_capacity() -> None:
    assert amd_gpu.initial_modes(8, 8) == [("SPX", "NPS1")] * 8
    assert amd_gpu.initial_modes(8, 64) == [("CPX", "NPS1")] * 8
    assert amd_gpu.initial_modes(8, 16) == [("DPX", "NPS1")] * 8
    assert amd_gpu.initial_modes(4, 4, amd_gpu.UNPARTITIONABLE) == [("", "")] * 4


def test_the_default_config_map_has_the_documented_shape() -> None:
    cm = amd_gpu.config_map()
    config = json.loads(cm["data"]["config.json"])
    assert set(config["gpu-config-profiles"]) == {"spx", "dpx", "qpx", "cpx", "cpx_nps4"}
    assert config["gpuClientSystemdServices"] == {"names": ["amd-metrics-exporter", "gpuagent"]}
    assert config["gpu-config-profiles"]["cpx_nps4"]["profiles"] == [
        {"computePartition": "CPX", "memoryPartition": "NPS4", "numGPUsAssigned": 8}
    ]


# --- the ConfigMap and profiles ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, amd_gpu.CONFIGMAP_NOT_PRESENT),
        ("{", amd_gpu.INVALID_JSON),
        ("[]", amd_gpu.INVALID_JSON),
        ('{"gpu-config-profiles": []}', amd_gpu.INVALID_JSON),
        ('{"gpu-config-profiles": {"a": {"profiles": [{"numGPUsAssigned": "8"}]}}}', amd_gpu.INVALID_JSON),
        ('{"gpu-config-profiles": {"a": {"profiles": [{"numGPUsAssigned": -1}]}}}', amd_gpu.INVALID_JSON),
        ('{"gpu-config-profiles": {"a": {"skippedGPUs": {"ids": [true]}}}}', amd_gpu.INVALID_JSON),
        (
            '{"gpu-config-profiles": {"a": {}}, "gpuClientSystemdServices": {"names": [1]}}',
            amd_gpu.INVALID_JSON,
        ),
        ('{"gpu-config-profiles": {"a": {}, "a": {}}}', amd_gpu.DUPLICATE_PROFILE),
    ],
)
def test_config_problems_are_dcms_reasons(text: str | None, reason: str) -> None:
    with pytest.raises(amd_dcm.DcmError) as err:
        amd_dcm.parse_config(text)
    assert err.value.reason == reason
    assert not err.value.retryable


def test_config_parsing_ignores_unknown_fields_like_go() -> None:
    text = '{"gpu-config-profiles": {"a": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 8, "x": 1}]}}, "extra": 1}'
    assert amd_dcm.parse_config(text) == {"a": amd_dcm.Profile((), (amd_dcm.ProfileEntry("CPX", "NPS1", 8),))}
    assert amd_dcm.parse_config("{}") == {}


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            amd_dcm.Profile((), (amd_dcm.ProfileEntry("CPX", "NPS1", 4),)),
            "does not equal the total number of GPUs",
        ),
        (amd_dcm.Profile((9,), (amd_dcm.ProfileEntry("CPX", "NPS1", 7),)), "invalid gpu id"),
        (amd_dcm.Profile(tuple(range(9)), ()), "list length is exceeding"),
        (amd_dcm.Profile((), (amd_dcm.ProfileEntry("XPX", "NPS1", 8),)), "Invalid compute type"),
        (amd_dcm.Profile((), (amd_dcm.ProfileEntry("CPX", "NPS3", 8),)), "Invalid memory type"),
        (
            amd_dcm.Profile(
                (), (amd_dcm.ProfileEntry("CPX", "NPS4", 4), amd_dcm.ProfileEntry("SPX", "NPS1", 4))
            ),
            "combination of NPS1, NPS2 and NPS4",
        ),
    ],
)
def test_invalid_profiles(profile: amd_dcm.Profile, message: str) -> None:
    with pytest.raises(amd_dcm.DcmError) as err:
        amd_dcm.validate_profile(profile, 8)
    assert err.value.reason == amd_gpu.INVALID_PROFILE
    assert message in err.value.status_reason
    assert err.value.status_reason.startswith("Partition failed with reason: ")


def test_skipped_gpus_keep_their_mode() -> None:
    profile = amd_dcm.Profile((0, 1, 2), (amd_dcm.ProfileEntry("CPX", "NPS1", 5),))
    targets = amd_dcm.validate_profile(profile, 8)
    assert targets[:3] == [None, None, None]
    assert targets[3:] == [("CPX", "NPS1")] * 5


# --- DCM's decision -------------------------------------------------------------------------------

CONFIG = json.dumps(amd_gpu.DEFAULT_CONFIG)
SPX = [("SPX", "NPS1")] * 8


def test_decide_partitions_when_the_gpus_are_free() -> None:
    outcome = amd_dcm.decide("cpx", CONFIG, SPX)
    assert outcome.kind == "partition"
    assert outcome.target == (("CPX", "NPS1"),) * 8
    assert amd_gpu.logical_gpus(outcome.target) == 64
    message = json.loads(outcome.message)
    assert list(message) == ["SelectedProfile", "FinalStatus", "Reason", "GPUStatus"]
    assert message["FinalStatus"] == "Success" and len(message["GPUStatus"]) == 8
    assert message["GPUStatus"][0] == {
        "GpuID": 0,
        "PartitionType": "CPX-NPS1",
        "Status": "Success",
        "Message": "Successfully partitioned",
    }


def test_decide_already_in_layout_is_success_without_work_even_when_busy() -> None:
    outcome = amd_dcm.decide("spx", CONFIG, SPX, busy=["default/train"])
    assert (outcome.kind, outcome.reason, outcome.event_type) == (
        "success",
        amd_gpu.ALREADY_EXISTS,
        "Warning",
    )
    assert outcome.target == tuple(SPX)


def test_decide_busy_gpus_fail_with_device_busy() -> None:
    outcome = amd_dcm.decide("cpx", CONFIG, SPX, busy=["default/train"])
    assert (outcome.kind, outcome.reason, outcome.event_type) == (
        "failure",
        amd_gpu.PARTITION_FAILURE,
        "Warning",
    )
    assert outcome.retryable
    assert "Device busy" in outcome.message
    assert json.loads(outcome.message)["FinalStatus"] == "Failure"


@pytest.mark.parametrize(
    ("profile", "text", "reason"),
    [
        ("nope", CONFIG, amd_gpu.NON_EXISTENT_PROFILE),
        ("cpx", None, amd_gpu.CONFIGMAP_NOT_PRESENT),
        ("cpx", "{not json", amd_gpu.INVALID_JSON),
    ],
)
def test_decide_config_failures_are_not_retried(profile: str, text: str | None, reason: str) -> None:
    outcome = amd_dcm.decide(profile, text, SPX, busy=["default/x"])
    assert (outcome.kind, outcome.reason, outcome.retryable) == ("failure", reason, False)
    assert json.loads(outcome.message)["GPUStatus"] is None


def test_decide_checks_what_mi300x_supports() -> None:
    config = {
        "gpu-config-profiles": {
            "dpx_nps2": amd_gpu._profile("DPX", "NPS2"),
            "spx_nps4": amd_gpu._profile("SPX", "NPS4"),
            "qpx_nps4": amd_gpu._profile("QPX", "NPS4"),
        }
    }
    text = json.dumps(config)
    nps2 = amd_dcm.decide("dpx_nps2", text, SPX)
    assert (nps2.kind, nps2.reason) == ("failure", amd_gpu.INVALID_PROFILE)
    assert "Unsupported memory partition type NPS2" in nps2.message and "[NPS1 NPS4]" in nps2.message
    combo = amd_dcm.decide("spx_nps4", text, SPX)
    assert (combo.kind, combo.reason) == ("failure", amd_gpu.INVALID_PROFILE)
    assert "Unsupported compute partition combination SPX-NPS4" in combo.message
    assert amd_dcm.decide("qpx_nps4", text, SPX).reason == amd_gpu.INVALID_PROFILE
    assert amd_dcm.decide("cpx_nps4", CONFIG, SPX).kind == "partition"


def test_decide_on_unpartitionable_gpus_and_injected_failures() -> None:
    mi210 = amd_dcm.decide("cpx", CONFIG, [("", "")] * 8, amd_gpu.UNPARTITIONABLE)
    assert (mi210.kind, mi210.retryable) == ("failure", True)
    assert "Command not supported" in mi210.message
    failed = amd_dcm.decide("spx", CONFIG, SPX, fail=True)
    assert (failed.kind, failed.reason, failed.retryable) == ("failure", amd_gpu.PARTITION_FAILURE, True)


def test_requests_gpu_and_busy_pods() -> None:
    def pod(name: str, resources: dict[str, Any], **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "metadata": {"name": name, "namespace": "ns", **extra.pop("meta", {})},
            "spec": {
                "containers": [{"name": "c", "image": "i", "resources": resources}],
                **extra.pop("spec", {}),
            },
            "status": {"phase": extra.pop("phase", "Running")},
        }
        return body

    pods = [
        pod("limits", {"limits": {"amd.com/gpu": "1"}}),
        pod("mixed", {"requests": {"amd.com/cpx_nps4": 2}}),
        pod("zero", {"limits": {"amd.com/gpu": "0"}}),
        pod("cpu", {"requests": {"cpu": "1"}}),
        pod("done", {"limits": {"amd.com/gpu": "1"}}, phase="Succeeded"),
        pod("leaving", {"limits": {"amd.com/gpu": "1"}}, meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        pod(
            "init",
            {},
            spec={
                "initContainers": [{"name": "i", "image": "i", "resources": {"limits": {"amd.com/gpu": "8"}}}]
            },
        ),
    ]
    assert amd_gpu.gpu_busy_pods(pods) == ["ns/limits", "ns/mixed", "ns/init"]


def test_device_plugin_does_not_tolerate_the_partitioning_taint_and_dcm_does() -> None:
    plugin = amd_gpu.device_plugin_daemonset()["spec"]["template"]["spec"]
    dcm = amd_gpu.dcm_daemonset()["spec"]["template"]["spec"]
    assert plugin["nodeSelector"] == AMD and dcm["nodeSelector"] == AMD
    assert not tolerates([DCM_TAINT], daemon_pod_tolerations(plugin))
    assert tolerates([DCM_TAINT], daemon_pod_tolerations(dcm))
    assert "amd.com/gpu" not in json.dumps(plugin)

"""The NodePartitioning state machine (``node_logic.decide``): one test per transition, then a
hypothesis simulation of the executor, DCM, the device plugin, PodDisruptionBudgets, the clock and
deletion, checking the safety properties the controller relies on."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.conditions import format_time, get_condition
from aiplane.controllers.partitioning.dcm import is_dcm_event_for
from aiplane.controllers.partitioning.drain import pods_to_drain
from aiplane.controllers.partitioning.node_actions import (
    Cordon,
    Evict,
    MarkApplied,
    RemoveLabels,
    SetLabels,
    Taint,
    Uncordon,
    UnmarkApplied,
    Untaint,
    apply_node_actions,
)
from aiplane.controllers.partitioning.node_decide import decide, observe
from aiplane.controllers.partitioning.node_run import DEFAULT_CONFIG, Decision, NodeLogicConfig
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    carries_dcm_taint,
    dcm_event_view,
    pod_tolerates_dcm_taint,
    pod_view,
    pod_views,
)
from aiplane.controllers.partitioning.vocabulary import (
    ADMITTED_ANNOTATION,
    APPLY_TRIGGER_LABEL,
    CORDONED_BY_ANNOTATION,
    DCM_EVENT_SOURCE,
    FINALIZER,
    PROFILE_LABEL,
    PROFILE_STATE_LABEL,
    TAINTED_BY_ANNOTATION,
)

NOW = datetime(2026, 1, 10, 12, 0, 0, tzinfo=UTC)
NODE = "mi300x-0"
NP_NAME = "cpx-rollout-mi300x-0"
HASH = "sha256:" + "a" * 64
HASH2 = "sha256:" + "b" * 64
MI300X_LABELS = {
    "kubernetes.io/hostname": NODE,
    "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
    "beta.amd.com/gpu.family.AI": "true",
    "topology.kubernetes.io/zone": "zone-a",
}

# --- fixtures ----------------------------------------------------------------------------------------


def make_node(
    *,
    gpus: str | None = "8",
    labels: Mapping[str, str | None] | None = None,
    unschedulable: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": "191500m", "memory": "2Ti", "pods": "110"}
    if gpus is not None:
        allocatable["amd.com/gpu"] = gpus
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "uid": "node-uid-0",
            "resourceVersion": "100",
            "labels": {
                k: v
                for k, v in {
                    **MI300X_LABELS,
                    PROFILE_LABEL: "spx",
                    PROFILE_STATE_LABEL: "success",
                    **(labels or {}),
                }.items()
                if v is not None
            },
        },
        "spec": {},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    return node


def make_profile(
    *,
    dcm: str = "cpx",
    expected: Mapping[str, Any] | None = None,
    selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "dcmProfileName": dcm,
        "targetSelector": selector
        if selector is not None
        else {"matchLabels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}},
    }
    spec["expectedResources"] = {"amd.com/gpu": "64"} if expected is None else dict(expected)
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningProfile",
        "metadata": {"name": "mi300x-cpx", "generation": 1},
        "spec": spec,
    }


def cond(
    type_: str, status: str, reason: str, *, at: datetime = NOW, message: str = "", gen: int = 1
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "observedGeneration": gen,
        "lastTransitionTime": format_time(at),
        "reason": reason,
        "message": message,
    }


def make_np(
    *,
    phase: str | None = None,
    conditions: Sequence[Mapping[str, Any]] = (),
    current_hash: str | None = None,
    desired_hash: str = HASH,
    admitted: bool = True,
    finalizer: bool = False,
    dry_run: bool = False,
    generation: int = 1,
    observed_generation: int | None = 1,
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": NP_NAME,
        "uid": "np-uid",
        "generation": generation,
        "resourceVersion": "7",
    }
    if admitted:
        metadata["annotations"] = {ADMITTED_ANNOTATION: desired_hash}
    if finalizer:
        metadata["finalizers"] = [FINALIZER]
    if deleting:
        metadata["deletionTimestamp"] = format_time(NOW)
    np: dict[str, Any] = {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "NodePartitioning",
        "metadata": metadata,
        "spec": {
            "planRef": {"name": "cpx-rollout", "uid": "plan-uid"},
            "nodeName": NODE,
            "desiredHash": desired_hash,
            "profileRef": {"name": "mi300x-cpx"},
        },
    }
    if dry_run:
        np["spec"]["dryRun"] = True
    if phase is not None:
        status: dict[str, Any] = {"phase": phase, "conditions": [dict(c) for c in conditions]}
        if observed_generation is not None:
            status["observedGeneration"] = observed_generation
        if current_hash:
            status["currentHash"] = current_hash
        np["status"] = status
    return np


def pod(
    name: str,
    namespace: str = "team-a",
    *,
    owner_kind: str = "ReplicaSet",
    tolerations: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    phase: str = "Running",
    terminating: bool = False,
    node: str = NODE,
) -> dict[str, Any]:
    md: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": f"{name}-owner", "uid": "o"}
        ],
    }
    if annotations:
        md["annotations"] = dict(annotations)
    if terminating:
        md["deletionTimestamp"] = format_time(NOW)
    return {
        "metadata": md,
        "spec": {
            "nodeName": node,
            "tolerations": [dict(t) for t in tolerations],
            "containers": [{"name": "c"}],
        },
        "status": {"phase": phase},
    }


WORKLOAD = pod("llama-70b-0")
DEVICE_PLUGIN = pod("amd-gpu-device-plugin-x7k2p", "kube-amd-gpu", owner_kind="DaemonSet")
DCM_POD = pod(
    "amd-gpu-device-config-manager-9fz2q",
    "kube-amd-gpu",
    owner_kind="DaemonSet",
    tolerations=[{"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute"}],
)
CILIUM = pod("cilium-5mvbc", "kube-system", owner_kind="DaemonSet", tolerations=[{"operator": "Exists"}])
KUBE_PROXY = pod(
    "kube-proxy-mi300x-0",
    "kube-system",
    owner_kind="Node",
    annotations={"kubernetes.io/config.mirror": "abc"},
)
FINISHED_JOB = pod("eval-job-abcde", owner_kind="Job", phase="Succeeded")
TERMINATING = pod("llama-70b-1", terminating=True)
ALL_PODS = [WORKLOAD, DEVICE_PLUGIN, DCM_POD, CILIUM, KUBE_PROXY, FINISHED_JOB, TERMINATING]


def dcm_event(reason: str, message: str, *, at: datetime = NOW, type_: str = "Warning") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{reason}-x", "namespace": "kube-amd-gpu"},
        "involvedObject": {"kind": "Pod", "namespace": "kube-amd-gpu", "name": DCM_POD["metadata"]["name"]},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": DCM_EVENT_SOURCE, "host": NODE},
        "firstTimestamp": format_time(at),
        "lastTimestamp": format_time(at),
        "count": 1,
    }


def run(
    np: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    profile: Mapping[str, Any] | None = None,
    pods: Sequence[Mapping[str, Any]] = (),
    *,
    now: datetime = NOW,
    events: Sequence[Mapping[str, Any]] = (),
    config: NodeLogicConfig = DEFAULT_CONFIG,
    use_default_profile: bool = True,
    admitted: Callable[[NodePartitioningView], bool] | None = None,
) -> Decision:
    if profile is None and use_default_profile:
        profile = make_profile()
    frozen = copy.deepcopy((np, node, profile, list(pods), list(events)))
    d = decide(observe(np, node, profile, pods, events), now, config, is_admitted=admitted)
    assert (np, node, profile, list(pods), list(events)) == frozen, "decide mutated its input"
    return d


def conditions_of(d: Decision) -> list[dict[str, Any]]:
    assert d.status is not None
    return list(d.status.get("conditions") or [])


def reason_of(d: Decision, type_: str) -> tuple[str, str]:
    c = get_condition(conditions_of(d), type_)
    assert c is not None, f"no {type_} condition"
    return str(c["status"]), str(c["reason"])


def event_reasons(d: Decision) -> list[str]:
    return [e.reason for e in d.events]


def ours(node: Mapping[str, Any]) -> dict[str, Any]:
    """The node as we leave it after our cordon and taint (what Draining writes)."""
    return apply_node_actions(node, [Cordon(NP_NAME), Taint(NP_NAME)])


def draining_conditions(at: datetime = NOW) -> list[dict[str, Any]]:
    return [
        cond("DrainCompleted", "False", "DrainInProgress", at=at),
        cond("NodeCordoned", "True", "CordonSucceeded", at=at),
        cond("NodeTainted", "True", "TaintApplied", at=at),
    ]


def waiting_conditions(applied_at: datetime = NOW) -> list[dict[str, Any]]:
    return [
        cond("DrainCompleted", "True", "DrainSucceeded", at=applied_at),
        cond("NodeCordoned", "True", "CordonSucceeded", at=applied_at),
        cond("NodeTainted", "True", "TaintApplied", at=applied_at),
        cond("ProfileApplied", "True", "DCMConfigUpdated", at=applied_at),
        cond("OperatorReady", "False", "DCMProcessing", at=applied_at),
    ]


def applied_node(state: str | None = None, *, gpus: str = "8") -> dict[str, Any]:
    """A drained, cordoned, tainted node labelled for cpx by us, optionally with DCM's state label."""
    node = apply_node_actions(ours(make_node(gpus=gpus)), [MarkApplied(f"{NP_NAME}/{HASH}")])
    labels = node["metadata"]["labels"]
    labels[PROFILE_LABEL] = "cpx"
    labels[APPLY_TRIGGER_LABEL] = "apply"
    labels.pop(PROFILE_STATE_LABEL, None)
    if state is not None:
        labels[PROFILE_STATE_LABEL] = state
    return node


# --- pods and tolerations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "tolerates"),
    [
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, False),
        ({"key": "amd-dcm", "operator": "Exists"}, True),
        ({"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute"}, True),
        ({"key": "amd-dcm", "operator": "Equal", "value": "up", "effect": "NoExecute"}, True),
        ({"key": "amd-dcm", "value": "up"}, True),  # Equal is the default operator
        ({"key": "amd-dcm", "operator": "Equal", "value": "down", "effect": "NoExecute"}, False),
        ({"key": "amd-dcm", "operator": "Exists", "effect": "NoSchedule"}, False),
        ({"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, False),
        ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}, False),
        ({"key": "", "operator": "Equal", "value": "up"}, False),
    ],
)
def test_toleration_matrix(toleration: dict[str, Any], tolerates: bool) -> None:
    assert pod_tolerates_dcm_taint(pod("p", tolerations=[toleration])) is tolerates


def test_pods_to_drain_keeps_daemonsets_and_terminating_skips_mirror_tolerating_finished() -> None:
    other_node = pod("elsewhere", node="mi300x-1")
    names = {p.name for p in pods_to_drain(pod_views([*ALL_PODS, other_node]), NODE)}
    assert names == {"llama-70b-0", "amd-gpu-device-plugin-x7k2p", "llama-70b-1"}


def test_a_finished_pod_being_deleted_holds_the_taint_until_it_is_gone() -> None:
    """kube's taint manager deletes the pods it finds on a tainted node by name: a replacement with the
    same name, up elsewhere once the old pod is gone, would be deleted in its place."""
    evicted = pod("llama-8b-pd-1-decode-1-0", phase="Failed", terminating=True)
    assert [p.name for p in pods_to_drain(pod_views([evicted]), NODE)] == ["llama-8b-pd-1-decode-1-0"]
    done = pod("job-done", phase="Succeeded")
    assert pods_to_drain(pod_views([done]), NODE) == [], "a finished pod nobody deletes is left alone"


def test_dcm_event_filter() -> None:
    ev = dcm_event("PartitionFailure", "x")
    assert is_dcm_event_for(dcm_event_view(ev), NODE)
    assert not is_dcm_event_for(dcm_event_view(ev), "mi300x-1")
    assert not is_dcm_event_for(
        dcm_event_view({**ev, "source": {"component": "kubelet", "host": NODE}}), NODE
    )
    on_node = {
        **ev,
        "source": {"component": DCM_EVENT_SOURCE},
        "involvedObject": {"kind": "Node", "name": NODE},
    }
    assert is_dcm_event_for(dcm_event_view(on_node), NODE)


# --- node actions ------------------------------------------------------------------------------------


def test_node_actions_record_ownership_and_are_idempotent() -> None:
    node = make_node()
    once = apply_node_actions(node, [Cordon(NP_NAME), Taint(NP_NAME)])
    assert once["spec"]["unschedulable"] is True
    assert once["spec"]["taints"] == [{"key": "amd-dcm", "value": "up", "effect": "NoExecute"}]
    assert once["metadata"]["annotations"] == {
        CORDONED_BY_ANNOTATION: NP_NAME,
        TAINTED_BY_ANNOTATION: NP_NAME,
    }
    assert apply_node_actions(once, [Cordon(NP_NAME), Taint(NP_NAME)]) == once
    back = apply_node_actions(once, [Untaint(NP_NAME), Uncordon(NP_NAME)])
    assert back == node
    assert "unschedulable" not in node["spec"], "input mutated"


def test_node_actions_never_undo_someone_elses_cordon_or_taint() -> None:
    foreign_taint = {"key": "amd-dcm", "value": "up", "effect": "NoExecute"}
    node = make_node(unschedulable=True, taints=[foreign_taint])
    after = apply_node_actions(node, [Cordon(NP_NAME), Taint(NP_NAME)])
    assert after == node  # nothing claimed
    assert apply_node_actions(after, [Untaint(NP_NAME), Uncordon(NP_NAME)]) == node
    other = apply_node_actions(make_node(), [Cordon("other-np")])
    assert apply_node_actions(other, [Uncordon(NP_NAME)]) == other


def test_label_actions() -> None:
    node = make_node()
    labelled = apply_node_actions(
        node, [SetLabels(((PROFILE_LABEL, "cpx"),)), RemoveLabels((PROFILE_STATE_LABEL,))]
    )
    assert labelled["metadata"]["labels"][PROFILE_LABEL] == "cpx"
    assert PROFILE_STATE_LABEL not in labelled["metadata"]["labels"]
    assert not SetLabels(((PROFILE_LABEL, "cpx"),)).mutate(copy.deepcopy(labelled))
    assert not RemoveLabels(("absent",)).mutate(copy.deepcopy(labelled))


# --- dry run -----------------------------------------------------------------------------------------


def test_dry_run_skips_without_touching_the_node() -> None:
    d = run(make_np(dry_run=True, admitted=False), make_node(), pods=ALL_PODS)
    assert d.phase == "Skipped"
    assert d.node_actions == () and d.finalizer is None
    assert reason_of(d, "DryRun") == ("True", "DryRunEnabled")
    for type_ in (
        "NodeCordoned",
        "NodeTainted",
        "DrainCompleted",
        "ProfileApplied",
        "OperatorReady",
        "Verified",
    ):
        assert reason_of(d, type_) == ("False", "DryRunSkipped")
    assert [(e.type, e.reason, e.message) for e in d.events] == [
        ("Normal", "DryRunSkipped", f"Dry-run: would partition node {NODE} with profile mi300x-cpx")
    ]
    # Steady: deciding again on the written status changes nothing.
    np = make_np(dry_run=True, admitted=False)
    np["status"] = d.status
    assert run(np, make_node(), pods=ALL_PODS).is_noop


def test_dry_run_previews_a_target_mismatch() -> None:
    d = run(make_np(dry_run=True), make_node(labels={"amd.com/gpu.product-name": "AMD_Instinct_MI250X"}))
    assert d.phase == "Skipped"
    assert "does not match the targetSelector" in d.events[0].message


def test_skipped_without_dry_run_goes_back_to_pending() -> None:
    dry = run(make_np(dry_run=True), make_node())
    np = make_np(admitted=False)
    np["status"] = dry.status
    d = run(np, make_node())
    assert d.phase == "Pending"
    assert conditions_of(d) == []
    assert d.node_actions == ()


# --- Pending -----------------------------------------------------------------------------------------


def test_fresh_np_waits_for_admission_with_one_status_write() -> None:
    d = run(make_np(admitted=False), make_node(), pods=ALL_PODS)
    assert d.phase == "Pending"
    assert d.status == {"phase": "Pending", "conditions": [], "observedGeneration": 1}
    assert d.node_actions == () and d.events == () and d.finalizer is None
    np = make_np(admitted=False, phase="Pending")
    assert run(np, make_node(), pods=ALL_PODS).is_noop


def test_admission_for_an_older_hash_does_not_count() -> None:
    np = make_np(phase="Pending", admitted=False)
    np["metadata"]["annotations"] = {ADMITTED_ANNOTATION: HASH2}
    assert run(np, make_node(), pods=ALL_PODS).phase == "Pending"


def test_admission_check_is_injectable() -> None:
    np = make_np(phase="Pending", admitted=False)
    assert run(np, make_node(), admitted=lambda _: True).phase != "Pending"
    assert run(make_np(phase="Pending"), make_node(), admitted=lambda _: False).phase == "Pending"


@pytest.mark.parametrize("expected_value", ["64", "64000m", 64])
def test_already_configured_short_circuits_untouched(expected_value: Any) -> None:
    node = make_node(gpus="64", labels={PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "success"})
    d = run(
        make_np(admitted=False), node, make_profile(expected={"amd.com/gpu": expected_value}), pods=ALL_PODS
    )
    assert d.phase == "Succeeded"
    assert d.node_actions == () and d.finalizer is None
    assert d.status is not None and d.status["currentHash"] == HASH
    assert all(c["status"] == "True" and c["reason"] == "AlreadyInDesiredState" for c in conditions_of(d))
    assert len(conditions_of(d)) == 6
    assert event_reasons(d) == ["AlreadyConfigured"]


@pytest.mark.parametrize(
    ("labels", "gpus", "expected"),
    [
        (
            {PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "success"},
            "8",
            {"amd.com/gpu": "64"},
        ),  # capacity differs
        (
            {PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: None},
            "64",
            {"amd.com/gpu": "64"},
        ),  # DCM has not confirmed
        ({PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "failure"}, "64", {"amd.com/gpu": "64"}),
        (
            {PROFILE_LABEL: "spx", PROFILE_STATE_LABEL: "success"},
            "64",
            {"amd.com/gpu": "64"},
        ),  # other profile
        ({PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "success"}, "64", {}),  # nothing to compare
    ],
)
def test_no_short_circuit_without_full_evidence(
    labels: dict[str, str | None], gpus: str, expected: dict[str, str]
) -> None:
    d = run(make_np(), make_node(gpus=gpus, labels=labels), make_profile(expected=expected), pods=[WORKLOAD])
    assert d.phase == "Draining"


def test_target_selector_mismatch_is_held_and_never_touched() -> None:
    node = make_node(labels={"amd.com/gpu.product-name": "AMD_Instinct_MI250X"})
    d = run(make_np(), node, pods=ALL_PODS)  # admitted, even
    assert d.phase == "Pending"
    assert d.node_actions == () and d.finalizer is None and d.events == ()


@pytest.mark.parametrize(
    "profile",
    [
        None,
        make_profile(expected={"amd.com/gpu": "sixty-four"}),
        make_profile(selector={"matchExpressions": [{"key": "x", "operator": "Near"}]}),
        make_profile(dcm=""),
    ],
)
def test_missing_or_unusable_profile_holds_pending(profile: dict[str, Any] | None) -> None:
    d = run(make_np(), make_node(), profile, pods=ALL_PODS, use_default_profile=False)
    assert d.phase == "Pending"
    assert d.node_actions == () and d.finalizer is None


def test_pending_releases_marks_left_by_a_lost_status_write_when_no_longer_admitted() -> None:
    np = make_np(phase="Pending", admitted=False, finalizer=True)
    d = run(np, ours(make_node()))
    assert d.phase == "Pending"
    assert d.node_actions == (Untaint(NP_NAME), Uncordon(NP_NAME))
    assert d.finalizer == "remove"


# --- Draining ----------------------------------------------------------------------------------------


def test_admitted_pending_cordons_and_evicts_before_tainting() -> None:
    """PodDisruptionBudgets hold only against the Eviction API: the NoExecute taint (whose taint manager
    ignores them) waits until the workload is gone; DaemonSet pods (the device plugin) go with it."""
    d = run(make_np(), make_node(), pods=ALL_PODS)
    assert d.phase == "Draining"
    assert d.finalizer == "add"
    assert d.node_mutations == (Cordon(NP_NAME),)
    assert d.evictions == (Evict("team-a", "llama-70b-0", "uid-llama-70b-0"),)
    # Mutations come first: the executor writes the node before it evicts anything.
    assert d.node_actions[:1] == d.node_mutations
    assert reason_of(d, "NodeCordoned") == ("True", "CordonSucceeded")
    assert reason_of(d, "NodeTainted") == ("False", "WaitingForEvictions")
    assert reason_of(d, "DrainCompleted") == ("False", "DrainInProgress")
    dc = get_condition(conditions_of(d), "DrainCompleted")
    # the workload pod being evicted and a terminating one being waited for (it may hold the GPU)
    assert dc is not None and dc["message"] == "waiting for 2 pods to be evicted: drain in progress"
    assert dc["lastTransitionTime"] == format_time(NOW)
    assert event_reasons(d) == ["DrainStarted"]
    assert d.requeue_after == 5.0


def test_the_taint_comes_once_the_workload_is_gone_and_moves_daemonset_pods() -> None:
    first = run(make_np(), make_node(), pods=ALL_PODS)
    np, node = applied(make_np(), first), apply_node_actions(make_node(), first.node_actions)
    rest = [p for p in ALL_PODS if p["metadata"]["name"] not in ("llama-70b-0", "llama-70b-1")]
    d = run(np, node, pods=rest, now=NOW + timedelta(seconds=5))
    assert d.node_mutations == (Taint(NP_NAME),)
    # The DaemonSet controller deletes the device plugin once the taint is there: it is waited for,
    # not evicted (an eviction racing that delete was answered 404 every time).
    assert d.evictions == ()
    assert reason_of(d, "NodeTainted") == ("True", "TaintApplied")
    assert reason_of(d, "DrainCompleted") == ("False", "DrainInProgress")


def test_a_daemonset_pod_tolerating_the_taint_for_a_while_is_evicted_once_tainted() -> None:
    """Its controller keeps it running until the taint manager's timer runs out: evicting is faster."""
    timed = pod(
        "node-exporter-abcde",
        "monitoring",
        owner_kind="DaemonSet",
        tolerations=[
            {"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
    )
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    d = run(np, ours(make_node()), pods=[DEVICE_PLUGIN, timed])
    assert [e.name for e in d.evictions] == ["node-exporter-abcde"]


def applied(np: Mapping[str, Any], d: Decision) -> dict[str, Any]:
    """``np`` after the executor wrote decision ``d`` (status and finalizer)."""
    out = copy.deepcopy(dict(np))
    if d.status is not None:
        out["status"] = copy.deepcopy(d.status)
    if d.finalizer == "add":
        out["metadata"].setdefault("finalizers", []).append(FINALIZER)
    if d.finalizer == "remove":
        out["metadata"]["finalizers"] = [f for f in out["metadata"]["finalizers"] if f != FINALIZER]
    return out


def test_draining_blocked_by_pdb_retries_evictions_without_writes() -> None:
    pods = [WORKLOAD, DEVICE_PLUGIN]
    first = run(make_np(), make_node(), pods=pods)
    np, node = applied(make_np(), first), apply_node_actions(make_node(), first.node_actions)
    d = run(np, node, pods=pods, now=NOW + timedelta(minutes=3))
    assert d.status is None and d.events == () and d.finalizer is None
    assert d.node_mutations == ()
    assert [e.name for e in d.evictions] == ["llama-70b-0"]  # the device plugin waits for the taint
    assert d.requeue_after == 5.0


def test_draining_waits_for_terminating_pods_without_evicting_them() -> None:
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    d = run(np, ours(make_node()), pods=[TERMINATING, DCM_POD])
    assert d.phase == "Draining" and d.evictions == ()
    assert d.status is not None
    dc = get_condition(conditions_of(d), "DrainCompleted")
    assert dc is not None and dc["message"].startswith("waiting for 1 pods")


def test_pre_cordoned_node_is_not_claimed() -> None:
    d = run(make_np(), make_node(unschedulable=True), pods=[WORKLOAD])
    assert d.node_mutations == ()  # no Cordon of ours; the taint waits for the eviction
    assert reason_of(d, "NodeCordoned") == ("True", "AlreadyCordoned")


def test_drain_timeout_fails_and_releases_the_node() -> None:
    started = NOW - timedelta(minutes=20, seconds=1)
    np = make_np(phase="Draining", conditions=draining_conditions(started), finalizer=True)
    d = run(np, ours(make_node()), pods=[WORKLOAD])
    assert d.phase == "Failed"
    assert reason_of(d, "DrainCompleted") == ("False", "DrainTimeout")
    assert d.node_actions == (Untaint(NP_NAME), Uncordon(NP_NAME))
    assert reason_of(d, "NodeCordoned") == ("False", "Uncordoned")
    assert d.finalizer == "remove"
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "DrainTimeout")]
    assert "team-a/llama-70b-0" in d.events[0].message and "20m" in d.events[0].message


def test_drain_timeout_requeue_never_overshoots_the_deadline() -> None:
    started = NOW - timedelta(minutes=20) + timedelta(seconds=2)
    np = make_np(phase="Draining", conditions=draining_conditions(started), finalizer=True)
    assert run(np, ours(make_node()), pods=[WORKLOAD]).requeue_after == 2.0


def test_drain_completes_applies_profile_and_waits_for_operator() -> None:
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    later = NOW + timedelta(minutes=4)
    d = run(np, ours(make_node()), pods=[DCM_POD, CILIUM, KUBE_PROXY, FINISHED_JOB], now=later)
    assert d.phase == "WaitingOperator"
    assert d.node_actions == (
        SetLabels(((PROFILE_LABEL, "cpx"), (APPLY_TRIGGER_LABEL, "apply"))),
        RemoveLabels((PROFILE_STATE_LABEL,)),
        MarkApplied(f"{NP_NAME}/{HASH}"),
    )
    assert reason_of(d, "DrainCompleted") == ("True", "DrainSucceeded")
    assert reason_of(d, "ProfileApplied") == ("True", "DCMConfigUpdated")
    assert reason_of(d, "OperatorReady") == ("False", "DCMProcessing")
    pa = get_condition(conditions_of(d), "ProfileApplied")
    assert pa is not None and pa["lastTransitionTime"] == format_time(later)
    assert event_reasons(d) == ["DrainCompleted", "ProfileApplied"]
    assert d.requeue_after == 15.0


def test_an_empty_node_is_cordoned_first_and_tainted_only_once_the_cordon_is_in_place() -> None:
    """The taint evicts without asking PodDisruptionBudgets, so it never rides on the cordon's write:
    a pod bound just before the cordon may be missing from the view that decided it (the executor
    confirms "empty" with a LIST once the cordon is committed)."""
    d1 = run(make_np(), make_node(), pods=[DCM_POD])
    assert d1.phase == "Draining"
    assert d1.finalizer == "add"
    assert [type(a).__name__ for a in d1.node_actions] == ["Cordon"]
    assert reason_of(d1, "NodeTainted") == ("False", "WaitingForCordon")
    assert event_reasons(d1) == ["DrainStarted"]
    assert d1.requeue_after is not None
    np = make_np(phase="Draining", conditions=d1.status["conditions"], finalizer=True)
    d2 = run(np, apply_node_actions(make_node(), d1.node_actions), pods=[DCM_POD])
    assert d2.phase == "WaitingOperator"
    assert [type(a).__name__ for a in d2.node_actions] == [
        "Taint",
        "SetLabels",
        "RemoveLabels",
        "MarkApplied",
    ]
    assert event_reasons(d2) == ["DrainCompleted", "ProfileApplied"]


# --- Applying: re-triggering DCM ---------------------------------------------------------------------


def test_same_label_value_is_removed_then_set_again() -> None:
    node = ours(make_node(labels={PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "failure"}))
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    d1 = run(np, node)
    assert d1.phase == "Applying"
    assert d1.node_actions == (RemoveLabels((PROFILE_LABEL, PROFILE_STATE_LABEL, APPLY_TRIGGER_LABEL)),)
    assert reason_of(d1, "ProfileApplied") == ("False", "DCMRetrigger")
    assert d1.requeue_after == 1.0
    np["status"] = d1.status
    node = apply_node_actions(node, d1.node_actions)
    d2 = run(np, node, now=NOW + timedelta(seconds=1))
    assert d2.phase == "WaitingOperator"
    assert d2.node_actions == (
        SetLabels(((PROFILE_LABEL, "cpx"), (APPLY_TRIGGER_LABEL, "apply"))),
        MarkApplied(f"{NP_NAME}/{HASH}"),
    )
    assert reason_of(d2, "ProfileApplied") == ("True", "DCMConfigUpdated")


def test_a_lost_status_write_after_applying_does_not_retrigger_our_own_request() -> None:
    """The node write (labels) landed but the NP status write after it conflicted: the next decision
    sees phase Draining/Applying and the desired label. It is our in-flight request (the node says so),
    so it must wait for DCM, not strip the labels DCM is acting on."""
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    d = run(np, ours(make_node()), pods=[DCM_POD])
    node = apply_node_actions(ours(make_node()), d.node_mutations)
    again = run(np, node, pods=[DCM_POD], now=NOW + timedelta(seconds=1))  # np status unchanged: lost
    assert again.phase == "WaitingOperator"
    assert not any(isinstance(a, RemoveLabels) and PROFILE_LABEL in a.keys for a in again.node_actions)
    dcm_answered = apply_node_actions(node, (SetLabels(((PROFILE_STATE_LABEL, "success"),)),))
    third = run(np, dcm_answered, pods=[DCM_POD], now=NOW + timedelta(seconds=2))
    assert third.phase in ("Verifying", "Succeeded")


# --- WaitingOperator ---------------------------------------------------------------------------------


def waiting_np(applied_at: datetime = NOW, **kw: Any) -> dict[str, Any]:
    return make_np(phase="WaitingOperator", conditions=waiting_conditions(applied_at), finalizer=True, **kw)


def test_dcm_success_untaints_keeps_cordon_and_starts_verifying() -> None:
    later = NOW + timedelta(minutes=2)
    d = run(waiting_np(), applied_node("success"), now=later)
    assert d.phase == "Verifying"
    assert d.node_actions == (Untaint(NP_NAME), RemoveLabels((APPLY_TRIGGER_LABEL,)))
    assert reason_of(d, "OperatorReady") == ("True", "DCMSucceeded")
    assert reason_of(d, "NodeTainted") == ("False", "TaintRemoved")
    assert reason_of(d, "NodeCordoned") == ("True", "CordonSucceeded")
    assert reason_of(d, "Verified") == ("False", "ResourceMismatch")
    v = get_condition(conditions_of(d), "Verified")
    assert v is not None and v["message"] == "amd.com/gpu: got 8 (expected 64)"
    assert v["lastTransitionTime"] == format_time(later)


def test_dcm_state_is_read_only_on_a_node_view_that_shows_our_request() -> None:
    """The node left in Verifying with the drain's taint on the real control plane. No pod had to
    leave the node (its device plugin's pod not created yet), so the taint and the DCM profile label
    went out in one write and the NodePartitioning moved to WaitingOperator. The next decision read
    that status (our own write) but a Node cache one write behind: cordoned, untainted, and still
    labelled with DCM's ``success`` for the node's previous profile. Taken as DCM's answer, it moved
    to Verifying with nothing to untaint in that view: no node write at all, so no resourceVersion to
    refuse it, and the taint stayed, keeping the device plugin off the node for good."""
    cordoned = apply_node_actions(make_node(), [Cordon(NP_NAME)])
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    np["status"]["conditions"][2] = cond("NodeTainted", "False", "WaitingForCordon")
    drained = run(np, cordoned, pods=[DCM_POD])
    assert drained.phase == "WaitingOperator"
    assert Taint(NP_NAME) in drained.node_actions  # the taint and the label in one write
    np = applied(np, drained)
    lagging = run(np, cordoned, pods=[DCM_POD], now=NOW + timedelta(seconds=1))
    assert lagging.phase == "WaitingOperator"
    assert lagging.status is None and lagging.node_actions == () and lagging.events == ()
    # DCM's answer on the Node as written: success, the taint is ours and goes.
    node = apply_node_actions(cordoned, drained.node_actions)
    node["metadata"]["labels"][PROFILE_STATE_LABEL] = "success"
    d = run(np, node, pods=[DCM_POD], now=NOW + timedelta(seconds=2))
    assert d.phase == "Verifying" and Untaint(NP_NAME) in d.node_actions


def test_an_old_dcm_failure_on_a_lagging_view_does_not_fail_the_node() -> None:
    """The same lag with a node whose previous profile failed: its ``failure`` is not DCM's answer."""
    lagging = make_node(labels={PROFILE_STATE_LABEL: "failure"})
    lagging = apply_node_actions(lagging, [Cordon(NP_NAME), Taint(NP_NAME)])
    d = run(waiting_np(), lagging, now=NOW + timedelta(minutes=10))
    assert d.phase == "WaitingOperator" and d.node_actions == ()


@pytest.mark.parametrize("state", [None, "in-progress"])
def test_waiting_for_dcm(state: str | None) -> None:
    cordon = run(make_np(), make_node())
    np, node = applied(make_np(), cordon), apply_node_actions(make_node(), cordon.node_actions)
    first = run(np, node)
    np, node = applied(np, first), apply_node_actions(node, first.node_actions)
    assert np["status"]["phase"] == "WaitingOperator"
    if state is not None:
        node["metadata"]["labels"][PROFILE_STATE_LABEL] = state
    d = run(np, node, now=NOW + timedelta(minutes=10))
    assert d.phase == "WaitingOperator"
    assert d.status is None and d.node_actions == () and d.events == ()
    assert d.requeue_after == 15.0


def test_unknown_dcm_state_waits_with_its_own_reason() -> None:
    d = run(waiting_np(), applied_node("partitioning"), now=NOW + timedelta(seconds=30))
    assert reason_of(d, "OperatorReady") == ("False", "UnknownDCMState")
    assert d.phase == "WaitingOperator"


def test_dcm_failure_fails_with_dcms_reason_and_releases() -> None:
    payload = json.dumps({"SelectedProfile": "cpx", "FinalStatus": "Failure", "Reason": "Device busy"})
    events = [dcm_event("PartitionFailure", payload, at=NOW + timedelta(minutes=1))]
    d = run(waiting_np(), applied_node("failure"), now=NOW + timedelta(minutes=1), events=events)
    assert d.phase == "Failed"
    assert reason_of(d, "OperatorReady") == ("False", "DCMFailed")
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "DCMFailed")]
    assert "PartitionFailure: Device busy" in d.events[0].message
    assert d.node_actions == (
        Untaint(NP_NAME),
        Uncordon(NP_NAME),
        RemoveLabels((APPLY_TRIGGER_LABEL,)),
        UnmarkApplied(NP_NAME),
    )
    assert d.finalizer == "remove"


def test_stale_dcm_failure_events_are_ignored() -> None:
    old = [dcm_event("NonExistentProfile", "Profile does not exist", at=NOW - timedelta(hours=1))]
    d = run(waiting_np(), applied_node("failure"), now=NOW + timedelta(seconds=5), events=old)
    assert reason_of(d, "OperatorReady") == ("Unknown", "DCMFailureReported")
    assert d.phase == "WaitingOperator"


def test_dcm_retrying_keeps_waiting_until_the_operator_timeout() -> None:
    events = [
        dcm_event("PartitionRetrying", json.dumps({"Reason": "Partition retrying for profile: cpx"}), at=NOW)
    ]
    d = run(waiting_np(), applied_node("failure"), now=NOW + timedelta(minutes=5), events=events)
    assert d.phase == "WaitingOperator"
    assert reason_of(d, "OperatorReady") == ("False", "DCMRetrying")
    d = run(waiting_np(), applied_node("failure"), now=NOW + timedelta(minutes=30), events=events)
    assert d.phase == "Failed"
    assert reason_of(d, "OperatorReady") == ("False", "OperatorUnavailable")
    assert "PartitionRetrying" in d.events[0].message


def test_unexplained_dcm_failure_waits_a_grace_period() -> None:
    later = NOW + timedelta(minutes=3)
    d1 = run(waiting_np(), applied_node("failure"), now=later)
    assert d1.phase == "WaitingOperator"
    assert reason_of(d1, "OperatorReady") == ("Unknown", "DCMFailureReported")
    assert d1.requeue_after == 15.0
    np = waiting_np()
    np["status"] = d1.status
    d2 = run(np, applied_node("failure"), now=later + timedelta(seconds=29))
    assert d2.phase == "WaitingOperator" and d2.requeue_after == 1.0
    d3 = run(np, applied_node("failure"), now=later + timedelta(seconds=30))
    assert d3.phase == "Failed"
    assert reason_of(d3, "OperatorReady") == ("False", "DCMFailed")


def test_operator_timeout() -> None:
    d = run(waiting_np(), applied_node(None), now=NOW + timedelta(minutes=30))
    assert d.phase == "Failed"
    assert reason_of(d, "OperatorReady") == ("False", "OperatorUnavailable")
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "OperatorUnavailable")]
    assert "within 30m" in d.events[0].message


# --- Verifying ---------------------------------------------------------------------------------------


def verifying_np(started: datetime = NOW, *, reason: str = "ResourceMismatch") -> dict[str, Any]:
    conditions = [
        *waiting_conditions(started)[:-1],
        cond("OperatorReady", "True", "DCMSucceeded", at=started),
        cond("Verified", "False", reason, at=started, message="amd.com/gpu: got 8 (expected 64)"),
    ]
    conditions[2] = cond("NodeTainted", "False", "TaintRemoved", at=started)
    return make_np(phase="Verifying", conditions=conditions, finalizer=True)


def verifying_node(gpus: str | None) -> dict[str, Any]:
    node = apply_node_actions(
        applied_node("success"), [Untaint(NP_NAME), RemoveLabels((APPLY_TRIGGER_LABEL,))]
    )
    if gpus is None:
        del node["status"]["allocatable"]["amd.com/gpu"]
    else:
        node["status"]["allocatable"]["amd.com/gpu"] = gpus
    return node


def test_verification_passes_and_gives_the_node_back() -> None:
    d = run(verifying_np(), verifying_node("64"), now=NOW + timedelta(seconds=40))
    assert d.phase == "Succeeded"
    assert d.status is not None and d.status["currentHash"] == HASH
    assert reason_of(d, "Verified") == ("True", "VerificationSucceeded")
    assert event_reasons(d) == ["VerificationSucceeded", "NodeSucceeded"]
    assert d.node_actions == (Uncordon(NP_NAME), UnmarkApplied(NP_NAME))
    assert d.finalizer == "remove"
    np = verifying_np()
    np["status"] = d.status
    np["metadata"]["finalizers"] = []
    done = apply_node_actions(verifying_node("64"), d.node_actions)
    assert run(np, done).is_noop  # zero writes at steady state


def test_verification_tolerates_a_slow_device_plugin() -> None:
    d = run(verifying_np(), verifying_node("8"), now=NOW + timedelta(minutes=4))
    assert d.phase == "Verifying" and d.status is None and d.node_actions == ()
    assert d.requeue_after == 15.0
    d = run(verifying_np(), verifying_node("8"), now=NOW + timedelta(minutes=4, seconds=50))
    assert d.requeue_after == 10.0


def test_verifying_removes_a_taint_of_ours_still_on_the_node() -> None:
    """Our taint on a node being verified (the DCM-success step missed it, or it was put back) keeps
    the device plugin, which does not tolerate it, off the node: the partitions would never show and
    the node would sit in Verifying until the verify timeout. Verifying removes it, once."""
    tainted = apply_node_actions(verifying_node("8"), [Taint(NP_NAME)])
    d = run(verifying_np(), tainted, now=NOW + timedelta(seconds=30))
    assert d.phase == "Verifying"
    assert d.node_actions == (Untaint(NP_NAME),)
    assert reason_of(d, "NodeTainted") == ("False", "TaintRemoved")
    assert reason_of(d, "NodeCordoned") == ("True", "CordonSucceeded")
    assert reason_of(d, "Verified") == ("False", "ResourceMismatch")
    np = verifying_np()
    np["status"] = d.status
    again = run(np, apply_node_actions(tainted, d.node_actions), now=NOW + timedelta(seconds=31))
    assert again.node_actions == () and again.status is None and again.events == ()


def test_a_taint_put_back_by_a_decision_on_a_lagging_view_is_removed_by_verifying() -> None:
    """The interleaving that left a node in Verifying: DCM success untaints and moves to Verifying;
    a decision on a view of the NodePartitioning that still says Draining (its status write refused,
    since that view is stale) sees the node untainted with the device plugin's new pod on it, and
    taints it again — the node write goes through, guarded only by the Node's own resourceVersion.
    The plugin's pod is then removed by the taint, nothing publishes the partitions, and only a
    Verifying that removes our taint gets the node out."""
    untaint = run(waiting_np(), applied_node("success"), now=NOW + timedelta(seconds=5))
    assert untaint.phase == "Verifying" and Untaint(NP_NAME) in untaint.node_actions
    server_np = waiting_np()
    server_np["status"] = untaint.status
    node = apply_node_actions(applied_node("success"), untaint.node_actions)
    draining_np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True)
    plugin_back = pod("amd-gpu-device-plugin-new", "kube-amd-gpu", owner_kind="DaemonSet")
    stale = run(draining_np, node, pods=[plugin_back, DCM_POD], now=NOW + timedelta(seconds=6))
    assert Taint(NP_NAME) in stale.node_actions  # the write a stale view makes (its status is refused)
    node = apply_node_actions(node, stale.node_actions)
    assert carries_dcm_taint(node)
    d = run(server_np, node, now=NOW + timedelta(seconds=7))
    assert d.phase == "Verifying" and d.node_actions == (Untaint(NP_NAME),)
    assert not carries_dcm_taint(apply_node_actions(node, d.node_actions))


def test_verifying_leaves_a_taint_that_is_not_ours() -> None:
    foreign = apply_node_actions(verifying_node("8"), [Taint("someone-else")])
    d = run(verifying_np(), foreign, now=NOW + timedelta(seconds=30))
    assert d.phase == "Verifying" and d.node_actions == () and d.status is None
    d = run(verifying_np(), foreign, now=NOW + timedelta(minutes=5))
    assert d.phase == "Failed" and "not ours" in d.events[0].message
    assert d.node_actions == (Uncordon(NP_NAME), UnmarkApplied(NP_NAME))


@pytest.mark.parametrize(
    ("gpus", "detail"),
    [("8", "amd.com/gpu: got 8 (expected 64)"), (None, "amd.com/gpu: not found (expected 64)")],
)
def test_verify_timeout_names_each_mismatch(gpus: str | None, detail: str) -> None:
    d = run(verifying_np(), verifying_node(gpus), now=NOW + timedelta(minutes=5))
    assert d.phase == "Failed"
    assert reason_of(d, "Verified") == ("False", "VerifyFailed")
    assert d.events[0].reason == "VerifyFailed" and detail in d.events[0].message
    assert d.node_actions == (Uncordon(NP_NAME), UnmarkApplied(NP_NAME))


def test_verify_requires_every_expected_resource() -> None:
    profile = make_profile(expected={"amd.com/gpu": "64", "amd.com/cpx_nps4": "64"})
    d = run(verifying_np(), verifying_node("64"), profile, now=NOW + timedelta(minutes=5))
    assert d.phase == "Failed"
    assert "amd.com/cpx_nps4: not found (expected 64)" in d.events[0].message


def test_verify_without_expected_resources_needs_amd_gpu() -> None:
    profile = make_profile(expected={})
    assert run(verifying_np(), verifying_node("8"), profile).phase == "Succeeded"
    d = run(verifying_np(), verifying_node(None), profile)
    assert reason_of(d, "Verified") == ("False", "GPUResourcesNotFound")


def test_verify_requires_the_profile_label() -> None:
    node = verifying_node("64")
    node["metadata"]["labels"][PROFILE_LABEL] = "spx"
    d = run(verifying_np(), node)
    assert reason_of(d, "Verified") == ("False", "DCMLabelMissing")


# --- Succeeded, Failed, spec changes -----------------------------------------------------------------


def succeeded_np(**kw: Any) -> dict[str, Any]:
    conditions = [cond(t, "True", "VerificationSucceeded") for t in ("Verified", "OperatorReady")]
    return make_np(phase="Succeeded", conditions=conditions, current_hash=HASH, **kw)


def test_succeeded_is_a_zero_write_steady_state() -> None:
    node = make_node(gpus="64", labels={PROFILE_LABEL: "cpx"})
    assert run(succeeded_np(), node, pods=ALL_PODS).is_noop


def test_succeeded_with_a_new_hash_goes_back_to_pending() -> None:
    np = succeeded_np(desired_hash=HASH2, admitted=False, generation=2)
    qpx = make_profile(dcm="qpx", expected={"amd.com/gpu": "32"})
    d = run(np, make_node(gpus="64", labels={PROFILE_LABEL: "cpx"}), qpx)
    assert d.phase == "Pending"
    assert d.status is not None and d.status["conditions"] == [] and d.status["observedGeneration"] == 2


def test_a_new_hash_the_node_already_satisfies_needs_no_drain() -> None:
    # e.g. a description-only edit under an older hash format: the capacity short-circuit absorbs it
    np = succeeded_np(desired_hash=HASH2, admitted=False, generation=2)
    d = run(np, make_node(gpus="64", labels={PROFILE_LABEL: "cpx"}))
    assert d.phase == "Succeeded" and d.node_actions == ()
    assert d.status is not None and d.status["currentHash"] == HASH2
    assert event_reasons(d) == ["AlreadyConfigured"]


def test_succeeded_with_a_new_hash_and_admission_starts_right_away() -> None:
    np = succeeded_np(desired_hash=HASH2, generation=2)
    assert run(np, make_node(), pods=[WORKLOAD]).phase == "Draining"


def test_succeeded_only_bumps_observed_generation_on_other_spec_changes() -> None:
    d = run(succeeded_np(generation=3), make_node(gpus="64", labels={PROFILE_LABEL: "cpx"}))
    assert d.phase == "Succeeded" and d.node_actions == ()
    assert d.status is not None and d.status["observedGeneration"] == 3


def test_failed_is_terminal_for_its_hash() -> None:
    np = make_np(phase="Failed", conditions=[cond("DrainCompleted", "False", "DrainTimeout")])
    assert run(np, make_node(), pods=[WORKLOAD]).is_noop


def test_failed_with_a_new_spec_retries_from_pending() -> None:
    np = make_np(
        phase="Failed",
        conditions=[cond("DrainCompleted", "False", "DrainTimeout")],
        desired_hash=HASH2,
        generation=2,
        admitted=False,
    )
    d = run(np, make_node(), pods=[WORKLOAD])
    assert d.phase == "Pending" and conditions_of(d) == []


def test_spec_change_in_flight_restarts_at_draining() -> None:
    np = waiting_np(generation=2, desired_hash=HASH2)
    np["metadata"]["annotations"] = {}  # admission for the new hash is not needed once in flight
    d = run(np, applied_node(None), make_profile(dcm="qpx", expected={"amd.com/gpu": "32"}))
    assert event_reasons(d)[0] == "Restarted"
    assert d.phase == "WaitingOperator"
    assert SetLabels(((PROFILE_LABEL, "qpx"), (APPLY_TRIGGER_LABEL, "apply"))) in d.node_actions
    assert d.status is not None and d.status["observedGeneration"] == 2


def test_in_flight_profile_loss_fails_and_releases() -> None:
    d = run(waiting_np(), applied_node(None), None, use_default_profile=False)
    assert d.phase == "Failed"
    assert reason_of(d, "Verified") == ("False", "ProfileNotFound")
    assert d.node_actions == (
        Untaint(NP_NAME),
        Uncordon(NP_NAME),
        RemoveLabels((APPLY_TRIGGER_LABEL,)),
        UnmarkApplied(NP_NAME),
    )
    bad = make_profile(expected={"amd.com/gpu": "lots"})
    d = run(verifying_np(), verifying_node("64"), bad)
    assert reason_of(d, "Verified") == ("False", "ProfileInvalid")


# --- node deleted, NP deleted ------------------------------------------------------------------------


def test_node_not_found() -> None:
    d = run(waiting_np(), None)
    assert d.phase == "Failed"
    assert reason_of(d, "NodeCordoned") == ("False", "NodeNotFound")
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "NodeNotFound")]
    assert d.finalizer == "remove" and d.node_actions == ()
    np = waiting_np()
    np["status"] = d.status
    np["metadata"]["finalizers"] = []
    assert run(np, None).is_noop


def test_deletion_mid_drain_releases_only_what_we_did() -> None:
    np = make_np(phase="Draining", conditions=draining_conditions(), finalizer=True, deleting=True)
    d = run(np, ours(make_node()), pods=[WORKLOAD])
    assert d.node_actions == (Untaint(NP_NAME), Uncordon(NP_NAME))
    assert d.finalizer == "remove" and d.status is None and d.events == ()
    pre_cordoned = apply_node_actions(make_node(unschedulable=True), [Taint(NP_NAME)])
    d = run(np, pre_cordoned, pods=[WORKLOAD])
    assert d.node_actions == (Untaint(NP_NAME),)


def test_deletion_while_waiting_on_dcm_also_drops_the_trigger_label() -> None:
    d = run(waiting_np(deleting=True), applied_node(None))
    assert d.node_actions == (Untaint(NP_NAME), Uncordon(NP_NAME), RemoveLabels((APPLY_TRIGGER_LABEL,)))


def test_deletion_without_node_just_lets_go() -> None:
    d = run(waiting_np(deleting=True), None)
    assert d.node_actions == () and d.finalizer == "remove" and d.status is None


# --- simulation --------------------------------------------------------------------------------------

SIM_CONFIG = NodeLogicConfig(
    drain_timeout=timedelta(seconds=120),
    operator_timeout=timedelta(seconds=180),
    verify_timeout=timedelta(seconds=90),
    dcm_failure_grace=timedelta(seconds=20),
)
MAX_STEPS = 400


@dataclass
class SimPod:
    obj: dict[str, Any]
    pdb_rejections: int  # evictions answered 429 before one succeeds; -1 = never
    grace_steps: int  # steps a pod stays terminating after a successful eviction
    terminating_for: int | None = None


@dataclass
class DcmJob:
    outcome: str  # success | failure | retry | silent | never
    steps: int


@dataclass
class World:
    """The cluster as the executor sees it: one NP, its node, pods, DCM and the device plugin."""

    np: dict[str, Any] | None
    node: dict[str, Any]
    pods: list[SimPod]
    now: datetime
    dcm_outcomes: list[tuple[str, int]]
    plugin_delay: int  # steps after DCM success and untaint before allocatable shows the partitions
    plugin_broken: bool
    events: list[dict[str, Any]] = field(default_factory=list)
    np_events: list[str] = field(default_factory=list)
    dcm_job: DcmJob | None = None
    seen_labels: tuple[str | None, str | None] = (None, None)
    hw_profile: str = "spx"
    plugin_wait: int | None = None
    evicted: int = 0

    def pod_objs(self) -> list[dict[str, Any]]:
        return [p.obj for p in self.pods]


def decide_in(world: World, node: dict[str, Any] | None = None) -> Decision:
    """Decide on the world, with a Node cache showing ``node`` (an older version) when given."""
    assert world.np is not None
    seen = world.node if node is None else node
    return decide(
        observe(world.np, seen, make_profile(), world.pod_objs(), world.events), world.now, SIM_CONFIG
    )


def to_drain(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod objects ``pods_to_drain`` keeps."""
    kept = {p.key for p in pods_to_drain(pod_views(pods), NODE)}
    return [p for p in pods if f"{p['metadata']['namespace']}/{p['metadata']['name']}" in kept]


def _is_daemonset_pod(pod_obj: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in pod_obj["metadata"].get("ownerReferences") or [])


def _apply_node_mutations(world: World, d: Decision) -> None:
    """Write the node, checking the label is set only after the drain and the taint only after eviction."""
    before = world.node
    after = apply_node_actions(before, d.node_mutations)
    set_label = after["metadata"].get("labels", {}).get(PROFILE_LABEL)
    if set_label == "cpx" and before["metadata"].get("labels", {}).get(PROFILE_LABEL) != "cpx":
        assert not to_drain(world.pod_objs()), "profile label set before the drain completed"
        assert carries_dcm_taint(after) and after["spec"].get("unschedulable") is True
    if carries_dcm_taint(after) and not carries_dcm_taint(before):
        workload = [p for p in to_drain(world.pod_objs()) if not _is_daemonset_pod(p)]
        assert not workload, "tainted NoExecute while workload pods remain (the taint manager ignores PDBs)"
    world.node = after


def _apply_evictions(world: World, d: Decision) -> None:
    """Evict through the simulated PDBs, checking cordon-before-evict and taint-before-DaemonSet-evict."""
    for ev in d.evictions:
        assert world.node["spec"].get("unschedulable") is True, "evicted before cordon"
        evicted = next((p.obj for p in world.pods if p.obj["metadata"]["name"] == ev.name), None)
        if evicted is not None and _is_daemonset_pod(evicted):
            assert carries_dcm_taint(world.node), "a DaemonSet pod evicted before the taint"
        for p in world.pods:
            if p.obj["metadata"]["name"] == ev.name and p.terminating_for is None:
                if p.pdb_rejections == 0:
                    p.obj["metadata"]["deletionTimestamp"] = format_time(world.now)
                    p.terminating_for = p.grace_steps
                    world.evicted += 1
                elif p.pdb_rejections > 0:
                    p.pdb_rejections -= 1


def _apply_np_writes(world: World, np: dict[str, Any], d: Decision, fail_at: int | None) -> None:
    """Status and events, then the finalizer removal that lets a deleted NodePartitioning go."""
    if d.status is not None:
        np["status"] = copy.deepcopy(d.status)
    world.np_events.extend(e.reason for e in d.events)
    if fail_at == 5:
        return
    if d.finalizer == "remove":
        np["metadata"]["finalizers"] = [f for f in np["metadata"].get("finalizers", []) if f != FINALIZER]
    if np["metadata"].get("deletionTimestamp") and not np["metadata"].get("finalizers"):
        world.np = None


def execute(world: World, d: Decision, fail_at: int | None) -> None:
    """Apply a decision in the documented order; ``fail_at`` = the stage whose API call fails."""
    np = world.np
    assert np is not None
    if fail_at == 1:
        return
    if d.finalizer == "add":
        np["metadata"].setdefault("finalizers", []).append(FINALIZER)
    if fail_at == 2:
        return
    _apply_node_mutations(world, d)
    if fail_at == 3:
        return
    _apply_evictions(world, d)
    if fail_at == 4:
        return
    _apply_np_writes(world, np, d, fail_at)


def _daemonset_controller(world: World) -> None:
    """kube's DaemonSet controller: a daemon pod without any toleration of a NoExecute taint of its node
    is deleted (``NodeShouldRunDaemonPod``)."""
    if not carries_dcm_taint(world.node):
        return
    for p in world.pods:
        view = pod_view(p.obj)
        if view.removed_by_taint and p.terminating_for is None:
            p.obj["metadata"]["deletionTimestamp"] = format_time(world.now)
            p.terminating_for = p.grace_steps


def _terminate_pods(world: World) -> None:
    for p in list(world.pods):
        if p.terminating_for is not None:
            if p.terminating_for == 0:
                world.pods.remove(p)
            else:
                p.terminating_for -= 1


def _dcm_emit(world: World, reason: str, message: str, type_: str = "Warning") -> None:
    world.events.append(dcm_event(reason, json.dumps({"Reason": message}), at=world.now, type_=type_))


def _start_dcm_on_label_change(world: World, labels: dict[str, Any]) -> None:
    """DCM picks up a new profile (or apply trigger) label and starts the next scripted job."""
    current = (labels.get(PROFILE_LABEL), labels.get(APPLY_TRIGGER_LABEL))
    changed = any(
        now_ is not None and now_ != was for now_, was in zip(current, world.seen_labels, strict=True)
    )
    world.seen_labels = current
    if changed and current[0]:
        outcome, steps = world.dcm_outcomes[len(world.events) % len(world.dcm_outcomes)]
        world.dcm_job = DcmJob(outcome, steps)
        if outcome != "never" and steps % 2:
            labels[PROFILE_STATE_LABEL] = "in-progress"


def _step_dcm_job(world: World, labels: dict[str, Any]) -> None:
    """One step of the running DCM job: count down, then finish with its scripted outcome."""
    job = world.dcm_job
    if job is None or job.outcome == "never":
        return
    if job.steps > 0:
        job.steps -= 1
    elif job.outcome == "success":
        world.hw_profile = str(labels.get(PROFILE_LABEL))
        labels[PROFILE_STATE_LABEL] = "success"
        _dcm_emit(world, "SuccessfullyPartitioned", "All GPUs were successfully partitioned", "Normal")
        world.dcm_job = None
    elif job.outcome == "failure":
        _dcm_emit(world, "PartitionFailure", "Partition failed with reason: Device busy.")
        labels[PROFILE_STATE_LABEL] = "failure"
        world.dcm_job = None
    elif job.outcome == "silent":
        labels[PROFILE_STATE_LABEL] = "failure"
        world.dcm_job = None
    elif job.outcome == "retry":
        labels[PROFILE_STATE_LABEL] = "failure"
        _dcm_emit(world, "PartitionRetrying", "Partition retrying for profile: cpx")
        world.dcm_job = DcmJob("success", 2)


def _step_device_plugin(world: World) -> None:
    """The device plugin republishes once DCM partitioned and the taint that evicted it is gone."""
    target = {"cpx": "64"}.get(world.hw_profile, "8")
    if world.node["status"]["allocatable"].get("amd.com/gpu") != target and not carries_dcm_taint(world.node):
        if world.plugin_wait is None:
            world.plugin_wait = world.plugin_delay
        elif world.plugin_wait > 0:
            world.plugin_wait -= 1
        elif not world.plugin_broken:
            world.node["status"]["allocatable"]["amd.com/gpu"] = target
            world.plugin_wait = None


def evolve(world: World, advance: int) -> None:
    """Everything that is not the controller: pods terminate, DCM and the device plugin act."""
    _terminate_pods(world)
    _daemonset_controller(world)
    labels = world.node["metadata"].setdefault("labels", {})
    _start_dcm_on_label_change(world, labels)
    _step_dcm_job(world, labels)
    _step_device_plugin(world)
    world.now += timedelta(seconds=advance)


def done(world: World) -> bool:
    if world.np is None:
        return True
    phase = (world.np.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") and decide_in(world).is_noop


def sim_pod(kind: str, name: str) -> dict[str, Any]:
    if kind == "daemonset":
        return pod(name, "kube-amd-gpu", owner_kind="DaemonSet")
    if kind == "tolerating":
        return pod(name, "kube-system", owner_kind="DaemonSet", tolerations=[{"operator": "Exists"}])
    if kind == "mirror":
        return pod(name, "kube-system", owner_kind="Node")
    return pod(name)


sim_pods = st.lists(
    st.tuples(
        st.sampled_from(["workload", "daemonset", "tolerating", "mirror"]),
        st.one_of(st.just(0), st.integers(1, 4), st.just(-1)),
        st.integers(0, 3),
    ),
    max_size=4,
)
dcm_outcomes = st.lists(
    st.tuples(
        st.sampled_from(["success", "success", "failure", "retry", "silent", "never"]), st.integers(0, 6)
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods=sim_pods,
    outcomes=dcm_outcomes,
    pre_cordoned=st.booleans(),
    initial=st.sampled_from(["spx", "spx", "cpx-done", "cpx-failed"]),
    admit_at=st.integers(0, 5),
    delete_at=st.one_of(st.none(), st.integers(0, 40)),
    advances=st.lists(st.sampled_from([1, 2, 5, 15, 30, 45]), min_size=1, max_size=8),
    failures=st.lists(st.one_of(st.none(), st.none(), st.none(), st.integers(1, 5)), max_size=5).map(
        lambda f: [*f, None]
    ),
    plugin_delay=st.integers(0, 4),
    plugin_broken=st.booleans(),
    lags=st.lists(st.booleans(), max_size=6),
)
def test_simulated_rollouts_always_end_safely(
    pods: list[tuple[str, int, int]],
    outcomes: list[tuple[str, int]],
    pre_cordoned: bool,
    initial: str,
    admit_at: int,
    delete_at: int | None,
    advances: list[int],
    failures: list[int | None],
    plugin_delay: int,
    plugin_broken: bool,
    lags: list[bool],
) -> None:
    """``lags``: per step, whether the executor's Node cache is one step behind the API server
    (DCM's label, the device plugin's allocatable, a pod's departure not seen yet). Our own last node
    write is never hidden: the executor decides on what that write returned until its cache shows it
    (``node.py``), as it does for the NodePartitioning. A decision on a lagging view that writes the
    node is refused (the update carries the stale resourceVersion)."""
    labels = {
        "spx": {PROFILE_LABEL: "spx", PROFILE_STATE_LABEL: "success"},
        "cpx-done": {PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "success"},
        "cpx-failed": {PROFILE_LABEL: "cpx", PROFILE_STATE_LABEL: "failure"},
    }[initial]
    node = make_node(gpus="64" if initial == "cpx-done" else "8", labels=labels, unschedulable=pre_cordoned)
    sim: list[SimPod] = []
    for i, (kind, pdb, grace) in enumerate(pods):
        obj = sim_pod(kind, f"{kind}-{i}")
        sim.append(SimPod(obj, pdb, grace))
    world = World(
        np=make_np(admitted=False),
        node=node,
        pods=sim,
        now=NOW,
        dcm_outcomes=outcomes,
        plugin_delay=plugin_delay,
        plugin_broken=plugin_broken,
        hw_profile="cpx" if initial == "cpx-done" else "spx",
        seen_labels=(labels[PROFILE_LABEL], None),
    )
    seen_before: dict[str, Any] | None = None  # the Node as the previous step's decision saw it
    ours_last: dict[str, Any] | None = None  # the Node as our node write in the previous step left it
    for step in range(MAX_STEPS):
        if done(world):
            break
        np = world.np
        assert np is not None
        if step == admit_at:
            np["metadata"].setdefault("annotations", {})[ADMITTED_ANNOTATION] = HASH
        if delete_at is not None and step == delete_at:
            np["metadata"]["deletionTimestamp"] = format_time(world.now)
            if not np["metadata"].get("finalizers"):
                world.np = None
                break
        lagging = (ours_last or seen_before) if lags and lags[step % len(lags)] else None
        seen_before = copy.deepcopy(world.node)
        d = decide_in(world, lagging)
        assert all(not isinstance(a, Evict) for a in d.node_actions[: len(d.node_mutations)])
        fail_at = failures[step % len(failures)]
        if lagging is not None and lagging != world.node and d.node_mutations:
            fail_at = 2  # the node update conflicts: only the finalizer patch before it went through
        execute(world, d, fail_at)
        wrote_node = bool(d.node_mutations) and fail_at not in (1, 2)
        ours_last = copy.deepcopy(world.node) if wrote_node else None
        if fail_at is None and lagging is None and world.np is not None:
            again = decide_in(world)
            # Two steps are not fixpoints by design: a DCM retrigger, and the taint that waits for
            # our own cordon to be committed (the executor then confirms the pods with a LIST).
            retrigger = any(
                c.get("reason") in ("DCMRetrigger", "WaitingForCordon")
                for c in (world.np.get("status") or {}).get("conditions") or []
            )
            if not retrigger:
                assert again.node_mutations == (), f"not idempotent: {d} then {again}"
                assert again.status is None and again.events == () and again.finalizer is None
                assert set(again.evictions) <= set(d.evictions)
        evolve(world, advances[step % len(advances)])
    else:
        pytest.fail(f"no terminal state after {MAX_STEPS} steps: {world.np and world.np.get('status')}")

    # The node is given back: no cordon or taint of ours, a pre-existing cordon kept.
    annotations = world.node["metadata"].get("annotations") or {}
    assert CORDONED_BY_ANNOTATION not in annotations and TAINTED_BY_ANNOTATION not in annotations
    assert not carries_dcm_taint(world.node)
    assert (world.node["spec"].get("unschedulable") is True) is pre_cordoned
    if world.np is not None:
        status = world.np["status"]
        assert status["phase"] in ("Succeeded", "Failed")
        assert FINALIZER not in (world.np["metadata"].get("finalizers") or [])
        if status["phase"] == "Succeeded":
            assert status["currentHash"] == HASH
            assert world.node["status"]["allocatable"]["amd.com/gpu"] == "64"
            assert world.node["metadata"]["labels"][PROFILE_LABEL] == "cpx"
            assert APPLY_TRIGGER_LABEL not in world.node["metadata"]["labels"]
        else:
            assert any(
                r in world.np_events
                for r in ("DrainTimeout", "DCMFailed", "OperatorUnavailable", "VerifyFailed")
            )

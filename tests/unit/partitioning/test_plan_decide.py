"""PartitioningPlan decisions: selection, desired NodePartitionings, admission, cleanup, status.

Plans and profiles start from ``examples/partitioning-plan.yaml`` and ``examples/partition-profiles.yaml``;
the property tests drive random fleets through a whole rollout with a tiny random model of the
NodePartitioning state machine and check the rollout limits at every step.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.conditions import format_time, get_condition
from aiplane.controllers.partitioning import admission, children, identity, selection
from aiplane.controllers.partitioning import plan_status as status_module
from aiplane.controllers.partitioning.hashing import desired_hash
from aiplane.controllers.partitioning.identity import np_name, plan_label_value
from aiplane.controllers.partitioning.selection import ProfileState, Selection
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    ProfileView,
    RolloutLimits,
    node_partitioning_view,
    node_partitioning_views,
    node_views,
    plan_view,
    profile_view,
)
from aiplane.controllers.partitioning.vocabulary import ADMITTED_ANNOTATION, IN_PROGRESS_PHASES, PLAN_LABEL

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)
MI300X = "AMD_Instinct_MI300X_OAM"
PRODUCT = "amd.com/gpu.product-name"
POOL = "aiplane.io/pool"
PLAN_UID = "6f1c1f9e-0000-4000-8000-000000000001"
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# --- the decisions, called with API objects -----------------------------------------------------
# The decision functions read views; these tests speak in the objects the API server returns, so
# each call builds the views first, as the controller's observe step does.

Obj = Mapping[str, Any]


def _nps(nps: Iterable[Obj]) -> list[NodePartitioningView]:
    return node_partitioning_views(nps)


def _by_node(nps: Mapping[str, Obj]) -> dict[str, NodePartitioningView]:
    return {node: node_partitioning_view(np) for node, np in nps.items()}


def _profiles(profs: Mapping[str, Obj]) -> dict[str, ProfileView]:
    return {name: profile_view(p) for name, p in profs.items()}


def rollout_limits(plan: Obj) -> RolloutLimits:
    return plan_view(plan).limits


def select_nodes(plan: Obj, nodes: Iterable[Obj], profs: Mapping[str, Obj], nps: Iterable[Obj]) -> Selection:
    return selection.select_nodes(plan_view(plan), node_views(nodes), _profiles(profs), _nps(nps))


def profile_state(name: str, profile: Obj | None) -> ProfileState:
    return selection.profile_state(name, profile_view(profile) if profile is not None else None)


def desired_node_partitionings(
    plan: Obj, sel: Selection, profs: Mapping[str, Obj]
) -> dict[str, dict[str, Any]]:
    return children.desired_node_partitionings(plan_view(plan), sel, _profiles(profs))


def np_needs_update(existing: Obj | None, body: Obj) -> bool:
    return children.np_needs_update(node_partitioning_view(existing) if existing is not None else None, body)


def stale_node_partitionings(plan: Obj, sel: Selection, nps: Iterable[Obj]) -> list[str]:
    return children.stale_node_partitionings(plan_view(plan), sel, _nps(nps))


def children_by_node(plan: Obj, nps: Iterable[Obj]) -> dict[str, Obj]:
    return {node: v.obj for node, v in identity.children_by_node(plan_view(plan), _nps(nps)).items()}


def is_child(plan: Obj, np: Obj) -> bool:
    return identity.is_child(plan_view(plan), node_partitioning_view(np))


def is_admitted(np: Obj) -> bool:
    return admission.is_admitted(node_partitioning_view(np))


def np_phase(np: Obj) -> str:
    return admission.np_phase(node_partitioning_view(np))


def admission_patch(np: Obj) -> dict[str, Any]:
    return admission.admission_patch(node_partitioning_view(np))


def revocation_patch(np: Obj) -> dict[str, Any]:
    return admission.revocation_patch(node_partitioning_view(np))


def admit(plan: Obj, nps: Mapping[str, Obj], *, eligible: Collection[str] | None = None) -> list[str]:
    return admission.admit(plan_view(plan), _by_node(nps), eligible=eligible)


def revoke(plan: Obj, nps: Mapping[str, Obj], *, eligible: Collection[str] | None = None) -> list[str]:
    return admission.revoke(plan_view(plan), _by_node(nps), eligible=eligible)


def rollout_counts(nps: Iterable[Obj]) -> admission.RolloutCounts:
    return admission.rollout_counts(_nps(nps))


def admission_capacity(plan: Obj, nps: Iterable[Obj]) -> int:
    return admission.admission_capacity(plan_view(plan), _nps(nps))


def effective_phase(np: Obj, desired: str | None, plan_dry_run: bool) -> str:
    return status_module.effective_phase(node_partitioning_view(np), desired, plan_dry_run)


def plan_status(
    plan: Obj, sel: Selection, nps: Iterable[Obj], now: datetime, previous: Mapping[str, Any] | None
) -> tuple[dict[str, Any], bool]:
    return status_module.plan_status(plan_view(plan), sel, _nps(nps), now, previous)


# --- fixtures ------------------------------------------------------------------------------------


def _load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")) if d]


EXAMPLE_PLAN: dict[str, Any] = _load("partitioning-plan.yaml")[0]
EXAMPLE_PROFILES: dict[str, dict[str, Any]] = {
    d["metadata"]["name"]: d for d in _load("partition-profiles.yaml")
}


def make_plan(generation: int = 1, **spec: Any) -> dict[str, Any]:
    """The example plan as the API server returns it (uid, generation), with spec overrides;
    ``rollout=None`` removes the rollout block."""
    plan = copy.deepcopy(EXAMPLE_PLAN)
    plan["metadata"].update(uid=PLAN_UID, generation=generation, resourceVersion="10")
    for key, value in spec.items():
        if value is None:
            plan["spec"].pop(key, None)
        else:
            plan["spec"][key] = value
    return plan


def ready_profile(
    name: str, generation: int = 1, ready: str = "True", observed: int | None = None
) -> dict[str, Any]:
    profile = copy.deepcopy(EXAMPLE_PROFILES[name])
    profile["metadata"].update(uid=f"uid-{name}", generation=generation)
    profile["status"] = {
        "observedGeneration": generation if observed is None else observed,
        "conditions": [
            {
                "type": "Ready",
                "status": ready,
                "observedGeneration": generation if observed is None else observed,
                "lastTransitionTime": format_time(T0),
                "reason": "ProfileFound" if ready == "True" else "ProfileNotFound",
                "message": "checked",
            }
        ],
    }
    return profile


def profiles(**overrides: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    result = {name: ready_profile(name) for name in EXAMPLE_PROFILES}
    for name, value in overrides.items():
        key = name.replace("_", "-")
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def make_node(
    name: str, pool: str | None = "inference", product: str | None = MI300X, **labels: str
) -> dict[str, Any]:
    all_labels = {"kubernetes.io/hostname": name, **labels}
    if pool:
        all_labels[POOL] = pool
    if product:
        all_labels[PRODUCT] = product
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": all_labels},
    }


def fleet() -> list[dict[str, Any]]:
    """Three inference nodes, two training nodes, a CPU node and an inference-labelled control plane."""
    return [
        make_node("gpu-c"),
        make_node("gpu-a"),
        make_node("gpu-b"),
        make_node("train-1", pool="training"),
        make_node("train-2", pool="training"),
        make_node("cpu-1", pool="inference", product=None),
        make_node("cp-1", **{"node-role.kubernetes.io/control-plane": ""}),
    ]


def make_np(
    plan: Mapping[str, Any],
    node: str,
    phase: str | None = "Pending",
    *,
    profile: str = "mi300x-cpx",
    hash_: str | None = None,
    current: str | None = None,
    admitted: str | bool = False,
    dry_run: bool = False,
    deleting: bool = False,
) -> dict[str, Any]:
    """A NodePartitioning of ``plan`` as the API server would return it."""
    h = hash_ or desired_hash(EXAMPLE_PROFILES[profile]["spec"])
    name = np_name(plan["metadata"]["name"], node)
    obj: dict[str, Any] = {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "NodePartitioning",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "labels": {PLAN_LABEL: plan_label_value(plan["metadata"]["name"])},
            "ownerReferences": [
                {
                    "apiVersion": plan["apiVersion"],
                    "kind": plan["kind"],
                    "name": plan["metadata"]["name"],
                    "uid": plan["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "planRef": {"name": plan["metadata"]["name"], "uid": plan["metadata"]["uid"]},
            "dryRun": dry_run,
            "nodeName": node,
            "desiredHash": h,
            "profileRef": {"name": profile},
        },
    }
    if admitted:
        obj["metadata"]["annotations"] = {ADMITTED_ANNOTATION: h if admitted is True else admitted}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = format_time(T0)
        obj["metadata"]["finalizers"] = ["infrastructure.silogen.ai/node-partitioning"]
    if phase is not None:
        obj["status"] = {"phase": phase}
        if current or phase == "Succeeded":
            obj["status"]["currentHash"] = current or h
    return obj


def other_plan_np(node: str, plan_name: str = "other-plan", phase: str = "Succeeded") -> dict[str, Any]:
    other = make_plan()
    other["metadata"].update(name=plan_name, uid="uid-other-plan")
    return make_np(other, node, phase)


def by_node(nps: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {np["spec"]["nodeName"]: np for np in nps}


def cond(status: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    c = get_condition(status["conditions"], type_)
    assert c is not None, type_
    return c


CPX_HASH = desired_hash(EXAMPLE_PROFILES["mi300x-cpx"]["spec"])
SPX_HASH = desired_hash(EXAMPLE_PROFILES["mi300x-spx"]["spec"])


# --- naming --------------------------------------------------------------------------------------


def test_np_name_is_plan_dash_node() -> None:
    assert np_name("mi300x-inference-cpx", "gpu-a") == "mi300x-inference-cpx-gpu-a"


def test_np_name_over_253_is_shortened_deterministically_and_validly() -> None:
    plan = "p" * 200
    node = "node-" + "x" * 100 + ".example.com"
    name = np_name(plan, node)
    assert len(name) <= 253
    assert DNS1123_SUBDOMAIN.match(name)
    assert name == np_name(plan, node)
    assert name.startswith(plan)
    # Same prefix, different nodes: the digest keeps them apart.
    assert np_name(plan, node + "1") != np_name(plan, node + "2")
    assert np_name(plan, node + "1")[:200] == np_name(plan, node + "2")[:200]


@pytest.mark.parametrize("cut_char", ["-", "."])
def test_shortened_name_never_ends_a_label_with_dash_or_dot(cut_char: str) -> None:
    # Put a '-' or '.' exactly where the prefix is cut (position 236 of "<plan>-<node>").
    plan = "a" * 100
    node = "b" * (236 - 101 - 1) + cut_char + "c" * 200
    name = np_name(plan, node)
    assert len(name) <= 253
    assert DNS1123_SUBDOMAIN.match(name), name


_dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
_subdomain = st.lists(_dns_label, min_size=1, max_size=6).map(".".join).filter(lambda s: len(s) <= 253)


@settings(max_examples=200, deadline=None)
@given(plan=_subdomain, node=_subdomain)
def test_np_name_is_always_a_valid_name(plan: str, node: str) -> None:
    name = np_name(plan, node)
    assert len(name) <= 253
    assert DNS1123_SUBDOMAIN.match(name)
    value = plan_label_value(plan)
    assert len(value) <= 63
    assert LABEL_VALUE.match(value)


def test_plan_label_value_shortens_long_plan_names() -> None:
    assert plan_label_value("mi300x-inference-cpx") == "mi300x-inference-cpx"
    long = "x" * 80
    assert len(plan_label_value(long)) == 63
    assert plan_label_value(long) != plan_label_value(long + "y")


# --- rollout limits ------------------------------------------------------------------------------


def test_rollout_limits_defaults_when_rollout_omitted() -> None:
    assert rollout_limits(make_plan(rollout=None)) == RolloutLimits(1, 1, True)
    assert rollout_limits(make_plan()) == RolloutLimits(3, 3, True)
    assert rollout_limits(make_plan(rollout={"excludeControlPlane": False})) == RolloutLimits(1, 1, False)
    assert rollout_limits(make_plan(rollout={"maxParallel": 0, "maxUnavailable": -2})) == RolloutLimits(
        0, 0, True
    )


# --- select_nodes --------------------------------------------------------------------------------


def test_select_example_fleet() -> None:
    sel = select_nodes(make_plan(), fleet(), profiles(), [])
    assert sel.valid
    assert sel.node_names == ("cp-1", "cpu-1", "gpu-a", "gpu-b", "gpu-c", "train-1", "train-2")
    assert dict(sel.matches) == {
        "gpu-a": (0,),
        "gpu-b": (0,),
        "gpu-c": (0,),
        "train-1": (1,),
        "train-2": (1,),
    }
    assert list(sel.matches) == sorted(sel.matches)
    assert sel.control_plane_excluded == ("cp-1",)
    assert sel.targets == {"gpu-a": 0, "gpu-b": 0, "gpu-c": 0, "train-1": 1, "train-2": 1}
    assert sel.admissible == frozenset(sel.targets)
    assert [r.description for r in sel.rules] == ["inference pool to CPX", "training pool stays SPX"]
    assert sel.rules[0].desired_hash == CPX_HASH


@pytest.mark.parametrize(
    ("rollout", "label", "included"),
    [
        (None, "node-role.kubernetes.io/control-plane", False),  # rollout omitted: still excluded
        ({"maxParallel": 1}, "node-role.kubernetes.io/control-plane", False),
        ({"excludeControlPlane": True}, "node-role.kubernetes.io/master", False),
        ({"excludeControlPlane": False}, "node-role.kubernetes.io/control-plane", True),
        ({"excludeControlPlane": False}, "node-role.kubernetes.io/master", True),
    ],
)
def test_control_plane_exclusion_by_label_presence(
    rollout: dict[str, Any] | None, label: str, included: bool
) -> None:
    cp = make_node("cp-1", **{label: "true"})
    sel = select_nodes(make_plan(rollout=rollout), [cp, make_node("gpu-a")], profiles(), [])
    assert ("cp-1" in sel.matches) is included
    assert (sel.control_plane_excluded == ("cp-1",)) is (not included)


def test_match_expressions_notin_exists_and_empty_selector() -> None:
    plan = make_plan(
        rules=[
            {
                "selector": {
                    "matchExpressions": [
                        {"key": PRODUCT, "operator": "Exists"},
                        {"key": POOL, "operator": "NotIn", "values": ["training"]},
                    ]
                },
                "profileRef": {"name": "mi300x-cpx"},
            }
        ]
    )
    sel = select_nodes(plan, fleet(), profiles(), [])
    assert set(sel.matches) == {"gpu-a", "gpu-b", "gpu-c"}
    everything = make_plan(rules=[{"selector": {}, "profileRef": {"name": "mi300x-spx"}}])
    assert set(select_nodes(everything, fleet(), profiles(), []).matches) == set(sel.node_names) - {"cp-1"}


def test_overlapping_rules_invalidate_the_plan_and_name_both_rules() -> None:
    plan = make_plan(
        rules=[
            *EXAMPLE_PLAN["spec"]["rules"],
            {
                "selector": {"matchLabels": {"kubernetes.io/hostname": "gpu-b"}},
                "profileRef": {"name": "mi300x-dpx"},
            },
        ]
    )
    sel = select_nodes(plan, fleet(), profiles(), [])
    assert not sel.valid
    assert sel.overlaps == (("gpu-b", (0, 2)),)
    assert "gpu-b" not in sel.assigned
    assert sel.admissible == frozenset()
    assert desired_node_partitionings(plan, sel, profiles()) == {}
    status, _ = plan_status(plan, sel, [], T0, None)
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"]) == ("False", "PlanningFailed")
    assert ready["message"] == (
        "Failed to compute desired state: multiple partitioning rules match node gpu-b: "
        "inference pool to CPX, rule-2 (dpx)"
    )
    assert status["phase"] == "Degraded"


def test_rule_without_description_is_named_by_index_and_dcm_profile() -> None:
    plan = make_plan(rules=[{"selector": {}, "profileRef": {"name": "mi300x-cpx"}}])
    sel = select_nodes(plan, [], profiles(), [])
    assert sel.rules[0].description == "rule-0 (cpx_nps4)"
    missing = select_nodes(plan, [], profiles(mi300x_cpx=None), [])
    assert missing.rules[0].description == "rule-0 (mi300x-cpx)"


def test_cross_plan_conflict_in_any_phase_invalidates_the_plan() -> None:
    plan = make_plan()
    own = make_np(plan, "gpu-a", "Succeeded")
    others = [other_plan_np("gpu-b", phase="Failed"), other_plan_np("cpu-1"), own]
    sel = select_nodes(plan, fleet(), profiles(), others)
    assert not sel.valid
    assert sel.conflicts == (("gpu-b", ("other-plan/other-plan-gpu-b",)),)  # cpu-1 is not ours; own ignored
    status, _ = plan_status(plan, sel, [own], T0, None)
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"]) == ("False", "NodeConflict")
    assert ready["message"] == (
        "node gpu-b is already targeted by other partitioning plan(s): other-plan/other-plan-gpu-b"
    )
    assert stale_node_partitionings(plan, sel, [own]) == []
    assert admit(plan, by_node([make_np(plan, "gpu-c")]), eligible=sel.admissible) == []


def test_np_of_a_deleted_plan_with_the_same_name_is_a_conflict_not_a_child() -> None:
    plan = make_plan()
    old = make_np(plan, "gpu-a", "Succeeded")
    old["spec"]["planRef"]["uid"] = "uid-of-the-previous-plan"
    old["metadata"]["ownerReferences"][0]["uid"] = "uid-of-the-previous-plan"
    assert not is_child(plan, old)
    sel = select_nodes(plan, fleet(), profiles(), [old])
    assert sel.conflicts == (("gpu-a", ("mi300x-inference-cpx/mi300x-inference-cpx-gpu-a",)),)
    assert children_by_node(plan, [old]) == {}


def test_name_taken_by_another_plans_object_is_a_conflict() -> None:
    # Plan "mi300x-inference" + node "cpx-gpu-a" and plan "mi300x-inference-cpx" + node "gpu-a" both
    # join to "mi300x-inference-cpx-gpu-a".
    thief_plan = make_plan()
    thief_plan["metadata"].update(name="mi300x-inference", uid="uid-thief")
    thief = make_np(thief_plan, "cpx-gpu-a", "Pending")
    assert thief["metadata"]["name"] == np_name("mi300x-inference-cpx", "gpu-a")
    sel = select_nodes(make_plan(), fleet(), profiles(), [thief])
    assert sel.name_collisions == (("gpu-a", "mi300x-inference/mi300x-inference-cpx-gpu-a"),)
    assert not sel.valid


@pytest.mark.parametrize(
    ("profile", "fragment"),
    [
        (None, "PartitioningProfile mi300x-cpx not found"),
        (ready_profile("mi300x-cpx", ready="False"), "is not Ready (ProfileNotFound: checked)"),
        (ready_profile("mi300x-cpx", generation=2, observed=1), "generation 2 is not validated yet"),
        ({**ready_profile("mi300x-cpx"), "status": {}}, "has no Ready condition yet"),
        (
            {
                **ready_profile("mi300x-cpx"),
                "spec": {"dcmProfileName": "cpx", "expectedResources": {"amd.com/gpu": "x"}},
            },
            "is invalid",
        ),
        (
            {
                **ready_profile("mi300x-cpx"),
                "metadata": {"name": "mi300x-cpx", "deletionTimestamp": format_time(T0), "generation": 1},
            },
            "is being deleted",
        ),
    ],
)
def test_nodes_on_a_profile_that_is_not_ready_are_held(profile: dict[str, Any] | None, fragment: str) -> None:
    plan = make_plan()
    profs = profiles(mi300x_cpx=profile)
    sel = select_nodes(plan, fleet(), profs, [])
    assert sel.valid  # the other rule proceeds
    assert sel.held == (("gpu-a", 0), ("gpu-b", 0), ("gpu-c", 0))
    assert sel.targets == {"train-1": 1, "train-2": 1}
    assert set(desired_node_partitionings(plan, sel, profs)) == {"train-1", "train-2"}
    status, _ = plan_status(plan, sel, [], T0, None)
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"]) == ("False", "ProfileNotReady")
    assert fragment in ready["message"]
    assert "holding nodes gpu-a, gpu-b, gpu-c" in ready["message"]
    assert "rule 'inference pool to CPX'" in ready["message"]


def test_profile_state_ready() -> None:
    state = profile_state("mi300x-cpx", ready_profile("mi300x-cpx", generation=3))
    assert state.ready and state.desired_hash == CPX_HASH and state.target_selector is not None


def test_target_selector_mismatch_is_listed_not_an_error() -> None:
    plan = make_plan(
        rules=[{"selector": {"matchLabels": {POOL: "inference"}}, "profileRef": {"name": "mi300x-cpx"}}]
    )
    nodes = [*fleet(), make_node("mi250-1", product="AMD_Instinct_MI250X")]
    sel = select_nodes(plan, nodes, profiles(), [])
    assert sel.valid
    assert sel.target_mismatches == (("cpu-1", 0), ("mi250-1", 0))
    assert set(sel.targets) == {"gpu-a", "gpu-b", "gpu-c"}
    nps = [make_np(plan, n, "Succeeded") for n in ("gpu-a", "gpu-b", "gpu-c")]
    status, _ = plan_status(plan, sel, nps, T0, None)
    excluded = cond(status, "NodesExcluded")
    assert (excluded["status"], excluded["reason"]) == ("True", "TargetSelectorMismatch")
    assert excluded["message"] == (
        "cpu-1, mi250-1 not touched: PartitioningProfile mi300x-cpx requires targetSelector "
        "'amd.com/gpu.product-name=AMD_Instinct_MI300X_OAM'"
    )
    assert cond(status, "PlanReady")["status"] == "True"
    assert status["phase"] == "Completed"  # mismatches are not errors
    assert status["summary"]["matchingNodes"] == 5


def test_invalid_selector_is_a_spec_error_naming_the_rule_and_field() -> None:
    plan = make_plan(
        rules=[
            {
                "selector": {"matchExpressions": [{"key": POOL, "operator": "In"}]},
                "profileRef": {"name": "mi300x-cpx"},
            }
        ]
    )
    sel = select_nodes(plan, fleet(), profiles(), [])
    assert not sel.valid
    status, _ = plan_status(plan, sel, [], T0, None)
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSelector")
    assert ready["message"] == (
        "Invalid selector: rule 'rule-0 (cpx_nps4)': spec.rules[0].selector.matchExpressions[0].values: "
        "Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    )
    assert status["phase"] == "Degraded"


def test_selection_is_deterministic_whatever_the_input_order() -> None:
    nodes = fleet()
    a = select_nodes(make_plan(), nodes, profiles(), [])
    b = select_nodes(make_plan(), list(reversed(nodes)), profiles(), [])
    assert a == b


# --- desired NodePartitionings -------------------------------------------------------------------


def test_desired_node_partitioning_body() -> None:
    plan = make_plan()
    sel = select_nodes(plan, fleet(), profiles(), [])
    desired = desired_node_partitionings(plan, sel, profiles())
    assert list(desired) == ["gpu-a", "gpu-b", "gpu-c", "train-1", "train-2"]
    assert desired["gpu-a"] == {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "NodePartitioning",
        "metadata": {
            "name": "mi300x-inference-cpx-gpu-a",
            "labels": {"infrastructure.silogen.ai/plan": "mi300x-inference-cpx"},
            "ownerReferences": [
                {
                    "apiVersion": "infrastructure.silogen.ai/v1alpha1",
                    "kind": "PartitioningPlan",
                    "name": "mi300x-inference-cpx",
                    "uid": PLAN_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "planRef": {"name": "mi300x-inference-cpx", "uid": PLAN_UID},
            "dryRun": False,
            "nodeName": "gpu-a",
            "desiredHash": CPX_HASH,
            "profileRef": {"name": "mi300x-cpx"},
        },
    }
    assert desired["train-1"]["spec"]["desiredHash"] == SPX_HASH
    assert ADMITTED_ANNOTATION not in str(desired)
    dry = make_plan(dryRun=True)
    assert desired_node_partitionings(dry, sel, profiles())["gpu-a"]["spec"]["dryRun"] is True


def test_np_needs_update_only_for_owned_fields() -> None:
    plan = make_plan()
    sel = select_nodes(plan, fleet(), profiles(), [])
    body = desired_node_partitionings(plan, sel, profiles())["gpu-a"]
    existing = make_np(plan, "gpu-a", "Verifying", admitted=True)
    assert np_needs_update(None, body)
    assert not np_needs_update(existing, body)  # status and annotations are not ours to apply
    description_edit = copy.deepcopy(profiles())
    description_edit["mi300x-cpx"]["spec"]["description"] = "edited"
    assert not np_needs_update(existing, desired_node_partitionings(plan, sel, description_edit)["gpu-a"])
    mutations: list[Callable[[dict[str, Any]], object]] = [
        lambda o: o["spec"].__setitem__("desiredHash", SPX_HASH),
        lambda o: o["spec"].__setitem__("dryRun", True),
        lambda o: o["spec"].__setitem__("profileRef", {"name": "mi300x-dpx"}),
        lambda o: o["metadata"].pop("labels"),
        lambda o: o["metadata"].pop("ownerReferences"),
    ]
    for mutate in mutations:
        changed = copy.deepcopy(existing)
        mutate(changed)
        assert np_needs_update(changed, body)


def test_profile_edit_changes_the_hash_of_its_nodes_only() -> None:
    plan = make_plan()
    profs = profiles()
    profs["mi300x-cpx"]["spec"]["expectedResources"] = {"amd.com/cpx_nps4": "64"}
    profs["mi300x-cpx"]["metadata"]["generation"] = 2
    profs["mi300x-cpx"]["status"]["conditions"][0]["observedGeneration"] = 2
    sel = select_nodes(plan, fleet(), profs, [])
    desired = desired_node_partitionings(plan, sel, profs)
    existing = {
        n: make_np(plan, n, "Succeeded", profile=p)
        for n, p in [("gpu-a", "mi300x-cpx"), ("train-1", "mi300x-spx")]
    }
    assert np_needs_update(existing["gpu-a"], desired["gpu-a"])
    assert not np_needs_update(existing["train-1"], desired["train-1"])


# --- admission -----------------------------------------------------------------------------------


def test_is_admitted_only_for_the_current_hash() -> None:
    plan = make_plan()
    assert is_admitted(make_np(plan, "gpu-a", admitted=True))
    assert not is_admitted(make_np(plan, "gpu-a"))
    assert not is_admitted(make_np(plan, "gpu-a", admitted=SPX_HASH))  # admitted for an older hash


def test_admission_and_revocation_patches_are_conditional() -> None:
    np = make_np(make_plan(), "gpu-a")
    assert admission_patch(np) == {
        "metadata": {"resourceVersion": "42", "annotations": {ADMITTED_ANNOTATION: CPX_HASH}}
    }
    assert revocation_patch(np) == {
        "metadata": {"resourceVersion": "42", "annotations": {ADMITTED_ANNOTATION: None}}
    }


def test_admit_defaults_to_one_at_a_time_when_rollout_omitted() -> None:
    plan = make_plan(rollout=None)
    nps = by_node(make_np(plan, n) for n in ("gpu-c", "gpu-a", "gpu-b"))
    assert admit(plan, nps) == ["gpu-a"]


def test_admit_fills_max_parallel_in_node_name_order() -> None:
    plan = make_plan()  # maxParallel 3, maxUnavailable 3
    nps = by_node(make_np(plan, n) for n in ("gpu-e", "gpu-d", "gpu-c", "gpu-b", "gpu-a"))
    assert admit(plan, nps) == ["gpu-a", "gpu-b", "gpu-c"]


def test_in_progress_and_admitted_pending_count_against_max_parallel() -> None:
    plan = make_plan(rollout={"maxParallel": 3, "maxUnavailable": 5})
    nps = by_node(
        [
            make_np(plan, "a", "Draining"),
            make_np(plan, "b", "Pending", admitted=True),  # admitted, not picked up yet
            make_np(plan, "c", "Succeeded"),
            make_np(plan, "d"),
            make_np(plan, "e"),
        ]
    )
    assert rollout_counts(nps.values()).in_progress == 2
    assert admit(plan, nps) == ["d"]


def test_failed_nodes_count_against_max_unavailable() -> None:
    plan = make_plan(rollout={"maxParallel": 3, "maxUnavailable": 2})
    nps = by_node(
        [
            make_np(plan, "a", "Failed"),
            make_np(plan, "b", "WaitingOperator"),
            make_np(plan, "c"),
            make_np(plan, "d"),
        ]
    )
    assert admit(plan, nps) == []
    nps["b"] = make_np(plan, "b", "Succeeded")
    assert admit(plan, nps) == ["c"]


@pytest.mark.parametrize(
    "spec",
    [
        {"paused": True},
        {"dryRun": True},
        {"rollout": {"maxParallel": 3, "maxUnavailable": 0}},
        {"rollout": {"maxParallel": 0, "maxUnavailable": 3}},
    ],
)
def test_admit_nothing(spec: dict[str, Any]) -> None:
    plan = make_plan(**spec)
    assert admit(plan, by_node(make_np(plan, n) for n in ("a", "b"))) == []


def test_admit_never_exceeds_limits_already_exceeded() -> None:
    plan = make_plan(rollout={"maxParallel": 1, "maxUnavailable": 1})
    nps = by_node([make_np(plan, "a", "Draining"), make_np(plan, "b", "Applying"), make_np(plan, "c")])
    assert admission_capacity(plan, nps.values()) == 0
    assert admit(plan, nps) == []


def test_admit_candidates() -> None:
    plan = make_plan(rollout={"maxParallel": 10, "maxUnavailable": 10})
    nps = by_node(
        [
            make_np(plan, "admitted", admitted=True),
            make_np(plan, "old-admission", admitted=SPX_HASH),
            make_np(plan, "dry", dry_run=True),
            make_np(plan, "no-status", phase=None),
            make_np(plan, "deleting", deleting=True),
            make_np(plan, "held"),
            make_np(plan, "skipped", "Skipped"),
            make_np(plan, "succeeded", "Succeeded"),
        ]
    )
    eligible = set(nps) - {"held"}
    assert admit(plan, nps, eligible=eligible) == ["no-status", "old-admission"]


def test_revoke_withdraws_admissions_that_have_not_started() -> None:
    plan = make_plan(paused=True)
    nps = by_node(
        [make_np(plan, "a", admitted=True), make_np(plan, "b", "Draining", admitted=True), make_np(plan, "c")]
    )
    assert revoke(plan, nps) == ["a"]
    active = make_plan()
    assert revoke(active, nps) == []
    assert revoke(active, nps, eligible={"b", "c"}) == ["a"]


# --- cleanup -------------------------------------------------------------------------------------


def test_stale_node_partitionings() -> None:
    plan = make_plan(rules=[EXAMPLE_PLAN["spec"]["rules"][0]])  # training rule removed
    nodes = [n for n in fleet() if n["metadata"]["name"] != "gpu-c"]  # gpu-c deleted
    nodes[[n["metadata"]["name"] for n in nodes].index("gpu-b")]["metadata"]["labels"][POOL] = "batch"
    duplicate = make_np(plan, "gpu-a", "Succeeded")
    duplicate["metadata"]["name"] = "old-naming-gpu-a"
    nps = [
        make_np(plan, "gpu-a", "Succeeded"),
        duplicate,
        make_np(plan, "gpu-b", "Draining"),  # relabelled out of the rule
        make_np(plan, "gpu-c", "Succeeded"),  # node deleted
        make_np(plan, "train-1", "Succeeded"),  # rule removed
        make_np(plan, "train-2", "Succeeded", deleting=True),  # already going
        make_np(plan, "cp-1", "Succeeded"),  # control plane, excluded
        other_plan_np("cpu-1"),  # not ours
    ]
    sel = select_nodes(plan, nodes, profiles(), nps)
    assert stale_node_partitionings(plan, sel, nps) == [
        "mi300x-inference-cpx-cp-1",
        "mi300x-inference-cpx-gpu-b",
        "mi300x-inference-cpx-gpu-c",
        "mi300x-inference-cpx-train-1",
        "old-naming-gpu-a",
    ]


def test_held_nodes_keep_their_node_partitionings() -> None:
    plan = make_plan()
    profs = profiles(mi300x_cpx=ready_profile("mi300x-cpx", ready="False"))
    nps = [make_np(plan, "gpu-a", "Succeeded")]
    sel = select_nodes(plan, fleet(), profs, nps)
    assert stale_node_partitionings(plan, sel, nps) == []
    assert "gpu-a" not in desired_node_partitionings(plan, sel, profs)


# --- status --------------------------------------------------------------------------------------


def _status_for(
    plan: dict[str, Any],
    nps: list[dict[str, Any]],
    profs: dict[str, Any] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    previous: Mapping[str, Any] | None = None,
    now: datetime = T0,
) -> tuple[dict[str, Any], bool]:
    sel = select_nodes(plan, fleet() if nodes is None else nodes, profs or profiles(), nps)
    return plan_status(plan, sel, nps, now, previous)


def test_first_reconcile_is_pending() -> None:
    plan = make_plan()
    status, changed = _status_for(plan, [])
    assert changed
    assert status["phase"] == "Pending"
    assert status["observedGeneration"] == 1
    assert status["lastSyncTime"] == format_time(T0)
    assert status["summary"] == {
        "totalNodes": 0,
        "matchingNodes": 5,
        "pending": 0,
        "applying": 0,
        "verifying": 0,
        "succeeded": 0,
        "failed": 0,
        "skipped": 0,
        "inProgress": 0,
    }
    assert [c["type"] for c in status["conditions"]] == [
        "PlanReady",
        "NodesExcluded",
        "RolloutProgressing",
        "RolloutCompleted",
        "RolloutDegraded",
        "Paused",
    ]
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "PlanValid",
        "Plan is valid, targeting 5 nodes (1 control-plane node excluded)",
    )
    assert cond(status, "Paused")["reason"] == "PlanActive"
    assert cond(status, "RolloutDegraded")["reason"] == "NoFailures"


def test_progressing_summary_and_node_statuses() -> None:
    plan = make_plan()
    nps = [
        make_np(plan, "gpu-a", "Draining"),
        make_np(plan, "gpu-b", "WaitingOperator"),
        make_np(plan, "gpu-c", "Verifying"),
        make_np(plan, "train-1", "Succeeded", profile="mi300x-spx"),
        make_np(plan, "train-2", "Pending", profile="mi300x-spx"),
    ]
    status, _ = _status_for(plan, nps)
    assert status["phase"] == "Progressing"
    assert status["summary"] == {
        "totalNodes": 5,
        "matchingNodes": 5,
        "pending": 1,
        "applying": 2,
        "verifying": 1,
        "succeeded": 1,
        "failed": 0,
        "skipped": 0,
        # Every maxParallel slot held: Draining, WaitingOperator and Verifying alike.
        "inProgress": 3,
    }
    assert status["nodeStatuses"][0] == {
        "nodeName": "gpu-a",
        "desiredHash": CPX_HASH,
        "phase": "Draining",
        "lastUpdateTime": format_time(T0),
    }
    assert status["nodeStatuses"][3]["currentHash"] == SPX_HASH
    progressing = cond(status, "RolloutProgressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "True",
        "NodeOperationsInProgress",
        "3 nodes in progress, 1 pending",
    )
    completed = cond(status, "RolloutCompleted")
    assert (completed["status"], completed["reason"], completed["message"]) == (
        "False",
        "RolloutInProgress",
        "1/5 nodes done",
    )


def _all_succeeded(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [make_np(plan, n, "Succeeded") for n in ("gpu-a", "gpu-b", "gpu-c")] + [
        make_np(plan, n, "Succeeded", profile="mi300x-spx") for n in ("train-1", "train-2")
    ]


def test_completed() -> None:
    plan = make_plan()
    status, _ = _status_for(plan, _all_succeeded(plan))
    assert status["phase"] == "Completed"
    assert cond(status, "RolloutCompleted")["reason"] == "AllNodesSucceeded"
    assert cond(status, "RolloutCompleted")["message"] == "All 5 nodes succeeded"
    assert cond(status, "RolloutProgressing")["reason"] == "RolloutComplete"


def test_profile_edit_never_flashes_completed() -> None:
    """After a profile edit the Succeeded nodes still carry the old hash (the apply has not been
    observed yet): they count as pending, so the plan is Progressing, not Completed."""
    plan = make_plan()
    profs = profiles()
    profs["mi300x-cpx"]["spec"]["expectedResources"] = {"amd.com/cpx_nps4": "64"}
    status, _ = _status_for(plan, _all_succeeded(plan), profs)
    assert status["phase"] == "Progressing"
    assert status["summary"]["pending"] == 3 and status["summary"]["succeeded"] == 2
    assert [s["phase"] for s in status["nodeStatuses"]] == ["Succeeded"] * 5  # the objects' own phases


def test_effective_phase() -> None:
    plan = make_plan()
    assert effective_phase(make_np(plan, "a", "Succeeded"), CPX_HASH, False) == "Succeeded"
    assert effective_phase(make_np(plan, "a", "Succeeded"), SPX_HASH, False) == "Pending"
    assert effective_phase(make_np(plan, "a", "Succeeded", current=SPX_HASH), None, False) == "Pending"
    assert effective_phase(make_np(plan, "a", "Failed"), SPX_HASH, False) == "Pending"  # new hash retries
    assert effective_phase(make_np(plan, "a", "Failed"), CPX_HASH, False) == "Failed"
    assert effective_phase(make_np(plan, "a", "Skipped", dry_run=True), None, False) == "Pending"
    assert effective_phase(make_np(plan, "a", "Skipped", dry_run=True), None, True) == "Skipped"
    assert effective_phase(make_np(plan, "a", "Draining"), SPX_HASH, False) == "Draining"


def test_failed_node_degrades_and_blocks_the_rollout() -> None:
    plan = make_plan(rollout={"maxParallel": 2, "maxUnavailable": 1})
    nps = [
        make_np(plan, "gpu-a", "Failed"),
        make_np(plan, "gpu-b", "Pending"),
        make_np(plan, "gpu-c", "Succeeded"),
    ]
    nps[0]["status"]["conditions"] = [
        {
            "type": "NodeCordoned",
            "status": "True",
            "reason": "CordonSucceeded",
            "message": "",
            "lastTransitionTime": format_time(T0),
        },
        {
            "type": "OperatorReady",
            "status": "False",
            "reason": "DCMFailed",
            "message": "DCM reported failure",
            "lastTransitionTime": format_time(T1),
        },
    ]
    status, _ = _status_for(plan, nps)
    assert status["phase"] == "Degraded"
    degraded = cond(status, "RolloutDegraded")
    assert (degraded["status"], degraded["reason"], degraded["message"]) == (
        "True",
        "NodeFailures",
        "1 node failed: gpu-a",
    )
    progressing = cond(status, "RolloutProgressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "RolloutBlocked")
    assert "1 failed node use up maxUnavailable=1" in progressing["message"]
    assert status["nodeStatuses"][0]["lastError"] == "DCMFailed: DCM reported failure"


def test_paused_takes_precedence_and_says_so() -> None:
    plan = make_plan(paused=True)
    nps = [make_np(plan, "gpu-a", "Failed"), make_np(plan, "gpu-b", "Pending")]
    status, _ = _status_for(plan, nps)
    assert status["phase"] == "Paused"
    assert cond(status, "Paused")["status"] == "True"
    assert cond(status, "Paused")["reason"] == "PlanPaused"
    assert cond(status, "RolloutProgressing")["reason"] == "PlanPaused"
    in_flight = [make_np(plan, "gpu-a", "Applying")]
    status, _ = _status_for(plan, in_flight)
    assert status["phase"] == "Paused"
    assert cond(status, "RolloutProgressing")["status"] == "True"  # in-flight nodes finish


def test_empty_plan_is_pending_not_completed_and_says_it_selects_no_node() -> None:
    plan = make_plan(
        rules=[{"selector": {"matchLabels": {POOL: "tpyo"}}, "profileRef": {"name": "mi300x-cpx"}}]
    )
    status, _ = _status_for(plan, [])
    assert status["phase"] == "Pending"
    completed = cond(status, "RolloutCompleted")
    assert (completed["status"], completed["reason"]) == ("False", "NoMatchingNodes")
    # Not "ready": the condition says no node is selected, and its flip is a Warning Event.
    ready = cond(status, "PlanReady")
    assert (ready["status"], ready["reason"]) == ("False", "NoMatchingNodes")
    assert re.search(
        r"No node matches the plan's rules \(.+\): none of the cluster's \d+ nodes is selected",
        ready["message"],
    )
    from aiplane.controllers.partitioning.plan import transition_events

    events = transition_events(None, status)
    assert [(t, r) for t, r, _ in events if r == "NoMatchingNodes"] == [("Warning", "NoMatchingNodes")]


def test_all_skipped_dry_run_is_completed() -> None:
    plan = make_plan(dryRun=True)
    nps = [make_np(plan, n, "Skipped", dry_run=True) for n in ("gpu-a", "gpu-b", "gpu-c")] + [
        make_np(plan, n, "Skipped", profile="mi300x-spx", dry_run=True) for n in ("train-1", "train-2")
    ]
    status, _ = _status_for(plan, nps)
    assert status["phase"] == "Completed"
    assert status["summary"]["skipped"] == 5
    completed = cond(status, "RolloutCompleted")
    assert (completed["status"], completed["reason"]) == ("True", "DryRunCompleted")
    # Leaving dry-run: the Skipped nodes are pending again.
    live = make_plan(dryRun=False, generation=2)
    status, _ = _status_for(live, nps)
    assert status["phase"] == "Progressing"
    assert status["summary"]["pending"] == 5


def test_held_nodes_keep_the_plan_from_completing() -> None:
    plan = make_plan()
    profs = profiles(mi300x_cpx=ready_profile("mi300x-cpx", ready="False"))
    status, _ = _status_for(plan, _all_succeeded(plan), profs)
    assert status["phase"] == "Pending"
    assert cond(status, "PlanReady")["reason"] == "ProfileNotReady"
    pending = [make_np(plan, "gpu-a", "Pending")]
    status, _ = _status_for(plan, pending, profs)
    assert cond(status, "RolloutProgressing")["reason"] == "RolloutBlocked"


def test_status_is_idempotent_and_stable_at_steady_state() -> None:
    plan = make_plan()
    nps = [make_np(plan, "gpu-a", "Draining"), *_all_succeeded(plan)[1:]]
    first, changed = _status_for(plan, nps, now=T0)
    assert changed
    second, changed = _status_for(plan, nps, previous=first, now=T2)
    assert not changed
    assert second == first  # lastSyncTime and every lastTransitionTime kept


def test_transition_times_move_only_on_flips() -> None:
    plan = make_plan()
    nps = [make_np(plan, "gpu-a", "Draining"), *_all_succeeded(plan)[1:]]
    first, _ = _status_for(plan, nps, now=T0)
    nps[0] = make_np(plan, "gpu-a", "Verifying")
    second, changed = _status_for(plan, nps, previous=first, now=T1)
    assert changed
    assert second["lastSyncTime"] == format_time(T1)
    assert cond(second, "RolloutProgressing")["lastTransitionTime"] == format_time(T0)  # still True
    entries = {s["nodeName"]: s for s in second["nodeStatuses"]}
    assert entries["gpu-a"]["lastUpdateTime"] == format_time(T1)
    assert entries["gpu-b"]["lastUpdateTime"] == format_time(T0)
    nps[0] = make_np(plan, "gpu-a", "Succeeded")
    third, _ = _status_for(plan, nps, previous=second, now=T2)
    assert third["phase"] == "Completed"
    assert cond(third, "RolloutProgressing")["lastTransitionTime"] == format_time(T2)
    assert cond(third, "RolloutCompleted")["lastTransitionTime"] == format_time(T2)
    assert cond(third, "PlanReady")["lastTransitionTime"] == format_time(T0)


def test_generation_bump_alone_is_a_change() -> None:
    plan = make_plan()
    first, _ = _status_for(plan, _all_succeeded(plan))
    second, changed = _status_for(make_plan(generation=2), _all_succeeded(plan), previous=first, now=T1)
    assert changed
    assert second["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 for c in second["conditions"])


def test_foreign_nps_are_not_counted() -> None:
    plan = make_plan()
    status, _ = _status_for(plan, [other_plan_np("cpu-1")])
    assert status["summary"]["totalNodes"] == 0


# --- properties: random fleets, random phases ----------------------------------------------------

PHASES = ["Pending", "Draining", "Applying", "WaitingOperator", "Verifying", "Succeeded", "Failed", "Skipped"]


@st.composite
def fleets(draw: st.DrawFn, min_size: int = 0, gpu_bias: int = 1) -> list[dict[str, Any]]:
    """Random nodes: pools, GPU products (``gpu_bias`` weights MI300X), control-plane labels."""
    count = draw(st.integers(min_value=min_size, max_value=14))
    nodes = []
    for i in range(count):
        labels: dict[str, str] = {}
        pool = draw(st.sampled_from(["inference", "training", "batch", None]))
        product = draw(st.sampled_from([*[MI300X] * gpu_bias, "AMD_Instinct_MI250X", None]))
        role = draw(
            st.sampled_from(
                [None, None, None, "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"]
            )
        )
        if role:
            labels[role] = draw(st.sampled_from(["", "true"]))
        nodes.append(make_node(f"node-{i:02d}", pool=pool, product=product, **labels))
    return nodes


_selectors = st.sampled_from(
    [
        {},
        {"matchLabels": {POOL: "inference"}},
        {"matchLabels": {POOL: "training"}},
        {"matchLabels": {PRODUCT: MI300X}},
        {"matchExpressions": [{"key": POOL, "operator": "In", "values": ["batch", "training"]}]},
        {"matchExpressions": [{"key": POOL, "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": PRODUCT, "operator": "NotIn", "values": [MI300X]}]},
    ]
)


@st.composite
def plans(draw: st.DrawFn, example_rules: bool = False) -> dict[str, Any]:
    """Random rules (overlaps included) and limits; ``example_rules`` mostly keeps the example's
    two disjoint rules, so that rollouts have something to do."""
    rules = [
        {
            "selector": draw(_selectors),
            "profileRef": {"name": draw(st.sampled_from(sorted(EXAMPLE_PROFILES)))},
        }
        for _ in range(draw(st.integers(min_value=1, max_value=3)))
    ]
    if example_rules and draw(st.integers(0, 4)):
        rules = copy.deepcopy(EXAMPLE_PLAN["spec"]["rules"])
    rollout = draw(
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "maxParallel": st.integers(min_value=1, max_value=4),
                    "maxUnavailable": st.integers(min_value=0, max_value=4),
                    "excludeControlPlane": st.booleans(),
                }
            ),
        )
    )
    return make_plan(rules=rules, rollout=rollout, paused=draw(st.booleans()))


@st.composite
def np_sets(draw: st.DrawFn, plan: dict[str, Any], nodes: list[str]) -> dict[str, dict[str, Any]]:
    result = {}
    for node in nodes:
        if not draw(st.booleans()):
            continue
        choices: list[str | bool] = [False, True, SPX_HASH]
        admitted = draw(st.sampled_from(choices))
        np = make_np(
            plan,
            node,
            draw(st.sampled_from([*PHASES, None])),
            admitted=admitted,
            dry_run=draw(st.booleans()) and draw(st.booleans()),
        )
        result[node] = np
    return result


def _mark_admitted(nps: Mapping[str, Mapping[str, Any]], nodes: Iterable[str]) -> dict[str, dict[str, Any]]:
    out = {n: copy.deepcopy(dict(np)) for n, np in nps.items()}
    for node in nodes:
        out[node].setdefault("metadata", {}).setdefault("annotations", {})[ADMITTED_ANNOTATION] = out[node][
            "spec"
        ]["desiredHash"]
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_admit_respects_limits_determinism_and_idempotence(data: st.DataObject) -> None:
    nodes = data.draw(fleets())
    plan = data.draw(plans())
    names = [n["metadata"]["name"] for n in nodes]
    nps = data.draw(np_sets(plan, names))
    eligible = data.draw(
        st.one_of(st.none(), st.sets(st.sampled_from(names)) if names else st.just(set[str]()))
    )
    limits = rollout_limits(plan)

    admitted = admit(plan, nps, eligible=eligible)
    # Deterministic, whatever the mapping order.
    shuffled = dict(data.draw(st.permutations(list(nps.items()))))
    assert admit(plan, shuffled, eligible=eligible) == admitted
    assert admitted == sorted(admitted)
    if plan["spec"].get("paused"):
        assert admitted == []
    for node in admitted:
        np = nps[node]
        assert np_phase(np) == "Pending" and not np["spec"]["dryRun"] and not is_admitted(np)
        assert eligible is None or node in eligible
    after = _mark_admitted(nps, admitted)
    counts_before, counts_after = rollout_counts(nps.values()), rollout_counts(after.values())
    assert counts_after.in_progress == counts_before.in_progress + len(admitted)
    if admitted:
        assert counts_after.in_progress <= limits.max_parallel
        assert counts_after.unavailable <= limits.max_unavailable
    assert counts_after.in_progress <= max(limits.max_parallel, counts_before.in_progress)
    assert counts_after.unavailable <= max(limits.max_unavailable, counts_before.unavailable)
    # Idempotent: once the admissions are visible, nothing more is admitted.
    assert admit(plan, after, eligible=eligible) == []


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_plan_status_is_idempotent(data: st.DataObject) -> None:
    nodes = data.draw(fleets())
    plan = data.draw(plans())
    nps = data.draw(np_sets(plan, [n["metadata"]["name"] for n in nodes]))
    sel = select_nodes(plan, nodes, profiles(), nps.values())
    first, changed = plan_status(plan, sel, list(nps.values()), T0, None)
    assert changed
    second, changed = plan_status(plan, sel, list(nps.values()), T2, first)
    assert not changed
    assert second == first
    s = first["summary"]
    assert s["totalNodes"] == sum(
        s[k] for k in ("pending", "applying", "verifying", "succeeded", "failed", "skipped")
    )
    assert first["phase"] in {"Pending", "Progressing", "Paused", "Completed", "Degraded"}


# --- property: a whole rollout ------------------------------------------------------------------


class NodeModel:
    """A tiny random model of the NodePartitioning controller obeying the admission contract."""

    NEXT: Mapping[str, str] = {
        "Draining": "Applying",
        "Applying": "WaitingOperator",
        "WaitingOperator": "Verifying",
    }

    def __init__(self, rng: random.Random, fail_rate: float) -> None:
        self.rng = rng
        self.fail_rate = fail_rate
        self.failed_for: dict[str, str] = {}  # np name -> hash it failed for

    def movable(self, np: Mapping[str, Any]) -> bool:
        """Could the state machine move ``np`` now (ignoring chance)?"""
        phase, spec = np_phase(np), np["spec"]
        if phase == "Pending":
            return bool(spec["dryRun"]) or is_admitted(np)
        if phase in self.NEXT or phase == "Verifying":
            return True
        # Resting phases go back to Pending on a new hash (Failed: only a new one), or when a
        # Skipped NodePartitioning leaves dry-run.
        retarget = {
            "Succeeded": (np.get("status") or {}).get("currentHash") != spec["desiredHash"],
            "Failed": self.failed_for.get(np["metadata"]["name"]) != spec["desiredHash"],
            "Skipped": not spec["dryRun"],
        }
        return bool(retarget.get(phase, False))

    def step(self, np: dict[str, Any]) -> bool:
        """Maybe move ``np`` one step; True if it changed."""
        if not self.movable(np):
            return False
        status = np.setdefault("status", {})
        phase, spec = np_phase(np), np["spec"]
        if phase == "Pending":
            if spec["dryRun"]:
                status["phase"] = "Skipped"
            elif self.rng.random() < 0.1:  # already in the desired state: no drain
                status.update(phase="Succeeded", currentHash=spec["desiredHash"])
            else:
                status["phase"] = "Draining"
        elif phase in self.NEXT or phase == "Verifying":
            if self.rng.random() < self.fail_rate:
                status["phase"] = "Failed"
                self.failed_for[np["metadata"]["name"]] = spec["desiredHash"]
            elif phase == "Verifying":
                status.update(phase="Succeeded", currentHash=spec["desiredHash"])
            else:
                status["phase"] = self.NEXT[phase]
        else:
            status["phase"] = "Pending"
        return True


def _check_limits(
    plan: Mapping[str, Any], nps: Iterable[Mapping[str, Any]], before: tuple[int, int]
) -> tuple[int, int]:
    """In progress ≤ maxParallel and unavailable ≤ maxUnavailable, or not worse than before (a
    limit lowered mid-rollout cannot stop nodes in flight)."""
    limits = rollout_limits(plan)
    counts = rollout_counts(nps)
    assert counts.in_progress <= max(limits.max_parallel, before[0]), counts
    assert counts.unavailable <= max(limits.max_unavailable, before[1]), counts
    return counts.in_progress, counts.unavailable


def _outside_events(
    plan: dict[str, Any],
    profs: dict[str, dict[str, Any]],
    step: int,
    edit_at: int | None,
    pause_window: tuple[int, int] | None,
) -> None:
    """What users and the profile controller do meanwhile: edit a profile, validate it, pause the plan."""
    if edit_at is not None and step == edit_at:  # a profile edit: new hash for its nodes
        cpx = profs["mi300x-cpx"]
        cpx["spec"]["expectedResources"] = {"amd.com/cpx_nps4": "64"}
        cpx["metadata"]["generation"] += 1
    if edit_at is not None and step == edit_at + 2:  # the profile controller validates it
        cpx = profs["mi300x-cpx"]
        cpx["status"]["conditions"][0]["observedGeneration"] = cpx["metadata"]["generation"]
    if pause_window is not None:
        plan["spec"]["paused"] = pause_window[0] <= step < pause_window[0] + pause_window[1]


def _write_children(
    plan: dict[str, Any], sel: Selection, profs: dict[str, dict[str, Any]], store: dict[str, dict[str, Any]]
) -> bool:
    """The plan reconcile's child writes: create/update, delete stale, revoke, admit. True if any."""
    changed = False
    for body in desired_node_partitionings(plan, sel, profs).values():
        existing = store.get(body["metadata"]["name"])
        if np_needs_update(existing, body):
            merged = copy.deepcopy(body)
            if existing is not None:
                merged["metadata"]["annotations"] = existing["metadata"].get("annotations", {})
                merged["status"] = existing.get("status", {})
            store[body["metadata"]["name"]] = merged
            changed = True
    for name in stale_node_partitionings(plan, sel, store.values()):
        del store[name]  # the finalizer would restore the node first
        changed = True
    children = children_by_node(plan, store.values())
    for node in revoke(plan, children, eligible=sel.admissible):
        store[children[node]["metadata"]["name"]]["metadata"]["annotations"].pop(ADMITTED_ANNOTATION)
        changed = True
    admitted = admit(plan, children, eligible=sel.admissible)
    if plan["spec"]["paused"]:
        assert admitted == []
    for node in admitted:
        np = store[children[node]["metadata"]["name"]]
        np["metadata"].setdefault("annotations", {})[ADMITTED_ANNOTATION] = np["spec"]["desiredHash"]
        changed = True
    return changed


def _reconcile_nodes(
    rng: random.Random,
    model: NodeModel,
    plan: Mapping[str, Any],
    store: dict[str, dict[str, Any]],
    seen: tuple[int, int],
) -> tuple[bool, tuple[int, int]]:
    """NodePartitioning reconciles in random order, the limits checked after each one."""
    changed = False
    for name in rng.sample(sorted(store), len(store)):
        if rng.random() < 0.6 and model.step(store[name]):
            changed = True
        seen = _check_limits(plan, store.values(), seen)
    return changed, seen


def _assert_settled(
    plan: Mapping[str, Any],
    sel: Selection,
    store: dict[str, dict[str, Any]],
    previous_status: dict[str, Any] | None,
    dry_run: bool,
) -> None:
    """Every target ended Succeeded/Failed/Skipped (or Pending behind a safety stop), and the plan says so."""
    children = children_by_node(plan, store.values())
    assert set(children) == (set(sel.targets) if sel.valid else set())
    failed = sum(1 for child in children.values() if np_phase(child) == "Failed")
    limits = rollout_limits(plan)
    for node, child in children.items():
        phase = np_phase(child)
        want = sel.rules[sel.targets[node]].desired_hash
        if phase == "Pending":  # only when failures (or maxUnavailable: 0) stop the rollout
            assert not dry_run
            assert failed >= limits.max_unavailable
        else:
            assert phase in {"Succeeded", "Failed", "Skipped"}
            assert phase != "Skipped" or dry_run
            assert child["spec"]["desiredHash"] == want
            if phase == "Succeeded":
                assert child["status"]["currentHash"] == want
    assert previous_status is not None
    if (
        sel.valid
        and sel.targets
        and all(np_phase(np) in {"Succeeded", "Skipped"} for np in children.values())
    ):
        assert previous_status["phase"] == "Completed"
    if failed and sel.valid:
        assert previous_status["phase"] == "Degraded"
    for np in store.values():
        assert np_phase(np) not in IN_PROGRESS_PHASES


@settings(max_examples=60, deadline=None)
@given(
    nodes=fleets(gpu_bias=4).map(lambda random_nodes: [*fleet()[:5], *random_nodes]),
    plan=plans(example_rules=True),
    seed=st.integers(min_value=0, max_value=2**32),
    fail_rate=st.sampled_from([0.0, 0.0, 0.05, 0.3]),
    dry_run=st.booleans(),
    edit_at=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
    pause_window=st.one_of(st.none(), st.tuples(st.integers(0, 30), st.integers(1, 20))),
)
def test_simulated_rollout_never_exceeds_limits_and_settles(
    nodes: list[dict[str, Any]],
    plan: dict[str, Any],
    seed: int,
    fail_rate: float,
    dry_run: bool,
    edit_at: int | None,
    pause_window: tuple[int, int] | None,
) -> None:
    """Drive a whole rollout through the pure functions: create/update NodePartitionings, delete
    stale ones, revoke and admit, advance nodes at random, edit a profile and pause midway. At every
    step the limits hold; at the end every target is Succeeded/Failed/Skipped, except nodes left
    Pending because Failed nodes use up maxUnavailable (the intended safety stop)."""
    rng = random.Random(seed)
    model = NodeModel(rng, fail_rate)
    plan["spec"]["paused"] = False
    plan["spec"]["dryRun"] = dry_run
    profs = profiles()
    store: dict[str, dict[str, Any]] = {}  # name -> NodePartitioning of this plan
    previous_status: dict[str, Any] | None = None
    seen = (0, 0)
    peak = 0
    now = T0
    for step in range(2000):
        now += timedelta(seconds=1)
        _outside_events(plan, profs, step, edit_at, pause_window)

        sel = select_nodes(plan, nodes, profs, store.values())
        changed = _write_children(plan, sel, profs, store)
        seen = _check_limits(plan, store.values(), seen)
        peak = max(peak, seen[0])
        nodes_changed, seen = _reconcile_nodes(rng, model, plan, store, seen)
        changed = changed or nodes_changed

        status, status_changed = plan_status(plan, sel, list(store.values()), now, previous_status)
        again, again_changed = plan_status(plan, sel, list(store.values()), now + timedelta(hours=1), status)
        assert not again_changed and again == status
        if status_changed:
            previous_status = status
        events_done = (edit_at is None or step > edit_at + 2) and (
            pause_window is None or step >= sum(pause_window)
        )
        if events_done and not changed and not any(model.movable(np) for np in store.values()):
            break
    else:
        pytest.fail("the rollout never settled")

    sel = select_nodes(plan, nodes, profs, store.values())
    # Statistics (pytest --hypothesis-show-statistics) show the runs are not vacuous.
    event(f"final phase {previous_status and previous_status['phase']}")
    event(f"maxParallel reached: {peak >= rollout_limits(plan).max_parallel}")
    _assert_settled(plan, sel, store, previous_status, dry_run)


def test_selection_type_is_exported() -> None:
    assert Selection.__name__ == "Selection"

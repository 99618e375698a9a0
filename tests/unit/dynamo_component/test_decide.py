"""The DCD controller's decision (``component_decide.decide``), without a cluster.

A fake API server below applies a decision's writes the way kube does (a create gets generation 1
and no status; a replace keeps the status and moves the generation on when the spec changed), so the
properties check what a user sees: one reconcile's writes leave nothing to write, the status it
reports is the one the next reconcile computes from the written objects, and nothing that is not this
DCD's is ever written or deleted.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery import objects
from aiplane.controllers.disruption import updated_budget
from aiplane.controllers.dynamo.component_children import ChildrenInput
from aiplane.controllers.dynamo.component_decide import (
    FINALIZER,
    REASON_CHILD_NOT_CONTROLLED,
    ChildOp,
    ComponentDecision,
    ComponentObserved,
    decide,
)
from aiplane.controllers.dynamo.options import DynamoOptions
from tests.unit.dynamo_component.test_children import dcd as frontend
from tests.unit.dynamo_component.test_properties import OPTIONS, dcds

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SERVED = (
    "Deployment",
    "PodDisruptionBudget",
    "Service",
    "Ingress",
    "HorizontalPodAutoscaler",
    "LeaderWorkerSet",
    "PodGroup",
    "VirtualService",
)


def observed(dcd: Obj, children: dict[str, dict[str, Obj]] | None = None, **kw: Any) -> ComponentObserved:
    options: DynamoOptions = kw.pop("options", DynamoOptions())
    views = {kind: dict((children or {}).get(kind, {})) for kind in SERVED}
    return ComponentObserved(dcd, ChildrenInput(dcd, options), views, **kw)


def server(seen: ComponentObserved, decision: ComponentDecision) -> ComponentObserved:
    """``seen`` after the API server carried out ``decision``'s writes, and its status written."""
    children = {
        kind: {n: copy.deepcopy(o) for n, o in views.items()} for kind, views in seen.children.items()
    }
    for write in decision.writes:
        kind, name = str(write.body["kind"]), objects.name(write.body)
        obj = copy.deepcopy(write.body)
        if write.op is ChildOp.CREATE:
            obj["metadata"]["generation"] = 1
        elif write.op is ChildOp.BUDGET:
            assert write.live is not None
            obj = updated_budget(write.live, write.body)
        else:
            assert write.live is not None
            live = write.live
            obj["metadata"]["generation"] = (objects.generation(live) or 0) + (live["spec"] != obj["spec"])
            if "status" in live:
                obj["status"] = copy.deepcopy(live["status"])
        children[kind][name] = obj
    for gone in decision.deletes:
        del children[str(gone["kind"])][objects.name(gone)]
    dcd = copy.deepcopy(seen.dcd)
    if decision.status is not None:
        dcd["status"] = copy.deepcopy(decision.status)
    return ComponentObserved(dcd, ChildrenInput(dcd, seen.inputs.options), children)


@settings(max_examples=120, deadline=None)
@given(dcd=dcds(), options=OPTIONS)
def test_one_reconcile_leaves_nothing_to_write_and_reports_what_the_next_one_sees(
    dcd: Obj, options: DynamoOptions
) -> None:
    first = decide(observed(dcd, options=options), NOW)
    assert first.deletes == ()
    assert all(w.op is ChildOp.CREATE for w in first.writes)  # nothing exists yet
    after = server(observed(dcd, options=options), first)
    again = decide(after, NOW)
    assert again.writes == () and again.deletes == ()
    # The status reported with the writes is the one computed from the written objects.
    assert again.status == first.status


@settings(max_examples=120, deadline=None)
@given(dcd=dcds(), options=OPTIONS, image=st.sampled_from(["a:1", "c:3"]))
def test_a_spec_change_replaces_only_what_differs_and_predicts_the_rollout(
    dcd: Obj, options: DynamoOptions, image: str
) -> None:
    steady = server(observed(dcd, options=options), decide(observed(dcd, options=options), NOW))
    changed = copy.deepcopy(steady.dcd)
    changed["spec"]["extraPodSpec"]["mainContainer"]["image"] = image
    changed["metadata"]["generation"] = 2
    seen = ComponentObserved(changed, ChildrenInput(changed, options), steady.children)
    decision = decide(seen, NOW)
    assert all(w.op is ChildOp.REPLACE for w in decision.writes) and decision.deletes == ()
    # Only children that carry the pod template are replaced (Deployments, LeaderWorkerSets).
    assert {w.body["kind"] for w in decision.writes} <= {"Deployment", "LeaderWorkerSet"}
    again = decide(server(seen, decision), NOW)
    assert again.writes == () and again.status == decision.status


@settings(max_examples=80, deadline=None)
@given(dcd=dcds(), options=OPTIONS)
def test_a_stranger_at_a_wanted_name_is_never_written_nor_deleted_and_is_reported(
    dcd: Obj, options: DynamoOptions
) -> None:
    first = decide(observed(dcd, options=options), NOW)
    if not first.writes:
        return  # the spec cannot be built (reported as such) or wants nothing
    target = first.writes[0].body
    stranger = copy.deepcopy(target)
    stranger["metadata"]["ownerReferences"] = [
        {"kind": "Deployment", "name": "x", "uid": "other", "controller": True}
    ]
    children = {str(target["kind"]): {objects.name(target): stranger}}
    decision = decide(observed(dcd, children, options=options), NOW)
    touched = [w.body for w in decision.writes] + list(decision.deletes)
    assert all(objects.name(o) != objects.name(target) or o["kind"] != target["kind"] for o in touched)
    assert decision.status is not None
    available = next(c for c in decision.status["conditions"] if c["type"] == "Available")
    assert (available["status"], available["reason"]) == ("False", REASON_CHILD_NOT_CONTROLLED)
    assert f"{target['kind']} {objects.name(target)} exists and is not controlled" in available["message"]


def test_children_no_longer_wanted_are_deleted_and_only_ours() -> None:
    dcd = frontend()
    steady = server(observed(dcd), decide(observed(dcd), NOW))
    assert "g-frontend" in steady.children["Service"]
    worker = copy.deepcopy(steady.dcd)
    worker["spec"]["componentType"] = "worker"  # a worker gets no Service
    foreign = copy.deepcopy(steady.children["Service"]["g-frontend"])
    foreign["metadata"].update(name="other", ownerReferences=[])
    children = {**steady.children, "Service": {**steady.children["Service"], "other": foreign}}
    decision = decide(ComponentObserved(worker, ChildrenInput(worker), children), NOW)
    assert [(o["kind"], objects.name(o)) for o in decision.deletes] == [("Service", "g-frontend")]


def test_the_etcd_finalizer_is_added_when_etcd_is_configured_and_removed_on_deletion() -> None:
    dcd = frontend()
    assert decide(observed(dcd, etcd=True), NOW).add_finalizer
    assert not decide(observed(dcd), NOW).add_finalizer
    deleting = copy.deepcopy(dcd)
    deleting["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER])
    decision = decide(observed(deleting, etcd=True), NOW)
    assert decision.deleting and decision.remove_finalizer
    assert decision.writes == () and decision.deletes == () and decision.status is None

"""The ModelInfer controller's whole decision as a pure function (no client, no cache): the revision,
the PodGroups, the budgets, the plan and the status, from one observation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.modelinfer.decide import (
    CreateRoleReplica,
    ModelInferObserved,
    decide,
    queue_of_group,
)
from aiplane.controllers.modelinfer.podgroups import PodGroupOp
from aiplane.controllers.modelinfer.revision import revision_hash

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}


def modelinfer(gang: bool = False, **spec: Any) -> dict[str, Any]:
    roles = [{"name": "decode", "replicas": 1, "workerReplicas": 0, "entryTemplate": TEMPLATE}]
    template: dict[str, Any] = {"roles": roles}
    if gang:
        template["gangSchedule"] = {}
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": "m", "namespace": "ns", "uid": "mi-uid", "generation": 1},
        "spec": {"replicas": 2, "template": template, **spec},
    }


def fresh(mi: dict[str, Any], **kw: Any) -> ModelInferObserved:
    roles = tuple(mi["spec"]["template"]["roles"])
    revision = revision_hash(list(roles))
    fields: dict[str, Any] = {
        "roles": roles,
        "revisions": {revision: [dict(r) for r in roles]},
        "recorded": False,
        "update_revision": revision,
        "current_revision": revision,
        "podgroups": (),
    }
    fields.update(kw)
    return ModelInferObserved(mi, **fields)


def test_a_new_modelinfer_records_its_revision_and_creates_its_groups_and_podgroups() -> None:
    decision = decide(fresh(modelinfer(gang=True)), NOW)
    assert decision.revision is not None and decision.revision["kind"] == "ControllerRevision"
    assert decision.plan is not None
    creates = [a for a in decision.plan.actions if isinstance(a, CreateRoleReplica)]
    assert sorted(a.ordinal for a in creates) == [0, 1]
    assert decision.podgroups is not None
    assert [(w.op, (w.body or {})["metadata"]["name"]) for w in decision.podgroups.writes] == [
        (PodGroupOp.CREATE, "m-0"),
        (PodGroupOp.CREATE, "m-1"),
    ]
    assert [b.name for b in decision.budgets] == ["m-0", "m-1"]  # one budget per group, before any pod
    assert decision.status["observedGeneration"] == 1


def test_without_gang_scheduling_no_podgroup_and_none_left_behind() -> None:
    stale = {"metadata": {"name": "m-0", "namespace": "ns", "uid": "pg"}}
    decision = decide(fresh(modelinfer(), podgroups=(stale,)), NOW)
    assert decision.podgroups is not None
    assert [(w.op, w.live) for w in decision.podgroups.writes] == [(PodGroupOp.DELETE, stale)]


def test_an_unserved_podgroup_api_is_said_only_when_gang_scheduling_is_asked_for() -> None:
    asked = decide(fresh(modelinfer(gang=True), podgroups=None), NOW)
    assert asked.podgroups is not None and asked.podgroups.unavailable and asked.podgroups.writes == ()
    quiet = decide(fresh(modelinfer(), podgroups=None), NOW)
    assert quiet.podgroups is not None and not quiet.podgroups.unavailable


def test_until_the_caches_show_our_writes_only_the_status_and_revision_are_decided() -> None:
    decision = decide(fresh(modelinfer(gang=True), decided=False), NOW)
    assert decision.podgroups is None and decision.budgets == () and decision.prune == ()
    assert decision.revision is not None and decision.status


def test_an_invalid_spec_writes_nothing_but_its_status() -> None:
    decision = decide(ModelInferObserved(modelinfer(), problems="spec.replicas: bad"), NOW)
    assert decision.invalid == "spec.replicas: bad" and decision.plan is None and decision.revision is None
    valid = next(c for c in decision.status["conditions"] if c["type"] == "Valid")
    assert (valid["status"], valid["reason"], valid["message"]) == (
        "False",
        "InvalidSpec",
        "spec.replicas: bad",
    )


def test_new_groups_go_to_the_platforms_queue_and_a_refill_follows_its_groups_pods() -> None:
    mi = modelinfer()
    revision = revision_hash(list(mi["spec"]["template"]["roles"]))
    decision = decide(fresh(mi, platform_queue="kaiwo"), NOW)
    assert decision.queues == {(0, revision): "kaiwo", (1, revision): "kaiwo"}
    assert decide(fresh(mi), NOW).queues == {(0, revision): None, (1, revision): None}
    # Group m-1 already has a pod that Kueue does not manage (created before the queue existed): its
    # refill stays out of the queue too, so a group is never split between Kueue and the scheduler.
    unqueued = {
        "metadata": {
            "name": "m-1-decode-0-9",
            "namespace": "ns",
            "uid": "p",
            "labels": {"modelinfer.volcano.sh/group-name": "m-1", "modelinfer.volcano.sh/revision": revision},
        },
    }
    assert queue_of_group((unqueued,), mi, 1, revision, "kaiwo") is None
    assert queue_of_group((unqueued,), mi, 0, revision, "kaiwo") == "kaiwo"

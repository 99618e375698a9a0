"""What holds a workload's pods, as its status names it (aiplane.controllers.causes)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers import causes

SCHEDULER = (
    "0/9 nodes are available: 1 node(s) had untolerated taint(s), 8 Insufficient nvidia.com/gpu. "
    "preemption: 0/9 nodes are available: 1 Preemption is not helpful for scheduling, 8 No preemption "
    "victims found for incoming pod."
)


def pod(name: str, *, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "annotations": spec.pop("annotations", {})},
        "spec": spec,
        "status": status or {"phase": "Pending"},
    }


def unschedulable(name: str, message: str = SCHEDULER, **spec: Any) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return pod(name, status={"phase": "Pending", "conditions": [condition]}, **spec)


def waiting(name: str, reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "nvcr.io/x:1",
        "state": {"waiting": {"reason": reason, "message": message}},
    }
    container.update(extra)
    conditions = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]
    return pod(name, status={"phase": "Pending", "conditions": conditions, "containerStatuses": [container]})


def ready(name: str) -> dict[str, Any]:
    return pod(name, status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})


def test_a_missing_secret_and_no_free_gpu_are_named_with_the_pods_they_hold() -> None:
    pods = [
        waiting("w-1", "CreateContainerConfigError", 'secret "hf-token-secret" not found'),
        unschedulable("w-2"),
        unschedulable("w-3"),
        ready("w-4"),
    ]
    held = causes.collect(pods)
    assert [(h.cause.message, h.pods) for h in held] == [
        (
            "0/9 nodes are available: 1 node(s) had untolerated taint(s), 8 Insufficient nvidia.com/gpu",
            ("w-2", "w-3"),
        ),
        ('secret "hf-token-secret" not found', ("w-1",)),
    ]
    assert causes.describe(held) == (
        "waiting for: 0/9 nodes are available: 1 node(s) had untolerated taint(s), 8 Insufficient "
        'nvidia.com/gpu (2 pods); secret "hf-token-secret" not found (1 pod)'
    )
    assert causes.summary(held) == (
        "0/9 nodes are available: 1 node(s) had untolerated taint(s), 8 Insufficient nvidia.com/gpu; "
        'secret "hf-token-secret" not found'
    )


def test_image_pull_and_crash_loop_read_the_same_on_every_retry() -> None:
    pulling = waiting("a", "ErrImagePull", "rpc error: pull access denied")
    backing_off = waiting("a", "ImagePullBackOff", 'Back-off pulling image "nvcr.io/x:1"')
    assert (
        causes.of_pod(pulling)
        == causes.of_pod(backing_off)
        == causes.Cause("ImagePullBackOff", 'cannot pull image "nvcr.io/x:1"')
    )
    crashing = waiting(
        "b",
        "CrashLoopBackOff",
        "back-off 5m0s restarting failed container=main pod=b",
        restartCount=7,
        lastState={"terminated": {"exitCode": 1}},
    )
    assert causes.of_pod(crashing) == causes.Cause(
        "CrashLoopBackOff", 'container "main" keeps crashing (last exit code 1)'
    )


def test_starting_ready_finished_and_terminating_pods_are_not_held() -> None:
    deleting = unschedulable("d")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    for quiet in (
        waiting("c", "ContainerCreating"),
        ready("r"),
        pod("s", status={"phase": "Succeeded"}),
        deleting,
        pod("new"),
    ):
        assert causes.of_pod(quiet) is None
    assert causes.collect([ready("r")]) == ()
    assert causes.summary(()) is None and causes.describe(()) == ""


def test_an_unbound_claim_names_the_missing_storage_class() -> None:
    message = "0/9 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: …"
    held = unschedulable(
        "p", message, volumes=[{"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}}]
    )
    claim = {
        "metadata": {"name": "cache"},
        "spec": {"storageClassName": "fast"},
        "status": {"phase": "Pending"},
    }
    found = causes.of_pod(held, claims={"cache": claim}.get, storage_classes=lambda name: name == "standard")
    assert found == causes.Cause(
        "ClaimUnbound", 'persistentvolumeclaim "cache" is not bound: storageclass "fast" not found'
    )
    # Without claims to look at, the scheduler's words.
    assert causes.of_pod(held) == causes.Cause(
        "Unschedulable", "0/9 nodes are available: pod has unbound immediate PersistentVolumeClaims"
    )


def podgroup(name: str, phase: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"minMember": 6, "minResources": {"amd.com/gpu": "100", "cpu": "6"}},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Unschedulable", "status": "True", "reason": reason, "message": message}],
        },
    }


def test_a_gang_that_cannot_be_admitted_is_one_cause_with_the_resource_it_needs() -> None:
    group = podgroup("mi-0", "Pending", "NotEnoughResources", "resource in cluster is overused")
    members = [
        unschedulable(
            f"mi-0-{i}", "pod group is not ready", annotations={causes.GROUP_NAME_ANNOTATION: "mi-0"}
        )
        for i in range(3)
    ]
    held = causes.collect(members, podgroups=[group])
    assert len(held) == 1
    assert (
        held[0].cause.message
        == "PodGroup mi-0: resource in cluster is overused (the gang needs amd.com/gpu 100)"
    )
    assert held[0].pods == ("mi-0-0", "mi-0-1", "mi-0-2")
    # A gang whose pods are still being created, or one that formed, holds nothing.
    assert causes.of_podgroup(podgroup("mi-0", "Pending", "NotEnoughTasks", "valid: 3, min: 6")) is None
    assert causes.of_podgroup(podgroup("mi-0", "Running", "NotEnoughResources", "overused")) is None


def test_a_gang_members_verdict_waits_for_its_podgroup_to_give_it() -> None:
    """Volcano writes a gang's verdict on each member and on its PodGroup in separate writes: a member
    seen first must not name the gang's cause in its own words (a passing "pod group is not ready"
    and a Warning Event for it), only the PodGroup's condition does."""
    members = [
        unschedulable(
            f"mi-0-{i}",
            "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable",
            annotations={causes.GROUP_NAME_ANNOTATION: "mi-0"},
        )
        for i in range(3)
    ]
    undecided = {"metadata": {"name": "mi-0"}, "spec": {"minMember": 3}, "status": {"phase": "Pending"}}
    assert causes.collect(members, podgroups=[undecided]) == ()
    group = podgroup("mi-0", "Pending", "NotEnoughResources", "3/3 tasks in gang unschedulable")
    held = causes.collect(members, podgroups=[group])
    assert [h.cause.message.split(":")[0] for h in held] == ["PodGroup mi-0"]
    # A member's own scheduler message that is not the gang's verdict is still its cause.
    alone = unschedulable("mi-1-0", annotations={causes.GROUP_NAME_ANNOTATION: "mi-1"})
    assert [h.pods for h in causes.collect([alone])] == [("mi-1-0",)]


def test_only_causes_not_named_before_get_an_event() -> None:
    held = causes.collect(
        [waiting("a", "CreateContainerConfigError", 'secret "x" not found'), unschedulable("b")]
    )
    before = causes.summary(held[:1])
    assert [h.cause for h in causes.new_causes(before, held)] == [held[1].cause]
    assert causes.new_causes(causes.summary(held), held) == []


_POD_KINDS = st.sampled_from(
    [
        ready,
        unschedulable,
        lambda n: waiting(n, "CreateContainerConfigError", 'configmap "c" not found'),
        lambda n: waiting(n, "ImagePullBackOff"),
        lambda n: waiting(n, "ContainerCreating"),
    ]
)


@given(st.lists(_POD_KINDS, max_size=12), st.randoms(use_true_random=False))
def test_the_summary_does_not_depend_on_the_order_pods_are_seen_in(kinds: list[Any], rnd: Any) -> None:
    pods = [make(f"p-{i}") for i, make in enumerate(kinds)]
    shuffled = list(pods)
    rnd.shuffle(shuffled)
    held = causes.collect(pods)
    assert held == causes.collect(shuffled)
    # Every held pod is counted once, under its own cause.
    assert sorted(n for h in held for n in h.pods) == sorted(
        p["metadata"]["name"] for p in pods if causes.of_pod(p) is not None
    )
    assert "; " not in "".join(h.cause.message for h in held)

"""When the twin's Kueue lets go of a pod group's members (sim/agents/kueue_finalizers.py), as Kueue v0.17's
pod controller does: a deleted member only once its replacement is there, never for a group deleted
whole, every member when the group finishes or its Workload goes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.sim.agents import kueue_finalizers as fin

Obj = dict[str, Any]


def pod(name: str, *, phase: str = "Running", deleting: bool = False, bound: bool = True, **ann: str) -> Obj:
    meta: Obj = {
        "name": name,
        "finalizers": [fin.FINALIZER],
        "annotations": {fin.TOTAL_COUNT_ANNOTATION: "2", **{k.replace("_", "-"): v for k, v in ann.items()}},
    }
    if deleting:
        meta["deletionTimestamp"] = f"2026-01-01T00:00:{len(name):02d}Z"
    return {"metadata": meta, "spec": {"nodeName": "n1"} if bound else {}, "status": {"phase": phase}}


WORKLOAD: Obj = {"metadata": {"name": "g"}, "spec": {"podSets": [{"name": "r", "count": 2}]}}


def verdict(pods: list[Obj], workload: Obj | None = WORKLOAD) -> fin.GroupVerdict:
    return fin.group_verdict(pods, workload, lambda _p: "r")


def test_a_deleted_member_waits_for_its_replacement() -> None:
    old = pod("a", phase="Failed", deleting=True)
    assert verdict([old, pod("b")]).release == ()
    assert verdict([old, pod("b"), pod("a2")]).release == ("a",)


def test_a_group_deleted_whole_is_held_for_ever() -> None:
    gone = [pod("a", phase="Failed", deleting=True), pod("b", phase="Failed", deleting=True)]
    assert verdict(gone) == fin.GroupVerdict()
    serving = [
        pod(n, phase="Failed", deleting=True, **{"kueue.x-k8s.io/pod-group-serving": "true"}) for n in "ab"
    ]
    assert verdict(serving) == fin.GroupVerdict()


def test_an_unretriable_group_finishes_once_nothing_runs() -> None:
    flag = {"kueue.x-k8s.io/retriable-in-group": "false"}
    running = [pod("a", phase="Failed", deleting=True, **flag), pod("b")]
    assert not verdict(running).finished
    ended = [pod("a", phase="Failed", deleting=True, **flag), pod("b", phase="Failed")]
    assert verdict(ended) == fin.GroupVerdict(release=("a", "b"), finished=True)


def test_a_serving_group_never_finishes() -> None:
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    done = [pod("a", phase="Succeeded", **serving), pod("b", phase="Succeeded", **serving)]
    assert not fin.finished(done)
    assert fin.finished([pod("a", phase="Succeeded"), pod("b", phase="Succeeded")])


def test_a_deleted_workload_releases_and_deletes_the_rest() -> None:
    workload = {**WORKLOAD, "metadata": {"name": "g", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    got = verdict([pod("a", deleting=True), pod("b")], workload)
    assert got == fin.GroupVerdict(release=("a", "b"), delete=("b",))


def test_a_member_deleted_before_binding_cannot_run() -> None:
    assert not fin.runnable(pod("a", deleting=True, bound=False))
    assert fin.runnable(pod("a", deleting=True))


@given(
    running=st.integers(0, 4),
    failed=st.integers(0, 4),
    count=st.integers(1, 4),
)
def test_never_more_released_than_the_running_members_replace(running: int, failed: int, count: int) -> None:
    """Per role, the released members are at most what the running ones make up beyond the count, and
    a running member is never released."""
    pods = [pod(f"run{i}") for i in range(running)] + [
        pod(f"gone{i}", phase="Failed", deleting=True) for i in range(failed)
    ]
    workload = {"metadata": {"name": "g"}, "spec": {"podSets": [{"name": "r", "count": count}]}}
    released = verdict(pods, workload).release
    assert len(released) == max(0, min(failed, failed + running - count))
    assert all(name.startswith("gone") for name in released)

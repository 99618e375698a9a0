"""How our workloads go to the KaiwoConfig's Kueue queue and how we say why one waits (pure parts)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.api.config import KaiwoConfigSpec
from aiplane.controllers import queueing
from aiplane.controllers.dynamo.component_children import (
    ChildrenInput,
    desired_children,
    needs_update,
    updated,
)
from aiplane.controllers.dynamo.graph_decide import WantedDcd, dcd_view, not_ready_reason
from aiplane.controllers.modelinfer.queued import queue_view
from aiplane.controllers.platform import Platform
from tests.unit.dynamo_component.test_children import dcd, worker

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
KAIWO = KaiwoConfigSpec.model_validate({})
QUEUED = Platform(kaiwo=KAIWO, kueue_served=True, cluster_queues=frozenset({"kaiwo", "team"}))


def workload(name: str = "g", *conditions: tuple[str, str, str, str], queue: str = "kaiwo") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queueName": queue},
        "status": {
            "conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]
        },
    }


def test_the_queue_needs_kueue_and_a_kaiwoconfig_and_honours_the_opt_out() -> None:
    mi: Obj = {"metadata": {"name": "m"}}
    assert queueing.queue_for(QUEUED, mi) == "kaiwo"
    assert queueing.queue_for(Platform(kaiwo=KAIWO), mi) is None, "Kueue not served"
    assert queueing.queue_for(Platform(kueue_served=True), mi) is None, "no KaiwoConfig"
    no_queue = Platform(kaiwo=KAIWO, kueue_served=True)
    assert queueing.queue_for(no_queue, mi) is None, "its ClusterQueue is not there (nobody makes it)"
    skipped = {"metadata": {"annotations": {queueing.SKIP_QUEUE_ANNOTATION: "true"}}}
    assert queueing.queue_for(QUEUED, mi, skipped) is None, "the parent graph opted out"
    custom = replace(QUEUED, kaiwo=KaiwoConfigSpec.model_validate({"defaultClusterQueueName": "team"}))
    assert queueing.queue_for(custom, mi) == "team"


@given(st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=80))
def test_pod_group_names_fit_a_label_and_keep_the_revision(group: str) -> None:
    name = queueing.pod_group_name(f"a{group}-0", "bcdfghjklm")
    assert len(name) <= 63 and name.endswith("-bcdfghjklm")


def test_a_queued_pod_carries_the_group_its_size_and_that_it_serves() -> None:
    pod = queueing.queue_pod({"metadata": {"labels": {"app": "x"}}}, "kaiwo", "mi-0-rev", 6)
    assert pod["metadata"]["labels"] == {
        "app": "x",
        "kueue.x-k8s.io/queue-name": "kaiwo",
        "kueue.x-k8s.io/pod-group-name": "mi-0-rev",
    }
    assert pod["metadata"]["annotations"] == {
        "kueue.x-k8s.io/pod-group-total-count": "6",
        "kueue.x-k8s.io/pod-group-serving": "true",
    }
    assert queueing.sibling_queue([pod]) == ("kaiwo", True)
    assert queueing.sibling_queue([{"metadata": {"labels": {}}}]) == (None, True)
    assert queueing.sibling_queue([]) == (None, False)


def test_kueues_words_are_what_we_report() -> None:
    message = "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in flavor f, 8 more needed"
    wait = queueing.quota_wait(workload("g", ("QuotaReserved", "False", "Pending", message)))
    assert wait == queueing.QuotaWait("g", "kaiwo", "Pending", message)
    assert wait.describe("group g") == f"group g waits in Kueue LocalQueue kaiwo (Workload g): {message}"
    admitted = workload(
        "g", ("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")
    )
    assert queueing.quota_wait(admitted) is None and not queueing.undecided(admitted)
    assert queueing.quota_wait(None) is None and queueing.undecided(None)
    assert queueing.undecided(workload("g"))


def test_the_modelinfer_condition_follows_kueue() -> None:
    wait = queueing.QuotaWait("g", "kaiwo", "Pending", "no room")
    waiting = queueing.quota_condition([], [("group g", wait)], queued=True, generation=2, now=NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in waiting] == [
        ("QuotaReserved", "False", "QuotaPending")
    ]
    assert "no room" in waiting[0]["message"]
    unknown = queueing.quota_condition(
        waiting, [], queued=True, undecided_parts=["group g"], generation=2, now=NOW
    )
    assert (unknown[0]["status"], unknown[0]["reason"]) == ("Unknown", "Queued")
    admitted = queueing.quota_condition(unknown, [], queued=True, generation=2, now=NOW)
    assert (admitted[0]["status"], admitted[0]["reason"]) == ("True", "Admitted")
    assert queueing.quota_condition(admitted, [], queued=False, generation=2, now=NOW) == []


class Workloads:
    """What ``queue_view`` reads of an informer."""

    def __init__(self, *items: Obj) -> None:
        self.items = {f"ns/{w['metadata']['name']}": w for w in items}

    def get(self, key: str) -> Obj | None:
        return self.items.get(key)


def test_a_modelinfers_groups_in_kueue() -> None:
    def pod(group: str | None) -> Obj:
        labels = {queueing.POD_GROUP_LABEL: group} if group else {}
        return {"metadata": {"namespace": "ns", "labels": labels}}

    pending = workload("mi-1-r", ("QuotaReserved", "False", "Pending", "no room"))
    view = queue_view([pod("mi-0-r"), pod("mi-1-r"), pod("mi-2-r")], Workloads(pending))  # type: ignore[arg-type]
    assert view.queued and [w.workload for _, w in view.waits] == ["mi-1-r"]
    assert view.undecided == ("group mi-0-r", "group mi-2-r")
    assert not queue_view([pod(None)], Workloads()).queued  # type: ignore[arg-type]


def test_a_component_is_queued_at_creation_and_keeps_its_queue_after() -> None:
    single = desired_children(ChildrenInput(worker(), queue="kaiwo"))
    (deployment,) = [c for c in single.children if c["kind"] == "Deployment"]
    assert deployment["metadata"]["labels"][queueing.QUEUE_LABEL] == "kaiwo"
    multi = desired_children(ChildrenInput(worker(nodes=2), queue="kaiwo"))
    assert all(
        c["metadata"]["labels"][queueing.QUEUE_LABEL] == "kaiwo"
        for c in multi.children
        if c["kind"] == "LeaderWorkerSet"
    )
    unqueued = desired_children(ChildrenInput(worker()))
    (live,) = [c for c in unqueued.children if c["kind"] == "Deployment"]
    # The queue label alone is no reason to update, and an update never adds or drops it (Kueue refuses
    # a queue change on a workload with ready pods).
    assert not needs_update(live, deployment)
    assert queueing.QUEUE_LABEL not in updated(live, deployment)["metadata"]["labels"]
    assert updated(deployment, live)["metadata"]["labels"][queueing.QUEUE_LABEL] == "kaiwo"
    frontend = desired_children(ChildrenInput(dcd(), queue="kaiwo"))
    assert all(
        queueing.QUEUE_LABEL not in c["metadata"].get("labels", {})
        for c in frontend.children
        if c["kind"] not in ("Deployment", "LeaderWorkerSet")
    )


def test_a_graph_repeats_why_its_component_waits_for_kueue() -> None:
    component = {
        "metadata": {"name": "g-decode", "generation": 1, "uid": "u", "ownerReferences": []},
        "status": {
            "conditions": [
                {
                    "type": "Available",
                    "status": "False",
                    "reason": "QuotaPending",
                    "message": "pod p waits in Kueue LocalQueue kaiwo (Workload w): no room",
                    "observedGeneration": 1,
                }
            ]
        },
    }
    view = replace(dcd_view(component, ""), controlled=True)  # owned by the graph
    assert not_ready_reason(WantedDcd("g-decode", ""), view) == (
        "QuotaPending: pod p waits in Kueue LocalQueue kaiwo (Workload w): no room"
    )


def test_a_pools_lasting_taints_go_to_its_flavor() -> None:
    from aiplane.controllers.kaiwo.kueue import pool_taints
    from aiplane.controllers.kaiwo.pools import NodeView

    def node(*taints: dict[str, str]) -> NodeView:
        return NodeView("n", {}, {}, {}, taints=taints)

    control = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    passing = [
        {"key": "amd-dcm", "value": "up", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
    ]
    assert pool_taints([node(control, *passing), node(control)]) == [control]
    assert pool_taints([node(control), node()]) == [], "only what every node of the pool carries"
    assert pool_taints([node({"key": "x", "effect": "PreferNoSchedule"})]) == []

"""A drain held by a PodDisruptionBudget names the budget and the workload, once, without churn."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from aiplane.apimachinery.conditions import get_condition
from aiplane.controllers.partitioning.node_actions import apply_node_actions
from aiplane.controllers.partitioning.node_decide import decide, observe
from aiplane.controllers.partitioning.node_run import Decision
from aiplane.controllers.partitioning.views import BlockedEviction
from tests.unit.partitioning.test_node_decide import (
    DEVICE_PLUGIN,
    NOW,
    applied,
    make_node,
    make_np,
    make_profile,
    pod,
)


def modelinfer_pod(name: str) -> dict[str, Any]:
    p = pod(name, owner_kind="Pod")
    p["metadata"]["labels"] = {"modelinfer.volcano.sh/name": "llama-70b-pd"}
    return p


PREFILL = modelinfer_pod("llama-70b-pd-0-prefill-0")
DECODE = modelinfer_pod("llama-70b-pd-0-decode-0")
WEB = pod("web-abc")
WEB["metadata"]["ownerReferences"][0]["controller"] = True  # ReplicaSet web-abc-owner controls it
REFUSED = "needs 2 healthy pods and has 2"


def refusal(p: dict[str, Any], budget: str = "llama-pdb", detail: str = REFUSED) -> BlockedEviction:
    md = p["metadata"]
    return BlockedEviction(md["namespace"], md["name"], md["uid"], budget, detail)


def step(
    np: dict[str, Any],
    node: dict[str, Any],
    pods: list[dict[str, Any]],
    blocked: list[BlockedEviction],
    at: int,
) -> Decision:
    seen = observe(np, node, make_profile(), pods, (), blocked)
    return decide(seen, NOW + timedelta(seconds=at))


def draining_np_and_node() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    pods = [PREFILL, DECODE, WEB, DEVICE_PLUGIN]
    first = step(make_np(), make_node(), pods, [], 0)
    return applied(make_np(), first), apply_node_actions(make_node(), first.node_actions), pods


def drain_condition(d: Decision) -> dict[str, Any]:
    assert d.status is not None
    c = get_condition(d.status["conditions"], "DrainCompleted")
    assert c is not None
    return dict(c)


def test_a_refused_eviction_names_the_budget_and_workload_once() -> None:
    np, node, pods = draining_np_and_node()
    blocked = [refusal(PREFILL), refusal(DECODE)]
    d = step(np, node, pods, blocked, 5)
    c = drain_condition(d)
    assert (c["status"], c["reason"]) == ("False", "EvictionBlocked")
    assert c["message"] == (
        "waiting for 3 pods to be evicted: PodDisruptionBudget team-a/llama-pdb "
        "(ModelInfer team-a/llama-70b-pd) needs 2 healthy pods and has 2"
    )
    assert c["lastTransitionTime"] == drain_condition_start(np)  # the drain timeout keeps running
    assert d.status is not None and d.status["blockedBy"] == "team-a/llama-pdb"
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "EvictionBlocked")]
    assert (
        "team-a/llama-pdb" in d.events[0].message and "ModelInfer team-a/llama-70b-pd" in d.events[0].message
    )
    assert {e.name for e in d.evictions} == {
        PREFILL["metadata"]["name"],
        DECODE["metadata"]["name"],
        "web-abc",
    }

    # Retries with the same answer: zero writes, no new Event, evictions asked for again.
    again = step(applied(np, d), node, pods, blocked, 10)
    assert again.status is None and again.events == ()
    assert len(again.evictions) == 3 and again.requeue_after == 5.0

    # A second budget appears: one Event for it alone, both named in the column.
    web_blocked = [*blocked, refusal(WEB, "web-pdb", "needs 1 healthy pods and has 1")]
    more = step(applied(np, d), node, pods, web_blocked, 15)
    assert more.status is not None and more.status["blockedBy"] == "team-a/llama-pdb, team-a/web-pdb"
    assert [e.message for e in more.events] == [
        "Draining node mi300x-0: eviction of team-a/web-abc refused by PodDisruptionBudget team-a/web-pdb "
        "(ReplicaSet team-a/web-abc-owner) needs 1 healthy pods and has 1"
    ]


def drain_condition_start(np: dict[str, Any]) -> Any:
    c = get_condition(np["status"]["conditions"], "DrainCompleted")
    assert c is not None
    return c["lastTransitionTime"]


def test_the_block_clears_once_the_budget_lets_go() -> None:
    np, node, pods = draining_np_and_node()
    blocked_np = applied(np, step(np, node, pods, [refusal(PREFILL)], 5))
    assert blocked_np["status"]["blockedBy"] == "team-a/llama-pdb"
    # The executor forgot the refusal (the eviction went through): back to plain progress.
    d = step(blocked_np, node, pods, [], 10)
    assert d.status is not None and "blockedBy" not in d.status
    assert drain_condition(d)["reason"] == "DrainInProgress"
    assert d.events == ()


def test_a_refusal_for_a_recreated_pod_or_a_terminating_one_is_not_reported() -> None:
    np, node, _ = draining_np_and_node()
    stale = BlockedEviction("team-a", "web-abc", "uid-of-an-older-pod", "web-pdb", REFUSED)
    terminating = copy.deepcopy(PREFILL)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-10T12:00:00Z"
    d = step(np, node, [terminating, DECODE, WEB, DEVICE_PLUGIN], [stale, refusal(terminating)], 5)
    assert d.status is None or "blockedBy" not in d.status
    assert d.events == ()

"""The chaos checkers catch what they claim to (a checker that cannot fail would make the suite pass
whatever the operator does): each violation is played into a bare store, as committed changes."""

from __future__ import annotations

from typing import Any

from aiplane.sim.apiserver.store import Store
from tests.chaos.invariants import (
    NODE_KEY,
    NP_KEY,
    PLAN_KEY,
    PROFILE_KEY,
    PartitioningInvariants,
    operator_writes,
)

PLAN = "roll"


def _plan(max_parallel: int = 2, max_unavailable: int = 2, phase: str = "Completed") -> dict[str, Any]:
    return {
        "metadata": {"name": PLAN, "generation": 1},
        "spec": {"rollout": {"maxParallel": max_parallel, "maxUnavailable": max_unavailable}},
        "status": {"phase": phase, "observedGeneration": 1},
    }


def _np(node: str, phase: str, desired: str = "h1", generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{PLAN}-{node}",
            "generation": generation,
            "labels": {"infrastructure.silogen.ai/plan": PLAN},
        },
        "spec": {"nodeName": node, "desiredHash": desired, "profileRef": {"name": "cpx"}},
        "status": {"phase": phase, **({"currentHash": desired} if phase == "Succeeded" else {})},
    }


def _node(name: str, gpus: str, *, cordoned: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": cordoned},
        "status": {"allocatable": {"amd.com/gpu": gpus}},
    }


def _checked(store: Store) -> PartitioningInvariants:
    checker = PartitioningInvariants(plan=PLAN, store=store)
    store.subscribe(checker)
    store.put(PLAN_KEY, _plan())
    store.put(
        PROFILE_KEY, {"metadata": {"name": "cpx"}, "spec": {"expectedResources": {"amd.com/gpu": "64"}}}
    )
    return checker


def test_a_clean_rollout_has_no_violation_and_counts_its_checks() -> None:
    store = Store()
    checker = _checked(store)
    for node in ("a", "b"):
        store.put(NODE_KEY, _node(node, "64"))
        for phase in ("Pending", "Draining", "Applying", "Verifying", "Succeeded"):
            store.put(NP_KEY, _np(node, phase))
    assert checker.violations == []
    assert checker.checks == 10
    assert checker.end_state(store) == []


def test_limits_second_drain_failure_and_end_state_are_caught() -> None:
    store = Store()
    checker = _checked(store)
    for node in ("a", "b", "c"):
        store.put(NP_KEY, _np(node, "Draining"))  # the third is over maxParallel 2
    store.put(NP_KEY, _np("a", "Succeeded"))
    store.put(NP_KEY, _np("a", "Draining"))  # again, same desiredHash
    store.put(NP_KEY, _np("b", "Failed"))
    text = "\n".join(checker.violations)
    assert "3 nodes in progress > maxParallel 2" in text
    assert "roll-a drained again after Succeeded" in text
    assert "roll-b Failed on a transient fault" in text
    store.put(NODE_KEY, _node("a", "8", cordoned=True))
    ended = "\n".join(checker.end_state(store))
    assert "roll-b ended Failed" in ended and "left cordoned or tainted: a" in ended


def test_a_new_desired_state_may_drain_a_node_again() -> None:
    store = Store()
    checker = _checked(store)
    store.put(NP_KEY, _np("a", "Succeeded", "h1"))
    stale = _np("a", "Succeeded", "h2", 2)  # the new spec, before the status speaks of it
    stale["status"]["currentHash"] = "h1"
    store.put(NP_KEY, stale)
    store.put(NP_KEY, _np("a", "Draining", "h2", 2))
    store.put(NP_KEY, _np("a", "Succeeded", "h2", 2))
    store.put(NP_KEY, _np("a", "Draining", "h1", 3))  # and back: the same hash, a new generation
    assert checker.violations == []


def test_writes_at_rest_count_the_operator_only_and_not_its_lease() -> None:
    class Record:
        def __init__(self, agent: str, verb: str, resource: str) -> None:
            import datetime

            self.user_agent, self.verb, self.resource, self.name, self.code = agent, verb, resource, "x", 200
            self.time = datetime.datetime.now(datetime.UTC)

    records = [
        Record("aiplane/0.1", "patch", "nodes"),
        Record("aiplane/0.1", "update", "leases"),
        Record("aiplane/0.1", "get", "nodes"),
        Record("kubectl/1.37", "patch", "nodes"),
    ]
    assert operator_writes(records) == ["patch nodes/x -> 200"]

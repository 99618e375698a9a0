"""The DGD controller's whole decision as a pure function: what it writes, in upstream's order, and
the status it wants once those writes are done (no client, no cache)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.dynamo.graph_decide import (
    FINALIZER,
    LWS_RECHECK_SECONDS,
    GraphObserved,
    decide,
)
from aiplane.controllers.dynamo.graph_sync import DcdVerb

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UID = "dgd-uid"


def dgd(services: dict[str, dict[str, Any]], *, finalized: bool = True, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "g", "namespace": "ns", "uid": UID, "generation": 2}
    if finalized:
        metadata["finalizers"] = [FINALIZER]
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata,
        "spec": {"services": services, **spec},
    }


def observed(graph: dict[str, Any], dcds: dict[str, Any] | None = None, **kw: Any) -> GraphObserved:
    fields: dict[str, Any] = {
        "pvcs": frozenset(),
        "planner_account": False,
        "lws_served": None,
        "default_storage_class": None,
    }
    fields.update(kw)
    return GraphObserved(dgd=graph, dcds=dcds or {}, **fields)


def ready(condition_status: dict[str, Any] | None) -> tuple[str, str, str]:
    assert condition_status is not None
    cond = next(c for c in condition_status["conditions"] if c["type"] == "Ready")
    return condition_status["state"], cond["reason"], cond["message"]


def as_created(body: dict[str, Any], available: bool) -> dict[str, Any]:
    obj = copy.deepcopy(body)
    obj["metadata"].update(generation=1, resourceVersion="5", uid="dcd-" + obj["metadata"]["name"])
    if available:
        obj["status"] = {
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "ok",
                    "message": "",
                    "observedGeneration": 1,
                }
            ]
        }
    return obj


def test_a_new_graph_gets_its_finalizer_and_dcds_and_is_pending_reconciling() -> None:
    decision = decide(
        observed(dgd({"Frontend": {"componentType": "frontend", "replicas": 1}}, finalized=False)), NOW
    )
    assert decision.add_finalizer and not decision.deleting
    assert [(c.write.verb, c.live) for c in decision.dcds] == [(DcdVerb.CREATE, None)]
    state, reason, message = ready(dict(decision.status or {}))
    assert (state, reason) == ("pending", "some_resources_are_not_ready")
    assert "g-frontend: Reconciling" in message  # judged as the create leaves it, not "not created yet"


def test_a_deleted_graph_only_drops_its_finalizer() -> None:
    graph = dgd({"Frontend": {"componentType": "frontend"}})
    graph["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    decision = decide(observed(graph), NOW)
    assert decision.deleting and decision.remove_finalizer
    assert (decision.dcds, decision.pvcs, decision.status) == ((), (), None)


def test_an_invalid_graph_creates_nothing_and_says_why() -> None:
    decision = decide(observed(dgd({})), NOW)
    assert (decision.dcds, decision.pvcs, decision.planner_account) == ((), (), None)
    state, reason, _ = ready(dict(decision.status or {}))
    assert (state, reason) == ("failed", "invalid_spec")


def test_a_multinode_graph_without_lws_is_refused_and_looked_at_again() -> None:
    graph = dgd({"W": {"componentType": "worker", "multinode": {"nodeCount": 2}}})
    decision = decide(observed(graph, lws_served=False), NOW)
    assert decision.dcds == () and decision.requeue_after == LWS_RECHECK_SECONDS
    assert ready(dict(decision.status or {}))[0] == "failed"


def test_a_missing_claim_stops_before_any_dcd() -> None:
    graph = dgd({"F": {"componentType": "frontend"}}, pvcs=[{"name": "models"}])
    decision = decide(observed(graph), NOW)
    assert decision.dcds == ()
    state, reason, message = ready(dict(decision.status or {}))
    assert (state, reason) == ("failed", "failed_to_reconcile_the_resources") and "models" in message
    assert decide(observed(graph, pvcs=frozenset({"models"})), NOW).dcds  # present: it goes on


@given(st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, unique=True), st.booleans())
def test_a_converged_graph_writes_nothing(keys: list[str], available: bool) -> None:
    """Invariant: once the DCDs are as the decision wrote them and its status is stored, deciding
    again asks for no write at all (zero writes at rest)."""
    graph = dgd({k: {"componentType": "worker", "replicas": 1} for k in keys})
    first = decide(observed(graph), NOW)
    dcds = {c.write.body["metadata"]["name"]: as_created(c.write.body, available) for c in first.dcds}
    settled = decide(observed(graph, dcds), NOW)
    graph = {**graph, "status": dict(settled.status or {})}
    again = decide(observed(graph, dcds), NOW)
    assert (again.dcds, again.stale, again.pvcs, again.add_finalizer) == ((), (), (), False)
    assert again.status == graph["status"]
    assert (ready(dict(again.status or {}))[0] == "successful") == available


def test_an_updated_dcd_counts_as_not_ready_until_its_new_generation_is_observed() -> None:
    graph = dgd({"W": {"componentType": "worker", "replicas": 1}})
    (created,) = decide(observed(graph), NOW).dcds
    live = as_created(created.write.body, available=True)
    changed = dgd({"W": {"componentType": "worker", "replicas": 1, "envs": [{"name": "A", "value": "2"}]}})
    decision = decide(observed(changed, {"g-w": live}), NOW)
    assert [c.write.verb for c in decision.dcds] == [DcdVerb.UPDATE]
    _, _, message = ready(dict(decision.status or {}))
    assert "g-w: generation 2 not yet observed by its controller" in message

"""A multinode DCD's Coscheduling PodGroup that its controller left Failed is remade once the
LeaderWorkerSet group stands whole again (``component_decide``)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery import objects
from aiplane.controllers.dynamo.component_children import ChildrenInput
from aiplane.controllers.dynamo.component_decide import ChildOp, ComponentObserved, ReplicaPods, decide
from aiplane.controllers.gang import COSCHEDULING, VOLCANO, GangBackend
from tests.unit.dynamo_component.test_decide import NOW, SERVED, server

Obj = dict[str, Any]
DCD: Obj = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoComponentDeployment",
    "metadata": {"name": "dec", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "componentType": "worker",
        "replicas": 1,
        "multinode": {"nodeCount": 2},
        "extraPodSpec": {"mainContainer": {"image": "img:1", "args": ["python3 -m dynamo.vllm"]}},
        "resources": {"limits": {"gpu": "8"}},
    },
}


def _pod(phase: str) -> Obj:
    return {
        "metadata": {"name": "p", "namespace": "llm"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": phase},
    }


def _built(gang: GangBackend, phase: str, pods: tuple[str, ...]) -> ComponentObserved:
    """The DCD with its children written, its PodGroup ``dec-0`` at ``phase`` and ``pods`` in its group."""
    empty = ComponentObserved(DCD, ChildrenInput(DCD, gang=gang), {kind: {} for kind in SERVED})
    written = server(empty, decide(empty, NOW))
    children = copy.deepcopy(dict(written.children))
    podgroup = children["PodGroup"]["dec-0"]
    podgroup["metadata"]["uid"] = "pg-0"
    podgroup["status"] = {"phase": phase}
    replica = ReplicaPods({"dec-0": tuple(_pod(p) for p in pods)}, frozenset())
    return ComponentObserved(
        written.dcd, ChildrenInput(written.dcd, gang=gang), children, replica_pods=replica
    )


def test_a_failed_podgroup_of_a_rebuilt_group_is_deleted_then_created_anew() -> None:
    seen = _built(COSCHEDULING, "Failed", ("Running", "Running"))
    first = decide(seen, NOW)
    assert [(d["kind"], objects.name(d)) for d in first.deletes] == [("PodGroup", "dec-0")]
    assert all(objects.name(w.body) != "dec-0" or w.body["kind"] != "PodGroup" for w in first.writes)
    again = decide(server(seen, first), NOW)
    created = [w for w in again.writes if w.op is ChildOp.CREATE]
    assert [(w.body["kind"], objects.name(w.body)) for w in created] == [("PodGroup", "dec-0")]
    assert "status" not in created[0].body


@given(
    phase=st.sampled_from(["", "Pending", "Scheduling", "Running", "Failed", "Finished"]),
    pods=st.lists(st.sampled_from(["Pending", "Running", "Failed", "Succeeded"]), max_size=3),
    volcano=st.booleans(),
)
def test_only_a_final_phase_of_a_whole_unfailed_group_is_remade(
    phase: str, pods: list[str], volcano: bool
) -> None:
    """Remade exactly when the phase is final for the gang scheduler and every member is back, none
    failed (while a failed member remains, a new PodGroup would be Failed again at once)."""
    gang = VOLCANO if volcano else COSCHEDULING
    decision = decide(_built(gang, phase, tuple(pods)), NOW)
    remade = [d for d in decision.deletes if d["kind"] == "PodGroup"]
    expected = not volcano and phase in ("Failed", "Finished") and len(pods) >= 2 and "Failed" not in pods
    assert bool(remade) == expected

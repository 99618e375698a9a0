"""A ModelInfer's PodGroup writes: a PodGroup stuck in a final phase follows its rebuilt group."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.gang import COSCHEDULING, VOLCANO, GangBackend
from aiplane.controllers.modelinfer.objects import build_podgroup
from aiplane.controllers.modelinfer.plan_types import CreateRoleReplica, GroupSummary, Plan
from aiplane.controllers.modelinfer.podgroups import PodGroupOp, podgroup_writes

TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}
ROLES = [
    {
        "name": "decode",
        "replicas": 1,
        "workerReplicas": 1,
        "entryTemplate": TEMPLATE,
        "workerTemplate": TEMPLATE,
    }
]
MI = {
    "apiVersion": "workload.volcano.sh/v1alpha1",
    "kind": "ModelInfer",
    "metadata": {"name": "m", "namespace": "ns", "uid": "mi-uid"},
    "spec": {"replicas": 2, "template": {"roles": ROLES, "gangSchedule": {"minRoleReplicas": {"decode": 1}}}},
}


def _plan(rebuilding: tuple[int, ...]) -> Plan:
    groups = tuple(GroupSummary(g, "r1", "Running", True, 2, 2) for g in (0, 1))
    actions = tuple(CreateRoleReplica(g, "decode", 0, "r1", (0, 1), False) for g in rebuilding)
    return Plan(actions, None, groups)


def _live(gang: GangBackend, ordinal: int, phase: str) -> dict[str, Any]:
    body = build_podgroup(MI, ordinal, ROLES, gang)
    assert body is not None
    return {
        **body,
        "metadata": {**body["metadata"], "uid": f"pg-{ordinal}", "resourceVersion": "5"},
        "status": {"phase": phase},
    }


def test_a_failed_coscheduling_podgroup_is_made_anew_when_its_group_is_rebuilt() -> None:
    observed = [_live(COSCHEDULING, 0, "Failed"), _live(COSCHEDULING, 1, "Running")]
    writes = podgroup_writes(COSCHEDULING, MI, observed, _plan((0,)), lambda _: ROLES).writes
    assert [(w.op, (w.live or w.body or {})["metadata"]["name"]) for w in writes] == [
        (PodGroupOp.DELETE, "m-0"),
        (PodGroupOp.CREATE, "m-0"),
    ]
    assert writes[0].live is observed[0]
    assert "status" not in (writes[1].body or {})  # a new PodGroup: its controller starts it over


def test_a_failed_podgroup_whose_group_is_not_being_rebuilt_is_left_alone() -> None:
    observed = [_live(COSCHEDULING, 0, "Failed"), _live(COSCHEDULING, 1, "Running")]
    assert podgroup_writes(COSCHEDULING, MI, observed, _plan(()), lambda _: ROLES).writes == ()


@given(
    phases=st.tuples(*(st.sampled_from(["", "Pending", "Scheduling", "Running", "Failed", "Finished"]),) * 2),
    rebuilding=st.sets(st.sampled_from([0, 1])),
    volcano=st.booleans(),
)
def test_only_a_final_phase_of_a_rebuilt_group_is_rewritten(
    phases: tuple[str, str], rebuilding: set[int], volcano: bool
) -> None:
    """A PodGroup is deleted and created anew exactly when its gang scheduler's controller would never
    leave its phase and this pass creates pods for its group; a converged one sees no write."""
    gang = VOLCANO if volcano else COSCHEDULING
    observed = [_live(gang, g, phases[g]) for g in (0, 1)]
    writes = podgroup_writes(gang, MI, observed, _plan(tuple(sorted(rebuilding))), lambda _: ROLES).writes
    renewed = {
        f"m-{g}" for g in (0, 1) if g in rebuilding and not volcano and phases[g] in ("Failed", "Finished")
    }
    deleted = {(w.live or {})["metadata"]["name"] for w in writes if w.op is PodGroupOp.DELETE}
    created = {(w.body or {})["metadata"]["name"] for w in writes if w.op is PodGroupOp.CREATE}
    assert deleted == created == renewed
    assert all(w.op is not PodGroupOp.UPDATE for w in writes)

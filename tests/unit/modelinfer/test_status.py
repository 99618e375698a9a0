"""ModelInfer status (``status.compute_status``): counts, revisions, conditions and zero writes at
steady state."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aiplane.apimachinery.conditions import get_condition, status_changed
from aiplane.controllers.modelinfer.decide import GroupState, GroupSummary, plan
from aiplane.controllers.modelinfer.status import (
    AVAILABLE,
    PROGRESSING,
    UPDATE_IN_PROGRESS,
    compute_status,
    next_current_revision,
)
from tests.unit.modelinfer.test_decide import cluster, inp

T1 = "2026-01-10T12:00:00Z"
T2 = "2026-01-10T12:05:00Z"
T3 = "2026-01-10T12:09:00Z"
SELECTOR = (
    "modelinfer.volcano.sh/name=mi,modelinfer.volcano.sh/entry=true,modelinfer.volcano.sh/role-id=prefill-0"
)


def g(
    ordinal: int, revision: str = "r1", state: GroupState = "Running", *, outdated: bool = False
) -> GroupSummary:
    available = state == "Running"
    return GroupSummary(ordinal, revision, state, available, 4, 4 if available else 1, outdated)


def status(groups: list[GroupSummary], existing: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "generation": 3,
        "replicas": 3,
        "partition": 0,
        "update_revision": "r1",
        "current_revision": "r1",
        "label_selector": SELECTOR,
        "existing": existing,
        "now": T1,
    }
    args.update(kw)
    return compute_status(groups, **args)


def cond(st: dict[str, Any], type_: str) -> dict[str, Any]:
    c = get_condition(st["conditions"], type_)
    assert c is not None, type_
    return dict(c)


# --- counts and revisions --------------------------------------------------------------------------


def test_steady_state_status() -> None:
    st = status([g(0), g(1), g(2)])
    assert st == {
        "observedGeneration": 3,
        "replicas": 3,
        "currentReplicas": 3,
        "updatedReplicas": 3,
        "availableReplicas": 3,
        "labelSelector": SELECTOR,
        "currentRevision": "r1",
        "updateRevision": "r1",
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": T1,
                "reason": "AllGroupsReady",
                "message": "All infer groups are ready",
            },
            {
                "type": "Progressing",
                "status": "False",
                "observedGeneration": 3,
                "lastTransitionTime": T1,
                "reason": "NoGroupProgressing",
                "message": "No infer group is progressing",
            },
            {
                "type": "UpdateInProgress",
                "status": "False",
                "observedGeneration": 3,
                "lastTransitionTime": T1,
                "reason": "AllGroupsUpdated",
                "message": "All infer groups are on revision r1",
            },
        ],
    }


def test_counts_during_a_rollout() -> None:
    groups = [
        g(0, "r0", outdated=True),
        g(1, "r0", outdated=True),
        g(2, "r0", "Deleting", outdated=True),
        g(3, "r1", "Creating"),
    ]
    st = status(groups, current_revision="r0")
    assert (st["replicas"], st["currentReplicas"], st["updatedReplicas"], st["availableReplicas"]) == (
        4,
        3,
        1,
        2,
    )
    assert (st["currentRevision"], st["updateRevision"]) == ("r0", "r1")


def test_current_revision_advances_only_when_the_rollout_is_complete() -> None:
    def nxt(groups: list[GroupSummary], replicas: int = 2, current: str = "r0") -> str:
        return next_current_revision(
            groups, replicas=replicas, update_revision="r1", current_revision=current
        )

    assert nxt([g(0, "r0"), g(1)]) == "r0"  # not all updated (e.g. partition 1)
    assert nxt([g(0, "r1", "Creating"), g(1)]) == "r0"  # not all available
    assert nxt([g(0), g(1), g(2, "r1", "Deleting")]) == "r0"  # surge group still going
    assert nxt([g(0), g(1), g(2)]) == "r0"  # surge group still there
    assert nxt([g(0)]) == "r0"  # still scaling up
    assert nxt([g(0), g(1)]) == "r1"
    assert nxt([], replicas=0) == "r1"
    assert nxt([g(0, "r0")], current="") == "r1"  # a new ModelInfer starts on its update revision
    st = status([g(0), g(1), g(2)], current_revision="r0")
    assert (st["currentRevision"], st["currentReplicas"], st["updatedReplicas"]) == ("r1", 3, 3)


def test_partition_keeps_the_current_revision() -> None:
    groups = [g(0, "r0"), g(1, "r1"), g(2, "r1")]
    st = status(groups, partition=1, current_revision="r0")
    assert (st["currentRevision"], st["currentReplicas"], st["updatedReplicas"]) == ("r0", 1, 2)
    c = cond(st, UPDATE_IN_PROGRESS)
    assert (c["status"], c["reason"], c["message"]) == (
        "False",
        "AllGroupsUpdated",
        "All infer groups at or above partition 1 are on revision r1",
    )


# --- conditions ------------------------------------------------------------------------------------


def test_unavailable_groups_are_named_numerically() -> None:
    st = status([g(0), g(2, state="Recovering"), g(10, state="Creating")])
    c = cond(st, AVAILABLE)
    assert (c["status"], c["reason"]) == ("False", "GroupsNotReady")
    assert c["message"] == "1 of 3 infer groups are available; not available: 2 (Recovering), 10 (Creating)"
    p = cond(st, PROGRESSING)
    assert (p["status"], p["reason"]) == ("True", "GroupProgressing")
    assert p["message"] == "Some infer groups are progressing: 2 (Recovering), 10 (Creating)"


def test_available_counts_groups_not_names() -> None:
    # A surge group still starting does not make the ModelInfer unavailable.
    st = status([g(0), g(1), g(2), g(3, state="Creating")])
    assert cond(st, AVAILABLE)["status"] == "True"
    assert cond(st, PROGRESSING)["message"] == "Some infer groups are progressing: 3 (Creating)"
    # Missing groups do.
    st = status([g(0), g(1)])
    assert cond(st, AVAILABLE)["message"] == "2 of 3 infer groups are available"


def test_update_in_progress_counts_updated_and_outdated() -> None:
    st = status(
        [g(0, "r0", outdated=True), g(1, "r0", "Deleting", outdated=True), g(2)], current_revision="r0"
    )
    c = cond(st, UPDATE_IN_PROGRESS)
    assert (c["status"], c["reason"]) == ("True", "GroupsUpdating")
    assert c["message"] == "Updating infer groups to revision r1: 1 updated, 2 outdated"


def test_long_lists_are_capped() -> None:
    st = status([g(i, state="Creating") for i in range(25)], replicas=25)
    assert cond(st, PROGRESSING)["message"].endswith("19 (Creating) and 5 more")


def test_messages_stay_current_but_transition_times_move_only_on_flips() -> None:
    first = status([g(0), g(1, state="Creating"), g(2, state="Creating")], now=T1)
    second = status([g(0), g(1), g(2, state="Creating")], existing=first, now=T2)
    assert cond(second, PROGRESSING)["message"] == "Some infer groups are progressing: 2 (Creating)"
    assert cond(second, PROGRESSING)["lastTransitionTime"] == T1
    assert (
        cond(second, AVAILABLE)["message"] == "2 of 3 infer groups are available; not available: 2 (Creating)"
    )
    assert cond(second, AVAILABLE)["lastTransitionTime"] == T1
    third = status([g(0), g(1), g(2)], existing=second, now=T3)
    assert (cond(third, AVAILABLE)["status"], cond(third, AVAILABLE)["lastTransitionTime"]) == ("True", T3)
    assert (cond(third, PROGRESSING)["status"], cond(third, PROGRESSING)["lastTransitionTime"]) == (
        "False",
        T3,
    )
    assert cond(third, UPDATE_IN_PROGRESS)["lastTransitionTime"] == T1


def test_steady_state_is_byte_identical() -> None:
    pods, services = cluster([0, 1, 2])
    groups = list(plan(inp(pods, services)).groups)
    first = status(groups, now=T1)
    again = status(groups, existing=json.loads(json.dumps(first)), now=T3)
    assert again == first
    assert json.dumps(again) == json.dumps(first)
    assert not status_changed(first, again)


def test_generation_change_updates_observed_generation_everywhere() -> None:
    first = status([g(0), g(1), g(2)])
    st = status([g(0), g(1), g(2)], existing=first, generation=4, now=T2)
    assert st["observedGeneration"] == 4
    assert all(c["observedGeneration"] == 4 and c["lastTransitionTime"] == T1 for c in st["conditions"])


def test_foreign_fields_and_conditions_are_kept_and_the_misspelling_dropped() -> None:
    existing: dict[str, Any] = {
        "replicas": 7,
        "somethingNew": {"x": 1},
        "conditions": [
            {"type": "Progerssing", "status": "True", "reason": "GroupProgressing", "message": "old"},
            {"type": "example.com/Custom", "status": "True", "reason": "Mine", "message": "keep me"},
        ],
    }
    st = status([g(0), g(1), g(2)], existing=existing)
    assert st["replicas"] == 3
    assert st["somethingNew"] == {"x": 1}
    assert [c["type"] for c in st["conditions"]] == [
        "example.com/Custom",
        AVAILABLE,
        PROGRESSING,
        UPDATE_IN_PROGRESS,
    ]
    assert existing["conditions"][0]["type"] == "Progerssing"  # input untouched


def test_now_may_be_a_datetime_and_zero_replicas_is_available() -> None:
    st = status([], replicas=0, now=datetime(2026, 1, 10, 12, 0, 0, tzinfo=UTC))
    assert cond(st, AVAILABLE)["status"] == "True"
    assert cond(st, AVAILABLE)["lastTransitionTime"] == T1
    assert st["replicas"] == 0

"""Condition helpers follow ``apimachinery/pkg/api/meta/conditions.go`` without mutating anything."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.conditions import (
    format_time,
    get_condition,
    is_false,
    is_true,
    remove_condition,
    semantic_equal,
    set_condition,
    status_changed,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def ready(
    status: str = "True", reason: str = "Ready", message: str = "", gen: int | None = 1
) -> dict[str, Any]:
    c: dict[str, Any] = {"type": "Ready", "status": status}
    if gen:
        c["observedGeneration"] = gen
    c.update(lastTransitionTime=format_time(T0), reason=reason, message=message)
    return c


def test_format_time() -> None:
    assert format_time(T0) == "2024-05-01T12:00:00Z"
    assert (
        format_time(datetime(2024, 5, 1, 12, 0, 0, 999999)) == "2024-05-01T12:00:00Z"
    )  # naive = UTC, truncated
    assert (
        format_time(datetime(2024, 5, 1, 14, 0, 0, tzinfo=timezone(timedelta(hours=2))))
        == "2024-05-01T12:00:00Z"
    )


def test_new_condition_is_appended_with_now() -> None:
    existing = [
        {"type": "Available", "status": "True", "lastTransitionTime": "x", "reason": "A", "message": ""}
    ]
    before = copy.deepcopy(existing)
    out, changed = set_condition(
        existing, "Ready", "False", "Waiting", "pods pending", observed_generation=3, now=T0
    )
    assert changed
    assert existing == before  # input untouched
    assert [c["type"] for c in out] == ["Available", "Ready"]
    assert out[1] == {
        "type": "Ready",
        "status": "False",
        "observedGeneration": 3,
        "lastTransitionTime": "2024-05-01T12:00:00Z",
        "reason": "Waiting",
        "message": "pods pending",
    }
    out2, changed2 = set_condition(None, "Ready", "True", "Ok", "", observed_generation=None, now=T0)
    assert changed2 and "observedGeneration" not in out2[0]


def test_transition_time_moves_only_when_status_flips() -> None:
    conds = [ready()]
    same, changed = set_condition(conds, "Ready", "True", "Ready", "", observed_generation=1, now=T1)
    assert not changed
    assert same == conds

    # reason, message and observedGeneration update in place; the transition time stays
    out, changed = set_condition(
        conds, "Ready", "True", "StillReady", "all good", observed_generation=2, now=T1
    )
    assert changed
    assert out[0]["lastTransitionTime"] == format_time(T0)
    assert (out[0]["reason"], out[0]["message"], out[0]["observedGeneration"]) == (
        "StillReady",
        "all good",
        2,
    )

    flipped, changed = set_condition(conds, "Ready", "False", "Broken", "x", observed_generation=1, now=T1)
    assert changed
    assert flipped[0]["lastTransitionTime"] == format_time(T1)
    assert conds == [ready()]


def test_position_is_kept_and_other_conditions_shared() -> None:
    a = {"type": "A", "status": "True", "lastTransitionTime": "t", "reason": "R", "message": ""}
    b = {"type": "B", "status": "True", "lastTransitionTime": "t", "reason": "R", "message": ""}
    out, changed = set_condition(
        [a, ready(), b], "Ready", "Unknown", "Probing", "", observed_generation=1, now=T1
    )
    assert changed
    assert [c["type"] for c in out] == ["A", "Ready", "B"]
    assert out[0] is a and out[2] is b


def test_observed_generation_none_removes_it() -> None:
    out, changed = set_condition(
        [ready(gen=4)], "Ready", "True", "Ready", "", observed_generation=None, now=T1
    )
    assert changed and "observedGeneration" not in out[0]


def test_unknown_fields_of_an_existing_condition_are_kept() -> None:
    c = {**ready(), "extra": "kept"}
    out, changed = set_condition([c], "Ready", "True", "Ready", "", observed_generation=1, now=T1)
    assert not changed and out[0]["extra"] == "kept"


@pytest.mark.parametrize(
    ("type_", "status", "reason", "match"),
    [
        ("Ready", "true", "Ok", "status: Unsupported value: 'true'"),
        ("Ready", "True", "", "reason: Invalid value: ''"),
        ("Ready", "True", "not camel", "reason"),
        ("Ready", "True", "1Bad", "reason"),
        ("", "True", "Ok", "condition type"),
        ("bad type", "True", "Ok", "condition type"),
    ],
)
def test_invalid_conditions_are_rejected(type_: str, status: str, reason: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        set_condition([], type_, status, reason, "", observed_generation=None, now=T0)


def test_valid_condition_spellings() -> None:
    for type_ in ("Ready", "example.com/Ready", "Pods_Ready.v2"):
        set_condition([], type_, "True", "Reason_1,a:b", "", observed_generation=0, now=T0)
    with pytest.raises(ValueError, match="observedGeneration"):
        set_condition([], "Ready", "True", "Ok", "", observed_generation=-1, now=T0)


def test_get_is_true_is_false_and_remove() -> None:
    conds = [ready(), {"type": "Degraded", "status": "False", "reason": "Fine"}]
    assert get_condition(conds, "Ready") == ready()
    assert get_condition(conds, "Missing") is None
    assert get_condition(None, "Ready") is None
    assert is_true(conds, "Ready") and not is_false(conds, "Ready")
    assert is_false(conds, "Degraded") and not is_true(conds, "Degraded")
    assert not is_true(conds, "Missing") and not is_false(conds, "Missing")

    out, removed = remove_condition(conds, "Ready")
    assert removed and [c["type"] for c in out] == ["Degraded"]
    assert len(conds) == 2
    out, removed = remove_condition(conds, "Missing")
    assert not removed and out == conds
    assert remove_condition(None, "Ready") == ([], False)


def test_status_changed() -> None:
    old = {"phase": "Running", "conditions": [ready()], "replicas": 3}
    assert not status_changed(old, copy.deepcopy(old))
    assert status_changed(old, {**old, "replicas": 4})
    assert status_changed(old, {**old, "conditions": [ready(status="False")]})
    # absent == None == [] == {} (kube's Semantic.DeepEqual treats empty and nil alike)
    assert not status_changed({"phase": "Running"}, {"phase": "Running", "conditions": [], "extra": None})
    assert not status_changed(None, {})
    assert not status_changed({"a": {}}, {})
    assert status_changed(None, {"phase": "Pending"})
    # but not True and 1, nor "" and absent
    assert status_changed({"ready": True}, {"ready": 1})
    assert status_changed({"message": ""}, {})
    assert not status_changed({"n": 1}, {"n": 1.0})
    # order of list items is significant
    a = {"type": "A", "status": "True"}
    b = {"type": "B", "status": "True"}
    assert status_changed({"conditions": [a, b]}, {"conditions": [b, a]})
    assert semantic_equal([1, [2, {}]], (1, (2, None)))


# -- properties -----------------------------------------------------------------------------

_types = st.sampled_from(["Ready", "Available", "Degraded", "example.com/Synced"])
_statuses = st.sampled_from(["True", "False", "Unknown"])
_reasons = st.sampled_from(["Ok", "Waiting", "Failed", "Reconciled"])
_messages = st.sampled_from(["", "a", "pods pending"])
_gens = st.one_of(st.none(), st.integers(1, 5))
_times = st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s))


@st.composite
def condition_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        out, _changed = set_condition(
            out,
            draw(_types),
            draw(_statuses),
            draw(_reasons),
            draw(_messages),
            observed_generation=draw(_gens),
            now=draw(_times),
        )
    return out


@given(condition_lists(), _types, _statuses, _reasons, _messages, _gens, _times, _times)
def test_set_condition_properties(
    conds: list[dict[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    gen: int | None,
    now: datetime,
    later: datetime,
) -> None:
    before = copy.deepcopy(conds)
    once, _ = set_condition(conds, type_, status, reason, message, observed_generation=gen, now=now)
    assert conds == before  # never mutates its input

    # applying the same condition again is a no-op, even at a later time
    twice, changed = set_condition(once, type_, status, reason, message, observed_generation=gen, now=later)
    assert not changed
    assert twice == once

    # lastTransitionTime moves iff the status flipped (or the type is new)
    old = get_condition(conds, type_)
    new = get_condition(once, type_)
    assert new is not None
    if old is not None and old["status"] == status:
        assert new["lastTransitionTime"] == old["lastTransitionTime"]
    else:
        assert new["lastTransitionTime"] == format_time(now)

    # other conditions and the order of types are untouched; a new type goes last
    types_before = [c["type"] for c in conds]
    types_after = [c["type"] for c in once]
    assert types_after == (types_before if old is not None else [*types_before, type_])
    for c_before, c_after in zip(conds, once, strict=False):
        if c_before["type"] != type_:
            assert c_before == c_after

    # no-op detection agrees with status_changed
    _, changed_once = set_condition(conds, type_, status, reason, message, observed_generation=gen, now=now)
    assert changed_once == status_changed({"conditions": conds}, {"conditions": once})

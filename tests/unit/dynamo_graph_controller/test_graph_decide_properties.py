"""Invariants of the DGD status decision over generated DCD observations."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.dynamo.graph_decide import (
    REASON_FAILED,
    STATE_FAILED,
    STATE_PENDING,
    STATE_SUCCESSFUL,
    DcdView,
    Failure,
    WantedDcd,
    report_of,
    status_of,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NAMES = ["g-a", "g-b", "g-c"]


@st.composite
def observed(draw: st.DrawFn) -> tuple[list[WantedDcd], dict[str, DcdView]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3))
    wanted = [
        WantedDcd(n, draw(st.sampled_from(["h", "h2"])), draw(st.one_of(st.none(), st.integers(0, 3))))
        for n in names
    ]
    views: dict[str, DcdView] = {}
    for n in draw(st.lists(st.sampled_from(NAMES), unique=True)):
        generation = draw(st.integers(1, 5))
        views[n] = DcdView(
            name=n,
            generation=generation,
            controlled=draw(st.booleans()),
            deleting=draw(st.booleans()),
            applied_hash=draw(st.sampled_from(["h", "h2", ""])),
            replicas=draw(st.one_of(st.none(), st.integers(0, 3))),
            available=draw(st.sampled_from([None, "True", "False", "Unknown"])),
            available_reason="r",
            available_generation=draw(st.one_of(st.none(), st.integers(0, generation))),
        )
    return wanted, views


FAILURES = st.one_of(st.none(), st.builds(Failure, st.just(REASON_FAILED), st.text(min_size=1, max_size=20)))


@given(observed(), FAILURES)
def test_never_successful_while_a_dcd_has_not_observed_its_generation(
    case: tuple[list[WantedDcd], dict[str, DcdView]], failure: Failure | None
) -> None:
    wanted, views = case
    report = report_of(wanted, views, failure)
    stale = any(
        (v := views.get(w.name)) is None
        or v.available_generation is None
        or v.available_generation < v.generation
        for w in wanted
    )
    if stale or failure is not None or not wanted:
        assert report.state != STATE_SUCCESSFUL


@given(observed())
def test_successful_exactly_when_every_wanted_dcd_is_available_with_our_spec_at_its_generation(
    case: tuple[list[WantedDcd], dict[str, DcdView]],
) -> None:
    wanted, views = case
    expected = bool(wanted) and all(
        (v := views.get(w.name)) is not None
        and v.controlled
        and not v.deleting
        and v.applied_hash == w.hash
        and (w.replicas is None or v.replicas == w.replicas)
        and v.available == "True"
        and v.available_generation == v.generation
        for w in wanted
    )
    assert (report_of(wanted, views).state == STATE_SUCCESSFUL) == expected


@given(observed(), FAILURES, st.integers(1, 9))
def test_state_and_ready_condition_agree_and_the_status_is_idempotent(
    case: tuple[list[WantedDcd], dict[str, DcdView]], failure: Failure | None, generation: int
) -> None:
    wanted, views = case
    report = report_of(wanted, views, failure)
    status = status_of(report, generation, None, NOW)
    (ready,) = status["conditions"]
    assert (ready["status"] == "True") == (status["state"] == STATE_SUCCESSFUL)
    assert (status["state"] == STATE_FAILED) == (failure is not None)
    assert status["state"] in (STATE_PENDING, STATE_SUCCESSFUL, STATE_FAILED)
    assert status["observedGeneration"] == ready["observedGeneration"] == generation
    if wanted:
        ready_count, total = status["readyServices"].split("/")
        assert int(total) == len(wanted) and 0 <= int(ready_count) <= len(wanted)
        if failure is None:
            assert (int(ready_count) == len(wanted)) == (status["state"] == STATE_SUCCESSFUL)
    assert status_of(report, generation, status, NOW) == status

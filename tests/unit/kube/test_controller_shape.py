"""The shared controller shape: status writer, transition Events, expectations, workers, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from aiplane.apimachinery.mergepatch import create_merge_patch
from aiplane.kube.client import ApiError
from aiplane.kube.clock import FakeClock
from aiplane.kube.controller import Controller, Request, Result, TerminalError
from aiplane.kube.expectations import Expectations
from aiplane.kube.manager import ControllerOptions, Manager
from aiplane.kube.resources import CONFIGMAPS
from aiplane.kube.status import ConditionEvent, StatusWriter, condition, transition_events
from aiplane.sim.client import InMemoryKubeClient
from tests.polling import eventually

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies it."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(json_objects, json_objects)
def test_merge_patch_turns_the_old_status_into_the_new(before: dict[str, Any], after: dict[str, Any]) -> None:
    # A status never holds JSON nulls in a map (merge patch cannot write them), so compare without.
    before, after = _without_nulls(before), _without_nulls(after)
    patch = create_merge_patch(before, after)
    assert apply_merge_patch(before, patch) == after
    assert (patch == {}) == (before == after)


def test_condition_mutator_reports_only_real_changes() -> None:
    status: dict[str, Any] = {}
    ready = condition("Ready", "True", "Found", "ok", observed_generation=1, now=NOW)
    assert ready(status) and status["conditions"][0]["status"] == "True"
    assert not ready(status)  # idempotent: the second application changes nothing


def test_transition_table_fires_once_per_flip() -> None:
    rules = (
        ConditionEvent("Ready", "False", "Warning", on_reason_change=True),
        ConditionEvent("Paused", "True", "Normal", reason="Paused"),
        ConditionEvent("Paused", "False", "Normal", reason="Resumed", message="resumed", from_absent=False),
    )

    def status(**conds: tuple[str, str]) -> dict[str, Any]:
        return {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": f"{t} {r}"} for t, (s, r) in conds.items()
            ]
        }

    assert transition_events(rules, None, status(Ready=("False", "A"))) == [("Warning", "A", "Ready A")]
    assert transition_events(rules, status(Ready=("False", "A")), status(Ready=("False", "A"))) == []
    assert transition_events(rules, status(Ready=("False", "A")), status(Ready=("False", "B"))) == [
        ("Warning", "B", "Ready B")
    ]
    assert transition_events(rules, None, status(Paused=("False", "X"))) == []  # never paused: no Resumed
    assert transition_events(rules, status(Paused=("True", "X")), status(Paused=("False", "X"))) == [
        ("Normal", "Resumed", "resumed")
    ]


def test_transition_filters_tell_lost_availability_and_failures_from_progress() -> None:
    rules = (
        ConditionEvent("Available", "False", "Warning", on_reason_change=True, from_statuses=("True",)),
        ConditionEvent("Available", "False", "Warning", reasons=("InvalidSpec",)),
    )

    def status(state: str, reason: str) -> dict[str, Any]:
        return {"conditions": [{"type": "Available", "status": state, "reason": reason, "message": reason}]}

    starting = transition_events(rules, status("Unknown", "Reconciling"), status("False", "NotReady"))
    assert starting == []  # a component coming up is progress
    assert transition_events(rules, None, status("False", "NotReady")) == []
    lost = transition_events(rules, status("True", "Ready"), status("False", "NotReady"))
    assert lost == [("Warning", "NotReady", "NotReady")]
    broken = transition_events(rules, None, status("False", "InvalidSpec"))
    assert broken == [("Warning", "InvalidSpec", "InvalidSpec")]


def test_expectations_treat_resource_versions_as_opaque() -> None:
    # "10" < "9" as strings and 10 > 9 as numbers: neither order may matter, only equality.
    exp = Expectations()
    cached = {"metadata": {"name": "a", "resourceVersion": "9", "uid": "u"}}
    written = {"metadata": {"name": "a", "resourceVersion": "10", "uid": "u"}}
    exp.wrote("a", cached, written, conditional=True)
    assert exp.view("a", cached) == written
    later = {"metadata": {"name": "a", "resourceVersion": "abc", "uid": "u"}}
    assert exp.view("a", later) == later and len(exp) == 0


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh(install_crds=False)
    yield c
    await c.close()


async def test_status_writer_writes_once_then_never(client: InMemoryKubeClient) -> None:
    await client.create(
        CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, namespace="default"
    )
    # ConfigMaps have no status subresource: a fake resource with one is not needed for the
    # comparison itself, which is what this checks (nothing sent when nothing changed).
    writer = StatusWriter(client, CONFIGMAPS, "test")
    obj = await client.get(CONFIGMAPS, "x", namespace="default")
    client.reset_counts()
    assert await writer.write({**obj, "status": {"a": 1}}, {"a": 1}) is None
    assert await writer.apply({**obj, "status": {"a": 1}}) is None
    assert client.writes == 0


def _manager(client: InMemoryKubeClient, workers: int | None) -> Manager:
    return Manager(
        client,
        handle_signals=False,
        controller_options=ControllerOptions(max_concurrent_reconciles=workers),
        clock=FakeClock(NOW),
    )


async def _noop(_: Request) -> Result | None:
    return None


@pytest.mark.parametrize(("flag", "expected"), [(None, 4), (1, 1), (8, 8)])
async def test_max_concurrent_reconciles_is_respected(
    client: InMemoryKubeClient, flag: int | None, expected: int
) -> None:
    manager = _manager(client, flag)
    controller = Controller.build("c").for_(CONFIGMAPS).workers(4).reconcile(_noop)
    manager.add_controller(controller)
    assert controller.max_concurrent == expected and controller.bound


async def test_a_fixed_worker_count_is_kept_and_said(client: InMemoryKubeClient) -> None:
    manager = _manager(client, 8)
    controller = Controller.build("c").for_(CONFIGMAPS).workers(1, fixed="single admitter").reconcile(_noop)
    manager.add_controller(controller)
    assert controller.max_concurrent == 1


async def test_terminal_errors_are_not_retried_and_races_are(client: InMemoryKubeClient) -> None:
    calls: dict[str, int] = {"terminal": 0, "race": 0}

    async def reconcile(request: Request) -> Result | None:
        calls[request.name] += 1
        if request.name == "terminal":
            raise TerminalError("the spec can never work")
        if calls["race"] < 3:
            raise ApiError(409, "Conflict", "the object has been modified")
        return None

    controller = Controller("c", reconcile, [], workers=1)
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(controller.run(stop, drain_timeout=5))
        controller.enqueue(Request(None, "terminal"))
        controller.enqueue(Request(None, "race"))

        async def race_resolved() -> bool:
            return calls["race"] == 3

        await eventually(race_resolved)
        stop.set()
        await task
    assert calls["terminal"] == 1 and controller.queue.num_requeues(Request(None, "terminal")) == 0
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    # The terminal failure is said once, at error level; the two expected races never are.
    assert [e.get("key") for e in errors] == ["terminal"], errors


def test_expectations_without_objects_only_wait() -> None:
    clock = FakeClock(NOW)
    exp = Expectations(timeout=30, clock=clock.monotonic, keep_objects=False)
    created = {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "4", "uid": "u"}}
    exp.wrote("Pod/ns/p", None, created, conditional=True, owner="ns/m")
    cache: dict[str, Any] = {}
    assert exp.pending("ns/m", cache.get)
    with pytest.raises(RuntimeError):
        exp.view("Pod/ns/p", None)
    cache["Pod/ns/p"] = created
    assert not exp.pending("ns/m", cache.get) and len(exp) == 0


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (
            ApiError(409, "Conflict", 'Operation cannot be fulfilled on x "a": the object has been modified'),
            True,
        ),
        (ApiError(409, "AlreadyExists", 'nodepartitionings "a" already exists'), True),
        (ApiError(404, "NotFound", 'nodepartitionings "a" not found'), True),
        (ApiError(500, "InternalError", "etcdserver: request timed out"), False),
        (ApiError(422, "Invalid", "spec.replicas: Invalid value: -1"), False),
        (KeyError("spec"), False),
    ],
    ids=["conflict", "already-exists", "not-found", "server-error", "invalid", "bug"],
)
async def test_expected_races_requeue_quietly_and_real_failures_are_errors(
    failure: Exception, expected: bool
) -> None:
    async def reconcile(request: Request) -> Result | None:
        raise failure

    controller = Controller("c", reconcile, [], workers=1)
    request = Request("ns", "a")
    with capture_logs() as logs:
        label = await controller.process(request)
    loud = [entry for entry in logs if entry["log_level"] in ("warning", "error", "critical")]
    # Either way the key comes back with backoff; only a real failure is said above debug.
    assert controller.queue.num_requeues(request) == 1
    if expected:
        assert loud == [] and label == "requeue"
        assert [entry["log_level"] for entry in logs] == ["debug"]
    else:
        assert [(e["event"], e["log_level"], e["key"]) for e in loud] == [
            ("reconcile failed", "error", "ns/a")
        ]
        assert label == "error"

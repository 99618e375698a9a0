"""Metrics: controller-runtime's names, labels and buckets, on a private registry."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from aiplane.kube.metrics import RECONCILE_TIME_BUCKETS, Metrics
from aiplane.kube.ratelimit import FakeClock
from aiplane.kube.workqueue import WORKQUEUE_METRICS, WorkQueue


def exposition(metrics: Metrics) -> str:
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain; version=0.0.4")
    return body.decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(text: str, metric: str, /, **labels: str) -> float | None:
    return samples(text).get((metric, frozenset(labels.items())))


def test_controller_series_start_at_zero_when_the_controller_starts() -> None:
    m = Metrics(process_collectors=False)
    m.controllers.set_max_concurrent("echo", 4)
    text = exposition(m)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert sample(text, "controller_runtime_reconcile_total", controller="echo", result=result) == 0.0
    assert sample(text, "controller_runtime_reconcile_errors_total", controller="echo") == 0.0
    assert sample(text, "controller_runtime_terminal_reconcile_errors_total", controller="echo") == 0.0
    assert sample(text, "controller_runtime_reconcile_panics_total", controller="echo") == 0.0
    assert sample(text, "controller_runtime_max_concurrent_reconciles", controller="echo") == 4.0
    assert sample(text, "controller_runtime_active_workers", controller="echo") == 0.0
    assert sample(text, "controller_runtime_reconcile_time_seconds_count", controller="echo") == 0.0


def test_reconcile_outcomes_feed_counts_errors_workers_and_the_histogram() -> None:
    m = Metrics(process_collectors=False)
    c = m.controllers
    c.set_max_concurrent("echo", 2)
    c.reconcile_started("echo")
    c.reconcile_started("echo")
    assert sample(exposition(m), "controller_runtime_active_workers", controller="echo") == 2.0
    c.reconcile_finished("echo", "success", 0.004)
    c.reconcile_finished("echo", "error", 0.3)
    for label in ("requeue", "requeue_after"):
        c.reconcile_started("echo")
        c.reconcile_finished("echo", label, 61.0)
    c.reconcile_panic("echo")
    c.terminal_error("echo")
    text = exposition(m)
    assert sample(text, "controller_runtime_active_workers", controller="echo") == 0.0
    assert sample(text, "controller_runtime_reconcile_total", controller="echo", result="success") == 1.0
    assert sample(text, "controller_runtime_reconcile_total", controller="echo", result="error") == 1.0
    assert sample(text, "controller_runtime_reconcile_total", controller="echo", result="requeue") == 1.0
    assert (
        sample(text, "controller_runtime_reconcile_total", controller="echo", result="requeue_after") == 1.0
    )
    assert sample(text, "controller_runtime_reconcile_errors_total", controller="echo") == 1.0
    assert sample(text, "controller_runtime_reconcile_panics_total", controller="echo") == 1.0
    assert sample(text, "controller_runtime_terminal_reconcile_errors_total", controller="echo") == 1.0
    assert sample(text, "controller_runtime_reconcile_time_seconds_count", controller="echo") == 4.0
    assert (
        sample(text, "controller_runtime_reconcile_time_seconds_bucket", controller="echo", le="0.005") == 1.0
    )
    assert (
        sample(text, "controller_runtime_reconcile_time_seconds_bucket", controller="echo", le="0.3") == 2.0
    )
    assert (
        sample(text, "controller_runtime_reconcile_time_seconds_bucket", controller="echo", le="60.0") == 2.0
    )
    assert (
        sample(text, "controller_runtime_reconcile_time_seconds_bucket", controller="echo", le="+Inf") == 4.0
    )
    with pytest.raises(ValueError, match="unknown reconcile result"):
        c.reconcile_finished("echo", "ok", 1.0)


def test_reconcile_time_buckets_are_controller_runtimes() -> None:
    assert len(RECONCILE_TIME_BUCKETS) == 40
    assert RECONCILE_TIME_BUCKETS[:4] == (0.005, 0.01, 0.025, 0.05)
    assert RECONCILE_TIME_BUCKETS[-4:] == (30.0, 40.0, 50.0, 60.0)
    m = Metrics(process_collectors=False)
    m.controllers.set_max_concurrent("x", 1)
    les = {
        dict(s.labels)["le"]
        for f in text_string_to_metric_families(exposition(m))
        for s in f.samples
        if s.name == "controller_runtime_reconcile_time_seconds_bucket"
    }
    assert les == {str(b) for b in RECONCILE_TIME_BUCKETS} | {"+Inf"}


async def test_the_work_queue_reports_through_the_provider_with_controller_runtime_names() -> None:
    m = Metrics(process_collectors=False)
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(
        "echo", clock=clock, metrics=m.workqueue, unfinished_work_update_period=None
    )
    queue.add("a")
    queue.add("b")
    queue.add("a")  # already queued: deduplicated, not an add
    text = exposition(m)
    assert sample(text, "workqueue_adds_total", name="echo") == 2.0
    assert sample(text, "workqueue_depth", name="echo") == 2.0
    clock.advance(0.5)
    item = await queue.get()
    assert item == "a"
    queue.add_rate_limited("a")
    queue.done("a")
    text = exposition(m)
    assert sample(text, "workqueue_depth", name="echo") == 1.0
    assert sample(text, "workqueue_retries_total", name="echo") == 1.0
    assert sample(text, "workqueue_queue_duration_seconds_count", name="echo") == 1.0
    assert sample(text, "workqueue_queue_duration_seconds_bucket", name="echo", le="1.0") == 1.0
    assert sample(text, "workqueue_work_duration_seconds_count", name="echo") == 1.0
    # Every workqueue metric is registered with its kind, help text and buckets.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for spec in WORKQUEUE_METRICS:
        name = spec.name.removesuffix("_total") if spec.kind == "counter" else spec.name
        assert families[name].type == spec.kind
        assert families[name].documentation == spec.help
        if spec.kind == "histogram":
            les = {dict(s.labels)["le"] for s in families[name].samples if s.name.endswith("_bucket")}
            assert les == {str(b) for b in spec.buckets} | {"+Inf"}
    queue.shutdown()


def test_leader_election_status_gauge() -> None:
    m = Metrics(process_collectors=False)
    m.leader_election.standby("aiplane")
    assert sample(exposition(m), "leader_election_master_status", name="aiplane") == 0.0
    m.leader_election.on("aiplane")
    assert sample(exposition(m), "leader_election_master_status", name="aiplane") == 1.0
    m.leader_election.off("aiplane")
    assert sample(exposition(m), "leader_election_master_status", name="aiplane") == 0.0


def test_rest_client_requests_are_labelled_like_client_go() -> None:
    m = Metrics(process_collectors=False)
    observe = m.rest_client.observe
    observe("GET", 200, "https://127.0.0.1:6443")
    observe("GET", 200, "https://127.0.0.1:6443")
    observe("WATCH", 200, "https://127.0.0.1:6443")  # a watch is a GET
    observe("PUT", 409, "https://127.0.0.1:6443")
    observe("PATCH", 0, "https://127.0.0.1:6443")  # no response at all
    text = exposition(m)
    name = "rest_client_requests_total"
    assert sample(text, name, code="200", method="GET", host="127.0.0.1:6443") == 3.0
    assert sample(text, name, code="409", method="PUT", host="127.0.0.1:6443") == 1.0
    assert sample(text, name, code="<error>", method="PATCH", host="127.0.0.1:6443") == 1.0


def test_each_metrics_object_has_its_own_registry_and_never_touches_the_global_one() -> None:
    before = {f.name for f in REGISTRY.collect()}
    one, two = Metrics(), Metrics()  # no "Duplicated timeseries" error
    one.controllers.set_max_concurrent("a", 1)
    assert sample(exposition(two), "controller_runtime_max_concurrent_reconciles", controller="a") is None
    assert {f.name for f in REGISTRY.collect()} == before
    assert "process_cpu_seconds_total" in exposition(
        one
    ) or "python_gc_objects_collected_total" in exposition(one)


def test_openmetrics_is_served_when_asked_for() -> None:
    m = Metrics(process_collectors=False)
    m.controllers.set_max_concurrent("a", 1)
    body, content_type = m.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.decode().rstrip().endswith("# EOF")


def test_a_reconcile_and_a_request_look_their_series_up_once_not_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``labels()`` validates and takes a lock: on the hot path (every reconcile, every API request)
    the children are looked up once per series, and the counts stay exact."""
    m = Metrics(process_collectors=False)
    looked_up: list[str] = []
    for name in ("reconcile_total", "active_workers", "reconcile_time", "reconcile_errors"):
        vec = getattr(m.controllers, name)
        original = vec.labels

        def counting(*args: str, _original: object = original, _name: str = name, **kw: str) -> object:
            looked_up.append(_name)
            return _original(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(vec, "labels", counting)
    original_requests = m.rest_client.requests.labels

    def counting_requests(*args: str, **kw: str) -> object:
        looked_up.append("rest_client_requests_total")
        return original_requests(*args, **kw)

    monkeypatch.setattr(m.rest_client.requests, "labels", counting_requests)
    for _ in range(100):
        m.controllers.reconcile_started("echo")
        m.controllers.reconcile_finished("echo", "success", 0.001)
        m.rest_client.observe("PATCH", 200, "https://api.example:6443")
    assert len(looked_up) <= 4 + 4 + 1  # once per result of reconcile_total, once per other series
    text = exposition(m)
    assert sample(text, "controller_runtime_reconcile_total", controller="echo", result="success") == 100
    assert sample(text, "controller_runtime_active_workers", controller="echo") == 0
    assert (
        sample(text, "rest_client_requests_total", code="200", method="PATCH", host="api.example:6443") == 100
    )

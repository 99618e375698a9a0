"""Prometheus metrics with controller-runtime's names, on a registry of our own.

Dashboards and alerts written for Go operators (``controller_runtime_reconcile_total``,
``workqueue_depth``, ``leader_election_master_status``, ``rest_client_requests_total``) work on
aiplane unchanged because every name, label, help text and bucket layout below is copied from
controller-runtime (``pkg/internal/controller/metrics``, ``pkg/metrics/workqueue.go``,
``pkg/metrics/leaderelection.go``, ``pkg/metrics/client_go_adapter.go``). Everything lives on one
:class:`prometheus_client.CollectorRegistry` owned by a :class:`Metrics` object, never on
prometheus-client's global default registry, so tests can build as many managers as they like
without "Duplicated timeseries" errors and a scrape shows exactly what this manager registered.

How the pieces are fed
----------------------

One :class:`Metrics` per process, owned by :class:`aiplane.kube.manager.Manager` (``manager.metrics``)
and served on ``/metrics``:

* ``metrics.controllers`` — :class:`ControllerMetrics`, called by the controller (see below).
* ``metrics.workqueue`` — :class:`PrometheusWorkQueueMetrics`, a
  :class:`aiplane.kube.workqueue.WorkQueueMetricsProvider`: pass it as ``WorkQueue(name,
  metrics=manager.metrics.workqueue)`` with the controller's name as the queue name.
* ``metrics.leader_election`` — :class:`LeaderElectionMetrics`, fed by
  :class:`aiplane.kube.leaderelection.LeaderElector`.
* ``metrics.rest_client.observe`` — a :data:`aiplane.kube.client.RequestObserver`: pass it as
  ``HttpKubeClient(..., observer=metrics.rest_client.observe)``. ``aiplane run`` does this.

The controller's side (what ``aiplane.kube.controller`` calls)
--------------------------------------------------------------

controller-runtime's ``Controller`` does exactly this, and so should ours (the calls are
``aiplane.kube.controller.ReconcileObserver``; pass ``observer=manager.metrics.controllers``)::

    m = manager.metrics.controllers
    m.set_max_concurrent(name, workers)        # once, when the controller starts: creates every
                                               # series at zero and sets the worker gauge
    # in each worker, per key taken from the queue:
    m.reconcile_started(name)                  # active_workers += 1
    started = time.perf_counter()
    ...                                        # reconcile; pick the result label:
    m.reconcile_finished(name, label, time.perf_counter() - started)

``label`` is one of ``success``, ``error``, ``requeue``, ``requeue_after`` with controller-runtime's
precedence (an exception is ``error`` whatever the result; then ``requeue_after``, then
``requeue``). ``reconcile_finished`` decrements ``controller_runtime_active_workers``, counts
``controller_runtime_reconcile_total{result}``, counts ``controller_runtime_reconcile_errors_total``
for ``error`` and observes ``controller_runtime_reconcile_time_seconds``. Optional:
``reconcile_panic(name)`` counts ``controller_runtime_reconcile_panics_total`` (controller-runtime: a
recovered panic; for us an exception that is a programming error rather than a failed API call,
the controller's choice) and ``terminal_error(name)`` counts
``controller_runtime_terminal_reconcile_errors_total`` (an error that must not be retried); both
come in addition to ``reconcile_finished(name, "error", …)``.

``rest_client_request_duration_seconds`` is not exported: the client's observer reports verb, code
and host but no duration. It would need the observer to carry the elapsed time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from aiplane.kube.workqueue import (
    METRIC_LABELS,
    WORKQUEUE_METRICS,
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    MetricSpec,
)

__all__ = [
    "RECONCILE_RESULTS",
    "RECONCILE_TIME_BUCKETS",
    "ControllerMetrics",
    "InformerMetrics",
    "LeaderElectionMetrics",
    "Metrics",
    "PrometheusWorkQueueMetrics",
    "ReconcileResult",
    "RestClientMetrics",
]

ReconcileResult = Literal["success", "error", "requeue", "requeue_after"]

#: The values of ``controller_runtime_reconcile_total``'s ``result`` label.
RECONCILE_RESULTS: Final[tuple[ReconcileResult, ...]] = ("success", "error", "requeue", "requeue_after")

#: controller-runtime's ``controller_runtime_reconcile_time_seconds`` buckets (5 ms .. 60 s).
RECONCILE_TIME_BUCKETS: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    6.0,
    7.0,
    8.0,
    9.0,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
    40.0,
    50.0,
    60.0,
)


@dataclass(frozen=True, slots=True)
class _ReconcileSeries:
    """One controller's reconcile metric children (:meth:`ControllerMetrics._series`)."""

    active: Gauge
    total: dict[str, Counter]
    errors: Counter
    time: Histogram


class ControllerMetrics:
    """controller-runtime's per-controller reconcile metrics (label ``controller``).

    See the module docstring for the call protocol. All methods are cheap label lookups plus an
    increment, safe to call on every reconcile.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
            registry=registry,
        )
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ("controller",),
            registry=registry,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
            ("controller",),
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
            buckets=RECONCILE_TIME_BUCKETS,
            registry=registry,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ("controller",),
            registry=registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ("controller",),
            registry=registry,
        )
        self._children: dict[str, _ReconcileSeries] = {}

    def init_controller(self, controller: str, max_concurrent_reconciles: int) -> None:
        """Create every series at zero (controller-runtime's ``initMetrics``).

        A counter that first appears at 1 makes ``rate()`` miss the first event; zeroed series also
        let dashboards show a controller that has not reconciled anything yet. Idempotent.
        """
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(controller=controller, result=result)
        self.reconcile_errors.labels(controller=controller)
        self.terminal_reconcile_errors.labels(controller=controller)
        self.reconcile_panics.labels(controller=controller)
        self.reconcile_time.labels(controller=controller)
        self.active_workers.labels(controller=controller)
        self.max_concurrent_reconciles.labels(controller=controller).set(max_concurrent_reconciles)

    def set_max_concurrent(self, controller: str, n: int) -> None:
        """``controller_runtime_max_concurrent_reconciles``; also creates the controller's series at zero.

        Controllers call it once when they start, which is when controller-runtime initialises its
        metrics, so it doubles as :meth:`init_controller`.
        """
        self.init_controller(controller, n)

    def _series(self, controller: str) -> _ReconcileSeries:
        """The controller's children, looked up once: ``labels()`` validates and locks on every call,
        which is most of what a metric costs on a reconcile."""
        series = self._children.get(controller)
        if series is None:
            series = self._children[controller] = _ReconcileSeries(
                self.active_workers.labels(controller=controller),
                {r: self.reconcile_total.labels(controller=controller, result=r) for r in RECONCILE_RESULTS},
                self.reconcile_errors.labels(controller=controller),
                self.reconcile_time.labels(controller=controller),
            )
        return series

    def reconcile_started(self, controller: str) -> None:
        """A worker took a key: ``controller_runtime_active_workers += 1``."""
        self._series(controller).active.inc()

    def reconcile_finished(self, controller: str, result: str, seconds: float) -> None:
        """Record one finished reconcile that took ``seconds`` (see the module docstring).

        Every :meth:`reconcile_started` must be matched by exactly one call, whatever the outcome,
        or ``active_workers`` drifts. ``result`` must be one of :data:`RECONCILE_RESULTS`.
        """
        series = self._series(controller)
        total = series.total.get(result)
        if total is None:
            raise ValueError(f"unknown reconcile result {result!r}; expected one of {RECONCILE_RESULTS}")
        series.active.dec()
        total.inc()
        if result == "error":
            series.errors.inc()
        series.time.observe(max(0.0, seconds))

    def reconcile_panic(self, controller: str) -> None:
        """``controller_runtime_reconcile_panics_total``; still call :meth:`reconcile_finished` with ``error``."""
        self.reconcile_panics.labels(controller=controller).inc()

    def terminal_error(self, controller: str) -> None:
        """``controller_runtime_terminal_reconcile_errors_total``; still call :meth:`reconcile_finished` with ``error``."""
        self.terminal_reconcile_errors.labels(controller=controller).inc()


class PrometheusWorkQueueMetrics:
    """:class:`aiplane.kube.workqueue.WorkQueueMetricsProvider` on prometheus-client.

    The vectors are registered once, from :data:`aiplane.kube.workqueue.WORKQUEUE_METRICS` (names,
    kinds, help texts and buckets as controller-runtime registers them); each queue gets its
    children by its name. The default ``Histogram`` buckets are never used: a histogram spec
    without buckets would be a bug in that table, so it is refused.
    """

    def __init__(self, registry: CollectorRegistry, specs: Iterable[MetricSpec] = WORKQUEUE_METRICS) -> None:
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        self._histograms: dict[str, Histogram] = {}
        for spec in specs:
            if spec.kind == "counter":
                self._counters[spec.name] = Counter(spec.name, spec.help, METRIC_LABELS, registry=registry)
            elif spec.kind == "gauge":
                self._gauges[spec.name] = Gauge(spec.name, spec.help, METRIC_LABELS, registry=registry)
            else:
                if not spec.buckets:
                    raise ValueError(f"histogram {spec.name} has no buckets")
                self._histograms[spec.name] = Histogram(
                    spec.name, spec.help, METRIC_LABELS, buckets=spec.buckets, registry=registry
                )

    def counter(self, metric: str, queue: str) -> CounterMetric:
        return self._counters[metric].labels(queue)

    def gauge(self, metric: str, queue: str) -> GaugeMetric:
        return self._gauges[metric].labels(queue)

    def histogram(self, metric: str, queue: str) -> HistogramMetric:
        return self._histograms[metric].labels(queue)


class LeaderElectionMetrics:
    """``leader_election_master_status{name}`` (and ``leader_election_slowpath_total{name}``).

    ``name`` is the Lease's name (controller-runtime's ``LeaderElectionID``). 1 means this process
    holds the lease, 0 that it is a standby; the gauge is created at 0 when the elector starts so
    a standby is visible as one.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease. Please make sure "
            "to group by name.",
            ("name",),
            registry=registry,
        )
        self.slowpath = Counter(
            "leader_election_slowpath_total",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string "
            "used to identify the lease. Please make sure to group by name.",
            ("name",),
            registry=registry,
        )

    def standby(self, name: str) -> None:
        self.master_status.labels(name=name).set(0)

    def on(self, name: str) -> None:
        self.master_status.labels(name=name).set(1)

    def off(self, name: str) -> None:
        self.master_status.labels(name=name).set(0)

    def slowpath_exercised(self, name: str) -> None:
        self.slowpath.labels(name=name).inc()


class RestClientMetrics:
    """``rest_client_requests_total{code,method,host}``, fed by ``HttpKubeClient``'s observer.

    Label values follow client-go's ``RequestResult.Increment``: ``code`` is the HTTP status, or
    ``<error>`` when no response arrived (our observer reports 0); ``method`` is the HTTP method
    (a watch is a ``GET``); ``host`` is the URL's ``host:port``, without the scheme.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=registry,
        )
        self._children: dict[tuple[str, int, str], Counter] = {}

    def observe(self, verb: str, code: int, host: str) -> None:
        key = (verb, code, host)
        child = self._children.get(key)  # labels() validates and locks: once per series, not per request
        if child is None:
            method = "GET" if verb.upper() == "WATCH" else verb.upper()
            netloc = urlsplit(host).netloc if "://" in host else host
            child = self.requests.labels(code=str(code) if code else "<error>", method=method, host=netloc)
            self._children[key] = child
        child.inc()


#: One informer's liveness for :class:`InformerMetrics`: (name, seconds since heard or None, stale,
#: refused by the operator's role).
InformerLiveness = tuple[str, float | None, bool, bool]


class InformerMetrics(Collector):
    """``aiplane_informer_last_heard_seconds{informer}`` (seconds since the informer last heard from the
    API server: a list, an event or a bookmark) and ``aiplane_informer_stale{informer}`` (1 while that
    exceeds its bound) and ``aiplane_informer_forbidden{informer}`` (1 while its list or watch is refused
    with 403: the operator's role lacks a permission, and the controllers needing it wait), computed at
    scrape time from the source the manager attaches, so a watch that hangs on a dead connection still
    shows up (nothing has to run to update them)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._source: Callable[[], Iterable[InformerLiveness]] | None = None
        registry.register(self)

    def attach(self, source: Callable[[], Iterable[InformerLiveness]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        heard = GaugeMetricFamily(
            "aiplane_informer_last_heard_seconds",
            "Seconds since the informer last heard from the API server (list, event or bookmark).",
            labels=("informer",),
        )
        stale = GaugeMetricFamily(
            "aiplane_informer_stale",
            "1 while the informer has heard nothing from the API server for longer than its bound.",
            labels=("informer",),
        )
        forbidden = GaugeMetricFamily(
            "aiplane_informer_forbidden",
            "1 while the informer's list or watch is refused (403): the operator's role lacks a permission.",
            labels=("informer",),
        )
        seen: set[str] = set()
        for name, silence, is_stale, refused in self._source() if self._source is not None else ():
            if name in seen:
                continue
            seen.add(name)
            if silence is not None:
                heard.add_metric((name,), silence)
            stale.add_metric((name,), 1.0 if is_stale else 0.0)
            forbidden.add_metric((name,), 1.0 if refused else 0.0)
        yield heard
        yield stale
        yield forbidden

    def describe(self) -> Iterator[Metric]:
        return iter(())


class Metrics:
    """Every metric of one process, on a private registry (``registry``).

    ``process_collectors`` adds prometheus-client's process (CPU, memory, file descriptors),
    platform and GC collectors, as controller-runtime registers Go's process and runtime
    collectors; tests that compare exposition text may turn them off.

    Creating one turns off prometheus-client's ``*_created`` series process-wide: Go's client
    has no such series, and controller-runtime dashboards do not expect them (they double the
    series count of every counter and histogram).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process_collectors: bool = True) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.controllers = ControllerMetrics(self.registry)
        self.workqueue = PrometheusWorkQueueMetrics(self.registry)
        self.leader_election = LeaderElectionMetrics(self.registry)
        self.rest_client = RestClientMetrics(self.registry)
        self.informers = InformerMetrics(self.registry)
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The scrape body and its content type, negotiated on ``accept`` (text 0.0.4 or OpenMetrics)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

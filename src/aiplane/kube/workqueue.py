"""The controller work queue: client-go's rate-limiting, delaying work queue for asyncio.

A controller does not process watch events; it processes *keys* ("namespace/name") taken from this
queue, and re-reads the object when it gets one. The queue's guarantees are what make that safe
and cheap, and they are client-go's (``k8s.io/client-go/util/workqueue``: ``queue.go``,
``delaying_queue.go``, ``rate_limiting_queue.go``):

* **Deduplication.** An item that is already waiting is not queued again, so a burst of events
  for one object costs one reconcile.
* **No item is processed concurrently with itself.** Between :meth:`WorkQueue.get` and
  :meth:`WorkQueue.done` an item is *processing*; adding it again only marks it *dirty*, and
  ``done`` puts it back on the queue, so it runs again, exactly once, after the current run. With
  N workers, two reconciles of one object can never race.
* **Fair order.** Items come out in the order they were (first) added.
* **Delays.** :meth:`WorkQueue.add_after` parks an item until a deadline; adding it again with an
  earlier deadline moves it earlier, a later one is ignored (``waitingForQueue`` semantics). All
  parked items share a single timer armed for the earliest deadline, not a poller.
* **Rate-limited retries.** :meth:`WorkQueue.add_rate_limited` is ``add_after(item,
  limiter.when(item))`` with a :mod:`aiplane.kube.ratelimit` limiter (client-go's
  ``DefaultControllerRateLimiter`` unless told otherwise); :meth:`WorkQueue.forget` resets the
  item's backoff after a success.

A worker looks like this (``async for`` ends when the queue is shut down and empty)::

    async def worker(queue: WorkQueue[str]) -> None:
        async for key in queue:
            try:
                await reconcile(key)
            except Exception:
                queue.add_rate_limited(key)   # processed again later, never concurrently
            else:
                queue.forget(key)             # reset its backoff
            finally:
                queue.done(key)               # always: otherwise the key is stuck "processing"

The queue is bound to one event loop and is not thread-safe (use
``loop.call_soon_threadsafe(queue.add, key)`` from another thread); every synchronous method is
atomic with respect to the loop, which is why there are no locks.

Metrics go through :class:`WorkQueueMetricsProvider`, a three-method protocol that the manager
implements with prometheus-client; the metric names, kinds, help texts and buckets are those of
controller-runtime's ``pkg/metrics/workqueue.go`` and are listed in :data:`WORKQUEUE_METRICS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, Protocol, TypeVar

from aiplane.kube.ratelimit import Clock, RateLimiter, RealClock, TimerHandle, default_controller_rate_limiter

__all__ = [
    "METRIC_LABELS",
    "WORKQUEUE_ADDS_TOTAL",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS",
    "WORKQUEUE_METRICS",
    "WORKQUEUE_QUEUE_DURATION_SECONDS",
    "WORKQUEUE_RETRIES_TOTAL",
    "WORKQUEUE_UNFINISHED_WORK_SECONDS",
    "WORKQUEUE_WORK_DURATION_SECONDS",
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "MetricSpec",
    "NoopMetricsProvider",
    "RecordingMetricsProvider",
    "WorkQueue",
    "WorkQueueMetricsProvider",
]

T = TypeVar("T", bound=Hashable)

# --------------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------------

WORKQUEUE_DEPTH: Final = "workqueue_depth"
WORKQUEUE_ADDS_TOTAL: Final = "workqueue_adds_total"
WORKQUEUE_RETRIES_TOTAL: Final = "workqueue_retries_total"
WORKQUEUE_QUEUE_DURATION_SECONDS: Final = "workqueue_queue_duration_seconds"
WORKQUEUE_WORK_DURATION_SECONDS: Final = "workqueue_work_duration_seconds"
WORKQUEUE_UNFINISHED_WORK_SECONDS: Final = "workqueue_unfinished_work_seconds"
WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS: Final = "workqueue_longest_running_processor_seconds"

#: The one label every work-queue metric carries: the queue's (controller's) name.
METRIC_LABELS: Final = ("name",)

# controller-runtime's prometheus.ExponentialBuckets(10e-9, 10, 12): 10 ns .. 1000 s.
_DURATION_BUCKETS: Final = tuple(1e-8 * 10.0**i for i in range(12))


@dataclass(frozen=True)
class MetricSpec:
    """Everything a metrics backend needs to register one work-queue metric."""

    name: str
    kind: Literal["gauge", "counter", "histogram"]
    help: str
    buckets: tuple[float, ...] = ()


#: The work-queue metrics, as controller-runtime registers them (label: :data:`METRIC_LABELS`).
WORKQUEUE_METRICS: Final = (
    MetricSpec(WORKQUEUE_DEPTH, "gauge", "Current depth of workqueue"),
    MetricSpec(WORKQUEUE_ADDS_TOTAL, "counter", "Total number of adds handled by workqueue"),
    MetricSpec(WORKQUEUE_RETRIES_TOTAL, "counter", "Total number of retries handled by workqueue"),
    MetricSpec(
        WORKQUEUE_QUEUE_DURATION_SECONDS,
        "histogram",
        "How long in seconds an item stays in workqueue before being requested",
        _DURATION_BUCKETS,
    ),
    MetricSpec(
        WORKQUEUE_WORK_DURATION_SECONDS,
        "histogram",
        "How long in seconds processing an item from workqueue takes.",
        _DURATION_BUCKETS,
    ),
    MetricSpec(
        WORKQUEUE_UNFINISHED_WORK_SECONDS,
        "gauge",
        "How many seconds of work has been done that is in progress and hasn't been observed by "
        "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
        "threads by observing the rate at which this increases.",
    ),
    MetricSpec(
        WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
        "gauge",
        "How many seconds has the longest running processor for workqueue been running.",
    ),
)


class CounterMetric(Protocol):
    """A monotonically increasing count (prometheus-client's ``Counter`` child satisfies it)."""

    def inc(self) -> None: ...


class GaugeMetric(Protocol):
    """A value that is set outright (prometheus-client's ``Gauge`` child satisfies it)."""

    def set(self, value: float, /) -> None: ...


class HistogramMetric(Protocol):
    """A distribution of observations (prometheus-client's ``Histogram`` child satisfies it)."""

    def observe(self, value: float, /) -> None: ...


class WorkQueueMetricsProvider(Protocol):
    """Hands a queue its metric children, one per (metric name, queue name).

    ``metric`` is one of the ``WORKQUEUE_*`` names and ``queue`` the queue's name, the value of the
    ``name`` label. A prometheus-client implementation registers the vectors described by
    :data:`WORKQUEUE_METRICS` once and returns ``vec.labels(name=queue)``. It is asked once per
    metric when a queue is built, never on the hot path.
    """

    def counter(self, metric: str, queue: str) -> CounterMetric: ...

    def gauge(self, metric: str, queue: str) -> GaugeMetric: ...

    def histogram(self, metric: str, queue: str) -> HistogramMetric: ...


class _NoopMetric:
    def inc(self) -> None:
        pass

    def set(self, value: float, /) -> None:
        pass

    def observe(self, value: float, /) -> None:
        pass


_NOOP_METRIC: Final = _NoopMetric()


class NoopMetricsProvider:
    """Discards everything: the default, so a queue built in a test or a tool costs nothing extra."""

    def counter(self, metric: str, queue: str) -> CounterMetric:
        return _NOOP_METRIC

    def gauge(self, metric: str, queue: str) -> GaugeMetric:
        return _NOOP_METRIC

    def histogram(self, metric: str, queue: str) -> HistogramMetric:
        return _NOOP_METRIC


class _Recorded:
    def __init__(self, owner: RecordingMetricsProvider, key: tuple[str, str]) -> None:
        self._owner = owner
        self._key = key

    def inc(self) -> None:
        self._owner.values[self._key] = self._owner.values.get(self._key, 0.0) + 1.0

    def set(self, value: float, /) -> None:
        self._owner.values[self._key] = value

    def observe(self, value: float, /) -> None:
        self._owner.observations.setdefault(self._key, []).append(value)


class RecordingMetricsProvider:
    """Keeps every value in plain dicts keyed by ``(metric, queue)``, for tests to assert on."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {}
        self.observations: dict[tuple[str, str], list[float]] = {}

    def counter(self, metric: str, queue: str) -> CounterMetric:
        return _Recorded(self, (metric, queue))

    def gauge(self, metric: str, queue: str) -> GaugeMetric:
        return _Recorded(self, (metric, queue))

    def histogram(self, metric: str, queue: str) -> HistogramMetric:
        return _Recorded(self, (metric, queue))

    def value(self, metric: str, queue: str) -> float:
        """A counter's or gauge's current value (0 if never touched)."""
        return self.values.get((metric, queue), 0.0)

    def observed(self, metric: str, queue: str) -> list[float]:
        """A histogram's observations, oldest first."""
        return list(self.observations.get((metric, queue), []))


# --------------------------------------------------------------------------------------------------
# The queue
# --------------------------------------------------------------------------------------------------


@dataclass(order=True, slots=True)
class _Waiting(Generic[T]):
    """An ``add_after`` entry in the deadline heap; superseded entries are marked dead, not removed."""

    ready_at: float
    seq: int
    item: T = field(compare=False)
    live: bool = field(default=True, compare=False)


class WorkQueue(Generic[T]):
    """A deduplicating, delaying, rate-limiting work queue of hashable keys (see the module docstring).

    ``name`` labels the metrics. ``rate_limiter`` drives :meth:`add_rate_limited` (default:
    :func:`~aiplane.kube.ratelimit.default_controller_rate_limiter` on this queue's clock).
    ``clock`` supplies time and the delayed-items timer (default :class:`RealClock`; pass a
    :class:`~aiplane.kube.ratelimit.FakeClock` to test without sleeping). ``metrics`` receives the
    controller-runtime work-queue metrics; when one is given, the unfinished-work gauges are
    refreshed every ``unfinished_work_update_period`` seconds (client-go's 500 ms; ``None`` turns the
    timer off, and :meth:`update_unfinished_work` can be called instead, e.g. at scrape time).

    ``None`` is the shutdown sentinel of :meth:`get` and so cannot be queued.
    """

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: WorkQueueMetricsProvider | None = None,
        unfinished_work_update_period: float | None = 0.5,
    ) -> None:
        if unfinished_work_update_period is not None and not unfinished_work_update_period > 0:
            raise ValueError("unfinished_work_update_period must be positive (or None to disable it)")
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=self._clock.now)
        )

        # The FIFO of items ready to hand out. Invariant: every queued item is dirty and not processing.
        self._queue: deque[T] = deque()
        # Items that need processing: queued ones, plus processing ones that were added again.
        self._dirty: set[T] = set()
        # Items handed out by get() and not yet done().
        self._processing: set[T] = set()
        # Blocked get() calls, oldest first.
        self._getters: deque[asyncio.Future[None]] = deque()

        # Delayed adds: a min-heap on deadline with lazy deletion, the live entry per item, one timer.
        self._heap: list[_Waiting[T]] = []
        self._waiting: dict[T, _Waiting[T]] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at = math.inf

        self._shutting_down = False
        self._drained = asyncio.Event()

        provider: WorkQueueMetricsProvider = metrics if metrics is not None else NoopMetricsProvider()
        self._metrics_enabled = metrics is not None
        self._m_depth = provider.gauge(WORKQUEUE_DEPTH, name)
        self._m_adds = provider.counter(WORKQUEUE_ADDS_TOTAL, name)
        self._m_retries = provider.counter(WORKQUEUE_RETRIES_TOTAL, name)
        self._m_queue_duration = provider.histogram(WORKQUEUE_QUEUE_DURATION_SECONDS, name)
        self._m_work_duration = provider.histogram(WORKQUEUE_WORK_DURATION_SECONDS, name)
        self._m_unfinished = provider.gauge(WORKQUEUE_UNFINISHED_WORK_SECONDS, name)
        self._m_longest = provider.gauge(WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS, name)
        self._add_times: dict[T, float] = {}
        self._start_times: dict[T, float] = {}
        self._unfinished_period = unfinished_work_update_period
        self._ticker: TimerHandle | None = None

    # ---------------------------------------------------------------------------------------------
    # Adding

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing.

        A no-op if it is already waiting or the queue is shutting down. If it is being processed it
        is only marked dirty and queued again by :meth:`done`, so it never runs twice at once.
        """
        if item is None:
            raise TypeError("None is the work queue's shutdown sentinel and cannot be queued")
        if self._shutting_down or item in self._dirty:
            return
        self._m_adds.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()
        self._dirty.add(item)
        if item in self._processing:
            return
        self._enqueue(item)

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (at once if ``delay <= 0``).

        If the item is already parked, the earlier of the two deadlines wins: a later request never
        postpones an earlier one. A direct :meth:`add` does not cancel a parked entry (client-go
        keeps it, so a requested requeue is not lost to an unrelated event); when it fires it is an
        ordinary ``add`` and deduplicates as usual. Counts toward ``workqueue_retries_total``.
        """
        if item is None:
            raise TypeError("None is the work queue's shutdown sentinel and cannot be queued")
        if not math.isfinite(delay):
            raise ValueError(f"delay must be a finite number of seconds, got {delay!r}")
        if self._shutting_down:
            return
        self._m_retries.inc()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.now() + delay
        existing = self._waiting.get(item)
        if existing is not None:
            if existing.ready_at <= ready_at:
                return
            existing.live = False
        entry = _Waiting(ready_at, next(self._seq), item)
        self._waiting[item] = entry
        heapq.heappush(self._heap, entry)
        self._arm_timer()

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the rate limiter's delay for it (which also counts one more requeue)."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s backoff (call after it succeeded). It does not remove it from the queue; ``done`` is still needed."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        return self._rate_limiter.num_requeues(item)

    # ---------------------------------------------------------------------------------------------
    # Taking

    async def get(self) -> T | None:
        """Wait for an item, mark it processing and return it; ``None`` once shut down and empty.

        The caller must call :meth:`done` with the item when finished. Items still queued at
        shutdown are handed out first, so workers drain the queue before they are told to stop.
        Cancelling a waiting ``get`` loses nothing: a wake-up it had received is passed on.
        """
        loop = asyncio.get_running_loop()
        self._arm_if_needed()
        while not self._queue:
            if self._shutting_down:
                return None
            waiter = loop.create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                if self._queue and not waiter.cancelled():
                    self._wake_one()
                raise
        item = self._queue.popleft()
        self._dirty.discard(item)
        self._processing.add(item)
        now = self._clock.now()
        self._m_depth.set(len(self._queue))
        added = self._add_times.pop(item, None)
        if added is not None:
            self._m_queue_duration.observe(max(0.0, now - added))
        self._start_times[item] = now
        return item

    def done(self, item: T) -> None:
        """Finish processing ``item``; if it was added meanwhile, queue it again (at the back).

        Calling it for an item that is not processing does nothing.
        """
        if item not in self._processing:
            return
        self._processing.remove(item)
        started = self._start_times.pop(item, None)
        if started is not None:
            self._m_work_duration.observe(max(0.0, self._clock.now() - started))
        if item in self._dirty:
            self._enqueue(item)
        self._check_drained()

    def __aiter__(self) -> WorkQueue[T]:
        return self

    async def __anext__(self) -> T:
        item = await self.get()
        if item is None:
            raise StopAsyncIteration
        return item

    # ---------------------------------------------------------------------------------------------
    # Introspection

    def __len__(self) -> int:
        """The depth: items waiting to be handed out (not processing, not parked by ``add_after``)."""
        return len(self._queue)

    @property
    def num_processing(self) -> int:
        """How many items are between ``get`` and ``done``."""
        return len(self._processing)

    @property
    def num_delayed(self) -> int:
        """How many distinct items are parked by ``add_after``/``add_rate_limited``."""
        return len(self._waiting)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __repr__(self) -> str:
        return (
            f"WorkQueue(name={self.name!r}, depth={len(self._queue)}, processing={len(self._processing)}, "
            f"delayed={len(self._waiting)}, shutting_down={self._shutting_down})"
        )

    # ---------------------------------------------------------------------------------------------
    # Shutdown

    def shutdown(self) -> None:
        """Stop accepting items and drop parked ones; ``get`` returns the queued rest, then ``None``.

        Safe to call more than once, and after :meth:`shutdown_with_drain`.
        """
        if not self._shutting_down:
            self._shutting_down = True
            self._cancel_timer()
            self._heap.clear()
            self._waiting.clear()
            if self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._check_drained()

    async def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """Shut down, then wait until every queued item was handed out and every handed-out one is done.

        Returns ``True`` once drained, ``False`` if ``timeout`` seconds (real time) passed first; the
        queue stays shut down either way, and workers still stop once it is empty.
        """
        self.shutdown()
        if self._drained.is_set():
            return True
        try:
            await asyncio.wait_for(self._drained.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # ---------------------------------------------------------------------------------------------
    # Metrics

    def update_unfinished_work(self) -> None:
        """Refresh ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``."""
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for started in self._start_times.values():
            age = max(0.0, now - started)
            total += age
            oldest = max(oldest, age)
        self._m_unfinished.set(total)
        self._m_longest.set(oldest)

    # ---------------------------------------------------------------------------------------------
    # Internals

    def _enqueue(self, item: T) -> None:
        self._queue.append(item)
        self._m_depth.set(len(self._queue))
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _check_drained(self) -> None:
        if self._shutting_down and not self._queue and not self._processing:
            self._drained.set()

    def _arm_if_needed(self) -> None:
        """Arm what could not be armed outside a running loop (a RealClock needs one)."""
        if self._heap and self._timer is None:
            self._arm_timer()
        if self._ticker is None:
            self._start_ticker()

    def _arm_timer(self) -> None:
        """Keep exactly one timer, set for the earliest live deadline."""
        heap = self._heap
        while heap and not heap[0].live:
            heapq.heappop(heap)
        if not heap:
            self._cancel_timer()
            return
        ready_at = heap[0].ready_at
        if self._timer is not None and self._timer_at <= ready_at:
            return
        self._cancel_timer()
        try:
            self._timer = self._clock.call_at(ready_at, self._on_timer)
        except RuntimeError:  # no running loop yet: get() arms it
            return
        self._timer_at = ready_at

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = math.inf

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        now = self._clock.now()
        heap = self._heap
        while heap and (not heap[0].live or heap[0].ready_at <= now):
            entry = heapq.heappop(heap)
            if entry.live:
                del self._waiting[entry.item]
                self.add(entry.item)
        # A timer may fire a hair early (the loop's clock resolution): re-arming covers that too.
        self._arm_timer()

    def _start_ticker(self) -> None:
        if not self._metrics_enabled or self._unfinished_period is None or self._shutting_down:
            return
        try:
            self._ticker = self._clock.call_at(self._clock.now() + self._unfinished_period, self._tick)
        except RuntimeError:
            self._ticker = None

    def _tick(self) -> None:
        self._ticker = None
        if self._shutting_down:
            return
        self.update_unfinished_work()
        self._start_ticker()

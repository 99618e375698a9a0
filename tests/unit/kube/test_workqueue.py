"""The work queue's client-go guarantees: dedup, no self-concurrency, delays, rate limits, shutdown, metrics.

Nothing here sleeps to wait for time to pass: delays run on a FakeClock, and tasks are given turns
with ``asyncio.sleep(0)`` (one real-clock test waits for a 10 ms timer under a deadline).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiplane.kube.ratelimit import FakeClock, ItemExponentialFailureRateLimiter
from aiplane.kube.workqueue import (
    WORKQUEUE_ADDS_TOTAL,
    WORKQUEUE_DEPTH,
    WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
    WORKQUEUE_METRICS,
    WORKQUEUE_QUEUE_DURATION_SECONDS,
    WORKQUEUE_RETRIES_TOTAL,
    WORKQUEUE_UNFINISHED_WORK_SECONDS,
    WORKQUEUE_WORK_DURATION_SECONDS,
    RecordingMetricsProvider,
    WorkQueue,
)


async def settle(turns: int = 10) -> None:
    """Let every runnable task take its turns (no wall-clock waiting)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def get_now(queue: WorkQueue[str]) -> str:
    """A get() that must not block: the item is expected to be queued already."""
    item = await asyncio.wait_for(queue.get(), timeout=1.0)
    assert item is not None
    return item


# --------------------------------------------------------------------------------------------------
# Basic queue semantics


async def test_add_deduplicates_and_keeps_fifo_order() -> None:
    queue = WorkQueue[str]()
    for item in ["a", "b", "a", "c", "b", "a"]:
        queue.add(item)
    assert len(queue) == 3
    assert [await get_now(queue) for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0
    assert queue.num_processing == 3


async def test_item_added_while_processing_runs_again_exactly_once_after_done() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    assert await get_now(queue) == "a"

    queue.add("a")
    queue.add("a")  # still one pending re-run
    assert len(queue) == 0  # dirty, but not handed out while processing

    other = asyncio.create_task(queue.get())
    await settle()
    assert not other.done()  # a second worker does not get "a" while the first holds it

    queue.done("a")
    assert await asyncio.wait_for(other, 1.0) == "a"
    queue.done("a")
    assert len(queue) == 0
    assert queue.num_processing == 0
    queue.done("a")  # done() for an item that is not processing is a no-op


async def test_get_blocks_until_an_item_arrives() -> None:
    queue = WorkQueue[str]()
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, 1.0) == "a"


async def test_cancelled_get_passes_its_wakeup_on() -> None:
    queue = WorkQueue[str]()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1.0) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert len(queue) == 0


async def test_none_is_reserved_for_the_shutdown_sentinel() -> None:
    queue = WorkQueue[str | None]()
    with pytest.raises(TypeError):
        queue.add(None)
    with pytest.raises(TypeError):
        queue.add_after(None, 1.0)
    with pytest.raises(ValueError):
        WorkQueue[str]().add_after("a", float("nan"))


# --------------------------------------------------------------------------------------------------
# Concurrency: random interleavings with N workers


N_WORKERS = 3
ITEMS = st.sampled_from(["a", "b", "c", "d", "e"])
OPS = st.one_of(
    st.tuples(st.just("add"), ITEMS),
    st.tuples(st.just("add_after"), ITEMS, st.sampled_from([0.0, 0.5, 1.0, 2.0])),
    st.tuples(st.just("finish"), st.integers(0, N_WORKERS - 1)),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 1.0])),
)


class _Interleaving:
    """A queue with N gated workers and a model of what it must hold after every step.

    Workers block on a per-worker gate after taking an item, so a ``finish`` op decides when each
    item is done and the random op order decides the interleaving.
    """

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.queue = WorkQueue[str](clock=self.clock)
        self.events = itertools.count()
        self.last_add: dict[str, int] = {}
        self.last_start: dict[str, int] = {}
        self.pending_after: dict[str, float] = {}  # model of add_after: earliest deadline wins
        self.held: dict[int, str] = {}  # worker -> item it is processing
        self.gates: dict[int, asyncio.Event] = {}
        self.violations: list[str] = []

    async def worker(self, n: int) -> None:
        while (item := await self.queue.get()) is not None:
            if item in self.held.values():
                self.violations.append(f"{item} handed to worker {n} while another worker holds it")
            self.held[n] = item
            self.last_start[item] = next(self.events)
            self.gates[n] = gate = asyncio.Event()
            await gate.wait()
            del self.held[n]
            self.queue.done(item)

    def fire_due(self) -> None:
        for item, deadline in list(self.pending_after.items()):
            if deadline <= self.clock.now():
                self.last_add[item] = next(self.events)
                del self.pending_after[item]

    def check(self) -> None:
        queue, held = self.queue, self.held
        queued = list(queue._queue)
        assert not self.violations, self.violations
        assert len(queued) == len(set(queued)), f"duplicate in queue: {queued}"
        assert not set(queued) & queue._processing, "an item is both queued and processing"
        assert set(queued) <= queue._dirty
        assert queue._processing == set(held.values())
        assert len(held) == len(set(held.values()))
        if len(held) < N_WORKERS:
            assert not queued, "a worker is idle while work is waiting"
        assert set(queue._waiting) == set(self.pending_after)

    def apply(self, op: tuple[object, ...]) -> None:
        match op:
            case ("add", str(item)):
                self.last_add[item] = next(self.events)
                self.queue.add(item)
            case ("add_after", str(item), float(delay)):
                if delay <= 0:
                    self.last_add[item] = next(self.events)
                else:
                    deadline = self.clock.now() + delay
                    self.pending_after[item] = min(deadline, self.pending_after.get(item, deadline))
                self.queue.add_after(item, delay)
            case ("finish", int(n)):
                if n in self.held:
                    self.gates[n].set()
            case ("tick", float(seconds)):
                self.clock.advance(seconds)
                self.fire_due()

    async def drain(self) -> None:
        """Let everything finish: fire every delayed add, release every worker, until quiet."""
        for _ in range(100):
            self.clock.advance(10.0)
            self.fire_due()
            for gate in list(self.gates.values()):
                gate.set()
            await settle()
            self.check()
            if not self.held and not len(self.queue) and not self.queue.num_delayed:
                return
        raise AssertionError("the queue never went quiet")


async def _interleave(ops: list[tuple[object, ...]]) -> None:
    world = _Interleaving()
    workers = [asyncio.create_task(world.worker(n)) for n in range(N_WORKERS)]
    await settle()
    for op in ops:
        world.apply(op)
        await settle()
        world.check()
        assert world.clock.pending_timers <= 1, "delayed items share one timer"

    await world.drain()
    for item, added in world.last_add.items():
        assert world.last_start.get(item, -1) > added, f"{item} was not processed after its last add"

    assert await world.queue.shutdown_with_drain(timeout=1.0)
    await asyncio.wait_for(asyncio.gather(*workers), 1.0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, max_size=40))
def test_random_interleavings_never_process_an_item_concurrently_with_itself(
    ops: list[tuple[object, ...]],
) -> None:
    asyncio.run(_interleave(ops))


# --------------------------------------------------------------------------------------------------
# Delays


async def test_add_after_releases_items_in_deadline_order_on_one_timer() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    queue.add_after("c", 3.0)
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    assert clock.pending_timers == 1
    assert queue.num_delayed == 3
    assert len(queue) == 0

    clock.advance(1.0)
    assert list(queue._queue) == ["a"]
    clock.advance(5.0)
    assert list(queue._queue) == ["a", "b", "c"]
    assert clock.pending_timers == 0
    assert queue.num_delayed == 0


async def test_add_after_earlier_deadline_wins_later_one_is_ignored() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    queue.add_after("a", 5.0)
    queue.add_after("a", 1.0)  # moves it earlier
    queue.add_after("a", 10.0)  # never postpones
    assert queue.num_delayed == 1
    clock.advance(0.9)
    assert len(queue) == 0
    clock.advance(0.1)
    assert list(queue._queue) == ["a"]
    clock.advance(20.0)  # no stale entry fires a second add
    assert list(queue._queue) == ["a"]
    assert clock.pending_timers == 0


async def test_add_after_zero_adds_at_once_and_deduplicates_with_add() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    queue.add_after("a", 0)
    queue.add_after("a", -1)
    queue.add("a")
    assert len(queue) == 1
    assert clock.pending_timers == 0


async def test_delayed_item_that_fires_during_processing_waits_for_done() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    queue.add("a")
    assert await get_now(queue) == "a"
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert len(queue) == 0
    queue.done("a")
    assert await get_now(queue) == "a"


async def test_add_after_on_the_real_clock() -> None:
    queue = WorkQueue[str]()
    queue.add_after("late", 0.02)
    queue.add_after("early", 0.01)
    assert await asyncio.wait_for(queue.get(), 2.0) == "early"
    assert await asyncio.wait_for(queue.get(), 2.0) == "late"


def test_add_after_outside_a_running_loop_is_armed_by_get() -> None:
    queue = WorkQueue[str]()
    queue.add_after("a", 0.01)  # no running loop: the timer cannot be armed yet

    async def take() -> str | None:
        return await asyncio.wait_for(queue.get(), 2.0)

    assert asyncio.run(take()) == "a"


# --------------------------------------------------------------------------------------------------
# Rate-limited requeues


async def test_add_rate_limited_backs_off_exponentially_and_forget_resets() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock, rate_limiter=ItemExponentialFailureRateLimiter(0.005, 1000.0))
    queue.add_rate_limited("a")  # 5 ms
    clock.advance(0.004)
    assert len(queue) == 0
    clock.advance(0.001)
    assert await get_now(queue) == "a"
    queue.add_rate_limited("a")  # 10 ms, processed again after done
    queue.done("a")
    clock.advance(0.0099)
    assert len(queue) == 0
    clock.advance(0.0001)
    assert await get_now(queue) == "a"
    assert queue.num_requeues("a") == 2

    queue.forget("a")
    queue.done("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(0.005)
    assert len(queue) == 1


async def test_default_rate_limiter_is_client_gos_controller_default() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    queue.add_rate_limited("a")
    clock.advance(0.005)
    assert len(queue) == 1
    assert queue.num_requeues("a") == 1


# --------------------------------------------------------------------------------------------------
# Shutdown


async def test_shutdown_hands_out_queued_items_then_stops_workers() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock=clock)
    processed: list[str] = []

    async def worker() -> None:
        async for item in queue:
            processed.append(item)
            queue.done(item)

    for item in "abc":
        queue.add(item)
    queue.add_after("delayed", 5.0)
    queue.shutdown()
    assert clock.pending_timers == 0  # parked items are dropped with their timer
    queue.add("ignored")
    queue.add_after("ignored", 1.0)

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(4))), 1.0)
    assert processed == ["a", "b", "c"]
    assert await queue.get() is None
    queue.shutdown()  # idempotent


async def test_shutdown_wakes_blocked_workers() -> None:
    queue = WorkQueue[str]()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shutdown()
    assert await asyncio.wait_for(asyncio.gather(*getters), 1.0) == [None, None, None]
    assert queue.shutting_down


async def test_shutdown_with_drain_waits_for_in_flight_items_and_their_reruns() -> None:
    queue = WorkQueue[str]()
    release = asyncio.Event()
    processed: list[str] = []

    async def worker() -> None:
        while (item := await queue.get()) is not None:
            await release.wait()
            processed.append(item)
            queue.done(item)

    workers = [asyncio.create_task(worker()) for _ in range(2)]
    queue.add("a")
    queue.add("b")
    await settle()
    queue.add("a")  # dirty while processing: must still run before the drain completes
    drain = asyncio.create_task(queue.shutdown_with_drain(timeout=5.0))
    await settle()
    assert not drain.done()
    release.set()
    assert await asyncio.wait_for(drain, 1.0) is True
    assert sorted(processed) == ["a", "a", "b"]
    await asyncio.wait_for(asyncio.gather(*workers), 1.0)


async def test_shutdown_with_drain_times_out_if_a_worker_never_finishes() -> None:
    queue = WorkQueue[str]()
    queue.add("stuck")
    assert await get_now(queue) == "stuck"
    assert await queue.shutdown_with_drain(timeout=0.01) is False
    queue.done("stuck")
    assert await queue.shutdown_with_drain(timeout=0.01) is True


# --------------------------------------------------------------------------------------------------
# Metrics


def test_metric_specs_use_controller_runtime_names() -> None:
    assert [spec.name for spec in WORKQUEUE_METRICS] == [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ]
    histograms = [spec for spec in WORKQUEUE_METRICS if spec.kind == "histogram"]
    assert all(spec.buckets[0] == pytest.approx(1e-8) and len(spec.buckets) == 12 for spec in histograms)


async def test_metrics_are_recorded() -> None:
    clock = FakeClock()
    metrics = RecordingMetricsProvider()
    queue = WorkQueue[str]("ctl", clock=clock, metrics=metrics, unfinished_work_update_period=1.0)

    def value(metric: str) -> float:
        return metrics.value(metric, "ctl")

    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert value(WORKQUEUE_ADDS_TOTAL) == 2  # the duplicate add is not counted
    assert value(WORKQUEUE_DEPTH) == 2

    clock.advance(2.0)
    assert await get_now(queue) == "a"  # arms the unfinished-work ticker at t=3
    assert value(WORKQUEUE_DEPTH) == 1
    assert metrics.observed(WORKQUEUE_QUEUE_DURATION_SECONDS, "ctl") == [2.0]

    clock.advance(3.0)  # ticks at t=3, 4, 5
    assert value(WORKQUEUE_UNFINISHED_WORK_SECONDS) == 3.0
    assert value(WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS) == 3.0
    assert await get_now(queue) == "b"  # queued at t=0, taken at t=5
    clock.advance(1.0)  # tick at t=6: a has run 4 s, b 1 s
    assert value(WORKQUEUE_UNFINISHED_WORK_SECONDS) == 5.0
    assert value(WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS) == 4.0

    queue.done("a")
    queue.done("b")
    assert metrics.observed(WORKQUEUE_WORK_DURATION_SECONDS, "ctl") == [4.0, 1.0]
    clock.advance(1.0)
    assert value(WORKQUEUE_UNFINISHED_WORK_SECONDS) == 0.0

    queue.add_after("c", 1.0)
    queue.add_rate_limited("c")
    assert value(WORKQUEUE_RETRIES_TOTAL) == 2
    assert value(WORKQUEUE_DEPTH) == 0

    queue.shutdown()
    assert clock.pending_timers == 0  # the ticker stops with the queue

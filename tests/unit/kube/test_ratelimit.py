"""Rate limiters and clocks: client-go's workqueue limiters and the flowcontrol token bucket, on a fake clock."""

from __future__ import annotations

import asyncio
import math

import pytest

from aiplane.kube.ratelimit import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)

# --------------------------------------------------------------------------------------------------
# FakeClock


def test_fake_clock_fires_timers_in_deadline_order_at_their_own_time() -> None:
    clock = FakeClock(start=100.0)
    fired: list[tuple[str, float]] = []
    clock.call_at(103.0, lambda: fired.append(("c", clock.now())))
    clock.call_at(101.0, lambda: fired.append(("a", clock.now())))
    cancelled = clock.call_at(102.0, lambda: fired.append(("x", clock.now())))
    cancelled.cancel()
    assert clock.pending_timers == 2

    clock.advance(2.5)
    assert fired == [("a", 101.0)]
    assert clock() == clock.now() == 102.5

    clock.advance(10)
    assert fired == [("a", 101.0), ("c", 103.0)]
    assert clock.pending_timers == 0


def test_fake_clock_fires_timers_scheduled_by_callbacks_within_the_same_advance() -> None:
    clock = FakeClock()
    fired: list[float] = []

    def tick() -> None:
        fired.append(clock.now())
        if len(fired) < 3:
            clock.call_at(clock.now() + 1.0, tick)

    clock.call_at(1.0, tick)
    clock.advance(10)
    assert fired == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        clock.advance(-1)


# --------------------------------------------------------------------------------------------------
# ItemExponentialFailureRateLimiter


def test_exponential_backoff_doubles_from_base_and_caps_at_max() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    # 0.005 * 2**17 = 655.36 s, the next doubling passes the cap.
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0, 1000.0]
    assert limiter.num_requeues("a") == 20


def test_exponential_backoff_is_per_item_and_reset_by_forget() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()  # client-go controller defaults: 5 ms, 1000 s
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.010)
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.num_requeues("a") == 2

    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.num_requeues("b") == 1
    limiter.forget("never-seen")  # harmless


def test_exponential_backoff_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](1.0, 60.0)
    for _ in range(3000):
        delay = limiter.when("a")
    assert delay == 60.0
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter[str](-1.0, 1.0)


def test_fast_slow_limiter() -> None:
    limiter = ItemFastSlowRateLimiter[str](0.1, 10.0, 2)
    assert [limiter.when("a") for _ in range(4)] == [0.1, 0.1, 10.0, 10.0]
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert limiter.when("a") == 0.1


# --------------------------------------------------------------------------------------------------
# BucketRateLimiter


def test_bucket_allows_a_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # Each further reservation queues 1/qps behind the previous one.
    assert [bucket.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])

    # 0.2 s later two of the three reserved tokens have been paid back.
    clock.advance(0.2)
    assert bucket.when("x") == pytest.approx(0.2)

    # Refill is capped at the burst size, however long it was idle.
    clock.advance(1000.0)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("y") == pytest.approx(0.1)
    assert bucket.num_requeues("y") == 0
    bucket.forget("y")


def test_bucket_paced_callers_each_get_one_token_per_interval() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=2, burst=1, clock=clock)
    assert bucket.when("a") == 0.0
    assert bucket.when("b") == pytest.approx(0.5)
    clock.advance(0.5)
    assert bucket.when("c") == pytest.approx(0.5)
    clock.advance(1.0)  # the debt is paid and one token has accrued, no more (burst 1)
    assert bucket.when("d") == 0.0
    assert bucket.when("e") == pytest.approx(0.5)


def test_bucket_validation_and_unlimited() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0, burst=1)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=float("nan"), burst=1)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=1, burst=0)
    unlimited = BucketRateLimiter(qps=math.inf, burst=0)
    assert all(unlimited.when(i) == 0.0 for i in range(1000))


# --------------------------------------------------------------------------------------------------
# MaxOfRateLimiter


def test_max_of_takes_the_worst_delay_and_forgets_everywhere() -> None:
    clock = FakeClock()
    slow = ItemExponentialFailureRateLimiter[str](1.0, 100.0)
    fast = ItemFastSlowRateLimiter[str](2.5, 50.0, 1)
    limiter = MaxOfRateLimiter(slow, fast, BucketRateLimiter(qps=1, burst=1, clock=clock))
    assert limiter.when("a") == 2.5  # max(1, 2.5, 0)
    assert limiter.when("a") == 50.0  # max(2, 50, 1)
    assert limiter.when("a") == 50.0  # max(4, 50, 2)
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert slow.num_requeues("a") == fast.num_requeues("a") == 0
    assert MaxOfRateLimiter[str]().when("a") == 0.0


def test_default_controller_rate_limiter_is_exponential_until_the_bucket_runs_dry() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.010)
    for i in range(98):
        limiter.when(i)
    # The bucket (10 qps, burst 100) is now empty: overall pacing dominates a fresh item's 5 ms.
    assert limiter.when("fresh") == pytest.approx(0.1)
    assert limiter.num_requeues("a") == 2


# --------------------------------------------------------------------------------------------------
# TokenBucket (client-side request limiter)


async def test_token_bucket_burst_then_qps_on_a_fake_clock() -> None:
    clock = FakeClock()
    limiter = TokenBucket(qps=4, burst=2, clock=clock, sleep=clock.sleep)
    waits = [await limiter.acquire() for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.0, 0.25, 0.25, 0.25])
    assert clock.now() == pytest.approx(0.75)
    assert (limiter.qps, limiter.burst) == (4, 2)


async def test_token_bucket_concurrent_callers_are_spaced_not_stampeded() -> None:
    clock = FakeClock()
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    limiter = TokenBucket(qps=4, burst=2, clock=clock, sleep=record)
    waits = await asyncio.gather(*(limiter.acquire() for _ in range(5)))
    assert waits == pytest.approx([0.0, 0.0, 0.25, 0.5, 0.75])
    assert slept == pytest.approx([0.25, 0.5, 0.75])


async def test_token_bucket_cancelled_acquire_returns_its_slot() -> None:
    clock = FakeClock()
    never = asyncio.Event()

    async def block(seconds: float) -> None:
        await never.wait()

    limiter = TokenBucket(qps=1, burst=1, clock=clock, sleep=block)
    assert await limiter.acquire() == 0.0
    waiting = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # The cancelled caller's slot is free again: the next one waits 1 s, not 2 s.
    assert limiter.try_acquire() is False
    clock.advance(1.0)
    assert limiter.try_acquire() is True
    assert limiter.try_acquire() is False


async def test_token_bucket_try_acquire_and_unlimited() -> None:
    clock = FakeClock()
    limiter = TokenBucket(qps=10, burst=3, clock=clock)
    assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
    clock.advance(0.1)
    assert limiter.try_acquire() is True
    unlimited = TokenBucket(qps=math.inf, burst=0, clock=clock)
    assert [await unlimited.acquire() for _ in range(100)] == [0.0] * 100
    assert unlimited.try_acquire()

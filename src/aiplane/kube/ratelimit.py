"""Rate limiters and clocks for the controller runtime.

Two families live here, mirroring client-go:

* **Per-item requeue limiters** (``k8s.io/client-go/util/workqueue/default_rate_limiters.go``):
  :class:`ItemExponentialFailureRateLimiter`, :class:`ItemFastSlowRateLimiter`,
  :class:`BucketRateLimiter` and :class:`MaxOfRateLimiter`. They answer "how long should this
  item wait before it is retried?" and are consumed by
  :meth:`aiplane.kube.workqueue.WorkQueue.add_rate_limited`. They never sleep: they return a delay
  and the work queue's timer does the waiting, so thousands of backing-off items cost one timer.
* **A client-side request limiter** (``k8s.io/client-go/util/flowcontrol``): :class:`TokenBucket`,
  whose ``await acquire()`` paces calls to the API server at ``qps`` with ``burst``, the way the
  REST client's ``QPS``/``Burst`` settings do.

Both token-bucket implementations share :class:`_Bucket`, a port of ``golang.org/x/time/rate``'s
reservation arithmetic: the bucket starts full, refills continuously at ``qps`` up to ``burst``,
and a reservation may drive it negative, which is how a caller learns how long to wait while its
token stays reserved (so concurrent waiters are served in order, not stampeded).

Every limiter takes an injectable ``clock`` (``Callable[[], float]``, monotonic seconds) so tests
are deterministic; :class:`FakeClock` is a manual clock that also implements the timer interface
(:class:`Clock`) that the work queue needs, so one fake time source can drive a whole controller
under test.

Nothing here is thread-safe: like the rest of :mod:`aiplane.kube` it is meant to be used from one
asyncio event loop, where every synchronous method is atomic.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RealClock",
    "TimerHandle",
    "TokenBucket",
    "default_controller_rate_limiter",
]

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


# --------------------------------------------------------------------------------------------------
# Clocks
# --------------------------------------------------------------------------------------------------


class TimerHandle(Protocol):
    """What :meth:`Clock.call_at` returns: something that can be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """A monotonic time source that can also schedule a callback.

    The work queue needs both halves: ``now`` to stamp deadlines and metrics, and ``call_at`` to
    arm its single delayed-items timer. Keeping them on one object is what lets a test swap in
    :class:`FakeClock` and advance time by hand instead of sleeping.
    """

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (synchronously, on the event loop) once ``now() >= when``."""
        ...


class RealClock:
    """:func:`time.monotonic` plus the running event loop's timers.

    ``call_at`` converts the absolute deadline to a relative ``loop.call_later`` delay, so it works
    whatever time base the loop uses (uvloop's differs from :func:`time.monotonic`). It needs a
    running loop and raises :class:`RuntimeError` otherwise, which callers treat as "arm later".
    """

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - self.now()), callback)


@dataclass(order=True)
class _FakeTimer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A manually advanced clock for deterministic tests (client-go's ``clock/testing.FakeClock``).

    Time only moves when the test calls :meth:`advance` (or awaits :meth:`sleep`); timers scheduled
    with :meth:`call_at` fire synchronously inside ``advance``, in deadline order, each seeing
    ``now()`` equal to its own deadline, so a callback that schedules a further timer due within
    the same advance fires too. A timer due at or before the current time fires on the next
    ``advance`` (``advance(0)`` is enough). Calling the instance returns ``now()``, so it can be
    passed directly as the ``clock`` of the rate limiters.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[_FakeTimer] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def __call__(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that comes due on the way."""
        if seconds < 0:
            raise ValueError("a monotonic clock cannot go backwards")
        target = self._now + seconds
        while self._timers and self._timers[0].when <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, timer.when)
            timer.callback()
        self._now = target

    async def sleep(self, seconds: float) -> None:
        """An ``asyncio.sleep`` stand-in that advances this clock instead of waiting, then yields once."""
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)

    @property
    def pending_timers(self) -> int:
        """How many scheduled, not-yet-fired, not-cancelled timers there are (lets tests assert "one timer")."""
        return sum(1 for t in self._timers if not t.cancelled)


# --------------------------------------------------------------------------------------------------
# Per-item rate limiters (workqueue)
# --------------------------------------------------------------------------------------------------


class RateLimiter(Protocol[K_contra]):
    """client-go's ``workqueue.RateLimiter``: decides how long an item waits before a retry.

    Delays are float seconds (client-go uses ``time.Duration``).
    """

    def when(self, item: K_contra) -> float:
        """The delay before ``item`` may be retried; calling it counts as one more failure/reservation."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on): its next failure starts from scratch."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-item exponential backoff: ``base * 2**failures``, capped at ``max``.

    The n-th consecutive ``when(item)`` (counting from 0) returns ``base * 2**n``; with client-go's
    controller defaults (5 ms, 1000 s) that is 5 ms, 10 ms, 20 ms, ... reaching the cap after about
    18 failures. ``forget(item)`` resets the count, which a reconciler does on success so the next
    failure backs off from ``base`` again. Giving up after some number of failures is the caller's
    business (compare :meth:`num_requeues`).
    """

    def __init__(self, base: float = 0.005, max: float = 1000.0) -> None:
        if base < 0 or max < 0:
            raise ValueError("backoff delays must be non-negative")
        self.base = base
        self.max = max
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        try:
            backoff = self.base * math.ldexp(1.0, exp)
        except OverflowError:  # 2**exp past float range: client-go's "never overflows" guard
            return self.max
        return min(backoff, self.max)

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[K]):
    """Retries quickly ``max_fast_attempts`` times, then slowly: for "poll until ready" items."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        n = self._failures.get(item, 0) + 1
        self._failures[item] = n
        return self.fast_delay if n <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class _Bucket:
    """``golang.org/x/time/rate.Limiter``'s token arithmetic (reservations of one token).

    The bucket holds ``burst`` tokens when full and gains ``qps`` tokens a second. Reserving takes a
    token even if there is none: the balance goes negative and the reservation's delay is the time
    the refill needs to pay the debt back. That makes the n-th concurrent caller wait ``n/qps``
    rather than all of them retrying at the same instant.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float]) -> None:
        if not qps > 0:  # also rejects NaN
            raise ValueError(f"qps must be positive (math.inf for unlimited), got {qps!r}")
        if burst < 1 and not math.isinf(qps):
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        # When the most recent reservation may act, and the one before it: lets a cancelled last
        # reservation be undone (see cancel).
        self._last_event = self._last
        self._prev_event = self._last

    def _advance(self, now: float) -> float:
        """The token balance at ``now`` (x/time/rate's ``advance``); a clock that went back counts as no time."""
        elapsed = max(0.0, now - self._last)
        return min(float(self.burst), self._tokens + elapsed * self.qps)

    def reserve(self) -> tuple[float, float]:
        """Take one token; return ``(delay, time_to_act)`` where ``delay`` is how long until it is ours."""
        now = self._clock()
        if math.isinf(self.qps):
            return 0.0, now
        tokens = self._advance(now) - 1.0
        delay = -tokens / self.qps if tokens < 0 else 0.0
        self._last = now
        self._tokens = tokens
        self._prev_event = self._last_event
        self._last_event = now + delay
        return delay, self._last_event

    def try_take(self) -> bool:
        """Take a token only if one is available now (client-go's ``TryAccept``)."""
        now = self._clock()
        if math.isinf(self.qps):
            return True
        tokens = self._advance(now)
        if tokens < 1.0:
            return False
        self._last = now
        self._tokens = tokens - 1.0
        return True

    def cancel(self, time_to_act: float) -> None:
        """Give back a reservation that will not be used, if nothing was reserved after it.

        x/time/rate restores ``1 - (tokens reserved after this one)``, which for single-token
        reservations is 1 for the most recent reservation and nothing for any earlier one (later
        callers already queued behind it keep their place). Mirroring that keeps the rate honest
        when a waiter is cancelled.
        """
        now = self._clock()
        if math.isinf(self.qps) or time_to_act != self._last_event or time_to_act <= now:
            return
        self._tokens = min(float(self.burst), self._advance(now) + 1.0)
        self._last = now
        self._last_event = self._prev_event


class BucketRateLimiter:
    """An overall (not per-item) token bucket: ``qps`` retries a second after a ``burst``.

    ``when`` reserves a token and returns how long until it is available, exactly like client-go's
    ``BucketRateLimiter`` over ``rate.Limiter.Reserve().Delay()``: the first ``burst`` calls get 0,
    then calls are spaced ``1/qps`` apart. It tracks no items, so ``forget`` does nothing and
    ``num_requeues`` is always 0. ``qps=math.inf`` disables it.
    """

    def __init__(
        self, qps: float = 10.0, burst: int = 100, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = _Bucket(qps, burst, clock)

    @property
    def qps(self) -> float:
        return self._bucket.qps

    @property
    def burst(self) -> int:
        return self._bucket.burst

    def when(self, item: object) -> float:
        return self._bucket.reserve()[0]

    def forget(self, item: object) -> None:
        pass

    def num_requeues(self, item: object) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """Asks every limiter and returns the worst (longest) delay.

    Every limiter is consulted on every ``when`` (so each one's state advances: the bucket's token is
    reserved even when the exponential backoff dominates), as in client-go. ``num_requeues`` is the
    maximum of the limiters' counts and ``forget`` forgets everywhere.
    """

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        self.limiters: tuple[RateLimiter[K], ...] = limiters

    def when(self, item: K) -> float:
        return max((limiter.when(item) for limiter in self.limiters), default=0.0)

    def forget(self, item: K) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return max((limiter.num_requeues(item) for limiter in self.limiters), default=0)


def default_controller_rate_limiter(
    *, clock: Callable[[], float] = time.monotonic, max_delay: float = 1000.0
) -> MaxOfRateLimiter[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: per-item 5 ms→1000 s backoff, at most 10 retries/s overall (burst 100).

    The per-item part stops one broken object from hot-looping; the bucket stops a mass failure
    (say, the API server was down) from turning into a retry storm when it recovers. ``max_delay``
    lowers the per-item cap for work that must resume soon after an outage (docs/architecture.md).
    """
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](0.005, max_delay),
        BucketRateLimiter(10.0, 100, clock=clock),
    )


# --------------------------------------------------------------------------------------------------
# Client-side request limiter (flowcontrol)
# --------------------------------------------------------------------------------------------------


class TokenBucket:
    """Paces API requests at ``qps`` with ``burst``: client-go's ``flowcontrol.NewTokenBucketRateLimiter``.

    The API client awaits :meth:`acquire` before each request. The first ``burst`` requests go
    straight through, after which they are admitted ``1/qps`` apart, in the order they asked (each
    caller reserves its slot before sleeping, so there is no thundering herd when the bucket
    refills). A cancelled ``acquire`` gives its slot back if no later caller is queued behind it.
    ``qps=math.inf`` disables limiting (client-go's ``QPS < 0``).

    ``clock`` and ``sleep`` are injectable so tests can run the pacing on a :class:`FakeClock`
    (``TokenBucket(5, 1, clock=fake, sleep=fake.sleep)``) without waiting.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._bucket = _Bucket(qps, burst, clock)
        self._sleep = sleep

    @property
    def qps(self) -> float:
        return self._bucket.qps

    @property
    def burst(self) -> int:
        return self._bucket.burst

    async def acquire(self) -> float:
        """Wait until a request may be sent; return how long this call had to wait (for client-side throttling logs/metrics)."""
        delay, time_to_act = self._bucket.reserve()
        if delay <= 0:
            return 0.0
        try:
            await self._sleep(delay)
        except BaseException:
            self._bucket.cancel(time_to_act)
            raise
        return delay

    def try_acquire(self) -> bool:
        """Take a token if one is free right now, without waiting or reserving (client-go's ``TryAccept``)."""
        return self._bucket.try_take()

"""The clock every controller reads time from, injected so that time is a test input.

Decision functions never read the clock (they take ``now``); executors ask the clock they were
given. A test hands in a :class:`FakeClock` and moves it, instead of sleeping until a timeout or a
grace period passes, which keeps time-dependent behaviour (drain timeouts, restart grace periods,
expectation timeouts) deterministic.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """Wall time for what is written to the API (timestamps), monotonic time for what is waited on."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to: both readings advance together."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

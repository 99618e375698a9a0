"""The hardware agents' work loop: an ordered set of pending work, one asyncio task, timers and retries.

The simulated hardware is an API client (the package doc), so its work is asynchronous (every write is
a request) and its input comes from informer callbacks, which may only queue work. This is the embedded
server's ``WorkLoop`` shape (each item queued once, delays as timers, failing work retried with a
doubling backoff) for ``async`` work; it is not the runtime's rate-limited ``aiplane.kube.workqueue``
because a simulated device must answer in the time it is told to take (``dcm_delay``), not after a
per-key rate limiter's delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

W = TypeVar("W", bound=Hashable)


class Worker(Generic[W]):
    """Pending work (each item once, in order), done one at a time by a task on the running loop.

    Subclasses implement :meth:`process`. Work that raises is retried after 50 ms, doubling, up to
    :attr:`max_retries` times, then dropped and logged (a later event queues it again).
    """

    name = "work"
    max_retries = 8

    def __init__(self) -> None:
        self._queue: dict[W, None] = {}
        self._failures: Counter[W] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._working = False

    async def process(self, work: W) -> None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being done (timers may still be pending)."""
        return not self._queue and not self._working

    def start_worker(self) -> None:
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"aiplane-hw-{self.name}")

    async def stop_worker(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self._queue.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def enqueue(self, work: W) -> None:
        if work not in self._queue:
            self._queue[work] = None
            if self._wakeup is not None:
                self._wakeup.set()

    def later(self, delay: float, work: W) -> asyncio.TimerHandle | None:
        """Queue ``work`` after ``delay`` seconds (at once when ``delay <= 0``); nothing without a worker."""
        if self._task is None:
            return None
        if delay <= 0:
            self.enqueue(work)
            return None
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.enqueue(work)

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)
        return handle

    def cancel(self, handle: asyncio.TimerHandle | None) -> None:
        if handle is not None:
            handle.cancel()
            self._timers.discard(handle)

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            work = next(iter(self._queue))
            del self._queue[work]
            self._working = True
            try:
                await self.process(work)
                self._failures.pop(work, None)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._retry(work)
            finally:
                self._working = False

    def _retry(self, work: W) -> None:
        self._failures[work] += 1
        if self._failures[work] <= self.max_retries:
            log.info("%s: %s failed, retrying", self.name, work, exc_info=True)
            self.later(0.05 * 2 ** self._failures[work], work)
        else:
            self._failures.pop(work, None)
            log.exception("%s: %s failed %d times, dropped", self.name, work, self.max_retries + 1)

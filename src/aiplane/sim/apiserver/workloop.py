"""A work queue drained by one task on the event loop: the shape of every in-process controller of
the embedded cluster (the garbage collector and namespace/CRD/disruption controllers in ``gc.py``,
the simulated agents in ``aiplane.sim.agents``).

Why not the runtime's ``aiplane.kube.workqueue``: these loops run *inside* the API server's store
fan-out and write through the in-process ``Api`` synchronously, so they need a synchronous
``enqueue`` callable from a store listener and a ``run_pending`` that unit tests can drain without an
event loop; the runtime queue is asyncio-first and rate-limited per key for API clients.
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


class WorkLoop(Generic[W]):
    """An ordered set of pending work (each item once), a worker task, timers and retries.

    Subclasses implement :meth:`process`. Work that raises is retried with exponential backoff
    (50 ms, doubling) up to :attr:`max_retries` times, then dropped and logged (a later event queues it
    again).
    """

    #: Used in task names and logs.
    name = "work"
    #: How many retries of failing work before it is dropped.
    max_retries = 8
    #: Items processed per turn of the event loop, so API requests are served in between.
    batch = 200

    def __init__(self) -> None:
        self._queue: dict[W, None] = {}
        self._failures: Counter[W] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._timers: set[asyncio.TimerHandle] = set()

    def process(self, work: W) -> None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def idle(self) -> bool:
        """No queued work (timers may still be pending)."""
        return not self._queue

    def start_worker(self) -> None:
        """Start the worker on the running event loop (no-op when it runs)."""
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"aiplane-sim-{self.name}")

    async def stop_worker(self, *, drop_queue: bool = True) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if drop_queue:
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
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.enqueue(work)

        handle = loop.call_later(delay, fire)
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
            self.run_pending(limit=self.batch)
            await asyncio.sleep(0)

    def run_pending(self, limit: int | None = None) -> int:
        """Do queued work now (all of it, or ``limit`` items); returns how many items were processed."""
        done = 0
        while self._queue and (limit is None or done < limit):
            work = next(iter(self._queue))
            del self._queue[work]
            try:
                self.process(work)
                self._failures.pop(work, None)
            except Exception:
                log.exception("%s: %s failed", self.name, work)
                self._retry(work)
            done += 1
        return done

    def _retry(self, work: W) -> None:
        self._failures[work] += 1
        if self._failures[work] <= self.max_retries:
            self.later(0.05 * 2 ** self._failures[work], work)
        else:
            self._failures.pop(work, None)

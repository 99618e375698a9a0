"""Waiting in tests: poll a condition with a deadline (never sleep for a fixed time and hope)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any | Awaitable[Any]],
    timeout: float = 10.0,
    what: str = "condition",
    interval: float = 0.02,
) -> Any:
    """Call ``check`` (sync or async) until it returns something truthy, and return that; fail with
    ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() >= end:
            raise AssertionError(f"{what} not met within {timeout} s")
        await asyncio.sleep(interval)

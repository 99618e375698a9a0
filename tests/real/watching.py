"""Every change of one resource on the real API server, in order, to a callback: a list, then a watch
from its resourceVersion, resumed from the last one seen when the server ends it. kube-apiserver sends
every committed change to a watch (none coalesced), so a checker called here sees each state, as the
embedded tests' store listeners do; a 410 (the history gone) fails instead of silently skipping some."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiplane.kube.client import KubeClient
from aiplane.kube.resources import Resource, resource_for

#: The test's own writes (server-side apply) are made as this field manager.
FIELD_MANAGER = "real-tier"


async def _follow(
    client: KubeClient, res: Resource, on_change: Callable[[str, dict[str, Any]], None]
) -> None:
    listed = await client.list(res)
    for obj in listed["items"]:
        on_change("ADDED", obj)
    version = listed["metadata"]["resourceVersion"]
    while True:
        async for event in client.watch(res, resource_version=version, timeout_seconds=300):
            obj = event["object"]
            if event["type"] == "ERROR":
                raise AssertionError(f"the watch of {res.plural} failed: {obj}")
            version = obj["metadata"]["resourceVersion"]
            if event["type"] != "BOOKMARK":
                on_change(event["type"], obj)


@contextlib.asynccontextmanager
async def following(
    client: KubeClient, res: Resource, on_change: Callable[[str, dict[str, Any]], None]
) -> AsyncIterator[None]:
    """``on_change(type, object)`` for every object of ``res`` now and every change while inside."""
    task = asyncio.create_task(_follow(client, res, on_change))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def apply(client: KubeClient, docs: list[dict[str, Any]]) -> None:
    """``kubectl apply --server-side --force-conflicts`` of ``docs``."""
    for doc in docs:
        res = resource_for(doc["apiVersion"], doc["kind"])
        await client.apply(res, doc, field_manager=FIELD_MANAGER, force=True)

"""An informer whose watch goes silent (a dead connection) notices, says so and relists (issue 16)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiplane.kube.client import JSON, KubeClient
from aiplane.kube.informer import Backoff, Informer, all_fresh
from aiplane.kube.metrics import Metrics
from aiplane.kube.resources import NODES
from tests.polling import eventually


class SilentWatchClient(KubeClient):
    """Lists answer at once; every watch is accepted and then never says anything (a black hole)."""

    def __init__(self) -> None:
        self.lists = 0
        self.watches = 0
        self.queries: list[Mapping[str, str]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        self.lists += 1
        node = {"metadata": {"name": "n", "resourceVersion": str(self.lists)}}
        return {"items": [node], "metadata": {"resourceVersion": str(self.lists)}}

    async def stream(self, path: str, query: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        self.queries.append(query)
        await asyncio.Event().wait()
        yield {}  # never reached


async def test_a_silent_watch_turns_stale_then_is_abandoned_and_relisted() -> None:
    client = SilentWatchClient()
    informer = Informer(
        client, NODES, watch_idle_timeout=0.4, stale_after=0.2, backoff=Backoff(initial=0.001, cap=0.01)
    )
    metrics = Metrics(process_collectors=False)
    metrics.informers.attach(lambda: [(informer.name, informer.silence(), informer.stale)])
    informer.start()
    try:
        assert await informer.wait_synced(2)
        assert not informer.stale and all_fresh([informer])
        assert client.queries[0]["allowWatchBookmarks"] == "true"
        assert 300 <= int(client.queries[0]["timeoutSeconds"]) < 600  # client-go's [min, 2 x min)

        await eventually(lambda: informer.stale, 2, "stale after 0.2 s of silence")
        assert not all_fresh([informer])
        exposed = metrics.exposition()[0].decode()
        assert 'aiplane_informer_stale{informer="nodes"} 1.0' in exposed
        assert 'aiplane_informer_last_heard_seconds{informer="nodes"}' in exposed

        await eventually(lambda: informer.stats.idle_timeouts >= 1, 2, "the watch abandoned")
        await eventually(lambda: client.lists >= 2 and not informer.stale, 2, "relisted and fresh")
        assert informer.stats.relists >= 1
        assert 'aiplane_informer_stale{informer="nodes"} 0.0' in metrics.exposition()[0].decode()
    finally:
        await informer.stop()


async def test_a_watch_that_speaks_is_never_abandoned() -> None:
    class Bookmarking(SilentWatchClient):
        async def stream(self, path: str, query: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
            self.watches += 1
            for rv in range(100, 140):
                await asyncio.sleep(0.03)
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(rv)}}}

    client = Bookmarking()
    informer = Informer(client, NODES, watch_idle_timeout=0.2, stale_after=0.1)
    informer.start()
    try:
        assert await informer.wait_synced(2)
        await eventually(lambda: informer.stats.bookmarks >= 20, 5, "bookmarks")
        assert informer.stats.idle_timeouts == 0 and client.lists == 1 and not informer.stale
    finally:
        await informer.stop()

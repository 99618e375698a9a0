"""Informer liveness: a quiet watch is normal (re-watched from its resourceVersion, never stale while the
server answers); a dead connection is abandoned, and an unreachable server makes the informer stale."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from aiplane.kube.client import JSON, ApiError, KubeClient
from aiplane.kube.informer import Backoff, Informer, all_fresh
from aiplane.kube.metrics import Metrics
from aiplane.kube.resources import NODES
from tests.polling import eventually

LIST_RV = "7"


class QuietServer(KubeClient):
    """A resource nobody writes, as kube-apiserver serves it: lists answer at once; every watch is
    accepted (its 200) and then says nothing. ``reachable = False`` black-holes the server: requests
    time out (a list after a short request deadline) and new watches are never answered; watches already
    open stay silent, as on a connection that died without a FIN."""

    def __init__(self) -> None:
        self.reachable = True
        self.lists = 0
        self.queries: list[Mapping[str, str]] = []
        self.open_streams = 0

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
        if not self.reachable:
            await asyncio.sleep(0.05)  # the client's request deadline, shortened
            raise ApiError(0, "Timeout", f"{method} {path}: no answer")
        self.lists += 1
        node = {"metadata": {"name": "n", "resourceVersion": LIST_RV}}
        return {"items": [node], "metadata": {"resourceVersion": LIST_RV}}

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        self.queries.append(query)
        self.open_streams += 1
        try:
            if self.reachable and on_open is not None:
                on_open()
            await asyncio.Event().wait()
            yield {}  # never reached
        finally:
            self.open_streams -= 1


def _fast(informer_kw: dict[str, float]) -> dict[str, Any]:
    return {**informer_kw, "backoff": Backoff(initial=0.001, cap=0.01)}


async def test_a_quiet_watch_is_rewatched_from_its_resource_version_and_never_turns_stale(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = QuietServer()
    informer = Informer(client, NODES, **_fast({"watch_idle_timeout": 0.2, "stale_after": 0.5}))
    stale_seen: list[bool] = []

    def five_quiet_watches_ended() -> bool:
        stale_seen.append(informer.stale or not all_fresh([informer]))
        return informer.stats.idle_timeouts >= 5

    caplog.set_level(logging.DEBUG, logger="aiplane.kube.informer")
    informer.start()
    try:
        assert await informer.wait_synced(2)
        assert client.queries[0]["allowWatchBookmarks"] == "true"
        assert 300 <= int(client.queries[0]["timeoutSeconds"]) < 600  # client-go's [min, 2 x min)
        # Five read deadlines (1 s) of silence: twice stale_after, and never stale.
        await eventually(five_quiet_watches_ended, 5, "five quiet watches ended by the read deadline")
        assert stale_seen and not any(stale_seen)
        assert client.lists == 1 and informer.stats.relists == 0 and informer.stats.failures == 0
        # Every watch resumed from the list's resourceVersion, one at a time (the old one was closed).
        assert {q["resourceVersion"] for q in client.queries} == {LIST_RV}
        assert client.open_streams == 1
        quiet = [r for r in caplog.records if r.name == "aiplane.kube.informer"]
        assert quiet and all(r.levelno == logging.DEBUG for r in quiet), [r.getMessage() for r in quiet]
        assert "re-watching from 7" in quiet[0].getMessage()
    finally:
        await informer.stop()


async def test_a_dead_connection_is_abandoned_and_an_unreachable_server_turns_the_informer_stale() -> None:
    client = QuietServer()
    idle, stale_after = 0.3, 0.6
    informer = Informer(client, NODES, **_fast({"watch_idle_timeout": idle, "stale_after": stale_after}))
    metrics = Metrics(process_collectors=False)
    metrics.informers.attach(lambda: [(informer.name, informer.silence(), informer.stale, False)])
    informer.start()
    try:
        assert await informer.wait_synced(2)
        await eventually(lambda: client.open_streams == 1, 2, "the watch open")
        client.reachable = False  # the open connection dies silently; the server is unreachable
        assert not informer.stale and all_fresh([informer])

        # The dead watch is abandoned at its read deadline (and new ones are never answered).
        await eventually(lambda: informer.stats.idle_timeouts >= 1, idle + 1, "the dead watch abandoned")
        assert len(client.queries) >= 2 and client.open_streams <= 1
        # Stale once nothing was heard for stale_after.
        await eventually(lambda: informer.stale, stale_after + 1, "stale")
        assert not all_fresh([informer])
        exposed = metrics.exposition()[0].decode()
        assert 'aiplane_informer_stale{informer="nodes"} 1.0' in exposed
        assert 'aiplane_informer_last_heard_seconds{informer="nodes"}' in exposed

        client.reachable = True  # the server answers again: fresh, and resumed where it was
        await eventually(lambda: not informer.stale, 2, "fresh again")
        assert client.queries[-1]["resourceVersion"] == LIST_RV
        assert 'aiplane_informer_stale{informer="nodes"} 0.0' in metrics.exposition()[0].decode()
    finally:
        await informer.stop()


async def test_a_watch_that_speaks_is_never_abandoned() -> None:
    class Bookmarking(QuietServer):
        async def stream(
            self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
        ) -> AsyncIterator[dict[str, Any]]:
            self.queries.append(query)
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


async def test_a_quiet_watch_that_lasted_resets_the_backoff_of_earlier_failures() -> None:
    """A quiet resource's watches never end on their own (the read deadline ends them): one that was
    answered and lasted counts as healthy, so a later failure starts from the shortest delay again."""

    class FailingFirst(QuietServer):
        async def stream(
            self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
        ) -> AsyncIterator[dict[str, Any]]:
            if len(self.queries) < 3:
                self.queries.append(query)
                raise ApiError(500, "InternalError", "etcd is restarting")
            async for event in super().stream(path, query, on_open=on_open):
                yield event

    client = FailingFirst()
    informer = Informer(client, NODES, **_fast({"watch_idle_timeout": 0.2, "stale_after": 0.5}))
    informer.start()
    try:
        await eventually(lambda: informer.stats.failures == 3 and client.open_streams == 1, 2, "3 failures")
        assert informer.backoff.attempts == 3
        await eventually(lambda: informer.stats.idle_timeouts >= 1, 2, "a quiet watch ended")
        assert informer.backoff.attempts == 0 and not informer.stale
    finally:
        await informer.stop()

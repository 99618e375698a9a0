"""Watch streams over HTTP (plain, in-process aiohttp test server) against kube's cacher behaviour."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.sim.apiserver import table, watch
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.apiserver.store import Event

CM_PATH = "/api/v1/namespaces/{ns}/configmaps"


def _server(history: int = 10_000) -> ApiServer:
    server = ApiServer(history_size=history)
    ns_rt = server.api.resource("v1", "Namespace")
    for name in ("a", "b"):
        server.api.create(ns_rt, None, {"metadata": {"name": name}})
    return server


@pytest.fixture
def server() -> ApiServer:
    return _server()


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(server.app()), headers={"Authorization": f"Bearer {server.token}"}) as c:
        yield c


def cm_rt(server: ApiServer) -> ResourceType:
    return server.api.resource("v1", "ConfigMap")


def put_cm(server: ApiServer, ns: str, name: str, labels: dict[str, str] | None = None, **data: str) -> None:
    body = {"metadata": {"name": name, "labels": labels or {}}, "data": data}
    if server.api.find(cm_rt(server), ns, name) is None:
        server.api.create(cm_rt(server), ns, body)
    else:
        server.api.update(cm_rt(server), ns, name, body)


async def read_events(resp: Any, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        line = await asyncio.wait_for(resp.content.readline(), max(0.01, deadline - time.monotonic()))
        if not line:
            break
        out.append(json.loads(line))
    return out


async def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def test_watch_without_resource_version_sends_current_objects_then_changes(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    put_cm(server, "a", "one")
    put_cm(server, "b", "other")
    async with client.get(CM_PATH.format(ns="a"), params={"watch": "true"}) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/json")
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        first = await read_events(resp, 1)
        put_cm(server, "a", "one", x="1")
        put_cm(server, "b", "other", x="1")  # another namespace: not this watch's business
        server.api.delete(cm_rt(server), "a", "one")
        rest = await read_events(resp, 2)
    assert summary(first + rest) == [("ADDED", "one"), ("MODIFIED", "one"), ("DELETED", "one")]
    assert rest[0]["object"]["data"] == {"x": "1"}
    assert int(rest[1]["object"]["metadata"]["resourceVersion"]) == server.store.rv - 0


async def test_watch_from_a_resource_version_replays_what_followed(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    put_cm(server, "a", "one")
    rv = server.store.rv
    put_cm(server, "a", "one", v="2")
    put_cm(server, "a", "two")
    async with client.get(CM_PATH.format(ns="a"), params={"watch": "1", "resourceVersion": str(rv)}) as resp:
        events = await read_events(resp, 2)
    assert summary(events) == [("MODIFIED", "one"), ("ADDED", "two")]
    assert events[0]["object"]["data"] == {"v": "2"}


async def test_label_selector_transitions_become_added_and_deleted(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    put_cm(server, "a", "x", {"app": "web"})
    put_cm(server, "a", "y", {"app": "db"})
    rv = server.store.rv
    params = {"watch": "1", "resourceVersion": str(rv), "labelSelector": "app=web"}
    async with client.get(CM_PATH.format(ns="a"), params=params) as resp:
        put_cm(server, "a", "x", {"app": "web"}, v="1")  # still matches: MODIFIED
        put_cm(server, "a", "x", {"app": "db"})  # stops matching: DELETED (last matching state)
        put_cm(server, "a", "y", {"app": "web"})  # starts matching: ADDED
        put_cm(server, "a", "x", {"app": "db"}, v="2")  # not matching before or after: nothing
        server.api.delete(cm_rt(server), "a", "y")
        events = await read_events(resp, 4)
    assert summary(events) == [("MODIFIED", "x"), ("DELETED", "x"), ("ADDED", "y"), ("DELETED", "y")]
    deleted = events[1]["object"]
    assert deleted["metadata"]["labels"] == {"app": "web"}  # the object as it last matched …
    assert int(deleted["metadata"]["resourceVersion"]) == rv + 2  # … at the event's resourceVersion


async def test_field_selector_on_a_named_watch(server: ApiServer, client: TestClient[Any, Any]) -> None:
    put_cm(server, "a", "x")
    put_cm(server, "a", "y")
    async with client.get(CM_PATH.format(ns="a") + "/y", params={"watch": "1"}) as resp:
        put_cm(server, "a", "x", v="1")
        put_cm(server, "a", "y", v="1")
        events = await read_events(resp, 2)
    assert summary(events) == [("ADDED", "y"), ("MODIFIED", "y")]
    async with client.get(
        CM_PATH.format(ns="a") + "/y", params={"watch": "1", "fieldSelector": "metadata.name=x"}
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["message"] == "fieldSelector metadata.name doesn't match requested name"


async def test_too_old_resource_version_is_an_error_event_not_an_http_error(
    client: TestClient[Any, Any],
) -> None:
    server = _server(history=3)
    async with TestClient(TestServer(server.app()), headers={"Authorization": f"Bearer {server.token}"}) as c:
        put_cm(server, "a", "one")
        old = server.store.rv
        for i in range(5):
            put_cm(server, "a", "one", v=str(i))
        async with c.get(CM_PATH.format(ns="a"), params={"watch": "1", "resourceVersion": str(old)}) as resp:
            assert resp.status == 200
            events = await read_events(resp, 2)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert {k: status[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
    assert status["message"].startswith(f"too old resource version: {old} (")


async def test_watch_list_sends_initial_events_then_an_annotated_bookmark(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    put_cm(server, "a", "one")
    put_cm(server, "a", "two")
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    async with client.get(CM_PATH.format(ns="a"), params=params) as resp:
        events = await read_events(resp, 3)
        put_cm(server, "a", "three")
        events += await read_events(resp, 1)
    assert summary(events)[:2] == [("ADDED", "one"), ("ADDED", "two")]
    bookmark = events[2]
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "resourceVersion": str(server.store.rv - 1),
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    assert summary(events[3:]) == [("ADDED", "three")]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"sendInitialEvents": "true"},
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            {"resourceVersionMatch": "NotOlderThan"},
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ],
)
async def test_watch_options_are_validated(
    client: TestClient[Any, Any], params: dict[str, str], message: str
) -> None:
    async with client.get(CM_PATH.format(ns="a"), params={"watch": "1", **params}) as resp:
        body = await resp.json()
    assert resp.status == 422 and body["reason"] == "Invalid"
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'


async def test_timeout_seconds_ends_the_stream_after_a_bookmark(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    started = time.monotonic()
    params = {
        "watch": "1",
        "resourceVersion": str(server.store.rv),
        "timeoutSeconds": "3",
        "allowWatchBookmarks": "1",
    }
    async with client.get(CM_PATH.format(ns="a"), params=params) as resp:
        put_cm(server, "b", "elsewhere")  # a change of the resource this watch does not select
        events = await read_events(resp, 5, timeout=10)
    elapsed = time.monotonic() - started
    assert 2.5 < elapsed < 6
    assert [e["type"] for e in events] == ["BOOKMARK"]  # sent 2 s before the deadline, as kube does
    assert events[0]["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(server.store.rv)},
    }
    assert not watch.open_watches(server)


async def test_periodic_bookmarks_come_only_once_the_resource_changed_since_the_watch_began(
    server: ApiServer, client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube's cacher: the bookmark carries the resource's last processed resourceVersion, and a watcher
    is sent nothing older than where it started, so a watch of a resource nobody writes hears nothing."""
    monkeypatch.setattr(watch, "BOOKMARK_FREQUENCY", 0.1)
    put_cm(server, "a", "one")
    start = server.store.rv
    params = {"watch": "1", "resourceVersion": str(start), "timeoutSeconds": "30", "allowWatchBookmarks": "1"}
    ns_rt = server.api.resource("v1", "Namespace")
    async with client.get(CM_PATH.format(ns="a"), params=params) as resp:
        server.api.create(ns_rt, None, {"metadata": {"name": "c"}})  # another resource: no bookmark
        assert server.store.rv > start
        with pytest.raises(TimeoutError):
            await read_events(resp, 1, timeout=0.5)  # five bookmark periods of silence
        put_cm(server, "b", "elsewhere")  # this resource, filtered out by the namespace
        changed = server.store.rv
        server.api.create(ns_rt, None, {"metadata": {"name": "d"}})
        events = await read_events(resp, 3, timeout=2)
    # Every period from now on: the same version (kube compares with the watch's start, not the last sent).
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("BOOKMARK", str(changed))
    ] * 3
    params["resourceVersion"] = str(changed)
    async with client.get(CM_PATH.format(ns="a"), params=params) as resp:
        with pytest.raises(TimeoutError):
            await read_events(resp, 1, timeout=0.5)  # started at the resource's last change: silence


async def test_a_watcher_that_falls_behind_is_closed(server: ApiServer) -> None:
    server.watch_buffer = 5  # type: ignore[attr-defined]
    session = watch.WatchSession(server, cm_rt(server), None, timeout=60, buffer=5)
    server.store.add_watcher("/configmaps", session)
    for i in range(6):
        put_cm(server, "a", f"cm{i}")
    assert session.closed and session.close_reason == "watcher buffer overflow"
    assert session not in server.store.watchers("/configmaps")


async def test_a_slow_client_over_a_socket_gets_its_stream_closed(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    server.watch_buffer = 20  # type: ignore[attr-defined]
    big = "x" * 200_000
    async with client.get(
        CM_PATH.format(ns="a"), params={"watch": "1", "resourceVersion": str(server.store.rv)}
    ) as resp:
        await until(lambda: len(watch.open_watches(server)) == 1)
        for i in range(400):  # ~80 MB the client never reads
            put_cm(server, "a", f"cm{i % 3}", blob=big + str(i))
            if not watch.open_watches(server):
                break
            if i % 10 == 0:
                await asyncio.sleep(0)  # let the writer fill the socket
        await until(lambda: not watch.open_watches(server))
        # What was written before the close still arrives, then the stream ends cleanly.
        received = 0
        while await resp.content.readline():
            received += 1
    assert 0 < received < 400


async def test_client_disconnect_unregisters_the_watcher(
    server: ApiServer, client: TestClient[Any, Any]
) -> None:
    resp = await client.get(
        CM_PATH.format(ns="a"), params={"watch": "1", "resourceVersion": str(server.store.rv)}
    )
    await until(lambda: len(server.store.watchers("/configmaps")) == 1)
    resp.close()
    await until(lambda: not server.store.watchers("/configmaps"), timeout=5)
    assert not watch.open_watches(server)


async def test_stopping_the_server_ends_open_watches(server: ApiServer) -> None:
    from aiohttp import web

    runner = web.AppRunner(server.app(), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /api/v1/namespaces/a/configmaps?watch=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
    )
    await writer.drain()
    await until(lambda: len(watch.open_watches(server)) == 1)
    started = time.monotonic()
    await runner.cleanup()
    assert time.monotonic() - started < 5
    assert not watch.open_watches(server)
    writer.close()


async def test_served_version_and_table_events(
    server: ApiServer, client: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_to_table(
        api: Any, rt: Any, objs: list[dict[str, Any]], options: Any, **kw: Any
    ) -> dict[str, Any]:
        calls.append(kw)
        table_obj: dict[str, Any] = {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": kw["list_rv"]},
            "rows": [{"cells": [o["metadata"]["name"]]} for o in objs],
        }
        if kw.get("include_column_definitions", True):
            table_obj["columnDefinitions"] = [{"name": "Name", "type": "string"}]
        return table_obj

    monkeypatch.setattr(table, "to_table", fake_to_table)
    put_cm(server, "a", "one")
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    async with client.get(CM_PATH.format(ns="a"), params={"watch": "1"}, headers=headers) as resp:
        events = await read_events(resp, 1)
        put_cm(server, "a", "two")
        events += await read_events(resp, 1)
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert "columnDefinitions" in events[0]["object"] and "columnDefinitions" not in events[1]["object"]
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["one", "two"]
    assert [c["include_column_definitions"] for c in calls] == [True, False]


def test_offer_filters_by_namespace_and_shares_encodings(server: ApiServer) -> None:
    async def go() -> None:
        a = watch.WatchSession(server, cm_rt(server), "a", timeout=60)
        b = watch.WatchSession(server, cm_rt(server), "a", timeout=60)
        for session in (a, b):
            server.store.add_watcher("/configmaps", session)
        put_cm(server, "a", "x")
        put_cm(server, "b", "x")
        assert len(a.pending) == len(b.pending) == 1
        item_a, item_b = a.pending[0], b.pending[0]
        assert isinstance(item_a[1], Event)
        assert a._encode(item_a) is b._encode(item_b)  # one line for every watcher

    asyncio.run(go())

"""One front door: the HTTP server and the in-memory client answer through the same ``dispatch.handle``.

Whatever ``handle`` answers — a verb's result, an injected fault, a watch stream — reaches both kinds of
client alike, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.kube.client import ApiError
from aiplane.kube.resources import CONFIGMAPS
from aiplane.sim.apiserver import dispatch
from aiplane.sim.apiserver.context import ServerContext
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, json_response
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.client import InMemoryKubeClient

NS = "default"
CM_PATH = CONFIGMAPS.path(NS)


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer()
    server.api.create(server.api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    return server


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(server.app()), headers={"Authorization": f"Bearer {server.token}"}) as c:
        yield c


@pytest.fixture
async def memory(server: ApiServer) -> AsyncIterator[InMemoryKubeClient]:
    kube = InMemoryKubeClient(server.api, faults=server.faults)
    yield kube
    await kube.close()


async def test_a_response_injected_at_handle_reaches_both_clients(
    server: ApiServer,
    http: TestClient[Any, Any],
    memory: InMemoryKubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, str]] = []
    real = dispatch.handle

    async def handle(ctx: ServerContext, request: ApiRequest, **kw: Any) -> ApiResponse:
        seen.append((request.method, request.path))
        if request.query.get("labelSelector") == "injected":
            return json_response({"kind": "ConfigMapList", "injected": True, "items": []})
        if request.query.get("labelSelector") == "refused":
            status = {"kind": "Status", "status": "Failure", "reason": "Teapot", "message": "no", "code": 418}
            return json_response(status, 418, {"Retry-After": "7"})
        return await real(ctx, request, **kw)

    monkeypatch.setattr(dispatch, "handle", handle)

    async with http.get(CM_PATH, params={"labelSelector": "injected"}) as resp:
        assert resp.status == 200 and (await resp.json())["injected"] is True
    assert (await memory.list(CONFIGMAPS, NS, label_selector="injected"))["injected"] is True

    async with http.get(CM_PATH, params={"labelSelector": "refused"}) as resp:
        over_http = ApiError.from_response(resp.status, await resp.read(), resp.headers)
    with pytest.raises(ApiError) as caught:
        await memory.list(CONFIGMAPS, NS, label_selector="refused")
    in_memory = caught.value
    assert (
        (in_memory.status, in_memory.reason, in_memory.message, in_memory.retry_after)
        == (
            over_http.status,
            over_http.reason,
            over_http.message,
            over_http.retry_after,
        )
        == (418, "Teapot", "no", 7.0)
    )
    assert seen == [("GET", CM_PATH)] * 4


async def test_faults_and_watch_events_are_the_same_through_both_doors(
    server: ApiServer, http: TestClient[Any, Any], memory: InMemoryKubeClient
) -> None:
    server.faults.add(verb="list", resource="configmaps", error=503, count=2)
    async with http.get(CM_PATH) as resp:
        assert resp.status == 503
        over_http = await resp.json()
    with pytest.raises(ApiError) as caught:
        await memory.list(CONFIGMAPS, NS)
    assert caught.value.body == over_http

    stream = memory.watch(CONFIGMAPS, NS)
    async with http.get(CM_PATH, params={"watch": "1"}) as resp:
        await memory.create(CONFIGMAPS, {"metadata": {"name": "a", "namespace": NS}, "data": {"k": "v"}})
        line = await asyncio.wait_for(resp.content.readline(), 5)
        from_memory = await asyncio.wait_for(anext(stream), 5)
        assert json.loads(line) == from_memory
        assert server.faults.close_watches("configmaps") == 2  # both doors registered their watch
        assert await resp.content.readline() == b""  # the HTTP stream ends
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(stream), 5)

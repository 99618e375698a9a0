"""Fault injection: the rules, the spec grammar, and the HTTP interface."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.sim.apiserver import watch
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.faults import Faults, ResourceMatch, parse_spec
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.server import ApiServer

CM = "/api/v1/namespaces/a/configmaps"


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer()
    server.api.create(server.api.resource("v1", "Namespace"), None, {"metadata": {"name": "a"}})
    return server


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(server.app()), headers={"Authorization": f"Bearer {server.token}"}) as c:
        yield c


def rt(server: ApiServer, api_version: str = "v1", kind: str = "ConfigMap") -> ResourceType:
    return server.api.resource(api_version, kind)


async def outcome(
    faults: Faults,
    verb: str,
    rtype: ResourceType,
    sub: str | None = None,
    ns: str | None = "a",
    name: str | None = "x",
) -> int:
    try:
        await faults.before(verb, rtype, sub, ns, name)
    except ApiError as err:
        return err.code
    return 200


def test_the_spec_grammar() -> None:
    assert parse_spec("verb=patch,resource=pods,error=500,count=3") == {
        "verb": "patch",
        "resource": "pods",
        "error": "500",
        "count": "3",
    }
    assert parse_spec(" verb = get , latency=0.2 ") == {"verb": "get", "latency": "0.2"}
    assert parse_spec("resource=nodes,close-watches=1") == {"resource": "nodes", "close_watches": "1"}
    for bad in ("", "verb", "colour=red", "verb=get,verb=list"):
        with pytest.raises(ValueError):
            parse_spec(bad)
    faults = Faults()
    for bad in (
        "verb=get",
        "verb=fly,error=500",
        "error=200",
        "latency=-1",
        "verb=patch,close-watches=1",
        "resource=pods/,error=500",
        "nth=0,error=500",
    ):
        with pytest.raises(ValueError):
            faults.add_spec(bad)
    handle = faults.add_spec(
        "verb=get|list,resource=deployments.apps/scale,namespace=a,error=429,retry-after=3,nth=2"
    )
    assert (
        handle.rule.spec()
        == "verb=get|list,resource=deployments.apps/scale,namespace=a,error=429,retry-after=3,after=1,count=1"
    )


def test_resource_matching(server: ApiServer) -> None:
    pods, deploy = rt(server, "v1", "Pod"), rt(server, "apps/v1", "Deployment")
    assert ResourceMatch.parse("pods").matches(pods, None)
    assert not ResourceMatch.parse("pods").matches(pods, "status")
    assert ResourceMatch.parse("pods/status").matches(pods, "status")
    assert ResourceMatch.parse("pods/*").matches(pods, "eviction")
    assert ResourceMatch.parse("deployments.apps").matches(deploy, None)
    assert not ResourceMatch.parse("deployments.extensions").matches(deploy, None)


async def test_count_nth_and_after(server: ApiServer) -> None:
    faults = Faults()
    cms = rt(server)
    faults.add(verb="write", resource="configmaps", error=500, nth=3)
    assert [await outcome(faults, "update", cms) for _ in range(5)] == [200, 200, 500, 200, 200]
    faults.clear()
    handle = faults.add(verb="get", error=503, count=2)
    assert [await outcome(faults, "get", cms) for _ in range(4)] == [503, 503, 200, 200]
    assert (handle.matched, handle.applied) == (4, 2)
    handle.remove()
    faults.add(verb="patch", error=409, after=1, count=2)
    assert [await outcome(faults, "patch", cms) for _ in range(4)] == [200, 409, 409, 200]
    assert await outcome(faults, "get", cms) == 200


async def test_namespace_and_verb_filters(server: ApiServer) -> None:
    faults = Faults()
    with faults.add(verb="list|watch", namespace="a", error=500):
        assert await outcome(faults, "list", rt(server), ns="a") == 500
        assert await outcome(faults, "list", rt(server), ns="b") == 200
        assert await outcome(faults, "get", rt(server), ns="a") == 200
    assert not faults.rules


async def test_errors_are_kube_statuses(server: ApiServer) -> None:
    faults = Faults()
    faults.add(error=429, retry_after=7, count=1)
    with pytest.raises(ApiError) as caught:
        await faults.before("get", rt(server), None, "a", "x")
    err = caught.value
    assert err.headers == {"Retry-After": "7"}
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Too many requests, please try again later.",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 7},
        "code": 429,
    }
    faults.add(error=409, count=1)
    with pytest.raises(ApiError) as caught:
        await faults.before("update", rt(server), None, "a", "x")
    assert caught.value.reason == "Conflict"
    assert caught.value.message == (
        'Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )
    faults.add(error=500, message="etcd went away", count=1)
    with pytest.raises(ApiError) as caught:
        await faults.before("update", rt(server), None, "a", "x")
    assert (caught.value.reason, caught.value.message) == (
        "InternalError",
        "Internal error occurred: etcd went away",
    )


async def test_latency_delays_requests(server: ApiServer) -> None:
    faults = Faults()
    faults.add(verb="get", latency=0.2)
    started = time.monotonic()
    assert await outcome(faults, "get", rt(server)) == 200
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    await outcome(faults, "list", rt(server))
    assert time.monotonic() - started < 0.2  # the latency applies to gets only


async def test_http_requests_see_the_faults(server: ApiServer, client: TestClient[Any, Any]) -> None:
    server.faults.add_spec("verb=create,resource=configmaps,error=429,retry-after=2,count=1")
    body = {"metadata": {"name": "x"}}
    async with client.post(CM, json=body) as resp:
        assert resp.status == 429 and resp.headers["Retry-After"] == "2"
        assert (await resp.json())["reason"] == "TooManyRequests"
    async with client.post(CM, json=body) as resp:
        assert resp.status == 201


async def test_the_http_interface(server: ApiServer, client: TestClient[Any, Any]) -> None:
    async with client.post("/_sim/faults", json={"spec": "verb=get,resource=configmaps,error=500"}) as resp:
        assert resp.status == 201
        created = await resp.json()
    assert created["spec"] == "verb=get,resource=configmaps,error=500" and created["applied"] == 0
    async with client.post(
        "/_sim/faults", json={"verb": "list", "error": 503, "retryAfter": 4, "count": 1}
    ) as resp:
        assert resp.status == 201
    async with client.get(CM + "/x") as resp:
        assert resp.status == 500
    async with client.get("/_sim/faults") as resp:
        listed = await resp.json()
    assert [i["applied"] for i in listed["items"]] == [1, 0]
    async with client.delete(f"/_sim/faults/{created['id']}") as resp:
        assert resp.status == 200
    async with client.get(CM + "/x") as resp:
        assert resp.status == 404
    async with client.post("/_sim/faults", json={"spec": "verb=fly"}) as resp:
        assert resp.status == 400 and "unknown verb" in (await resp.json())["message"]
    async with client.post("/_sim/faults", json={"colour": "red"}) as resp:
        assert resp.status == 400
    async with client.delete("/_sim/faults") as resp:
        assert await resp.json() == {"removed": 1}
    async with client.get("/_sim/faults", headers={"Authorization": "Bearer wrong"}) as resp:
        assert resp.status == 401


async def test_close_watches_now_and_after_a_delay(server: ApiServer, client: TestClient[Any, Any]) -> None:
    async def open_watch() -> Any:
        resp = await client.get(CM, params={"watch": "1", "resourceVersion": str(server.store.rv)})
        deadline = time.monotonic() + 5
        while len(server.faults._watches) < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        return resp

    resp = await open_watch()
    async with client.post("/_sim/faults/close-watches", json={"resource": "configmaps"}) as answer:
        assert await answer.json() == {"closed": 1}
    assert await asyncio.wait_for(resp.content.read(), 5) == b""
    resp.close()

    server.faults.add_spec("resource=configmaps,close-watches=0.3,count=1")
    started = time.monotonic()
    resp = await open_watch()
    assert await asyncio.wait_for(resp.content.read(), 5) == b""
    assert 0.25 < time.monotonic() - started < 3
    resp.close()
    assert not watch.open_watches(server)
    # count=1: the next watch is left alone.
    resp = await open_watch()
    assert server.faults.close_watches("pods") == 0
    assert server.faults.close_watches() == 1
    assert json.loads(await asyncio.wait_for(resp.content.read(), 5) or b"{}") == {}
    resp.close()

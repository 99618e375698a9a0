"""The demo's views on a real control plane are fed by watches (``aiplane.demo.real.WatchFeed``): over
HTTP, a listener sees every change of a watched resource, in resourceVersion order, keyed as the embedded
store keys it, and an unserved resource is left out instead of holding the feed back."""

from __future__ import annotations

from aiplane.demo.real import WatchFeed, WriteCounter, storage_key
from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import CONFIGMAPS, NAMESPACES, Resource
from aiplane.sim.apiserver.store import Event
from tests.polling import eventually

NOT_SERVED = Resource("example.invalid", "v1", "widgets", "Widget", namespaced=False)


async def test_every_change_in_order_and_unserved_apis_left_out(client: HttpKubeClient) -> None:
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}})
    feed = WatchFeed(client)
    await feed.start([CONFIGMAPS, NOT_SERVED])
    assert feed.served(CONFIGMAPS) and not feed.served(NOT_SERVED)
    seen: list[Event] = []
    feed.subscribe(seen.append)
    try:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "0"}}
        versions = [(await client.create(CONFIGMAPS, body, namespace="w"))["metadata"]["resourceVersion"]]
        for n in range(1, 4):
            patched = await client.patch(CONFIGMAPS, "c", {"data": {"n": str(n)}}, namespace="w")
            versions.append(patched["metadata"]["resourceVersion"])
        await client.delete(CONFIGMAPS, "c", namespace="w")
        await eventually(lambda: any(e.type == "DELETED" for e in seen), what="the deletion seen")
    finally:
        feed.unsubscribe(seen.append)
        await feed.stop()
    mine = [e for e in seen if e.obj["metadata"]["name"] == "c"]
    assert [e.type for e in mine] == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    assert [str(e.rv) for e in mine[:4]] == versions
    assert {e.key for e in mine} == {storage_key(CONFIGMAPS)} == {"/configmaps"}
    assert [e.obj["data"]["n"] for e in mine[:4]] == ["0", "1", "2", "3"]


def test_the_write_counter_counts_write_methods_only() -> None:
    counter = WriteCounter()
    for method in ("GET", "POST", "WATCH", "PUT", "PATCH", "DELETE", "GET"):
        counter(method, 200, "https://127.0.0.1")
    assert counter.writes == 4
    counter.reset_counts()
    assert counter.writes == 0

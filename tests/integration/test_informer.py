"""Informers against the embedded API server, over HTTPS with injected faults and in memory.

The claim under test is the informer's contract: a handler's view of every object converges to the
server's, nothing is missed and nothing is delivered twice — across dropped watches, 410 Gone, broken
streams, failing requests and expired list snapshots — and the cache and its indexes stay exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.meta import object_key
from aiplane.kube.client import JSON, ApiError, HttpKubeClient, KubeClient
from aiplane.kube.informer import (
    NAMESPACE_INDEX,
    OWNER_INDEX,
    Backoff,
    Cache,
    Informer,
    InformerFactory,
    diff,
    object_rv,
)
from aiplane.kube.resources import CONFIGMAPS, NODES
from aiplane.sim.apiserver import watch
from aiplane.sim.apiserver.errors import ApiError as SimApiError
from aiplane.sim.apiserver.faults import FaultHandle, Faults
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster

Obj = dict[str, Any]
NS = "inf"


def fast_backoff() -> Backoff:
    return Backoff(initial=0.002, cap=0.02)


async def until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        await asyncio.sleep(0.005)


def cm(name: str, labels: Mapping[str, str] | None = None, owners: Iterable[Obj] = (), **data: str) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(labels or {})}
    refs = list(owners)
    if refs:
        meta["ownerReferences"] = refs
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


def owner_ref(owner: Obj, *, controller: bool = True) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
    }


async def make_namespace(api: Api) -> None:
    """The namespace, once the simulated controller-manager has added its ``kube-root-ca.crt``."""
    api.create(api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    cm_rt = api.resource("v1", "ConfigMap")
    await until(lambda: api.find(cm_rt, NS, "kube-root-ca.crt") is not None)


class Recorder:
    """A handler that replays what it is told and notes every inconsistency a duplicate or a miss causes.

    Problems are collected, not raised: the informer logs and swallows handler exceptions.
    """

    def __init__(self, informer: Informer, *, monotonic: bool = True) -> None:
        self.monotonic = monotonic  # the sim's resourceVersions are increasing integers
        self.state: dict[str, Obj] = {}
        self.delivered: set[tuple[str, str]] = set()
        self.problems: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        informer.add_handler(self.on_add, self.on_update, self.on_delete)

    def _deliver(self, kind: str, key: str, obj: Obj) -> None:
        rv = object_rv(obj)
        if (key, rv) in self.delivered:
            self.problems.append(f"{kind} {key}@{rv} delivered twice")
        self.delivered.add((key, rv))
        self.events.append((kind, key, rv))

    def on_add(self, obj: Obj) -> None:
        key = object_key(obj)
        if key in self.state:
            self.problems.append(f"add of {key}, which the handler already has")
        if "managedFields" in obj["metadata"]:
            self.problems.append(f"{key} delivered with managedFields")
        self._deliver("add", key, obj)
        self.state[key] = obj

    def on_update(self, old: Obj, new: Obj) -> None:
        key = object_key(new)
        current = self.state.get(key)
        if current is None:
            self.problems.append(f"update of {key}, which the handler does not have")
        elif object_rv(current) != object_rv(old):
            self.problems.append(
                f"update of {key} from {object_rv(old)}, the handler has {object_rv(current)}"
            )
        if self.monotonic and int(object_rv(new)) <= int(object_rv(old)):
            self.problems.append(f"update of {key} goes back from {object_rv(old)} to {object_rv(new)}")
        self._deliver("update", key, new)
        self.state[key] = new

    def on_delete(self, obj: Obj) -> None:
        key = object_key(obj)
        if self.state.pop(key, None) is None:
            self.problems.append(f"delete of {key}, which the handler does not have")
        self.events.append(("delete", key, object_rv(obj)))

    def view(self) -> dict[str, tuple[str, Any]]:
        return {key: (object_rv(obj), obj.get("data")) for key, obj in self.state.items()}


def server_view(
    api: Api, rt: ResourceType, selector: Callable[[Obj], bool] = lambda o: True
) -> dict[str, tuple[str, Any]]:
    return {object_key(obj): (object_rv(obj), obj.get("data")) for obj in api.items(rt, NS) if selector(obj)}


async def http_client(cluster: EmbeddedCluster) -> HttpKubeClient:
    from kubernetes_asyncio import config
    from kubernetes_asyncio.client import Configuration

    configuration = Configuration()
    await config.load_kube_config_from_dict(cluster.kubeconfig(), client_configuration=configuration)
    return HttpKubeClient(configuration, qps=float("inf"))


# --- over HTTPS, with faults ---------------------------------------------------------------------------


class Churn:
    """Seeded writes to a fixed population of ConfigMaps, over HTTP and in process.

    One generator for both paths keeps the whole write sequence reproducible from the seed.
    """

    def __init__(
        self, http: HttpKubeClient, api: Api, rt: ResourceType, *, seed: int, population: int
    ) -> None:
        self.http = http
        self.api = api
        self.rt = rt
        self.rng = random.Random(seed)
        self.population = population
        self.counter = 0

    async def write_over_http(self) -> None:
        self.counter += 1
        name, op = f"cm{self.rng.randrange(self.population)}", self.rng.random()
        try:
            if op < 0.6:
                await self.http.patch(CONFIGMAPS, name, {"data": {"v": str(self.counter)}}, namespace=NS)
            elif op < 0.8:
                await self.http.delete(CONFIGMAPS, name, namespace=NS)
            else:
                await self.http.create(CONFIGMAPS, cm(name, v=str(self.counter)))
        except ApiError as err:
            assert err.not_found or err.already_exists, err

    def write_in_process(self, count: int) -> None:
        """A burst the informer cannot see happen: no await between the writes."""
        api, rt, rng = self.api, self.rt, self.rng
        for _ in range(count):
            self.counter += 1
            name = f"cm{rng.randrange(self.population)}"
            with contextlib.suppress(SimApiError):
                if rng.random() < 0.85:
                    api.update(rt, NS, name, cm(name, v=str(self.counter)))
                else:
                    api.delete(rt, NS, name)
                continue
            with contextlib.suppress(SimApiError):
                api.create(rt, NS, cm(name, v=str(self.counter)))

    async def round(self, round_: int, faults: Faults) -> None:
        """Three HTTP writes, then one of four watch disruptions in turn."""
        for _ in range(3):
            await self.write_over_http()
        step = round_ % 4
        if step == 0:  # dropped watch, resumable: fewer writes than the history holds
            faults.close_watches("configmaps")
            self.write_in_process(2)
        elif step == 1:  # dropped watch, then more writes than the history holds: 410 on re-watch
            faults.close_watches("configmaps")
            self.write_in_process(8)
        elif step == 2:  # a burst the open watch must deliver in full
            self.write_in_process(8)
        else:
            await asyncio.sleep(0.005)


def inject_watch_faults(faults: Faults) -> list[FaultHandle]:
    return [
        faults.add(verb="watch", resource="configmaps", error=500, nth=4),  # a watch request fails
        faults.add(verb="list", resource="configmaps", error=500, nth=3),  # and a relist
        faults.add(verb="watch", resource="configmaps", error=429, retry_after=0, nth=9),
        faults.add(resource="configmaps", close_watches=0.05, after=12, count=4),  # short-lived watches
    ]


async def test_no_update_is_missed_or_duplicated_across_dropped_watches_410s_and_errors() -> None:
    cluster = EmbeddedCluster(history_size=4, install_crds=False)
    await cluster.start()
    http = await http_client(cluster)
    api = cluster.api
    rt = api.resource("v1", "ConfigMap")
    faults = cluster.server.faults
    population = 25
    churn = Churn(http, api, rt, seed=20260301, population=population)
    informer = Informer(http, CONFIGMAPS, NS, page_size=5, backoff=fast_backoff())
    try:
        await make_namespace(api)
        for i in range(population):
            api.create(rt, NS, cm(f"cm{i}", v="0"))
        recorder = Recorder(informer)
        informer.start()
        assert await informer.wait_synced(10)

        injected = inject_watch_faults(faults)
        for round_ in range(48):
            await churn.round(round_, faults)
        applied = [f.applied for f in injected]
        faults.clear()

        await until(lambda: recorder.view() == server_view(api, rt), what="the handler's view converging")
        assert recorder.problems == []
        assert {
            k: (object_rv(o), o.get("data")) for k, o in zip(informer.keys(), informer.list(), strict=True)
        } == (server_view(api, rt))
        stats = informer.stats
        # The scenario really exercised what it claims to.
        assert applied == [1, 1, 1, 4]
        assert stats.relists >= 8 and stats.watches >= 25 and stats.failures >= 3, stats
        assert stats.lists > stats.relists + 1  # pagination (5 per page)
    finally:
        await informer.stop()
        await http.close()
        await cluster.stop()


# --- in memory ---------------------------------------------------------------------------------------


class BreakingClient(InMemoryKubeClient):
    """Breaks the next watch stream like a lost connection (status 0) after ``break_after`` events."""

    break_after: int | None = None

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[Obj]:
        inner = cast(AsyncGenerator[Obj, None], super().stream(path, query, on_open=on_open))
        async with contextlib.aclosing(inner):
            count = 0
            async for event in inner:
                if self.break_after is not None and count >= self.break_after:
                    self.break_after = None
                    raise ApiError(0, "ConnectionError", "watch: connection reset by peer")
                count += 1
                yield event


async def test_a_broken_stream_relists_and_delivers_the_rest_once() -> None:
    kube = BreakingClient.fresh(install_crds=False)
    rt = kube.api.resource("v1", "ConfigMap")
    await make_namespace(kube.api)
    for i in range(5):
        kube.api.create(rt, NS, cm(f"c{i}"))
    informer = Informer(kube, CONFIGMAPS, NS, backoff=fast_backoff())
    recorder = Recorder(informer)
    informer.start()
    try:
        assert await informer.wait_synced(5)
        kube.break_after = 2
        for round_ in range(3):
            for i in range(5):
                await kube.patch(CONFIGMAPS, f"c{i}", {"data": {"r": str(round_)}}, namespace=NS)
        await kube.delete(CONFIGMAPS, "c4", namespace=NS)
        await until(lambda: recorder.view() == server_view(kube.api, rt))
        assert recorder.problems == []
        assert informer.stats.relists == 1 and informer.stats.failures == 1
        updates = [e for e in recorder.events if e[0] == "update"]
        # Two updates came through the watch before it broke; the relist (and the next watch) the rest.
        assert 3 <= len(updates) <= 15
    finally:
        await informer.stop()
        await kube.close()
    assert not kube.api.store.watchers()


def page(items: list[Obj], rv: str, cont: str | None = None) -> Obj:
    meta: Obj = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": items}


def item(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv}, "data": {"rv": rv}}


def event(kind: str, obj: Obj) -> Obj:
    return {"type": kind, "object": {"apiVersion": "v1", "kind": "ConfigMap", **obj}}


def bookmark(rv: str) -> Obj:
    return {
        "type": "BOOKMARK",
        "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": rv}},
    }


GONE_EVENT = {
    "type": "ERROR",
    "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"},
}

Step = Obj | ApiError


class ScriptedClient(KubeClient):
    """Answers the informer's lists and watches from scripts and records what it asked for."""

    def __init__(self, lists: list[Step], watches: list[list[Step] | ApiError]) -> None:
        self.lists: deque[Step] = deque(lists)
        self.watches: deque[list[Step] | ApiError] = deque(watches)
        self.list_queries: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []
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
        assert (method, path) == ("GET", CONFIGMAPS.path(NS))
        self.list_queries.append(dict(query or {}))
        step = self.lists.popleft()
        if isinstance(step, ApiError):
            raise step
        return step

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_queries.append(dict(query))
        self.open_streams += 1
        try:
            if not self.watches:
                await asyncio.Event().wait()  # an idle watch, until cancelled
            script = self.watches.popleft()
            if isinstance(script, ApiError):
                raise script
            if on_open is not None:
                on_open()
            for step in script:
                if isinstance(step, ApiError):
                    raise step
                yield step
        finally:
            self.open_streams -= 1


async def test_the_list_watch_protocol_step_by_step() -> None:
    a1, b2, c3 = item("a", "1"), item("b", "2"), item("c", "3")
    a11, b20, d21, e30 = item("a", "11"), item("b", "20"), item("d", "21"), item("e", "30")
    client = ScriptedClient(
        lists=[
            page([a1, b2], "10", cont="t1"),
            page([c3], "10"),
            page([a11, b20, d21], "21"),  # after the 410 event: b changed, d new, c gone, a as watched
            page([a11, b20, d21], "22"),  # after the broken stream: nothing changed
            ApiError(500, "InternalError", "boom"),  # after the HTTP 410: one failed list
            page([a11, d21, e30], "30"),
        ],
        watches=[
            [event("MODIFIED", a11), bookmark("15")],  # then ends normally: re-watch from the bookmark
            [GONE_EVENT],
            [event("ADDED", d21), ApiError(0, "ConnectionError", "reset")],  # a duplicate, then a break
            ApiError(429, "TooManyRequests", "slow down", retry_after=0),  # re-watch, no relist
            ApiError(410, "Expired", "too old"),
            [event("DELETED", item("d", "31"))],
        ],
    )
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        await asyncio.sleep(0)

    informer = Informer(client, CONFIGMAPS, NS, backoff=Backoff(initial=1.0, jitter=0.0), sleep=sleep)
    recorder = Recorder(informer)
    informer.start()
    try:
        await until(lambda: len(client.watch_queries) == 7 and client.open_streams == 1, timeout=5)
    finally:
        await informer.stop()
    assert client.open_streams == 0  # cancelling closed the idle stream

    assert recorder.problems == []
    assert recorder.events == [
        ("add", "inf/a", "1"),
        ("add", "inf/b", "2"),
        ("add", "inf/c", "3"),
        ("update", "inf/a", "11"),
        ("update", "inf/b", "20"),
        ("add", "inf/d", "21"),
        ("delete", "inf/c", "3"),
        ("add", "inf/e", "30"),
        ("delete", "inf/b", "20"),
        ("delete", "inf/d", "31"),
    ]
    assert [q.get("resourceVersion") for q in client.watch_queries] == [
        "10",
        "15",
        "21",
        "22",
        "22",
        "30",
        "31",
    ]
    assert all(q["allowWatchBookmarks"] == "true" and q["watch"] == "true" for q in client.watch_queries)
    assert (
        client.list_queries == [{"limit": "500"}, {"limit": "500", "continue": "t1"}] + [{"limit": "500"}] * 4
    )
    # The first 410 relists at once; the broken stream, the 429, the second 410 and the failed list back off.
    assert delays == [1.0, 2.0, 4.0, 8.0]
    stats = informer.stats
    assert (stats.lists, stats.relists, stats.watches, stats.expired, stats.bookmarks, stats.failures) == (
        6,
        3,
        7,
        2,
        1,
        4,
    )
    assert informer.resource_version == "31" and sorted(informer.keys()) == ["inf/a", "inf/e"]


async def test_an_expired_continue_token_restarts_as_one_full_list_scripted() -> None:
    client = ScriptedClient(
        lists=[
            page([item("a", "1")], "5", cont="t"),
            ApiError(410, "Expired", "The provided continue parameter is too old"),
            page([item("a", "6"), item("b", "7")], "7"),
        ],
        watches=[],
    )
    informer = Informer(client, CONFIGMAPS, NS)
    recorder = Recorder(informer)
    informer.start()
    try:
        assert await informer.wait_synced(5)
    finally:
        await informer.stop()
    assert client.list_queries == [{"limit": "500"}, {"limit": "500", "continue": "t"}, {}]
    assert recorder.events == [("add", "inf/a", "6"), ("add", "inf/b", "7")]  # nothing of the stale page
    assert informer.stats.expired == 1 and informer.stats.failures == 0


class PageHook(InMemoryKubeClient):
    """Runs ``after_first_page`` once, right after a list page that has a continue token."""

    after_first_page: Callable[[], None] | None = None

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        result = await super().request(method, path, **kw)
        if result.get("metadata", {}).get("continue") and self.after_first_page is not None:
            hook, self.after_first_page = self.after_first_page, None
            hook()
        return result


async def test_pagination_over_500_objects_and_an_expired_snapshot() -> None:
    kube = PageHook.fresh(install_crds=False, history_size=5)
    rt = kube.api.resource("v1", "ConfigMap")
    await make_namespace(kube.api)
    for i in range(1203):
        kube.api.create(rt, NS, {"metadata": {"name": f"c{i:04}", "namespace": NS}})
    expected = server_view(kube.api, rt)
    try:
        kube.reset_counts()
        informer = Informer(kube, CONFIGMAPS, NS, backoff=fast_backoff())
        recorder = Recorder(informer)
        informer.start()
        assert await informer.wait_synced(10)
        await informer.stop()
        assert kube.requests["list"] == 3  # 500 + 500 + 204 (kube-root-ca.crt included)
        assert recorder.view() == expected and len(recorder.events) == len(expected) == 1204
        assert recorder.problems == []

        # Writes between two pages expire the snapshot (the history holds 5 events): one full list.
        def burst() -> None:
            for i in range(8):
                kube.api.update(rt, NS, f"c{i:04}", {"metadata": {"name": f"c{i:04}"}, "data": {"x": "1"}})
            kube.api.delete(rt, NS, "c1000")

        kube.reset_counts()
        kube.after_first_page = burst
        informer = Informer(kube, CONFIGMAPS, NS, backoff=fast_backoff())
        recorder = Recorder(informer)
        informer.start()
        assert await informer.wait_synced(10)
        await informer.stop()
        assert kube.requests["list"] == 3  # page 1, page 2 answered 410, the full list
        assert informer.stats.expired == 1
        assert recorder.view() == server_view(kube.api, rt) and len(recorder.events) == 1203
        assert recorder.problems == []
    finally:
        await kube.close()


async def test_indexes_follow_updates_and_deletes() -> None:
    kube = InMemoryKubeClient.fresh(install_crds=False)
    api, rt = kube.api, kube.api.resource("v1", "ConfigMap")
    await make_namespace(api)
    o1 = api.create(rt, NS, cm("o1")).obj
    o2 = api.create(rt, NS, cm("o2")).obj
    uid1, uid2 = o1["metadata"]["uid"], o2["metadata"]["uid"]
    api.create(rt, NS, cm("d1", {"app": "web"}, [owner_ref(o1)]))
    api.create(rt, NS, cm("d2", {"app": "web"}, [owner_ref(o1)]))
    api.create(rt, NS, cm("d3", {"app": "db"}))
    api.create(rt, NS, cm("d4", {}, [owner_ref(o2, controller=False)]))  # owned, not controlled

    informer = Informer(kube, CONFIGMAPS, NS, backoff=fast_backoff())
    informer.add_indexer(
        "app",
        lambda o: [o["metadata"]["labels"]["app"]] if "app" in (o["metadata"].get("labels") or {}) else [],
    )
    informer.start()

    def keys(index: str, value: str) -> set[str]:
        return {object_key(o) for o in informer.by_index(index, value)}

    def consistent() -> None:
        """Every index equals what recomputing it from the cached objects gives."""
        cache = informer.cache
        for name, fn in cache._indexers.items():
            expected: dict[str, set[str]] = {}
            for key in cache:
                obj = cache.get(key)
                assert obj is not None
                for value in fn(obj):
                    expected.setdefault(value, set()).add(key)
            assert {v: set(cache.index_keys(name, v)) for v in cache.index_values(name)} == expected, name

    try:
        assert await informer.wait_synced(5)
        assert keys(OWNER_INDEX, uid1) == {"inf/d1", "inf/d2"} and keys(OWNER_INDEX, uid2) == set()
        assert keys("app", "web") == {"inf/d1", "inf/d2"} and keys("app", "db") == {"inf/d3"}
        assert len(informer.list(NS)) == len(informer.list()) == len(keys(NAMESPACE_INDEX, NS)) == 7
        assert informer.list("elsewhere") == [] and informer.get_by(NS, "d1") is informer.get("inf/d1")

        # d2 changes controller: it moves from o1's bucket to o2's; and from app=web to app=db.
        await kube.patch(
            CONFIGMAPS,
            "d2",
            {"metadata": {"ownerReferences": [owner_ref(o2)], "labels": {"app": "db"}}},
            namespace=NS,
        )
        await until(lambda: keys(OWNER_INDEX, uid2) == {"inf/d2"})
        assert keys(OWNER_INDEX, uid1) == {"inf/d1"} and keys("app", "db") == {"inf/d2", "inf/d3"}
        consistent()

        # An index added once the cache is full indexes what is there, then keeps up.
        informer.add_indexer("data-keys", lambda o: list(o.get("data") or {}))
        assert len(keys("data-keys", "k")) == 6 and keys("data-keys", "ca.crt") == {"inf/kube-root-ca.crt"}
        await kube.patch(CONFIGMAPS, "d3", {"data": {"k": None, "other": "1"}}, namespace=NS)
        await until(lambda: keys("data-keys", "other") == {"inf/d3"})
        assert "inf/d3" not in keys("data-keys", "k")

        await kube.delete(CONFIGMAPS, "d1", namespace=NS)
        await until(lambda: informer.get("inf/d1") is None)
        assert keys(OWNER_INDEX, uid1) == set() and uid1 not in informer.cache.index_values(OWNER_INDEX)
        assert keys("app", "web") == set()

        # Deleting o2 lets the garbage collector delete d2 (controlled) and d4 (o2 its only owner).
        await kube.delete(CONFIGMAPS, "o2", namespace=NS)
        await until(lambda: informer.get("inf/d2") is None and informer.get("inf/d4") is None)
        assert keys(OWNER_INDEX, uid2) == set()
        consistent()
        assert all("managedFields" not in o["metadata"] for o in informer.list())
    finally:
        await informer.stop()
        await kube.close()


async def test_handlers_added_after_sync_get_the_cache_first() -> None:
    kube = InMemoryKubeClient.fresh(install_crds=False)
    api, rt = kube.api, kube.api.resource("v1", "ConfigMap")
    await make_namespace(api)
    for i in range(3):
        api.create(rt, NS, cm(f"c{i}", {"t": "1"}))
    informer = Informer(kube, CONFIGMAPS, NS, label_selector="t=1", backoff=fast_backoff())
    informer.start()
    try:
        assert await informer.wait_synced(5)
        late: list[tuple[str, str]] = []

        def broken(obj: Obj) -> None:
            raise RuntimeError("a handler bug")

        informer.add_handler(on_add=broken, on_update=lambda o, n: broken(n), on_delete=broken)
        registration = informer.add_handler(
            on_add=lambda o: late.append(("add", o["metadata"]["name"])),
            on_update=lambda o, n: late.append(("update", n["metadata"]["name"])),
            on_delete=lambda o: late.append(("delete", o["metadata"]["name"])),
        )
        assert sorted(late) == [("add", "c0"), ("add", "c1"), ("add", "c2")]  # at once, synchronously
        await kube.create(CONFIGMAPS, cm("c3", {"t": "1"}))
        await kube.patch(CONFIGMAPS, "c0", {"data": {"x": "1"}}, namespace=NS)
        await kube.patch(CONFIGMAPS, "c1", {"metadata": {"labels": {"t": "2"}}}, namespace=NS)  # leaves
        await kube.create(CONFIGMAPS, cm("other"))  # never matches
        await until(lambda: len(late) == 6)
        assert late[3:] == [("add", "c3"), ("update", "c0"), ("delete", "c1")]
        registration.remove()
        await kube.delete(CONFIGMAPS, "c2", namespace=NS)
        await until(lambda: informer.get("inf/c2") is None)
        assert len(late) == 6 and informer.stats.failures == 0
    finally:
        await informer.stop()
        await kube.close()


async def test_the_factory_shares_informers_and_stop_closes_their_streams() -> None:
    kube = InMemoryKubeClient.fresh(install_crds=False)
    server = kube.server
    assert server is not None and kube.faults is not None
    await make_namespace(kube.api)
    factory = InformerFactory(kube, backoff=fast_backoff)
    configmaps = factory.informer(CONFIGMAPS, NS)
    assert factory.informer(CONFIGMAPS, NS) is configmaps
    assert factory.informer(CONFIGMAPS, NS, label_selector="a=b") is not configmaps
    nodes = factory.informer(NODES, "ignored-for-cluster-scoped")
    assert factory.informer(NODES) is nodes and nodes.namespace is None
    try:
        factory.start()
        assert await factory.wait_for_sync(5)
        assert len(nodes.list()) == len(kube.api.items(kube.api.resource("v1", "Node"))) > 0
        assert len(watch.open_watches(server)) == 3

        # An informer whose list keeps failing never syncs; waiting for it times out.
        kube.faults.add(verb="list", resource="configmaps", error=403)
        stuck = factory.informer(CONFIGMAPS, "default")
        factory.start()
        assert not await factory.wait_for_sync(0.1)
        assert stuck.stats.failures >= 1 and not stuck.has_synced
    finally:
        await factory.stop()
        await kube.close()
    assert not watch.open_watches(server) and not kube.api.store.watchers()
    assert not any(i.running for i in factory.informers)


# --- properties ----------------------------------------------------------------------------------------

KEYS = [f"ns{n}/o{i}" for n in range(2) for i in range(6)] + [f"node{i}" for i in range(3)]


def obj_for(key: str, rv: int, owner: int | None = None) -> Obj:
    ns, _, name = key.rpartition("/")
    meta: Obj = {"name": name, "resourceVersion": str(rv)}
    if ns:
        meta["namespace"] = ns
    if owner is not None:
        meta["ownerReferences"] = [{"uid": f"owner{owner}", "controller": True}]
    return {"metadata": meta}


def owner_at(key: str, rv: int) -> int | None:
    """The controller an object has at a resourceVersion (one state per version, as in kube)."""
    owner = (KEYS.index(key) + rv) % 4
    return None if owner == 3 else owner


states = st.dictionaries(st.sampled_from(KEYS), st.integers(1, 4), max_size=len(KEYS))


@settings(max_examples=300, deadline=None)
@given(before=states, after=states)
def test_relist_diff_turns_the_cache_into_the_list_exactly(
    before: dict[str, int], after: dict[str, int]
) -> None:
    old = {k: obj_for(k, rv, owner_at(k, rv)) for k, rv in before.items()}
    new = {k: obj_for(k, rv, owner_at(k, rv)) for k, rv in after.items()}
    changes = diff(old, new)
    assert len({c.key for c in changes}) == len(changes)  # each key at most once
    result = dict(old)
    for change in changes:
        if change.type == "add":
            assert change.key not in result and change.new is not None
            result[change.key] = change.new
        elif change.type == "update":
            assert change.old is not None and change.new is not None
            assert result[change.key] is change.old and object_rv(change.old) != object_rv(change.new)
            result[change.key] = change.new
        else:
            assert result.pop(change.key) is change.old
    assert result == new
    # Nothing superfluous: an unchanged resourceVersion is never delivered again.
    assert len(changes) == sum(1 for k in set(before) | set(after) if before.get(k) != after.get(k))

    # The informer applies the same changes to its cache, indexes and handlers.
    informer = Informer(cast(KubeClient, None), CONFIGMAPS)
    informer._replace(old)
    recorder = Recorder(informer, monotonic=False)  # gets ``old`` as synthetic adds first
    informer._replace(new)
    assert recorder.problems == [] and recorder.state == new
    assert {k: informer.get(k) for k in informer.cache} == new
    for owner in range(3):
        assert set(informer.cache.index_keys(OWNER_INDEX, f"owner{owner}")) == {
            k for k, rv in after.items() if owner_at(k, rv) == owner
        }
    assert set(informer.cache.index_keys(NAMESPACE_INDEX, "")) == {k for k in after if "/" not in k}


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.integers(0, 2)), max_size=40))
def test_cache_indexes_match_a_recomputation_after_any_puts_and_removes(
    ops: list[tuple[str, int | None]],
) -> None:
    cache = Cache()
    for step, (key, owner) in enumerate(ops):
        if owner == 2 and key in cache:
            assert cache.remove(key) is not None
        else:
            cache.put(key, obj_for(key, step, owner))
    expected: dict[str, set[str]] = {}
    for key in cache:
        obj = cache.get(key)
        assert obj is not None
        for ref in obj["metadata"].get("ownerReferences", []):
            expected.setdefault(ref["uid"], set()).add(key)
    assert {v: set(cache.index_keys(OWNER_INDEX, v)) for v in cache.index_values(OWNER_INDEX)} == expected
    namespaces = {key.rpartition("/")[0] for key in cache}
    assert set(cache.index_values(NAMESPACE_INDEX)) == namespaces

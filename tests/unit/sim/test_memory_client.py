"""InMemoryKubeClient: the KubeClient verbs on the embedded server's ``Api``, without HTTP.

The client is only worth having if a controller test behaves as it would over HTTPS, so besides each verb
this checks parity with ``HttpKubeClient`` against the same server: the same answers and the same errors
(status, reason, message, body).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aiplane.kube.client import ApiError, HttpKubeClient, KubeClient
from aiplane.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, PDBS, PODGROUPS, PODS
from aiplane.sim.apiserver import watch
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster

NS = "default"


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    kube = InMemoryKubeClient.fresh(install_crds=False)
    yield kube
    await kube.close()


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def error_of(call: Awaitable[Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await call
    return caught.value


# --- reads and writes ------------------------------------------------------------------------------


async def test_create_get_list_with_selectors_and_isolation(client: InMemoryKubeClient) -> None:
    created = await client.create(CONFIGMAPS, cm("a", {"app": "web", "tier": "1"}))
    assert (created["kind"], created["metadata"]["name"]) == ("ConfigMap", "a")
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    await client.create(CONFIGMAPS, cm("b", {"app": "web"}))
    await client.create(CONFIGMAPS, cm("c", {"app": "db"}))

    got = await client.get(CONFIGMAPS, "a", NS)
    assert got == created
    got["data"]["k"] = "mutated"  # a private copy: the store is untouched
    assert (await client.get(CONFIGMAPS, "a", NS))["data"] == {"k": "v"}

    def names(listed: dict[str, Any]) -> list[str]:
        return [i["metadata"]["name"] for i in listed["items"] if i["metadata"]["name"] != "kube-root-ca.crt"]

    listed = await client.list(CONFIGMAPS, NS, label_selector="app=web")
    assert listed["kind"] == "ConfigMapList" and names(listed) == ["a", "b"]
    assert listed["metadata"]["resourceVersion"]
    assert names(await client.list(CONFIGMAPS, NS, label_selector="app in (web,db),tier!=1")) == ["b", "c"]
    assert names(await client.list(CONFIGMAPS, NS, field_selector="metadata.name=c")) == ["c"]
    assert names(await client.list(CONFIGMAPS, label_selector="app=db")) == ["c"]  # all namespaces

    first = await client.list(CONFIGMAPS, NS, label_selector="app", limit=1)
    assert names(first) == ["a"] and first["metadata"]["continue"]
    rest = await client.list(
        CONFIGMAPS, NS, label_selector="app", limit=5, continue_token=first["metadata"]["continue"]
    )
    assert names(rest) == ["b", "c"] and "continue" not in rest["metadata"]

    dry = await client.create(CONFIGMAPS, cm("dry"), dry_run=True)
    assert dry["metadata"]["name"] == "dry"
    assert (await error_of(client.get(CONFIGMAPS, "dry", NS))).not_found


async def test_errors_carry_the_servers_status(client: InMemoryKubeClient) -> None:
    created = await client.create(CONFIGMAPS, cm("a"))

    err = await error_of(client.get(CONFIGMAPS, "missing", NS))
    assert (err.status, err.reason, err.message) == (404, "NotFound", 'configmaps "missing" not found')
    assert err.body["details"] == {"kind": "configmaps", "name": "missing"} and err.not_found

    err = await error_of(client.create(CONFIGMAPS, cm("a")))
    assert (err.status, err.reason, err.already_exists) == (409, "AlreadyExists", True)
    assert not err.transient

    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    err = await error_of(client.replace(CONFIGMAPS, stale))
    assert err.conflict and err.transient
    assert err.message == (
        'Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )

    err = await error_of(client.create(CONFIGMAPS, {**cm("b"), "colour": "red"}))
    assert (err.status, err.reason, err.message) == (
        400,
        "BadRequest",
        'strict decoding error: unknown field "colour"',
    )

    err = await error_of(client.create(CONFIGMAPS, cm("Not_Valid")))
    assert (err.status, err.reason, err.invalid) == (422, "Invalid", True)
    assert err.body["details"]["causes"][0]["field"] == "metadata.name"

    err = await error_of(client.list(CONFIGMAPS, NS, label_selector="a in"))
    assert (err.status, err.reason) == (400, "BadRequest")

    err = await error_of(client.request("GET", "/api/v1/widgets"))
    assert (err.status, err.message) == (404, "the server could not find the requested resource")

    err = await error_of(client.delete(CONFIGMAPS, "a", namespace=NS, propagation_policy="Sideways"))
    assert err.status == 422 and err.message.startswith('DeleteOptions.meta.k8s.io "" is invalid')

    err = await error_of(client.delete(CONFIGMAPS, "a", namespace=NS, preconditions={"uid": "nope"}))
    assert err.conflict and "Precondition failed: UID in precondition: nope" in err.message


async def test_patch_types_and_server_side_apply(client: InMemoryKubeClient) -> None:
    await client.create(CONFIGMAPS, cm("a"))
    merged = await client.patch(CONFIGMAPS, "a", {"data": {"m": "1", "k": None}}, namespace=NS)
    assert merged["data"] == {"m": "1"}

    jp = [{"op": "test", "path": "/data/m", "value": "1"}, {"op": "add", "path": "/data/j", "value": "2"}]
    assert (await client.patch(CONFIGMAPS, "a", jp, namespace=NS, patch_type="json"))["data"] == {
        "m": "1",
        "j": "2",
    }
    failing = [{"op": "test", "path": "/data/m", "value": "other"}]
    err = await error_of(client.patch(CONFIGMAPS, "a", failing, namespace=NS, patch_type="json"))
    assert (err.status, err.message) == (
        422,
        "the server rejected our request due to an error in our request",
    )

    await client.create(PODS, pod("p"))
    containers = {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}
    patched = await client.patch(PODS, "p", containers, namespace=NS, patch_type="strategic")
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [("c", "busybox:2")]

    applied = await client.apply(CONFIGMAPS, cm("s", x="1"), field_manager="alpha")
    assert applied["metadata"]["managedFields"][0]["manager"] == "alpha"
    err = await error_of(client.apply(CONFIGMAPS, cm("s", x="2"), field_manager="beta"))
    assert err.conflict and 'conflict with "alpha"' in err.message
    forced = await client.apply(CONFIGMAPS, cm("s", x="2"), field_manager="beta", force=True)
    assert forced["data"] == {"x": "2"}

    err = await error_of(client.patch(CONFIGMAPS, "nope", {"data": {}}, namespace=NS))
    assert err.not_found
    # Without a field manager the writer is the User-Agent, as over HTTP.
    updated = await client.patch(CONFIGMAPS, "a", {"data": {"u": "1"}}, namespace=NS)
    assert "aiplane" in {m["manager"] for m in updated["metadata"]["managedFields"]}


async def test_the_default_constructor_builds_a_full_cluster_and_custom_resources_refuse_smp() -> None:
    client = InMemoryKubeClient()  # a fresh EmbeddedCluster with our CRDs, not served
    assert client.cluster is not None and client.cluster.url is None and client.faults is not None
    crds = await client.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    assert "PartitioningPlan" in {c["spec"]["names"]["kind"] for c in crds["items"]}  # one of ours
    await client.create(
        PODGROUPS,
        {"apiVersion": PODGROUPS.api_version, "kind": "PodGroup", "metadata": {"name": "g", "namespace": NS}},
    )
    err = await error_of(client.patch(PODGROUPS, "g", {"spec": {}}, namespace=NS, patch_type="strategic"))
    assert (err.status, err.reason) == (415, "UnsupportedMediaType")
    assert "application/strategic-merge-patch+json" not in err.message
    await client.close()


async def test_delete_finalizers_and_garbage_collection(client: InMemoryKubeClient) -> None:
    owner = await client.create(
        CONFIGMAPS, {**cm("owner"), "metadata": {**cm("owner")["metadata"], "finalizers": ["x/y"]}}
    )
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    await client.create(
        CONFIGMAPS, {**cm("dep"), "metadata": {**cm("dep")["metadata"], "ownerReferences": [ref]}}
    )

    lingering = await client.delete(CONFIGMAPS, "owner", namespace=NS)
    assert lingering["metadata"]["deletionTimestamp"]  # a finalizer keeps it: the object is answered
    remaining = (await client.get(CONFIGMAPS, "owner", NS))["metadata"]["finalizers"]
    assert remaining == ["x/y"]
    await client.patch(CONFIGMAPS, "owner", {"metadata": {"finalizers": None}}, namespace=NS)
    assert (await error_of(client.get(CONFIGMAPS, "owner", NS))).not_found

    async def dependent_gone() -> bool:
        try:
            await client.get(CONFIGMAPS, "dep", NS)
        except ApiError as err:
            return err.not_found
        return False

    await until(dependent_gone)  # the GC worker this client started collected it

    await client.create(CONFIGMAPS, cm("plain"))
    status = await client.delete(CONFIGMAPS, "plain", namespace=NS)
    assert (status["kind"], status["status"], status["details"]["name"]) == ("Status", "Success", "plain")


async def test_eviction_and_a_budget_that_says_no(client: InMemoryKubeClient) -> None:
    await client.create(PODS, pod("pending", {"app": "a"}))
    await client.evict("pending", NS)  # Pending pods are evicted without consulting budgets
    assert (await error_of(client.get(PODS, "pending", NS))).not_found
    assert (await error_of(client.evict("missing", NS))).not_found

    await client.create(PODS, pod("p", {"app": "a"}))
    running = await client.get(PODS, "p", NS)
    running["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await client.replace_status(PODS, running)
    await client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "a", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1},
        },
    )

    async def observed() -> bool:
        return "observedGeneration" in ((await client.get(PDBS, "a", NS)).get("status") or {})

    await until(observed)
    client.reset_counts()
    err = await error_of(client.evict("p", NS))
    assert (err.status, err.reason) == (429, "TooManyRequests") and err.too_many_requests
    assert err.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert client.requests_by_resource == {("create", "pods/eviction"): 1}  # a 429 here is not retried


async def test_request_counts_by_verb(client: InMemoryKubeClient) -> None:
    client.reset_counts()
    await client.create(CONFIGMAPS, cm("a"))
    await client.get(CONFIGMAPS, "a", NS)
    await client.patch(CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace=NS)
    await client.patch(CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace=NS)  # a no-op is still a request
    await client.list(CONFIGMAPS, NS)
    await client.delete(CONFIGMAPS, "a", namespace=NS)
    assert client.requests == {"create": 1, "get": 1, "patch": 2, "list": 1, "delete": 1}
    assert client.writes == 4
    assert client.requests_by_resource[("patch", "configmaps")] == 2

    for name, app in (("x", "web"), ("y", "web"), ("z", "db")):
        await client.create(CONFIGMAPS, cm(name, {"app": app}))
    answer = await client.request("DELETE", CONFIGMAPS.path(NS), query={"labelSelector": "app=web"})
    assert answer["status"] == "Success" and client.requests["deletecollection"] == 1
    left = await client.list(CONFIGMAPS, NS, label_selector="app")
    assert [i["metadata"]["name"] for i in left["items"]] == ["z"]


async def test_faults_apply_and_429s_are_retried(client: InMemoryKubeClient) -> None:
    assert client.faults is not None
    await client.create(CONFIGMAPS, cm("a"))
    client.faults.add(verb="get", resource="configmaps", error=500, count=1)
    err = await error_of(client.get(CONFIGMAPS, "a", NS))
    assert (err.status, err.reason, err.message) == (
        500,
        "InternalError",
        "Internal error occurred: injected fault",
    )
    client.faults.add(verb="get", resource="configmaps", error=429, retry_after=0, count=1)
    client.reset_counts()
    assert (await client.get(CONFIGMAPS, "a", NS))["metadata"]["name"] == "a"
    assert client.requests["get"] == 2  # the 429, then the retry


async def test_scale_subresource(client: InMemoryKubeClient) -> None:
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "w", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": template},
    }
    await client.create(DEPLOYMENTS, deploy)
    scale = await client.get(DEPLOYMENTS, "w", NS, subresource="scale")
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == ("Scale", 2, "app=w")
    await client.patch(DEPLOYMENTS, "w", {"spec": {"replicas": 5}}, namespace=NS, subresource="scale")
    assert (await client.get(DEPLOYMENTS, "w", NS))["spec"]["replicas"] == 5


# --- watch -------------------------------------------------------------------------------------------


async def next_events(stream: AsyncIterator[dict[str, Any]], count: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    while len(out) < count:
        event = await asyncio.wait_for(anext(stream), 5)
        out.append((event["type"], event["object"]["metadata"].get("name", "")))
    return out


async def test_watch_from_a_resource_version_with_selector_transitions(client: InMemoryKubeClient) -> None:
    await client.create(CONFIGMAPS, cm("a", {"app": "web"}))
    rv = (await client.list(CONFIGMAPS, NS))["metadata"]["resourceVersion"]
    stream = client.watch(CONFIGMAPS, NS, resource_version=rv, label_selector="app=web")
    try:
        await client.create(CONFIGMAPS, cm("b", {"app": "web"}))
        await client.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"app": "db"}}}, namespace=NS)
        await client.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"app": "web"}}}, namespace=NS)
        await client.create(CONFIGMAPS, cm("c", {"app": "db"}))
        await client.delete(CONFIGMAPS, "b", namespace=NS)
        events = await next_events(stream, 4)
        # "a" stops matching (DELETED), matches again (ADDED); "c" never matches.
        assert events == [("ADDED", "b"), ("DELETED", "a"), ("ADDED", "a"), ("DELETED", "b")]
        server = client.server
        assert server is not None and len(watch.open_watches(server)) == 1
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    assert not watch.open_watches(server)
    assert not client.api.store.watchers()


async def test_watch_without_resource_version_starts_with_the_current_objects(
    client: InMemoryKubeClient,
) -> None:
    await client.create(CONFIGMAPS, cm("a"))
    stream = client.watch(CONFIGMAPS, NS, field_selector="metadata.name=a")
    try:
        assert await next_events(stream, 1) == [("ADDED", "a")]
        await client.patch(CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace=NS)
        event = await asyncio.wait_for(anext(stream), 5)
        assert event["type"] == "MODIFIED" and event["object"]["data"] == {"k": "v", "x": "1"}
        event["object"]["data"]["x"] = "mutated"  # events are private copies too
        assert (await client.get(CONFIGMAPS, "a", NS))["data"]["x"] == "1"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_too_old_resource_version_is_one_410_error_event() -> None:
    kube = InMemoryKubeClient.fresh(install_crds=False, history_size=2)
    try:
        old = (await kube.list(CONFIGMAPS, NS))["metadata"]["resourceVersion"]
        for i in range(4):
            await kube.create(CONFIGMAPS, cm(f"c{i}"))
        events = [e async for e in kube.watch(CONFIGMAPS, NS, resource_version=old)]
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert (status["code"], status["reason"]) == (410, "Expired")
        assert status["message"].startswith(f"too old resource version: {old} (")
    finally:
        await kube.close()


async def test_watch_ends_at_its_timeout_and_when_faults_close_it(client: InMemoryKubeClient) -> None:
    started = time.monotonic()
    events = [e async for e in client.watch(CONFIGMAPS, NS, resource_version="1", timeout_seconds=1)]
    assert 0.9 < time.monotonic() - started < 3 and all(e["type"] != "ERROR" for e in events)

    rv = (await client.list(CONFIGMAPS, NS))["metadata"]["resourceVersion"]
    stream = client.watch(CONFIGMAPS, NS, resource_version=rv)
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    assert client.faults is not None and client.faults.close_watches("configmaps") == 1
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(pending, 5)


async def test_watch_bookmarks_and_initial_events_end(client: InMemoryKubeClient) -> None:
    a_rv = int((await client.create(CONFIGMAPS, cm("a")))["metadata"]["resourceVersion"])
    query = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "fieldSelector": "metadata.name=a",
    }
    stream = client.stream(CONFIGMAPS.path(NS), query)
    try:
        first, bookmark = await asyncio.wait_for(anext(stream), 5), await asyncio.wait_for(anext(stream), 5)
        assert first["type"] == "ADDED" and bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert bookmark["object"]["metadata"]["resourceVersion"] == str(client.api.store.rv)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    # The periodic bookmark comes 2 s before the watch's deadline, once the resource changed since the
    # watch began (here: "c", which the field selector filters out; "a", replayed, does not count).
    started = time.monotonic()
    stream = client.watch(
        CONFIGMAPS, NS, resource_version=str(a_rv - 1), field_selector="metadata.name=b", timeout_seconds=3
    )
    try:
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)  # the watch is registered
        c_rv = (await client.create(CONFIGMAPS, cm("c")))["metadata"]["resourceVersion"]
        event = await asyncio.wait_for(pending, 5)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    assert event["type"] == "BOOKMARK" and 0.9 < time.monotonic() - started < 2
    assert event["object"]["metadata"]["resourceVersion"] == c_rv


async def test_watch_request_errors_are_raised(client: InMemoryKubeClient) -> None:
    err = await error_of(anext(client.watch(CONFIGMAPS, NS, label_selector="a in")))
    assert (err.status, err.reason) == (400, "BadRequest")
    assert client.faults is not None
    client.faults.add(verb="watch", resource="configmaps", error=500, count=1)
    err = await error_of(anext(client.watch(CONFIGMAPS, NS)))
    assert err.status == 500
    assert not client.api.store.watchers()


async def test_a_bare_api_works_without_a_cluster() -> None:
    server = ApiServer()
    server.api.create(server.api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    kube = InMemoryKubeClient(server.api)
    try:
        assert kube.server is None and kube.faults is None
        stream = kube.watch(CONFIGMAPS, NS)
        await kube.create(CONFIGMAPS, cm("a"))
        assert await next_events(stream, 1) == [("ADDED", "a")]
        await stream.aclose()  # type: ignore[attr-defined]
        assert [n["metadata"]["name"] for n in (await kube.list(NAMESPACES))["items"]] == [NS]
    finally:
        await kube.close()


# --- parity with HTTP ----------------------------------------------------------------------------------


async def test_same_answers_and_errors_as_over_https() -> None:
    from kubernetes_asyncio import config
    from kubernetes_asyncio.client import Configuration

    cluster = EmbeddedCluster(install_crds=False)
    await cluster.start()
    configuration = Configuration()
    await config.load_kube_config_from_dict(cluster.kubeconfig(), client_configuration=configuration)
    http = HttpKubeClient(configuration, qps=float("inf"))
    memory = InMemoryKubeClient.for_cluster(cluster)
    try:
        await memory.create(CONFIGMAPS, cm("a", {"app": "x"}))
        await memory.create(PODS, pod("p"))
        calls: list[Callable[[KubeClient], Awaitable[Any]]] = [
            lambda c: c.get(CONFIGMAPS, "a", NS),
            lambda c: c.get(CONFIGMAPS, "zz", NS),
            lambda c: c.list(CONFIGMAPS, NS, label_selector="app=x"),
            lambda c: c.list(CONFIGMAPS, NS, label_selector="=x"),
            lambda c: c.list(PODS, NS, field_selector="spec.colour=red"),
            lambda c: c.list(CONFIGMAPS, NS, continue_token="garbage"),
            lambda c: c.create(CONFIGMAPS, cm("a")),
            lambda c: c.create(CONFIGMAPS, {**cm("b"), "extra": 1}),
            lambda c: c.create(CONFIGMAPS, cm("UPPER")),
            lambda c: c.create(CONFIGMAPS, {**cm("b"), "kind": "Secret"}),
            lambda c: c.patch(CONFIGMAPS, "a", [{"op": "bogus"}], namespace=NS, patch_type="json"),
            lambda c: c.patch(CONFIGMAPS, "a", "not an object", namespace=NS),
            lambda c: c.patch(CONFIGMAPS, "a", {"data": {}}, namespace=NS, patch_type="apply"),
            lambda c: c.patch(CONFIGMAPS, "a", {"data": {}}, namespace=NS, force=True),
            lambda c: c.patch(PODS, "p", {"spec": {"nodeName": "n", "containers": []}}, namespace=NS),
            lambda c: c.delete(CONFIGMAPS, "zz", namespace=NS),
            lambda c: c.delete(CONFIGMAPS, "a", namespace=NS, preconditions={"resourceVersion": "1"}),
            lambda c: c.evict("zz", NS),
            lambda c: c.request("GET", "/api/v1/namespaces/default/widgets"),
            lambda c: c.request("POST", "/api/v1/namespaces/default/configmaps/a", body=cm("a")),
            lambda c: c.request("GET", "/apis/apps/v1/namespaces/default/deployments/x/scale"),
        ]

        async def outcome(kube: KubeClient, call: Callable[[KubeClient], Awaitable[Any]]) -> Any:
            try:
                result = await call(kube)
            except ApiError as err:
                return ("error", err.status, err.reason, err.message, err.body, err.retry_after)
            if isinstance(result, dict) and "metadata" in result:
                result = {
                    **result,
                    "metadata": {k: v for k, v in result["metadata"].items() if k != "managedFields"},
                }
            return ("ok", result)

        for i, call in enumerate(calls):
            assert await outcome(memory, call) == await outcome(http, call), f"call #{i}"
    finally:
        await http.close()
        await memory.close()
        await cluster.stop()


async def test_a_lagging_watch_delivers_every_event_in_order_late_and_ends_with_its_consumer(
    client: InMemoryKubeClient,
) -> None:
    lagging = (
        InMemoryKubeClient.for_cluster(client.cluster, watch_lag=lambda: 0.2) if client.cluster else None
    )
    assert lagging is not None
    rv = (await client.list(CONFIGMAPS, NS))["metadata"]["resourceVersion"]
    stream = lagging.watch(CONFIGMAPS, NS, resource_version=rv)
    try:
        sent = time.monotonic()
        await client.create(CONFIGMAPS, cm("a"))
        await client.create(CONFIGMAPS, cm("b"))
        await client.delete(CONFIGMAPS, "a", namespace=NS)
        assert await next_events(stream, 3) == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
        assert time.monotonic() - sent >= 0.2
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    server = client.server
    assert server is not None and not watch.open_watches(server)
    await lagging.close()


async def test_a_lagging_watch_still_raises_what_the_server_refused(client: InMemoryKubeClient) -> None:
    assert client.cluster is not None
    lagging = InMemoryKubeClient.for_cluster(client.cluster, watch_lag=lambda: 0.05)
    try:
        with pytest.raises(ApiError) as caught:
            await anext(lagging.watch(CONFIGMAPS, NS, label_selector="app in (web"))
        assert caught.value.status == 400
    finally:
        await lagging.close()

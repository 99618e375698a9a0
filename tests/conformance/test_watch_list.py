"""Lists with selectors and pagination, and watches, through real clients (official, asyncio, kubectl)."""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.conftest import KUBECTL, Cluster, SimThread, wait_for_namespace_defaults


@pytest.fixture
def namespace(k8s: Any) -> Iterator[str]:
    """A fresh namespace, made with the official client (kubectl create sends protobuf)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    name = f"watch-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for_namespace_defaults(k8s, name)
    yield name
    core.delete_namespace(name)


def core_api(k8s: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(k8s)


def make_cm(
    core: Any, ns: str, name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None
) -> Any:
    return core.create_namespaced_config_map(
        ns, {"metadata": {"name": name, "labels": labels or {}}, "data": data or {"a": "1"}}
    )


def patch_cm(core: Any, ns: str, name: str, body: dict[str, Any]) -> Any:
    """Replace labels and/or data (a merge patch: ``null`` values of the old maps drop their keys)."""
    current = core.read_namespaced_config_map(name, ns)
    patch: dict[str, Any] = {}
    if "labels" in body:
        old = dict.fromkeys(current.metadata.labels or {})
        patch["metadata"] = {"labels": {**old, **body["labels"]}}
    if "data" in body:
        patch["data"] = {**dict.fromkeys(current.data or {}), **body["data"]}
    return core.patch_namespaced_config_map(name, ns, patch, _content_type="application/merge-patch+json")


class Collector:
    """Runs a blocking watch stream on a thread and hands its events over through a queue."""

    def __init__(self, stream: Iterator[Any]) -> None:
        self.events: queue.Queue[Any] = queue.Queue()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Iterator[Any]) -> None:
        try:
            for event in stream:
                self.events.put(event)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def take(self, count: int, timeout: float = 10) -> list[Any]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            out.append(self.events.get(timeout=max(0.01, deadline - time.monotonic())))
        return out


def kinds(events: list[Any]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"].metadata.name) for e in events]


def test_list_with_label_and_field_selectors(k8s: Any, namespace: str) -> None:
    core = core_api(k8s)
    for i in range(4):
        make_cm(core, namespace, f"cm{i}", {"tier": "web" if i % 2 else "db", "idx": str(i)})
    web = core.list_namespaced_config_map(namespace, label_selector="tier=web")
    assert [i.metadata.name for i in web.items] == ["cm1", "cm3"]
    sets = core.list_namespaced_config_map(namespace, label_selector="tier in (web,db),idx notin (0,3)")
    assert [i.metadata.name for i in sets.items] == ["cm1", "cm2"]
    assert [
        i.metadata.name for i in core.list_namespaced_config_map(namespace, label_selector="idx,!tier").items
    ] == []
    named = core.list_namespaced_config_map(namespace, field_selector="metadata.name=cm2")
    assert [i.metadata.name for i in named.items] == ["cm2"]
    both = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={namespace},metadata.name!=cm0", label_selector="idx"
    )
    assert [i.metadata.name for i in both.items] == ["cm1", "cm2", "cm3"]


def test_selector_errors_are_400_with_kubes_messages(k8s: Any, namespace: str) -> None:
    from kubernetes.client.rest import ApiException

    core = core_api(k8s)
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map(namespace, label_selector="a b")
    assert caught.value.status == 400
    assert (
        json.loads(caught.value.body)["message"]
        == "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    )
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod(namespace, field_selector="spec.nodeName=x,status.hostIP=1.2.3.4")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == "field label not supported: status.hostIP"


def test_limit_and_continue_page_through_with_the_official_client(k8s: Any, namespace: str) -> None:
    core = core_api(k8s)
    for i in range(7):
        make_cm(core, namespace, f"cm{i}")
    # Real clusters (and the sim's controllers) add kube-root-ca.crt to every namespace.
    everything = [i.metadata.name for i in core.list_namespaced_config_map(namespace).items]
    assert {f"cm{i}" for i in range(7)} <= set(everything)
    first = core.list_namespaced_config_map(namespace, limit=3)
    assert [i.metadata.name for i in first.items] == everything[:3]
    assert first.metadata.remaining_item_count == len(everything) - 3 and first.metadata._continue
    core.delete_namespaced_config_map("cm5", namespace)  # after the first page: the pages keep its snapshot
    names = [i.metadata.name for i in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(namespace, limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
    assert names == everything
    fresh = core.list_namespaced_config_map(namespace)
    assert int(fresh.metadata.resource_version) > int(first.metadata.resource_version)
    assert "cm5" not in [i.metadata.name for i in fresh.items]


def test_watch_from_a_resource_version_sees_added_modified_deleted(k8s: Any, namespace: str) -> None:
    from kubernetes import watch

    core = core_api(k8s)
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    w = watch.Watch()
    collector = Collector(
        w.stream(core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=20)
    )
    make_cm(core, namespace, "w1", data={"v": "1"})
    patch_cm(core, namespace, "w1", {"data": {"v": "2"}})
    core.delete_namespaced_config_map("w1", namespace)
    events = collector.take(3)
    w.stop()
    assert kinds(events) == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    assert [e["object"].data for e in events[:2]] == [{"v": "1"}, {"v": "2"}]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


def test_watch_with_a_label_selector_sees_objects_leave_and_enter(k8s: Any, namespace: str) -> None:
    from kubernetes import watch

    core = core_api(k8s)
    make_cm(core, namespace, "sel", {"app": "web"})
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        namespace,
        label_selector="app=web",
        resource_version=start,
        timeout_seconds=20,
    )
    collector = Collector(stream)
    patch_cm(core, namespace, "sel", {"labels": {"app": "db"}})
    patch_cm(core, namespace, "sel", {"labels": {"app": "web"}})
    events = collector.take(2)
    w.stop()
    assert kinds(events) == [("DELETED", "sel"), ("ADDED", "sel")]
    assert events[0]["object"].metadata.labels == {"app": "web"}


@pytest.fixture(scope="module")
def small_history() -> Iterator[SimThread]:
    """A dedicated embedded cluster that keeps only 5 events per resource."""
    from aiplane.sim.cluster import EmbeddedCluster
    from aiplane.sim.fleet import Fleet

    sim = SimThread.__new__(SimThread)
    sim.loop = asyncio.new_event_loop()
    sim.cluster = EmbeddedCluster(fleet=Fleet(nodePools=[]), history_size=5, install_crds=False)
    sim._thread = threading.Thread(target=sim.loop.run_forever, daemon=True)
    sim._thread.start()
    sim.url = sim.call(sim.cluster.start())
    yield sim
    sim.stop()


@pytest.mark.sim_only
def test_watch_from_a_too_old_resource_version_gets_410(small_history: SimThread, tmp_path: Any) -> None:
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException

    path = tmp_path / "kubeconfig"
    small_history.cluster.write_kubeconfig(path)
    api_client = config.new_client_from_config(config_file=str(path))
    core = client.CoreV1Api(api_client)
    make_cm(core, "default", "old")
    old = core.read_namespaced_config_map("old", "default").metadata.resource_version
    for i in range(8):
        patch_cm(core, "default", "old", {"data": {"i": str(i)}})
    with pytest.raises(ApiException) as caught:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=5
        ):
            pass
    assert caught.value.status == 410
    assert caught.value.reason.startswith(f"Expired: too old resource version: {old} (")
    api_client.close()


def test_bookmarks_and_timeout_seconds(k8s: Any, namespace: str) -> None:
    from kubernetes import watch

    core = core_api(k8s)
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    started = time.monotonic()
    collector = Collector(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=start,
            field_selector="metadata.name=probe",
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        )
    )
    # The probe's event proves the watch registered (a write before that would only be replayed, and
    # kube's cacher sends no bookmark at or below the last event it replayed).
    make_cm(core, namespace, "probe")
    probe = collector.take(1)
    # A write the watch does not see (another namespace) moves the resource's resourceVersion past the
    # watch's: kube sends a bookmark only then.
    elsewhere = make_cm(core, "default", f"conf-bookmark-{uuid.uuid4().hex[:8]}")
    try:
        assert collector.done.wait(timeout=12), "timeoutSeconds did not end the stream"
    finally:
        core.delete_namespaced_config_map(elsewhere.metadata.name, "default")
    elapsed = time.monotonic() - started
    assert collector.error is None and 4 < elapsed < 10  # timeoutSeconds ended the stream
    assert kinds(probe) == [("ADDED", "probe")]
    events = list(collector.events.queue)
    # Then only bookmarks: at least the one before the deadline. kube's cacher, whose bookmark timer
    # works in one-second buckets, may send it early and then again until 2 s before the deadline.
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    rvs = []
    for event in events:
        bookmark = event["raw_object"]
        assert set(bookmark) == {"kind", "apiVersion", "metadata"} and bookmark["kind"] == "ConfigMap"
        rvs.append(int(bookmark["metadata"]["resourceVersion"]))
    assert rvs == sorted(rvs) and rvs[0] >= int(elsewhere.metadata.resource_version)


def test_watch_list_initial_events_end_with_a_bookmark(k8s: Any, namespace: str) -> None:
    core = core_api(k8s)
    make_cm(core, namespace, "one")
    make_cm(core, namespace, "two")
    resp = core.list_namespaced_config_map(
        namespace,
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=5,
        _preload_content=False,
    )
    events = []
    for line in resp:
        events.append(json.loads(line))
        if events[-1]["type"] == "BOOKMARK":
            break
    resp.close()
    added = [e["object"]["metadata"]["name"] for e in events[:-1]]
    assert {e["type"] for e in events[:-1]} == {"ADDED"}
    assert [n for n in added if n in ("one", "two")] == ["one", "two"]
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_kubernetes_asyncio_watch(cluster: Cluster, k8s: Any, namespace: str) -> None:
    async def go() -> list[tuple[str, str]]:
        from kubernetes_asyncio import client, config, watch

        api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            core = client.CoreV1Api(api_client)
            listed = await core.list_namespaced_config_map(namespace)
            seen: list[tuple[str, str]] = []
            w = watch.Watch()
            stream = w.stream(
                core.list_namespaced_config_map,
                namespace,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=10,
            )
            await core.create_namespaced_config_map(
                namespace, {"metadata": {"name": "aio"}, "data": {"a": "1"}}
            )
            await core.delete_namespaced_config_map("aio", namespace)
            async for event in stream:
                seen.append((event["type"], event["object"].metadata.name))
                if len(seen) == 2:
                    w.stop()
            return seen
        finally:
            await api_client.close()

    assert asyncio.run(go()) == [("ADDED", "aio"), ("DELETED", "aio")]


def test_kubectl_get_watch_prints_changes(cluster: Cluster, k8s: Any, namespace: str) -> None:
    core = core_api(k8s)
    make_cm(core, namespace, "before")
    proc = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-n",
            namespace,
            "get",
            "cm",
            "-w",
            "--request-timeout=20s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    seen: list[str] = []

    def wait_for(word: str) -> None:
        deadline = time.monotonic() + 15
        while not any(word in line for line in seen):
            assert time.monotonic() < deadline, f"kubectl printed {seen!r}, no {word!r}"
            seen.append(lines.get(timeout=max(0.01, deadline - time.monotonic())))

    try:
        wait_for("before")
        make_cm(core, namespace, "during")
        wait_for("during")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert seen[0].split()[0] == "NAME"  # the header, printed once
    assert sum(line.split()[0] == "NAME" for line in seen) == 1

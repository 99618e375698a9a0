"""Fault injection seen through real clients (sim only: a real cluster cannot be told to fail)."""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.conftest import Cluster, SimThread

pytestmark = pytest.mark.sim_only


@pytest.fixture
def namespace(k8s: Any) -> Iterator[str]:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    name = f"faults-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def faults(sim: SimThread) -> Iterator[Any]:
    yield sim.cluster.server.faults
    sim.cluster.server.faults.clear()


def core_api(k8s: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(k8s)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data or {"a": "1"}}


def test_429_with_retry_after_reaches_the_client(
    cluster: Cluster, k8s: Any, namespace: str, faults: Any
) -> None:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    core_api(k8s).create_namespaced_config_map(namespace, cm("x"))
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=configuration)
    configuration.retries = False  # see the 429 itself, not urllib3's retry of it
    with client.ApiClient(configuration) as api_client:
        core = client.CoreV1Api(api_client)
        faults.add(verb="get", resource="configmaps", namespace=namespace, error=429, retry_after=3, count=1)
        with pytest.raises(ApiException) as caught:
            core.read_namespaced_config_map("x", namespace)
        assert caught.value.status == 429
        assert caught.value.headers["Retry-After"] == "3"
        body = json.loads(caught.value.body)
        assert (body["reason"], body["details"]["retryAfterSeconds"]) == ("TooManyRequests", 3)
        assert core.read_namespaced_config_map("x", namespace).metadata.name == "x"  # count=1: once only


def test_the_official_client_honours_retry_after(k8s: Any, namespace: str, faults: Any) -> None:
    core = core_api(k8s)
    core.create_namespaced_config_map(namespace, cm("x"))
    handle = faults.add(
        verb="get", resource="configmaps", namespace=namespace, error=429, retry_after=1, count=1
    )
    started = time.monotonic()
    assert core.read_namespaced_config_map("x", namespace).metadata.name == "x"  # urllib3 retried
    assert (handle.matched, handle.applied) == (2, 1) and time.monotonic() - started >= 1


def test_kubectl_retries_a_429_after_retry_after(
    cluster: Cluster, k8s: Any, namespace: str, faults: Any
) -> None:
    core_api(k8s).create_namespaced_config_map(namespace, cm("x"))
    handle = faults.add(
        verb="get", resource="configmaps", namespace=namespace, error=429, retry_after=1, count=1
    )
    started = time.monotonic()
    out = cluster.kubectl("-n", namespace, "get", "cm", "x", "-o", "name").stdout
    assert out.strip() == "configmap/x"
    assert handle.applied == 1 and time.monotonic() - started >= 1  # client-go waited Retry-After


def test_500_on_the_nth_write(k8s: Any, namespace: str, faults: Any) -> None:
    from kubernetes.client.rest import ApiException

    core = core_api(k8s)
    faults.add_spec(f"verb=write,resource=configmaps,namespace={namespace},error=500,nth=3")
    core.create_namespaced_config_map(namespace, cm("x"))  # write 1
    obj = core.read_namespaced_config_map("x", namespace)
    obj.data = {"a": "2"}
    obj = core.replace_namespaced_config_map("x", namespace, obj)  # write 2
    obj.data = {"a": "3"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("x", namespace, obj)  # write 3
    assert caught.value.status == 500
    assert json.loads(caught.value.body)["message"] == "Internal error occurred: injected fault"
    assert core.replace_namespaced_config_map("x", namespace, obj).data == {"a": "3"}  # write 4


def test_409_conflict_on_a_write(k8s: Any, namespace: str, faults: Any) -> None:
    from kubernetes.client.rest import ApiException

    core = core_api(k8s)
    core.create_namespaced_config_map(namespace, cm("x"))
    faults.add(verb="update", resource="configmaps", namespace=namespace, error=409, count=1)
    obj = core.read_namespaced_config_map("x", namespace)
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("x", namespace, obj)
    body = json.loads(caught.value.body)
    assert (caught.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"].startswith(
        'Operation cannot be fulfilled on configmaps "x": the object has been modified'
    )


def _watch_thread(
    core: Any, namespace: str, timeout: int
) -> tuple[threading.Thread, list[Any], threading.Event]:
    from kubernetes import watch

    events: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            for event in watch.Watch().stream(
                core.list_namespaced_config_map, namespace, timeout_seconds=timeout
            ):
                events.append(event)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, events, done


def _until(predicate: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_closing_open_watches_ends_the_clients_stream(
    sim: SimThread, k8s: Any, namespace: str, faults: Any
) -> None:
    from aiplane.sim.apiserver import watch

    core = core_api(k8s)
    core.create_namespaced_config_map(namespace, cm("x"))
    _, events, done = _watch_thread(core, namespace, timeout=60)
    _until(lambda: any(e["object"].metadata.name == "x" for e in events))  # the watch is open
    assert sim.run(faults.close_watches, "configmaps", namespace) == 1
    assert done.wait(10)  # long before the 60 s timeout
    assert not [w for w in sim.run(watch.open_watches, sim.cluster.server) if w.namespace == namespace]


def test_a_close_watches_rule_ends_watches_after_a_delay(k8s: Any, namespace: str, faults: Any) -> None:
    core = core_api(k8s)
    faults.add_spec(f"resource=configmaps,namespace={namespace},close-watches=0.5")
    started = time.monotonic()
    _, _, done = _watch_thread(core, namespace, timeout=60)
    assert done.wait(10)
    assert 0.4 < time.monotonic() - started < 10


def test_faults_over_http_with_the_bearer_token(
    sim: SimThread, k8s: Any, namespace: str, faults: Any
) -> None:
    from kubernetes.client.rest import ApiException

    context = ssl.create_default_context(cadata=sim.cluster.tls.ca_pem.decode())
    headers = {"Authorization": f"Bearer {sim.cluster.server.token}", "Content-Type": "application/json"}

    def call(method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{sim.url}{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, context=context) as resp:
            return json.loads(resp.read())

    created = call(
        "POST", "/_sim/faults", {"spec": f"verb=list,resource=configmaps,namespace={namespace},error=500"}
    )
    with pytest.raises(ApiException) as caught:
        core_api(k8s).list_namespaced_config_map(namespace)
    assert caught.value.status == 500
    assert [i["id"] for i in call("GET", "/_sim/faults")["items"]] == [created["id"]]
    assert call("DELETE", f"/_sim/faults/{created['id']}") == {"removed": 1}
    assert core_api(k8s).list_namespaced_config_map(namespace).kind == "ConfigMapList"


def test_latency(k8s: Any, namespace: str, faults: Any) -> None:
    core = core_api(k8s)
    faults.add(verb="list", resource="configmaps", namespace=namespace, latency=0.3)
    started = time.monotonic()
    core.list_namespaced_config_map(namespace)
    assert time.monotonic() - started >= 0.3

"""The controller runtime's hot path over real HTTP, by counting (runtime throughput).

What one reconciled object costs the operator and the API server: one status PATCH, no GET (the
cache answers), no thread hop per request; and what an I/O-bound controller needs to be fast: its
workers reconcile concurrently. Counts, never timings.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from aiplane.controllers import echo
from aiplane.controllers.echo import CRD, ECHOES
from aiplane.kube.client import HttpKubeClient
from aiplane.kube.informer import InformerFactory
from aiplane.kube.resources import CRDS
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import http_client, until

AGENT = "aiplane-test"  # http_client's User-Agent product: what the server counts our requests under
OBJECTS = 30


def _counts(cluster: EmbeddedCluster) -> dict[str, int]:
    return {verb: n for (verb, agent), n in cluster.server.request_stats.items() if agent == AGENT}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {verb: n - before.get(verb, 0) for verb, n in after.items() if n != before.get(verb, 0)}


async def _create_echoes(client: HttpKubeClient, n: int) -> None:
    await client.create(CRDS, CRD)
    for i in range(n):
        body = {
            "apiVersion": "diagnostics.aiplane.io/v1",
            "kind": "Echo",
            "metadata": {"name": f"e{i}"},
            "spec": {"value": f"v{i}"},
        }
        await client.create(ECHOES, body, namespace="default")


class _ExecutorCalls:
    """Counts ``loop.run_in_executor`` (``asyncio.to_thread`` too): a thread hop per request would show."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls: list[str] = []
        self._loop = loop
        self._original: Callable[..., Any] = loop.run_in_executor

    def __enter__(self) -> _ExecutorCalls:
        def counting(executor: Any, func: Callable[..., Any], *args: Any) -> Any:
            self.calls.append(getattr(func, "__qualname__", repr(func)))
            return self._original(executor, func, *args)

        self._loop.run_in_executor = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self._loop.run_in_executor  # back to the class's method


async def test_each_echo_costs_one_status_patch_no_get_and_no_thread_hop(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    await _create_echoes(client, OBJECTS)
    informers = InformerFactory(client)
    controller = echo.new_controller(client, informers, workers=4).bind(informers)
    informer = informers.informer(ECHOES)
    before = _counts(cluster)
    stop = asyncio.Event()
    with _ExecutorCalls(asyncio.get_running_loop()) as hops:
        informers.start()
        task = asyncio.create_task(controller.run(stop, drain_timeout=5))
        try:

            async def all_echoed() -> bool:
                return all(
                    (informer.get(f"default/e{i}") or {}).get("status", {}).get("value") == f"v{i}"
                    for i in range(OBJECTS)
                )

            await until(all_echoed, "every Echo shows its status", timeout=15)
        finally:
            stop.set()
            await task
            await informers.stop()
    requests = _delta(_counts(cluster), before)
    # One LIST and one WATCH to fill the cache; then a merge PATCH of the status per object and
    # nothing else: the status write's own watch event is reconciled from the cache, without a write.
    assert requests == {"GET": 1, "WATCH": 1, "PATCH": OBJECTS}
    assert hops.calls == []  # no netrc or proxy lookup in a thread per request (aiohttp's trust_env)


async def test_the_proxy_is_resolved_once_from_the_environment(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without aiohttp's per-request environment lookup, HTTPS_PROXY/NO_PROXY still apply (client-go's
    ProxyFromEnvironment): set when the client is built, and the server exempted by NO_PROXY."""
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with http_client(cluster) as proxied:
        assert proxied.proxy == "http://proxy.example:3128"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    async with http_client(cluster) as direct:
        assert direct.proxy is None
        assert (await direct.request("GET", "/version"))["major"]
    kubeconfig = copy.deepcopy(cluster.kubeconfig())
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = "http://kubeconfig-proxy.example:8080"
    async with http_client(cluster, kubeconfig) as configured:  # the kubeconfig's proxy-url wins
        assert configured.proxy == "http://kubeconfig-proxy.example:8080"

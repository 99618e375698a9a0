"""Connections that die without closing must not stall the operator, and quiet watches are not dead.

A :class:`~tests.chaos.proxy.ChaosProxy` sits between a Manager (real HTTP client) and the embedded API
server. A quiet resource's watch hears nothing (kube bookmarks only a resource that changed) and is
re-opened from its resourceVersion at each read deadline: ``/readyz`` stays 200. Black-holing the open
connections (new ones still work, as after a NAT drop or a load-balancer failover) is noticed within
the read deadline and the controller resumes; an outage (new connections black-holed too) makes the
informer stale within its bounds: ``/readyz`` fails naming it and the metric says so, until the server
is reachable again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio.client import Configuration

from aiplane.controllers.echo import CRD, ECHOES, new_controller
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.informer import Backoff
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CRDS, NODES
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet
from tests.chaos.proxy import ChaosProxy
from tests.polling import eventually

STALE_AFTER = 1.0
IDLE_TIMEOUT = 0.4
REQUEST_TIMEOUT = 1.0


@contextlib.asynccontextmanager
async def proxied_client(cluster: EmbeddedCluster, proxy: ChaosProxy) -> AsyncIterator[HttpKubeClient]:
    kubeconfig = cluster.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    configuration = Configuration()
    await kconfig.load_kube_config_from_dict(kubeconfig, client_configuration=configuration)
    client = HttpKubeClient(
        configuration, qps=1000, burst=1000, request_timeout=REQUEST_TIMEOUT, connect_timeout=REQUEST_TIMEOUT
    )
    try:
        yield client
    finally:
        await client.close()


def _echo(value: str) -> dict[str, Any]:
    return {
        "apiVersion": "diagnostics.aiplane.io/v1",
        "kind": "Echo",
        "metadata": {"name": "e", "namespace": "default"},
        "spec": {"value": value},
    }


async def _sample(
    http: aiohttp.ClientSession, manager: Manager, samples: list[tuple[float, int, bool]]
) -> None:
    """Record (when, /readyz status, whether the metric says the Echo informer is stale) until cancelled."""
    stale_metric = 'aiplane_informer_stale{informer="echoes.diagnostics.aiplane.io"} 1.0'
    while True:
        async with http.get(f"http://127.0.0.1:{manager.health_port}/readyz") as resp:
            status = resp.status
        exposed = manager.metrics.exposition()[0].decode()
        samples.append((time.monotonic(), status, stale_metric in exposed))
        await asyncio.sleep(0.02)


async def test_quiet_watches_stay_fresh_black_holes_are_noticed_and_outages_turn_informers_stale() -> None:
    cluster = EmbeddedCluster(fleet=Fleet(nodePools=[]), install_crds=False)
    url = await cluster.start()
    proxy = ChaosProxy("127.0.0.1", int(url.rsplit(":", 1)[1]))
    await proxy.start()
    direct = InMemoryKubeClient.for_cluster(cluster)
    await direct.create(CRDS, CRD)
    await direct.create(ECHOES, _echo("a"), namespace="default")
    async with proxied_client(cluster, proxy) as client:
        manager = Manager(
            client,
            health_probe_bind_address="127.0.0.1:0",
            handle_signals=False,
            stale_after=STALE_AFTER,
            watch_idle_timeout=IDLE_TIMEOUT,
            informer_backoff=lambda: Backoff(initial=0.05, cap=0.2),
        )
        manager.add_controller(new_controller(client, manager.informers))
        task = asyncio.create_task(manager.run())
        samples: list[tuple[float, int, bool]] = []
        sampler: asyncio.Task[None] | None = None

        async def echoed() -> str:
            obj = await direct.get(ECHOES, "e", "default")
            return str((obj.get("status") or {}).get("value") or "")

        async with aiohttp.ClientSession() as http:
            try:
                await eventually(lambda: manager.serving.is_set() and manager.cache_synced.is_set(), 10)
                await eventually(echoed, 10, "the first echo")
                informer = manager.informers.informer(ECHOES)
                sampler = asyncio.create_task(_sample(http, manager, samples))
                # Quiet: nobody writes Echoes, so the watch hears nothing (no bookmarks either, as on
                # kube) and is re-opened from its resourceVersion at each read deadline; never stale.
                quiet_from = informer.stats.idle_timeouts
                await asyncio.sleep(3 * STALE_AFTER)  # a measurement window, not a wait for anything
                assert {status for _, status, _ in samples} == {200}
                assert informer.stats.idle_timeouts >= quiet_from + 3
                assert informer.stats.relists == 0

                # Half-open: the open connections go dead silently; new ones work. The watch is
                # re-opened at each read deadline, so at a given instant it may have no connection:
                # the first one open is caught.
                await eventually(lambda: proxy.black_hole() >= 1, 5, "an open connection to black-hole")
                holed = time.monotonic()
                await direct.patch(ECHOES, "e", {"spec": {"value": "b"}}, namespace="default")

                # Noticed within the bounds: the read deadline, a new watch on a new connection, a write.
                async def resumed(value: str) -> bool:
                    return await echoed() == value

                await eventually(lambda: resumed("b"), 5, "the controller resuming")
                assert time.monotonic() - holed < IDLE_TIMEOUT + 3 * REQUEST_TIMEOUT + 1
                assert informer.stats.idle_timeouts > quiet_from + 3

                # An outage: every connection, old and new, goes nowhere.
                proxy.black_hole(new_connections=True)
                outage = time.monotonic()

                async def stale_reported() -> str:
                    async with http.get(f"http://127.0.0.1:{manager.health_port}/readyz/informers") as resp:
                        return await resp.text() if resp.status == 500 else ""

                reason = await eventually(stale_reported, IDLE_TIMEOUT + STALE_AFTER + 1, "/readyz failing")
                assert "echoes.diagnostics.aiplane.io" in reason
                assert time.monotonic() - outage >= STALE_AFTER - IDLE_TIMEOUT  # not before nothing was heard
                proxy.heal()
                await direct.patch(ECHOES, "e", {"spec": {"value": "c"}}, namespace="default")
                await eventually(lambda: resumed("c"), 5, "the controller resuming after the outage")
                await eventually(lambda: samples[-1][1] == 200, 5, "/readyz back to 200")
            finally:
                if sampler is not None:
                    sampler.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sampler
                manager.stop()
                assert await task == 0
        after = [(status, metric) for at, status, metric in samples if at > outage]
        assert (500, True) in after  # /readyz failed and the metric said stale, while stale
        assert after[-1] == (200, False)
    await proxy.stop()
    await cluster.stop()


async def test_a_request_the_server_never_answers_times_out_within_the_bound() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        await asyncio.sleep(60)  # accepts, reads the request, never answers

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    configuration = Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    client = HttpKubeClient(configuration, request_timeout=0.5)
    started = time.monotonic()
    try:
        async with asyncio.timeout(5):
            with pytest.raises(ApiError) as caught:
                await client.get(NODES, "n")
    finally:
        await client.close()
        server.close()
    assert caught.value.status == 0 and caught.value.reason == "Timeout"
    assert caught.value.transient
    assert time.monotonic() - started < 2


async def _silent_server(answer: bytes) -> tuple[asyncio.Server, HttpKubeClient]:
    """A server that reads the request, writes ``answer`` (maybe nothing) and then says nothing more."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(60)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    configuration = Configuration()
    configuration.host = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    return server, HttpKubeClient(configuration, request_timeout=0.5)


async def test_a_watch_the_server_never_answers_fails_within_the_request_deadline() -> None:
    server, client = await _silent_server(b"")
    opened: list[bool] = []
    started = time.monotonic()
    try:
        async with asyncio.timeout(5):
            with pytest.raises(ApiError) as caught:
                await anext(client.watch(NODES, on_open=lambda: opened.append(True)))
    finally:
        await client.close()
        server.close()
    assert caught.value.status == 0 and caught.value.reason == "Timeout" and caught.value.transient
    assert time.monotonic() - started < 2 and not opened


async def test_an_answered_watch_may_stay_silent_past_the_request_deadline() -> None:
    headers = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    server, client = await _silent_server(headers)
    opened: list[float] = []
    stream = client.watch(NODES, on_open=lambda: opened.append(time.monotonic()))
    pending = asyncio.ensure_future(anext(stream))
    try:
        await eventually(lambda: opened, 2, "the watch answered")
        # Four request deadlines of silence on an answered watch: still open (the informer's read
        # deadline, not the client's, decides when a quiet watch is re-opened).
        await asyncio.sleep(4 * client.request_timeout)  # type: ignore[operator]  # a measurement window
        assert not pending.done()
    finally:
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
        await stream.aclose()  # type: ignore[attr-defined]
        await client.close()
        server.close()

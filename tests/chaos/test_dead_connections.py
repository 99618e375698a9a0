"""Finding 1 of issue 16: connections that die without closing must not stall the operator.

A :class:`~tests.chaos.proxy.ChaosProxy` sits between a Manager (real HTTP client) and the embedded API
server; black-holing the open connections (new ones still work, as after a NAT drop or a load-balancer
failover) must be noticed within the informer's bounds: ``/readyz`` fails naming the informer while it
is stale, the metric says so, the watch is abandoned and relisted, and the controller resumes.
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
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CRDS, NODES
from aiplane.sim.apiserver import watch
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet
from tests.chaos.proxy import ChaosProxy
from tests.polling import eventually

STALE_AFTER = 0.5
IDLE_TIMEOUT = 1.5
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


async def test_black_holed_connections_are_noticed_and_the_controller_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Bookmarks every 0.2 s (kube: every minute) so healthy quiet watches stay fresh under a 0.5 s bound.
    monkeypatch.setattr(watch, "BOOKMARK_FREQUENCY", 0.2)
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
        )
        manager.add_controller(new_controller(client, manager.informers))
        task = asyncio.create_task(manager.run())
        samples: list[tuple[float, int, bool]] = []
        sampling = True
        sampler: asyncio.Task[None] | None = None

        async def echoed() -> str:
            obj = await direct.get(ECHOES, "e", "default")
            return str((obj.get("status") or {}).get("value") or "")

        async with aiohttp.ClientSession() as http:

            async def sample() -> None:
                while sampling:
                    async with http.get(f"http://127.0.0.1:{manager.health_port}/readyz") as resp:
                        status = resp.status
                    stale_metric = 'aiplane_informer_stale{informer="echoes.diagnostics.aiplane.io"} 1.0'
                    exposed = manager.metrics.exposition()[0].decode()
                    samples.append((time.monotonic(), status, stale_metric in exposed))
                    await asyncio.sleep(0.02)

            try:
                await eventually(lambda: manager.serving.is_set() and manager.cache_synced.is_set(), 10)
                await eventually(echoed, 10, "the first echo")
                sampler = asyncio.create_task(sample())
                # Quiet for a while: healthy informers stay fresh (bookmarks), /readyz stays 200.
                await asyncio.sleep(3 * STALE_AFTER)  # a measurement window, not a wait for anything
                assert {status for _, status, _ in samples} == {200}

                assert proxy.black_hole() >= 1  # the watch (at least) goes dead, silently
                holed = time.monotonic()
                await direct.patch(ECHOES, "e", {"spec": {"value": "b"}}, namespace="default")

                async def stale_reported() -> str:
                    async with http.get(f"http://127.0.0.1:{manager.health_port}/readyz/informers") as resp:
                        return await resp.text() if resp.status == 500 else ""

                reason = await eventually(stale_reported, IDLE_TIMEOUT + 1, "/readyz failing")
                assert "echoes.diagnostics.aiplane.io" in reason

                # Noticed within the bounds: the idle deadline, a relist on a new connection, a write.
                async def resumed() -> bool:
                    return await echoed() == "b"

                await eventually(resumed, 5, "the controller resuming")
                assert time.monotonic() - holed < IDLE_TIMEOUT + 3 * REQUEST_TIMEOUT + 1
                informer = manager.informers.informer(ECHOES)
                assert informer.stats.idle_timeouts >= 1
                await eventually(lambda: samples[-1][1] == 200, 5, "/readyz back to 200")
            finally:
                sampling = False
                if sampler is not None:
                    await sampler
                manager.stop()
                assert await task == 0
        after = [(status, metric) for at, status, metric in samples if at > holed]
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

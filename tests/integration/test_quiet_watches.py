"""A resource nobody writes: its watch hears nothing, on kube-apiserver as on the twin, and the
operator's informer must stay fresh — re-opening the watch from its resourceVersion at each read
deadline, never relisting, never failing ``/readyz``.

kube's cacher bookmarks a watch only once its resource changed since the watch began (docs/sim.md,
"Watch"), so before the informer counted an established watch as hearing from the server, a quiet
informer (Ingresses, Events) went stale every ``stale_after`` on a real control plane. Run on both
tiers: the twin in process, and the real control plane (``real``: tests/realtier.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.manager import Manager
from aiplane.kube.resources import INGRESSES
from aiplane.realcluster import RealCluster
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet
from tests.integration.sim_helpers import http_client
from tests.polling import eventually

IDLE_TIMEOUT = 3.0
STALE_AFTER = 6.0
#: The measurement window: five read deadlines, two and a half staleness bounds.
WINDOW = 15.0


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.real)])
async def kube(request: pytest.FixtureRequest) -> AsyncIterator[HttpKubeClient]:
    """An admin HTTP client of the twin or of the real control plane."""
    if request.param == "real":
        real: RealCluster = request.getfixturevalue("real_cluster")
        client = await HttpKubeClient.from_kubeconfig(str(Path(real.kubeconfig)))
        try:
            yield client
        finally:
            await client.close()
        return
    cluster = EmbeddedCluster(fleet=Fleet(nodePools=[]), install_crds=False)
    await cluster.start()
    try:
        async with http_client(cluster) as client:
            yield client
    finally:
        await cluster.stop()


async def test_an_informer_of_a_resource_nobody_writes_never_goes_stale_nor_relists(
    kube: HttpKubeClient,
) -> None:
    manager = Manager(
        kube,
        health_probe_bind_address="127.0.0.1:0",
        handle_signals=False,
        stale_after=STALE_AFTER,
        watch_idle_timeout=IDLE_TIMEOUT,
    )
    informer = manager.informers.informer(INGRESSES)
    task = asyncio.create_task(manager.run())
    statuses: set[int] = set()
    stale: list[bool] = []
    try:
        await eventually(lambda: manager.serving.is_set() and manager.cache_synced.is_set(), 30, "synced")
        started = time.monotonic()
        async with aiohttp.ClientSession() as http:

            async def window_over() -> bool:
                async with http.get(f"http://127.0.0.1:{manager.health_port}/readyz") as resp:
                    statuses.add(resp.status)
                stale.append(informer.stale)
                return time.monotonic() - started >= WINDOW

            await eventually(window_over, WINDOW + 5, "the measurement window", interval=0.1)
        stats = informer.stats
        assert statuses == {200} and stale and not any(stale)
        assert stats.lists == 1 and stats.relists == 0 and stats.failures == 0, stats
        # Silent watches, each re-opened from the list's resourceVersion at its read deadline.
        assert stats.events == 0 and stats.idle_timeouts >= int(WINDOW / IDLE_TIMEOUT) - 1, stats
        assert stats.watches == stats.idle_timeouts + 1, stats
    finally:
        manager.stop()
        assert await task == 0

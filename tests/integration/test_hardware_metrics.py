"""The simulated GPU metrics exporter's own settings endpoint (``/utilization`` beside ``/metrics``): what
``aiplane hardware`` offers where no embedded API server serves ``/_sim/gpu-utilization``."""

from __future__ import annotations

import aiohttp

from aiplane.sim.cluster import EmbeddedCluster


async def test_utilization_is_set_shown_refused_and_reset_on_the_exporters_port() -> None:
    cluster = EmbeddedCluster()
    await cluster.start()
    try:
        assert cluster.gpu_metrics.url is not None
        url = cluster.gpu_metrics.url.removesuffix("/metrics") + "/utilization"
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json={"namespace": "team-a", "utilization": 7}) as response:
                assert response.status == 200
                assert (await response.json())["namespaces"] == {"team-a": 7.0}
            async with session.post(url, json={"default": 101}) as response:
                assert response.status == 400
                assert "within 0..100" in (await response.json())["message"]
            assert cluster.gpu_metrics.utilization("team-a", "any") == 7.0
            async with session.delete(url) as response:
                assert (await response.json()) == {"default": 50.0, "namespaces": {}, "pods": {}}
    finally:
        await cluster.stop()

"""A controller over real HTTP while the API server misbehaves: backoff under 500s, Retry-After on 429."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from aiplane.controllers.echo import CRD, ECHOES, FIELD_MANAGER
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.controller import Controller, Request, Result
from aiplane.kube.informer import InformerFactory
from aiplane.kube.resources import CRDS
from aiplane.sim.cluster import EmbeddedCluster
from tests.backoff import scheduled_delays


def _echo(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "diagnostics.aiplane.io/v1",
        "kind": "Echo",
        "metadata": {"name": name},
        "spec": {"value": "v"},
    }


async def _until(check: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met before the deadline")


async def test_backoff_grows_under_injected_500s_then_the_write_lands(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    await client.create(CRDS, CRD)
    await client.create(ECHOES, _echo("e"), namespace="default")
    attempts: list[float] = []
    informers = InformerFactory(client)
    informer = informers.informer(ECHOES)

    async def reconcile(request: Request) -> Result | None:
        obj = informer.get(request.key)
        if obj is None or (obj.get("status") or {}).get("value") == "v":
            return None
        attempts.append(time.monotonic())
        await client.patch(
            ECHOES,
            request.name,
            {"status": {"value": "v"}},
            namespace=request.namespace,
            subresource="status",
            field_manager=FIELD_MANAGER,
        )
        return None

    cluster.server.faults.add(verb="patch", resource="echoes/status", error=500, count=6)
    controller = Controller.build("faulty").for_(ECHOES).reconcile(reconcile).bind(informers)
    delays = scheduled_delays(controller)  # wall-clock gaps only bound the backoff from below
    informers.start()
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop, drain_timeout=5))
    try:
        await _until(lambda: (informer.get("default/e") or {}).get("status", {}).get("value") == "v")
    finally:
        stop.set()
        await task
        await informers.stop()
    assert len(attempts) == 7  # six injected 500s, then success
    assert delays == pytest.approx([0.005 * 2**i for i in range(6)])  # exponential: 5 ms ... 160 ms
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert all(gap >= delay for gap, delay in zip(gaps, delays, strict=True))  # no retry came early
    assert controller.queue.num_requeues(Request("default", "e")) == 0  # success forgot the failures


async def test_429_is_retried_after_retry_after(cluster: EmbeddedCluster, client: HttpKubeClient) -> None:
    await client.create(CRDS, CRD)
    cluster.server.faults.add(verb="create", resource="echoes", error=429, retry_after=1, count=1)
    started = time.monotonic()
    created = await client.create(ECHOES, _echo("throttled"), namespace="default")
    assert created["metadata"]["name"] == "throttled"
    assert time.monotonic() - started >= 1.0  # waited the server's Retry-After, then succeeded


async def test_an_eviction_429_is_an_answer_not_throttling(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    cluster.server.faults.add(verb="create", resource="pods/eviction", error=429, retry_after=30, count=1)
    started = time.monotonic()
    with pytest.raises(ApiError) as caught:
        await client.evict("missing", "default")
    assert caught.value.too_many_requests
    assert time.monotonic() - started < 5  # surfaced at once for the caller's own policy

"""Controllers: enqueueing from informers, never concurrent per key, backoff, owners, predicates, zero writes."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.controllers.echo import CRD, ECHOES, new_controller
from aiplane.kube.client import ApiError
from aiplane.kube.controller import Controller, Request, Result, generation_changed
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import InformerFactory
from aiplane.kube.resources import CONFIGMAPS, CRDS, EVENTS, SECRETS
from aiplane.sim.client import InMemoryKubeClient
from tests.backoff import scheduled_delays
from tests.polling import eventually


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh(install_crds=False)
    yield c
    await c.close()


class Running:
    """A controller and its informers running until the test ends."""

    def __init__(self, client: InMemoryKubeClient) -> None:
        self.informers = InformerFactory(client)
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self, controller: Controller) -> Controller:
        controller.bind(self.informers)
        self.informers.start()
        assert await self.informers.wait_for_sync(10)
        self.tasks.append(asyncio.create_task(controller.run(self.stop, drain_timeout=5)))
        return controller

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)
        await self.informers.stop()


@pytest.fixture
async def running(client: InMemoryKubeClient) -> AsyncIterator[Running]:
    r = Running(client)
    yield r
    await r.close()


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


async def test_a_key_is_never_reconciled_concurrently(client: InMemoryKubeClient, running: Running) -> None:
    active: dict[str, int] = {}
    worst = 0
    calls = 0

    async def reconcile(request: Request) -> Result | None:
        nonlocal worst, calls
        calls += 1
        active[request.key] = active.get(request.key, 0) + 1
        worst = max(worst, active[request.key])
        await asyncio.sleep(0.002)
        active[request.key] -= 1
        return None

    controller = await running.start(Controller.build("c").for_(CONFIGMAPS).workers(8).reconcile(reconcile))
    await client.create(CONFIGMAPS, cm("hot", v="0"))
    for i in range(40):
        await client.patch(CONFIGMAPS, "hot", {"data": {"v": str(i)}}, namespace="default")
        controller.enqueue(Request("default", "hot"))
    await eventually(lambda: len(controller.queue) == 0 and controller.queue.num_processing == 0)
    assert worst == 1
    assert calls < 41  # events for one key coalesce in the queue


async def test_k_workers_reconcile_k_different_keys_at_once(
    client: InMemoryKubeClient, running: Running
) -> None:
    """An I/O-bound controller's throughput is its concurrency (controller-runtime's
    MaxConcurrentReconciles): with K workers and more than K keys waiting, K reconciles are in flight
    together, never more, and no successful one builds a logger (the hot path stays lean)."""
    in_flight = 0
    peak = 0
    release = asyncio.Event()

    async def reconcile(request: Request) -> Result | None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await release.wait()
        in_flight -= 1
        return None

    for i in range(10):
        await client.create(CONFIGMAPS, cm(f"c{i}"))
    controller = Controller.build("c").for_(CONFIGMAPS).workers(4).reconcile(reconcile)
    logger = controller._log
    binds: list[dict[str, Any]] = []

    class CountingLogger:
        def bind(self, **kw: Any) -> Any:
            binds.append(kw)
            return logger.bind(**kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(logger, name)

    controller._log = CountingLogger()
    await running.start(controller)
    await eventually(lambda: peak == 4)
    assert controller.queue.num_processing == 4 and len(controller.queue) >= 6
    release.set()
    await eventually(lambda: len(controller.queue) == 0 and controller.queue.num_processing == 0)
    assert peak == 4
    assert binds == []


async def test_errors_requeue_with_growing_backoff_and_success_forgets(
    client: InMemoryKubeClient, running: Running
) -> None:
    attempts: list[float] = []

    async def reconcile(request: Request) -> Result | None:
        if request.name != "flaky":
            return None
        attempts.append(time.monotonic())
        if len(attempts) < 6:
            raise ApiError(500, "InternalError", "injected")
        return None

    controller = Controller.build("c").for_(CONFIGMAPS).reconcile(reconcile)
    delays = scheduled_delays(controller)  # wall-clock gaps only bound the backoff from below
    await running.start(controller)
    await client.create(CONFIGMAPS, cm("flaky"))
    await eventually(lambda: len(attempts) >= 6)
    assert delays == pytest.approx([0.005 * 2**i for i in range(5)])  # 5 ms, 10 ms, 20 ms, 40 ms, 80 ms
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert all(gap >= delay for gap, delay in zip(gaps, delays, strict=True))
    await eventually(lambda: controller.queue.num_requeues(Request("default", "flaky")) == 0)


async def test_requeue_after_schedules_another_look(client: InMemoryKubeClient, running: Running) -> None:
    seen: list[float] = []

    async def reconcile(request: Request) -> Result | None:
        if request.name != "later":
            return None
        seen.append(time.monotonic())
        return Result(requeue_after=0.05) if len(seen) < 3 else None

    await running.start(Controller.build("c").for_(CONFIGMAPS).reconcile(reconcile))
    await client.create(CONFIGMAPS, cm("later"))
    await eventually(lambda: len(seen) >= 3)
    assert seen[2] - seen[1] >= 0.045


async def test_a_child_change_enqueues_its_controlling_owner(
    client: InMemoryKubeClient, running: Running
) -> None:
    reconciled: list[str] = []

    async def reconcile(request: Request) -> Result | None:
        reconciled.append(request.key)
        return None

    await running.start(Controller.build("c").for_(CONFIGMAPS).owns(SECRETS).reconcile(reconcile))
    owner = await client.create(CONFIGMAPS, cm("owner"))
    await eventually(lambda: "default/owner" in reconciled)
    reconciled.clear()
    child = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "child",
            "namespace": "default",
            "ownerReferences": [controller_owner_reference(owner)],
        },
        "stringData": {"k": "v"},
    }
    await client.create(SECRETS, child)
    await eventually(lambda: "default/owner" in reconciled)
    assert "default/child" not in reconciled


async def test_generation_predicate_ignores_status_and_metadata_only_changes(
    client: InMemoryKubeClient, running: Running
) -> None:
    await client.create(CRDS, CRD)
    reconciled: list[int] = []

    async def reconcile(request: Request) -> Result | None:
        reconciled.append(1)
        return None

    ctl = await running.start(
        Controller.build("c").for_(ECHOES, predicates=[generation_changed]).reconcile(reconcile)
    )
    body = {
        "apiVersion": "diagnostics.aiplane.io/v1",
        "kind": "Echo",
        "metadata": {"name": "e"},
        "spec": {"value": "a"},
    }
    await client.create(ECHOES, body, namespace="default")
    await eventually(lambda: len(reconciled) == 1)
    await client.patch(ECHOES, "e", {"status": {"value": "x"}}, namespace="default", subresource="status")
    await client.patch(ECHOES, "e", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    last = await client.patch(ECHOES, "e", {"spec": {"value": "b"}}, namespace="default")
    informer = running.informers.informer(ECHOES)
    await eventually(lambda: int(informer.resource_version or 0) >= int(last["metadata"]["resourceVersion"]))
    await eventually(lambda: len(reconciled) >= 2)
    await eventually(lambda: len(ctl.queue) == 0 and ctl.queue.num_processing == 0)
    assert len(reconciled) == 2  # the informer has seen every write; only the spec change passed


async def test_echo_controller_converges_with_one_write_each_and_then_writes_nothing(
    client: InMemoryKubeClient, running: Running
) -> None:
    await client.create(CRDS, CRD)
    count = 1000
    for i in range(count):
        body = {
            "apiVersion": "diagnostics.aiplane.io/v1",
            "kind": "Echo",
            "metadata": {"name": f"e{i}"},
            "spec": {"value": f"v{i}"},
        }
        await client.create(ECHOES, body, namespace="default")
    client.reset_counts()
    controller = await running.start(new_controller(client, running.informers, workers=4))

    async def converged() -> bool:
        items = (await client.list(ECHOES, "default"))["items"]
        return sum(1 for o in items if (o.get("status") or {}).get("value") == o["spec"]["value"]) == count

    await eventually(converged, timeout=60)
    await eventually(lambda: len(controller.queue) == 0 and controller.queue.num_processing == 0)
    first_pass = client.writes
    assert first_pass == count  # exactly one status write per object
    client.reset_counts()
    for key in list(running.informers.informer(ECHOES).keys()):
        ns, name = key.split("/")
        controller.enqueue(Request(ns, name))
    await eventually(lambda: len(controller.queue) == 0 and controller.queue.num_processing == 0)
    assert client.writes == 0  # a full second pass at steady state writes nothing


async def test_event_recorder_aggregates_repeats_and_rate_limits(client: InMemoryKubeClient) -> None:
    obj = await client.create(CONFIGMAPS, cm("subject"))
    recorder = EventRecorder(client, "tester", host="h")
    for _ in range(3):
        await recorder.event(obj, "Warning", "Broken", "it broke")
    await recorder.event(obj, "Normal", "Fixed", "it is fine")
    events = (await client.list(EVENTS, "default"))["items"]
    by_reason = {e["reason"]: e for e in events}
    assert by_reason["Broken"]["count"] == 3 and by_reason["Fixed"]["count"] == 1
    assert by_reason["Broken"]["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert by_reason["Broken"]["source"] == {"component": "tester", "host": "h"}
    for i in range(40):
        await recorder.event(obj, "Normal", "Spam", f"message {i}")
    assert recorder.dropped > 0  # burst of 25 per object, then one per 5 minutes

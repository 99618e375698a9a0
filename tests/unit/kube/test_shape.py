"""The one controller shape run by the runtime: observe → decide(now) → act → report, in that order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from aiplane.kube.clock import FakeClock
from aiplane.kube.controller import Controller, Request, Result
from aiplane.kube.events import EventRecorder
from aiplane.kube.resources import CONFIGMAPS
from aiplane.kube.shape import Shaped
from aiplane.sim.client import InMemoryKubeClient
from tests.polling import eventually
from tests.unit.kube.test_controller import Running, cm


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh(install_crds=False)
    yield c
    await c.close()


@pytest.fixture
async def running(client: InMemoryKubeClient) -> AsyncIterator[Running]:
    r = Running(client)
    yield r
    await r.close()


@dataclass(frozen=True)
class Decision:
    data: dict[str, str]
    at: datetime


class Mirror:
    """Copies a ConfigMap's data into ``<name>-copy``, stamped with the decision's time."""

    def __init__(self, client: InMemoryKubeClient) -> None:
        self.client = client
        self.recorder = EventRecorder(client, "mirror-controller")
        self.steps: list[str] = []

    async def observe(self, request: Request) -> dict[str, Any] | None:
        self.steps.append("observe")
        if request.name.endswith("-copy"):
            return None
        return await self.client.get(CONFIGMAPS, request.name, namespace=request.namespace)

    def decide(self, observed: dict[str, Any], now: datetime) -> Decision:
        self.steps.append("decide")
        return Decision(dict(observed.get("data") or {}), now)

    async def act(self, observed: dict[str, Any], decision: Decision) -> None:
        self.steps.append("act")
        body = cm(f"{observed['metadata']['name']}-copy", **decision.data, at=decision.at.isoformat())
        await self.client.create(CONFIGMAPS, body)

    async def report(self, observed: dict[str, Any], decision: Decision) -> Result | None:
        self.steps.append("report")
        return None


async def test_the_runtime_observes_decides_at_the_clocks_time_acts_and_reports_in_order(
    client: InMemoryKubeClient, running: Running
) -> None:
    clock = FakeClock()
    shape = Mirror(client)
    await running.start(Controller.build("mirror").for_(CONFIGMAPS).reconcile(Shaped(shape, clock)))
    await client.create(CONFIGMAPS, cm("a", k="v"))

    async def copied() -> dict[str, Any] | None:
        items = (await client.list(CONFIGMAPS, "default"))["items"]
        return next((c for c in items if c["metadata"]["name"] == "a-copy"), None)

    copy = await eventually(copied)
    assert copy["data"] == {"k": "v", "at": clock.now().isoformat()}
    first = shape.steps.index("observe")
    assert shape.steps[first : first + 4] == ["observe", "decide", "act", "report"]


async def test_nothing_is_decided_for_an_object_observe_finds_absent(
    client: InMemoryKubeClient, running: Running
) -> None:
    shape = Mirror(client)
    reconcile = Shaped(shape, FakeClock())
    assert await reconcile(Request("default", "x-copy")) is None
    assert shape.steps == ["observe"]
    assert reconcile.recorder is shape.recorder


async def test_the_primary_kind_can_map_its_events_to_a_coarser_request(
    client: InMemoryKubeClient, running: Running
) -> None:
    reconciled: list[Request] = []

    async def reconcile(request: Request) -> Result | None:
        reconciled.append(request)
        return None

    def to_namespace(obj: dict[str, Any]) -> list[Request]:
        return [Request(None, obj["metadata"]["namespace"])]

    await running.start(Controller.build("ns").for_(CONFIGMAPS, map_fn=to_namespace).reconcile(reconcile))
    await client.create(CONFIGMAPS, cm("a"))
    await eventually(lambda: Request(None, "default") in reconciled)
    assert Request("default", "a") not in reconciled

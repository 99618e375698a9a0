"""The ModelInfer controller reads its own status writes back: a pod event that reconciles a ModelInfer
before the watch has delivered the controller's previous status write does not send a status patch
guarded by the stale resourceVersion (refused with 409 Conflict, a wasted write and a retry)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiplane.api import kinds
from aiplane.controllers.modelinfer import controller as mic
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, PODS, Resource
from aiplane.sim.client import InMemoryKubeClient
from tests.polling import eventually
from tests.unit.modelinfer.test_controller import MI, NS, modelinfer

GROUPS = 3
PODS_PER_GROUP = 3  # prefill entry + worker, decode entry


class HeldModelInferWatch(InMemoryKubeClient):
    """The operator's client: its ModelInfer watch delivers nothing until :attr:`thaw` is set (so
    every pod event reconciles the ModelInfer before the watch shows the controller's own status
    writes), and the ModelInfer status patches the server refuses with a conflict are counted."""

    thaw: asyncio.Event
    refused: int = 0
    accepted: int = 0

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        async for event in super().stream(path, query, on_open=on_open):
            if path == MI.path():
                await self.thaw.wait()
            yield event

    async def patch(self, res: Resource, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        status_of_mi = res == MI and kw.get("subresource") == "status"
        try:
            written = await super().patch(res, name, patch, **kw)
        except ApiError as exc:
            if status_of_mi and exc.status == 409:
                self.refused += 1
            raise
        self.accepted += status_of_mi
        return written


async def _status(client: InMemoryKubeClient) -> dict[str, Any]:
    return (await client.get(MI, "m", NS)).get("status") or {}


async def _make_ready(client: InMemoryKubeClient, group: int) -> None:
    for pod in (await client.list(PODS, namespace=NS))["items"]:
        if pod["metadata"]["labels"]["modelinfer.volcano.sh/group-name"] == f"m-{group}":
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            await client.replace_status(PODS, pod)


async def test_pod_events_ahead_of_the_status_watch_cause_no_conflicts() -> None:
    client = InMemoryKubeClient.fresh()
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.create(MI, modelinfer(replicas=GROUPS), namespace=NS)
    operator = HeldModelInferWatch.for_cluster(client.cluster)
    operator.thaw = asyncio.Event()
    manager = Manager(operator, leader_election=None, handle_signals=False)
    await mic.setup(manager)
    task = asyncio.create_task(manager.run())
    cached = manager.informers.informer(kinds.MODELINFERS)
    try:

        async def created() -> bool:
            return len((await client.list(PODS, namespace=NS))["items"]) == GROUPS * PODS_PER_GROUP

        await eventually(created)
        for group in range(GROUPS):
            await _make_ready(client, group)

            async def reported(n: int = group + 1) -> bool:
                return operator.refused > 0 or (await _status(client)).get("availableReplicas") == n

            await eventually(reported)
            assert operator.refused == 0
        # Every write above was decided while the cache still showed the ModelInfer as first listed.
        assert not (cached.get(f"{NS}/m") or {}).get("status")
        assert operator.accepted >= GROUPS + 1
        operator.thaw.set()

        async def caught_up() -> bool:
            return ((cached.get(f"{NS}/m") or {}).get("status") or {}).get("availableReplicas") == GROUPS

        await eventually(caught_up)
        status = await _status(client)
        assert operator.refused == 0
        assert (status["replicas"], status["availableReplicas"]) == (GROUPS, GROUPS)
        assert status["currentRevision"] == status["updateRevision"]
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions["Available"] == "True" and conditions["Valid"] == "True"
    finally:
        operator.thaw.set()
        manager.stop()
        assert await task == 0
        await operator.close()
        await client.close()

"""PartitioningProfile: Ready only when DCM's config.json really has the profile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.partitioning.profile import setup
from aiplane.controllers.partitioning.profile_decide import profile_status
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CONFIGMAPS, NAMESPACES
from aiplane.sim.client import InMemoryKubeClient
from tests.polling import eventually as _eventually

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
DCM = "kube-amd-gpu/config-manager-config"


def profile(name: str = "mi300x-cpx", dcm: str = "cpx", generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningProfile",
        "metadata": {"name": name, "generation": generation},
        "spec": {"dcmProfileName": dcm, "expectedResources": {"amd.com/gpu": "64"}},
    }


def configmap(config: Any) -> dict[str, Any]:
    raw = config if isinstance(config, str) else json.dumps(config)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "config-manager-config", "namespace": "kube-amd-gpu"},
        "data": {"config.json": raw},
    }


PROFILES = {
    "gpu-config-profiles": {
        "spx": {"profiles": [{"computePartition": "SPX", "memoryPartition": "NPS1", "numGPUsAssigned": 8}]},
        "cpx": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 8}]},
    }
}


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


@pytest.mark.parametrize(
    ("cm", "dcm", "expected"),
    [
        (configmap(PROFILES), "cpx", ("True", "ProfileFound")),
        (None, "cpx", ("False", "ConfigMapNotFound")),
        (configmap("{not json"), "cpx", ("False", "InvalidDCMConfig")),
        (configmap({"profiles": {}}), "cpx", ("False", "InvalidDCMConfig")),
        (configmap(PROFILES), "cpx_nps4", ("False", "ProfileNotFound")),
    ],
)
def test_ready_condition_says_what_is_wrong(
    cm: dict[str, Any] | None, dcm: str, expected: tuple[str, str]
) -> None:
    status, changed = profile_status(profile(dcm=dcm), cm, DCM, NOW)
    condition = ready(status)
    assert changed
    assert (condition["status"], condition["reason"]) == expected
    assert condition["observedGeneration"] == 1 and status["observedGeneration"] == 1
    if expected[1] == "ProfileNotFound":
        assert 'DCM profile "cpx_nps4" is not in gpu-config-profiles' in condition["message"]
        assert "it has: cpx, spx" in condition["message"]


def test_a_second_decision_on_the_same_inputs_changes_nothing() -> None:
    first, _ = profile_status(profile(), configmap(PROFILES), DCM, NOW)
    with_status = {**profile(), "status": first}
    again, changed = profile_status(with_status, configmap(PROFILES), DCM, datetime(2026, 11, 22, tzinfo=UTC))
    assert not changed and again == first  # no write at steady state, lastTransitionTime kept


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh()
    yield c
    await c.close()


async def test_controller_follows_profile_and_configmap_changes(client: InMemoryKubeClient) -> None:
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-amd-gpu"}}
    )
    await client.create(kinds.PARTITIONINGPROFILES, profile())
    manager = Manager(
        client,
        leader_election=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    await setup(manager)
    task = asyncio.create_task(manager.run())

    async def reason() -> str | None:
        obj = await client.get(kinds.PARTITIONINGPROFILES, "mi300x-cpx")
        conditions = (obj.get("status") or {}).get("conditions") or []
        return next((c["reason"] for c in conditions if c["type"] == "Ready"), None)

    try:
        await _eventually(lambda: _is(reason(), "ConfigMapNotFound"))
        await client.create(CONFIGMAPS, configmap(PROFILES), namespace="kube-amd-gpu")
        await _eventually(lambda: _is(reason(), "ProfileFound"))
        await client.patch(kinds.PARTITIONINGPROFILES, "mi300x-cpx", {"spec": {"dcmProfileName": "qpx"}})
        await _eventually(lambda: _is(reason(), "ProfileNotFound"))
        client.reset_counts()
        events = (
            await client.list(__import__("aiplane.kube.resources", fromlist=["EVENTS"]).EVENTS, "default")
        )["items"]
        assert {e["reason"] for e in events} >= {"ConfigMapNotFound", "ProfileNotFound"}
    finally:
        manager.stop()
        assert await task == 0


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)

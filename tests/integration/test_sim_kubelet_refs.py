"""The simulated kubelet does not start containers whose Secrets or ConfigMaps are missing.

A user who applies an example that reads a token Secret (``envFromSecret``) before creating that
Secret sees the pod wait in ``CreateContainerConfigError``, as on a real cluster, and run once the
Secret exists; a missing Secret volume keeps the pod in ``ContainerCreating`` with ``FailedMount``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.kube.resources import CONFIGMAPS, PODS, SECRETS
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import agent_cluster, events, until

Obj = dict[str, Any]


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    cluster: EmbeddedCluster
    async with agent_cluster() as cluster:
        yield InMemoryKubeClient.for_cluster(cluster)


def pod(name: str, **container: Any) -> Obj:
    volumes = container.pop("_volumes", None) or []
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "h100-0",
            "containers": [{"name": "main", "image": "busybox", **container}],
            "volumes": volumes,
        },
    }


def waiting(p: Obj) -> Obj:
    statuses = (p.get("status") or {}).get("containerStatuses") or []
    return dict((statuses[0].get("state") or {}).get("waiting") or {}) if statuses else {}


def running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running"


async def test_missing_env_from_secret_waits_then_runs(client: InMemoryKubeClient) -> None:
    await client.create(
        PODS, pod("reader", envFrom=[{"secretRef": {"name": "hf-token"}}]), namespace="default"
    )

    async def config_error() -> Obj | None:
        p = await client.get(PODS, "reader", namespace="default")
        return p if waiting(p).get("reason") == "CreateContainerConfigError" else None

    stuck = await until(config_error, "CreateContainerConfigError")
    assert waiting(stuck)["message"] == 'secret "hf-token" not found'
    assert stuck["status"]["phase"] == "Pending"
    ready = next(c for c in stuck["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    failed = await until(lambda: events(client, "reader", "Failed"), "Failed event")
    assert failed[0]["message"] == 'Error: secret "hf-token" not found'

    await client.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token"},
            "stringData": {"HF_TOKEN": "x"},
        },
        namespace="default",
    )

    async def started() -> Obj | None:
        p = await client.get(PODS, "reader", namespace="default")
        return p if running(p) else None

    await until(started, "pod Running once the Secret exists")


async def test_optional_and_present_references_do_not_block(client: InMemoryKubeClient) -> None:
    await client.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}},
        namespace="default",
    )
    await client.create(
        PODS,
        pod(
            "fine",
            envFrom=[{"secretRef": {"name": "absent", "optional": True}}, {"configMapRef": {"name": "cfg"}}],
            env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}],
        ),
        namespace="default",
    )

    async def started() -> Obj | None:
        p = await client.get(PODS, "fine", namespace="default")
        return p if running(p) else None

    await until(started, "pod Running")


async def test_missing_key_and_missing_volume_are_reported(client: InMemoryKubeClient) -> None:
    await client.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}},
        namespace="default",
    )
    await client.create(
        PODS,
        pod("keyless", env=[{"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "b"}}}]),
        namespace="default",
    )
    await client.create(
        PODS,
        pod("mounter", _volumes=[{"name": "keys", "secret": {"secretName": "ssh-keys"}}]),
        namespace="default",
    )

    async def keyless() -> Obj | None:
        p = await client.get(PODS, "keyless", namespace="default")
        return p if waiting(p).get("reason") == "CreateContainerConfigError" else None

    assert waiting(await until(keyless, "missing key reported"))["message"] == (
        "couldn't find key b in ConfigMap default/cfg"
    )
    mount = await until(lambda: events(client, "mounter", "FailedMount"), "FailedMount event")
    assert 'secret "ssh-keys" not found' in mount[0]["message"]
    p = await client.get(PODS, "mounter", namespace="default")
    assert p["status"]["phase"] == "Pending" and waiting(p)["reason"] == "ContainerCreating"

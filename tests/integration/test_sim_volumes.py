"""The simulated PersistentVolume controller and hostpath provisioner on an embedded cluster with agents:
claims of the default and named classes provisioned and bound as kube's PV controller and an
external-provisioner write them, a missing class, reclaim on delete, static binding,
WaitForFirstConsumer, the scheduler's VolumeBinding PreFilter, zero writes at rest, and kubectl.
Every wait polls with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiplane.kube.client import ApiError
from aiplane.kube.resources import PODS, Resource
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import agent_cluster, events, until
from tests.integration.test_sim_hpa import kubectl

Obj = dict[str, Any]
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster() as sim:
        yield sim


@pytest.fixture
def client(cluster: EmbeddedCluster) -> InMemoryKubeClient:
    return InMemoryKubeClient.for_cluster(cluster)


def claim(
    name: str = "data", size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec},
    }


def pod(name: str = "app", claim_name: str = "data") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1", "volumeMounts": [{"name": "d", "mountPath": "/d"}]}
            ],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


async def bound(client: InMemoryKubeClient, name: str = "data") -> Obj | None:
    obj = await client.get(PVCS, name, namespace="default")
    return obj if obj.get("status", {}).get("phase") == "Bound" else None


async def test_a_claim_of_the_default_class_is_provisioned_and_bound(client: InMemoryKubeClient) -> None:
    await client.create(PVCS, claim(size="5Gi"), namespace="default")
    pvc = await until(lambda: bound(client), "the claim Bound")
    uid = pvc["metadata"]["uid"]
    assert pvc["spec"]["storageClassName"] == "standard"  # DefaultStorageClass admission
    assert pvc["spec"]["volumeName"] == f"pvc-{uid}"
    assert pvc["status"] == {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "5Gi"},
    }
    annotations = pvc["metadata"]["annotations"]
    assert annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "sim.aiplane.io/hostpath"
    pv = await client.get(PVS, f"pvc-{uid}")
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "sim.aiplane.io/hostpath"
    assert pv["spec"]["capacity"] == {"storage": "5Gi"}
    assert pv["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["storageClassName"] == "standard"
    ref = pv["spec"]["claimRef"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
        "PersistentVolumeClaim",
        "default",
        "data",
        uid,
    )
    assert pv["status"]["phase"] == "Bound"
    reasons = [e["reason"] for e in await events(client, "data", "ProvisioningSucceeded")]
    assert reasons == ["ProvisioningSucceeded"]

    # Delete reclaim: the claim's deletion deletes its volume
    await client.delete(PVCS, "data", namespace="default")

    async def volume_gone() -> bool:
        try:
            await client.get(PVS, f"pvc-{uid}")
        except ApiError as err:
            return err.status == 404
        return False

    await until(volume_gone, "the provisioned volume deleted")


async def test_standard_rwx_and_a_missing_class(client: InMemoryKubeClient) -> None:
    await client.create(
        PVCS, claim("shared", modes=("ReadWriteMany",), storageClassName="standard-rwx"), namespace="default"
    )
    shared = await until(lambda: bound(client, "shared"), "the RWX claim Bound")
    assert shared["status"]["accessModes"] == ["ReadWriteMany"]

    await client.create(PVCS, claim("lost", storageClassName="fast"), namespace="default")
    failed = await until(lambda: events(client, "lost", "ProvisioningFailed"), "ProvisioningFailed")
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == 'storageclass.storage.k8s.io "fast" not found'
    pending = await client.get(PVCS, "lost", namespace="default")
    assert pending["status"]["phase"] == "Pending" and not pending["spec"].get("volumeName")

    # the class appears: the claim is provisioned without being touched
    fast = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}}
    fast["provisioner"] = "sim.aiplane.io/hostpath"
    fast["reclaimPolicy"] = "Retain"
    await client.create(CLASSES, fast)
    lost = await until(lambda: bound(client, "lost"), "bound once the class exists")
    pv = await client.get(PVS, lost["spec"]["volumeName"])
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    await client.delete(PVCS, "lost", namespace="default")

    async def released() -> bool:
        return bool((await client.get(PVS, lost["spec"]["volumeName"]))["status"]["phase"] == "Released")

    await until(released, "a Retain volume Released, not deleted")


async def test_a_claim_binds_to_a_matching_available_volume(client: InMemoryKubeClient) -> None:
    for name, size in (("small", "1Gi"), ("big", "10Gi"), ("right", "3Gi")):
        await client.create(
            PVS,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "hostPath": {"path": f"/srv/{name}"},
                },
            },
        )
    await client.create(PVCS, claim(size="2Gi", storageClassName=""), namespace="default")
    pvc = await until(lambda: bound(client), "bound to a static volume")
    assert pvc["spec"]["volumeName"] == "right"  # the smallest that fits
    pv = await client.get(PVS, "right")
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert (await client.get(PVS, "small"))["status"]["phase"] == "Available"


async def test_the_scheduler_waits_for_claims(client: InMemoryKubeClient) -> None:
    await client.create(PODS, pod("orphan", claim_name="nope"), namespace="default")
    await client.create(PVCS, claim("slow", storageClassName="later"), namespace="default")
    await client.create(PODS, pod("waiting", claim_name="slow"), namespace="default")

    async def message(name: str) -> str | None:
        status = (await client.get(PODS, name, namespace="default")).get("status", {})
        for cond in status.get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return str(cond["message"])
        return None

    missing = await until(lambda: message("orphan"), "the pod without its claim Pending")
    assert missing.startswith("0/") and 'persistentvolumeclaim "nope" not found.' in missing
    unbound = await until(lambda: message("waiting"), "the pod with an unbound claim Pending")
    assert "nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption:" in unbound

    # the claim gets its class, is bound, and the pod is scheduled
    later = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "later"}}
    await client.create(CLASSES, {**later, "provisioner": "sim.aiplane.io/hostpath"})

    async def scheduled() -> bool:
        return bool((await client.get(PODS, "waiting", namespace="default"))["spec"].get("nodeName"))

    await until(scheduled, "scheduled once its claim is bound")


async def test_wait_for_first_consumer_provisions_on_the_pods_node(client: InMemoryKubeClient) -> None:
    local = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": "sim.aiplane.io/hostpath",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    await client.create(CLASSES, local)
    await client.create(PVCS, claim("scratch", storageClassName="local"), namespace="default")
    waiting = await until(lambda: events(client, "scratch", "WaitForFirstConsumer"), "WaitForFirstConsumer")
    assert waiting[0]["message"] == "waiting for first consumer to be created before binding"
    assert (await client.get(PVCS, "scratch", namespace="default"))["status"]["phase"] == "Pending"

    await client.create(PODS, pod("user", claim_name="scratch"), namespace="default")
    pvc = await until(lambda: bound(client, "scratch"), "bound after the pod was scheduled")
    node = (await client.get(PODS, "user", namespace="default"))["spec"]["nodeName"]
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    pv = await client.get(PVS, pvc["spec"]["volumeName"])
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}


async def test_no_writes_at_rest(cluster: EmbeddedCluster, client: InMemoryKubeClient) -> None:
    agents = cluster.agents
    assert agents is not None
    await client.create(PVCS, claim(), namespace="default")
    await client.create(PVCS, claim("lost", storageClassName="none"), namespace="default")
    await until(lambda: bound(client), "bound")
    await until(lambda: events(client, "lost", "ProvisioningFailed"), "ProvisioningFailed")
    writes: list[Event] = []
    store = cluster.server.api.store
    store.subscribe(writes.append)
    try:
        agents.volumes.resync()  # every claim and volume synced again, as a periodic resync would
        await until(lambda: _drained(agents.volumes), "the resync done")
    finally:
        store.unsubscribe(writes.append)
    volumes = agents.volumes
    assert [e for e in writes if e.key in (volumes.pvc_rt.storage_key, volumes.pv_rt.storage_key)] == []


async def _drained(loop: Any) -> bool:
    await asyncio.sleep(0)
    return bool(loop.idle)


async def test_kubectl_get_storageclass_pvc_pv(
    cluster: EmbeddedCluster, client: InMemoryKubeClient, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster.write_kubeconfig(kubeconfig)
    classes = (await kubectl(kubeconfig, "get", "storageclass")).splitlines()
    assert classes[1].split()[:5] == [
        "standard",
        "(default)",
        "sim.aiplane.io/hostpath",
        "Delete",
        "Immediate",
    ]
    assert classes[2].split()[:4] == ["standard-rwx", "sim.aiplane.io/hostpath", "Delete", "Immediate"]
    await client.create(PVCS, claim(size="2Gi"), namespace="default")
    pvc = await until(lambda: bound(client), "bound")
    line = (await kubectl(kubeconfig, "get", "pvc", "data")).splitlines()[1].split()
    assert line[:6] == ["data", "Bound", pvc["spec"]["volumeName"], "2Gi", "RWO", "standard"]
    line = (await kubectl(kubeconfig, "get", "pv")).splitlines()[1].split()
    assert line[1:6] == ["2Gi", "RWO", "Delete", "Bound", "default/data"]

"""The drain's Pod cache holds only what the drain reads, and caches fill in small pages (peak
memory at 1,000 nodes).

The NodePartitioning controller caches every Pod of the cluster through a cache transform (as
controller-runtime's ``TransformFunc``); these tests check that what it decides on is unchanged, that
the cache really is the stripped form, and that no reader can ask for another shape of that cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aiplane
from aiplane.apimachinery.meta import deep_copy
from aiplane.controllers.partitioning.node import _event_node
from aiplane.controllers.partitioning.views import (
    dcm_event_for_cache,
    dcm_event_view,
    pod_for_drain,
    pod_view,
)
from aiplane.controllers.partitioning.vocabulary import MIRROR_ANNOTATION
from aiplane.kube.informer import Backoff, InformerFactory, cache_key, object_rv
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, NODES, PODS
from aiplane.kube.transforms import NODE_STATUS_UNREAD
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, NodePool


def _pod(name: str, **extra: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "work",
            "labels": {"app": "llm", "modelinfer.volcano.sh/name": "m1"},
            "annotations": {"big": "x" * 2000},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u1", "controller": True}
            ],
        },
        "spec": {
            "nodeName": "gpu-0",
            "containers": [{"name": "c", "image": "busybox", "env": [{"name": "A", "value": "y" * 2000}]}],
            "tolerations": [{"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute"}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    for path, value in extra.items():
        section, key = path.split("__")
        pod[section][key] = value
    return pod


PODS_SEEN = [
    _pod("plain"),
    _pod("mirror", metadata__annotations={MIRROR_ANNOTATION: "abc"}),
    _pod("done", status__phase="Succeeded"),
    _pod("going", metadata__deletionTimestamp="2026-11-21T12:00:00Z"),
    _pod("no-toleration", spec__tolerations=[{"key": "amd-dcm", "tolerationSeconds": 5}]),
    _pod("bare", metadata__ownerReferences=[], metadata__labels={}),
]


@pytest.mark.parametrize("pod", PODS_SEEN, ids=lambda p: p["metadata"]["name"])
def test_the_drain_decides_the_same_on_the_stripped_pod(pod: dict[str, Any]) -> None:
    stripped = pod_for_drain(pod)
    assert pod_view(stripped) == pod_view(pod)
    assert stripped["metadata"].get("labels") == pod["metadata"].get("labels")  # PDB selectors
    assert len(json.dumps(stripped)) < len(json.dumps(pod)) / 4


async def test_the_pod_informer_caches_the_stripped_form_and_is_not_shared_unstripped() -> None:
    kube = InMemoryKubeClient.fresh(install_crds=False)
    factory = InformerFactory(kube, backoff=lambda: Backoff(initial=0.002, cap=0.02))
    try:
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
        node = (await kube.list(NODES))["items"][0]["metadata"]["name"]
        # No owner: the embedded garbage collector would remove a pod of a DaemonSet that does not exist.
        created = await kube.create(PODS, _pod("plain", spec__nodeName=node, metadata__ownerReferences=[]))
        pods = factory.informer(PODS, transform=pod_for_drain)
        assert factory.informer(PODS, transform=pod_for_drain) is pods
        assert factory.informer(PODS) is pods  # a watch source asks without one: the same cache
        with pytest.raises(ValueError, match="another cache transform"):
            factory.informer(PODS, transform=dict)
        factory.start()
        assert await factory.wait_for_sync(5)
        (cached,) = pods.list()
        assert "containers" not in cached["spec"] and "big" not in cached["metadata"].get("annotations", {})
        assert pod_view(cached) == pod_view(created)
        assert cached["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    finally:
        await factory.stop()
        await kube.close()


async def test_the_manager_lists_in_pages_of_at_most_100() -> None:
    """A page is decoded whole (managedFields included) before the cache strips it: pages of 100
    keep the start-up peak of a 1,000-node cache at a fifth of client-go's pages of 500."""
    kube = InMemoryKubeClient.fresh(
        install_crds=False, fleet=Fleet(nodePools=[NodePool(name="n", count=250)])
    )
    manager = Manager(kube, handle_signals=False)
    nodes = manager.informers.informer(NODES)
    try:
        manager.informers.start()
        assert await manager.informers.wait_for_sync(10)
        assert len(nodes.list()) == 250 and nodes.stats.lists == 3
    finally:
        await manager.informers.stop()
        await kube.close()


DCM_EVENTS = [
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "kube-amd-gpu", "uid": "u", "resourceVersion": "9"},
        "involvedObject": {"kind": "Node", "name": "gpu-0", "uid": "n1", "apiVersion": "v1"},
        "source": {"component": "amd-device-config-manager", "host": "gpu-0"},
        "type": "Normal",
        "reason": "SuccessfullyUpdated",
        "message": "partition profile applied",
        "lastTimestamp": "2026-11-21T12:00:00Z",
        "firstTimestamp": "2026-11-21T11:59:00Z",
        "count": 3,
        "reportingInstance": "dcm-gpu-0",
    },
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e2", "namespace": "kube-amd-gpu", "creationTimestamp": "2026-11-21T12:00:05Z"},
        "involvedObject": {"kind": "Pod", "name": "dcm-abc"},
        "reportingComponent": "amd-device-config-manager",
        "eventTime": "2026-11-21T12:00:04.000000Z",
        "type": "Warning",
        "reason": "Failed",
        "message": "x" * 300,
    },
]


@pytest.mark.parametrize("event", DCM_EVENTS, ids=lambda e: e["metadata"]["name"])
def test_the_node_controller_decides_the_same_on_the_stripped_dcm_event(event: dict[str, Any]) -> None:
    stripped = dcm_event_for_cache(event)
    assert dcm_event_view(stripped) == dcm_event_view(event)
    assert _event_node(stripped) == _event_node(event)
    assert cache_key(stripped) == cache_key(event) and object_rv(stripped) == object_rv(event)
    assert "count" not in stripped and "uid" not in stripped["involvedObject"]


async def test_cached_nodes_hold_no_managed_fields_nor_unread_status_and_a_put_keeps_them() -> None:
    """Every informer strips managedFields and the Node status no controller reads; the drain's PUT of a
    cached Node must not erase that status on the server (status is a subresource of Nodes)."""
    kube = InMemoryKubeClient.fresh(install_crds=False, fleet=Fleet(nodePools=[NodePool(name="n", count=3)]))
    factory = InformerFactory(kube, backoff=lambda: Backoff(initial=0.002, cap=0.02))
    nodes = factory.informer(NODES)
    try:
        factory.start()
        assert await factory.wait_for_sync(5)
        name = nodes.keys()[0]
        served = await kube.get(NODES, name)
        assert served["metadata"].get("managedFields") and "nodeInfo" in served["status"]
        for cached in nodes.list():
            assert "managedFields" not in cached["metadata"]
            assert NODE_STATUS_UNREAD.isdisjoint(cached["status"])
            assert cached["status"]["allocatable"] and cached["status"]["conditions"]
        cordoned = deep_copy(nodes.get(name))
        assert cordoned is not None
        cordoned["spec"]["unschedulable"] = True
        await kube.replace(NODES, cordoned)
        after = await kube.get(NODES, name)
        assert after["spec"]["unschedulable"] is True
        assert after["status"]["nodeInfo"] == served["status"]["nodeInfo"]
    finally:
        await factory.stop()
        await kube.close()


def test_no_controller_reads_the_node_status_the_cache_drops() -> None:
    """A guard for :data:`NODE_STATUS_UNREAD`: a controller that starts reading one of these fields must
    take it out of the set (or it would read nothing from the cache)."""
    root = Path(aiplane.__file__).parent
    sources = [p for d in ("controllers", "kube") for p in (root / d).rglob("*.py")]
    assert len(sources) > 20
    distinctive = {"nodeInfo", "daemonEndpoints", "volumesInUse", "volumesAttached", "runtimeHandlers"}
    assert distinctive <= NODE_STATUS_UNREAD
    for path in sources:
        if path.name == "transforms.py":
            continue
        text = path.read_text(encoding="utf-8")
        for name in distinctive:
            assert f'"{name}"' not in text, (path, name)
        for name in NODE_STATUS_UNREAD:
            assert f"status.{name}" not in text, (path, name)

"""The drain's Pod cache holds only what the drain reads, and caches fill in small pages (issue 17: peak
memory at 1,000 nodes).

The NodePartitioning controller caches every Pod of the cluster through a cache transform (as
controller-runtime's ``TransformFunc``); these tests check that what it decides on is unchanged, that
the cache really is the stripped form, and that no reader can ask for another shape of that cache.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aiplane.controllers.partitioning.views import pod_for_drain, pod_view
from aiplane.controllers.partitioning.vocabulary import MIRROR_ANNOTATION
from aiplane.kube.informer import Backoff, InformerFactory
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, NODES, PODS
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

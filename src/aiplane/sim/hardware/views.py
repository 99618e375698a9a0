"""What the hardware agents keep of Nodes and Pods in their informer caches, and how they find them.

The agents watch every Node and every Pod of the cluster (a GPU is busy when any pod on its node holds
it; the exporter reports every pod's GPUs), so on a big fleet their caches would be the biggest thing
in the process. They keep only what they read: a Node's labels and GPU resources, a Pod's node, its
containers' names and resources, and its phase.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiplane.kube.informer import Informer, InformerFactory
from aiplane.kube.resources import NODES, PODS

Obj = dict[str, Any]

#: The pod cache's index of pods by ``spec.nodeName``.
BY_NODE: Final = "hardware-node"
_META: Final = ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp")


def _meta(obj: Mapping[str, Any]) -> Obj:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in _META if k in meta}


def node_view(node: Obj) -> Obj:
    """A Node as the agents read it: labels, and ``status.capacity``/``allocatable`` (the devices)."""
    status = node.get("status") or {}
    return {
        "apiVersion": node.get("apiVersion", "v1"),
        "kind": node.get("kind", "Node"),
        "metadata": _meta(node),
        "status": {k: status[k] for k in ("capacity", "allocatable") if k in status},
    }


def _containers(items: Any) -> list[Obj]:
    return [
        {"name": c.get("name", ""), "resources": c.get("resources") or {}}
        for c in items or []
        if isinstance(c, Mapping)
    ]


def pod_view(pod: Obj) -> Obj:
    """A Pod as the agents read it: where it runs, what its containers ask for, its phase."""
    spec = pod.get("spec") or {}
    view_spec: Obj = {"containers": _containers(spec.get("containers"))}
    if spec.get("initContainers"):
        view_spec["initContainers"] = _containers(spec.get("initContainers"))
    if spec.get("nodeName"):
        view_spec["nodeName"] = spec["nodeName"]
    phase = (pod.get("status") or {}).get("phase")
    return {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": pod.get("kind", "Pod"),
        "metadata": _meta(pod),
        "spec": view_spec,
        "status": {"phase": phase} if phase else {},
    }


def _by_node(pod: Mapping[str, Any]) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def node_informer(factory: InformerFactory) -> Informer:
    return factory.informer(NODES, transform=node_view)


def pod_informer(factory: InformerFactory) -> Informer:
    """The shared pod informer of the hardware agents, indexed by node."""
    informer = factory.informer(PODS, transform=pod_view)
    if BY_NODE not in informer.cache.indexers:
        informer.add_indexer(BY_NODE, _by_node)
    return informer


def pods_on(pods: Informer, node: str) -> list[Obj]:
    """The cached pods bound to ``node``, by namespace and name."""
    return sorted(
        pods.by_index(BY_NODE, node),
        key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]),
    )

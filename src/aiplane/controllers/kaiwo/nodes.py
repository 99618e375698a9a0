"""What the KaiwoConfig controller changes on a Node: pool labels and the GPU taint (pure).

Only our own marks are ever removed: the taint we added is recorded in :data:`TAINTED_ANNOTATION`
(its key), so turning taints off, or changing ``defaultGpuTaintKey``, removes exactly that taint and
never one an administrator (or the partitioning controller's ``amd-dcm``) put there. The change is a
JSON merge patch carrying the Node's resourceVersion: ``spec.taints`` is replaced whole by a merge
patch, and the resourceVersion makes a concurrent taint by the partitioning controller a conflict
(retried on the fresh Node) instead of a lost write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiplane.controllers.kaiwo.kueue import (
    BLOCK_LABEL,
    DEFAULT_BLOCK,
    DEFAULT_RACK,
    GPU_MODEL_LABEL,
    NODEPOOL_LABEL,
    RACK_LABEL,
    WORKER_LABEL,
)
from aiplane.controllers.kaiwo.pools import NodeView, gpu_info, is_gpu_node

TAINTED_ANNOTATION: Final = "kaiwo.silogen.ai/gpu-taint"
TAINT_VALUE: Final = "true"
TAINT_EFFECT: Final = "NoSchedule"


def _is_taint(taint: Mapping[str, Any], key: str) -> bool:
    return taint.get("key") == key and taint.get("effect") == TAINT_EFFECT


def wants_taint(node: NodeView, add_taints: bool) -> bool:
    return add_taints and is_gpu_node(node)


def desired_taints(node: NodeView, add_taints: bool, key: str) -> tuple[list[dict[str, Any]], str | None]:
    """The node's taints and our annotation's value (the key we tainted with; None: no taint of ours)."""
    ours = node.annotations.get(TAINTED_ANNOTATION)
    taints = [dict(t) for t in node.taints]
    if ours and not (wants_taint(node, add_taints) and ours == key):
        taints = [t for t in taints if not _is_taint(t, ours)]
        ours = None
    if wants_taint(node, add_taints) and ours is None:
        if any(_is_taint(t, key) for t in taints):
            return taints, None  # somebody else's taint with our key: theirs to keep or remove
        taints.append({"key": key, "value": TAINT_VALUE, "effect": TAINT_EFFECT})
        ours = key
    return taints, ours


def desired_labels(node: NodeView, pool: str | None) -> dict[str, str | None]:
    """Labels to set (None: remove): the pool labels while counted, topology defaults when absent."""
    want: dict[str, str | None] = {}
    if pool is not None:
        want[NODEPOOL_LABEL] = pool
        want[WORKER_LABEL] = "true"
        gpu = gpu_info(node.labels)
        want[GPU_MODEL_LABEL] = gpu.model if gpu.count else None
        if BLOCK_LABEL not in node.labels:
            want[BLOCK_LABEL] = DEFAULT_BLOCK
        if RACK_LABEL not in node.labels:
            want[RACK_LABEL] = DEFAULT_RACK
    else:
        want = {NODEPOOL_LABEL: None, WORKER_LABEL: None, GPU_MODEL_LABEL: None}
    return {k: v for k, v in want.items() if node.labels.get(k) != v}


def node_patch(node: NodeView, pool: str | None, add_taints: bool, key: str) -> dict[str, Any] | None:
    """The merge patch that brings ``node`` to what the config says, or None when it already is."""
    labels = desired_labels(node, pool)
    taints, ours = desired_taints(node, add_taints, key)
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if ours != node.annotations.get(TAINTED_ANNOTATION):
        meta["annotations"] = {TAINTED_ANNOTATION: ours}
    patch: dict[str, Any] = {}
    if taints != [dict(t) for t in node.taints]:
        patch["spec"] = {"taints": taints or None}
    if meta:
        patch["metadata"] = meta
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = node.resource_version
    return patch

"""RFC 7386 JSON merge patch, as Kubernetes applies and computes it (``evanphx/json-patch``'s
``MergePatch``/``CreateMergePatch``).

Shared by the controller runtime (a status write sends only the difference) and the embedded API
server (PATCH with ``application/merge-patch+json``, the scale subresource), so both sides of the
wire agree on what a merge patch means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiplane.apimachinery.values import json_copy

__all__ = ["create_merge_patch", "merge_patch", "prune_nulls"]

Obj = dict[str, Any]


def merge_patch(doc: Obj, patch_doc: Mapping[str, Any]) -> Obj:
    """``mergeDocs`` in place: ``null`` deletes, objects merge, anything else replaces."""
    for key, value in patch_doc.items():
        if value is None:
            doc.pop(key, None)
            continue
        cur = doc.get(key)
        if cur is None:
            doc[key] = prune_nulls(json_copy(value))
        elif isinstance(cur, dict):
            doc[key] = merge_patch(cur, value) if isinstance(value, dict) else json_copy(value)
        else:
            doc[key] = prune_nulls(json_copy(value))
    return doc


def prune_nulls(value: Any) -> Any:
    """``pruneNulls``: drop null members of objects, recursively (array items stay)."""
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(v) for v in value]
    return value


def create_merge_patch(original: Any, target: Any) -> Any:
    """A merge patch that turns ``original`` into ``target`` (the inverse of :func:`merge_patch`)."""
    if not isinstance(original, dict) or not isinstance(target, dict):
        return json_copy(target)
    out: Obj = {}
    for key in original:
        if key not in target:
            out[key] = None
    for key, value in target.items():
        if key not in original:
            out[key] = json_copy(value)
        elif isinstance(value, dict) and isinstance(original[key], dict):
            sub = create_merge_patch(original[key], value)
            if sub:
                out[key] = sub
        elif original[key] != value or type(original[key]) is not type(value):
            out[key] = json_copy(value)
    return out

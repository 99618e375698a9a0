"""JSON merge patch (RFC 7386), as gopkg.in/evanphx/json-patch.v4 applies it for kube.

``null`` deletes a member, an object merges into an object, anything else replaces; nulls inside a
value that replaces are pruned. A body that is an array is not a merge patch kube can apply: it
becomes the whole document, which then fails to decode into the object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aiplane.apimachinery.values import go_json
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.gojson import MAP_TARGET, GoJSONError, go_json_decode, undecodable_patch

Obj = dict[str, Any]


def apply_merge_patch(current: Obj, raw: bytes, validation: str) -> Obj:
    """``current`` patched in place by the merge patch ``raw`` (``validation`` adds Go's strict decode)."""
    if validation in ("Strict", "Warn"):
        try:
            go_json_decode(raw, MAP_TARGET)
        except GoJSONError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
    try:
        doc = go_json_decode(raw)
    except GoJSONError as exc:
        raise errors.bad_request("Invalid JSON Patch") from exc
    if doc is None or not isinstance(doc, dict | list):
        raise errors.bad_request("Invalid JSON Patch")
    if isinstance(doc, list):
        # Not an object: evanphx makes the (null-pruned) array the whole document, which then
        # cannot decode into an object.
        value = go_json([_prune_nulls(v) for v in doc])
        raise undecodable_patch(value, f"json: cannot unmarshal array into Go value of type {MAP_TARGET}")
    merge_patch(current, doc)
    return current


def merge_patch(doc: Obj, patch_doc: Mapping[str, Any]) -> Obj:
    """``mergeDocs`` in place: ``null`` deletes, objects merge, anything else replaces."""
    for key, value in patch_doc.items():
        if value is None:
            doc.pop(key, None)
            continue
        cur = doc.get(key)
        if cur is None:
            doc[key] = _prune_nulls(copy.deepcopy(value))
        elif isinstance(cur, dict):
            doc[key] = merge_patch(cur, value) if isinstance(value, dict) else copy.deepcopy(value)
        else:
            doc[key] = _prune_nulls(copy.deepcopy(value))
    return doc


def _prune_nulls(value: Any) -> Any:
    """``pruneNulls``: drop null members of objects, recursively (array items stay)."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def create_merge_patch(original: Any, target: Any) -> Any:
    """A merge patch that turns ``original`` into ``target`` (the inverse of :func:`merge_patch`)."""
    if not isinstance(original, dict) or not isinstance(target, dict):
        return copy.deepcopy(target)
    out: Obj = {}
    for key in original:
        if key not in target:
            out[key] = None
    for key, value in target.items():
        if key not in original:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(original[key], dict):
            sub = create_merge_patch(original[key], value)
            if sub:
                out[key] = sub
        elif original[key] != value or type(original[key]) is not type(value):
            out[key] = copy.deepcopy(value)
    return out

"""JSON merge patch (RFC 7386), as gopkg.in/evanphx/json-patch.v4 applies it for kube.

``null`` deletes a member, an object merges into an object, anything else replaces; nulls inside a
value that replaces are pruned. A body that is an array is not a merge patch kube can apply: it
becomes the whole document, which then fails to decode into the object.
"""

from __future__ import annotations

from typing import Any

from aiplane.apimachinery.mergepatch import merge_patch, prune_nulls
from aiplane.apimachinery.values import go_json
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.gojson import MAP_TARGET, GoJSONError, go_json_decode, json_kind, undecodable_patch

Obj = dict[str, Any]


def apply_merge_patch(current: Obj, raw: bytes, validation: str) -> Obj:
    """``current`` patched in place by the merge patch ``raw`` (``validation`` adds Go's strict decode)."""
    strict = validation in ("Strict", "Warn")
    try:
        # Decoded once: the strict decode into a map and evanphx's decode see the same document.
        doc = go_json_decode(raw)
    except GoJSONError as exc:
        raise errors.bad_request(f"error decoding patch: {exc}" if strict else "Invalid JSON Patch") from exc
    if strict and doc is not None and not isinstance(doc, dict):
        raise errors.bad_request(
            f"error decoding patch: json: cannot unmarshal {json_kind(doc)} into Go value of type {MAP_TARGET}"
        )
    if doc is None or not isinstance(doc, dict | list):
        raise errors.bad_request("Invalid JSON Patch")
    if isinstance(doc, list):
        # Not an object: evanphx makes the (null-pruned) array the whole document, which then
        # cannot decode into an object.
        value = go_json([prune_nulls(v) for v in doc])
        raise undecodable_patch(value, f"json: cannot unmarshal array into Go value of type {MAP_TARGET}")
    merge_patch(current, doc)
    return current

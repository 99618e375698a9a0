"""JSON patch (RFC 6902), as kube applies it: evanphx/json-patch's semantics and kube's limits.

kube caps a patch at :data:`MAX_JSON_PATCH_OPERATIONS` operations (413), answers a patch that does
not apply with its generic 422 (the reason is not repeated), and with ``fieldValidation`` Strict or
Warn first decodes the body into its own ``jsonPatchOp`` struct, whose type errors differ.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

import jsonpatch

from aiplane.apimachinery.values import go_json, json_copy
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.gojson import MAP_TARGET, GoJSONError, go_json_decode, json_kind, undecodable_patch

#: kube's ``maxJSONPatchOperations``.
MAX_JSON_PATCH_OPERATIONS: Final = 10000

#: The 422 kube answers for a JSON patch (or strategic merge patch) that cannot be applied: the
#: generic server response, which does not repeat the reason.
GENERIC_422: Final = "the server rejected our request due to an error in our request"

Obj = dict[str, Any]


def generic_422() -> ApiError:
    """``NewGenericServerResponse(422, …)``: kube's fixed message, empty details."""
    return ApiError(422, "Invalid", GENERIC_422, details={})


class _ReplaceOperation(jsonpatch.ReplaceOperation):
    """evanphx's ``replace``: a missing member of an object is simply set (v4 does not check)."""

    def apply(self, obj: Any) -> Any:
        subobj, part = self.pointer.to_last(obj)
        if isinstance(subobj, dict) and part is not None and part not in subobj:
            if "value" not in self.operation:
                raise jsonpatch.InvalidJsonPatch("The operation does not contain a 'value' member", op=self)
            subobj[part] = json_copy(self.operation["value"])
            return obj
        return super().apply(obj)


class _KubeJsonPatch(jsonpatch.JsonPatch):
    operations = MappingProxyType({**jsonpatch.JsonPatch.operations, "replace": _ReplaceOperation})


def apply_json_patch(current: Obj, raw: bytes, validation: str) -> Obj:
    """``current`` with the JSON patch ``raw`` applied (``validation`` adds kube's strict decode)."""
    if validation in ("Strict", "Warn"):
        _decode_kube_ops(raw)
    try:
        ops = go_json_decode(raw, "jsonpatch.Patch")
    except GoJSONError as exc:
        raise errors.bad_request(str(exc)) from exc
    ops = ops or []
    for op in ops:
        if not isinstance(op, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {json_kind(op)} into Go value of type jsonpatch.Operation"
            )
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}",
        )
    try:
        result = _KubeJsonPatch(ops).apply(current, in_place=True)  # current is the caller's copy
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
    ) as exc:
        raise generic_422() from exc
    if not isinstance(result, dict):
        raise undecodable_patch(
            go_json(result), f"json: cannot unmarshal {json_kind(result)} into Go value of type {MAP_TARGET}"
        )
    return result


def _decode_kube_ops(raw: bytes) -> None:
    """The strict decode into kube's ``[]handlers.jsonPatchOp``, whose type errors clients see."""
    try:
        ops = go_json_decode(raw, "[]handlers.jsonPatchOp")
    except GoJSONError as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from exc
    for op in ops or []:
        if not isinstance(op, dict):
            raise errors.bad_request(
                f"error decoding patch: json: cannot unmarshal {json_kind(op)} into Go value of type handlers.jsonPatchOp"
            )
        for member in ("op", "path", "from"):
            if member in op and op[member] is not None and not isinstance(op[member], str):
                raise errors.bad_request(
                    f"error decoding patch: json: cannot unmarshal {json_kind(op[member])} "
                    f"into Go struct field jsonPatchOp.{member} of type string"
                )

"""PATCH: JSON merge patch, JSON patch, strategic merge patch and server-side apply.

This is kube-apiserver's ``handlers/patch.go`` on plain dicts: the content type picks the mechanism
(``application/strategic-merge-patch+json`` only for built-in kinds, as custom resources have no Go
struct to carry patch strategies), the patch is applied to the object as currently stored, and the
result goes through :meth:`Api.update` — admission, validation, conflicts, managedFields — as any
update does. Errors carry the codes and messages kube answers with, which depend on the mechanism:

* an unknown content type is 415 with the list of accepted types;
* bad ``PatchOptions`` (``fieldManager`` missing on apply, ``force`` on a non-apply patch) are 422;
* a body that does not decode is 400 (Go's ``encoding/json`` wording, reproduced by
  :func:`go_json_decode`); a JSON patch that does not apply is kube's generic 422;
* strategic merge patch errors keep apimachinery's ``strategicpatch`` messages and codes;
* apply errors come from :mod:`aiplane.sim.apiserver.apply`.

The strategic merge patch is a port of ``StrategicMergeMapPatch`` (``$patch``, ``$retainKeys``,
``$setElementOrder/…``, ``$deleteFromPrimitiveList/…``, merge keys and strategies), reading the
patch metadata kube keeps in Go struct tags from the Kubernetes OpenAPI definitions
(``x-kubernetes-patch-strategy``, ``x-kubernetes-patch-merge-key``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import jsonpatch
import orjson
import yaml

from aiplane.apimachinery import builtin
from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_json, go_quote
from aiplane.schema.prune import prune_with_field_paths
from aiplane.sim.apiserver import apply as ssa
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import _DEF, ResourceType
from aiplane.sim.apiserver.rest import Result, WriteOptions, rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

#: kube's ``maxJSONPatchOperations``.
MAX_JSON_PATCH_OPERATIONS: Final = 10000

#: The 422 kube answers for a JSON patch (or strategic merge patch) that cannot be applied: the
#: generic server response, which does not repeat the reason.
GENERIC_422: Final = "the server rejected our request due to an error in our request"

Obj = dict[str, Any]


def supported_patch_types(rt: ResourceType) -> list[str]:
    """The patch content types kube accepts for ``rt`` (CBOR apply is behind an alpha gate)."""
    if rt.is_custom:
        return [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    return [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]


def patch(
    api: Api,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    content_type: str,
    raw: bytes,
    opts: WriteOptions,
    *,
    subresource: str | None = None,
) -> Result:
    """PATCH ``name``: apply ``raw`` (of ``content_type``) to the stored object and update it."""
    content_type = (content_type or "").split(";", 1)[0].strip()
    accepted = supported_patch_types(rt)
    if content_type not in accepted:
        raise errors.unsupported_media_type(", ".join(accepted))
    _validate_patch_options(opts, content_type)
    if content_type == APPLY_PATCH:
        return _apply(api, rt, namespace, name, raw, opts, subresource)
    current = api.find(rt, namespace, name)
    if current is None:
        raise errors.not_found(rt.plural, rt.group, name)
    current = copy.deepcopy(current)
    if content_type == STRATEGIC_MERGE_PATCH:
        patched, strict_value = _strategic(rt, current, raw)
    elif content_type == MERGE_PATCH:
        patched = _merge_patch(current, raw, opts.field_validation)
        strict_value = None
    else:
        patched = _json_patch(current, raw, opts.field_validation)
        strict_value = None
    _strict_unknown_fields(rt, patched, opts, strict_value)
    options = ssa.ManagedOptions.of(opts, subresource=subresource)
    return api.update(rt, namespace, name, patched, options, subresource=subresource, operation="Update")


def _validate_patch_options(opts: WriteOptions, content_type: str) -> None:
    """``ValidatePatchOptions``."""
    errs: list[FieldError] = []
    if content_type != APPLY_PATCH:
        if opts.force:
            errs.append(FieldError("force", fe.FORBIDDEN, None, "may not be specified for non-apply patch"))
    elif not opts.field_manager:
        errs.append(FieldError("fieldManager", fe.REQUIRED, None, "is required for apply patch"))
    errs += ssa.field_manager_errors(opts.field_manager)
    if errs:
        raise errors.invalid("PatchOptions", "meta.k8s.io", "", errs)


def _generic_422() -> ApiError:
    """``NewGenericServerResponse(422, …)``: kube's fixed message, empty details."""
    return ApiError(422, "Invalid", GENERIC_422, details={})


def _strict_unknown_fields(rt: ResourceType, patched: Obj, opts: WriteOptions, value: str | None) -> None:
    """``fieldValidation=Strict`` on a patch: unknown fields are a 422 on the field ``patch``.

    (With ``Warn`` the update reports them as warnings, as kube does for patches too.)
    """
    if opts.field_validation != "Strict":
        return
    schema = _kind_schema(rt)
    if schema is None:
        return
    unknown = [kube for kube, _ in prune_with_field_paths(copy.deepcopy(patched), schema)]
    if not unknown:
        return
    detail = "strict decoding error: " + ", ".join(f'unknown field "{path}"' for path in unknown)
    shown = value if value is not None else go_json(patched)
    err = FieldError("patch", fe.INVALID, shown, detail)
    raise ApiError(
        422,
        "Invalid",
        f' "" is invalid: {err.render_kube()}',
        details={"causes": [err.cause()]},
    )


def _kind_schema(rt: ResourceType) -> Mapping[str, Any] | None:
    try:
        return rt.schema()
    except ValueError:
        return None


# ================================================================================================
# decoding request bodies the way Go's encoding/json does (and fails)
# ================================================================================================


class GoJSONError(ValueError):
    """A JSON decoding error, worded as Go's ``encoding/json`` words it."""


def _quote_char(c: int) -> str:
    """``encoding/json``'s ``quoteChar``."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


_EOF: Final = "unexpected end of JSON input"
_WS: Final = frozenset(b" \t\r\n")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_DIGITS: Final = frozenset(b"0123456789")


class _Scanner:
    """``checkValid``: the first syntax error of a JSON document, in Go's words."""

    def __init__(self, data: bytes) -> None:
        self.d = data
        self.i = 0

    def fail(self, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {_quote_char(self.d[self.i])} {context}")

    def ws(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _WS:
            self.i += 1

    def peek(self) -> int:
        if self.i >= len(self.d):
            raise GoJSONError(_EOF)
        return self.d[self.i]

    def check(self) -> None:
        self.ws()
        self.value()
        self.ws()
        if self.i < len(self.d):
            raise self.fail("after top-level value")

    def value(self) -> None:
        self.ws()
        c = self.peek()
        if c == ord("{"):
            self.obj()
        elif c == ord("["):
            self.arr()
        elif c == ord('"'):
            self.string()
        elif c == ord("-") or c in _DIGITS:
            self.number()
        elif c == ord("t"):
            self.literal(b"true")
        elif c == ord("f"):
            self.literal(b"false")
        elif c == ord("n"):
            self.literal(b"null")
        else:
            raise self.fail("looking for beginning of value")

    def obj(self) -> None:
        self.i += 1
        self.ws()
        if self.peek() == ord("}"):
            self.i += 1
            return
        while True:
            if self.peek() != ord('"'):
                raise self.fail("looking for beginning of object key string")
            self.string()
            self.ws()
            if self.peek() != ord(":"):
                raise self.fail("after object key")
            self.i += 1
            self.value()
            self.ws()
            c = self.peek()
            if c == ord(","):
                self.i += 1
                self.ws()
                continue
            if c == ord("}"):
                self.i += 1
                return
            raise self.fail("after object key:value pair")

    def arr(self) -> None:
        self.i += 1
        self.ws()
        if self.peek() == ord("]"):
            self.i += 1
            return
        while True:
            self.value()
            self.ws()
            c = self.peek()
            if c == ord(","):
                self.i += 1
                continue
            if c == ord("]"):
                self.i += 1
                return
            raise self.fail("after array element")

    def string(self) -> None:
        self.i += 1
        while True:
            c = self.peek()
            if c == ord('"'):
                self.i += 1
                return
            if c == ord("\\"):
                self.i += 1
                e = self.peek()
                if e in b'"\\/bfnrt':
                    self.i += 1
                elif e == ord("u"):
                    self.i += 1
                    for _ in range(4):
                        if self.peek() not in _HEX:
                            raise self.fail("in \\u hexadecimal character escape")
                        self.i += 1
                else:
                    raise self.fail("in string escape code")
                continue
            if c < 0x20:
                raise self.fail("in string literal")
            self.i += 1

    def _digits(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _DIGITS:
            self.i += 1

    def number(self) -> None:
        if self.d[self.i] == ord("-"):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("in numeric literal")
        if self.d[self.i] == ord("0"):
            self.i += 1
        else:
            self._digits()
        if self.i < len(self.d) and self.d[self.i] == ord("."):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("after decimal point in numeric literal")
            self._digits()
        if self.i < len(self.d) and self.d[self.i] in b"eE":
            self.i += 1
            if self.peek() in b"+-":
                self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("in exponent of numeric literal")
            self._digits()

    def literal(self, word: bytes) -> None:
        self.i += 1
        for expected in word[1:]:
            if self.peek() != expected:
                raise self.fail(f"in literal {word.decode()} (expecting {_quote_char(expected)})")
            self.i += 1


def _json_kind(value: Any) -> str:
    """The word Go's ``UnmarshalTypeError`` uses for a JSON value."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def go_json_decode(raw: bytes, target: str | None = None) -> Any:
    """Decode ``raw`` as Go's ``json.Unmarshal`` would, raising its errors.

    ``target`` is the Go type decoded into (``map[string]interface {}``, ``[]handlers.jsonPatchOp``
    …) for the "cannot unmarshal" errors; ``None`` decodes into ``interface{}``.
    """
    _Scanner(raw).check()
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = json.loads(raw.decode("utf-8", "replace"))
    if target is not None and value is not None:
        wants_map = target.startswith("map[")
        if (wants_map and not isinstance(value, dict)) or (not wants_map and not isinstance(value, list)):
            raise GoJSONError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type {target}")
    return value


# ================================================================================================
# JSON merge patch (RFC 7386), as gopkg.in/evanphx/json-patch.v4 implements it
# ================================================================================================

_MAP_TARGET: Final = "map[string]interface {}"


def _merge_patch(current: Obj, raw: bytes, validation: str) -> Obj:
    if validation in ("Strict", "Warn"):
        try:
            go_json_decode(raw, _MAP_TARGET)
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
        err = FieldError(
            "patch", fe.INVALID, value, f"json: cannot unmarshal array into Go value of type {_MAP_TARGET}"
        )
        raise ApiError(
            422, "Invalid", f' "" is invalid: {err.render_kube()}', details={"causes": [err.cause()]}
        )
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


# ================================================================================================
# JSON patch (RFC 6902)
# ================================================================================================


class _ReplaceOperation(jsonpatch.ReplaceOperation):
    """evanphx's ``replace``: a missing member of an object is simply set (v4 does not check)."""

    def apply(self, obj: Any) -> Any:
        subobj, part = self.pointer.to_last(obj)
        if isinstance(subobj, dict) and part is not None and part not in subobj:
            if "value" not in self.operation:
                raise jsonpatch.InvalidJsonPatch("The operation does not contain a 'value' member", op=self)
            subobj[part] = copy.deepcopy(self.operation["value"])
            return obj
        return super().apply(obj)


class _KubeJsonPatch(jsonpatch.JsonPatch):
    operations = MappingProxyType({**jsonpatch.JsonPatch.operations, "replace": _ReplaceOperation})


def _json_patch(current: Obj, raw: bytes, validation: str) -> Obj:
    if validation in ("Strict", "Warn"):
        try:
            ops = go_json_decode(raw, "[]handlers.jsonPatchOp")
        except GoJSONError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        for op in ops or []:
            if not isinstance(op, dict):
                raise errors.bad_request(
                    f"error decoding patch: json: cannot unmarshal {_json_kind(op)} into Go value of type handlers.jsonPatchOp"
                )
            for member in ("op", "path", "from"):
                if member in op and op[member] is not None and not isinstance(op[member], str):
                    raise errors.bad_request(
                        f"error decoding patch: json: cannot unmarshal {_json_kind(op[member])} "
                        f"into Go struct field jsonPatchOp.{member} of type string"
                    )
    try:
        ops = go_json_decode(raw, "jsonpatch.Patch")
    except GoJSONError as exc:
        raise errors.bad_request(str(exc)) from exc
    ops = ops or []
    for op in ops:
        if not isinstance(op, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {_json_kind(op)} into Go value of type jsonpatch.Operation"
            )
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}",
        )
    try:
        result = _KubeJsonPatch(ops).apply(current)
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
    ) as exc:
        raise _generic_422() from exc
    if not isinstance(result, dict):
        err = FieldError(
            "patch",
            fe.INVALID,
            go_json(result),
            f"json: cannot unmarshal {_json_kind(result)} into Go value of type {_MAP_TARGET}",
        )
        raise ApiError(
            422, "Invalid", f' "" is invalid: {err.render_kube()}', details={"causes": [err.cause()]}
        )
    return result


# ================================================================================================
# strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch, apply half)
# ================================================================================================

DIRECTIVE: Final = "$patch"
DELETE: Final = "delete"
REPLACE: Final = "replace"
MERGE: Final = "merge"
RETAIN_KEYS: Final = "retainKeys"
RETAIN_KEYS_DIRECTIVE: Final = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER: Final = "$setElementOrder"

ERR_BAD_JSON_DOC: Final = "invalid JSON document"
ERR_NO_LIST_OF_LISTS: Final = "lists of lists are not supported"
ERR_BAD_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
ERR_BAD_RETAIN_KEYS: Final = "invalid patch format of retainKeys"
ERR_BAD_SET_ELEMENT_ORDER: Final = "invalid patch format of setElementOrder list"
ERR_UNSUPPORTED_FORMAT: Final = "strategic merge patch format is not supported"
ERR_PATCH_NOT_MATCH_RETAIN_KEYS: Final = "patch content doesn't match retainKeys list"

_BAD_REQUEST_ERRORS: Final = frozenset(
    {
        ERR_BAD_JSON_DOC,
        ERR_BAD_PRIMITIVE_LIST,
        ERR_BAD_RETAIN_KEYS,
        ERR_BAD_SET_ELEMENT_ORDER,
        ERR_UNSUPPORTED_FORMAT,
    }
)
_UNPROCESSABLE_ERRORS: Final = frozenset({ERR_NO_LIST_OF_LISTS, ERR_PATCH_NOT_MATCH_RETAIN_KEYS})


class SmpError(Exception):
    """A ``strategicpatch`` error; ``str()`` is the Go error text."""


def smp_api_error(exc: SmpError) -> ApiError:
    """``interpretStrategicMergePatchError``."""
    text = str(exc)
    if text in _BAD_REQUEST_ERRORS:
        return errors.bad_request(text)
    if text in _UNPROCESSABLE_ERRORS:
        return _generic_422()
    return ssa.UnknownReasonError(text)


def _go_type(v: Any) -> str:
    """``reflect.TypeOf`` of a decoded JSON value, by kind."""
    if v is None:
        return "nil"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "slice"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    return "string"


_GO_TYPE_NAMES: Final = {
    "nil": "%!s(<nil>)",
    "map": "map[string]interface {}",
    "slice": "[]interface {}",
    "bool": "bool",
    "int64": "int64",
    "float64": "float64",
    "string": "string",
}


def _go_eq(a: Any, b: Any) -> bool:
    """Go's ``==`` on two ``interface{}`` holding decoded JSON scalars."""
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return _go_type(a) == _go_type(b) and a == b


def _go_key(v: Any) -> Any:
    return (_go_type(v), v) if not isinstance(v, dict | list) else (_go_type(v), id(v))


def _go_v(v: Any) -> str:
    return ssa._go_v(v)


def _bad_arg_type(expected: str, actual: Any) -> SmpError:
    return SmpError(f"expected a {expected}, but received a {_GO_TYPE_NAMES[_go_type(actual)]}")


def _no_merge_key(m: Any, key: str) -> SmpError:
    return SmpError(f"map: {_go_v(m)} does not contain declared merge key: {key}")


@dataclass
class PatchMeta:
    strategies: list[str]
    merge_key: str


class SmpSchema:
    """``PatchMetaFromStruct`` over the Kubernetes OpenAPI definitions.

    ``node`` is a definition (``$ref``s resolved lazily); ``name`` the Go type name when the node
    is a named type (``PodSpec``), for kube's error messages.
    """

    def __init__(self, node: Mapping[str, Any] | None, name: str = "") -> None:
        self.node: Mapping[str, Any] = node or {}
        self.name = name

    @classmethod
    def resolve(cls, node: Mapping[str, Any] | None) -> SmpSchema:
        if node is None:
            return cls(None)
        ref = node.get("$ref")
        if isinstance(ref, str):
            def_name = ref.rsplit("/", 1)[-1]
            return cls(builtin.definitions().get(def_name), def_name.rsplit(".", 1)[-1])
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
            return cls.resolve(all_of[0])
        return cls(node)

    @classmethod
    def for_kind(cls, rt: ResourceType) -> SmpSchema:
        definition = _DEF.get((rt.group, rt.kind))
        if definition is None:
            return cls({"type": "object", "properties": {}}, rt.kind)
        return cls(builtin.definitions().get(definition), definition.rsplit(".", 1)[-1])

    def _is_map(self) -> bool:
        return "additionalProperties" in self.node and not self.node.get("properties")

    def go_kind(self) -> str:
        """``reflect.Kind`` of the type: ``struct``, ``map``, ``slice``, ``string``…"""
        if self.node.get("properties") is not None:
            return "struct"
        if self._is_map():
            return "map"
        types = self.node.get("type")
        kinds = [t for t in (types if isinstance(types, list) else [types]) if t and t != "null"]
        kind = kinds[0] if kinds else ""
        return {
            "array": "slice",
            "object": "struct",
            "string": "string",
            "integer": "int64",
            "number": "float64",
            "boolean": "bool",
        }.get(kind, "interface")

    def lookup_struct(self, key: str) -> tuple[SmpSchema, PatchMeta]:
        """``LookupPatchMetadataForStruct``."""
        if self._is_map():
            extra = self.node.get("additionalProperties")
            return SmpSchema.resolve(extra if isinstance(extra, Mapping) else None), PatchMeta([], "")
        kind = self.go_kind()
        if kind not in ("struct", "interface"):
            raise SmpError(f"merging an object in json but data type is not struct, instead is: {kind}")
        props: Mapping[str, Any] = self.node.get("properties") or {}
        prop = props.get(key)
        if prop is None:
            lowered = key.lower()
            prop = next((v for k, v in props.items() if k.lower() == lowered), None)
        if prop is None:
            if kind == "interface":
                return SmpSchema(None), PatchMeta([], "")
            raise SmpError(
                f"unable to find api field in struct {self.name} for the json field {go_quote(key)}"
            )
        strategies = str(prop.get("x-kubernetes-patch-strategy") or "").split(",")
        return SmpSchema.resolve(prop), PatchMeta(
            strategies, str(prop.get("x-kubernetes-patch-merge-key") or "")
        )

    def lookup_slice(self, key: str) -> tuple[SmpSchema, PatchMeta]:
        """``LookupPatchMetadataForSlice``: the schema of the list's items."""
        sub, meta = self.lookup_struct(key)
        kind = sub.go_kind()
        if kind == "interface":
            return SmpSchema(None), meta
        if kind != "slice":
            raise SmpError(f"expected slice or array type, but got: {self.go_kind()}")
        items = sub.node.get("items")
        return SmpSchema.resolve(items if isinstance(items, Mapping) else None), meta


def _extract_retain_keys(strategies: list[str]) -> tuple[bool, str]:
    """``extractRetainKeysPatchStrategy``."""
    if len(strategies) == 0:
        return False, ""
    if len(strategies) == 1:
        return (True, "") if strategies[0] == RETAIN_KEYS else (False, strategies[0])
    if len(strategies) == 2:
        if strategies[0] == RETAIN_KEYS:
            return True, strategies[1]
        if strategies[1] == RETAIN_KEYS:
            return True, strategies[0]
    raise SmpError(f"unexpected patch strategy: [{' '.join(strategies)}]")


def strategic_merge_patch(original: Obj, patch_doc: Obj, schema: SmpSchema) -> Obj:
    """``StrategicMergeMapPatch`` (server side: parallel lists merged, unmatched nulls ignored).

    Both arguments are modified, as in Go.
    """
    return _merge_map(original, patch_doc, schema)


def _handle_directive_in_merge_map(directive: Any, patch_map: Obj) -> Obj:
    if directive == REPLACE:
        patch_map.pop(DIRECTIVE, None)
        return patch_map
    if directive == DELETE:
        return {}
    raise SmpError(
        f"unknown patch type: {directive if isinstance(directive, str) else _go_v(directive)} in map: {_go_v(patch_map)}"
    )


def _merge_map(original: Obj | None, patch_map: Obj, schema: SmpSchema) -> Obj:
    if DIRECTIVE in patch_map:
        return _handle_directive_in_merge_map(patch_map[DIRECTIVE], patch_map)
    if original is None:
        original = {}
    _apply_retain_keys(original, patch_map)
    _merge_patch_into_original(original, patch_map, schema)
    for k, patch_v in list(patch_map.items()):
        key = k
        is_delete_list = False
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            key = _extract_key(key, DELETE_FROM_PRIMITIVE_LIST)
            is_delete_list = True
        if patch_v is None:
            original.pop(key, None)
            continue
        if key not in original or _go_type(original[key]) != _go_type(patch_v):
            if not is_delete_list:
                _discard_nulls(patch_v)
                value, keep = _remove_directives(patch_v)
                if keep:
                    original[key] = value
                else:
                    original.pop(key, None)
            continue
        kind = _go_type(original[key])
        if kind == "map":
            sub, meta = schema.lookup_struct(key)
            _, strategy = _extract_retain_keys(meta.strategies)
            original[key] = patch_v if strategy == REPLACE else _merge_map(original[key], patch_v, sub)
        elif kind == "slice":
            sub, meta = schema.lookup_slice(key)
            _, strategy = _extract_retain_keys(meta.strategies)
            if strategy == MERGE or is_delete_list:
                original[key] = _merge_slice(original[key], patch_v, sub, meta.merge_key, is_delete_list)
            else:
                original[key] = patch_v
        else:
            value, keep = _remove_directives(patch_v)
            if keep:
                original[key] = value
            else:
                original.pop(key, None)
    return original


def _extract_key(text: str, prefix: str) -> str:
    parts = text.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        if prefix == DELETE_FROM_PRIMITIVE_LIST:
            raise SmpError(ERR_BAD_PRIMITIVE_LIST)
        if prefix == SET_ELEMENT_ORDER:
            raise SmpError(ERR_BAD_SET_ELEMENT_ORDER)
        raise SmpError(f"fail to find unknown prefix {go_quote(prefix)} in {text}")
    return parts[1]


def _discard_nulls(value: Any) -> None:
    """``discardNullValuesFromPatch``."""
    if isinstance(value, dict):
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for v in value.values():
            _discard_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _discard_nulls(v)


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """``removeDirectives``: drop maps carrying ``$patch`` (and say whether ``value`` itself stays)."""
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return None, False
        for k in list(value):
            v, keep = _remove_directives(value[k])
            if keep:
                value[k] = v
            else:
                del value[k]
        return value, True
    if isinstance(value, list):
        out = []
        for v in value:
            nv, keep = _remove_directives(v)
            if keep:
                out.append(nv)
        return out, True
    return value, True


def _apply_retain_keys(original: Obj, patch_map: Obj) -> None:
    """``applyRetainKeysDirective``."""
    if RETAIN_KEYS_DIRECTIVE not in patch_map:
        return
    retain = patch_map.pop(RETAIN_KEYS_DIRECTIVE)
    if not isinstance(retain, list):
        raise SmpError(ERR_BAD_RETAIN_KEYS)
    keep = {_go_key(v) for v in retain}
    for k, v in patch_map.items():
        if v is None or k.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if _go_key(k) not in keep:
            raise SmpError(ERR_BAD_RETAIN_KEYS)
    for k in [k for k in original if _go_key(k) not in keep]:
        del original[k]


def _merge_patch_into_original(original: Obj, patch_map: Obj, schema: SmpSchema) -> None:
    """``mergePatchIntoOriginal``: the ``$setElementOrder/<field>`` directives."""
    for key in [k for k in patch_map if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch_map.pop(key)
        if not isinstance(order, list):
            raise _bad_arg_type("[]interface {}", order)
        original_key = _extract_key(key, SET_ELEMENT_ORDER)
        found_original = original_key in original
        found_patch = original_key in patch_map
        original_value: list[Any] = []
        patch_value: list[Any] = []
        if found_original:
            if not isinstance(original[original_key], list):
                raise _bad_arg_type("[]interface {}", original[original_key])
            original_value = original[original_key]
        if found_patch:
            if not isinstance(patch_map[original_key], list):
                raise _bad_arg_type("[]interface {}", patch_map[original_key])
            patch_value = patch_map[original_key]
        sub, meta = schema.lookup_slice(original_key)
        _, strategy = _extract_retain_keys(meta.strategies)
        _validate_patch_with_set_order_list(patch_value, order, meta.merge_key)
        if found_original and not found_patch:
            merged = original_value
        elif not found_original and found_patch:
            value, _ = _remove_directives(patch_value)
            merged = value
        elif found_original and found_patch:
            if strategy == MERGE:
                merged = _merge_slice(original_value, patch_value, sub, meta.merge_key, False)
            else:
                merged = patch_value
        else:
            continue
        if not meta.merge_key:
            patch_items, server_only = _partition_primitives(merged, order)
        else:
            patch_items, server_only = _partition_maps(merged, order, meta.merge_key)
        kind = _slice_element_type(original_value, patch_value)
        original[original_key] = _normalize_element_order(
            patch_items, server_only, order, original_value, meta.merge_key, kind
        )
        patch_map.pop(original_key, None)


def _validate_patch_with_set_order_list(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    if not order or not patch_list:
        return
    non_delete = _extract_to_delete_items(patch_list)[0] if merge_key else patch_list
    pi = oi = 0
    while pi < len(non_delete) and oi < len(order):
        if isinstance(non_delete[pi], dict) and DIRECTIVE in non_delete[pi]:
            pi += 1
            continue
        if _merge_key_value_equal(non_delete[pi], order[oi], merge_key):
            pi += 1
        oi += 1
    if pi < len(non_delete) and oi >= len(order):
        raise SmpError(
            f"the order in patch list:\n{_go_v(patch_list)}\n doesn't match {SET_ELEMENT_ORDER} list:\n{_go_v(order)}"
        )


def _merge_key_value_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return _go_eq(left, right)
    if not isinstance(left, dict):
        raise _bad_arg_type("map[string]interface {}", left)
    if not isinstance(right, dict):
        raise _bad_arg_type("map[string]interface {}", right)
    if merge_key not in left:
        raise _no_merge_key(left, merge_key)
    if merge_key not in right:
        raise _no_merge_key(right, merge_key)
    return _go_eq(left[merge_key], right[merge_key])


def _slice_element_type(*lists: list[Any]) -> str:
    """``sliceElementType``: the single Go type of all items (never a list)."""
    found: str | None = None
    for items in lists:
        for v in items:
            t = _go_type(v)
            if found is None:
                found = t
                if t == "slice":
                    raise SmpError(ERR_NO_LIST_OF_LISTS)
            elif t != found:
                raise SmpError(f"list element types are not identical: {_go_v(list(lists))}")
    if found is None:
        raise SmpError("no elements in any of the given slices")
    return found


def _merge_slice(
    original: list[Any], patch_list: list[Any], schema: SmpSchema, merge_key: str, is_delete_list: bool
) -> list[Any]:
    """``mergeSlice``."""
    if not original and not patch_list:
        return original
    kind = _slice_element_type(original, patch_list)
    original = list(original)
    if kind != "map":
        if is_delete_list:
            drop = {_go_key(v) for v in patch_list}
            return [v for v in original if _go_key(v) not in drop]
        merged = _deduplicate_scalars([*original, *patch_list])
    else:
        if not merge_key:
            raise SmpError(f"cannot merge lists without merge key for {schema.go_kind()}")
        original, remaining = _merge_slice_with_special_elements(original, patch_list, merge_key)
        patch_list = remaining
        merged = _merge_slice_without_special_elements(original, patch_list, merge_key, schema)
    if not merge_key:
        patch_items, server_only = _partition_primitives(merged, patch_list)
    else:
        patch_items, server_only = _partition_maps(merged, patch_list, merge_key)
    return _normalize_element_order(patch_items, server_only, patch_list, original, merge_key, kind)


def _merge_slice_with_special_elements(
    original: list[Any], patch_list: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    without: list[Any] = []
    replace = False
    for v in patch_list:
        if DIRECTIVE not in v:
            without.append(v)
            continue
        directive = v[DIRECTIVE]
        if directive == DELETE:
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            original = [
                item
                for item in original
                if not (
                    isinstance(item, dict) and merge_key in item and _go_eq(item[merge_key], v[merge_key])
                )
            ]
        elif directive == REPLACE:
            replace = True
        elif directive == MERGE:
            raise SmpError("merging lists cannot yet be specified in the patch")
        else:
            raise SmpError(
                f"unknown patch type: {directive if isinstance(directive, str) else _go_v(directive)} in map: {_go_v(v)}"
            )
    if replace:
        return without, []
    return original, without


def _find_map(items: list[Any], key: str, value: Any) -> int:
    """``findMapInSliceBasedOnKeyValue``: the index of the map whose ``key`` is ``value``, or -1."""
    for i, v in enumerate(items):
        if not isinstance(v, dict):
            raise SmpError(f"value for key {i} is not a map")
        if key in v and _go_eq(v[key], value):
            return i
    return -1


def _merge_slice_without_special_elements(
    original: list[Any], patch_list: list[Any], merge_key: str, schema: SmpSchema
) -> list[Any]:
    for v in patch_list:
        if merge_key not in v:
            raise _no_merge_key(v, merge_key)
        i = _find_map(original, merge_key, v[merge_key])
        if i >= 0:
            original[i] = _merge_map(original[i], v, schema)
        else:
            original.append(v)
    return original


def _deduplicate_scalars(s: list[Any]) -> list[Any]:
    """``deduplicateScalars``: Go's in-place algorithm (it reorders, and the order shows)."""
    s = list(s)
    length = len(s) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _go_eq(s[i], s[j]):
                s[j] = s[length]
                s = s[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return s


def _partition_primitives(items: list[Any], by: list[Any]) -> tuple[list[Any], list[Any]]:
    present = {_go_key(v) for v in by}
    in_patch = [v for v in items if _go_key(v) in present]
    server_only = [v for v in items if _go_key(v) not in present]
    return in_patch, server_only


def _partition_maps(items: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    in_patch: list[Any] = []
    server_only: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type("map[string]interface {}", v)
        if merge_key not in v:
            raise _no_merge_key(v, merge_key)
        (in_patch if _find_map(by, merge_key, v[merge_key]) >= 0 else server_only).append(v)
    return in_patch, server_only


def _index(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    def get(item: Any) -> Any:
        if kind == "map":
            return item.get(merge_key) if isinstance(item, dict) else None
        return item

    target = get(value)
    for i, v in enumerate(items):
        candidate = get(v)
        if (target is None and candidate is None) or _go_eq(target, candidate):
            return i
    return -1


def _extract_to_delete_items(items: list[Any]) -> tuple[list[Any], list[Any]]:
    keep: list[Any] = []
    drop: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type("map[string]interface {}", v)
        (drop if v.get(DIRECTIVE) == DELETE else keep).append(v)
    return keep, drop


def _normalize_slice_order(to_sort: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    to_delete: list[Any] = []
    if kind == "map":
        for items in (to_sort, order):
            for item in items:
                if not isinstance(item, dict):
                    raise _bad_arg_type("map[string]interface {}", item)
                if merge_key not in item:
                    raise _no_merge_key(item, merge_key)
        to_sort, to_delete = _extract_to_delete_items(to_sort)
    data = list(to_sort)

    def less(a: Any, b: Any) -> bool:
        ia = _index(order, a, merge_key, kind)
        if ia >= 0:
            ib = _index(order, b, merge_key, kind)
            if ib >= 0:
                return ia < ib
        return True

    # sort.SliceStable: insertion sort (Go's for short runs), with kube's comparator as is.
    for i in range(1, len(data)):
        j = i
        while j > 0 and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1
    return data + to_delete


def _normalize_element_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    """``normalizeElementOrder``: patch items in patch order, server-only items kept in place."""
    patch_items = _normalize_slice_order(patch_items, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(patch_items):
        li = _index(server_order, server_only[i], merge_key, kind)
        ri = _index(server_order, patch_items[j], merge_key, kind)
        if li >= 0 and ri >= 0 and li < ri:
            out.append(server_only[i])
            i += 1
        else:
            out.append(patch_items[j])
            j += 1
    return out + server_only[i:] + patch_items[j:]


def _strategic(rt: ResourceType, current: Obj, raw: bytes) -> tuple[Obj, str]:
    try:
        patch_map = go_json_decode(raw, _MAP_TARGET)
    except GoJSONError as exc:
        raise errors.bad_request(str(exc)) from exc
    if patch_map is None:
        patch_map = {}
    shown = _go_v(patch_map)
    try:
        result = strategic_merge_patch(current, patch_map, SmpSchema.for_kind(rt))
    except SmpError as exc:
        raise smp_api_error(exc) from exc
    return result, shown


# ================================================================================================
# server-side apply
# ================================================================================================


class _ApplyLoader(yaml.SafeLoader):
    """YAML as sigs.k8s.io/yaml reads an apply body: timestamps stay strings."""


_ApplyLoader.yaml_implicit_resolvers = {
    ch: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_YAML_PROBLEMS: Final = {
    "mapping values are not allowed here": "mapping values are not allowed in this context",
    "could not find expected ':'": "could not find expected ':'",
    "found character that cannot start any token": "found character that cannot start any token",
}


def _stringify_keys(value: Any) -> Any:
    """YAMLToJSON: every map key becomes a string (``true`` → ``"true"``, ``1`` → ``"1"``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, bool):
                key = "true" if k else "false"
            elif k is None:
                key = "null"
            else:
                key = str(k)
            out[key] = _stringify_keys(v)
        return out
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


def decode_apply_body(raw: bytes) -> Obj:
    """``yaml.Unmarshal`` of an apply body into ``map[string]interface{}``, with kube's errors."""
    try:
        doc = yaml.load(raw.decode("utf-8", "replace"), Loader=_ApplyLoader)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        problem = _YAML_PROBLEMS.get(problem, problem)
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise errors.bad_request(
            f"error decoding YAML: error converting YAML to JSON: yaml: {where}{problem}"
        ) from exc
    doc = _stringify_keys(doc)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise errors.bad_request(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
            f"{_json_kind(doc)} into Go value of type {_MAP_TARGET}"
        )
    return doc


_SYSTEM_META: Final = (
    "creationTimestamp",
    "uid",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def _apply(
    api: Api,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    raw: bytes,
    opts: WriteOptions,
    subresource: str | None,
) -> Result:
    current = api.find(rt, namespace, name)
    if current is None and subresource:
        raise errors.not_found(rt.plural, rt.group, name)
    config = decode_apply_body(raw)
    outcome = ssa.apply(
        rt,
        current,
        config,
        opts.field_manager or "",
        force=opts.force,
        subresource=subresource,
        now=rfc3339(api.clock()),
    )
    obj = outcome.obj
    options = ssa.ManagedOptions.of(
        opts, subresource=subresource, applied_fields=outcome.managed_fields, apply=True
    )
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if current is None:
        if meta.get("uid"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"uid mismatch: the provided object specified uid {meta['uid']}, and no existing object was found",
            )
        for key in _SYSTEM_META:
            meta.pop(key, None)
    _check_namespace(rt, namespace, meta)
    obj_name = meta.get("name")
    if not obj_name:
        raise errors.bad_request(
            f"the name of the object ({name} based on URL) was undeterminable: name must be provided"
        )
    if obj_name != name:
        raise errors.bad_request(
            f"the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )
    if current is None:
        return api.create(rt, namespace, obj, options)
    return api.update(rt, namespace, name, obj, options, subresource=subresource, operation="Apply")


def _check_namespace(rt: ResourceType, namespace: str | None, meta: Obj) -> None:
    """``EnsureObjectNamespaceMatchesRequestNamespace``."""
    if not rt.namespaced:
        meta.pop("namespace", None)
        return
    body_ns = meta.get("namespace")
    if not body_ns:
        if namespace:
            meta["namespace"] = namespace
        return
    if namespace and body_ns != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )

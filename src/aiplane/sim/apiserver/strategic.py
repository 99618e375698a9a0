"""Strategic merge patch: a port of ``StrategicMergeMapPatch`` (apimachinery's ``strategicpatch``).

Only built-in kinds accept it: the patch strategy of each field (``merge`` by a merge key,
``replace``, ``retainKeys``) comes from Go struct tags, which kube publishes in its OpenAPI
definitions as ``x-kubernetes-patch-strategy`` and ``x-kubernetes-patch-merge-key``;
:class:`SmpSchema` reads them there. The directives ``$patch``, ``$retainKeys``,
``$setElementOrder/…`` and ``$deleteFromPrimitiveList/…`` are honoured as the server applies them
(parallel lists merged, unmatched nulls ignored). Errors keep ``strategicpatch``'s messages, and
:func:`smp_api_error` gives them the codes kube answers with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery import builtin
from aiplane.apimachinery.values import go_quote
from aiplane.sim.apiserver import errors, gofmt
from aiplane.sim.apiserver.apply import UnknownReasonError
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.gojson import MAP_TARGET, GoJSONError, go_json_decode
from aiplane.sim.apiserver.json_patch import generic_422
from aiplane.sim.apiserver.resources import _DEF, ResourceType

Obj = dict[str, Any]

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
        return generic_422()
    return UnknownReasonError(text)


def _go_eq(a: Any, b: Any) -> bool:
    """Go's ``==`` on two ``interface{}`` holding decoded JSON scalars."""
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return gofmt.kind(a) == gofmt.kind(b) and a == b


def _go_key(v: Any) -> Any:
    return (gofmt.kind(v), v) if not isinstance(v, dict | list) else (gofmt.kind(v), id(v))


def _go_v(v: Any) -> str:
    return gofmt.render(v, gofmt.PERCENT_V)


def _bad_arg_type(expected: str, actual: Any) -> SmpError:
    # Go's %s of a nil interface is "%!s(<nil>)", not %T's "<nil>".
    shown = "%!s(<nil>)" if actual is None else gofmt.type_name(actual)
    return SmpError(f"expected a {expected}, but received a {shown}")


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


def _unknown_patch_type(directive: Any, where: Any) -> SmpError:
    shown = directive if isinstance(directive, str) else _go_v(directive)
    return SmpError(f"unknown patch type: {shown} in map: {_go_v(where)}")


def _handle_directive_in_merge_map(directive: Any, patch_map: Obj) -> Obj:
    if directive == REPLACE:
        patch_map.pop(DIRECTIVE, None)
        return patch_map
    if directive == DELETE:
        return {}
    raise _unknown_patch_type(directive, patch_map)


def _merge_map(original: Obj | None, patch_map: Obj, schema: SmpSchema) -> Obj:
    if DIRECTIVE in patch_map:
        return _handle_directive_in_merge_map(patch_map[DIRECTIVE], patch_map)
    if original is None:
        original = {}
    _apply_retain_keys(original, patch_map)
    _merge_patch_into_original(original, patch_map, schema)
    for k, patch_v in list(patch_map.items()):
        is_delete_list = k.startswith(DELETE_FROM_PRIMITIVE_LIST)
        key = _extract_key(k, DELETE_FROM_PRIMITIVE_LIST) if is_delete_list else k
        _merge_member(original, key, patch_v, schema, is_delete_list)
    return original


def _merge_member(original: Obj, key: str, patch_v: Any, schema: SmpSchema, is_delete_list: bool) -> None:
    """One patch member into ``original``: null deletes, a new or retyped value is set, else merge by kind."""
    if patch_v is None:
        original.pop(key, None)
        return
    kind = gofmt.kind(original[key]) if key in original else None
    if kind != gofmt.kind(patch_v):
        if not is_delete_list:
            _discard_nulls(patch_v)
            _set_without_directives(original, key, patch_v)
        return
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
        _set_without_directives(original, key, patch_v)


def _set_without_directives(original: Obj, key: str, value: Any) -> None:
    value, keep = _remove_directives(value)
    if keep:
        original[key] = value
    else:
        original.pop(key, None)


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
                # Go's mergeSlice writes into the array of the live list this function orders by.
                shared = list(original_value)
                merged = _merge_slice(original_value, patch_value, sub, meta.merge_key, False, shared)
                original_value = shared
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
            t = gofmt.kind(v)
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
    original: list[Any],
    patch_list: list[Any],
    schema: SmpSchema,
    merge_key: str,
    is_delete_list: bool,
    shared: list[Any] | None = None,
) -> list[Any]:
    """``mergeSlice``.

    Items only in the patch go before the live items they cannot be ordered against (kube: ``[A]`` +
    ``[B]`` is ``[B, A]``): ``normalizeElementOrder`` orders by the live list as it was before the
    patch's items were appended. ``shared``, when given, is the caller's view of the live list's Go
    array, written as Go writes it (see :func:`_merge_slice_without_special_elements`).
    """
    if not original and not patch_list:
        return original
    kind = _slice_element_type(original, patch_list)
    if kind != "map":
        if is_delete_list:
            drop = {_go_key(v) for v in patch_list}
            return [v for v in original if _go_key(v) not in drop]
        merged = _deduplicate_scalars([*original, *patch_list])
    else:
        if not merge_key:
            raise SmpError(f"cannot merge lists without merge key for {schema.go_kind()}")
        backing = shared if shared is not None else list(original)
        length, patch_list, replaced = _merge_slice_with_special_elements(backing, patch_list, merge_key)
        if replaced:
            original, backing, length = patch_list, [], 0
            patch_list = []
        else:
            original = backing[:length]
        merged = _merge_slice_without_special_elements(
            original, patch_list, merge_key, schema, backing, length
        )
    if not merge_key:
        patch_items, server_only = _partition_primitives(merged, patch_list)
    else:
        patch_items, server_only = _partition_maps(merged, patch_list, merge_key)
    return _normalize_element_order(patch_items, server_only, patch_list, original, merge_key, kind)


def _merge_slice_with_special_elements(
    backing: list[Any], patch_list: list[Any], merge_key: str
) -> tuple[int, list[Any], bool]:
    """``mergeSliceWithSpecialElements``: the live list's new length, the patch without directives,
    and whether ``$patch: replace`` replaced the list by it."""
    without: list[Any] = []
    replace = False
    length = len(backing)
    for v in patch_list:
        if DIRECTIVE not in v:
            without.append(v)
            continue
        directive = v[DIRECTIVE]
        if directive == DELETE:
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            length = _delete_matching(backing, length, merge_key, v[merge_key])
        elif directive == REPLACE:
            replace = True
        elif directive == MERGE:
            raise SmpError("merging lists cannot yet be specified in the patch")
        else:
            raise _unknown_patch_type(directive, v)
    return length, without, replace


def _delete_matching(backing: list[Any], length: int, merge_key: str, value: Any) -> int:
    """``deleteMatchingEntries``: Go's ``append(s[:i], s[i+1:]...)`` shifts the items left inside the
    array the caller's slice shares, leaving the last one twice; the new length is returned."""
    while True:
        i = _find_map(backing[:length], merge_key, value)
        if i < 0:
            return length
        backing[i : length - 1] = backing[i + 1 : length]
        length -= 1


def _find_map(items: list[Any], key: str, value: Any) -> int:
    """``findMapInSliceBasedOnKeyValue``: the index of the map whose ``key`` is ``value``, or -1."""
    for i, v in enumerate(items):
        if not isinstance(v, dict):
            raise SmpError(f"value for key {i} is not a map")
        if key in v and _go_eq(v[key], value):
            return i
    return -1


def _merge_slice_without_special_elements(
    original: list[Any],
    patch_list: list[Any],
    merge_key: str,
    schema: SmpSchema,
    backing: list[Any],
    length: int,
) -> list[Any]:
    """``mergeSliceWithoutSpecialElements``: patch items merged into their live item or appended.

    Go appends to the live slice: after deletions, the first appends land in the array the caller's
    slice still sees (its length is the live list's), so ``$setElementOrder`` later orders server-only
    items against them. ``backing`` is that array; whatever lands past its end is not seen.
    """
    merged = list(original)
    for v in patch_list:
        if merge_key not in v:
            raise _no_merge_key(v, merge_key)
        i = _find_map(merged, merge_key, v[merge_key])
        if i >= 0:
            merged[i] = _merge_map(merged[i], v, schema)
            continue
        merged.append(v)
        if length < len(backing):
            backing[length] = v
        length += 1
    return merged


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


def apply_strategic_patch(rt: ResourceType, current: Obj, raw: bytes) -> tuple[Obj, str]:
    """``current`` patched by ``raw``, and the patch as kube shows it in a strict-decoding error."""
    try:
        patch_map = go_json_decode(raw, MAP_TARGET)
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

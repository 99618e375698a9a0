"""What SMD's type converter makes of a structural schema, and SMD's validation of an applied value.

The walkers in :mod:`.typed` need a handful of answers from a kind's OpenAPI schema: is this node
a scalar, a map or a list; is a map atomic; what list type and keys does a list declare; which
fields are declared (struct fields) rather than map entries. Untyped nodes
(``x-kubernetes-preserve-unknown-fields``) are SMD's *deduced* type: the value decides.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from aiplane.apimachinery import builtin
from aiplane.apimachinery.values import go_quote
from aiplane.sim.apiserver import gofmt
from aiplane.sim.apiserver.smd.fieldpath import PathElement
from aiplane.sim.apiserver.smd.value import is_num

Schema = Mapping[str, Any]


@functools.cache
def _object_meta_schema() -> dict[str, Any]:
    return builtin.structural("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")


_STRING: Final[dict[str, Any]] = {"type": "string"}


def _type_and_object_meta() -> dict[str, Any]:
    """What every object (and every embedded resource) has on top of its kind's own fields."""
    return {"apiVersion": _STRING, "kind": _STRING, "metadata": _object_meta_schema()}


def with_meta(schema: Schema | None) -> Schema:
    """The schema SMD types a whole object with: ``schema`` (untyped when ``None``) plus TypeMeta and ObjectMeta."""
    base: Mapping[str, Any] = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props = dict(base.get("properties") or {})
    props.update(_type_and_object_meta())
    return {**base, "type": "object", "properties": props}


def atom(s: Schema | None, v: Any) -> str:
    """``scalar``, ``map`` or ``list``: the schema's kind, or the value's when the schema is untyped."""
    if s is not None and not s.get("x-kubernetes-int-or-string"):
        t = s.get("type")
        if t == "object" or "properties" in s or "additionalProperties" in s:
            return "map"
        if t == "array" or "items" in s:
            return "list"
        if t in ("string", "integer", "number", "boolean"):
            return "scalar"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "list"
    return "scalar"


def is_deduced(s: Schema | None) -> bool:
    if s is None:
        return True
    if s.get("x-kubernetes-int-or-string"):
        return False
    return not (s.get("type") or "properties" in s or "additionalProperties" in s or "items" in s)


def map_atomic(s: Schema | None) -> bool:
    return s is not None and s.get("x-kubernetes-map-type") == "atomic"


def declared_fields(s: Schema | None) -> Mapping[str, Any]:
    if s is None:
        return {}
    props: Mapping[str, Any] = s.get("properties") or {}
    if s.get("x-kubernetes-embedded-resource"):
        props = {**props, **_type_and_object_meta()}
    return props


UNDECLARED: Final = object()


def child_schema(s: Schema | None, key: str) -> Any:
    """The schema of map key ``key``; ``UNDECLARED`` when the map does not allow it."""
    if s is None or is_deduced(s):
        return None
    declared = declared_fields(s)
    if key in declared:
        return declared[key]
    extra = s.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra
    if extra is True or s.get("x-kubernetes-preserve-unknown-fields"):
        return None
    return UNDECLARED


def field_schema(s: Schema | None, key: str) -> Schema | None:
    """The schema the value at ``key`` is typed with: an undeclared key's value is untyped."""
    child = child_schema(s, key)
    return None if child is UNDECLARED else child


def is_declared(s: Schema | None, key: str) -> bool:
    return s is not None and key in declared_fields(s)


def is_struct(s: Schema | None) -> bool:
    """A Go struct (named fields): the kind of value kube always has, even when empty."""
    return (
        s is not None
        and bool(s.get("properties"))
        and not map_atomic(s)
        and not isinstance(s.get("additionalProperties"), Mapping)
    )


def list_type(s: Schema | None) -> tuple[str, list[str]]:
    """(``atomic``|``set``|``map``, keys). Untyped lists are atomic."""
    if s is None or is_deduced(s):
        return "atomic", []
    lt = s.get("x-kubernetes-list-type") or "atomic"
    keys = list(s.get("x-kubernetes-list-map-keys") or []) if lt == "map" else []
    return str(lt), keys


def item_schema(s: Schema | None) -> Schema | None:
    if s is None:
        return None
    items = s.get("items")
    return items if isinstance(items, Mapping) else None


class SmdError(Exception):
    """A structured-merge-diff error; ``str()`` is its text as kube prints it."""


def item_pe(s: Schema | None, index: int, item: Any) -> PathElement:
    """``listItemToPathElement``."""
    lt, keys = list_type(s)
    if lt == "atomic":
        return PathElement("i", index)
    if keys:
        if item is None:
            raise SmdError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise SmdError("associative list with keys may not have non-map elements")
        elem = item_schema(s)
        fields: list[tuple[str, Any]] = []
        for key in keys:
            if key in item:
                fields.append((key, item[key]))
                continue
            prop = declared_fields(elem).get(key)
            if isinstance(prop, Mapping) and "default" in prop:
                fields.append((key, prop["default"]))
                continue
            raise SmdError(
                f"associative list with keys has an element that omits key field {go_quote(key)} "
                "(and doesn't have default value)"
            )
        return PathElement.key(fields)
    if isinstance(item, dict):
        raise SmdError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise SmdError("not supported: associative list with lists as elements")
    if item is None:
        raise SmdError("associative list without keys has an element that's an explicit null")
    return PathElement("v", item)


def index_items(s: Schema | None, items: list[Any]) -> tuple[list[PathElement], dict[PathElement, Any]]:
    """Path elements of a list's items in order; repeated elements keep their first item."""
    order: list[PathElement] = []
    seen: dict[PathElement, Any] = {}
    for i, item in enumerate(items):
        try:
            pe = item_pe(s, i, item)
        except SmdError:
            continue
        if pe in seen:
            continue
        seen[pe] = item
        order.append(pe)
    return order, seen


# ================================================================================================
# validation of an applied configuration (``ObjectToTyped``)
# ================================================================================================


def validate(value: Any, s: Schema | None) -> list[str]:
    """SMD's validation of an applied object; each error reads ``.path: message``."""
    out: list[str] = []
    _validate(value, s, "", out)
    return out


def _validate(v: Any, s: Schema | None, path: str, out: list[str]) -> None:
    kind = atom(s, v)
    if kind == "scalar":
        msg = _scalar_error(s, v)
        if msg:
            out.append(_at(path, msg))
    elif v is None:
        return
    elif kind == "list":
        _validate_list(v, s, path, out)
    else:
        _validate_map(v, s, path, out)


def _validate_list(v: Any, s: Schema | None, path: str, out: list[str]) -> None:
    if not isinstance(v, list):
        out.append(_at(path, f"expected list, got {_unstructured_v(v)}"))
        return
    lt, _ = list_type(s)
    elem = item_schema(s)
    seen: set[PathElement] = set()
    for i, item in enumerate(v):
        if lt == "atomic":
            pe = PathElement("i", i)
        else:
            try:
                pe = item_pe(s, i, item)
            except SmdError as exc:
                out.append(_at(path, f"element {i}: {exc}"))
                return
            if pe in seen:
                out.append(_at(path, f"duplicate entries for key {pe}"))
            seen.add(pe)
        _validate(item, elem, path + str(pe), out)


def _validate_map(v: Any, s: Schema | None, path: str, out: list[str]) -> None:
    if not isinstance(v, dict):
        out.append(_at(path, f"expected map, got {_unstructured_v(v)}"))
        return
    for key, val in v.items():
        child = child_schema(s, key)
        if child is UNDECLARED:
            out.append(_at(path + "." + key, "field not declared in schema"))
            return
        _validate(val, child, path + "." + key, out)


def _unstructured_v(v: Any) -> str:
    """``%v`` of an SMD ``valueUnstructured`` (``&{...}``)."""
    return "&{" + gofmt.render(v, gofmt.PERCENT_V) + "}"


def _scalar_error(s: Schema | None, v: Any) -> str | None:
    if v is None or s is None:
        return None
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string") or not t:
        if isinstance(v, dict | list):
            return f"expected any scalar, got {_unstructured_v(v)}"
        return None
    if t in ("integer", "number"):
        if not is_num(v):
            return f"expected numeric (int or float), got {gofmt.type_name(v)}"
    elif t == "string":
        if not isinstance(v, str):
            return f"expected string, got &value.valueUnstructured{{Value:{gofmt.render(v, gofmt.PERCENT_SHARP_V)}}}"
    elif t == "boolean" and not isinstance(v, bool):
        return f"expected boolean, got {_unstructured_v(v)}"
    return None


def _at(path: str, msg: str) -> str:
    return f"{path}: {msg}" if path else msg

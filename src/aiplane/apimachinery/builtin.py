"""Schemas of Kubernetes built-in types, embedded the way kubebuilder embeds them in CRDs.

We do not hand-write PodSpec & co.: the JSON schemas shipped in ``kubernetes-validate`` (generated
from the Kubernetes 1.37 OpenAPI document) are the source. They are written for JSON-Schema
validators (nullable unions, ``$ref``s, ``oneOf`` for int-or-string), so :func:`structural` rewrites a
definition into the structural OpenAPI v3 form that apiextensions.k8s.io/v1 accepts: refs inlined,
``null`` dropped from type unions, int-or-string and Quantity in their CRD spelling, and the
vendor extensions a CRD may not carry (patch strategies, GVK tags, unions) removed.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from importlib import resources
from typing import Any

KUBERNETES_SCHEMA_VERSION = "v1.37.0-local"

#: The pattern kubebuilder puts on every Quantity field (apimachinery's resource.Quantity).
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"

# Extensions the Kubernetes OpenAPI document carries that a CRD schema may not (JSONSchemaProps has no
# such field, so kube-apiserver would reject the CRD).
_DROPPED_KEYS = frozenset(
    {
        "x-kubernetes-patch-strategy",
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-group-version-kind",
        "x-kubernetes-unions",
        "$schema",
        "$id",
    }
)

# Keys of list-maps that the upstream Go types default with `+default=` markers. A list-map key must be
# required or defaulted in a CRD, so controller-gen emits these defaults; so do we.
_LIST_MAP_KEY_DEFAULTS = {"protocol": "TCP", "name": ""}


@functools.cache
def definitions() -> dict[str, Any]:
    """All Kubernetes definitions by their OpenAPI name (``io.k8s.api.core.v1.PodSpec`` …)."""
    base = resources.files("kubernetes_validate") / "kubernetes-json-schema" / KUBERNETES_SCHEMA_VERSION
    text = (base / "_definitions.json").read_text(encoding="utf-8")
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


def quantity_schema() -> dict[str, Any]:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def int_or_string_schema() -> dict[str, Any]:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def structural(name: str, description: str | None = None) -> dict[str, Any]:
    """The structural CRD schema for the Kubernetes definition ``name`` (a deep copy, safe to edit)."""
    schema = copy.deepcopy(_structural_cached(name))
    if description is not None:
        schema["description"] = description
    return schema


@functools.cache
def _structural_cached(name: str) -> dict[str, Any]:
    return _convert_ref(name, ())


def _convert_ref(name: str, seen: tuple[str, ...]) -> dict[str, Any]:
    if name == QUANTITY:
        return quantity_schema()
    if name == INT_OR_STRING:
        return int_or_string_schema()
    if name in (TIME, MICRO_TIME):
        return {"type": "string", "format": "date-time"}
    if name == RAW_EXTENSION:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if name in seen:
        # Recursive definitions (only JSONSchemaProps) cannot be inlined; keep them open.
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return _convert(definitions()[name], (*seen, name))


def _convert(node: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is not None:
        out = _convert_ref(ref.rsplit("/", 1)[-1], seen)
        if "description" in node:
            out = {**out, "description": node["description"]}
        return out
    out = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key in ("oneOf", "anyOf", "allOf"):
            raise ValueError(f"unexpected {key} in built-in definition {seen[-1] if seen else '?'}")
        convert = _KEY_CONVERTERS.get(key)
        if convert is None:
            out[key] = copy.deepcopy(value)
        else:
            converted = convert(value, seen)
            if converted is not _OMIT:
                out[key] = converted
    if out.get("x-kubernetes-list-type") == "map":
        _default_or_require_map_keys(out)
    return out


#: A converter's answer for a key the structural schema leaves out.
_OMIT: Any = object()


def _convert_type(value: Any, seen: tuple[str, ...]) -> Any:
    types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
    if len(types) > 1:
        raise ValueError(f"cannot express type union {types} structurally")
    return types[0] if types else _OMIT


def _convert_enum(value: Any, seen: tuple[str, ...]) -> Any:
    values = [v for v in value if v is not None]
    return values or _OMIT


#: How the keys that are not copied as they are convert (``null`` removed, sub-schemas converted).
_KEY_CONVERTERS: dict[str, Callable[[Any, tuple[str, ...]], Any]] = {
    "type": _convert_type,
    "properties": lambda value, seen: {k: _convert(v, seen) for k, v in value.items()},
    "items": _convert,
    "additionalProperties": lambda value, seen: value if isinstance(value, bool) else _convert(value, seen),
    "enum": _convert_enum,
}


def _default_or_require_map_keys(out: dict[str, Any]) -> None:
    """A list-map key must be required or defaulted in a CRD: default it as the Go types' ``+default=``
    markers do, else require it (Go validation requires these keys, e.g. a condition's type)."""
    item = out.get("items", {})
    required = set(item.get("required", []))
    for key in out.get("x-kubernetes-list-map-keys", []):
        prop = item.get("properties", {}).get(key)
        if key not in required and prop is not None and "default" not in prop:
            if key in _LIST_MAP_KEY_DEFAULTS:
                prop["default"] = _LIST_MAP_KEY_DEFAULTS[key]
            else:
                item["required"] = sorted({*item.get("required", []), key})

"""Generate apiextensions.k8s.io/v1 CRDs from the pydantic models.

Pydantic emits JSON Schema 2020-12 (``$ref``s, ``anyOf`` with ``null`` for optional fields, titles).
A CRD needs a *structural* OpenAPI v3 schema: every node typed, no refs, no nullable unions. This module
is the translation; the rules it follows are those controller-gen applies to Go types, so the output
reads like a kubebuilder CRD (properties sorted, descriptions kept, built-in types inlined).
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from aiplane.api.base import BUILTIN_MARKER, STRUCTURAL_MARKER, Resource
from aiplane.api.registry import RESOURCES
from aiplane.apimachinery import builtin

_API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object.\n"
    "Servers should convert recognized schemas to the latest internal value, and\n"
    "may reject unrecognized values.\n"
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
_KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents.\n"
    "Servers may infer this from the endpoint the client submits requests to.\n"
    "Cannot be updated.\n"
    "In CamelCase.\n"
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)

# JSON-Schema keywords copied verbatim into the CRD schema.
_PASSTHROUGH = (
    "description",
    "format",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "nullable",
)


def crd_for(model: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition object serving ``model``."""
    info = model.crd
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.get("$defs", {})
    properties: dict[str, Any] = {
        "apiVersion": {"description": _API_VERSION_DESCRIPTION, "type": "string"},
        "kind": {"description": _KIND_DESCRIPTION, "type": "string"},
        "metadata": {"type": "object"},
    }
    for name in ("spec", "status"):
        if name in raw["properties"]:
            properties[name] = _convert(raw["properties"][name], defs, ())
    root: dict[str, Any] = _sorted(
        {
            "description": info.description or _doc(model),
            "properties": properties,
            "type": "object",
            **({"x-kubernetes-validations": list(info.root_validations)} if info.root_validations else {}),
        }
    )
    version: dict[str, Any] = {
        "name": info.version,
        "schema": {"openAPIV3Schema": root},
        "served": True,
        "storage": True,
    }
    if info.printer_columns:
        version["additionalPrinterColumns"] = [c.to_crd() for c in info.printer_columns]
    subresources: dict[str, Any] = {}
    if info.scale is not None:
        scale: dict[str, Any] = {
            "specReplicasPath": info.scale.spec_replicas_path,
            "statusReplicasPath": info.scale.status_replicas_path,
        }
        if info.scale.label_selector_path:
            scale["labelSelectorPath"] = info.scale.label_selector_path
        subresources["scale"] = scale
    if "status" in properties:
        subresources["status"] = {}
    if subresources:
        version["subresources"] = subresources
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.name},
        "spec": {
            "group": info.group,
            "names": names,
            "scope": info.scope,
            "versions": [version],
        },
    }


def _doc(model: type[Any]) -> str:
    return " ".join((model.__doc__ or "").split())


def _convert(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """Translate one pydantic JSON-schema node into a structural CRD schema node."""
    named = _named_type(node, defs, seen)
    return _overlay(named if named is not None else _plain(node, defs, seen), node, defs, seen)


def _named_type(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    """The schema of the one type ``node`` names (a marker, a ``$ref``, an optional, a lone ``allOf``),
    or ``None`` when ``node`` spells its type out itself."""
    if STRUCTURAL_MARKER in node:
        structural: dict[str, Any] = copy.deepcopy(node[STRUCTURAL_MARKER])
        return structural
    if BUILTIN_MARKER in node:
        return builtin.structural(node[BUILTIN_MARKER])
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive type {name} cannot be expressed in a structural schema")
        return _convert(defs[name], defs, (*seen, name))
    for union in ("anyOf", "oneOf"):
        if union in node:
            branches = [b for b in node[union] if b.get("type") != "null"]
            if len(branches) != 1:
                raise ValueError(f"cannot express {union} {node[union]} structurally")
            return _convert(branches[0], defs, seen)
    if "allOf" in node and len(node["allOf"]) == 1:
        return _convert(node["allOf"][0], defs, seen)
    return None


def _plain(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """A node that spells its type out: scalars, enums, objects with properties, lists, maps."""
    out: dict[str, Any] = {}
    if "type" in node:
        out["type"] = node["type"]
    if "const" in node:
        out["enum"] = [node["const"]]
        out.setdefault("type", "string")
    if "enum" in node:
        out.setdefault("type", "string")
    if "properties" in node:
        out["properties"] = {
            key: _convert(value, defs, seen) for key, value in sorted(node["properties"].items())
        }
        out["type"] = "object"
        if node.get("required"):
            out["required"] = sorted(node["required"])
    if "items" in node:
        out["items"] = _convert(node["items"], defs, seen)
    additional = node.get("additionalProperties")
    if isinstance(additional, dict) and additional:
        out["additionalProperties"] = _convert(additional, defs, seen)
    elif additional is True or additional == {}:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _overlay(
    out: dict[str, Any], node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]
) -> dict[str, Any]:
    """Copy the keywords of ``node`` that qualify the type it names (description, limits, markers)."""
    for key in _PASSTHROUGH:
        if key in node:
            out[key] = node[key]
    if node.get("default") is not None:
        out["default"] = node["default"]
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out[key] = value
    return out


def _sorted(node: Any) -> Any:
    """Schema keys in alphabetical order at every level, as controller-gen writes them."""
    if isinstance(node, dict):
        return {key: _sorted(node[key]) for key in sorted(node)}
    if isinstance(node, list):
        return [_sorted(item) for item in node]
    return node


def all_crds() -> list[dict[str, Any]]:
    return [crd_for(model) for model in RESOURCES]


class _Dumper(yaml.SafeDumper):
    """Block-style YAML with multi-line strings as literal blocks (readable descriptions)."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_representer)


def to_yaml(obj: Any) -> str:
    return yaml.dump(
        obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True
    )


def crd_filename(crd: dict[str, Any]) -> str:
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"

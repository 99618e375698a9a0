"""OpenAPI schemas of the served kinds, as kube-apiserver publishes them (see ``openapi.py``).

Built-in kinds come from the Kubernetes definitions (``aiplane.apimachinery.builtin.definitions()``),
converted back to the form kube-openapi serves (nullable type unions dropped, ``$ref`` siblings wrapped
in ``allOf`` in v3, IntOrString and Quantity as apimachinery declares them). A CRD version is published
as apiextensions-apiserver builds it: its structural schema with ``metadata`` replaced by a reference to
``ObjectMeta``, ``apiVersion``/``kind`` from ``TypeMeta``, a ``<Kind>List`` schema, the
group-version-kind extension, and for v2 the value validations and ``nullable`` stripped.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from typing import Any

from aiplane.apimachinery import builtin
from aiplane.sim.apiserver.resources import _DEF, ResourceType

V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"
_RAW_PREFIX = "#/$defs/"

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
EVICTION = "io.k8s.api.policy.v1.Eviction"
BINDING = "io.k8s.api.core.v1.Binding"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
OBJECT_META_DESCRIPTION = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
LIST_META_DESCRIPTION = (
    "Standard list metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
INT_OR_STRING_DESCRIPTION = (
    "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and "
    "unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON "
    "field that can accept a name or number."
)
QUANTITY_DESCRIPTION = (
    "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling "
    "in JSON and YAML, in addition to String() and AsInt64() accessors.\n\nThe serialization format is:\n\n"
    '``` <quantity>        ::= <signedNumber><suffix>\n\n\t(Note that <suffix> may be empty, from the "" '
    "case in <decimalSI>.)\n\n<digit>           ::= 0 | 1 | ... | 9 <digits>          ::= <digit> | "
    "<digit><digits> <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits> <sign>"
    '            ::= "+" | "-" <signedNumber>    ::= <number> | <sign><number> <suffix>          ::= '
    "<binarySI> | <decimalExponent> | <decimalSI> <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei\n\n\t"
    "(International System of units; See: http://physics.nist.gov/cuu/Units/binary.html)\n\n<decimalSI>"
    '       ::= m | "" | k | M | G | T | P | E\n\n\t(Note that 1024 = 1Ki but 1000 = 1k; I didn\'t choose '
    'the capitalization.)\n\n<decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber> ```\n\nNo '
    "matter which of the three exponent forms is used, no quantity may represent a number greater than "
    "2^63-1 in magnitude, nor may it have more than 3 decimal places. Numbers larger or more precise will "
    "be capped or rounded up. (E.g.: 0.1m will rounded up to 1m.) This may be extended in the future if we "
    "require larger or smaller quantities.\n\nWhen a Quantity is parsed from a string, it will remember the "
    "type of suffix it had, and will use the same type again when it is serialized.\n\nBefore serializing, "
    'Quantity will be put in "canonical form". This means that Exponent/suffix will be adjusted up or down '
    "(with a corresponding increase or decrease in Mantissa) such that:\n\n- No precision is lost - No "
    "fractional digits will be emitted - The exponent (or suffix) is as large as possible.\n\nThe sign will "
    'be omitted unless the number is negative.\n\nExamples:\n\n- 1.5 will be serialized as "1500m" - 1.5Gi '
    'will be serialized as "1536Mi"\n\nNote that the quantity will NEVER be internally represented by a '
    "floating point number. That is the whole point of this exercise.\n\nNon-canonical values will still "
    "parse as long as they are well formed, but will be re-emitted in their canonical form. (So always use "
    "canonical form, or don't diff.)\n\nThis format is intended to make it difficult to use these numbers "
    "without writing some sort of special handling code in the hopes that that will cause implementors to "
    "also use a fixed point implementation."
)

#: Keys of a CRD schema that are not part of a structural schema (kube drops them when publishing).
_NON_STRUCTURAL = frozenset(
    {"example", "externalDocs", "id", "$schema", "$ref", "definitions", "dependencies", "patternProperties"}
)
#: The value validations apiextensions strips from the v2 document (structural ``ValueValidation``).
_VALUE_VALIDATIONS = frozenset(
    {
        "format",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
    }
)


# --- built-in definitions -----------------------------------------------------------------------------


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _plain_type(value: Any) -> Any:
    if isinstance(value, list):
        kinds = [t for t in value if t != "null"]
        return kinds[0] if kinds else None
    return value


def _convert_builtin(node: Any, v3: bool, *, drop_type_enums: bool = False) -> Any:
    """A raw (JSON-Schema flavoured) Kubernetes definition node in kube-openapi's v2 or v3 form."""
    if isinstance(node, list):
        return [_convert_builtin(item, v3) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type":
            kind = _plain_type(value)
            if kind is not None:
                out["type"] = kind
        elif key == "properties":
            props = {}
            for name, sub in value.items():
                converted = _convert_builtin(sub, v3)
                if drop_type_enums and name in ("apiVersion", "kind"):
                    converted.pop("enum", None)
                props[name] = converted
            out["properties"] = props
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _convert_builtin(value, v3)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_convert_builtin(v, v3) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    ref = node.get("$ref")
    if ref is None:
        return out
    target = (V3_PREFIX if v3 else V2_PREFIX) + _ref_name(ref)
    if v3 and out:
        return {"allOf": [{"$ref": target}], **out}
    return {"$ref": target, **out}


@functools.cache
def builtin_definition(name: str, v3: bool) -> dict[str, Any]:
    """A Kubernetes definition as kube-apiserver publishes it (shared: never mutate the result)."""
    if name == INT_OR_STRING:
        if v3:
            return {
                "description": INT_OR_STRING_DESCRIPTION,
                "oneOf": [{"type": "integer"}, {"type": "string"}],
                "format": "int-or-string",
            }
        return {"description": INT_OR_STRING_DESCRIPTION, "type": "string", "format": "int-or-string"}
    if name == QUANTITY:
        if v3:
            return {"description": QUANTITY_DESCRIPTION, "oneOf": [{"type": "string"}, {"type": "number"}]}
        return {"description": QUANTITY_DESCRIPTION, "type": "string"}
    raw = builtin.definitions()[name]
    converted: dict[str, Any] = _convert_builtin(
        raw, v3, drop_type_enums="x-kubernetes-group-version-kind" in raw
    )
    return converted


@functools.cache
def _raw_refs(name: str) -> frozenset[str]:
    """Definitions ``name`` refers to directly."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_RAW_PREFIX):
                found.add(ref[len(_RAW_PREFIX) :])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if name not in (INT_OR_STRING, QUANTITY):
        walk(builtin.definitions().get(name, {}))
    return frozenset(found)


def definition_closure(names: Iterable[str]) -> list[str]:
    """``names`` and every definition they reach, sorted."""
    known = builtin.definitions()
    seen: set[str] = set()
    todo = [n for n in names if n in known]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(r for r in _raw_refs(name) if r in known and r not in seen)
    return sorted(seen)


def builtin_definition_name(rt: ResourceType) -> str | None:
    return _DEF.get((rt.group, rt.kind))


# --- custom resources ---------------------------------------------------------------------------------


def crd_definition_name(group: str, version: str, kind: str) -> str:
    """kube-openapi's REST-friendly name: the group reversed (``sh.volcano.workload.v1alpha1.ModelInfer``)."""
    reversed_group = ".".join(reversed(group.split("."))) if "." in group else group
    return f"{reversed_group}.{version}.{kind}"


def _unfold(node: dict[str, Any]) -> None:
    """Structural ``Unfold``: spell x-kubernetes-int-or-string as its anyOf, unless already there."""
    if not node.get("x-kubernetes-int-or-string"):
        return
    pair = [{"type": "integer"}, {"type": "string"}]
    any_of = node.get("anyOf")
    if any_of == pair:
        return
    all_of = node.get("allOf")
    if all_of and isinstance(all_of[0], dict) and all_of[0].get("anyOf") == pair:
        return
    if any_of is None:
        node["anyOf"] = pair
    else:
        node["allOf"] = [{"anyOf": pair}, *(all_of or [])]


def _crd_node(node: Any, v3: bool) -> Any:
    """A CRD schema node as published: structural keys only; for v2 without value validations."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NON_STRUCTURAL or (not v3 and key in (*_VALUE_VALIDATIONS, "nullable")):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _crd_node(sub, v3) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _crd_node(value, v3)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [_crd_node(v, v3) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    if v3:
        _unfold(out)
    elif out.get("x-kubernetes-preserve-unknown-fields"):
        # ToStructuralOpenAPIV2: kubectl's v2 validation would reject unknown fields next to properties.
        out.pop("properties", None)
        out.pop("items", None)
    if out.get("x-kubernetes-embedded-resource") and (
        v3 or not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        _add_embedded_meta(out, v3)
    return out


def _add_embedded_meta(node: dict[str, Any], v3: bool) -> None:
    props = node.setdefault("properties", {})
    props["apiVersion"] = {
        "description": "apiVersion defines the versioned schema of this representation of an object. More "
        "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        "type": "string",
    }
    props["kind"] = {
        "description": "kind is a string value representing the type of this object. In CamelCase. More "
        "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        "type": "string",
    }
    props["metadata"] = {
        "$ref": (V3_PREFIX if v3 else V2_PREFIX) + OBJECT_META,
        "description": OBJECT_META_DESCRIPTION,
    }
    required = node.setdefault("required", [])
    for key in ("kind", "apiVersion"):
        if key not in required:
            required.append(key)


def crd_schema(rt: ResourceType, v3: bool) -> dict[str, Any]:
    """The published schema of a custom resource version (apiextensions' ``buildKubeNative``)."""
    prefix = V3_PREFIX if v3 else V2_PREFIX
    source = rt.crd_schema or {"type": "object"}
    gvk = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    if not v3 and source.get("x-kubernetes-preserve-unknown-fields"):
        return {"type": "object", "x-kubernetes-group-version-kind": gvk}
    schema: dict[str, Any] = _crd_node(source, v3)
    props = schema.setdefault("properties", {})
    props["metadata"] = {"$ref": prefix + OBJECT_META, "description": OBJECT_META_DESCRIPTION}
    props["apiVersion"] = {"description": API_VERSION_DESCRIPTION, "type": "string"}
    props["kind"] = {"description": KIND_DESCRIPTION, "type": "string"}
    schema["properties"] = dict(sorted(props.items()))
    schema["x-kubernetes-group-version-kind"] = gvk
    return schema


def crd_list_schema(rt: ResourceType, list_kind: str, v3: bool) -> dict[str, Any]:
    prefix = V3_PREFIX if v3 else V2_PREFIX
    return {
        "description": f"{list_kind} is a list of {rt.kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "items": {
                "description": f"List of {rt.plural}. More info: "
                "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                "type": "array",
                "items": {"$ref": prefix + crd_definition_name(rt.group, rt.version, rt.kind)},
            },
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {"$ref": prefix + LIST_META, "description": LIST_META_DESCRIPTION},
        },
        "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": list_kind, "version": rt.version}],
    }

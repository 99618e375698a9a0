"""OpenAPI documents: ``/openapi/v2`` (swagger 2.0) and ``/openapi/v3`` (an index plus one document per
group-version), shaped like kube-apiserver 1.37 publishes them, because kubectl reads them:

* ``kubectl explain`` renders the v3 document of a group-version: it finds the kind through the
  ``x-kubernetes-group-version-kind`` of the resource's path operations, then the schema carrying the
  same extension in ``components.schemas``, and follows ``$ref``/``allOf`` from there.
* ``kubectl apply``/``create`` ask the v3 document whether the PATCH operation of a kind has a
  ``fieldValidation`` parameter before trusting the server with field validation (otherwise they
  validate client-side against v2, or fail).

Built-in kinds come from the Kubernetes definitions (``aiplane.apimachinery.builtin.definitions()``), converted
back to the form kube-openapi serves (nullable type unions dropped, ``$ref`` siblings wrapped in
``allOf`` in v3, IntOrString and Quantity as apimachinery declares them). A CRD version is published as
apiextensions-apiserver builds it: its structural schema with ``metadata`` replaced by a reference to
``ObjectMeta``, ``apiVersion``/``kind`` from ``TypeMeta``, a ``<Kind>List`` schema, the
group-version-kind extension, and for v2 the value validations and ``nullable`` stripped.

Documents are built lazily and cached; the cache is dropped when the registry's generation changes
(a CRD was created, updated or deleted). Every document has an ETag (sha512 of its JSON) and answers
``If-None-Match`` with 304; the v3 index links each group-version as ``?hash=<etag>``, and a request
with a stale hash is redirected (301) to the current one, like kube-openapi's handler3.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

import orjson

from aiplane.apimachinery import builtin
from aiplane.sim.apiserver import discovery, errors
from aiplane.sim.apiserver.context import ServerContext
from aiplane.sim.apiserver.messages import JSON, ApiRequest, ApiResponse
from aiplane.sim.apiserver.negotiation import parse_accept
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


def _closure(names: Iterable[str]) -> list[str]:
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


def _list_kind(server: ServerContext, rt: ResourceType) -> str:
    crd = server.store.get("apiextensions.k8s.io/customresourcedefinitions", "", rt.crd_name or "")
    names = ((crd or {}).get("spec") or {}).get("names") or {}
    return str(names.get("listKind") or rt.kind + "List")


# --- paths --------------------------------------------------------------------------------------------

_QUERY = {
    "pretty": (
        "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a "
        "browser or command-line HTTP tool (curl and wget).",
    ),
    "dryRun": (
        "string",
        "When present, indicates that modifications should not be persisted. An invalid or unrecognized "
        "dryRun directive will result in an error response and no further processing of the request. Valid "
        "values are: - All: all dry run stages will be processed",
    ),
    "fieldManager": (
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The value "
        "must be less than or 128 characters long, and only contain printable characters, as defined by "
        "https://golang.org/pkg/unicode/#IsPrint.",
    ),
    "fieldValidation": (
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
        "containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown "
        "fields that are silently dropped from the object, and will ignore all but the last duplicate field "
        "that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a "
        "warning via the standard warning response header for each unknown field that is dropped from the "
        "object, and for each duplicate field that is encountered. The request will still succeed if there "
        "are no other errors, and will only persist the last of any duplicate fields. This is the default in "
        "v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be "
        "dropped from the object, or if any duplicate fields are present. The error returned from the server "
        "will contain all unknown and duplicate fields encountered.",
    ),
    "force": (
        "boolean",
        'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by '
        "other people. Force flag must be unset for non-apply patch requests.",
    ),
    "allowWatchBookmarks": (
        "boolean",
        'allowWatchBookmarks requests watch events with type "BOOKMARK". Servers that do not implement '
        "bookmarks may ignore this flag and bookmarks are sent at the server's discretion.",
    ),
    "continue": (
        "string",
        "The continue option should be set when retrieving more results from the server. Since this value is "
        "server defined, clients may only use the continue value from a previous query result with identical "
        "query parameters (except for the value of continue).",
    ),
    "fieldSelector": (
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    "labelSelector": (
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    "limit": (
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server "
        "will set the `continue` field on the list metadata to a value that can be used with the same initial "
        "query to retrieve the next set of results.",
    ),
    "resourceVersion": (
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "resourceVersionMatch": (
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "sendInitialEvents": (
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will "
        "begin with synthetic events to produce the current state of objects in the collection.",
    ),
    "timeoutSeconds": (
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or "
        "inactivity.",
    ),
    "watch": (
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove "
        "notifications. Specify resourceVersion.",
    ),
    "gracePeriodSeconds": (
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative integer. The "
        "value zero indicates delete immediately.",
    ),
    "ignoreStoreReadErrorWithClusterBreakingPotential": (
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow "
        "fails with a corrupt object error.",
    ),
    "orphanDependents": (
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the "
        "dependent objects be orphaned.",
    ),
    "propagationPolicy": (
        "string",
        "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be "
        "set, but not both. Acceptable values are: 'Orphan', 'Foreground' and 'Background'.",
    ),
}
_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = (
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
)
_OPERATION_VERBS = (
    "get",
    "log",
    "read",
    "replace",
    "patch",
    "delete",
    "watch",
    "connect",
    "proxy",
    "list",
    "create",
)
_BUILTIN_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_CRD_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)
_PRODUCES = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
)
_CRD_PRODUCES = ("application/json", "application/yaml", "application/cbor")


def _valid_operation_id(text: str, capitalize_first: bool) -> str:
    """kube-openapi's ``ToValidOperationID``: drop non-alphanumerics, capitalising what follows them."""
    out: list[str] = []
    upper = capitalize_first
    for ch in text:
        if ch.isalnum():
            out.append(ch.upper() if upper else ch)
            upper = False
        else:
            upper = True
    return "".join(out)


def operation_id_and_tag(operation: str, path: str) -> tuple[str, str]:
    """apiserver's ``GetOperationIDAndTags`` (``listNamespacedPod`` on /api/v1 -> ``listCoreV1NamespacedPod``)."""
    prefix = next(v for v in _OPERATION_VERBS if operation.startswith(v))
    rest = operation[len(prefix) :]
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"]:
        parts = ["apis", "core", *parts[1:]]
    trimmed = parts[1].removesuffix(".k8s.io")
    prefix += _valid_operation_id(trimmed, True)
    tag = _valid_operation_id(trimmed, False)
    if len(parts) > 2:
        prefix += _valid_operation_id(parts[2], True)
        tag += "_" + _valid_operation_id(parts[2], False)
    return prefix + _valid_operation_id(rest, True), tag


def _article(kind: str) -> str:
    return " an " if kind[:1].lower() in "aeiou" else " a "


@dataclass
class _Builder:
    """Accumulates the paths and schema names of one document."""

    v3: bool
    crd: bool
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    builtin_defs: set[str] = field(default_factory=set)
    custom_defs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return V3_PREFIX if self.v3 else V2_PREFIX

    def query(self, name: str) -> dict[str, Any]:
        kind, description = _QUERY[name]
        if self.v3:
            return {
                "name": name,
                "in": "query",
                "description": description,
                "schema": {"type": kind, "uniqueItems": True},
            }
        return {"uniqueItems": True, "type": kind, "description": description, "name": name, "in": "query"}

    def path_param(self, name: str, description: str) -> dict[str, Any]:
        if self.v3:
            return {
                "name": name,
                "in": "path",
                "description": description,
                "required": True,
                "schema": {"type": "string", "uniqueItems": True},
            }
        return {
            "uniqueItems": True,
            "type": "string",
            "description": description,
            "name": name,
            "in": "path",
            "required": True,
        }

    def operation(
        self,
        *,
        path: str,
        name: str,
        action: str,
        description: str,
        gvk: dict[str, str],
        response: str,
        params: Iterable[str] = (),
        request: str | None = None,
        request_types: Iterable[str] = ("*/*",),
        request_required: bool = True,
        extra_codes: Iterable[str] = (),
    ) -> dict[str, Any]:
        op_id, tag = operation_id_and_tag(name, path)
        produces = _CRD_PRODUCES if self.crd else _PRODUCES
        op: dict[str, Any] = {"tags": [tag], "description": description, "operationId": op_id}
        parameters = [self.query(p) for p in params]
        ref = {"$ref": self.prefix + response}
        codes = ["200", *extra_codes]
        if self.v3:
            if parameters:
                op["parameters"] = parameters
            if request is not None:
                op["requestBody"] = {
                    "content": {t: {"schema": {"$ref": self.prefix + request}} for t in request_types},
                    "required": request_required,
                }
            content = {t: {"schema": ref} for t in produces}
            op["responses"] = {
                **{code: {"description": _CODE_TEXT[code], "content": content} for code in codes},
                "401": {"description": "Unauthorized"},
            }
        else:
            op["consumes"] = list(request_types)
            op["produces"] = list(produces)
            op["schemes"] = ["https"]
            if request is not None:
                parameters.insert(
                    0,
                    {
                        "name": "body",
                        "in": "body",
                        "required": request_required,
                        "schema": {"$ref": self.prefix + request},
                    },
                )
            if parameters:
                op["parameters"] = parameters
            op["responses"] = {
                **{code: {"description": _CODE_TEXT[code], "schema": ref} for code in codes},
                "401": {"description": "Unauthorized"},
            }
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = gvk
        return op

    def add(self, path: str, method: str, op: dict[str, Any], path_params: list[dict[str, Any]]) -> None:
        item = self.paths.setdefault(path, {})
        item[method] = op
        item["parameters"] = [*path_params, self.query("pretty")]

    def resource(self, rt: ResourceType, kind_def: str, list_def: str) -> None:
        """The operations kube registers for a resource and its subresources."""
        base = rt.path()
        gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
        ns = "Namespaced" if rt.namespaced else ""
        name_param = self.path_param("name", f"name of the {rt.kind}")
        ns_param = self.path_param("namespace", "object name and auth scope, such as for teams and projects")
        patch_types = _CRD_PATCH_TYPES if self.crd else _BUILTIN_PATCH_TYPES
        if rt.namespaced:
            self.add(
                base,
                "get",
                self.operation(
                    path=base,
                    name=f"list{rt.kind}ForAllNamespaces",
                    action="list",
                    description=f"list or watch objects of kind {rt.kind}",
                    gvk=gvk,
                    response=list_def,
                    params=_LIST_PARAMS,
                ),
                [],
            )
            collection = base.replace(f"/{rt.plural}", f"/namespaces/{{namespace}}/{rt.plural}")
            scope = [ns_param]
        else:
            collection = base
            scope = []
        self.add(
            collection,
            "get",
            self.operation(
                path=collection,
                name=f"list{ns}{rt.kind}",
                action="list",
                description=f"list or watch objects of kind {rt.kind}",
                gvk=gvk,
                response=list_def,
                params=_LIST_PARAMS,
            ),
            scope,
        )
        self.add(
            collection,
            "post",
            self.operation(
                path=collection,
                name=f"create{ns}{rt.kind}",
                action="post",
                description=f"create{_article(rt.kind)}{rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=_WRITE_PARAMS,
                request=kind_def,
                extra_codes=("201", "202"),
            ),
            scope,
        )
        self.add(
            collection,
            "delete",
            self.operation(
                path=collection,
                name=f"deletecollection{ns}{rt.kind}",
                action="deletecollection",
                description=f"delete collection of {rt.kind}",
                gvk=gvk,
                response=STATUS,
                params=(
                    *_DELETE_PARAMS,
                    *[p for p in _LIST_PARAMS if p not in ("allowWatchBookmarks", "watch")],
                ),
                request=DELETE_OPTIONS,
                request_required=False,
            ),
            scope,
        )
        item = f"{collection}/{{name}}"
        item_scope = [name_param, *scope]
        self.add(
            item,
            "get",
            self.operation(
                path=item,
                name=f"read{ns}{rt.kind}",
                action="get",
                description=f"read the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
            ),
            item_scope,
        )
        self.add(
            item,
            "put",
            self.operation(
                path=item,
                name=f"replace{ns}{rt.kind}",
                action="put",
                description=f"replace the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=_WRITE_PARAMS,
                request=kind_def,
                extra_codes=("201",),
            ),
            item_scope,
        )
        self.add(
            item,
            "delete",
            self.operation(
                path=item,
                name=f"delete{ns}{rt.kind}",
                action="delete",
                description=f"delete{_article(rt.kind)}{rt.kind}",
                gvk=gvk,
                response=STATUS,
                params=_DELETE_PARAMS,
                request=DELETE_OPTIONS,
                request_required=False,
                extra_codes=("202",),
            ),
            item_scope,
        )
        self.add(
            item,
            "patch",
            self.operation(
                path=item,
                name=f"patch{ns}{rt.kind}",
                action="patch",
                description=f"partially update the specified {rt.kind}",
                gvk=gvk,
                response=kind_def,
                params=(*_WRITE_PARAMS, "force"),
                request=PATCH,
                request_types=patch_types,
                extra_codes=("201",),
            ),
            item_scope,
        )
        self.builtin_defs.update((STATUS, DELETE_OPTIONS, PATCH))
        for sub in sorted(rt.subresources):
            self._subresource(rt, sub, item, item_scope, kind_def, gvk, ns, patch_types)

    def _subresource(
        self,
        rt: ResourceType,
        sub: str,
        item: str,
        scope: list[dict[str, Any]],
        kind_def: str,
        gvk: dict[str, str],
        ns: str,
        patch_types: tuple[str, ...],
    ) -> None:
        path = f"{item}/{sub}"
        title = sub[:1].upper() + sub[1:]
        if sub in ("eviction", "binding"):
            target, target_gvk = (
                (EVICTION, {"group": "policy", "kind": "Eviction", "version": "v1"})
                if sub == "eviction"
                else (BINDING, {"group": "", "kind": "Binding", "version": "v1"})
            )
            self.builtin_defs.add(target)
            self.add(
                path,
                "post",
                self.operation(
                    path=path,
                    name=f"create{ns}{rt.kind}{title}",
                    action="post",
                    description=f"create {sub} of{_article(rt.kind)}{rt.kind}",
                    gvk=target_gvk,
                    response=target,
                    params=_WRITE_PARAMS,
                    request=target,
                    extra_codes=("201", "202"),
                ),
                [self.path_param("name", f"name of the {title}"), *scope[1:]],
            )
            return
        if sub == "finalize":
            self.add(
                path,
                "put",
                self.operation(
                    path=path,
                    name=f"replace{ns}{rt.kind}Finalize",
                    action="put",
                    description=f"replace finalize of the specified {rt.kind}",
                    gvk=gvk,
                    response=kind_def,
                    params=_WRITE_PARAMS,
                    request=kind_def,
                    extra_codes=("201",),
                ),
                scope,
            )
            return
        target = kind_def
        target_gvk = gvk
        if sub == "scale":
            target = SCALE
            target_gvk = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
            self.builtin_defs.add(SCALE)
        for method, verb, action, text, extra in (
            ("get", "read", "get", f"read {sub} of the specified {rt.kind}", ()),
            ("put", "replace", "put", f"replace {sub} of the specified {rt.kind}", ("201",)),
            ("patch", "patch", "patch", f"partially update {sub} of the specified {rt.kind}", ("201",)),
        ):
            kwargs: dict[str, Any] = {}
            if method == "put":
                kwargs = {"params": _WRITE_PARAMS, "request": target}
            elif method == "patch":
                kwargs = {"params": (*_WRITE_PARAMS, "force"), "request": PATCH, "request_types": patch_types}
            self.add(
                path,
                method,
                self.operation(
                    path=path,
                    name=f"{verb}{ns}{rt.kind}{title}",
                    action=action,
                    description=text,
                    gvk=target_gvk,
                    response=target,
                    extra_codes=extra,
                    **kwargs,
                ),
                scope,
            )


_CODE_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}


# --- documents ----------------------------------------------------------------------------------------


def _types(server: ServerContext, group: str | None = None, version: str | None = None) -> list[ResourceType]:
    return sorted(
        (
            rt
            for rt in server.registry.all()
            if (group is None or rt.group == group) and (version is None or rt.version == version)
        ),
        key=lambda r: (r.group, r.version, r.plural),
    )


def _fill(builder: _Builder, server: ServerContext, types: Iterable[ResourceType]) -> None:
    for rt in types:
        if rt.is_custom:
            name = crd_definition_name(rt.group, rt.version, rt.kind)
            list_kind = _list_kind(server, rt)
            list_name = crd_definition_name(rt.group, rt.version, list_kind)
            builder.custom_defs[name] = crd_schema(rt, builder.v3)
            builder.custom_defs[list_name] = crd_list_schema(rt, list_kind, builder.v3)
            builder.builtin_defs.update((OBJECT_META, LIST_META))
            builder.resource(rt, name, list_name)
            continue
        definition = builtin_definition_name(rt)
        if definition is None:
            continue
        list_def = definition + "List"
        builder.builtin_defs.add(definition)
        if list_def in builtin.definitions():
            builder.builtin_defs.add(list_def)
        builder.resource(rt, definition, list_def)


def _schemas(builder: _Builder) -> dict[str, Any]:
    schemas = {name: builtin_definition(name, builder.v3) for name in _closure(builder.builtin_defs)}
    schemas.update(builder.custom_defs)
    return dict(sorted(schemas.items()))


def v3_document(server: ServerContext, group: str, version: str) -> dict[str, Any]:
    types = _types(server, group, version)
    crd = any(rt.is_custom for rt in types)
    builder = _Builder(v3=True, crd=crd)
    _fill(builder, server, types)
    info = (
        {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}
        if crd
        else {"title": "Kubernetes", "version": "unversioned"}
    )
    return {
        "openapi": "3.0.0",
        "info": info,
        "paths": dict(sorted(builder.paths.items())),
        "components": {
            "schemas": _schemas(builder),
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
        "security": [{"BearerToken": []}],
    }


def v2_document(server: ServerContext) -> dict[str, Any]:
    builder = _Builder(v3=False, crd=False)
    builtins = [rt for rt in _types(server) if not rt.is_custom]
    _fill(builder, server, builtins)
    crd_builder = _Builder(v3=False, crd=True)
    _fill(crd_builder, server, [rt for rt in _types(server) if rt.is_custom])
    builder.paths.update(crd_builder.paths)
    builder.builtin_defs |= crd_builder.builtin_defs
    builder.custom_defs.update(crd_builder.custom_defs)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery.VERSION["gitVersion"]},
        "paths": dict(sorted(builder.paths.items())),
        "definitions": _schemas(builder),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    }


def gv_path(group: str, version: str) -> str:
    """The key of a group-version in the v3 index (``api/v1``, ``apis/apps/v1``)."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


# --- cache --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    body: bytes
    etag: str  # sha512 hex, upper case, unquoted


def _encode(doc: Any) -> Encoded:
    raw = orjson.dumps(doc)
    return Encoded(raw, hashlib.sha512(raw).hexdigest().upper())


@dataclass
class _Cache:
    generation: int = -1
    v2: Encoded | None = None
    v3: dict[str, Encoded] = field(default_factory=dict)
    index: Encoded | None = None


_CACHES: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()
#: Built-in group-versions never change: their documents are shared by every server.
_BUILTIN_V3: dict[tuple[str, str, tuple[str, ...]], Encoded] = {}


def _cache(server: ServerContext) -> _Cache:
    cache = _CACHES.get(server)
    if cache is None:
        cache = _CACHES[server] = _Cache()
    generation = server.registry.generation
    if cache.generation != generation:
        cache.generation = generation
        cache.v2 = None
        cache.v3 = {}
        cache.index = None
    return cache


def served_group_versions(server: ServerContext) -> list[tuple[str, str]]:
    return [(g, v) for g, versions in discovery.ordered_groups(server) for v in versions]


def v3_encoded(server: ServerContext, group: str, version: str) -> Encoded | None:
    if (group, version) not in served_group_versions(server):
        return None
    cache = _cache(server)
    key = gv_path(group, version)
    found = cache.v3.get(key)
    if found is not None:
        return found
    types = _types(server, group, version)
    if not any(rt.is_custom for rt in types):
        builtin_key = (group, version, tuple(rt.plural for rt in types))
        found = _BUILTIN_V3.get(builtin_key)
        if found is None:
            found = _BUILTIN_V3[builtin_key] = _encode(v3_document(server, group, version))
    else:
        found = _encode(v3_document(server, group, version))
    cache.v3[key] = found
    return found


def v3_index(server: ServerContext) -> Encoded:
    cache = _cache(server)
    if cache.index is None:
        paths = {}
        for group, version in sorted(served_group_versions(server), key=lambda gv: gv_path(*gv)):
            doc = v3_encoded(server, group, version)
            assert doc is not None
            key = gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={doc.etag}"}
        cache.index = _encode({"paths": paths})
    return cache.index


def v2_encoded(server: ServerContext) -> Encoded:
    cache = _cache(server)
    if cache.v2 is None:
        cache.v2 = _encode(v2_document(server))
    return cache.v2


# --- HTTP ---------------------------------------------------------------------------------------------


def _accepts_json(request: ApiRequest) -> bool:
    clauses = parse_accept(request.accept or "*/*")
    return any(c.matches_json() for c in clauses)


def _serve(request: ApiRequest, doc: Encoded, headers: dict[str, str] | None = None) -> ApiResponse:
    etag = f'"{doc.etag}"'
    all_headers = {"ETag": etag, "Vary": "Accept", **(headers or {})}
    if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
        return ApiResponse(304, all_headers)
    return ApiResponse(200, {**all_headers, "Content-Type": JSON}, doc.body)


def _group_version(rest: tuple[str, ...]) -> tuple[str, str]:
    """The group-version a ``/openapi/v3/…`` path names (404 for anything else)."""
    if rest[:1] == ("api",) and len(rest) == 2:
        return "", rest[1]
    if rest[:1] == ("apis",) and len(rest) == 3:
        return rest[1], rest[2]
    raise errors.not_found_path()


def _v3_group_version(server: ServerContext, request: ApiRequest, rest: tuple[str, ...]) -> ApiResponse:
    group, version = _group_version(rest)
    doc = v3_encoded(server, group, version)
    if doc is None:
        raise errors.not_found_path()
    if not _accepts_json(request):
        return ApiResponse(406)
    wanted = request.query.get("hash")
    if not wanted:
        return _serve(request, doc)
    if wanted != doc.etag:
        location = f"/openapi/v3/{gv_path(group, version)}?hash={quote(doc.etag)}"
        return ApiResponse(301, {"Location": location})
    return _serve(request, doc, {"Cache-Control": "public, immutable", "Expires": _one_year_from_now()})


def handle(server: ServerContext, request: ApiRequest) -> ApiResponse:
    """Serve ``/openapi/v2``, ``/openapi/v3`` and ``/openapi/v3/<group-version path>``."""
    if request.method not in ("GET", "HEAD"):
        raise errors.method_not_allowed()
    parts = request.parts
    if parts == ("openapi", "v2"):
        return _serve(request, v2_encoded(server)) if _accepts_json(request) else ApiResponse(406)
    if parts == ("openapi", "v3"):
        return _serve(request, v3_index(server))
    if parts[:2] == ("openapi", "v3") and parts[2:]:
        return _v3_group_version(server, request, parts[2:])
    raise errors.not_found_path()


def _one_year_from_now() -> str:
    return format_datetime(datetime.now(UTC) + timedelta(days=365), usegmt=True)


def iter_schema_refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` under ``node`` (for tests and diagnostics)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from iter_schema_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from iter_schema_refs(value)

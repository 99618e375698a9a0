"""The checks kube-apiserver applies to a CRD's ``openAPIV3Schema`` when the CRD is written.

kube-apiserver refuses a CustomResourceDefinition whose schema is not structural or uses a feature
it does not support (apiextensions ``ValidateCustomResourceDefinitionOpenAPISchema``,
``schema.ValidateStructural``, ``defaulting.ValidateDefaults``). Running the same checks on the CRDs
we generate catches a bad marker at build time rather than at ``kubectl apply``, and lets the
embedded API server refuse the same CRDs kube would, with the same messages.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from aiplane.apimachinery.field import FieldError, forbidden, invalid, required
from aiplane.apimachinery.values import child, deep_equal, index, key
from aiplane.schema.cel import validate_rules
from aiplane.schema.crdvalidation import openapi_schema_errors, schema_type, type_must_be
from aiplane.schema.prune import META_FIELDS, prune
from aiplane.schema.validate import validate_openapi

Schema = Mapping[str, Any]

_INT_OR_STRING_ANY_OF: Final = [{"type": "integer"}, {"type": "string"}]


def structural_errors(schema: Schema, *, path: str = "spec.validation.openAPIV3Schema") -> list[str]:
    """The errors kube-apiserver would report for ``schema`` as a CRD's ``openAPIV3Schema``.

    Each entry is a kube message such as ``spec.validation.openAPIV3Schema.properties[spec]
    .properties[x].type: Required value: must not be empty for specified object fields``. ``path``
    is where the schema sits in the CRD: kube reports a schema shared by all versions under
    ``spec.validation.openAPIV3Schema`` and a per-version one under
    ``spec.versions[i].schema.openAPIV3Schema``. An empty list means kube accepts the schema.
    """
    return [e.render_kube() for e in structural_field_errors(schema, path=path)]


def structural_field_errors(
    schema: Schema, *, path: str = "spec.validation.openAPIV3Schema"
) -> list[FieldError]:
    """:func:`structural_errors` as :class:`~aiplane.apimachinery.field.FieldError` objects."""
    errs = openapi_schema_errors(schema, path)
    structural: list[FieldError] = []
    _invariants(schema, "root", path, structural)
    _completeness(schema, path, structural)
    structural.sort(key=lambda e: e.render_kube())
    errs += structural
    if not structural:
        errs += _default_errors(schema, path, is_root=True)
    return errs


# --- schema.ValidateStructural -------------------------------------------------------------------


def _is_int_or_string_any_of(any_of: Any) -> bool:
    return isinstance(any_of, list) and deep_equal(any_of, _INT_OR_STRING_ANY_OF)


def _invariants(s: Any, level: str, path: str, errs: list[FieldError]) -> None:
    """``validateStructuralInvariants`` at a node of ``level`` root, item or field, then below it."""
    if not isinstance(s, Mapping):
        return
    stype = schema_type(s)
    items = s.get("items")
    if stype == "array" and items is None:
        errs.append(required(child(path, "items"), "must be specified"))
    if isinstance(items, Mapping):
        _invariants(items, "item", child(path, "items"), errs)
    props: Mapping[str, Any] = s.get("properties") or {}
    for name, sub in props.items():
        _invariants(sub, "field", key(child(path, "properties"), name), errs)
    if "additionalProperties" in s:
        if level == "root":
            errs.append(forbidden(child(path, "additionalProperties"), "must not be used at the root"))
        if isinstance(s["additionalProperties"], Mapping):
            _invariants(s["additionalProperties"], "field", child(path, "additionalProperties"), errs)
    _extension_invariants(s, path, errs)
    skip_any_of = _is_int_or_string_any_of(s.get("anyOf"))
    all_of = s.get("allOf") or []
    skip_first_all_of = (
        bool(all_of) and isinstance(all_of[0], Mapping) and _is_int_or_string_any_of(all_of[0].get("anyOf"))
    )
    _value_validation(s, skip_any_of, skip_first_all_of, path, errs)
    _type_invariants(s, level, path, stype, errs)
    _resource_invariants(s, level, path, errs)


def _extension_invariants(s: Schema, path: str, errs: list[FieldError]) -> None:
    """An int-or-string is neither an open object nor an embedded resource."""
    if not s.get("x-kubernetes-int-or-string"):
        return
    for extension in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
        if s.get(extension):
            errs.append(
                invalid(child(path, extension), True, "must be false if x-kubernetes-int-or-string is true")
            )


#: kube's detail for a node without a type, by where the node is.
_EMPTY_TYPE: Final = {
    "root": "must not be empty at the root",
    "item": "must not be empty for specified array items",
    "field": "must not be empty for specified object fields",
}


def _type_invariants(s: Schema, level: str, path: str, stype: str, errs: list[FieldError]) -> None:
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    open_value = s.get("x-kubernetes-int-or-string") or s.get("x-kubernetes-preserve-unknown-fields")
    if embedded and stype != "object":
        errs.append(type_must_be(path, stype, "must be object if x-kubernetes-embedded-resource is true"))
    elif not stype and not open_value:
        errs.append(required(child(path, "type"), _EMPTY_TYPE[level]))
    if embedded and "additionalProperties" in s:
        errs.append(
            forbidden(
                child(path, "additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            )
        )
    if level == "root" and stype and stype != "object":
        errs.append(invalid(child(path, "type"), stype, "must be object at the root"))


def _resource_invariants(s: Schema, level: str, path: str, errs: list[FieldError]) -> None:
    """The root and embedded resources: ``kind``/``apiVersion`` strings, ``metadata`` left implicit."""
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    props: Mapping[str, Any] = s.get("properties") or {}
    check_meta = level == "root" or embedded
    for meta in ("kind", "apiVersion"):
        if check_meta and meta in props and schema_type(props[meta]) != "string":
            errs.append(
                invalid(
                    child(key(child(path, "properties"), meta), "type"),
                    schema_type(props[meta]),
                    "must be string",
                )
            )
    if "metadata" in props:
        _metadata_invariants(
            props["metadata"], check_meta, level, key(child(path, "properties"), "metadata"), errs
        )
    if embedded and not s.get("x-kubernetes-preserve-unknown-fields") and not props:
        errs.append(
            required(
                child(path, "properties"),
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )


def _metadata_invariants(s: Any, check_meta: bool, level: str, path: str, errs: list[FieldError]) -> None:
    if not isinstance(s, Mapping):
        return
    if check_meta and schema_type(s) != "object":
        errs.append(invalid(child(path, "type"), schema_type(s), "must be object"))
    if level != "root":
        return
    rest = {k: v for k, v in s.items() if k not in ("type", "default")}
    props = rest.get("properties")
    if isinstance(props, Mapping) and set(props) <= {"name", "generateName"} and props:
        rest.pop("properties")
    if rest:
        errs.append(
            forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is implicitly "
                "specified",
            )
        )


_NESTED_FORBIDDEN: Final = (
    ("type", "must be empty to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("externalDocs", "must be undefined to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
)


def _value_validation(
    v: Schema, skip_any_of: bool, skip_first_all_of: bool, path: str, errs: list[FieldError]
) -> None:
    if not skip_any_of:
        for i, sub in enumerate(v.get("anyOf") or []):
            _nested(sub, False, index(child(path, "anyOf"), i), errs)
    for i, sub in enumerate(v.get("allOf") or []):
        _nested(sub, skip_first_all_of and i == 0, index(child(path, "allOf"), i), errs)
    for i, sub in enumerate(v.get("oneOf") or []):
        _nested(sub, False, index(child(path, "oneOf"), i), errs)
    _nested(v.get("not"), False, child(path, "not"), errs)
    pattern = v.get("pattern")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            errs.append(
                invalid(
                    child(path, "pattern"), pattern, f"must be a valid regular expression, but isn't: {exc}"
                )
            )


def _nested(v: Any, skip_any_of: bool, path: str, errs: list[FieldError]) -> None:
    if not isinstance(v, Mapping):
        return
    _value_validation(v, skip_any_of, False, path, errs)
    _nested(v.get("items"), False, child(path, "items"), errs)
    for name, sub in (v.get("properties") or {}).items():
        _nested(sub, False, key(child(path, "properties"), name), errs)
    for keyword, detail in _NESTED_FORBIDDEN:
        value = v.get(keyword)
        if value in (None, False, "", [], {}):
            continue
        errs.append(forbidden(child(path, keyword), detail))
    if "additionalProperties" in v:
        errs.append(forbidden(child(path, "additionalProperties"), "must be undefined to be structural"))
    if "metadata" in (v.get("properties") or {}):
        errs.append(
            forbidden(key(child(path, "properties"), "metadata"), "must not be specified in a nested context")
        )


def _completeness(s: Schema, path: str, errs: list[FieldError]) -> None:
    """Every property or items a value validation mentions exists in the structural schema."""
    _value_completeness(s, s, path, path, errs)


def _value_completeness(
    v: Schema, s: Schema | None, s_path: str, v_path: str, errs: list[FieldError]
) -> None:
    if s is None:
        errs.append(required(s_path, f"because it is defined in {v_path}"))
        return
    nested = v.get("not")
    if isinstance(nested, Mapping):
        _nested_completeness(nested, s, s_path, child(v_path, "not"), errs)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(v.get(keyword) or []):
            if isinstance(sub, Mapping):
                _nested_completeness(sub, s, s_path, index(child(v_path, keyword), i), errs)


def _nested_completeness(
    v: Schema, s: Schema | None, s_path: str, v_path: str, errs: list[FieldError]
) -> None:
    if s is None:
        errs.append(required(s_path, f"because it is defined in {v_path}"))
        return
    _value_completeness(v, s, s_path, v_path, errs)
    items = v.get("items")
    if isinstance(items, Mapping):
        s_items = s.get("items")
        _nested_completeness(
            items,
            s_items if isinstance(s_items, Mapping) else None,
            child(s_path, "items"),
            child(v_path, "items"),
            errs,
        )
    s_props: Mapping[str, Any] = s.get("properties") or {}
    for name, sub in (v.get("properties") or {}).items():
        if name not in s_props:
            errs.append(
                required(
                    key(child(s_path, "properties"), name),
                    f"because it is defined in {key(child(v_path, 'properties'), name)}",
                )
            )
        elif isinstance(sub, Mapping):
            _nested_completeness(
                sub,
                s_props[name],
                key(child(s_path, "properties"), name),
                key(child(v_path, "properties"), name),
                errs,
            )


# --- defaulting.ValidateDefaults -----------------------------------------------------------------


def _default_errors(
    s: Any, path: str, *, is_root: bool = False, inside_meta: bool = False
) -> list[FieldError]:
    if not isinstance(s, Mapping):
        return []
    errs: list[FieldError] = []
    embedded = is_root or bool(s.get("x-kubernetes-embedded-resource"))
    if bool(s.get("x-kubernetes-embedded-resource")):
        inside_meta = False
    default = s.get("default")
    if default is not None and not inside_meta:
        default_path = child(path, "default")
        pruned = copy.deepcopy(default)
        prune(pruned, s, root=bool(s.get("x-kubernetes-embedded-resource")), drop_nulls=False)
        if not deep_equal(pruned, default):
            errs.append(invalid(default_path, default, "must not have unknown fields"))
        found = validate_openapi(default, s, fld_prefix=default_path, ratcheting=False)
        if not found:
            found = validate_rules(
                default,
                s,
                old=default,
                path=default_path,
                resource_root=bool(s.get("x-kubernetes-embedded-resource")),
                ratcheting=False,
            )
        errs += found
    items = s.get("items")
    if isinstance(items, Mapping):
        errs += _default_errors(items, child(path, "items"), inside_meta=inside_meta)
    for name, sub in (s.get("properties") or {}).items():
        sub_meta = inside_meta or (embedded and name in META_FIELDS)
        errs += _default_errors(sub, key(child(path, "properties"), name), inside_meta=sub_meta)
    return errs

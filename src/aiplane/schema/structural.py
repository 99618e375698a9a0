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

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import child, deep_equal, index, key
from aiplane.schema.cel import SUPPORTED_REASONS, field_path, validate_rules
from aiplane.schema.celprogram import compile_rule, undefined_fields
from aiplane.schema.prune import META_FIELDS, prune
from aiplane.schema.validate import validate_openapi

Schema = Mapping[str, Any]

_OPENAPI_TYPES: Final = ("array", "boolean", "integer", "number", "object", "string")
_NEWLINES = re.compile(r"[\n\r]+")
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
    errs: list[FieldError] = []
    if schema.get("nullable"):
        errs.append(_forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    _schema_checks(
        schema,
        path,
        errs,
        is_root=True,
        allow_defaults=True,
        reason="",
        inside_meta=False,
        uncorrelatable=None,
    )
    structural: list[FieldError] = []
    _invariants(schema, "root", path, structural)
    _completeness(schema, path, structural)
    structural.sort(key=lambda e: e.render_kube())
    errs += structural
    if not structural:
        errs += _default_errors(schema, path, is_root=True)
    return errs


def _forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, fe.FORBIDDEN, None, detail, bad_value="")


def _required(path: str, detail: str) -> FieldError:
    return FieldError(path, fe.REQUIRED, None, detail, bad_value="")


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, fe.INVALID, value, detail)


def _not_supported(path: str, value: Any, allowed: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(f'"{a}"' for a in allowed)
    return FieldError(path, fe.NOT_SUPPORTED, value, detail, keyword="enum", limit=allowed)


def _ptype(s: Schema) -> str:
    t = s.get("type")
    return t if isinstance(t, str) else ""


# --- ValidateCustomResourceDefinitionOpenAPISchema -----------------------------------------------


def _schema_checks(
    s: Any,
    path: str,
    errs: list[FieldError],
    *,
    is_root: bool,
    allow_defaults: bool,
    reason: str,
    inside_meta: bool,
    uncorrelatable: str | None,
) -> None:
    if not isinstance(s, Mapping):
        return
    stype = _ptype(s)
    # specStandardValidatorV3.validate
    if stype and stype not in _OPENAPI_TYPES and stype != "null":
        errs.append(_not_supported(child(path, "type"), stype, list(_OPENAPI_TYPES)))
    if s.get("default") is not None and not allow_defaults:
        errs.append(_forbidden(child(path, "default"), "must not be set" + (f" {reason}" if reason else "")))
    for keyword, word in (
        ("id", "id"),
        ("additionalItems", "additionalItems"),
        ("patternProperties", "patternProperties"),
        ("definitions", "definitions"),
        ("dependencies", "dependencies"),
        ("$ref", "$ref"),
    ):
        if s.get(keyword) not in (None, "", {}):
            errs.append(_forbidden(child(path, keyword), f"{word} is not supported"))
    if stype == "null":
        errs.append(
            _forbidden(child(path, "type"), "type cannot be set to null, use nullable as an alternative")
        )
    if isinstance(s.get("items"), list):
        errs.append(_forbidden(child(path, "items"), "items must be a schema object and not an array"))
    if inside_meta and s.get("x-kubernetes-embedded-resource"):
        errs.append(
            _forbidden(
                child(path, "x-kubernetes-embedded-resource"), "must not be used inside of resource meta"
            )
        )

    if s.get("uniqueItems") is True:
        errs.append(
            _forbidden(
                child(path, "uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )

    props: Mapping[str, Any] = s.get("properties") or {}
    if "additionalProperties" in s:
        additional = s["additionalProperties"]
        if props and (additional is False or isinstance(additional, Mapping)):
            errs.append(
                _forbidden(
                    child(path, "additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                )
            )
        elif additional is False:
            errs.append(
                _forbidden(child(path, "additionalProperties"), "additionalProperties cannot be set to false")
            )
        sub_allow, sub_reason = allow_defaults, reason
        if inside_meta:
            sub_allow, sub_reason = False, "inside additionalProperties applying to object metadata"
        _schema_checks(
            additional,
            child(path, "additionalProperties"),
            errs,
            is_root=False,
            allow_defaults=sub_allow,
            reason=sub_reason,
            inside_meta=inside_meta,
            uncorrelatable=uncorrelatable,
        )
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    for name, sub in props.items():
        sub_allow, sub_reason, sub_meta = allow_defaults, reason, inside_meta
        if (is_root or embedded) and name in META_FIELDS:
            sub_meta = True
            if is_root:
                sub_allow, sub_reason = False, f"in top-level {name}"
        _schema_checks(
            sub,
            key(child(path, "properties"), name),
            errs,
            is_root=False,
            allow_defaults=sub_allow,
            reason=sub_reason,
            inside_meta=sub_meta,
            uncorrelatable=uncorrelatable,
        )
    _schema_checks(
        s.get("not"),
        child(path, "not"),
        errs,
        is_root=False,
        allow_defaults=allow_defaults,
        reason=reason,
        inside_meta=inside_meta,
        uncorrelatable=uncorrelatable,
    )
    for keyword in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(s.get(keyword) or []):
            _schema_checks(
                sub,
                index(child(path, keyword), i),
                errs,
                is_root=False,
                allow_defaults=allow_defaults,
                reason=reason,
                inside_meta=inside_meta,
                uncorrelatable=uncorrelatable,
            )
    list_type = s.get("x-kubernetes-list-type")
    items = s.get("items")
    if isinstance(items, Mapping):
        items_uncorrelatable = (
            uncorrelatable if list_type == "map" else (uncorrelatable or child(path, "items"))
        )
        _schema_checks(
            items,
            child(path, "items"),
            errs,
            is_root=False,
            allow_defaults=allow_defaults,
            reason=reason,
            inside_meta=inside_meta,
            uncorrelatable=items_uncorrelatable,
        )

    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        errs.append(
            _invalid(child(path, "x-kubernetes-preserve-unknown-fields"), False, "must be true or undefined")
        )
    _map_and_list_type_checks(s, path, stype, errs)
    _rule_checks(s, path, errs, is_root=is_root, uncorrelatable=uncorrelatable)
    _list_key_checks(s, path, errs)


def _map_and_list_type_checks(s: Schema, path: str, stype: str, errs: list[FieldError]) -> None:
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None:
        if stype != "object":
            detail = "must be object if x-kubernetes-map-type is specified"
            errs.append(
                _required(child(path, "type"), detail)
                if not stype
                else _invalid(child(path, "type"), stype, detail)
            )
        if map_type not in ("atomic", "granular"):
            errs.append(
                _not_supported(child(path, "x-kubernetes-map-type"), map_type, ["atomic", "granular"])
            )
    list_type = s.get("x-kubernetes-list-type")
    items = s.get("items")
    if list_type is not None and stype != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        errs.append(
            _required(child(path, "type"), detail)
            if not stype
            else _invalid(child(path, "type"), stype, detail)
        )
    elif list_type == "set" and isinstance(items, Mapping):
        item_type = _ptype(items)
        detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
        if item_type == "array" and items.get("x-kubernetes-list-type") not in (None, "atomic"):
            errs.append(
                _invalid(
                    child(child(path, "items"), "x-kubernetes-list-type"),
                    items.get("x-kubernetes-list-type"),
                    detail,
                )
            )
        elif item_type == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errs.append(
                _invalid(
                    child(child(path, "items"), "x-kubernetes-map-type"),
                    items.get("x-kubernetes-list-type"),
                    detail,
                )
            )
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(
            _not_supported(child(path, "x-kubernetes-list-type"), list_type, ["atomic", "map", "set"])
        )
    map_keys = list(s.get("x-kubernetes-list-map-keys") or [])
    if map_keys:
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            errs.append(_required(child(path, "x-kubernetes-list-type"), detail))
        elif list_type != "map":
            errs.append(_invalid(child(path, "x-kubernetes-list-type"), list_type, detail))
    if list_type != "map":
        return
    if not map_keys:
        errs.append(
            _required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            )
        )
    if items is None:
        errs.append(_required(child(path, "items"), "must have a schema if x-kubernetes-list-type is map"))
        return
    if not isinstance(items, Mapping):
        errs.append(
            _invalid(
                child(path, "items"), items, "must only have a single schema if x-kubernetes-list-type is map"
            )
        )
        return
    item_type = _ptype(items)
    if item_type != "object":
        errs.append(
            _invalid(
                child(child(path, "items"), "type"),
                item_type,
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        )
        return
    item_props: Mapping[str, Any] = items.get("properties") or {}
    seen: set[str] = set()
    for k in map_keys:
        if k in item_props:
            if _ptype(item_props[k]) in ("array", "object"):
                errs.append(
                    _invalid(
                        child(key(child(child(path, "items"), "properties"), k), "type"),
                        item_type,
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    )
                )
        else:
            errs.append(
                _invalid(
                    child(path, "x-kubernetes-list-map-keys"),
                    map_keys,
                    "entries must all be names of item properties",
                )
            )
        if k in seen:
            errs.append(
                _invalid(
                    child(path, "x-kubernetes-list-map-keys"), map_keys, "must not contain duplicate entries"
                )
            )
        seen.add(k)


def _list_key_checks(s: Schema, path: str, errs: list[FieldError]) -> None:
    """``validateMapListKeysMapSet``: list-map keys must be required or defaulted."""
    items = s.get("items")
    list_type = s.get("x-kubernetes-list-type")
    if not isinstance(items, Mapping) or list_type not in ("set", "map"):
        return
    items_path = child(path, "items")
    if items.get("nullable"):
        errs.append(
            _forbidden(
                child(items_path, "nullable"),
                f"cannot be nullable when x-kubernetes-list-type is {list_type}",
            )
        )
    if list_type != "map":
        return
    required = set(items.get("required") or [])
    item_props: Mapping[str, Any] = items.get("properties") or {}
    for k in s.get("x-kubernetes-list-map-keys") or []:
        prop = item_props.get(k)
        if prop is None:
            continue
        prop_path = key(child(items_path, "properties"), k)
        if k not in required and prop.get("default") is None:
            errs.append(
                _required(
                    child(prop_path, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a "
                    "required property",
                )
            )
        if prop.get("nullable"):
            errs.append(
                _forbidden(
                    child(prop_path, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                )
            )


def _rule_checks(
    s: Schema, path: str, errs: list[FieldError], *, is_root: bool, uncorrelatable: str | None
) -> None:
    rules = s.get("x-kubernetes-validations") or []
    if not rules:
        return
    base = child(path, "x-kubernetes-validations")
    local: list[FieldError] = []
    for i, rule in enumerate(rules):
        rpath = index(base, i)
        source = str(rule.get("rule") or "")
        message = str(rule.get("message") or "")
        if not source.strip():
            local.append(_required(child(rpath, "rule"), "rule is not specified"))
        elif message and not message.strip():
            local.append(_invalid(child(rpath, "message"), message, "message must be non-empty if specified"))
        elif len(message) > 2048:
            local.append(
                _invalid(
                    child(rpath, "message"),
                    message[:10] + "...",
                    "message must have a maximum length of 2048 characters",
                )
            )
        elif _NEWLINES.search(message.strip()):
            local.append(_invalid(child(rpath, "message"), message, "message must not contain line breaks"))
        elif _NEWLINES.search(source.strip()) and not message.strip():
            local.append(
                _required(child(rpath, "message"), "message must be specified if rule contains line breaks")
            )
        message_expression = rule.get("messageExpression")
        if (
            message_expression is not None
            and message_expression != ""
            and not str(message_expression).strip()
        ):
            local.append(
                _required(
                    child(rpath, "messageExpression"), "messageExpression must be non-empty if specified"
                )
            )
        reason = rule.get("reason")
        if reason is not None and reason not in SUPPORTED_REASONS:
            local.append(_not_supported(child(rpath, "reason"), reason, sorted(SUPPORTED_REASONS)))
        fp = rule.get("fieldPath")
        if fp:
            fp = str(fp)
            if not fp.strip():
                local.append(
                    _invalid(child(rpath, "fieldPath"), fp, "fieldPath must be non-empty if specified")
                )
            if _NEWLINES.search(fp):
                local.append(
                    _invalid(child(rpath, "fieldPath"), fp, "fieldPath must not contain line breaks")
                )
            try:
                field_path(fp, s)
            except ValueError as exc:
                local.append(
                    _invalid(child(rpath, "fieldPath"), fp, f"fieldPath must be a valid path: {exc}")
                )
    errs += local
    if local:
        return
    for i, rule in enumerate(rules):
        rpath = index(base, i)
        compiled = compile_rule(str(rule.get("rule")))
        if compiled.error is not None:
            errs.append(_invalid(child(rpath, "rule"), dict(rule), compiled.error))
        else:
            for name in undefined_fields(str(rule.get("rule")), s, resource_root=is_root):
                column = str(rule.get("rule")).find(name) + 1
                detail = f"compilation failed: ERROR: <input>:1:{column}: undefined field '{name}'"
                errs.append(_invalid(child(rpath, "rule"), dict(rule), detail))
        if rule.get("messageExpression"):
            message_compiled = compile_rule(str(rule["messageExpression"]))
            if message_compiled.error is not None:
                errs.append(
                    _invalid(
                        child(rpath, "messageExpression"),
                        dict(rule),
                        message_compiled.error.replace(
                            "compilation failed", "messageExpression compilation failed"
                        ),
                    )
                )
        if compiled.uses_old_self and uncorrelatable is not None:
            errs.append(
                _invalid(
                    child(rpath, "rule"),
                    str(rule.get("rule")),
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                    f"{uncorrelatable}",
                )
            )


# --- schema.ValidateStructural -------------------------------------------------------------------


def _is_int_or_string_any_of(any_of: Any) -> bool:
    return isinstance(any_of, list) and deep_equal(any_of, _INT_OR_STRING_ANY_OF)


def _invariants(s: Any, level: str, path: str, errs: list[FieldError]) -> None:
    if not isinstance(s, Mapping):
        return
    stype = _ptype(s)
    items = s.get("items")
    if stype == "array" and items is None:
        errs.append(_required(child(path, "items"), "must be specified"))
    if isinstance(items, Mapping):
        _invariants(items, "item", child(path, "items"), errs)
    props: Mapping[str, Any] = s.get("properties") or {}
    for name, sub in props.items():
        _invariants(sub, "field", key(child(path, "properties"), name), errs)
    if "additionalProperties" in s:
        if level == "root":
            errs.append(_forbidden(child(path, "additionalProperties"), "must not be used at the root"))
        if isinstance(s["additionalProperties"], Mapping):
            _invariants(s["additionalProperties"], "field", child(path, "additionalProperties"), errs)
    int_or_string = bool(s.get("x-kubernetes-int-or-string"))
    preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    if int_or_string and preserve:
        errs.append(
            _invalid(
                child(path, "x-kubernetes-preserve-unknown-fields"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if int_or_string and embedded:
        errs.append(
            _invalid(
                child(path, "x-kubernetes-embedded-resource"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    skip_any_of = _is_int_or_string_any_of(s.get("anyOf"))
    all_of = s.get("allOf") or []
    skip_first_all_of = (
        bool(all_of) and isinstance(all_of[0], Mapping) and _is_int_or_string_any_of(all_of[0].get("anyOf"))
    )
    _value_validation(s, skip_any_of, skip_first_all_of, path, errs)
    if embedded and stype != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        errs.append(
            _required(child(path, "type"), detail)
            if not stype
            else _invalid(child(path, "type"), stype, detail)
        )
    elif not stype and not int_or_string and not preserve:
        detail = {
            "root": "must not be empty at the root",
            "item": "must not be empty for specified array items",
            "field": "must not be empty for specified object fields",
        }[level]
        errs.append(_required(child(path, "type"), detail))
    if embedded and "additionalProperties" in s:
        errs.append(
            _forbidden(
                child(path, "additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            )
        )
    if level == "root" and stype and stype != "object":
        errs.append(_invalid(child(path, "type"), stype, "must be object at the root"))
    check_meta = level == "root" or embedded
    for meta in ("kind", "apiVersion"):
        if check_meta and meta in props and _ptype(props[meta]) != "string":
            errs.append(
                _invalid(
                    child(key(child(path, "properties"), meta), "type"), _ptype(props[meta]), "must be string"
                )
            )
    if "metadata" in props:
        _metadata_invariants(
            props["metadata"], check_meta, level, key(child(path, "properties"), "metadata"), errs
        )
    if embedded and not preserve and not props:
        errs.append(
            _required(
                child(path, "properties"),
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )


def _metadata_invariants(s: Any, check_meta: bool, level: str, path: str, errs: list[FieldError]) -> None:
    if not isinstance(s, Mapping):
        return
    if check_meta and _ptype(s) != "object":
        errs.append(_invalid(child(path, "type"), _ptype(s), "must be object"))
    if level != "root":
        return
    rest = {k: v for k, v in s.items() if k not in ("type", "default")}
    props = rest.get("properties")
    if isinstance(props, Mapping) and set(props) <= {"name", "generateName"} and props:
        rest.pop("properties")
    if rest:
        errs.append(
            _forbidden(
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
                _invalid(
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
        errs.append(_forbidden(child(path, keyword), detail))
    if "additionalProperties" in v:
        errs.append(_forbidden(child(path, "additionalProperties"), "must be undefined to be structural"))
    if "metadata" in (v.get("properties") or {}):
        errs.append(
            _forbidden(
                key(child(path, "properties"), "metadata"), "must not be specified in a nested context"
            )
        )


def _completeness(s: Schema, path: str, errs: list[FieldError]) -> None:
    """Every property or items a value validation mentions exists in the structural schema."""
    _value_completeness(s, s, path, path, errs)


def _value_completeness(
    v: Schema, s: Schema | None, s_path: str, v_path: str, errs: list[FieldError]
) -> None:
    if s is None:
        errs.append(_required(s_path, f"because it is defined in {v_path}"))
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
        errs.append(_required(s_path, f"because it is defined in {v_path}"))
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
                _required(
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
            errs.append(_invalid(default_path, default, "must not have unknown fields"))
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

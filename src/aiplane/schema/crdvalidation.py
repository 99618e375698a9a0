"""What apiextensions checks in a CRD's ``openAPIV3Schema`` beyond structure (kube's
``ValidateCustomResourceDefinitionOpenAPISchema``).

Supported keywords and types, defaults only where kube allows them, list and map types and list-map
keys, and the ``x-kubernetes-validations`` rules themselves (messages, reasons, field paths, and that
each rule compiles). :mod:`aiplane.schema.structural` runs these with the structural checks and
reports them in kube's order, so the messages match kube-apiserver's refusal of the same CRD.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery.field import FieldError, forbidden, invalid, not_supported, required
from aiplane.apimachinery.values import child, index, key
from aiplane.schema.cel import SUPPORTED_REASONS, field_path
from aiplane.schema.celprogram import compile_rule, undefined_fields
from aiplane.schema.prune import META_FIELDS

__all__ = ["openapi_schema_errors", "schema_type", "type_must_be"]

Schema = Mapping[str, Any]

_OPENAPI_TYPES: Final = ("array", "boolean", "integer", "number", "object", "string")
_NEWLINES = re.compile(r"[\n\r]+")
_MAX_MESSAGE_LENGTH: Final = 2048

#: Keywords a CRD schema may not use (``specStandardValidatorV3``), with the word kube names each by.
_UNSUPPORTED_KEYWORDS: Final = (
    "id",
    "additionalItems",
    "patternProperties",
    "definitions",
    "dependencies",
    "$ref",
)


def schema_type(s: Schema) -> str:
    """The node's ``type`` (``""`` when absent or not a string)."""
    t = s.get("type")
    return t if isinstance(t, str) else ""


def type_must_be(path: str, stype: str, detail: str) -> FieldError:
    """kube's complaint about a node's type: Required when it has none, Invalid when it has another."""
    return required(child(path, "type"), detail) if not stype else invalid(child(path, "type"), stype, detail)


@dataclass(frozen=True, slots=True)
class _Where:
    """What a node inherits from where it sits in the schema."""

    allow_defaults: bool = True
    #: Why defaults are not allowed here (completes kube's "must not be set ..." detail).
    reason: str = ""
    #: Inside ``metadata`` of the resource or an embedded resource.
    inside_meta: bool = False
    #: The path of the nearest list whose items do not correlate (``oldSelf`` cannot be used below it).
    uncorrelatable: str | None = None


def openapi_schema_errors(schema: Schema, path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionOpenAPISchema`` for a CRD's root schema at ``path``."""
    errs: list[FieldError] = []
    if schema.get("nullable"):
        errs.append(forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    _schema_checks(schema, path, errs, _Where(), is_root=True)
    return errs


def _schema_checks(
    s: Any, path: str, errs: list[FieldError], where: _Where, *, is_root: bool = False
) -> None:
    if not isinstance(s, Mapping):
        return
    stype = schema_type(s)
    _keyword_checks(s, path, stype, where, errs)
    _additional_properties_checks(s, path, where, errs)
    _subschema_checks(s, path, where, errs, is_root=is_root)
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        errs.append(
            invalid(child(path, "x-kubernetes-preserve-unknown-fields"), False, "must be true or undefined")
        )
    _map_type_checks(s, path, stype, errs)
    _list_type_checks(s, path, stype, errs)
    _list_map_checks(s, path, errs)
    _rule_checks(s, path, errs, is_root=is_root, uncorrelatable=where.uncorrelatable)
    _list_key_checks(s, path, errs)


def _keyword_checks(s: Schema, path: str, stype: str, where: _Where, errs: list[FieldError]) -> None:
    """``specStandardValidatorV3.validate`` and the node's own feature checks."""
    if stype and stype not in _OPENAPI_TYPES and stype != "null":
        errs.append(not_supported(child(path, "type"), stype, _OPENAPI_TYPES))
    if s.get("default") is not None and not where.allow_defaults:
        detail = "must not be set" + (f" {where.reason}" if where.reason else "")
        errs.append(forbidden(child(path, "default"), detail))
    errs.extend(
        forbidden(child(path, keyword), f"{keyword} is not supported")
        for keyword in _UNSUPPORTED_KEYWORDS
        if s.get(keyword) not in (None, "", {})
    )
    if stype == "null":
        errs.append(
            forbidden(child(path, "type"), "type cannot be set to null, use nullable as an alternative")
        )
    if isinstance(s.get("items"), list):
        errs.append(forbidden(child(path, "items"), "items must be a schema object and not an array"))
    if where.inside_meta and s.get("x-kubernetes-embedded-resource"):
        errs.append(
            forbidden(
                child(path, "x-kubernetes-embedded-resource"), "must not be used inside of resource meta"
            )
        )
    if s.get("uniqueItems") is True:
        errs.append(
            forbidden(
                child(path, "uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )


def _additional_properties_checks(s: Schema, path: str, where: _Where, errs: list[FieldError]) -> None:
    if "additionalProperties" not in s:
        return
    additional = s["additionalProperties"]
    sub_path = child(path, "additionalProperties")
    if s.get("properties") and (additional is False or isinstance(additional, Mapping)):
        errs.append(forbidden(sub_path, "additionalProperties and properties are mutual exclusive"))
    elif additional is False:
        errs.append(forbidden(sub_path, "additionalProperties cannot be set to false"))
    if where.inside_meta:
        where = dataclasses.replace(
            where, allow_defaults=False, reason="inside additionalProperties applying to object metadata"
        )
    _schema_checks(additional, sub_path, errs, where)


def _subschema_checks(s: Schema, path: str, where: _Where, errs: list[FieldError], *, is_root: bool) -> None:
    """Properties, ``not``, ``allOf``/``oneOf``/``anyOf`` and items, each with what it inherits."""
    props: Mapping[str, Any] = s.get("properties") or {}
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    for name, sub in props.items():
        sub_where = where
        if (is_root or embedded) and name in META_FIELDS:
            sub_where = dataclasses.replace(where, inside_meta=True)
            if is_root:
                sub_where = dataclasses.replace(
                    sub_where, allow_defaults=False, reason=f"in top-level {name}"
                )
        _schema_checks(sub, key(child(path, "properties"), name), errs, sub_where)
    _schema_checks(s.get("not"), child(path, "not"), errs, where)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(s.get(keyword) or []):
            _schema_checks(sub, index(child(path, keyword), i), errs, where)
    items = s.get("items")
    if isinstance(items, Mapping):
        items_path = child(path, "items")
        if s.get("x-kubernetes-list-type") != "map":
            where = dataclasses.replace(where, uncorrelatable=where.uncorrelatable or items_path)
        _schema_checks(items, items_path, errs, where)


# --- list and map types ----------------------------------------------------------------------------


def _map_type_checks(s: Schema, path: str, stype: str, errs: list[FieldError]) -> None:
    map_type = s.get("x-kubernetes-map-type")
    if map_type is None:
        return
    if stype != "object":
        errs.append(type_must_be(path, stype, "must be object if x-kubernetes-map-type is specified"))
    if map_type not in ("atomic", "granular"):
        errs.append(not_supported(child(path, "x-kubernetes-map-type"), map_type, ["atomic", "granular"]))


def _list_type_checks(s: Schema, path: str, stype: str, errs: list[FieldError]) -> None:
    list_type = s.get("x-kubernetes-list-type")
    items = s.get("items")
    if list_type is not None and stype != "array":
        errs.append(type_must_be(path, stype, "must be array if x-kubernetes-list-type is specified"))
    elif list_type == "set" and isinstance(items, Mapping):
        _set_item_checks(items, child(path, "items"), errs)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(not_supported(child(path, "x-kubernetes-list-type"), list_type, ["atomic", "map", "set"]))
    if list(s.get("x-kubernetes-list-map-keys") or []):
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            errs.append(required(child(path, "x-kubernetes-list-type"), detail))
        elif list_type != "map":
            errs.append(invalid(child(path, "x-kubernetes-list-type"), list_type, detail))


def _set_item_checks(items: Schema, items_path: str, errs: list[FieldError]) -> None:
    item_type = schema_type(items)
    detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
    # kube reports the item's list type as the bad value in both cases.
    if item_type == "array" and items.get("x-kubernetes-list-type") not in (None, "atomic"):
        errs.append(
            invalid(child(items_path, "x-kubernetes-list-type"), items.get("x-kubernetes-list-type"), detail)
        )
    elif item_type == "object" and items.get("x-kubernetes-map-type") != "atomic":
        errs.append(
            invalid(child(items_path, "x-kubernetes-map-type"), items.get("x-kubernetes-list-type"), detail)
        )


def _list_map_checks(s: Schema, path: str, errs: list[FieldError]) -> None:
    """A ``map`` list: keys named, and items one object schema whose key properties are scalars."""
    if s.get("x-kubernetes-list-type") != "map":
        return
    map_keys = list(s.get("x-kubernetes-list-map-keys") or [])
    items = s.get("items")
    if not map_keys:
        errs.append(
            required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            )
        )
    if items is None:
        errs.append(required(child(path, "items"), "must have a schema if x-kubernetes-list-type is map"))
        return
    if not isinstance(items, Mapping):
        errs.append(
            invalid(
                child(path, "items"), items, "must only have a single schema if x-kubernetes-list-type is map"
            )
        )
        return
    item_type = schema_type(items)
    if item_type != "object":
        errs.append(
            invalid(
                child(child(path, "items"), "type"),
                item_type,
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        )
        return
    _map_key_checks(items, map_keys, path, errs)


def _map_key_checks(items: Schema, map_keys: list[Any], path: str, errs: list[FieldError]) -> None:
    item_props: Mapping[str, Any] = items.get("properties") or {}
    keys_path = child(path, "x-kubernetes-list-map-keys")
    seen: set[str] = set()
    for k in map_keys:
        if k not in item_props:
            errs.append(invalid(keys_path, map_keys, "entries must all be names of item properties"))
        elif schema_type(item_props[k]) in ("array", "object"):
            errs.append(
                invalid(
                    child(key(child(child(path, "items"), "properties"), k), "type"),
                    schema_type(items),
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                )
            )
        if k in seen:
            errs.append(invalid(keys_path, map_keys, "must not contain duplicate entries"))
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
            forbidden(
                child(items_path, "nullable"),
                f"cannot be nullable when x-kubernetes-list-type is {list_type}",
            )
        )
    if list_type != "map":
        return
    required_keys = set(items.get("required") or [])
    item_props: Mapping[str, Any] = items.get("properties") or {}
    for k in s.get("x-kubernetes-list-map-keys") or []:
        prop = item_props.get(k)
        if prop is None:
            continue
        prop_path = key(child(items_path, "properties"), k)
        if k not in required_keys and prop.get("default") is None:
            errs.append(
                required(
                    child(prop_path, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a "
                    "required property",
                )
            )
        if prop.get("nullable"):
            errs.append(
                forbidden(
                    child(prop_path, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                )
            )


# --- x-kubernetes-validations ------------------------------------------------------------------------


def _rule_checks(
    s: Schema, path: str, errs: list[FieldError], *, is_root: bool, uncorrelatable: str | None
) -> None:
    """Each rule's fields first; only when all are well-formed, whether the rules compile."""
    rules = s.get("x-kubernetes-validations") or []
    if not rules:
        return
    base = child(path, "x-kubernetes-validations")
    local = [err for i, rule in enumerate(rules) for err in _rule_field_errors(rule, index(base, i), s)]
    errs += local
    if local:
        return
    for i, rule in enumerate(rules):
        errs += _rule_compile_errors(rule, index(base, i), s, is_root=is_root, uncorrelatable=uncorrelatable)


def _rule_field_errors(rule: Mapping[str, Any], rpath: str, s: Schema) -> list[FieldError]:
    errs: list[FieldError] = []
    source = str(rule.get("rule") or "")
    message = str(rule.get("message") or "")
    if not source.strip():
        errs.append(required(child(rpath, "rule"), "rule is not specified"))
    elif message and not message.strip():
        errs.append(invalid(child(rpath, "message"), message, "message must be non-empty if specified"))
    elif len(message) > _MAX_MESSAGE_LENGTH:
        errs.append(
            invalid(
                child(rpath, "message"),
                message[:10] + "...",
                "message must have a maximum length of 2048 characters",
            )
        )
    elif _NEWLINES.search(message.strip()):
        errs.append(invalid(child(rpath, "message"), message, "message must not contain line breaks"))
    elif _NEWLINES.search(source.strip()) and not message.strip():
        errs.append(
            required(child(rpath, "message"), "message must be specified if rule contains line breaks")
        )
    message_expression = rule.get("messageExpression")
    if message_expression is not None and message_expression != "" and not str(message_expression).strip():
        errs.append(
            required(child(rpath, "messageExpression"), "messageExpression must be non-empty if specified")
        )
    reason = rule.get("reason")
    if reason is not None and reason not in SUPPORTED_REASONS:
        errs.append(not_supported(child(rpath, "reason"), reason, sorted(SUPPORTED_REASONS)))
    if rule.get("fieldPath"):
        errs += _field_path_errors(str(rule["fieldPath"]), child(rpath, "fieldPath"), s)
    return errs


def _field_path_errors(fp: str, path: str, s: Schema) -> list[FieldError]:
    errs: list[FieldError] = []
    if not fp.strip():
        errs.append(invalid(path, fp, "fieldPath must be non-empty if specified"))
    if _NEWLINES.search(fp):
        errs.append(invalid(path, fp, "fieldPath must not contain line breaks"))
    try:
        field_path(fp, s)
    except ValueError as exc:
        errs.append(invalid(path, fp, f"fieldPath must be a valid path: {exc}"))
    return errs


def _rule_compile_errors(
    rule: Mapping[str, Any], rpath: str, s: Schema, *, is_root: bool, uncorrelatable: str | None
) -> list[FieldError]:
    errs: list[FieldError] = []
    source = str(rule.get("rule"))
    compiled = compile_rule(source)
    if compiled.error is not None:
        errs.append(invalid(child(rpath, "rule"), dict(rule), compiled.error))
    else:
        for name in undefined_fields(source, s, resource_root=is_root):
            column = source.find(name) + 1
            detail = f"compilation failed: ERROR: <input>:1:{column}: undefined field '{name}'"
            errs.append(invalid(child(rpath, "rule"), dict(rule), detail))
    if rule.get("messageExpression"):
        message_compiled = compile_rule(str(rule["messageExpression"]))
        if message_compiled.error is not None:
            detail = message_compiled.error.replace(
                "compilation failed", "messageExpression compilation failed"
            )
            errs.append(invalid(child(rpath, "messageExpression"), dict(rule), detail))
    if compiled.uses_old_self and uncorrelatable is not None:
        errs.append(
            invalid(
                child(rpath, "rule"),
                source,
                f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}",
            )
        )
    return errs

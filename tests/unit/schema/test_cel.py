"""x-kubernetes-validations: transition rules, messages, reasons and correlation as in kube."""

from __future__ import annotations

from typing import Any

import pytest

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import kube_invalid_message
from aiplane.schema.cel import field_path, validate_rules
from aiplane.schema.celprogram import compile_rule, escape
from aiplane.schema.validate import admit, validate
from tests.unit.schema.helpers import plan

DRY_RUN_MESSAGE = "spec: Invalid value: dryRun cannot be re-enabled once disabled"


def _with_dry_run(value: bool | None) -> dict[str, Any]:
    obj = plan()
    if value is not None:
        obj["spec"]["dryRun"] = value
    return obj


def _kube(errs: list[fe.FieldError]) -> list[str]:
    return [e.render_kube() for e in errs]


def test_dry_run_on_create_is_allowed(schema: dict[str, Any]) -> None:
    assert admit(_with_dry_run(True), schema)[2] == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (False, True, [DRY_RUN_MESSAGE]),
        (None, True, [DRY_RUN_MESSAGE]),
        (True, True, []),
        (True, False, []),
        (False, False, []),
        (None, None, []),
    ],
)
def test_dry_run_transition_rule(
    schema: dict[str, Any], old: bool | None, new: bool | None, expected: list[str]
) -> None:
    stored, _, _ = admit(_with_dry_run(old), schema)
    _, _, errs = admit(_with_dry_run(new), schema, old=stored)
    assert _kube(errs) == expected


def test_dry_run_error_in_every_rendering(schema: dict[str, Any]) -> None:
    _, _, errs = admit(_with_dry_run(True), schema, old=_with_dry_run(False))
    (err,) = errs
    assert err.type == fe.INVALID
    assert err.path == "spec"
    assert err.render() == (
        "spec: dryRun cannot be re-enabled once disabled "
        "(rule: !(has(self.dryRun) && self.dryRun && (!has(oldSelf.dryRun) || !oldSelf.dryRun)))"
    )
    assert err.cause() == {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: dryRun cannot be re-enabled once disabled",
        "field": "spec",
    }
    assert kube_invalid_message("PartitioningPlan.infrastructure.silogen.ai", "plan-a", errs) == (
        f'PartitioningPlan.infrastructure.silogen.ai "plan-a" is invalid: {DRY_RUN_MESSAGE}'
    )


def _rules_schema(*rules: dict[str, Any], **props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": props or {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "x-kubernetes-validations": list(rules),
            }
        },
    }


def test_message_expression_field_path_and_reason() -> None:
    schema = _rules_schema(
        {
            "rule": "self.a < self.b",
            "messageExpression": "'a (' + string(self.a) + ') must be below b'",
            "fieldPath": ".a",
            "reason": "FieldValueForbidden",
        }
    )
    (err,) = validate({"spec": {"a": 3, "b": 1}}, schema)
    assert err.render_kube() == "spec.a: Forbidden: a (3) must be below b"
    assert err.type == fe.FORBIDDEN


@pytest.mark.parametrize(
    ("reason", "kube"),
    [
        (None, "spec: Invalid value: must be one"),
        ("FieldValueRequired", "spec: Required value: must be one"),
        ("FieldValueDuplicate", 'spec: Duplicate value: "object"'),
        ("FieldValueForbidden", "spec: Forbidden: must be one"),
    ],
)
def test_reasons(reason: str | None, kube: str) -> None:
    rule: dict[str, Any] = {"rule": "self.a == 1", "message": "must be one"}
    if reason:
        rule["reason"] = reason
    (err,) = validate({"spec": {"a": 2}}, _rules_schema(rule))
    assert err.render_kube() == kube
    assert err.render() == "spec: must be one (rule: self.a == 1)"


def test_default_message_and_evaluation_errors() -> None:
    schema = _rules_schema(
        {"rule": "self.a > 0"}, {"rule": "self.b > 0"}, {"rule": "self.a / 0 > 1", "message": "div"}
    )
    assert _kube(validate({"spec": {"a": -1}}, schema)) == [
        "spec: Invalid value: failed rule: self.a > 0",
        'spec: Invalid value: "object": no such key: b evaluating rule: self.b > 0',
        'spec: Invalid value: "object": division by zero evaluating rule: div',
    ]


def test_absent_optional_fields_with_has() -> None:
    schema = _rules_schema({"rule": "!has(self.a) || self.a > 0", "message": "a must be positive"})
    assert validate({"spec": {}}, schema) == []
    assert _kube(validate({"spec": {"a": 0}}, schema)) == ["spec: Invalid value: a must be positive"]


def test_property_names_are_escaped() -> None:
    schema = _rules_schema(
        {"rule": "self.max__dash__size > 0 && self.__namespace__ != ''", "message": "escaped"},
        **{"max-size": {"type": "integer"}, "namespace": {"type": "string"}},
    )
    assert validate({"spec": {"max-size": 1, "namespace": "x"}}, schema) == []
    assert escape("a.b/c-d__e") == "a__dot__b__slash__c__dash__d__underscores__e"
    assert escape("in") == "__in__"
    assert escape("1abc") is None
    assert escape("a b") is None


def test_optional_old_self_runs_on_create_too() -> None:
    rule = {
        "rule": "!oldSelf.hasValue() || self.a >= oldSelf.value().a",
        "optionalOldSelf": True,
        "message": "a may not decrease",
    }
    schema = _rules_schema(rule)
    assert validate({"spec": {"a": 1}}, schema) == []
    assert _kube(validate({"spec": {"a": 1}}, schema, old={"spec": {"a": 2}})) == [
        "spec: Invalid value: a may not decrease"
    ]


def test_transition_rules_correlate_maps_and_list_maps_but_not_atomic_lists() -> None:
    item = {
        "type": "object",
        "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v may not decrease"}],
    }
    schema = {
        "type": "object",
        "properties": {
            "byName": {"type": "object", "additionalProperties": item},
            "keyed": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k"],
                "items": {**item, "required": ["k"]},
            },
            "atomic": {"type": "array", "items": item},
        },
    }
    old = {
        "byName": {"x": {"v": 5}},
        "keyed": [{"k": "a", "v": 5}, {"k": "b", "v": 5}],
        "atomic": [{"v": 5}],
    }
    new = {
        "byName": {"x": {"v": 4}, "y": {"v": 0}},
        "keyed": [{"k": "b", "v": 4}, {"k": "a", "v": 6}, {"k": "c", "v": 0}],
        "atomic": [{"v": 0}],
    }
    errs = validate_rules(new, schema, old=old, resource_root=True)
    assert sorted(e.path for e in errs) == ["byName[x]", "keyed[0]"]


def test_unchanged_values_are_ratcheted_for_non_transition_rules() -> None:
    schema = _rules_schema({"rule": "self.a > 0", "message": "positive"})
    stored = {"spec": {"a": 0}}
    assert validate({"spec": {"a": 0}}, schema, old=stored) == []
    assert len(validate({"spec": {"a": -1}}, schema, old=stored)) == 1
    assert len(validate({"spec": {"a": 0}}, schema, old=stored, ratcheting=False)) == 1


def test_resource_root_only_sees_name_and_generate_name() -> None:
    schema = {
        "type": "object",
        "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}},
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('a')", "message": "name"},
            {"rule": "!has(self.metadata.labels)", "message": "labels are invisible"},
        ],
    }
    obj: dict[str, Any] = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "abc", "labels": {"a": "b"}},
        "spec": {},
    }
    assert validate(obj, schema) == []
    obj["metadata"]["name"] = "zzz"
    assert _kube(validate(obj, schema)) == ["<nil>: Invalid value: name"]


def test_date_time_strings_are_timestamps() -> None:
    schema = {
        "type": "object",
        "properties": {
            "t": {
                "type": "string",
                "format": "date-time",
                "x-kubernetes-validations": [
                    {"rule": "self > timestamp('2024-01-01T00:00:00Z')", "message": "old"}
                ],
            }
        },
    }
    assert validate({"t": "2025-01-01T00:00:00Z"}, schema, resource_root=False) == []
    assert _kube(validate({"t": "2023-01-01T00:00:00.123456789Z"}, schema, resource_root=False)) == [
        't: Invalid value: "2023-01-01T00:00:00.123456789Z": old'
    ]


def test_rules_compile_once() -> None:
    first = compile_rule("self.a == 1")
    assert compile_rule("self.a == 1") is first
    assert first.error is None and not first.uses_old_self
    assert compile_rule("self.a == oldSelf.a").uses_old_self
    broken = compile_rule("self.a ==")
    assert broken.error is not None and broken.error.startswith("compilation failed: ERROR: <input>:1:")
    assert compile_rule("nope(self)").error == (
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')"
    )


def test_extension_functions_are_available() -> None:
    schema = _rules_schema(
        {"rule": "self.name.lowerAscii() == self.name", "message": "lower"},
        {"rule": "self.items.isSorted() && self.items.indexOf(2) == 1", "message": "sorted"},
        name={"type": "string"},
        items={"type": "array", "items": {"type": "integer"}},
    )
    assert validate({"spec": {"name": "abc", "items": [1, 2, 3]}}, schema) == []
    assert [e.detail for e in validate({"spec": {"name": "Abc", "items": [3, 2]}}, schema)] == [
        "lower",
        "sorted",
    ]


def test_field_path_normalization() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    assert field_path(".a.b", schema) == "a.b"
    assert field_path(".m['x.y']", schema) == "m[x.y]"
    with pytest.raises(ValueError, match="does not refer to a valid field"):
        field_path(".nope", schema)

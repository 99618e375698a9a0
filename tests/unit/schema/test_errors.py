"""FieldError renderings: one for people, one byte-for-byte like kube-apiserver."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError, invalid_status, kube_invalid_message
from aiplane.apimachinery.values import deep_equal, go_float, go_json, go_quote, go_value
from aiplane.schema.validate import validate

NAME_PATTERN = "^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"

ROLES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["rules"],
            "properties": {
                "rules": {"type": "array", "items": {"type": "string"}},
                "replicas": {"type": "integer"},
                "recoveryPolicy": {"type": "string", "enum": ["InferGroupRecreate", "RoleRecreate", "None"]},
                "rollout": {
                    "type": "object",
                    "properties": {"maxParallel": {"type": "integer", "minimum": 1}},
                },
                "template": {
                    "type": "object",
                    "properties": {
                        "roles": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"name": {"type": "string", "pattern": NAME_PATTERN}},
                            },
                        }
                    },
                },
            },
        }
    },
}


def _only(obj: dict[str, Any]) -> FieldError:
    errs = validate(obj, ROLES_SCHEMA)
    assert len(errs) == 1, [e.render_kube() for e in errs]
    return errs[0]


def test_pattern_error_in_both_renderings() -> None:
    err = _only({"spec": {"rules": [], "template": {"roles": [{"name": "Prefill_1"}]}}})
    assert err.path == "spec.template.roles[0].name"
    assert err.type == fe.INVALID
    assert err.rule == NAME_PATTERN
    assert err.render() == f'spec.template.roles[0].name: "Prefill_1" does not match {NAME_PATTERN}'
    assert err.render_kube() == (
        'spec.template.roles[0].name: Invalid value: "Prefill_1": '
        f"spec.template.roles[0].name in body should match '{NAME_PATTERN}'"
    )


def test_minimum_error() -> None:
    err = _only({"spec": {"rules": [], "rollout": {"maxParallel": 0}}})
    assert err.render() == "spec.rollout.maxParallel: 0 is less than the minimum 1"
    assert err.render_kube() == (
        "spec.rollout.maxParallel: Invalid value: 0: spec.rollout.maxParallel in body should be greater "
        "than or equal to 1"
    )


def test_required_error() -> None:
    err = _only({"spec": {}})
    assert err.type == fe.REQUIRED
    assert err.render() == "spec.rules: required field is missing"
    assert err.render_kube() == "spec.rules: Required value"
    assert err.cause() == {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.rules"}


def test_enum_error() -> None:
    err = _only({"spec": {"rules": [], "recoveryPolicy": "Foo"}})
    assert err.type == fe.NOT_SUPPORTED
    assert (
        err.render()
        == 'spec.recoveryPolicy: "Foo" is not one of "InferGroupRecreate", "RoleRecreate", "None"'
    )
    assert err.render_kube() == (
        'spec.recoveryPolicy: Unsupported value: "Foo": supported values: "InferGroupRecreate", '
        '"RoleRecreate", "None"'
    )


def test_type_error_shows_the_json_type_as_value() -> None:
    err = _only({"spec": {"rules": [], "replicas": "string"}})
    assert err.type == fe.TYPE_INVALID
    assert err.render_kube() == (
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'
    )
    assert err.cause() == {
        "reason": "FieldValueTypeInvalid",
        "message": 'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        "field": "spec.replicas",
    }
    assert err.render() == 'spec.replicas: "string" is not of type integer'


def test_cel_error_renderings() -> None:
    rule = "!(has(self.dryRun) && self.dryRun && (!has(oldSelf.dryRun) || !oldSelf.dryRun))"
    err = FieldError(
        "spec",
        fe.INVALID,
        {"dryRun": True},
        "dryRun cannot be re-enabled once disabled",
        rule,
        "x-kubernetes-validations",
        "dryRun cannot be re-enabled once disabled",
        bad_value=fe.OMIT,
    )
    assert err.render_kube() == "spec: Invalid value: dryRun cannot be re-enabled once disabled"
    assert err.render() == f"spec: dryRun cannot be re-enabled once disabled (rule: {rule})"


def test_unknown_field_rendering() -> None:
    err = FieldError("spec.foo", fe.FORBIDDEN, None, "unknown field", keyword="unknown")
    assert err.render() == "spec.foo: unknown field"
    assert err.render_kube() == "spec.foo: Forbidden: unknown field"


def test_root_errors_print_nil_like_kube() -> None:
    err = FieldError("", fe.INVALID, None, "some detail")
    assert err.render_kube() == "<nil>: Invalid value: null: some detail"
    assert err.cause()["field"] == "<nil>"


def test_too_long_and_too_many_bodies() -> None:
    assert FieldError("a", fe.TOO_LONG, "xyz", "may not be more than 2 bytes").body() == (
        "Too long: may not be more than 2 bytes"
    )
    assert FieldError("a", fe.TOO_MANY, [1, 2, 3], "must have at most 2 items", bad_value=3).body() == (
        "Too many: 3: must have at most 2 items"
    )


def test_invalid_message_for_one_and_several_errors() -> None:
    one = FieldError("spec.rules", fe.REQUIRED, None, "", bad_value="")
    two = FieldError("spec.x", fe.INVALID, 5, "must be even")
    assert kube_invalid_message("PartitioningPlan.infrastructure.silogen.ai", "p", [one]) == (
        'PartitioningPlan.infrastructure.silogen.ai "p" is invalid: spec.rules: Required value'
    )
    assert kube_invalid_message("Plan.x.io", "p", [one, two, one]) == (
        'Plan.x.io "p" is invalid: [spec.rules: Required value, spec.x: Invalid value: 5: must be even]'
    )
    assert kube_invalid_message("Plan.x.io", "p", []) == 'Plan.x.io "p" is invalid'


def test_invalid_status_object() -> None:
    err = FieldError("spec.rules", fe.REQUIRED, None, "", bad_value="")
    status = invalid_status("PartitioningPlan", "infrastructure.silogen.ai", "p", [err])
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.rules"}
    ]


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (123456789.0, "1.23456789e+08"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
    ],
)
def test_go_float_formatting(value: float, printed: str) -> None:
    assert go_float(value) == printed


def test_go_value_rendering() -> None:
    assert go_value(None) == "null"
    assert go_value(True) == "true"
    assert go_value(7) == "7"
    assert go_value('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert go_value({"b": 1, "a": "<x>"}) == '{"a":"\\u003cx\\u003e","b":1}'
    assert go_json([1.0, 1e21, 1e-7]) == "[1,1e+21,1e-7]"
    assert go_quote("é\x01") == '"é\\x01"'


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_round_trips(value: float) -> None:
    assert float(go_float(value)) == value
    assert float(go_json(value)) == value


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_deep_equal_is_reflexive_and_type_strict(value: Any) -> None:
    assert deep_equal(value, value)
    assert not deep_equal(1, 1.0)
    assert not deep_equal(True, 1)

"""CRD schema checks: what kube-apiserver refuses when a CustomResourceDefinition is written."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aiplane.api.crdgen import all_crds
from aiplane.schema.structural import structural_errors

P = "spec.validation.openAPIV3Schema"
S = f"{P}.properties[spec]"


def _root(**spec_props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": spec_props},
        },
    }


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["metadata"]["name"])
def test_generated_crds_are_accepted(crd: dict[str, Any]) -> None:
    for i, version in enumerate(crd["spec"]["versions"]):
        assert (
            structural_errors(
                version["schema"]["openAPIV3Schema"], path=f"spec.versions[{i}].schema.openAPIV3Schema"
            )
            == []
        )


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"x": {}}, f"{S}.properties[x].type: Required value: must not be empty for specified object fields"),
        ({"x": {"type": "array"}}, f"{S}.properties[x].items: Required value: must be specified"),
        (
            {"x": {"type": "array", "items": {}}},
            f"{S}.properties[x].items.type: Required value: must not be empty for specified array items",
        ),
        ({"x": {"$ref": "#/definitions/y"}}, f"{S}.properties[x].$ref: Forbidden: $ref is not supported"),
        (
            {
                "x": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                }
            },
            f"{S}.properties[x].additionalProperties: Forbidden: additionalProperties and properties are "
            "mutual exclusive",
        ),
        (
            {"x": {"type": "object", "additionalProperties": False}},
            f"{S}.properties[x].additionalProperties: Forbidden: additionalProperties cannot be set to false",
        ),
        (
            {"x": {"type": "string", "anyOf": [{"pattern": "a", "description": "d"}]}},
            f"{S}.properties[x].anyOf[0].description: Forbidden: must be empty to be structural",
        ),
        (
            {"x": {"type": "string", "allOf": [{"type": "string"}]}},
            f"{S}.properties[x].allOf[0].type: Forbidden: must be empty to be structural",
        ),
        (
            {"x": {"type": "string", "anyOf": [{"x-kubernetes-validations": [{"rule": "true"}]}]}},
            f"{S}.properties[x].anyOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural",
        ),
        (
            {"x": {"type": "string", "x-kubernetes-list-type": "set"}},
            f'{S}.properties[x].type: Invalid value: "string": must be array if x-kubernetes-list-type is '
            "specified",
        ),
        (
            {"x": {"type": "array", "items": {"type": "string"}, "x-kubernetes-map-type": "atomic"}},
            f'{S}.properties[x].type: Invalid value: "array": must be object if x-kubernetes-map-type is '
            "specified",
        ),
        (
            {"x": {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"}},
            f"{S}.properties[x].x-kubernetes-list-map-keys: Required value: must not be empty if "
            "x-kubernetes-list-type is map",
        ),
        (
            {
                "x": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                }
            },
            f"{S}.properties[x].items.properties[k].default: Required value: this property is in "
            "x-kubernetes-list-map-keys, so it must have a default or be a required property",
        ),
        (
            {
                "x": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                }
            },
            f'{S}.properties[x].items.type: Invalid value: "string": must be object if parent array\'s '
            "x-kubernetes-list-type is map",
        ),
        (
            {"x": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
            f"{S}.properties[x].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
            "complexity becomes quadratic",
        ),
        (
            {"x": {"type": "string", "x-kubernetes-preserve-unknown-fields": False}},
            f"{S}.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or "
            "undefined",
        ),
        (
            {"x": {"type": "string", "x-kubernetes-validations": [{"rule": ""}]}},
            f"{S}.properties[x].x-kubernetes-validations[0].rule: Required value: rule is not specified",
        ),
        (
            {
                "x": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self.b == 'x'"}],
                }
            },
            f"{S}.properties[x].x-kubernetes-validations[0].rule: "
            """Invalid value: {"rule":"self.b == 'x'"}: """
            "compilation failed: ERROR: <input>:1:6: undefined field 'b'",
        ),
        (
            {
                "x": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self == 'a'", "reason": "Nope"}],
                }
            },
            f'{S}.properties[x].x-kubernetes-validations[0].reason: Unsupported value: "Nope": supported '
            "values: "
            '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
        ),
        (
            {
                "x": {
                    "type": "array",
                    "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
                }
            },
            f'{S}.properties[x].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": '
            "oldSelf "
            f"cannot be used on the uncorrelatable portion of the schema within {S}.properties[x].items",
        ),
        (
            {"x": {"type": "object", "x-kubernetes-embedded-resource": True}},
            f"{S}.properties[x].properties: Required value: must not be empty if "
            "x-kubernetes-embedded-resource is "
            "true without x-kubernetes-preserve-unknown-fields",
        ),
        (
            {"x": {"type": "integer", "minimum": 1, "default": 0}},
            f"{S}.properties[x].default: Invalid value: 0:  in body should be greater than or equal to 1",
        ),
        (
            {"x": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "1", "b": 2}}},
            f'{S}.properties[x].default: Invalid value: {{"a":"1","b":2}}: must not have unknown fields',
        ),
    ],
)
def test_rejected_constructs(props: dict[str, Any], expected: str) -> None:
    assert expected in structural_errors(_root(**props))


def test_bad_rule_syntax_is_reported() -> None:
    (msg,) = structural_errors(_root(x={"type": "string", "x-kubernetes-validations": [{"rule": "self =="}]}))
    assert msg.startswith(
        f'{S}.properties[x].x-kubernetes-validations[0].rule: Invalid value: {{"rule":"self =="}}: '
    )
    assert "compilation failed: ERROR: <input>:1:" in msg


def test_int_or_string_forms_are_allowed() -> None:
    any_of = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    all_of = {
        "x-kubernetes-int-or-string": True,
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^a"}],
    }
    bare = {"x-kubernetes-int-or-string": True}
    assert structural_errors(_root(a=any_of, b=all_of, c=bare)) == []
    wrong = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert f"{S}.properties[w].anyOf[0].type: Forbidden: must be empty to be structural" in structural_errors(
        _root(w=wrong)
    )


def test_root_constraints() -> None:
    schema = _root()
    schema["properties"]["metadata"] = {"type": "object", "properties": {"labels": {"type": "object"}}}
    schema["properties"]["kind"] = {"type": "integer"}
    schema["nullable"] = True
    assert structural_errors(schema) == [
        f"{P}.nullable: Forbidden: nullable cannot be true at the root",
        # structural errors come sorted, as kube sorts them
        f'{P}.properties[kind].type: Invalid value: "integer": must be string',
        f"{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
        "but "
        "metadata is implicitly specified",
    ]
    only_name = _root()
    only_name["properties"]["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}},
    }
    assert structural_errors(only_name) == []
    defaulted = _root()
    defaulted["properties"]["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string", "default": "x"}},
    }
    assert structural_errors(defaulted) == [
        f"{P}.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"
    ]


def test_defaults_are_only_checked_on_structural_schemas() -> None:
    schema = _root(x={"type": "integer", "minimum": 1, "default": 0}, y={})
    assert structural_errors(schema) == [
        f"{S}.properties[y].type: Required value: must not be empty for specified object fields"
    ]


def test_schema_is_not_modified() -> None:
    schema = _root(
        x={"type": "integer", "default": 1}, m={"type": "object", "properties": {"a": {"type": "string"}}}
    )
    before = copy.deepcopy(schema)
    structural_errors(schema)
    assert schema == before

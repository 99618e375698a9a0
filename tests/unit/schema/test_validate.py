"""OpenAPI, embedded-resource and list-type validation with kube-apiserver's semantics."""

from __future__ import annotations

from typing import Any

import pytest

from aiplane.apimachinery import builtin
from aiplane.apimachinery import field as fe
from aiplane.schema.validate import RULES_SKIPPED, admit, validate
from tests.unit.schema.helpers import plan


def _spec_schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}


def _kube(obj: Any, schema: dict[str, Any], **kw: Any) -> list[str]:
    return [e.render_kube() for e in validate(obj, schema, **kw)]


def test_valid_plan_has_no_errors(schema: dict[str, Any]) -> None:
    assert validate(plan(), schema) == []


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        (3, []),
        (3.0, []),  # an integral float is an integer for kube (JSON decodes 3.0 as float64)
        (3.5, ['spec.n: Invalid value: "number": spec.n in body must be of type integer: "number"']),
        (True, ['spec.n: Invalid value: "boolean": spec.n in body must be of type integer: "boolean"']),
        (2**64, ['spec.n: Invalid value: "number": spec.n in body must be of type integer: "number"']),
    ],
)
def test_integer_type(value: Any, errors: list[str]) -> None:
    assert _kube({"spec": {"n": value}}, _spec_schema(n={"type": "integer"})) == errors


def test_number_accepts_integers() -> None:
    assert _kube({"spec": {"x": 2}}, _spec_schema(x={"type": "number", "minimum": 0.5})) == []


def test_int_or_string_rejects_other_types_like_kube() -> None:
    schema = _spec_schema(port=builtin.int_or_string_schema())
    assert _kube({"spec": {"port": 8080}}, schema) == []
    assert _kube({"spec": {"port": "http"}}, schema) == []
    assert _kube({"spec": {"port": True}}, schema) == [
        'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
        '<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)',
        'spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean"',
    ]


def test_quantity_pattern_only_applies_to_strings() -> None:
    schema = _spec_schema(q=builtin.quantity_schema())
    assert _kube({"spec": {"q": 4}}, schema) == []
    assert _kube({"spec": {"q": "64Gi"}}, schema) == []
    errs = validate({"spec": {"q": "64GB"}}, schema)
    assert [e.keyword for e in errs] == ["pattern"]


def test_string_length_counts_characters_and_reports_one_error() -> None:
    schema = _spec_schema(s={"type": "string", "maxLength": 3, "minLength": 2, "pattern": "^a"})
    assert _kube({"spec": {"s": "aää"}}, schema) == [], "three characters, five bytes"
    assert _kube({"spec": {"s": "abcd"}}, schema) == ["spec.s: Too long: may not be more than 3 bytes"]
    assert _kube({"spec": {"s": "b"}}, schema) == [
        'spec.s: Invalid value: "b": spec.s in body should be at least 2 chars long'
    ]
    assert _kube({"spec": {"s": "bc"}}, schema) == [
        "spec.s: Invalid value: \"bc\": spec.s in body should match '^a'"
    ]


def test_bounds() -> None:
    schema = _spec_schema(
        i={"type": "integer", "minimum": 1, "maximum": 10, "exclusiveMaximum": True},
        f={"type": "number", "minimum": 0.5, "exclusiveMinimum": True, "multipleOf": 0.25},
        m={"type": "integer", "multipleOf": 3},
    )
    # kube-openapi walks properties in Go map order, so only the set of errors is meaningful.
    assert sorted(_kube({"spec": {"i": 10, "f": 0.5, "m": 7}}, schema)) == [
        "spec.f: Invalid value: 0.5: spec.f in body should be greater than 0.5",
        "spec.i: Invalid value: 10: spec.i in body should be less than 10",
        "spec.m: Invalid value: 7: spec.m in body should be a multiple of 3",
    ]
    assert sorted(_kube({"spec": {"i": 0, "f": 0.6}}, schema)) == [
        "spec.f: Invalid value: 0.6: spec.f in body should be a multiple of 0.25",
        "spec.i: Invalid value: 0: spec.i in body should be greater than or equal to 1",
    ]


def test_item_and_property_counts() -> None:
    schema = _spec_schema(
        l={"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
        o={
            "type": "object",
            "maxProperties": 1,
            "required": ["a"],
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        },
    )
    errs = validate({"spec": {"l": [], "o": {"a": 1, "b": "x"}}}, schema)
    assert [e.render_kube() for e in errs] == [
        "spec.l: Invalid value: 0: spec.l in body should have at least 1 items",
        "spec.o: Too many: 2: must have at most 1 item",
    ], "maxProperties stops the object's other checks, as in kube-openapi"
    assert _kube({"spec": {"l": [1, 2, 3]}}, schema) == ["spec.l: Too many: 3: must have at most 2 items"]
    assert [e.type for e in validate({"spec": {"o": {}}}, schema)] == [fe.REQUIRED]


def test_formats_that_kube_checks_and_ignores() -> None:
    schema = _spec_schema(
        t={"type": "string", "format": "date-time"},
        u={"type": "string", "format": "uuid"},
        i={"type": "integer", "format": "int32"},
        b={"type": "string", "format": "byte"},
    )
    ok = {"t": "2024-05-01T12:00:00Z", "u": "0b8f9b0e-9d9b-4c2e-8a39-4c27a7f5f1e2", "i": 2**40, "b": "aGk="}
    assert _kube({"spec": ok}, schema) == [], "int32 is not a format kube validates"
    bad = {"t": "yesterday", "u": "nope", "b": "not base64!"}
    assert sorted(_kube({"spec": bad}, schema)) == [
        'spec.b: Invalid value: "not base64!": spec.b in body must be of type byte: "not base64!"',
        'spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: "yesterday"',
        'spec.u: Invalid value: "nope": spec.u in body must be of type uuid: "nope"',
    ]


def test_nullable() -> None:
    schema = _spec_schema(
        l={"type": "array", "items": {"type": "string", "nullable": True}}, s={"type": "string"}
    )
    assert _kube({"spec": {"l": [None, "a"]}}, schema) == []
    assert _kube({"spec": {"s": None}}, schema) == [
        'spec.s: Invalid value: "null": spec.s in body must be of type string: "null"'
    ]


def test_map_keys_are_bracketed_in_paths_but_dotted_in_kube_messages() -> None:
    schema = _spec_schema(labels={"type": "object", "additionalProperties": {"type": "string"}})
    (err,) = validate({"spec": {"labels": {"app": 1}}}, schema)
    assert err.path == "spec.labels[app]"
    assert err.render() == "spec.labels[app]: 1 is not of type string"
    assert err.render_kube() == (
        'spec.labels.app: Invalid value: "integer": spec.labels.app in body must be of type string: "integer"'
    )
    assert err.cause()["field"] == "spec.labels.app"


def test_list_type_set_and_map_duplicates() -> None:
    schema = _spec_schema(
        tags={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        ports={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {
                "type": "object",
                "required": ["port"],
                "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}},
            },
        },
    )
    obj = {"spec": {"tags": ["a", "b", "a", "a"], "ports": [{"port": 80}, {"port": 80, "protocol": "TCP"}]}}
    result, _, errs = admit(obj, schema)
    assert result["spec"]["ports"] == [{"port": 80, "protocol": "TCP"}] * 2
    assert [(e.type, e.render_kube()) for e in errs] == [
        (fe.DUPLICATE, 'spec.tags[2]: Duplicate value: "a"'),
        (fe.DUPLICATE, 'spec.ports[1]: Duplicate value: {"port":80,"protocol":"TCP"}'),
    ]
    assert errs[1].render() == 'spec.ports[1]: duplicate entry for key {"port": 80, "protocol": "TCP"}'
    assert (
        _kube(
            {"spec": {"tags": [1, 1.5, True, "1"]}},
            _spec_schema(tags={**schema["properties"]["spec"]["properties"]["tags"], "items": {}}),
        )
        == []
    )


def test_list_map_items_must_be_objects() -> None:
    schema = _spec_schema(
        l={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "items": {}}
    )
    assert _kube({"spec": {"l": [{"k": "a"}, "x"]}}, schema) == [
        'spec.l[1]: Invalid value: "x": must be an object for an array of list-type map'
    ]


def test_embedded_resources_need_type_meta() -> None:
    schema = _spec_schema(
        template={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        }
    )
    assert _kube({"spec": {"template": {"apiVersion": "v1", "kind": "Pod"}}}, schema) == []
    assert _kube({"spec": {"template": {"apiVersion": "a/b/c", "kind": 3}}}, schema) == [
        'spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        "spec.template.kind: Invalid value: 3: must be a string",
    ]
    assert [e.path for e in validate({"spec": {"template": {}}}, schema)] == [
        "spec.template.apiVersion",
        "spec.template.kind",
    ]


def test_blocking_errors_skip_cel_rules(schema: dict[str, Any]) -> None:
    obj = plan()
    obj["spec"]["dryRun"] = "yes"
    errs = validate(obj, schema, old=plan())
    assert errs[-1].render_kube() == f"<nil>: Invalid value: null: {RULES_SKIPPED}"
    assert errs[0].type == fe.TYPE_INVALID


def test_ratcheting_forgives_unchanged_invalid_values(schema: dict[str, Any]) -> None:
    stored = plan()
    stored["spec"]["rollout"] = {"maxParallel": 0}
    changed_elsewhere = plan()
    changed_elsewhere["spec"]["rollout"] = {"maxParallel": 0}
    changed_elsewhere["spec"]["paused"] = True
    assert validate(changed_elsewhere, schema, old=stored) == []
    assert len(validate(changed_elsewhere, schema, old=stored, ratcheting=False)) == 1
    assert len(validate(changed_elsewhere, schema)) == 1, "a create is never ratcheted"
    touched = plan()
    touched["spec"]["rollout"] = {"maxParallel": -1}
    assert [e.path for e in validate(touched, schema, old=stored)] == ["spec.rollout.maxParallel"]


def test_ratcheting_does_not_correlate_atomic_list_items() -> None:
    schema = _spec_schema(
        l={
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        }
    )
    old = {"spec": {"l": [{"n": 0}, {"n": 5}]}}
    new = {"spec": {"l": [{"n": 0}, {"n": 6}]}}
    assert [e.path for e in validate(new, schema, old=old)] == ["spec.l[0].n"]
    assert validate({"spec": {"l": [{"n": 0}, {"n": 5}], "x": 1}}, schema, old=old) == []


def test_validate_does_not_modify_the_object(schema: dict[str, Any]) -> None:
    obj = plan()
    obj["spec"]["unknown"] = None
    before = repr(obj)
    validate(obj, schema)
    assert repr(obj) == before


def test_admit_prunes_defaults_and_validates(schema: dict[str, Any]) -> None:
    obj = plan()
    obj["spec"]["rollout"] = {"maxParalel": 4}
    result, pruned, errs = admit(obj, schema)
    assert pruned == ["spec.rollout.maxParalel"]
    assert result["spec"]["rollout"] == {"maxParallel": 1, "maxUnavailable": 1, "excludeControlPlane": True}
    assert errs == []
    assert obj["spec"]["rollout"] == {"maxParalel": 4}, "admit works on a copy"


def test_enum_matching_converts_numbers_like_go() -> None:
    schema = _spec_schema(e={"type": "number", "enum": [1, 2.5]})
    assert _kube({"spec": {"e": 1.0}}, schema) == []
    assert _kube({"spec": {"e": 3}}, schema) == ['spec.e: Unsupported value: 3: supported values: "1", "2.5"']

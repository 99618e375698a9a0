"""Invariants of the admission pipeline, checked on generated objects."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aiplane.apimachinery import builtin
from aiplane.schema.defaults import apply_defaults
from aiplane.schema.prune import prune
from aiplane.schema.validate import admit, validate, validate_builtin
from tests.unit.schema.helpers import PLAN_API_VERSION, plan_schema

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.text(max_size=3)
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=3), c, max_size=2),
    max_leaves=4,
)
UNKNOWN = st.dictionaries(st.sampled_from(["zz", "typo", "extra"]), JSON, max_size=1)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def values(schema: Mapping[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Mostly well-typed values for ``schema``, with unknown fields and the odd wrong value mixed in."""
    if depth > 6:
        return st.just({}) if schema.get("type") == "object" else JSON_SCALARS
    t = schema.get("type")
    wrong = JSON_SCALARS
    if "enum" in schema:
        right: st.SearchStrategy[Any] = st.sampled_from(list(schema["enum"]))
    elif schema.get("x-kubernetes-int-or-string"):
        right = st.integers(0, 5) | st.sampled_from(["1", "500m", "2Gi", "x"])
    elif t == "object":
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            right = st.dictionaries(st.text("abc", max_size=2), values(additional, depth + 1), max_size=2)
        else:
            required = set(schema.get("required") or [])
            known = st.fixed_dictionaries(
                {k: values(v, depth + 1) for k, v in props.items() if k in required},
                optional={k: values(v, depth + 1) for k, v in props.items() if k not in required},
            )
            right = st.builds(lambda a, b: {**b, **a}, known, UNKNOWN)
    elif t == "array":
        items = schema.get("items") or {}
        right = st.lists(values(items, depth + 1), max_size=2)
    elif t == "integer":
        right = st.integers(-1, 3)
    elif t == "number":
        right = st.floats(-2, 2, allow_nan=False)
    elif t == "boolean":
        right = st.booleans()
    elif t == "string":
        right = st.text("abc-_1", max_size=4) | st.just("2024-01-01T00:00:00Z")
    else:
        right = JSON
    return st.one_of(*([right] * 12), wrong) if depth > 0 else right


PLAN = plan_schema()
PLAN_OBJECTS = st.builds(
    lambda spec, status, meta: {
        "apiVersion": PLAN_API_VERSION,
        "kind": "PartitioningPlan",
        "metadata": meta,
        "spec": spec,
        **({"status": status} if status is not None else {}),
    },
    values(PLAN["properties"]["spec"]),
    st.none() | values(PLAN["properties"]["status"]),
    st.fixed_dictionaries(
        {"name": st.just("p")}, optional={"labels": st.dictionaries(st.text(max_size=2), st.text(max_size=2))}
    ),
)

CONTAINER = "io.k8s.api.core.v1.Container"
CONTAINER_SCHEMA = builtin.structural(CONTAINER)
CONTAINERS = values(
    {
        "type": "object",
        "properties": {
            k: CONTAINER_SCHEMA["properties"][k]
            for k in ("name", "image", "ports", "env", "resources", "args")
        },
    }
)


@SETTINGS
@given(PLAN_OBJECTS)
def test_pruning_twice_prunes_nothing_more(obj: dict[str, Any]) -> None:
    first = copy.deepcopy(obj)
    prune(first, PLAN)
    again = copy.deepcopy(first)
    assert prune(again, PLAN) == []
    assert again == first
    assert again["metadata"] == obj["metadata"]


@SETTINGS
@given(CONTAINERS)
def test_pruned_values_have_no_unknown_fields(value: dict[str, Any]) -> None:
    pruned = copy.deepcopy(value)
    removed = prune(pruned, CONTAINER_SCHEMA, root=False)
    unknown = [e for e in validate_builtin(value, CONTAINER) if e.keyword == "unknown"]
    assert sorted(e.path for e in unknown) == removed
    assert not [e for e in validate_builtin(pruned, CONTAINER) if e.keyword == "unknown"]


@SETTINGS
@given(PLAN_OBJECTS)
def test_defaulting_is_idempotent(obj: dict[str, Any]) -> None:
    prune(obj, PLAN)
    apply_defaults(obj, PLAN)
    once = copy.deepcopy(obj)
    apply_defaults(obj, PLAN)
    assert obj == once


@SETTINGS
@given(PLAN_OBJECTS)
def test_admitting_an_admitted_object_is_a_no_op(obj: dict[str, Any]) -> None:
    admitted, _, errors = admit(obj, PLAN)
    again, pruned, errors_again = admit(admitted, PLAN)
    assert again == admitted
    assert pruned == []
    assert [e.render_kube() for e in errors_again] == [e.render_kube() for e in errors]


@SETTINGS
@given(PLAN_OBJECTS)
def test_an_unchanged_update_is_always_accepted(obj: dict[str, Any]) -> None:
    """Ratcheting: whatever the stored object is, writing it back unchanged passes the schema.

    "Stored" excludes list-map items with duplicate keys: kube-apiserver never stores those, and it
    correlates such an item with the *first* item of its key (MapList), so it is not ratcheted
    (see the test below)."""
    admitted, _, created = admit(obj, PLAN)
    assume(not any(e.type == "FieldValueDuplicate" for e in created))
    errs = validate(admitted, PLAN, old=copy.deepcopy(admitted))
    assert [e for e in errs if e.keyword != "x-kubernetes-validations"] == []


def test_a_duplicate_list_map_item_is_correlated_with_the_first_of_its_key() -> None:
    """kube's MapList keys each item by its first occurrence: the second ``type: ""`` condition is
    compared with the first one, differs from it, and so its missing ``status`` is not ratcheted."""
    obj = {
        "apiVersion": PLAN_API_VERSION,
        "kind": "PartitioningPlan",
        "metadata": {"name": "p"},
        "spec": {"rules": []},
        "status": {
            "conditions": [
                {"lastTransitionTime": "", "message": "", "reason": "", "status": "", "type": ""},
                {"lastTransitionTime": "", "message": "", "reason": "r", "status": None, "type": ""},
            ]
        },
    }
    admitted, _, _ = admit(obj, PLAN)
    errs = validate(admitted, PLAN, old=copy.deepcopy(admitted))
    assert [(e.path, e.type) for e in errs if e.keyword == "required"] == [
        ("status.conditions[1].status", "FieldValueRequired")
    ]


@SETTINGS
@given(PLAN_OBJECTS)
def test_every_error_renders(obj: dict[str, Any]) -> None:
    _, _, errors = admit(obj, PLAN)
    for err in errors:
        assert err.render().startswith(err.path) if err.path else err.render()
        # kube names a map value by its schema path ("matchLabels." + key, so "matchLabels." for an
        # empty key) where our path says "matchLabels[<key>]": kube_field carries kube's form.
        assert err.render_kube().startswith(err.kube_field or err.path or "<nil>")
        assert err.cause()["message"] in err.render_kube()


@SETTINGS
@given(st.sampled_from([None, True, False]), st.sampled_from([None, True, False]), st.booleans())
def test_dry_run_rule_matches_its_meaning(old: bool | None, new: bool | None, paused: bool) -> None:
    """dryRun may be set on create and kept, but never turned on again once off (or absent)."""

    def obj(dry_run: bool | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"rules": [{"selector": {}, "profileRef": {"name": "p"}}], "paused": paused}
        if dry_run is not None:
            spec["dryRun"] = dry_run
        return {
            "apiVersion": PLAN_API_VERSION,
            "kind": "PartitioningPlan",
            "metadata": {"name": "p"},
            "spec": spec,
        }

    stored, _, created = admit(obj(old), PLAN)
    assert created == []
    _, _, errors = admit(obj(new), PLAN, old=stored)
    rejected = new is True and old is not True
    assert [e.path for e in errors] == (["spec"] if rejected else [])

"""Pruning and defaulting, with kube-apiserver's rules for what goes and what is filled in."""

from __future__ import annotations

import copy
from typing import Any

from aiplane.apimachinery import builtin
from aiplane.schema.defaults import apply_defaults
from aiplane.schema.prune import prune, prune_with_field_paths
from tests.unit.schema.helpers import plan

MAP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "things": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
                "open": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}},
                },
                "list": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
                "nullableField": {"type": "string", "nullable": True},
                "plain": {"type": "string"},
                "defaulted": {"type": "string", "default": "d"},
            },
        }
    },
}


def test_unknown_fields_are_removed_and_reported(schema: dict[str, Any]) -> None:
    obj = plan()
    obj["spec"]["maxParalel"] = 3
    obj["spec"]["rules"][0]["profileRef"]["nmae"] = "typo"
    obj["extra"] = 1
    pruned = prune(obj, schema)
    assert pruned == ["extra", "spec.maxParalel", "spec.rules[0].profileRef.nmae"]
    assert obj == plan()


def test_metadata_at_the_root_is_never_pruned(schema: dict[str, Any]) -> None:
    obj = plan()
    obj["metadata"] = {"name": "x", "labels": {"a": "b"}, "whatever": {"deep": None}}
    assert prune(obj, schema) == []
    assert obj["metadata"] == {"name": "x", "labels": {"a": "b"}, "whatever": {"deep": None}}


def test_maps_preserve_unknown_and_embedded_resources() -> None:
    obj: dict[str, Any] = {
        "spec": {
            "labels": {"any": "thing"},
            "things": {"k": {"a": "1", "b": "2"}},
            "open": {"free": {"x": 1}, "known": {"a": "1", "b": 2}},
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "bogus": 1},
                "spec": {"x": "1", "y": 2},
                "status": {},
            },
            "list": [{"a": "1", "b": 1}, {"c": 3}],
        }
    }
    pruned = prune(obj, MAP_SCHEMA)
    assert pruned == [
        "spec.list[0].b",
        "spec.list[1].c",
        "spec.open.known.b",
        "spec.template.metadata.bogus",
        "spec.template.spec.y",
        "spec.template.status",
        "spec.things.k.b",
    ]
    assert obj["spec"]["labels"] == {"any": "thing"}
    assert obj["spec"]["open"] == {"free": {"x": 1}, "known": {"a": "1"}}
    assert obj["spec"]["template"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"x": "1"},
    }


def test_pruned_paths_in_kube_and_field_notation() -> None:
    obj: dict[str, Any] = {"spec": {"things": {"k": {"a": "1", "b": "2"}}}}
    assert prune_with_field_paths(obj, MAP_SCHEMA) == [("spec.things.k.b", "spec.things[k].b")]


def test_nulls_are_dropped_unless_nullable_or_defaulted() -> None:
    obj: dict[str, Any] = {
        "spec": {"plain": None, "nullableField": None, "defaulted": None, "labels": {"a": None}}
    }
    assert prune(obj, MAP_SCHEMA) == []
    assert obj == {"spec": {"nullableField": None, "defaulted": None, "labels": {}}}
    apply_defaults(obj, MAP_SCHEMA)
    assert obj["spec"]["defaulted"] == "d"
    assert obj["spec"]["nullableField"] is None


def test_defaults_fill_absent_fields_of_existing_objects(schema: dict[str, Any]) -> None:
    obj = plan()
    apply_defaults(obj, schema)
    assert "rollout" not in obj["spec"], "no default for the parent: the block stays absent"
    obj["spec"]["rollout"] = {}
    apply_defaults(obj, schema)
    assert obj["spec"]["rollout"] == {"maxParallel": 1, "maxUnavailable": 1, "excludeControlPlane": True}


def test_defaults_inside_defaults_and_lists() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "never"}}},
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "mode": {"type": "string", "default": "fast"},
                    "inner": {
                        "type": "object",
                        "default": {"a": 1},
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
                    },
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"p": {"type": "string", "default": "TCP"}},
                        },
                    },
                    "byName": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {"on": {"type": "boolean", "default": True}},
                        },
                    },
                },
            },
        },
    }
    obj: dict[str, Any] = {"metadata": {}, "spec": None}
    apply_defaults(obj, schema)
    assert obj["metadata"] == {}, "root metadata is never defaulted"
    assert obj["spec"] == {"mode": "fast", "inner": {"a": 1, "b": 2}}
    obj["spec"]["items"] = [{}, {"p": "UDP"}]
    obj["spec"]["byName"] = {"x": {}}
    apply_defaults(obj, schema)
    assert obj["spec"]["items"] == [{"p": "TCP"}, {"p": "UDP"}]
    assert obj["spec"]["byName"] == {"x": {"on": True}}


def test_defaults_are_copies(schema: dict[str, Any]) -> None:
    schema_copy = copy.deepcopy(schema)
    obj = plan()
    obj["spec"]["rollout"] = {}
    apply_defaults(obj, schema)
    obj["spec"]["rollout"]["maxParallel"] = 99
    assert schema == schema_copy


def test_pod_ports_get_tcp_by_default() -> None:
    pod_spec = builtin.structural("io.k8s.api.core.v1.PodSpec")
    value: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}
    apply_defaults(value, pod_spec, root=False)
    assert value["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]

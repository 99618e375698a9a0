"""Built-in Kubernetes types (PodSpec & co.) validated against their structural schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from aiplane.api.base import PodSpec
from aiplane.apimachinery import builtin
from aiplane.apimachinery import field as fe
from aiplane.schema.defaults import apply_defaults
from aiplane.schema.prune import prune
from aiplane.schema.validate import validate, validate_builtin

POD_SPEC = "io.k8s.api.core.v1.PodSpec"


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"containers": list(containers) or [{"name": "main", "image": "vllm:latest"}]}


def test_valid_pod_spec() -> None:
    assert validate_builtin(_pod(), POD_SPEC) == []


def test_unknown_container_field_is_reported_without_touching_the_value() -> None:
    value = _pod({"name": "main", "image": "vllm", "imagePullPolcy": "Always"})
    before = copy.deepcopy(value)
    errs = validate_builtin(value, POD_SPEC)
    assert value == before
    assert [(e.path, e.type, e.render()) for e in errs] == [
        ("containers[0].imagePullPolcy", fe.FORBIDDEN, "containers[0].imagePullPolcy: unknown field")
    ]


def test_ports_default_to_tcp() -> None:
    schema = builtin.structural(POD_SPEC)
    value = _pod({"name": "main", "image": "x", "ports": [{"containerPort": 8000, "name": "http"}]})
    apply_defaults(value, schema, root=False)
    assert value["containers"][0]["ports"] == [{"containerPort": 8000, "name": "http", "protocol": "TCP"}]
    assert (
        validate_builtin(_pod({"name": "m", "image": "x", "ports": [{"containerPort": 80}]}), POD_SPEC) == []
    )


def test_duplicate_container_names() -> None:
    errs = validate_builtin(_pod({"name": "a", "image": "x"}, {"name": "a", "image": "y"}), POD_SPEC)
    assert [(e.type, e.render_kube()) for e in errs] == [
        (fe.DUPLICATE, 'containers[1]: Duplicate value: {"name":"a"}')
    ]


def test_duplicate_ports_after_defaulting() -> None:
    ports = [{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}]
    errs = validate_builtin(_pod({"name": "a", "image": "x", "ports": ports}), POD_SPEC)
    assert [e.path for e in errs] == ["containers[0].ports[1]"]


def test_types_and_required_fields() -> None:
    errs = validate_builtin(
        {"containers": [{"image": "x", "resources": {"limits": {"cpu": "lots"}}}]}, POD_SPEC
    )
    kube = sorted(e.render_kube() for e in errs)
    assert "containers[0].name: Required value" in kube
    assert any(m.startswith('containers[0].resources.limits.cpu: Invalid value: "lots"') for m in kube)


def test_pod_spec_inside_a_resource_keeps_full_paths() -> None:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"template": builtin.structural(POD_SPEC)}}},
    }
    obj: dict[str, Any] = {"spec": {"template": {"containers": [{"image": "x"}]}}}
    assert [e.render_kube() for e in validate(obj, schema)] == [
        "spec.template.containers[0].name: Required value"
    ]
    obj["spec"]["template"]["containers"][0]["bogus"] = 1
    assert prune(obj, schema) == ["spec.template.containers[0].bogus"]


def test_repeated_validation_builds_the_schema_once() -> None:
    """Each definition's structural schema is built once and reused (a count, not a timing: the
    machines are shared)."""
    from aiplane.schema import validate as validate_module

    value = _pod()
    validate_builtin(value, POD_SPEC)
    before = validate_module._builtin_schema.cache_info()
    for _ in range(50):
        validate_builtin(value, POD_SPEC)
    after = validate_module._builtin_schema.cache_info()
    assert after.misses == before.misses
    assert after.hits - before.hits == 50


def test_pydantic_models_use_it() -> None:
    adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(PodSpec)
    assert adapter.validate_python(_pod()) == _pod()
    with pytest.raises(ValidationError, match=r"containers\[0\]\.imagePullPolcy: unknown field"):
        adapter.validate_python(_pod({"name": "a", "image": "x", "imagePullPolcy": "Always"}))

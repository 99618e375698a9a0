"""PATCH in the embedded API server: content types, decoding errors, JSON merge patch, JSON patch and
strategic merge patch, with kube-apiserver's codes and messages (the verbs are driven through
:func:`aiplane.sim.apiserver.patch.patch` on an :class:`Api`, without HTTP)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery import mergepatch
from aiplane.sim.apiserver import apply as ssa
from aiplane.sim.apiserver import gojson, json_patch, strategic
from aiplane.sim.apiserver import patch as p
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import Api, Result, WriteOptions
from aiplane.sim.apiserver.store import Store

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# A custom resource exercising every list and map type server-side apply distinguishes.
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer"},
                                    "description": {"type": "string"},
                                    "items": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "size": {"type": "integer"},
                                                "color": {"type": "string"},
                                            },
                                        },
                                    },
                                    "tags": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "set",
                                        "items": {"type": "string"},
                                    },
                                    "args": {"type": "array", "items": {"type": "string"}},
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "selector": {
                                        "type": "object",
                                        "x-kubernetes-map-type": "atomic",
                                        "properties": {"app": {"type": "string"}, "tier": {"type": "string"}},
                                    },
                                    "config": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"ready": {"type": "integer"}, "phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def make_api() -> Api:
    """An API with the field manager installed, namespace ``default`` and the Widget CRD."""
    api = Api(Store(), Registry(), clock=lambda: NOW)
    ssa.install(api)
    api.create(api.resource("v1", "Namespace"), None, {"metadata": {"name": "default"}})
    api.create(
        api.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), None, copy.deepcopy(WIDGET_CRD)
    )
    return api


@pytest.fixture
def api() -> Api:
    return make_api()


def rt_of(api: Api, api_version: str, kind: str) -> ResourceType:
    return api.resource(api_version, kind)


def do_patch(
    api: Api,
    rt: ResourceType,
    name: str,
    ctype: str,
    body: Any,
    *,
    namespace: str | None = "default",
    subresource: str | None = None,
    **opts: Any,
) -> Result:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return p.patch(api, rt, namespace, name, ctype, raw, WriteOptions(**opts), subresource=subresource)


def fails(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        fn(*args, **kwargs)
    return caught.value


def configmap(
    api: Api, name: str = "cm", data: dict[str, str] | None = None, manager: str = "creator"
) -> dict[str, Any]:
    body = {"metadata": {"name": name}, "data": data if data is not None else {"a": "1"}}
    return api.create(rt_of(api, "v1", "ConfigMap"), "default", body, WriteOptions(field_manager=manager)).obj


def deployment(api: Api, name: str = "web") -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                },
            },
        },
    }
    return api.create(
        rt_of(api, "apps/v1", "Deployment"), "default", body, WriteOptions(field_manager="creator")
    ).obj


def widget(api: Api, name: str = "w", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec if spec is not None else {"replicas": 1, "description": "first"},
    }
    return api.create(
        rt_of(api, "example.com/v1", "Widget"), "default", body, WriteOptions(field_manager="creator")
    ).obj


# --- content types and options ------------------------------------------------------------------


@pytest.mark.parametrize(
    "ctype", ["application/json", "application/yaml", "text/plain", "application/apply-patch+cbor", ""]
)
def test_unknown_patch_types_are_415_listing_the_accepted_ones(api: Api, ctype: str) -> None:
    configmap(api)
    err = fails(do_patch, api, rt_of(api, "v1", "ConfigMap"), "cm", ctype, {})
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")
    assert err.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


def test_strategic_merge_patch_on_a_custom_resource_is_415(api: Api) -> None:
    widget(api)
    err = fails(
        do_patch, api, rt_of(api, "example.com/v1", "Widget"), "w", p.STRATEGIC_MERGE_PATCH, {"spec": {}}
    )
    assert err.code == 415
    assert err.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


def test_content_type_parameters_are_ignored(api: Api) -> None:
    configmap(api)
    result = do_patch(
        api,
        rt_of(api, "v1", "ConfigMap"),
        "cm",
        "application/merge-patch+json; charset=utf-8",
        {"data": {"b": "2"}},
    )
    assert result.obj["data"] == {"a": "1", "b": "2"}


def test_patch_options_are_validated_as_kube_does(api: Api) -> None:
    configmap(api)
    rt = rt_of(api, "v1", "ConfigMap")
    missing = fails(do_patch, api, rt, "cm", p.APPLY_PATCH, {"apiVersion": "v1", "kind": "ConfigMap"})
    assert (missing.code, missing.reason) == (422, "Invalid")
    assert (
        missing.message
        == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    assert missing.status()["details"] == {
        "kind": "PatchOptions",
        "group": "meta.k8s.io",
        "causes": [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch",
                "field": "fieldManager",
            }
        ],
    }
    forced = fails(do_patch, api, rt, "cm", p.MERGE_PATCH, {}, force=True)
    assert (
        forced.message
        == 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )
    long = fails(do_patch, api, rt, "cm", p.MERGE_PATCH, {}, field_manager="m" * 129)
    assert long.code == 422 and "fieldManager: Too long" in long.message
    control = fails(do_patch, api, rt, "cm", p.MERGE_PATCH, {}, field_manager="a\tb")
    assert 'fieldManager: Invalid value: "a\\tb": invalid character U+0009 (at position 1)' in control.message


@pytest.mark.parametrize("ctype", [p.MERGE_PATCH, p.JSON_PATCH, p.STRATEGIC_MERGE_PATCH])
def test_patching_a_missing_object_is_404_before_the_body_is_decoded(api: Api, ctype: str) -> None:
    # kube 1.37 checks that the body is JSON first (validateAndTranscodePatch), then looks the object
    # up, then decodes the body into what the patch type needs.
    rt = rt_of(api, "v1", "ConfigMap")
    err = fails(do_patch, api, rt, "nope", ctype, b'"a string"')
    assert (err.code, err.reason, err.message) == (404, "NotFound", 'configmaps "nope" not found')
    err = fails(do_patch, api, rt, "nope", ctype, b"{not json")
    assert (err.code, err.reason, err.message) == (400, "BadRequest", "invalid JSON patch")


# --- decoding errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "unexpected end of JSON input"),
        (b"   ", "unexpected end of JSON input"),
        (b"{", "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"[1,]", "invalid character ']' looking for beginning of value"),
        (b"1 2", "invalid character '2' after top-level value"),
        (b"01", "invalid character '1' after top-level value"),
        (b"-a", "invalid character 'a' in numeric literal"),
        (b"1.a", "invalid character 'a' after decimal point in numeric literal"),
        (b"1ea", "invalid character 'a' in exponent of numeric literal"),
        (b"1.", "unexpected end of JSON input"),
        (b"trux", "invalid character 'x' in literal true (expecting 'e')"),
        (b"nul", "unexpected end of JSON input"),
        (b'"\x01"', "invalid character '\\x01' in string literal"),
        (b'"\\x"', "invalid character 'x' in string escape code"),
        (b'"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"),
        (b"{'a':1}", "invalid character '\\'' looking for beginning of object key string"),
    ],
)
def test_json_syntax_errors_read_like_go(raw: bytes, message: str) -> None:
    with pytest.raises(gojson.GoJSONError) as caught:
        gojson.go_json_decode(raw)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("ctype", "raw", "validation", "code", "message"),
    [
        (p.MERGE_PATCH, b"{", "Warn", 400, "invalid JSON patch"),
        (p.MERGE_PATCH, b"{bad", "Strict", 400, "invalid JSON patch"),
        (p.MERGE_PATCH, b"", "Warn", 400, "invalid JSON patch"),
        (
            p.MERGE_PATCH,
            b"[1]",
            "Warn",
            400,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            p.MERGE_PATCH,
            b'"x"',
            "Warn",
            400,
            "error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}",
        ),
        (p.MERGE_PATCH, b"null", "Warn", 400, "Invalid JSON Patch"),
        (p.MERGE_PATCH, b"3", "Ignore", 400, "Invalid JSON Patch"),
        (
            p.JSON_PATCH,
            b'{"op":"add"}',
            "Warn",
            400,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (
            p.JSON_PATCH,
            b"[1]",
            "Warn",
            400,
            "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp",
        ),
        (
            p.JSON_PATCH,
            b'[{"op":1}]',
            "Warn",
            400,
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
        ),
        (p.JSON_PATCH, b'[{"op":"add"', "Strict", 400, "invalid JSON patch"),
        (
            p.JSON_PATCH,
            b'{"op":"add"}',
            "Ignore",
            400,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            p.JSON_PATCH,
            b'["x"]',
            "Ignore",
            400,
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation",
        ),
        (
            p.STRATEGIC_MERGE_PATCH,
            b"[]",
            "Warn",
            400,
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (p.STRATEGIC_MERGE_PATCH, b"{1:2}", "Ignore", 400, "invalid JSON patch"),
    ],
)
def test_malformed_patch_bodies(
    api: Api, ctype: str, raw: bytes, validation: str, code: int, message: str
) -> None:
    configmap(api)
    err = fails(do_patch, api, rt_of(api, "v1", "ConfigMap"), "cm", ctype, raw, field_validation=validation)
    assert (err.code, err.message) == (code, message)
    assert err.reason == "BadRequest"


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/data/a", "value": "2"}],
        [{"op": "remove", "path": "/data/nope"}],
        [{"op": "add", "path": "/nope/deeper", "value": 1}],
        [{"op": "frobnicate", "path": "/data"}],
        [{"op": "add", "value": 1}],
        [{"op": "replace", "path": "/data/a"}],
        [{"op": "add", "path": "/metadata/finalizers/5", "value": "x"}],
    ],
)
def test_json_patches_that_do_not_apply_are_kubes_generic_422(api: Api, ops: list[dict[str, Any]]) -> None:
    before = configmap(api)
    err = fails(do_patch, api, rt_of(api, "v1", "ConfigMap"), "cm", p.JSON_PATCH, ops)
    assert (err.code, err.reason, err.message) == (422, "Invalid", json_patch.GENERIC_422)
    assert err.status()["details"] == {}
    assert api.get(rt_of(api, "v1", "ConfigMap"), "default", "cm") == before


def test_too_many_json_patch_operations_is_413(api: Api) -> None:
    configmap(api)
    ops = [{"op": "test", "path": "/data/a", "value": "1"}] * (json_patch.MAX_JSON_PATCH_OPERATIONS + 1)
    err = fails(do_patch, api, rt_of(api, "v1", "ConfigMap"), "cm", p.JSON_PATCH, ops)
    assert err.code == 413
    assert (
        err.message
        == "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    )


# --- JSON merge patch ----------------------------------------------------------------------------------

# RFC 7386, appendix A (the cases whose target and result are objects).
RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch_doc", "result"), RFC7386)
def test_merge_patch_rfc7386_examples(
    target: dict[str, Any], patch_doc: dict[str, Any], result: dict[str, Any]
) -> None:
    assert mergepatch.merge_patch(copy.deepcopy(target), patch_doc) == result


_keys = st.sampled_from(["a", "b", "c", "d"])
_scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3))
_json = st.recursive(
    _scalars | st.lists(_scalars, max_size=3),
    lambda children: st.dictionaries(_keys, children, max_size=4),
    max_leaves=12,
)
_objects = st.dictionaries(_keys, _json, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_objects, _objects)
def test_the_merge_patch_of_a_diff_reproduces_the_target(
    original: dict[str, Any], target: dict[str, Any]
) -> None:
    diff = mergepatch.create_merge_patch(original, target)
    assert mergepatch.merge_patch(copy.deepcopy(original), diff) == target


def test_merge_patch_through_the_api(api: Api) -> None:
    configmap(api, data={"a": "1", "b": "2"})
    rt = rt_of(api, "v1", "ConfigMap")
    result = do_patch(
        api,
        rt,
        "cm",
        p.MERGE_PATCH,
        {"data": {"a": None, "c": "3"}, "metadata": {"labels": {"x": "y"}}},
        field_manager="patcher",
    )
    assert result.obj["data"] == {"b": "2", "c": "3"}
    assert result.obj["metadata"]["labels"] == {"x": "y"}
    owners = {e["manager"]: e for e in result.obj["metadata"]["managedFields"]}
    assert owners["creator"]["fieldsV1"] == {"f:data": {".": {}, "f:b": {}}}
    assert owners["patcher"]["fieldsV1"] == {
        "f:data": {"f:c": {}},
        "f:metadata": {"f:labels": {".": {}, "f:x": {}}},
    }


def test_a_patch_setting_a_stale_resource_version_conflicts(api: Api) -> None:
    obj = configmap(api)
    rt = rt_of(api, "v1", "ConfigMap")
    do_patch(api, rt, "cm", p.MERGE_PATCH, {"data": {"b": "2"}})
    err = fails(
        do_patch,
        api,
        rt,
        "cm",
        p.MERGE_PATCH,
        {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}},
    )
    assert (err.code, err.reason) == (409, "Conflict")
    assert (
        err.message
        == 'Operation cannot be fulfilled on configmaps "cm": the object has been modified; please apply your changes to the latest version and try again'
    )


def test_a_patch_of_a_custom_resource_keeps_the_resource_version_unless_it_drops_it(api: Api) -> None:
    widget(api)
    rt = rt_of(api, "example.com/v1", "Widget")
    assert do_patch(api, rt, "w", p.MERGE_PATCH, {"spec": {"replicas": 2}}).obj["spec"]["replicas"] == 2
    err = fails(do_patch, api, rt, "w", p.MERGE_PATCH, {"metadata": {"resourceVersion": None}})
    assert err.code == 422
    assert "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" in err.message


def test_patching_status_changes_only_status(api: Api) -> None:
    deployment(api)
    rt = rt_of(api, "apps/v1", "Deployment")
    result = do_patch(
        api,
        rt,
        "web",
        p.MERGE_PATCH,
        {"spec": {"replicas": 9}, "status": {"replicas": 2}},
        subresource="status",
        field_manager="ctl",
    )
    assert result.obj["spec"]["replicas"] == 1
    assert result.obj["status"]["replicas"] == 2
    entry = next(e for e in result.obj["metadata"]["managedFields"] if e["manager"] == "ctl")
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}
    main = do_patch(api, rt, "web", p.MERGE_PATCH, {"status": {"replicas": 7}})
    assert main.obj["status"]["replicas"] == 2  # the main resource cannot change status


def test_strict_field_validation_rejects_unknown_fields_of_a_patch(api: Api) -> None:
    widget(api)
    rt = rt_of(api, "example.com/v1", "Widget")
    err = fails(do_patch, api, rt, "w", p.MERGE_PATCH, {"spec": {"colour": "red"}}, field_validation="Strict")
    assert (err.code, err.reason) == (422, "Invalid")
    assert err.message.startswith(' "" is invalid: patch: Invalid value: "{')
    assert err.message.endswith('": strict decoding error: unknown field "spec.colour"')
    assert err.status()["details"]["causes"][0]["field"] == "patch"
    warned = do_patch(api, rt, "w", p.MERGE_PATCH, {"spec": {"colour": "red"}}, field_validation="Warn")
    assert warned.warnings == ['unknown field "spec.colour"']
    assert "colour" not in warned.obj["spec"]


def test_dry_run_patch_is_not_stored(api: Api) -> None:
    before = configmap(api)
    rt = rt_of(api, "v1", "ConfigMap")
    result = do_patch(api, rt, "cm", p.MERGE_PATCH, {"data": {"a": "2"}}, dry_run=True)
    assert result.obj["data"] == {"a": "2"}
    assert api.get(rt, "default", "cm") == before


# --- JSON patch --------------------------------------------------------------------------------------


def test_json_patch_operations(api: Api) -> None:
    configmap(api, data={"a": "1", "b": "2"})
    rt = rt_of(api, "v1", "ConfigMap")
    ops = [
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "copy", "from": "/data/a", "path": "/data/c"},
        {"op": "move", "from": "/data/b", "path": "/data/d"},
        {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}},
        {"op": "replace", "path": "/data/e", "value": "5"},  # evanphx v4: replace of a missing member sets it
        {"op": "remove", "path": "/data/a"},
    ]
    assert do_patch(api, rt, "cm", p.JSON_PATCH, ops).obj["data"] == {"c": "1", "d": "2", "e": "5"}


def test_json_patch_test_compares_types_strictly(api: Api) -> None:
    widget(api)
    rt = rt_of(api, "example.com/v1", "Widget")
    fails(do_patch, api, rt, "w", p.JSON_PATCH, [{"op": "test", "path": "/spec/replicas", "value": True}])
    fails(do_patch, api, rt, "w", p.JSON_PATCH, [{"op": "test", "path": "/spec/replicas", "value": "1"}])
    do_patch(api, rt, "w", p.JSON_PATCH, [{"op": "test", "path": "/spec/replicas", "value": 1}])


# --- strategic merge patch -----------------------------------------------------------------------------


def smp(api: Api, body: Any, **opts: Any) -> dict[str, Any]:
    return do_patch(
        api, rt_of(api, "apps/v1", "Deployment"), "web", p.STRATEGIC_MERGE_PATCH, body, **opts
    ).obj


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def test_strategic_merge_patch_merges_containers_env_and_ports_by_key(api: Api) -> None:
    deployment(api)
    obj = smp(
        api,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
                            },
                            {"name": "extra", "image": "redis"},
                        ]
                    }
                }
            }
        },
    )
    containers = pod_spec(obj)["containers"]
    # kube's normalizeElementOrder: a new item goes before the live items it cannot be ordered against.
    assert [c["name"] for c in containers] == ["app", "extra", "sidecar"]
    app = containers[0]
    assert app["image"] == "nginx:1.25"
    assert app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "20"},
        {"name": "C", "value": "3"},
    ]
    assert [p_["containerPort"] for p_ in app["ports"]] == [80, 443]
    assert app["ports"][0]["name"] == "http"


def test_strategic_merge_patch_replaces_atomic_lists(api: Api) -> None:
    deployment(api)
    obj = smp(api, {"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}})
    assert pod_spec(obj)["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_strategic_merge_patch_directives(api: Api) -> None:
    deployment(api)
    obj = smp(
        api,
        {
            "metadata": {"finalizers": ["x", "y", "z"]},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "env": [{"name": "A", "$patch": "delete"}, {"name": "B", "value": None}],
                            },
                            {"name": "sidecar", "$patch": "delete"},
                        ]
                    }
                }
            },
        },
    )
    containers = pod_spec(obj)["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["env"] == [{"name": "B"}]
    obj = smp(api, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["y"]}})
    assert obj["metadata"]["finalizers"] == ["x", "z"]
    obj = smp(api, {"metadata": {"$setElementOrder/finalizers": ["z", "x"], "finalizers": ["x"]}})
    assert obj["metadata"]["finalizers"] == ["z", "x"]
    obj = smp(
        api,
        {
            "spec": {
                "template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}}
            }
        },
    )
    assert [c["name"] for c in pod_spec(obj)["containers"]] == ["solo"]
    obj = smp(
        api, {"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "app": "web", "v": "2"}}}}}
    )
    assert obj["spec"]["template"]["metadata"]["labels"] == {"app": "web", "v": "2"}


def test_strategic_merge_patch_set_element_order_reorders_containers(api: Api) -> None:
    deployment(api)
    obj = smp(
        api,
        {
            "spec": {
                "template": {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}}
            }
        },
    )
    assert [c["name"] for c in pod_spec(obj)["containers"]] == ["sidecar", "app"]


def test_strategic_merge_patch_retain_keys(api: Api) -> None:
    deployment(api)
    smp(api, {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}})
    obj = smp(api, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert obj["spec"]["strategy"] == {"type": "Recreate"}


def test_strategic_merge_patch_null_deletes_and_unmatched_nulls_are_ignored(api: Api) -> None:
    deployment(api)
    obj = smp(
        api,
        {
            "spec": {
                "paused": None,
                "replicas": None,
                "template": {"spec": {"nodeSelector": {"a": None, "b": "1"}}},
            }
        },
    )
    assert "replicas" not in obj["spec"] or obj["spec"]["replicas"] == 1  # defaulted back by the schema
    assert pod_spec(obj)["nodeSelector"] == {"b": "1"}


@pytest.mark.parametrize(
    ("body", "code", "reason", "message"),
    [
        (
            {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
            500,
            None,
            "map: map[image:x] does not contain declared merge key: name",
        ),
        (
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["x"]}},
            400,
            "BadRequest",
            "invalid patch format of primitive list",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": "type"}}},
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}},
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        ),
        (
            {"spec": {"template": {"spec": {"$setElementOrderx": []}}}},
            400,
            "BadRequest",
            "invalid patch format of setElementOrder list",
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}}},
            500,
            None,
            "merging lists cannot yet be specified in the patch",
        ),
        (
            {"spec": {"$patch": "frob", "replicas": 2}},
            500,
            None,
            "unknown patch type: frob in map: map[$patch:frob replicas:2]",
        ),
        (
            {"spec": {"$setElementOrder/nope": [{"name": "x"}]}},
            500,
            None,
            'unable to find api field in struct DeploymentSpec for the json field "nope"',
        ),
        (
            {
                "spec": {
                    "template": {
                        "spec": {
                            "$setElementOrder/containers": [{"name": "app"}],
                            "containers": [{"name": "sidecar"}],
                        }
                    }
                }
            },
            500,
            None,
            "the order in patch list:\n[map[name:sidecar]]\n doesn't match $setElementOrder list:\n[map[name:app]]",
        ),
    ],
)
def test_strategic_merge_patch_errors(
    api: Api, body: Any, code: int, reason: str | None, message: str
) -> None:
    deployment(api)
    smp(api, {"spec": {"strategy": {"type": "RollingUpdate"}}})  # kube defaults it; the sim does not
    err = fails(smp, api, body)
    assert (err.code, err.message) == (code, message)
    assert err.status().get("reason") == reason


def test_list_of_lists_is_kubes_generic_422() -> None:
    schema = strategic.SmpSchema.for_kind(
        Registry().for_kind("apps/v1", "Deployment") or pytest.fail("no Deployment")
    )
    with pytest.raises(strategic.SmpError) as caught:
        strategic.strategic_merge_patch(
            {"metadata": {"finalizers": []}}, {"metadata": {"finalizers": [["x"]]}}, schema
        )
    err = strategic.smp_api_error(caught.value)
    assert (err.code, err.message) == (422, json_patch.GENERIC_422)


def test_strategic_merge_patch_on_a_configmap_and_a_namespace(api: Api) -> None:
    configmap(api, data={"a": "1", "b": "2"})
    result = do_patch(
        api, rt_of(api, "v1", "ConfigMap"), "cm", p.STRATEGIC_MERGE_PATCH, {"data": {"a": None, "c": "3"}}
    )
    assert result.obj["data"] == {"b": "2", "c": "3"}
    ns = do_patch(
        api,
        rt_of(api, "v1", "Namespace"),
        "default",
        p.STRATEGIC_MERGE_PATCH,
        {"metadata": {"labels": {"team": "x"}}},
        namespace=None,
    )
    assert ns.obj["metadata"]["labels"]["team"] == "x"


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["A", "B", "C", "D"]), st.text(max_size=3), max_size=4))
def test_strategic_merge_of_env_is_by_name_and_keeps_patch_order(env: dict[str, str]) -> None:
    schema = strategic.SmpSchema.for_kind(
        Registry().for_kind("apps/v1", "Deployment") or pytest.fail("no Deployment")
    )
    original = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "Z", "value": "z"}]}]}}
        }
    }
    patch_env = [{"name": k, "value": v} for k, v in env.items()]
    patch_doc = {
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": copy.deepcopy(patch_env)}]}}}
    }
    result = strategic.strategic_merge_patch(copy.deepcopy(original), patch_doc, schema)
    merged = result["spec"]["template"]["spec"]["containers"][0]["env"]
    # The live item cannot be ordered against items the live list lacks: kube puts the patch's first.
    assert merged == [*patch_env, {"name": "Z", "value": "z"}]

"""Server-side apply and managedFields: field sets and their ``fieldsV1`` encoding, the schema-driven
merge, compare and prune of structured-merge-diff, conflicts, and the Update entries every other
write records."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.sim.apiserver import apply as ssa
from aiplane.sim.apiserver import managedfields
from aiplane.sim.apiserver import patch as p
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import Api, Result, WriteOptions
from aiplane.sim.apiserver.smd import fieldpath, typed
from aiplane.sim.apiserver.smd.fieldpath import FieldSet, PathElement
from tests.unit.sim.test_patch import configmap, deployment, make_api, rt_of, widget

F = PathElement.field


@pytest.fixture
def api() -> Api:
    return make_api()


def apply_(
    api: Api,
    config: dict[str, Any],
    manager: str = "mgr",
    *,
    force: bool = False,
    subresource: str | None = None,
    dry_run: bool = False,
) -> Result:
    rt = rt_of(api, config["apiVersion"], config["kind"])
    name = config["metadata"]["name"]
    opts = WriteOptions(field_manager=manager, force=force, dry_run=dry_run)
    return p.patch(
        api, rt, "default", name, p.APPLY_PATCH, json.dumps(config).encode(), opts, subresource=subresource
    )


def fails(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        fn(*args, **kwargs)
    return caught.value


def cm(data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", **meta}}
    if data is not None:
        out["data"] = data
    return out


def wid(spec: dict[str, Any], name: str = "w") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


# --- field sets --------------------------------------------------------------------------------------


def test_fields_v1_encoding_follows_structured_merge_diff() -> None:
    fs = FieldSet.of(
        (F("spec"), F("replicas")),
        (F("spec"), F("containers"), PathElement.key([("name", "app")])),
        (F("spec"), F("containers"), PathElement.key([("name", "app")]), F("image")),
        (F("spec"), F("ports"), PathElement.key([("protocol", "TCP"), ("containerPort", 80)])),
        (F("spec"), F("tags"), PathElement("v", "a<b")),
        (F("spec"), F("args"), PathElement("i", 0)),
    )
    encoded = fs.to_json()
    assert json.dumps(encoded) == json.dumps(
        {
            "f:spec": {
                "f:args": {"i:0": {}},
                "f:containers": {'k:{"name":"app"}': {"f:image": {}, ".": {}}},
                "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {}},
                "f:replicas": {},
                "f:tags": {'v:"a\\u003cb"': {}},
            }
        }
    )
    assert FieldSet.from_json(encoded) == fs
    assert [fieldpath.path_string(path) for path in fs.paths()] == [
        ".spec.replicas",
        ".spec.args[0]",
        '.spec.containers[name="app"]',
        '.spec.containers[name="app"].image',
        '.spec.ports[containerPort=80,protocol="TCP"]',
        '.spec.tags[="a<b"]',
    ]


def test_path_elements_sort_fields_keys_values_then_indexes() -> None:
    pes = [
        PathElement("i", 1),
        PathElement("v", 2),
        PathElement("v", "a"),
        PathElement.key([("n", "x")]),
        F("b"),
        F("a"),
    ]
    assert [pe.serialize() for pe in sorted(pes)] == ["f:a", "f:b", 'k:{"n":"x"}', "v:2", 'v:"a"', "i:1"]
    assert PathElement("v", 1) == PathElement("v", 1.0)
    assert PathElement("v", True) != PathElement("v", 1)


_pes = st.one_of(
    st.sampled_from(["a", "b", "c.d", "e/f"]).map(F),
    st.sampled_from(["x", "y"]).map(lambda v: PathElement.key([("name", v)])),
    st.one_of(st.integers(0, 3), st.sampled_from(["u", "v"]), st.booleans()).map(
        lambda v: PathElement("v", v)
    ),
    st.integers(0, 2).map(lambda i: PathElement("i", i)),
)
_paths = st.lists(st.lists(_pes, min_size=1, max_size=4).map(tuple), max_size=10)


@settings(max_examples=200, deadline=None)
@given(_paths, _paths)
def test_field_set_algebra(
    first: list[tuple[PathElement, ...]], second: list[tuple[PathElement, ...]]
) -> None:
    a, b = FieldSet.of(*first), FieldSet.of(*second)
    assert FieldSet.from_json(json.loads(json.dumps(a.to_json()))) == a
    union = a.union(b)
    for path in [*first, *second]:
        assert union.has(path)
    for path in first:
        assert a.difference(b).has(path) == (not b.has(path))
        assert a.intersection(b).has(path) == b.has(path)
        covered = any(b.has(path[:i]) for i in range(1, len(path) + 1))
        assert a.recursive_difference(b).has(path) == (not covered)


# --- the schema walkers ----------------------------------------------------------------------------


@pytest.fixture
def widget_schema(api: Api) -> Any:
    return ssa.resource_schema(rt_of(api, "example.com/v1", "Widget"))


def test_to_field_set_follows_list_and_map_types(widget_schema: Any) -> None:
    obj = wid(
        {
            "items": [{"name": "a", "size": 1}],
            "tags": ["x"],
            "args": ["-v"],
            "labels": {"k": "v"},
            "selector": {"app": "x"},
            "config": {"free": {"form": 1}},
        }
    )
    assert typed.to_field_set(obj, widget_schema).to_json() == {
        "f:apiVersion": {},
        "f:kind": {},
        "f:metadata": {"f:name": {}},
        "f:spec": {
            "f:args": {},
            "f:config": {"f:free": {"f:form": {}, ".": {}}},
            "f:items": {'k:{"name":"a"}': {"f:name": {}, "f:size": {}, ".": {}}},
            "f:labels": {"f:k": {}},
            "f:selector": {},
            "f:tags": {'v:"x"': {}},
        },
    }


def test_merge_keeps_live_items_and_orders_like_the_configuration(widget_schema: Any) -> None:
    live = {
        "spec": {
            "items": [{"name": "a", "size": 1}, {"name": "b"}, {"name": "c"}],
            "tags": ["x", "y"],
            "args": ["1"],
        }
    }
    config = {
        "spec": {
            "items": [{"name": "c", "color": "red"}, {"name": "d"}, {"name": "a", "size": 2}],
            "tags": ["z"],
            "args": ["2"],
        }
    }
    merged = typed.merge(live, config, widget_schema)
    assert merged["spec"]["items"] == [
        {"name": "b"},
        {"name": "c", "color": "red"},
        {"name": "d"},
        {"name": "a", "size": 2},
    ]
    assert merged["spec"]["tags"] == ["x", "y", "z"]
    assert merged["spec"]["args"] == ["2"]


def test_compare_reports_added_modified_removed(widget_schema: Any) -> None:
    old = {"spec": {"replicas": 1, "items": [{"name": "a", "size": 1}], "labels": {"x": "1"}}}
    new = {"spec": {"replicas": 2, "items": [{"name": "b"}], "labels": {"x": "1", "y": "2"}}}
    cmp = typed.compare(old, new, widget_schema)
    assert cmp.modified.to_json() == {"f:spec": {"f:replicas": {}}}
    assert cmp.added.to_json() == {
        "f:spec": {"f:items": {'k:{"name":"b"}': {"f:name": {}, ".": {}}}, "f:labels": {"f:y": {}}}
    }
    assert cmp.removed.to_json() == {
        "f:spec": {"f:items": {'k:{"name":"a"}': {"f:name": {}, "f:size": {}, ".": {}}}}
    }


def test_remove_items_drops_subtrees_and_empties_become_null(widget_schema: Any) -> None:
    obj = {"spec": {"items": [{"name": "a", "size": 1}, {"name": "b"}], "labels": {"k": "v"}, "replicas": 3}}
    gone = FieldSet.of(
        (F("spec"), F("items"), PathElement.key([("name", "a")])), (F("spec"), F("labels"), F("k"))
    )
    assert typed.remove_items(obj, gone, widget_schema) == {
        "spec": {"items": [{"name": "b"}], "labels": None, "replicas": 3}
    }


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), max_size=3),
)
def test_merging_a_configuration_then_comparing_shows_only_its_own_changes(
    live_sizes: dict[str, int], config_sizes: dict[str, int]
) -> None:
    schema = ssa.resource_schema(rt_of(make_api(), "example.com/v1", "Widget"))
    live = {"spec": {"items": [{"name": n, "size": s} for n, s in live_sizes.items()]}}
    config = {"spec": {"items": [{"name": n, "size": s} for n, s in config_sizes.items()]}}
    merged = typed.merge(live, config, schema)
    cmp = typed.compare(live, merged, schema)
    assert cmp.removed.empty()
    changed = cmp.modified.union(cmp.added)
    assert changed.difference(typed.to_field_set(config, schema)).empty()
    assert typed.merge(merged, config, schema) == merged


# --- server-side apply -------------------------------------------------------------------------------


def test_apply_creates_with_201_and_records_an_apply_entry(api: Api) -> None:
    result = apply_(api, cm({"a": "1"}, labels={"x": "y"}))
    assert result.created
    obj = result.obj
    assert obj["data"] == {"a": "1"} and obj["metadata"]["uid"]
    assert obj["metadata"]["managedFields"] == [
        {
            "manager": "mgr",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2026-01-02T03:04:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}},
        }
    ]


def test_applying_the_same_configuration_twice_is_a_no_op(api: Api) -> None:
    first = apply_(api, cm({"a": "1"})).obj
    second = apply_(api, cm({"a": "1"}))
    assert not second.created
    assert second.obj["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 9), max_size=3),
    st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3),
    st.dictionaries(st.sampled_from(["k", "l"]), st.text("ab", max_size=2), max_size=2),
)
def test_reapplying_any_widget_configuration_changes_nothing(
    sizes: dict[str, int], tags: list[str], labels: dict[str, str]
) -> None:
    api = make_api()
    # (A configuration that owns nothing leaves no managedFields: kube then gives the next apply's
    # "before-first-apply" manager everything, a write. Hence the replicas.)
    spec: dict[str, Any] = {
        "replicas": 1,
        "items": [{"name": n, "size": s} for n, s in sizes.items()],
        "tags": tags,
        "labels": labels,
    }
    first = apply_(api, wid(spec)).obj
    again = apply_(api, wid(copy.deepcopy(spec))).obj
    assert again == first


def test_a_field_the_manager_stops_applying_is_removed_unless_someone_else_owns_it(api: Api) -> None:
    apply_(
        api,
        wid({"replicas": 1, "description": "d", "items": [{"name": "a"}, {"name": "b"}], "tags": ["x", "y"]}),
    )
    apply_(api, wid({"items": [{"name": "b"}]}), "other")
    obj = apply_(api, wid({"replicas": 1})).obj
    assert obj["spec"] == {"replicas": 1, "items": [{"name": "b"}]}
    assert owners(obj)["other"]["fieldsV1"] == {
        "f:spec": {"f:items": {'k:{"name":"b"}': {"f:name": {}, ".": {}}}}
    }


def test_fields_updated_by_others_survive_when_the_applier_drops_them(api: Api) -> None:
    apply_(api, cm({"a": "1", "b": "2"}))
    p.patch(
        api,
        rt_of(api, "v1", "ConfigMap"),
        "default",
        "cm",
        p.MERGE_PATCH,
        b'{"data":{"b":"3"}}',
        WriteOptions(field_manager="editor"),
    )
    obj = apply_(api, cm({"a": "1"})).obj
    assert obj["data"] == {"a": "1", "b": "3"}


def test_conflict_with_an_update_manager(api: Api) -> None:
    configmap(api, data={"key": "a"}, manager="kubectl-edit")
    err = fails(apply_, api, cm({"key": "b"}), "kubectl")
    assert (err.code, err.reason) == (409, "Conflict")
    assert err.message == 'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.key'
    assert err.status()["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl-edit" using v1',
                "field": ".data.key",
            }
        ]
    }
    assert apply_(api, cm({"key": "a"}), "kubectl").obj["data"] == {
        "key": "a"
    }  # same value: shared, no conflict


def test_conflicts_with_several_managers(api: Api) -> None:
    apply_(api, cm({"a": "1", "b": "1"}), "alpha")
    apply_(api, cm({"c": "1"}), "beta")
    err = fails(apply_, api, cm({"a": "2", "b": "2", "c": "2"}), "gamma")
    assert err.message == (
        'Apply failed with 3 conflicts: conflicts with "alpha":\n- .data.a\n- .data.b\nconflicts with "beta":\n- .data.c'
    )
    assert [c["field"] for c in err.status()["details"]["causes"]] == [".data.a", ".data.b", ".data.c"]


def test_force_takes_ownership(api: Api) -> None:
    apply_(api, wid({"replicas": 1, "description": "d"}), "first")
    obj = apply_(api, wid({"replicas": 5}), "second", force=True).obj
    assert obj["spec"]["replicas"] == 5
    by = owners(obj)
    assert by["first"]["fieldsV1"] == {"f:spec": {"f:description": {}}}
    assert by["second"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_conflicts_inside_list_maps_name_the_item(api: Api) -> None:
    apply_(api, wid({"items": [{"name": "a", "size": 1}]}), "first")
    assert apply_(api, wid({"items": [{"name": "b", "size": 2}]}), "second").obj["spec"]["items"] == [
        {"name": "a", "size": 1},
        {"name": "b", "size": 2},
    ]
    err = fails(apply_, api, wid({"items": [{"name": "a", "size": 3}]}), "second")
    assert err.message == 'Apply failed with 1 conflict: conflict with "first": .spec.items[name="a"].size'


def test_before_first_apply_owns_fields_of_untracked_objects(api: Api) -> None:
    configmap(api, data={"old": "1"})
    rt = rt_of(api, "v1", "ConfigMap")
    reset = p.patch(
        api,
        rt,
        "default",
        "cm",
        p.MERGE_PATCH,
        b'{"metadata":{"managedFields":[]}}',
        WriteOptions(field_manager="x"),
    )
    assert "managedFields" not in reset.obj["metadata"]
    untracked = p.patch(
        api, rt, "default", "cm", p.MERGE_PATCH, b'{"data":{"more":"2"}}', WriteOptions(field_manager="x")
    )
    assert "managedFields" not in untracked.obj["metadata"]
    obj = apply_(api, cm({"new": "3"})).obj
    by = owners(obj)
    assert by["before-first-apply"]["operation"] == "Update"
    assert by["before-first-apply"]["fieldsV1"] == {"f:data": {".": {}, "f:more": {}, "f:old": {}}}
    assert by["mgr"]["fieldsV1"] == {"f:data": {"f:new": {}}}


def test_apply_to_status(api: Api) -> None:
    widget(api)
    config = wid({"replicas": 99})
    config["status"] = {"ready": 1}
    obj = apply_(api, config, "ctl", subresource="status").obj
    assert obj["spec"] == {"replicas": 1, "description": "first"}
    assert obj["status"] == {"ready": 1}
    entry = owners(obj)["ctl"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:ready": {}}}
    err = fails(apply_, api, wid({}, name="missing") | {"status": {"ready": 1}}, "ctl", subresource="status")
    assert err.code == 404


def test_apply_on_the_main_resource_ignores_status(api: Api) -> None:
    widget(api)
    config = wid({"replicas": 1})
    config["status"] = {"ready": 3}
    obj = apply_(api, config).obj
    assert "status" not in obj
    assert owners(obj)["mgr"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


@pytest.mark.parametrize(
    ("config", "code", "reason", "message"),
    [
        ({}, 400, "BadRequest", "invalid object type: /, Kind="),
        (
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cm"}},
            400,
            "BadRequest",
            "invalid object type: /v1, Kind=Secret",
        ),
        (
            {"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "cm"}},
            400,
            "BadRequest",
            "invalid object type: /v2, Kind=ConfigMap",
        ),
        (cm({"a": "1"}, managedFields=[]), 400, "BadRequest", "metadata.managedFields must be nil"),
        (
            cm({"a": "1"}) | {"extra": 1},
            500,
            None,
            "failed to create typed patch object (/cm; /v1, Kind=ConfigMap): .extra: field not declared in schema",
        ),
        (
            cm({"a": 1}),  # type: ignore[dict-item]
            500,
            None,
            "failed to create typed patch object (/cm; /v1, Kind=ConfigMap): .data.a: expected string, got &value.valueUnstructured{Value:1}",
        ),
        (
            cm({"a": "1"}, name="other"),
            400,
            "BadRequest",
            "the name of the object (other) does not match the name on the URL (cm)",
        ),
        (
            cm({"a": "1"}, namespace="elsewhere"),
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        (
            cm({"a": "1"}, uid="123"),
            409,
            "Conflict",
            'Operation cannot be fulfilled on configmaps "cm": uid mismatch: the provided object specified uid 123, and no existing object was found',
        ),
    ],
)
def test_apply_errors(api: Api, config: dict[str, Any], code: int, reason: str | None, message: str) -> None:
    raw = json.dumps(config).encode()
    err = fails(
        p.patch,
        api,
        rt_of(api, "v1", "ConfigMap"),
        "default",
        "cm",
        p.APPLY_PATCH,
        raw,
        WriteOptions(field_manager="m"),
    )
    assert (err.code, err.message) == (code, message)
    assert err.status().get("reason") == reason


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b"- a\n- b\n",
            "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            b"just text",
            "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}",
        ),
        (
            b"a: b: c\n",
            # Converted to JSON before anything else (1.37); go-yaml names no line for the first one.
            "error encoding patch: yaml: mapping values are not allowed in this context",
        ),
    ],
)
def test_apply_bodies_that_do_not_decode(api: Api, raw: bytes, message: str) -> None:
    err = fails(
        p.patch,
        api,
        rt_of(api, "v1", "ConfigMap"),
        "default",
        "cm",
        p.APPLY_PATCH,
        raw,
        WriteOptions(field_manager="m"),
    )
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_apply_accepts_yaml(api: Api) -> None:
    raw = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  when: 2024-01-01\n  yes: 'y'\n"
    obj = p.patch(
        api,
        rt_of(api, "v1", "ConfigMap"),
        "default",
        "cm",
        p.APPLY_PATCH,
        raw,
        WriteOptions(field_manager="m"),
    ).obj
    assert obj["data"] == {"when": "2024-01-01", "true": "y"}  # YAML 1.1, as sigs.k8s.io/yaml reads it


def test_apply_with_a_stale_resource_version_conflicts(api: Api) -> None:
    stale = apply_(api, cm({"a": "1"})).obj["metadata"]["resourceVersion"]
    apply_(api, cm({"a": "2"}))
    err = fails(apply_, api, cm({"a": "3"}, resourceVersion=stale))
    assert (err.code, err.reason) == (409, "Conflict")


def test_dry_run_apply_is_not_stored(api: Api) -> None:
    result = apply_(api, cm({"a": "1"}), dry_run=True)
    assert result.created and result.obj["data"] == {"a": "1"}
    assert api.find(rt_of(api, "v1", "ConfigMap"), "default", "cm") is None


def test_kubectl_takes_over_client_side_applied_fields_and_keeps_last_applied(api: Api) -> None:
    last = json.dumps(cm({"key": "a"}) | {"metadata": {"name": "cm", "namespace": "default"}}) + "\n"
    configmap(api, data={"key": "a"}, manager="kubectl-client-side-apply")
    rt = rt_of(api, "v1", "ConfigMap")
    body = json.dumps({"metadata": {"annotations": {ssa.LAST_APPLIED_ANNOTATION: last}}}).encode()
    p.patch(
        api, rt, "default", "cm", p.MERGE_PATCH, body, WriteOptions(field_manager="kubectl-client-side-apply")
    )
    obj = apply_(
        api, cm({"key": "b"}), "kubectl"
    ).obj  # conflicting, but allowed by the last-applied annotation
    assert obj["data"] == {"key": "b"}
    assert json.loads(obj["metadata"]["annotations"][ssa.LAST_APPLIED_ANNOTATION]) == cm({"key": "b"})
    err = fails(apply_, api, cm({"key": "c"}), "someone-else")
    assert 'conflict with "kubectl"' in err.message


def test_apply_of_a_deployment_merges_containers_by_name(api: Api) -> None:
    deployment(api)
    config = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "C", "value": "3"}]}]}}
        },
    }
    obj = apply_(api, config).obj
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert [e["name"] for e in containers[0]["env"]] == ["A", "B", "C"]
    assert owners(obj)["mgr"]["fieldsV1"] == {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {
                            ".": {},
                            "f:env": {'k:{"name":"C"}': {".": {}, "f:name": {}, "f:value": {}}},
                            "f:name": {},
                        }
                    }
                }
            }
        }
    }


# --- managedFields of other writes -------------------------------------------------------------------


def test_create_and_update_record_update_entries(api: Api) -> None:
    rt = rt_of(api, "v1", "ConfigMap")
    created = configmap(api, data={"a": "1"})
    assert created["metadata"]["managedFields"] == [
        {
            "manager": "creator",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-02T03:04:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}},
        }
    ]
    body = copy.deepcopy(created)
    body["data"]["a"] = "2"
    body["data"]["b"] = "3"
    updated = api.update(rt, "default", "cm", body, WriteOptions(field_manager="editor")).obj
    by = owners(updated)
    assert by["creator"]["fieldsV1"] == {"f:data": {}}  # it still owns the map itself
    assert by["editor"]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    body = copy.deepcopy(updated)
    del body["data"]["b"]
    removed = api.update(rt, "default", "cm", body, WriteOptions(field_manager="remover")).obj
    assert "remover" not in owners(removed)  # removing fields owns nothing
    assert owners(removed)["editor"]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_custom_resources_record_struct_fields_as_added(api: Api) -> None:
    obj = widget(api)
    assert owners(obj)["creator"]["fieldsV1"] == {"f:spec": {".": {}, "f:description": {}, "f:replicas": {}}}


def test_the_manager_defaults_to_the_user_agent(api: Api) -> None:
    rt = rt_of(api, "v1", "ConfigMap")
    token = ssa.REQUEST_USER_AGENT.set("kubectl/v1.37.1 (linux/amd64) kubernetes/abc")
    try:
        obj = api.create(rt, "default", {"metadata": {"name": "ua"}, "data": {"a": "1"}}).obj
    finally:
        ssa.REQUEST_USER_AGENT.reset(token)
    assert owners(obj)["kubectl"]["operation"] == "Update"
    anonymous = api.create(rt, "default", {"metadata": {"name": "anon"}, "data": {"a": "1"}}).obj
    assert "unknown" in owners(anonymous)


@pytest.mark.parametrize(
    ("user_agent", "manager"),
    [
        ("kubectl/v1.37.1 (linux/amd64) kubernetes/abc", "kubectl"),
        (
            "kube-controller-manager/v1.37.0 (linux/amd64) kubernetes/x/system:serviceaccount:kube-system:foo",
            "kube-controller-manager",
        ),
        ("OpenAPI-Generator/37.0.2/python", "OpenAPI-Generator"),
        ("tab\there", "tabhere"),
        ("x" * 200, "x" * 128),
        ("", ""),
    ],
)
def test_manager_from_user_agent(user_agent: str, manager: str) -> None:
    assert managedfields.manager_from_user_agent(user_agent) == manager


def test_status_updates_are_recorded_with_the_subresource(api: Api) -> None:
    obj = widget(api)
    rt = rt_of(api, "example.com/v1", "Widget")
    body = copy.deepcopy(obj)
    body["status"] = {"phase": "Ready"}
    updated = api.update(
        rt, "default", "w", body, WriteOptions(field_manager="controller"), subresource="status"
    ).obj
    entry = owners(updated)["controller"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {".": {}, "f:phase": {}}}


def test_managed_fields_sent_on_update_replace_the_stored_ones(api: Api) -> None:
    obj = configmap(api)
    rt = rt_of(api, "v1", "ConfigMap")
    body = copy.deepcopy(obj)
    body["metadata"]["managedFields"] = [
        {
            "manager": "mine",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        }
    ]
    stored = api.update(rt, "default", "cm", body, WriteOptions(field_manager="x")).obj
    assert [e["manager"] for e in stored["metadata"]["managedFields"]] == ["mine"]
    body = copy.deepcopy(stored)
    body["metadata"]["managedFields"] = [{"manager": "bad", "operation": "Frobnicate"}]
    kept = api.update(
        rt, "default", "cm", body, WriteOptions(field_manager="x")
    ).obj  # undecodable: the live ones stay
    assert [e["manager"] for e in kept["metadata"]["managedFields"]] == ["mine"]


def test_update_managers_beyond_ten_are_merged_into_ancient_changes(api: Api) -> None:
    rt = rt_of(api, "v1", "ConfigMap")
    configmap(api, data={"k0": "0"}, manager="m0")
    for i in range(1, 12):
        current = copy.deepcopy(api.get(rt, "default", "cm"))
        current["data"][f"k{i}"] = str(i)
        api.update(rt, "default", "cm", current, WriteOptions(field_manager=f"m{i}"))
    entries = api.get(rt, "default", "cm")["metadata"]["managedFields"]
    names = [e["manager"] for e in entries]
    assert len(names) == 10 and "ancient-changes" in names
    ancient = next(e for e in entries if e["manager"] == "ancient-changes")
    # Same times: the oldest are the first identifiers in string order (m0, m1, m10).
    assert set(ancient["fieldsV1"]["f:data"]) == {".", "f:k0", "f:k1", "f:k10"}

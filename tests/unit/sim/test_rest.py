"""The verbs of the embedded API server, as kube-apiserver answers them (no HTTP: ``Api`` directly)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import Api, WriteOptions, upsert_condition
from aiplane.sim.apiserver.store import Event, Store
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet


@pytest.fixture(scope="module")
def base() -> EmbeddedCluster:
    return EmbeddedCluster(fleet=Fleet(nodePools=[]))


@pytest.fixture
def api(base: EmbeddedCluster) -> Api:
    """A fresh Api over a copy of the bootstrapped cluster's store (CRDs installed, no nodes)."""
    store = Store()
    registry = Registry()
    fresh = Api(store, registry)
    for rt_key in base.server.store.storage_keys():
        for obj in base.server.store.items(rt_key):
            store.put(rt_key, copy.deepcopy(obj))
    for crd in base.server.store.items("apiextensions.k8s.io/customresourcedefinitions"):
        registry.add_crd(crd)
    return fresh


def rt(api: Api, api_version: str, kind: str) -> ResourceType:
    return api.resource(api_version, kind)


def cm(name: str = "cm", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {"a": "1"}}


def plan(name: str = "p", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {"rules": [{"selector": {}, "profileRef": {"name": "cpx"}}], **spec},
    }
    return body


PLAN = ("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")


def error_of(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_create_sets_system_metadata_and_a_newer_resource_version(api: Api) -> None:
    before = api.store.rv
    obj = api.create(rt(api, "v1", "ConfigMap"), "default", cm()).obj
    meta = obj["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) == before + 1
    assert "generation" not in meta  # ConfigMaps have no generation in kube


def test_create_twice_is_409_already_exists(api: Api) -> None:
    api.create(rt(api, "v1", "ConfigMap"), "default", cm())
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", cm()))
    assert (err.code, err.reason, err.message) == (409, "AlreadyExists", 'configmaps "cm" already exists')


def test_generate_name(api: Api) -> None:
    body = cm()
    body["metadata"] = {"generateName": "job-"}
    name = api.create(rt(api, "v1", "ConfigMap"), "default", body).obj["metadata"]["name"]
    assert name.startswith("job-") and len(name) == len("job-") + 5


def test_missing_name_and_invalid_names(api: Api) -> None:
    body = cm()
    body["metadata"] = {}
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body))
    assert err.code == 422
    assert (
        err.message
        == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", cm("Bad_Name")))
    assert err.code == 422
    assert err.message.startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'
    )
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", cm("ok\n")))
    assert err.code == 422  # Go's $ is the very end of the text: a trailing newline is not allowed
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n" * 64}}
    err = error_of(lambda: api.create(rt(api, "v1", "Namespace"), None, namespace))
    # (the kubernetes.io/metadata.name label, defaulted from the name, is too long as well)
    assert err.message.startswith(
        f'Namespace "{"n" * 64}" is invalid: [metadata.name: Invalid value: "{"n" * 64}": '
        "must be no more than 63 characters, "
    )


def test_label_and_annotation_keys_are_validated_as_kube_does(api: Api) -> None:
    """ValidateLabels and ValidateAnnotations: ``content.IsLabelKey``/``IsLabelValue``, one error a problem."""
    body = cm()
    body["metadata"]["labels"] = {"/a": "x" * 64}
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body))
    assert err.code == 422
    assert err.message == (
        'ConfigMap "cm" is invalid: [metadata.labels: Invalid value: "/a": prefix part must be non-empty, '
        f'metadata.labels: Invalid value: "{"x" * 64}": must be no more than 63 characters]'
    )
    body["metadata"]["labels"] = {"a/b/c": "v\n"}
    message = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body)).message
    assert 'metadata.labels: Invalid value: "a/b/c": a valid label key must consist' in message
    assert 'metadata.labels: Invalid value: "v\\n": a valid label must be an empty string' in message
    # Annotation keys are case-insensitive: kube lowercases them before validating.
    body["metadata"]["labels"] = {}
    body["metadata"]["annotations"] = {"Example.COM/Note": "x"}
    assert api.create(rt(api, "v1", "ConfigMap"), "default", body).obj["metadata"]["annotations"]
    body["metadata"]["name"] = "cm2"
    body["metadata"]["annotations"] = {"Example_COM/Note": "x"}
    message = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body)).message
    assert message.startswith(
        'ConfigMap "cm2" is invalid: metadata.annotations: Invalid value: "Example_COM/Note": prefix part a '
        "lowercase RFC 1123 subdomain"
    )


def test_namespace_must_exist(api: Api) -> None:
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "nowhere", cm()))
    assert (err.code, err.message) == (404, 'namespaces "nowhere" not found')


def test_custom_resource_is_defaulted_and_validated_with_kube_messages(api: Api) -> None:
    stored = api.create(rt(api, *PLAN), None, plan()).obj
    assert "rollout" not in stored["spec"]  # rollout itself has no default; its fields default when given
    assert stored["metadata"]["generation"] == 1
    bad = plan("bad", rollout={"maxParallel": 0})
    err = error_of(lambda: api.create(rt(api, *PLAN), None, bad))
    assert err.code == 422 and err.reason == "Invalid"
    assert err.message == (
        'PartitioningPlan.infrastructure.silogen.ai "bad" is invalid: spec.rollout.maxParallel: Invalid value: 0: '
        "spec.rollout.maxParallel in body should be greater than or equal to 1"
    )
    assert err.details is not None
    assert err.details["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: spec.rollout.maxParallel in body should be greater than or equal to 1",
            "field": "spec.rollout.maxParallel",
        }
    ]
    defaulted = api.create(rt(api, *PLAN), None, plan("d", rollout={})).obj
    assert defaulted["spec"]["rollout"] == {
        "maxParallel": 1,
        "maxUnavailable": 1,
        "excludeControlPlane": True,
    }


def test_status_is_dropped_on_create_and_ignored_by_main_resource_updates(api: Api) -> None:
    t = rt(api, *PLAN)
    body = plan()
    body["status"] = {"phase": "Completed"}
    created = api.create(t, None, body).obj
    assert "status" not in created
    status_update = copy.deepcopy(created)
    status_update["status"] = {"phase": "Progressing"}
    after_status = api.update(t, None, "p", status_update, subresource="status").obj
    assert after_status["status"] == {"phase": "Progressing"}
    assert after_status["metadata"]["generation"] == 1  # status writes never bump generation
    main = copy.deepcopy(after_status)
    main["status"] = {"phase": "Degraded"}
    main["spec"]["paused"] = True
    after_main = api.update(t, None, "p", main).obj
    assert after_main["status"] == {"phase": "Progressing"}  # main resource writes ignore .status
    assert after_main["metadata"]["generation"] == 2
    spec_via_status = copy.deepcopy(after_main)
    spec_via_status["spec"]["paused"] = False
    after = api.update(t, None, "p", spec_via_status, subresource="status").obj
    assert after["spec"]["paused"] is True  # /status writes ignore everything but .status


def test_metadata_only_changes_do_not_bump_generation(api: Api) -> None:
    t = rt(api, *PLAN)
    created = api.create(t, None, plan()).obj
    labelled = copy.deepcopy(created)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert api.update(t, None, "p", labelled).obj["metadata"]["generation"] == 1


def test_stale_resource_version_is_409_conflict(api: Api) -> None:
    t = rt(api, "v1", "ConfigMap")
    created = api.create(t, "default", cm()).obj
    first = copy.deepcopy(created)
    first["data"] = {"a": "2"}
    api.update(t, "default", "cm", first)
    stale = copy.deepcopy(created)
    stale["data"] = {"a": "3"}
    err = error_of(lambda: api.update(t, "default", "cm", stale))
    assert (err.code, err.reason) == (409, "Conflict")
    assert err.message == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_custom_resources_need_a_resource_version_to_update(api: Api) -> None:
    t = rt(api, *PLAN)
    created = api.create(t, None, plan()).obj
    unconditional = copy.deepcopy(created)
    del unconditional["metadata"]["resourceVersion"]
    err = error_of(lambda: api.update(t, None, "p", unconditional))
    assert err.code == 422
    assert "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" in err.message, (
        err.message
    )


def test_a_no_op_update_writes_nothing(api: Api) -> None:
    t = rt(api, "v1", "ConfigMap")
    created = api.create(t, "default", cm()).obj
    events: list[Event] = []
    api.store.subscribe(events.append)
    again = api.update(t, "default", "cm", copy.deepcopy(created)).obj
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert events == []


def test_transition_rule_dry_run_cannot_be_re_enabled(api: Api) -> None:
    t = rt(api, *PLAN)
    created = api.create(t, None, plan(dryRun=False)).obj
    again = copy.deepcopy(created)
    again["spec"]["dryRun"] = True
    err = error_of(lambda: api.update(t, None, "p", again))
    assert err.code == 422
    assert err.message == (
        'PartitioningPlan.infrastructure.silogen.ai "p" is invalid: spec: Invalid value: '
        "dryRun cannot be re-enabled once disabled"
    )
    assert (
        api.create(t, None, plan("q", dryRun=True)).obj["spec"]["dryRun"] is True
    )  # creating with it is fine


def test_field_validation_strict_warn_ignore(api: Api) -> None:
    t = rt(api, "v1", "ConfigMap")
    body = cm()
    body["dataa"] = {"typo": "x"}
    err = error_of(lambda: api.create(t, "default", body, WriteOptions(field_validation="Strict")))
    assert (err.code, err.message) == (400, 'strict decoding error: unknown field "dataa"')
    warned = api.create(t, "default", body, WriteOptions(field_validation="Warn"))
    assert warned.warnings == ['unknown field "dataa"'] and "dataa" not in warned.obj
    body["metadata"]["name"] = "cm2"
    assert api.create(t, "default", body, WriteOptions(field_validation="Ignore")).warnings == []


def test_total_annotation_size_is_limited_to_256_kib(api: Api) -> None:
    body = cm()
    body["metadata"]["annotations"] = {"big": "x" * (256 * 1024)}
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body))
    assert err.code == 422
    assert "metadata.annotations: Too long: must have at most 262144 bytes" in err.message


def test_dry_run_stores_nothing(api: Api) -> None:
    before = api.store.rv
    result = api.create(rt(api, "v1", "ConfigMap"), "default", cm(), WriteOptions(dry_run=True))
    assert result.obj["metadata"]["name"] == "cm"
    assert api.store.rv == before and api.find(rt(api, "v1", "ConfigMap"), "default", "cm") is None


def widget_crd(schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": schema
                        or {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                            },
                        }
                    },
                }
            ],
        },
    }


def test_a_crd_serves_its_kind_until_deleted(api: Api) -> None:
    crd_rt = rt(api, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    api.create(crd_rt, None, widget_crd())
    stored = api.get(crd_rt, None, "widgets.example.com")
    assert {c["type"]: c["status"] for c in stored["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    widget_rt = rt(api, "example.com/v1", "Widget")
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3, "x": 1},
    }
    created = api.create(widget_rt, "default", body)
    assert created.obj["spec"] == {"size": 3} and created.warnings == ['unknown field "spec.x"']
    api.delete(crd_rt, None, "widgets.example.com")
    assert api.registry.for_kind("example.com/v1", "Widget") is None
    assert api.store.items(widget_rt.storage_key) == []


def test_a_crd_with_a_non_structural_schema_is_rejected(api: Api) -> None:
    crd_rt = rt(api, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    bad = widget_crd(
        {"type": "object", "properties": {"spec": {"properties": {"size": {"type": "integer"}}}}}
    )
    err = error_of(lambda: api.create(crd_rt, None, bad))
    assert err.code == 422
    assert "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value" in err.message


def test_crd_name_must_be_plural_dot_group(api: Api) -> None:
    crd_rt = rt(api, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    bad = widget_crd()
    bad["metadata"]["name"] = "gadgets.example.com"
    err = error_of(lambda: api.create(crd_rt, None, bad))
    assert err.code == 422 and 'must be spec.names.plural+"."+spec.group' in err.message


def test_pod_updates_may_only_change_images_and_a_few_fields(api: Api) -> None:
    t = rt(api, "v1", "Pod")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "a"}]},
    }
    created = api.create(t, "default", pod).obj
    assert created["status"]["phase"] == "Pending"
    new_image = copy.deepcopy(created)
    new_image["spec"]["containers"][0]["image"] = "b"
    updated = api.update(t, "default", "p", new_image).obj
    assert updated["spec"]["containers"][0]["image"] == "b"
    new_command = copy.deepcopy(updated)
    new_command["spec"]["containers"][0]["command"] = ["sleep"]
    err = error_of(lambda: api.update(t, "default", "p", new_command))
    assert err.code == 422 and "pod updates may not change fields other than" in err.message


def test_no_new_finalizers_on_an_object_being_deleted(api: Api) -> None:
    t = rt(api, "v1", "ConfigMap")
    body = cm()
    body["metadata"]["finalizers"] = ["example.com/keep"]
    created = api.create(t, "default", body).obj
    deleting = api.mark_deleted(t, api.store.get(t.storage_key, "default", "cm") or created)
    more = copy.deepcopy(deleting)
    more["metadata"]["finalizers"].append("example.com/more")
    err = error_of(lambda: api.update(t, "default", "cm", more))
    assert err.code == 422 and "no new finalizers can be added if the object is being deleted" in err.message
    released = copy.deepcopy(deleting)
    released["metadata"]["finalizers"] = []
    api.update(t, "default", "cm", released)
    assert api.find(t, "default", "cm") is None  # the last finalizer gone: the object goes


def test_new_namespaces_are_active_with_the_kubernetes_finalizer(api: Api) -> None:
    ns = api.create(
        rt(api, "v1", "Namespace"),
        None,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    ).obj
    assert ns["status"] == {"phase": "Active"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}


def test_wrong_kind_or_namespace_in_the_body_is_400(api: Api) -> None:
    body = cm()
    body["kind"] = "Secret"
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body))
    assert (err.code, err.message) == (
        400,
        "the kind in the data (Secret) does not match the expected kind (ConfigMap)",
    )
    body = cm()
    body["metadata"]["namespace"] = "kube-system"
    err = error_of(lambda: api.create(rt(api, "v1", "ConfigMap"), "default", body))
    assert err.code == 400
    assert (
        err.message == "the namespace of the provided object does not match the namespace sent on the request"
    )


def test_secret_string_data_is_stored_base64_in_data(api: Api) -> None:
    t = rt(api, "v1", "Secret")
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "eA=="},
        "stringData": {"b": "hi"},
    }
    stored = api.create(t, "default", body).obj
    assert stored["data"] == {"a": "eA==", "b": "aGk="} and "stringData" not in stored
    assert stored["type"] == "Opaque"
    again = copy.deepcopy(stored)
    again["stringData"] = {"a": "new"}
    assert api.update(t, "default", "s", again).obj["data"] == {"a": "bmV3", "b": "aGk="}


def test_services_get_a_cluster_ip_and_target_ports(api: Api) -> None:
    t = rt(api, "v1", "Service")
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]},
    }
    spec = api.create(t, "default", body).obj["spec"]
    assert spec["type"] == "ClusterIP" and spec["clusterIP"].startswith("10.96.")
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "h"},
        "spec": {"clusterIP": "None", "ports": [{"port": 80}]},
    }
    assert api.create(t, "default", headless).obj["spec"]["clusterIP"] == "None"


def test_upsert_condition_keeps_the_transition_time_unless_the_status_flips() -> None:
    old = [
        {"type": "Other", "status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "t0"},
    ]
    same = upsert_condition(
        old, {"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "t1"}
    )
    assert same == [old[0], {"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "t0"}]
    flipped = upsert_condition(old, {"type": "Ready", "status": "False", "lastTransitionTime": "t1"})
    assert flipped[1] == {"type": "Ready", "status": "False", "lastTransitionTime": "t1"}
    added = upsert_condition(old[:1], {"type": "Ready", "status": "True", "lastTransitionTime": "t1"})
    assert added == [old[0], {"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]
    assert old[1]["lastTransitionTime"] == "t0" and added[0] is not old[0]  # the input is not changed


def _pod_with(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox", "resources": copy.deepcopy(resources)}],
            "containers": [{"name": "c", "image": "nginx", "resources": copy.deepcopy(resources)}],
        },
    }


def test_pod_limits_without_requests_become_requests(api: Api) -> None:
    pod = api.create(
        rt(api, "v1", "Pod"), "default", _pod_with({"limits": {"cpu": "2", "memory": "1Gi"}}), WriteOptions()
    ).obj
    for key in ("initContainers", "containers"):
        assert pod["spec"][key][0]["resources"]["requests"] == {"cpu": "2", "memory": "1Gi"}
    assert pod["status"]["qosClass"] == "Guaranteed"


def test_pod_request_already_given_is_kept(api: Api) -> None:
    resources = {"limits": {"cpu": "2", "amd.com/gpu": "1"}, "requests": {"cpu": "500m"}}
    pod = api.create(rt(api, "v1", "Pod"), "default", _pod_with(resources), WriteOptions()).obj
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "amd.com/gpu": "1"}
    assert pod["status"]["qosClass"] == "Burstable"


def test_pod_templates_are_not_defaulted_from_limits(api: Api) -> None:
    template = _pod_with({"limits": {"cpu": "1"}})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": template["spec"]},
        },
    }
    stored = api.create(rt(api, "apps/v1", "Deployment"), "default", deployment, WriteOptions()).obj
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}

"""Object-metadata helpers, including that finalizer patches really are atomic under RFC 6902."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.meta import (
    controller_of,
    controller_owner_reference,
    deep_copy,
    deep_get,
    finalizer_patch_add,
    finalizer_patch_remove,
    has_finalizer,
    is_controlled_by,
    is_owned_by,
    object_key,
    owner_references_of,
    split_key,
    strip_managed_fields,
)

FIN = "aiplane.silogen.ai/cleanup"


def obj(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": "llama", "namespace": "ml", "uid": "u-1", "resourceVersion": "7", **metadata},
        "spec": {"replicas": 2},
    }


def apply(patch: list[dict[str, Any]], doc: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(doc, patch, in_place=False)
    return result


# -- owner references ----------------------------------------------------------------------------


def test_controller_owner_reference() -> None:
    ref = controller_owner_reference(obj())
    assert ref == {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "name": "llama",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        controller_owner_reference({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    with pytest.raises(ValueError, match="apiVersion, kind"):
        controller_owner_reference({"metadata": {"name": "x", "uid": "u"}})


def test_owner_queries() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-2"}
    ctrl = controller_owner_reference(obj())
    child = {"metadata": {"name": "pod", "ownerReferences": [other, {**ctrl, "controller": False}, ctrl]}}
    assert owner_references_of(child) == [other, {**ctrl, "controller": False}, ctrl]
    assert controller_of(child) == ctrl
    assert is_owned_by(child, "u-2") and is_owned_by(child, "u-1")
    assert not is_owned_by(child, "u-3")
    assert is_controlled_by(child, "u-1") and not is_controlled_by(child, "u-2")
    orphan: dict[str, Any] = {"metadata": {"name": "pod"}}
    assert owner_references_of(orphan) == []
    assert controller_of(orphan) is None
    assert not is_owned_by({}, "u-1")


# -- finalizers ----------------------------------------------------------------------------------


def test_add_finalizer_to_an_object_without_finalizers() -> None:
    o = obj()
    patch = finalizer_patch_add(o, FIN)
    assert patch == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/metadata/finalizers", "value": [FIN]},
    ]
    assert apply(patch, o)["metadata"]["finalizers"] == [FIN]
    assert "finalizers" not in o["metadata"]  # the input is untouched

    # someone else added a finalizer meanwhile: resourceVersion moved, the patch must fail
    raced = obj(finalizers=["other"], resourceVersion="8")
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(patch, raced)


def test_add_finalizer_to_an_existing_list_tests_the_list() -> None:
    o = obj(finalizers=["other"])
    patch = finalizer_patch_add(o, FIN)
    assert patch[0] == {"op": "test", "path": "/metadata/finalizers", "value": ["other"]}
    assert apply(patch, o)["metadata"]["finalizers"] == ["other", FIN]
    # an unrelated change (new resourceVersion) does not conflict...
    assert apply(patch, {**o, "metadata": {**o["metadata"], "resourceVersion": "99"}})["metadata"][
        "finalizers"
    ] == [
        "other",
        FIN,
    ]
    # ...a concurrent finalizer change does
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(patch, obj(finalizers=[]))
    assert finalizer_patch_add(obj(finalizers=[]), FIN)[0]["value"] == []


def test_add_is_a_no_op_when_present() -> None:
    assert finalizer_patch_add(obj(finalizers=[FIN]), FIN) == []
    assert has_finalizer(obj(finalizers=[FIN]), FIN)
    assert not has_finalizer(obj(), FIN)


def test_finalizer_patch_errors() -> None:
    with pytest.raises(ValueError, match="resourceVersion"):
        finalizer_patch_add({"metadata": {"name": "x"}}, FIN)
    with pytest.raises(ValueError, match="metadata"):
        finalizer_patch_add({}, FIN)
    with pytest.raises(ValueError, match="non-empty"):
        finalizer_patch_add(obj(), "")


def test_remove_finalizer() -> None:
    o = obj(finalizers=["a", FIN, "b", FIN])
    patch = finalizer_patch_remove(o, FIN)
    assert patch == [
        {"op": "test", "path": "/metadata/finalizers", "value": ["a", FIN, "b", FIN]},
        {"op": "remove", "path": "/metadata/finalizers/3"},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert apply(patch, o)["metadata"]["finalizers"] == ["a", "b"]
    assert o["metadata"]["finalizers"] == ["a", FIN, "b", FIN]
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(patch, obj(finalizers=["a", FIN, "b", FIN, "c"]))
    assert finalizer_patch_remove(obj(), FIN) == []
    assert finalizer_patch_remove(obj(finalizers=["a"]), FIN) == []


@given(
    st.lists(st.sampled_from(["a", "b", FIN, "example.com/x"]), max_size=6),
    st.sampled_from(["a", FIN, "new"]),
    st.booleans(),
)
def test_finalizer_patches_do_what_they_say(finalizers: list[str], name: str, has_list: bool) -> None:
    o = obj(finalizers=finalizers) if has_list or finalizers else obj()
    added = apply(finalizer_patch_add(o, name), o)
    assert has_finalizer(added, name)
    assert [f for f in added["metadata"]["finalizers"] if f != name] == [f for f in finalizers if f != name]
    removed = apply(finalizer_patch_remove(added, name), added)
    assert not has_finalizer(removed, name)
    assert removed["metadata"].get("finalizers", []) == [f for f in finalizers if f != name]
    # idempotent: nothing left to do
    assert finalizer_patch_add(added, name) == []
    assert finalizer_patch_remove(removed, name) == []


# -- keys and fields ----------------------------------------------------------------------------


def test_object_key_and_split_key() -> None:
    assert object_key(obj()) == "ml/llama"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert object_key({"metadata": {"name": "n", "namespace": ""}}) == "n"
    with pytest.raises(ValueError, match=r"metadata\.name"):
        object_key({"metadata": {}})
    assert split_key("ml/llama") == ("ml", "llama")
    assert split_key("node-1") == ("", "node-1")
    with pytest.raises(ValueError, match="unexpected key format"):
        split_key("a/b/c")


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True),
    st.sampled_from(["", "ns", "kube-system"]),
)
def test_key_round_trip(name: str, namespace: str) -> None:
    o = {"metadata": {"name": name, "namespace": namespace}}
    assert split_key(object_key(o)) == (namespace, name)


def test_deep_get() -> None:
    pod = {
        "metadata": {"labels": {"app.kubernetes.io/name": "x"}},
        "spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]},
        "status": {"podIP": None},
    }
    assert deep_get(pod, "spec.containers.0.name") == "a"
    assert deep_get(pod, ("spec", "containers", 0, "resources", "limits", "cpu")) == "1"
    assert deep_get(pod, ("metadata", "labels", "app.kubernetes.io/name")) == "x"
    assert deep_get(pod, "spec.containers.-1.name") is None  # only non-negative digits in dotted paths
    assert deep_get(pod, ("spec", "containers", -1, "name")) == "a"
    assert deep_get(pod, "spec.containers.5.name", "none") == "none"
    assert deep_get(pod, "status.podIP", "unset") == "unset"
    assert deep_get(pod, "spec.containers.name") is None
    assert deep_get(pod, "metadata.labels.app") is None
    assert deep_get(None, "a.b", 0) == 0
    assert deep_get(pod, "spec.containers.0.name.x") is None


def test_strip_managed_fields() -> None:
    o = obj(managedFields=[{"manager": "kubectl", "fieldsV1": {}}])
    stripped = strip_managed_fields(o)
    assert "managedFields" not in stripped["metadata"]
    assert "managedFields" in o["metadata"]  # a copy, not an in-place edit
    assert stripped["metadata"]["name"] == "llama"
    assert stripped["spec"] == o["spec"]
    plain = obj()
    copied = strip_managed_fields(plain)
    assert copied == plain and copied is not plain and copied["metadata"] is not plain["metadata"]
    assert strip_managed_fields({"kind": "X"}) == {"kind": "X"}


def test_deep_copy() -> None:
    o = obj(finalizers=["a"])
    c = deep_copy(o)
    c["metadata"]["finalizers"].append("b")
    assert o["metadata"]["finalizers"] == ["a"]
    assert copy.deepcopy(o) == o

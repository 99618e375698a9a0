"""The pydantic models: lossless round trips, unknown fields rejected, the storage/data alias."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from aiplane.api.config import KaiwoConfig, KaiwoConfigSpec, KaiwoStorageConfig, merge_storage
from aiplane.api.crdgen import crd_for
from aiplane.api.manifests import iter_documents
from aiplane.api.registry import RESOURCES, model_for
from aiplane.api.workload import ModelInfer
from aiplane.schema.validate import admit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OURS = [
    doc
    for path in sorted(EXAMPLES.glob("*.yaml"))
    for doc in iter_documents(path.read_text(encoding="utf-8"))
    if model_for(doc["apiVersion"], doc["kind"]) is not None
]


def _id(doc: dict[str, Any]) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def test_every_kind_has_an_example() -> None:
    assert {m.crd.kind for m in RESOURCES} - {"NodePartitioning", "DynamoComponentDeployment"} <= {
        d["kind"] for d in OURS
    }


@pytest.mark.parametrize("doc", OURS, ids=_id)
def test_round_trip_is_lossless(doc: dict[str, Any]) -> None:
    model = model_for(doc["apiVersion"], doc["kind"])
    assert model is not None
    first = model.model_validate(doc)
    wire = json.loads(json.dumps(first.to_dict()))
    second = model.model_validate(wire)
    assert second == first
    assert second.to_dict() == wire


@pytest.mark.parametrize("doc", OURS, ids=_id)
def test_model_defaults_equal_the_api_server_defaults(doc: dict[str, Any]) -> None:
    """What the model fills in is what kube-apiserver's CRD defaulting fills in, field for field."""
    model = model_for(doc["apiVersion"], doc["kind"])
    assert model is not None
    schema = crd_for(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    stored, pruned, errors = admit(doc, schema)
    assert pruned == [] and errors == []
    assert model.model_validate(doc).to_dict()["spec"] == stored["spec"]


@pytest.mark.parametrize("doc", OURS, ids=_id)
def test_unknown_top_level_and_nested_fields_are_rejected(doc: dict[str, Any]) -> None:
    model = model_for(doc["apiVersion"], doc["kind"])
    assert model is not None
    for mutate in (lambda d: d.update(extra=1), lambda d: d["spec"].update(specTypo=1)):
        broken = copy.deepcopy(doc)
        mutate(broken)
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            model.model_validate(broken)


def test_unknown_field_inside_an_embedded_pod_spec_is_rejected() -> None:
    doc = next(d for d in OURS if d["kind"] == "ModelInfer")
    broken = copy.deepcopy(doc)
    broken["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["imagee"] = "x"
    with pytest.raises(ValidationError, match="imagee"):
        ModelInfer.model_validate(broken)


def test_wrong_api_version_or_kind_is_rejected() -> None:
    doc = copy.deepcopy(next(d for d in OURS if d["kind"] == "ModelInfer"))
    doc["apiVersion"] = "workload.volcano.sh/v1beta1"
    with pytest.raises(ValidationError, match=r"apiVersion must be 'workload\.volcano\.sh/v1alpha1'"):
        ModelInfer.model_validate(doc)


def _kaiwo(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }


STORAGE = {"defaultStorageClass": "longhorn", "defaultDataMountPath": "/data", "defaultHfMountPath": "/hf"}


def test_data_alone_means_the_same_as_storage_in_the_model() -> None:
    via_data = KaiwoConfig.model_validate(_kaiwo({"data": STORAGE}))
    via_storage = KaiwoConfig.model_validate(_kaiwo({"storage": STORAGE}))
    assert (
        via_data.spec.effective_storage()
        == via_storage.spec.effective_storage()
        == KaiwoStorageConfig(**STORAGE)
    )


def test_data_alone_means_the_same_as_storage_after_api_server_defaulting() -> None:
    """Controllers read the object the API server stored (both sections defaulted): same answer."""
    schema = crd_for(KaiwoConfig)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    stored_data, _, errors_data = admit(_kaiwo({"data": STORAGE}), schema)
    stored_storage, _, errors_storage = admit(_kaiwo({"storage": STORAGE}), schema)
    assert errors_data == errors_storage == []
    assert stored_data["spec"]["storage"] == KaiwoStorageConfig().to_dict()  # defaulted, left untouched
    from_data = merge_storage(stored_data["spec"]["storage"], stored_data["spec"].get("data"))
    from_storage = merge_storage(stored_storage["spec"]["storage"], stored_storage["spec"].get("data"))
    assert from_data == from_storage == KaiwoStorageConfig(**STORAGE)


def test_storage_wins_where_both_sections_set_a_field() -> None:
    spec = KaiwoConfigSpec.model_validate(
        {
            "storage": {"defaultStorageClass": "fast"},
            "data": {"defaultStorageClass": "slow", "defaultHfMountPath": "/h"},
        }
    )
    assert spec.effective_storage() == KaiwoStorageConfig(defaultStorageClass="fast", defaultHfMountPath="/h")


paths = st.sampled_from(["/a", "/b", "/workload", "/hf_cache"])
classes = st.sampled_from([None, "fast", "slow"])


@given(
    st.fixed_dictionaries(
        {},
        optional={"defaultStorageClass": classes, "defaultDataMountPath": paths, "defaultHfMountPath": paths},
    )
)
def test_data_only_config_equals_storage_only_config(section: dict[str, Any]) -> None:
    section = {k: v for k, v in section.items() if v is not None}
    via_data = KaiwoConfigSpec.model_validate({"data": section}).effective_storage()
    via_storage = KaiwoConfigSpec.model_validate({"storage": section}).effective_storage()
    assert via_data == via_storage

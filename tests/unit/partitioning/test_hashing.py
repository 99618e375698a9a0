"""``desiredHash`` changes exactly when a node would end up different."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.partitioning.hashing import (
    HASH_PREFIX,
    canonical_profile_state,
    canonical_quantity,
    desired_hash,
    hash_json,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def example_profiles() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((EXAMPLES / "partition-profiles.yaml").read_text(encoding="utf-8"))
    return {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "PartitioningProfile"}


CPX = example_profiles()["mi300x-cpx"]["spec"]


def test_format_is_pinned() -> None:
    """The hash is an API: pin the exact canonical JSON so a refactor cannot silently repartition
    every node in every cluster."""
    text = '{"dcmProfileName":"cpx_nps4","expectedResources":{"amd.com/gpu":"64"}}'
    assert desired_hash(CPX) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert desired_hash(CPX).startswith(HASH_PREFIX)
    assert len(desired_hash(CPX)) == len(HASH_PREFIX) + 64


def test_description_and_target_selector_do_not_count() -> None:
    edited = copy.deepcopy(CPX)
    edited["description"] = "a completely different description"
    edited["targetSelector"] = {"matchLabels": {"other": "label"}}
    assert desired_hash(edited) == desired_hash(CPX)
    del edited["description"], edited["targetSelector"]
    assert desired_hash(edited) == desired_hash(CPX)


def test_key_order_does_not_count() -> None:
    reordered = {"expectedResources": {"b.io/x": "1", "amd.com/gpu": "64"}, "dcmProfileName": "cpx_nps4"}
    forward = {"dcmProfileName": "cpx_nps4", "expectedResources": {"amd.com/gpu": "64", "b.io/x": "1"}}
    assert desired_hash(reordered) == desired_hash(forward)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("64", 64),
        ("64", "64000m"),
        ("1Gi", "1024Mi"),
        ("1Gi", "1073741824"),
        ("1k", "1000"),
        ("0.5", "500m"),
        (1.5, "1500m"),
        ("0", "0Gi"),
    ],
)
def test_equivalent_quantities_hash_alike(a: object, b: object) -> None:
    assert canonical_quantity(a) == canonical_quantity(b)
    assert desired_hash({"dcmProfileName": "x", "expectedResources": {"amd.com/gpu": a}}) == desired_hash(
        {"dcmProfileName": "x", "expectedResources": {"amd.com/gpu": b}}
    )


def test_absent_and_empty_expected_resources_are_the_same_state() -> None:
    assert desired_hash({"dcmProfileName": "spx"}) == desired_hash(
        {"dcmProfileName": "spx", "expectedResources": {}}
    )
    assert desired_hash({"dcmProfileName": "spx"}) == desired_hash(
        {"dcmProfileName": "spx", "expectedResources": None}
    )


@pytest.mark.parametrize(
    "change",
    [
        {"dcmProfileName": "spx"},
        {"expectedResources": {"amd.com/gpu": "8"}},
        {"expectedResources": {"amd.com/cpx_nps4": "64"}},
        {"expectedResources": {"amd.com/gpu": "64", "amd.com/other": "1"}},
        {"expectedResources": {}},
    ],
)
def test_what_changes_the_node_changes_the_hash(change: dict[str, Any]) -> None:
    assert desired_hash({**CPX, **change}) != desired_hash(CPX)


def test_canonical_state_only_has_node_relevant_fields() -> None:
    assert canonical_profile_state(CPX) == {
        "dcmProfileName": "cpx_nps4",
        "expectedResources": {"amd.com/gpu": "64"},
    }


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({}, "dcmProfileName"),
        ({"dcmProfileName": ""}, "dcmProfileName"),
        ({"dcmProfileName": 3}, "dcmProfileName"),
        (
            {"dcmProfileName": "x", "expectedResources": {"amd.com/gpu": "lots"}},
            "expectedResources[amd.com/gpu]",
        ),
        (
            {"dcmProfileName": "x", "expectedResources": {"amd.com/gpu": True}},
            "expectedResources[amd.com/gpu]",
        ),
        (
            {"dcmProfileName": "x", "expectedResources": {"amd.com/gpu": None}},
            "expectedResources[amd.com/gpu]",
        ),
        ({"dcmProfileName": "x", "expectedResources": ["amd.com/gpu"]}, "expectedResources"),
    ],
)
def test_unusable_specs_are_rejected_not_hashed(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        desired_hash(spec)


def test_hash_json_is_canonical() -> None:
    assert hash_json({"b": 1, "a": [1, "é"]}) == hash_json({"a": [1, "é"], "b": 1})
    assert hash_json({"a": 1}) != hash_json({"a": "1"})


_names = st.sampled_from(["amd.com/gpu", "amd.com/cpx_nps4", "amd.com/spx_nps1", "example.com/x", "memory"])
_amounts = st.integers(min_value=0, max_value=10**6)


@settings(max_examples=200, deadline=None)
@given(
    resources=st.dictionaries(_names, _amounts, max_size=5),
    description=st.text(max_size=20),
    order_seed=st.randoms(use_true_random=False),
    spelling=st.lists(st.sampled_from(["int", "str", "milli", "kilo"]), min_size=5, max_size=5),
)
def test_hash_ignores_description_key_order_and_spelling(
    resources: dict[str, int], description: str, order_seed: Any, spelling: list[str]
) -> None:
    """Property: any spelling, key order or description of the same state hashes alike."""
    base = {"dcmProfileName": "cpx", "expectedResources": {k: str(v) for k, v in resources.items()}}

    def spell(value: int, how: str) -> object:
        if how == "int":
            return value
        if how == "milli":
            return f"{value * 1000}m"
        if how == "kilo" and value % 1000 == 0 and value:
            return f"{value // 1000}k"
        return str(value)

    keys = list(resources)
    order_seed.shuffle(keys)
    respelled = {k: spell(resources[k], spelling[i % len(spelling)]) for i, k in enumerate(keys)}
    variant = {"description": description, "expectedResources": respelled, "dcmProfileName": "cpx"}
    assert desired_hash(variant) == desired_hash(base)

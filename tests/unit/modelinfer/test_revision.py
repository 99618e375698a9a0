"""The revision hash of a ModelInfer's roles, and the ControllerRevisions that record them."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.modelinfer.naming import LABEL_NAME, LABEL_REVISION
from aiplane.controllers.modelinfer.revision import (
    HASH_LABEL,
    REVISION_ALPHABET,
    REVISION_LENGTH,
    controller_revision,
    controller_revision_name,
    next_revision_number,
    revision_hash,
    revision_of,
    roles_from_controller_revision,
    with_current_replicas,
)
from tests.unit.modelinfer import container, model_infer, role, template

ROOT = Path(__file__).resolve().parents[3]
FIXED_ROLES: list[dict[str, Any]] = [
    {
        "name": "prefill",
        "replicas": 1,
        "workerReplicas": 1,
        "entryTemplate": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}},
    }
]


def test_pinned_value() -> None:
    # Pinned on purpose: the revision is stored in every pod's label and every ControllerRevision's
    # name, so a change to the hash function (canonical form, digest, encoding) would roll every group
    # of every ModelInfer on upgrade. If this fails, the change needs a migration, not a new constant.
    assert revision_hash(FIXED_ROLES) == "5nh9c4lhrg"
    assert revision_hash([]) == "72vvhzk8gd"


def test_format() -> None:
    h = revision_hash(FIXED_ROLES)
    assert len(h) == REVISION_LENGTH == 10
    assert set(h) <= set(REVISION_ALPHABET)
    assert REVISION_ALPHABET == "bcdfghjklmnpqrstvwxz2456789"


def test_role_replicas_are_not_part_of_the_revision() -> None:
    scaled = copy.deepcopy(FIXED_ROLES)
    scaled[0]["replicas"] = 7
    assert revision_hash(scaled) == revision_hash(FIXED_ROLES)
    del scaled[0]["replicas"]  # absent (defaulted later) is the same too
    assert revision_hash(scaled) == revision_hash(FIXED_ROLES)


def test_worker_replicas_and_templates_are() -> None:
    more_workers = copy.deepcopy(FIXED_ROLES)
    more_workers[0]["workerReplicas"] = 2
    assert revision_hash(more_workers) != revision_hash(FIXED_ROLES)
    new_image = copy.deepcopy(FIXED_ROLES)
    new_image[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    assert revision_hash(new_image) != revision_hash(FIXED_ROLES)
    labelled = copy.deepcopy(FIXED_ROLES)
    labelled[0]["entryTemplate"]["metadata"] = {"labels": {"a": "b"}}
    assert revision_hash(labelled) != revision_hash(FIXED_ROLES)


def test_key_order_and_nulls_do_not_matter_role_order_does() -> None:
    roles = [role("prefill", 1, 1), role("decode", 2, 1)]
    reordered = [dict(reversed(list(r.items()))) for r in roles]
    assert revision_hash(reordered) == revision_hash(roles)
    with_null = copy.deepcopy(roles)
    with_null[0]["entryTemplate"]["metadata"] = None
    assert revision_hash(with_null) == revision_hash(roles)
    assert revision_hash(list(reversed(roles))) != revision_hash(roles)


def test_rejects_what_json_cannot_carry() -> None:
    with pytest.raises(ValueError):
        revision_hash([{"name": "a", "x": float("nan")}])
    with pytest.raises(ValueError):
        revision_hash(["not a role"])  # type: ignore[list-item]


def test_controller_revision_round_trip() -> None:
    mi = model_infer("llama", namespace="team-a", uid="u-42")
    roles = mi["spec"]["template"]["roles"]
    rev = revision_hash(roles)
    cr = controller_revision(mi, rev, roles, 3)
    assert cr["apiVersion"] == "apps/v1" and cr["kind"] == "ControllerRevision"
    assert cr["metadata"]["name"] == controller_revision_name("llama", rev) == f"llama-{rev}"
    assert cr["metadata"]["namespace"] == "team-a"
    assert cr["metadata"]["labels"] == {LABEL_NAME: "llama", LABEL_REVISION: rev, HASH_LABEL: rev}
    assert cr["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "workload.volcano.sh/v1alpha1",
            "kind": "ModelInfer",
            "name": "llama",
            "uid": "u-42",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert cr["revision"] == 3
    assert revision_of(cr) == rev
    back = roles_from_controller_revision(cr)
    assert back == roles and back is not roles
    assert revision_hash(back) == rev
    back[0]["name"] = "changed"  # a deep copy: the cached object is untouched
    assert cr["data"]["spec"]["template"]["roles"][0]["name"] == "prefill"
    json.dumps(cr)  # plain JSON


def test_controller_revision_input_is_copied() -> None:
    mi = model_infer()
    roles = mi["spec"]["template"]["roles"]
    cr = controller_revision(mi, revision_hash(roles), roles, 1)
    roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "mutated"
    assert (
        cr["data"]["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"]
        != "mutated"
    )


@pytest.mark.parametrize("number", [-1, True, 1.0])
def test_controller_revision_rejects_bad_numbers(number: Any) -> None:
    with pytest.raises(ValueError):
        controller_revision(model_infer(), "abc", [], number)


@pytest.mark.parametrize(
    "data",
    [None, {}, {"spec": {}}, {"spec": {"template": {"roles": "x"}}}, {"spec": {"template": {"roles": [1]}}}],
)
def test_roles_from_a_foreign_revision_raise(data: Any) -> None:
    with pytest.raises(ValueError, match=r"data\.spec\.template\.roles"):
        roles_from_controller_revision({"metadata": {"name": "x"}, "data": data})


def test_next_revision_number() -> None:
    assert next_revision_number([]) == 1
    assert next_revision_number([{"revision": 2}, {"revision": 7}, {"revision": True}, {}]) == 8


def test_with_current_replicas() -> None:
    old = [role("prefill", 1, 1), role("gone", 3)]
    current = [role("prefill", 4, 2), role("decode", 2)]
    merged = with_current_replicas(old, current)
    assert [(r["name"], r["replicas"], r["workerReplicas"]) for r in merged] == [
        ("prefill", 4, 1),
        ("gone", 3, 0),
    ]
    assert old[0]["replicas"] == 1  # input untouched
    assert revision_hash(merged) == revision_hash(old)


# --- properties ----------------------------------------------------------------------------------

_LEAF = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans())
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
_ROLE = st.fixed_dictionaries(
    {
        "name": st.from_regex(r"[a-z]{1,6}", fullmatch=True),
        "replicas": st.integers(0, 5),
        "workerReplicas": st.integers(0, 5),
        "entryTemplate": st.fixed_dictionaries(
            {"spec": st.dictionaries(st.text(min_size=1, max_size=4), _JSON)}
        ),
    }
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = [(k, _shuffled(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(max_examples=200)
@given(
    roles=st.lists(_ROLE, min_size=1, max_size=4),
    replicas=st.lists(st.integers(0, 9), min_size=4),
    seed=st.integers(),
)
def test_invariant_under_role_replicas_and_key_order(
    roles: list[dict[str, Any]], replicas: list[int], seed: int
) -> None:
    other = _shuffled(copy.deepcopy(roles), random.Random(seed))
    for r, n in zip(other, replicas, strict=False):
        r["replicas"] = n
    assert revision_hash(other) == revision_hash(roles)


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, (*path, i))]
    return [path]


@settings(max_examples=200)
@given(roles=st.lists(_ROLE, min_size=1, max_size=4), data=st.data())
def test_sensitive_to_any_template_change(roles: list[dict[str, Any]], data: st.DataObject) -> None:
    paths = [p for p in _leaf_paths(roles) if p[1] != "replicas"]
    path = data.draw(st.sampled_from(paths))
    changed = copy.deepcopy(roles)
    target: Any = changed
    for key in path[:-1]:
        target = target[key]
    old = target[path[-1]]
    new = data.draw(_LEAF.filter(lambda v: json.dumps(v) != json.dumps(old)))
    target[path[-1]] = new
    assert revision_hash(changed) != revision_hash(roles)


def test_example_templates_hash_alike_in_a_fresh_process() -> None:
    # Stability across processes: the hash must not depend on PYTHONHASHSEED (no hash(), no set order).
    import subprocess
    import sys

    code = (
        "from aiplane.controllers.modelinfer.revision import revision_hash;"
        "from tests.unit.modelinfer import role, template, container;"
        "print(revision_hash([role('p', 2, 1, entry=template(container(requests={'cpu': '1', 'memory': '1Gi'})))]))"
    )
    expected = revision_hash(
        [role("p", 2, 1, entry=template(container(requests={"cpu": "1", "memory": "1Gi"})))]
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
            cwd=ROOT,
        )
        assert out.stdout.strip() == expected

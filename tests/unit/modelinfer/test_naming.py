"""Names and label keys of ModelInfer objects (reference §3), and ordinal parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.modelinfer import naming as n


def test_names_follow_the_upstream_contract() -> None:
    assert n.group_name("llama", 3) == "llama-3"
    assert n.role_id("decode", 1) == "decode-1"
    assert n.pod_name("llama-multinode", 0, "405b", 1, 0) == "llama-multinode-0-405b-1-0"
    assert n.pod_name("mi", 2, "prefill", 0, 3) == "mi-2-prefill-0-3"
    assert n.entry_pod_name("mi", 2, "prefill", 0) == "mi-2-prefill-0-0"
    assert n.service_name("mi", 2, "prefill", 0) == n.entry_pod_name("mi", 2, "prefill", 0)
    assert n.podgroup_name("mi", 7) == n.group_name("mi", 7) == "mi-7"


def test_label_and_annotation_keys() -> None:
    assert (
        n.LABEL_NAME,
        n.LABEL_GROUP_NAME,
        n.LABEL_ROLE,
        n.LABEL_ROLE_ID,
        n.LABEL_REVISION,
        n.LABEL_ENTRY,
    ) == (
        "modelinfer.volcano.sh/name",
        "modelinfer.volcano.sh/group-name",
        "modelinfer.volcano.sh/role",
        "modelinfer.volcano.sh/role-id",
        "modelinfer.volcano.sh/revision",
        "modelinfer.volcano.sh/entry",
    )
    assert n.ANNOTATION_GROUP_NAME == "scheduling.k8s.io/group-name"
    assert n.ANNOTATION_TASK_SPEC == "volcano.sh/task-spec"
    assert n.ANNOTATION_QUEUE_NAME == "scheduling.volcano.sh/queue-name"
    assert n.INJECTED_ENV_NAMES == ("GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mi-0", ("mi", 0)),
        ("mi-10", ("mi", 10)),
        ("a-b-c-42", ("a-b-c", 42)),
        ("llama-3-0", ("llama-3", 0)),
        ("mi", None),
        ("mi-", None),
        ("mi-01", None),  # never built by us: must not alias group 1
        ("mi-1a", None),
        ("mi--1", ("mi-", 1)),
        ("-5", ("", 5)),
    ],
)
def test_parse_ordinal(name: str, expected: tuple[str, int] | None) -> None:
    assert n.parse_ordinal(name) == expected


def test_ordinals_sort_numerically_not_as_strings() -> None:
    names = ["mi-10", "mi-2", "mi-1", "mi-0", "mi-11"]
    assert sorted(names) == ["mi-0", "mi-1", "mi-10", "mi-11", "mi-2"]  # upstream's bug
    assert sorted(names, key=lambda x: n.group_ordinal("mi", x) or 0) == [
        "mi-0",
        "mi-1",
        "mi-2",
        "mi-10",
        "mi-11",
    ]


def test_group_ordinal_needs_the_modelinfer_prefix() -> None:
    assert n.group_ordinal("llama-3", "llama-3-0") == 0
    assert n.group_ordinal("llama-3", "llama-3") is None
    assert n.group_ordinal("llama", "llama-3-0") is None  # a group of "llama-3", not of "llama"
    assert n.group_ordinal("mi", "other-1") is None
    assert n.group_ordinal("mi", "mi-007") is None


def test_role_replica_ordinal_and_worker_index() -> None:
    assert n.role_replica_ordinal("decode", "decode-12") == 12
    assert n.role_replica_ordinal("decode", "prefill-1") is None
    assert n.role_replica_ordinal("p-1", "p-1-0") == 0
    assert n.worker_index("mi-0-decode-1-3") == 3
    assert n.worker_index("mi-0-decode-1-0") == 0
    assert n.worker_index("no-ordinal-x") is None


_DNS_LABEL = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
_ORDINAL = st.integers(min_value=0, max_value=10**6)


@given(mi=_DNS_LABEL, g=_ORDINAL, role=_DNS_LABEL, r=_ORDINAL, k=_ORDINAL)
def test_names_parse_back(mi: str, g: int, role: str, r: int, k: int) -> None:
    assert n.group_ordinal(mi, n.group_name(mi, g)) == g
    assert n.role_replica_ordinal(role, n.role_id(role, r)) == r
    assert n.worker_index(n.pod_name(mi, g, role, r, k)) == k


@given(mi=_DNS_LABEL, ordinals=st.lists(_ORDINAL, unique=True))
def test_sorting_by_parsed_ordinal_is_numeric(mi: str, ordinals: list[int]) -> None:
    names = [n.group_name(mi, g) for g in ordinals]
    assert [
        n.group_ordinal(mi, x) for x in sorted(names, key=lambda x: n.group_ordinal(mi, x) or 0)
    ] == sorted(ordinals)

"""Invariants of the DGD → DCD decisions over generated graphs."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.selectors import dns1123_subdomain_errors, label_value_errors
from aiplane.controllers.dynamo.graph import desired_dcds, merge_envs, validate_graph
from aiplane.controllers.dynamo.naming import dns1035_label_errors, dns1123_label_errors, lws_name
from aiplane.controllers.dynamo.options import DynamoOptions

# Names near the limits, with the characters users get wrong (upper case, '_', '.', a leading digit).
_NAMES = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,45}[a-z0-9]", fullmatch=True),
    st.text(alphabet="abcxyz019-._ABC", min_size=1, max_size=70),
)
_ENV_NAMES = st.sampled_from(["A", "B", "C", "D", "PATH"])
_ENVS = st.lists(st.fixed_dictionaries({"name": _ENV_NAMES, "value": st.text(max_size=3)}), max_size=6)
_SERVICE = st.fixed_dictionaries(
    {},
    optional={
        "componentType": st.sampled_from(["frontend", "worker", "planner"]),
        "replicas": st.integers(0, 120),
        "multinode": st.fixed_dictionaries({"nodeCount": st.integers(2, 200)}),
        "dynamoNamespace": st.sampled_from(["", "shared"]),
        "envs": _ENVS,
        "labels": st.dictionaries(st.sampled_from(["team", "nvidia.com/dynamo-component"]), st.just("v")),
    },
)
_OPTIONS = st.builds(
    DynamoOptions,
    ingress_class=st.sampled_from(["", "nginx"]),
    istio_gateway=st.sampled_from(["", "istio-system/gw"]),
    ingress_tls_secret=st.sampled_from(["", "tls"]),
)


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"services": draw(st.dictionaries(_NAMES, _SERVICE, min_size=1, max_size=4))}
    if draw(st.booleans()):
        spec["envs"] = draw(_ENVS)
    metadata = {"name": draw(_NAMES), "namespace": "ns", "uid": "u"}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata,
        "spec": spec,
    }


@settings(max_examples=300, deadline=None)
@given(graphs(), _OPTIONS)
def test_building_twice_gives_the_same_objects_and_leaves_the_graph_alone(
    dgd: dict[str, Any], options: DynamoOptions
) -> None:
    if validate_graph(dgd):
        return
    before = copy.deepcopy(dgd)
    first = desired_dcds(dgd, options)
    assert desired_dcds(dgd, options) == first
    assert dgd == before
    assert len(first) == len(dgd["spec"]["services"])


@settings(max_examples=500, deadline=None)
@given(graphs())
def test_a_graph_without_problems_makes_only_valid_names(dgd: dict[str, Any]) -> None:
    if validate_graph(dgd):
        return
    for name, dcd in desired_dcds(dgd).items():
        service = dgd["spec"]["services"][dcd["spec"]["serviceName"]]
        assert dns1123_subdomain_errors(name) == []
        assert label_value_errors(name) == []  # the nvidia.com/selector pod selector
        for value in dcd["metadata"]["labels"].values():
            assert label_value_errors(value) == []
        if service.get("componentType") == "frontend":
            assert dns1035_label_errors(name) == []
        if "multinode" in service:
            nodes = service["multinode"]["nodeCount"]
            for replica in range(max(service.get("replicas", 1), 1)):
                lws = lws_name(name, replica)
                assert dns1035_label_errors(lws) == []
                assert dns1123_label_errors(f"{lws}-0-{nodes - 1}") == []
                assert label_value_errors(f"{lws}-0-0123456789") == []


@given(_ENVS, _ENVS)
def test_service_envs_win_over_graph_envs(
    graph_envs: list[dict[str, Any]], service_envs: list[dict[str, Any]]
) -> None:
    merged = merge_envs(graph_envs, service_envs)
    names = [env["name"] for env in merged]
    assert names == sorted({env["name"] for env in graph_envs + service_envs})
    for env in merged:
        from_service = [e for e in service_envs if e["name"] == env["name"]]
        from_graph = [e for e in graph_envs if e["name"] == env["name"]]
        assert env == (from_service or from_graph)[-1]

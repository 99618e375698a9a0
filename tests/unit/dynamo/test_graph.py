"""The DGD → DCD decisions: names, the graph's Dynamo namespace, validation and the DCD bodies."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aiplane.api.dynamo import DynamoComponentDeployment, DynamoGraphDeployment
from aiplane.controllers.dynamo.graph import (
    NamespaceConflictError,
    Problem,
    dcd_name,
    desired_dcds,
    graph_dynamo_namespace,
    merge_envs,
    multinode_problem,
    stale_dcds,
    validate_graph,
)
from aiplane.controllers.dynamo.options import DynamoOptions

UID = "dgd-uid"


def dgd(
    services: dict[str, dict[str, Any]],
    *,
    name: str = "graph",
    envs: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    backend: str | None = "vllm",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"services": services}
    if envs is not None:
        spec["envs"] = envs
    if backend is not None:
        spec["backendFramework"] = backend
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": UID}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata,
        "spec": spec,
    }


def owned(name: str, uid: str = UID, *, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "ownerReferences": [
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "DynamoGraphDeployment",
                "uid": uid,
                "controller": True,
            }
        ],
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata}


# --- names and the Dynamo namespace ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("graph", "key", "expected"),
    [
        ("g", "Frontend", "g-frontend"),
        ("llama", "VllmDecodeWorker", "llama-vllmdecodeworker"),
        ("a-1", "w", "a-1-w"),
    ],
)
def test_dcd_name_is_graph_dash_lowercased_key(graph: str, key: str, expected: str) -> None:
    assert dcd_name(graph, key) == expected


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        ({"A": None, "B": None}, "dynamo-graph"),
        ({"A": "shared", "B": "shared"}, "shared"),
        ({"A": "shared", "B": None}, "shared"),
        ({"A": "", "B": None}, "dynamo-graph"),
    ],
)
def test_graph_dynamo_namespace(namespaces: dict[str, str | None], expected: str) -> None:
    services = {k: ({"dynamoNamespace": v} if v is not None else {}) for k, v in namespaces.items()}
    assert graph_dynamo_namespace(dgd(services)) == expected


def test_conflicting_dynamo_namespaces_name_the_services_and_values() -> None:
    graph = dgd({"A": {"dynamoNamespace": "one"}, "B": {"dynamoNamespace": "two"}, "C": {}})
    with pytest.raises(NamespaceConflictError) as err:
        graph_dynamo_namespace(graph)
    assert "A='one'" in str(err.value) and "B='two'" in str(err.value) and "C" not in str(err.value)
    assert [p.path for p in validate_graph(graph)] == ["spec.services"]
    with pytest.raises(NamespaceConflictError):
        desired_dcds(graph)


# --- validate_graph ---------------------------------------------------------------------------------------


def _rules(problems: list[Problem]) -> str:
    return "\n".join(map(str, problems))


def test_a_plain_graph_has_no_problems() -> None:
    graph = dgd(
        {
            "Frontend": {"componentType": "frontend"},
            "VllmWorker": {"componentType": "worker", "replicas": 3, "multinode": {"nodeCount": 4}},
        }
    )
    assert validate_graph(graph) == []


@pytest.mark.parametrize(
    ("name", "services", "path", "fragment"),
    [
        ("g", {}, "spec.services", "at least one service is required"),
        ("g" * 64, {"w": {}}, "metadata.name", "nvidia.com/dynamo-graph-deployment-name label"),
        ("g", {"w_1": {}}, "spec.services[w_1]", "DNS-1123 subdomain"),
        ("g", {"W" * 64: {}}, f"spec.services[{'W' * 64}]", "nvidia.com/dynamo-component label"),
        # 253 is fine for the DCD and Deployment, but the DCD name is also the pod selector's value.
        ("g" * 40, {"w" * 30: {}}, f"spec.services[{'w' * 30}]", "pod selector label nvidia.com/selector"),
        ("1g", {"Frontend": {"componentType": "frontend"}}, "spec.services[Frontend]", "frontend's Service"),
        (
            "g",
            {"w": {"dynamoNamespace": "n" * 64}},
            "spec.services[w].dynamoNamespace",
            "dynamo-namespace label",
        ),
        ("g" * 57, {"w": {}}, "metadata.name", "dynamo-namespace label"),  # dynamo-<dgd>
        ("g", {"A": {}, "a": {}}, "spec.services[a]", "same DynamoComponentDeployment 'g-a' as service 'A'"),
        (
            "1g",
            {"w": {"multinode": {"nodeCount": 2}}},
            "spec.services[w]",
            "LeaderWorkerSet and its headless Service",
        ),
    ],
)
def test_validate_graph_names_the_field_and_the_limit(
    name: str, services: dict[str, dict[str, Any]], path: str, fragment: str
) -> None:
    problems = validate_graph(dgd(services, name=name))
    assert any(p.path == path and fragment in p.rule for p in problems), _rules(problems)


@pytest.mark.parametrize(
    ("dcd_length", "replicas", "nodes", "fragment"),
    [
        # <dcd>-0 + "-" + 10-character revision hash must be a 63-character label value.
        (52, 1, 2, "leader StatefulSet's controller-revision-hash"),
        # <dcd>-0-0 + revision hash: two characters less room.
        (50, 1, 2, "worker StatefulSet's controller-revision-hash"),
        # the highest replica index is the longest name: <dcd>-10-0-...
        (49, 11, 2, "worker StatefulSet's controller-revision-hash"),
        # the last worker pod, <dcd>-0-0-99999..., is a hostname (a DNS-1123 label).
        (50, 1, 10**9, "last worker pod"),
    ],
)
def test_multinode_children_limits(dcd_length: int, replicas: int, nodes: int, fragment: str) -> None:
    key = "w" * (dcd_length - 2)
    service = {"replicas": replicas, "multinode": {"nodeCount": nodes}}
    problems = validate_graph(dgd({key: service}, name="g"))
    assert any(fragment in p.rule for p in problems), _rules(problems)
    shorter = validate_graph(dgd({key[:-3]: service}, name="g")) if nodes < 10**9 else []
    assert not any(fragment in p.rule for p in shorter), _rules(shorter)


def test_autoscaling_maximum_counts_for_lws_names() -> None:
    key = "w" * 46  # a 48-character DCD: <dcd>-0-0-<hash> fits in 63, <dcd>-19-0-<hash> does not
    fits = {"replicas": 1, "multinode": {"nodeCount": 2}}
    assert validate_graph(dgd({key: fits}, name="g")) == []
    scaled = {**fits, "autoscaling": {"enabled": True, "maxReplicas": 20}}
    assert any("worker StatefulSet" in p.rule for p in validate_graph(dgd({key: scaled}, name="g")))


def test_single_node_services_do_not_check_lws_names() -> None:
    assert validate_graph(dgd({"w" * 55: {"replicas": 5}}, name="g")) == []


# --- multinode orchestrator -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("services", "lws_served", "expected"),
    [
        ({"w": {"multinode": {"nodeCount": 2}}}, False, "no multinode orchestrator available: w has"),
        ({"a": {"multinode": {}}, "b": {"multinode": {"nodeCount": 3}}}, False, "a, b have"),
        ({"w": {"multinode": {"nodeCount": 2}}}, True, None),
        ({"w": {}}, False, None),
        ({"w": {"multinode": {"nodeCount": 1}}}, False, None),
    ],
)
def test_multinode_problem(
    services: dict[str, dict[str, Any]], lws_served: bool, expected: str | None
) -> None:
    problem = multinode_problem(dgd(services), lws_served)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


# --- desired DCDs -----------------------------------------------------------------------------------------


def test_one_dcd_per_service_owned_by_the_graph() -> None:
    graph = dgd({"Frontend": {"componentType": "frontend", "replicas": 2}, "Worker": {"replicas": 1}})
    dcds = desired_dcds(graph)
    assert sorted(dcds) == ["graph-frontend", "graph-worker"]
    dcd = dcds["graph-worker"]
    assert dcd["metadata"]["namespace"] == "ns"
    assert dcd["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoGraphDeployment",
            "name": "graph",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert dcd["spec"]["serviceName"] == "Worker"
    assert dcd["spec"]["backendFramework"] == "vllm"
    assert dcd["spec"]["dynamoNamespace"] == "dynamo-graph"
    assert dcd["spec"]["replicas"] == 1
    # the body is a valid DCD for the CRD's model
    for body in dcds.values():
        DynamoComponentDeployment.model_validate(body)


def test_graph_labels_on_metadata_and_spec_labels() -> None:
    graph = dgd(
        {
            "Worker": {
                "labels": {"team": "a", "nvidia.com/dynamo-component": "spoofed"},
                "dynamoNamespace": "dn",
            }
        }
    )
    dcd = desired_dcds(graph)["graph-worker"]
    expected = {
        "nvidia.com/dynamo-component": "Worker",
        "nvidia.com/dynamo-namespace": "dn",
        "nvidia.com/dynamo-graph-deployment-name": "graph",
    }
    assert dcd["metadata"]["labels"] == expected
    assert dcd["spec"]["labels"] == {"team": "a", **expected}


def test_envs_graph_under_service_sorted_by_name() -> None:
    graph = dgd(
        {"w": {"envs": [{"name": "B", "value": "service"}, {"name": "A", "value": "service"}]}, "x": {}},
        envs=[{"name": "C", "value": "graph"}, {"name": "B", "value": "graph"}],
    )
    dcds = desired_dcds(graph)
    assert dcds["graph-w"]["spec"]["envs"] == [
        {"name": "A", "value": "service"},
        {"name": "B", "value": "service"},
        {"name": "C", "value": "graph"},
    ]
    assert dcds["graph-x"]["spec"]["envs"] == [
        {"name": "B", "value": "graph"},
        {"name": "C", "value": "graph"},
    ]
    assert "envs" not in desired_dcds(dgd({"w": {}}))["graph-w"]["spec"]


def test_merge_envs_ignores_malformed_entries() -> None:
    assert merge_envs([{"value": "x"}, "junk"], None) == []


@pytest.mark.parametrize(("value", "present"), [("true", True), ("false", True), (None, False)])
def test_enable_metrics_annotation_propagates(value: str | None, present: bool) -> None:
    graph = dgd(
        {"w": {"annotations": {"a": "b"}}},
        annotations={"nvidia.com/enable-metrics": value} if value else None,
    )
    annotations = desired_dcds(graph)["graph-w"]["spec"]["annotations"]
    assert annotations == ({"a": "b", "nvidia.com/enable-metrics": value} if present else {"a": "b"})


def test_planner_runs_as_planner_serviceaccount() -> None:
    graph = dgd(
        {"Planner": {"componentType": "planner", "extraPodSpec": {"nodeSelector": {"a": "b"}}}, "w": {}}
    )
    dcds = desired_dcds(graph)
    assert dcds["graph-planner"]["spec"]["extraPodSpec"] == {
        "nodeSelector": {"a": "b"},
        "serviceAccountName": "planner-serviceaccount",
    }
    assert "extraPodSpec" not in dcds["graph-w"]["spec"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (DynamoOptions(), {"enabled": False, "host": "graph", "hostSuffix": "local"}),
        (
            DynamoOptions(ingress_class="nginx", ingress_host_suffix="example.com", ingress_tls_secret="tls"),
            {
                "enabled": True,
                "host": "graph",
                "hostSuffix": "example.com",
                "ingressControllerClassName": "nginx",
                "tls": {"secretName": "tls"},
            },
        ),
        (
            DynamoOptions(istio_gateway="istio-system/gw"),
            {
                "enabled": True,
                "host": "graph",
                "hostSuffix": "local",
                "useVirtualService": True,
                "virtualServiceGateway": "istio-system/gw",
            },
        ),
    ],
)
def test_frontend_default_ingress(options: DynamoOptions, expected: dict[str, Any]) -> None:
    dcds = desired_dcds(dgd({"Frontend": {"componentType": "frontend"}, "w": {}}), options)
    assert dcds["graph-frontend"]["spec"]["ingress"] == expected
    assert "ingress" not in dcds["graph-w"]["spec"]


def test_frontend_keeps_its_own_ingress() -> None:
    own = {"enabled": True, "host": "mine"}
    dcds = desired_dcds(
        dgd({"Frontend": {"componentType": "frontend", "ingress": own}}), DynamoOptions(ingress_class="x")
    )
    assert dcds["graph-frontend"]["spec"]["ingress"] == own


def test_desired_dcds_do_not_alias_or_change_the_graph() -> None:
    graph = dgd(
        {"w": {"envs": [{"name": "A", "value": "1"}], "labels": {"x": "y"}}},
        envs=[{"name": "B", "value": "2"}],
    )
    before = copy.deepcopy(graph)
    dcds = desired_dcds(graph)
    dcds["graph-w"]["spec"]["envs"][0]["value"] = "changed"
    dcds["graph-w"]["spec"]["labels"]["x"] = "changed"
    assert graph == before


def test_a_typed_graph_round_trips() -> None:
    model = DynamoGraphDeployment.model_validate(
        dgd({"Frontend": {"componentType": "frontend", "replicas": 1}})
    )
    graph = model.model_dump(mode="json", exclude_none=True)
    assert validate_graph(graph) == []
    assert list(desired_dcds(graph)) == ["graph-frontend"]


# --- stale DCDs -------------------------------------------------------------------------------------------


def test_stale_dcds_are_owned_ones_whose_service_left() -> None:
    graph = dgd({"Frontend": {}, "Worker": {}})
    existing = [
        owned("graph-frontend"),
        owned("graph-worker"),
        owned("graph-oldworker"),
        owned("graph-gone", deleting=True),
        owned("graph-others", uid="someone-else"),
        {"metadata": {"name": "graph-unowned"}},
    ]
    assert stale_dcds(graph, existing) == ["graph-oldworker"]


def test_renaming_a_service_makes_its_old_dcd_stale() -> None:
    assert stale_dcds(dgd({"Decode": {}}), [owned("graph-prefill"), owned("graph-decode")]) == [
        "graph-prefill"
    ]

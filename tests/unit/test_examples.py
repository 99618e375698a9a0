"""The examples are valid, and broken copies of them are rejected with the field path and the rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from aiplane.api.manifests import check_document, check_file, iter_documents
from aiplane.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def _load(name: str, kind: str) -> dict[str, Any]:
    docs = list(iter_documents((EXAMPLES / name).read_text(encoding="utf-8")))
    doc: dict[str, Any] = next(d for d in docs if d["kind"] == kind)
    return doc


def test_every_example_kind_is_covered() -> None:
    kinds = {doc["kind"] for path in FILES for doc in iter_documents(path.read_text(encoding="utf-8"))}
    assert {
        "PartitioningProfile",
        "PartitioningPlan",
        "KaiwoConfig",
        "AIMNamespaceConfig",
        "ModelInfer",
        "DynamoGraphDeployment",
        "DynamoGraphDeploymentRequest",
    } <= kinds


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_is_valid(path: Path) -> None:
    results = check_file(path)
    assert results
    problems = [str(p) for checked in results for p in checked.problems]
    assert problems == []


def _roles(doc: dict[str, Any]) -> list[dict[str, Any]]:
    roles: list[dict[str, Any]] = doc["spec"]["template"]["roles"]
    return roles


Mutation = Callable[[dict[str, Any]], None]

BROKEN: list[tuple[str, str, str, Mutation, str, str]] = [
    # (file, kind, case, mutation, field path the message starts with, text the message must contain)
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "role name pattern",
        lambda d: _roles(d)[0].update(name="Prefill_1"),
        "spec.template.roles[0].name",
        '"Prefill_1" does not match ^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$',
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "role name too long",
        lambda d: _roles(d)[0].update(name="prefill-workers"),
        "spec.template.roles[0].name",
        "12",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "duplicate role names",
        lambda d: _roles(d)[1].update(name="prefill"),
        "spec.template.roles",
        "role names must be unique",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "partition not below replicas",
        lambda d: d["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].update(partition=2),
        "spec.rolloutStrategy.rollingUpdateConfiguration.partition",
        "partition must be less than replicas",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "too many roles",
        lambda d: _roles(d).extend(copy.deepcopy(_roles(d)[0]) | {"name": f"r{i}"} for i in range(3)),
        "spec.template.roles",
        "4",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "unknown recovery policy",
        lambda d: d["spec"].update(recoveryPolicy="Restart"),
        "spec.recoveryPolicy",
        "RoleRecreate",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "percent over 100",
        lambda d: d["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].update(maxSurge="150%"),
        "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
        "150%",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "typo inside the embedded PodSpec",
        lambda d: _roles(d)[0]["entryTemplate"]["spec"]["containers"][0].update(imagee="x"),
        "spec.template.roles[0].entryTemplate.spec.containers[0].imagee",
        "unknown field",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "missing workerReplicas",
        lambda d: _roles(d)[1].pop("workerReplicas"),
        "spec.template.roles[1].workerReplicas",
        "required",
    ),
    (
        "partitioning-plan.yaml",
        "PartitioningPlan",
        "maxParallel below 1",
        lambda d: d["spec"]["rollout"].update(maxParallel=0),
        "spec.rollout.maxParallel",
        "minimum 1",
    ),
    (
        "partitioning-plan.yaml",
        "PartitioningPlan",
        "no rules",
        lambda d: d["spec"].update(rules=[]),
        "spec.rules",
        "1",
    ),
    (
        "partitioning-plan.yaml",
        "PartitioningPlan",
        "typo in a field name",
        lambda d: d["spec"]["rollout"].update(maxParalel=5),
        "spec.rollout.maxParalel",
        "unknown field",
    ),
    (
        "partitioning-plan.yaml",
        "PartitioningPlan",
        "bad selector operator",
        lambda d: d["spec"]["rules"][0]["selector"]["matchExpressions"][0].update(operator=7),
        "spec.rules[0].selector.matchExpressions[0].operator",
        "string",
    ),
    (
        "partition-profiles.yaml",
        "PartitioningProfile",
        "expected resource not a quantity",
        lambda d: d["spec"]["expectedResources"].update({"amd.com/gpu": "sixty-four"}),
        "spec.expectedResources[amd.com/gpu]",
        "sixty-four",
    ),
    (
        "partition-profiles.yaml",
        "PartitioningProfile",
        "no DCM profile name",
        lambda d: d["spec"].pop("dcmProfileName"),
        "spec.dcmProfileName",
        "required",
    ),
    (
        "dynamo-vllm-disagg.yaml",
        "DynamoGraphDeployment",
        "PVC to create without a size",
        lambda d: d["spec"]["pvcs"][0].pop("size"),
        "spec.pvcs[0]",
        "storageClass, size and volumeAccessMode are required when create is true",
    ),
    (
        "dynamo-vllm-disagg.yaml",
        "DynamoGraphDeployment",
        "unknown backend",
        lambda d: d["spec"].update(backendFramework="tgi"),
        "spec.backendFramework",
        "vllm",
    ),
    (
        "dynamo-vllm-disagg.yaml",
        "DynamoGraphDeployment",
        "multinode of one node",
        lambda d: d["spec"]["services"]["VllmDecodeWorker"].update(multinode={"nodeCount": 1}),
        "spec.services[VllmDecodeWorker].multinode.nodeCount",
        "minimum 2",
    ),
    (
        "dgdr-70b.yaml",
        "DynamoGraphDeploymentRequest",
        "no SLA",
        lambda d: d["spec"].pop("sla"),
        "spec.sla",
        "required",
    ),
    (
        "dgdr-70b.yaml",
        "DynamoGraphDeploymentRequest",
        "TTFT as text",
        lambda d: d["spec"]["sla"].update(ttft="fast"),
        "spec.sla.ttft",
        "integer",
    ),
    (
        "kaiwoconfig.yaml",
        "KaiwoConfig",
        "duration in days",
        lambda d: d["spec"]["resourceMonitoring"].update(terminateUnderutilizedAfter="1d"),
        "spec.resourceMonitoring.terminateUnderutilizedAfter",
        "^([0-9]+(s|m|h))+$",
    ),
    (
        "aimnamespaceconfig.yaml",
        "AIMNamespaceConfig",
        "unknown credential provider",
        lambda d: d["spec"]["credentials"].update(minio=[{"endpointUrl": "x"}]),
        "spec.credentials.minio",
        "unknown field",
    ),
    (
        "modelinfer-1p2d.yaml",
        "ModelInfer",
        "name not DNS-1123",
        lambda d: d["metadata"].update(name="Llama_70B"),
        "metadata.name",
        "DNS-1123",
    ),
    (
        "partitioning-plan.yaml",
        "PartitioningPlan",
        "namespace on a cluster-scoped kind",
        lambda d: d["metadata"].update(namespace="default"),
        "metadata.namespace",
        "cluster-scoped",
    ),
]


@pytest.mark.parametrize(
    ("file", "kind", "case", "mutate", "path", "text"), BROKEN, ids=[case[2] for case in BROKEN]
)
def test_broken_copy_is_rejected_precisely(
    file: str, kind: str, case: str, mutate: Mutation, path: str, text: str
) -> None:
    doc = copy.deepcopy(_load(file, kind))
    mutate(doc)
    checked = check_document(doc, file, 1)
    messages = [p.message for p in checked.problems]
    assert any(m.startswith(f"{path}:") and text in m for m in messages), messages
    assert all(str(p).startswith(f"{file}#1 {kind}/") for p in checked.problems)


def test_the_issue_example_message_exactly() -> None:
    doc = copy.deepcopy(_load("modelinfer-1p2d.yaml", "ModelInfer"))
    doc["metadata"]["name"] = "llama"
    _roles(doc)[0]["name"] = "Prefill_1"
    checked = check_document(doc, "modelinfer.yaml", 1)
    assert [str(p) for p in checked.problems] == [
        'modelinfer.yaml#1 ModelInfer/llama: spec.template.roles[0].name: "Prefill_1" does not match '
        "^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
    ]


def test_validate_command_exit_status_and_locations(tmp_path: Path) -> None:
    good = EXAMPLES / "partitioning-plan.yaml"
    plan = _load("partitioning-plan.yaml", "PartitioningPlan")
    plan["spec"]["rollout"]["maxParallel"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}}, plan]),
        encoding="utf-8",
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(good)])
    assert ok.exit_code == 0, ok.output
    failed = runner.invoke(app, ["validate", str(good), str(bad)])
    assert failed.exit_code == 1
    assert f"{bad}#2 PartitioningPlan/mi300x-inference-cpx: spec.rollout.maxParallel:" in failed.output
    assert f"{bad}#1 ConfigMap/ok: valid" in failed.output
    assert "2 valid, 1 invalid" in failed.output


def test_unparseable_and_unknown_documents_are_reported(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n", encoding="utf-8")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(broken), str(unknown)])
    assert result.exit_code == 1
    assert (
        f"{broken}: not valid YAML: line 2, column 1: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence that began at line 1, column 7)"
    ) in result.output
    assert f"{unknown}#1 Widget/w: unknown kind Widget in example.com/v1" in result.output


def test_secret_values_are_never_echoed(tmp_path: Path) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf"},
        "stringData": {"token": ["hf_super_secret_value"]},
    }
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(secret), encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    assert "hf_super_secret_value" not in result.output
    assert "stringData.token" in result.output

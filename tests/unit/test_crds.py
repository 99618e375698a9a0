"""The generated CRDs are ones kube-apiserver accepts and kubectl users can work with."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from aiplane.api.crdgen import all_crds, crd_filename, to_yaml
from aiplane.cli import app
from aiplane.schema.structural import structural_errors

ROOT = Path(__file__).resolve().parents[2]
CRDS = all_crds()
IDS = [crd["metadata"]["name"] for crd in CRDS]

# Short names and resource names kubectl already resolves on a Kubernetes 1.37 cluster with the
# third-party APIs we create (Volcano, Kueue, Gateway API, Istio, LWS, AMD GPU operator).
TAKEN_NAMES = set(
    [
        "cs",
        "cm",
        "ep",
        "ev",
        "limits",
        "ns",
        "no",
        "pvc",
        "pv",
        "po",
        "podtemplate",
        "rc",
        "quota",
        "sa",
        "svc",
        "crd",
        "crds",
        "ds",
        "deploy",
        "rs",
        "sts",
        "hpa",
        "cj",
        "csr",
        "ing",
        "netpol",
        "pdb",
        "pc",
        "sc",
        "ingressclass",
        "csinode",
        "volumeattachment",
        "lease",
        "ep",
        "endpointslice",
        "role",
        "rolebinding",
        "clusterrole",
        "clusterrolebinding",
        "job",
        "cronjob",
        "pod",
        "node",
        "service",
        "secret",
        "configmap",
        "event",
        "namespace",
        "deployment",
        "statefulset",
        "daemonset",
        "replicaset",
        "pg",
        "podgroup",
        "podgroups",
        "vcjob",
        "vj",
        "queue",
        "q",
        "hypernode",
        "hn",
        "cq",
        "clusterqueue",
        "lq",
        "localqueue",
        "rf",
        "flavor",
        "flavors",
        "wl",
        "workload",
        "workloads",
        "gtw",
        "gateway",
        "httproute",
        "vs",
        "virtualservice",
        "lws",
        "leaderworkerset",
        "deviceconfig",
        "gpu",
    ]
)


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return version


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = _version(crd)["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("crd", CRDS, ids=IDS)
def test_crd_is_a_valid_apiextensions_v1_object(crd: dict[str, Any]) -> None:
    kubernetes_validate.validate(crd, "1.37.0", strict=True)


@pytest.mark.parametrize("crd", CRDS, ids=IDS)
def test_crd_schema_is_structural(crd: dict[str, Any]) -> None:
    assert structural_errors(_schema(crd)) == []


def test_structural_check_rejects_what_kube_apiserver_rejects() -> None:
    """The check above can fail: an untyped field and a $ref are both reported."""
    bad = json.loads(json.dumps(_schema(CRDS[0])))
    del bad["properties"]["spec"]["type"]
    bad["properties"]["spec"]["properties"]["x"] = {"$ref": "#/definitions/X"}
    errors = structural_errors(bad)
    assert any("properties[spec].type" in e for e in errors), errors
    assert any("$ref" in e for e in errors), errors


def test_committed_crds_equal_the_generated_ones() -> None:
    committed = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "deploy" / "crds").glob("*.yaml")}
    generated = {crd_filename(crd): to_yaml(crd) for crd in CRDS}
    assert committed.keys() == generated.keys(), "run: aiplane crds --output deploy/crds"
    stale = [name for name in generated if committed[name] != generated[name]]
    assert not stale, f"deploy/crds is stale for {stale}: run `aiplane crds --output deploy/crds`"


def test_crds_command_prints_a_stream_of_every_crd() -> None:
    result = CliRunner().invoke(app, ["crds"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in docs] == IDS


def test_names_are_unique_and_do_not_shadow_built_in_or_third_party_kinds() -> None:
    seen: set[str] = set()
    for crd in CRDS:
        names = crd["spec"]["names"]
        own = [names["plural"], names["singular"], *names.get("shortNames", [])]
        for name in own:
            assert name not in TAKEN_NAMES, (
                f"{crd['metadata']['name']}: {name!r} already means something to kubectl"
            )
            assert name not in seen, f"{name!r} is used by two of our CRDs"
            seen.add(name)
        assert "aiplane" in names["categories"]


SCOPES = {
    "PartitioningProfile": "Cluster",
    "PartitioningPlan": "Cluster",
    "NodePartitioning": "Cluster",
    "KaiwoConfig": "Cluster",
    "AIMNamespaceConfig": "Namespaced",
    "ModelInfer": "Namespaced",
    "DynamoGraphDeployment": "Namespaced",
    "DynamoComponentDeployment": "Namespaced",
    "DynamoGraphDeploymentRequest": "Namespaced",
}


@pytest.mark.parametrize("crd", CRDS, ids=IDS)
def test_scope_and_status_subresource(crd: dict[str, Any]) -> None:
    kind = crd["spec"]["names"]["kind"]
    assert crd["spec"]["scope"] == SCOPES[kind]
    has_status = "status" in _schema(crd)["properties"]
    assert ("status" in _version(crd).get("subresources", {})) == has_status
    # The seeds' two config kinds are spec-only; both got a status here (docs/api.md).
    assert has_status


@pytest.mark.parametrize("kind", ["ModelInfer", "DynamoComponentDeployment"])
def test_scale_subresource_points_at_real_fields(kind: str) -> None:
    crd = next(c for c in CRDS if c["spec"]["names"]["kind"] == kind)
    scale = _version(crd)["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    props = _schema(crd)["properties"]
    assert props["spec"]["properties"]["replicas"]["type"] == "integer"
    assert props["status"]["properties"]["replicas"]["type"] == "integer"
    assert props["status"]["properties"]["labelSelector"]["type"] == "string"


def _resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in re.sub(r"\[\?\(@\.type==[\"'][^\"']+[\"']\)\]", ".[]", json_path).strip(".").split("."):
        if node is None:
            return None
        if part == "metadata":
            return {"type": "object"}
        if part == "[]":
            node = node.get("items")
            continue
        node = node.get("properties", {}).get(part)
    return node


@pytest.mark.parametrize("crd", CRDS, ids=IDS)
def test_printer_columns_point_at_fields_of_the_right_type(crd: dict[str, Any]) -> None:
    columns = _version(crd).get("additionalPrinterColumns", [])
    assert columns, "kubectl get would show only NAME"
    assert columns[-1]["name"] == "Age"
    for column in columns:
        node = _resolve(_schema(crd), column["jsonPath"])
        assert node is not None, f"column {column['name']}: {column['jsonPath']} is not a field"
        if column["type"] in ("integer", "boolean", "string"):
            assert node.get("type") == column["type"], column


def _rules(schema: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return found


@pytest.mark.parametrize(
    ("kind", "fragment"),
    [
        ("PartitioningPlan", "oldSelf.dryRun"),
        ("ModelInfer", "exists_one(y, y.name == x.name)"),
        ("ModelInfer", ".partition < self.replicas"),
        ("DynamoGraphDeployment", "has(self.storageClass) && has(self.size) && has(self.volumeAccessMode)"),
    ],
)
def test_upstream_cel_rules_are_present(kind: str, fragment: str) -> None:
    crd = next(c for c in CRDS if c["spec"]["names"]["kind"] == kind)
    assert any(fragment in rule for rule in _rules(_schema(crd)))


def test_large_crds_are_the_ones_the_readme_says_to_apply_server_side() -> None:
    """Client-side apply stores the object in a 256 KiB annotation; larger CRDs need --server-side."""
    large = sorted(crd["metadata"]["name"] for crd in CRDS if len(json.dumps(crd)) > 256 * 1024)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert large, "no CRD is large any more: the README's --server-side advice can go"
    assert "kubectl apply --server-side -f deploy/crds/" in readme


def test_the_dgdr_crd_freezes_the_spec_in_the_states_the_controller_does() -> None:
    """The admission rule and the controller agree on when a DGDR's spec no longer changes."""
    from aiplane.api.dynamo import FROZEN_STATES
    from aiplane.controllers.dynamo.request_decide import IMMUTABLE

    assert set(FROZEN_STATES) == set(IMMUTABLE)

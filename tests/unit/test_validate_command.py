"""``aiplane validate``: a directory is its manifests, and "valid" means what the controllers accept."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from aiplane.cli import app
from aiplane.controllers.dynamo.graph import validate_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _graph(service: str) -> dict[str, object]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "llama-disagg", "namespace": "team-a"},
        "spec": {
            "backendFramework": "vllm",
            "services": {service: {"componentType": "worker", "replicas": 1}},
        },
    }


def test_a_directory_is_validated_file_by_file() -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    for name in files:
        assert f"{EXAMPLES / name}#1 " in result.output
    documents = sum(1 for p in EXAMPLES.glob("*.yaml") for d in yaml.safe_load_all(p.read_text()) if d)
    assert result.output.splitlines()[-1] == f"{documents} valid, 0 invalid"


def test_a_service_name_the_controller_refuses_is_invalid_here_too(tmp_path: Path) -> None:
    long_name = "VllmDecodeWorker" + "X" * 60
    manifest = tmp_path / "dgd.yaml"
    manifest.write_text(yaml.safe_dump(_graph(long_name)), encoding="utf-8")
    # The controller refuses it (its DCD name would be no valid label value) ...
    refused = [str(p) for p in validate_graph(_graph(long_name))]
    assert refused
    # ... and aiplane validate says the same, in the same words.
    result = CliRunner().invoke(app, ["validate", str(manifest)])
    assert result.exit_code == 1, result.output
    for problem in refused:
        assert problem in result.output
    assert result.output.splitlines()[-1] == "0 valid, 1 invalid"
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(_graph("VllmDecodeWorker")), encoding="utf-8")
    assert CliRunner().invoke(app, ["validate", str(ok)]).exit_code == 0

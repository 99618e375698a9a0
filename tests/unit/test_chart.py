"""The Helm chart, rendered and linted by Helm's own engine (libhelm, from helm-python-sdk)."""

from __future__ import annotations

from typing import Any

import helm_python
import yaml

from aiplane.api.crdgen import all_crds, crd_filename, to_yaml
from aiplane.controllers import registry
from aiplane.kube import rbac
from tests.chart_helpers import CHART, INSTALL_YAML, install_yaml, render

OPTIONAL: dict[str, Any] = {
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    "controllers": "modelinfer,dynamographdeployment",
    "maxConcurrentReconciles": 3,
    "resourceMonitoring": {"enabled": True, "metricsEndpoint": "http://prom:9090", "pollingInterval": "60s"},
    "dynamo": {"profilerImage": "nvcr.io/nvidia/ai-dynamo/profiler:1", "ingressControllerClassName": "nginx"},
    "podDisruptionBudget": {"enabled": False},
}


def _kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _args(docs: list[dict[str, Any]]) -> list[str]:
    return list(_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])


def test_helm_lint_finds_no_warning_with_defaults_or_optional_parts() -> None:
    for values in (None, OPTIONAL):
        report = helm_python.lint(str(CHART), values, strict=True)
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not problems and not report["errors"], (values, report)


def test_default_render_is_a_two_replica_leader_elected_restricted_operator() -> None:
    docs = render()
    assert {d["kind"] for d in docs} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
    }
    deploy = _kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deploy["spec"]["replicas"] == 2
    assert container["image"] == "aiplane:0.1.0"
    assert "--leader-elect" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["runAsNonRoot"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["securityContext"]["runAsNonRoot"] and pod["serviceAccountName"] == "aiplane"
    assert pod["terminationGracePeriodSeconds"] > 30  # longer than --shutdown-timeout
    assert _kind(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_every_run_flag_the_values_set_exists_in_aiplane_run() -> None:
    """A flag the chart passes that `aiplane run` does not know would crash-loop the pod."""
    from typer.main import get_command

    from aiplane.cli import app

    run = get_command(app).commands["run"]  # type: ignore[attr-defined]
    known = {opt for param in run.params for opt in param.opts}
    for values in (None, OPTIONAL):
        flags = {a.split("=", 1)[0] for a in _args(render(values)) if a.startswith("--")}
        assert flags <= known, flags - known


def test_optional_values_reach_the_flags_and_the_service_monitor() -> None:
    docs = render(OPTIONAL)
    args = _args(docs)
    assert "--controllers=modelinfer,dynamographdeployment" in args
    assert "--max-concurrent-reconciles=3" in args
    assert "--profiler-image=nvcr.io/nvidia/ai-dynamo/profiler:1" in args
    env = {
        e["name"]: e["value"]
        for e in _kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["RESOURCE_MONITORING_ENABLED"] == "true"
    monitor = _kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]


def test_cluster_role_is_what_the_controllers_declare() -> None:
    """`aiplane rbac` (each controller's PERMISSIONS) and the chart's ClusterRole are the same rules."""
    declared = [p for perms in registry.permissions().values() for p in perms]
    expected = rbac.cluster_role("x", declared)["rules"]
    assert _kind(render(), "ClusterRole")["rules"] == expected
    role = _kind(render(), "Role")
    assert role["rules"] == rbac.role("x", "y", rbac.LEADER_ELECTION)["rules"]
    assert role["metadata"]["namespace"] == "aiplane-system"


def test_chart_crds_are_the_generated_crds() -> None:
    files = {p.name: p.read_text(encoding="utf-8") for p in (CHART / "crds").glob("*.yaml")}
    assert files == {crd_filename(crd): to_yaml(crd) for crd in all_crds()}


def test_plain_manifests_are_the_chart_rendered_with_defaults() -> None:
    assert INSTALL_YAML.read_text(encoding="utf-8") == install_yaml(), (
        "deploy/install.yaml is stale: python -m tests.chart_helpers > deploy/install.yaml"
    )
    kinds = [d["kind"] for d in yaml.safe_load_all(INSTALL_YAML.read_text(encoding="utf-8")) if d]
    assert kinds[0] == "Namespace" and kinds.count("CustomResourceDefinition") == len(all_crds())


def test_the_dockerfile_runs_aiplane_run_as_the_user_the_chart_expects() -> None:
    """The chart passes flags only: the image's entrypoint must be `aiplane run`, as a non-root uid."""
    lines = (CHART.parents[2] / "Dockerfile").read_text(encoding="utf-8").splitlines()
    assert 'ENTRYPOINT ["aiplane", "run"]' in lines
    pod = _kind(render(), "Deployment")["spec"]["template"]["spec"]
    uid = pod["securityContext"]["runAsUser"]
    assert f"USER {uid}:{uid}" in lines and uid != 0

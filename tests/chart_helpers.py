"""Render the Helm chart with Helm's own engine (helm-python-sdk bundles libhelm), and build the plain
manifests (deploy/install.yaml) from it.

``python -m tests.chart_helpers > deploy/install.yaml`` regenerates the plain manifests after a chart
change; tests/unit/test_chart.py fails until it is done.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "aiplane"
INSTALL_YAML = ROOT / "deploy" / "install.yaml"
RELEASE = "aiplane"
NAMESPACE = "aiplane-system"

# The order helm install creates kinds in (pkg/release/util/kind_sorter.go), for the kinds we render.
_INSTALL_ORDER = (
    "Namespace",
    "PodDisruptionBudget",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
)


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's templates rendered as ``helm template`` would (CRDs not included), in install order."""
    import helm_python

    chart = helm_python.Chart.load(str(CHART))
    rendered = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = [
        doc
        for path, text in sorted(rendered.items())
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    rank = {kind: i for i, kind in enumerate(_INSTALL_ORDER)}
    return sorted(docs, key=lambda d: rank.get(d["kind"], len(rank)))


def chart_crds() -> list[str]:
    """The chart's crds/ files, by file name."""
    return [p.read_text(encoding="utf-8") for p in sorted((CHART / "crds").glob("*.yaml"))]


def install_yaml() -> str:
    """deploy/install.yaml: the namespace, the CRDs, then the chart rendered with its defaults."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    header = (
        "# Generated from deploy/helm/aiplane with its default values (release aiplane, namespace\n"
        "# aiplane-system) by `python -m tests.chart_helpers`; do not edit. Apply with\n"
        "#   kubectl apply --server-side -f deploy/install.yaml\n"
    )
    parts = [yaml.safe_dump(namespace, sort_keys=False)]
    parts += [text.removeprefix("---\n") for text in chart_crds()]
    parts += [yaml.safe_dump(doc, sort_keys=False) for doc in render()]
    return header + "---\n" + "---\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(install_yaml())

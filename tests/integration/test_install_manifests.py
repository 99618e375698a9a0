"""The chart's output and deploy/install.yaml apply to the embedded cluster with the real kubectl."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from aiplane.sim.cluster import EmbeddedCluster
from tests.chart_helpers import INSTALL_YAML, NAMESPACE, render

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


async def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = await asyncio.to_thread(
        subprocess.run,
        [KUBECTL, *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


async def test_plain_manifests_apply_server_side_and_every_object_exists(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(install_crds=False)
    await cluster.start()
    try:
        kubeconfig = tmp_path / "kubeconfig"
        cluster.write_kubeconfig(kubeconfig)
        await _kubectl(kubeconfig, "apply", "--server-side", "-f", str(INSTALL_YAML))
        names = await _kubectl(
            kubeconfig,
            "-n",
            NAMESPACE,
            "get",
            "deployment,serviceaccount,service,poddisruptionbudget,role,rolebinding",
            "-o",
            "name",
        )
        for expected in (
            "deployment.apps/aiplane",
            "serviceaccount/aiplane",
            "service/aiplane-metrics",
            "poddisruptionbudget.policy/aiplane",
            "role.rbac.authorization.k8s.io/aiplane-leader-election",
            "rolebinding.rbac.authorization.k8s.io/aiplane-leader-election",
        ):
            assert expected in names.split(), names
        cluster_wide = await _kubectl(kubeconfig, "get", "clusterrole,clusterrolebinding,crd", "-o", "name")
        assert "clusterrole.rbac.authorization.k8s.io/aiplane-manager" in cluster_wide
        assert "customresourcedefinition.apiextensions.k8s.io/modelinfers.workload.volcano.sh" in cluster_wide
        # The CRDs are served: kubectl can list their objects.
        await _kubectl(kubeconfig, "get", "modelinfers,dgd,partitioningplans", "-A")

        # The chart rendered with another value applies over it (what helm upgrade would change).
        stream = "---\n".join(yaml.safe_dump(d) for d in render({"replicaCount": 3}))
        await _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=stream)
        replicas = await _kubectl(
            kubeconfig, "-n", NAMESPACE, "get", "deployment/aiplane", "-o", "jsonpath={.spec.replicas}"
        )
        assert replicas == "3"
    finally:
        await cluster.stop()

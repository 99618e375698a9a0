"""A partitioning rollout on the real control plane: kube-apiserver's eviction and PodDisruptionBudgets,
kube-scheduler, kube-controller-manager's DaemonSet and disruption controllers and kwok's pods are the
real ones; only the hardware is simulated, by ``aiplane hardware`` out of process, and the operator runs
as ``aiplane run``. The test has its own control plane: it repartitions the nodes the session's shares.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import DEPLOYMENTS, EVENTS, NODES, PDBS, PODS, resource_for
from aiplane.sim.hardware import amd_gpu
from tests.polling import eventually

realcluster = pytest.importorskip("aiplane.realcluster")  # the real tier's control plane launcher

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
AIPLANE = [sys.executable, "-m", "aiplane.cli"]
INFERENCE = ["mi300x-0", "mi300x-1", "mi300x-2", "mi300x-3"]
NS = "default"
PLAN = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


@pytest.fixture(scope="module")
def cluster(kube_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started = realcluster.start_real_cluster(
        tmp_path_factory.mktemp("hw") / "cluster", bin_dir=kube_bin, install_crds=True, tie_to_parent=True
    )
    yield started
    started.stop()


@pytest.fixture
async def client(cluster: Any) -> AsyncIterator[HttpKubeClient]:
    http = await HttpKubeClient.from_kubeconfig(str(cluster.kubeconfig))
    yield http
    await http.close()


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*AIPLANE, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _workload() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two one-GPU replicas on the inference pool, guarded by a budget that lets one go at a time."""
    labels = {"app": "serve"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"aiplane.io/pool": "inference"},
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.example/serve:1",
                            "resources": {"limits": {amd_gpu.RESOURCE: "1"}},
                        }
                    ],
                },
            },
        },
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "serve", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }
    return deployment, pdb


async def _available(client: HttpKubeClient) -> int:
    status = (await client.get(DEPLOYMENTS, "serve", NS)).get("status") or {}
    return int(status.get("availableReplicas") or 0)


async def test_a_partitioning_rollout_with_the_simulated_hardware_on_the_real_control_plane(
    cluster: Any, client: HttpKubeClient
) -> None:
    kubeconfig = str(cluster.kubeconfig)
    hardware = _spawn("hardware", "--kubeconfig", kubeconfig, "--dcm-delay", "0.3")
    operator = _spawn(
        "run",
        "--kubeconfig",
        kubeconfig,
        "--controllers",
        "partitioningprofile,partitioningplan,nodepartitioning",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    )
    try:
        deployment, pdb = _workload()
        await client.create(DEPLOYMENTS, deployment, namespace=NS)
        await client.create(PDBS, pdb, namespace=NS)
        await eventually(lambda: _available_is(client, 2), 60, "the workload available on kwok's nodes")
        before = {p["metadata"]["name"] for p in (await client.list(PODS, NS))["items"]}

        async def plugins_running() -> bool:
            assert hardware.poll() is None, _stop(hardware)[1]
            pods = (await client.list(PODS, amd_gpu.NAMESPACE))["items"]
            running = [
                p
                for p in pods
                if p["metadata"]["labels"].get(amd_gpu.APP_LABEL) == amd_gpu.DEVICE_PLUGIN
                and p["status"].get("phase") == "Running"
            ]
            return len(running) == 6

        await eventually(plugins_running, 60, "the device plugin Running on every AMD node (kwok)")
        for path in ("examples/partition-profiles.yaml", "examples/partitioning-plan.yaml"):
            await _apply(client, ROOT / path)

        lowest = 2

        async def completed() -> bool:
            nonlocal lowest
            assert operator.poll() is None, _stop(operator)[1]
            lowest = min(lowest, await _available(client))
            plan = await client.get(PLAN, "mi300x-inference-cpx")
            return (plan.get("status") or {}).get("phase") == "Completed"

        await eventually(completed, 120, "the plan Completed")
        for name in INFERENCE:
            node = await client.get(NODES, name)
            labels = node["metadata"]["labels"]
            assert labels[amd_gpu.PROFILE_LABEL] == "cpx_nps4"
            assert labels[amd_gpu.STATE_LABEL] == amd_gpu.STATE_SUCCESS
            assert node["status"]["allocatable"][amd_gpu.RESOURCE] == "64"
            assert node["status"]["capacity"][amd_gpu.RESOURCE] == "64"
            assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
        assert lowest >= 1, "the PodDisruptionBudget held: one replica served at every poll"
        await eventually(lambda: _available_is(client, 2), 60, "the workload back to 2 replicas")
        after = {p["metadata"]["name"] for p in (await client.list(PODS, NS))["items"]}
        assert before - after, "the drain evicted the workload's pods (the real Eviction API)"
        listed = await client.list(EVENTS, NS, field_selector="reason=SuccessfullyPartitioned")
        assert {e["involvedObject"]["name"] for e in listed["items"]} == set(INFERENCE)
    finally:
        results = {"operator": _stop(operator), "hardware": _stop(hardware)}
    for name, (code, err) in results.items():
        assert code == 0, f"{name}: {err[-3000:]}"


async def _available_is(client: HttpKubeClient, count: int) -> bool:
    return await _available(client) == count


async def _apply(client: HttpKubeClient, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if doc:
            await client.apply(
                resource_for(doc["apiVersion"], doc["kind"]), doc, field_manager="test", force=True
            )

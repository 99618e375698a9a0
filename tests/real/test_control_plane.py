"""The real control plane does what the project's suites will rely on: upstream kube-apiserver v1.37.2
serving, the fleet's GPU nodes Ready under kwok, the real scheduler placing pods by extended resource,
the real disruption controller guarding evictions, and ``cluster down`` leaving nothing running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from aiplane.realcluster import RealCluster
from tests.conformance.conftest import KUBECTL
from tests.polling import eventually

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(real_cluster.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"real-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def kubectl(cluster: RealCluster, *args: str) -> str:
    return subprocess.run(
        [KUBECTL, f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _gpu_deployment(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "server",
        "image": "registry.example/server:1",
        "resources": {"limits": {"amd.com/gpu": str(gpus)}},
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def test_kubectl_sees_a_ready_kube_apiserver_at_the_built_version(real_cluster: RealCluster) -> None:
    assert kubectl(real_cluster, "get", "--raw", "/readyz") == "ok"
    version = json.loads(kubectl(real_cluster, "version", "--output=json"))
    assert version["serverVersion"]["gitVersion"] == "v1.37.2"
    assert version["serverVersion"]["minor"] == "37"


def test_the_fleets_mi300x_nodes_are_ready_with_amd_gpus(api: client.ApiClient) -> None:
    node = client.CoreV1Api(api).read_node("mi300x-0")
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert node.status.allocatable["amd.com/gpu"] == "8"
    assert node.metadata.labels["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
    lease = client.CoordinationV1Api(api).read_namespaced_lease("mi300x-0", "kube-node-lease")
    assert lease.spec.holder_identity


async def test_the_scheduler_places_whole_node_gpu_pods_on_distinct_mi300x_nodes(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(namespace, _gpu_deployment("llm", replicas=3, gpus=8))

    def ready_pods() -> list[Any]:
        pods = core.list_namespaced_pod(namespace, label_selector="app=llm").items
        return pods if len(pods) == 3 and all(_ready(p) for p in pods) else []

    pods = await eventually(ready_pods, timeout=60, what="3 pods Ready", interval=0.2)
    nodes = [p.spec.node_name for p in pods]
    # Eight GPUs each: one pod per node, on nodes that have amd.com/gpu (not the H100s or control-0).
    assert len(set(nodes)) == 3
    assert all(n.startswith("mi300x") for n in nodes), nodes
    deployment = await eventually(
        lambda: (d := apps.read_namespaced_deployment("llm", namespace)).status.ready_replicas == 3 and d,
        timeout=30,
        what="the Deployment's status to count 3 ready replicas",
        interval=0.2,
    )
    assert deployment.status.available_replicas == 3


async def test_a_deleted_pod_held_by_a_finalizer_is_reported_failed_as_a_kubelet_would(
    api: client.ApiClient, namespace: str
) -> None:
    """A controller's finalizer (Kueue's on pods it admits) waits for the pod to finish: kwok plays the
    kubelet that stops the containers and reports the pod Failed, then the finalizer can go."""
    core = client.CoreV1Api(api)
    pod = {
        "metadata": {"name": "held", "finalizers": ["example.com/wait-for-finish"]},
        "spec": {"containers": [{"name": "c", "image": "registry.example/server:1"}]},
    }
    core.create_namespaced_pod(namespace, pod)
    await eventually(lambda: _ready(core.read_namespaced_pod("held", namespace)), 60, "the pod Ready")
    core.delete_namespaced_pod("held", namespace)
    failed = await eventually(
        lambda: (p := core.read_namespaced_pod("held", namespace)).status.phase == "Failed" and p,
        timeout=30,
        what="the deleted pod reported Failed",
        interval=0.2,
    )
    assert failed.metadata.deletion_timestamp is not None
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})

    def gone() -> bool:
        try:
            core.read_namespaced_pod("held", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, timeout=30, what="the pod gone once its finalizer is", interval=0.2)


async def test_an_eviction_that_breaks_the_disruption_budget_is_refused_and_one_within_it_proceeds(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core, policy = client.AppsV1Api(api), client.CoreV1Api(api), client.PolicyV1Api(api)
    apps.create_namespaced_deployment(namespace, _gpu_deployment("web", replicas=2, gpus=1))
    pdb = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    policy.create_namespaced_pod_disruption_budget(namespace, pdb)

    def observed(healthy: int, allowed: int) -> bool:
        budget = policy.read_namespaced_pod_disruption_budget("web", namespace)
        status = budget.status
        return bool(
            status
            and status.observed_generation == budget.metadata.generation
            and status.current_healthy == healthy
            and status.disruptions_allowed == allowed
        )

    await eventually(
        lambda: observed(2, 0), timeout=60, what="the budget at 2 healthy, 0 allowed", interval=0.2
    )
    victim = core.list_namespaced_pod(namespace, label_selector="app=web").items[0].metadata.name
    eviction = {"metadata": {"name": victim, "namespace": namespace}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction(victim, namespace, eviction)
    assert refused.value.status == 429
    assert "disruption budget" in refused.value.body

    policy.patch_namespaced_pod_disruption_budget("web", namespace, {"spec": {"minAvailable": 1}})
    await eventually(lambda: observed(2, 1), timeout=30, what="the budget at 1 allowed", interval=0.2)
    core.create_namespaced_pod_eviction(victim, namespace, eviction)

    def replaced() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        names = {p.metadata.name for p in pods}
        return victim not in names and len(pods) == 2 and all(_ready(p) for p in pods)

    await eventually(replaced, timeout=60, what="the evicted pod gone and replaced", interval=0.2)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: an exited process the init process has not reaped yet (a zombie,
    state Z) holds no memory and runs nothing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


def _cluster_command(*args: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "aiplane.realcluster", *args, f"--bin-dir={bin_dir}"]
        if args[0] == "up"
        else [sys.executable, "-m", "aiplane.realcluster", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def test_cluster_up_then_down_leaves_no_process_and_no_state(kube_bin: Path, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "nodePools:\n- name: mi325x\n  count: 1\n  gpu: {vendor: amd, product: MI325X, count: 8}\n",
        encoding="utf-8",
    )
    state = tmp_path / "state"
    up = _cluster_command("up", f"--state-dir={state}", f"--fleet={fleet}", bin_dir=kube_bin)
    assert up.returncode == 0, up.stderr
    kubeconfig = state / "kubeconfig" / "admin.kubeconfig"
    assert f"export KUBECONFIG={kubeconfig}" in up.stdout
    status = _cluster_command("status", f"--state-dir={state}", bin_dir=kube_bin)
    pids = {line.split("\t")[0]: int(line.split("\t")[1]) for line in status.stdout.splitlines()}
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    nodes = subprocess.run(
        [KUBECTL, f"--kubeconfig={kubeconfig}", "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert nodes == ["node/mi325x-0"]

    down = _cluster_command("down", f"--state-dir={state}", bin_dir=kube_bin)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    still_running = [name for name, pid in pids.items() if _running(pid)]
    assert still_running == []

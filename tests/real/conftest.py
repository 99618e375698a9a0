"""The real control plane for the ``real`` tier: built once (cached by scripts/build-kube) and started once
per session, with kwok's fake nodes for the default fleet; the Helm chart installed on it (its CRDs
included) by Helm's engine; the simulated hardware beside it; operators started per test as the chart's
ServiceAccount, each test failing if kube's RBAC refused its operator anything (the audit log).

``AIPLANE_KUBE_BIN`` names the binaries (scripts/test sets it); without it the fixture runs
scripts/build-kube itself, and skips only when the machine has no Go toolchain (the script exits 3).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import NAMESPACES
from aiplane.realcluster import RealCluster, start_real_cluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests import chart_helpers, least_privilege, realtier
from tests.polling import eventually
from tests.real import operator as op

ROOT = Path(__file__).resolve().parents[2]
_NO_GO = 3
#: What the operators of the session's tests were allowed (reported at the end of the session).
USED: set[least_privilege.Grant] = set()


def kube_bin_dir() -> Path:
    """The directory of the built binaries, building them if need be."""
    if value := os.environ.get("AIPLANE_KUBE_BIN"):
        return Path(value)
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-kube")], capture_output=True, text=True, check=False
    )
    if build.returncode == _NO_GO:
        pytest.skip(build.stderr.strip())
    assert build.returncode == 0, f"scripts/build-kube failed:\n{build.stderr[-5000:]}"
    return Path(build.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def kube_bin() -> Path:
    return kube_bin_dir()


@pytest.fixture(scope="session")
def real_cluster(kube_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """One control plane for the session; stopped, and its state removed, at the end. aiplane's CRDs
    come with the chart (:func:`release`). Beside kube-scheduler it runs the scheduler-plugins gang
    scheduler (Coscheduling: ModelInfer gangs, test_modelinfer_gang.py) and LeaderWorkerSet (multinode
    Dynamo); neither touches a pod that does not name them (a second scheduler; LWS's pod webhook only
    sees its own pods)."""
    cluster = start_real_cluster(
        tmp_path_factory.mktemp("real") / "cluster",
        bin_dir=kube_bin,
        install_crds=False,
        neighbours=("lws", "coscheduling"),
        neighbours_dir=realtier.neighbours_dir(),
        tie_to_parent=True,
    )
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def neighbour_cluster(kube_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """A control plane of its own with the upstream neighbours (``cluster up --with all``: LWS, Kueue, the
    Gateway API CRDs) and two MI300X kwok nodes, for tests/real/test_neighbours.py and test_queue.py (which
    installs the chart and runs the operator on it). Its own, so Kueue's pod webhook (it sees every pod
    outside kube-system) stays off the session cluster the other operator tests share."""
    fleet = Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=2,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
            )
        ]
    )
    cluster = start_real_cluster(
        tmp_path_factory.mktemp("neighbours") / "cluster",
        bin_dir=kube_bin,
        fleet=fleet,
        neighbours=("lws", "kueue", "gateway", "coscheduling"),
        neighbours_dir=realtier.neighbours_dir(),
        tie_to_parent=True,
    )
    yield cluster
    cluster.stop()


def _established(api: client.ApiClient, names: list[str]) -> bool:
    ext = client.ApiextensionsV1Api(api)
    for name in names:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        if not any(c.type == "Established" and c.status == "True" for c in conditions):
            return False
    return True


def _poll(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"{what} not met within {timeout} s"
        time.sleep(0.1)


def chart_release(cluster: RealCluster, workdir: Path) -> op.Release:
    """The chart installed by Helm's engine, and a kubeconfig (in ``workdir``) with a TokenRequest token of
    its ServiceAccount (what the kubelet mounts into the operator's pod)."""
    manifest = op.install_chart(cluster)
    (sa,) = (d for d in manifest if d["kind"] == "ServiceAccount")
    namespace, name = sa["metadata"].get("namespace", chart_helpers.NAMESPACE), sa["metadata"]["name"]
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        crds = [
            c.metadata.name for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        ]
        _poll(lambda: _established(api, crds), 60, "the chart's CRDs Established")
        token = client.CoreV1Api(api).create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": op.TOKEN_SECONDS}}
        )
    finally:
        api.close()
    kubeconfig = op.token_kubeconfig(cluster, token.status.token, workdir / "operator.kubeconfig")
    return op.Release(namespace, name, kubeconfig, tuple(manifest))


@pytest.fixture(scope="session")
def release(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> op.Release:
    """The chart on the session's control plane (:func:`chart_release`)."""
    return chart_release(real_cluster, tmp_path_factory.mktemp("operator"))


def hardware_process(cluster: RealCluster, log: Path) -> op.Process:
    """``aiplane hardware`` (the simulated AMD GPU operator and metrics exporter) as the admin."""
    return op.Process(["hardware", "--kubeconfig", str(cluster.kubeconfig), "--dcm-delay", "0.3"], log)


@pytest.fixture(scope="session")
def hardware(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[op.Process]:
    """The simulated AMD GPU operator (device plugin, DCM) and GPU metrics exporter, as the admin."""
    process = hardware_process(real_cluster, tmp_path_factory.mktemp("hardware") / "hardware.log")
    with op.running(process):
        yield process


@pytest.fixture
async def admin(real_cluster: RealCluster) -> AsyncIterator[HttpKubeClient]:
    """The test's own client (the cluster admin)."""
    http = await HttpKubeClient.from_kubeconfig(str(real_cluster.kubeconfig))
    yield http
    await http.close()


@pytest.fixture
async def namespace(admin: HttpKubeClient) -> AsyncIterator[str]:
    """A namespace of the test's own, deleted after it (kube's namespace controller empties it)."""
    name = f"real-{uuid.uuid4().hex[:8]}"
    await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    await admin.delete(NAMESPACES, name)

    async def gone() -> bool:
        return all(n["metadata"]["name"] != name for n in (await admin.list(NAMESPACES))["items"])

    # The next test may need the GPUs its pods held: wait for kube's namespace controller to empty it.
    await eventually(gone, timeout=60, what=f"namespace {name} deleted", interval=0.2)


@pytest.fixture
def start_operator(
    real_cluster: RealCluster, release: op.Release, tmp_path: Path
) -> Iterator[Callable[..., op.Process]]:
    """Start ``aiplane run --controllers <names>`` as the chart's ServiceAccount; on teardown stop it,
    and fail the test if kube's RBAC refused it anything (403) while it ran, or it logged an error."""
    audit = op.Audit.from_now(real_cluster.audit_log, release.user)
    processes: list[op.Process] = []

    def start(controllers: str, *extra: str) -> op.Process:
        process = op.operator_process(
            release, controllers, tmp_path / f"operator-{len(processes)}.log", *extra
        )
        processes.append(process.start())
        return process

    yield start
    for process in processes:
        process.stop()
    USED.update(audit.used())
    refused = audit.refused()
    logs = "\n".join(p.tail() for p in processes)
    assert not refused, f"kube's RBAC refused the chart's ServiceAccount (403): {refused}\n{logs}"
    errors = [line for p in processes for line in p.errors()]
    assert not errors, "the operator logged errors on a healthy cluster:\n" + "\n".join(errors[:20])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if USED:
        granted = least_privilege.grants(
            d for d in chart_helpers.render() if d["kind"] in ("ClusterRole", "Role")
        )
        terminalreporter.write_line(
            f"real tier: the operators used {len(USED & granted)} of the chart's {len(granted)} grants"
            f" under kube's RBAC authorizer"
        )

"""Fixtures for the conformance suite: real clients against the embedded cluster and a real control plane.

Every test talks to an ``aiplane sim`` cluster served in-process on a background thread, over HTTPS with
a bearer token, exactly as kubectl would (``[sim]``), and again, in the ``real`` tier, to the real
control plane the session starts (kube-apiserver v1.37.2 and friends with kwok's nodes, tests/realtier.py;
``[real]``), so the embedded server is held to kube-apiserver and not to itself. Tests marked ``sim_only``
(fault injection, the fleet, the embedded server's own limits) run on the twin only. ``-m "not real"``
runs the twin alone. ``AIPLANE_CONFORMANCE_KUBECONFIG`` runs the suite against another cluster instead
(``[external]``; ``sim_only`` tests are then skipped). On a real cluster the suite first installs what it
needs: our CRDs and the third-party ones our controllers write.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

REAL_KUBECONFIG = os.environ.get("AIPLANE_CONFORMANCE_KUBECONFIG")
KUBECTL = (
    shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl") or "kubectl"
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that uses a cluster runs on the twin and on the real control plane (``real`` tier)."""
    if "cluster" not in metafunc.fixturenames:
        return
    tiers: list[Any]
    if REAL_KUBECONFIG:
        tiers = ["external"]
    elif metafunc.definition.get_closest_marker("sim_only"):
        tiers = ["sim"]
    else:
        tiers = ["sim", pytest.param("real", marks=pytest.mark.real)]
    metafunc.parametrize("cluster", tiers, indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not REAL_KUBECONFIG:
        return
    skip = pytest.mark.skip(reason="needs the embedded cluster (sim_only)")
    for item in items:
        if "sim_only" in item.keywords:
            item.add_marker(skip)


class SimThread:
    """An EmbeddedCluster running on its own event loop in a daemon thread."""

    def __init__(self) -> None:
        from aiplane.sim.cluster import EmbeddedCluster

        self.loop = asyncio.new_event_loop()
        self.cluster = EmbeddedCluster()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aiplane-sim", daemon=True)
        self._thread.start()
        self.url = self.call(self.cluster.start())

    def call(self, coro: Any) -> Any:
        """Run a coroutine on the cluster's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def run(self, fn: Any, *args: Any) -> Any:
        """Run a plain function on the cluster's loop (the store is not thread-safe)."""

        async def _call() -> Any:
            return fn(*args)

        return self.call(_call())

    def stop(self) -> None:
        self.call(self.cluster.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


@dataclass
class Cluster:
    kubeconfig: Path
    sim: SimThread | None

    def kubectl_argv(self) -> list[str]:
        """The kubectl command line for this cluster, for tests that run kubectl in the background."""
        return [KUBECTL, "--kubeconfig", str(self.kubeconfig)]

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster; with ``check`` a failure shows kubectl's stderr."""
        proc = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc


def eventually(check: Callable[[], T], *, timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def wait_for_namespace_defaults(k8s: Any, namespace: str) -> None:
    """Until kube-controller-manager (or the embedded cluster, which does the same) has put the
    ``kube-root-ca.crt`` ConfigMap into a new namespace, so that it never shows up mid-test."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    eventually(
        lambda: (
            core.list_namespaced_config_map(namespace, field_selector="metadata.name=kube-root-ca.crt").items
        ),
        what=f"kube-root-ca.crt in {namespace}",
    )


def install_crds(cluster: Cluster) -> None:
    """What the suite needs of a real cluster, as the embedded one bootstraps it: our CRDs (applied
    server-side, so they are this checkout's) and the third-party CRDs our controllers write (Volcano,
    Kueue, …; served with open schemas, as in the embedded cluster) unless the cluster has its own."""
    from aiplane.api.crdgen import all_crds
    from aiplane.sim import thirdparty

    present = set(cluster.kubectl("get", "crds", "-o", "name").stdout.split())
    wanted = all_crds() + [
        crd
        for crd in thirdparty.crds()
        if f"customresourcedefinition.apiextensions.k8s.io/{crd['metadata']['name']}" not in present
    ]
    # A stream of documents (a kind: List would be validated through OpenAPI v2, as protobuf).
    items = "\n---\n".join(json.dumps(crd) for crd in wanted)
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=aiplane-conformance",
        "-f",
        "-",
        input=items,
    )
    names = {crd["metadata"]["name"] for crd in wanted}

    def established() -> bool:
        listed = json.loads(cluster.kubectl("get", "crds", "-o", "json").stdout)["items"]
        ready = {
            crd["metadata"]["name"]
            for crd in listed
            if any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
        }
        return names <= ready

    eventually(established, timeout=60, what="the suite's CRDs to be established")


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tier = getattr(request, "param", "sim")
    if tier != "sim":
        kubeconfig = (
            Path(REAL_KUBECONFIG)
            if tier == "external"
            else request.getfixturevalue("real_cluster").kubeconfig
        )
        real = Cluster(Path(kubeconfig), None)
        install_crds(real)
        yield real
        return
    sim = SimThread()
    path = tmp_path_factory.mktemp("sim") / "kubeconfig"
    sim.cluster.write_kubeconfig(path)
    try:
        yield Cluster(path, sim)
    finally:
        sim.stop()


@pytest.fixture
def sim(cluster: Cluster) -> SimThread:
    """The in-process embedded cluster (tests using it are sim-only)."""
    if cluster.sim is None:
        pytest.skip("needs the embedded cluster")
    return cluster.sim


@pytest.fixture
def namespace(cluster: Cluster, k8s: Any) -> Iterator[str]:
    """A fresh namespace per test (with its ``kube-root-ca.crt``), deleted afterwards (without waiting)."""
    name = f"conf-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    wait_for_namespace_defaults(k8s, name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def k8s(cluster: Cluster) -> Iterator[Any]:
    """The official ``kubernetes`` client, configured from the kubeconfig."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield api_client
    api_client.close()
    del client

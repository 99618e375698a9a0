"""``aiplane run``: real processes against an ``aiplane sim`` process, as Kubernetes would run them.

The controller under test is ``probe``, defined at the bottom of this file and loaded by the processes
through ``AIPLANE_EXTRA_CONTROLLERS`` (the diagnostic hook of ``aiplane.controllers.registry``). It
marks labelled ConfigMaps with the identity of the process that reconciled them, so the test can see
who acts; a ``sleep`` key makes a reconcile take that long, to catch a drain in the act.

The elections here use an 8 s lease (5 s renew deadline, 1 s retry) instead of 15/10/2 s: the same
state machine, but a kill -9 takeover is bounded by 8 s + two jittered polls (≤ 12.4 s), which keeps
the "within 20 s" assertion deterministic and the file well under a minute. The default timings are
covered by the unit tests on a fake clock.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import yaml

if TYPE_CHECKING:
    from aiplane.kube.manager import Manager

ROOT = Path(__file__).resolve().parents[2]
AIPLANE = [sys.executable, "-m", "aiplane.cli"]
PROBE = "probe=tests.integration.test_run_command:setup_probe"
LABEL = "aiplane.io/probe"
BY = "probe.aiplane.io/reconciled-by"
STARTED = "probe.aiplane.io/started-by"
TIMING = [
    "--leader-election-lease-duration",
    "8",
    "--leader-election-renew-deadline",
    "5",
    "--leader-election-retry-period",
    "1",
]

T = TypeVar("T")


def eventually(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``fn`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Api:
    """Just enough of a Kubernetes client for the test's own reads and writes (sync, urllib)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        self.server = cluster["server"]
        self.token = config["users"][0]["user"]["token"]
        self.ssl = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self.ssl, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def ok(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        status, out = self.call(method, path, body, content_type)
        assert status < 300, (method, path, status, out)
        return out

    def namespace(self) -> str:
        name = f"run-{uuid.uuid4().hex[:8]}"
        self.ok(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        return name

    def lease(self, ns: str, name: str) -> dict[str, Any] | None:
        status, out = self.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}")
        return out["spec"] if status == 200 else None

    def probe_configmap(self, ns: str, name: str, **data: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {LABEL: "true"}},
            "data": data,
        }
        self.ok("POST", f"/api/v1/namespaces/{ns}/configmaps", body)

    def annotations(self, ns: str, name: str) -> dict[str, str]:
        out = self.ok("GET", f"/api/v1/namespaces/{ns}/configmaps/{name}")
        return dict(out["metadata"].get("annotations") or {})


class Run:
    """An ``aiplane run`` process; its JSON log lines are collected as they come."""

    def __init__(self, kubeconfig: Path, ns: str, *args: str, lease_id: str = "probe") -> None:
        env = {
            **os.environ,
            "AIPLANE_EXTRA_CONTROLLERS": PROBE,
            "PROBE_NAMESPACE": ns,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.proc = subprocess.Popen(
            [
                *AIPLANE,
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--controllers",
                "probe",
                "--leader-election-namespace",
                ns,
                "--leader-election-id",
                lease_id,
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-probe-bind-address",
                "127.0.0.1:0",
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.raw.append(line)
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.append(json.loads(line))

    def logged(self, msg: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("msg") == msg]

    def wait_logged(self, msg: str, timeout: float = 20) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            if self.proc.poll() is not None and not self.logged(msg):
                raise AssertionError(f"aiplane run exited {self.proc.returncode}:\n{''.join(self.raw)}")
            found = self.logged(msg)
            return found[0] if found else None

        return eventually(find, timeout, f"log line {msg!r}")

    @property
    def identity(self) -> str:
        return str(self.wait_logged("starting manager")["identity"])

    def port(self, path: str) -> int:
        """The bound port of the server answering ``path`` (from its "serving" log line)."""

        def find() -> int | None:
            for line in self.logged("serving"):
                if path in line["paths"]:
                    return int(line["address"].rsplit(":", 1)[1])
            if self.proc.poll() is not None:
                raise AssertionError(f"aiplane run exited {self.proc.returncode}:\n{''.join(self.raw)}")
            return None

        return eventually(find, 20, f"the server of {path}")

    def http(self, path: str, token: str | None = None) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.port(path.split('?', maxsplit=1)[0])}{path}"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout}s:\n{''.join(self.raw[-20:])}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    kubeconfig = tmp_path_factory.mktemp("sim") / "kubeconfig"
    proc = subprocess.Popen(
        [*AIPLANE, "sim", "--kubeconfig", str(kubeconfig), "--port", "0", "--controllers", "none"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"aiplane sim exited: {proc.stderr.read() if proc.stderr else ''}")
            return kubeconfig.exists()

        eventually(ready, 60, "the sim's kubeconfig")
        yield kubeconfig
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:
        run.stop()


def test_one_leader_reconciles_and_a_standby_takes_over_within_20s_of_kill_9(
    sim: Path, runs: list[Run]
) -> None:
    api = Api(sim)
    ns = api.namespace()
    a = Run(sim, ns, "--leader-elect", *TIMING)
    runs.append(a)
    eventually(lambda: (api.lease(ns, "probe") or {}).get("holderIdentity") == a.identity, 20, "a leading")
    b = Run(sim, ns, "--leader-elect", *TIMING)
    runs.append(b)
    b.wait_logged("attempting to acquire leader lease")

    # Probes and metrics on both; only the leader reports master status 1.
    for run, master in ((a, "1.0"), (b, "0.0")):
        assert run.http("/healthz") == (200, "ok")
        eventually(lambda run=run: run.http("/readyz") == (200, "ok"), 10, "readyz")  # type: ignore[misc]
        # --metrics-secure by default: a token the API server authenticates and authorizes.
        assert run.http("/metrics") == (401, "Unauthorized\n")
        status, body = run.http("/metrics", api.token)
        assert status == 200
        assert f'leader_election_master_status{{name="probe"}} {master}' in body

    api.probe_configmap(ns, "one")
    eventually(lambda: api.annotations(ns, "one").get(BY), 20, "the leader reconciling")
    assert api.annotations(ns, "one")[BY] == a.identity
    assert a.logged("probe reconciled") and not b.logged("probe reconciled")
    assert b.proc.poll() is None and not b.logged("successfully acquired lease")
    status, body = a.http("/metrics", api.token)
    assert 'controller_runtime_reconcile_total{controller="probe",result="success"} 1.0' in body
    assert "rest_client_requests_total{" in body

    a.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    a.wait_exit(5)
    eventually(
        lambda: (api.lease(ns, "probe") or {}).get("holderIdentity") == b.identity, 20, "b taking over"
    )
    api.probe_configmap(ns, "two")
    eventually(
        lambda: api.annotations(ns, "two").get(BY) == b.identity,
        20 - (time.monotonic() - killed),
        "b reconciling",
    )
    assert time.monotonic() - killed < 20
    lease = api.lease(ns, "probe")
    assert lease is not None and lease["leaseTransitions"] == 1


def test_a_leader_that_loses_its_lease_exits_1(sim: Path, runs: list[Run]) -> None:
    api = Api(sim)
    ns = api.namespace()
    run = Run(sim, ns, "--leader-elect", *TIMING)
    runs.append(run)
    eventually(lambda: (api.lease(ns, "probe") or {}).get("holderIdentity") == run.identity, 20, "leading")
    # Block the leader's renewals (PUT), then hand the Lease to someone else (PATCH is not blocked).
    fault = api.ok("POST", "/_sim/faults", {"spec": f"verb=update,resource=leases,namespace={ns},error=500"})
    try:
        api.ok(
            "PATCH",
            f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/probe",
            {"spec": {"holderIdentity": "intruder"}},
            content_type="application/merge-patch+json",
        )
        began = time.monotonic()
        assert run.wait_exit(10) == 1
        assert time.monotonic() - began < 5  # at its next renewal, not after the renew deadline
        assert run.logged("leader election lost")
    finally:
        api.ok("DELETE", f"/_sim/faults/{fault['id']}")
    assert (api.lease(ns, "probe") or {}).get("holderIdentity") == "intruder"


def test_sigterm_drains_in_flight_work_releases_the_lease_and_exits_0(sim: Path, runs: list[Run]) -> None:
    api = Api(sim)
    ns = api.namespace()
    run = Run(sim, ns, "--leader-elect", *TIMING)
    runs.append(run)
    eventually(lambda: (api.lease(ns, "probe") or {}).get("holderIdentity") == run.identity, 20, "leading")
    api.probe_configmap(ns, "slow", sleep="2")
    eventually(lambda: api.annotations(ns, "slow").get(STARTED), 20, "the slow reconcile to start")
    assert BY not in api.annotations(ns, "slow")
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait_exit(20) == 0
    assert api.annotations(ns, "slow")[BY] == run.identity  # finished, not abandoned
    assert (api.lease(ns, "probe") or {}).get("holderIdentity") == ""  # released for the next one


def test_a_transient_api_error_at_controller_setup_is_retried_not_a_crash(sim: Path, runs: list[Run]) -> None:
    """The kaiwoconfig controller creates its default KaiwoConfig at start-up; a 500 storm then used to
    end the process with exit 1 (a crash loop; found by tests/chaos). Now it retries and starts."""
    api = Api(sim)
    ns = api.namespace()
    spec = "verb=patch,resource=kaiwoconfigs,error=500,count=3"  # created by server-side apply
    fault = api.ok("POST", "/_sim/faults", {"spec": spec})
    try:
        run = Run(sim, ns, "--controllers", "kaiwoconfig")
        runs.append(run)
        run.wait_logged("starting manager", timeout=30)
        assert len(run.logged("controller setup retried")) == 3
        assert run.proc.poll() is None and not run.logged("controller setup failed")
        status, _ = api.call("GET", "/apis/config.kaiwo.silogen.ai/v1alpha1/kaiwoconfigs/kaiwo")
        assert status == 200
    finally:
        api.ok("DELETE", f"/_sim/faults/{fault['id']}")


def test_unknown_controllers_are_refused_with_exit_2(sim: Path) -> None:
    proc = subprocess.run(
        [*AIPLANE, "run", "--kubeconfig", str(sim), "--controllers", "echo,nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown controller(s) nope" in proc.stderr and "echo" in proc.stderr


def test_controller_selection_and_the_diagnostic_hook() -> None:
    from aiplane.controllers import registry

    env = {registry.EXTRA_CONTROLLERS_ENV: PROBE}
    assert set(registry.select("probe,echo", env)) == {"probe", "echo"}
    assert "echo" not in registry.select("all", env) and "probe" not in registry.select("all", env)
    assert registry.select("none", env) == {}
    with pytest.raises(registry.UnknownControllerError, match="unknown controller"):
        registry.select("probe", {})
    with pytest.raises(ValueError, match="reserved"):
        registry.extra_controllers({registry.EXTRA_CONTROLLERS_ENV: "echo=x.y:z"})
    with pytest.raises(ValueError, match="NAME=MODULE:FUNCTION"):
        registry.extra_controllers({registry.EXTRA_CONTROLLERS_ENV: "broken"})


def test_the_lease_namespace_defaults_to_the_kubeconfig_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiplane.run import RunOptions, leader_election_namespace

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "current-context": "b",
                "contexts": [
                    {"name": "a", "context": {"namespace": "ns-a"}},
                    {"name": "b", "context": {"namespace": "ns-b"}},
                ],
            }
        ),
        encoding="utf-8",
    )
    assert leader_election_namespace(RunOptions(kubeconfig=kubeconfig)) == "ns-b"
    assert leader_election_namespace(RunOptions(kubeconfig=kubeconfig, leader_election_namespace="x")) == "x"
    assert leader_election_namespace(RunOptions(kubeconfig=tmp_path / "missing")) == "default"


# --- the diagnostic controller the processes above run ---------------------------------------------


class ProbeController:
    """Marks labelled ConfigMaps of ``$PROBE_NAMESPACE`` with who reconciled them (see the module doc).

    Polls instead of using an informer so that this test exercises the manager, not the cache.
    On stop it takes no new work and finishes what it started.
    """

    name = "probe"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    async def run(self, stop: asyncio.Event) -> None:
        from aiplane.kube.resources import CONFIGMAPS

        namespace = os.environ["PROBE_NAMESPACE"]
        election = self.manager.leader_election
        identity = election.identity if election else "solo"
        metrics = self.manager.metrics.controllers
        metrics.set_max_concurrent(self.name, 10)
        seen: set[str] = set()
        in_flight: set[asyncio.Task[None]] = set()
        while not stop.is_set():
            listed = await self.manager.client.list(CONFIGMAPS, namespace, label_selector=f"{LABEL}=true")
            for cm in listed["items"]:
                name = cm["metadata"]["name"]
                if name in seen or BY in (cm["metadata"].get("annotations") or {}):
                    continue
                seen.add(name)
                task = asyncio.create_task(self.reconcile(cm, namespace, identity))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
        if in_flight:
            await asyncio.gather(*in_flight)

    async def reconcile(self, cm: dict[str, Any], namespace: str, identity: str) -> None:
        from aiplane.kube.logging import get_logger, reconcile_context
        from aiplane.kube.resources import CONFIGMAPS

        name = cm["metadata"]["name"]
        metrics = self.manager.metrics.controllers
        metrics.reconcile_started(self.name)
        began = time.perf_counter()
        log = get_logger("aiplane.probe")
        with reconcile_context(controller=self.name, key=f"{namespace}/{name}"):
            delay = float((cm.get("data") or {}).get("sleep", "0"))
            if delay:
                patch = {"metadata": {"annotations": {STARTED: identity}}}
                await self.manager.client.patch(CONFIGMAPS, name, patch, namespace=namespace)
                log.info("probe reconcile started")
                await asyncio.sleep(delay)  # the slow part of a reconcile
            patch = {"metadata": {"annotations": {BY: identity}}}
            await self.manager.client.patch(CONFIGMAPS, name, patch, namespace=namespace)
            log.info("probe reconciled")
        metrics.reconcile_finished(self.name, "success", time.perf_counter() - began)


def setup_probe(manager: Manager) -> None:
    manager.add_controller(ProbeController(manager))

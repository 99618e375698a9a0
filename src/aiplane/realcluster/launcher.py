"""Start and stop a real control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, and kwok playing the kubelets of the fleet's nodes.

The binaries come from ``scripts/build-kube`` (built from the Go modules under controlplane/). Everything
the cluster owns lives in one state directory: certificates, kubeconfigs, etcd's data, the components'
logs and ``state.json`` (their pids), so ``stop_cluster`` can stop a cluster another process started.
docs/real-cluster.md describes the flags and how this differs from a production cluster.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiplane.api.crdgen import all_crds
from aiplane.realcluster import neighbours as nb
from aiplane.realcluster import pki as pkimod
from aiplane.realcluster.admin import Admin, ApiError
from aiplane.realcluster.net import free_port
from aiplane.realcluster.nodes import fake_nodes
from aiplane.realcluster.scheduling import scheduler_config
from aiplane.sim.fleet import DEFAULT_FLEET, Fleet

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
# Stopped in this order, the reverse of starting: clients before the API server, the API server before etcd.
_STOP_ORDER = (
    *reversed(nb.PROCESSES),
    "kwok",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)
_STOP_GRACE = 15.0
# The API server's audit log: every request of every client but the control plane's own components and
# kwok (whose traffic would dwarf the rest), one JSON object a line, written before the response is sent
# (the log backend's default "blocking" mode), so a test reads a refused request as soon as it returns.
AUDIT_LOG = "audit.log"


_AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "None",
            "users": [
                pkimod.CONTROLLER_MANAGER.user,
                pkimod.SCHEDULER.user,
                pkimod.KWOK.user,
                "system:apiserver",
            ],
        },
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system", "system:nodes"]},
        {"level": "Metadata"},
    ],
}
# For investigating who wrote a Node's spec (a taint lost or brought back): every client's Node writes,
# the control plane's and kwok's included, with the request and the stored object, and the
# NodePartitionings' (whose status says which step wrote what); the kubelet-like status writes (kwok,
# the simulated device plugin) by metadata only. Off by default: larger logs.
_NODE_WRITE_RULES: list[dict[str, Any]] = [
    {
        "level": "RequestResponse",
        "verbs": ["create", "update", "patch", "delete"],
        "resources": [
            {"group": "", "resources": ["nodes"]},
            {
                "group": "infrastructure.silogen.ai",
                "resources": ["nodepartitionings", "nodepartitionings/status"],
            },
        ],
    },
    {
        "level": "Metadata",
        "verbs": ["update", "patch"],
        "resources": [{"group": "", "resources": ["nodes/status"]}],
    },
]


def audit_policy(*, node_writes: bool = False) -> dict[str, Any]:
    """The API server's audit policy; ``node_writes`` records every client's Node writes in full."""
    if not node_writes:
        return _AUDIT_POLICY
    return {**_AUDIT_POLICY, "rules": [*_NODE_WRITE_RULES, *_AUDIT_POLICY["rules"]]}


class ClusterError(Exception):
    """The control plane could not be built, started or reached."""


def bin_dir_from_env() -> Path:
    """The binaries' directory from ``AIPLANE_KUBE_BIN`` (what ``scripts/build-kube`` prints)."""
    value = os.environ.get("AIPLANE_KUBE_BIN")
    if not value:
        raise ClusterError(
            "AIPLANE_KUBE_BIN is not set: build the control plane with scripts/build-kube "
            "(needs Go 1.26+) and set AIPLANE_KUBE_BIN to the directory it prints"
        )
    return check_bin_dir(Path(value))


def check_bin_dir(path: Path) -> Path:
    missing = [name for name in BINARIES if not (path / name).is_file()]
    if missing or not (path / "kwok-stages.yaml").is_file():
        raise ClusterError(f"{path} lacks {missing or ['kwok-stages.yaml']}: run scripts/build-kube")
    return path


def _die_with_parent() -> None:
    # Linux: the child gets SIGTERM when the process that started it dies, so a test session killed
    # outright leaves no control plane behind (PR_SET_PDEATHSIG = 1).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


@dataclass
class RealCluster:
    """A running control plane: its admin kubeconfig and API server URL; ``stop()`` ends it."""

    state_dir: Path
    kubeconfig: Path
    server: str
    pids: dict[str, int] = field(default_factory=dict)

    def stop(self, *, keep_state: bool = False) -> None:
        stop_cluster(self.state_dir, keep_state=keep_state)

    def log(self, component: str) -> Path:
        return self.state_dir / "logs" / f"{component}.log"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log: JSON lines, one per request of a client outside the control plane."""
        return self.state_dir / "logs" / AUDIT_LOG


@dataclass
class _Ports:
    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    controller_manager: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)
    kwok: int = field(default_factory=free_port)


def _commands(bins: Path, state: Path, ports: _Ports) -> dict[str, list[str]]:
    p = state / "pki"
    kc = state / "kubeconfig"
    etcd_peer = f"http://127.0.0.1:{ports.etcd_peer}"
    etcd_client = f"http://127.0.0.1:{ports.etcd_client}"

    def client_flags(stem: str) -> list[str]:
        config = str(kc / f"{stem}.kubeconfig")
        return [
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
        ]

    return {
        "etcd": [
            str(bins / "etcd"),
            "--name=aiplane",
            f"--data-dir={state / 'etcd'}",
            f"--listen-client-urls={etcd_client}",
            f"--advertise-client-urls={etcd_client}",
            f"--listen-peer-urls={etcd_peer}",
            f"--initial-advertise-peer-urls={etcd_peer}",
            f"--initial-cluster=aiplane={etcd_peer}",
            "--unsafe-no-fsync",  # a throwaway cluster: its data need not survive a power cut
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bins / "kube-apiserver"),
            f"--etcd-servers={etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The endpoints of Service `kubernetes` would name a loopback address, which the reconciler
            # refuses with an error each time; nothing runs in a pod to dial it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={state / 'apiserver'}",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--service-account-issuer={ISSUER}",
            f"--api-audiences={ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--requestheader-client-ca-file={p / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={pkimod.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={p / 'front-proxy-client.key'}",
            "--profiling=false",
            f"--audit-policy-file={state / 'audit-policy.json'}",
            f"--audit-log-path={state / 'logs' / AUDIT_LOG}",
            "--audit-log-format=json",
        ],
        "kube-controller-manager": [
            str(bins / "kube-controller-manager"),
            *client_flags("controller-manager"),
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--cert-dir={state / 'controller-manager'}",
            "--controllers=*",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            f"--cluster-signing-cert-file={p / 'ca.crt'}",
            f"--cluster-signing-key-file={p / 'ca.key'}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--service-account-private-key-file={p / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--profiling=false",
        ],
        "kube-scheduler": [
            str(bins / "kube-scheduler"),
            # With --config, kube-scheduler ignores --kubeconfig and --leader-elect: both are in the file.
            f"--config={state / 'scheduler-config.json'}",
            f"--authentication-kubeconfig={kc / 'scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={kc / 'scheduler.kubeconfig'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={state / 'scheduler'}",
            "--profiling=false",
        ],
        "kwok": [
            str(bins / "kwok"),
            f"--kubeconfig={kc / 'kwok.kubeconfig'}",
            f"--config={bins / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            # Leases renewed by kwok, as kubelets do: the node-lifecycle controller reads them.
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16",
            "--node-ip=127.0.0.1",
            f"--server-address=127.0.0.1:{ports.kwok}",
        ],
    }


def _spawn(
    name: str, argv: list[str], state: Path, *, tie_to_parent: bool, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    log = (state / "logs" / f"{name}.log").open("ab")
    with log:
        return subprocess.Popen(
            argv,
            env={**os.environ, **env} if env else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=state,
            start_new_session=True,  # Ctrl-C in the shell that ran `cluster up` does not reach it
            preexec_fn=_die_with_parent if tie_to_parent else None,  # noqa: PLW1509
        )


def _wait(
    what: str,
    check: Callable[[], bool],
    processes: dict[str, subprocess.Popen[bytes]],
    state: Path,
    deadline: float,
) -> None:
    """Poll ``check`` until it holds; fail early, with its log's tail, if a component exits."""
    while True:
        for name, process in processes.items():
            if process.poll() is not None:
                tail = (state / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                raise ClusterError(
                    f"{name} exited with {process.returncode} while waiting for {what}:\n{tail}"
                )
        with contextlib.suppress(OSError, ApiError, ValueError):
            if check():
                return
        if time.monotonic() >= deadline:
            raise ClusterError(f"{what}: not within the deadline (logs in {state / 'logs'})")
        time.sleep(0.1)


def _etcd_healthy(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
        return bool(json.loads(response.read()).get("health") == "true")


def _nodes_ready(admin: Admin, names: set[str]) -> bool:
    ready = set()
    for node in admin.get("/api/v1/nodes")["items"]:
        for condition in node.get("status", {}).get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                ready.add(node["metadata"]["name"])
    return names <= ready


def _established(admin: Admin, names: list[str]) -> bool:
    for name in names:
        crd = admin.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = crd.get("status", {}).get("conditions", [])
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


def _install_crds(admin: Admin) -> list[str]:
    names = []
    for crd in all_crds():
        admin.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        names.append(crd["metadata"]["name"])
    return names


def _write_state(state: Path, cluster: RealCluster, processes: dict[str, subprocess.Popen[bytes]]) -> None:
    cluster.pids = {name: process.pid for name, process in processes.items()}
    record = {"server": cluster.server, "kubeconfig": str(cluster.kubeconfig), "pids": cluster.pids}
    tmp = state / "state.json.tmp"
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(state / "state.json")


def start_real_cluster(
    state_dir: Path,
    *,
    bin_dir: Path | None = None,
    fleet: Fleet | None = None,
    install_crds: bool = False,
    neighbours: tuple[str, ...] = (),
    neighbours_dir: Path | None = None,
    timeout: float = 180.0,
    tie_to_parent: bool = False,
    audit_node_writes: bool = False,
) -> RealCluster:
    """Start a control plane in ``state_dir`` (made empty first) and return once it serves: ``/readyz``
    ok, every fleet node Ready (kwok), the ``default`` ServiceAccount made, the CRDs Established.

    ``neighbours`` (``lws``, ``kueue``, ``gateway``; :mod:`aiplane.realcluster.neighbours`) are installed and
    started from ``neighbours_dir`` (default ``$AIPLANE_NEIGHBOURS_DIR``, what scripts/build-neighbours
    prints) once the rest serves; the call returns when their webhooks are in use.

    ``tie_to_parent`` ends the components when the calling thread's process dies (for test sessions;
    Linux delivers the signal when the *thread* that started them exits, so call it from a thread that
    lives as long as the cluster should); ``cluster up`` leaves them running for ``cluster down``.
    ``audit_node_writes`` records every client's Node writes in the audit log, request and response.
    """
    bins = check_bin_dir(bin_dir) if bin_dir is not None else bin_dir_from_env()
    source = None
    if neighbours:
        source = nb.check_dir(neighbours_dir) if neighbours_dir is not None else nb.dir_from_env()
    state = state_dir.resolve()
    if (state / "state.json").exists():
        stop_cluster(state)
    shutil.rmtree(state, ignore_errors=True)
    for sub in ("logs", "kubeconfig", "etcd"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "etcd").chmod(0o700)
    (state / "audit-policy.json").write_text(
        json.dumps(audit_policy(node_writes=audit_node_writes)), encoding="utf-8"
    )
    (state / "scheduler-config.json").write_text(
        json.dumps(scheduler_config(state / "kubeconfig" / "scheduler.kubeconfig")), encoding="utf-8"
    )
    deadline = time.monotonic() + timeout
    ports = _Ports()
    server = f"https://127.0.0.1:{ports.apiserver}"
    keys = pkimod.generate(state / "pki")
    for client in pkimod.CLIENTS:
        pkimod.write_kubeconfig(keys, client, server, state / "kubeconfig" / f"{client.stem}.kubeconfig")
    kubeconfig = state / "kubeconfig" / f"{pkimod.ADMIN.stem}.kubeconfig"
    cluster = RealCluster(state, kubeconfig, server)
    commands = _commands(bins, state, ports)
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        _start_all(commands, processes, state, ports, tie_to_parent, deadline, cluster)
        admin = Admin(server, keys)
        nodes = fake_nodes(fleet or DEFAULT_FLEET)
        for node in nodes:
            admin.create("/api/v1/nodes", node)
        crds = _install_crds(admin) if install_crds else []
        plan = None
        if source is not None:
            # The neighbours' CRDs (large) go in while kwok brings the nodes up.
            plan = nb.prepare(neighbours, source, state, keys, server)
            nb.install_crds(admin, plan)
            crds += plan.crd_names()
        names = {node["metadata"]["name"] for node in nodes}
        _wait(
            "the fleet's nodes Ready (kwok)", lambda: _nodes_ready(admin, names), processes, state, deadline
        )
        _wait(
            "the default ServiceAccount (controller-manager)",
            lambda: bool(admin.get("/api/v1/namespaces/default/serviceaccounts/default")),
            processes,
            state,
            deadline,
        )
        _wait("the CRDs Established", lambda: _established(admin, crds), processes, state, deadline)
        if plan is not None:
            _start_neighbours(plan, admin, processes, state, tie_to_parent, deadline, cluster)
    except BaseException:
        stop_cluster(state, keep_state=True)
        raise
    return cluster


def _start_all(
    commands: dict[str, list[str]],
    processes: dict[str, subprocess.Popen[bytes]],
    state: Path,
    ports: _Ports,
    tie_to_parent: bool,
    deadline: float,
    cluster: RealCluster,
) -> None:
    processes["etcd"] = _spawn("etcd", commands["etcd"], state, tie_to_parent=tie_to_parent)
    _write_state(state, cluster, processes)
    _wait("etcd /health", lambda: _etcd_healthy(ports.etcd_client), processes, state, deadline)
    processes["kube-apiserver"] = _spawn(
        "kube-apiserver", commands["kube-apiserver"], state, tie_to_parent=tie_to_parent
    )
    _write_state(state, cluster, processes)
    admin = Admin(cluster.server, pkimod.Pki(state / "pki"))
    _wait("kube-apiserver /readyz", lambda: admin.get("/readyz") == "ok", processes, state, deadline)
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        processes[name] = _spawn(name, commands[name], state, tie_to_parent=tie_to_parent)
    _write_state(state, cluster, processes)


def _start_neighbours(
    plan: nb.Plan,
    admin: Admin,
    processes: dict[str, subprocess.Popen[bytes]],
    state: Path,
    tie_to_parent: bool,
    deadline: float,
    cluster: RealCluster,
) -> None:
    """The processes (their CRDs are Established: their informers need them), then, once each serves, the
    webhook configurations, whose failure policy would otherwise refuse every matching request."""
    for process in plan.processes:
        processes[process.name] = _spawn(
            process.name, process.argv, state, tie_to_parent=tie_to_parent, env=process.env
        )
    _write_state(state, cluster, processes)
    for process in plan.processes:
        _wait(f"{process.name} /readyz", functools.partial(nb.healthy, process), processes, state, deadline)
    nb.install_webhooks(admin, plan)
    for process in plan.processes:
        _wait(
            f"{process.name}'s webhooks called by the API server",
            functools.partial(nb.webhooks_active, admin, process),
            processes,
            state,
            deadline,
        )


def _ours(pid: int, state: Path) -> bool:
    """Whether ``pid`` is still a component of this cluster (a pid may have been reused since)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return _alive(pid) and os.uname().sysname != "Linux"
    return str(state) in cmdline


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by its parent, does not)."""
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] in {"Z", "X"}:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    return True


def running_pids(state_dir: Path) -> dict[str, int]:
    """The components of the cluster in ``state_dir`` that are still running."""
    state = state_dir.resolve()
    try:
        record: dict[str, Any] = json.loads((state / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    pids: dict[str, int] = record.get("pids", {})
    return {name: pid for name, pid in pids.items() if _alive(pid) and _ours(pid, state)}


def stop_cluster(state_dir: Path, *, keep_state: bool = False) -> None:
    """Stop every component the cluster in ``state_dir`` started (SIGTERM, then SIGKILL after a grace
    period), then remove the state directory unless ``keep_state``."""
    state = state_dir.resolve()
    running = running_pids(state)
    for name in _STOP_ORDER:
        pid = running.get(name)
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _gone_within(pid, _STOP_GRACE):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _gone_within(pid, _STOP_GRACE)
    if keep_state:
        (state / "state.json").unlink(missing_ok=True)
    else:
        shutil.rmtree(state, ignore_errors=True)


def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def real_cluster(state_dir: Path, **options: Any) -> Iterator[RealCluster]:
    """``start_real_cluster`` as a context manager: stopped (and its state removed) on exit."""
    cluster = start_real_cluster(state_dir, **options)
    try:
        yield cluster
    finally:
        cluster.stop()

"""What the benchmark scripts share: the sim and the operator as processes, and the sim's request counts.

* :func:`sim_running` starts ``aiplane sim --controllers none`` in its own process (optionally with a
  fleet of N MI300X nodes), waits for its kubeconfig, and stops it on the way out;
* :func:`operator_command` is ``aiplane run`` with the client budget lifted and no listeners, and
  :func:`running` runs any command as a process for the length of a ``with`` block;
* :func:`bench_client` is the benchmark's own client (User-Agent ``aiplane-bench``, so that it is not
  counted as the operator), and :func:`writes_by_verb` / :func:`write_count` read the server's count
  of write requests by User-Agent from ``/_sim/stats``;
* :func:`real_running` starts the real control plane instead (kube-apiserver and the rest, from
  ``scripts/build-kube``), whose writes :func:`audit_writes` counts by User-Agent from kube-apiserver's
  audit log, the same definition as ``/_sim/stats``;
* :func:`wait_until` polls (:func:`check_running` to give up when a process has died);
  :func:`figure` prints one line of a figures report, :func:`operator_figures` the operator's CPU and
  peak RSS lines.

The scripts import it as ``benchmarks.simproc`` (they put the repository root on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import EVENTS, NAMESPACES
from aiplane.realcluster import RealCluster, start_real_cluster
from aiplane.sim.fleet import Fleet
from benchmarks.procstats import cpu_seconds

PY = sys.executable
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
#: An operator's User-Agent product (``aiplane/<version>``): what ``/_sim/stats`` counts it under.
OPERATOR_AGENT = "aiplane"


def aiplane_command(*args: str, profile: Path | None = None, memtrace: Path | None = None) -> list[str]:
    """``python -m aiplane.cli ARGS``, under cProfile (stats to ``profile``) or tracemalloc (what holds
    memory to ``memtrace``: :mod:`benchmarks.memtrace`) if given."""
    if memtrace is not None:
        return [PY, str(Path(__file__).with_name("memtrace.py")), str(memtrace), "--", *args]
    prefix = [PY, "-m", "cProfile", "-o", str(profile)] if profile else [PY]
    return [*prefix, "-m", "aiplane.cli", *args]


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited within ``timeout`` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def running(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    show_stderr: bool = False,
    log: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` as a process (output discarded, stderr shown if asked, or both written to ``log``)
    for the ``with`` block."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("wb")) if log is not None else None
        proc = subprocess.Popen(
            list(cmd),
            env=None if env is None else dict(env),
            stdout=out if out is not None else subprocess.DEVNULL,
            stderr=out if out is not None else None if show_stderr else subprocess.DEVNULL,
        )
        try:
            yield proc
        finally:
            stop(proc)


def check_running(proc: subprocess.Popen[bytes], name: str = "operator") -> None:
    if proc.poll() is not None:
        raise SystemExit(f"{name} exited with {proc.returncode}")


def operator_command(
    kubeconfig: Path,
    controllers: str,
    workers: int,
    *,
    log_level: str | None = None,
    profile: Path | None = None,
    memtrace: Path | None = None,
) -> list[str]:
    """``aiplane run``: ``controllers``, ``workers`` reconciles at once, no client-side rate limit (the
    runtime is what is measured, not the default 200 QPS budget), no metrics or health listener."""
    args = [
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--controllers",
        controllers,
        "--max-concurrent-reconciles",
        str(workers),
        "--kube-api-qps",
        "100000",
        "--kube-api-burst",
        "100000",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    ]
    if log_level is not None:
        args += ["--log-level", log_level]
    return aiplane_command(*args, profile=profile, memtrace=memtrace)


def mi300x_fleet(nodes: int) -> dict[str, object]:
    """A fleet file: ``nodes`` MI300X nodes (8 GPUs each) and one control-plane node."""
    return {
        "nodePools": [
            {
                "name": "mi300x",
                "count": nodes,
                "gpu": {"vendor": "amd", "product": "MI300X", "count": 8},
                "cpu": "192",
                "memory": "2Ti",
            },
            {"name": "control", "count": 1, "controlPlane": True},
        ]
    }


def h100_fleet(nodes: int) -> dict[str, object]:
    """A fleet file: ``nodes`` NVIDIA H100 nodes (8 ``nvidia.com/gpu`` each) and one control-plane node."""
    return {
        "nodePools": [
            {
                "name": "h100",
                "count": nodes,
                "gpu": {"vendor": "nvidia", "product": "H100-SXM", "count": 8},
                "cpu": "224",
                "memory": "2Ti",
            },
            {"name": "control", "count": 1, "controlPlane": True},
        ]
    }


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    workdir: Path
    kubeconfig: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def sim_running(
    prefix: str,
    *,
    nodes: int | None = None,
    fleet: Mapping[str, object] | None = None,
    dcm_delay: float | None = None,
    pod_ready_delay: float | None = None,
    profile: Path | None = None,
    start_timeout: float = 300,
) -> Iterator[Sim]:
    """``aiplane sim --controllers none`` in its own process, in a temporary directory named after
    ``prefix`` (kept for the ``with`` block, for the kubeconfig and whatever the script puts there).

    ``nodes``: a fleet of that many MI300X nodes, or ``fleet``: a fleet file's content (else the sim's
    default small fleet); ``dcm_delay``
    and ``pod_ready_delay``: the simulated agents' delays (else the sim's defaults); ``profile``: run the
    sim under cProfile. Yields once the kubeconfig is written, i.e. the server is serving."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        workdir = Path(tmp)
        kubeconfig = workdir / "kubeconfig"
        args = ["sim", "--kubeconfig", str(kubeconfig), "--controllers", "none"]
        if nodes is not None or fleet is not None:
            path = workdir / "fleet.yaml"
            content = dict(fleet) if fleet is not None else mi300x_fleet(nodes or 0)
            path.write_text(yaml.safe_dump(content), encoding="utf-8")
            args += ["--fleet", str(path)]
        if dcm_delay is not None:
            args += ["--dcm-delay", str(dcm_delay)]
        if pod_ready_delay is not None:
            args += ["--pod-ready-delay", str(pod_ready_delay)]
        log = workdir / "sim.stderr"
        with log.open("wb") as stderr:
            proc = subprocess.Popen(
                aiplane_command(*args, profile=profile), stdout=subprocess.DEVNULL, stderr=stderr
            )
        try:
            end = time.monotonic() + start_timeout
            while not kubeconfig.exists():
                if proc.poll() is not None or time.monotonic() > end:
                    err = log.read_text(encoding="utf-8", errors="replace")[-4000:]
                    raise SystemExit(f"aiplane sim did not start:\n{err}".rstrip())
                time.sleep(0.05)
            yield Sim(proc, workdir, kubeconfig)
        finally:
            stop(proc)


def pod_ready(pod: Mapping[str, object]) -> bool:
    """Running with the ``Ready`` condition True: what the benchmarks wait for."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return False
    conditions = status.get("conditions")
    return (
        status.get("phase") == "Running"
        and isinstance(conditions, list)
        and any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in conditions
        )
    )


async def create_namespaces(client: HttpKubeClient, count: int, prefix: str = "serving") -> list[str]:
    """``count`` namespaces ``<prefix>-<i>`` for a benchmark's objects."""
    names = [f"{prefix}-{i}" for i in range(count)]
    for ns in names:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return names


async def bench_client(kubeconfig: Path) -> HttpKubeClient:
    """The benchmark's client: no rate limit, counted by the server as ``aiplane-bench``."""
    return await HttpKubeClient.from_kubeconfig(
        str(kubeconfig), qps=float("inf"), user_agent="aiplane-bench/1"
    )


async def writes_by_verb(client: HttpKubeClient, agent: str = OPERATOR_AGENT) -> dict[str, int]:
    """Write requests the server has had from User-Agent product ``agent`` so far, by verb."""
    stats = (await client.request("GET", "/_sim/stats"))["requests"].get(agent, {})
    return {verb: int(stats.get(verb, 0)) for verb in WRITE_VERBS}


async def write_count(client: HttpKubeClient, agent: str = OPERATOR_AGENT) -> int:
    """Write requests the server has had from User-Agent product ``agent`` so far."""
    return sum((await writes_by_verb(client, agent)).values())


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, interval: float = 0.5
) -> None:
    """Call ``check`` every ``interval`` seconds until it is true; exit if ``timeout`` passes first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await check():
            return
        await asyncio.sleep(interval)
    raise SystemExit(f"timed out waiting for {what}")


def figure(label: str, value: str, unit: str = "", note: str = "") -> None:
    """One line of a figures report: label, value right-aligned, unit, and a note in a column."""
    after = f" {unit}" if unit else ""
    print(f"{label:<25}{value:>8}{after:<2}   {note}" if note else f"{label:<25}{value:>8}{after}")


def operator_figures(cpu: float, peak_rss_mb: float) -> None:
    """The two lines every operator benchmark reports: its CPU seconds and its peak RSS."""
    figure("operator CPU", f"{cpu:.1f}", "s")
    figure("operator peak RSS", f"{peak_rss_mb:.0f}", "MB")


def closing_figures(
    cpu: float,
    peak_rss_mb: float,
    sim_cpu: float,
    steady_writes: int,
    steady_seconds: float,
    steady_cpu: float,
) -> None:
    """The lines every workload benchmark ends with: the operator's cost, the sim's, and the steady state."""
    operator_figures(cpu, peak_rss_mb)
    figure("sim CPU (API + agents)", f"{sim_cpu:.1f}", "s")
    figure(
        "after convergence",
        str(steady_writes),
        note=f"writes in {steady_seconds:.0f} s (operator CPU {steady_cpu:.2f} s)",
    )


async def event_writes(client: HttpKubeClient, components: set[str]) -> tuple[int, int, dict[str, int]]:
    """(creates, aggregation patches, occurrences by reason) of the Events these components recorded:
    Events are best-effort and reported apart from the writes a controller needs."""
    events = [
        e
        for e in (await client.list(EVENTS))["items"]
        if (e.get("source") or {}).get("component") in components or e.get("reportingComponent") in components
    ]
    reasons: dict[str, int] = {}
    for e in events:
        reasons[str(e.get("reason"))] = reasons.get(str(e.get("reason")), 0) + int(e.get("count") or 1)
    return len(events), sum(max(0, int(e.get("count") or 1) - 1) for e in events), reasons


# --- the real control plane (kube-apiserver and the rest, built by scripts/build-kube) ------------------

ROOT = Path(__file__).resolve().parents[1]
#: The audit log's verbs of write requests, and the HTTP method ``/_sim/stats`` counts each under.
AUDIT_WRITE_VERBS = {
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}


def kube_bin_dir() -> Path:
    """The real control plane's binaries: ``AIPLANE_KUBE_BIN``, else what ``scripts/build-kube`` prints
    (it builds them the first time, ~10 min; then a stamp check)."""
    value = os.environ.get("AIPLANE_KUBE_BIN")
    if value:
        return Path(value)
    out = subprocess.run(
        [str(ROOT / "scripts" / "build-kube")], check=True, capture_output=True, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


@contextlib.contextmanager
def real_running(
    prefix: str,
    *,
    fleet: Mapping[str, object] | None = None,
    crds: bool = False,
    audit_node_writes: bool = False,
    keep: Path | None = None,
) -> Iterator[RealCluster]:
    """A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) in a
    temporary directory, with ``fleet``'s nodes as kwok nodes (else the default small fleet); stopped on
    the way out. kube-apiserver keeps an audit log of the requests of every client but its own
    components (the launcher's policy), which :func:`audit_writes` reads. ``audit_node_writes`` adds
    every client's Node writes, in full; ``keep`` is where the audit log is copied on the way out."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cluster = start_real_cluster(
            Path(tmp) / "kube",
            bin_dir=kube_bin_dir(),
            fleet=Fleet.model_validate(dict(fleet)) if fleet is not None else None,
            install_crds=crds,
            tie_to_parent=True,
            timeout=600,
            audit_node_writes=audit_node_writes,
        )
        try:
            yield cluster
        finally:
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(cluster.audit_log, keep / "audit.log")
            cluster.stop()


def audit_writes(cluster: RealCluster, agent: str = OPERATOR_AGENT) -> dict[str, int]:
    """Write requests kube-apiserver has audited from User-Agent product ``agent`` so far, by verb
    (POST/PUT/PATCH/DELETE, as ``/_sim/stats`` counts them: the same definition on both servers)."""
    verbs = AUDIT_WRITE_VERBS
    counts = dict.fromkeys(WRITE_VERBS, 0)
    path = cluster.audit_log
    if not path.exists():
        return counts
    with path.open("rb") as log:
        for line in log:
            record = orjson.loads(line)
            product = str(record.get("userAgent", "")).split(" ", 1)[0].split("/", 1)[0]
            verb = verbs.get(record.get("verb", ""))
            if product == agent and verb is not None and record.get("stage") == "ResponseComplete":
                counts[verb] += 1
    return counts


def audit_breakdown(cluster: RealCluster, agent: str = OPERATOR_AGENT, skip: int = 0) -> dict[str, int]:
    """The audited writes from ``agent`` after the first ``skip`` of them, by "verb resource[/sub] code"
    (what a ratio above the minimum is made of: conflicts, evictions, Events)."""
    counts: dict[str, int] = {}
    seen = 0
    with cluster.audit_log.open("rb") as log:
        for line in log:
            record = orjson.loads(line)
            product = str(record.get("userAgent", "")).split(" ", 1)[0].split("/", 1)[0]
            if product != agent or record.get("stage") != "ResponseComplete":
                continue
            if record.get("verb") not in AUDIT_WRITE_VERBS:
                continue
            seen += 1
            if seen <= skip:
                continue
            ref = record.get("objectRef") or {}
            what = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            key = f"{record.get('verb')} {what} {(record.get('responseStatus') or {}).get('code')}"
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def real_cpu_seconds(cluster: RealCluster) -> dict[str, float]:
    """CPU seconds so far of each running component of the real control plane."""
    return {name: cpu_seconds(pid) for name, pid in cluster.pids.items()}

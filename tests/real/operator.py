"""The operator on the real control plane as it runs on a cluster: the Helm chart installed by Helm's own
engine, the operator acting with a token of the chart's ServiceAccount, and kube-apiserver's audit log as
the record of what RBAC allowed and refused it.

What differs from a cluster: no kubelet runs containers here (kwok only marks Pods Running), so the
chart's Deployment is installed with no replicas and the operator runs as a process beside the control
plane (``aiplane run --kubeconfig``), with the token the kubelet would have mounted into its pod, made by
the same TokenRequest API. The simulated hardware (``aiplane hardware``) runs beside it as the admin,
as the AMD GPU operator runs with its own privileges on a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiplane.realcluster import RealCluster
from tests import chart_helpers, least_privilege

ROOT = Path(__file__).resolve().parents[2]
#: The chart's values for a cluster with no kubelet: its Deployment's pods would be marked Running by
#: kwok with no process behind them, so the operator runs out of process instead (see the module doc).
CHART_VALUES: dict[str, Any] = {"replicaCount": 0}
TOKEN_SECONDS = 3 * 3600


@dataclass(frozen=True)
class Release:
    """The installed chart: its ServiceAccount and a kubeconfig holding a token of it."""

    namespace: str
    service_account: str
    kubeconfig: Path
    manifest: tuple[dict[str, Any], ...]

    @property
    def user(self) -> str:
        """The name RBAC and the audit log give the ServiceAccount."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def install_chart(cluster: RealCluster) -> list[dict[str, Any]]:
    """``helm install aiplane deploy/helm/aiplane -n aiplane-system --create-namespace`` through Helm's
    library (helm-python-sdk bundles it): the chart's CRDs first, then its templates, recorded as a
    release (a Secret in the namespace) as the helm CLI does. Returns the rendered manifest."""
    import helm_python

    config = helm_python.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=chart_helpers.NAMESPACE)
    try:
        release = config.install(
            str(chart_helpers.CHART),
            chart_helpers.RELEASE,
            CHART_VALUES,
            namespace=chart_helpers.NAMESPACE,
            create_namespace=True,
            timeout=120,
        )
    finally:
        config.close()
    return [doc for doc in yaml.safe_load_all(release["manifest"]) if doc]


def token_kubeconfig(cluster: RealCluster, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster (server, CA) with ``token`` as the only credential."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    cluster_entry = admin["clusters"][0]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster_entry],
                "users": [{"name": "operator", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "operator",
                        "context": {
                            "cluster": cluster_entry["name"],
                            "user": "operator",
                            "namespace": chart_helpers.NAMESPACE,
                        },
                    }
                ],
                "current-context": "operator",
            }
        ),
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


@dataclass
class Process:
    """One ``python -m aiplane.cli …`` process, its stderr in ``log``."""

    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        with self.log.open("ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aiplane.cli", *self.argv],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a node failure or an OOM kill would end the pod."""
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM (what the kubelet sends first), SIGKILL after ``grace``; the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def errors(self) -> list[str]:
        """The error-level lines of its JSON log."""
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return [line for line in text.splitlines() if '"level":"error"' in line]

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "".join(text.splitlines(keepends=True)[-lines:])


def operator_process(release: Release, controllers: str, log: Path, *extra: str) -> Process:
    """``aiplane run`` with the ServiceAccount's kubeconfig and the chart's leader election (its Lease
    in the release namespace, which only the chart's Role grants)."""
    return Process(
        [
            "run",
            "--kubeconfig",
            str(release.kubeconfig),
            "--controllers",
            controllers,
            "--leader-elect",
            "--leader-election-namespace",
            release.namespace,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            *extra,
        ],
        log,
    )


@dataclass(frozen=True)
class Request:
    """One completed request of the audit log, as far as RBAC is concerned."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    #: kube's authorizer's decision (the audit annotation): "forbid" is an RBAC refusal; a 403 with
    #: "allow" came from admission (a create in a namespace being deleted, say).
    decision: str

    def grant(self) -> least_privilege.Grant:
        return (
            self.verb,
            self.group,
            f"{self.resource}/{self.subresource}" if self.subresource else self.resource,
        )

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.code} {self.verb} {self.group or 'core'}/{self.grant()[2]} {where}{self.name}".rstrip()


@dataclass
class Audit:
    """Reads kube-apiserver's audit log from where it was when made: the requests one user completed."""

    path: Path
    user: str
    offset: int = field(default=0)

    @classmethod
    def from_now(cls, path: Path, user: str) -> Audit:
        return cls(path, user, path.stat().st_size if path.exists() else 0)

    def requests(self) -> list[Request]:
        out = []
        with contextlib.suppress(FileNotFoundError), self.path.open("rb") as log:
            log.seek(self.offset)
            for line in log:
                if not line.endswith(b"\n"):
                    break  # being written: read with the next call
                event = json.loads(line)
                if event.get("stage") != "ResponseComplete" or event["user"]["username"] != self.user:
                    continue
                ref = event.get("objectRef") or {}
                out.append(
                    Request(
                        verb=event["verb"],
                        group=ref.get("apiGroup", ""),
                        resource=ref.get("resource", ""),
                        subresource=ref.get("subresource", ""),
                        namespace=ref.get("namespace", ""),
                        name=ref.get("name", ""),
                        code=event.get("responseStatus", {}).get("code", 0),
                        decision=(event.get("annotations") or {}).get("authorization.k8s.io/decision", ""),
                    )
                )
        return out

    def refused(self) -> list[str]:
        """The requests kube's RBAC authorizer refused (403, decision "forbid"), readable."""
        return sorted({str(r) for r in self.requests() if r.code == 403 and r.decision != "allow"})

    def used(self) -> set[least_privilege.Grant]:
        """What RBAC allowed: the grants the requests needed."""
        return {r.grant() for r in self.requests() if r.resource and r.decision == "allow"}


@contextlib.contextmanager
def running(process: Process) -> Iterator[Process]:
    process.start()
    try:
        yield process
    finally:
        process.stop()

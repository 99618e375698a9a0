"""``aiplane sim``: the command contract tests, benchmarks and scripts rely on (DESIGN.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

AIPLANE = [sys.executable, "-m", "aiplane.cli"]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"

FLEET = {
    "nodePools": [
        {
            "name": "mi300x",
            "count": 3,
            "gpu": {"vendor": "amd", "product": "MI300X", "count": 8},
            "cpu": "192",
            "memory": "2Ti",
            "labels": {"topology.kubernetes.io/zone": "zone-a"},
        },
        {"name": "h100", "count": 2, "gpu": {"vendor": "nvidia", "product": "H100-SXM", "count": 8}},
        {"name": "control", "count": 1, "controlPlane": True},
    ]
}


def _wait_for(path: Path, proc: subprocess.Popen[str], deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if path.exists():
            return
        if proc.poll() is not None:
            raise AssertionError(f"aiplane sim exited early: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError("no kubeconfig within the deadline")


def test_sim_serves_the_fleet_to_kubectl_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(FLEET), encoding="utf-8")
    kubeconfig = tmp_path / "kube" / "config"
    proc = subprocess.Popen(
        [
            *AIPLANE,
            "sim",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--fleet",
            str(fleet),
            "--controllers",
            "none",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(kubeconfig, proc)
        config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
        assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        out = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        nodes = {n["metadata"]["name"]: n for n in json.loads(out)["items"]}
        assert sorted(nodes) == ["control-0", "h100-0", "h100-1", "mi300x-0", "mi300x-1", "mi300x-2"]
        amd = nodes["mi300x-0"]
        assert amd["metadata"]["labels"]["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
        assert amd["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
        assert amd["status"]["allocatable"]["amd.com/gpu"] == "8"
        nvidia = nodes["h100-0"]
        assert nvidia["metadata"]["labels"]["nvidia.com/gpu.count"] == "8"
        assert nvidia["status"]["capacity"]["nvidia.com/gpu"] == "8"
        assert "node-role.kubernetes.io/control-plane" in nodes["control-0"]["metadata"]["labels"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sim_rejects_a_bad_fleet_file_with_the_field_named(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump(
            {"nodePools": [{"name": "a", "count": 1, "gpu": {"vendor": "intel", "product": "x"}}]}
        ),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [*AIPLANE, "sim", "--kubeconfig", str(tmp_path / "kc"), "--fleet", str(fleet)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
        check=False,
    )
    assert proc.returncode == 2
    assert "nodePools.0.gpu.vendor" in proc.stderr
    assert not (tmp_path / "kc").exists()


ECHO = {
    "apiVersion": "diagnostics.aiplane.io/v1",
    "kind": "Echo",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {"value": "world"},
}


def test_sim_runs_selected_controllers_in_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [*AIPLANE, "sim", "--kubeconfig", str(kubeconfig), "--controllers", "echo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(kubeconfig, proc)
        kubectl = [KUBECTL, "--kubeconfig", str(kubeconfig)]
        subprocess.run(
            [
                *kubectl,
                "wait",
                "crd/echoes.diagnostics.aiplane.io",
                "--for=condition=Established",
                "--timeout=60s",
            ],
            check=True,
            capture_output=True,
            timeout=90,
        )
        subprocess.run(
            [*kubectl, "apply", "-f", "-"],
            input=json.dumps(ECHO),
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )
        waited = subprocess.run(
            [*kubectl, "wait", "echo/hello", "--for=jsonpath={.status.value}=world", "--timeout=60s"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert waited.returncode == 0, waited.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sim_rejects_unknown_controllers(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*AIPLANE, "sim", "--kubeconfig", str(tmp_path / "kc"), "--controllers", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown controller(s) nope" in proc.stderr

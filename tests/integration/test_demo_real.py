"""``aiplane demo --real``: the demo on a real control plane (kube-apiserver, controller-manager, scheduler,
kwok nodes, the scheduler-plugins Coscheduling gang scheduler in Volcano's place, and upstream Kueue) with
the simulated hardware and the operator as API clients, end to end; every section is listed in the closing
report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_NO_GO = 3  # scripts/build-kube: this machine has no Go toolchain

pytestmark = pytest.mark.real


def _built(variable: str, script: str) -> str:
    if value := os.environ.get(variable):
        return value
    build = subprocess.run([str(ROOT / "scripts" / script)], capture_output=True, text=True, check=False)
    if build.returncode == _NO_GO:
        pytest.skip(build.stderr.strip())
    assert build.returncode == 0, f"scripts/{script} failed:\n{build.stderr[-5000:]}"
    return build.stdout.strip().splitlines()[-1]


def test_demo_real_runs_what_the_control_plane_hosts_and_lists_what_it_skipped(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIPLANE_KUBE_BIN": _built("AIPLANE_KUBE_BIN", "build-kube"),
        "AIPLANE_NEIGHBOURS_DIR": _built("AIPLANE_NEIGHBOURS_DIR", "build-neighbours"),
        "AIPLANE_CACHE": str(tmp_path / "cache"),  # its own control plane's state, not the user's
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    command = [
        *(sys.executable, "-m", "aiplane.cli", "demo", "--real"),
        *("--kubeconfig", str(tmp_path / "kubeconfig"), "--log-file", str(tmp_path / "demo.log")),
        *("--dcm-delay", "0.05", "--plugin-refresh-delay", "0", "--quiet-seconds", "1", "--timeout", "120"),
    ]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False
    )
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
    flat = " ".join(re.sub(r"[│|┃]", " ", out).split())
    assert "kube-apiserver at https://127.0.0.1:" in flat
    # Partitioning ran on kube's own controllers: the four inference nodes went to CPX, within the limits,
    # nothing left cordoned, and the operator silent once converged.
    assert "PartitioningPlan mi300x-inference-cpx: Completed" in out
    assert out.count("8 → 64") >= 4
    assert re.search(r"left cordoned/tainted none", flat)
    assert re.search(r"operator API writes \d+, then 0 in the 1s after", flat)
    # Upstream Kueue runs beside it: the ClusterQueue follows the partitions, and a second workload (56
    # GPUs; a component, as Volcano is not installed) waits in Kueue's words until CPX raises the MI300X
    # flavor's quota past 48, then Kueue admits it and its pod runs.
    assert "Kueue is not installed on this cluster" not in flat
    assert "Volcano is not installed (no PodGroup API of Volcano's)" in flat
    assert re.search(
        r"amd\.com/gpu nominal quota \(from allocatable, partitions included\): \d+ → .*272", flat
    )
    assert "Available=False QuotaPending: pod llama-batch-" in flat
    assert "> maximum capacity (48)" in flat
    assert int(re.findall(r"admitted when the quota reached (\d+)", flat)[0]) >= 56
    assert "admitted at quota" in flat and "1/1 pods running" in flat
    # The closing report lists every section, what ran and what was skipped, with the reason.
    assert "1. GPU partitioning: ran: converged cleanly" in flat
    # The 1P2D ModelInfer's gangs on the scheduler-plugins Coscheduling scheduler: up, then an image change
    # rolled without going below replicas - maxUnavailable available groups.
    assert "gang-scheduled by the scheduler-plugins Coscheduling scheduler" in flat
    assert "2 groups of 6 pods, Available in" in flat
    assert "fewest groups available 1 (floor replicas - maxUnavailable = 1)" in flat
    # Queued in upstream Kueue: every pod carries the namespace's queue (Kueue admitted them to run).
    assert re.search(r"Kueue queue \S+ on 12 of 12 pods", flat), flat
    assert "most groups 2 (ceiling replicas + maxSurge = 2)" in flat
    # The pool repartitioned CPX → SPX → CPX under it, through kube's Eviction API and our group budgets;
    # the floor measured on every pod change a watch delivered, and kept.
    assert "The inference pool to mi300x-spx under" in out and "The inference pool to mi300x-cpx under" in out
    assert out.count("64 → 8") >= 4
    assert flat.count("6 selected: 6 Succeeded, 0 Failed") == 3
    assert re.search(
        r"fewest groups available 1 of 2, measured on every one of \d+ committed pod changes "
        r"\(floor replicas - maxUnavailable = 1\): kept",
        flat,
    ), flat
    assert "BROKEN" not in out and "below the floor" not in out
    # Every group was rebuilt on other nodes; a rebuilt group's Coscheduling PodGroup follows it again
    # (its controller never leaves Failed, so the PodGroup is made anew), not Failed for ever.
    phases = re.findall(r"^\s*llama-8b-pd-\d\s+(\S+)\s", out, flags=re.MULTILINE)
    assert len(phases) >= 6 and "Failed" not in phases, phases
    assert "2. ModelInfer: ran: converged cleanly" in flat
    assert "3. Repartition the serving pool under live inference: ran: converged cleanly" in flat
    # No volume provisioner: the demo makes the class and a volume as an administrator would, and kube's
    # PersistentVolume controller binds the graph's claim; the request's 1- and 2-GPU workers fill all 16
    # H100 GPUs under kube-scheduler's GPU bin-packing profile.
    assert "created StorageClass standard-rwx (no provisioner) and 1 PersistentVolume(s)" in flat
    assert "4. Dynamo: ran: converged cleanly" in flat
    assert "5. SLA-driven request: ran: converged cleanly" in flat
    # Its control plane is gone with it.
    assert not (tmp_path / "cache" / "demo-cluster").exists()

"""``aiplane demo``, the README's main command: it must run from a fresh clone, converge, and say so."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

AIPLANE = [sys.executable, "-m", "aiplane.cli"]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
ROOT = Path(__file__).resolve().parents[2]
FAST = [
    "--dcm-delay",
    "0.05",
    "--pod-ready-delay",
    "0",
    "--plugin-refresh-delay",
    "0",
    "--quiet-seconds",
    "1",
]


def _demo(tmp_path: Path, *extra: str) -> list[str]:
    return [
        *AIPLANE,
        "demo",
        "--kubeconfig",
        str(tmp_path / "kubeconfig"),
        "--log-file",
        str(tmp_path / "demo.log"),
        *FAST,
        *extra,
    ]


def test_demo_rolls_cpx_across_the_inference_nodes_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "demo.log").write_text('{"msg":"a previous run"}\n', encoding="utf-8")
    done = subprocess.run(_demo(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "PartitioningPlan mi300x-inference-cpx: Completed" in out
    # The four inference nodes went to CPX (64 logical GPUs), the training pool stayed SPX.
    assert out.count("8 → 64") >= 4
    assert "6 selected: 6 Succeeded, 0 Failed" in out
    assert "most in progress 3 (maxParallel 3)" in out or "most in progress 2 (maxParallel 3)" in out
    assert re.search(r"left cordoned/tainted\W+none", out)
    # The Kueue ClusterQueue follows the partitions: 6 MI300X nodes x 8, then the 4 inference nodes at 64.
    flat_all = " ".join(re.sub(r"[│|]", " ", out).split())
    assert "amd.com/gpu nominal quota (from allocatable, partitions included): 48 →" in flat_all
    assert "→ 272 (never lower on the way)" in flat_all
    # A second workload (56 GPUs) waits in Kueue, in Kueue's words, until CPX raises the quota past 48.
    assert "QuotaReserved=False QuotaPending: group llama-batch-0-" in flat_all
    assert "current podset request (56) > maximum capacity (48)" in flat_all
    assert int(re.findall(r"admitted when the quota reached (\d+)", flat_all)[0]) >= 56
    assert "running 7/7 pods" in flat_all
    # Then the 1P2D ModelInfer comes up on the partitioned nodes and an image change rolls out
    # without going below replicas - maxUnavailable available groups.
    assert "ModelInfer team-a/llama-8b-pd" in out
    assert "2 groups of 6 pods, Available in" in out
    flat = " ".join(re.sub(r"[│|]", " ", out).split())  # rich wraps table cells across lines
    assert "fewest groups available 1 (floor replicas - maxUnavailable = 1)" in flat
    assert "most groups 2 (ceiling replicas + maxSurge = 2)" in flat
    # The team's AIMNamespaceConfig reached every ModelInfer pod, by reference.
    assert "HF_TOKEN, HUGGING_FACE_HUB_TOKEN in 12 of 12 pods; image pull secrets aim-registry-creds" in flat
    # Its pods were given the namespace's Kueue queue (the KaiwoConfig's), every one of them.
    assert re.search(r"Kueue queue \S+ on 12 of 12 pods", flat), flat
    # The headline: the plan takes the serving pool back to SPX under the live ModelInfer; the floor
    # (replicas - maxUnavailable groups available) is measured on every committed pod change and kept,
    # the group budgets released one group at a time, every node done, nothing left cordoned.
    assert "3. Repartition the serving pool under live inference" in out
    assert "The inference pool to mi300x-spx under" in out and "The inference pool to mi300x-cpx under" in out
    assert out.count("64 → 8") >= 4
    assert out.count("8 → 64") >= 8  # the pool to CPX in section 1, and back to CPX under load
    assert out.count("6 selected: 6 Succeeded, 0 Failed") == 3  # SPX → CPX, then CPX → SPX → CPX under load
    assert re.search(
        r"fewest groups available 1 of 2, measured on every one of \d+ committed pod changes "
        r"\(floor replicas - maxUnavailable = 1\): kept",
        flat,
    ), flat
    assert "2 of 2 PodDisruptionBudgets released for eviction at some point" in flat
    assert "BROKEN" not in out and "below the floor" not in out
    # Then the example Dynamo graph on the NVIDIA nodes, and a worker image change that is not
    # "successful" while it rolls (upstream #3567), measured on every committed change.
    assert "DynamoGraphDeployment team-a/llama-disagg" in out
    assert (
        "3 DynamoComponentDeployment, 3 Deployment, 1 Service, 1 Ingress, 1 HorizontalPodAutoscaler" in flat
    )
    assert "'successful' while a rollout was in flight: 0 times" in flat
    # Then an SLA-driven request becomes a running graph sized by the in-process planner.
    assert "DynamoGraphDeploymentRequest team-a/qwen3-8b-sla" in out
    assert "Profiling → Deploying → Ready" in flat
    assert out.count("then 0 in the 1s after") == 6
    assert "aiplane demo --keep" in out and "KUBECONFIG=" in out
    # The operator's logs went to the file, not into the live view.
    assert '"controller"' not in out
    log = (tmp_path / "demo.log").read_text(encoding="utf-8")
    assert log.strip()
    # It holds this run only (the previous one is kept beside it, not appended to), and nothing in a
    # clean run is an error: expected races (409/404) are debug.
    assert "a previous run" not in log
    assert "a previous run" in (tmp_path / "demo.log.1").read_text(encoding="utf-8")
    assert [
        line for line in log.splitlines() if '"level":"error"' in line or '"level":"warning"' in line
    ] == []


def test_demo_keep_leaves_a_cluster_kubectl_can_use_until_sigint(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        _demo(tmp_path, "--keep"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        end = time.monotonic() + 240
        seen = []
        while time.monotonic() < end:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Ctrl-C stops it" in line:
                break
        assert any("keeps running" in line for line in seen), "".join(seen)
        # Every hint works exactly as printed, in a shell where neither kubectl nor aiplane is on PATH
        # and no KUBECONFIG is set: the printed export line provides both.
        printed = "".join(seen)
        # Every section reached its goal (a failed one is named in red in the output, shown here).
        assert "did not complete" not in printed and "BROKEN" not in printed, printed
        assert "Profiling → Deploying → Ready" in " ".join(re.sub(r"[│|]", " ", printed).split()), printed
        setup = next(line.strip() for line in seen if line.strip().startswith("export KUBECONFIG="))
        hints = printed.split("then try\n", 1)[1].split("Ctrl-C stops it", 1)[0].splitlines()
        hints = [h.strip() for h in hints if h.strip()]
        assert len(hints) >= 6 and all(h.startswith("kubectl ") for h in hints), printed
        bare = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "VIRTUAL_ENV")}
        bare["PATH"] = "/usr/bin:/bin"
        for hint in hints:
            got = subprocess.run(
                ["bash", "-c", f"{setup}\n{hint}"],
                env=bare,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert got.returncode == 0, (hint, got.stderr, printed)
        env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
        got = subprocess.run(
            [KUBECTL, "get", "gpuplan", "-o", "yaml"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        plans = yaml.safe_load(got.stdout)["items"]
        assert [p["status"]["phase"] for p in plans] == ["Completed"]
        # The printed scale hint (run above): a third group fits on the inference pool (CPX again).
        got = subprocess.run(
            [
                KUBECTL,
                "-n",
                "team-a",
                "wait",
                "modelinfer/llama-8b-pd",
                "--for=jsonpath={.status.availableReplicas}=3",
                "--timeout=60s",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert got.returncode == 0 and "condition met" in got.stdout, got.stderr
        got = subprocess.run(
            [KUBECTL, "-n", "team-a", "get", "pdb", "-o", "name"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.returncode == 0, got.stderr
        assert {f"poddisruptionbudget.policy/llama-8b-pd-{i}" for i in range(3)} <= set(got.stdout.split())
        # The other hint: the ModelInfer's story of the repartitioning, in its Events.
        got = subprocess.run(
            [KUBECTL, "-n", "team-a", "describe", "modelinfer", "llama-8b-pd"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.returncode == 0, got.stderr
        assert "DisruptionAllowed" in got.stdout and "Released group llama-8b-pd-" in got.stdout
        got = subprocess.run(
            [KUBECTL, "-n", "team-a", "get", "dgd,dcd"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.returncode == 0 and "successful" in got.stdout, got.stderr
        got = subprocess.run(
            [KUBECTL, "-n", "team-a", "get", "dgdr"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.returncode == 0 and "Ready" in got.stdout and "successful" in got.stdout, got.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

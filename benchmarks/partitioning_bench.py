"""GPU partitioning at scale (a benchmark script, not a test).

``aiplane sim`` with N simulated MI300X nodes (DCM delay 0), and the operator (``aiplane run
--controllers all``) in its own process; one plan rolls CPX over every node with ``maxParallel: 50``.
Reported: time until the plan is Completed, API writes per node (counted by the server, by the
operator's User-Agent) against the minimum the state machine needs, operator CPU seconds and peak RSS.

Minimum writes per node: create the NodePartitioning, admit it, add and remove its finalizer, five Node
updates (cordon, taint, DCM profile label, untaint, uncordon), four status updates (Draining,
WaitingOperator, Verifying, Succeeded) = 13, plus the plan's own status writes, amortised.

Usage: ``.venv/bin/python benchmarks/partitioning_bench.py [--nodes 1000] [--max-parallel 50]``
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from procstats import cpu_seconds, peak_rss_mb

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import resource_for

PY = sys.executable
MIN_WRITES_PER_NODE = 13
PRODUCT = "AMD_Instinct_MI300X_OAM"


async def _wait(check: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await check():
            return
        await asyncio.sleep(0.5)
    raise SystemExit("timed out")


async def _writes(client: HttpKubeClient) -> int:
    stats = (await client.request("GET", "/_sim/stats"))["requests"].get("aiplane", {})
    return sum(stats.get(v, 0) for v in ("POST", "PUT", "PATCH", "DELETE"))


async def measure(kubeconfig: Path, nodes: int, max_parallel: int) -> None:
    client = await HttpKubeClient.from_kubeconfig(
        str(kubeconfig), qps=float("inf"), user_agent="aiplane-bench/1"
    )
    profiles = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningProfile")
    plans = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
    await client.create(
        profiles,
        {
            "apiVersion": "infrastructure.silogen.ai/v1alpha1",
            "kind": "PartitioningProfile",
            "metadata": {"name": "cpx"},
            "spec": {"dcmProfileName": "cpx", "expectedResources": {"amd.com/gpu": "64"}},
        },
    )
    operator = subprocess.Popen(
        [
            PY,
            "-m",
            "aiplane.cli",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--controllers",
            "all",
            "--max-concurrent-reconciles",
            "8",
            "--kube-api-qps",
            "100000",
            "--kube-api-burst",
            "100000",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        async def ready() -> bool:
            got = await client.get(profiles, "cpx")
            return any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (got.get("status") or {}).get("conditions", [])
            )

        await _wait(ready, 120)
        before, cpu0 = await _writes(client), cpu_seconds(operator.pid)
        started = time.monotonic()
        await client.create(
            plans,
            {
                "apiVersion": "infrastructure.silogen.ai/v1alpha1",
                "kind": "PartitioningPlan",
                "metadata": {"name": "cpx-all"},
                "spec": {
                    "rollout": {"maxParallel": max_parallel, "maxUnavailable": max_parallel},
                    "rules": [
                        {
                            "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
                            "profileRef": {"name": "cpx"},
                        }
                    ],
                },
            },
        )

        async def completed() -> bool:
            return ((await client.get(plans, "cpx-all")).get("status") or {}).get("phase") == "Completed"

        await _wait(completed, 3600)
        seconds = time.monotonic() - started
        writes = await _writes(client) - before
        cpu = cpu_seconds(operator.pid) - cpu0
        print(
            f"{nodes} MI300X nodes, maxParallel {max_parallel}, DCM delay 0, operator in its own process, 2 cores"
        )
        print(f"time to Completed        {seconds:8.1f} s   ({nodes / seconds:.1f} nodes/s)")
        print(
            f"API writes per node      {writes / nodes:8.2f}     (minimum {MIN_WRITES_PER_NODE}; ratio {writes / nodes / MIN_WRITES_PER_NODE:.2f})"
        )
        print(f"operator CPU             {cpu:8.1f} s")
        print(f"operator peak RSS        {peak_rss_mb(operator.pid):8.0f} MB")
    finally:
        operator.send_signal(signal.SIGTERM)
        operator.wait(timeout=60)
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=50)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="aiplane-pbench-"))
    fleet = tmp / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump(
            {
                "nodePools": [
                    {
                        "name": "mi300x",
                        "count": args.nodes,
                        "gpu": {"vendor": "amd", "product": "MI300X", "count": 8},
                        "cpu": "192",
                        "memory": "2Ti",
                    },
                    {"name": "control", "count": 1, "controlPlane": True},
                ]
            }
        ),
        encoding="utf-8",
    )
    kubeconfig = tmp / "kubeconfig"
    sim = subprocess.Popen(
        [
            PY,
            "-m",
            "aiplane.cli",
            "sim",
            "--kubeconfig",
            str(kubeconfig),
            "--controllers",
            "none",
            "--fleet",
            str(fleet),
            "--dcm-delay",
            "0",
            "--pod-ready-delay",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 300
        while not kubeconfig.exists():
            if sim.poll() is not None or time.monotonic() > end:
                raise SystemExit("aiplane sim did not start")
            time.sleep(0.1)
        asyncio.run(measure(kubeconfig, args.nodes, args.max_parallel))
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=60)


if __name__ == "__main__":
    main()

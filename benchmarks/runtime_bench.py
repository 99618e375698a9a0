"""The controller runtime at scale, side by side with kopf (a benchmark script, not a test).

Workload: N Echo objects (``echoes.diagnostics.aiplane.io``), each to be reconciled to
``status.value == spec.value``, against the embedded API server in its own process; the operator runs
in its own process too. Measured for ``aiplane run --controllers echo`` and for a ten-line kopf 1.45
operator doing the same, one after the other, in one run:

- objects/s until every object shows its status,
- API writes per object (counted by the server, by the client's User-Agent),
- peak RSS of the operator process (VmHWM),
- CPU of the operator at steady state over ``--steady`` seconds after convergence (target ~0).

Usage: ``.venv/bin/python benchmarks/runtime_bench.py [--objects 5000] [--steady 60] [--no-kopf]``
(kopf is installed on demand: ``pip install 'kopf>=1.45,<1.46'``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplane.controllers.echo import CRD, ECHOES
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import CRDS, NAMESPACES
from benchmarks import simproc
from benchmarks.procstats import cpu_seconds, peak_rss_mb

NAMESPACE = "bench"

KOPF_OPERATOR = textwrap.dedent(
    """
    import kopf

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_):
        settings.posting.enabled = False  # no Events, like the echo controller

    @kopf.on.create("diagnostics.aiplane.io", "v1", "echoes")
    @kopf.on.update("diagnostics.aiplane.io", "v1", "echoes")
    @kopf.on.resume("diagnostics.aiplane.io", "v1", "echoes")
    def echo(spec, status, patch, meta, **_):
        if status.get("value") != spec.get("value", ""):
            patch.status["value"] = spec.get("value", "")
            patch.status["observedGeneration"] = meta.get("generation", 1)
    """
)


@dataclass
class Figures:
    name: str
    objects: int
    seconds: float
    writes: int
    peak_rss_mb: float
    steady_cpu: float

    @property
    def rate(self) -> float:
        return self.objects / self.seconds

    @property
    def writes_per_object(self) -> float:
        return self.writes / self.objects


async def _prepare(client: HttpKubeClient, objects: int) -> None:
    with contextlib.suppress(ApiError):  # exists from a previous round
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    with contextlib.suppress(ApiError):
        await client.create(CRDS, CRD)
    sem = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with sem:
            body = {
                "apiVersion": "diagnostics.aiplane.io/v1",
                "kind": "Echo",
                "metadata": {"name": f"e{i}"},
                "spec": {"value": f"v{i}"},
            }
            await client.create(ECHOES, body, namespace=NAMESPACE)

    await asyncio.gather(*(one(i) for i in range(objects)))


async def _converged(client: HttpKubeClient, objects: int) -> int:
    done = 0
    token: str | None = None
    while True:
        page = await client.list(ECHOES, NAMESPACE, limit=1000, continue_token=token)
        done += sum(1 for o in page["items"] if (o.get("status") or {}).get("value") == o["spec"]["value"])
        token = page["metadata"].get("continue")
        if not token:
            return done


async def _round(
    name: str, cmd: list[str], env: dict[str, str], agent: str, kubeconfig: Path, objects: int, steady: float
) -> Figures:
    client = await simproc.bench_client(kubeconfig)
    try:
        with contextlib.suppress(ApiError):
            await client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")

        async def gone() -> bool:
            try:
                await client.get(NAMESPACES, NAMESPACE)
            except ApiError:
                return True
            return False

        await simproc.wait_until(gone, 120, f"namespace {NAMESPACE} deleted", interval=0.2)
        await _prepare(client, objects)
        before = await simproc.write_count(client, agent)
        started = time.monotonic()
        with simproc.running(cmd, env=env) as proc:

            async def converged() -> bool:
                if await _converged(client, objects) >= objects:
                    return True
                simproc.check_running(proc, name)
                return False

            await simproc.wait_until(converged, math.inf, f"{objects} objects converged", interval=0.25)
            seconds = time.monotonic() - started
            writes = await simproc.write_count(client, agent) - before
            cpu_start = cpu_seconds(proc.pid)
            await asyncio.sleep(steady)
            steady_cpu = (cpu_seconds(proc.pid) - cpu_start) / steady
            steady_writes = await simproc.write_count(client, agent) - before - writes
            if steady_writes:
                print(f"  {name}: {steady_writes} writes during the steady period", file=sys.stderr)
            return Figures(name, objects, seconds, writes, peak_rss_mb(proc.pid), steady_cpu)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--no-kopf", action="store_true")
    args = parser.parse_args()
    with simproc.sim_running("aiplane-bench-") as sim:
        env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig)}
        ours = asyncio.run(
            _round(
                "aiplane",
                simproc.operator_command(sim.kubeconfig, "echo", args.workers),
                env,
                "aiplane",
                sim.kubeconfig,
                args.objects,
                args.steady,
            )
        )
        results = [ours]
        if not args.no_kopf:
            operator = sim.workdir / "kopf_echo.py"
            operator.write_text(KOPF_OPERATOR, encoding="utf-8")
            results.append(
                asyncio.run(
                    _round(
                        "kopf",
                        [
                            simproc.PY,
                            "-m",
                            "kopf",
                            "run",
                            "--standalone",
                            "--namespace",
                            NAMESPACE,
                            str(operator),
                        ],
                        env,
                        "kopf",
                        sim.kubeconfig,
                        args.objects,
                        args.steady,
                    )
                )
            )
    print(f"{args.objects} Echo objects, operator in its own process, embedded API server, 2 cores")
    print(f"{'operator':<10}{'objects/s':>12}{'writes/object':>16}{'peak RSS MB':>14}{'steady CPU':>12}")
    for r in results:
        print(
            f"{r.name:<10}{r.rate:>12,.0f}{r.writes_per_object:>16.2f}{r.peak_rss_mb:>14.0f}{r.steady_cpu:>11.1%}"
        )
    if len(results) == 2:
        print(
            f"aiplane/kopf: throughput x{results[0].rate / results[1].rate:.1f}, "
            f"writes per object x{results[0].writes_per_object / results[1].writes_per_object:.2f}"
        )
    print(orjson.dumps([r.__dict__ for r in results]).decode())


if __name__ == "__main__":
    main()

"""The controller runtime at scale, side by side with kopf (a benchmark script, not a test).

Workload: N Echo objects (``echoes.diagnostics.aiplane.io``), each to be reconciled to
``status.value == spec.value``, against the embedded API server in its own process; the operator runs
in its own process too. Measured for ``aiplane run --controllers echo`` and for a ten-line kopf 1.45
operator doing the same, one after the other, in one run:

- objects/s until every object shows its status,
- API writes per object (counted by the server, by the client's User-Agent),
- peak RSS of the operator process (VmHWM),
- CPU of the operator at steady state over ``--steady`` seconds after convergence (target ~0),
- the operator's CPU per object and the API server's CPU share while converging: the fair
  comparison when the API server, shared by both contenders, is what limits the rate; and when the
  first object showed its status (the operator's start-up, included in objects/s).

Usage: ``.venv/bin/python benchmarks/runtime_bench.py [--objects 5000] [--steady 60] [--workers 16]
[--rounds 3] [--no-kopf] [--baseline SRC] [--profile DIR]`` (kopf: ``pip install -e '.[bench]'``). ``--profile DIR`` records each
operator with py-spy (``pip install py-spy``) into ``DIR/<operator>.svg``, and the API server while it serves
that operator into ``DIR/sim-<operator>.svg`` (a flame graph; ``--profile-raw``: collapsed stacks, ``.txt``; sampling
costs the operator a little CPU, so take rates from a run without it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
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
    operator_cpu: float
    server_cpu: float
    #: Seconds from the operator's start until the first object showed its status (start-up).
    first_seconds: float

    @property
    def operator_ms(self) -> float:
        """Operator CPU per object while converging, in milliseconds."""
        return 1000 * self.operator_cpu / self.objects

    @property
    def server_share(self) -> float:
        """The API server's CPU while converging, as a share of one core."""
        return self.server_cpu / self.seconds

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


def _echoed(obj: dict[str, object]) -> bool:
    status, spec = obj.get("status"), obj.get("spec")
    return isinstance(status, dict) and isinstance(spec, dict) and status.get("value") == spec.get("value")


class _Watcher:
    """Which objects show their status, from one watch opened before the operator starts: the moment
    the last one does is seen at once, at the cost of one watch event per write (a LIST of every object
    four times a second, ``--poll``, costs the API server both contenders share far more)."""

    def __init__(self, client: HttpKubeClient, objects: int, started: float) -> None:
        self.client = client
        self.objects = objects
        self.started = started
        self.echoed: set[str] = set()
        self.first: float | None = None
        self.all_done = asyncio.Event()
        self.ended = False

    async def run(self, resource_version: str) -> None:
        try:
            async for event in self.client.watch(ECHOES, NAMESPACE, resource_version=resource_version):
                obj = event.get("object") or {}
                if event.get("type") not in ("ADDED", "MODIFIED") or "metadata" not in obj:
                    continue
                if _echoed(obj):
                    self.echoed.add(obj["metadata"]["name"])
                    if self.first is None:
                        self.first = time.monotonic() - self.started
                    if len(self.echoed) >= self.objects:
                        self.all_done.set()
                        return
                else:
                    self.echoed.discard(obj["metadata"]["name"])
        finally:
            self.ended = True


async def _wait_converged(
    client: HttpKubeClient, objects: int, proc: subprocess.Popen[bytes], name: str, poll: bool
) -> float | None:
    """Wait until every object shows its status; returns when the first one did (seconds from now)."""
    started = time.monotonic()
    first: list[float] = []

    async def listed() -> bool:
        done = await _converged(client, objects)
        if done and not first:
            first.append(time.monotonic() - started)
        simproc.check_running(proc, name)
        return done >= objects

    if poll:
        await simproc.wait_until(listed, math.inf, f"{objects} objects converged", interval=0.25)
        return first[0] if first else None
    rv = (await client.list(ECHOES, NAMESPACE, limit=1))["metadata"]["resourceVersion"]
    watcher = _Watcher(client, objects, started)
    task = asyncio.create_task(watcher.run(rv))

    async def watched() -> bool:
        simproc.check_running(proc, name)
        if task.done() and not watcher.all_done.is_set():
            task.result()  # raises what ended the watch
            raise SystemExit("the benchmark's watch ended early; run with --poll")
        return watcher.all_done.is_set()

    try:
        await simproc.wait_until(watched, math.inf, f"{objects} objects converged", interval=0.02)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if await _converged(client, objects) < objects:  # the watch's view, checked once
        raise SystemExit("the watch saw every object converge, a LIST does not")
    return watcher.first


@dataclass
class Contender:
    name: str
    cmd: list[str]
    agent: str
    #: Put before the package on the operator's path (``--baseline``: another checkout's ``src``).
    pythonpath: str | None = None


def _env(env: dict[str, str], pythonpath: str | None) -> dict[str, str]:
    if pythonpath is None:
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)}


@contextlib.contextmanager
def _profiled(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy recording ``pid`` into ``out`` for the block (nothing when ``out`` is None)."""
    if out is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(simproc.PY).with_name("py-spy"))
    fmt = "raw" if out.suffix == ".txt" else "flamegraph"
    cmd = [spy, "record", "--pid", str(pid), "--rate", "200", "--format", fmt, "--output", str(out)]
    cmd.append("--nonblocking")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        proc.wait(timeout=60)


async def _round(
    who: Contender,
    env: dict[str, str],
    sim: simproc.Sim,
    objects: int,
    steady: float,
    profile: Path | None,
    poll: bool,
) -> Figures:
    name, agent = who.name, who.agent
    client = await simproc.bench_client(sim.kubeconfig)
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
        server_start = cpu_seconds(sim.pid)
        sim_profile = profile.with_name(f"sim-{profile.name}") if profile is not None else None
        with (
            simproc.running(who.cmd, env=_env(env, who.pythonpath)) as proc,
            _profiled(proc.pid, profile),
            _profiled(sim.pid, sim_profile),
        ):
            first = await _wait_converged(client, objects, proc, name, poll)
            seconds = time.monotonic() - started
            cpu_start = cpu_seconds(proc.pid)
            server_cpu = cpu_seconds(sim.pid) - server_start
            writes = await simproc.write_count(client, agent) - before
            await asyncio.sleep(steady)
            steady_cpu = (cpu_seconds(proc.pid) - cpu_start) / steady
            steady_writes = await simproc.write_count(client, agent) - before - writes
            if steady_writes:
                print(f"  {name}: {steady_writes} writes during the steady period", file=sys.stderr)
            return Figures(
                name,
                objects,
                seconds,
                writes,
                peak_rss_mb(proc.pid),
                steady_cpu,
                cpu_start,
                server_cpu,
                first if first is not None else seconds,
            )
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=16, help="aiplane's --max-concurrent-reconciles")
    parser.add_argument("--no-kopf", action="store_true")
    parser.add_argument(
        "--poll", action="store_true", help="see convergence by a LIST every 0.25 s (the first version's way)"
    )
    parser.add_argument("--profile", type=Path, help="record each operator with py-spy into this directory")
    parser.add_argument(
        "--profile-raw", action="store_true", help="collapsed stacks (<operator>.txt) instead of flame graphs"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="alternate the contenders this many times and compare medians (a shared machine's load drifts)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="also run aiplane from another checkout's src directory (a git worktree of main), in the same run",
    )
    parser.add_argument("--baseline-workers", type=int, help="the baseline's concurrent reconciles")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: list[Figures] = []
    with simproc.sim_running("aiplane-bench-") as sim:
        env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig)}
        operator = sim.workdir / "kopf_echo.py"
        operator.write_text(KOPF_OPERATOR, encoding="utf-8")
        kopf = [simproc.PY, "-m", "kopf", "run", "--standalone", "--namespace", NAMESPACE, str(operator)]
        contenders = [
            Contender("aiplane", simproc.operator_command(sim.kubeconfig, "echo", args.workers), "aiplane")
        ]
        if args.baseline is not None:
            cmd = simproc.operator_command(sim.kubeconfig, "echo", args.baseline_workers or args.workers)
            contenders.append(Contender("baseline", cmd, "aiplane", str(args.baseline.resolve())))
        if not args.no_kopf:
            contenders.append(Contender("kopf", kopf, "kopf"))
        for r in range(args.rounds):
            for who in contenders:
                suffix = ".txt" if args.profile_raw else ".svg"
                name = f"{who.name}-{r}{suffix}" if args.rounds > 1 else f"{who.name}{suffix}"
                profile = args.profile / name if args.profile is not None else None
                results.append(
                    asyncio.run(_round(who, env, sim, args.objects, args.steady, profile, args.poll))
                )
    workers = f"aiplane: {args.workers} concurrent reconciles"
    if args.baseline is not None:
        workers += f"; baseline ({args.baseline}): {args.baseline_workers or args.workers}"
    _report(args.objects, workers, results)


def _report(objects: int, workers: str, results: list[Figures]) -> None:
    print(f"{objects} Echo objects, operator in its own process, embedded API server, 2 cores")
    print(workers)
    print(
        f"{'operator':<10}{'objects/s':>11}{'writes/obj':>12}{'peak RSS MB':>13}{'steady CPU':>12}"
        f"{'op CPU ms/obj':>15}{'server CPU':>12}{'first at':>10}"
    )
    for r in results:
        print(
            f"{r.name:<10}{r.rate:>11,.0f}{r.writes_per_object:>12.2f}{r.peak_rss_mb:>13.0f}"
            f"{r.steady_cpu:>11.1%}{r.operator_ms:>15.2f}{r.server_share:>11.0%}{r.first_seconds:>9.1f}s"
        )
    kopf = [r for r in results if r.name == "kopf"]
    for name in ("aiplane", "baseline"):
        _compare(name, [r for r in results if r.name == name], kopf)
    print(orjson.dumps([r.__dict__ for r in results]).decode())


def _compare(name: str, ours: list[Figures], kopf: list[Figures]) -> None:
    if ours and kopf:
        rate = statistics.median(r.rate for r in ours) / statistics.median(r.rate for r in kopf)
        ms = statistics.median(r.operator_ms for r in ours) / statistics.median(r.operator_ms for r in kopf)
        writes = ours[0].writes_per_object / kopf[0].writes_per_object
        each = ", ".join(f"x{a.rate / k.rate:.2f}" for a, k in zip(ours, kopf, strict=True))
        median = " (medians)" if len(ours) > 1 else ""
        print(
            f"{name}/kopf{median}: throughput x{rate:.2f}, writes per object x{writes:.2f}, "
            f"operator CPU per object x{ms:.2f}"
        )
        if len(ours) > 1:
            print(f"{name}/kopf throughput by round: {each}")


if __name__ == "__main__":
    main()

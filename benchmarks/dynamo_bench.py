"""Dynamo graph deployments at scale (a benchmark script, not a test).

``aiplane sim --controllers none`` with N simulated H100 nodes (8 ``nvidia.com/gpu`` each; the
simulated kube-scheduler, Deployment and ReplicaSet controllers and kubelet run in that process), and
the operator (``aiplane run --controllers dynamographdeployment,dynamocomponentdeployment``) in its
own process, so CPU seconds and peak RSS are the operator's alone. The client creates M
DynamoGraphDeployments spread over K namespaces, each with three services: a Frontend (no GPU), a
prefill worker and a decode worker (each ``--gpus`` GPUs, one replica): the defaults (100 graphs x 2
workers x 2 GPUs = 400 GPUs) fit 200 nodes x 8 GPUs.

Reported: time until every graph is ``successful`` (``status.state`` with ``observedGeneration``
current, checked on a list of all of them), API writes by the operator (counted by the server, by the
operator's User-Agent, from just before the first create) against the minimum the two controllers
need, operator CPU seconds and peak RSS, the sim's CPU seconds (for context), and the operator's
writes in ``--steady`` seconds after convergence (target 0).

Minimum writes per graph of S services, F of them frontends:

* the DGD's finalizer (``nvidia.com/finalizer``, added before any child): 1;
* one DCD create per service: S;
* one Deployment create per DCD: S; one Service per frontend DCD: F;
* one PodDisruptionBudget per single-node DCD (from its rollout strategy): S;
* DCD status: 2 per DCD — the first reconcile must say the component exists and is not yet
  available (``Available=False`` with ``replicas``/``labelSelector`` for the scale subresource)
  before any pod can be Ready, and a later one ``Available=True``;
* DGD status: 2 — ``pending`` while components come up, then ``successful``.

That is 1 + 3 + 3 + 1 + 3 + 6 + 2 = 19 per graph of three services. Events are best-effort and counted
apart (from the Events in the store, by reason).

Usage: ``.venv/bin/python benchmarks/dynamo_bench.py [--graphs 100] [--nodes 200] [--namespaces 10]
[--workers 8] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import PDBS, PODS, SERVICES, resource_for
from benchmarks import simproc
from benchmarks.procstats import cpu_seconds, peak_rss_mb

DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")
GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
CONTROLLERS = "dynamographdeployment,dynamocomponentdeployment"
SERVICES_PER_GRAPH = 3
FRONTENDS_PER_GRAPH = 1
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0"


def min_writes_per_graph() -> int:
    """Finalizer, DCDs, Deployments, frontend Services, DCD and DGD status (see above)."""
    s, f = SERVICES_PER_GRAPH, FRONTENDS_PER_GRAPH
    return 1 + s + s + f + s + 2 * s + 2


def graph(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    def worker(flag: str) -> dict[str, Any]:
        return {
            "componentType": "worker",
            "replicas": 1,
            "resources": {"limits": {"gpu": str(gpus)}, "requests": {"cpu": "1", "gpu": str(gpus)}},
            "extraPodSpec": {
                "mainContainer": {
                    "image": IMAGE,
                    "command": ["/bin/sh", "-c"],
                    "args": [f"python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B {flag}".strip()],
                }
            },
        }

    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "resources": {"requests": {"cpu": "1"}},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": IMAGE,
                            "command": ["/bin/sh", "-c"],
                            "args": ["python3 -m dynamo.frontend"],
                        }
                    },
                },
                "PrefillWorker": worker("--is-prefill-worker"),
                "DecodeWorker": worker(""),
            },
        },
    }


@dataclass
class Figures:
    graphs: int
    services: int
    pods: int
    nodes: int
    namespaces: int
    create_seconds: float
    seconds: float
    first_successful_seconds: float
    writes: int
    writes_by_verb: dict[str, int]
    event_writes: int
    event_reasons: dict[str, int]
    object_creates: int
    min_writes: int
    operator_cpu: float
    operator_peak_rss_mb: float
    sim_cpu: float
    steady_seconds: float
    steady_writes: int
    steady_cpu: float


def _successful(dgd: dict[str, Any]) -> bool:
    status = dgd.get("status") or {}
    return status.get("state") == "successful" and status.get("observedGeneration") == dgd["metadata"].get(
        "generation"
    )


async def measure(args: argparse.Namespace, kubeconfig: Path, sim_pid: int) -> Figures:
    client = await simproc.bench_client(kubeconfig)
    cmd = simproc.operator_command(kubeconfig, CONTROLLERS, args.workers, log_level=args.log_level)
    try:
        namespaces = await simproc.create_namespaces(client, args.namespaces)
        with simproc.running(cmd, show_stderr=args.log_level in ("debug", "info")) as operator:
            await asyncio.sleep(args.startup)
            simproc.check_running(operator)
            return await _converge(args, client, namespaces, operator.pid, sim_pid)
    finally:
        await client.close()


async def _converge(
    args: argparse.Namespace, client: HttpKubeClient, namespaces: list[str], operator_pid: int, sim_pid: int
) -> Figures:
    """Create the graphs, wait for all of them to be successful, count, watch the steady state."""
    before, cpu0, sim0 = await simproc.writes_by_verb(client), cpu_seconds(operator_pid), cpu_seconds(sim_pid)
    started = time.monotonic()
    gate = asyncio.Semaphore(args.in_flight)

    async def create(i: int) -> None:
        ns = namespaces[i % len(namespaces)]
        async with gate:
            await client.create(DGD, graph(f"graph-{i:04d}", ns, args.gpus), namespace=ns)

    await asyncio.gather(*(create(i) for i in range(args.graphs)))
    create_seconds = time.monotonic() - started
    last_report = [started]
    first: list[float | None] = [None]

    async def all_successful() -> bool:
        items = (await client.list(DGD))["items"]
        done = sum(1 for dgd in items if _successful(dgd))
        if done and first[0] is None:
            first[0] = time.monotonic() - started
        if time.monotonic() - last_report[0] > args.progress:
            last_report[0] = time.monotonic()
            print(
                f"  {time.monotonic() - started:6.0f} s: {done}/{args.graphs} successful; operator CPU "
                f"{cpu_seconds(operator_pid) - cpu0:.1f} s, sim CPU {cpu_seconds(sim_pid) - sim0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        return bool(len(items) == args.graphs and done == args.graphs)

    await simproc.wait_until(all_successful, args.timeout, "every graph successful")
    seconds = time.monotonic() - started
    cpu = cpu_seconds(operator_pid) - cpu0
    sim_cpu = cpu_seconds(sim_pid) - sim0
    await asyncio.sleep(1.0)  # let Events emitted with the last status write land
    after = await simproc.writes_by_verb(client)
    by_verb = {v: after[v] - before[v] for v in simproc.WRITE_VERBS}
    pods = (await client.list(PODS, label_selector=GRAPH_LABEL))["items"]
    want_pods = args.graphs * SERVICES_PER_GRAPH
    if len(pods) != want_pods or not all(simproc.pod_ready(p) for p in pods):
        raise SystemExit(f"{len(pods)} pods (want {want_pods}), not all Running and Ready")
    object_creates = (
        len((await client.list(DCD))["items"])
        + len((await client.list(DEPLOYMENTS, label_selector=GRAPH_LABEL))["items"])
        + len((await client.list(SERVICES, label_selector=GRAPH_LABEL))["items"])
        + len((await client.list(PDBS, label_selector=GRAPH_LABEL))["items"])
    )
    components = {"dynamographdeployment-controller", "dynamocomponentdeployment-controller"}
    event_creates, event_patches, event_reasons = await simproc.event_writes(client, components)
    steady_before, steady_cpu0 = await simproc.writes_by_verb(client), cpu_seconds(operator_pid)
    await asyncio.sleep(args.steady)
    steady_after = await simproc.writes_by_verb(client)
    return Figures(
        graphs=args.graphs,
        services=args.graphs * SERVICES_PER_GRAPH,
        pods=want_pods,
        nodes=args.nodes,
        namespaces=args.namespaces,
        create_seconds=round(create_seconds, 2),
        seconds=round(seconds, 2),
        first_successful_seconds=round(first[0] or seconds, 2),
        writes=sum(by_verb.values()),
        writes_by_verb=by_verb,
        event_writes=event_creates + event_patches,
        event_reasons=dict(sorted(event_reasons.items())),
        object_creates=object_creates,
        min_writes=args.graphs * min_writes_per_graph(),
        operator_cpu=round(cpu, 2),
        operator_peak_rss_mb=round(peak_rss_mb(operator_pid), 1),
        sim_cpu=round(sim_cpu, 2),
        steady_seconds=args.steady,
        steady_writes=sum(steady_after[v] - steady_before[v] for v in simproc.WRITE_VERBS),
        steady_cpu=round(cpu_seconds(operator_pid) - steady_cpu0, 2),
    )


def report(f: Figures) -> None:
    other = f.writes - f.event_writes
    print(
        f"{f.graphs} DynamoGraphDeployments x {SERVICES_PER_GRAPH} services = {f.services} components "
        f"({f.pods} pods), {f.nodes} H100 nodes, {f.namespaces} namespaces; operator in its own process"
    )
    simproc.figure("client creates", f"{f.create_seconds:.1f}", "s")
    simproc.figure(
        "time to all successful", f"{f.seconds:.1f}", "s", f"({f.graphs / f.seconds:.1f} graphs/s)"
    )
    simproc.figure("first one successful", f"{f.first_successful_seconds:.1f}", "s")
    simproc.figure(
        "API writes", str(f.writes), note=f"({', '.join(f'{v} {n}' for v, n in f.writes_by_verb.items())})"
    )
    simproc.figure(
        "  of which Events",
        str(f.event_writes),
        note=f"(best-effort: {', '.join(f'{r} {n}' for r, n in f.event_reasons.items())})",
    )
    simproc.figure(
        "  objects created", str(f.object_creates), note="(DCDs, Deployments, frontend Services, PDBs)"
    )
    simproc.figure(
        "writes per graph",
        f"{f.writes / f.graphs:.2f}",
        note=f"(without Events {other / f.graphs:.2f}; minimum {min_writes_per_graph()})",
    )
    simproc.figure(
        "ratio to minimum",
        f"{f.writes / f.min_writes:.2f}",
        note=f"(without Events {other / f.min_writes:.2f})",
    )
    simproc.closing_figures(
        f.operator_cpu, f.operator_peak_rss_mb, f.sim_cpu, f.steady_writes, f.steady_seconds, f.steady_cpu
    )
    print(json.dumps(asdict(f), separators=(",", ":")))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graphs", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--gpus", type=int, default=2, help="nvidia.com/gpu per worker pod (8 per node)")
    parser.add_argument("--workers", type=int, default=8, help="--max-concurrent-reconciles")
    parser.add_argument("--in-flight", type=int, default=32, help="client creates in flight")
    parser.add_argument("--pod-ready-delay", type=float, default=0.0)
    parser.add_argument("--steady", type=float, default=10.0, help="seconds watched after convergence")
    parser.add_argument("--startup", type=float, default=3.0, help="seconds given the operator to start")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
    parser.add_argument("--log-level", default="warning", help="operator log level")
    parser.add_argument("--quick", action="store_true", help="10 graphs on 20 nodes")
    args = parser.parse_args()
    if args.quick:
        args.graphs, args.nodes = 10, 20
    if args.graphs * 2 * args.gpus > args.nodes * 8:
        raise SystemExit(f"{args.graphs * 2 * args.gpus} GPUs wanted, {args.nodes * 8} in the fleet")
    with simproc.sim_running(
        "aiplane-dynamobench-",
        fleet=simproc.h100_fleet(args.nodes),
        dcm_delay=0,
        pod_ready_delay=args.pod_ready_delay,
    ) as sim:
        report(asyncio.run(measure(args, sim.kubeconfig, sim.pid)))


if __name__ == "__main__":
    main()

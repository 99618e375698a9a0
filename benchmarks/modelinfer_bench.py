"""ModelInfer at scale (a benchmark script, not a test).

``aiplane sim --controllers none`` with N simulated MI300X nodes (8 GPUs each; the simulated
kube-scheduler, Volcano gang scheduler and kubelet run in that process), and the operator (``aiplane
run --controllers modelinfer``) in its own process, so CPU seconds and peak RSS are the operator's
alone. The client creates M ModelInfers spread over K namespaces as fast as it reasonably can (a few
dozen creates in flight), each with ``replicas`` InferGroups of two roles, prefill and decode (each
one role replica of an entry pod and one worker pod: 4 pods per group), ``gangSchedule`` on and
``schedulerName: volcano``; every pod asks for 1 ``amd.com/gpu``, so the defaults (200 x 3 groups x 4
pods = 2,400 GPUs) fit 500 nodes x 8 GPUs = 4,000.

Reported: time until every ModelInfer is Available (condition ``Available=True`` with
``availableReplicas == replicas`` and ``observedGeneration`` current, checked on a list of all of
them), API writes by the operator (counted by the server, by the operator's User-Agent, from just
before the first create) against the minimum the controller needs, operator CPU seconds and peak
RSS, the sim's CPU seconds (for context), and the operator's writes in ``--steady`` seconds after
convergence (target 0).

Minimum writes, per ModelInfer with G groups of R role replicas, each an entry and W workers:

* one create per pod: ``G x R x (1 + W)`` (here 3 x 2 x 2 = 12);
* one create per headless entry Service, which only role replicas *with* workers get (the workers
  find the entry by its DNS name): ``G x R`` (here 6);
* one PodGroup create per group (``gangSchedule`` on; Volcano needs it before the pods): ``G`` (3);
* one ControllerRevision create (the revision's template, kept for rebuilds after a restart): 1;
* status: at least 2 ``/status`` writes. The status starts empty; the first reconcile has to say the
  groups exist and are not yet available (``replicas``/``updateRevision``/``labelSelector`` for the
  scale subresource, ``Available=False``, ``Progressing=True``) before any pod can be Ready, and a
  later one ``Available=True`` with ``availableReplicas == G``: 2 is the floor, whatever the timing.

That is 12 + 6 + 3 + 1 + 2 = 24 per ModelInfer (2.0 per pod). Events are best-effort and not part of
the minimum (the controller emits ``CreatedGroup``/``CreatedRoleReplica`` and one ``Available`` per
ModelInfer); they are counted from the Events in the store (the sum of their ``count``, by reason)
and reported apart. Status writes
are estimated as the operator's PATCHes less the Event aggregation PATCHes (the controller writes
status by merge patch; PodGroup updates are PUTs and would show up as such).

Usage: ``.venv/bin/python benchmarks/modelinfer_bench.py [--modelinfers 200] [--nodes 500]
[--groups 3] [--namespaces 10] [--workers 8] [--quick]``; ``--trace`` adds pod counts to the
progress lines, ``--profile FILE`` / ``--profile-sim FILE`` run the operator / the sim under cProfile.
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
from aiplane.kube.resources import (
    CONTROLLERREVISIONS,
    PODGROUPS,
    PODS,
    SERVICES,
    Resource,
    resource_for,
)
from benchmarks import simproc
from benchmarks.procstats import cpu_seconds, peak_rss_mb

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
NAME_LABEL = "modelinfer.volcano.sh/name"
COMPONENT = "modelinfer-controller"
ROLES = ("prefill", "decode")
ROLE_REPLICAS = 1
WORKERS = 1


def min_writes_per_modelinfer(groups: int) -> int:
    """Pods, entry Services, PodGroups, one ControllerRevision, two status writes (see above)."""
    role_replicas = groups * len(ROLES) * ROLE_REPLICAS
    pods = role_replicas * (1 + WORKERS)
    services = role_replicas if WORKERS else 0
    return pods + services + groups + 1 + 2


def pods_per_modelinfer(groups: int) -> int:
    return groups * len(ROLES) * ROLE_REPLICAS * (1 + WORKERS)


def modelinfer(name: str, namespace: str, groups: int, gpus: int) -> dict[str, Any]:
    def template(role: str) -> dict[str, Any]:
        return {
            "metadata": {"labels": {"phase": role}},
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm:v1",
                        "resources": {
                            "limits": {"amd.com/gpu": str(gpus)},
                            "requests": {"cpu": "1"},
                        },
                    }
                ]
            },
        }

    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": groups,
            "schedulerName": "volcano",
            "recoveryPolicy": "RoleRecreate",
            "rolloutStrategy": {
                "type": "InferGroupRollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "template": {
                "gangSchedule": {"minRoleReplicas": {role: ROLE_REPLICAS for role in ROLES}},
                "roles": [
                    {
                        "name": role,
                        "replicas": ROLE_REPLICAS,
                        "workerReplicas": WORKERS,
                        "entryTemplate": template(role),
                        "workerTemplate": template(role),
                    }
                    for role in ROLES
                ],
            },
        },
    }


@dataclass
class Figures:
    modelinfers: int
    groups: int
    pods: int
    nodes: int
    namespaces: int
    create_seconds: float
    seconds: float
    first_available_seconds: float
    writes: int
    writes_by_verb: dict[str, int]
    event_writes: int
    event_reasons: dict[str, int]
    object_creates: int
    status_writes: int
    min_writes: int
    operator_cpu: float
    operator_peak_rss_mb: float
    sim_cpu: float
    steady_seconds: float
    steady_writes: int
    steady_cpu: float


def _available(mi: dict[str, Any]) -> bool:
    status = mi.get("status") or {}
    return (
        status.get("observedGeneration") == mi["metadata"].get("generation")
        and status.get("availableReplicas") == mi["spec"]["replicas"]
        and any(
            c.get("type") == "Available" and c.get("status") == "True" for c in status.get("conditions") or []
        )
    )


async def _count(client: HttpKubeClient, res: Resource, selector: str | None = NAME_LABEL) -> int:
    return len((await client.list(res, label_selector=selector))["items"])


async def measure(args: argparse.Namespace, kubeconfig: Path, sim_pid: int) -> Figures:
    client = await simproc.bench_client(kubeconfig)
    cmd = simproc.operator_command(
        kubeconfig, "modelinfer", args.workers, log_level=args.log_level, profile=args.profile
    )
    try:
        namespaces = await simproc.create_namespaces(client, args.namespaces)
        with simproc.running(cmd, show_stderr=args.log_level in ("debug", "info")) as operator:
            # The operator is up once its informers have listed: give it a moment, then check it lives.
            await asyncio.sleep(args.startup)
            simproc.check_running(operator)
            return await _converge(args, client, namespaces, operator.pid, sim_pid)
    finally:
        await client.close()


async def _converge(
    args: argparse.Namespace, client: HttpKubeClient, namespaces: list[str], operator_pid: int, sim_pid: int
) -> Figures:
    """Create the ModelInfers, wait for all of them to be Available, count, watch the steady state."""
    before, cpu0, sim0 = await simproc.writes_by_verb(client), cpu_seconds(operator_pid), cpu_seconds(sim_pid)
    started = time.monotonic()
    gate = asyncio.Semaphore(args.in_flight)

    async def create(i: int) -> None:
        ns = namespaces[i % len(namespaces)]
        async with gate:
            await client.create(MI, modelinfer(f"mi-{i:04d}", ns, args.groups, args.gpus), namespace=ns)

    await asyncio.gather(*(create(i) for i in range(args.modelinfers)))
    create_seconds = time.monotonic() - started
    last_report = [started]
    total = int(args.modelinfers)
    first_available: list[float | None] = [None]

    async def all_available() -> bool:
        items = (await client.list(MI))["items"]
        done = sum(1 for mi in items if _available(mi))
        if done and first_available[0] is None:
            first_available[0] = time.monotonic() - started
        if time.monotonic() - last_report[0] > args.progress:
            last_report[0] = time.monotonic()
            line = f"  {time.monotonic() - started:6.0f} s: {done}/{total} available"
            if args.trace:  # a list of every pod: adds load on the sim, off by default
                pods = (await client.list(PODS, label_selector=NAME_LABEL))["items"]
                bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
                ready = sum(1 for p in pods if simproc.pod_ready(p))
                status = sum(1 for mi in items if mi.get("status"))
                line += f"; {status} with status; pods {len(pods)} created, {bound} bound, {ready} ready"
            line += f"; operator CPU {cpu_seconds(operator_pid) - cpu0:.1f} s, sim CPU {cpu_seconds(sim_pid) - sim0:.1f} s"
            print(line, file=sys.stderr, flush=True)
        return len(items) == total and done == total

    await simproc.wait_until(all_available, args.timeout, "every ModelInfer Available")
    seconds = time.monotonic() - started
    cpu = cpu_seconds(operator_pid) - cpu0
    sim_cpu = cpu_seconds(sim_pid) - sim0
    await asyncio.sleep(1.0)  # let Events emitted with the last status write land
    after = await simproc.writes_by_verb(client)
    by_verb = {v: after[v] - before[v] for v in simproc.WRITE_VERBS}
    writes = sum(by_verb.values())

    pods = (await client.list(PODS, label_selector=NAME_LABEL))["items"]
    want_pods = args.modelinfers * pods_per_modelinfer(args.groups)
    if len(pods) != want_pods or not all(simproc.pod_ready(p) for p in pods):
        raise SystemExit(f"{len(pods)} pods (want {want_pods}), not all Running and Ready")
    object_creates = (
        len(pods)
        + await _count(client, SERVICES)
        + await _count(client, PODGROUPS)
        + await _count(client, CONTROLLERREVISIONS)
    )
    event_creates, event_patches, event_reasons = await simproc.event_writes(client, {COMPONENT})

    steady_before, steady_cpu0 = await simproc.writes_by_verb(client), cpu_seconds(operator_pid)
    await asyncio.sleep(args.steady)
    steady_after = await simproc.writes_by_verb(client)
    steady_cpu = cpu_seconds(operator_pid) - steady_cpu0
    peak = peak_rss_mb(operator_pid)
    return Figures(
        modelinfers=args.modelinfers,
        groups=args.groups,
        pods=want_pods,
        nodes=args.nodes,
        namespaces=args.namespaces,
        create_seconds=round(create_seconds, 2),
        seconds=round(seconds, 2),
        first_available_seconds=round(first_available[0] or seconds, 2),
        writes=writes,
        writes_by_verb=by_verb,
        event_writes=event_creates + event_patches,
        event_reasons=dict(sorted(event_reasons.items())),
        object_creates=object_creates,
        status_writes=by_verb["PATCH"] - event_patches,
        min_writes=args.modelinfers * min_writes_per_modelinfer(args.groups),
        operator_cpu=round(cpu, 2),
        operator_peak_rss_mb=round(peak, 1),
        sim_cpu=round(sim_cpu, 2),
        steady_seconds=args.steady,
        steady_writes=sum(steady_after[v] - steady_before[v] for v in simproc.WRITE_VERBS),
        steady_cpu=round(steady_cpu, 2),
    )


def report(f: Figures) -> None:
    per_mi = f.min_writes / f.modelinfers
    other = f.writes - f.event_writes
    print(
        f"{f.modelinfers} ModelInfers x {f.groups} groups x {f.pods // (f.modelinfers * f.groups)} pods "
        f"= {f.pods} pods, {f.nodes} MI300X nodes, {f.namespaces} namespaces; "
        "operator in its own process"
    )
    simproc.figure("client creates", f"{f.create_seconds:.1f}", "s")
    simproc.figure(
        "time to all Available",
        f"{f.seconds:.1f}",
        "s",
        f"({f.modelinfers / f.seconds:.1f} ModelInfers/s, {f.pods / f.seconds:.0f} pods/s)",
    )
    simproc.figure("first one Available", f"{f.first_available_seconds:.1f}", "s")
    simproc.figure(
        "API writes", str(f.writes), note=f"({', '.join(f'{v} {n}' for v, n in f.writes_by_verb.items())})"
    )
    simproc.figure(
        "  of which Events",
        str(f.event_writes),
        note="(best-effort, not in the minimum: "
        f"{', '.join(f'{r} {n}' for r, n in f.event_reasons.items())})",
    )
    simproc.figure(
        "  objects created", str(f.object_creates), note="(pods, Services, PodGroups, ControllerRevisions)"
    )
    simproc.figure(
        "  status writes (est.)",
        str(f.status_writes),
        note=f"({f.status_writes / f.modelinfers:.2f} per ModelInfer; minimum 2)",
    )
    simproc.figure(
        "writes per pod",
        f"{f.writes / f.pods:.2f}",
        note=f"(without Events {other / f.pods:.2f}; minimum {f.min_writes / f.pods:.2f} = {per_mi:.0f} per ModelInfer)",
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
    parser.add_argument("--modelinfers", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--groups", type=int, default=3, help="InferGroups (replicas) per ModelInfer")
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--gpus", type=int, default=1, help="amd.com/gpu per pod (8 per node)")
    parser.add_argument("--workers", type=int, default=8, help="--max-concurrent-reconciles")
    parser.add_argument("--in-flight", type=int, default=32, help="client creates in flight")
    parser.add_argument("--pod-ready-delay", type=float, default=0.0)
    parser.add_argument("--steady", type=float, default=10.0, help="seconds watched after convergence")
    parser.add_argument("--startup", type=float, default=3.0, help="seconds given the operator to start")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
    parser.add_argument("--trace", action="store_true", help="pod counts in progress lines")
    parser.add_argument("--log-level", default="warning", help="operator log level")
    parser.add_argument(
        "--profile", type=Path, default=None, help="run the operator under cProfile, stats to this file"
    )
    parser.add_argument(
        "--profile-sim", type=Path, default=None, help="run the sim under cProfile, stats to this file"
    )
    parser.add_argument("--quick", action="store_true", help="20 ModelInfers on 50 nodes")
    args = parser.parse_args()
    if args.quick:
        args.modelinfers, args.nodes = 20, 50
    gpus_needed = args.modelinfers * pods_per_modelinfer(args.groups) * args.gpus
    if gpus_needed > args.nodes * 8:
        raise SystemExit(f"{gpus_needed} GPUs wanted, {args.nodes * 8} in the fleet")
    with simproc.sim_running(
        "aiplane-mibench-",
        nodes=args.nodes,
        dcm_delay=0,
        pod_ready_delay=args.pod_ready_delay,
        profile=args.profile_sim,
    ) as sim:
        report(asyncio.run(measure(args, sim.kubeconfig, sim.pid)))


if __name__ == "__main__":
    main()

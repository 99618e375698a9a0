"""GPU partitioning at scale (a benchmark script, not a test).

``aiplane sim`` with N simulated MI300X nodes (DCM delay 0), and the operator (``aiplane run
--controllers all``) in its own process; one plan rolls CPX over every node with ``maxParallel: 50``.
Reported: time until the plan is Completed, API writes per node (counted by the server, by the
operator's User-Agent) against the minimum the state machine needs, operator CPU seconds and peak RSS,
and the sim's CPU seconds over the same span (the embedded cluster's cost).

Minimum writes per node (counted per verb and resource from the sim's audit log): four
NodePartitioning patches (created by server-side apply, admitted, finalizer added, finalizer removed),
five Node updates (cordon, taint, the DCM profile label, untaint, uncordon: each a separate step of
the state machine; the taint never rides on the cordon, docs/partitioning.md), six status updates
(Pending, Draining when cordoned, Draining when tainted, WaitingOperator, Verifying, Succeeded),
and one eviction per pod the drain must evict (none here: the device plugin is a DaemonSet pod without
a toleration of the taint, which its controller deletes once the node is tainted) = 15, plus the
plan's own status writes, amortised. The Pending status is counted because it is information: with
``maxParallel`` 50 nearly every node waits for a slot, and ``kubectl get nodepartitionings`` then shows
it Pending (with the generation the controller saw) rather than an empty phase. Writes are counted
from when the operator has settled after start-up (the KaiwoConfig controller taints every GPU node
once when it starts: not part of the rollout). Events (``kubectl describe`` shows them) are
best-effort and reported apart, as in ``modelinfer_bench.py``.

``--target real`` runs the same rollout on the real control plane of ``scripts/build-kube`` instead:
kube-apiserver, etcd, the controller-manager (DaemonSets, PodDisruptionBudgets), the scheduler and kwok
playing the kubelets of the same fleet's nodes, with the simulated hardware (``aiplane hardware``, DCM
delay 0) in a process of its own and the operator in another. Writes are counted the same way, by the
server, by User-Agent: from kube-apiserver's audit log (its write verbs), with a breakdown by verb,
resource and response code. Reported instead of the sim's CPU: kube-apiserver + etcd, the other
components, and the hardware. ``--real`` (= ``--target both``)
runs the sim, then the real control plane, in one sitting.

Usage: ``.venv/bin/python benchmarks/partitioning_bench.py [--nodes 1000] [--max-parallel 50] [--real]
[--profile FILE] [--profile-sim FILE] [--memtrace FILE]`` (the operator / the sim under cProfile; the
operator under tracemalloc, its largest allocations by file:line to FILE)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import DAEMONSETS, NODES, PODS, resource_for
from benchmarks import simproc
from benchmarks.procstats import cpu_seconds, peak_rss_mb, rss_mb

MIN_WRITES_PER_NODE = 15
COMPONENTS = {"partitioningprofile-controller", "partitioningplan-controller", "nodepartitioning-controller"}
PRODUCT = "AMD_Instinct_MI300X_OAM"
PROFILES = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningProfile")
PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
NODE_PARTITIONINGS = resource_for("infrastructure.silogen.ai/v1alpha1", "NodePartitioning")
PLUGIN_NAMESPACE, PLUGIN_DAEMONSET = "kube-amd-gpu", "amd-gpu-device-plugin"
HELD = "aiplane.io/bench-held"


@dataclass
class Cluster:
    """What the rollout runs on: its kubeconfig, how its server counts the operator's writes, and the CPU
    seconds so far of what plays the cluster (by part)."""

    name: str
    kubeconfig: Path
    writes: Callable[[HttpKubeClient], Awaitable[int]]
    cpu: Callable[[], dict[str, float]]
    breakdown: Callable[[int], dict[str, int]] | None = None
    logs: Path | None = None  # where the operator's log goes (else discarded)


@contextlib.contextmanager
def sim_cluster(nodes: int, profile_sim: Path | None) -> Iterator[Cluster]:
    with simproc.sim_running(
        "aiplane-pbench-", nodes=nodes, dcm_delay=0, pod_ready_delay=0, profile=profile_sim
    ) as sim:
        yield Cluster(
            "aiplane sim (embedded cluster)",
            sim.kubeconfig,
            simproc.write_count,
            lambda: {"sim CPU": cpu_seconds(sim.pid)},
        )


@contextlib.contextmanager
def real_cluster(nodes: int, keep: Path | None = None) -> Iterator[Cluster]:
    """The real control plane with the fleet's nodes (kwok) and the simulated hardware beside it.
    ``keep``: the audit log records every client's Node writes in full and is copied there at the end,
    with the hardware's and the operator's logs."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with simproc.real_running(
        "aiplane-pbench-real-",
        fleet=simproc.mi300x_fleet(nodes),
        crds=True,
        audit_node_writes=keep is not None,
        keep=keep,
    ) as kube:
        hardware = simproc.aiplane_command(
            "hardware", "--kubeconfig", str(kube.kubeconfig), "--dcm-delay", "0"
        )
        with simproc.running(hardware, log=keep / "hardware.log" if keep is not None else None) as hw:

            async def writes(_: HttpKubeClient) -> int:
                return sum(simproc.audit_writes(kube).values())

            def cpu() -> dict[str, float]:
                parts = simproc.real_cpu_seconds(kube)
                return {
                    "kube-apiserver + etcd CPU": parts["kube-apiserver"] + parts["etcd"],
                    "kcm + scheduler + kwok CPU": parts["kube-controller-manager"]
                    + parts["kube-scheduler"]
                    + parts["kwok"],
                    "hardware CPU": cpu_seconds(hw.pid),
                }

            yield Cluster(
                "kube-apiserver v1.37 (real control plane, kwok nodes)",
                kube.kubeconfig,
                writes,
                cpu,
                lambda skip: simproc.audit_breakdown(kube, skip=skip),
                keep,
            )


async def measure(
    cluster: Cluster,
    nodes: int,
    max_parallel: int,
    profile: Path | None = None,
    memtrace: Path | None = None,
    timeout: float = 3600,
    at_once: bool = False,
    plugin_held: float | None = None,
) -> None:
    kubeconfig = cluster.kubeconfig
    client = await simproc.bench_client(kubeconfig)
    try:
        await client.create(
            PROFILES,
            {
                "apiVersion": "infrastructure.silogen.ai/v1alpha1",
                "kind": "PartitioningProfile",
                "metadata": {"name": "cpx"},
                "spec": {"dcmProfileName": "cpx", "expectedResources": {"amd.com/gpu": "64"}},
            },
        )
        with simproc.running(
            simproc.operator_command(
                kubeconfig, "all", 8, log_level="warning", profile=profile, memtrace=memtrace
            ),
            log=cluster.logs / "operator.log" if cluster.logs is not None else None,
        ) as operator:
            await _roll_out(client, cluster, nodes, max_parallel, operator.pid, timeout, at_once, plugin_held)
    finally:
        await client.close()


async def _settled(
    client: HttpKubeClient, cluster: Cluster, quiet: float = 2.0, timeout: float = 120
) -> None:
    """Wait until the operator has written nothing for ``quiet`` seconds (its start-up work done)."""
    end = time.monotonic() + timeout
    last, since = await cluster.writes(client), time.monotonic()
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
        count = await cluster.writes(client)
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise SystemExit("the operator kept writing after start-up")


async def _unfinished(client: HttpKubeClient) -> str:
    """The NodePartitionings not Succeeded, with their last condition and their Node's taints."""
    lines = []
    for np in (await client.list(NODE_PARTITIONINGS))["items"]:
        status = np.get("status") or {}
        if status.get("phase") == "Succeeded":
            continue
        node = await client.get(NODES, np["spec"]["nodeName"])
        last = max(status.get("conditions") or [{}], key=lambda c: str(c.get("lastTransitionTime")))
        lines.append(
            f"  {np['metadata']['name']} {status.get('phase')} {last.get('type')}={last.get('status')} "
            f"{last.get('reason')}: {last.get('message')}; node resourceVersion "
            f"{node['metadata']['resourceVersion']} taints {(node.get('spec') or {}).get('taints')} "
            f"annotations {node['metadata'].get('annotations')}"
        )
    return "\n".join(lines)


async def _plugin_selector(client: HttpKubeClient, held: bool) -> None:
    """Hold the device plugin's DaemonSet off every node (a node selector nothing matches), or let it
    back; held, wait until its pods are gone."""
    patch = {"spec": {"template": {"spec": {"nodeSelector": {HELD: "true" if held else None}}}}}

    async def installed() -> bool:
        daemonsets = (await client.list(DAEMONSETS, PLUGIN_NAMESPACE))["items"]
        return any(d["metadata"]["name"] == PLUGIN_DAEMONSET for d in daemonsets)

    await simproc.wait_until(installed, 300, "the device plugin's DaemonSet")
    await client.patch(DAEMONSETS, PLUGIN_DAEMONSET, patch, namespace=PLUGIN_NAMESPACE)

    async def gone() -> bool:
        pods = (await client.list(PODS, PLUGIN_NAMESPACE))["items"]
        return not any(p["metadata"]["name"].startswith(PLUGIN_DAEMONSET) for p in pods)

    if held:
        await simproc.wait_until(gone, 300, "the device plugin's pods gone")


async def _roll_out(
    client: HttpKubeClient,
    cluster: Cluster,
    nodes: int,
    max_parallel: int,
    operator_pid: int,
    timeout: float = 3600,
    at_once: bool = False,
    plugin_held: float | None = None,
) -> None:
    """Once the profile is Ready, one plan to CPX over every node; report when it is Completed."""

    async def ready() -> bool:
        got = await client.get(PROFILES, "cpx")
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (got.get("status") or {}).get("conditions", [])
        )

    await simproc.wait_until(ready, 120, "the PartitioningProfile Ready")
    if plugin_held is not None:
        await _plugin_selector(client, held=True)
    if not at_once:
        await _settled(client, cluster)
    before, cpu0, cluster_cpu0 = await cluster.writes(client), cpu_seconds(operator_pid), cluster.cpu()
    # Caches synced, nothing rolled out yet: what start-up (imports, lists) cost, apart from the rollout.
    rss0, peak0 = rss_mb(operator_pid), peak_rss_mb(operator_pid)
    started = time.monotonic()
    await client.create(
        PLANS,
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

    if plugin_held is not None:
        await asyncio.sleep(plugin_held)
        await _plugin_selector(client, held=False)

    async def completed() -> bool:
        return ((await client.get(PLANS, "cpx-all")).get("status") or {}).get("phase") == "Completed"

    try:
        await simproc.wait_until(completed, timeout, "the PartitioningPlan Completed")
    except SystemExit:
        print(f"not Completed within {timeout:.0f} s:\n{await _unfinished(client)}")
        raise
    seconds = time.monotonic() - started
    writes = await cluster.writes(client) - before
    cpu = cpu_seconds(operator_pid) - cpu0
    cluster_cpu = {part: seconds - cluster_cpu0[part] for part, seconds in cluster.cpu().items()}
    event_creates, event_patches, _ = await simproc.event_writes(client, COMPONENTS)
    needed = writes - event_creates - event_patches
    print(f"{cluster.name}:")
    print(
        f"{nodes} MI300X nodes, maxParallel {max_parallel}, DCM delay 0, operator in its own process, 2 cores"
    )
    simproc.figure("time to Completed", f"{seconds:.1f}", "s", f"({nodes / seconds:.1f} nodes/s)")
    simproc.figure(
        "API writes per node",
        f"{writes / nodes:.2f}",
        note=f"(without Events {needed / nodes:.2f}; minimum {MIN_WRITES_PER_NODE}; "
        f"ratio {needed / nodes / MIN_WRITES_PER_NODE:.2f} without Events, "
        f"{writes / nodes / MIN_WRITES_PER_NODE:.2f} with)",
    )
    simproc.operator_figures(cpu, peak_rss_mb(operator_pid))
    simproc.figure(
        "operator RSS before plan", f"{rss0:.0f}", "MB", f"(peak so far {peak0:.0f} MB: start-up and lists)"
    )
    for part, seconds in cluster_cpu.items():
        simproc.figure(part, f"{seconds:.1f}", "s", "(from the plan's create)")
    if cluster.breakdown is not None:
        print("operator writes by verb, resource and response code (audit log):")
        for what, count in cluster.breakdown(before).items():
            print(f"  {count:>7}  {what}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=50)
    parser.add_argument(
        "--profile", type=Path, default=None, help="run the operator under cProfile, stats to this file"
    )
    parser.add_argument(
        "--memtrace",
        type=Path,
        default=None,
        help="run the operator under tracemalloc, what holds memory to this file (benchmarks/memtrace.py)",
    )
    parser.add_argument(
        "--profile-sim", type=Path, default=None, help="run the sim under cProfile, stats to this file"
    )
    parser.add_argument(
        "--target", choices=["sim", "real", "both"], default="sim", help="which cluster (default: sim)"
    )
    parser.add_argument("--real", action="store_true", help="the sim, then the real control plane")
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds to wait for Completed (then list what is not)"
    )
    parser.add_argument(
        "--audit-nodes",
        type=Path,
        default=None,
        help="real control plane: audit every client's Node writes in full, keep the log in this directory",
    )
    parser.add_argument(
        "--at-once",
        action="store_true",
        help="create the plan as soon as the profile is Ready, not once the operator has settled: the "
        "first nodes are drained while kube still creates the DaemonSets' pods (writes then include "
        "start-up's)",
    )
    parser.add_argument(
        "--plugin-held",
        type=float,
        default=None,
        metavar="SECONDS",
        help="keep the device plugin's DaemonSet off every node until SECONDS after the plan's create: "
        "the first nodes are drained with no pod to move, the taint and the DCM label in one write",
    )
    args = parser.parse_args()
    kinds = ["sim", "real"] if args.real or args.target == "both" else [args.target]
    for kind in kinds:
        context = (
            sim_cluster(args.nodes, args.profile_sim)
            if kind == "sim"
            else real_cluster(args.nodes, args.audit_nodes)
        )
        with context as cluster:
            asyncio.run(
                measure(
                    cluster,
                    args.nodes,
                    args.max_parallel,
                    args.profile,
                    args.memtrace,
                    args.timeout,
                    args.at_once,
                    args.plugin_held,
                )
            )


if __name__ == "__main__":
    main()

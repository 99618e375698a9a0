"""``aiplane demo --real``: start the real control plane, the simulated hardware and the operator, and run
the demo's sections on them (:mod:`aiplane.demo.real` says how the views follow the cluster).

The control plane is etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with the
default fleet's nodes, the scheduler-plugins gang scheduler (Coscheduling) beside kube-scheduler, and
upstream Kueue (``scripts/build-neighbours``; the KaiwoConfig's queues admit the demo's workloads), in
``$AIPLANE_CACHE/demo-cluster`` (``~/.cache/aiplane`` by default; made anew each run, removed at the end).
It ends with this process, whatever way it ends. The operator runs with ``--gang-scheduler coscheduling``:
Volcano cannot be built here (docs/real-cluster.md).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from rich.console import Console

from aiplane.controllers import registry
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.gang import GangOptions, GangScheduler
from aiplane.demo.common import DemoOptions
from aiplane.demo.hints import follow_message
from aiplane.demo.real import Listed, WatchFeed, WriteCounter, kube_bin_dir, neighbours_dir
from aiplane.demo.run import DEMO_INGRESS_CLASS, keep_or_close, run_sections
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import Resource, resource_for
from aiplane.realcluster import ClusterError, RealCluster, start_real_cluster
from aiplane.sim.hardware import Hardware
from aiplane.simrun import in_process_manager

#: Where this repository's checkout is when aiplane runs from it (src/aiplane/demo/ → the root).
CHECKOUT = Path(__file__).resolve().parents[3]
#: What the live views follow (by "group/plural", as the embedded store keys them).
FOLLOWED: tuple[tuple[str, str], ...] = (
    ("v1", "Node"),
    ("v1", "Pod"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("v1", "Event"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
    ("infrastructure.silogen.ai/v1alpha1", "NodePartitioning"),
    ("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan"),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"),
    ("workload.volcano.sh/v1alpha1", "ModelInfer"),
    ("apps/v1", "Deployment"),
    ("nvidia.com/v1alpha1", "DynamoGraphDeployment"),
    ("nvidia.com/v1alpha1", "DynamoComponentDeployment"),
    ("nvidia.com/v1alpha1", "DynamoGraphDeploymentRequest"),
)


def state_dir() -> Path:
    cache = os.environ.get("AIPLANE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aiplane"
    )
    return Path(cache) / "demo-cluster"


def _followed() -> list[Resource]:
    return [resource_for(api_version, kind) for api_version, kind in FOLLOWED]


async def start_cluster(console: Console) -> RealCluster:
    """Build (cached) and start the control plane; its admin kubeconfig is what everything uses."""
    root = Path.cwd() if (Path.cwd() / "scripts" / "build-kube").is_file() else CHECKOUT
    console.print("Building (or finding cached) the control plane with scripts/build-kube ...")
    bins = await asyncio.to_thread(kube_bin_dir, root)
    console.print(
        "Building (or finding cached) the gang scheduler and Kueue with scripts/build-neighbours ..."
    )
    neighbours = await asyncio.to_thread(neighbours_dir, root)
    console.print(
        f"Starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from {bins}, and the "
        f"scheduler-plugins gang scheduler and Kueue from {neighbours} ..."
    )
    return await asyncio.to_thread(
        start_real_cluster,
        state_dir(),
        bin_dir=bins,
        install_crds=True,
        neighbours=("coscheduling", "kueue"),
        neighbours_dir=neighbours,
        tie_to_parent=True,
    )


async def run_real_demo(opts: DemoOptions, console: Console) -> int:
    try:
        cluster = await start_cluster(console)
    except ClusterError as exc:
        console.print(f"[bold red]aiplane demo --real: {exc}[/]")
        return 1
    try:
        return await _on_cluster(cluster, opts, console)
    finally:
        await asyncio.to_thread(cluster.stop)


async def _on_cluster(cluster: RealCluster, opts: DemoOptions, console: Console) -> int:
    opts.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cluster.kubeconfig, opts.kubeconfig)
    opts.kubeconfig.chmod(0o600)
    kubeconfig = str(cluster.kubeconfig)
    counter = WriteCounter()
    operator_client = await HttpKubeClient.from_kubeconfig(kubeconfig, qps=200.0, burst=400, observer=counter)
    hardware_client = await HttpKubeClient.from_kubeconfig(kubeconfig, user_agent="aiplane-hardware")
    client = await HttpKubeClient.from_kubeconfig(kubeconfig, qps=float("inf"), user_agent="aiplane-demo")
    hardware = Hardware(
        hardware_client, amd=True, dcm_delay=opts.dcm_delay, plugin_refresh_delay=opts.plugin_refresh_delay
    )
    feed = WatchFeed(client)
    manager = None
    ok = False
    try:
        await hardware.start()
        manager = await in_process_manager(
            operator_client,
            registry.select("all"),
            options=[
                DynamoOptions(ingress_class=DEMO_INGRESS_CLASS),
                GangOptions(GangScheduler.COSCHEDULING),
            ],
        )
        manager_task = asyncio.create_task(manager.run())
        await feed.start(_followed())
        nodes = len((await client.list(resource_for("v1", "Node")))["items"])
        console.print(
            f"[bold]aiplane demo --real[/]: kube-apiserver at {cluster.server} ({nodes} kwok nodes; kube's own "
            "controller-manager and scheduler), the simulated hardware and every controller in-process as API "
            f"clients.\nOperator logs (JSON): {opts.log_file}; the control plane's logs: {cluster.state_dir / 'logs'}"
        )
        console.print(follow_message(opts.kubeconfig), soft_wrap=True, highlight=False, markup=False)
        try:
            ok, sections = await run_sections(
                feed, None, client, counter, opts, console, view=lambda: Listed.of(client, _followed())
            )
            sections.report(console)
            await keep_or_close(opts, console)
        except ApiError as exc:
            console.print(f"[bold red]aiplane demo: the API answered {exc}[/]")
            ok = False
        finally:
            manager.stop()
            await manager_task
    finally:
        await feed.stop()
        await hardware.stop()
        for each in (client, hardware_client, operator_client):
            await each.close()
    return 0 if ok else 1

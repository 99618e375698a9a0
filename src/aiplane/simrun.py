"""``aiplane sim``: serve an embedded cluster until SIGINT/SIGTERM, then exit 0.

Unless ``--controllers none``, the same manager ``aiplane run`` builds runs in the same process, on an
in-memory client to the embedded server (no HTTP between them), so one command gives a working cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from aiplane.controllers import registry
from aiplane.controllers.monitoring.options import ENV_ENABLED, ENV_ENDPOINT, ENV_INTERVAL, MonitoringOptions
from aiplane.kube.client import KubeClient
from aiplane.kube.manager import Manager
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, load_fleet


async def in_process_manager(
    client: KubeClient, selected: dict[str, registry.ControllerSetup], options: Sequence[object] = ()
) -> Manager:
    """The manager ``aiplane run`` builds, on ``client`` (an in-memory client to the embedded server);
    ``options`` are controller packages' options (``manager.set_options``), defaults otherwise."""
    manager = Manager(
        client,
        leader_election=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    for option in options:
        manager.set_options(option)
    for setup in selected.values():
        result = setup(manager)
        if inspect.isawaitable(result):
            await result
    return manager


def sim_monitoring(cluster: EmbeddedCluster, env: Mapping[str, str] | None = None) -> MonitoringOptions:
    """``RESOURCE_MONITORING_ENABLED=true aiplane sim``: the monitor scrapes the simulated exporter
    every 30 s unless the environment names another endpoint or interval."""
    source = os.environ if env is None else env
    if source.get(ENV_ENABLED, "").strip().lower() != "true":
        return MonitoringOptions()
    defaults = {ENV_INTERVAL: "30s", ENV_ENDPOINT: cluster.gpu_metrics.url or ""}
    return MonitoringOptions.from_env({**defaults, **{k: v for k, v in source.items() if v.strip()}})


def _access_line(authorization_mode: str, audit_log: Path | None) -> str:
    return (
        f"aiplane sim: authorization mode {authorization_mode} (the kubeconfig's user is in system:masters; "
        "`kubectl create token NAME` mints a ServiceAccount's token)"
        + (f"; audit log {audit_log}" if audit_log is not None else "")
    )


async def run_sim(
    *,
    kubeconfig: Path,
    port: int,
    fleet_file: Path | None,
    controllers: str,
    faults: list[str],
    agents: bool = True,
    hardware: bool = True,
    dcm_delay: float = 1.0,
    pod_ready_delay: float = 0.5,
    authorization_mode: str = "AlwaysAllow",
    audit_log: Path | None = None,
) -> int:
    try:
        selected = registry.select(controllers)
    except registry.UnknownControllerError as exc:
        print(f"aiplane sim: {exc}", file=sys.stderr)
        return 2
    fleet: Fleet | None = None
    if fleet_file is not None:
        try:
            fleet = load_fleet(fleet_file)
        except (OSError, ValidationError) as exc:
            print(f"aiplane sim: invalid fleet file {fleet_file}: {exc}", file=sys.stderr)
            return 2
    if dcm_delay < 0 or pod_ready_delay < 0:
        print("aiplane sim: --dcm-delay and --pod-ready-delay must not be negative", file=sys.stderr)
        return 2
    # The simulated schedulers, kubelet, DaemonSet controller and AMD GPU operator run by default
    # here: a newcomer's cluster should behave like one (pods are scheduled and run, GPUs partition).
    cluster = EmbeddedCluster(
        fleet=fleet,
        agents=agents,
        hardware=hardware,
        dcm_delay=dcm_delay,
        ready_delay=pod_ready_delay,
        authorization_mode=authorization_mode,
        audit_log=audit_log,
    )
    for spec in faults:
        try:
            cluster.server.faults.add_spec(spec)
        except ValueError as exc:
            print(f"aiplane sim: invalid --fault {spec!r}: {exc}", file=sys.stderr)
            return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    url = await cluster.start(port=port)
    manager: Manager | None = None
    manager_task: asyncio.Task[int] | None = None
    try:
        monitoring = sim_monitoring(cluster)
    except ValueError as exc:
        print(f"aiplane sim: {exc}", file=sys.stderr)
        await cluster.stop()
        return 2
    if selected:
        manager = await in_process_manager(InMemoryKubeClient.for_cluster(cluster), selected, [monitoring])
        manager_task = asyncio.create_task(manager.run())
    cluster.write_kubeconfig(kubeconfig)
    nodes = cluster.server.store.count("/nodes")
    print(f"aiplane sim: serving {url} ({nodes} nodes); kubeconfig written to {kubeconfig}", file=sys.stderr)
    if selected:
        print(f"aiplane sim: controllers running in-process: {', '.join(sorted(selected))}", file=sys.stderr)
    if agents:
        print(
            "aiplane sim: simulated agents: kube-scheduler, Volcano gang scheduler, kubelet, "
            "daemonset, replicaset, deployment, horizontal-pod-autoscaler and persistentvolume controllers, "
            "hostpath volume provisioner, LeaderWorkerSet controller"
            + (
                f", AMD GPU operator (pod ready delay {pod_ready_delay}s, DCM delay {dcm_delay}s)"
                if hardware
                else f" (pod ready delay {pod_ready_delay}s; no AMD GPU operator: run `aiplane hardware`)"
            ),
            file=sys.stderr,
        )
    print(
        f"aiplane sim: simulated GPU metrics exporter at {cluster.gpu_metrics.url} "
        "(set utilisation with POST /_sim/gpu-utilization)"
        + (f"; resource monitoring on, every {monitoring.interval:g}s" if monitoring.enabled else ""),
        file=sys.stderr,
    )
    print(_access_line(authorization_mode, audit_log), file=sys.stderr)
    print(f"aiplane sim: try  KUBECONFIG={kubeconfig} kubectl get nodes", file=sys.stderr)
    stopped = asyncio.create_task(stop.wait())
    waiting: set[asyncio.Task[Any]] = {stopped}
    if manager_task is not None:
        waiting.add(manager_task)
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if manager is not None and manager_task is not None:
        if manager_task.done():
            code = manager_task.result()
            print(f"aiplane sim: the in-process manager exited ({code})", file=sys.stderr)
        else:
            manager.stop()
            code = await manager_task
    stopped.cancel()
    await cluster.stop()
    print("aiplane sim: stopped", file=sys.stderr)
    return code

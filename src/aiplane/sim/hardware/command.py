"""``aiplane hardware``: the simulated hardware against any cluster, until SIGINT/SIGTERM.

Beside a real control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kwok running the
pods) this is the only simulated part: the AMD GPU operator's device plugin and Device Config Manager,
and the GPU metrics exporter (:mod:`aiplane.sim.hardware`). Against ``aiplane sim --no-hardware`` it
plays what the embedded cluster would otherwise play in-process.

``--fleet F`` first creates the fleet's Nodes that do not exist (a bare control plane has none), as
``aiplane sim`` would, annotated ``kwok.x-k8s.io/node=fake`` so that kwok takes them over.
Exit status: 0 after SIGINT/SIGTERM, 1 when the cluster cannot be reached or the caches never sync,
2 for command-line errors.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from aiplane.kube.client import ApiError, HttpKubeClient, KubeClient
from aiplane.kube.resources import NODES
from aiplane.sim import fleet as fleet_mod
from aiplane.sim.hardware import Hardware
from aiplane.sim.hardware.amd_gpu import OPERATOR

__all__ = ["KWOK_NODE_ANNOTATION", "create_fleet_nodes", "run_hardware"]

#: What kwok's ``--manage-nodes-with-annotation-selector`` conventionally selects.
KWOK_NODE_ANNOTATION: Final = ("kwok.x-k8s.io/node", "fake")


async def create_fleet_nodes(client: KubeClient, fleet: fleet_mod.Fleet) -> list[str]:
    """Create the fleet's Nodes that do not exist yet (with their status: kube-apiserver keeps a
    Node's status on create); the names created."""
    created = []
    key, value = KWOK_NODE_ANNOTATION
    for node in fleet_mod.node_objects(fleet):
        node["metadata"].setdefault("annotations", {})[key] = value
        try:
            await client.create(NODES, node, field_manager=OPERATOR)
        except ApiError as err:
            if err.already_exists:
                continue
            raise
        created.append(node["metadata"]["name"])
    return created


def _parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


async def run_hardware(
    *,
    kubeconfig: Path | None,
    fleet_file: Path | None = None,
    dcm_delay: float = 1.0,
    plugin_refresh_delay: float = 0.0,
    metrics_address: str = "127.0.0.1:0",
    amd: bool = True,
) -> int:
    try:
        host, port = _parse_address(metrics_address)
    except ValueError:
        print(f"aiplane hardware: invalid --metrics-address {metrics_address!r} (HOST:PORT)", file=sys.stderr)
        return 2
    if min(dcm_delay, plugin_refresh_delay) < 0:
        print("aiplane hardware: the delays must not be negative", file=sys.stderr)
        return 2
    fleet = None
    if fleet_file is not None:
        try:
            fleet = fleet_mod.load_fleet(fleet_file)
        except (OSError, ValidationError) as exc:
            print(f"aiplane hardware: invalid fleet file {fleet_file}: {exc}", file=sys.stderr)
            return 2
    try:
        client = await HttpKubeClient.from_kubeconfig(
            str(kubeconfig) if kubeconfig is not None else None, user_agent="aiplane-hardware"
        )
    except Exception as exc:  # whatever the loader raises (missing file, bad YAML, no context)
        print(f"aiplane hardware: cannot load kubeconfig: {exc}", file=sys.stderr)
        return 2
    hardware = Hardware(client, amd=amd, dcm_delay=dcm_delay, plugin_refresh_delay=plugin_refresh_delay)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if fleet is not None:
            created = await create_fleet_nodes(client, fleet)
            print(f"aiplane hardware: created {len(created)} fleet nodes", file=sys.stderr)
        await hardware.start(host=host, port=port)
    except (ApiError, OSError, TimeoutError) as exc:
        print(f"aiplane hardware: cannot start: {exc}", file=sys.stderr)
        await hardware.stop()
        await client.close()
        return 1
    parts = ["GPU metrics exporter at " + str(hardware.metrics.url)]
    if hardware.amd is not None:
        parts.insert(
            0, f"AMD GPU operator (DCM delay {dcm_delay}s, plugin refresh delay {plugin_refresh_delay}s)"
        )
    print(f"aiplane hardware: running: {'; '.join(parts)}", file=sys.stderr)
    await stop.wait()
    await hardware.stop()
    await client.close()
    print("aiplane hardware: stopped", file=sys.stderr)
    return 0

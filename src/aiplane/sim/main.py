"""``aiplane sim``: serve an embedded cluster until SIGINT/SIGTERM, then exit 0."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, load_fleet


async def run_sim(
    *, kubeconfig: Path, port: int, fleet_file: Path | None, controllers: str, faults: list[str]
) -> int:
    fleet: Fleet | None = None
    if fleet_file is not None:
        try:
            fleet = load_fleet(fleet_file)
        except (OSError, ValidationError) as exc:
            print(f"aiplane sim: invalid fleet file {fleet_file}: {exc}", file=sys.stderr)
            return 2
    cluster = EmbeddedCluster(fleet=fleet)
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
    cluster.write_kubeconfig(kubeconfig)
    nodes = cluster.server.store.count("/nodes")
    print(f"aiplane sim: serving {url} ({nodes} nodes); kubeconfig written to {kubeconfig}", file=sys.stderr)
    print(f"aiplane sim: try  KUBECONFIG={kubeconfig} kubectl get nodes", file=sys.stderr)
    if controllers not in ("none", "all"):
        print(
            f"aiplane sim: controllers {controllers!r}: no controllers exist yet; serving without",
            file=sys.stderr,
        )
    await stop.wait()
    await cluster.stop()
    print("aiplane sim: stopped", file=sys.stderr)
    return 0

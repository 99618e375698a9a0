"""``python -m aiplane.realcluster up|down|status``: what scripts/cluster runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from aiplane.realcluster.launcher import ClusterError, running_pids, start_real_cluster, stop_cluster
from aiplane.realcluster.neighbours import NeighbourError, parse_with
from aiplane.sim.fleet import load_fleet


def default_state_dir() -> Path:
    cache = os.environ.get("AIPLANE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aiplane"
    )
    return Path(cache) / "cluster"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--state-dir", type=Path, default=default_state_dir(), help="default: %(default)s")
    parser.add_argument("--bin-dir", type=Path, help="the binaries (default: $AIPLANE_KUBE_BIN)")
    parser.add_argument("--fleet", type=Path, help="fleet file, as for `aiplane sim --fleet`")
    parser.add_argument("--crds", action="store_true", help="install aiplane's CRDs")
    parser.add_argument(
        "--with",
        dest="neighbours",
        default="",
        metavar="NAMES",
        help="also run upstream neighbours: lws,kueue,gateway,coscheduling or all (built by "
        "scripts/build-neighbours)",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for readiness")
    args = parser.parse_args(argv)
    state: Path = args.state_dir
    if args.action == "down":
        stop_cluster(state)
        print(f"stopped; removed {state}")
        return 0
    if args.action == "status":
        pids = running_pids(state)
        for name, pid in pids.items():
            print(f"{name}\t{pid}")
        return 0 if pids else 1
    try:
        neighbours = parse_with(args.neighbours)
    except NeighbourError as error:
        print(f"cluster up: {error}", file=sys.stderr)
        return 2
    try:
        cluster = start_real_cluster(
            state,
            bin_dir=args.bin_dir,
            fleet=load_fleet(args.fleet) if args.fleet else None,
            install_crds=args.crds,
            neighbours=neighbours,
            timeout=args.timeout,
        )
    except (ClusterError, NeighbourError) as error:
        print(f"cluster up failed: {error}", file=sys.stderr)
        return 1
    print(f"Kubernetes control plane serving at {cluster.server} (logs in {state / 'logs'})")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print("  kubectl get nodes")
    print(
        "Stop it with: scripts/cluster down"
        + ("" if state == default_state_dir() else f" --state-dir {state}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The chaos soak (a benchmark script, not a test): the chaos suite's campaigns, much longer.

Campaigns (tests/chaos/scenarios.py) run one after another, each on a fresh embedded cluster with the
operator (``aiplane run --controllers all``) out of process, until ``--minutes`` have passed:
partitioning + ModelInfer + platform configuration for several rounds (CPX and SPX in turn, a new image
each round) with one operator; the same with two leader-elected operators; a Dynamo graph and a
DynamoGraphDeploymentRequest. Faults at seeded random moments: operator SIGKILL and SIGSTOP/SIGCONT,
500/429/503 storms, 409 on writes, closed watches and 410s (and, with the proxy, network faults).
Every committed change is checked (tests/chaos/invariants.py); end states and writes at rest too.

Reported: faults injected by kind, rollouts completed, invariant checks run, violations (must be 0),
and the seed of every campaign that had one (``AIPLANE_CHAOS_SEED=<seed> pytest tests/chaos`` replays
it as a test).

Usage: ``.venv/bin/python benchmarks/chaos_soak.py [--minutes 10] [--seed N] [--rounds 4]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.harness import API_FAULTS, PROCESS_FAULTS, Figures, mi300x_fleet, world
from tests.chaos.network import NETWORK_FAULTS
from tests.chaos.scenarios import dynamo_campaign, serving_campaign

from benchmarks.simproc import figure

CAMPAIGNS = ("serving", "leaders", "dynamo", "network")


async def campaign(kind: str, seed: int, rounds: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix=f"chaos-{kind}-") as tmp:
        path = Path(tmp)
        if kind == "dynamo":
            async with world(path, seed, mi300x_fleet(inference=0, h100=2)) as w:
                await dynamo_campaign(w, PROCESS_FAULTS + API_FAULTS, min_faults=8)
                return w.figures
        leaders = kind == "leaders"
        fleet = mi300x_fleet(inference=4, training=1)
        async with world(
            path, seed, fleet, replicas=2 if leaders else 1, leader_elect=leaders, proxied=kind == "network"
        ) as w:
            kinds = PROCESS_FAULTS + API_FAULTS if kind != "network" else (*NETWORK_FAULTS, "kill")
            await serving_campaign(w, kinds, rounds=rounds, timeout=120 if leaders else 90, min_faults=8)
            return w.figures


async def soak(minutes: float, seed: int, rounds: int, campaigns: tuple[str, ...] = CAMPAIGNS) -> int:
    rng = random.Random(seed)
    end = time.monotonic() + minutes * 60
    faults: Counter[str] = Counter()
    rollouts = checks = runs = 0
    violations: list[tuple[int, str, str]] = []
    began = time.monotonic()
    i = 0
    while time.monotonic() < end:
        kind = campaigns[i % len(campaigns)]
        i += 1
        campaign_seed = rng.randrange(1, 2**31)
        try:
            figures = await campaign(kind, campaign_seed, rounds)
        except Exception as exc:  # a crashed campaign is a finding too: report it with its seed
            violations.append((campaign_seed, kind, f"{type(exc).__name__}: {exc}"))
            continue
        runs += 1
        faults += figures.faults
        rollouts += figures.rollouts
        checks += figures.checks
        violations += [(campaign_seed, kind, v) for v in figures.violations]
        print(
            f"  {kind:<8} seed {campaign_seed:>10}: {sum(figures.faults.values())} faults, "
            f"{figures.rollouts} rollouts, {figures.checks} checks, {len(figures.violations)} violations",
            flush=True,
        )
        for text in figures.violations[:5]:
            print(f"    {text[:300]}", flush=True)
    elapsed = time.monotonic() - began
    print()
    figure("soak", f"{elapsed / 60:.1f}", "min", f"{runs} campaigns, soak seed {seed}")
    figure(
        "faults injected",
        str(sum(faults.values())),
        note=", ".join(f"{k} {v}" for k, v in sorted(faults.items())),
    )
    figure("rollouts completed", str(rollouts))
    figure("invariant checks run", str(checks))
    figure("violations", str(len(violations)))
    for campaign_seed, kind, text in violations[:20]:
        print(f"  {kind} seed {campaign_seed}: {text}")
    return 1 if violations else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to soak (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="the soak's seed (default: random)")
    parser.add_argument("--rounds", type=int, default=4, help="rollout rounds per serving campaign")
    parser.add_argument(
        "--campaigns",
        default=",".join(CAMPAIGNS),
        help=f"comma-separated, of {', '.join(CAMPAIGNS)} (default: all)",
    )
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    chosen = tuple(c for c in args.campaigns.split(",") if c)
    unknown = set(chosen) - set(CAMPAIGNS)
    if unknown or not chosen:
        parser.error(f"unknown campaign(s) {', '.join(sorted(unknown))}: choose from {', '.join(CAMPAIGNS)}")
    raise SystemExit(asyncio.run(soak(args.minutes, seed, args.rounds, chosen)))


if __name__ == "__main__":
    main()

"""Chaos campaigns: the operator out of process, killed, paused and refused at random (seeded)
moments while it rolls partitioning, ModelInfer, Dynamo and platform configuration out; every
committed change checked (tests/chaos/invariants.py). ``AIPLANE_CHAOS_SEED`` replays a campaign;
``AIPLANE_CHAOS_BUDGET`` (seconds, default 90 for the whole file) lengthens them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import API_FAULTS, PROCESS_FAULTS, budget, mi300x_fleet, seeds, world
from tests.chaos.scenarios import dynamo_campaign, serving_campaign

pytestmark = pytest.mark.chaos

#: The share of the budget each campaign gets: the faults go on at least this long per round.
SHARE = {"serving": 0.4, "dynamo": 0.3, "leaders": 0.3}


def _rounds(share: float, per_round: float) -> int:
    return max(1, int(budget() * share // per_round))


@pytest.mark.parametrize("seed", seeds(1))
async def test_partitioning_and_serving_survive_kills_pauses_and_api_storms(
    tmp_path: Path, seed: int
) -> None:
    async with world(tmp_path, seed, mi300x_fleet(inference=4, training=1)) as w:
        await serving_campaign(w, PROCESS_FAULTS + API_FAULTS, rounds=_rounds(SHARE["serving"], 30))
        assert w.figures.violations == [], w.report()
        assert sum(w.figures.faults.values()) >= 3, w.report()


@pytest.mark.parametrize("seed", seeds(1))
async def test_dynamo_graph_and_request_survive_kills_pauses_and_api_storms(
    tmp_path: Path, seed: int
) -> None:
    async with world(tmp_path, seed, mi300x_fleet(inference=0, h100=2)) as w:
        await dynamo_campaign(w, PROCESS_FAULTS + API_FAULTS)
        assert w.figures.violations == [], w.report()


@pytest.mark.parametrize("seed", seeds(1))
async def test_two_leader_elected_operators_killed_and_paused_keep_every_invariant(
    tmp_path: Path, seed: int
) -> None:
    async with world(
        tmp_path, seed, mi300x_fleet(inference=4, training=1), replicas=2, leader_elect=True
    ) as w:
        await serving_campaign(w, (*PROCESS_FAULTS, "storm-500", "watch-close"), timeout=90)
        assert w.figures.violations == [], w.report()

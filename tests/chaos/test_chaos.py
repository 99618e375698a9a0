"""Chaos campaigns: the operator out of process, killed, paused and refused at random (seeded)
moments while it rolls partitioning, ModelInfer, Dynamo and platform configuration out; every
committed change checked (tests/chaos/invariants.py, docs/testing.md).

A failure names its seed: ``AIPLANE_CHAOS_SEED=<seed>`` replays the campaign's choices.
``AIPLANE_CHAOS_BUDGET`` (seconds for the whole file, default 90) buys more rounds and faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import API_FAULTS, PROCESS_FAULTS, budget, mi300x_fleet, seeds, world
from tests.chaos.network import NETWORK_FAULTS
from tests.chaos.scenarios import dynamo_campaign, serving_campaign

pytestmark = pytest.mark.chaos

#: Seconds one serving round takes in CI (rollouts of 4 nodes and 2 groups, a few faults); the
#: budget beyond the default buys more rounds, each with more faults.
ROUND_SECONDS = 30.0
DEFAULT_BUDGET = 90.0


def _scale() -> float:
    return max(1.0, budget(DEFAULT_BUDGET) / DEFAULT_BUDGET)


@pytest.fixture
def seed() -> int:
    """``AIPLANE_CHAOS_SEED`` or a fresh one (not a parameter: test ids stay stable)."""
    return seeds(1)[0]


async def test_partitioning_and_serving_survive_kills_pauses_and_api_storms(
    tmp_path: Path, seed: int
) -> None:
    async with world(tmp_path, seed, mi300x_fleet(inference=4, training=1)) as w:
        rounds = max(1, int(_scale() * 0.4 * DEFAULT_BUDGET // ROUND_SECONDS))
        await serving_campaign(w, PROCESS_FAULTS + API_FAULTS, rounds=rounds, min_faults=int(3 * _scale()))
        assert w.figures.violations == [], w.report()
        assert w.figures.rollouts == 2 * rounds and sum(w.figures.faults.values()) >= 3 * rounds, w.report()


async def test_dynamo_graph_and_request_survive_kills_pauses_and_api_storms(
    tmp_path: Path, seed: int
) -> None:
    async with world(tmp_path, seed, mi300x_fleet(inference=0, h100=2)) as w:
        await dynamo_campaign(w, PROCESS_FAULTS + API_FAULTS, min_faults=int(3 * _scale()))
        assert w.figures.violations == [], w.report()
        assert w.figures.rollouts == 3, w.report()


async def test_two_leader_elected_operators_killed_and_paused_keep_every_invariant(
    tmp_path: Path, seed: int
) -> None:
    fleet = mi300x_fleet(inference=4, training=1)
    async with world(tmp_path, seed, fleet, replicas=2, leader_elect=True) as w:
        kinds = (*PROCESS_FAULTS, "storm-500", "watch-close")
        await serving_campaign(w, kinds, timeout=90, min_faults=int(3 * _scale()))
        assert w.figures.violations == [], w.report()


async def test_partitioning_and_serving_survive_black_holes_resets_latency_and_kills(
    tmp_path: Path, seed: int
) -> None:
    """The operator reaches the API through the chaos proxy: open connections go silent (half-open,
    new ones work), the whole path goes dark for seconds, connections are reset, latency comes and
    goes; the operator notices dead watches within its (shortened) read deadline and carries on."""
    async with world(tmp_path, seed, mi300x_fleet(inference=4, training=1), proxied=True) as w:
        await serving_campaign(w, (*NETWORK_FAULTS, "kill"), timeout=90, min_faults=int(3 * _scale()))
        assert w.figures.violations == [], w.report()
        assert w.network is not None and w.network.proxy.accepted > 1, w.report()

"""The operator-kill campaign on the real control plane: the partitioning operator (as the chart's
ServiceAccount, with the chart's leader election) is SIGKILLed whenever a node is mid-rollout and started
again, as a Deployment would; the plan's limits are checked on every NodePartitioning change a watch
delivers, and both rollouts (CPX, then back to SPX) complete with no node left cordoned or tainted.

``AIPLANE_CHAOS_SEED`` replays a campaign's choices (how long after a node goes busy each kill comes)."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable

import pytest

from aiplane.kube.client import HttpKubeClient
from tests.chaos.harness import LEASE_TIMING, SEED_ENV
from tests.polling import eventually
from tests.real import operator as op
from tests.real.test_partitioning import (
    CONTROLLERS,
    IN_PROGRESS,
    NODE_PARTITIONINGS,
    PLANS,
    Limits,
    cordoned_or_tainted,
    example,
    gpus,
    plan_phase,
    the_plan,
)
from tests.real.watching import apply, following

pytestmark = [pytest.mark.real, pytest.mark.chaos]

PLAN = "mi300x-inference-cpx"
KILLS_PER_ROLLOUT = 2


async def test_sigkilled_mid_rollout_the_operator_keeps_the_limits_and_leaves_no_node_cordoned(
    admin: HttpKubeClient, hardware: op.Process, start_operator: Callable[..., op.Process]
) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.randrange(2**31))
    rng = random.Random(seed)
    await apply(admin, example("partition-profiles.yaml"))
    limits = Limits()
    kills = 0
    operator = start_operator(CONTROLLERS, *LEASE_TIMING)
    async with following(admin, NODE_PARTITIONINGS, limits):
        for profile, expected in (("mi300x-cpx", "64"), ("mi300x-spx", "8")):
            await apply(admin, [the_plan(profile)])

            async def rolled(expected: str = expected) -> bool:
                return await plan_phase(admin, PLAN) == "Completed" and set((await gpus(admin)).values()) == {
                    expected
                }

            for _ in range(KILLS_PER_ROLLOUT):
                busy = await _node_busy_or_done(admin, rolled)
                if not busy:
                    break
                await asyncio.sleep(rng.uniform(0.0, 0.5))
                operator.kill()
                kills += 1
                operator = start_operator(CONTROLLERS, *LEASE_TIMING)
            await eventually(rolled, timeout=120, what=f"the pool at {profile} (seed {seed})", interval=0.2)
            assert await cordoned_or_tainted(admin) == [], f"seed {seed}"
    await admin.delete(PLANS, PLAN)
    busy, down = limits.worst[PLAN]
    assert busy <= 3 and down <= 3, (limits.worst, seed)
    assert kills >= 1, f"no kill landed mid-rollout (seed {seed})"
    assert operator.alive(), operator.tail()


async def _node_busy_or_done(admin: HttpKubeClient, rolled: Callable[[], object]) -> bool:
    """Wait until a node is mid-rollout (True) or the rollout is done (False)."""

    async def state() -> str | None:
        nps = (await admin.list(NODE_PARTITIONINGS))["items"]
        if any((n.get("status") or {}).get("phase") in IN_PROGRESS for n in nps):
            return "busy"
        return "done" if await rolled() else None  # type: ignore[misc]

    return await eventually(state, timeout=60, what="a node mid-rollout", interval=0.05) == "busy"

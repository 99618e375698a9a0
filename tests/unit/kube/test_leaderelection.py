"""Lease leader election: client-go's state machine on the embedded API server, time driven by hand.

The state machine (:meth:`LeaderElector.try_acquire_or_renew`) runs on a :class:`FakeClock`, so expiry
is exact and nothing sleeps; the loops (:meth:`LeaderElector.run`) run on real time with short
durations.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from aiplane.kube.client import KubeClient
from aiplane.kube.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    format_micro_time,
    parse_micro_time,
)
from aiplane.kube.metrics import Metrics
from aiplane.kube.ratelimit import FakeClock
from aiplane.kube.resources import LEASES
from aiplane.sim.client import InMemoryKubeClient

NS = "default"
NAME = "aiplane-test"
MICRO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh(install_crds=False)
    yield c
    await c.close()


def elector(
    client: KubeClient, clock: FakeClock, identity: str, *, skew: float = 0.0, **kw: Any
) -> LeaderElector:
    """A candidate on ``clock``; its wall clock is EPOCH + clock (+ ``skew`` seconds)."""
    config = LeaderElectionConfig(NAME, NS, identity=identity)
    return LeaderElector(
        client,
        config,
        clock=clock,
        wall_clock=lambda: EPOCH + timedelta(seconds=clock.now() + skew),
        **kw,
    )


async def lease(client: KubeClient) -> dict[str, Any]:
    return await client.get(LEASES, NAME, NS)


async def test_first_candidate_creates_the_lease_with_client_go_fields(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    assert await a.try_acquire_or_renew()
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"]
    assert spec["renewTime"] == "2026-01-01T00:00:00.000000Z"
    assert a.is_leader() and a.leader == "a"


async def test_renewal_moves_renew_time_keeps_acquire_time_and_uses_the_fast_path(
    client: InMemoryKubeClient,
) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    assert await a.try_acquire_or_renew()
    first = (await lease(client))["spec"]
    clock.advance(2.5)
    client.reset_counts()
    assert await a.try_acquire_or_renew()
    spec = (await lease(client))["spec"]
    assert spec["acquireTime"] == first["acquireTime"]
    assert spec["renewTime"] == "2026-01-01T00:00:02.500000Z"
    assert spec["leaseTransitions"] == 0
    # The fast path: one optimistic PUT on the lease we last wrote (plus our own GET above).
    assert client.requests["update"] == 1
    assert client.requests["get"] == 1


async def test_a_candidate_waits_for_expiry_by_its_own_clock_then_takes_over(
    client: InMemoryKubeClient,
) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    # b's wall clock is an hour ahead: expiry must not depend on comparing timestamps across nodes.
    b = elector(client, clock, "b", skew=3600.0)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # first sight of a's record: the countdown starts
    assert b.leader == "a" and not b.is_leader()

    # While a renews, the record keeps changing and b never takes over, however long it waits.
    for _ in range(10):
        clock.advance(2.0)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()

    # a stops renewing: b waits leaseDurationSeconds from the last change *it observed*.
    clock.advance(14.9)
    assert not await b.try_acquire_or_renew()
    clock.advance(0.2)
    assert await b.try_acquire_or_renew()
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == spec["renewTime"]
    assert b.is_leader()


async def test_the_old_leader_finds_the_lease_taken_and_does_not_renew(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    b = elector(client, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(16)
    assert await b.try_acquire_or_renew()
    # a's lease looks expired to a too (no successful renewal for 16 s): slow path, sees b.
    assert not await a.try_acquire_or_renew()
    assert a.leader == "b" and not a.is_leader()
    assert (await lease(client))["spec"]["holderIdentity"] == "b"


async def test_a_409_on_renewal_means_re_read_and_retry(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    metrics = Metrics(process_collectors=False)
    a = elector(client, clock, "a", metrics=metrics.leader_election)
    assert await a.try_acquire_or_renew()
    assert client.faults is not None
    client.faults.add(verb="update", resource="leases", error=409, count=1)
    clock.advance(2)
    client.reset_counts()
    # The optimistic PUT gets a 409; the slow path re-reads and renews in the same attempt.
    assert await a.try_acquire_or_renew()
    assert client.requests["update"] == 2 and client.requests["get"] == 1
    assert (await lease(client))["spec"]["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert metrics.registry.get_sample_value("leader_election_slowpath_total", {"name": NAME}) == 1.0


class _BeforeFirstPut(KubeClient):
    """Delegates to ``inner``; runs ``hook`` once, just before the first PUT (a race made exact)."""

    def __init__(self, inner: KubeClient, hook: Callable[[], Awaitable[Any]]) -> None:
        self.inner = inner
        self.hook: Callable[[], Awaitable[Any]] | None = hook

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method == "PUT" and self.hook is not None:
            hook, self.hook = self.hook, None
            await hook()
        return await self.inner.request(method, path, **kw)

    def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        return self.inner.stream(path, query, on_open=on_open)


async def test_two_candidates_racing_for_an_expired_lease_one_wins_the_other_gets_409(
    client: InMemoryKubeClient,
) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    b = elector(client, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    # c reads the expired lease, then b takes it before c's PUT lands: c's resourceVersion is stale.
    c = elector(_BeforeFirstPut(client, b.try_acquire_or_renew), clock, "c")
    assert not await c.try_acquire_or_renew()  # first observation
    clock.advance(16)
    assert not await c.try_acquire_or_renew()  # its PUT conflicted: b won
    assert b.is_leader()
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    # c re-reads: b's lease is fresh, so c keeps waiting.
    assert not await c.try_acquire_or_renew()
    assert c.leader == "b"


async def test_release_lets_the_next_candidate_take_over_at_once(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    b = elector(client, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(1)
    assert await a.release()
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert not a.is_leader()
    # No waiting for the old 15 s: an empty holder may be taken immediately.
    assert await b.try_acquire_or_renew()
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_release_does_nothing_to_a_lease_held_by_someone_else(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    b = elector(client, clock, "b")
    assert await a.try_acquire_or_renew()
    assert await b.release()  # not ours: nothing to give up, nothing written
    assert (await lease(client))["spec"]["holderIdentity"] == "a"


async def test_a_lease_rewritten_by_someone_else_is_lost_not_retaken(client: InMemoryKubeClient) -> None:
    clock = FakeClock()
    a = elector(client, clock, "a")
    assert await a.try_acquire_or_renew()
    await client.patch(LEASES, NAME, {"spec": {"holderIdentity": "intruder"}}, namespace=NS)
    clock.advance(2)
    assert not await a.try_acquire_or_renew()
    assert a.leader == "intruder"
    assert (await lease(client))["spec"]["holderIdentity"] == "intruder"


def test_micro_time_round_trip() -> None:
    moment = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert format_micro_time(moment) == "2026-01-01T00:00:00.123456Z"
    assert format_micro_time(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000000Z"
    assert parse_micro_time("2026-01-01T00:00:00.123456Z") == moment
    assert parse_micro_time("garbage") is None and parse_micro_time(None) is None


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"lease_duration": 10.0, "renew_deadline": 10.0}, "greater than renew_deadline"),
        ({"renew_deadline": 2.0, "retry_period": 2.0}, "retry_period"),
        ({"identity": ""}, "identity"),
    ],
)
def test_config_is_validated_like_client_go(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(NAME, NS, **kw)


def test_default_identity_is_hostname_and_a_unique_suffix() -> None:
    one, two = LeaderElectionConfig(NAME, NS), LeaderElectionConfig(NAME, NS)
    assert one.identity != two.identity
    assert one.identity.rsplit("_", 1)[0] == two.identity.rsplit("_", 1)[0]
    assert (one.lease_duration, one.renew_deadline, one.retry_period) == (15.0, 10.0, 2.0)


# --- the loops, on real time with short durations ---------------------------------------------------

FAST_LEASE, FAST_RENEW, FAST_RETRY = 2.0, 1.0, 0.1


def fast(client: KubeClient, identity: str, **kw: Any) -> LeaderElector:
    config = LeaderElectionConfig(
        NAME,
        NS,
        identity=identity,
        lease_duration=FAST_LEASE,
        renew_deadline=FAST_RENEW,
        retry_period=FAST_RETRY,
    )
    return LeaderElector(client, config, **kw)


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_run_leads_calls_back_and_releases_on_stop(client: InMemoryKubeClient) -> None:
    calls: list[str] = []
    metrics = Metrics(process_collectors=False)

    async def started() -> None:
        calls.append("started")

    a = fast(
        client,
        "a",
        on_started_leading=started,
        on_stopped_leading=lambda: calls.append("stopped"),
        on_new_leader=lambda who: calls.append(f"leader={who}"),
        metrics=metrics.leader_election,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(a.run(stop))
    await asyncio.wait_for(a.elected.wait(), 5)
    await wait_for(lambda: "started" in calls)
    assert metrics.registry.get_sample_value("leader_election_master_status", {"name": NAME}) == 1.0
    first = (await lease(client))["spec"]["renewTime"]
    async with asyncio.timeout(2):  # renewing every retry period
        while (await lease(client))["spec"]["renewTime"] == first:
            await asyncio.sleep(0.02)
    stop.set()
    assert await asyncio.wait_for(task, 5) is True
    assert not a.lost
    assert calls[-1] == "stopped" and "leader=a" in calls
    assert (await lease(client))["spec"]["holderIdentity"] == ""
    assert metrics.registry.get_sample_value("leader_election_master_status", {"name": NAME}) == 0.0


async def test_run_returns_false_at_once_when_someone_else_takes_the_lease(
    client: InMemoryKubeClient,
) -> None:
    stopped = asyncio.Event()
    a = fast(client, "a", on_stopped_leading=stopped.set)
    task = asyncio.create_task(a.run(asyncio.Event()))
    await asyncio.wait_for(a.elected.wait(), 5)
    await client.patch(LEASES, NAME, {"spec": {"holderIdentity": "intruder"}}, namespace=NS)
    # Well before the renew deadline would expire: a sees the other holder on its next renewal.
    assert await asyncio.wait_for(task, 0.9) is False
    assert a.lost and stopped.is_set()
    assert (await lease(client))["spec"]["holderIdentity"] == "intruder"


async def test_run_gives_up_after_the_renew_deadline_when_the_api_fails(client: InMemoryKubeClient) -> None:
    a = fast(client, "a")
    task = asyncio.create_task(a.run(asyncio.Event()))
    await asyncio.wait_for(a.elected.wait(), 5)
    assert client.faults is not None
    client.faults.add(verb="get|update", resource="leases", error=500)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await asyncio.wait_for(task, 5) is False
    # Within one retry period plus the renew deadline, and before the 2 s lease could expire for others.
    assert loop.time() - began < FAST_RENEW + FAST_RETRY + 0.5
    assert a.lost


async def test_a_standby_takes_over_when_the_leader_releases(client: InMemoryKubeClient) -> None:
    a, b = fast(client, "a"), fast(client, "b")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    task_a = asyncio.create_task(a.run(stop_a))
    await asyncio.wait_for(a.elected.wait(), 5)
    task_b = asyncio.create_task(b.run(stop_b))
    await wait_for(lambda: b.leader == "a")
    assert not b.elected.is_set()
    stop_a.set()
    assert await task_a is True
    # Released: b takes over on its next poll, well before a's 2 s lease would have expired.
    await asyncio.wait_for(b.elected.wait(), 1.0)
    spec = (await lease(client))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    stop_b.set()
    assert await task_b is True

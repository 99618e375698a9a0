"""The manager in-process: probes, metrics, cache sync before controllers, leadership and exit codes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from aiplane.kube.leaderelection import LeaderElectionConfig
from aiplane.kube.manager import EXIT_FAILURE, EXIT_OK, Manager, parse_bind_address
from aiplane.kube.resources import CONFIGMAPS, LEASES
from aiplane.sim.client import InMemoryKubeClient

LOOPBACK = "127.0.0.1:0"


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    c = InMemoryKubeClient.fresh(install_crds=False)
    yield c
    await c.close()


def election(identity: str, **kw: Any) -> LeaderElectionConfig:
    timing = {"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.1, **kw}
    return LeaderElectionConfig("mgr-test", "default", identity=identity, **timing)


def manager(client: InMemoryKubeClient, **kw: Any) -> Manager:
    kw.setdefault("health_probe_bind_address", LOOPBACK)
    kw.setdefault("metrics_bind_address", LOOPBACK)
    return Manager(client, handle_signals=False, **kw)


class Worker:
    """A controller stand-in: counts runs; on stop, takes ``drain`` seconds to finish its work."""

    def __init__(self, name: str = "worker", drain: float = 0.0, fail: bool = False) -> None:
        self.name = name
        self.drain = drain
        self.fail = fail
        self.started = asyncio.Event()
        self.finished = False
        self.cancelled = False

    async def run(self, stop: asyncio.Event) -> None:
        self.started.set()
        if self.fail:
            raise RuntimeError("boom")
        try:
            await stop.wait()
            await asyncio.sleep(self.drain)  # the in-flight reconcile finishing
            self.finished = True
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def get(port: int | None, path: str) -> tuple[int, str]:
    assert port is not None
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        (":8080", (None, 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9090", ("::1", 9090)),
        ("0", None),
        ("", None),
    ],
)
def test_bind_addresses_take_controller_runtimes_forms(address: str, parsed: Any) -> None:
    assert parse_bind_address(address) == parsed


@pytest.mark.parametrize("address", ["8080", "host:port", ":70000"])
def test_bad_bind_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(address)


async def test_probes_wait_for_the_caches_and_metrics_are_served(client: InMemoryKubeClient) -> None:
    assert client.faults is not None
    slow_list = client.faults.add(verb="list", resource="configmaps", latency=0.5)
    m = manager(client, metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0")
    m.informers.informer(CONFIGMAPS, namespace="default")
    worker = Worker()
    m.add_controller(worker)
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(m.serving.wait(), 5)
    assert await get(m.health_port, "/healthz") == (200, "ok")
    status, body = await get(m.health_port, "/readyz")
    assert status == 500 and "[-]informers failed: reason withheld" in body
    assert not worker.started.is_set()  # no controller before the caches sync
    await asyncio.wait_for(m.cache_synced.wait(), 5)
    await asyncio.wait_for(worker.started.wait(), 5)
    assert await get(m.health_port, "/readyz") == (200, "ok")
    status, body = await get(m.health_port, "/readyz?verbose")
    assert status == 200 and "[+]informers ok" in body
    assert (await get(m.health_port, "/readyz/informers")) == (200, "ok")
    status, body = await get(m.metrics_port, "/metrics")
    assert status == 200 and "# TYPE controller_runtime_reconcile_total counter" in body
    assert "# TYPE workqueue_depth gauge" in body
    slow_list.remove()
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_OK
    assert worker.finished


async def test_disabled_servers_bind_nothing(client: InMemoryKubeClient) -> None:
    m = manager(client, metrics_bind_address="0", health_probe_bind_address="0")
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(m.elected.wait(), 5)
    assert m.metrics_port is None and m.health_port is None
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_OK


async def test_sigterm_drains_in_flight_work_then_releases_the_lease(client: InMemoryKubeClient) -> None:
    m = manager(client, leader_election=election("a"))
    worker = Worker(drain=0.5)
    m.add_controller(worker)
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(worker.started.wait(), 5)
    _, body = await get(m.metrics_port, "/metrics")
    assert 'leader_election_master_status{name="mgr-test"} 1.0' in body
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_OK
    assert worker.finished and not worker.cancelled
    spec = (await client.get(LEASES, "mgr-test", "default"))["spec"]
    assert spec["holderIdentity"] == ""


async def test_a_drain_longer_than_the_shutdown_timeout_fails(client: InMemoryKubeClient) -> None:
    m = manager(client, shutdown_timeout=0.2)
    worker = Worker(drain=10)
    m.add_controller(worker)
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(worker.started.wait(), 5)
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_FAILURE
    assert worker.cancelled and not worker.finished


async def test_lost_leadership_exits_1_at_once_without_draining(client: InMemoryKubeClient) -> None:
    m = manager(client, leader_election=election("a"), shutdown_timeout=30)
    worker = Worker(drain=30)
    m.add_controller(worker)
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(worker.started.wait(), 5)
    await client.patch(LEASES, "mgr-test", {"spec": {"holderIdentity": "intruder"}}, namespace="default")
    assert await asyncio.wait_for(task, 3) == EXIT_FAILURE
    assert worker.cancelled and not worker.finished
    assert (await client.get(LEASES, "mgr-test", "default"))["spec"]["holderIdentity"] == "intruder"


async def test_a_standby_is_ready_runs_runnables_but_no_controllers(client: InMemoryKubeClient) -> None:
    leader = manager(client, leader_election=election("a"))
    leader_worker = Worker()
    leader.add_controller(leader_worker)
    leader_task = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader_worker.started.wait(), 5)

    standby = manager(client, leader_election=election("b"))
    standby_worker, agent = Worker(), Worker("agent")
    standby.add_controller(standby_worker)
    standby.add_runnable(agent)
    standby_task = asyncio.create_task(standby.run())
    await asyncio.wait_for(agent.started.wait(), 5)
    assert standby.elector is not None
    await until(lambda: standby.elector is not None and standby.elector.leader == "a")
    assert await get(standby.health_port, "/readyz") == (200, "ok")
    assert not standby_worker.started.is_set()
    _, body = await get(standby.metrics_port, "/metrics")
    assert 'leader_election_master_status{name="mgr-test"} 0.0' in body

    leader.stop()  # releases: the standby takes over at its next poll
    assert await asyncio.wait_for(leader_task, 5) == EXIT_OK
    await asyncio.wait_for(standby_worker.started.wait(), 2)
    standby.stop()
    assert await asyncio.wait_for(standby_task, 5) == EXIT_OK
    assert agent.finished


async def test_a_failing_controller_stops_the_manager_with_1(client: InMemoryKubeClient) -> None:
    m = manager(client)
    ok, bad = Worker("ok"), Worker("bad", fail=True)
    m.add_controller(ok)
    m.add_controller(bad)
    assert await asyncio.wait_for(m.run(), 5) == EXIT_FAILURE
    assert ok.finished  # the others were drained, not killed


async def test_stop_while_the_caches_sync_exits_0(client: InMemoryKubeClient) -> None:
    assert client.faults is not None
    client.faults.add(verb="list", resource="configmaps", error=500)
    m = manager(client)
    m.informers.informer(CONFIGMAPS)
    worker = Worker()
    m.add_controller(worker)
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(m.serving.wait(), 5)
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_OK
    assert not worker.started.is_set()


async def test_registration_after_run_and_duplicate_names_are_refused(client: InMemoryKubeClient) -> None:
    m = manager(client)
    m.add_controller(Worker("x"))
    with pytest.raises(ValueError, match="already registered"):
        m.add_controller(Worker("x"))
    task = asyncio.create_task(m.run())
    await asyncio.wait_for(m.elected.wait(), 5)
    with pytest.raises(RuntimeError):
        m.add_controller(Worker("y"))
    m.stop()
    assert await asyncio.wait_for(task, 5) == EXIT_OK

"""The chaos harness: the embedded cluster in this process, the operator out of process, and a seeded
injector of faults between them.

Why this shape: the invariant checkers must see every committed change, so the cluster (its store)
lives here; the operator must be killable like a real pod (SIGKILL, SIGSTOP), so it is ``aiplane run``
in its own process, reaching the cluster over HTTPS with a kubeconfig, exactly as in production.
``random.Random(seed)`` chooses the faults, their order, gaps and durations; wall-clock timing still
varies from run to run, so a seed reproduces the campaign, not every interleaving.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiplane.controllers import registry
from aiplane.kube.client import ApiError
from aiplane.kube.resources import resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.chaos import hooks
from tests.chaos.invariants import Checker, operator_writes
from tests.chaos.network import NetworkChaos, start_proxy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUDGET_ENV = "AIPLANE_CHAOS_BUDGET"
SEED_ENV = "AIPLANE_CHAOS_SEED"
FIELD_MANAGER = "chaos"
LEASE_TIMING = (
    "--leader-election-lease-duration",
    "6",
    "--leader-election-renew-deadline",
    "4",
    "--leader-election-retry-period",
    "1",
)
#: What the injector can do. The network kinds need the proxy (tests/chaos/proxy.py).
PROCESS_FAULTS = ("kill", "pause")
API_FAULTS = ("storm-500", "storm-429", "storm-503", "conflict-409", "watch-close", "watch-410")
#: With the proxy: the operator's watch read deadline is 3 s and an informer that heard nothing for
#: 6 s is stale (production: 45 s and 90 s; docs/architecture.md). Bookmarks keep kube's rule and
#: period, so quiet watches are silent and re-opened at the read deadline, as against kube.
PROXIED_LIVENESS = (3.0, 6.0)
TRANSIENT = frozenset({409, 410, 429, 500, 503, 504})


def budget(default: float = 90.0) -> float:
    """Seconds the whole chaos suite may take (``AIPLANE_CHAOS_BUDGET`` raises it)."""
    return float(os.environ.get(BUDGET_ENV, default))


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")) if d]


def _mi300x_pool(name: str, count: int, pool: str) -> NodePool:
    return NodePool(
        name=name,
        count=count,
        gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
        cpu="192",
        memory="2Ti",
        labels={"aiplane.io/pool": pool},
    )


def mi300x_fleet(inference: int, training: int = 0, h100: int = 0) -> Fleet:
    """A small fleet: MI300X inference (and training) nodes, H100 nodes, one control-plane node."""
    pools = [_mi300x_pool("mi300x", inference, "inference")]
    if training:
        pools.append(_mi300x_pool("mi300x-train", training, "training"))
    if h100:
        pools.append(
            NodePool(
                name="h100",
                count=h100,
                gpu=GpuSpec(vendor="nvidia", product="H100-SXM", count=8),
                cpu="224",
                memory="2Ti",
            )
        )
    pools.append(NodePool(name="control", count=1, controlPlane=True, cpu="16", memory="64Gi"))
    return Fleet(nodePools=pools)


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGKILL it when the harness dies (a killed soak or test
    run must not leave operators behind, retrying against a cluster that is gone). Only the prctl
    syscall runs in the child (libc was loaded before the fork): nothing that takes a lock."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Operator:
    """One ``aiplane run`` process; restarted by :class:`Operators` whenever it exits."""

    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        index: int,
        leader_elect: bool,
        liveness: tuple[float, float] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.liveness = liveness
        self.log = log
        self.index = index
        self.leader_elect = leader_elect
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "aiplane.cli",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--controllers",
            ",".join([hooks.NAME, *registry.select("all")]) if self.liveness else "all",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ]
        if self.leader_elect:
            args += [
                "--leader-elect",
                "--leader-election-namespace",
                "default",
                "--leader-election-id",
                "chaos",
            ]
            args += list(LEASE_TIMING)
        env = dict(os.environ)
        if self.liveness:
            env[registry.EXTRA_CONTROLLERS_ENV] = f"{hooks.NAME}=tests.chaos.hooks:setup_liveness"
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
            env[hooks.IDLE_ENV], env[hooks.STALE_ENV] = (str(v) for v in self.liveness)
        with self.log.open("ab") as stderr:
            self.proc = subprocess.Popen(
                args,
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (see _die_with_parent)
            )
        self.starts += 1
        self.paused = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)
            self.paused = sig == signal.SIGSTOP

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "".join(text.splitlines(keepends=True)[-lines:])


@dataclass
class Operators:
    """The operator replicas, kept running as a Deployment would (an exited one starts again)."""

    members: list[Operator]
    restart_delay: float = 0.3
    exits: Counter[int] = field(default_factory=Counter)
    #: Exits nobody asked for: not our SIGKILL, nor (leader election) the exit 1 of a lost lease.
    crashes: list[str] = field(default_factory=list)

    def start(self) -> None:
        for op in self.members:
            op.start()

    async def supervise(self) -> None:
        while True:
            for op in self.members:
                if op.proc is not None and op.proc.poll() is not None:
                    code = op.proc.returncode
                    self.exits[code] += 1
                    if code != -signal.SIGKILL and not (op.leader_elect and code == 1):
                        self.crashes.append(f"operator {op.index} exited {code}:\n{op.tail(10)}")
                    await asyncio.sleep(self.restart_delay)
                    op.start()
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        for op in self.members:
            op.kill()


@dataclass
class Figures:
    """What a chaos run measured: the soak prints these, a failing test shows them."""

    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    rollouts: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)

    def add(self, checkers: Sequence[Checker]) -> None:
        self.checks += sum(c.checks for c in checkers)
        self.violations += [v for c in checkers for v in c.violations]


@dataclass
class Monkey:
    """Injects seeded faults, one at a time, until stopped; every fault is undone before the next."""

    rng: random.Random
    cluster: EmbeddedCluster
    operators: Operators
    kinds: Sequence[str]
    figures: Figures
    gap: tuple[float, float] = (0.3, 1.5)
    pause_for: tuple[float, float] = (0.5, 3.0)
    storm_for: tuple[float, float] = (0.5, 3.0)
    network: Any = None  # tests/chaos/proxy.py's proxy, for the network kinds

    async def run(self, stop: asyncio.Event) -> None:
        while self.kinds and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.uniform(*self.gap))
            if stop.is_set():
                return
            kind = self.rng.choice(list(self.kinds))
            self.figures.faults[kind] += 1
            await self.inject(kind)

    async def inject(self, kind: str) -> None:
        faults = self.cluster.server.faults
        ops = self.operators.members
        target = ops[self.rng.randrange(len(ops))]
        if kind == "kill":
            target.kill()  # Operators.supervise starts it again
        elif kind == "pause":
            target.signal(signal.SIGSTOP)
            await asyncio.sleep(self.rng.uniform(*self.pause_for))
            target.signal(signal.SIGCONT)
        elif kind == "watch-close":
            faults.close_watches()
        elif kind.startswith(("storm-", "conflict-", "watch-410")):
            rule = self._rule(kind)
            with faults.add(**rule):
                if kind == "watch-410":
                    faults.close_watches()
                await asyncio.sleep(self.rng.uniform(*self.storm_for))
        elif self.network is not None:
            await self.network.inject(kind, self.rng)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")

    def _rule(self, kind: str) -> dict[str, Any]:
        if kind == "storm-500":
            return {"verb": "write", "error": 500}
        if kind == "storm-429":
            return {"verb": "*", "error": 429, "retry_after": 1}
        if kind == "storm-503":
            return {"verb": "*", "error": 503, "retry_after": 1}
        if kind == "conflict-409":
            return {"verb": "update|patch", "error": 409}
        return {"verb": "watch", "error": 410}


async def retrying(call: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """The test's own writes, retried through the injected storms (they are not under test)."""
    end = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except ApiError as exc:
            if exc.status not in TRANSIENT or time.monotonic() > end:
                raise
            await asyncio.sleep(0.2)


async def apply(client: InMemoryKubeClient, docs: Sequence[dict[str, Any]]) -> None:
    """Server-side apply, as ``kubectl apply --server-side --force-conflicts`` would."""
    for doc in docs:
        res = resource_for(doc["apiVersion"], doc["kind"])
        await retrying(
            lambda res=res, doc=doc: client.apply(res, doc, field_manager=FIELD_MANAGER, force=True)
        )


@dataclass
class World:
    """One chaos campaign: the cluster, the operators, the checkers and the figures."""

    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operators: Operators
    rng: random.Random
    figures: Figures
    checkers: list[Checker] = field(default_factory=list)
    network: NetworkChaos | None = None

    def watch(self, *checkers: Checker) -> None:
        for checker in checkers:
            self.checkers.append(checker)
            self.cluster.server.store.subscribe(checker)

    def monkey(self, kinds: Sequence[str], **kw: Any) -> Monkey:
        return Monkey(self.rng, self.cluster, self.operators, kinds, self.figures, network=self.network, **kw)

    async def under_chaos(
        self, monkey: Monkey, done: Callable[[], bool], timeout: float, min_faults: int = 0
    ) -> bool:
        """Faults until ``done()`` (and at least ``min_faults`` injected), then none; whether ``done``
        came within ``timeout`` seconds (the faults stop first, then it gets the rest of the time)."""
        stop = asyncio.Event()
        task = asyncio.create_task(monkey.run(stop))
        end = time.monotonic() + timeout
        base = sum(self.figures.faults.values())
        try:
            while time.monotonic() < end and not (
                done() and sum(self.figures.faults.values()) - base >= min_faults
            ):
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            await task
        while time.monotonic() < end and not done():
            await asyncio.sleep(0.1)
        return done()

    async def writes_at_rest(self, quiet: float, settle: float = 15.0) -> list[str]:
        """Once the operator has written nothing for a second (or ``settle`` passed), its writes in
        the next ``quiet`` seconds: a converged cluster must see none."""
        records = self.cluster.server.audit.records
        end = time.monotonic() + settle
        last = time.time()
        while time.monotonic() < end:
            recent = operator_writes(records, last - 1.0)
            if not recent:
                break
            await asyncio.sleep(0.2)
            last = time.time()
        since = time.time()
        await asyncio.sleep(quiet)
        return operator_writes(list(records), since)

    def report(self) -> str:
        ops = "\n".join(f"--- operator {op.index} log tail ---\n{op.tail()}" for op in self.operators.members)
        return (
            f"chaos seed {self.figures.seed} (rerun with {SEED_ENV}={self.figures.seed}); "
            f"faults {dict(self.figures.faults)}; operator exits {dict(self.operators.exits)}\n{ops}"
        )


@contextlib.asynccontextmanager
async def world(
    tmp: Path,
    seed: int,
    fleet: Fleet,
    *,
    replicas: int = 1,
    leader_elect: bool = False,
    proxied: bool = False,
) -> AsyncIterator[World]:
    """A started cluster (agents on, fast timers) with ``replicas`` operators out of process; with
    ``proxied`` they reach it through the chaos proxy (the network fault kinds)."""
    cluster = EmbeddedCluster(fleet=fleet, agents=True, ready_delay=0.05, dcm_delay=0.2)
    url = await cluster.start()
    kubeconfig = tmp / "kubeconfig"
    network = None
    liveness = None
    if proxied:
        # Dead connections noticed in seconds (tests/chaos/hooks.py).
        liveness = PROXIED_LIVENESS
        proxy = await start_proxy(url)
        network = NetworkChaos(proxy)
        config = cluster.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
        cluster.write_kubeconfig(kubeconfig, config)
    else:
        cluster.write_kubeconfig(kubeconfig)
    client = InMemoryKubeClient.for_cluster(cluster)
    operators = Operators(
        [Operator(kubeconfig, tmp / f"operator-{i}.log", i, leader_elect, liveness) for i in range(replicas)]
    )
    operators.start()
    supervisor = asyncio.create_task(operators.supervise())
    try:
        yield World(cluster, client, operators, random.Random(seed), Figures(seed), network=network)
    finally:
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervisor
        operators.stop()
        if network is not None:
            await network.proxy.stop()
        await client.close()
        await cluster.stop()


def seeds(count: int) -> list[int]:
    """``AIPLANE_CHAOS_SEED`` (one campaign, to reproduce), else ``count`` fresh seeds."""
    fixed = os.environ.get(SEED_ENV)
    if fixed:
        return [int(fixed)]
    return [random.SystemRandom().randrange(1, 2**31) for _ in range(count)]

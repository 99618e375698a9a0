"""Lease-based leader election: client-go's ``tools/leaderelection`` on a coordination.k8s.io/v1 Lease.

Several replicas of an operator run for availability, but only one may reconcile: two writers of one
status would fight. The replicas agree through one Lease object, exactly as kube-controller-manager
and every controller-runtime operator do, so ``kubectl get lease`` shows our holder the familiar way
and mixed fleets (a Go and a Python candidate) would even interoperate.

The protocol (``LeaderElector.tryAcquireOrRenew``), which this module follows step by step:

* The Lease spec is the election record: ``holderIdentity``, ``leaseDurationSeconds`` (15),
  ``acquireTime`` and ``renewTime`` (MicroTime, ``2026-01-01T00:00:00.000000Z``) and
  ``leaseTransitions`` (incremented by each new holder).
* **Expiry is judged by our own clock, never by the timestamps in the record.** A candidate notes
  *when it observed* the record change (``observedTime``); the lease has expired once
  ``observedTime + leaseDurationSeconds`` has passed on the candidate's clock without another
  change. Comparing ``renewTime`` with our wall clock would trust clocks across nodes to agree;
  this only trusts them to run at about the same rate (the Lease API documents
  ``leaseDurationSeconds`` as "measured against the time of last observed renewTime").
* **Optimistic concurrency**: the holder renews with a PUT of the Lease it last read or wrote,
  carrying that ``resourceVersion`` (the fast path). A 409 means someone else wrote: re-read
  (the slow path) and decide again. Two candidates racing for an expired lease both PUT with the
  same resourceVersion; exactly one wins.
* **Timing**: the leader retries a failed renewal every ``retry_period`` (2 s) until
  ``renew_deadline`` (10 s) after the round began, then gives up leadership; since
  ``renew_deadline < lease_duration``, it stops acting before any candidate may take over.
  Candidates poll every ``retry_period`` with client-go's jitter (1 to 2.2 times that).
* **Release on graceful stop** (client-go's ``ReleaseOnCancel``): once the caller has finished all
  work guarded by the lease, :meth:`LeaderElector.run`'s stop writes ``holderIdentity: ""`` and
  ``leaseDurationSeconds: 1``, so the next candidate takes over at its next poll rather than after
  15 s.

Deliberate differences from client-go:

* A leader that re-reads the Lease and finds *another* holder gives up at once; client-go keeps
  retrying until the renew deadline, which cannot succeed (the other holder's lease is valid for
  longer than the deadline) and only prolongs a split brain. An empty holder found by a leader
  also counts as lost: someone may have held and released it meanwhile.
* ``on_new_leader`` is not called for the empty holder of a released lease.

Losing leadership makes :meth:`LeaderElector.run` return ``False`` (and sets :attr:`lost`); the
manager turns that into a non-zero exit so Kubernetes restarts the process with clean state,
which is what controller-runtime does (``leader election lost``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.logging import get_logger
from aiplane.kube.resources import LEASES

__all__ = [
    "JITTER_FACTOR",
    "LeaderElectionConfig",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaderMetrics",
    "default_identity",
    "format_micro_time",
    "parse_micro_time",
]

#: client-go's ``JitterFactor``: candidates wait ``retry_period * (1 + random() * 1.2)`` between tries.
JITTER_FACTOR: Final = 1.2

# structlog loggers are lazy proxies: configuration made later (configure_logging) still applies.
_log = get_logger("aiplane.leaderelection")


def default_identity() -> str:
    """``hostname_uuid``, as controller-runtime builds it: unique even for two processes in one pod."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def format_micro_time(moment: datetime) -> str:
    """``metav1.MicroTime`` JSON: RFC 3339 in UTC with exactly six fractional digits."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str | None) -> datetime | None:
    """The instant a MicroTime (or Time) string names; ``None`` for missing or malformed values."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LeaderMetrics(Protocol):
    """What the elector reports (``aiplane.kube.metrics.LeaderElectionMetrics`` implements it)."""

    def standby(self, name: str) -> None: ...

    def on(self, name: str) -> None: ...

    def off(self, name: str) -> None: ...

    def slowpath_exercised(self, name: str) -> None: ...


@dataclass(frozen=True)
class LeaderElectionRecord:
    """client-go's ``LeaderElectionRecord``: the Lease spec fields the election reads and writes."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    leader_transitions: int

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaderElectionRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        """``LeaderElectionRecordToLeaseSpec``: every field written, an empty holder as ``""``."""
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease is and how the election is timed (client-go's and controller-runtime's defaults).

    ``name`` is the Lease's name (controller-runtime's ``LeaderElectionID``) and labels
    ``leader_election_master_status``. The constraints are client-go's: ``lease_duration >
    renew_deadline > JITTER_FACTOR * retry_period``, so a leader that cannot renew gives up before
    anyone may take over. ``release_on_cancel`` releases the lease on graceful stop.
    """

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.name or not self.namespace:
            raise ValueError("leader election needs a Lease name and namespace")
        if not self.identity:
            raise ValueError("leader election identity is empty")
        if self.lease_duration < 1:
            raise ValueError(
                "lease_duration must be at least 1 second (leaseDurationSeconds is whole seconds)"
            )
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renew_deadline must be greater than retry_period * 1.2")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be positive")


Callback = Callable[[], Awaitable[None] | None]
NewLeaderCallback = Callable[[str], Awaitable[None] | None]


class LeaderElector:
    """One candidate in one election. ``await run(stop)`` campaigns, leads, and reports how it ended.

    * ``on_started_leading()`` — this process acquired the lease. ``on_new_leader(identity)`` — the
      observed holder changed (including to ourselves, and the first holder seen). Both may be
      plain functions or coroutine functions; coroutines run as tasks, not awaited by the
      election loop (client-go runs them in goroutines), and are cancelled when ``run`` returns.
    * ``on_stopped_leading()`` — leadership ended, lost or released; awaited before ``run``
      returns. Not called if this process never led.
    * :attr:`elected` is set once leading; :attr:`lost` tells a loss from a graceful stop.

    ``clock`` (monotonic seconds; a :class:`aiplane.kube.ratelimit.FakeClock` is callable) measures
    expiry and deadlines; ``wall_clock`` gives the MicroTimes written into the Lease; ``sleep`` is
    how the loops wait. Tests drive :meth:`try_acquire_or_renew` directly on a fake clock.
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: NewLeaderCallback | None = None,
        metrics: LeaderMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._metrics = metrics
        self._clock = clock
        self._wall = wall_clock
        self._sleep = sleep
        self._rng = rng or random.Random()

        self._lease: dict[str, Any] | None = None  # the Lease as last read or written: our resourceVersion
        self._observed: LeaderElectionRecord | None = None
        self._observed_raw: LeaderElectionRecord | None = None  # the record as last *read*
        self._observed_time = 0.0
        self._reported_leader = ""
        self._leading = False  # we acquired and have not lost or released
        self._usurped = False  # a read showed the lease we held now names someone else
        self.lost = False
        self.elected = asyncio.Event()
        self._callback_tasks: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------------------------------------
    # Introspection

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def leader(self) -> str:
        """The holder this candidate last observed (``""`` if none yet or released)."""
        return self._observed.holder_identity if self._observed else ""

    def is_leader(self) -> bool:
        """client-go's ``IsLeader``: the last observed record names us."""
        return self._observed is not None and self._observed.holder_identity == self.config.identity

    @property
    def leading(self) -> bool:
        """Whether this process currently acts as the leader (acquired, not lost, not released)."""
        return self._leading

    def _lease_valid(self, now: float) -> bool:
        duration = self._observed.lease_duration_seconds if self._observed else 0
        return self._observed_time + duration > now

    def check(self, max_tolerable_expired: float = 20.0) -> None:
        """client-go's ``HealthzAdaptor``: raise if we lead but have not renewed for far too long.

        The renew loop should have given up long before; if it has not (a wedged event loop, a
        deadlock), failing liveness gets the process restarted.
        """
        if not self._leading:
            return
        if self._clock() - self._observed_time > self.config.lease_duration + max_tolerable_expired:
            raise RuntimeError(f"failed election to renew leadership on lease {self.config.name}")

    # ---------------------------------------------------------------------------------------------
    # One step of the state machine

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock()

    def _new_record(self) -> LeaderElectionRecord:
        now = format_micro_time(self._wall())
        return LeaderElectionRecord(
            holder_identity=self.config.identity,
            lease_duration_seconds=int(self.config.lease_duration),
            acquire_time=now,
            renew_time=now,
            leader_transitions=0,
        )

    def _lease_object(self, record: LeaderElectionRecord) -> dict[str, Any]:
        if self._lease is None:
            return {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": record.to_spec(),
            }
        return {**self._lease, "spec": {**(self._lease.get("spec") or {}), **record.to_spec()}}

    async def _update(self, record: LeaderElectionRecord) -> None:
        """PUT the record onto the Lease we last saw (its resourceVersion is the precondition)."""
        updated = await self.client.replace(LEASES, self._lease_object(record))
        self._lease = updated
        self._set_observed(record)

    async def try_acquire_or_renew(self) -> bool:
        """client-go's ``tryAcquireOrRenew``: one attempt; ``True`` if we hold the lease afterwards.

        API errors are answers here, not exceptions: any failure returns ``False`` and the caller
        retries on its schedule.
        """
        now = self._clock()
        record = self._new_record()

        # 1. Fast path: the leader updates optimistically, assuming its last view is current.
        if self.is_leader() and self._lease_valid(now) and self._lease is not None:
            assert self._observed is not None
            fast = LeaderElectionRecord(
                holder_identity=record.holder_identity,
                lease_duration_seconds=record.lease_duration_seconds,
                acquire_time=self._observed.acquire_time,
                renew_time=record.renew_time,
                leader_transitions=self._observed.leader_transitions,
            )
            try:
                await self._update(fast)
                return True
            except ApiError as exc:
                _log.info(
                    "lease renewal failed, falling back to a re-read", lease=self._describe(), error=str(exc)
                )
                if self._metrics is not None:
                    self._metrics.slowpath_exercised(self.config.name)

        # 2. Read (or create) the Lease.
        try:
            lease = await self.client.get(LEASES, self.config.name, self.config.namespace)
        except ApiError as exc:
            if not exc.not_found:
                _log.warning("error retrieving the lease", lease=self._describe(), error=str(exc))
                return False
            self._lease = None
            try:
                self._lease = await self.client.create(LEASES, self._lease_object(record))
            except ApiError as create_exc:
                _log.warning("error creating the lease", lease=self._describe(), error=str(create_exc))
                return False
            self._set_observed(record)
            return True

        self._lease = lease
        current = LeaderElectionRecord.from_lease(lease)
        was_leader = self.is_leader()
        # 3. Note when the record last changed: that, not renewTime, starts the expiry countdown.
        if current != self._observed_raw:
            self._observed_raw = current
            self._set_observed(current)
        if was_leader and current.holder_identity != self.config.identity:
            # Someone else wrote the lease while we thought we held it: it is not ours any more.
            self._usurped = True
            return False
        if current.holder_identity and self._lease_valid(self._clock()) and not self.is_leader():
            return False

        # 4. Acquire (a new holder increments the transitions) or renew (keep acquireTime).
        if self.is_leader():
            record = LeaderElectionRecord(
                holder_identity=record.holder_identity,
                lease_duration_seconds=record.lease_duration_seconds,
                acquire_time=current.acquire_time,
                renew_time=record.renew_time,
                leader_transitions=current.leader_transitions,
            )
        else:
            record = LeaderElectionRecord(
                holder_identity=record.holder_identity,
                lease_duration_seconds=record.lease_duration_seconds,
                acquire_time=record.acquire_time,
                renew_time=record.renew_time,
                leader_transitions=current.leader_transitions + 1,
            )
        try:
            await self._update(record)
        except ApiError as exc:
            # 409: another candidate (or the holder) wrote first; the next attempt re-reads.
            _log.info("failed to update the lease", lease=self._describe(), error=str(exc))
            return False
        return True

    async def release(self) -> bool:
        """Give the lease up (client-go's ``release``): empty holder, 1-second duration.

        Re-reads first so the write carries the current resourceVersion, and writes only if the
        Lease still names us; ``True`` if we no longer hold it either way.
        """
        try:
            lease = await self.client.get(LEASES, self.config.name, self.config.namespace)
        except ApiError as exc:
            if exc.not_found:
                return True
            _log.warning("failed to read the lease for release", lease=self._describe(), error=str(exc))
            return False
        self._lease = lease
        current = LeaderElectionRecord.from_lease(lease)
        if current.holder_identity != self.config.identity:
            return True
        now = format_micro_time(self._wall())
        released = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            leader_transitions=current.leader_transitions,
        )
        try:
            await self._update(released)
        except ApiError as exc:
            _log.warning("failed to release the lease", lease=self._describe(), error=str(exc))
            return False
        self._observed_raw = released
        _log.info("released the lease", lease=self._describe())
        return True

    def _describe(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    # ---------------------------------------------------------------------------------------------
    # The loops

    def _spawn(self, result: Awaitable[None] | None) -> None:
        if result is None or not inspect.isawaitable(result):
            return
        awaitable: Awaitable[None] = result

        async def _run() -> None:
            try:
                await awaitable
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("leader election callback failed", lease=self._describe())

        task = asyncio.ensure_future(_run())
        self._callback_tasks.add(task)
        task.add_done_callback(self._callback_tasks.discard)

    def _maybe_report_transition(self) -> None:
        holder = self.leader
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder and self._on_new_leader is not None:
            self._spawn(self._on_new_leader(holder))

    async def _wait(self, stop: asyncio.Event, seconds: float) -> bool:
        """Sleep ``seconds`` unless ``stop`` is set first; whether ``stop`` is set."""
        if stop.is_set():
            return True
        sleeper = asyncio.ensure_future(self._sleep(max(0.0, seconds)))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((sleeper, stopper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(sleeper, stopper, return_exceptions=True)
        return stop.is_set()

    async def _attempt(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            _log.warning("lease request timed out", lease=self._describe())
            return False

    async def _acquire(self, stop: asyncio.Event) -> bool:
        _log.info("attempting to acquire leader lease", lease=self._describe(), identity=self.identity)
        while not stop.is_set():
            ok = await self._attempt(self.config.renew_deadline)
            self._maybe_report_transition()
            if ok:
                _log.info("successfully acquired lease", lease=self._describe(), identity=self.identity)
                return True
            jittered = self.config.retry_period * (1.0 + self._rng.random() * JITTER_FACTOR)
            if await self._wait(stop, jittered):
                break
        return False

    async def _renew_round(self, stop: asyncio.Event) -> bool:
        """Renew within ``renew_deadline``, retrying every ``retry_period``; whether it worked (or we are stopping)."""
        deadline = self._clock() + self.config.renew_deadline
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            if await self._attempt(remaining):
                return True
            if self._usurped:
                return False
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            if await self._wait(stop, min(self.config.retry_period, remaining)):
                return True

    async def run(self, stop: asyncio.Event) -> bool:
        """Campaign until elected, then renew until ``stop`` is set or leadership is lost.

        Returns ``True`` when it ended because ``stop`` was set (having released the lease if
        ``release_on_cancel`` and if we held it), ``False`` when leadership was lost. Set ``stop``
        only after everything guarded by the lease has finished: releasing lets another process
        lead at once.
        """
        if self._metrics is not None:
            self._metrics.standby(self.config.name)
        try:
            if not await self._acquire(stop):
                return True
            self._leading = True
            self.elected.set()
            if self._metrics is not None:
                self._metrics.on(self.config.name)
            if self._on_started is not None:
                self._spawn(self._on_started())
            while True:
                if await self._wait(stop, self.config.retry_period):
                    break
                renewed = await self._renew_round(stop)
                self._maybe_report_transition()
                if not renewed:
                    self.lost = True
                    _log.error(
                        "leader election lost",
                        lease=self._describe(),
                        identity=self.identity,
                        holder=self.leader,
                    )
                    return False
            if self.config.release_on_cancel:
                await self._release_within_deadline()
            return True
        finally:
            was_leading = self._leading
            self._leading = False
            if self._metrics is not None:
                self._metrics.off(self.config.name)
            for task in list(self._callback_tasks):
                task.cancel()
            if was_leading and self._on_stopped is not None:
                result = self._on_stopped()
                if result is not None and inspect.isawaitable(result):
                    await result

    async def _release_within_deadline(self) -> None:
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self.release()
        except TimeoutError:
            _log.warning("releasing the lease timed out", lease=self._describe())

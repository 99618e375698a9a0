"""Controllers: level-triggered ``reconcile(request)`` over a work queue fed by shared informers.

A controller names its primary kind (``for_``), the kinds it creates (``owns``: an event on a child
enqueues its controlling owner) and any other kinds whose changes matter (``watches`` with a map
function, e.g. a Node change to the plans selecting it). Events only ever enqueue keys; the reconcile
function reads current state from the caches, so a burst of events for one object costs one reconcile,
and an object is never reconciled concurrently with itself (the work queue guarantees it).

Failures never stop a controller: an exception requeues the key with per-item exponential backoff
(5 ms → 1000 s, combined with a 10 qps/100 burst bucket, client-go's default; a controller whose
pending work holds nodes out of service caps it lower with ``max_backoff``, so that work resumes within
seconds of an API outage ending rather than up to the outage's length later) and is logged with the
key; a ``Result(requeue_after=…)`` schedules the next look without counting as a failure. These kinds
of failure are told apart, as controller-runtime does:

* an **expected race** — an API conflict or AlreadyExists (409) or a NotFound after a delete
  (:func:`expected_race`) — is retried with the same backoff but logged at debug level only: the next
  reconcile reads fresher state;
* a :class:`TerminalError` is logged once at error level and *not* retried (the object must change,
  or something it depends on, before another attempt can succeed; that change enqueues it again);
* a **forbidden** request (403: the operator's role lacks a permission) is retried with the same
  capped backoff (a restored role is picked up without a restart), but reported as what it is: the
  missing verb, group, resource and namespace, at error level once per interval per object and
  permission, and as a Warning Event ``Forbidden`` on the object being reconciled (``kube/forbidden.py``);
  on a kind we serve, also as the condition ``PermissionDenied`` (True, reason ``Forbidden``) on that
  object's status, which the next successful reconcile removes (an object that never lacked a permission
  is never written for it). Where the status write is refused too, the Event and the log are all there is.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from aiplane.apimachinery.meta import controller_of
from aiplane.kube.client import ApiError
from aiplane.kube.events import WARNING, EventRecorder
from aiplane.kube.forbidden import (
    PermissionConditions,
    ReportLimiter,
    forbidden_message,
    missing_permission,
)
from aiplane.kube.informer import Informer, InformerFactory
from aiplane.kube.logging import reconcile_context
from aiplane.kube.ratelimit import MaxOfRateLimiter, default_controller_rate_limiter
from aiplane.kube.resources import Resource
from aiplane.kube.workqueue import NoopMetricsProvider, WorkQueue, WorkQueueMetricsProvider

log = structlog.get_logger("aiplane.controller")

Obj = dict[str, Any]


_MODIFIED = "the object has been modified"


def field_manager_for(name: str) -> str:
    """The field manager of every write of the controller ``name`` (its own and the runtime's for it,
    such as the PermissionDenied condition), so that an object's managedFields name one writer."""
    return f"aiplane-{name}"


def event_source_for(name: str) -> str:
    """The Event source (``reportingController``/``source.component``) of the controller ``name``: its
    own Events and the runtime's (``Forbidden``) come from one source."""
    return f"{name}-controller"


def expected_race(exc: ApiError) -> bool:
    """Whether ``exc`` is the routine outcome of acting on a cache a step behind the server.

    A conflict (409: a stale resourceVersion, "the object has been modified"), an AlreadyExists (a
    create the cache did not show yet) or a NotFound (a delete it did not show yet) is settled by the
    next reconcile reading fresher state, so it is requeued quietly: an operator that logs errors when
    nothing is wrong trains people to ignore its errors. A create refused because its namespace is
    being deleted (a 403 from admission, not RBAC) is the same: the namespace's deletion settles it.
    """
    return exc.status in (404, 409) or _MODIFIED in exc.message or exc.namespace_terminating


@dataclass(frozen=True, order=True)
class Request:
    """What to reconcile: a namespace (``None`` for cluster-scoped kinds) and a name."""

    namespace: str | None
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def for_object(cls, obj: Obj) -> Request:
        meta = obj["metadata"]
        return cls(meta.get("namespace") or None, meta["name"])

    def __str__(self) -> str:
        return self.key


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix: logged once, never requeued."""


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for next: nothing, a look after ``requeue_after`` seconds, or a retry."""

    requeue_after: float | None = None
    requeue: bool = False


Reconciler = Callable[[Request], Awaitable["Result | None"]]
MapFunc = Callable[[Obj], Iterable[Request]]


class Predicate(Protocol):
    """Filters update events (creates and deletes always pass, as they change what exists)."""

    def __call__(self, old: Obj, new: Obj) -> bool: ...


def generation_changed(old: Obj, new: Obj) -> bool:
    """Spec changes only: status writes (ours included) do not bump generation."""
    return bool(old["metadata"].get("generation") != new["metadata"].get("generation"))


def labels_changed(old: Obj, new: Obj) -> bool:
    return bool(old["metadata"].get("labels") != new["metadata"].get("labels"))


class ReconcileObserver(Protocol):
    """Metrics a controller reports (implemented by ``aiplane.kube.metrics.ControllerMetrics``)."""

    def reconcile_started(self, controller: str) -> None: ...

    def reconcile_finished(self, controller: str, result: str, seconds: float) -> None: ...

    def set_max_concurrent(self, controller: str, n: int) -> None: ...


@dataclass
class _Source:
    resource: Resource
    map_fn: MapFunc
    predicates: tuple[Predicate, ...] = ()
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None


def _own_request(primary: Resource) -> MapFunc:
    def to_owner(obj: Obj) -> Iterable[Request]:
        owner = controller_of(obj)
        if owner is None or owner.get("kind") != primary.kind:
            return ()
        if (
            owner.get("apiVersion", "").split("/")[0]
            != (primary.group or owner.get("apiVersion", "")).split("/")[0]
        ):
            return ()
        namespace = obj["metadata"].get("namespace") if primary.namespaced else None
        return (Request(namespace or None, owner["name"]),)

    return to_owner


def _self_request(obj: Obj) -> Iterable[Request]:
    return (Request.for_object(obj),)


@dataclass
class ControllerBuilder:
    """``Controller.build(name).for_(…).owns(…).watches(…).workers(n).reconcile(fn)``."""

    name: str
    _primary: Resource | None = None
    _sources: list[_Source] = field(default_factory=list)
    _workers: int = 1
    _fixed_workers: str | None = None
    _max_backoff: float | None = None

    def for_(
        self,
        resource: Resource,
        *,
        predicates: Iterable[Predicate] = (),
        namespace: str | None = None,
        label_selector: str | None = None,
        map_fn: MapFunc | None = None,
    ) -> ControllerBuilder:
        """The primary kind. ``map_fn`` maps its events to requests when the controller reconciles
        something coarser than one object (every AIMNamespaceConfig of a namespace reconciles that
        namespace); by default an event enqueues the object's own key."""
        self._primary = resource
        source = _Source(resource, map_fn or _self_request, tuple(predicates), namespace, label_selector)
        self._sources.insert(0, source)
        return self

    def owns(self, resource: Resource, *, predicates: Iterable[Predicate] = ()) -> ControllerBuilder:
        if self._primary is None:
            raise ValueError("call for_() before owns(): owned objects map to the primary kind")
        self._sources.append(_Source(resource, _own_request(self._primary), tuple(predicates)))
        return self

    def watches(
        self,
        resource: Resource,
        map_fn: MapFunc,
        *,
        predicates: Iterable[Predicate] = (),
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ControllerBuilder:
        self._sources.append(
            _Source(
                resource,
                map_fn,
                tuple(predicates),
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        )
        return self

    def workers(self, n: int, *, fixed: str | None = None) -> ControllerBuilder:
        """This controller's default number of workers: ``--max-concurrent-reconciles`` overrides it
        for every controller, unless ``fixed`` gives the reason it must not (then the flag is logged
        as not applied, never silently ignored)."""
        if n < 1:
            raise ValueError("a controller needs at least one worker")
        self._workers = n
        self._fixed_workers = fixed
        return self

    def max_backoff(self, seconds: float) -> ControllerBuilder:
        """Cap the per-item retry backoff at ``seconds`` (default 1000 s, client-go's)."""
        if seconds <= 0:
            raise ValueError("max_backoff must be positive")
        self._max_backoff = seconds
        return self

    def reconcile(self, fn: Reconciler) -> Controller:
        if self._primary is None:
            raise ValueError(f"controller {self.name}: for_() names no primary kind")
        controller = Controller(
            self.name, fn, list(self._sources), self._workers, max_backoff=self._max_backoff
        )
        controller.fixed_workers = self._fixed_workers
        return controller


class Controller:
    """A running controller: informer handlers enqueue requests, N workers reconcile them."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        sources: list[_Source],
        workers: int = 1,
        *,
        max_backoff: float | None = None,
    ) -> None:
        self.name = name
        #: The per-item backoff cap (``None``: client-go's 1000 s).
        self.max_backoff = max_backoff
        self.reconciler = reconciler
        self.sources = sources
        self.max_concurrent = workers
        #: Why ``max_concurrent`` must not be changed by ``--max-concurrent-reconciles`` (None: it may).
        self.fixed_workers: str | None = None
        self.observer: ReconcileObserver | None = None
        self.queue_metrics: WorkQueueMetricsProvider = NoopMetricsProvider()
        self.queue: WorkQueue[Request] = WorkQueue(name, rate_limiter=self._rate_limiter())
        self._informers: list[Informer] = []
        self._log = log.bind(controller=name)
        #: Where a forbidden reconcile's Warning Event goes (set by the manager; None: no Event).
        self.recorder: EventRecorder | None = None
        self.forbidden_reports = ReportLimiter()
        #: Sets/clears ``PermissionDenied`` on the primary object (set by the manager for kinds we serve).
        self.permission_conditions: PermissionConditions | None = None

    def _rate_limiter(self) -> MaxOfRateLimiter[Hashable]:
        if self.max_backoff is None:
            return default_controller_rate_limiter()
        return default_controller_rate_limiter(max_delay=self.max_backoff)

    @staticmethod
    def build(name: str) -> ControllerBuilder:
        return ControllerBuilder(name)

    @property
    def primary(self) -> Resource | None:
        """The kind this controller reconciles (``for_``), once built."""
        return self.sources[0].resource if self.sources else None

    def _primary_object(self, request: Request) -> Obj | None:
        return self._informers[0].get_by(request.namespace, request.name) if self._informers else None

    async def _forbidden(self, request: Request, exc: ApiError, bound: Any) -> None:
        """Name the missing permission once per interval (the retries keep their capped backoff), and
        show it on the object as a condition (written only when it is not shown already)."""
        missing = missing_permission(exc)
        if missing is None:
            return
        primary = self._primary_object(request)
        written = "none"
        if self.permission_conditions is not None and primary is not None:
            written = await self.permission_conditions.set(primary, missing)
        if not self.forbidden_reports.allow((request.key, missing)):
            bound.debug("reconcile forbidden again", error=exc.message, condition=written)
            return
        bound.error(
            "reconcile forbidden: the operator's role lacks a permission",
            missing=str(missing),
            rule=missing.rule(),
            user=missing.user,
            retries=self.queue.num_requeues(request),
            condition=written,
        )
        if self.recorder is not None and primary is not None:
            self.recorder.emit(primary, WARNING, "Forbidden", forbidden_message(missing))

    async def _permitted(self, request: Request) -> None:
        """After a successful reconcile: take a ``PermissionDenied`` condition off (no write when absent)."""
        primary = self._primary_object(request)
        if self.permission_conditions is not None and primary is not None:
            await self.permission_conditions.clear(primary)

    # --- wiring -----------------------------------------------------------------------------------

    def bind(
        self,
        informers: InformerFactory,
        *,
        observer: ReconcileObserver | None = None,
        queue_metrics: WorkQueueMetricsProvider | None = None,
    ) -> Controller:
        """Attach to a shared ``InformerFactory``: one handler per source, enqueueing requests."""
        if queue_metrics is not None:
            self.queue_metrics = queue_metrics
            self.queue = WorkQueue(self.name, rate_limiter=self._rate_limiter(), metrics=queue_metrics)
        self.observer = observer
        for source in self.sources:
            informer = informers.informer(
                source.resource,
                namespace=source.namespace,
                label_selector=source.label_selector,
                field_selector=source.field_selector,
            )
            self._informers.append(informer)
            informer.add_handler(*self._handlers(source))
        return self

    def _handlers(
        self, source: _Source
    ) -> tuple[Callable[[Obj], None], Callable[[Obj, Obj], None], Callable[[Obj], None]]:
        def enqueue(obj: Obj) -> None:
            for request in source.map_fn(obj):
                self.queue.add(request)

        def on_update(old: Obj, new: Obj) -> None:
            if source.predicates and not any(p(old, new) for p in source.predicates):
                return
            enqueue(new)
            if source.map_fn is not _self_request:
                enqueue(old)  # a child that changed owner, a node that stopped matching: both sides

        return enqueue, on_update, enqueue

    def enqueue(self, request: Request, after: float | None = None) -> None:
        if after:
            self.queue.add_after(request, after)
        else:
            self.queue.add(request)

    def set_max_concurrent(self, n: int | None) -> None:
        """Apply ``--max-concurrent-reconciles`` (``None``: keep this controller's default)."""
        if n is None or n == self.max_concurrent:
            return
        if self.fixed_workers is not None:
            self._log.info(
                "--max-concurrent-reconciles not applied", workers=self.max_concurrent, why=self.fixed_workers
            )
            return
        if n < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.max_concurrent = n

    @property
    def bound(self) -> bool:
        return bool(self._informers)

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers)

    def has_synced(self) -> bool:
        return all(inf.has_synced for inf in self._informers)

    # --- running ----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, *, drain_timeout: float = 30.0) -> None:
        """Reconcile until ``stop`` is set, then finish in-flight work within ``drain_timeout``."""
        # Normally synced already (the manager waits for every cache); not when a cache the role does
        # not allow was left behind (Manager._only_forbidden_unsynced): wait for it, or for the stop.
        if not await _synced_or_stopped(self._informers, stop):
            return
        if self.observer is not None:
            self.observer.set_max_concurrent(self.name, self.max_concurrent)
        workers = [
            asyncio.create_task(self._worker(i), name=f"{self.name}-worker-{i}")
            for i in range(self.max_concurrent)
        ]
        self._log.info("controller started", workers=self.max_concurrent)
        try:
            await stop.wait()
        finally:
            drained = await self.queue.shutdown_with_drain(timeout=drain_timeout)
            if not drained:
                self._log.warning("in-flight reconciles did not finish in time", timeout=drain_timeout)
            for task in workers:
                if not task.done():
                    task.cancel()
            for task in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._log.info("controller stopped")

    async def _worker(self, index: int) -> None:
        while True:
            request = await self.queue.get()
            if request is None:
                return
            try:
                await self.process(request)
            finally:
                self.queue.done(request)

    async def process(self, request: Request) -> str:
        """One reconcile of ``request`` with its bookkeeping; returns the result label for metrics."""
        with reconcile_context(controller=self.name, key=request.key) as reconcile_id:

            def bound() -> Any:  # built only for a line to log: most reconciles log none
                return self._log.bind(key=request.key, reconcile_id=reconcile_id)

            if self.observer is not None:
                self.observer.reconcile_started(self.name)
            started = time.perf_counter()
            label = "success"
            try:
                result = await self.reconciler(request) or Result()
                await self._permitted(request)
            except asyncio.CancelledError:
                raise
            except TerminalError as exc:
                label = "error"
                self.queue.forget(request)
                bound().error("reconcile failed; not retried until the object changes", error=str(exc))
            except ApiError as exc:
                label = "error"
                self.queue.add_rate_limited(request)
                if expected_race(exc):
                    label = "requeue"
                    bound().debug("requeue after a race", reason=exc.reason, message=exc.message)
                elif exc.status == 403:
                    await self._forbidden(request, exc, bound())
                else:
                    bound().error(
                        "reconcile failed",
                        error=f"{type(exc).__name__}: {exc}",
                        retries=self.queue.num_requeues(request),
                    )
            except Exception as exc:
                label = "error"
                self.queue.add_rate_limited(request)
                bound().error(
                    "reconcile failed",
                    error=f"{type(exc).__name__}: {exc}",
                    retries=self.queue.num_requeues(request),
                    exc_info=True,
                )
            else:
                if result.requeue_after:
                    label = "requeue_after"
                    self.queue.forget(request)
                    self.queue.add_after(request, result.requeue_after)
                elif result.requeue:
                    label = "requeue"
                    self.queue.add_rate_limited(request)
                else:
                    self.queue.forget(request)
            finally:
                if self.observer is not None:
                    self.observer.reconcile_finished(self.name, label, time.perf_counter() - started)
            return label


async def _synced_or_stopped(informers: list[Informer], stop: asyncio.Event) -> bool:
    """Wait until every informer synced (``True``) or ``stop`` is set (``False``)."""
    if all(i.has_synced for i in informers):
        return True
    synced = asyncio.ensure_future(asyncio.gather(*(i.wait_synced() for i in informers)))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((synced, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        synced.cancel()
        stopped.cancel()
    return all(i.has_synced for i in informers)

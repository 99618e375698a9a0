"""The manager: one process's informers, controllers, leader election, probes and metrics.

controller-runtime's ``manager.Manager`` for asyncio. An operator binary builds a :class:`Manager`,
lets each controller's setup function register with it, and awaits :meth:`Manager.run`, whose
return value is the process exit code. The order of events is controller-runtime's, for the same
reasons:

1. **Probes and metrics first** (``/healthz``, ``/readyz``, ``/metrics``): liveness must answer while
   caches fill, or a slow first list gets the pod killed in a loop.
2. **Informers, then wait for their caches.** A controller that reconciled from a half-filled
   cache would "fix" objects it merely had not seen yet. ``/readyz`` turns 200 once synced, and
   fails again while an informer is stale (heard nothing from the API server for ``stale_after``
   seconds: a dead watch connection, an unreachable server); ``/readyz/informers`` names it. It
   also fails while the operator's role refuses an informer's list or watch (403): ``/readyz/forbidden``
   names the informer, the permission and the rule; only the controllers needing it wait (see
   :meth:`Manager._only_forbidden_unsynced`), and the process keeps running, not a crash loop.
3. **Runnables that need no leadership** (:meth:`Manager.add_runnable`): per-node agents and the
   like, which every replica runs.
4. **Leader election** (optional). Standbys keep their informers warm and stay ready, but run no
   controllers, so a takeover costs one Lease expiry, not a cold start.
5. **Controllers** (:meth:`Manager.add_controller`), only while leading.

Shutdown, on SIGTERM/SIGINT (or :meth:`Manager.stop`): stop taking work, let in-flight reconciles
finish within ``shutdown_timeout`` while *still renewing the lease* (a drain longer than the lease
must not let a second leader in), then stop informers, release the lease, stop the HTTP servers,
return :data:`EXIT_OK`. A second signal exits at once with status 1, as controller-runtime's signal
handler does.

Exit codes (:meth:`Manager.run`'s return value):

* :data:`EXIT_OK` (0): stopped on request after a clean drain.
* :data:`EXIT_FAILURE` (1): leadership lost (returned *at once*: no drain, since another process may
  already be acting, and the lease is not ours to release); a controller or runnable failed; the
  drain did not finish within ``shutdown_timeout``; the caches did not sync within
  ``cache_sync_timeout``; a probe or metrics address could not be bound. Kubernetes restarts the
  container, which is the clean way back from all of these.

What is run is anything with a ``name`` and ``async run(stop: asyncio.Event) -> None`` that returns
once ``stop`` is set and its in-flight work is done (:class:`Runnable`);
``aiplane.kube.controller.Controller`` is one.

Bind addresses follow controller-runtime's flags: ``":8080"`` (all interfaces), ``"127.0.0.1:0"``
(loopback, a free port), ``"[::1]:9090"``; ``"0"`` or ``""`` disable the server. The bound ports are
:attr:`Manager.metrics_port` and :attr:`Manager.health_port` once :attr:`Manager.serving` is set. If
both addresses name the same fixed port, one server answers all three paths (two ``:0`` addresses
get a free port each).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from aiohttp import web

from aiplane.kube.client import KubeClient
from aiplane.kube.clock import Clock, SystemClock
from aiplane.kube.controller import Controller, event_source_for, field_manager_for
from aiplane.kube.events import EventRecorder
from aiplane.kube.forbidden import PermissionConditions, accepts_permission_condition
from aiplane.kube.informer import (
    DEFAULT_STALE_AFTER,
    DEFAULT_WATCH_IDLE_TIMEOUT,
    Backoff,
    Informer,
    InformerFactory,
)
from aiplane.kube.leaderelection import LeaderElectionConfig, LeaderElector
from aiplane.kube.logging import get_logger
from aiplane.kube.metrics import Metrics
from aiplane.kube.metrics_auth import MetricsAuth

_OptionsT = TypeVar("_OptionsT")


__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "ControllerOptions",
    "HealthCheck",
    "Manager",
    "Runnable",
    "parse_bind_address",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1

#: How long cleanup after a lost lease or a forced stop may take before ``run`` returns anyway.
_ABANDON_TIMEOUT: Final = 2.0

_log = get_logger("aiplane.manager")


class Runnable(Protocol):
    """Something the manager runs: returns from ``run`` once ``stop`` is set and its work is done."""

    @property
    def name(self) -> str: ...

    async def run(self, stop: asyncio.Event) -> None: ...


#: A named health or readiness check: raise (any exception) to fail; may be a coroutine function.
HealthCheck = Callable[[], Awaitable[None] | None]


@dataclass(frozen=True)
class ControllerOptions:
    """Defaults for every controller of this manager (controller-runtime's ``config.Controller``).

    ``max_concurrent_reconciles`` (``--max-concurrent-reconciles``) overrides each controller's own
    default number of workers when set; ``None`` keeps the defaults each controller documents.
    Options that belong to one group of controllers (timeouts, a ConfigMap to read) are not here:
    their package owns a frozen dataclass, and the composition layer hands an instance to
    :meth:`Manager.set_options`.
    """

    max_concurrent_reconciles: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent_reconciles is not None and self.max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")


def parse_bind_address(address: str) -> tuple[str | None, int] | None:
    """``host:port`` as Go's ``net.Listen`` takes it; ``None`` when the server is disabled.

    ``":8080"`` gives host ``None`` (every interface), ``"[::1]:0"`` host ``"::1"``; ``"0"`` and ``""``
    disable, as controller-runtime's ``--metrics-bind-address=0`` does.
    """
    text = address.strip()
    if text in ("", "0"):
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"invalid bind address {address!r}: expected HOST:PORT, :PORT or 0")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"invalid bind address {address!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"invalid bind address {address!r}: port out of range")
    return (host or None), port


def _listen(host: str | None, port: int) -> socket.socket:
    """A listening socket; every interface (dual-stack where possible) when ``host`` is ``None``."""
    if host is None:
        if socket.has_dualstack_ipv6():
            try:
                return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
            except OSError:
                pass
        return socket.create_server(("0.0.0.0", port))
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family = infos[0][0] if infos else socket.AF_INET
    return socket.create_server((host, port), family=family)


def _informer_label(informer: Informer) -> str:
    """An informer's name with its selectors: two informers of one kind stay apart."""
    selectors = ",".join(s for s in (informer.label_selector, informer.field_selector) if s)
    return f"{informer.name}{{{selectors}}}" if selectors else informer.name


async def _run_check(check: HealthCheck) -> None:
    result = check()
    if result is not None and inspect.isawaitable(result):
        await result


@dataclass
class _Task:
    name: str
    runnable: Runnable
    task: asyncio.Task[None]
    controller: bool


class Manager:
    """Runs informers, runnables and (while leading) controllers; see the module docstring.

    ``client`` is shared by everything the manager runs. ``leader_election`` enables Lease-based
    election (``None``: every replica leads, fine for one replica or for tests). ``metrics`` is
    created when not given; hand ``metrics.rest_client.observe`` to the ``HttpKubeClient`` to get
    ``rest_client_requests_total``. ``handle_signals`` installs the SIGTERM/SIGINT handlers while
    :meth:`run` runs (embedders and tests that call :meth:`stop` themselves can turn it off).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        leader_election: LeaderElectionConfig | None = None,
        metrics_bind_address: str = "0",
        health_probe_bind_address: str = "0",
        shutdown_timeout: float = 30.0,
        cache_sync_timeout: float = 120.0,
        metrics: Metrics | None = None,
        controller_options: ControllerOptions | None = None,
        handle_signals: bool = True,
        clock: Clock | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
        watch_idle_timeout: float = DEFAULT_WATCH_IDLE_TIMEOUT,
        informer_backoff: Callable[[], Backoff] | None = None,
        metrics_auth: MetricsAuth | None = None,
    ) -> None:
        self.client = client
        #: The informers' liveness bounds (``aiplane.kube.informer``; tests make them small).
        self.stale_after = stale_after
        self.watch_idle_timeout = watch_idle_timeout
        #: Reviews who reads /metrics (``--metrics-secure``); ``None``: anyone who reaches the port.
        self.metrics_auth = metrics_auth
        self._informer_backoff = informer_backoff
        self.leader_election = leader_election
        self.metrics = metrics if metrics is not None else Metrics()
        self.controller_options = controller_options or ControllerOptions()
        #: The clock every controller of this manager reads (a ``FakeClock`` in tests).
        self.clock: Clock = clock or SystemClock()
        self._options: dict[type, object] = {}
        self._recorders: dict[str, EventRecorder] = {}
        self.shutdown_timeout = shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.handle_signals = handle_signals
        self._metrics_bind = parse_bind_address(metrics_bind_address)
        self._health_bind = parse_bind_address(health_probe_bind_address)

        self._informers: InformerFactory | None = None
        self._controllers: list[Runnable] = []
        self._runnables: list[Runnable] = []
        self._healthz_checks: dict[str, HealthCheck] = {"ping": lambda: None}
        self._readyz_checks: dict[str, HealthCheck] = {
            "informers": self._check_synced,
            "forbidden": self._check_forbidden,
        }
        self._runners: list[web.AppRunner] = []
        self._stop = asyncio.Event()
        self._signals = 0
        self._started = False

        #: The elector, once :meth:`run` started leader election.
        self.elector: LeaderElector | None = None
        #: Bound ports, set before :attr:`serving` is (``None`` when that server is disabled).
        self.metrics_port: int | None = None
        self.health_port: int | None = None
        #: The HTTP servers are listening.
        self.serving = asyncio.Event()
        #: Every informer registered before :meth:`run` has synced (``/readyz`` is 200 from then on).
        self.cache_synced = asyncio.Event()
        #: This process leads (set at once without leader election): controllers are running.
        self.elected = asyncio.Event()

    # ---------------------------------------------------------------------------------------------
    # Registration

    @property
    def informers(self) -> InformerFactory:
        """The shared ``InformerFactory``: one informer per (resource, namespace, selectors).

        Informers created through it before :meth:`run` are started by the manager and synced
        before any controller runs.
        """
        if self._informers is None:
            # Pages of 100, not client-go's 500: a page is decoded whole, managedFields and all, before
            # the cache strips it, and the informers list together at start-up; at 1,000 nodes the
            # pages of 500 were the operator's peak memory (the Node list peaked at 45 MB
            # to hold 10 MB; 16 MB with pages of 100), for a few more LIST requests at start.
            factory = self._informers = InformerFactory(
                self.client,
                watch_idle_timeout=self.watch_idle_timeout,
                stale_after=self.stale_after,
                backoff=self._informer_backoff,
                page_size=100,
            )
            self.metrics.informers.attach(
                lambda: [
                    (_informer_label(i), i.silence(), i.stale, i.forbidden is not None)
                    for i in factory.informers
                ]
            )
        return self._informers

    def set_options(self, options: object) -> None:
        """Hand a controller package its options (one instance per options type)."""
        self._check_not_started()
        self._options[type(options)] = options

    def options(self, kind: type[_OptionsT]) -> _OptionsT:
        """The options of type ``kind`` given to :meth:`set_options`, or ``kind()``'s defaults."""
        found = self._options.get(kind)
        return found if isinstance(found, kind) else kind()

    def recorder(self, name: str) -> EventRecorder:
        """The one Event recorder of the controller ``name`` (its Events and the runtime's for it come
        from one source, :func:`~aiplane.kube.controller.event_source_for`, and share one spam filter)."""
        found = self._recorders.get(name)
        if found is None:
            found = self._recorders[name] = EventRecorder(self.client, event_source_for(name))
        return found

    @property
    def recorders(self) -> list[EventRecorder]:
        """Every recorder handed out (tests wait for their scheduled Events before counting writes)."""
        return list(self._recorders.values())

    @staticmethod
    def field_manager(name: str) -> str:
        """The field manager of every write of the controller ``name``."""
        return field_manager_for(name)

    def add_controller(self, controller: Runnable) -> None:
        """Run ``controller`` while this process leads, after the caches synced.

        A :class:`~aiplane.kube.controller.Controller` is wired here, the same way for every
        controller: bound to the shared informers with this manager's metrics, its workers set from
        ``--max-concurrent-reconciles`` when given.
        """
        self._check_not_started()
        if isinstance(controller, Controller):
            controller.set_max_concurrent(self.controller_options.max_concurrent_reconciles)
            if not controller.bound:
                controller.bind(
                    self.informers, observer=self.metrics.controllers, queue_metrics=self.metrics.workqueue
                )
            if controller.recorder is None:
                controller.recorder = self.recorder(controller.name)
            primary = controller.primary
            if (
                controller.permission_conditions is None
                and primary is not None
                and accepts_permission_condition(primary)
            ):
                controller.permission_conditions = PermissionConditions(
                    self.client, primary, field_manager_for(controller.name), self.clock.now
                )
        if any(c.name == controller.name for c in self._controllers):
            raise ValueError(f"a controller named {controller.name!r} is already registered")
        self._controllers.append(controller)

    def add_runnable(self, runnable: Runnable, *, need_leader_election: bool = False) -> None:
        """Run ``runnable`` after the caches synced, on every replica unless ``need_leader_election``."""
        self._check_not_started()
        if need_leader_election:
            self._controllers.append(runnable)
        else:
            self._runnables.append(runnable)

    def add_healthz_check(self, name: str, check: HealthCheck) -> None:
        """A liveness check: failing it gets the container restarted. Keep it about this process."""
        self._healthz_checks[name] = check

    def add_readyz_check(self, name: str, check: HealthCheck) -> None:
        """A readiness check, on top of the built-in ``informers`` (caches synced)."""
        self._readyz_checks[name] = check

    @property
    def controllers(self) -> list[Runnable]:
        return list(self._controllers)

    def _check_not_started(self) -> None:
        if self._started:
            raise RuntimeError("register controllers and runnables before Manager.run()")

    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully (what SIGTERM does)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # ---------------------------------------------------------------------------------------------
    # Probes and metrics

    def _check_synced(self) -> None:
        """Synced, and no informer stale: a process whose view of the cluster stopped moving (a watch
        on a dead connection, an API server it cannot reach) is not ready, and says which view."""
        if not self.cache_synced.is_set():
            raise RuntimeError("informer caches have not synced yet")
        stale = self._informers.stale() if self._informers is not None else []
        if stale:
            names = ", ".join(f"{_informer_label(i)} ({i.silence() or 0:.0f} s)" for i in stale)
            raise RuntimeError(f"informers heard nothing from the API server for too long: {names}")

    def _check_forbidden(self) -> None:
        """No informer refused by the operator's role: while one is, the controllers that need it wait
        (the others run), and the probe names the view and the rule that would restore it."""
        refused = [i for i in self._informers.informers if i.forbidden] if self._informers else []
        if refused:
            names = "; ".join(
                f"{_informer_label(i)}: {i.forbidden} (rule {{{i.forbidden.rule()}}})"
                for i in refused
                if i.forbidden is not None
            )
            raise RuntimeError(f"the operator's role refuses informers, their controllers wait: {names}")

    async def _serve_checks(
        self, checks: dict[str, HealthCheck], request: web.Request, what: str
    ) -> web.Response:
        excluded = set(request.query.getall("exclude", []))
        lines: list[str] = []
        failed = False
        for name in sorted(checks):
            if name in excluded:
                excluded.discard(name)
                lines.append(f"[+]{name} excluded: ok")
                continue
            try:
                await _run_check(checks[name])
            except Exception as exc:
                _log.debug(f"{what} check failed", checker=name, error=str(exc))
                lines.append(f"[-]{name} failed: reason withheld")
                failed = True
            else:
                lines.append(f"[+]{name} ok")
        if excluded:
            names = ",".join(f'"{n}"' for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
        headers = {"X-Content-Type-Options": "nosniff"}
        if failed:
            text = "\n".join(lines) + f"\n{what} check failed"
            return web.Response(status=500, text=text, headers=headers)
        if "verbose" not in request.query:
            return web.Response(text="ok", headers=headers)
        return web.Response(text="\n".join(lines) + f"\n{what} check passed\n", headers=headers)

    async def _serve_one_check(self, checks: dict[str, HealthCheck], request: web.Request) -> web.Response:
        check = checks.get(request.match_info["name"])
        if check is None:
            raise web.HTTPNotFound()
        try:
            await _run_check(check)
        except Exception as exc:
            return web.Response(status=500, text=f"internal server error: {exc}")
        return web.Response(text="ok")

    async def _healthz(self, request: web.Request) -> web.Response:
        return await self._serve_checks(self._healthz_checks, request, "healthz")

    async def _readyz(self, request: web.Request) -> web.Response:
        return await self._serve_checks(self._readyz_checks, request, "readyz")

    async def _healthz_one(self, request: web.Request) -> web.Response:
        return await self._serve_one_check(self._healthz_checks, request)

    async def _readyz_one(self, request: web.Request) -> web.Response:
        return await self._serve_one_check(self._readyz_checks, request)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics_auth is not None:
            denied = await self.metrics_auth.check(request.headers.get("Authorization", ""), request.path)
            if denied is not None:
                return web.Response(status=denied.status, text=denied.message + "\n")
        body, content_type = self.metrics.exposition(request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    def _app(self, *, health: bool, metrics: bool) -> web.Application:
        app = web.Application()
        if health:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/healthz/{name}", self._healthz_one)
            app.router.add_get("/readyz", self._readyz)
            app.router.add_get("/readyz/{name}", self._readyz_one)
        if metrics:
            app.router.add_get("/metrics", self._metrics)
        return app

    async def _start_server(self, bind: tuple[str | None, int], *, health: bool, metrics: bool) -> int:
        sock = _listen(*bind)
        runner = web.AppRunner(
            self._app(health=health, metrics=metrics), handle_signals=False, access_log=None
        )
        await runner.setup()
        self._runners.append(runner)
        await web.SockSite(runner, sock).start()
        port: int = sock.getsockname()[1]
        _log.info(
            "serving",
            address=f"{bind[0] or ''}:{port}",
            paths=(["/healthz", "/readyz"] if health else []) + (["/metrics"] if metrics else []),
        )
        return port

    async def _start_servers(self) -> None:
        shared = self._health_bind is not None and self._health_bind == self._metrics_bind
        if shared and self._health_bind is not None and self._health_bind[1] != 0:
            port = await self._start_server(self._health_bind, health=True, metrics=True)
            self.health_port = self.metrics_port = port
        else:
            if self._metrics_bind is not None:
                self.metrics_port = await self._start_server(self._metrics_bind, health=False, metrics=True)
            if self._health_bind is not None:
                self.health_port = await self._start_server(self._health_bind, health=True, metrics=False)
        self.serving.set()

    async def _stop_servers(self) -> None:
        for runner in self._runners:
            with contextlib.suppress(Exception):
                await runner.cleanup()
        self._runners.clear()

    # ---------------------------------------------------------------------------------------------
    # Informers

    async def _sync_caches(self) -> bool:
        """Start the informers and wait for their caches; ``False`` if stopped or timed out first."""
        factory = self._informers
        if factory is not None:
            factory.start()
            sync = asyncio.ensure_future(factory.wait_for_sync(self.cache_sync_timeout))
            stop = asyncio.ensure_future(self._stop.wait())
            try:
                await asyncio.wait((sync, stop), return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not sync.done():
                    sync.cancel()
            synced = sync.done() and not sync.cancelled() and sync.result()
            if not synced and (self._stop.is_set() or not self._only_forbidden_unsynced(factory)):
                if not self._stop.is_set():
                    _log.error("informer caches did not sync in time", timeout=self.cache_sync_timeout)
                return False
        self.cache_synced.set()
        _log.info("caches synced")
        return True

    def _only_forbidden_unsynced(self, factory: InformerFactory) -> bool:
        """After the sync timeout: when every cache still missing is refused by RBAC (a misconfigured
        role), run anyway. The controllers whose caches synced work; each controller waits for its own
        caches (``Controller.run``), so one missing permission stops only the controllers that need it,
        and they start once the role is fixed (the informer keeps retrying with its capped backoff and
        names the permission). Anything else unsynced (an unreachable server) still fails the start."""
        pending = [i for i in factory.informers if not i.has_synced]
        if not pending or any(i.forbidden is None for i in pending):
            return False
        _log.error(
            "starting without the caches the operator's role does not allow; their controllers wait",
            missing=sorted({str(i.forbidden) for i in pending}),
        )
        return True

    async def _stop_informers(self) -> None:
        if self._informers is not None:
            with contextlib.suppress(Exception):
                await self._informers.stop()

    # ---------------------------------------------------------------------------------------------
    # Running

    def _install_signals(self) -> list[signal.Signals]:
        if not self.handle_signals:
            return []
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            installed.append(sig)
        return installed

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals > 1:
            # controller-runtime's SetupSignalHandler: the second signal exits directly.
            _log.error("second signal received, exiting now", signal=sig.name)
            os._exit(EXIT_FAILURE)
        _log.info("signal received, shutting down", signal=sig.name)
        self._stop.set()

    async def run(self) -> int:
        """Run until stopped or leadership is lost; the process exit code (see the module docstring)."""
        if self._started:
            raise RuntimeError("a Manager runs once")
        self._started = True
        installed = self._install_signals()
        try:
            return await self._run()
        finally:
            loop = asyncio.get_running_loop()
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _spawn(self, runnable: Runnable, stop: asyncio.Event, *, controller: bool) -> _Task:
        kind = "controller" if controller else "runnable"
        _log.info(f"starting {kind}", **{kind: runnable.name})
        task = asyncio.create_task(runnable.run(stop), name=f"{kind}:{runnable.name}")
        return _Task(runnable.name, runnable, task, controller)

    async def _run(self) -> int:
        try:
            await self._start_servers()
        except OSError as exc:
            _log.error("cannot serve probes or metrics", error=str(exc))
            await self._stop_servers()
            return EXIT_FAILURE

        work_stop = asyncio.Event()  # what controllers and runnables see: stop taking work
        elector_stop = asyncio.Event()  # set only after the drain: keeps renewing meanwhile
        elector_task: asyncio.Task[bool] | None = None
        running: list[_Task] = []
        try:
            if not await self._sync_caches():
                if self._stop.is_set():
                    return await self._graceful(running, work_stop, None, elector_stop, EXIT_OK)
                return await self._graceful(running, work_stop, None, elector_stop, EXIT_FAILURE)

            running.extend(self._spawn(r, work_stop, controller=False) for r in self._runnables)

            waiters: dict[asyncio.Future[Any], str] = {asyncio.ensure_future(self._stop.wait()): "stop"}
            if self.leader_election is not None:
                elector_task = self._start_election(waiters, elector_stop)
            else:
                self._start_leading(running, work_stop)
            for item in running:
                waiters[item.task] = "work"
            try:
                return await self._supervise(waiters, running, work_stop, elector_task, elector_stop)
            finally:
                for fut, what in waiters.items():
                    if what in ("stop", "elected"):
                        fut.cancel()
        finally:
            await self._stop_servers()

    def _start_election(
        self, waiters: dict[asyncio.Future[Any], str], elector_stop: asyncio.Event
    ) -> asyncio.Task[bool]:
        """Campaign for the Lease; its task and its "elected" moment join the supervised waiters."""
        assert self.leader_election is not None
        self.elector = LeaderElector(
            self.client,
            self.leader_election,
            metrics=self.metrics.leader_election,
            on_new_leader=self._on_new_leader,
        )
        elector = self.elector
        self.add_healthz_check("leaderElection", lambda: elector.check(20.0))
        elector_task = asyncio.create_task(elector.run(elector_stop), name="leader-election")
        waiters[elector_task] = "elector"
        waiters[asyncio.ensure_future(elector.elected.wait())] = "elected"
        return elector_task

    async def _supervise(
        self,
        waiters: dict[asyncio.Future[Any], str],
        running: list[_Task],
        work_stop: asyncio.Event,
        elector_task: asyncio.Task[bool] | None,
        elector_stop: asyncio.Event,
    ) -> int:
        """React to whatever finishes first: a stop request, leadership won or lost, a failed runnable."""
        while True:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                what = waiters.pop(fut)
                if what == "stop":
                    return await self._graceful(running, work_stop, elector_task, elector_stop, EXIT_OK)
                if what == "elector" and elector_task is not None:
                    return await self._lost(running, elector_task)
                if what == "elected":
                    before = len(running)
                    self._start_leading(running, work_stop)
                    for item in running[before:]:
                        waiters[item.task] = "work"
                elif what == "work" and self._failed(fut, running):
                    return await self._graceful(running, work_stop, elector_task, elector_stop, EXIT_FAILURE)

    def _on_new_leader(self, identity: str) -> None:
        assert self.elector is not None
        if identity != self.elector.identity:
            _log.info("new leader elected", leader=identity)

    def _start_leading(self, running: list[_Task], work_stop: asyncio.Event) -> None:
        self.elected.set()
        if self._informers is not None:
            self._informers.start()  # informers asked for since the sync (idempotent for the rest)
        running.extend(self._spawn(c, work_stop, controller=True) for c in self._controllers)

    def _failed(self, fut: asyncio.Future[Any], running: list[_Task]) -> bool:
        """A runnable ended on its own: fine if it returned, fatal if it raised."""
        item = next((r for r in running if r.task is fut), None)
        name = item.name if item else "?"
        if fut.cancelled():
            _log.error("runnable was cancelled", runnable=name)
            return True
        exc = fut.exception()
        if exc is not None:
            _log.error("runnable failed", runnable=name, error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            return True
        _log.info("runnable finished", runnable=name)
        return False

    async def _lost(self, running: list[_Task], elector_task: asyncio.Task[bool]) -> int:
        """Leadership lost: stop acting now, no drain (another process may be leading already)."""
        if elector_task.cancelled() or elector_task.exception() is not None:
            _log.error(
                "leader election failed",
                error=repr(None if elector_task.cancelled() else elector_task.exception()),
            )
        elif elector_task.result():
            # run() returned without being asked to stop and without a loss: cannot happen; be safe.
            _log.error("leader election ended unexpectedly")
        _log.error("leader election lost, exiting")
        await self._abandon(running)
        return EXIT_FAILURE

    async def _abandon(self, running: list[_Task]) -> None:
        """Cancel everything and give cleanup a short, bounded time."""
        for item in running:
            item.task.cancel()
        tasks = [item.task for item in running]
        if tasks:
            await asyncio.wait(tasks, timeout=_ABANDON_TIMEOUT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_ABANDON_TIMEOUT):
                await self._stop_informers()

    async def _graceful(
        self,
        running: list[_Task],
        work_stop: asyncio.Event,
        elector_task: asyncio.Task[bool] | None,
        elector_stop: asyncio.Event,
        exit_code: int,
    ) -> int:
        """Drain within ``shutdown_timeout`` while still renewing, then release the lease."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.shutdown_timeout
        _log.info("stopping: waiting for in-flight work", timeout=self.shutdown_timeout)
        work_stop.set()
        pending = {item.task for item in running if not item.task.done()}
        while pending:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            watch: set[asyncio.Future[Any]] = set(pending)
            if elector_task is not None:
                watch.add(elector_task)
            done, _ = await asyncio.wait(watch, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if elector_task is not None and elector_task in done:
                return await self._lost(running, elector_task)
            pending -= done
        for item in running:
            if item.task.done() and not item.task.cancelled() and item.task.exception() is not None:
                exit_code = EXIT_FAILURE
        clean = not pending
        if not clean:
            names = sorted(item.name for item in running if item.task in pending)
            _log.error(
                "shutdown timeout: work still in flight, cancelling it",
                timeout=self.shutdown_timeout,
                running=names,
            )
            exit_code = EXIT_FAILURE
            for task in pending:
                task.cancel()
            _, still = await asyncio.wait(pending, timeout=_ABANDON_TIMEOUT)
            clean = not still
        await self._stop_informers()
        if elector_task is not None:
            if clean:
                elector_stop.set()  # the elector releases the lease on its way out
                try:
                    async with asyncio.timeout(
                        self.leader_election.renew_deadline if self.leader_election else 10.0
                    ):
                        await elector_task
                except TimeoutError:
                    elector_task.cancel()
                except Exception as exc:
                    _log.error("leader election failed while stopping", error=str(exc))
            else:
                # Something guarded by the lease may still be running: never hand it over early.
                elector_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await elector_task
        _log.info("stopped", exit_code=exit_code)
        return exit_code

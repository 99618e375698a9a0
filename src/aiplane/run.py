"""``aiplane run``: the operator process — a Manager with the selected controllers.

What Kubernetes sees of it is the contract:

* **Configuration**: ``--kubeconfig PATH``, else in-cluster configuration when running in a pod
  (``KUBERNETES_SERVICE_HOST`` is set), else the default kubeconfig (``$KUBECONFIG`` or
  ``~/.kube/config``), as controller-runtime's ``config.GetConfig`` does.
* **Probes**: ``/healthz`` and ``/readyz`` on ``--health-probe-bind-address`` (default ``:8081``),
  ``/metrics`` on ``--metrics-bind-address`` (default ``:8080``); ``0`` disables either.
* **Logs**: JSON lines on stderr (:mod:`aiplane.kube.logging`).
* **Exit status**: 0 after SIGTERM/SIGINT and a clean drain; 1 when leadership is lost (at once), a
  controller fails, the drain overruns ``--shutdown-timeout`` or the caches never sync; 2 for
  command-line and configuration errors (unknown controller names, bad addresses, no kubeconfig),
  reported before anything starts.

Leader election (``--leader-elect``) uses the Lease ``--leader-election-id`` in
``--leader-election-namespace``; without the flag, the namespace is the pod's own (in-cluster), else
the kubeconfig context's, else ``default``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from aiplane.controllers import registry
from aiplane.controllers.monitoring.options import MonitoringOptions
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.flags import build
from aiplane.kube.leaderelection import LeaderElectionConfig
from aiplane.kube.logging import configure_logging, get_logger
from aiplane.kube.manager import EXIT_FAILURE, ControllerOptions, Manager, parse_bind_address
from aiplane.kube.metrics import Metrics
from aiplane.kube.metrics_auth import MetricsAuth
from aiplane.kube.tls import limit_tls_read_buffer
from aiplane.run_options import RunOptions

__all__ = ["EXIT_USAGE", "RunOptions", "main", "main_from_flags", "options_from_flags", "run"]

#: Command-line or configuration error, found before anything started.
EXIT_USAGE: Final = 2

_SA_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

_log = get_logger("aiplane.run")
#: How long a controller's start-up requests (its default object, "is this optional API served?") are
#: retried through transient API errors (a 500 or 503 storm, an API server rolling) before the process
#: gives up: exiting 1 on the first such error made a crash loop of every storm at start-up (the chaos
#: suite, tests/chaos). Bounded so that a server that never recovers still ends in a visible failure.
SETUP_RETRY_SECONDS: Final = 60.0
SETUP_RETRY_MAX_DELAY: Final = 2.0


async def _set_up(manager: Manager, name: str, setup: registry.ControllerSetup) -> None:
    """Run one controller's setup, again after a transient ``ApiError`` (doubling delays, capped),
    until ``SETUP_RETRY_SECONDS`` have passed. A setup that registered its controller before failing
    cannot be run twice: the second registration raises, as any other error it ends the process."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETUP_RETRY_SECONDS
    delay = 0.1
    while True:
        try:
            result = setup(manager)
            if inspect.isawaitable(result):
                await result
            return
        except ApiError as exc:
            if not exc.transient or loop.time() + delay > deadline:
                raise
            _log.warning("controller setup retried", controller=name, error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, SETUP_RETRY_MAX_DELAY)


class UsageError(Exception):
    """A configuration problem to report with exit status 2."""


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _kubeconfig_paths(explicit: Path | None) -> list[Path]:
    if explicit is not None:
        return [explicit]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def _context_namespace(paths: list[Path]) -> str | None:
    """The current kubeconfig context's namespace, as kubectl would default it."""
    current: str | None = None
    contexts: dict[str, Any] = {}
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict):
            continue
        current = current or doc.get("current-context")
        for entry in doc.get("contexts") or []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(entry, dict) and isinstance(name, str) and name not in contexts:
                contexts[name] = entry.get("context") or {}
    context = contexts.get(current) if current else None
    namespace = context.get("namespace") if isinstance(context, dict) else None
    return namespace if isinstance(namespace, str) and namespace else None


def leader_election_namespace(options: RunOptions) -> str:
    """The flag, else the pod's namespace in-cluster, else the kubeconfig context's, else ``default``."""
    if options.leader_election_namespace:
        return options.leader_election_namespace
    if in_cluster() and options.kubeconfig is None:
        try:
            return _SA_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
        except OSError:
            return "default"
    return _context_namespace(_kubeconfig_paths(options.kubeconfig)) or "default"


async def build_client(options: RunOptions, metrics: Metrics) -> HttpKubeClient:
    """kubeconfig flag → in-cluster → default kubeconfig; ``observer`` feeds ``rest_client_requests_total``."""
    observer = metrics.rest_client.observe
    timeout = options.kube_api_request_timeout or None
    if options.kubeconfig is None and in_cluster():
        try:
            return HttpKubeClient.in_cluster(
                observer=observer,
                qps=options.kube_api_qps,
                burst=options.kube_api_burst,
                request_timeout=timeout,
            )
        except Exception as exc:
            raise UsageError(f"in-cluster configuration failed: {exc}") from exc
    paths = _kubeconfig_paths(options.kubeconfig)
    if options.kubeconfig is not None and not options.kubeconfig.exists():
        raise UsageError(f"kubeconfig {options.kubeconfig} does not exist")
    try:
        return await HttpKubeClient.from_kubeconfig(
            str(options.kubeconfig) if options.kubeconfig is not None else None,
            observer=observer,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            request_timeout=timeout,
        )
    except Exception as exc:
        where = ", ".join(str(p) for p in paths)
        raise UsageError(f"cannot load kubeconfig ({where}): {exc}") from exc


def _validate(options: RunOptions) -> None:
    for flag, value in (
        ("--metrics-bind-address", options.metrics_bind_address),
        ("--health-probe-bind-address", options.health_probe_bind_address),
    ):
        try:
            parse_bind_address(value)
        except ValueError as exc:
            raise UsageError(f"{flag}: {exc}") from None
    if options.max_concurrent_reconciles is not None and options.max_concurrent_reconciles < 1:
        raise UsageError("--max-concurrent-reconciles must be at least 1")
    if options.shutdown_timeout < 0:
        raise UsageError("--shutdown-timeout must not be negative")


def options_from_flags(values: Mapping[str, Any]) -> RunOptions:
    """The options from the command line's parsed values (keyed by flag, ``drain_timeout``); a value
    no options class accepts (``--dcm-config x``, ``--gang-scheduler kai``) is a :class:`UsageError`."""
    try:
        options: RunOptions = build(RunOptions, values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return options


def _usage_error(log_level: str, exc: Exception) -> int:
    """Report a configuration error (a log line, and plainly on stderr); exit status 2."""
    try:
        configure_logging(log_level)
    except ValueError as bad_level:
        exc = bad_level
    else:
        _log.error("invalid configuration", error=str(exc))
    print(f"aiplane run: {exc}", file=sys.stderr)
    return EXIT_USAGE


async def run(options: RunOptions) -> int:
    """Build everything from ``options`` and run the manager; the process exit status."""
    try:
        configure_logging(options.log_level)
    except ValueError as exc:
        print(f"aiplane run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        _validate(options)
        selected = registry.select(options.controllers)
        monitoring = MonitoringOptions.from_env()
        election: LeaderElectionConfig | None = None
        if options.leader_elect:
            try:
                election = LeaderElectionConfig(
                    name=options.leader_election_id,
                    namespace=leader_election_namespace(options),
                    lease_duration=options.leader_election_lease_duration,
                    renew_deadline=options.leader_election_renew_deadline,
                    retry_period=options.leader_election_retry_period,
                )
            except ValueError as exc:
                raise UsageError(f"leader election: {exc}") from None
        metrics = Metrics()
        client = await build_client(options, metrics)
    except (UsageError, ValueError) as exc:
        _log.error("invalid configuration", error=str(exc))
        print(f"aiplane run: {exc}", file=sys.stderr)
        return EXIT_USAGE

    try:
        manager = Manager(
            client,
            leader_election=election,
            metrics_bind_address=options.metrics_bind_address,
            health_probe_bind_address=options.health_probe_bind_address,
            shutdown_timeout=options.shutdown_timeout,
            metrics=metrics,
            metrics_auth=MetricsAuth(client) if options.metrics_secure else None,
            controller_options=ControllerOptions(max_concurrent_reconciles=options.max_concurrent_reconciles),
        )
        manager.set_options(options.partitioning)
        manager.set_options(options.dynamo)
        manager.set_options(options.gang)
        manager.set_options(monitoring)
        for name, setup in selected.items():
            try:
                await _set_up(manager, name, setup)
            except Exception as exc:
                _log.error("controller setup failed", controller=name, error=f"{type(exc).__name__}: {exc}")
                return EXIT_FAILURE
        if not selected:
            _log.warning(
                "no controllers selected: serving probes and metrics only", selection=options.controllers
            )
        _log.info(
            "starting manager",
            controllers=sorted(selected),
            leader_election=(f"{election.namespace}/{election.name}" if election else None),
            identity=election.identity if election else None,
        )
        return await manager.run()
    finally:
        await client.close()


def main(options: RunOptions) -> int:
    """Synchronous entry: run on a fresh event loop."""
    limit_tls_read_buffer()  # a process-wide setting: only the operator's own entry point makes it
    return asyncio.run(run(options))


def main_from_flags(values: Mapping[str, Any]) -> int:
    """The CLI's entry: the options built from its parsed flags, then :func:`main`."""
    try:
        options = options_from_flags(values)
    except UsageError as exc:
        return _usage_error(str(values.get("log_level", "info")), exc)
    return main(options)

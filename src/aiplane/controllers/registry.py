"""The controllers ``aiplane run --controllers`` can start, by name.

Each entry is a *setup function* ``setup(manager) -> None`` (or a coroutine function: ``async def
setup(manager)``, for setup that must talk to the API server first, such as installing a CRD its
informer lists): it builds its controller(s) on the manager's shared client and informers and
registers them with ``manager.add_controller`` (and any agent with ``manager.add_runnable``), which
wires every controller the same way (shared informers, metrics, ``--max-concurrent-reconciles``).
Options a controller package owns come from ``manager.options(ItsOptions)``; the clock from
``manager.clock`` (docs/architecture.md). A typical one::

    def setup(manager: Manager) -> None:
        manager.add_controller(build(manager))

Setup runs before the manager starts; the manager then starts the informers created during setup,
waits for their caches and only then runs the controllers (and only while leading).

Entries import their module lazily, so ``aiplane run --controllers a`` never imports controller ``b``
(nor its dependencies).

Diagnostic controllers (:data:`DIAGNOSTIC`) exercise the runtime, not the product: they run only when
named, never as part of ``all``. Besides ``echo`` (copies ``spec.value`` of
``echoes.diagnostics.aiplane.io`` objects to ``status.value``), tests and benchmarks may register more
through the environment, without shipping them in the package::

    AIPLANE_EXTRA_CONTROLLERS="probe=tests.integration.run_helpers:setup_probe,other=pkg.mod:fn"

Each ``NAME=MODULE:FUNCTION`` names a setup function importable by the process; these too are
diagnostic (run only when named) and may not shadow a built-in name.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from aiplane.kube.manager import Manager
    from aiplane.kube.rbac import Permission

__all__ = [
    "CONTROLLERS",
    "DIAGNOSTIC",
    "EXTRA_CONTROLLERS_ENV",
    "MODULES",
    "ControllerSetup",
    "UnknownControllerError",
    "extra_controllers",
    "permissions",
    "select",
]

#: Registers one controller (or a few that belong together) with a manager; may be a coroutine function.
ControllerSetup = Callable[["Manager"], Awaitable[None] | None]

EXTRA_CONTROLLERS_ENV: Final = "AIPLANE_EXTRA_CONTROLLERS"


def _lazy(module: str, function: str = "setup") -> ControllerSetup:
    """A setup function that imports ``module`` only when called."""

    async def setup(manager: Manager) -> None:
        fn: ControllerSetup = getattr(importlib.import_module(module), function)
        result = fn(manager)
        if inspect.isawaitable(result):
            await result

    setup.__qualname__ = setup.__name__ = f"{module}.{function}"
    return setup


#: The module of every controller ``aiplane run`` knows, by the name ``--controllers`` takes. Each module
#: has ``setup`` and ``PERMISSIONS`` (what it reads and writes: :mod:`aiplane.kube.rbac`).
MODULES: Final[dict[str, str]] = {
    "echo": "aiplane.controllers.echo",
    "partitioningprofile": "aiplane.controllers.partitioning.profile",
    "partitioningplan": "aiplane.controllers.partitioning.plan",
    "nodepartitioning": "aiplane.controllers.partitioning.node",
    "modelinfer": "aiplane.controllers.modelinfer.controller",
    "dynamographdeployment": "aiplane.controllers.dynamo.graph_controller",
    "dynamocomponentdeployment": "aiplane.controllers.dynamo.component_controller",
    "dynamographdeploymentrequest": "aiplane.controllers.dynamo.request_controller",
    "kaiwoconfig": "aiplane.controllers.kaiwo.controller",
    # Registers nothing unless RESOURCE_MONITORING_ENABLED=true (controllers/monitoring/options.py).
    "resourcemonitor": "aiplane.controllers.monitoring.monitor",
    "aimnamespaceconfig": "aiplane.controllers.aimns.controller",
}

#: Every controller ``aiplane run`` knows, by the name ``--controllers`` takes.
CONTROLLERS: dict[str, ControllerSetup] = {name: _lazy(module) for name, module in MODULES.items()}

#: Names that run only when asked for by name (never as part of ``all``).
DIAGNOSTIC: frozenset[str] = frozenset({"echo"})


class UnknownControllerError(ValueError):
    """``--controllers`` named something no one registered."""


def extra_controllers(env: Mapping[str, str] | None = None) -> dict[str, ControllerSetup]:
    """Diagnostic setup functions from ``AIPLANE_EXTRA_CONTROLLERS`` (see the module docstring)."""
    spec = (os.environ if env is None else env).get(EXTRA_CONTROLLERS_ENV, "").strip()
    extras: dict[str, ControllerSetup] = {}
    if not spec:
        return extras
    for entry in spec.split(","):
        name, eq, target = entry.strip().partition("=")
        module, colon, function = target.partition(":")
        if not (eq and colon and name and module and function):
            raise ValueError(f"{EXTRA_CONTROLLERS_ENV}: {entry!r} is not NAME=MODULE:FUNCTION")
        if name in CONTROLLERS or name in ("all", "none"):
            raise ValueError(f"{EXTRA_CONTROLLERS_ENV}: {name!r} is a reserved controller name")
        extras[name] = _lazy(module, function)
    return extras


def select(selection: str, env: Mapping[str, str] | None = None) -> dict[str, ControllerSetup]:
    """The setup functions ``--controllers`` asks for: ``all``, ``none`` or ``NAME,...``.

    ``all`` is every non-diagnostic controller. Unknown names raise
    :class:`UnknownControllerError` naming the known ones, before anything connects anywhere.
    """
    known = {**CONTROLLERS, **extra_controllers(env)}
    text = selection.strip()
    if text == "none":
        return {}
    if text == "all":
        return {name: fn for name, fn in CONTROLLERS.items() if name not in DIAGNOSTIC}
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UnknownControllerError("--controllers is empty: give all, none or NAME,...")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UnknownControllerError(
            f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(sorted(known))} (or all, none)"
        )
    return {name: known[name] for name in dict.fromkeys(names)}


def permissions(names: Iterable[str] | None = None) -> dict[str, tuple[Permission, ...]]:
    """Each named controller's declared ``PERMISSIONS`` (default: those ``all`` runs).

    Imports the controller modules (unlike :func:`select`): ``aiplane rbac`` and the chart test use it.
    """
    chosen = [n for n in MODULES if n not in DIAGNOSTIC] if names is None else list(names)
    unknown = [n for n in chosen if n not in MODULES]
    if unknown:
        raise UnknownControllerError(
            f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(MODULES)}"
        )
    return {name: tuple(importlib.import_module(MODULES[name]).PERMISSIONS) for name in chosen}

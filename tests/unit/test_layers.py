"""The operator does not carry the simulator, checked on what Python actually loads.

``lint-imports`` (pyproject's ``[tool.importlinter]``) checks the static import graph; these tests
check the running import closure, which also catches ``importlib`` imports the static graph cannot
see, such as the controller registry's lazy setup functions. Each check runs in a fresh interpreter,
because this test process has long since imported the simulator for other tests.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import aiplane.kube
from aiplane.controllers.registry import CONTROLLERS

_LOADED_SIM_MODULES = """
import importlib, json, sys
for module in json.loads(sys.argv[1]):
    importlib.import_module(module)
print(json.dumps(sorted(m for m in sys.modules if m == "aiplane.sim" or m.startswith("aiplane.sim."))))
"""


def _sim_modules_loaded_by(modules: list[str]) -> list[str]:
    """The ``aiplane.sim`` modules a fresh interpreter has loaded after importing ``modules``."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_SIM_MODULES, json.dumps(modules)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def _controller_modules() -> list[str]:
    """The modules the registry's lazy setup functions import, as ``aiplane run --controllers all`` does.

    A lazy setup function is named ``MODULE.FUNCTION`` for what it imports and calls.
    """
    modules = [setup.__qualname__.rpartition(".")[0] for setup in CONTROLLERS.values()]
    assert all(modules), modules
    return modules


def test_aiplane_run_with_every_controller_loads_no_simulator_module() -> None:
    modules = ["aiplane.run", "aiplane.controllers.registry", *_controller_modules()]
    assert _sim_modules_loaded_by(modules) == []


def test_the_kube_runtime_loads_no_simulator_module() -> None:
    kube = [info.name for info in pkgutil.walk_packages(aiplane.kube.__path__, "aiplane.kube.")]
    assert "aiplane.kube.informer" in kube
    assert _sim_modules_loaded_by(kube) == []


def test_the_check_sees_a_simulator_import() -> None:
    """Guards the two tests above against passing vacuously."""
    assert "aiplane.sim.cluster" in _sim_modules_loaded_by(["aiplane.simrun"])


_LOADED_MODULES = """
import importlib, json, sys
for module in json.loads(sys.argv[1]):
    importlib.import_module(module)
print(json.dumps(sorted(sys.modules)))
"""


def test_aiplane_run_of_the_echo_controller_imports_no_api_model() -> None:
    """Start-up is part of an operator's throughput (the runtime benchmark measures it): ``aiplane run
    --controllers echo`` loads the runtime, not the pydantic models of every kind we serve (a third
    of its import time), which a controller serving one of them imports itself."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_MODULES, json.dumps(["aiplane.run", "aiplane.controllers.echo"])],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    loaded = set(json.loads(out))
    assert "aiplane.kube.manager" in loaded  # the check sees what it imports
    assert not {m for m in loaded if m.startswith(("aiplane.api.", "pydantic"))}

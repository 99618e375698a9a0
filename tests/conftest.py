"""Session-wide checks of the e2e suites run as the operator's ServiceAccount (tests/integration/operator_rbac.py).

After each test: its operator was refused nothing (403). At the end of a complete, passing run of every
e2e module: every rule of the chart's ClusterRole and Role was used by some test or is justified in
docs/install.md (tests/least_privilege.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aiplane.realcluster import RealCluster, start_real_cluster
from tests import least_privilege, realtier
from tests.integration import operator_rbac

_USED: set[least_privilege.Grant] = set()
_E2E_MODULES = {
    p.name
    for p in (Path(__file__).parent / "integration").glob("test_*.py")
    if "operator_rbac.operator_client(" in p.read_text()
}
_RAN: set[str] = set()
_COMPLETE: list[bool] = [True]


@pytest.fixture(scope="session")
def kube_bin() -> Path:
    """The real control plane's binaries (tests/realtier.py)."""
    return realtier.kube_bin_dir()


@pytest.fixture(scope="session")
def real_cluster(kube_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """One real control plane for the session (the ``real`` tier: tests/real, and the conformance suite's
    second run); stopped, and its state removed, at the end."""
    cluster = start_real_cluster(
        tmp_path_factory.mktemp("real") / "cluster", bin_dir=kube_bin, install_crds=True, tie_to_parent=True
    )
    yield cluster
    cluster.stop()


@pytest.fixture(autouse=True)
def _operator_refused_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    accesses = operator_rbac.take_accesses()
    if not accesses:
        return
    _RAN.add(request.path.name)
    for access in accesses:
        permissions = access.permissions()
        _USED.update(least_privilege.used(permissions))
        denied = access.denied()
        assert not denied, f"the operator's ServiceAccount was refused (403): {sorted(denied)}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.keyword or config.option.markexpr or any("::" in a for a in config.args):
        _COMPLETE[0] = False


def pytest_deselected(items: list[pytest.Item]) -> None:
    _COMPLETE[0] = False


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a complete, otherwise passing run whose chart grants a rule nothing used or justified."""
    if not (operator_rbac.enabled() and _COMPLETE[0] and _RAN >= _E2E_MODULES and exitstatus == 0):
        return
    granted = least_privilege.grants(operator_rbac.chart_rbac())
    unjustified, stale = least_privilege.report(granted, _USED, least_privilege.justified())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [
        f"least privilege: the e2e suites used {len(_USED & granted)} of the chart's {len(granted)} grants"
    ]
    lines += [f"  granted, never used, not justified in docs/install.md: {g}" for g in unjustified]
    lines += [f"  justified in docs/install.md but used by a test or not granted: {g}" for g in stale]
    if reporter is not None:
        reporter.write_line("\n".join(lines))
    if unjustified:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

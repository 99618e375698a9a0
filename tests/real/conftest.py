"""The real control plane for the ``real`` tier: built once (cached by scripts/build-kube) and started once
per session, with kwok's fake nodes for the default fleet and aiplane's CRDs.

``AIPLANE_KUBE_BIN`` names the binaries (scripts/test sets it); without it the fixture runs
scripts/build-kube itself, and skips only when the machine has no Go toolchain (the script exits 3).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiplane.realcluster import RealCluster, start_real_cluster

ROOT = Path(__file__).resolve().parents[2]
_NO_GO = 3


def kube_bin_dir() -> Path:
    """The directory of the built binaries, building them if need be."""
    if value := os.environ.get("AIPLANE_KUBE_BIN"):
        return Path(value)
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-kube")], capture_output=True, text=True, check=False
    )
    if build.returncode == _NO_GO:
        pytest.skip(build.stderr.strip())
    assert build.returncode == 0, f"scripts/build-kube failed:\n{build.stderr[-5000:]}"
    return Path(build.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def kube_bin() -> Path:
    return kube_bin_dir()


@pytest.fixture(scope="session")
def real_cluster(kube_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """One control plane for the session; stopped, and its state removed, at the end."""
    cluster = start_real_cluster(
        tmp_path_factory.mktemp("real") / "cluster", bin_dir=kube_bin, install_crds=True, tie_to_parent=True
    )
    yield cluster
    cluster.stop()

"""The real control plane for the ``real`` tier, shared by every suite that uses it (tests/conftest.py
makes the fixtures): built once (cached by scripts/build-kube) and started once per session, with kwok's
fake nodes for the default fleet and aiplane's CRDs.

``AIPLANE_KUBE_BIN`` names the binaries (scripts/test sets it); without it scripts/build-kube runs here,
and the tier is skipped only when the machine has no Go toolchain (the script exits 3).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


def neighbours_dir() -> Path:
    """The directory of the built upstream neighbours (LWS, Kueue, Gateway API CRDs), building them if need
    be (scripts/build-neighbours; ``AIPLANE_NEIGHBOURS_DIR`` names it when scripts/test built it)."""
    if value := os.environ.get("AIPLANE_NEIGHBOURS_DIR"):
        return Path(value)
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-neighbours")], capture_output=True, text=True, check=False
    )
    if build.returncode == _NO_GO:
        pytest.skip(build.stderr.strip())
    assert build.returncode == 0, f"scripts/build-neighbours failed:\n{build.stderr[-5000:]}"
    return Path(build.stdout.strip().splitlines()[-1])

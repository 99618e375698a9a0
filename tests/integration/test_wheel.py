"""The wheel is self-contained: built with ``python -m build``, installed into a clean virtualenv (no
source tree, no dev dependencies), the commands a new user runs first work from site-packages alone.

One build and one install per session (~1 min, most of it pip installing the runtime dependencies).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from aiplane.api.crdgen import all_crds
from tests.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``aiplane`` executable of a fresh virtualenv holding only the wheel and its dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (work / "dist").glob("aiplane-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=True)
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    yield env_dir / "bin" / "aiplane"


def _run(exe: Path, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH and a directory outside the repository: only site-packages can answer.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_help_of_run_and_demo_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    for command in ("run", "demo", "sim", "validate"):
        done = _run(installed, command, "--help", cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr)
        assert "Usage" in done.stdout


def test_crds_from_the_wheel_are_the_generated_ones(installed: Path, tmp_path: Path) -> None:
    done = _run(installed, "crds", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(done.stdout) if d]
    assert names == [crd["metadata"]["name"] for crd in all_crds()]


def test_validate_and_api_use_the_packaged_examples(installed: Path, tmp_path: Path) -> None:
    python = installed.parent / "python"
    where = subprocess.run(
        [str(python), "-c", "from aiplane.api.packaged import examples_dir; print(examples_dir())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    examples = Path(where)
    assert "site-packages" in where and (examples / "modelinfer-1p2d.yaml").is_file()
    assert sorted(p.name for p in examples.glob("*.yaml")) == sorted(
        p.name for p in (ROOT / "examples").glob("*.yaml")
    )
    done = _run(installed, "validate", *map(str, sorted(examples.glob("*.yaml"))), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 invalid" in done.stdout
    shown = _run(installed, "api", cwd=tmp_path)  # validates the packaged examples by default
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "modelinfer-1p2d.yaml" in shown.stdout


async def test_embedded_cluster_from_the_wheel_serves_kubectl_and_stops_on_sigterm(
    installed: Path, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen(
        [str(installed), "sim", "--kubeconfig", str(kubeconfig), "--controllers", "all"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def serving() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            return kubeconfig.exists()

        await eventually(serving, 60, "the embedded cluster writes its kubeconfig", interval=0.1)
        got = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "get", "nodes,crd", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert got.returncode == 0, got.stderr
        assert "node/" in got.stdout and "modelinfers.workload.volcano.sh" in got.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0

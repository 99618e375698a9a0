"""The README's own try-out: ``kubectl apply --server-side -f examples/`` on a fresh ``aiplane sim``
exits 0, and every example reaches its ready state on the default fleet (nothing missing, nothing
competing for the same GPUs)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_sim_command import AIPLANE, KUBECTL, _wait_for
from tests.polling import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [*AIPLANE, "sim", "--kubeconfig", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(path, proc)
        yield path
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


def _items(kubeconfig: Path, kind: str) -> list[dict[str, Any]]:
    return list(json.loads(kubectl(kubeconfig, "get", kind, "-A", "-o", "json").stdout)["items"])


def _condition(obj: dict[str, Any], type_: str) -> str | None:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_]
    return str(found[0].get("status")) if found else None


def _not_ready(kubeconfig: Path) -> list[str]:
    """Every example object that is not in its ready state yet, with what it says."""
    waiting = []
    for dgd in _items(kubeconfig, "dynamographdeployments"):
        if dgd.get("status", {}).get("state") != "successful":
            waiting.append(f"DGD {dgd['metadata']['name']}: {dgd.get('status')}")
    for dgdr in _items(kubeconfig, "dynamographdeploymentrequests"):
        if dgdr.get("status", {}).get("state") != "Ready":
            waiting.append(f"DGDR {dgdr['metadata']['name']}: {dgdr.get('status', {}).get('conditions')}")
    for mi in _items(kubeconfig, "modelinfers"):
        if _condition(mi, "Available") != "True":
            waiting.append(f"ModelInfer {mi['metadata']['name']}: {mi.get('status')}")
    for plan in _items(kubeconfig, "partitioningplans"):
        if plan.get("status", {}).get("phase") != "Completed":
            waiting.append(
                f"PartitioningPlan {plan['metadata']['name']}: {plan.get('status', {}).get('phase')}"
            )
    for config in _items(kubeconfig, "aimnamespaceconfigs"):
        failing = [c for c in config.get("status", {}).get("conditions") or [] if c.get("status") != "True"]
        if not config.get("status") or failing:
            waiting.append(f"AIMNamespaceConfig {config['metadata']['name']}: {failing}")
    for config in _items(kubeconfig, "kaiwoconfigs"):
        if _condition(config, "Ready") != "True":
            waiting.append(f"KaiwoConfig {config['metadata']['name']}: {config.get('status')}")
    return waiting


async def test_the_examples_apply_together_and_all_become_ready(kubeconfig: Path) -> None:
    applied = kubectl(kubeconfig, "apply", "--server-side", "-f", str(EXAMPLES), check=False)
    assert applied.returncode == 0, applied.stderr
    # The user's KaiwoConfig won over the operator's defaults (no conflict, no --force-conflicts).
    config = _items(kubeconfig, "kaiwoconfigs")[0]
    assert config["spec"]["dynamicallyUpdateDefaultClusterQueue"] is True
    # Every kind the examples hold is there before waiting on them.
    for kind in (
        "dynamographdeployments",
        "dynamographdeploymentrequests",
        "modelinfers",
        "partitioningplans",
    ):
        assert _items(kubeconfig, kind), kind

    last: list[list[str]] = [[]]

    def all_ready() -> bool:
        last[0] = _not_ready(kubeconfig)
        return not last[0]

    try:
        await eventually(lambda: asyncio.to_thread(all_ready), 180, "every example ready", interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still waiting: {last[0]}") from None

"""``aiplane hardware``: the simulated hardware out of process, a client of a cluster it did not start.

The cluster here is ``aiplane sim --no-hardware`` (its API server, scheduler, kubelet and DaemonSet
controller, but no AMD GPU operator): what a real control plane with kwok offers. The hardware agent
creates the fleet's GPU nodes, installs the operator's objects, and a node repartitions through it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import DEVICECONFIGS, EVENTS, NODES, PODS
from aiplane.sim.hardware import amd_gpu
from tests.polling import eventually

AIPLANE = [sys.executable, "-m", "aiplane.cli"]
GPU_POOL = {"name": "mi300x", "count": 2, "gpu": {"vendor": "amd", "product": "MI300X", "count": 8}}
CONTROL_POOL = {"name": "control", "count": 1, "controlPlane": True}
Obj = dict[str, Any]


def _wait_for(path: Path, proc: subprocess.Popen[str], deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if path.exists():
            return
        assert proc.poll() is None, f"exited early: {proc.stderr.read() if proc.stderr else ''}"
        time.sleep(0.05)
    raise AssertionError("no kubeconfig within the deadline")


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """``aiplane sim --no-hardware`` with a control-plane node only: the GPU nodes come from the hardware."""
    fleet = tmp_path / "sim-fleet.yaml"
    fleet.write_text(yaml.safe_dump({"nodePools": [CONTROL_POOL]}), encoding="utf-8")
    kubeconfig = tmp_path / "kubeconfig"
    args = ["sim", "--kubeconfig", str(kubeconfig), "--fleet", str(fleet), "--controllers", "none"]
    proc = subprocess.Popen(
        [*AIPLANE, *args, "--no-hardware", "--pod-ready-delay", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(kubeconfig, proc)
        yield kubeconfig, proc
    finally:
        code, err = _stop(proc)
        assert code == 0, err


@pytest.fixture
async def client(sim: tuple[Path, subprocess.Popen[str]]) -> AsyncIterator[HttpKubeClient]:
    http = await HttpKubeClient.from_kubeconfig(str(sim[0]))
    yield http
    await http.close()


async def _labels(client: HttpKubeClient, name: str) -> dict[str, str]:
    return dict((await client.get(NODES, name))["metadata"].get("labels") or {})


async def _allocatable(client: HttpKubeClient, name: str) -> tuple[str, str]:
    status = (await client.get(NODES, name))["status"]
    return status["capacity"].get(amd_gpu.RESOURCE, ""), status["allocatable"].get(amd_gpu.RESOURCE, "")


async def _plugin_running(client: HttpKubeClient, node: str) -> bool:
    pods = await client.list(PODS, amd_gpu.NAMESPACE, field_selector=f"spec.nodeName={node}")
    return any(
        p["metadata"]["labels"].get(amd_gpu.APP_LABEL) == amd_gpu.DEVICE_PLUGIN
        and p["status"].get("phase") == "Running"
        for p in pods["items"]
    )


async def test_a_node_repartitions_through_the_hardware_agent_out_of_process(
    tmp_path: Path, sim: tuple[Path, subprocess.Popen[str]], client: HttpKubeClient
) -> None:
    kubeconfig, _ = sim
    with pytest.raises(ApiError) as err:  # nothing plays the AMD GPU operator yet
        await client.get(DEVICECONFIGS, amd_gpu.DEVICE_CONFIG, amd_gpu.NAMESPACE)
    assert err.value.not_found
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"nodePools": [CONTROL_POOL, GPU_POOL]}), encoding="utf-8")
    hardware = subprocess.Popen(
        [*AIPLANE, "hardware", "--kubeconfig", str(kubeconfig), "--fleet", str(fleet), "--dcm-delay", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        name = "mi300x-1"

        async def plugin_up() -> bool:
            assert hardware.poll() is None, _stop(hardware)[1]
            return await _plugin_running(client, name)

        await eventually(plugin_up, 60, "the fleet's node created and its device plugin Running")
        assert (await _labels(client, name))[amd_gpu.PROFILE_LABEL] == "spx"
        assert await _allocatable(client, name) == ("8", "8")

        await client.patch(
            NODES, name, {"metadata": {"labels": {amd_gpu.PROFILE_LABEL: "cpx", amd_gpu.STATE_LABEL: None}}}
        )

        async def partitioned() -> bool:
            state = (await _labels(client, name)).get(amd_gpu.STATE_LABEL)
            return state == amd_gpu.STATE_SUCCESS and await _allocatable(client, name) == ("64", "64")

        await eventually(partitioned, 30, "DCM success and 64 partitions registered")
        listed = await client.list(EVENTS, "default", field_selector="reason=SuccessfullyPartitioned")
        (event,) = [e for e in listed["items"] if e["involvedObject"]["name"] == name]
        assert event["source"] == {"component": amd_gpu.COMPONENT, "host": name}
        assert {g["PartitionType"] for g in json.loads(event["message"])["GPUStatus"]} == {"CPX-NPS1"}
        # The untouched node kept its layout.
        assert await _allocatable(client, "mi300x-0") == ("8", "8")
    finally:
        code, err = _stop(hardware)
    assert code == 0, err
    assert "aiplane hardware: created 2 fleet nodes" in err and "aiplane hardware: stopped" in err


async def test_a_profile_selected_while_the_hardware_was_down_is_applied_when_it_starts(
    tmp_path: Path, sim: tuple[Path, subprocess.Popen[str]], client: HttpKubeClient
) -> None:
    """DCM applies the profile its node's label selects when it starts: a request written before its
    cache synced (or while it was down) is not lost."""
    kubeconfig, _ = sim
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"nodePools": [CONTROL_POOL, GPU_POOL]}), encoding="utf-8")
    command = [*AIPLANE, "hardware", "--kubeconfig", str(kubeconfig), "--dcm-delay", "0.2"]
    first = subprocess.Popen([*command, "--fleet", str(fleet)], stderr=subprocess.PIPE, text=True)
    name = "mi300x-0"
    try:
        await eventually(lambda: _plugin_running(client, name), 60, "the fleet's device plugin Running")
    finally:
        code, err = _stop(first)
    assert code == 0, err
    await client.patch(
        NODES, name, {"metadata": {"labels": {amd_gpu.PROFILE_LABEL: "cpx", amd_gpu.STATE_LABEL: None}}}
    )
    second = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:

        async def partitioned() -> bool:
            assert second.poll() is None, _stop(second)[1]
            state = (await _labels(client, name)).get(amd_gpu.STATE_LABEL)
            return state == amd_gpu.STATE_SUCCESS and await _allocatable(client, name) == ("64", "64")

        await eventually(partitioned, 30, "the profile selected while DCM was down applied at its start")
        assert await _allocatable(client, "mi300x-1") == ("8", "8")
    finally:
        code, err = _stop(second)
    assert code == 0, err

"""The simulated agents on an in-process embedded cluster: kubelet-lite, the DaemonSet controller, taint
eviction, and the AMD GPU operator (device plugin registration, Device Config Manager partitioning).

Clusters are driven through ``InMemoryKubeClient.for_cluster`` on the loop that serves them (the way
in-process controllers see them), and through kubectl over HTTPS. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from aiplane.kube.client import ApiError
from aiplane.kube.resources import CONFIGMAPS, DAEMONSETS, DEVICECONFIGS, EVENTS, NODES, PODS
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.hardware import amd_gpu
from tests.integration.sim_helpers import agent_cluster, events, until

T = TypeVar("T")
Obj = dict[str, Any]

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
AMD_NODES = ["mi300x-0", "mi300x-1", "mi300x-2", "mi300x-3", "mi300x-train-0", "mi300x-train-1"]
DCM_TAINT = {"key": "amd-dcm", "value": "up", "effect": "NoExecute"}
PROFILE, STATE, TRIGGER = amd_gpu.PROFILE_LABEL, amd_gpu.STATE_LABEL, amd_gpu.TRIGGER_LABEL


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster() as sim:
        yield sim


@pytest.fixture
def client(cluster: EmbeddedCluster) -> InMemoryKubeClient:
    return InMemoryKubeClient.for_cluster(cluster)


# --- helpers ---------------------------------------------------------------------------------------


async def node(client: InMemoryKubeClient, name: str) -> Obj:
    return await client.get(NODES, name)


async def labels(client: InMemoryKubeClient, name: str) -> dict[str, str]:
    return dict((await node(client, name))["metadata"].get("labels") or {})


async def label(client: InMemoryKubeClient, name: str, changes: dict[str, str | None]) -> None:
    await client.patch(NODES, name, {"metadata": {"labels": changes}})


async def taint(client: InMemoryKubeClient, name: str, taints: list[Obj]) -> None:
    await client.patch(NODES, name, {"spec": {"taints": taints or None}})


async def pods_on(client: InMemoryKubeClient, name: str, namespace: str | None = None) -> list[Obj]:
    listed = await client.list(PODS, namespace, field_selector=f"spec.nodeName={name}")
    return list(listed["items"])


async def plugin_pods(client: InMemoryKubeClient, node_name: str) -> list[Obj]:
    return [
        p
        for p in await pods_on(client, node_name, amd_gpu.NAMESPACE)
        if p["metadata"]["labels"].get(amd_gpu.APP_LABEL) == amd_gpu.DEVICE_PLUGIN
    ]


async def plugin_running(client: InMemoryKubeClient, node_name: str) -> Obj | None:
    pods = await plugin_pods(client, node_name)
    return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None


async def state_is(client: InMemoryKubeClient, name: str, value: str) -> bool:
    return (await labels(client, name)).get(STATE) == value


async def allocatable(client: InMemoryKubeClient, name: str) -> tuple[str, str]:
    status = (await node(client, name))["status"]
    return status["allocatable"].get("amd.com/gpu", ""), status["capacity"].get("amd.com/gpu", "")


def gpu_pod(name: str, node_name: str, gpus: int = 1) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "train",
                    "image": "rocm/pytorch:latest",
                    "resources": {"limits": {"amd.com/gpu": str(gpus)}},
                }
            ],
        },
    }


async def running(client: InMemoryKubeClient, name: str, namespace: str = "default") -> Obj | None:
    try:
        pod = await client.get(PODS, name, namespace)
    except ApiError:
        return None
    return pod if pod["status"].get("phase") == "Running" else None


# --- the operator's footprint --------------------------------------------------------------------


async def test_every_amd_node_runs_a_device_plugin_and_nothing_else_does(client: InMemoryKubeClient) -> None:
    async def all_running() -> list[Obj] | None:
        pods = (
            await client.list(
                PODS, amd_gpu.NAMESPACE, label_selector=f"{amd_gpu.APP_LABEL}={amd_gpu.DEVICE_PLUGIN}"
            )
        )["items"]
        return pods if len(pods) == 6 and all(p["status"].get("phase") == "Running" for p in pods) else None

    pods = await until(all_running, "a Running device plugin per AMD node")
    assert sorted(p["spec"]["nodeName"] for p in pods) == AMD_NODES
    for pod in pods:
        assert pod["metadata"]["name"].startswith("amd-gpu-device-plugin-")
        assert len(pod["metadata"]["name"]) == len("amd-gpu-device-plugin-") + 5
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("DaemonSet", amd_gpu.DEVICE_PLUGIN, True)
        assert {"controller-revision-hash", "pod-template-generation"} <= set(pod["metadata"]["labels"])
        assert all(c["ready"] for c in pod["status"]["containerStatuses"])
    for other in ("h100-0", "h100-1", "control-0"):
        assert await pods_on(client, other) == []

    async def ds_status() -> Obj | None:
        ds = await client.get(DAEMONSETS, amd_gpu.DEVICE_PLUGIN, amd_gpu.NAMESPACE)
        return ds if ds.get("status", {}).get("numberReady") == 6 else None

    status = (await until(ds_status, "device plugin DaemonSet status"))["status"]
    assert status == {
        "currentNumberScheduled": 6,
        "desiredNumberScheduled": 6,
        "numberMisscheduled": 0,
        "numberReady": 6,
        "observedGeneration": 1,
        "updatedNumberScheduled": 6,
        "numberAvailable": 6,
    }
    config = await client.get(CONFIGMAPS, amd_gpu.CONFIG_MAP, amd_gpu.NAMESPACE)
    assert set(json.loads(config["data"]["config.json"])["gpu-config-profiles"]) >= {
        "spx",
        "dpx",
        "qpx",
        "cpx",
        "cpx_nps4",
    }
    for name in AMD_NODES:  # registration reports what the fleet declared: no spurious change
        assert await allocatable(client, name) == ("8", "8")


# --- partitioning ----------------------------------------------------------------------------------


async def test_partitioning_a_drained_node_to_cpx(client: InMemoryKubeClient) -> None:
    name = "mi300x-1"
    await until(lambda: plugin_running(client, name), "the device plugin on the node")
    await taint(client, name, [DCM_TAINT])

    async def drained() -> bool:
        return not await plugin_pods(client, name)

    await until(drained, "the taint evicting the device plugin")
    dcm_pods = [
        p
        for p in await pods_on(client, name, amd_gpu.NAMESPACE)
        if "device-config-manager" in p["metadata"]["name"]
    ]
    assert len(dcm_pods) == 1, "DCM tolerates amd-dcm=up:NoExecute and stays"

    async def unhealthy() -> bool:
        return await allocatable(client, name) == ("0", "8")

    await until(unhealthy, "the devices of a gone plugin unhealthy (allocatable 0)")

    await label(client, name, {PROFILE: "cpx", STATE: None})
    await until(lambda: state_is(client, name, "success"), "DCM success")
    assert TRIGGER not in await labels(client, name)
    (event,) = await events(client, name, "SuccessfullyPartitioned")
    assert event["type"] == "Normal"
    assert event["source"] == {"component": "amd-device-config-manager", "host": name}
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("Node", name)
    message = json.loads(event["message"])
    assert message["SelectedProfile"] == "cpx" and message["FinalStatus"] == "Success"
    assert {g["PartitionType"] for g in message["GPUStatus"]} == {"CPX-NPS1"}

    await taint(client, name, [])

    async def registered() -> bool:
        return await allocatable(client, name) == ("64", "64")

    await until(registered, "the device plugin coming back with 64 partitions")
    assert [p["status"]["phase"] for p in await plugin_pods(client, name)] == ["Running"]


async def test_partitioning_without_a_drain_refreshes_the_running_plugin(client: InMemoryKubeClient) -> None:
    name = "mi300x-2"
    await until(lambda: plugin_pods(client, name), "the device plugin on the node")
    await label(client, name, {PROFILE: "qpx", STATE: None})
    await until(lambda: state_is(client, name, "success"), "DCM success")

    async def refreshed() -> bool:
        return await allocatable(client, name) == ("32", "32")

    await until(refreshed, "allocatable 32")


async def test_a_gpu_pod_on_the_node_makes_dcm_answer_device_busy(client: InMemoryKubeClient) -> None:
    name = "mi300x-3"
    await client.create(PODS, gpu_pod("train", name), namespace="default")
    await until(lambda: running(client, "train"), "the GPU pod Running")
    await label(client, name, {PROFILE: "cpx", STATE: None})
    await until(lambda: state_is(client, name, "failure"), "DCM failure")
    (event,) = await events(client, name, "PartitionFailure")
    assert event["type"] == "Warning"
    assert "Device busy" in event["message"]
    assert event["source"]["component"] == "amd-device-config-manager"
    assert await allocatable(client, name) == ("8", "8")

    # Free the GPUs and ask again with the trigger label (the profile label did not change).
    await client.delete(PODS, "train", namespace="default")
    await label(client, name, {STATE: None, TRIGGER: "apply"})
    await until(lambda: state_is(client, name, "success"), "DCM success after the retry")
    assert TRIGGER not in await labels(client, name)
    assert await events(client, name, "SuccessfullyPartitioned")
    assert await allocatable(client, name) == ("64", "64")


async def test_an_unknown_profile_fails(client: InMemoryKubeClient) -> None:
    name = "mi300x-train-0"
    await label(client, name, {PROFILE: "tpx-everything", STATE: None})
    await until(lambda: state_is(client, name, "failure"), "DCM failure")
    (event,) = await events(client, name, "NonExistentProfile")
    assert event["type"] == "Warning"
    assert json.loads(event["message"])["Reason"] == "Profile does not exist in the configmap"
    assert await allocatable(client, name) == ("8", "8")


async def test_the_trigger_label_reapplies_an_unchanged_profile(client: InMemoryKubeClient) -> None:
    name = "mi300x-0"
    assert (await labels(client, name))[PROFILE] == "spx"
    await label(client, name, {STATE: None, TRIGGER: "apply"})
    await until(lambda: state_is(client, name, "success"), "DCM answering the trigger")
    assert TRIGGER not in await labels(client, name)
    (event,) = await events(client, name, "RequestedPartitionConfigAlreadyExists")
    assert event["type"] == "Warning"  # DCM reports "nothing to do" through its error path
    # Without the trigger, an unchanged profile label is not noticed (DCM watches for changes).
    await label(client, name, {STATE: None})
    await label(client, name, {"example.com/unrelated": "x"})
    await asyncio.sleep(0)
    assert STATE not in await labels(client, name)


async def test_faults_and_runtime_delays(cluster: EmbeddedCluster, client: InMemoryKubeClient) -> None:
    assert cluster.agents is not None
    dcm = cluster.agents.amd
    name = "mi300x-train-1"
    dcm.fail_nodes.add(name)
    await label(client, name, {PROFILE: "dpx", STATE: None})
    await until(lambda: state_is(client, name, "failure"), "injected failure")
    (event,) = await events(client, name, "PartitionFailure")
    assert "API call failed" in event["message"]

    dcm.fail_nodes.clear()
    # Long enough that a loaded machine cannot run past it before the check below.
    dcm.dcm_delay = 2.0
    await label(client, name, {STATE: None, TRIGGER: "apply"})
    await asyncio.sleep(0.05)
    assert STATE not in await labels(client, name), "no state while partitioning"
    await until(lambda: state_is(client, name, "success"), "success after the longer delay")
    assert await allocatable(client, name) == ("16", "16")


async def test_a_partitioning_taint_removes_and_restores_the_device_plugin(
    client: InMemoryKubeClient,
) -> None:
    name = "mi300x-0"
    (first,) = await until(lambda: plugin_pods(client, name), "the device plugin")
    await taint(client, name, [DCM_TAINT])

    async def gone() -> bool:
        return not await plugin_pods(client, name)

    await until(gone, "the device plugin evicted")
    evictions = await events(client, first["metadata"]["name"], "TaintManagerEviction", amd_gpu.NAMESPACE)
    assert evictions and evictions[0]["source"]["component"] == "taint-eviction-controller"
    ds = await client.get(DAEMONSETS, amd_gpu.DEVICE_PLUGIN, amd_gpu.NAMESPACE)
    assert ds["status"]["desiredNumberScheduled"] == 5
    await taint(client, name, [])

    async def back() -> Obj | None:
        pods = await plugin_pods(client, name)
        return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None

    second = await until(back, "the device plugin recreated")
    assert second["metadata"]["name"] != first["metadata"]["name"]


async def test_the_operator_follows_its_device_config(client: InMemoryKubeClient) -> None:
    await client.delete(DAEMONSETS, amd_gpu.DEVICE_PLUGIN, namespace=amd_gpu.NAMESPACE)

    async def daemonsets() -> set[str]:
        return {d["metadata"]["name"] for d in (await client.list(DAEMONSETS, amd_gpu.NAMESPACE))["items"]}

    await until(
        lambda: _eq(daemonsets(), {amd_gpu.DEVICE_PLUGIN, amd_gpu.DCM_DAEMONSET}), "the plugin DaemonSet back"
    )
    await client.patch(
        DEVICECONFIGS,
        amd_gpu.DEVICE_CONFIG,
        {"spec": {"configManager": {"enable": False}}},
        namespace=amd_gpu.NAMESPACE,
    )
    await until(
        lambda: _eq(daemonsets(), {amd_gpu.DEVICE_PLUGIN}), "DCM's DaemonSet gone with configManager off"
    )
    await label(client, "mi300x-0", {PROFILE: "cpx", STATE: None})
    await label(client, "mi300x-0", {"example.com/poke": "1"})  # another event; DCM must stay silent
    await asyncio.sleep(0.1)
    assert STATE not in await labels(client, "mi300x-0"), "no DCM, no answer"

    await client.delete(DEVICECONFIGS, amd_gpu.DEVICE_CONFIG, namespace=amd_gpu.NAMESPACE)
    await until(lambda: _eq(daemonsets(), set()), "the DaemonSets garbage-collected with their DeviceConfig")


# --- kubelet, taint eviction, DaemonSets ---------------------------------------------------------


async def test_kubelet_runs_bound_pods_and_follows_node_readiness(client: InMemoryKubeClient) -> None:
    await client.create(
        PODS,
        {
            # Unbound and no scheduler of ours takes it (the sim's schedulers bind default-scheduler
            # and volcano pods): the kubelet does not run it.
            "metadata": {"name": "floating"},
            "spec": {"schedulerName": "elsewhere", "containers": [{"name": "c", "image": "nginx"}]},
        },
        namespace="default",
    )
    body = {
        "metadata": {"name": "pinned"},
        "spec": {"nodeName": "h100-0", "containers": [{"name": "c", "image": "nginx"}]},
    }
    await client.create(PODS, body, namespace="default")
    pod = await until(lambda: running(client, "pinned"), "the bound pod Running")
    h100 = await node(client, "h100-0")
    internal = next(a["address"] for a in h100["status"]["addresses"] if a["type"] == "InternalIP")
    assert pod["status"]["hostIP"] == internal and pod["status"]["podIP"].startswith("10.244.")
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert (await client.get(PODS, "floating", "default"))["status"]["phase"] == "Pending"

    def ready_condition(status: str) -> Obj:
        conditions = [dict(c) for c in h100["status"]["conditions"]]
        for c in conditions:
            if c["type"] == "Ready":
                c["status"] = status
        return {**h100, "status": {**h100["status"], "conditions": conditions}}

    async def pod_ready(expected: str) -> bool:
        pod = await client.get(PODS, "pinned", "default")
        return any(c["type"] == "Ready" and c["status"] == expected for c in pod["status"]["conditions"])

    fresh = await node(client, "h100-0")
    h100 = fresh
    await client.replace_status(NODES, ready_condition("False"))
    await until(lambda: pod_ready("False"), "the pod NotReady with its node")
    h100 = await node(client, "h100-0")
    await client.replace_status(NODES, ready_condition("True"))
    await until(lambda: pod_ready("True"), "the pod Ready again")


async def test_termination_delay_keeps_a_deleted_pod_terminating_for_a_while(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    """With ``termination_delay`` the kubelet claims graceful termination: a deleted bound pod stays
    Terminating (``deletionTimestamp`` set) and is removed by the kubelet; an unbound one goes at once."""
    assert cluster.agents is not None
    cluster.agents.kubelet.termination_delay = 0.3
    spec = {
        "nodeName": "h100-0",
        "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "c", "image": "x"}],
    }
    await client.create(PODS, {"metadata": {"name": "graceful"}, "spec": spec}, namespace="default")
    await until(lambda: running(client, "graceful"), "the bound pod Running")
    await client.delete(PODS, "graceful", namespace="default")
    pod = await client.get(PODS, "graceful", "default")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30

    await until(
        lambda: gone_now(client, "graceful"), "the kubelet removes the pod after the termination delay"
    )
    unbound = {"schedulerName": "elsewhere", "containers": [{"name": "c", "image": "x"}]}
    await client.create(PODS, {"metadata": {"name": "unbound"}, "spec": unbound}, namespace="default")
    await client.delete(PODS, "unbound", namespace="default")
    assert await gone_now(client, "unbound")


async def gone_now(client: InMemoryKubeClient, name: str) -> bool:
    try:
        await client.get(PODS, name, "default")
    except ApiError as exc:
        return exc.not_found
    return False


async def test_toleration_seconds_delay_taint_eviction(client: InMemoryKubeClient) -> None:
    for name, seconds in (("brief", 1), ("forever", None)):
        toleration: Obj = {"key": "amd-dcm", "operator": "Exists", "effect": "NoExecute"}
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        body = {
            "metadata": {"name": name},
            "spec": {
                "nodeName": "h100-1",
                "tolerations": [toleration],
                "containers": [{"name": "c", "image": "i"}],
            },
        }
        await client.create(PODS, body, namespace="default")
    await client.create(PODS, {**gpu_pod("intolerant", "h100-1", 0)}, namespace="default")
    await taint(client, "h100-1", [DCM_TAINT])

    async def names() -> set[str]:
        return {p["metadata"]["name"] for p in await pods_on(client, "h100-1", "default")}

    await until(lambda: _eq(names(), {"brief", "forever"}), "the intolerant pod evicted at once")
    await until(lambda: _eq(names(), {"forever"}), "the briefly tolerating pod evicted later", timeout=4)


async def _eq(value: Awaitable[T], expected: T) -> bool:
    return await value == expected


async def test_daemonset_follows_labels_deletions_and_template_changes(client: InMemoryKubeClient) -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "zone-agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "zone-agent"}},
            "template": {
                "metadata": {"labels": {"app": "zone-agent"}},
                "spec": {
                    "nodeSelector": {"topology.kubernetes.io/zone": "zone-b"},
                    "containers": [{"name": "agent", "image": "agent:1"}],
                },
            },
        },
    }
    await client.create(DAEMONSETS, ds, namespace="default")

    async def pods() -> dict[str, Obj]:
        items = (await client.list(PODS, "default", label_selector="app=zone-agent"))["items"]
        return {p["spec"]["nodeName"]: p for p in items}

    async def on_nodes(expected: set[str]) -> dict[str, Obj] | None:
        found = await pods()
        return found if set(found) == expected else None

    train = {"mi300x-train-0", "mi300x-train-1"}
    await until(lambda: on_nodes(train), "pods on the zone-b nodes")
    await label(client, "h100-0", {"topology.kubernetes.io/zone": "zone-b"})
    found = await until(lambda: on_nodes(train | {"h100-0"}), "a pod on the newly matching node")
    await label(client, "h100-0", {"topology.kubernetes.io/zone": None})
    await until(lambda: on_nodes(train), "the pod gone from the node that stopped matching")

    victim = found["mi300x-train-0"]["metadata"]["name"]
    await client.delete(PODS, victim, namespace="default")

    async def replaced() -> bool:
        current = await pods()
        pod = current.get("mi300x-train-0")
        return bool(pod and pod["metadata"]["name"] != victim and pod["status"].get("phase") == "Running")

    await until(replaced, "a deleted daemon pod recreated")

    await client.patch(
        DAEMONSETS,
        "zone-agent",
        {"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}},
        namespace="default",
    )

    async def rolled() -> bool:
        ds_now = await client.get(DAEMONSETS, "zone-agent", "default")
        current = await pods()
        status = ds_now.get("status", {})
        return (
            set(current) == train
            and all(p["spec"]["containers"][0]["image"] == "agent:2" for p in current.values())
            and status.get("updatedNumberScheduled") == 2
            and status.get("numberReady") == 2
            and status.get("observedGeneration") == 2
        )

    await until(rolled, "the rolling update")
    revisions = (await client.list(_controller_revisions(), "default"))["items"]
    assert sorted(r["revision"] for r in revisions) == [1, 2]


def _controller_revisions() -> Any:
    from aiplane.kube.resources import Resource

    return Resource("apps", "v1", "controllerrevisions", "ControllerRevision", True)


# --- knobs that model the field -------------------------------------------------------------------


async def test_plugin_refresh_on_restart_and_refresh_delay(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    assert cluster.agents is not None
    dcm = cluster.agents.amd
    dcm.plugin_refresh = "on-restart"
    name = "mi300x-2"
    await until(lambda: plugin_running(client, name), "the device plugin registered")
    await label(client, name, {PROFILE: "dpx", STATE: None})
    await until(lambda: state_is(client, name, "success"), "DCM success")
    assert await allocatable(client, name) == ("8", "8"), (
        "a running plugin does not notice (gpu-operator#382)"
    )
    (pod,) = await plugin_pods(client, name)
    dcm.plugin_refresh_delay = 0.2
    await client.delete(PODS, pod["metadata"]["name"], namespace=amd_gpu.NAMESPACE)

    async def refreshed() -> bool:
        return await allocatable(client, name) == ("16", "16")

    await until(refreshed, "a restarted plugin registering 16 partitions")


async def test_retry_loop_in_progress_label_and_events_on_the_dcm_pod(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    assert cluster.agents is not None
    dcm = cluster.agents.amd
    dcm.retry_interval = 0.05
    dcm.in_progress_label = True
    dcm.event_target = "pod"
    name = "mi300x-3"
    await client.create(PODS, gpu_pod("holder", name), namespace="default")
    await until(lambda: running(client, "holder"), "the GPU pod Running")
    await until(
        lambda: _any_dcm_pod_running(client, name), "the DCM pod Running (events are about it in this mode)"
    )
    await label(client, name, {PROFILE: "cpx_nps4", STATE: None})
    await until(lambda: state_is(client, name, "failure"), "failure while the GPU is busy")

    async def dcm_events(reason: str) -> list[Obj]:
        items = (await client.list(EVENTS, amd_gpu.NAMESPACE, field_selector=f"reason={reason}"))["items"]
        return [e for e in items if e["source"].get("host") == name]

    (retrying,) = await until(lambda: dcm_events("PartitionRetrying"), "PartitionRetrying")
    assert retrying["involvedObject"]["kind"] == "Pod"
    assert await dcm_events("PartitionInProgress")
    assert not await dcm_events("PartitionFailure"), "DCM keeps retrying, it has not given up"
    await client.delete(PODS, "holder", namespace="default")
    await until(lambda: state_is(client, name, "success"), "success once the GPU is free")
    assert await dcm_events("SuccessfullyPartitioned")
    assert await allocatable(client, name) == ("64", "64")


async def _any_dcm_pod_running(client: InMemoryKubeClient, node_name: str) -> bool:
    return any(
        p["metadata"]["labels"].get(amd_gpu.APP_LABEL) == amd_gpu.DCM_DAEMONSET
        and p["status"].get("phase") == "Running"
        for p in await pods_on(client, node_name, amd_gpu.NAMESPACE)
    )


async def test_config_map_changes_reapply_and_problems_fail(client: InMemoryKubeClient) -> None:
    name = "mi300x-1"
    await label(client, name, {PROFILE: "cpx", STATE: None})
    await until(lambda: state_is(client, name, "success"), "cpx")
    config = json.loads(
        (await client.get(CONFIGMAPS, amd_gpu.CONFIG_MAP, amd_gpu.NAMESPACE))["data"]["config.json"]
    )
    config["gpu-config-profiles"]["cpx"]["profiles"][0]["memoryPartition"] = "NPS4"
    await label(client, name, {STATE: None})
    await client.patch(
        CONFIGMAPS,
        amd_gpu.CONFIG_MAP,
        {"data": {"config.json": json.dumps(config)}},
        namespace=amd_gpu.NAMESPACE,
    )
    await until(lambda: state_is(client, name, "success"), "the changed profile re-applied")

    async def nps4_event() -> bool:
        return any("CPX-NPS4" in e["message"] for e in await events(client, name, "SuccessfullyPartitioned"))

    await until(nps4_event, "a partitioning to CPX-NPS4")
    # Other nodes were re-checked too and found nothing to do.
    assert await events(client, "mi300x-0", "RequestedPartitionConfigAlreadyExists")

    await client.patch(
        CONFIGMAPS, amd_gpu.CONFIG_MAP, {"data": {"config.json": "{oops"}}, namespace=amd_gpu.NAMESPACE
    )
    await until(lambda: state_is(client, name, "failure"), "invalid JSON")
    assert await events(client, name, "InvalidJSONInConfigMap")
    await client.delete(CONFIGMAPS, amd_gpu.CONFIG_MAP, namespace=amd_gpu.NAMESPACE)
    await label(client, name, {STATE: None, TRIGGER: "apply"})
    await until(lambda: state_is(client, name, "failure"), "no ConfigMap")
    assert await events(client, name, "ConfigMapNotPresent")


# --- kubectl and `aiplane sim` ---------------------------------------------------------------------


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """kubectl without blocking the loop that serves the cluster."""
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_shows_the_agents_work(
    cluster: EmbeddedCluster, client: InMemoryKubeClient, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster.write_kubeconfig(kubeconfig)
    await until(lambda: _all_operator_pods_running(client), "the operator's pods Running", timeout=5)
    wide = await kubectl(kubeconfig, "get", "pods", "-n", "kube-amd-gpu", "-o", "wide")
    lines = wide.splitlines()
    assert lines[0].split()[:8] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED"]
    plugin_lines = [line for line in lines if line.startswith("amd-gpu-device-plugin-")]
    assert len(plugin_lines) == 6
    for line in plugin_lines:
        cells = line.split()
        assert cells[1:3] == ["1/1", "Running"] and cells[5].startswith("10.244.") and cells[6] in AMD_NODES

    await kubectl(kubeconfig, "label", "node", "mi300x-0", f"{PROFILE}=cpx_nps4", f"{STATE}-", "--overwrite")
    await until(lambda: state_is(client, "mi300x-0", "success"), "DCM success")
    listed = await kubectl(kubeconfig, "get", "events", "-n", "default")
    line = next(line for line in listed.splitlines() if "SuccessfullyPartitioned" in line)
    assert "node/mi300x-0" in line and "Normal" in line
    ds = await kubectl(kubeconfig, "get", "ds", "-n", "kube-amd-gpu", amd_gpu.DEVICE_PLUGIN)
    assert ds.splitlines()[1].split()[1:6] == ["6", "6", "6", "6", "6"]


async def _all_operator_pods_running(client: InMemoryKubeClient) -> bool:
    pods = (await client.list(PODS, amd_gpu.NAMESPACE))["items"]
    return len(pods) == 12 and all(p["status"].get("phase") == "Running" for p in pods)


def test_aiplane_sim_runs_the_agents_with_the_delays_given(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump(
            {
                "nodePools": [
                    {"name": "mi300x", "count": 2, "gpu": {"vendor": "amd", "product": "MI300X", "count": 8}},
                    {"name": "control", "count": 1, "controlPlane": True},
                ]
            }
        ),
        encoding="utf-8",
    )
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aiplane.cli",
            "sim",
            "--kubeconfig",
            str(kubeconfig),
            "--fleet",
            str(fleet),
            "--controllers",
            "none",
            "--dcm-delay",
            "0.1",
            "--pod-ready-delay",
            "0.05",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no kubeconfig"
            time.sleep(0.05)
        run = [KUBECTL, "--kubeconfig", str(kubeconfig)]
        waited = subprocess.run(
            [*run, "wait", "pods", "-n", "kube-amd-gpu", "--all", "--for=condition=Ready", "--timeout=30s"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert waited.returncode == 0, waited.stderr
        subprocess.run(
            [*run, "label", "node", "mi300x-1", f"{PROFILE}=cpx", f"{STATE}-", "--overwrite"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        done = subprocess.run(
            [
                *run,
                "wait",
                "node/mi300x-1",
                "--for=jsonpath={.status.allocatable.amd\\.com/gpu}=64",
                "--timeout=30s",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        state = subprocess.run(
            [*run, "get", "node", "mi300x-1", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert json.loads(state.stdout)["metadata"]["labels"][STATE] == "success"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and "simulated agents" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

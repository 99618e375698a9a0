"""GPU-utilisation monitoring end to end on the embedded cluster: the simulated exporter, the ModelInfer
controller and the monitor, with a FakeClock for the "low for longer than" rule (polls are driven by
the test, so nothing sleeps to wait for a timer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from aiplane.controllers.dynamo import component_controller, graph_controller
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.monitoring import monitor as monitor_mod
from aiplane.controllers.monitoring.decide import ANNOTATION_RESTORE, ANNOTATION_SCALED_FROM
from aiplane.controllers.monitoring.options import MonitoringOptions
from aiplane.controllers.monitoring.scrape import parse_samples
from aiplane.kube.clock import FakeClock
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, NAMESPACES, PODS, SECRETS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.sim_helpers import http_client
from tests.polling import eventually

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
KAIWO = resource_for("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig")
NS = "serving"
NAME_LABEL = "modelinfer.volcano.sh/name"


def modelinfer(name: str = "llm", replicas: int = 2) -> dict[str, Any]:
    template = {
        "spec": {
            "containers": [
                {"name": "vllm", "image": "vllm:v1", "resources": {"limits": {"amd.com/gpu": "2"}}}
            ]
        }
    }
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "default-scheduler",
            "template": {
                "roles": [{"name": "serve", "replicas": 1, "workerReplicas": 0, "entryTemplate": template}]
            },
        },
    }


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    monitor: monitor_mod.ResourceMonitor
    clock: FakeClock

    async def mi(self, name: str = "llm") -> dict[str, Any]:
        return await self.client.get(MI, name, NS)

    async def condition(self, type_: str, name: str = "llm") -> dict[str, Any] | None:
        for c in (await self.mi(name)).get("status", {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    async def running_pods(self, name: str = "llm") -> list[dict[str, Any]]:
        pods = (await self.client.list(PODS, namespace=NS, label_selector=f"{NAME_LABEL}={name}"))["items"]
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]

    async def events(self, reason: str, name: str = "llm") -> list[dict[str, Any]]:
        listed = await self.client.list(
            EVENTS, NS, field_selector=f"involvedObject.name={name},reason={reason}"
        )
        return list(listed["items"])

    async def poll_seen(self) -> None:
        """One poll, once the monitor's caches show the cluster as the test left it."""
        await asyncio.sleep(0)  # let queued watch events reach the informers
        await self.monitor.poll()
        await self.monitor.recorder.flush()


def _fleet() -> Fleet:
    pool = NodePool(
        name="mi300x", count=2, gpu=GpuSpec(vendor="amd", product="MI300X", count=8), cpu="64", memory="512Gi"
    )
    return Fleet(nodePools=[pool])


@pytest.fixture
async def world() -> AsyncIterator[World]:
    cluster = operator_rbac.cluster(fleet=_fleet(), agents=True, ready_delay=0.0)
    await cluster.start()
    assert cluster.gpu_metrics.url is not None
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    clock = FakeClock()
    manager = Manager(operator, leader_election=None, handle_signals=False, clock=clock)
    await modelinfer_controller.setup(manager)
    options = MonitoringOptions(enabled=True, endpoint=cluster.gpu_metrics.url, interval=3600)
    monitor = monitor_mod.setup_controller(manager, options)  # polled by the test, not run by the manager
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.create(
        KAIWO,
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {
                "resourceMonitoring": {
                    "lowUtilizationThreshold": 5,
                    "terminateUnderutilized": True,
                    "terminateUnderutilizedAfter": "1h",
                }
            },
        },
    )
    await eventually(manager.cache_synced.is_set, 10, "caches synced")
    yield World(cluster, client, monitor, clock)
    manager.stop()
    assert await task == 0
    if monitor._session is not None:
        await monitor._session.close()
    await client.close()
    await cluster.stop()


async def _up(world: World, replicas: int = 2) -> None:
    async def ready() -> bool:
        available = await world.condition("Available")
        return len(await world.running_pods()) == replicas and bool(
            available and available["status"] == "True"
        )

    await eventually(ready, 20, f"{replicas} groups running")


async def test_the_exporter_serves_one_sample_per_gpu_of_each_running_pod(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=1), namespace=NS)
    await _up(world, 1)
    world.cluster.gpu_metrics.set(NS, None, 12.5)
    url = world.cluster.gpu_metrics.url
    assert url is not None
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    samples = parse_samples(text)
    assert [(s.namespace, s.pod, s.gpu, s.value) for s in sorted(samples)] == [
        (NS, "llm-0-serve-0-0", "0/0", 12.5),
        (NS, "llm-0-serve-0-0", "1/0", 12.5),
    ]
    async with http_client(world.cluster) as http:
        await http.request(
            "POST",
            "/_sim/gpu-utilization",
            body={"namespace": NS, "pod": "llm-0-serve-0-0", "utilization": 3},
        )
        shown = await http.request("GET", "/_sim/gpu-utilization")
    assert shown["pods"] == {f"{NS}/llm-0-serve-0-0": 3.0}
    assert {s.value for s in parse_samples(world.cluster.gpu_metrics.render())} == {3.0}


async def test_low_utilisation_through_scale_to_zero_and_back(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=2), namespace=NS)
    await _up(world)

    await world.poll_seen()  # the exporter's default: 50 % busy
    normal = await world.condition("ResourceUnderutilization")
    assert normal is not None and (normal["status"], normal["reason"]) == ("False", "GpuUtilizationNormal")

    world.cluster.gpu_metrics.set(NS, "llm-1-serve-0-0", 0)
    await world.poll_seen()
    low = await world.condition("ResourceUnderutilization")
    assert low is not None and (low["status"], low["reason"]) == ("True", "GpuUtilizationLow")
    assert "llm-1-serve-0-0" in low["message"] and "llm-0" not in low["message"]
    assert len(await world.events("GpuUtilizationLow")) == 1

    # The ModelInfer controller writes its own status (a pod is lost) and keeps the monitor's condition.
    pod = (await world.running_pods())[0]
    await world.client.delete(PODS, pod["metadata"]["name"], namespace=NS)
    await _up(world)
    kept = await world.condition("ResourceUnderutilization")
    assert kept is not None and kept["lastTransitionTime"] == low["lastTransitionTime"]

    world.clock.advance(59 * 60)
    await world.poll_seen()
    assert (await world.mi())["spec"]["replicas"] == 2  # not low for long enough yet

    world.clock.advance(60)
    await world.poll_seen()
    mi = await world.mi()
    assert mi["spec"]["replicas"] == 0
    assert json.loads(mi["metadata"]["annotations"][ANNOTATION_SCALED_FROM]) == {"replicas": 2}
    terminated = await world.condition("WorkloadTerminatedEarly")
    assert terminated is not None and (terminated["status"], terminated["reason"]) == (
        "True",
        "GpuUtilizationLow",
    )
    assert len(await world.events("WorkloadTerminatedEarly")) == 1
    await eventually(lambda: _no_pods(world), 20, "pods gone")

    # Scaled to zero, the monitor changes nothing however long it stays so.
    world.clock.advance(7 * 24 * 3600)
    before = await _monitor_state(world)
    await world.poll_seen()
    await world.poll_seen()
    assert await _monitor_state(world) == before

    # Back: the restore annotation brings the recorded replicas.
    await world.client.patch(
        MI, "llm", {"metadata": {"annotations": {ANNOTATION_RESTORE: "true"}}}, namespace=NS
    )
    await eventually(lambda: _annotated(world), 5, "restore annotation in the cache")
    await world.poll_seen()
    mi = await world.mi()
    assert mi["spec"]["replicas"] == 2
    assert ANNOTATION_SCALED_FROM not in (mi["metadata"].get("annotations") or {})
    restored = await world.condition("WorkloadTerminatedEarly")
    assert restored is not None and (restored["status"], restored["reason"]) == ("False", "WorkloadRestored")
    assert len(await world.events("WorkloadRestored")) == 1
    await _up(world)

    world.cluster.gpu_metrics.reset()  # busy again
    await world.poll_seen()
    again = await world.condition("ResourceUnderutilization")
    assert again is not None and again["status"] == "False"


async def _no_pods(world: World) -> bool:
    return not (await world.client.list(PODS, namespace=NS, label_selector=f"{NAME_LABEL}=llm"))["items"]


async def _annotated(world: World) -> bool:
    cached = world.monitor.modelinfers.get(f"{NS}/llm")
    return bool(cached and ANNOTATION_RESTORE in (cached["metadata"].get("annotations") or {}))


async def _monitor_state(world: World) -> tuple[Any, ...]:
    """What the monitor writes: its two conditions, the annotations and the replicas."""
    mi = await world.mi()
    return (
        await world.condition("ResourceUnderutilization"),
        await world.condition("WorkloadTerminatedEarly"),
        mi["metadata"].get("annotations"),
        mi["spec"]["replicas"],
    )


# --- a DynamoGraphDeployment (NVIDIA GPUs, DCGM's metric; pods reach the graph through their DCD) ----

DGD_RES = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dynamo-vllm-disagg.yaml"
DGD_NS = "team-a"
GRAPH = "llama-disagg"


@pytest.fixture
async def graph_world() -> AsyncIterator[World]:
    cluster = operator_rbac.cluster(agents=True, ready_delay=0.0)
    await cluster.start()
    assert cluster.gpu_metrics.url is not None
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    clock = FakeClock()
    manager = Manager(operator, leader_election=None, handle_signals=False, clock=clock)
    await graph_controller.setup(manager)
    await component_controller.setup(manager)
    monitor = monitor_mod.setup_controller(
        manager, MonitoringOptions(enabled=True, endpoint=cluster.gpu_metrics.url)
    )
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DGD_NS}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret"}}
    await client.create(SECRETS, {**secret, "stringData": {"HF_TOKEN": "hf_x"}}, namespace=DGD_NS)
    config = {"resourceMonitoring": {"terminateUnderutilized": True, "terminateUnderutilizedAfter": "30m"}}
    kaiwo = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
    }
    await client.create(KAIWO, {**kaiwo, "spec": config})
    await eventually(manager.cache_synced.is_set, 10, "caches synced")
    yield World(cluster, client, monitor, clock)
    manager.stop()
    assert await task == 0
    if monitor._session is not None:
        await monitor._session.close()
    await client.close()
    await cluster.stop()


def _graph() -> dict[str, Any]:
    graph = dict(
        next(yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")))
    )  # the graph (its Secret follows)
    for service in graph["spec"]["services"].values():
        service.pop("autoscaling", None)  # an HPA would own the worker's replicas
    return graph


async def _graph_condition(world: World, type_: str) -> dict[str, Any] | None:
    dgd = await world.client.get(DGD_RES, GRAPH, DGD_NS)
    return next((dict(c) for c in dgd.get("status", {}).get("conditions") or [] if c["type"] == type_), None)


async def _graph_pods(world: World) -> int:
    listed = await world.client.list(
        PODS, namespace=DGD_NS, label_selector=f"nvidia.com/dynamo-graph-deployment-name={GRAPH}"
    )
    return len(listed["items"])


async def test_a_dgd_is_scaled_to_zero_and_restored_with_its_ready_condition_kept(graph_world: World) -> None:
    world = graph_world
    await world.client.create(DGD_RES, _graph(), namespace=DGD_NS)

    async def successful() -> bool:
        dgd = await world.client.get(DGD_RES, GRAPH, DGD_NS)
        return dgd.get("status", {}).get("state") == "successful" and await _graph_pods(world) == 4

    await eventually(successful, 30, "graph successful")
    world.cluster.gpu_metrics.set(DGD_NS, None, 0)  # every GPU idle (the DCGM metric: nvidia.com/gpu pods)
    await world.poll_seen()
    low = await _graph_condition(world, "ResourceUnderutilization")
    assert low is not None and low["status"] == "True"
    assert "vllmdecodeworker" in low["message"] and "vllmprefillworker" in low["message"]
    ready = await _graph_condition(world, "Ready")
    assert ready is not None and ready["status"] == "True"  # the DGD controller's condition is untouched

    world.clock.advance(30 * 60)
    await world.poll_seen()
    dgd = await world.client.get(DGD_RES, GRAPH, DGD_NS)
    assert {name: s["replicas"] for name, s in dgd["spec"]["services"].items()} == {
        "Frontend": 0,
        "VllmPrefillWorker": 0,
        "VllmDecodeWorker": 0,
    }
    await eventually(lambda: _no_graph_pods(world), 30, "graph pods gone")
    # The DGD controller reports the scaled-down graph and keeps the monitor's conditions.
    await eventually(lambda: _graph_condition(world, "WorkloadTerminatedEarly"), 5, "terminated condition")
    await eventually(successful_at_zero(world), 30, "graph settled at zero")
    terminated = await _graph_condition(world, "WorkloadTerminatedEarly")
    assert terminated is not None and terminated["status"] == "True"

    patch = {"metadata": {"annotations": {ANNOTATION_RESTORE: "true"}}}
    await world.client.patch(DGD_RES, GRAPH, patch, namespace=DGD_NS)

    async def restore_seen() -> bool:
        cached = world.monitor.dgds.get(f"{DGD_NS}/{GRAPH}")
        return bool(cached and ANNOTATION_RESTORE in (cached["metadata"].get("annotations") or {}))

    await eventually(restore_seen, 5, "restore annotation in the cache")
    await world.poll_seen()
    dgd = await world.client.get(DGD_RES, GRAPH, DGD_NS)
    assert {name: s["replicas"] for name, s in dgd["spec"]["services"].items()} == {
        "Frontend": 1,
        "VllmPrefillWorker": 2,
        "VllmDecodeWorker": 1,
    }
    await eventually(successful, 30, "graph successful again")
    restored = await _graph_condition(world, "WorkloadTerminatedEarly")
    assert restored is not None and restored["status"] == "False"


async def _no_graph_pods(world: World) -> bool:
    return await _graph_pods(world) == 0


def successful_at_zero(world: World) -> Any:
    async def check() -> bool:
        dgd = await world.client.get(DGD_RES, GRAPH, DGD_NS)
        return dgd.get("status", {}).get("state") == "successful"

    return check


async def test_the_runnable_polls_on_its_interval_and_stops(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=1), namespace=NS)
    await _up(world, 1)
    world.monitor.options = MonitoringOptions(
        enabled=True, endpoint=world.monitor.options.endpoint, interval=0.01
    )
    stop = asyncio.Event()
    task = asyncio.create_task(world.monitor.run(stop))
    await eventually(lambda: world.monitor.polls >= 3, 10, "three polls")
    stop.set()
    await asyncio.wait_for(task, 5)
    assert world.monitor._session is None  # closed on the way out
    condition = await world.condition("ResourceUnderutilization")
    assert condition is not None and condition["status"] == "False"


async def test_an_unreadable_endpoint_changes_nothing(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=1), namespace=NS)
    await _up(world, 1)
    world.cluster.gpu_metrics.set(NS, None, 0)
    await world.poll_seen()
    before = await _monitor_state(world)
    world.monitor.options = MonitoringOptions(enabled=True, endpoint="http://127.0.0.1:9/metrics", interval=1)
    world.clock.advance(7 * 24 * 3600)
    await world.poll_seen()
    assert await _monitor_state(world) == before
    assert world.monitor._failing

"""DynamoComponentDeployments end to end on the embedded cluster: the DCD controller, the simulated
Deployment/ReplicaSet/LeaderWorkerSet controllers, kube-scheduler, Volcano gang scheduler and kubelet.

DCDs are created directly (no DGD controller). The default fleet has 2 H100 nodes with 8 GPUs each.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiplane.controllers.dynamo import component_controller
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import (
    CRDS,
    DEPLOYMENTS,
    EVENTS,
    HPAS,
    INGRESSES,
    LEADERWORKERSETS,
    NAMESPACES,
    NODES,
    PDBS,
    PODGROUPS,
    PODS,
    SERVICES,
    Resource,
    resource_for,
)
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration import operator_rbac
from tests.polling import eventually
from tests.settle import events_written

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
NS = "llm"
Obj = dict[str, Any]


def frontend(name: str = "fe", *, replicas: int = 2, image: str = "dynamo:1", **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "componentType": "frontend",
            "serviceName": "Frontend",
            "replicas": replicas,
            "extraPodSpec": {"mainContainer": {"image": image}},
            **spec,
        },
    }


def worker(
    name: str = "dec", *, replicas: int = 2, nodes: int | None = None, gpus: str | None = "4", **spec: Any
) -> Obj:
    body: Obj = {
        "componentType": "worker",
        "serviceName": "Decode",
        "replicas": replicas,
        "extraPodSpec": {"mainContainer": {"image": "vllm:1", "args": ["python3 -m dynamo.vllm --model m"]}},
        **spec,
    }
    if gpus is not None:
        body["resources"] = {"limits": {"gpu": gpus}}
    if nodes is not None:
        body["multinode"] = {"nodeCount": nodes}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient
    #: (observedGeneration, status, reason) of every Available condition the DCDs were written with.
    seen: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    manager: Manager | None = None

    def record(self, event: Event) -> None:
        if event.obj.get("kind") != "DynamoComponentDeployment":
            return
        for cond in (event.obj.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Available":
                entry = (int(cond.get("observedGeneration") or 0), cond["status"], cond["reason"])
                history = self.seen.setdefault(event.obj["metadata"]["name"], [])
                if not history or history[-1] != entry:
                    history.append(entry)

    async def dcd(self, name: str) -> Obj:
        return await self.client.get(DCD, name, NS)

    async def available(self, name: str) -> Obj | None:
        dcd = await self.dcd(name)
        for cond in (dcd.get("status") or {}).get("conditions") or []:
            if (
                cond["type"] == "Available"
                and cond["status"] == "True"
                and cond.get("observedGeneration") == dcd["metadata"]["generation"]
            ):
                return dcd
        return None

    async def names(self, res: Resource) -> list[str]:
        return sorted(o["metadata"]["name"] for o in (await self.client.list(res, namespace=NS))["items"])


async def _start(
    options: DynamoOptions, *, without_lws: bool = False
) -> tuple[World, Manager, asyncio.Task[int]]:
    cluster = operator_rbac.cluster(agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    if without_lws:
        await client.delete(CRDS, "leaderworkersets.leaderworkerset.x-k8s.io")
        await eventually(lambda: _not_served(client), 10, "LeaderWorkerSet API gone")
    world = World(cluster, client, operator)
    cluster.server.store.subscribe(world.record)
    manager = Manager(operator, leader_election=None, handle_signals=False)
    manager.set_options(options)
    world.manager = manager
    await component_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return world, manager, task


async def _not_served(client: InMemoryKubeClient) -> bool:
    return not await client.served(LEADERWORKERSETS)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w, manager, task = await _start(DynamoOptions(ingress_class="nginx", ingress_host_suffix="example.com"))
    yield w
    manager.stop()
    assert await task == 0
    w.cluster.server.store.unsubscribe(w.record)
    await w.client.close()
    await w.cluster.stop()


async def test_frontend_gets_deployment_service_and_ingress_and_becomes_available(world: World) -> None:
    await world.client.create(DCD, frontend(ingress={"enabled": True, "host": "chat"}), namespace=NS)
    dcd = await eventually(lambda: world.available("fe"), 30, "frontend Available")
    assert await world.names(DEPLOYMENTS) == ["fe"]
    assert await world.names(SERVICES) == ["fe"]
    ingress = await world.client.get(INGRESSES, "fe", NS)
    assert ingress["spec"]["rules"][0]["host"] == "chat.example.com"
    svc = await world.client.get(SERVICES, "fe", NS)
    assert svc["spec"]["selector"] == {"nvidia.com/selector": "fe"}
    pods = (await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/selector=fe"))["items"]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    status = dcd["status"]
    assert (status["replicas"], status["readyReplicas"]) == (2, 2)
    assert status["labelSelector"] == "nvidia.com/selector=fe"
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["DynamoComponentReady"]["status"] == "True"
    assert conds["Available"]["reason"] == "DeploymentReady"
    assert world.seen["fe"][0][1] != "True"  # never Available before its pods were
    assert world.seen["fe"][-1][1:] == ("True", "DeploymentReady")
    deploy = await world.client.get(DEPLOYMENTS, "fe", NS)
    assert deploy["metadata"]["ownerReferences"][0]["uid"] == dcd["metadata"]["uid"]
    assert "finalizers" not in dcd["metadata"]  # no etcd endpoints, no finalizer
    events = await world.client.list(
        EVENTS, NS, field_selector="involvedObject.name=fe,reason=DeploymentReady"
    )
    assert events["items"]


async def test_a_worker_gets_no_service_and_an_image_change_gates_availability(world: World) -> None:
    await world.client.create(DCD, worker(gpus="1"), namespace=NS)
    await eventually(lambda: world.available("dec"), 30, "worker Available")
    assert await world.names(SERVICES) == []
    await world.client.patch(
        DCD, "dec", {"spec": {"extraPodSpec": {"mainContainer": {"image": "vllm:2"}}}}, namespace=NS
    )
    dcd = await eventually(lambda: world.available("dec"), 30, "worker Available after the image change")
    generation = dcd["metadata"]["generation"]
    at_new = [entry for entry in world.seen["dec"] if entry[0] == generation]
    assert at_new[0][1] == "False" and at_new[0][2] == "DeploymentNotReady"  # never True before rolling
    assert at_new[-1][1] == "True"
    pods = (await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/selector=dec"))["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert live and all(p["spec"]["containers"][0]["image"] == "vllm:2" for p in live)


async def test_scale_subresource_changes_the_deployment(world: World) -> None:
    await world.client.create(DCD, frontend(replicas=1), namespace=NS)
    await eventually(lambda: world.available("fe"), 30, "frontend Available")
    scale = await world.client.get(DCD, "fe", NS, subresource="scale")
    assert scale["status"]["selector"] == "nvidia.com/selector=fe"
    await world.client.patch(DCD, "fe", {"spec": {"replicas": 3}}, namespace=NS, subresource="scale")

    async def three() -> bool:
        deploy = await world.client.get(DEPLOYMENTS, "fe", NS)
        dcd = await world.available("fe")
        return deploy["spec"]["replicas"] == 3 and dcd is not None and dcd["status"]["readyReplicas"] == 3

    await eventually(three, 30, "Deployment scaled to 3 and ready")


async def test_hpa_gets_behavior_owns_replicas_and_goes_when_disabled(world: World) -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 30}}
    auto = {"enabled": True, "minReplicas": 1, "maxReplicas": 5, "behavior": behavior}
    await world.client.create(DCD, worker(replicas=1, gpus="1", autoscaling=auto), namespace=NS)
    await eventually(lambda: world.available("dec"), 30, "worker Available")
    hpa = await world.client.get(HPAS, "dec", NS)
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 30
    assert hpa["spec"]["maxReplicas"] == 5
    # "The HPA" scales the Deployment: the controller must not put it back.
    await world.client.patch(DEPLOYMENTS, "dec", {"spec": {"replicas": 2}}, namespace=NS)

    async def two_ready() -> bool:
        dcd = await world.available("dec")
        return dcd is not None and dcd["status"].get("readyReplicas") == 2

    await eventually(two_ready, 30, "DCD reports the HPA's 2 replicas ready")
    assert (await world.client.get(DEPLOYMENTS, "dec", NS))["spec"]["replicas"] == 2
    # A template change while the HPA owns replicas keeps its count.
    await world.client.patch(
        DCD, "dec", {"spec": {"extraPodSpec": {"mainContainer": {"image": "vllm:2"}}}}, namespace=NS
    )
    await eventually(lambda: world.available("dec"), 30, "rolled out")
    deploy = await world.client.get(DEPLOYMENTS, "dec", NS)
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm:2"
    await world.client.patch(DCD, "dec", {"spec": {"autoscaling": {"enabled": False}}}, namespace=NS)

    async def hpa_gone() -> bool:
        return await world.names(HPAS) == []

    await eventually(hpa_gone, 30, "HPA deleted")
    # Without autoscaling the DCD's replicas rule again.
    await eventually(lambda: _deployment_replicas(world, "dec", 1), 30, "Deployment back to spec.replicas")


async def _deployment_replicas(world: World, name: str, want: int) -> bool:
    return bool((await world.client.get(DEPLOYMENTS, name, NS))["spec"]["replicas"] == want)


async def test_multinode_makes_an_lws_and_podgroup_per_replica_and_removes_surplus(world: World) -> None:
    await world.client.create(DCD, worker(nodes=2, replicas=2), namespace=NS)
    dcd = await eventually(lambda: world.available("dec"), 60, "multinode worker Available")
    assert {c["reason"] for c in dcd["status"]["conditions"]} == {"AllLeaderWorkerSetsReady"}
    assert (dcd["status"]["replicas"], dcd["status"]["readyReplicas"]) == (2, 2)
    assert await world.names(LEADERWORKERSETS) == ["dec-0", "dec-1"]
    assert await world.names(PODGROUPS) == ["dec-0", "dec-1"]
    assert await world.names(PDBS) == ["dec-0", "dec-1"]  # a budget per replica
    assert await world.names(DEPLOYMENTS) == []
    lws = await world.client.get(LEADERWORKERSETS, "dec-1", NS)
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    pg = await world.client.get(PODGROUPS, "dec-1", NS)
    assert pg["spec"]["minMember"] == 2
    pods = (await world.client.list(PODS, namespace=NS, label_selector="instance-id=1"))["items"]
    assert sorted(p["metadata"]["labels"]["role"] for p in pods) == ["leader", "worker"]
    assert all(p["spec"]["schedulerName"] == "volcano" for p in pods)
    await world.client.patch(DCD, "dec", {"spec": {"replicas": 1}}, namespace=NS)

    async def one() -> bool:
        return (
            await world.names(LEADERWORKERSETS) == ["dec-0"]
            and await world.names(PODGROUPS) == ["dec-0"]
            and await world.names(PDBS) == ["dec-0"]
        )

    await eventually(one, 30, "surplus LWS, PodGroup and replica budget deleted")
    await eventually(lambda: world.available("dec"), 30, "Available at 1 replica")


async def test_a_spec_the_controller_cannot_build_is_reported_without_children(world: World) -> None:
    await world.client.create(DCD, worker(nodes=2, gpus=None), namespace=NS)

    async def reported() -> Obj | None:
        dcd = await world.dcd("dec")
        conds = {c["type"]: c for c in (dcd.get("status") or {}).get("conditions") or []}
        return conds.get("Available") if conds.get("Available", {}).get("status") == "False" else None

    cond = await eventually(reported, 30, "Available=False")
    assert cond["reason"] == "InvalidSpec" and "spec.resources.limits.gpu" in cond["message"]
    await eventually(lambda: _has_events(world, "dec", "InvalidSpec"), 10, "Warning Event")
    assert await world.names(LEADERWORKERSETS) == [] and await world.names(DEPLOYMENTS) == []


async def _has_events(world: World, name: str, reason: str) -> bool:
    listed = await world.client.list(EVENTS, NS, field_selector=f"involvedObject.name={name},reason={reason}")
    return bool(listed["items"])


async def test_a_pdb_guards_drains_as_the_rollout_does_and_goes_when_multinode(world: World) -> None:
    await world.client.create(DCD, worker(replicas=2, gpus="1"), namespace=NS)
    dcd = await eventually(lambda: world.available("dec"), 30, "worker Available")
    pdb = await world.client.get(PDBS, "dec", NS)
    assert pdb["spec"] == {
        "selector": {"matchLabels": {"nvidia.com/selector": "dec"}},
        "maxUnavailable": "25%",
    }
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == dcd["metadata"]["uid"]

    async def allowed(want: int) -> bool:
        status = (await world.client.get(PDBS, "dec", NS)).get("status") or {}
        got = (status.get("expectedPods"), status.get("currentHealthy"), status.get("disruptionsAllowed"))
        return got == (2, 2 if want else 1, want)

    # 25% of 2 pods rounds up to 1: one pod may go at a time.
    await eventually(lambda: allowed(1), 30, "PDB status: 1 disruption allowed")
    # A drain: cordon every node so the evicted pod's replacement stays Pending, then evict both pods.
    for node in await world.names(NODES):
        await world.client.patch(NODES, node, {"spec": {"unschedulable": True}})
    pods = (await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/selector=dec"))["items"]
    first, second = sorted(p["metadata"]["name"] for p in pods)
    await world.client.evict(first, NS)
    with pytest.raises(ApiError) as refused:
        await world.client.evict(second, NS)
    assert refused.value.status == 429
    await eventually(lambda: allowed(0), 30, "PDB status: no disruption allowed while one pod is down")
    # Multinode replicas are gangs: the per-pod budget goes with the Deployment, a budget per replica
    # (LeaderWorkerSet) takes its place.
    await world.client.patch(DCD, "dec", {"spec": {"multinode": {"nodeCount": 2}}}, namespace=NS)

    async def pdb_replaced() -> bool:
        return await world.names(PDBS) == ["dec-0", "dec-1"] and await world.names(DEPLOYMENTS) == []

    await eventually(pdb_replaced, 30, "per-pod PDB and Deployment replaced by replica budgets")


async def test_zero_writes_after_convergence(world: World) -> None:
    await world.client.create(DCD, frontend(ingress={"enabled": True, "host": "chat"}), namespace=NS)
    await world.client.create(DCD, worker(nodes=2, replicas=1), namespace=NS)
    await eventually(lambda: world.available("fe"), 30, "frontend Available")
    await eventually(lambda: world.available("dec"), 60, "multinode Available")
    assert world.manager is not None
    await events_written(world.manager)
    world.operator.reset_counts()
    end = time.monotonic() + 5
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
    assert world.operator.writes == 0


async def test_multinode_without_lws_reports_no_orchestrator() -> None:
    w, manager, task = await _start(DynamoOptions(), without_lws=True)
    try:
        await w.client.create(DCD, worker(nodes=2), namespace=NS)

        async def reported() -> Obj | None:
            dcd = await w.dcd("dec")
            for cond in (dcd.get("status") or {}).get("conditions") or []:
                if cond["type"] == "Available" and cond["status"] == "False":
                    return cond
            return None

        cond = await eventually(reported, 30, "Available=False")
        assert cond["reason"] == "NoMultinodeOrchestrator"
        assert "no multinode orchestrator available" in cond["message"]
        with pytest.raises(ApiError):
            await w.client.list(LEADERWORKERSETS, namespace=NS)
    finally:
        manager.stop()
        assert await task == 0
        w.cluster.server.store.unsubscribe(w.record)
        await w.client.close()
        await w.cluster.stop()


async def test_with_etcd_the_finalizer_deletes_the_component_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, str]] = []

    async def record(endpoints: str, dynamo_namespace: str, service_name: str) -> None:
        calls.append((endpoints, dynamo_namespace, service_name))

    monkeypatch.setattr(component_controller.etcd, "delete_component_keys", record)
    w, manager, task = await _start(DynamoOptions(etcd_endpoints="etcd:2379"))
    try:
        await w.client.create(DCD, frontend(dynamoNamespace="dyn-ns"), namespace=NS)

        async def finalized() -> bool:
            return "nvidia.com/finalizer" in ((await w.dcd("fe"))["metadata"].get("finalizers") or [])

        await eventually(finalized, 30, "finalizer added")
        await w.client.delete(DCD, "fe", namespace=NS)

        async def gone() -> bool:
            try:
                await w.dcd("fe")
            except ApiError as exc:
                return exc.not_found
            return False

        await eventually(gone, 30, "DCD deleted")
        assert calls == [("etcd:2379", "dyn-ns", "Frontend")]
    finally:
        manager.stop()
        assert await task == 0
        w.cluster.server.store.unsubscribe(w.record)
        await w.client.close()
        await w.cluster.stop()


@dataclass
class ReplicaWatch:
    """After every committed pod change: how many replicas of a multinode DCD are unavailable (a
    replica is available with all its pods live, Running and Ready). Counts from ``armed`` on."""

    cluster: EmbeddedCluster
    size: int
    armed: bool = False
    worst: int = 0
    changes: int = 0

    def unavailable(self) -> int:
        groups: dict[str, list[Obj]] = {}
        for pod in self.cluster.server.store.items("/pods", NS):
            lws = pod["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name")
            if lws and not pod["metadata"].get("deletionTimestamp"):
                groups.setdefault(lws, []).append(pod)
        names = [
            o["metadata"]["name"]
            for o in self.cluster.server.store.items("leaderworkerset.x-k8s.io/leaderworkersets", NS)
        ]
        return sum(1 for n in names if not _group_available(groups.get(n, []), self.size))

    def __call__(self, event: Event) -> None:
        if event.key != "/pods" or not self.armed:
            return
        self.changes += 1
        self.worst = max(self.worst, self.unavailable())


def _group_available(pods: list[Obj], size: int) -> bool:
    def ready(pod: Obj) -> bool:
        status = pod.get("status") or {}
        conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return status.get("phase") == "Running" and conds.get("Ready") == "True"

    return len(pods) == size and all(ready(p) for p in pods)


async def _kubectl(kubeconfig: Path, *args: str) -> str:
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


async def _gpu_nodes(world: World) -> list[str]:
    nodes = (await world.client.list(NODES))["items"]
    return sorted(
        n["metadata"]["name"]
        for n in nodes
        if "nvidia.com/gpu" in (n.get("status") or {}).get("capacity", {})
    )


async def test_kubectl_drain_takes_one_multinode_replica_at_a_time(world: World, tmp_path: Path) -> None:
    """Both replicas of a multinode DCD stand on one node; the real ``kubectl drain`` of that node
    (Eviction API, retrying on 429) takes one replica at a time, never two, and finishes."""
    # Evicted pods stay Terminating a moment, as behind a real kubelet: kubectl retries an eviction by
    # pod name, and an LWS group is recreated under the same names.
    assert world.cluster.agents is not None
    world.cluster.agents.kubelet.termination_delay = 1.0
    crowded, spare = await _gpu_nodes(world)
    await world.client.patch(NODES, spare, {"spec": {"unschedulable": True}})
    await world.client.create(DCD, worker(nodes=2, replicas=2, gpus="2"), namespace=NS)
    dcd = await eventually(lambda: world.available("dec"), 60, "multinode worker Available")
    pods = (await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/selector=dec"))["items"]
    assert {p["spec"]["nodeName"] for p in pods} == {crowded} and len(pods) == 4
    for name in ("dec-0", "dec-1"):
        pdb = await world.client.get(PDBS, name, NS)
        assert pdb["spec"] == {
            "selector": {
                "matchLabels": {
                    "leaderworkerset.sigs.k8s.io/name": name,
                    "leaderworkerset.sigs.k8s.io/group-index": "0",
                }
            },
            "minAvailable": 2,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        }
        assert pdb["metadata"]["ownerReferences"][0]["uid"] == dcd["metadata"]["uid"]
    await world.client.patch(NODES, spare, {"spec": {"unschedulable": None}})

    watch = ReplicaWatch(world.cluster, size=2, armed=True)
    world.cluster.server.store.subscribe(watch)
    try:
        kubeconfig = tmp_path / "kubeconfig"
        world.cluster.write_kubeconfig(kubeconfig)
        started = time.monotonic()
        await _kubectl(
            kubeconfig, "drain", crowded, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
        )
        drained_in = time.monotonic() - started

        async def rebuilt() -> bool:
            pods = (await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/selector=dec"))[
                "items"
            ]
            budgets = [await world.client.get(PDBS, n, NS) for n in ("dec-0", "dec-1")]
            return (
                await world.available("dec") is not None
                and {p["spec"].get("nodeName") for p in pods} == {spare}
                and all(b["spec"]["minAvailable"] == 2 for b in budgets)
            )

        await eventually(rebuilt, 30, "both replicas ready on the spare node, budgets protected again")
    finally:
        world.cluster.server.store.unsubscribe(watch)
    assert watch.changes > 0 and watch.worst == 1, (watch.worst, watch.changes)
    assert drained_in < 30

    # The last DisruptionProtected Event is posted after the budget write "rebuilt" saw: wait for it.
    async def both_recorded() -> dict[str, Any] | None:
        listed = await world.client.list(EVENTS, NS, field_selector="involvedObject.name=dec")
        reasons = [e["reason"] for e in listed["items"]]
        return (
            listed
            if reasons.count("DisruptionAllowed") >= 2 and reasons.count("DisruptionProtected") >= 2
            else None
        )

    listed = await eventually(both_recorded, 10, "two DisruptionAllowed and two DisruptionProtected Events")
    reasons = [e["reason"] for e in listed["items"]]
    assert reasons.count("DisruptionAllowed") == 2 and reasons.count("DisruptionProtected") == 2
    held = [e for e in listed["items"] if e["reason"] == "DisruptionHeld"]
    assert held and held[0]["type"] == "Warning"
    assert f"{NS}/dec-1" in held[0]["message"] and crowded in held[0]["message"]
    assert "llm/dec" in held[0]["message"]
    dcd = await world.dcd("dec")
    held_now = next(c for c in dcd["status"]["conditions"] if c["type"] == "DisruptionHeld")
    assert (held_now["status"], held_now["reason"]) == ("False", "NoDisruptionHeld")
    # Steady state: nothing more to write.
    await asyncio.sleep(0.5)  # let in-flight events land before counting
    world.operator.reset_counts()
    end = time.monotonic() + 3
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
    assert world.operator.writes == 0

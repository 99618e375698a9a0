"""ModelInfer end to end on the embedded cluster: the controller, the simulated kube-scheduler, Volcano
gang scheduler and kubelet.

Availability and group counts during rollouts are checked on every committed pod change (a store
listener), not by sampling, so a single moment below ``replicas - maxUnavailable`` fails the test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, NODES, PDBS, PODGROUPS, PODS, SERVICES, resource_for
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.polling import eventually
from tests.settle import events_written

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
NS = "serving"
NAME_LABEL = "modelinfer.volcano.sh/name"
GROUP_LABEL = "modelinfer.volcano.sh/group-name"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
POD_KEY = "/pods"
PODS_PER_GROUP = 6  # prefill: 1 x (entry + 1 worker); decode: 2 x (entry + 1 worker)


def modelinfer(
    name: str = "pd",
    *,
    replicas: int = 3,
    image: str = "vllm:v1",
    gpus: int = 1,
    policy: str = "RoleRecreate",
    max_unavailable: int | str = 1,
    max_surge: int | str = 0,
    gang: bool = True,
) -> dict[str, Any]:
    def template(phase: str) -> dict[str, Any]:
        return {
            "metadata": {"labels": {"phase": phase}},
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": image,
                        "resources": {"limits": {"amd.com/gpu": str(gpus)}, "requests": {"cpu": "1"}},
                    }
                ]
            },
        }

    spec: dict[str, Any] = {
        "replicas": replicas,
        "schedulerName": "volcano" if gang else "default-scheduler",
        "recoveryPolicy": policy,
        "rolloutStrategy": {
            "type": "InferGroupRollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": max_unavailable, "maxSurge": max_surge},
        },
        "template": {
            "roles": [
                {
                    "name": "prefill",
                    "replicas": 1,
                    "workerReplicas": 1,
                    "entryTemplate": template("prefill"),
                    "workerTemplate": template("prefill"),
                },
                {
                    "name": "decode",
                    "replicas": 2,
                    "workerReplicas": 1,
                    "entryTemplate": template("decode"),
                    "workerTemplate": template("decode"),
                },
            ]
        },
    }
    if gang:
        spec["template"]["gangSchedule"] = {"minRoleReplicas": {"prefill": 1, "decode": 2}}
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name},
        "spec": spec,
    }


@dataclass
class GroupWatch:
    """Per committed pod change: groups that exist and groups fully Running and Ready."""

    cluster: EmbeddedCluster
    mi: str
    min_available: int | None = None
    max_total: int = 0
    samples: int = 0
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __call__(self, event: Event) -> None:
        if event.key != POD_KEY:
            return
        meta = event.obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(NAME_LABEL) != self.mi:
            return
        if event.type == DELETED:
            self.pods.pop(meta["name"], None)
        else:
            self.pods[meta["name"]] = event.obj
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            groups.setdefault(pod["metadata"]["labels"][GROUP_LABEL], []).append(pod)
        available = sum(
            1
            for members in groups.values()
            if len(members) == PODS_PER_GROUP
            and all(_ready(p) and not p["metadata"].get("deletionTimestamp") for p in members)
        )
        self.samples += 1
        self.max_total = max(self.max_total, len(groups))
        self.min_available = available if self.min_available is None else min(self.min_available, available)

    def reset(self) -> None:
        self.min_available = None
        self.max_total = 0
        self.samples = 0


def _ready(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient
    manager: Manager

    async def mi(self, name: str = "pd") -> dict[str, Any]:
        return await self.client.get(MI, name, NS)

    async def condition(self, type_: str, name: str = "pd") -> str | None:
        for c in (await self.mi(name)).get("status", {}).get("conditions") or []:
            if c["type"] == type_:
                return str(c["status"])
        return None

    async def pods(self, name: str = "pd") -> list[dict[str, Any]]:
        return (await self.client.list(PODS, namespace=NS, label_selector=f"{NAME_LABEL}={name}"))["items"]

    async def converged(self, name: str = "pd", replicas: int | None = None) -> bool:
        mi = await self.mi(name)
        status = mi.get("status") or {}
        want = mi["spec"]["replicas"] if replicas is None else replicas
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        pods = await self.pods(name)
        return (
            status.get("observedGeneration") == mi["metadata"]["generation"]
            and status.get("availableReplicas") == want
            and status.get("updatedReplicas") == want
            and status.get("replicas") == want
            and conditions.get("Available") == "True"
            and conditions.get("UpdateInProgress") != "True"
            and len(pods) == want * PODS_PER_GROUP
            and all(_ready(p) for p in pods)
        )

    async def wait_converged(self, name: str = "pd", timeout: float = 30.0) -> None:
        await eventually(lambda: self.converged(name), timeout, f"ModelInfer {name} converged")


def _fleet(nodes: int) -> Fleet:
    return Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=nodes,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
            )
        ]
    )


@asynccontextmanager
async def running_world(nodes: int) -> AsyncIterator[World]:
    """The embedded cluster with ``nodes`` MI300X nodes, the ModelInfer controller running as the
    operator, and the test namespace; shared by every ModelInfer e2e module."""
    cluster = operator_rbac.cluster(fleet=_fleet(nodes), agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    manager = Manager(operator, leader_election=None, handle_signals=False)
    await modelinfer_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield World(cluster, client, operator, manager)
    manager.stop()
    assert await task == 0
    await client.close()
    await cluster.stop()


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    async with running_world(getattr(request, "param", 5)) as built:
        yield built


async def test_disaggregated_groups_come_up_with_their_objects(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=3), namespace=NS)
    await world.wait_converged()
    pods = await world.pods()
    names = sorted(p["metadata"]["name"] for p in pods)
    assert names == sorted(
        f"pd-{g}-{role}-{r}-{k}"
        for g in range(3)
        for role, rs in (("prefill", 1), ("decode", 2))
        for r in range(rs)
        for k in (0, 1)
    )
    worker = next(p for p in pods if p["metadata"]["name"] == "pd-1-decode-1-1")
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert env["GROUP_SIZE"] == "2" and env["WORKER_INDEX"] == "1"
    assert env["ENTRY_ADDRESS"] == f"pd-1-decode-1-0.{NS}"
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pd-1"
    services = (await world.client.list(SERVICES, namespace=NS))["items"]
    assert sorted(s["metadata"]["name"] for s in services) == sorted(
        f"pd-{g}-{role}-{r}-0"
        for g in range(3)
        for role, rs in (("prefill", 1), ("decode", 2))
        for r in range(rs)
    )
    svc = next(s for s in services if s["metadata"]["name"] == "pd-1-decode-1-0")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"]["modelinfer.volcano.sh/entry"] == "true"
    groups = (await world.client.list(PODGROUPS, namespace=NS))["items"]
    assert sorted(g["metadata"]["name"] for g in groups) == ["pd-0", "pd-1", "pd-2"]
    assert all(g["spec"]["minMember"] == 6 and g["status"]["phase"] == "Running" for g in groups)
    mi = await world.mi()
    assert mi["status"]["labelSelector"].startswith(f"{NAME_LABEL}=pd")


async def test_zero_writes_after_convergence(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=2), namespace=NS)
    await world.wait_converged()

    async def budgets() -> bool:  # the groups' PodDisruptionBudgets exist and are counted too
        items = (await world.client.list(PDBS, namespace=NS))["items"]
        return sorted(p["metadata"]["name"] for p in items) == ["pd-0", "pd-1"]

    await eventually(budgets, 10, "one PodDisruptionBudget per group")
    await events_written(world.manager)
    world.operator.reset_counts()
    end = time.monotonic() + 10
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
    assert world.operator.writes == 0


@pytest.mark.parametrize(("max_unavailable", "max_surge"), [(1, 0), (0, 1)])
async def test_image_change_rolls_out_within_the_limits(
    world: World, max_unavailable: int, max_surge: int
) -> None:
    await world.client.create(
        MI, modelinfer(replicas=3, max_unavailable=max_unavailable, max_surge=max_surge), namespace=NS
    )
    await world.wait_converged()
    watch = GroupWatch(world.cluster, "pd")
    for pod in await world.pods():
        watch.pods[pod["metadata"]["name"]] = pod
    world.cluster.server.store.subscribe(watch)
    before = (await world.mi())["status"]["updateRevision"]
    await world.client.patch(
        MI,
        "pd",
        {
            "spec": {
                "template": {
                    "roles": [
                        modelinfer(image="vllm:v2")["spec"]["template"]["roles"][0],
                        modelinfer(image="vllm:v2")["spec"]["template"]["roles"][1],
                    ]
                }
            }
        },
        namespace=NS,
    )
    await world.wait_converged(timeout=60)
    world.cluster.server.store.unsubscribe(watch)
    mi = await world.mi()
    assert mi["status"]["updateRevision"] != before
    assert mi["status"]["currentRevision"] == mi["status"]["updateRevision"]
    assert all(p["spec"]["containers"][0]["image"] == "vllm:v2" for p in await world.pods())
    assert watch.samples > 0
    assert watch.min_available is not None and watch.min_available >= 3 - max_unavailable
    assert watch.max_total <= 3 + max_surge
    groups = (await world.client.list(PODGROUPS, namespace=NS))["items"]
    assert sorted(g["metadata"]["name"] for g in groups) == ["pd-0", "pd-1", "pd-2"]  # surge PodGroup gone


@pytest.mark.parametrize("policy", ["RoleRecreate", "InferGroupRecreate", "None"])
async def test_pod_deletion_under_each_recovery_policy(world: World, policy: str) -> None:
    await world.client.create(MI, modelinfer(replicas=2, policy=policy), namespace=NS)
    await world.wait_converged()
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}
    await world.client.delete(PODS, "pd-1-decode-0-1", namespace=NS)
    await world.wait_converged()
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}
    assert set(after) == set(uids)
    replaced = {name for name in uids if uids[name] != after[name]}
    if policy == "RoleRecreate":
        assert replaced == {"pd-1-decode-0-0", "pd-1-decode-0-1"}
    elif policy == "InferGroupRecreate":
        assert replaced == {n for n in uids if n.startswith("pd-1-")}
    else:
        assert replaced == {"pd-1-decode-0-1"}


async def test_container_restart_recreates_the_role_replica(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=1), namespace=NS)
    await world.wait_converged()
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}
    world.cluster.agents.kubelet.restart_container(NS, "pd-0-prefill-0-1", not_ready_for=5.0)  # type: ignore[union-attr]

    async def replaced() -> bool:
        now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}
        return all(now.get(n) not in (None, uids[n]) for n in ("pd-0-prefill-0-0", "pd-0-prefill-0-1"))

    await eventually(replaced, 30, "prefill role replica recreated")
    await world.wait_converged()
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}
    assert all(now[n] == uids[n] for n in uids if "decode" in n)


async def test_scale_3_to_5_to_2(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=3), namespace=NS)
    await world.wait_converged()
    await world.client.patch(MI, "pd", {"spec": {"replicas": 5}}, namespace=NS)
    await world.wait_converged()
    groups = {p["metadata"]["labels"][GROUP_LABEL] for p in await world.pods()}
    assert groups == {f"pd-{g}" for g in range(5)}
    await world.client.patch(MI, "pd", {"spec": {"replicas": 2}}, namespace=NS)
    await world.wait_converged()
    groups = {p["metadata"]["labels"][GROUP_LABEL] for p in await world.pods()}
    assert groups == {"pd-0", "pd-1"}  # highest ordinals removed
    podgroups = (await world.client.list(PODGROUPS, namespace=NS))["items"]
    assert sorted(g["metadata"]["name"] for g in podgroups) == ["pd-0", "pd-1"]


@pytest.mark.parametrize("world", [2], indirect=True)
async def test_a_gang_that_does_not_fit_stays_fully_pending_until_capacity_appears(world: World) -> None:
    # 2 nodes x 8 GPUs; each group needs 6 pods x 4 GPUs = 24 GPUs: the first group cannot fit.
    await world.client.create(MI, modelinfer(replicas=1, gpus=4), namespace=NS)

    async def pending_all() -> bool:
        pods = await world.pods()
        return len(pods) == 6 and all(
            any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (p.get("status") or {}).get("conditions") or []
            )
            for p in pods
        )

    await eventually(pending_all, 20, "all six pods reported unschedulable")
    assert all(not p["spec"].get("nodeName") for p in await world.pods())  # no partial group
    assert await world.condition("Available") == "False"
    # A third node: 24 GPUs, exactly the gang.
    node = await world.client.get(NODES, "mi300x-0")
    extra = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "mi300x-2",
            "labels": {**node["metadata"]["labels"], "kubernetes.io/hostname": "mi300x-2"},
        },
        "spec": {},
    }
    created = await world.client.create(NODES, extra)
    await world.client.patch(
        NODES, created["metadata"]["name"], {"status": node["status"]}, subresource="status"
    )
    await world.wait_converged(timeout=30)
    assert len({p["spec"]["nodeName"] for p in await world.pods()}) == 3


async def test_kubectl_scale_uses_the_scale_subresource(world: World, tmp_path: Path) -> None:
    await world.client.create(MI, modelinfer(replicas=1), namespace=NS)
    await world.wait_converged()
    kubeconfig = tmp_path / "kubeconfig"
    world.cluster.write_kubeconfig(kubeconfig)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            [KUBECTL, "-n", NS, *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "scaled" in await asyncio.to_thread(kubectl, "scale", "modelinfer/pd", "--replicas=2")
    await eventually(lambda: world.converged(replicas=2), 30, "scaled to 2")
    out = await asyncio.to_thread(kubectl, "get", "modelinfer", "pd")
    assert "pd" in out


async def test_a_node_going_not_ready_makes_its_groups_unavailable(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=2), namespace=NS)
    await world.wait_converged()
    node = next(
        p["spec"]["nodeName"] for p in await world.pods() if p["metadata"]["name"] == "pd-0-prefill-0-0"
    )
    uids = {p["metadata"]["uid"] for p in await world.pods()}
    kubelet = world.cluster.agents.kubelet  # type: ignore[union-attr]
    kubelet.set_node_ready(node, False)

    async def unavailable() -> bool:
        status = (await world.mi()).get("status") or {}
        return await world.condition("Available") == "False" and status.get("availableReplicas", 2) < 2

    await eventually(unavailable, 20, "Available=False after the node went NotReady")
    assert {p["metadata"]["uid"] for p in await world.pods()} == uids  # NotReady alone deletes nothing
    kubelet.set_node_ready(node, True)
    await world.wait_converged()


async def test_a_partition_protected_group_is_rebuilt_on_its_own_revision(world: World) -> None:
    body = modelinfer(replicas=3, policy="InferGroupRecreate")
    body["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 1
    await world.client.create(MI, body, namespace=NS)
    await world.wait_converged()
    roles = modelinfer(image="vllm:v2")["spec"]["template"]["roles"]
    await world.client.patch(MI, "pd", {"spec": {"template": {"roles": roles}}}, namespace=NS)

    async def images() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for p in await world.pods():
            out.setdefault(p["metadata"]["labels"][GROUP_LABEL], set()).add(
                p["spec"]["containers"][0]["image"]
            )
        return out

    async def partitioned() -> bool:
        mi = await world.mi()
        got = await images()
        return (
            got == {"pd-0": {"vllm:v1"}, "pd-1": {"vllm:v2"}, "pd-2": {"vllm:v2"}}
            and all(_ready(p) for p in await world.pods())
            and (mi.get("status") or {}).get("updatedReplicas") == 2
        )

    await eventually(partitioned, 60, "groups 1 and 2 updated, group 0 kept")
    # Group 0 fails: it is rebuilt whole (InferGroupRecreate) from the old template, not the new one.
    old_uids = {
        p["metadata"]["uid"] for p in await world.pods() if p["metadata"]["labels"][GROUP_LABEL] == "pd-0"
    }
    await world.client.delete(PODS, "pd-0-decode-1-0", namespace=NS)

    async def rebuilt() -> bool:
        pods = [p for p in await world.pods() if p["metadata"]["labels"][GROUP_LABEL] == "pd-0"]
        return (
            len(pods) == PODS_PER_GROUP
            and not ({p["metadata"]["uid"] for p in pods} & old_uids)
            and all(_ready(p) for p in pods)
        )

    await eventually(rebuilt, 30, "group 0 rebuilt")
    assert (await images())["pd-0"] == {"vllm:v1"}
    status = (await world.mi())["status"]
    assert status["currentRevision"] != status["updateRevision"]
    assert status["currentReplicas"] == 1 and status["updatedReplicas"] == 2

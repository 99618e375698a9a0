"""GPU partitioning end to end: 12 MI300X nodes + a control plane, the three controllers, the simulated
AMD GPU operator (device plugin, DCM) and kubelet, on the embedded cluster.

The rollout limits are checked on every committed NodePartitioning change (a store listener), not by
sampling, so a single moment over the limit fails the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, NODES, PDBS, PODS, resource_for
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.polling import eventually as poll

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
IN_PROGRESS = {"Draining", "Applying", "WaitingOperator", "Verifying"}
PRODUCT = "AMD_Instinct_MI300X_OAM"


def profile(name: str, dcm: str, gpus: str) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningProfile",
        "metadata": {"name": name},
        "spec": {
            "dcmProfileName": dcm,
            "targetSelector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
            "expectedResources": {"amd.com/gpu": gpus},
        },
    }


def plan(
    name: str, profile_name: str, *, max_parallel: int = 3, max_unavailable: int = 3, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {
            "rollout": {"maxParallel": max_parallel, "maxUnavailable": max_unavailable},
            "rules": [
                {
                    "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
                    "profileRef": {"name": profile_name},
                }
            ],
            **spec,
        },
    }


@dataclass
class LimitWatch:
    """Counts, after every committed change, NodePartitionings in progress and unavailable per plan."""

    cluster: EmbeddedCluster
    limits: dict[str, tuple[int, int]] = field(default_factory=dict)
    worst: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __call__(self, event: Event) -> None:
        if not event.key.endswith("/nodepartitionings"):
            return
        per_plan: dict[str, list[str]] = {}
        for np in self.cluster.server.store.items(event.key):
            owner = (np.get("spec", {}).get("planRef") or {}).get("name", "")
            per_plan.setdefault(owner, []).append((np.get("status") or {}).get("phase") or "Pending")
        for name, phases in per_plan.items():
            busy = sum(1 for p in phases if p in IN_PROGRESS)
            down = busy + sum(1 for p in phases if p == "Failed")
            prev = self.worst.get(name, (0, 0))
            self.worst[name] = (max(prev[0], busy), max(prev[1], down))


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    await poll(check, timeout)


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    manager: Manager
    limits: LimitWatch

    async def plan_phase(self, name: str) -> str | None:
        return ((await self.client.get(PLANS, name)).get("status") or {}).get("phase")

    async def allocatable(self) -> dict[str, str]:
        nodes = (await self.client.list(NODES, label_selector="aiplane.io/node-pool=mi300x"))["items"]
        return {n["metadata"]["name"]: n["status"]["allocatable"].get("amd.com/gpu", "0") for n in nodes}

    async def cordoned_or_tainted(self) -> list[str]:
        nodes = (await self.client.list(NODES))["items"]
        return [
            n["metadata"]["name"]
            for n in nodes
            if n["spec"].get("unschedulable")
            or any(t.get("key") == "amd-dcm" for t in n["spec"].get("taints") or [])
        ]


async def np_phase(world: World, name: str) -> str | None:
    try:
        np = await world.client.get(kinds.NODEPARTITIONINGS, name)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    return (np.get("status") or {}).get("phase")


@pytest.fixture
async def world() -> AsyncIterator[World]:
    fleet = Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=12,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
            ),
            NodePool(name="control", count=1, controlPlane=True),
        ]
    )
    cluster = operator_rbac.cluster(fleet=fleet, agents=True, ready_delay=0.0, dcm_delay=0.05)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    limits = LimitWatch(cluster)
    cluster.server.store.subscribe(limits)
    manager = Manager(
        operator_rbac.operator_client(cluster),
        leader_election=operator_rbac.leader_election(),
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    for setup in (profile_controller.setup, plan_controller.setup, node_controller.setup):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    for p in (profile("mi300x-cpx", "cpx", "64"), profile("mi300x-spx", "spx", "8")):
        await client.create(kinds.PARTITIONINGPROFILES, p)
    yield World(cluster, client, manager, limits)
    manager.stop()
    assert await task == 0
    await cluster.stop()


async def test_cpx_then_back_to_spx_under_limits_then_quiet(world: World) -> None:
    client = world.client
    await client.create(PLANS, plan("roll", "mi300x-cpx"))

    async def completed() -> bool:
        return await world.plan_phase("roll") == "Completed"

    await eventually(completed, timeout=90)
    assert set((await world.allocatable()).values()) == {"64"}
    assert await world.cordoned_or_tainted() == []
    assert world.limits.worst["roll"][0] <= 3 and world.limits.worst["roll"][1] <= 3
    assert world.limits.worst["roll"][0] >= 2  # it did run in parallel
    nps = (await client.list(kinds.NODEPARTITIONINGS))["items"]
    assert {n["spec"]["nodeName"] for n in nps} == {f"mi300x-{i}" for i in range(12)}  # not control-0

    await client.patch(
        PLANS,
        "roll",
        {
            "spec": {
                "rules": [
                    {
                        "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
                        "profileRef": {"name": "mi300x-spx"},
                    }
                ]
            }
        },
    )

    async def back_to_spx() -> bool:
        return await world.plan_phase("roll") == "Completed" and set(
            (await world.allocatable()).values()
        ) == {"8"}

    await eventually(back_to_spx, timeout=90)
    assert world.limits.worst["roll"][0] <= 3 and world.limits.worst["roll"][1] <= 3
    assert await world.cordoned_or_tainted() == []

    # Steady state: in the 10 s after convergence the operator writes nothing.
    client.reset_counts()
    await asyncio.sleep(10)  # a measurement window, not a wait for anything
    assert client.writes == 0, client.requests


async def test_a_failing_dcm_fails_one_node_and_the_plan_is_degraded(world: World) -> None:
    world.cluster.agents.amd.fail_nodes.add("mi300x-4")
    await world.client.create(PLANS, plan("degraded", "mi300x-cpx", max_parallel=3, max_unavailable=4))

    async def settled() -> bool:
        nps = (await world.client.list(kinds.NODEPARTITIONINGS))["items"]
        phases = [(n.get("status") or {}).get("phase") for n in nps]
        return len(phases) == 12 and all(p in ("Succeeded", "Failed") for p in phases)

    await eventually(settled, timeout=90)
    assert await world.plan_phase("degraded") == "Degraded"
    failed = [
        n
        for n in (await world.client.list(kinds.NODEPARTITIONINGS))["items"]
        if n["status"]["phase"] == "Failed"
    ]
    assert [n["spec"]["nodeName"] for n in failed] == ["mi300x-4"]
    assert await world.cordoned_or_tainted() == []  # the failed node was given back too


async def test_pause_holds_new_nodes_and_resume_completes(world: World) -> None:
    await world.client.create(
        PLANS, plan("paused", "mi300x-cpx", max_parallel=2, max_unavailable=2, paused=True)
    )

    async def paused() -> bool:
        return await world.plan_phase("paused") == "Paused"

    await eventually(paused)
    assert await world.cordoned_or_tainted() == []
    await world.client.patch(PLANS, "paused", {"spec": {"paused": False}})

    async def completed() -> bool:
        return await world.plan_phase("paused") == "Completed"

    await eventually(completed, timeout=90)
    assert world.limits.worst["paused"][0] <= 2


async def test_dry_run_touches_no_node(world: World) -> None:
    await world.client.create(PLANS, plan("dry", "mi300x-cpx", dryRun=True))

    async def skipped() -> bool:
        nps = (await world.client.list(kinds.NODEPARTITIONINGS))["items"]
        return len(nps) == 12 and all((n.get("status") or {}).get("phase") == "Skipped" for n in nps)

    await eventually(skipped)
    assert set((await world.allocatable()).values()) == {"8"}
    assert await world.cordoned_or_tainted() == []


async def test_a_pdb_holds_a_drain_until_relaxed(world: World) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guarded", "namespace": "default", "labels": {"app": "g"}},
        "spec": {"nodeName": "mi300x-0", "containers": [{"name": "c", "image": "x"}]},
    }
    await world.client.create(PODS, pod)
    await world.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "g"}}},
        },
    )

    async def running() -> bool:
        got = await world.client.get(PODS, "guarded", "default")
        return (got.get("status") or {}).get("phase") == "Running"

    await eventually(running)
    await world.client.create(PLANS, plan("pdb", "mi300x-cpx", max_parallel=1, max_unavailable=1))

    async def held() -> bool:
        if await np_phase(world, "pdb-mi300x-0") != "Draining":
            return False
        np = await world.client.get(kinds.NODEPARTITIONINGS, "pdb-mi300x-0")
        return (np.get("status") or {}).get("blockedBy") == "default/g"

    await eventually(held)
    assert (await world.client.get(PODS, "guarded", "default"))["metadata"]["name"] == "guarded"
    await world.client.patch(PDBS, "g", {"spec": {"minAvailable": 0}}, namespace="default")

    async def evicted() -> bool:
        pods = (await world.client.list(PODS, namespace="default"))["items"]
        return all(p["metadata"]["name"] != "guarded" for p in pods)

    # The drain watches budgets: it retries as soon as this one allows it (its status caught up),
    # well before the 5 s eviction retry that the refusal just scheduled.
    await poll(evicted, 2.5, "the pod evicted once its budget allows it")

    async def node_done() -> bool:
        return await np_phase(world, "pdb-mi300x-0") == "Succeeded"

    await eventually(node_done, timeout=60)


def kubectl_runner(world: World, tmp_path: Any) -> Callable[..., str]:
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
    kubeconfig = tmp_path / "kubeconfig"
    world.cluster.write_kubeconfig(kubeconfig)

    def run(*args: str) -> str:
        proc = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


async def test_a_drain_held_by_a_pdb_names_the_budget_and_workload(world: World, tmp_path: Any) -> None:
    """The user sees why the node waits: the condition, one Warning Event and `kubectl get np` name the
    PodDisruptionBudget and the ModelInfer it protects; deleting the budget lets the drain finish."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-70b-pd-0-decode-0",
            "namespace": "default",
            "labels": {"modelinfer.volcano.sh/name": "llama-70b-pd", "app": "llama"},
        },
        "spec": {"nodeName": "mi300x-0", "containers": [{"name": "c", "image": "x"}]},
    }
    await world.client.create(PODS, pod)
    await world.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "llama-pdb", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llama"}}},
        },
    )

    async def running() -> bool:
        got = await world.client.get(PODS, pod["metadata"]["name"], "default")
        return (got.get("status") or {}).get("phase") == "Running"

    await eventually(running)
    await world.client.create(PLANS, plan("held", "mi300x-cpx", max_parallel=1, max_unavailable=1))
    np_name = "held-mi300x-0"

    async def blocked() -> bool:
        if await np_phase(world, np_name) != "Draining":
            return False
        np = await world.client.get(kinds.NODEPARTITIONINGS, np_name)
        return (np.get("status") or {}).get("blockedBy") == "default/llama-pdb"

    await eventually(blocked)
    np = await world.client.get(kinds.NODEPARTITIONINGS, np_name)
    drain = next(c for c in np["status"]["conditions"] if c["type"] == "DrainCompleted")
    assert (drain["status"], drain["reason"]) == ("False", "EvictionBlocked")
    assert drain["message"] == (
        "waiting for 1 pods to be evicted: PodDisruptionBudget default/llama-pdb "
        "(ModelInfer default/llama-70b-pd) needs 1 healthy pods and has 1"
    )

    # Retries change nothing: the same answer costs no NP write and no second Event.
    version = np["metadata"]["resourceVersion"]
    await asyncio.sleep(6)  # a measurement window spanning an eviction retry, not a wait for anything
    assert (await world.client.get(kinds.NODEPARTITIONINGS, np_name))["metadata"][
        "resourceVersion"
    ] == version
    events = [
        e
        for e in (await world.client.list(EVENTS))["items"]
        if e["involvedObject"].get("name") == np_name and e["reason"] == "EvictionBlocked"
    ]
    assert len(events) == 1 and events[0]["type"] == "Warning" and events[0].get("count", 1) == 1
    assert (
        "default/llama-pdb" in events[0]["message"]
        and "ModelInfer default/llama-70b-pd" in events[0]["message"]
    )

    run = kubectl_runner(world, tmp_path)
    table = await asyncio.to_thread(run, "get", "np", np_name)
    header, row = table.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "NODE", "PHASE", "PROFILE", "BLOCKED-BY"]
    assert row.split()[:5] == [np_name, "mi300x-0", "Draining", "mi300x-cpx", "default/llama-pdb"]

    await world.client.delete(PDBS, "llama-pdb", namespace="default")

    async def node_done() -> bool:
        np = await world.client.get(kinds.NODEPARTITIONINGS, np_name)
        status = np.get("status") or {}
        return status.get("phase") == "Succeeded" and "blockedBy" not in status

    await eventually(node_done, timeout=60)


async def test_deleting_the_plan_mid_rollout_leaves_no_node_cordoned(world: World) -> None:
    world.cluster.agents.amd.dcm_delay = 0.5
    await world.client.create(PLANS, plan("gone", "mi300x-cpx"))

    async def busy() -> bool:
        return bool(await world.cordoned_or_tainted())

    await eventually(busy)
    await world.client.delete(PLANS, "gone")

    async def released() -> bool:
        nps = (await world.client.list(kinds.NODEPARTITIONINGS))["items"]
        return not nps and not await world.cordoned_or_tainted()

    await eventually(released, timeout=60)


async def test_kubectl_shows_progress_and_events(world: World, tmp_path: Any) -> None:
    """What a platform engineer sees: phase and counts in `kubectl get`, the story in `describe`."""
    run = kubectl_runner(world, tmp_path)
    await world.client.create(PLANS, plan("shown", "mi300x-cpx", max_parallel=4, max_unavailable=4))

    async def completed() -> bool:
        return await world.plan_phase("shown") == "Completed"

    await eventually(completed, timeout=90)
    table = await asyncio.to_thread(run, "get", "gpuplan", "shown")
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "PHASE", "SUCCEEDED", "FAILED", "TOTAL", "AGE"]
    assert row.split()[:5] == ["shown", "Completed", "12", "0", "12"]
    nodes = await asyncio.to_thread(
        run, "get", "np", "-l", "infrastructure.silogen.ai/plan=shown", "--no-headers"
    )
    assert len(nodes.splitlines()) == 12 and all(" Succeeded " in f" {line} " for line in nodes.splitlines())
    described = await asyncio.to_thread(run, "describe", "np", "shown-mi300x-0")
    for reason in ("DrainStarted", "ProfileApplied", "VerificationSucceeded", "NodeSucceeded"):
        assert reason in described
    profile_table = await asyncio.to_thread(run, "get", "pp", "mi300x-cpx")
    assert profile_table.splitlines()[1].split()[:3] == ["mi300x-cpx", "cpx", "True"]


async def test_kubectl_in_progress_column_counts_every_held_slot(world: World, tmp_path: Any) -> None:
    """`kubectl get gpuplan -o wide`'s In-Progress is the number of nodes holding a maxParallel slot,
    whatever their phase: here one node Draining (a budget holds it) and two Verifying (the device
    plugin has not published the new partitions yet), so 3 of 3 slots, not the Applying bucket."""
    world.cluster.agents.amd.plugin_refresh_delay = 600.0
    await world.client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "guarded", "namespace": "default", "labels": {"app": "g"}},
            "spec": {"nodeName": "mi300x-0", "containers": [{"name": "c", "image": "x"}]},
        },
    )
    await world.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "g"}}},
        },
    )
    run = kubectl_runner(world, tmp_path)
    await world.client.create(PLANS, plan("slots", "mi300x-cpx", max_parallel=3, max_unavailable=3))

    async def slots_held() -> bool:
        nps = await asyncio.to_thread(
            run,
            "get",
            "np",
            "-l",
            "infrastructure.silogen.ai/plan=slots",
            "--no-headers",
            "-o",
            "custom-columns=PHASE:.status.phase",
        )
        return sorted(p for p in nps.split() if p in IN_PROGRESS) == ["Draining", "Verifying", "Verifying"]

    # The rollout is held here (the budget, the silent device plugin): the plan's status catches up.
    await eventually(slots_held, timeout=30)

    async def column() -> str:
        table = await asyncio.to_thread(run, "get", "gpuplan", "slots", "-o", "wide")
        header, row = table.splitlines()[:2]
        # Cells are aligned under their headers; empty ones (Paused, Dry-Run unset) print as blanks.
        return row[header.index("IN-PROGRESS") : header.index("MAX-PARALLEL")].strip()

    async def shows_three() -> bool:
        return await column() == "3"

    await eventually(shows_three, timeout=20)
    assert await slots_held()


async def test_an_invalid_selector_is_a_spec_error_said_once_and_waits_for_a_fix(world: World) -> None:
    """A typo in a rule's selector names the field (not "failed to observe cluster state"), warns once,
    touches no node and writes nothing more until the plan is edited; the fix then rolls out."""
    client = world.client
    bad = plan("typo", "mi300x-cpx")
    bad["spec"]["rules"][0]["selector"] = {
        "matchExpressions": [{"key": "amd.com/gpu.product-name", "operator": "In"}]
    }
    await client.create(PLANS, bad)

    async def ready() -> dict[str, Any]:
        conds = ((await client.get(PLANS, "typo")).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "PlanReady"), {})

    async def reported() -> bool:
        return (await ready()).get("reason") == "InvalidSelector"

    await eventually(reported)
    condition = await ready()
    assert condition["status"] == "False"
    assert condition["message"] == (
        "Invalid selector: rule 'rule-0 (cpx)': spec.rules[0].selector.matchExpressions[0].values: "
        "Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    )
    assert await world.plan_phase("typo") == "Degraded"

    # Other changes wake the controller (a node label here) but a spec error waits for the spec: no
    # write, no second Event, no retry loop.
    client.reset_counts()
    await client.patch(NODES, "mi300x-0", {"metadata": {"labels": {"touched": "yes"}}})
    await asyncio.sleep(2)  # a measurement window, not a wait for anything
    assert client.writes == 1, client.requests  # the test's own label patch
    warnings = [
        e
        for e in (await client.list(EVENTS))["items"]
        if e["involvedObject"].get("name") == "typo" and e["reason"] == "InvalidSelector"
    ]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and warnings[0].get("count", 1) == 1
    assert "spec.rules[0].selector.matchExpressions[0].values" in warnings[0]["message"]
    assert (await client.list(kinds.NODEPARTITIONINGS))["items"] == []
    assert await world.cordoned_or_tainted() == []

    fixed = {"matchExpressions": [{"key": "amd.com/gpu.product-name", "operator": "In", "values": [PRODUCT]}]}
    await client.patch(
        PLANS, "typo", {"spec": {"rules": [{"selector": fixed, "profileRef": {"name": "mi300x-cpx"}}]}}
    )

    async def valid() -> bool:
        return (await ready()).get("reason") == "PlanValid"

    await eventually(valid)

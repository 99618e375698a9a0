"""GPU partitioning on the real control plane: the three partitioning controllers as the chart's
ServiceAccount, the simulated AMD GPU operator beside them, kube's own eviction, PodDisruptionBudgets,
DaemonSet controller and scheduler, kwok's nodes. The rollout limits are checked on every NodePartitioning
change a watch delivers (kube sends each committed change), not by sampling."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import NODES, PODS, resource_for
from tests.polling import eventually
from tests.real import operator as op
from tests.real.watching import apply, following

pytestmark = [
    pytest.mark.real,
]

ROOT = Path(__file__).resolve().parents[2]
PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
NODE_PARTITIONINGS = resource_for("infrastructure.silogen.ai/v1alpha1", "NodePartitioning")
CONTROLLERS = "partitioningprofile,partitioningplan,nodepartitioning"
IN_PROGRESS = {"Draining", "Applying", "WaitingOperator", "Verifying"}
DCM_TAINT = "amd-dcm"


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "examples" / name).read_text(encoding="utf-8")) if d]


def the_plan(profile: str) -> dict[str, Any]:
    """examples/partitioning-plan.yaml (inference pool, at most 3 nodes at a time) to ``profile``."""
    (plan,) = example("partitioning-plan.yaml")
    plan["spec"]["rules"] = [plan["spec"]["rules"][0]]
    plan["spec"]["rules"][0]["profileRef"]["name"] = profile
    return plan


@dataclass
class Limits:
    """After each change: NodePartitionings in progress and unavailable (in progress or Failed) per plan."""

    phases: dict[str, tuple[str, str]] = field(default_factory=dict)
    worst: dict[str, tuple[int, int]] = field(default_factory=dict)
    changes: int = 0

    def __call__(self, kind: str, obj: dict[str, Any]) -> None:
        self.changes += 1
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.phases.pop(name, None)
        else:
            plan = (obj["spec"].get("planRef") or {}).get("name", "")
            self.phases[name] = (plan, (obj.get("status") or {}).get("phase") or "Pending")
        for plan in {p for p, _ in self.phases.values()}:
            states = [phase for p, phase in self.phases.values() if p == plan]
            busy = sum(1 for s in states if s in IN_PROGRESS)
            down = busy + states.count("Failed")
            prev = self.worst.get(plan, (0, 0))
            self.worst[plan] = (max(prev[0], busy), max(prev[1], down))


async def plan_phase(admin: HttpKubeClient, name: str) -> str | None:
    plans = (await admin.list(PLANS))["items"]
    return next(((p.get("status") or {}).get("phase") for p in plans if p["metadata"]["name"] == name), None)


async def gpus(admin: HttpKubeClient) -> dict[str, str]:
    nodes = (await admin.list(NODES, label_selector="aiplane.io/pool=inference"))["items"]
    return {n["metadata"]["name"]: n["status"]["allocatable"].get("amd.com/gpu", "0") for n in nodes}


async def cordoned_or_tainted(admin: HttpKubeClient) -> list[str]:
    return sorted(
        n["metadata"]["name"]
        for n in (await admin.list(NODES))["items"]
        if n["spec"].get("unschedulable") or any(t["key"] == DCM_TAINT for t in n["spec"].get("taints") or [])
    )


@pytest.fixture
async def partitioning(
    admin: HttpKubeClient, hardware: op.Process, start_operator: Callable[[str], op.Process]
) -> op.Process:
    await apply(admin, example("partition-profiles.yaml"))
    return start_operator(CONTROLLERS)


async def test_the_inference_pool_rolls_to_cpx_and_back_within_the_plans_limits(
    admin: HttpKubeClient, partitioning: op.Process, hardware: op.Process
) -> None:
    limits = Limits()
    async with following(admin, NODE_PARTITIONINGS, limits):
        for profile, expected in (("mi300x-cpx", "64"), ("mi300x-spx", "8")):
            await apply(admin, [the_plan(profile)])

            async def rolled(expected: str = expected) -> bool:
                return await plan_phase(admin, "mi300x-inference-cpx") == "Completed" and set(
                    (await gpus(admin)).values()
                ) == {expected}

            await eventually(rolled, timeout=90, what=f"the pool at {profile}", interval=0.2)
            assert await cordoned_or_tainted(admin) == []
    await admin.delete(PLANS, "mi300x-inference-cpx")
    busy, down = limits.worst["mi300x-inference-cpx"]
    assert busy <= 3 and down <= 3, limits.worst
    assert busy >= 2, f"the rollout never ran nodes in parallel: {limits.worst}"
    assert partitioning.alive() and hardware.alive(), partitioning.tail() + hardware.tail()


def _held_deployment(namespace: str) -> list[dict[str, Any]]:
    """One pod on mi300x-0 under a budget that allows no eviction: the node's drain waits on it."""
    labels = {"app": "held"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "held", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": "mi300x-0"},
                    "containers": [{"name": "server", "image": "registry.example/server:1"}],
                },
            },
        },
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "held", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }
    return [deployment, pdb]


async def test_deleting_the_plan_mid_rollout_leaves_no_node_cordoned_or_tainted(
    admin: HttpKubeClient, partitioning: op.Process, namespace: str
) -> None:
    await apply(admin, _held_deployment(namespace))

    async def held_pod_ready() -> bool:
        pods = (await admin.list(PODS, namespace, label_selector="app=held"))["items"]
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for p in pods
            for c in (p.get("status") or {}).get("conditions") or []
        )

    await eventually(held_pod_ready, timeout=60, what="the held pod Ready (kwok)", interval=0.2)
    await apply(admin, [the_plan("mi300x-cpx")])

    async def draining_held_node() -> bool:
        nps = (await admin.list(NODE_PARTITIONINGS))["items"]
        return any(
            n["spec"]["nodeName"] == "mi300x-0" and (n.get("status") or {}).get("phase") == "Draining"
            for n in nps
        ) and "mi300x-0" in await cordoned_or_tainted(admin)

    await eventually(draining_held_node, timeout=60, what="mi300x-0 cordoned, its drain held", interval=0.2)
    await admin.delete(PLANS, "mi300x-inference-cpx")

    async def released() -> bool:
        return not (await admin.list(NODE_PARTITIONINGS))["items"] and not await cordoned_or_tainted(admin)

    await eventually(
        released, timeout=60, what="no NodePartitioning and no node cordoned or tainted", interval=0.2
    )
    pods = (await admin.list(PODS, namespace, label_selector="app=held"))["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["mi300x-0"], "the budget was not honoured"
    assert partitioning.alive(), partitioning.tail()

"""ModelInfer under a real `kubectl drain`: one PodDisruptionBudget per InferGroup keeps the groups a
user relies on serving (docs/modelinfer.md, "Disruption").

The floor is checked on every committed pod change (a store listener), not sampled: one moment
with fewer available groups than ``replicas - maxUnavailable`` fails the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiplane.kube.resources import EVENTS, NODES, PDBS
from tests.integration.test_modelinfer_e2e import (
    KUBECTL,
    MI,
    NS,
    PODS_PER_GROUP,
    GroupWatch,
    World,
    modelinfer,
    running_world,
)
from tests.polling import eventually
from tests.settle import events_written

FIRST = "mi300x-0"


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    async with running_world(getattr(request, "param", 3)) as built:
        yield built


def kubectl(world: World, tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    kubeconfig = tmp_path / "kubeconfig"
    if not kubeconfig.exists():
        world.cluster.write_kubeconfig(kubeconfig)
    done = subprocess.run(
        [KUBECTL, *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


async def set_cordoned(world: World, names: list[str], cordoned: bool) -> None:
    for name in names:
        await world.client.patch(NODES, name, {"spec": {"unschedulable": cordoned or None}})


async def on_one_node(world: World, body: dict[str, Any], nodes: int) -> GroupWatch:
    """Every group on the first node (the others cordoned while it comes up), then the others back;
    returns the floor watch, subscribed."""
    others = [f"mi300x-{i}" for i in range(1, nodes)]
    await set_cordoned(world, others, True)
    await world.client.create(MI, body, namespace=NS)
    await world.wait_converged()
    assert {p["spec"]["nodeName"] for p in await world.pods()} == {FIRST}
    await set_cordoned(world, others, False)
    watch = GroupWatch(world.cluster, "pd")
    for pod in await world.pods():
        watch.pods[pod["metadata"]["name"]] = pod
    world.cluster.server.store.subscribe(watch)
    return watch


async def drain(world: World, tmp_path: Path) -> None:
    """`kubectl drain` of the first node; on failure, the state that held it."""
    args = ("drain", FIRST, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
    done = await asyncio.to_thread(kubectl, world, tmp_path, *args, check=False)
    if done.returncode == 0 and "drained" in done.stdout:
        return
    lines = [done.stderr[-2000:]]
    for p in await world.pods():
        ready = [c["status"] for c in p["status"].get("conditions") or [] if c["type"] == "Ready"]
        lines.append(
            f"{p['metadata']['name']} {p['spec'].get('nodeName')} {p['status'].get('phase')} ready={ready} "
            f"deleting={bool(p['metadata'].get('deletionTimestamp'))}"
        )
    for name, b in (await budgets(world)).items():
        lines.append(
            f"{name} {json.dumps(b['spec'])} {json.dumps(b.get('status'))} gen={b['metadata'].get('generation')}"
        )
    lines.append(json.dumps((await world.mi()).get("status"), indent=1))
    raise AssertionError("drain failed:\n" + "\n".join(lines))


async def budgets(world: World) -> dict[str, dict[str, Any]]:
    items = (await world.client.list(PDBS, namespace=NS))["items"]
    return {p["metadata"]["name"]: p for p in items}


async def events(world: World, reason: str) -> list[str]:
    items = (await world.client.list(EVENTS, namespace=NS))["items"]
    return [e["message"] for e in items if e.get("reason") == reason]


async def protected(world: World, groups: list[str]) -> bool:
    got = await budgets(world)
    return sorted(got) == groups and all(p["spec"]["minAvailable"] == PODS_PER_GROUP for p in got.values())


async def test_each_group_has_a_budget_selecting_exactly_its_pods(world: World) -> None:
    await world.client.create(MI, modelinfer(replicas=2, gang=False, gpus=0), namespace=NS)
    await world.wait_converged()
    await eventually(lambda: protected(world, ["pd-0", "pd-1"]), 10, "budgets protected")
    pdb = (await budgets(world))["pd-1"]
    assert pdb["spec"]["selector"] == {
        "matchLabels": {"modelinfer.volcano.sh/name": "pd", "modelinfer.volcano.sh/group-name": "pd-1"}
    }
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    owner = pdb["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ModelInfer", "pd", True)
    assert pdb["status"]["expectedPods"] == PODS_PER_GROUP
    await world.client.patch(MI, "pd", {"spec": {"replicas": 1}}, namespace=NS)
    await eventually(lambda: protected(world, ["pd-0"]), 20, "the budget of the removed group deleted")
    assert await world.condition("DisruptionHeld") is None  # never drained: no condition


async def test_kubectl_drain_takes_one_group_at_a_time(world: World, tmp_path: Path) -> None:
    watch = await on_one_node(world, modelinfer(replicas=2, gang=False, gpus=0, max_unavailable=1), 3)
    await drain(world, tmp_path)
    await world.wait_converged()
    await eventually(lambda: protected(world, ["pd-0", "pd-1"]), 10, "both groups protected again")
    world.cluster.server.store.unsubscribe(watch)
    assert watch.samples > 0
    assert watch.min_available == 1  # one group at a time, never both
    assert FIRST not in {p["spec"]["nodeName"] for p in await world.pods()}

    # Events are posted after the writes they report (asynchronously): wait for them, do not sample.
    async def released_both() -> list[str] | None:
        allowed = await events(world, "DisruptionAllowed")
        both = any(
            m.startswith("Released group pd-0 for eviction from cordoned node mi300x-0:") for m in allowed
        )
        return allowed if both and any(m.startswith("Released group pd-1 ") for m in allowed) else None

    await eventually(released_both, 10, "DisruptionAllowed Events for pd-0 and pd-1")
    await eventually(lambda: events(world, "DisruptionProtected"), 10, "a DisruptionProtected Event")
    # Steady state with the node still cordoned: no write at all.
    await events_written(world.manager)
    world.operator.reset_counts()
    end = time.monotonic() + 3
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
    assert world.operator.writes == 0


async def test_max_surge_builds_a_replacement_first(world: World, tmp_path: Path) -> None:
    body = modelinfer(replicas=2, gang=False, gpus=0, max_unavailable=0, max_surge=1)
    watch = await on_one_node(world, body, 3)
    await drain(world, tmp_path)
    await world.wait_converged()
    await eventually(lambda: protected(world, ["pd-0", "pd-1"]), 10, "surge budget gone, both protected")
    world.cluster.server.store.unsubscribe(watch)
    assert watch.min_available == 2  # the floor never broke
    assert watch.max_total == 3  # a surge group came up, and only one
    assert {p["metadata"]["labels"]["modelinfer.volcano.sh/group-name"] for p in await world.pods()} == {
        "pd-0",
        "pd-1",
    }


@pytest.mark.parametrize("world", [1], indirect=True)
async def test_no_room_holds_the_drain_and_says_why(world: World, tmp_path: Path) -> None:
    await world.client.create(MI, modelinfer(replicas=2, gang=False, gpus=0, max_unavailable=1), namespace=NS)
    await world.wait_converged()
    watch = GroupWatch(world.cluster, "pd")
    for pod in await world.pods():
        watch.pods[pod["metadata"]["name"]] = pod
    world.cluster.server.store.subscribe(watch)
    done = await asyncio.to_thread(
        kubectl, world, tmp_path, "drain", FIRST, "--ignore-daemonsets", "--timeout=3s", check=False
    )
    assert done.returncode != 0  # group pd-1 must stay: nowhere to rebuild pd-0

    async def held() -> str:
        mi = await world.mi()
        cond = next((c for c in mi["status"].get("conditions") or [] if c["type"] == "DisruptionHeld"), None)
        return str(cond["message"]) if cond and cond["status"] == "True" else ""

    message = await eventually(held, 10, "DisruptionHeld=True")
    assert message == (
        "group pd-1 (PodDisruptionBudget pd-1) on cordoned node mi300x-0 waits: releasing it would leave "
        "0 of 2 groups available, below replicas - maxUnavailable = 1"
    )
    warnings = await eventually(lambda: events(world, "DisruptionHeld"), 10, "the DisruptionHeld Event")
    assert warnings == [message]
    assert watch.min_available == 1
    world.cluster.server.store.unsubscribe(watch)
    await asyncio.to_thread(kubectl, world, tmp_path, "uncordon", FIRST)
    await world.wait_converged()
    await eventually(lambda: protected(world, ["pd-0", "pd-1"]), 10, "protected again")
    await eventually(lambda: _condition_reason(world), 10, "DisruptionHeld=False")


async def _condition_reason(world: World) -> bool:
    mi = await world.mi()
    cond = next((c for c in mi["status"].get("conditions") or [] if c["type"] == "DisruptionHeld"), None)
    return bool(cond and (cond["status"], cond["reason"]) == ("False", "NoDisruptionHeld"))

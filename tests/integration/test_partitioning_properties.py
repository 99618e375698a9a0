"""The rollout guarantees as properties of the whole system, not only of the pure decision functions.

For random fleets (AMD nodes in random pools, NVIDIA and control-plane nodes that must never be
touched, nodes already cordoned by someone else), random rules, limits, DCM delays and DCM failures,
random worker counts (which reorders reconciles) and transient API faults on node writes, the three
real controllers run against the embedded cluster with its simulated kubelet and AMD GPU operator:

* in progress never exceeds ``maxParallel`` and unavailable never exceeds ``maxUnavailable`` — checked
  on every committed NodePartitioning change by a store listener, not sampled;
* every selected node ends Succeeded, Failed (only those whose DCM fails) or Skipped (dry run) — or,
  when failed nodes use up ``maxUnavailable``, stays Pending with the plan saying the rollout is
  blocked and why (a Failed node is unavailable: admitting more would exceed the limit);
* no node is left cordoned or tainted by us, and a node cordoned before we started stays cordoned.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from aiplane.api import kinds
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.manager import ControllerOptions, Manager
from aiplane.kube.resources import NODES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration.test_partitioning_e2e import IN_PROGRESS, PRODUCT, LimitWatch, profile

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
POOLS = ("a", "b", "c")


@dataclass(frozen=True)
class Scenario:
    pools: tuple[str, ...]  # one entry per AMD node: its pool label
    nvidia: int
    control_plane: bool
    rules: tuple[tuple[str, str], ...]  # (pool, profile)
    max_parallel: int
    max_unavailable: int
    dcm_delay: float
    failing: frozenset[int]  # indexes of AMD nodes whose DCM fails
    precordoned: frozenset[int]  # AMD nodes an admin cordoned before the plan
    workers: int
    node_faults: int  # transient 500s on node writes
    dry_run: bool


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n = draw(st.integers(1, 7))
    pools = tuple(draw(st.lists(st.sampled_from(POOLS), min_size=n, max_size=n)))
    rule_pools = draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=3, unique=True))
    rules = tuple((pool, draw(st.sampled_from(("cpx", "dpx", "spx")))) for pool in rule_pools)
    return Scenario(
        pools=pools,
        nvidia=draw(st.integers(0, 1)),
        control_plane=draw(st.booleans()),
        rules=rules,
        max_parallel=draw(st.integers(1, 4)),
        max_unavailable=draw(st.integers(1, 4)),
        dcm_delay=draw(st.sampled_from((0.0, 0.01, 0.05))),
        failing=frozenset(draw(st.sets(st.integers(0, n - 1), max_size=2))),
        precordoned=frozenset(draw(st.sets(st.integers(0, n - 1), max_size=1))),
        workers=draw(st.integers(1, 4)),
        node_faults=draw(st.integers(0, 3)),
        dry_run=draw(st.booleans()),
    )


def _fleet(s: Scenario) -> Fleet:
    pools = [
        NodePool(
            name=f"amd{i}",
            count=1,
            gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
            labels={"aiplane.io/pool": pool},
        )
        for i, pool in enumerate(s.pools)
    ]
    if s.nvidia:
        pools.append(
            NodePool(name="h100", count=s.nvidia, gpu=GpuSpec(vendor="nvidia", product="H100-SXM", count=8))
        )
    if s.control_plane:
        # A control-plane node with AMD GPUs and a pool label every rule could match: excluded anyway.
        pools.append(
            NodePool(
                name="cp",
                count=1,
                controlPlane=True,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                labels={"aiplane.io/pool": "a"},
            )
        )
    return Fleet(nodePools=pools)


def _plan(s: Scenario) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": "p"},
        "spec": {
            "dryRun": s.dry_run,
            "rollout": {"maxParallel": s.max_parallel, "maxUnavailable": s.max_unavailable},
            "rules": [
                {
                    "selector": {
                        "matchLabels": {"amd.com/gpu.product-name": PRODUCT, "aiplane.io/pool": pool}
                    },
                    "profileRef": {"name": f"to-{prof}"},
                }
                for pool, prof in s.rules
            ],
        },
    }


def _blocked(plan: dict[str, Any]) -> bool:
    """Failed nodes count as unavailable: once they use up maxUnavailable the rollout halts, and says so."""
    for c in (plan.get("status") or {}).get("conditions") or []:
        if c["type"] == "RolloutProgressing":
            return c["reason"] == "RolloutBlocked" and "use up maxUnavailable" in c["message"]
    return False


async def _settled(client: InMemoryKubeClient, s: Scenario, selected: set[str]) -> dict[str, str] | None:
    """Every selected node's phase once the rollout has come to rest, or None while it is still moving."""
    nps = (await client.list(kinds.NODEPARTITIONINGS))["items"]
    phases = {np["spec"]["nodeName"]: (np.get("status") or {}).get("phase") or "Pending" for np in nps}
    if set(phases) != selected or any(p in IN_PROGRESS for p in phases.values()):
        return None
    plan = await client.get(PLANS, "p")
    failed = sum(1 for p in phases.values() if p == "Failed")
    if "Pending" in phases.values() and not (failed >= s.max_unavailable and _blocked(plan)):
        return None
    # A plan that selects no node stays Pending (docs/partitioning.md), never "Completed".
    ended = ("Pending",) if not selected else ("Completed", "Degraded", "Failed")
    if (plan.get("status") or {}).get("observedGeneration") != 1 or plan["status"].get("phase") not in ended:
        return None
    return phases


async def _wait_settled(client: InMemoryKubeClient, s: Scenario, selected: set[str]) -> dict[str, str]:
    end = time.monotonic() + 60
    phases = None
    while time.monotonic() < end and phases is None:
        phases = await _settled(client, s, selected)
        if phases is None:
            await asyncio.sleep(0.02)
    assert phases is not None, f"did not settle: {await client.list(kinds.NODEPARTITIONINGS)}"
    return phases


def _assert_phases(s: Scenario, phases: dict[str, str], fail_nodes: set[str]) -> None:
    for node, phase in phases.items():
        if phase == "Pending":
            continue  # halted by failures using up maxUnavailable (checked in _settled())
        if s.dry_run:
            assert phase == "Skipped", (node, phase)
        elif node in fail_nodes:
            # Unless the node already had the desired profile (no DCM call needed).
            assert phase in ("Failed", "Succeeded"), (node, phase)
        else:
            assert phase == "Succeeded", (node, phase)


def _assert_nodes_left_clean(
    s: Scenario, after: dict[str, Any], before: dict[str, Any], amd: list[str], selected: set[str]
) -> None:
    """Nothing of ours stays on a node, an admin's cordon does, and unselected nodes keep their labels."""
    for name, node in after.items():
        ours = {
            k
            for k in (node["metadata"].get("annotations") or {})
            if k.startswith("infrastructure.silogen.ai/")
        }
        assert not {k for k in ours if k.endswith(("cordoned-by", "tainted-by"))}, (name, ours)
        assert not any(t.get("key") == "amd-dcm" for t in node["spec"].get("taints") or []), name
        was_cordoned = name in {amd[i] for i in s.precordoned}
        assert bool(node["spec"].get("unschedulable")) == was_cordoned, (name, s)
        if name not in selected:
            assert node["metadata"].get("labels") == before[name]["metadata"].get("labels"), name


async def _prepare_cluster(
    cluster: EmbeddedCluster, client: InMemoryKubeClient, s: Scenario, amd: list[str]
) -> LimitWatch:
    """The scenario's failing DCMs, admin cordons and transient node-write faults, and the limit watch.

    The watch subscribes after the admin cordons, before anything of ours can change a node.
    """
    cluster.agents.amd.fail_nodes = {amd[i] for i in s.failing}  # type: ignore[union-attr]
    for i in s.precordoned:
        await client.patch(NODES, amd[i], {"spec": {"unschedulable": True}})
    limits = LimitWatch(cluster)
    cluster.server.store.subscribe(limits)
    if s.node_faults:
        cluster.server.faults.add_spec(f"verb=patch,resource=nodes,error=500,count={s.node_faults}")
        cluster.server.faults.add_spec(f"verb=update,resource=nodes,error=500,count={s.node_faults}")
    return limits


async def _manager(cluster: EmbeddedCluster, s: Scenario) -> Manager:
    manager = Manager(
        InMemoryKubeClient.for_cluster(cluster),
        leader_election=None,
        handle_signals=False,
        controller_options=ControllerOptions(max_concurrent_reconciles=s.workers),
    )
    for setup in (profile_controller.setup, plan_controller.setup, node_controller.setup):
        await setup(manager)
    return manager


async def _run(s: Scenario) -> None:
    cluster = EmbeddedCluster(fleet=_fleet(s), agents=True, ready_delay=0.0, dcm_delay=s.dcm_delay)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    nodes = {n["metadata"]["name"]: n for n in (await client.list(NODES))["items"]}
    amd = [f"amd{i}-0" for i in range(len(s.pools))]
    assert set(amd) <= set(nodes)
    limits = await _prepare_cluster(cluster, client, s, amd)
    manager = await _manager(cluster, s)
    task = asyncio.create_task(manager.run())
    try:
        for name, dcm, gpus in (("to-cpx", "cpx", "64"), ("to-dpx", "dpx", "16"), ("to-spx", "spx", "8")):
            await client.create(kinds.PARTITIONINGPROFILES, profile(name, dcm, gpus))
        await client.create(PLANS, _plan(s))
        selected = {amd[i] for i, pool in enumerate(s.pools) if pool in {p for p, _ in s.rules}}
        phases = await _wait_settled(client, s, selected)

        busy, down = limits.worst.get("p", (0, 0))
        assert busy <= s.max_parallel, (busy, s)
        assert down <= s.max_unavailable, (down, s)
        _assert_phases(s, phases, cluster.agents.amd.fail_nodes)  # type: ignore[union-attr]
        after = {n["metadata"]["name"]: n for n in (await client.list(NODES))["items"]}
        _assert_nodes_left_clean(s, after, nodes, amd, selected)
    finally:
        manager.stop()
        await task
        await client.close()
        await cluster.stop()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenarios())
def test_rollouts_respect_limits_and_leave_no_node_behind(s: Scenario) -> None:
    asyncio.run(_run(s))

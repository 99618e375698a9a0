"""Repartitioning a serving pool under live inference, as a property of the whole system.

For random MI300X inference pools (2 to 4 nodes, starting in SPX or CPX) and a pool of other AMD
nodes the plan never touches, random ModelInfers (replicas, roles, role replicas, workers,
maxUnavailable, maxSurge, gang-scheduled or not; one ``amd.com/gpu`` per pod, pinned to the pool),
random partitioning limits, target profiles and DCM delays, and watches of the operator that deliver
up to 0.3 s late (each its own lag: informers lagging the server and each other, as in an operator
starved of CPU — the timing under which the drain once tainted a node its Pod cache thought empty),
the real partitioning controllers and
the real ModelInfer controller run against the embedded cluster (its kubelet, schedulers, AMD GPU
operator, disruption controller and Eviction API). The plan is *edited* under the serving
ModelInfers, as a user would repartition a pool:

* on every committed pod change, every ModelInfer whose groups were all available when the edit
  landed keeps at least ``replicas - maxUnavailable`` groups available (a store listener:
  :class:`aiplane.demo.serving.FloorWatch`, not sampling);
* on every committed NodePartitioning change, in progress ≤ ``maxParallel`` and unavailable ≤
  ``maxUnavailable``;
* every node ends Succeeded — or, when the pool has no room to rebuild the groups while
  ``maxParallel`` nodes drain, Failed by the (short) drain timeout, or Pending behind failures that
  use up ``maxUnavailable``; nothing is left cordoned or tainted, and with room every ModelInfer ends
  fully available again.

"Room" is counted conservatively: the pool's GPUs in its smaller mode on the nodes that are not
draining hold every group plus every surge group. Scenarios without room still check the floor: the
arbiter never trades it for a drain; the drain waits, then fails the node (tests/integration/
test_live_repartition_no_room.py shows that case in detail).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from aiplane.api import kinds
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.demo.serving import FloorWatch
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, NODES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration import operator_rbac
from tests.integration.test_partitioning_e2e import IN_PROGRESS, PRODUCT, LimitWatch, profile
from tests.polling import eventually

PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
NS = "serving"
POOL = "aiplane.io/pool"
GPUS = {"spx": 8, "dpx": 16, "cpx": 64}


@dataclass(frozen=True)
class Shape:
    replicas: int
    roles: tuple[tuple[int, int], ...]  # (role replicas, workerReplicas) per role
    max_unavailable: int
    max_surge: int
    gang: bool

    @property
    def pods_per_group(self) -> int:
        return sum(replicas * (1 + workers) for replicas, workers in self.roles)

    @property
    def most_pods(self) -> int:
        return (self.replicas + self.max_surge) * self.pods_per_group


@dataclass(frozen=True)
class Scenario:
    nodes: int  # the inference pool
    others: int  # AMD nodes of another pool: not selected by the plan, not usable by the ModelInfers
    start: str
    target: str
    shapes: tuple[Shape, ...]
    max_parallel: int
    max_unavailable: int
    dcm_delay: float
    watch_lag: float  # each operator watch delivers up to this many seconds late
    lag_seed: int

    @property
    def fits(self) -> bool:
        """Every group fits in the pool before the edit: each ModelInfer can start fully available."""
        return self.nodes * GPUS[self.start] >= sum(s.replicas * s.pods_per_group for s in self.shapes)

    @property
    def room(self) -> bool:
        """Every group and surge group fits on the pool's nodes that are not draining, in its smaller mode."""
        smallest = min(GPUS[self.start], GPUS[self.target])
        return (self.nodes - self.max_parallel) * smallest >= sum(s.most_pods for s in self.shapes)


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    roles = tuple((draw(st.integers(1, 2)), draw(st.integers(0, 1))) for _ in range(draw(st.integers(1, 2))))
    max_unavailable = draw(st.integers(0, 2))
    return Shape(
        replicas=draw(st.integers(1, 3)),
        roles=roles,
        max_unavailable=max_unavailable,
        max_surge=draw(st.integers(1 if max_unavailable == 0 else 0, 1)),
        gang=draw(st.booleans()),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    start = draw(st.sampled_from(("spx", "cpx")))
    return Scenario(
        nodes=draw(st.integers(2, 4)),
        others=draw(st.integers(0, 1)),
        start=start,
        target=draw(st.sampled_from(sorted({"spx", "dpx", "cpx"} - {start}))),
        shapes=tuple(draw(st.lists(shapes(), min_size=1, max_size=2))),
        max_parallel=draw(st.integers(1, 3)),
        max_unavailable=draw(st.integers(1, 3)),
        dcm_delay=draw(st.sampled_from((0.0, 0.02, 0.05))),
        watch_lag=draw(st.sampled_from((0.0, 0.1, 0.3))),
        lag_seed=draw(st.integers(0, 2**16)),
    )


def _fleet(s: Scenario) -> Fleet:
    pools = [
        NodePool(
            name="inf",
            count=s.nodes,
            gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
            cpu="192",
            memory="2Ti",
            labels={POOL: "inference"},
        )
    ]
    if s.others:
        pools.append(
            NodePool(
                name="train",
                count=s.others,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                labels={POOL: "training"},
            )
        )
    return Fleet(nodePools=pools)


def _plan(s: Scenario, profile_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": "p"},
        "spec": {
            "rollout": {"maxParallel": s.max_parallel, "maxUnavailable": s.max_unavailable},
            "rules": [
                {
                    "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT, POOL: "inference"}},
                    "profileRef": {"name": f"to-{profile_name}"},
                }
            ],
        },
    }


def _modelinfer(name: str, shape: Shape) -> dict[str, Any]:
    template = {
        "spec": {
            "nodeSelector": {POOL: "inference", "amd.com/gpu.product-name": PRODUCT},
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm:v1",
                    "resources": {"limits": {"amd.com/gpu": "1"}, "requests": {"cpu": "1"}},
                }
            ],
        }
    }
    roles = [
        {
            "name": f"r{i}",
            "replicas": replicas,
            "workerReplicas": workers,
            "entryTemplate": template,
            "workerTemplate": template,
        }
        for i, (replicas, workers) in enumerate(shape.roles)
    ]
    spec: dict[str, Any] = {
        "replicas": shape.replicas,
        "schedulerName": "volcano" if shape.gang else "default-scheduler",
        "rolloutStrategy": {
            "type": "InferGroupRollingUpdate",
            "rollingUpdateConfiguration": {
                "maxUnavailable": shape.max_unavailable,
                "maxSurge": shape.max_surge,
            },
        },
        "template": {"roles": roles},
    }
    if shape.gang:
        spec["template"]["gangSchedule"] = {
            "minRoleReplicas": {f"r{i}": replicas for i, (replicas, _) in enumerate(shape.roles)}
        }
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


async def _plan_settled(client: InMemoryKubeClient, s: Scenario, generation: int) -> dict[str, str] | None:
    """Every selected node's phase once the rollout of ``generation`` is at rest, else None."""
    plan = await client.get(PLANS, "p")
    status = plan.get("status") or {}
    if plan["metadata"]["generation"] != generation or status.get("observedGeneration") != generation:
        return None
    nps = (await client.list(kinds.NODEPARTITIONINGS))["items"]
    phases = {np["spec"]["nodeName"]: (np.get("status") or {}).get("phase") or "Pending" for np in nps}
    if len(phases) != s.nodes or any(p in IN_PROGRESS for p in phases.values()):
        return None
    if "Pending" in phases.values():
        failed = sum(1 for p in phases.values() if p == "Failed")
        return phases if failed >= s.max_unavailable and status.get("phase") != "Completed" else None
    return phases if status.get("phase") in ("Completed", "Degraded", "Failed") else None


async def _available(watch: FloorWatch, key: str) -> bool:
    replicas = int(watch.mis[key]["spec"]["replicas"]) if key in watch.mis else -1
    return watch.available(key) == replicas


async def _run(s: Scenario) -> None:
    cluster = operator_rbac.cluster(fleet=_fleet(s), agents=True, ready_delay=0.0, dcm_delay=s.dcm_delay)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    lags = random.Random(s.lag_seed)
    operator = operator_rbac.operator_client(cluster, watch_lag=lambda: lags.uniform(0.0, s.watch_lag))
    manager = Manager(operator, leader_election=None, handle_signals=False)
    # With room, a drain never needs long; without, a short timeout fails the node and releases it.
    manager.set_options(PartitioningOptions(drain_timeout=60.0 if s.room else 1.5))
    for setup in (
        profile_controller.setup,
        plan_controller.setup,
        node_controller.setup,
        modelinfer_controller.setup,
    ):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    store = cluster.server.store
    try:
        for name, dcm in (("to-cpx", "cpx"), ("to-dpx", "dpx"), ("to-spx", "spx")):
            await client.create(kinds.PARTITIONINGPROFILES, profile(name, dcm, str(GPUS[dcm])))
        generation = 1
        if s.start != "spx":  # the fleet registers in SPX: partition the pool first, idle
            await client.create(PLANS, _plan(s, s.start))
            await eventually(lambda: _plan_settled(client, s, 1), 30, "the pool in its start mode")
            generation = 2
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        floor = FloorWatch(namespace=NS)
        store.subscribe(floor)
        keys = []
        for i, shape in enumerate(s.shapes):
            await client.create(MI, _modelinfer(f"mi{i}", shape), namespace=NS)
            keys.append(f"{NS}/mi{i}")
        for key in keys:
            await eventually(lambda key=key: _available(floor, key), 30, f"{key} available")
        # The pool starts serving: every group of every ModelInfer available, measured from here on.
        assert floor.track(keys) == keys
        limits = LimitWatch(cluster)
        store.subscribe(limits)
        if generation == 1:
            await client.create(PLANS, _plan(s, s.target))
        else:
            await client.patch(PLANS, "p", {"spec": {"rules": _plan(s, s.target)["spec"]["rules"]}})
        started = time.monotonic()
        phases = await eventually(
            lambda: _plan_settled(client, s, generation), 60, f"the rollout at rest ({s})"
        )
        assert floor.breaches == [], (floor.breaches[:3], s)
        busy, down = limits.worst.get("p", (0, 0))
        assert busy <= s.max_parallel and down <= s.max_unavailable, (busy, down, s)
        if s.room:
            assert set(phases.values()) == {"Succeeded"}, (phases, s)
            for key in keys:
                await eventually(lambda key=key: _available(floor, key), 30, f"{key} available again")
        else:
            assert set(phases.values()) <= {"Succeeded", "Failed", "Pending"}, (phases, s)
        nodes = (await client.list(NODES))["items"]
        marked = [
            n["metadata"]["name"]
            for n in nodes
            if n["spec"].get("unschedulable")
            or any(t.get("key") == "amd-dcm" for t in n["spec"].get("taints") or [])
        ]
        assert marked == [], (marked, s)
        assert floor.breaches == [], (floor.breaches[:3], s)
        assert time.monotonic() - started < 60
    finally:
        manager.stop()
        await task
        await client.close()
        await cluster.stop()


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenarios().filter(lambda s: s.fits))
def test_repartitioning_under_live_inference_keeps_every_floor(s: Scenario) -> None:
    asyncio.run(_run(s))

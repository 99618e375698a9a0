"""The serving floor under stress (a benchmark script, not a test).

Each run starts a fresh embedded cluster (4 MI300X inference nodes in SPX, the simulated schedulers,
kubelet, disruption controller, Eviction API and AMD GPU operator) and the real controllers
in-process (PartitioningProfile, PartitioningPlan, NodePartitioning, ModelInfer), serves the example
1P2D ModelInfer (``examples/modelinfer-1p2d.yaml``: 2 InferGroups of 6 pods, maxUnavailable 1, so a
floor of 1 group), and then, overlapping, at seeded random moments:

* the live repartition: the example PartitioningPlan takes the pool to CPX (maxParallel 3 of 4
  nodes: cordon, evict through the Eviction API, taint, DCM, verify, uncordon), then is edited back
  to SPX and to CPX again (``--legs``), as the demo does;
* a rolling update: the ModelInfer's image changes (one group at a time, sharing the floor with the
  drains);
* pod failures: 1 to 3 injected by the kubelet (a pod ``Failed``, or a container restart that leaves
  it NotReady for a moment), each recovered by the ModelInfer (RoleRecreate).

Two busy processes (``python3 -c 'while True: pass'``) run beside it (``--busy``), as on the loaded
2-core machine where the floor once broke, and every watch of the operator delivers up to
``--watch-lag`` seconds late (each its own seeded lag): informers that lag the API server and each
other, as they do in an operator starved of CPU. The rolling update and the failures overlap the
first leg.

Measured on every committed pod change (a store listener, :class:`~aiplane.demo.serving.FloorWatch`):
the fewest groups available, and **floor breaks**: moments when the *voluntary* disruptions alone —
drains, the rolling update, taints — left fewer than ``replicas - maxUnavailable`` groups, i.e. the
available groups plus the groups down because of an injected failure (which no operator can prevent,
and which the arbiter counts against the floor) are below it. Any break is a bug; the dips a
failure causes are reported apart. A run also fails if the plan does not complete or the ModelInfer
does not end fully available on the new template.

Usage: ``.venv/bin/python benchmarks/floor_stress.py [--runs 20] [--seed 1] [--busy 2] [--legs 3]
[--watch-lag 0.3] [--max-faults 3] [--settle-timeout 180] [--json FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiplane.api import kinds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer import controller as modelinfer_controller
from aiplane.controllers.modelinfer.naming import LABEL_GROUP_NAME, LABEL_REVISION
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.demo.common import load_manifests
from aiplane.demo.live import plan_to
from aiplane.demo.serving import FloorWatch
from aiplane.kube.logging import configure_logging
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, SECRETS, resource_for
from aiplane.sim.agents.kubelet import Kubelet
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool

ROOT = Path(__file__).resolve().parents[1]
PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
NODE_PARTITIONINGS = kinds.NODEPARTITIONINGS
MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
EXAMPLES = ROOT / "examples"
#: The inference pool's profile on each leg: the example plan's (CPX), then back and forth.
PROFILES = ("mi300x-cpx", "mi300x-spx")
NEW_IMAGE = "rocm/vllm:rocm6.4.1_vllm_0.10.2_20251001"


@dataclass
class StressFloor(FloorWatch):
    """FloorWatch that also knows which groups an injected failure took down."""

    faulted: set[str] = field(default_factory=set)
    voluntary_breaks: list[str] = field(default_factory=list)  # the first ten, described
    break_count: int = 0
    failure_dips: int = 0
    #: The fewest groups that voluntary disruptions left: available + down only because of a failure.
    fewest_voluntary: int | None = None

    def _measure(self, mi_key: str, rv: int) -> None:
        super()._measure(mi_key, rv)
        mi = self.mis.get(mi_key)
        if mi is None:
            return
        groups = self.groups(mi_key)
        available = {g for g, members in groups.items() if self.group_available(mi_key, members)}
        self.faulted -= available  # recovered: a later dip of this group is not the failure's
        floor = self.floor(mi_key)
        voluntary = len(available) + len(self.faulted - available)
        if mi_key in self.tracked:
            self.fewest_voluntary = min(
                voluntary, self.fewest_voluntary if self.fewest_voluntary is not None else voluntary
            )
        if len(available) >= floor:
            return
        if voluntary >= floor:
            self.failure_dips += 1
            return
        self.break_count += 1
        if len(self.voluntary_breaks) < 10:
            self.voluntary_breaks.append(
                f"rv {rv}: {self.group_states(mi_key)} (failed: {sorted(self.faulted)})"
            )


@dataclass
class RunResult:
    seed: int
    seconds: float
    completed: bool
    pod_changes: int
    fewest_available: int
    fewest_voluntary: int
    floor: int
    breaks: int
    failure_dips: int
    faults: list[str]
    update_at: float
    first_breaks: list[str]
    stuck: list[str] = field(default_factory=list)


def _fleet(nodes: int) -> Fleet:
    return Fleet(
        nodePools=[
            NodePool(
                name="mi300x",
                count=nodes,
                gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
                cpu="192",
                memory="2Ti",
                labels={"aiplane.io/pool": "inference"},
            )
        ]
    )


async def _until(check: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > end:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


def _live_ready_pods(floor: FloorWatch, mi_key: str) -> list[dict[str, Any]]:
    return [
        p
        for p in floor.pods.get(mi_key, {}).values()
        if not objects.is_deleting(p) and objects.status(p).get("phase") == "Running"
    ]


async def _faults(
    rng: random.Random, kubelet: Kubelet, floor: StressFloor, mi_key: str, count: int, log: list[str]
) -> None:
    start = time.monotonic()
    for at in sorted(rng.uniform(0.0, 4.0) for _ in range(count)):
        await asyncio.sleep(max(0.0, at - (time.monotonic() - start)))
        pods = _live_ready_pods(floor, mi_key)
        if not pods:
            continue
        pod = rng.choice(sorted(pods, key=objects.name))
        namespace, name = objects.namespace(pod), objects.name(pod)
        floor.faulted.add(str(objects.labels(pod).get(LABEL_GROUP_NAME)))
        try:
            if rng.random() < 0.5:
                kubelet.fail_pod(namespace, name)
                log.append(f"{at:.2f}s fail {name}")
            else:
                kubelet.restart_container(namespace, name, not_ready_for=rng.uniform(0.2, 1.0))
                log.append(f"{at:.2f}s restart {name}")
        except Exception as exc:  # the pod went meanwhile (evicted, rebuilt): no fault injected
            log.append(f"{at:.2f}s {name}: {type(exc).__name__}")


async def _rolling_update(client: InMemoryKubeClient, namespace: str, name: str, delay: float) -> None:
    await asyncio.sleep(delay)
    mi = await client.get(MI, name, namespace=namespace)
    roles = copy.deepcopy(mi["spec"]["template"]["roles"])
    for role in roles:
        for key in ("entryTemplate", "workerTemplate"):
            for container in ((role.get(key) or {}).get("spec") or {}).get("containers") or []:
                container["image"] = NEW_IMAGE
    await client.patch(MI, name, {"spec": {"template": {"roles": roles}}}, namespace=namespace)


async def _settled(client: InMemoryKubeClient, plan_name: str, namespace: str, name: str) -> bool:
    plan = await client.get(PLANS, plan_name)
    status = plan.get("status") or {}
    if (
        status.get("observedGeneration") != plan["metadata"]["generation"]
        or status.get("phase") != "Completed"
    ):
        return False
    mi = await client.get(MI, name, namespace=namespace)
    status = mi.get("status") or {}
    replicas = int(mi["spec"].get("replicas", 1))
    return bool(
        status.get("observedGeneration") == mi["metadata"]["generation"]
        and status.get("updatedReplicas") == replicas
        and status.get("availableReplicas") == replicas
        and status.get("currentRevision") == status.get("updateRevision")
    )


async def _leg_settles(
    client: InMemoryKubeClient, plan: str, namespace: str, name: str, timeout: float
) -> bool:
    try:
        await _until(lambda: _settled(client, plan, namespace, name), timeout, "settled")
    except TimeoutError:
        return False
    return True


async def _where_it_stands(client: InMemoryKubeClient, floor: FloorWatch, key: str) -> list[str]:
    """What a run that did not settle was waiting for: the plan, each node, the ModelInfer, its pods."""
    out = []
    plan = (await client.list(PLANS))["items"][0]
    out.append(f"plan {objects.status(plan).get('phase')}")
    for np in (await client.list(NODE_PARTITIONINGS))["items"]:
        conditions = {
            c["type"]: f"{c['status']}/{c.get('reason')}: {c.get('message', '')[:160]}"
            for c in objects.status(np).get("conditions") or []
            if c.get("status") != "True"
        }
        out.append(f"{objects.name(np)} {objects.status(np).get('phase')} {conditions}")
    mi = floor.mis.get(key) or {}
    status = objects.status(mi)
    out.append(
        f"modelinfer {key}: {status.get('availableReplicas')}/{status.get('replicas')} available, "
        f"{status.get('updatedReplicas')} updated, conditions "
        f"{[(c.get('type'), c.get('status'), c.get('reason')) for c in status.get('conditions') or []]}"
    )
    for pod in sorted(floor.pods.get(key, {}).values(), key=objects.name):
        ready = [
            c.get("status") for c in objects.status(pod).get("conditions") or [] if c.get("type") == "Ready"
        ]
        out.append(
            f"  {objects.name(pod)} on {objects.spec(pod).get('nodeName')} {objects.status(pod).get('phase')} "
            f"ready={ready} deleting={objects.is_deleting(pod)} rev={objects.labels(pod).get(LABEL_REVISION)}"
        )
    return out


async def one_run(
    seed: int,
    nodes: int,
    dcm_delay: float,
    settle_timeout: float = 180.0,
    max_faults: int = 3,
    watch_lag: float = 0.0,
    legs: int = 2,
) -> RunResult:
    rng = random.Random(seed)
    cluster = EmbeddedCluster(
        fleet=_fleet(nodes), agents=True, ready_delay=0.0, dcm_delay=dcm_delay, plugin_refresh_delay=0.0
    )
    await cluster.start()
    assert cluster.agents is not None
    client = InMemoryKubeClient.for_cluster(cluster)
    lags = random.Random(seed * 7919)
    operator = InMemoryKubeClient.for_cluster(cluster, watch_lag=lambda: lags.uniform(0.0, watch_lag))
    manager = Manager(operator, leader_election=None, handle_signals=False)
    for setup in (
        profile_controller.setup,
        plan_controller.setup,
        node_controller.setup,
        modelinfer_controller.setup,
    ):
        await setup(manager)
    task = asyncio.create_task(manager.run())
    started = time.monotonic()
    try:
        for doc in load_manifests(EXAMPLES / "partition-profiles.yaml"):
            await client.create(kinds.PARTITIONINGPROFILES, doc)
        mi = load_manifests(EXAMPLES / "modelinfer-1p2d.yaml")[0]
        namespace, name = mi["metadata"]["namespace"], mi["metadata"]["name"]
        mi["spec"]["template"]["restartGracePeriodSeconds"] = 1  # recover failures within the run
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-creds", "namespace": namespace},
            "stringData": {"token": "benchmark"},
        }
        await client.create(SECRETS, secret, namespace=namespace)
        await client.create(MI, mi, namespace=namespace)
        key = f"{namespace}/{name}"
        store = cluster.server.store
        floor = StressFloor(namespace=namespace)
        floor.seed(store)
        store.subscribe(floor)

        async def serving() -> bool:
            replicas = int(floor.mis[key]["spec"]["replicas"]) if key in floor.mis else -1
            return floor.available(key) == replicas

        await _until(serving, 60, "the ModelInfer available")
        assert floor.track([key]) == [key]
        plan = load_manifests(EXAMPLES / "partitioning-plan.yaml")[0]
        fault_log: list[str] = []
        update_at = rng.uniform(0.0, 2.0)
        await client.create(PLANS, plan)
        await asyncio.gather(
            _rolling_update(client, namespace, name, update_at),
            _faults(
                rng,
                cluster.agents.kubelet,
                floor,
                key,
                rng.randint(min(1, max_faults), max_faults),
                fault_log,
            ),
        )
        completed = await _leg_settles(client, plan["metadata"]["name"], namespace, name, settle_timeout)
        # Further legs: the plan edited back and forth (CPX → SPX → CPX …) under the same ModelInfer.
        for leg in range(1, legs):
            if not completed:
                break
            edited = plan_to(await client.get(PLANS, plan["metadata"]["name"]), PROFILES[leg % 2])
            await client.replace(PLANS, edited)
            completed = await _leg_settles(client, plan["metadata"]["name"], namespace, name, settle_timeout)
        stuck = [] if completed else await _where_it_stands(client, floor, key)
        return RunResult(
            seed=seed,
            seconds=round(time.monotonic() - started, 1),
            completed=completed,
            pod_changes=floor.changes,
            fewest_available=floor.minimum.get(key, -1),
            fewest_voluntary=floor.fewest_voluntary if floor.fewest_voluntary is not None else -1,
            floor=floor.floor(key),
            breaks=floor.break_count,
            failure_dips=floor.failure_dips,
            faults=fault_log,
            update_at=round(update_at, 2),
            first_breaks=floor.voluntary_breaks[:3],
            stuck=stuck,
        )
    finally:
        manager.stop()
        await task
        await client.close()
        await cluster.stop()


def _busy(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def _summary(results: list[RunResult], busy: int) -> dict[str, Any]:
    return {
        "runs": len(results),
        "busy_processes": busy,
        "completed": sum(1 for r in results if r.completed),
        "committed_pod_changes_checked": sum(r.pod_changes for r in results),
        "fewest_groups_available": min(r.fewest_available for r in results),
        "fewest_groups_left_by_voluntary_disruptions": min(r.fewest_voluntary for r in results),
        "floor": min(r.floor for r in results),
        "floor_breaks": sum(r.breaks for r in results),
        "dips_from_injected_failures": sum(r.failure_dips for r in results),
        "faults_injected": sum(len(r.faults) for r in results),
        "seconds_per_run_median": sorted(r.seconds for r in results)[len(results) // 2],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--dcm-delay", type=float, default=0.05)
    parser.add_argument(
        "--settle-timeout", type=float, default=180.0, help="seconds a run may take to settle"
    )
    parser.add_argument("--max-faults", type=int, default=3, help="pod failures per run: 1 to this (0: none)")
    parser.add_argument(
        "--watch-lag",
        type=float,
        default=0.0,
        help="each operator watch delivers up to this many seconds late",
    )
    parser.add_argument("--legs", type=int, default=3, help="plan edits: to CPX, back to SPX, …")
    parser.add_argument("--json", type=Path, default=None, help="write every run and the summary here")
    args = parser.parse_args(argv)
    configure_logging("warning")  # an error or warning of the operator shows; progress lines do not
    busy = _busy(args.busy)
    results: list[RunResult] = []
    try:
        for i in range(args.runs):
            result = asyncio.run(
                one_run(
                    args.seed + i,
                    args.nodes,
                    args.dcm_delay,
                    args.settle_timeout,
                    args.max_faults,
                    args.watch_lag,
                )
            )
            results.append(result)
            print(
                f"run {i + 1:>2} seed {result.seed}: {result.seconds:5.1f} s, "
                f"{'completed' if result.completed else 'NOT COMPLETED'}, {result.pod_changes} pod changes, "
                f"fewest available {result.fewest_available} (voluntary {result.fewest_voluntary}, floor {result.floor}), "
                f"breaks {result.breaks}, "
                f"failure dips {result.failure_dips}, faults {len(result.faults)}",
                flush=True,
            )
            for line in result.first_breaks:
                print(f"    BREAK {line}", flush=True)
            for line in result.stuck:
                print(f"    STUCK {line}", flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    summary = _summary(results, args.busy)
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps({"summary": summary, "runs": [asdict(r) for r in results]}, indent=2))
    ok = summary["floor_breaks"] == 0 and summary["completed"] == summary["runs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

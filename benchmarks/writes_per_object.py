"""Writes per primary object, by verb and resource, for one small fixed scenario per family.

A check that a refactor changed nothing Kubernetes sees (a benchmark script, not a test): run it before
and after, and compare the JSON. Each scenario runs on a fresh embedded cluster (``aiplane sim``'s
server with its simulated agents, in this process) with only its family's controllers, built as
``aiplane sim`` builds them, on an in-memory client of their own whose requests are counted by
``(verb, resource)``. The scenario objects are created by another client (not counted). Reported per
scenario:

* ``startup``: the operator's writes from its start until it has settled, before any scenario object
  exists (e.g. the KaiwoConfig controller's default object);
* ``converge``: its writes from the first object's create until every object is done (the scenario's
  own test) and the operator has settled, in total and divided by the number of primary objects;
* ``at_rest``: its writes during ``--rest`` seconds after that (zero when nothing is wrong).

"Settled" means: the controllers' Events flushed and no operator write for ``QUIET`` seconds. Events
are counted like any other write (``create events``, ``patch events``). A write the server refused is
counted apart, under its status code (``patch modelinfers.workload.volcano.sh/status 409``). The
scenarios reuse the object builders of ``partitioning_bench.py``, ``modelinfer_bench.py``,
``dynamo_bench.py`` and the Echo of ``runtime_bench.py``, at small scale.

Each scenario runs ``--runs`` times; a count that differed between runs is shown as ``"min-max"`` and
listed under ``varies``. The scenarios are chosen so that accepted writes do not depend on timing
(one group per ModelInfer: with two, whether the status passes through "1 of 2 available" depends on
whether both groups' pods turn ready between two reconciles). A count that varies is a race, not
noise: the ModelInfer controller's status writes used to be refused with a 409 now and then (a pod
event reconciled the ModelInfer before the watch delivered the controller's own status write); it now
reads its own status writes back, and no count varies.

Usage: ``.venv/bin/python benchmarks/writes_per_object.py [--only NAME] [--rest 5] [--out FILE]
[--commit REV]``. ``--commit`` is recorded in the output (the revision the numbers come from).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplane.controllers import registry
from aiplane.controllers.echo import ECHOES
from aiplane.kube.client import KubeClient
from aiplane.kube.logging import configure_logging
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, Resource
from aiplane.sim.client import WRITE_VERBS, InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from aiplane.simrun import in_process_manager
from benchmarks import dynamo_bench, modelinfer_bench, partitioning_bench

#: No operator write for this long (after its Events are flushed): it has settled.
QUIET = 2.0
NAMESPACE = "bench"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    """Which controllers run, on which fleet, what is created and when it is done."""

    controllers: str
    primary: Resource
    objects: int
    create: Callable[[KubeClient], Awaitable[None]]
    done: Callable[[KubeClient], Awaitable[bool]]
    gpu_vendor: str = "amd"
    nodes: int = 4
    dcm_delay: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


def _fleet(vendor: str, nodes: int) -> Fleet:
    product = "MI300X" if vendor == "amd" else "H100-SXM"
    return Fleet(
        nodePools=[
            NodePool(
                name="gpu",
                count=nodes,
                gpu=GpuSpec(vendor=vendor, product=product, count=8),
                cpu="192",
                memory="2Ti",
            ),
            NodePool(name="control", count=1, controlPlane=True),
        ]
    )


async def _namespace(client: KubeClient) -> None:
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )


# --- partitioning: one profile, one plan over every node (partitioning_bench.py) ---------------------


async def _partitioning_create(client: KubeClient) -> None:
    await client.create(
        partitioning_bench.PROFILES,
        {
            "apiVersion": "infrastructure.silogen.ai/v1alpha1",
            "kind": "PartitioningProfile",
            "metadata": {"name": "cpx"},
            "spec": {"dcmProfileName": "cpx", "expectedResources": {"amd.com/gpu": "64"}},
        },
    )
    await client.create(
        partitioning_bench.PLANS,
        {
            "apiVersion": "infrastructure.silogen.ai/v1alpha1",
            "kind": "PartitioningPlan",
            "metadata": {"name": "cpx-all"},
            "spec": {
                "rollout": {"maxParallel": 2, "maxUnavailable": 2},
                "rules": [
                    {
                        "selector": {"matchLabels": {"amd.com/gpu.product-name": partitioning_bench.PRODUCT}},
                        "profileRef": {"name": "cpx"},
                    }
                ],
            },
        },
    )


async def _partitioning_done(client: KubeClient) -> bool:
    plan = await client.get(partitioning_bench.PLANS, "cpx-all")
    return (plan.get("status") or {}).get("phase") == "Completed"


# --- ModelInfer: two disaggregated ModelInfers of one group each (modelinfer_bench.py) ---------------


async def _modelinfer_create(client: KubeClient) -> None:
    await _namespace(client)
    for i in range(2):
        await client.create(
            modelinfer_bench.MI, modelinfer_bench.modelinfer(f"mi-{i}", NAMESPACE, 1, 1), namespace=NAMESPACE
        )


async def _modelinfer_done(client: KubeClient) -> bool:
    items = (await client.list(modelinfer_bench.MI, NAMESPACE))["items"]
    return len(items) == 2 and all(modelinfer_bench._available(mi) for mi in items)


# --- Dynamo: two graphs of frontend, prefill and decode workers (dynamo_bench.py) --------------------


async def _dynamo_create(client: KubeClient) -> None:
    await _namespace(client)
    for i in range(2):
        await client.create(
            dynamo_bench.DGD, dynamo_bench.graph(f"graph-{i}", NAMESPACE, 1), namespace=NAMESPACE
        )


async def _dynamo_done(client: KubeClient) -> bool:
    items = (await client.list(dynamo_bench.DGD, NAMESPACE))["items"]
    return len(items) == 2 and all(dynamo_bench._successful(dgd) for dgd in items)


# --- the runtime: ten Echo objects (runtime_bench.py) ------------------------------------------------

ECHO_OBJECTS = 10


async def _echo_create(client: KubeClient) -> None:
    await _namespace(client)
    for i in range(ECHO_OBJECTS):
        body = {
            "apiVersion": "diagnostics.aiplane.io/v1",
            "kind": "Echo",
            "metadata": {"name": f"echo-{i:03d}", "namespace": NAMESPACE},
            "spec": {"value": f"v{i}"},
        }
        await client.create(ECHOES, body, namespace=NAMESPACE)


async def _echo_done(client: KubeClient) -> bool:
    items = (await client.list(ECHOES, NAMESPACE))["items"]
    return len(items) == ECHO_OBJECTS and all(
        (o.get("status") or {}).get("value") == o["spec"]["value"] for o in items
    )


SCENARIOS: dict[str, Scenario] = {
    "partitioning": Scenario(
        controllers="partitioningprofile,partitioningplan,nodepartitioning",
        primary=partitioning_bench.NODE_PARTITIONINGS,
        objects=4,  # one NodePartitioning per node
        create=_partitioning_create,
        done=_partitioning_done,
    ),
    "modelinfer": Scenario(
        controllers="modelinfer",
        primary=modelinfer_bench.MI,
        objects=2,
        create=_modelinfer_create,
        done=_modelinfer_done,
    ),
    "dynamo": Scenario(
        controllers=dynamo_bench.CONTROLLERS,
        primary=dynamo_bench.DGD,
        objects=2,
        create=_dynamo_create,
        done=_dynamo_done,
        gpu_vendor="nvidia",
    ),
    "echo": Scenario(
        controllers="echo",
        primary=ECHOES,
        objects=ECHO_OBJECTS,
        create=_echo_create,
        done=_echo_done,
        nodes=1,
    ),
}


class CountingClient(InMemoryKubeClient):
    """The operator's client: its write requests counted by verb, resource and outcome.

    A write the server rejects (a 409 conflict: the controller decided on a view older than the
    object) changed nothing, but it is a request: counted apart, as ``"verb resource 409"``."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.outcomes: Counter[str] = Counter()
        self._target: dict[asyncio.Task[Any] | None, tuple[str, str]] = {}

    def _count(self, verb: str, target: Any) -> None:
        super()._count(verb, target)
        if verb in WRITE_VERBS and target is not None:
            self._target[asyncio.current_task()] = (verb, target.label)

    async def _send(
        self, method: str, path: str, query: Mapping[str, str], body: bytes, content_type: str
    ) -> Any:
        response = await super()._send(method, path, query, body, content_type)
        target = self._target.pop(asyncio.current_task(), None)
        if target is not None:
            verb, label = target
            self.outcomes[f"{verb} {label}" + ("" if response.status < 400 else f" {response.status}")] += 1
        return response

    def take(self) -> dict[str, int]:
        """The writes counted since the last ``take``, sorted by ``"verb resource[ code]"``."""
        counts = dict(sorted(self.outcomes.items()))
        self.outcomes.clear()
        return counts


async def _flush_events(manager: Manager) -> None:
    """Every Event the controllers have scheduled written (as tests/settle.py waits for them)."""
    for shared in manager.recorders:
        await shared.flush()
    for controller in manager.controllers:
        for recorder in (controller.recorder, getattr(controller.reconciler, "recorder", None)):
            flush = getattr(recorder, "flush", None)
            if flush is not None:
                await flush()


async def _settled(manager: Manager, operator: CountingClient, timeout: float = 120) -> None:
    """Events flushed and no operator write for ``QUIET`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await _flush_events(manager)
        before = operator.writes
        await asyncio.sleep(QUIET)
        if operator.writes == before:
            return
    raise SystemExit("the operator kept writing")


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def run_scenario(name: str, scenario: Scenario, rest: float) -> dict[str, dict[str, int]]:
    """One run: the operator's writes at start-up, while converging, and at rest."""
    cluster = EmbeddedCluster(
        fleet=_fleet(scenario.gpu_vendor, scenario.nodes),
        agents=True,
        ready_delay=0.0,
        dcm_delay=scenario.dcm_delay,
    )
    await cluster.start()
    admin = InMemoryKubeClient.for_cluster(cluster, user_agent="aiplane-bench/1")
    operator = CountingClient.for_cluster(cluster)
    manager = await in_process_manager(operator, registry.select(scenario.controllers))
    task = asyncio.create_task(manager.run())
    try:
        await _settled(manager, operator)
        startup = operator.take()
        await scenario.create(admin)
        await _until(lambda: scenario.done(admin), f"{name} done")
        await _settled(manager, operator)
        converge = operator.take()
        await asyncio.sleep(rest)
        await _flush_events(manager)
        at_rest = operator.take()
        primary = (await admin.list(scenario.primary))["items"]
        if len(primary) != scenario.objects:
            raise SystemExit(f"{name}: {len(primary)} primary objects, expected {scenario.objects}")
    finally:
        manager.stop()
        await task
        await admin.close()
        await operator.close()
        await cluster.stop()
    return {"startup": startup, "converge": converge, "at_rest": at_rest}


def _merge(runs: list[dict[str, int]]) -> dict[str, int | str]:
    """Per key, the count if every run agrees, else ``"min-max"`` (a timing-dependent count)."""
    keys = sorted({key for run in runs for key in run})
    merged: dict[str, int | str] = {}
    for key in keys:
        values = [run.get(key, 0) for run in runs]
        merged[key] = values[0] if len(set(values)) == 1 else f"{min(values)}-{max(values)}"
    return merged


def summarise(scenario: Scenario, runs: list[dict[str, dict[str, int]]], rest: float) -> dict[str, Any]:
    """The runs of one scenario as one table; ``varies`` lists the counts that differed between runs."""
    phases = {phase: _merge([run[phase] for run in runs]) for phase in ("startup", "converge", "at_rest")}
    accepted = sorted({sum(n for key, n in run["converge"].items() if not key[-1].isdigit()) for run in runs})
    return {
        "controllers": scenario.controllers,
        "primary": f"{scenario.primary.plural}.{scenario.primary.group}".rstrip("."),
        "objects": scenario.objects,
        "runs": len(runs),
        **phases,
        "accepted_writes_per_object": [round(n / scenario.objects, 3) for n in accepted],
        "at_rest_seconds": rest,
        "varies": sorted(
            f"{phase} {key}"
            for phase, table in phases.items()
            for key, v in table.items()
            if isinstance(v, str)
        ),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    names = [args.only] if args.only else list(SCENARIOS)
    results: dict[str, Any] = {}
    for name in names:
        runs = [await run_scenario(name, SCENARIOS[name], args.rest) for _ in range(args.runs)]
        results[name] = summarise(SCENARIOS[name], runs, args.rest)
    return {"commit": args.commit, "scenarios": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(SCENARIOS), help="run one scenario")
    parser.add_argument("--rest", type=float, default=5.0, help="seconds counted at rest after settling")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per scenario (counts that differ are ranges)"
    )
    parser.add_argument("--commit", default="", help="the revision measured (recorded in the output)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    configure_logging("warning")
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2, sort_keys=False) + "\n"
    sys.stdout.write(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

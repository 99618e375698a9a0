"""The chaos campaigns, shared by the pytest suite (one short round) and the soak (many rounds).

A campaign applies what a user would (examples/ manifests), lets the monkey inject faults while the
operator converges, then stops the faults and checks the end state and the writes at rest. Every
problem goes into ``world.figures.violations``; the caller asserts there are none.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aiplane.demo.live import plan_to
from aiplane.kube.client import ApiError
from aiplane.kube.resources import NAMESPACES, SECRETS, resource_for
from tests.chaos.harness import World, apply, load, retrying
from tests.chaos.invariants import (
    Checker,
    GraphInvariants,
    PartitioningInvariants,
    PlatformInvariants,
    RequestInvariants,
    ServingInvariants,
)

NS = "team-a"
DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DECODE = "VllmDecodeWorker"


def _bump_images(doc: dict[str, Any], tag: str) -> dict[str, Any]:
    """The same ModelInfer with every image re-tagged: a template change, so a rolling update."""
    out = copy.deepcopy(doc)
    for role in out["spec"]["template"]["roles"]:
        for which in ("entryTemplate", "workerTemplate"):
            for container in (role.get(which) or {}).get("spec", {}).get("containers") or []:
                container["image"] = container["image"].rsplit(":", 1)[0] + ":" + tag
    return out


async def _converge(
    world: World, kinds: Sequence[str], what: str, done: Any, timeout: float, min_faults: int
) -> None:
    ok = await world.under_chaos(world.monkey(kinds), done, timeout, min_faults)
    if not ok:
        world.figures.violations.append(f"{what}: not converged within {timeout:.0f} s")


async def _settle(world: World, checkers: Sequence[Checker], quiet: float) -> None:
    """End state of every checker, then zero writes at rest."""
    store = world.cluster.server.store
    for checker in checkers:
        world.figures.violations += checker.end_state(store)
    writes = await world.writes_at_rest(quiet)
    world.figures.checks += 2
    crashes, world.operators.crashes[:] = list(world.operators.crashes), []
    world.figures.violations += crashes
    if writes:
        world.figures.violations.append(f"{len(writes)} operator writes at rest: {writes[:5]}")


async def serving_campaign(
    world: World,
    kinds: Sequence[str],
    *,
    rounds: int = 1,
    timeout: float = 60.0,
    quiet: float = 2.0,
    min_faults: int = 3,
) -> None:
    """Partitioning + ModelInfer + KaiwoConfig + AIMNamespaceConfig: the ModelInfer serves on the
    inference pool while each round repartitions that pool (CPX, then SPX, …) and rolls a new image
    out, under faults."""
    store = world.cluster.server.store
    client = world.client
    plan = load("partitioning-plan.yaml")[0]
    mi = load("modelinfer-1p2d.yaml")[0]
    partitioning = PartitioningInvariants(plan=plan["metadata"]["name"], store=store)
    serving = ServingInvariants(namespace=NS)
    serving.seed(store)
    platform = PlatformInvariants(queue="kaiwo", decorated_namespace=NS, pull_secret="aim-registry-creds")
    world.watch(partitioning, serving, platform)
    await apply(
        client, load("kaiwoconfig.yaml") + load("partition-profiles.yaml") + load("aimnamespaceconfig.yaml")
    )
    await apply(client, [mi])
    await _converge(world, kinds, "ModelInfer up", lambda: not serving.problems(store), timeout, 1)
    serving.track()
    for r in range(rounds):
        profile = "mi300x-cpx" if r % 2 == 0 else "mi300x-spx"
        await apply(client, [plan_to(plan, profile), _bump_images(mi, f"chaos-{r}")])

        def done() -> bool:
            return (
                partitioning.settled(store)
                and not partitioning.problems(store)
                and not serving.problems(store)
                and not platform.problems(store)
            )

        await _converge(world, kinds, f"round {r} ({profile} + new image)", done, timeout, min_faults)
        world.figures.rollouts += 2  # the plan's and the ModelInfer's
        await _settle(world, [partitioning, serving, platform], quiet)
    world.figures.add(world.checkers)


async def dynamo_campaign(
    world: World, kinds: Sequence[str], *, timeout: float = 60.0, quiet: float = 2.0, min_faults: int = 3
) -> None:
    """A DynamoGraphDeployment created and its decode worker's image changed, then deleted; a
    DynamoGraphDeploymentRequest planned and applied: each under faults."""
    client = world.client
    await retrying(lambda: client.apply(NAMESPACES, _namespace(), field_manager="chaos", force=True))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret", "namespace": NS}}
    await retrying(
        lambda: client.apply(SECRETS, {**secret, "stringData": {"HF_TOKEN": "hf_x"}}, field_manager="chaos")
    )
    dgd = load("dynamo-vllm-disagg.yaml")[0]
    name = dgd["metadata"]["name"]
    graph = GraphInvariants(namespace=NS, graph=name)
    world.watch(graph)
    assert graph.watch is not None
    await apply(client, [dgd])
    await _converge(world, kinds, "graph up", graph.watch.converged, timeout, 1)
    world.figures.rollouts += 1
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1-chaos"
    changed = copy.deepcopy(dgd)
    changed["spec"]["services"][DECODE]["extraPodSpec"]["mainContainer"]["image"] = image
    await apply(client, [changed])
    watch = graph.watch
    await _converge(
        world,
        kinds,
        "graph image change",
        lambda: watch.converged(image=image, component=DECODE),
        timeout,
        min_faults,
    )
    world.figures.rollouts += 1
    await _settle(world, [graph], quiet)
    await retrying(lambda: _delete(world, name))
    await world.under_chaos(
        world.monkey(()), lambda: graph.watch is not None and not graph.watch.pods, timeout
    )
    world.checkers.remove(graph)
    world.cluster.server.store.unsubscribe(graph)
    world.figures.add([graph])

    dgdr = load("dgdr-qwen3-8b-h100.yaml")[0]
    dgdr["spec"]["autoApply"] = True  # the example only plans; here the graph above is gone, so it deploys
    request = RequestInvariants(
        namespace=NS, request=dgdr["metadata"]["name"], graph=dgdr["spec"]["deploymentOverrides"]["name"]
    )
    world.watch(request)
    await apply(client, [dgdr])
    assert request.watch is not None
    await _converge(world, kinds, "request Ready", request.watch.ready, timeout, min_faults)
    world.figures.rollouts += 1
    await _settle(world, [request], quiet)
    world.figures.add([request])


def _namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}


async def _delete(world: World, name: str) -> None:
    try:
        await world.client.delete(DGD, name, namespace=NS)
    except ApiError as exc:
        if not exc.not_found:
            raise

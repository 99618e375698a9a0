"""The demo's headline: repartition a serving pool under live inference.

The example ModelInfer serves on the MI300X inference pool (CPX, after the partitioning section);
the PartitioningPlan is edited to take the pool to SPX, then back to CPX (CPX ↔ SPX). The plan drains up to ``maxParallel``
nodes at once, through the Eviction API; the ModelInfer controller keeps one PodDisruptionBudget per
InferGroup and releases groups only within ``replicas - maxUnavailable``. The floor is measured on
every committed pod change (:class:`~aiplane.demo.serving.FloorWatch`), shown live beside the
rollout and the groups, and the section fails if it was ever broken.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.naming import LABEL_NAME
from aiplane.demo.common import (
    DemoOptions,
    Feed,
    StoreView,
    WriteCount,
    apply_all,
    fit,
    load_manifests,
    until,
    writes_then_quiet,
)
from aiplane.demo.modelinfer import ModelInferWatch
from aiplane.demo.partitioning import NP_KEY, RolloutWatch
from aiplane.demo.serving import MI_KEY, POD_KEY, FloorWatch
from aiplane.kube.client import KubeClient
from aiplane.kube.resources import NODES, PODS

#: What the inference pool goes back to, and from.
BACK_TO = "mi300x-spx"
FROM = "mi300x-cpx"
INFERENCE_POOL = ("aiplane.io/pool", "inference")


def _selects_inference(rule: dict[str, Any]) -> bool:
    selector = rule.get("selector") or {}
    key, value = INFERENCE_POOL
    if (selector.get("matchLabels") or {}).get(key) == value:
        return True
    return any(
        e.get("key") == key and value in (e.get("values") or [])
        for e in selector.get("matchExpressions") or []
    )


def plan_to(plan: dict[str, Any], profile: str) -> dict[str, Any]:
    """The same plan with the inference pool's rule pointing at ``profile``: an edit, so a new rollout."""
    out = copy.deepcopy(plan)
    for rule in out["spec"]["rules"]:
        if _selects_inference(rule):
            rule["profileRef"] = {"name": profile}
    return out


def _inference_gpus(client_nodes: list[dict[str, Any]]) -> dict[str, str]:
    return {
        objects.name(n): str((objects.status(n).get("allocatable") or {}).get("amd.com/gpu", "0"))
        for n in client_nodes
        if objects.labels(n).get(INFERENCE_POOL[0]) == INFERENCE_POOL[1]
    }


def floor_summary(floor: FloorWatch, mi_key: str) -> Table:
    table = Table(title=f"Serving floor of ModelInfer {mi_key}", show_header=False, title_style="bold")
    table.add_column(style="bold")
    table.add_column()
    replicas = int(objects.spec(floor.mis.get(mi_key)).get("replicas", 1))
    kept = floor.kept(mi_key)
    table.add_row(
        "serving floor",
        f"fewest groups available {floor.minimum.get(mi_key)} of {replicas}, measured on every one of "
        f"{floor.changes} committed pod changes (floor replicas - maxUnavailable = {floor.floor(mi_key)}): "
        + ("[bold green]kept[/]" if kept else "[bold red]BROKEN[/]"),
    )
    released = sorted(floor.released_ever.get(mi_key, set()))
    table.add_row(
        "group budgets",
        f"{len(released)} of {len(floor.budgets.get(mi_key, {}))} PodDisruptionBudgets released for eviction "
        f"at some point ({', '.join(released) or 'none'}); now {len(floor.released(mi_key))} released",
    )
    for breach in floor.breaches[:3]:
        table.add_row("[red]below the floor[/]", str(breach))
    return fit(table, 0)


async def _leg(
    feed: Feed,
    view: StoreView,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
    plan: dict[str, Any],
    target: str,
    floor: FloorWatch,
    groups: ModelInferWatch,
    mi_key: str,
) -> bool:
    """One edit of the plan (the inference pool to ``target``) rolled out while the ModelInfer serves."""
    rollout = plan["spec"].get("rollout") or {}
    watch = RolloutWatch(
        plan=plan["metadata"]["name"],
        max_parallel=int(rollout.get("maxParallel", 1)),
        max_unavailable=int(rollout.get("maxUnavailable", 1)),
    )
    watch.seed((await client.list(NODES))["items"], (await client.list(PODS))["items"], view.items(NP_KEY))
    console.print(f"\nThe inference pool to [bold]{target}[/] under {mi_key}:")
    feed.subscribe(watch)
    try:
        operator.reset_counts()
        watch.started = groups.started = time.monotonic()
        await apply_all(client, [plan_to(plan, target)])

        def render() -> Group:
            return Group(watch.render(), floor.render(mi_key), groups.render())

        def done() -> bool:
            replicas = int(objects.spec(floor.mis.get(mi_key)).get("replicas", 1))
            return watch.ended() and floor.available(mi_key) == replicas

        with Live(render(), console=console, refresh_per_second=8, transient=False) as live:
            finished = await until(done, opts.timeout, live, render)
        writes, quiet = await writes_then_quiet(operator, opts)
    finally:
        feed.unsubscribe(watch)
    console.print()
    console.print(watch.summary(writes, quiet, opts.quiet_seconds))
    gpus = _inference_gpus((await client.list(NODES))["items"])
    ok = (
        finished
        and watch.phase == "Completed"
        and not watch.left_marked()
        and watch.worst_in_progress <= watch.max_parallel
        and watch.worst_unavailable <= watch.max_unavailable
        and floor.kept(mi_key)
        and quiet == 0
    )
    if not ok:
        reason = "timed out" if not finished else f"plan {watch.phase}, inference pool {gpus}"
        if not floor.kept(mi_key):
            reason = f"the serving floor was broken: {floor.breaches[0] if floor.breaches else 'not tracked'}"
        console.print(f"[bold red]the live repartitioning to {target} did not complete cleanly ({reason})[/]")
    return ok


async def live_repartition_section(
    feed: Feed,
    view: StoreView,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
) -> bool:
    """CPX → SPX, then back to CPX, both under the live ModelInfer; the floor measured throughout.

    ``view`` is read once, at the start, while the ModelInfer is steady (section 2 ended converged and
    quiet), then ``feed`` delivers every change: on a real cluster the listing and the watches are not
    one snapshot, which only a change between them could tell apart, and nothing changes until the plan
    is edited."""
    plan = load_manifests(opts.examples / "partitioning-plan.yaml")[0]
    doc = load_manifests(opts.examples / "modelinfer-1p2d.yaml")[0]
    namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    mi_key = f"{namespace}/{name}"
    rollout = plan["spec"].get("rollout") or {}
    groups = ModelInferWatch(namespace, name)
    groups.mi = view.get(MI_KEY, namespace, name)
    groups.pods = {
        objects.name(p): p
        for p in view.items(POD_KEY, namespace)
        if objects.labels(p).get(LABEL_NAME) == name
    }
    floor = FloorWatch(namespace=namespace)
    floor.seed(view)
    tracked = floor.track([mi_key])
    console.rule("[bold]3. Repartition the serving pool under live inference")
    console.print(
        f"{mi_key} serves on the inference pool ({FROM}). The plan [bold]{plan['metadata']['name']}[/] "
        f"takes the pool to {BACK_TO} and back to {FROM} while it serves: up to "
        f"{rollout.get('maxParallel', 1)} nodes drain at once, and the ModelInfer's per-group "
        "PodDisruptionBudgets let a drain take only what keeps "
        f"[bold]{floor.floor(mi_key)}[/] of {objects.spec(floor.mis.get(mi_key)).get('replicas')} groups "
        "(replicas - maxUnavailable) available — measured on every committed pod change."
    )
    if not tracked:
        console.print(f"[bold red]{mi_key} is not fully available: there is no floor to keep[/]")
        return False
    for listener in (groups, floor):
        feed.subscribe(listener)
    try:
        ok = True
        for target in (BACK_TO, FROM):
            ok = await _leg(feed, view, client, operator, opts, console, plan, target, floor, groups, mi_key)
            if not ok:
                break
    finally:
        for listener in (groups, floor):
            feed.unsubscribe(listener)
    console.print(floor_summary(floor, mi_key))
    return ok

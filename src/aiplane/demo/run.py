"""``aiplane demo``: the operator at work on the embedded cluster, live, from a fresh clone.

It starts what ``aiplane sim`` starts (the HTTPS API server, the simulated kubelet, DaemonSet
controller and AMD GPU operator, and every controller in-process), applies the example manifests and
shows them converge. The cluster is served over HTTPS with a kubeconfig written before anything is
applied, so a second terminal can follow along with kubectl.

Exit status: 0 when every section reached its goal (the plan Completed, no node left cordoned or
tainted, rollout limits never exceeded, the ModelInfer never below its floor while its pool was
repartitioned), 1 otherwise, 2 for bad options.
"""

from __future__ import annotations

import asyncio
import copy
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers import registry
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.demo import queued as queued_demo
from aiplane.demo.common import (
    DEMO_NAMESPACE,
    FIELD_MANAGER,
    DemoOptions,
    Feed,
    StoreView,
    WriteCount,
    apply_all,
    load_manifests,
    until,
    until_quiet,
    writes_then_quiet,
)
from aiplane.demo.dynamo import GraphWatch
from aiplane.demo.hints import closing_message, follow_message, keep_message
from aiplane.demo.live import live_repartition_section
from aiplane.demo.modelinfer import ModelInferWatch
from aiplane.demo.partitioning import RolloutWatch
from aiplane.demo.platform import CLUSTERQUEUES, QueueWatch, credential_refs
from aiplane.demo.request import RequestWatch
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.logging import configure_logging
from aiplane.kube.resources import NAMESPACES, NODES, PODS, STORAGECLASSES, resource_for
from aiplane.sim.apiserver.store import Store
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.simrun import in_process_manager

#: The demo's operator exposes Dynamo frontends through an Ingress of this class (``aiplane run
#: --ingress-controller-class-name``), so the example graph shows its Ingress too.
DEMO_INGRESS_CLASS = "nginx"
DYNAMO_WORKER = "VllmDecodeWorker"
HF_TOKEN_SECRET = "hf-token-secret"
DYNAMO_NEW_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"


def inference_workloads(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One serving pod per MI300X inference node, so the drains have something to evict."""
    pods = []
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if labels.get("aiplane.io/pool") != "inference":
            continue
        name = node["metadata"]["name"]
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"vllm-{name}", "namespace": DEMO_NAMESPACE, "labels": {"app": "vllm"}},
                "spec": {
                    "nodeName": name,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "rocm/vllm:latest",
                            "resources": {"limits": {"amd.com/gpu": "8"}, "requests": {"amd.com/gpu": "8"}},
                        }
                    ],
                },
            }
        )
    return pods


async def _manager(cluster: EmbeddedCluster) -> tuple[Any, InMemoryKubeClient]:
    client = InMemoryKubeClient.for_cluster(cluster)
    manager = await in_process_manager(
        client, registry.select("all"), options=[DynamoOptions(ingress_class=DEMO_INGRESS_CLASS)]
    )
    return manager, client


async def partitioning_section(
    feed: Feed,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
) -> bool:
    profiles = load_manifests(opts.examples / "partition-profiles.yaml")
    plan = load_manifests(opts.examples / "partitioning-plan.yaml")[0]
    rollout = plan["spec"].get("rollout") or {}
    watch = RolloutWatch(
        plan=plan["metadata"]["name"],
        max_parallel=int(rollout.get("maxParallel", 1)),
        max_unavailable=int(rollout.get("maxUnavailable", 1)),
    )
    nodes = (await client.list(NODES))["items"]
    workloads = inference_workloads(nodes)
    for pod in workloads:
        await client.create(PODS, pod, namespace=DEMO_NAMESPACE)
    watch.seed(nodes, (await client.list(PODS))["items"])
    console.rule("[bold]1. GPU partitioning")
    console.print(
        f"Applying {opts.examples}/partition-profiles.yaml ({len(profiles)} profiles) and "
        f"partitioning-plan.yaml: [bold]{watch.plan}[/] (maxParallel {watch.max_parallel}, "
        f"maxUnavailable {watch.max_unavailable}); {len(workloads)} serving pods on the inference nodes "
        "will be evicted through the Eviction API. The KaiwoConfig (examples/kaiwoconfig.yaml) keeps the "
        "Kueue ClusterQueue's amd.com/gpu quota in step with what the nodes advertise."
    )
    queue = await _queue_watch(feed, client, opts, console)
    # A second workload, too big for the SPX quota: it waits in Kueue until CPX adds capacity.
    waiting = await queued_demo.submit(feed, client, queue, opts, console) if queue is not None else None
    admitted = True
    feed.subscribe(watch)

    def render() -> Any:
        return watch.render() if waiting is None else Group(waiting.line(), watch.render())

    try:
        operator.reset_counts()
        await apply_all(client, profiles)
        await apply_all(client, [plan])
        watch.started = time.monotonic()
        with Live(render(), console=console, refresh_per_second=8, transient=False) as live:
            done = await until(
                lambda: watch.phase in ("Completed", "Degraded", "Failed"), opts.timeout, live, render
            )
            if waiting is not None:  # admitted mid-rollout: its pods start before the quiet window
                await until(waiting.done, opts.timeout, live, render)
        writes, quiet = await writes_then_quiet(operator, opts)
        console.print()
        console.print(watch.summary(writes, quiet, opts.quiet_seconds))
        if queue is not None:
            await _queue_followed(queue, client, opts, console)
        if waiting is not None:
            admitted = await queued_demo.finish(feed, client, waiting, opts, console)
    finally:
        feed.unsubscribe(watch)
        if queue is not None:
            feed.unsubscribe(queue)
    ok = (
        done
        and admitted
        and (queue is None or queue.never_lower())
        and watch.phase == "Completed"
        and not watch.left_marked()
        and watch.worst_in_progress <= watch.max_parallel
        and watch.worst_unavailable <= watch.max_unavailable
    )
    if not ok:
        reason = "timed out" if not done else f"ended {watch.phase}"
        console.print(f"[bold red]partitioning did not complete cleanly ({reason})[/]")
    return ok


async def _queue_watch(
    feed: Feed, client: KubeClient, opts: DemoOptions, console: Console
) -> QueueWatch | None:
    """Follow the KaiwoConfig's ClusterQueue from its first quota on; None where Kueue's API is not
    served (the real control plane has no Kueue yet), said so, not imitated."""
    if not await client.served(CLUSTERQUEUES):
        console.print(
            "[yellow]Kueue is not installed on this cluster (no ClusterQueue API): the ClusterQueue quota "
            "part of this section is skipped.[/]"
        )
        return None
    queue = QueueWatch(str(kaiwo_queue_name(opts)))
    feed.subscribe(queue)
    await until_quiet(lambda: bool(queue.quotas), opts.timeout)
    queue.mark()
    return queue


async def _queue_followed(queue: QueueWatch, client: KubeClient, opts: DemoOptions, console: Console) -> None:
    """The ClusterQueue's quota once it equals what the nodes now advertise (partitions included)."""
    expected = sum(
        int(str((n.get("status") or {}).get("allocatable", {}).get("amd.com/gpu", "0")))
        for n in (await client.list(NODES))["items"]
    )
    await until_quiet(lambda: bool(queue.quotas) and queue.quotas[-1] == expected, opts.timeout)
    console.print(
        f"Kueue ClusterQueue [bold]{queue.name}[/], amd.com/gpu nominal quota (from allocatable, partitions "
        f"included): {queue.describe()}"
    )


def kaiwo_queue_name(opts: DemoOptions) -> str:
    """The default ClusterQueue the example KaiwoConfig names."""
    doc = load_manifests(opts.examples / "kaiwoconfig.yaml")[0]
    return str(doc["spec"].get("defaultClusterQueueName") or "kaiwo")


async def ensure_secret(client: KubeClient, namespace: str, name: str, data: dict[str, str]) -> None:
    """A Secret the example's pods read (a token), as the user would create it before applying: without
    it their containers wait in CreateContainerConfigError, as on a real cluster."""
    await client.apply(
        NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        field_manager=FIELD_MANAGER,
    )
    await client.apply(
        resource_for("v1", "Secret"),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": data,
        },
        field_manager=FIELD_MANAGER,
    )


def _bump_images(doc: dict[str, Any], tag: str) -> dict[str, Any]:
    """The same ModelInfer with every container image re-tagged: a template change, so a rollout."""
    out = copy.deepcopy(doc)
    for role in out["spec"]["template"]["roles"]:
        for which in ("entryTemplate", "workerTemplate"):
            for container in (role.get(which) or {}).get("spec", {}).get("containers") or []:
                container["image"] = container["image"].rsplit(":", 1)[0] + ":" + tag
    return out


async def modelinfer_section(
    feed: Feed,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
) -> bool:
    doc = load_manifests(opts.examples / "modelinfer-1p2d.yaml")[0]
    namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    rolling = (doc["spec"].get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    max_unavailable, max_surge = int(rolling.get("maxUnavailable", 1)), int(rolling.get("maxSurge", 0))
    console.rule("[bold]2. ModelInfer: disaggregated prefill/decode groups")
    console.print(
        f"Applying {opts.examples}/modelinfer-1p2d.yaml: [bold]{namespace}/{name}[/], "
        f"{doc['spec']['replicas']} InferGroups of 1 prefill + 2 decode role replicas (entry + 1 worker each), "
        f"one amd.com/gpu each (a CPX partition now), gang-scheduled by {gang_words(feed)} onto the MI300X "
        "inference pool (its nodeSelector); then an image change rolls out "
        f"(maxUnavailable {max_unavailable}, maxSurge {max_surge})."
    )
    watch = ModelInferWatch(namespace, name)
    feed.subscribe(watch)
    try:
        await client.apply(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            field_manager=FIELD_MANAGER,
        )
        # The team's AIMNamespaceConfig (with its Secrets, placeholder values): every pod of the
        # namespace's workloads gets the credentials by Secret reference and the pull secret.
        await apply_all(client, load_manifests(opts.examples / "aimnamespaceconfig.yaml"))
        operator.reset_counts()
        watch.started = time.monotonic()
        await apply_all(client, [doc])
        with Live(watch.render(), console=console, refresh_per_second=8, transient=False) as live:
            up = await until(watch.converged, opts.timeout, live, watch.render)
        up_seconds = time.monotonic() - watch.started
        if not up:
            console.print("[bold red]the ModelInfer did not become Available in time[/]")
            return False
        old_revision = str(watch.status.get("updateRevision"))
        console.print()
        console.print(
            f"[green]Available[/] after {up_seconds:.1f}s. Now a new image: every group is replaced, highest ordinal first."
        )
        watch.track()
        rollout_started = time.monotonic()
        await apply_all(client, [_bump_images(doc, "rocm6.4.2_vllm_0.10.2")])
        with Live(watch.render(), console=console, refresh_per_second=8, transient=False) as live:
            done = await until(
                lambda: watch.converged(revision=old_revision), opts.timeout, live, watch.render
            )
        rollout_seconds = time.monotonic() - rollout_started
        writes, quiet = await writes_then_quiet(operator, opts)
        console.print()
        console.print(
            watch.summary(
                up_seconds=up_seconds,
                rollout_seconds=rollout_seconds,
                max_unavailable=max_unavailable,
                max_surge=max_surge,
                writes=writes,
                quiet_writes=quiet,
                quiet_seconds=opts.quiet_seconds,
            )
        )
        carrying, env_names, pulls = credential_refs(watch.pods.values())
        console.print(
            f"From the AIMNamespaceConfig {namespace}/default, by Secret reference (no value copied): "
            f"{', '.join(env_names) or 'none'} in {carrying} of {len(watch.pods)} pods; image pull secrets "
            f"{', '.join(pulls) or 'none'}."
        )
    finally:
        feed.unsubscribe(watch)
    replicas = int(doc["spec"]["replicas"])
    ok = (
        done
        and carrying == len(watch.pods) > 0
        and quiet == 0
        and watch.min_available is not None
        and watch.min_available >= replicas - max_unavailable
        and watch.max_groups <= replicas + max_surge
    )
    if not ok:
        console.print("[bold red]the rolling update did not complete cleanly[/]")
    return ok


def _with_worker_image(doc: dict[str, Any], service: str, image: str) -> dict[str, Any]:
    """The same graph with one service's image changed: a template change, so that service rolls."""
    out = copy.deepcopy(doc)
    out["spec"]["services"][service]["extraPodSpec"]["mainContainer"]["image"] = image
    return out


async def _dynamo_children(client: KubeClient, namespace: str, name: str) -> dict[str, int]:
    """What the graph made, by kind, as ``kubectl get -l`` would count it."""
    selector = f"nvidia.com/dynamo-graph-deployment-name={name}"
    counts: dict[str, int] = {}
    for api_version, kind in (
        ("nvidia.com/v1alpha1", "DynamoComponentDeployment"),
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("networking.k8s.io/v1", "Ingress"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("v1", "Pod"),
    ):
        items = (
            await client.list(resource_for(api_version, kind), namespace=namespace, label_selector=selector)
        )["items"]
        counts[kind] = len(items)
    pvcs = (await client.list(resource_for("v1", "PersistentVolumeClaim"), namespace=namespace))["items"]
    counts["PersistentVolumeClaim"] = len(pvcs)
    return counts


async def dynamo_section(
    feed: Feed,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
) -> bool:
    doc = load_manifests(opts.examples / "dynamo-vllm-disagg.yaml")[0]
    namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    console.rule("[bold]4. Dynamo: a disaggregated vLLM graph")
    console.print(
        f"Applying {opts.examples}/dynamo-vllm-disagg.yaml: [bold]{namespace}/{name}[/], a Frontend, prefill "
        "and decode workers on the NVIDIA nodes: one DynamoComponentDeployment per service, each a Deployment "
        f"(the Frontend also a Service and an Ingress of class {DEMO_INGRESS_CLASS}, the decode worker an HPA), "
        f"and the compilation-cache PVC. Then the {DYNAMO_WORKER} image changes: the graph is not "
        "'successful' again until the new pods are available."
    )
    watch = GraphWatch(namespace, name)
    feed.subscribe(watch)
    try:
        await client.apply(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            field_manager=FIELD_MANAGER,
        )
        await ensure_secret(client, namespace, HF_TOKEN_SECRET, {"HF_TOKEN": "hf_demo_placeholder"})
        operator.reset_counts()
        watch.started = time.monotonic()
        await apply_all(client, [doc])
        with Live(watch.render(), console=console, refresh_per_second=8, transient=False) as live:
            up = await until(watch.converged, opts.timeout, live, watch.render)
        up_seconds = time.monotonic() - watch.started
        if not up:
            console.print("[bold red]the DynamoGraphDeployment did not become successful in time[/]")
            return False
        children = await _dynamo_children(client, namespace, name)
        console.print()
        console.print(
            f"[green]successful[/] after {up_seconds:.1f}s. Now {DYNAMO_WORKER} gets {DYNAMO_NEW_IMAGE}."
        )
        rollout_started = time.monotonic()
        await apply_all(client, [_with_worker_image(doc, DYNAMO_WORKER, DYNAMO_NEW_IMAGE)])
        component = DYNAMO_WORKER

        def rolled() -> bool:
            return watch.converged(image=DYNAMO_NEW_IMAGE, component=component)

        with Live(watch.render(), console=console, refresh_per_second=8, transient=False) as live:
            done = await until(rolled, opts.timeout, live, watch.render)
        rollout_seconds = time.monotonic() - rollout_started
        writes, quiet = await writes_then_quiet(operator, opts)
        console.print()
        console.print(
            watch.summary(
                up_seconds=up_seconds,
                rollout_seconds=rollout_seconds,
                children=children,
                writes=writes,
                quiet_writes=quiet,
                quiet_seconds=opts.quiet_seconds,
            )
        )
    finally:
        feed.unsubscribe(watch)
    ok = done and quiet == 0 and watch.premature_successful == 0
    if not ok:
        console.print("[bold red]the graph's rollout did not complete cleanly[/]")
    return ok


async def _gone(client: KubeClient, namespace: str, name: str) -> bool:
    """The graph and everything labelled as its own are gone."""
    pods = await client.list(
        PODS, namespace=namespace, label_selector=f"nvidia.com/dynamo-graph-deployment-name={name}"
    )
    graphs = await client.list(kinds.DGDS, namespace=namespace)
    return not pods["items"] and all(g["metadata"]["name"] != name for g in graphs["items"])


async def request_section(
    feed: Feed,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
) -> bool:
    doc = load_manifests(opts.examples / "dgdr-qwen3-8b-h100.yaml")[0]
    # The example only plans (its graph would take every H100, beside the Dynamo example's graph); here
    # the Dynamo graph is deleted first, so the request may deploy what it plans.
    doc["spec"]["autoApply"] = True
    namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    graph_name = doc["spec"]["deploymentOverrides"]["name"]
    console.rule("[bold]5. An SLA-driven request: from a latency target to a running graph")
    # Make room on the H100 nodes: deleting a graph removes everything it created.
    try:
        await client.delete(kinds.DGDS, "llama-disagg", namespace=namespace)
        deleted = "Deleted llama-disagg (its DCDs, Deployments, pods and PVC went with it). "
    except ApiError as exc:
        if not exc.not_found:  # the Dynamo section was skipped: nothing to make room from
            raise
        deleted = ""
        await ensure_secret(client, namespace, HF_TOKEN_SECRET, {"HF_TOKEN": "hf_demo_placeholder"})
    end = time.monotonic() + opts.timeout
    while not await _gone(client, namespace, "llama-disagg"):
        if time.monotonic() > end:
            console.print("[bold red]the previous graph was not deleted in time[/]")
            return False
        await asyncio.sleep(0.2)
    sla = doc["spec"]["sla"]
    console.print(
        f"{deleted}Applying "
        f"{opts.examples}/dgdr-qwen3-8b-h100.yaml: [bold]{namespace}/{name}[/] asks for "
        f"{doc['spec']['modelName']} on H100 with TTFT ≤ {sla['ttft']} ms and ITL ≤ {sla['itl']} ms; the "
        "operator plans it in process and, with autoApply set to true here, creates the graph "
        f"[bold]{graph_name}[/] sized by the plan."
    )
    watch = RequestWatch(namespace, name, GraphWatch(namespace, graph_name))
    feed.subscribe(watch)
    try:
        operator.reset_counts()
        watch.started = watch.graph.started = time.monotonic()
        await apply_all(client, [doc])
        with Live(watch.render(), console=console, refresh_per_second=8, transient=False) as live:
            ready = await until(watch.ready, opts.timeout, live, watch.render)
        ready_seconds = time.monotonic() - watch.started
        writes, quiet = await writes_then_quiet(operator, opts)
        console.print()
        console.print(
            watch.summary(
                ready_seconds=ready_seconds,
                writes=writes,
                quiet_writes=quiet,
                quiet_seconds=opts.quiet_seconds,
            )
        )
    finally:
        feed.unsubscribe(watch)
    ok = ready and quiet == 0
    if not ok:
        console.print("[bold red]the request did not reach a running graph cleanly[/]")
    return ok


def gang_words(feed: Feed) -> str:
    """Which gang scheduler places the groups: the embedded cluster's Volcano stand-in, or on the real
    control plane the scheduler-plugins Coscheduling scheduler (Volcano cannot be built there)."""
    if isinstance(feed, Store):
        return "Volcano (the embedded cluster's stand-in; its binpack and nodeorder scores choose the nodes)"
    return "the scheduler-plugins Coscheduling scheduler (Volcano's stand-in on the real control plane)"


Section = Callable[[Feed, KubeClient, WriteCount, DemoOptions, Console], Awaitable[bool]]


@dataclass
class Sections:
    """What ran, in order, and how it ended: the closing report lists every section."""

    results: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, name: str, why: str, console: Console) -> None:
        console.rule(f"[bold]{name}")
        console.print(f"[bold yellow]Skipped on this cluster:[/] {why}.")
        self.results.append((name, f"skipped: {why}"))

    def record(self, name: str, ok: bool) -> bool:
        self.results.append((name, "ran: converged cleanly" if ok else "ran: FAILED"))
        return ok

    def report(self, console: Console) -> None:
        console.rule("[bold]Sections")
        for name, result in self.results:
            style = "green" if result.startswith("ran: conv") else "yellow" if "skipped" in result else "red"
            console.print(f"[{style}]{name}: {result}[/]")


async def provision_statically(client: KubeClient, opts: DemoOptions, console: Console) -> None:
    """Give the example graph's claims volumes where their StorageClass is missing: the class (no
    provisioner, binding at once) and one PersistentVolume per claim, as an administrator of a cluster
    without a volume provisioner would. kube's PersistentVolume controller then binds each claim."""
    doc = load_manifests(opts.examples / "dynamo-vllm-disagg.yaml")[0]
    claims = [p for p in doc["spec"].get("pvcs") or [] if p.get("storageClass")]
    present = {objects.name(c) for c in (await client.list(STORAGECLASSES))["items"]}
    missing = sorted({str(p["storageClass"]) for p in claims} - present)
    if not missing:
        return
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "Immediate",
        }
        for name in missing
    ]
    docs += [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"demo-{p['name']}"},
            "spec": {
                "capacity": {"storage": str(p.get("size") or "1Gi")},
                "accessModes": [str(p.get("volumeAccessMode") or "ReadWriteOnce")],
                "storageClassName": str(p["storageClass"]),
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/var/lib/aiplane-demo/{p['name']}"},
            },
        }
        for p in claims
        if p["storageClass"] in missing
    ]
    await apply_all(client, docs)
    console.print(
        f"[dim]No volume provisioner here: created StorageClass {', '.join(missing)} (no provisioner) and "
        f"{len(docs) - len(missing)} PersistentVolume(s) for the example graph's claims.[/]"
    )


async def run_sections(
    feed: Feed,
    cluster: EmbeddedCluster | None,
    client: KubeClient,
    operator: WriteCount,
    opts: DemoOptions,
    console: Console,
    view: Callable[[], Awaitable[StoreView]] | None = None,
) -> tuple[bool, Sections]:
    """Every section in order, each after the previous one converged. On a real control plane
    (``cluster`` None) ``view`` lists what the live repartitioning reads before it follows ``feed``."""
    done = Sections()

    async def step(name: str, section: Section) -> bool:
        return done.record(name, await section(feed, client, operator, opts, console))

    # The platform configuration first: the example KaiwoConfig (dynamic queues) over the defaulted one.
    await apply_all(client, load_manifests(opts.examples / "kaiwoconfig.yaml"))
    ok = await step("1. GPU partitioning", partitioning_section)
    if ok:
        ok = await step("2. ModelInfer", modelinfer_section)
    if ok:

        async def live(*_: object) -> bool:
            listed: StoreView = cluster.server.store if cluster is not None else await _view(view)
            return await live_repartition_section(feed, listed, client, operator, opts, console)

        ok = await step("3. Repartition the serving pool under live inference", live)
    if ok:
        if cluster is None:
            await provision_statically(client, opts, console)
        ok = await step("4. Dynamo", dynamo_section)
    if ok:
        ok = await step("5. SLA-driven request", request_section)
    return ok, done


async def _view(view: Callable[[], Awaitable[StoreView]] | None) -> StoreView:
    if view is None:
        raise ValueError("a real control plane's sections need a view of its objects")
    return await view()


async def run_demo(opts: DemoOptions, console: Console) -> int:
    # The operator's JSON logs would tear the live view apart: they go to a file the user can tail.
    opts.log_file.parent.mkdir(parents=True, exist_ok=True)
    # One run per file, so a tail shows this run: the previous one is kept as <file>.1, older ones go.
    if opts.log_file.is_file():
        opts.log_file.replace(opts.log_file.with_name(f"{opts.log_file.name}.1"))
    with opts.log_file.open("w", encoding="utf-8") as log_stream:
        configure_logging("info", stream=log_stream)
        if opts.real:
            from aiplane.demo.real_run import run_real_demo  # noqa: PLC0415 - only --real starts a control plane

            return await run_real_demo(opts, console)
        return await _run_demo(opts, console)


async def keep_or_close(opts: DemoOptions, console: Console) -> None:
    """With ``--keep``, wait for Ctrl-C (the cluster stays up for kubectl); else say how to keep it."""
    if opts.keep:
        # Handlers first: the message invites a Ctrl-C, which must find them installed.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        console.print(keep_message(opts.kubeconfig), soft_wrap=True, highlight=False, markup=False)
        await stop.wait()
    else:
        console.print(
            closing_message(opts.kubeconfig, real=opts.real), soft_wrap=True, highlight=False, markup=False
        )


async def _run_demo(opts: DemoOptions, console: Console) -> int:
    cluster = EmbeddedCluster(
        agents=True,
        dcm_delay=opts.dcm_delay,
        ready_delay=opts.pod_ready_delay,
        plugin_refresh_delay=opts.plugin_refresh_delay,
    )
    url = await cluster.start()
    cluster.write_kubeconfig(opts.kubeconfig)
    manager, operator = await _manager(cluster)
    manager_task = asyncio.create_task(manager.run())
    client = InMemoryKubeClient.for_cluster(cluster)
    nodes = cluster.server.store.count("/nodes")
    console.print(
        f"[bold]aiplane demo[/]: embedded cluster at {url} ({nodes} nodes), every controller running in-process.\n"
        f"Operator logs (JSON): {opts.log_file}"
    )
    console.print(follow_message(opts.kubeconfig), soft_wrap=True, highlight=False, markup=False)
    ok = False
    try:
        ok, sections = await run_sections(cluster.server.store, cluster, client, operator, opts, console)
        sections.report(console)
        await keep_or_close(opts, console)
    except ApiError as exc:
        console.print(f"[bold red]aiplane demo: the API answered {exc}[/]")
        ok = False
    finally:
        manager.stop()
        await manager_task
        await client.close()
        await cluster.stop()
    return 0 if ok else 1

"""The queue at work in the partitioning section: a workload too big for the SPX quota waits in Kueue, in
Kueue's own words, until the repartition to CPX raises the ClusterQueue's quota; then Kueue admits it.

The workload is a ModelInfer of one group (an entry and six workers of 8 ``amd.com/gpu`` each: 56 GPUs)
on the MI300X inference pool. In SPX the MI300X flavor has 48 GPUs of quota, so Kueue's
``couldn't assign flavors … > maximum capacity (48)`` lands in the ModelInfer's ``QuotaReserved``
condition (with a ``QuotaPending`` Warning Event). The first node to reach CPX adds 56 to the quota;
Kueue admits the group and its pods run on the CPX node. A store listener sees every committed change,
so the quota at the moment of admission is a fact, not a sample. The ModelInfer is deleted at the end
of the section: the later sections have the pool to themselves, as before.

Where Volcano's PodGroup API is not served (the real control plane: Volcano cannot be built there), a
ModelInfer's gang would be admitted by Kueue and then never scheduled, so the queued workload is a
DynamoComponentDeployment instead: one 56-GPU worker, a Deployment submitted through Kueue's
``deployment`` and ``pod`` integrations. It waits the same way (its ``Available=False QuotaPending``
carries Kueue's message); its pod losing Kueue's ``kueue.x-k8s.io/admission`` gate is the admission.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.demo.common import DEMO_NAMESPACE, FIELD_MANAGER, DemoOptions, Feed, until_quiet
from aiplane.demo.platform import QueueWatch
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.resources import WORKLOADS, Resource, resource_for
from aiplane.sim.apiserver.store import DELETED, Event

NAME = "llama-batch"
MODELINFERS = kinds.MODELINFERS
DCDS = kinds.DCDS
PODGROUPS = resource_for("scheduling.volcano.sh/v1beta1", "PodGroup")
MI_KEY = "workload.volcano.sh/modelinfers"
DCD_KEY = "nvidia.com/dynamocomponentdeployments"
POD_KEY = "/pods"
GPUS_PER_POD = 8
WORKERS = 6
#: Kueue's scheduling gate, removed from a pod when its Workload is admitted.
ADMISSION_GATE = "kueue.x-k8s.io/admission"
#: The label the DCD controller selects its pods by (``nvidia.com/selector: <dcd>``).
DCD_POD_LABEL = "nvidia.com/selector"


def queued_modelinfer(namespace: str = DEMO_NAMESPACE) -> dict[str, Any]:
    """One group: an entry and :data:`WORKERS` workers of :data:`GPUS_PER_POD` GPUs, inference pool only."""
    template = {
        "spec": {
            "nodeSelector": {"aiplane.io/pool": "inference"},
            "containers": [
                {
                    "name": "vllm",
                    "image": "rocm/vllm:latest",
                    "resources": {"limits": {"amd.com/gpu": str(GPUS_PER_POD)}},
                }
            ],
        }
    }
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {
                        "name": "serve",
                        "replicas": 1,
                        "workerReplicas": WORKERS,
                        "entryTemplate": template,
                        "workerTemplate": template,
                    }
                ]
            },
        },
    }


def queued_component(namespace: str = DEMO_NAMESPACE) -> dict[str, Any]:
    """One vLLM worker of ``(1 + WORKERS) * GPUS_PER_POD`` GPUs (what the ModelInfer's group asks for),
    inference pool only: a single-node DynamoComponentDeployment, so a Deployment Kueue admits."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "componentType": "worker",
            "replicas": 1,
            "resources": {"limits": {"gpu": str((1 + WORKERS) * GPUS_PER_POD)}},
            "extraPodSpec": {
                "nodeSelector": {"aiplane.io/pool": "inference"},
                "mainContainer": {"image": "rocm/vllm:latest"},
            },
        },
    }


def _condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any]:
    for cond in objects.status(obj).get("conditions") or []:
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return {}


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


@dataclass
class QueuedWatch:
    """Follows the queued workload: a ModelInfer's ``QuotaReserved`` condition, or a component's
    ``Available=False QuotaPending`` and its pod's admission gate; and its running pods."""

    queue: QueueWatch
    #: ``ModelInfer``, or ``DynamoComponentDeployment`` where Volcano is not installed.
    kind: str = "ModelInfer"
    namespace: str = DEMO_NAMESPACE
    name: str = NAME
    waiting: str | None = None
    waited_at: float | None = None
    admitted_at: float | None = None
    quota_at_admission: int | None = None
    running: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)

    @property
    def component(self) -> bool:
        return self.kind != "ModelInfer"

    def __call__(self, event: Event) -> None:
        obj = event.obj
        if objects.namespace(obj) != self.namespace:
            return
        if event.key == (DCD_KEY if self.component else MI_KEY) and objects.name(obj) == self.name:
            if event.type != DELETED:
                self._status(obj)
        elif event.key == POD_KEY and objects.labels(obj).get(self._pod_label) == self.name:
            self._pod(obj, gone=event.type == DELETED or objects.is_deleting(obj))

    @property
    def _pod_label(self) -> str:
        return DCD_POD_LABEL if self.component else "modelinfer.volcano.sh/name"

    def _status(self, obj: Mapping[str, Any]) -> None:
        if self.component:
            cond = _condition(obj, "Available")
            if cond.get("reason") == "QuotaPending" and self.waiting is None:
                self.waiting, self.waited_at = str(cond.get("message") or ""), time.monotonic()
            return
        cond = _condition(obj, "QuotaReserved")
        if cond.get("status") == "False" and self.waiting is None:
            self.waiting, self.waited_at = str(cond.get("message") or ""), time.monotonic()
        elif cond.get("status") == "True":
            self._admitted()

    def _admitted(self) -> None:
        if self.admitted_at is None:
            self.admitted_at = time.monotonic()
            self.quota_at_admission = self.queue.quotas[-1] if self.queue.quotas else None

    def _pod(self, obj: Mapping[str, Any], *, gone: bool) -> None:
        pod = objects.name(obj)
        (self.pods.discard if gone else self.pods.add)(pod)
        up = not gone and objects.status(obj).get("phase") == "Running"
        (self.running.add if up else self.running.discard)(pod)
        if self.component and not gone and not _gated(obj):
            self._admitted()  # Kueue's webhook gates the pod at creation; the gate goes at admission

    @property
    def expected(self) -> int:
        return 1 if self.component else 1 + WORKERS

    @property
    def gpus_per_pod(self) -> int:
        return (1 + WORKERS) * GPUS_PER_POD if self.component else GPUS_PER_POD

    def done(self) -> bool:
        return self.admitted_at is not None and len(self.running) == self.expected

    def line(self) -> Text:
        """One line for the live view."""
        if self.admitted_at is not None:
            state = Text(f"admitted at quota {self.quota_at_admission}", style="green")
        elif self.waiting is not None:
            state = Text("waiting for quota", style="yellow")
        else:
            state = Text("submitted", style="dim")
        return Text.assemble(
            (f"queued {self.kind} ", "bold"),
            (f"{self.namespace}/{self.name}", "bold cyan"),
            f" ({self.expected} pod{'s' if self.expected > 1 else ''} x {self.gpus_per_pod} amd.com/gpu): ",
            state,
            f", {len(self.running)}/{self.expected} pods running",
        )

    def summary(self) -> Table:
        table = Table(title=f"Kueue: {self.kind} {self.name}", show_header=False, title_style="bold")
        table.add_column(style="bold")
        table.add_column()
        table.add_row("waited", escape(self.waiting or "never"))
        admitted = (
            f"when the quota reached {self.quota_at_admission} amd.com/gpu, "
            f"{(self.admitted_at or 0) - (self.waited_at or 0):.1f}s after it started waiting"
            if self.admitted_at is not None
            else "no"
        )
        table.add_row("admitted", admitted)
        table.add_row("running", f"{len(self.running)}/{self.expected} pods")
        return table


async def submit(
    feed: Feed, client: KubeClient, queue: QueueWatch, opts: DemoOptions, console: Console
) -> QueuedWatch | None:
    """Submit the queued workload (a ModelInfer, or a component where Volcano is not installed) and wait
    until Kueue says why it waits; None (said so) where Kueue's Workload API is not served."""
    if not await client.served(WORKLOADS):
        console.print("[yellow]Kueue's Workload API is not served: no queued workload here.[/]")
        return None
    if await client.served(MODELINFERS) and await client.served(PODGROUPS):
        watch, resource, doc = QueuedWatch(queue), MODELINFERS, queued_modelinfer()
    else:
        console.print(
            "[yellow]Volcano is not installed (no PodGroup API of Volcano's), so the queued workload is "
            "a DynamoComponentDeployment (one worker, the same "
            f"{(1 + WORKERS) * GPUS_PER_POD} GPUs) submitted through Kueue's deployment integration.[/]"
        )
        watch, resource, doc = QueuedWatch(queue, kind="DynamoComponentDeployment"), DCDS, queued_component()
    feed.subscribe(watch)
    await client.apply(resource, doc, field_manager=FIELD_MANAGER, force=True)
    await until_quiet(lambda: watch.waiting is not None, opts.timeout)
    console.print(watch.line())
    if watch.waiting is not None:
        said = "Available=False" if watch.component else "QuotaReserved=False"
        console.print(Text(f"  {said} QuotaPending: ", style="yellow") + Text(watch.waiting))
    return watch


async def finish(
    feed: Feed, client: KubeClient, watch: QueuedWatch, opts: DemoOptions, console: Console
) -> bool:
    """Wait for the admitted group to run, say when Kueue admitted it, then delete it; True when it
    waited for quota first and then ran."""
    await until_quiet(watch.done, opts.timeout)
    console.print(watch.summary())
    ok = watch.waiting is not None and watch.done()
    resource: Resource = DCDS if watch.component else MODELINFERS
    try:
        await client.delete(resource, NAME, namespace=watch.namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise
    await until_quiet(lambda: not watch.pods, opts.timeout)
    feed.unsubscribe(watch)
    return ok

"""The queue at work in the partitioning section: a workload too big for the SPX quota waits in Kueue, in
Kueue's own words, until the repartition to CPX raises the ClusterQueue's quota; then Kueue admits it.

The workload is a ModelInfer of one group (an entry and six workers of 8 ``amd.com/gpu`` each: 56 GPUs)
on the MI300X inference pool. In SPX the MI300X flavor has 48 GPUs of quota, so Kueue's
``couldn't assign flavors … > maximum capacity (48)`` lands in the ModelInfer's ``QuotaReserved``
condition (with a ``QuotaPending`` Warning Event). The first node to reach CPX adds 56 to the quota;
Kueue admits the group and its pods run on the CPX node. A store listener sees every committed change,
so the quota at the moment of admission is a fact, not a sample. The ModelInfer is deleted at the end
of the section: the later sections have the pool to themselves, as before.
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
from aiplane.kube.resources import WORKLOADS
from aiplane.sim.apiserver.store import DELETED, Event

NAME = "llama-batch"
MODELINFERS = kinds.MODELINFERS
MI_KEY = "workload.volcano.sh/modelinfers"
POD_KEY = "/pods"
GPUS_PER_POD = 8
WORKERS = 6


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


def _quota_condition(mi: Mapping[str, Any] | None) -> Mapping[str, Any]:
    for cond in objects.status(mi).get("conditions") or []:
        if cond.get("type") == "QuotaReserved":
            return cond  # type: ignore[no-any-return]
    return {}


@dataclass
class QueuedWatch:
    """Follows the queued ModelInfer: its ``QuotaReserved`` condition and its running pods."""

    queue: QueueWatch
    namespace: str = DEMO_NAMESPACE
    name: str = NAME
    waiting: str | None = None
    waited_at: float | None = None
    admitted_at: float | None = None
    quota_at_admission: int | None = None
    running: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)

    def __call__(self, event: Event) -> None:
        obj = event.obj
        if objects.namespace(obj) != self.namespace:
            return
        if event.key == MI_KEY and objects.name(obj) == self.name and event.type != DELETED:
            cond = _quota_condition(obj)
            if cond.get("status") == "False" and self.waiting is None:
                self.waiting, self.waited_at = str(cond.get("message") or ""), time.monotonic()
            elif cond.get("status") == "True" and self.admitted_at is None:
                self.admitted_at = time.monotonic()
                self.quota_at_admission = self.queue.quotas[-1] if self.queue.quotas else None
        elif event.key == POD_KEY and objects.labels(obj).get("modelinfer.volcano.sh/name") == self.name:
            pod = objects.name(obj)
            gone = event.type == DELETED or objects.is_deleting(obj)
            (self.pods.discard if gone else self.pods.add)(pod)
            up = not gone and objects.status(obj).get("phase") == "Running"
            (self.running.add if up else self.running.discard)(pod)

    @property
    def expected(self) -> int:
        return 1 + WORKERS

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
            ("queued ModelInfer ", "bold"),
            (f"{self.namespace}/{self.name}", "bold cyan"),
            f" ({self.expected} pods x {GPUS_PER_POD} amd.com/gpu): ",
            state,
            f", {len(self.running)}/{self.expected} pods running",
        )

    def summary(self) -> Table:
        table = Table(title=f"Kueue: ModelInfer {self.name}", show_header=False, title_style="bold")
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
    """Submit the queued ModelInfer and wait until Kueue says why it waits; None (said so) where Kueue's
    Workload API or the ModelInfer API is not served."""
    if not await client.served(WORKLOADS) or not await client.served(MODELINFERS):
        console.print(
            "[yellow]Kueue's Workload API or the ModelInfer API is not served: no queued workload here.[/]"
        )
        return None
    watch = QueuedWatch(queue)
    feed.subscribe(watch)
    await client.apply(MODELINFERS, queued_modelinfer(), field_manager=FIELD_MANAGER, force=True)
    await until_quiet(lambda: watch.waiting is not None, opts.timeout)
    console.print(watch.line())
    if watch.waiting is not None:
        console.print(Text("  QuotaReserved=False QuotaPending: ", style="yellow") + Text(watch.waiting))
    return watch


async def finish(
    feed: Feed, client: KubeClient, watch: QueuedWatch, opts: DemoOptions, console: Console
) -> bool:
    """Wait for the admitted group to run, say when Kueue admitted it, then delete it; True when it
    waited for quota first and then ran."""
    await until_quiet(watch.done, opts.timeout)
    console.print(watch.summary())
    ok = watch.waiting is not None and watch.done()
    try:
        await client.delete(MODELINFERS, NAME, namespace=watch.namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise
    await until_quiet(lambda: not watch.pods, opts.timeout)
    feed.unsubscribe(watch)
    return ok

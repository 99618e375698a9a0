"""What the demo shows of a ModelInfer: its groups, roles and pods becoming Available, then a rolling
update, live; and a summary.

As for partitioning, the availability floor ("never fewer than replicas - maxUnavailable groups
available") is measured on every committed pod change by a store listener, not sampled.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.naming import LABEL_GROUP_NAME, LABEL_NAME, LABEL_REVISION, LABEL_ROLE_ID
from aiplane.controllers.modelinfer.objects import expected_pod_count
from aiplane.controllers.queueing import QUEUE_LABEL
from aiplane.demo.common import fit
from aiplane.sim.apiserver.store import DELETED, Event

POD_KEY = "/pods"
MI_KEY = "workload.volcano.sh/modelinfers"
#: The PodGroups of either gang scheduler: Volcano's (the embedded cluster) or Coscheduling's (--real).
PODGROUP_KEYS = frozenset({"scheduling.volcano.sh/podgroups", "scheduling.x-k8s.io/podgroups"})


def _ready(pod: Mapping[str, Any]) -> bool:
    status = objects.status(pod)
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _pod_state(pod: Mapping[str, Any]) -> str:
    status = objects.status(pod)
    if objects.is_deleting(pod):
        return "Terminating"
    if _ready(pod):
        return "Ready"
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return "Unschedulable"
    return str(status.get("phase") or "Pending")


def _ordinal(group: str) -> int:
    tail = group.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


@dataclass
class ModelInferWatch:
    """Follows one ModelInfer from the store's committed changes."""

    namespace: str
    name: str
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    podgroups: dict[str, str] = field(default_factory=dict)
    mi: dict[str, Any] | None = None
    min_available: int | None = None
    max_groups: int = 0
    tracking: bool = False
    started: float = field(default_factory=time.monotonic)

    def __call__(self, event: Event) -> None:
        meta = objects.meta(event.obj)
        if meta.get("namespace") != self.namespace:
            return
        if event.key == MI_KEY and meta.get("name") == self.name:
            self.mi = None if event.type == DELETED else event.obj
        elif event.key == POD_KEY and (meta.get("labels") or {}).get(LABEL_NAME) == self.name:
            if event.type == DELETED:
                self.pods.pop(meta["name"], None)
            else:
                self.pods[meta["name"]] = event.obj
            if self.tracking:
                groups = self.groups()
                available = sum(1 for members in groups.values() if self._group_available(members))
                self.max_groups = max(self.max_groups, len(groups))
                self.min_available = (
                    available if self.min_available is None else min(self.min_available, available)
                )
        elif event.key in PODGROUP_KEYS and (meta.get("labels") or {}).get(LABEL_NAME) == self.name:
            if event.type == DELETED:
                self.podgroups.pop(meta["name"], None)
            else:
                self.podgroups[meta["name"]] = str(objects.status(event.obj).get("phase") or "Pending")

    def track(self) -> None:
        """Start measuring the availability floor and the group count (the rolling update)."""
        self.tracking = True
        self.min_available = None
        self.max_groups = len(self.groups())

    def groups(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            out.setdefault(objects.labels(pod).get(LABEL_GROUP_NAME, "?"), []).append(pod)
        return out

    @property
    def expected_per_group(self) -> int:
        roles = objects.spec(self.mi).get("template", {}).get("roles") or []
        return expected_pod_count(roles)

    def _group_available(self, members: list[dict[str, Any]]) -> bool:
        live = [p for p in members if not objects.is_deleting(p)]
        return len(live) == self.expected_per_group and all(_ready(p) for p in live)

    @property
    def status(self) -> Mapping[str, Any]:
        return objects.status(self.mi)

    def condition(self, type_: str) -> Mapping[str, Any]:
        for c in self.status.get("conditions") or []:
            if isinstance(c, Mapping) and c.get("type") == type_:
                return c
        return {}

    def converged(self, revision: str | None = None) -> bool:
        spec = (self.mi or {}).get("spec") or {}
        status = self.status
        replicas = int(spec.get("replicas", 1))
        return (
            status.get("observedGeneration") == (self.mi or {}).get("metadata", {}).get("generation")
            and status.get("availableReplicas") == replicas
            and status.get("updatedReplicas") == replicas
            and status.get("replicas") == replicas
            and self.condition("Available").get("status") == "True"
            and (revision is None or status.get("updateRevision") != revision)
            and len(self.pods) == replicas * self.expected_per_group
        )

    # --- rendering -------------------------------------------------------------------------------

    def render(self) -> Group:
        spec = (self.mi or {}).get("spec") or {}
        status = self.status
        available = self.condition("Available")
        updating = self.condition("UpdateInProgress")
        header = Text.assemble(
            ("ModelInfer ", "bold"),
            (f"{self.namespace}/{self.name}", "bold cyan"),
            f"  replicas {spec.get('replicas', '?')}: available {status.get('availableReplicas', 0)}, "
            f"updated {status.get('updatedReplicas', 0)}   revision {status.get('currentRevision', '-')}"
            f" → {status.get('updateRevision', '-')}   {time.monotonic() - self.started:5.1f}s\n",
            ("Available ", "bold"),
            (str(available.get("status", "-")), "green" if available.get("status") == "True" else "yellow"),
            f" ({available.get('message', '')})   ",
            ("UpdateInProgress ", "bold"),
            (str(updating.get("status", "-")), "yellow" if updating.get("status") == "True" else "dim"),
            f" ({updating.get('message', '')})",
        )
        table = Table(box=None, padding=(0, 1), header_style="bold")
        for column in ("group", "PodGroup", "revision", "role", "pods", "on nodes", "available"):
            table.add_column(column, no_wrap=column in ("group", "revision", "role"))
        for group, members in sorted(self.groups().items(), key=lambda item: _ordinal(item[0])):
            by_rid: dict[str, list[dict[str, Any]]] = {}
            for pod in members:
                by_rid.setdefault(objects.labels(pod).get(LABEL_ROLE_ID, "?"), []).append(pod)
            revisions = {objects.labels(p).get(LABEL_REVISION, "?") for p in members}
            ok = self._group_available(members)
            first = True
            for rid, pods in sorted(by_rid.items()):
                pods.sort(key=objects.name)
                states = Text(" ").join(
                    Text(
                        _pod_state(p),
                        style={"Ready": "green", "Unschedulable": "red", "Terminating": "dim"}.get(
                            _pod_state(p), "yellow"
                        ),
                    )
                    for p in pods
                )
                nodes = " ".join(str(objects.spec(p).get("nodeName") or "-") for p in pods)
                table.add_row(
                    group if first else "",
                    self.podgroups.get(group, "-") if first else "",
                    ",".join(sorted(revisions)) if first else "",
                    rid,
                    states,
                    nodes,
                    (Text("yes", style="green") if ok else Text("no", style="yellow")) if first else "",
                )
                first = False
        return Group(header, fit(table, "group", "revision", "role"))

    def summary(
        self,
        *,
        up_seconds: float,
        rollout_seconds: float,
        max_unavailable: int,
        max_surge: int,
        writes: int,
        quiet_writes: int,
        quiet_seconds: float,
    ) -> Table:
        replicas = int(objects.spec(self.mi).get("replicas", 1))
        table = Table(title=f"ModelInfer {self.namespace}/{self.name}", show_header=False, title_style="bold")
        table.add_column(style="bold")
        table.add_column()
        table.add_row(
            "groups",
            f"{replicas} groups of {self.expected_per_group} pods, Available in {up_seconds:.1f}s "
            "(one PodGroup each, gang-scheduled)",
        )
        table.add_row(
            "rolling update",
            f"revision {self.status.get('currentRevision')} everywhere in {rollout_seconds:.1f}s; "
            f"fewest groups available {self.min_available} (floor replicas - maxUnavailable = "
            f"{replicas - max_unavailable}), most groups {self.max_groups} (ceiling replicas + maxSurge = "
            f"{replicas + max_surge})",
        )
        table.add_row("Kueue queue", self.queue_words())
        table.add_row(
            "operator API writes", f"{writes}, then {quiet_writes} in the {quiet_seconds:.0f}s after"
        )
        return fit(table, 0)

    def queue_words(self) -> str:
        """Which Kueue LocalQueue the groups' pods were given (the namespace's platform queue)."""
        labels = ((objects.meta(pod).get("labels") or {}).get(QUEUE_LABEL) for pod in self.pods.values())
        queues = Counter(str(queue) for queue in labels if queue)
        if not queues:
            return f"none: 0 of {len(self.pods)} pods queued"
        return ", ".join(f"{q} on {n} of {len(self.pods)} pods" for q, n in sorted(queues.items()))

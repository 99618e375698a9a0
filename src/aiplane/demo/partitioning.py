"""What the demo shows of a GPU partitioning rollout: a live table a person can follow, and a summary.

Why a store listener rather than polling the API: the limits line ("in progress 3/3, most seen 3")
claims something about *every* moment of the rollout. Sampling at the screen's refresh rate could
miss a moment over the limit; the listener sees every committed NodePartitioning change, as the end
to end tests do, so the figure the demo prints is the truth and not a sample.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from aiplane.apimachinery import objects
from aiplane.demo.common import fit
from aiplane.sim.apiserver.store import DELETED, Event

NP_KEY = "infrastructure.silogen.ai/nodepartitionings"
PLAN_KEY = "infrastructure.silogen.ai/partitioningplans"
NODE_KEY = "/nodes"
POD_KEY = "/pods"
EVENT_KEY = "/events"

IN_PROGRESS = ("Draining", "Applying", "WaitingOperator", "Verifying")
PHASE_STYLE = {
    "Pending": "dim",
    "Draining": "yellow",
    "Applying": "cyan",
    "WaitingOperator": "blue",
    "Verifying": "magenta",
    "Succeeded": "green",
    "Failed": "bold red",
    "Skipped": "dim",
}
GPU = "amd.com/gpu"
PROFILE_LABEL = "dcm.amd.com/gpu-config-profile"
STATE_LABEL = "dcm.amd.com/gpu-config-profile-state"
PLAN_LABEL = "infrastructure.silogen.ai/plan"


def _phase(np: Mapping[str, Any]) -> str:
    return str(objects.status(np).get("phase") or "Pending")


def _cordoned(node: Mapping[str, Any]) -> bool:
    return bool(objects.spec(node).get("unschedulable"))


def _tainted(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == "amd-dcm" for t in objects.spec(node).get("taints") or [])


def _daemon_pod(pod: Mapping[str, Any]) -> bool:
    """DaemonSet pods (device plugin, node labeller) are not workloads: a drain leaves them."""
    owners = objects.meta(pod).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" for o in owners)


def _gpus(node: Mapping[str, Any]) -> str:
    return str((objects.status(node).get("allocatable") or {}).get(GPU, "0"))


@dataclass
class RolloutWatch:
    """Follows one plan from the store's committed changes: phases, limits, worst moments, events."""

    plan: str
    max_parallel: int
    max_unavailable: int
    worst_in_progress: int = 0
    worst_unavailable: int = 0
    nps: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus_before: dict[str, str] = field(default_factory=dict)
    pods_on: dict[str, int] = field(default_factory=dict)
    plan_obj: dict[str, Any] | None = None
    events: deque[str] = field(default_factory=lambda: deque(maxlen=8))
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    def seed(
        self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], nps: Sequence[dict[str, Any]] = ()
    ) -> None:
        """Record the fleet before the rollout (allocatable 'before', pods per node, and the plan's
        NodePartitionings of an earlier rollout, which the next one will reuse)."""
        for np in nps:
            if objects.labels(np).get(PLAN_LABEL) == self.plan:
                self.nps[objects.name(np)] = np
        for node in nodes:
            name = objects.name(node)
            self.nodes[name] = node
            self.gpus_before[name] = _gpus(node)
        for pod in pods:
            where = objects.spec(pod).get("nodeName")
            if where and not _daemon_pod(pod):
                self.pods_on[where] = self.pods_on.get(where, 0) + 1

    def __call__(self, event: Event) -> None:
        obj = event.obj
        meta = objects.meta(obj)
        name = str(meta.get("name", ""))
        if event.key == NP_KEY:
            if (meta.get("labels") or {}).get(PLAN_LABEL) != self.plan:
                return
            if event.type == DELETED:
                self.nps.pop(name, None)
            else:
                self.nps[name] = obj
            self._count()
        elif event.key == NODE_KEY and event.type != DELETED:
            self.nodes[name] = obj
        elif event.key == PLAN_KEY and name == self.plan:
            self.plan_obj = None if event.type == DELETED else obj
            if self.settled and self.phase == "Completed" and self.finished is None:
                self.finished = time.monotonic()
        elif event.key == POD_KEY:
            self._pod(event)
        elif event.key == EVENT_KEY and event.type != DELETED:
            involved = obj.get("involvedObject") or {}
            if involved.get("kind") in ("NodePartitioning", "PartitioningPlan", "Node", "ModelInfer"):
                reason = obj.get("reason", "")
                style = "red" if obj.get("type") == "Warning" else "white"
                who = f"{involved.get('kind')}/{involved.get('name')}"
                message = " ".join(str(obj.get("message", "")).split())
                if len(message) > 90:
                    message = message[:89] + "…"
                self.events.append(f"[{style}]{reason:<22}[/] {who}: {escape(message)}")

    def _pod(self, event: Event) -> None:
        def node_of(pod: Mapping[str, Any] | None) -> str | None:
            return objects.spec(pod).get("nodeName")

        if _daemon_pod(event.obj):
            return
        before = None if event.type == "ADDED" else node_of(event.old or event.obj)
        after = None if event.type == DELETED else node_of(event.obj)
        if before == after:
            return
        if before:
            self.pods_on[before] = max(0, self.pods_on.get(before, 0) - 1)
        if after:
            self.pods_on[after] = self.pods_on.get(after, 0) + 1

    def _count(self) -> None:
        phases = [_phase(np) for np in self.nps.values()]
        busy = sum(1 for p in phases if p in IN_PROGRESS)
        down = busy + sum(1 for p in phases if p == "Failed")
        self.worst_in_progress = max(self.worst_in_progress, busy)
        self.worst_unavailable = max(self.worst_unavailable, down)

    @property
    def phase(self) -> str:
        return str(objects.status(self.plan_obj).get("phase") or "Pending")

    @property
    def settled(self) -> bool:
        """The plan's status speaks of its latest spec (an edited plan still shows the last rollout's
        phase until the controller has observed the edit)."""
        plan = self.plan_obj
        return plan is not None and objects.status(plan).get("observedGeneration") == objects.generation(plan)

    def ended(self) -> bool:
        return self.settled and self.phase in ("Completed", "Degraded", "Failed")

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def counts(self) -> dict[str, int]:
        phases = [_phase(np) for np in self.nps.values()]
        busy = sum(1 for p in phases if p in IN_PROGRESS)
        return {
            "in_progress": busy,
            "unavailable": busy + phases.count("Failed"),
            "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"),
            "total": len(phases),
        }

    def left_marked(self) -> list[str]:
        """Nodes still cordoned or carrying the DCM taint (should be none once Completed)."""
        return sorted(n for n, node in self.nodes.items() if _cordoned(node) or _tainted(node))

    # --- rendering -------------------------------------------------------------------------------

    def render(self) -> Group:
        c = self.counts()
        phase_style = {"Completed": "bold green", "Degraded": "bold red", "Failed": "bold red"}.get(
            self.phase, "bold yellow"
        )
        header = Text.assemble(
            ("PartitioningPlan ", "bold"),
            (self.plan, "bold cyan"),
            "  phase ",
            (self.phase, phase_style),
            f"   {c['succeeded']}/{c['total']} nodes done   {self.elapsed:5.1f}s\n",
            "in progress ",
            _limit(c["in_progress"], self.max_parallel),
            f" (maxParallel, most seen {self.worst_in_progress})   unavailable ",
            _limit(c["unavailable"], self.max_unavailable),
            f" (maxUnavailable, most seen {self.worst_unavailable})",
        )
        table = Table(expand=False, box=None, padding=(0, 1), header_style="bold")
        for column in (
            "node",
            "phase",
            "cordoned",
            "tainted",
            "DCM profile",
            f"{GPU} before → now",
            "workload pods",
        ):
            table.add_column(column)
        for np in sorted(self.nps.values(), key=lambda o: str(objects.spec(o).get("nodeName"))):
            node_name = str(objects.spec(np).get("nodeName", ""))
            node = self.nodes.get(node_name, {})
            labels = objects.labels(node)
            phase = _phase(np)
            before, now = self.gpus_before.get(node_name, "?"), _gpus(node)
            profile = labels.get(PROFILE_LABEL, "-")
            state = labels.get(STATE_LABEL)
            table.add_row(
                node_name,
                Text(phase, style=PHASE_STYLE.get(phase, "")),
                Text("yes", style="yellow") if _cordoned(node) else Text("no", style="dim"),
                Text("amd-dcm", style="yellow") if _tainted(node) else Text("no", style="dim"),
                f"{profile} ({state})" if state else profile,
                Text(f"{before} → {now}", style="green" if now != before else ""),
                str(self.pods_on.get(node_name, 0)),
            )
        events = Text.from_markup("\n".join(self.events) or "[dim](no events yet)[/]")
        return Group(
            header,
            fit(table, "node"),
            Panel(events, title="recent events", title_align="left", border_style="dim", expand=False),
        )

    def summary(self, operator_writes: int, quiet_writes: int, quiet_seconds: float) -> Table:
        c = self.counts()
        table = Table(
            title=f"PartitioningPlan {self.plan}: {self.phase}", show_header=False, title_style="bold"
        )
        table.add_column(style="bold")
        table.add_column()
        changed = [
            n
            for n, before in self.gpus_before.items()
            if n in self._np_nodes() and before != _gpus(self.nodes[n])
        ]
        table.add_row("nodes", f"{c['total']} selected: {c['succeeded']} Succeeded, {c['failed']} Failed")
        table.add_row("repartitioned", ", ".join(sorted(changed)) or "none")
        table.add_row(f"{GPU} allocatable", "before → after")
        for node in sorted(self._np_nodes()):
            table.add_row(
                f"  {node}", f"{self.gpus_before.get(node, '?')} → {_gpus(self.nodes.get(node, {}))}"
            )
        table.add_row(
            "limits",
            f"most in progress {self.worst_in_progress} (maxParallel {self.max_parallel}), "
            f"most unavailable {self.worst_unavailable} (maxUnavailable {self.max_unavailable})",
        )
        marked = self.left_marked()
        table.add_row("left cordoned/tainted", ", ".join(marked) if marked else "none")
        table.add_row("time", f"{self.elapsed:.1f}s")
        table.add_row(
            "operator API writes", f"{operator_writes}, then {quiet_writes} in the {quiet_seconds:.0f}s after"
        )
        return fit(table, 0)

    def _np_nodes(self) -> set[str]:
        return {str(objects.spec(np).get("nodeName", "")) for np in self.nps.values()}


def _limit(value: int, limit: int) -> Text:
    return Text(f"{value}/{limit}", style="bold red" if value > limit else "bold")

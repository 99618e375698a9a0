"""What the demo shows of a DynamoGraphDeploymentRequest: the request's state machine (Pending →
Profiling → Deploying → Ready), the plan it made, and the graph it created coming up.

The request is followed from the store's committed changes, as the other sections follow theirs; the
graph it creates is followed by a :class:`~aiplane.demo.dynamo.GraphWatch`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from aiplane.apimachinery import objects
from aiplane.demo.common import fit
from aiplane.demo.dynamo import GraphWatch
from aiplane.sim.apiserver.store import DELETED, Event

DGDR_KEY = "nvidia.com/dynamographdeploymentrequests"
CONFIGMAP_KEY = "/configmaps"
PLAN_KEY = "plan.json"


def _layout(engine: Mapping[str, Any]) -> str:
    """TP4, or for a mixture-of-experts worker TP1 DP4 EP4 (the plan's dp / moeEp when present)."""
    dp, ep = engine.get("dp", 1), engine.get("moeEp", 1)
    return f"TP{engine.get('tp', '?')}" + (f" DP{dp}" if dp != 1 else "") + (f" EP{ep}" if ep != 1 else "")


def _engines(plan: Mapping[str, Any]) -> str:
    prefill, decode = plan.get("prefill") or {}, plan.get("decode") or {}
    return (
        f"{prefill.get('workers', '?')} x prefill {_layout(prefill)} + "
        f"{decode.get('workers', '?')} x decode {_layout(decode)} (batch {decode.get('batch', '?')})"
    )


@dataclass
class RequestWatch:
    """Follows one request, the output ConfigMap it writes and (through ``graph``) the DGD it creates."""

    namespace: str
    name: str
    graph: GraphWatch
    request: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    #: Every state the request was stored with, in order (repeats collapsed).
    states: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def __call__(self, event: Event) -> None:
        self.graph(event)
        meta = objects.meta(event.obj)
        if meta.get("namespace") != self.namespace:
            return
        if event.key == DGDR_KEY and meta.get("name") == self.name:
            self.request = None if event.type == DELETED else event.obj
            state = str(objects.status(event.obj).get("state") or "")
            if state and (not self.states or self.states[-1] != state):
                self.states.append(state)
        elif event.key == CONFIGMAP_KEY and meta.get("name") == f"dgdr-output-{self.name}":
            raw = (event.obj.get("data") or {}).get(PLAN_KEY)
            if isinstance(raw, str):
                try:
                    self.plan = json.loads(raw)
                except ValueError:
                    self.plan = None

    @property
    def state(self) -> str:
        return str(objects.status(self.request).get("state") or "-")

    def ready(self) -> bool:
        """The request is Ready and the graph it created is ``successful`` with every pod up."""
        return self.state == "Ready" and self.graph.converged()

    def disagg(self) -> Mapping[str, Any]:
        found = (self.plan or {}).get("disagg")
        return found if isinstance(found, Mapping) else {}

    def render(self) -> Group:
        conditions = Table(box=None, padding=(0, 1), header_style="bold")
        for column in ("condition", "status", "reason", "message"):
            conditions.add_column(column, no_wrap=column != "message")
        for c in objects.status(self.request).get("conditions") or []:
            conditions.add_row(
                str(c.get("type")),
                Text(str(c.get("status")), style="green" if c.get("status") == "True" else "yellow"),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            )
        deployment = objects.status(self.request).get("deployment") or {}
        header = Text.assemble(
            ("DynamoGraphDeploymentRequest ", "bold"),
            (f"{self.namespace}/{self.name}", "bold cyan"),
            "  state ",
            (
                self.state,
                "green" if self.state == "Ready" else ("red" if self.state == "Failed" else "yellow"),
            ),
            f"  ({' → '.join(self.states) or '-'})   DGD {deployment.get('name', '-')}: "
            f"{deployment.get('state', '-')}   {time.monotonic() - self.started:5.1f}s",
        )
        parts: list[Any] = [header, fit(conditions, "condition", "status", "reason")]
        plan = self.disagg()
        if plan:
            parts.append(
                Text.assemble(
                    ("plan ", "bold"),
                    f"{_engines(plan)}: {plan.get('gpus')} GPUs, {plan.get('tokensPerSecondPerGpu', 0):.0f} tok/s/GPU, "
                    f"TTFT {plan.get('ttftMs', 0):.0f} ms, ITL {plan.get('itlMs', 0):.1f} ms, "
                    f"meets SLA: {plan.get('meetsSla')}",
                )
            )
        if self.graph.dgd is not None:
            parts.append(self.graph.render())
        return Group(*parts)

    def summary(self, *, ready_seconds: float, writes: int, quiet_writes: int, quiet_seconds: float) -> Table:
        spec = objects.spec(self.request)
        sla = spec.get("sla") or {}
        table = Table(
            title=f"DynamoGraphDeploymentRequest {self.namespace}/{self.name}",
            show_header=False,
            title_style="bold",
        )
        table.add_column(style="bold")
        table.add_column()
        table.add_row(
            "asked",
            f"{spec.get('modelName')} on {(spec.get('gpu') or {}).get('type', '?')} ({spec.get('backend')}): "
            f"TTFT ≤ {sla.get('ttft')} ms, ITL ≤ {sla.get('itl')} ms, ISL {sla.get('isl')}, OSL {sla.get('osl')}",
        )
        plan = self.disagg()
        table.add_row(
            "planned (in process)",
            f"{_engines(plan)}, {plan.get('gpus')} GPUs, {plan.get('tokensPerSecondPerGpu', 0):.0f} tok/s/GPU"
            if plan
            else "-",
        )
        table.add_row("states", " → ".join(self.states))
        table.add_row(
            "request to running graph", f"{ready_seconds:.1f}s (the graph successful, every pod ready)"
        )
        table.add_row(
            "operator API writes", f"{writes}, then {quiet_writes} in the {quiet_seconds:.0f}s after"
        )
        return fit(table, 0)

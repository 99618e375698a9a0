"""What the demo shows of a DynamoGraphDeployment: its services, their Deployments and pods coming up
until the graph is ``successful``, then a worker image rolled out; and a summary.

The claim the rollout part checks is the fix of upstream's bug ai-dynamo/dynamo#3567: the graph never says ``successful``
while a component's rollout is in flight. It is measured on every committed change by a store
listener (not sampled): whenever the DGD's stored status says ``successful`` for its current
generation, every Deployment of the graph must have all its replicas updated and available.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from aiplane.apimachinery import objects
from aiplane.demo.common import Narrowing, fit
from aiplane.sim.apiserver.store import DELETED, Event

GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
COMPONENT_LABEL = "nvidia.com/dynamo-component"
DGD_KEY = "nvidia.com/dynamographdeployments"
DCD_KEY = "nvidia.com/dynamocomponentdeployments"
DEPLOYMENT_KEY = "apps/deployments"
POD_KEY = "/pods"
_TRACKED = (DCD_KEY, DEPLOYMENT_KEY, POD_KEY)


def _ready(pod: Mapping[str, Any]) -> bool:
    status = objects.status(pod)
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _pod_state(pod: Mapping[str, Any]) -> str:
    if objects.is_deleting(pod):
        return "Terminating"
    if _ready(pod):
        return "Ready"
    for c in objects.status(pod).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return "Unschedulable"
    return str(objects.status(pod).get("phase") or "Pending")


def _condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any]:
    for c in objects.status(obj).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == type_:
            return c
    return {}


def deployment_rolled_out(deployment: Mapping[str, Any]) -> bool:
    """Every replica of the Deployment's current template is updated and available (what a user
    means by "the rollout finished"), as ``kubectl rollout status`` decides it."""
    spec, status = objects.spec(deployment), objects.status(deployment)
    want = int(spec.get("replicas", 1))
    return (
        int(status.get("observedGeneration") or 0) >= (objects.generation(deployment) or 0)
        and int(status.get("updatedReplicas") or 0) >= want
        and int(status.get("availableReplicas") or 0) >= want
        and int(status.get("replicas") or 0) <= want
    )


def _image(obj: Mapping[str, Any]) -> str:
    template = objects.spec(obj).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or objects.spec(obj).get("containers") or []
    return str(containers[0].get("image", "")) if containers else ""


@dataclass
class GraphWatch:
    """Follows one DynamoGraphDeployment and what it owns, from the store's committed changes."""

    namespace: str
    name: str
    dgd: dict[str, Any] | None = None
    dcds: dict[str, dict[str, Any]] = field(default_factory=dict)
    deployments: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Times the stored DGD said ``successful`` (current generation) while a Deployment was rolling.
    premature_successful: int = 0
    started: float = field(default_factory=time.monotonic)

    def __call__(self, event: Event) -> None:
        meta = objects.meta(event.obj)
        if meta.get("namespace") != self.namespace:
            return
        if event.key == DGD_KEY and meta.get("name") == self.name:
            self.dgd = None if event.type == DELETED else event.obj
        elif event.key in _TRACKED and (meta.get("labels") or {}).get(GRAPH_LABEL) == self.name:
            table = {DCD_KEY: self.dcds, DEPLOYMENT_KEY: self.deployments, POD_KEY: self.pods}[event.key]
            if event.type == DELETED:
                table.pop(meta["name"], None)
            else:
                table[meta["name"]] = event.obj
        else:
            return
        if self.successful() and not all(deployment_rolled_out(d) for d in self.deployments.values()):
            self.premature_successful += 1

    @property
    def status(self) -> Mapping[str, Any]:
        return objects.status(self.dgd)

    def successful(self) -> bool:
        return (
            self.dgd is not None
            and self.status.get("state") == "successful"
            and self.status.get("observedGeneration") == objects.generation(self.dgd)
        )

    def converged(self, *, image: str | None = None, component: str | None = None) -> bool:
        """``successful`` with every Deployment rolled out; after an image change, also every pod of
        ``component`` runs ``image`` (the old pods are gone)."""
        if not self.successful() or not self.deployments:
            return False
        if not all(deployment_rolled_out(d) for d in self.deployments.values()):
            return False
        if image is None:
            return True
        pods = [p for p in self.pods.values() if objects.labels(p).get(COMPONENT_LABEL) == component]
        return bool(pods) and all(_image(p) == image and not objects.is_deleting(p) for p in pods)

    # --- rendering -------------------------------------------------------------------------------

    def render(self) -> Group:
        ready = _condition(self.dgd, "Ready")
        state = str(self.status.get("state") or "-")
        header = Text.assemble(
            ("DynamoGraphDeployment ", "bold"),
            (f"{self.namespace}/{self.name}", "bold cyan"),
            "  state ",
            (state, "green" if state == "successful" else ("red" if state == "failed" else "yellow")),
            f"   {time.monotonic() - self.started:5.1f}s\n",
            ("Ready ", "bold"),
            (str(ready.get("status", "-")), "green" if ready.get("status") == "True" else "yellow"),
            f" ({ready.get('reason', '')}: {ready.get('message', '')})",
        )
        table = Table(box=None, padding=(0, 1), header_style="bold")
        for column in (
            "service",
            "DCD available",
            "Deployment",
            "ready/upd/want",
            "image",
            "pods",
            "on nodes",
        ):
            table.add_column(column, no_wrap=column in ("service", "Deployment"))
        for name, dcd in sorted(self.dcds.items()):
            available = _condition(dcd, "Available")
            deployment = self.deployments.get(name)
            dstatus = objects.status(deployment)
            pods = sorted(
                (p for p in self.pods.values() if objects.labels(p).get("nvidia.com/selector") == name),
                key=objects.name,
            )
            states = Text(" ").join(
                Text(
                    _pod_state(p),
                    style={"Ready": "green", "Unschedulable": "red", "Terminating": "dim"}.get(
                        _pod_state(p), "yellow"
                    ),
                )
                for p in pods
            )
            table.add_row(
                str(objects.spec(dcd).get("serviceName") or name),
                # The status alone (the graph's Ready line above says why): narrow enough for 80 columns.
                Text(
                    str(available.get("status", "-")),
                    style="green" if available.get("status") == "True" else "yellow",
                ),
                name if deployment else "-",
                (
                    f"{dstatus.get('readyReplicas', 0)}/{dstatus.get('updatedReplicas', 0)}/"
                    f"{objects.spec(deployment).get('replicas', '?')}"
                    if deployment
                    else "-"
                ),
                _image(deployment).rsplit("/", 1)[-1] if deployment else "-",
                states,
                " ".join(str(objects.spec(p).get("nodeName") or "-") for p in pods),
            )
        return Group(
            header, Narrowing(fit(table, "service", "Deployment"), "image", "ready/upd/want", "pods")
        )

    def summary(
        self,
        *,
        up_seconds: float,
        rollout_seconds: float,
        children: Mapping[str, int],
        writes: int,
        quiet_writes: int,
        quiet_seconds: float,
    ) -> Table:
        table = Table(
            title=f"DynamoGraphDeployment {self.namespace}/{self.name}", show_header=False, title_style="bold"
        )
        table.add_column(style="bold")
        table.add_column()
        table.add_row("successful", f"after {up_seconds:.1f}s")
        table.add_row("created", ", ".join(f"{n} {kind}" for kind, n in children.items()))
        table.add_row(
            "worker image change",
            f"rolled out in {rollout_seconds:.1f}s; 'successful' while a rollout was in flight: "
            f"{self.premature_successful} times (upstream #3567: must be 0)",
        )
        table.add_row(
            "operator API writes", f"{writes}, then {quiet_writes} in the {quiet_seconds:.0f}s after"
        )
        return fit(table, 0)

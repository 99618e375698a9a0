"""A ModelInfer's groups in Kueue (controllers/queueing.py says how our workloads are queued).

Each group on one revision is a Kueue plain pod group named ``<mi>-<g>-<revision>``; Kueue names the
group's Workload after it, so the Workload of a group is found by name, and a Workload leads back to
its ModelInfer through the pods that own it.

A replaced group (rolling update), a lost pod's role replica, a deleted ModelInfer: each ends with our
pods being deleted, and Kueue keeps its finalizer on a deleted member of a serving pod group until a
replacement joins the group, which ours cannot before the old pod is gone (the same name).
the controller ``modelinfer-kueue-release`` (:class:`KueueRelease`) removes that finalizer from our pods being deleted, one write per pod, none
at rest (controllers/queueing.py, ``KUEUE_FINALIZER``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.apimachinery import objects
from aiplane.controllers import queueing
from aiplane.controllers.modelinfer.naming import LABEL_NAME
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.controller import Request, Result
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.resources import PODS

Obj = dict[str, Any]


@dataclass(frozen=True)
class QueueView:
    """The ModelInfer's groups in Kueue: any queued at all, those waiting (Kueue's words), and those
    Kueue has not decided on yet."""

    queued: bool = False
    waits: tuple[tuple[str, queueing.QuotaWait], ...] = ()
    undecided: tuple[str, ...] = ()


def queue_view(pods: Iterable[Mapping[str, Any]], workloads: Informer | None) -> QueueView:
    live = [p for p in pods if not objects.is_deleting(p)]
    groups = sorted({str(g) for p in live if (g := objects.labels(p).get(queueing.POD_GROUP_LABEL))})
    if not groups or workloads is None:
        return QueueView(queued=bool(groups))
    namespace = objects.namespace(live[0])
    waits = []
    undecided = []
    for group in groups:
        workload = workloads.get(f"{namespace}/{group}")
        wait = queueing.quota_wait(workload)
        if wait is not None:
            waits.append((f"group {group}", wait))
        elif queueing.undecided(workload):
            undecided.append(f"group {group}")
    return QueueView(True, tuple(waits), tuple(undecided))


def modelinfers_of_workload(workload: Mapping[str, Any], pods: Informer) -> list[Request]:
    """A Kueue Workload's ModelInfer: through the pods that own it (a pod group's Workload)."""
    ns = objects.namespace(workload)
    out = set()
    for ref in objects.meta(workload).get("ownerReferences") or []:
        pod = pods.get(f"{ns}/{ref.get('name')}") if ref.get("kind") == "Pod" else None
        name = objects.labels(pod).get(LABEL_NAME) if pod is not None else None
        if name:
            out.add(str(name))
    return [Request(ns or None, name) for name in sorted(out)]


def held_by_kueue(pod: Mapping[str, Any] | None) -> bool:
    """Whether ``pod`` is being deleted and Kueue's finalizer still holds it."""
    return (
        pod is not None
        and objects.is_deleting(pod)
        and queueing.KUEUE_FINALIZER in (objects.meta(pod).get("finalizers") or ())
    )


def release_patch(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of ``pod``'s finalizers without Kueue's, guarded by the resourceVersion seen: a pod
    changed meanwhile answers 409, which the runtime retries quietly on a fresher cache."""
    keep = [f for f in objects.meta(pod).get("finalizers") or () if f != queueing.KUEUE_FINALIZER]
    return {"metadata": {"finalizers": keep, "resourceVersion": objects.resource_version(pod)}}


class KueueRelease:
    """Releases our deleted pods from Kueue's finalizer (see the module docstring): a pod of ours being
    deleted is decided on by itself, whether its ModelInfer still exists or not, so a ModelInfer
    deleted whole (and its namespace) goes too. One write per deleted queued pod, none at rest."""

    def __init__(
        self, client: KubeClient, pods: Informer, recorder: EventRecorder, field_manager: str
    ) -> None:
        self.client = client
        self.pods = pods
        self.recorder = recorder
        self.field_manager = field_manager

    async def observe(self, request: Request) -> Obj | None:
        return self.pods.get(request.key)

    def decide(self, observed: Obj, now: datetime) -> dict[str, Any] | None:
        return release_patch(observed) if held_by_kueue(observed) else None

    async def act(self, observed: Obj, decision: dict[str, Any] | None) -> None:
        if decision is None:
            return
        try:
            await self.client.patch(
                PODS,
                objects.name(observed),
                decision,
                namespace=objects.namespace(observed),
                field_manager=self.field_manager,
            )
        except ApiError as exc:
            if not exc.not_found:  # gone already: released
                raise

    async def report(self, observed: Obj, decision: dict[str, Any] | None) -> Result | None:
        return None

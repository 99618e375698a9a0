"""A ModelInfer's groups in Kueue (controllers/queueing.py says how our workloads are queued).

Each group on one revision is a Kueue plain pod group named ``<mi>-<g>-<revision>``; Kueue names the
group's Workload after it, so the Workload of a group is found by name, and a Workload leads back to
its ModelInfer through the pods that own it.

A replaced group (rolling update), a lost pod's role replica, a deleted ModelInfer: each ends with our
pods being deleted, and Kueue keeps its finalizer on a deleted member of a serving pod group until a
replacement joins the group, which ours cannot before the old pod is gone (the same name).
the controller ``modelinfer-kueue-release`` (:class:`KueueRelease`) removes that finalizer from our pods being deleted, one write per pod, none
at rest (controllers/queueing.py, ``KUEUE_FINALIZER``).

The ModelInfer also owns the Workloads of the groups it keeps (:func:`workload_writes`). Kueue makes each
member pod an owner of its group's Workload, but records a replacement pod only when the count of
owners grows (``EnsureWorkloadOwnedByAllMembers`` in kubernetes-sigs/kueue,
pkg/controller/jobs/pod/pod_controller.go). Our replacement pods reuse the names of the pods they
replace, so the count never grows: once every original pod of a group has been replaced (a drain
evicts a whole group), each owner reference names a deleted pod, the garbage collector deletes the
Workload, and Kueue then deletes every pod of the group (``TerminationTarget: WorkloadDeleted``), a
disruption no budget sees. Kueue's own StatefulSet integration, whose pods also reuse names, answers
the same way: the StatefulSet owns the Workload while it has replicas. With the ModelInfer as an owner,
the garbage collector prunes the dead pod references instead and Kueue adds the live pods back. Once a
group is gone for good (scaled away, or rolled to another revision) and none of its pods is left, the
ModelInfer deletes its Workload; deleting the ModelInfer lets the collector delete them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.controllers import queueing
from aiplane.controllers.modelinfer.naming import (
    API_VERSION,
    KIND,
    LABEL_GROUP_NAME,
    LABEL_NAME,
    LABEL_REVISION,
    group_name,
    group_ordinal,
)
from aiplane.kube.children import ChildWriter
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.controller import Request, Result
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.resources import PODS, WORKLOADS, WORKLOADS_V1BETA2

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
    """A Kueue Workload's ModelInfer: the one that owns it, or through the pods that own it (a pod
    group's Workload before the ModelInfer's reference is added)."""
    ns = objects.namespace(workload)
    out = set()
    for ref in objects.meta(workload).get("ownerReferences") or []:
        if _is_modelinfer(ref) and ref.get("name"):
            out.add(str(ref["name"]))
            continue
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


# --- the ModelInfer owns the Workloads of the groups it keeps ----------------------------------------

#: Index of the Workloads informer: the UIDs of the ModelInfers that own a Workload.
BY_OWNER: Final = "modelInferOwner"


def _is_modelinfer(ref: object) -> bool:
    return isinstance(ref, Mapping) and ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION


def modelinfer_owners(workload: Mapping[str, Any]) -> list[str]:
    return [
        str(ref["uid"])
        for ref in objects.meta(workload).get("ownerReferences") or ()
        if _is_modelinfer(ref) and ref.get("uid")
    ]


def live_revisions(mi_name: str, pods: Iterable[Mapping[str, Any]]) -> dict[int, frozenset[str]]:
    """Each ordinal's revisions among its live (not terminating) pods."""
    out: dict[int, set[str]] = {}
    for pod in pods:
        if objects.is_deleting(pod):
            continue
        labels = objects.labels(pod)
        ordinal = group_ordinal(mi_name, str(labels.get(LABEL_GROUP_NAME) or ""))
        if ordinal is not None:
            out.setdefault(ordinal, set()).add(str(labels.get(LABEL_REVISION) or ""))
    return {o: frozenset(r) for o, r in out.items()}


def kept_pod_groups(
    mi_name: str,
    replicas: int,
    revisions: Iterable[str],
    live: Mapping[int, frozenset[str]],
) -> frozenset[str]:
    """The Kueue pod groups whose Workloads the ModelInfer keeps: each live group's own (the revisions
    of its live pods), and for an ordinal it wants (below ``replicas``) with no live pod — a group
    being rebuilt, under the same names — those of the update and current revisions. ``live``: the
    revisions of each ordinal's live (not terminating) pods."""
    kept = set()
    for ordinal in sorted(set(range(max(0, replicas))) | set(live)):
        for revision in sorted(live.get(ordinal) or {r for r in revisions if r}):
            kept.add(queueing.pod_group_name(group_name(mi_name, ordinal), revision))
    return frozenset(kept)


@dataclass(frozen=True)
class WorkloadWrite:
    """One Workload of the ModelInfer's groups: the ModelInfer's owner reference added (``patch``), or
    the Workload deleted (``patch`` None), its group gone for good."""

    workload: Obj
    patch: dict[str, Any] | None = None


def _owner_reference(mi: Mapping[str, Any]) -> dict[str, Any]:
    # Not a controller reference (Kueue's pods are owners too) and no blockOwnerDeletion: deleting the
    # ModelInfer must not wait for Kueue's Workloads.
    return {"apiVersion": API_VERSION, "kind": KIND, "name": objects.name(mi), "uid": objects.uid(mi)}


def workload_writes(
    mi: Mapping[str, Any],
    workloads: Iterable[Mapping[str, Any]],
    kept: frozenset[str],
    pod_groups: frozenset[str],
) -> list[WorkloadWrite]:
    """The ModelInfer's reference added to the Workloads of ``kept`` groups that lack it (a merge patch
    of the whole list, guarded by the resourceVersion seen: a Workload Kueue or the collector changed
    meanwhile answers 409, and the runtime decides again on a fresher cache); a Workload it owns whose
    group is not kept is deleted once no pod of ours is in that pod group (``pod_groups``: the groups
    of every pod of ours, terminating ones included). Deleting is needed, not dropping the reference:
    the collector may already have pruned the dead pods' references, and an object with no owner left
    is never collected. A Workload being deleted is left alone."""
    uid = objects.uid(mi)
    out = []
    seen = set()
    for workload in sorted(workloads, key=objects.name):
        name = objects.name(workload)
        if name in seen or objects.is_deleting(workload):
            continue
        seen.add(name)
        refs = [
            dict(r) for r in objects.meta(workload).get("ownerReferences") or () if isinstance(r, Mapping)
        ]
        owned = any(r.get("uid") == uid for r in refs)
        if name in kept and not owned:
            refs.append(_owner_reference(mi))
            meta = {"ownerReferences": refs, "resourceVersion": objects.resource_version(workload)}
            out.append(WorkloadWrite(dict(workload), {"metadata": meta}))
        elif name not in kept and owned and name not in pod_groups:
            out.append(WorkloadWrite(dict(workload)))
    return out


async def write_workloads(writer: ChildWriter, writes: Iterable[WorkloadWrite]) -> None:
    """Carry out :func:`workload_writes` through the shared child writer (a Workload already gone needs
    nothing). Patches go through Kueue's storage version (kube/resources.py says why)."""
    for write in writes:
        if write.patch is None:
            await writer.delete(WORKLOADS, write.workload)
            continue
        try:
            await writer.patch(WORKLOADS_V1BETA2, write.workload, write.patch)
        except ApiError as exc:
            if not exc.not_found:
                raise

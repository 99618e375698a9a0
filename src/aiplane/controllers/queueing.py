"""Submitting our workloads to the KaiwoConfig's Kueue queue, and saying why one waits (pure, no I/O).

When the cluster serves Kueue, the KaiwoConfig ``kaiwo`` exists and so does its default ClusterQueue
(the KaiwoConfig controller makes it), every workload our controllers
create goes to the LocalQueue named like its default ClusterQueue (``defaultClusterQueueName``; the
KaiwoConfig controller keeps one in every namespace holding a ModelInfer or a
DynamoGraphDeployment), through the Kueue integration that fits it:

* a ModelInfer group is a **plain pod group**: every pod gets the label
  ``kueue.x-k8s.io/queue-name``, the label ``kueue.x-k8s.io/pod-group-name`` (the group and its
  revision, see :func:`pod_group_name`), the annotation ``kueue.x-k8s.io/pod-group-total-count``, and
  ``kueue.x-k8s.io/pod-group-serving: "true"`` (a serving group: Kueue never declares it finished, and
  keeps its admission while members are replaced; see :data:`KUEUE_FINALIZER` for the other half);
* a multinode Dynamo component's LeaderWorkerSet, and a single-node component's Deployment, get the
  queue label on the object; Kueue's webhooks carry it to the pods.

Kueue's webhooks gate each such pod (``kueue.x-k8s.io/admission``) until its Workload is admitted
against the ClusterQueue's quota. The annotation :data:`SKIP_QUEUE_ANNOTATION` (``"true"``) on the
ModelInfer, DynamoGraphDeployment or DynamoComponentDeployment keeps its workloads out of the queue.

**The queue is chosen when an object is created, and never changed afterwards**: Kueue refuses to
change the queue of a Deployment or LeaderWorkerSet that has ready pods, and cannot adopt a running
pod. So turning Kueue or the KaiwoConfig on (or the opt-out off) queues what is created from then
on (new groups, replacement pods, new components); running pods are left alone. A pod created into a
group that already has pods follows its siblings (queued or not), so a group is never split between
Kueue and the scheduler.

Why a workload waits is Kueue's own words: :func:`quota_wait` reads the Workload's
``QuotaReserved=False`` condition (``couldn't assign flavors to pod set …: insufficient unused quota
for amd.com/gpu in flavor …``) for the owning resource's status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import remove_condition, set_condition
from aiplane.controllers.platform import Platform

__all__ = [
    "CONDITION",
    "GATE",
    "KUEUE_FINALIZER",
    "POD_GROUP_LABEL",
    "POD_GROUP_SERVING",
    "POD_GROUP_TOTAL_COUNT",
    "QUEUE_LABEL",
    "REASON_PENDING",
    "SKIP_QUEUE_ANNOTATION",
    "QuotaWait",
    "is_admitted",
    "owned_workloads",
    "pod_group_name",
    "queue_for",
    "queue_pod",
    "quota_condition",
    "quota_wait",
    "skips_queue",
    "undecided",
]

Obj = dict[str, Any]

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
#: A serving pod group (Kueue's ``pod-group-serving``): never finished, its admission kept across replacements.
POD_GROUP_SERVING: Final = "kueue.x-k8s.io/pod-group-serving"
#: The finalizer Kueue's pod webhook puts on every pod it queues by its own label (not on pods of a
#: Deployment or LeaderWorkerSet, whose webhooks mark them suspended by their parent). Kueue removes it
#: from a member of a pod group only once a replacement for it exists in the same group, or when the
#: group finishes or its Workload is deleted; a serving group never finishes. Our replacements reuse
#: the deleted pods' names (kthena's naming), so they cannot exist while the old pod does: the
#: ModelInfer controller removes Kueue's finalizer from its own pods once they are being deleted, as
#: Kueue's StatefulSet and LeaderWorkerSet integrations do for theirs (docs/kaiwo.md).
KUEUE_FINALIZER: Final = "kueue.x-k8s.io/managed"
#: The scheduling gate Kueue's pod webhook adds and removes at admission.
GATE: Final = "kueue.x-k8s.io/admission"
#: ``"true"`` on a ModelInfer, DynamoGraphDeployment or DynamoComponentDeployment: not queued.
SKIP_QUEUE_ANNOTATION: Final = "aiplane.silogen.ai/skip-queue"
#: Our reason (status and the Warning Event) while a workload waits for Kueue.
REASON_PENDING: Final = "QuotaPending"
#: The condition a queued ModelInfer reports (absent when nothing of it is queued).
CONDITION: Final = "QuotaReserved"
#: Waiting groups named in one message before "and N more".
_MAX_NAMED: Final = 3
#: Label values are at most 63 characters.
_MAX_LABEL: Final = 63


def skips_queue(*owners: Mapping[str, Any] | None) -> bool:
    """Does any of ``owners`` (the workload, its parent graph) opt out with the annotation?"""
    return any(
        owner is not None and str(objects.annotations(owner).get(SKIP_QUEUE_ANNOTATION, "")).lower() == "true"
        for owner in owners
    )


def queue_for(platform: Platform, *owners: Mapping[str, Any] | None) -> str | None:
    """The LocalQueue a new workload of ``owners`` goes to: the KaiwoConfig's default queue when Kueue
    is served, its ClusterQueue exists and nobody opted out; None otherwise."""
    if not platform.kueue_served or platform.kaiwo is None or skips_queue(*owners):
        return None
    queue = platform.kaiwo.defaultClusterQueueName
    # Its ClusterQueue not there (the KaiwoConfig controller not running, or not yet): not queued, rather
    # than gated behind a queue nobody will make.
    return queue if queue and queue in platform.cluster_queues else None


def pod_group_name(group: str, revision: str) -> str:
    """``<group>-<revision>``: a ModelInfer group's pods on one revision form one Kueue pod group, so a
    group rolled to a new revision is a new Workload (a pod group's shape is fixed when Kueue builds
    its Workload). Shortened from the left of the group name to fit a label value."""
    name = f"{group}-{revision}" if revision else group
    if len(name) <= _MAX_LABEL:
        return name
    keep = _MAX_LABEL - len(revision) - 1
    return f"{group[:keep].rstrip('-.')}-{revision}"


def queue_pod(pod: Obj, queue: str, group: str, total: int) -> Obj:
    """``pod`` (changed in place, and returned) as a member of Kueue pod group ``group`` of ``total``."""
    meta = pod.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({QUEUE_LABEL: queue, POD_GROUP_LABEL: group})
    meta.setdefault("annotations", {}).update({POD_GROUP_TOTAL_COUNT: str(total), POD_GROUP_SERVING: "true"})
    return pod


def sibling_queue(siblings: Iterable[Mapping[str, Any]]) -> tuple[str | None, bool]:
    """What pods already in a group say: (their queue or None, whether there are any)."""
    for pod in siblings:
        if objects.is_deleting(pod):
            continue
        return objects.labels(pod).get(QUEUE_LABEL) or None, True
    return None, False


# --- why a workload waits ------------------------------------------------------------------------------


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in objects.status(obj).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def is_admitted(workload: Mapping[str, Any]) -> bool:
    """Kueue admitted it: ``Admitted=True`` (or quota reserved, with no admission checks)."""
    for type_ in ("Admitted", "QuotaReserved"):
        cond = _condition(workload, type_)
        if cond is not None and cond.get("status") == "True":
            return True
    return False


@dataclass(frozen=True)
class QuotaWait:
    """A Workload of ours that Kueue has not admitted, and Kueue's words for why."""

    workload: str
    queue: str
    kueue_reason: str
    message: str

    def describe(self, what: str) -> str:
        """``<what> waits in Kueue LocalQueue <q> (Workload <w>): <Kueue's message>``."""
        why = self.message or "not admitted yet"
        return f"{what} waits in Kueue LocalQueue {self.queue} (Workload {self.workload}): {why}"


def quota_wait(workload: Mapping[str, Any] | None) -> QuotaWait | None:
    """Why ``workload`` waits (its ``QuotaReserved=False`` condition), or None: admitted, not there yet
    (Kueue creates a pod group's Workload when all its pods exist), or being deleted."""
    if workload is None or objects.is_deleting(workload) or is_admitted(workload):
        return None
    cond = _condition(workload, "QuotaReserved")
    if cond is None or cond.get("status") != "False":
        return None
    return QuotaWait(
        workload=objects.name(workload),
        queue=str(objects.spec(workload).get("queueName") or ""),
        kueue_reason=str(cond.get("reason") or ""),
        message=str(cond.get("message") or ""),
    )


def undecided(workload: Mapping[str, Any] | None) -> bool:
    """Kueue has not said yet: no Workload (a pod group's comes once all its pods exist), or one with
    neither an admission nor a ``QuotaReserved`` condition."""
    if workload is None:
        return True
    return not is_admitted(workload) and _condition(workload, "QuotaReserved") is None


def owned_workloads(
    workloads: Iterable[Mapping[str, Any]], owner_uids: Sequence[str]
) -> list[Mapping[str, Any]]:
    """The Workloads with an owner reference to one of ``owner_uids`` (Kueue owns a LeaderWorkerSet's
    Workloads by the LeaderWorkerSet, a lone pod's by the pod), sorted by name."""
    uids = set(owner_uids)
    out = [
        w
        for w in workloads
        if any(
            isinstance(r, Mapping) and r.get("uid") in uids
            for r in objects.meta(w).get("ownerReferences") or []
        )
    ]
    return sorted(out, key=objects.name)


def wait_message(waits: Sequence[tuple[str, QuotaWait]]) -> str:
    """One message for the waiting parts (``what`` and its wait), the first few named."""
    parts = [wait.describe(what) for what, wait in waits[:_MAX_NAMED]]
    if len(waits) > _MAX_NAMED:
        parts.append(f"and {len(waits) - _MAX_NAMED} more")
    return "; ".join(parts)


def quota_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    waits: Sequence[tuple[str, QuotaWait]],
    *,
    queued: bool,
    generation: int | None,
    now: datetime,
    undecided_parts: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """``QuotaReserved``: False (:data:`REASON_PENDING`, Kueue's words) while a part waits, Unknown
    (``Queued``) while Kueue has not decided on a part, True once Kueue admitted every queued part,
    absent when nothing is queued."""
    if not queued:
        return remove_condition(conditions, CONDITION)[0] if conditions else []
    if waits:
        status, reason, message = "False", REASON_PENDING, wait_message(waits)
    elif undecided_parts:
        named = ", ".join(undecided_parts[:_MAX_NAMED])
        more = f" and {len(undecided_parts) - _MAX_NAMED} more" if len(undecided_parts) > _MAX_NAMED else ""
        status, reason, message = "Unknown", "Queued", f"Kueue has not admitted {named}{more} yet"
    else:
        status, reason, message = "True", "Admitted", "Kueue admitted every queued workload"
    return set_condition(
        conditions, CONDITION, status, reason, message, observed_generation=generation, now=now
    )[0]

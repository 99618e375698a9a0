"""When Kueue lets go of a pod it holds with its ``kueue.x-k8s.io/managed`` finalizer (pure).

Upstream is ``kubernetes-sigs/kueue`` v0.17: the pod webhook (``pkg/controller/jobs/pod/pod_webhook.go``,
``Default``) adds the finalizer to every pod it suspends by the pod's own queue label; a pod suspended by
its parent (a Deployment's or LeaderWorkerSet's, annotation ``kueue.x-k8s.io/pod-suspending-parent``) gets
none (feature gate ``SkipFinalizersForPodsSuspendedByParent``, on by default since v0.16). The pod
controller (``pkg/controller/jobs/pod/pod_controller.go``) and the generic reconciler
(``pkg/controller/jobframework/reconciler.go``) remove it:

* **a lone pod** once it is being deleted or has ended (``Load``: a deleted pod drops its finalizers;
  ``Finished``: a terminated pod's Workload finishes and ``Finalize`` removes them);
* **every member of a pod group** when its Workload is being deleted (``Stop`` with
  ``WorkloadDeleted`` deletes the members still running, then ``Finalize``), or when the group has
  finished (``Finished``): all ``pod-group-total-count`` members ``Succeeded``, or none left running in a
  group a member of which says ``kueue.x-k8s.io/retriable-in-group: "false"``. A group annotated
  ``kueue.x-k8s.io/pod-group-serving: "true"`` never finishes;
* **a replaced member** (``FindMatchingWorkloads``): per pod set of the group's Workload (a role hash),
  members that cannot run any more (``Failed``, or deleted before being bound) are released only as far as
  running members make up the pod set's count without them: ``min(inactive, inactive + active - count)``.
  So a member deleted from a retriable or serving group stays Terminating until its replacement exists
  in the same group, and a group whose members are all deleted and never replaced stays for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiplane.apimachinery import objects

FINALIZER = "kueue.x-k8s.io/managed"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
RETRIABLE_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"

Obj = dict[str, Any]


def held(pod: Mapping[str, Any]) -> bool:
    return FINALIZER in (objects.meta(pod).get("finalizers") or ())


def terminated(pod: Mapping[str, Any]) -> bool:
    """``utilpod.IsTerminated``."""
    return objects.status(pod).get("phase") in ("Succeeded", "Failed")


def runnable(pod: Mapping[str, Any]) -> bool:
    """``isPodRunnableOrSucceeded``: not ``Failed``, and not deleted before a node was chosen."""
    if objects.is_deleting(pod) and not objects.spec(pod).get("nodeName"):
        return False
    return objects.status(pod).get("phase") != "Failed"


def lone_pod_released(pod: Mapping[str, Any]) -> bool:
    """A queued pod of no group: released once deleted or ended."""
    return held(pod) and (objects.is_deleting(pod) or terminated(pod))


@dataclass(frozen=True)
class GroupVerdict:
    """What Kueue does with a pod group now: the members it releases, whether the group has finished
    (its Workload gets ``Finished``), and the members it deletes (its Workload being deleted)."""

    release: tuple[str, ...] = ()
    finished: bool = False
    delete: tuple[str, ...] = ()


def finished(pods: Sequence[Mapping[str, Any]]) -> bool:
    """``Pod.Finished`` for a group (``pods`` every member the API server still has)."""
    if not pods or objects.annotations(pods[0]).get(SERVING_ANNOTATION) == "true":
        return False
    try:
        total = int(objects.annotations(pods[0]).get(TOTAL_COUNT_ANNOTATION) or 0)
    except ValueError:
        return False
    succeeded = sum(1 for p in pods if objects.status(p).get("phase") == "Succeeded")
    unretriable = any(objects.annotations(p).get(RETRIABLE_ANNOTATION) == "false" for p in pods)
    return succeeded == total or (unretriable and all(map(terminated, pods)))


def group_verdict(
    pods: Sequence[Mapping[str, Any]],
    workload: Mapping[str, Any] | None,
    role_of: Callable[[Mapping[str, Any]], str],
) -> GroupVerdict:
    """Kueue's pass over one pod group: ``pods`` its members (deleted and ended ones too), ``workload``
    its Workload if there is one, ``role_of`` a member's pod set name (its role hash)."""
    names = [objects.name(p) for p in pods]
    if workload is not None and objects.is_deleting(workload):
        delete = tuple(n for n, p in zip(names, pods, strict=True) if not objects.is_deleting(p))
        return GroupVerdict(
            release=tuple(n for n, p in zip(names, pods, strict=True) if held(p)), delete=delete
        )
    if finished(pods):
        return GroupVerdict(
            release=tuple(n for n, p in zip(names, pods, strict=True) if held(p)), finished=True
        )
    if workload is None:
        return GroupVerdict()
    release: list[str] = []
    for podset in objects.spec(workload).get("podSets") or []:
        mine = [p for p in pods if role_of(p) == podset.get("name")]
        active = [p for p in mine if runnable(p)]
        inactive = [p for p in mine if not runnable(p)]
        count = int(podset.get("count") or 0)
        releasable = min(len(inactive), len(inactive) + len(active) - count)
        if releasable <= 0:
            continue
        # The longest gone first (``sortInactivePods`` keeps the most recently active ones).
        inactive.sort(key=lambda p: str(objects.meta(p).get("deletionTimestamp") or ""))
        release.extend(objects.name(p) for p in inactive[:releasable] if held(p))
    return GroupVerdict(release=tuple(release))

"""Draining: cordon, evict through the Eviction API, and only then taint.

The NoExecute taint comes only once the Eviction API has emptied the node of everything but
DaemonSet pods: the taint manager evicts without asking PodDisruptionBudgets (upstream's bug), while
a cordon cannot remove DaemonSet pods (they tolerate unschedulable) such as the device plugin, which
must restart to publish the new partitions.

"Emptied" must be true of the node, not only of our cache. A pod bound just before the cordon (a
ModelInfer group rebuilt there a moment earlier) may not be in the Pod informer yet; tainting on
that view lets the taint manager delete a whole group its PodDisruptionBudget protects, while the
workload's arbiter, which counted that group as serving, releases another one to a drain (the
serving floor broken). So the taint is never decided in the step that writes the cordon: it waits
until the cordon is committed and observed, and the executor then confirms the node's pods with a
LIST from the API server (``node.py``) before writing it. A pod bound after that LIST would have
been placed by a scheduler that did not yet see the cordon.

Terminating pods are not evicted again but are waited for: a pod in its grace period can still hold
``/dev/kfd`` and make DCM fail with "Device busy". So are DaemonSet pods without any toleration of the
taint, once the node is tainted: kube's DaemonSet controller deletes a daemon pod that does not
tolerate a NoExecute taint of its node (``NodeShouldRunDaemonPod``; the taint manager would evict it
too), so evicting it as well only raced that delete (a 1,000-node rollout's evictions all answered 404). A daemon pod whose toleration has ``tolerationSeconds`` is still evicted: its controller
keeps it running until the taint manager's timer runs out. Pods that finished (phase Succeeded / Failed) hold
nothing and are ignored, unless they are being deleted: those are waited for as well, because kube's
taint manager finds the pods to delete on the node and then deletes each *by name*
(``addConditionAndDeletePod`` in kubernetes/kubernetes, pkg/controller/tainteviction/taint_eviction.go,
GETs and deletes the name without its UID). A controller that replaces pods under the same names (a
ModelInfer, a StatefulSet) has the replacement up, elsewhere, the moment the old pod is gone; a taint
written while the evicted pod was still there had the taint manager delete the replacement (seen on the
real tier: a rebuilt group lost a pod and its gang never scheduled). A toleration with
``tolerationSeconds`` does not count as tolerating (the taint manager would evict the pod anyway,
ignoring its PodDisruptionBudget).

A drain held by a PodDisruptionBudget says so: the executor remembers the Eviction API's 429
(``DisruptionBudget`` cause) per pod, and the drain turns it into ``DrainCompleted=False``
``EvictionBlocked`` naming each budget, the workload it protects and the server's count, sets
``status.blockedBy`` (a printer column) and records one Warning Event per budget newly holding it
(the previous ``status.blockedBy`` is the memory, so retries record nothing and write nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiplane.controllers.partitioning.node_actions import Cordon, Evict, Taint
from aiplane.controllers.partitioning.node_run import (
    DRAIN_COMPLETED,
    NODE_CORDONED,
    NODE_TAINTED,
    NORMAL,
    WARNING,
    Run,
    fmt_duration,
)
from aiplane.controllers.partitioning.views import BlockedEviction, PodView
from aiplane.controllers.partitioning.vocabulary import (
    APPLYING,
    CORDONED_BY_ANNOTATION,
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
    TAINTED_BY_ANNOTATION,
)

__all__ = ["draining", "pods_to_drain"]

_MAX_LISTED = 10


def pods_to_drain(pods: Sequence[PodView], node_name: str) -> list[PodView]:
    """Pods that must be gone before DCM may touch the GPUs and the node is tainted: on ``node_name``,
    not mirror pods, not finished (unless being deleted: module docstring), not tolerating the taint.
    DaemonSet pods are included (the device plugin must restart). Terminating pods are included too
    (waited for, not evicted again)."""
    return [
        pod
        for pod in pods
        if pod.node_name == node_name
        and not (pod.mirror or (pod.finished and not pod.terminating) or pod.tolerates_dcm_taint)
    ]


def _cordon(run: Run) -> bool:
    """Cordon (recording who did); True when the cordon is written by this step, not yet committed."""
    cordoning = not run.node.unschedulable
    if cordoning:
        run.act(Cordon(run.owner))
    if run.ours(CORDONED_BY_ANNOTATION):
        run.cond(NODE_CORDONED, "True", "CordonSucceeded", f"Node {run.node_name} cordoned")
    else:
        run.cond(
            NODE_CORDONED,
            "True",
            "AlreadyCordoned",
            f"Node {run.node_name} was already unschedulable; it will be left cordoned",
        )
    return cordoning


def _taint_once_evicted(run: Run, remaining: list[PodView], cordoning: bool) -> tuple[list[PodView], bool]:
    """Taint when no workload pod is left and the cordon is in place (or the node is tainted
    already); the pods still to go, and whether the taint waits for the cordon."""
    workload = [p for p in remaining if not p.daemonset]
    if cordoning and not workload and not run.node.has_dcm_taint:
        run.cond(
            NODE_TAINTED,
            "False",
            "WaitingForCordon",
            f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} waits until the cordon is in place and the "
            "node's pods are listed again (the taint evicts without asking PodDisruptionBudgets)",
        )
        return remaining, True
    if workload and not run.node.has_dcm_taint:
        run.cond(
            NODE_TAINTED,
            "False",
            "WaitingForEvictions",
            f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} waits until {len(workload)} pods are evicted "
            "through the Eviction API (PodDisruptionBudgets honoured)",
        )
        return workload, False
    if not run.node.has_dcm_taint:
        run.act(Taint(run.owner))
    if run.ours(TAINTED_BY_ANNOTATION) or not run.node.has_dcm_taint:
        run.cond(
            NODE_TAINTED, "True", "TaintApplied", f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} applied"
        )
    else:
        run.cond(
            NODE_TAINTED,
            "True",
            "AlreadyTainted",
            f"Node {run.node_name} already had an {TAINT_KEY}:{TAINT_EFFECT} taint; it will be left in place",
        )
    return remaining, False


def _timed_out(run: Run, remaining: list[PodView]) -> bool:
    names = ", ".join(sorted(p.key for p in remaining)[:_MAX_LISTED])
    more = f" and {len(remaining) - _MAX_LISTED} more" if len(remaining) > _MAX_LISTED else ""
    return run.fail(
        DRAIN_COMPLETED,
        "DrainTimeout",
        f"drain of node {run.node_name} did not complete within "
        f"{fmt_duration(run.config.drain_timeout)}: {len(remaining)} pods remain ({names}{more})",
    )


def _budgets_holding(run: Run, remaining: list[PodView]) -> dict[str, list[tuple[PodView, BlockedEviction]]]:
    """The pods still to evict whose last eviction a PodDisruptionBudget refused, by budget."""
    by_pod = {b.pod_key: b for b in run.blocked}
    held: dict[str, list[tuple[PodView, BlockedEviction]]] = {}
    for pod in remaining:
        blocked = by_pod.get(pod.key)
        if pod.terminating or blocked is None or (blocked.uid and pod.uid and blocked.uid != pod.uid):
            continue
        held.setdefault(blocked.budget_key, []).append((pod, blocked))
    return held


def _describe(budget: str, entries: list[tuple[PodView, BlockedEviction]]) -> str:
    workloads = sorted({pod.workload for pod, _ in entries if pod.workload})
    owned = f" ({', '.join(workloads)})" if workloads else ""
    return f"PodDisruptionBudget {budget}{owned} {entries[0][1].detail}"


def _report_blocked(run: Run, remaining: list[PodView]) -> bool:
    """Name the budgets holding the drain (condition, ``status.blockedBy``, one Event per new budget)."""
    held = _budgets_holding(run, remaining)
    if not held:
        return False
    budgets = sorted(held)
    descriptions = [_describe(budget, held[budget]) for budget in budgets]
    run.cond(
        DRAIN_COMPLETED,
        "False",
        "EvictionBlocked",
        f"waiting for {len(remaining)} pods to be evicted: {'; '.join(descriptions)}",
    )
    run.blocked_by = ", ".join(budgets)
    before = str(run.np.status.get("blockedBy") or "").split(", ")
    for budget, description in zip(budgets, descriptions, strict=True):
        if budget not in before:
            pods = ", ".join(sorted(pod.key for pod, _ in held[budget]))
            run.event(
                WARNING,
                "EvictionBlocked",
                f"Draining node {run.node_name}: eviction of {pods} refused by {description}",
            )
    return True


def draining(run: Run) -> bool:
    """Cordon, evict, taint; on to Applying once nothing that must go is left."""
    if run.profile is None:
        return run.profile_gone()
    run.ensure_finalizer()
    cordoning = _cordon(run)
    remaining, waits = _taint_once_evicted(run, pods_to_drain(run.pods, run.node_name), cordoning)
    if waits:
        # Our own cordon write brings the node back here; the retry interval is only a fallback.
        run.wait(run.config.eviction_retry.total_seconds())
        return False
    if not remaining:
        message = f"All pods evicted from node {run.node_name}"
        run.cond(DRAIN_COMPLETED, "True", "DrainSucceeded", message)
        run.event(NORMAL, "DrainCompleted", message)
        return run.goto(APPLYING)
    deadline = run.since(DRAIN_COMPLETED) + run.config.drain_timeout
    if run.now >= deadline:
        return _timed_out(run, remaining)
    for pod in remaining:
        # Here the node carries the taint (or gets it in this step): a DaemonSet pod that does not
        # tolerate it is deleted by the DaemonSet controller, so it is waited for like a terminating
        # pod. Evicting it too raced that delete and lost every time (404: a write for nothing).
        if not (pod.terminating or pod.removed_by_taint):
            run.act(Evict(pod.namespace, pod.name, pod.uid))
    if _report_blocked(run, remaining):
        run.wait_until(deadline, run.config.eviction_retry)
        return False
    run.cond(
        DRAIN_COMPLETED,
        "False",
        "DrainInProgress",
        f"waiting for {len(remaining)} pods to be evicted: drain in progress",
    )
    run.wait_until(deadline, run.config.eviction_retry)
    return False

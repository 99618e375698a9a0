"""What Volcano decides about a gang, as pure functions: placement, admission, PodGroup phase and conditions.

The agent in :mod:`aiplane.sim.agents.gang` feeds these with the cluster it sees and acts on the
answers; they are unit-tested without a cluster. Messages and reasons are Volcano's, since our
controllers and users read them.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import Obj
from aiplane.sim.agents.scheduler_filters import (
    ERR_NODE_AFFINITY,
    ERR_NODE_UNSCHEDULABLE,
    TAINT_UNSCHEDULABLE,
    Ledger,
    NodeInfo,
    NodeStatus,
    PodInfo,
    PodKey,
    find_node,
    insufficient,
    taint_reason,
)

VOLCANO = "volcano"
#: Event source of the Volcano scheduler, and the field manager its status writes show.
COMPONENT = "volcano"
FIELD_MANAGER = "vc-scheduler"
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
PODGROUPS = "scheduling.volcano.sh/podgroups"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

#: PodGroup condition types and reasons (volcano.sh/apis scheduling/v1beta1).
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
GANG_READY_REASON = "tasks in gang are ready to be scheduled"
POD_GROUP_NOT_READY = "pod group is not ready"
POD_GROUP_READY = "pod group is ready"
OVERUSED = "resource in cluster is overused"
#: Volcano's predicate reason when a node runs as many pods as it may.
ERR_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"

#: What Volcano's PodGroup controller names the PodGroups it creates (``podgroup-<uid>``), and its manager.
PODGROUP_PREFIX = "podgroup-"
CONTROLLER_MANAGER = "vc-controller-manager"

#: Volcano's task statuses that hold resources (``AllocatedStatus``) and count as "ready".
ALLOCATED = frozenset({"Allocated", "Binding", "Bound", "Running"})


#: Task states that count towards a formed gang, and towards a gang that can still form.
READY_STATES = ALLOCATED | {"Succeeded"}
VALID_STATES = ALLOCATED | {"Succeeded", "Pending"}


# --- pure decisions ------------------------------------------------------------------------------------


def task_status(pod: Obj) -> str:
    """Volcano's ``TaskStatus`` of a pod: Pending, Bound, Running, Releasing, Succeeded, Failed."""
    phase = objects.status(pod).get("phase")
    if phase == "Succeeded":
        return "Succeeded"
    if phase == "Failed":
        return "Failed"
    if objects.is_deleting(pod):
        return "Releasing"
    if objects.spec(pod).get("nodeName"):
        return "Running" if phase == "Running" else "Bound"
    return "Pending"


def volcano_filter_node(
    pod: PodInfo, node: NodeInfo, requested: Mapping[str, int], pods: int, *, taint_details: bool = True
) -> NodeStatus | None:
    """Volcano's allocate-time checks: resources first (only the first insufficient one is named:
    cpu, memory, then the others by name), then the pod count, ``NodeUnschedulable``, ``NodeAffinity``
    and ``TaintToleration`` predicates."""
    reasons = insufficient(pod, node, requested, pods)
    resources = [r for r in reasons if r.startswith("Insufficient ")]
    if resources:
        return NodeStatus((resources[0],), resolvable=True)
    if reasons:
        return NodeStatus((ERR_POD_NUMBER_EXCEEDED,), resolvable=True)
    if node.unschedulable and not pod.tolerates({"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}):
        return NodeStatus((ERR_NODE_UNSCHEDULABLE,))
    if not pod.affinity.matches(node):
        return NodeStatus((ERR_NODE_AFFINITY,))
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not pod.tolerates(taint):
            return NodeStatus((taint_reason(taint, taint_details),))
    return None


def volcano_fit_error(total_nodes: int, statuses: Sequence[NodeStatus]) -> str:
    """``FitErrors.Error()``: ``0/N nodes are unavailable: <sorted "count reason" histogram>.``"""
    head = f"0/{total_nodes} nodes are unavailable"
    counts = Counter(r for s in statuses for r in s.reasons)
    if not counts:
        return head
    return f"{head}: {', '.join(sorted(f'{n} {r}' for r, n in counts.items()))}."


def _histogram(counts: Mapping[str, int]) -> str:
    return ", ".join(sorted(f"{n} {k}" for k, n in counts.items() if n))


def job_fit_error(
    statuses: Mapping[str, int],
    min_member: int,
    pending_reasons: Mapping[str, int],
    origin: tuple[str, str] | None = None,
) -> str:
    """``JobInfo.FitError()``: "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable.
    Origin reason is p-0: 0/9 nodes are unavailable: …" (histograms sorted as strings, as Go does)."""
    message = f"{POD_GROUP_NOT_READY}, {_histogram({**statuses, 'minAvailable': min_member})}"
    if any(pending_reasons.values()):
        message += f"; Pending: {_histogram(pending_reasons)}"
    if origin is not None:
        message += f". Origin reason is {origin[0]}: {origin[1]}"
    return message


def schedulable_message(pod: PodInfo, node: str) -> str:
    return (
        f"Pod {pod.namespace}/{pod.name} can possibly be assigned to {node}, once minAvailable is satisfied"
    )


def task_minimums_met(counts: Mapping[str, int], min_member: int, min_task: Mapping[str, int]) -> bool:
    """``CheckTaskReady``: every ``minTaskMember`` is met — skipped when ``minMember`` is below their sum."""
    if min_member < sum(min_task.values()):
        return True
    return all(counts.get(task, 0) >= need for task, need in min_task.items() if need > 0)


@dataclass
class GangPlan:
    """The outcome of one allocation pass over a gang's pending pods."""

    #: Bind ``assignments`` now (the gang reaches minMember, or had already formed).
    ready: bool
    #: Tentative placements, in the order they were made.
    assignments: dict[PodKey, str] = field(default_factory=dict)
    #: Pods tried that fit nowhere, with every node's status.
    failures: dict[PodKey, list[NodeStatus]] = field(default_factory=dict)


def plan_gang(
    pending: Sequence[PodInfo],
    ready_by_task: Mapping[str, int],
    min_member: int,
    min_task: Mapping[str, int],
    nodes: Sequence[NodeInfo],
    ledger: Ledger,
    *,
    total_tasks: int | None = None,
    taint_details: bool = True,
) -> GangPlan:
    """Place ``pending`` (in that order) tentatively on ``nodes`` with running accounting in ``ledger``
    and say whether the gang may be bound: ready pods (``ready_by_task``: bound, running or succeeded
    per task) plus placed ones reach ``min_member`` and every task minimum (pure; ``ledger`` gets the
    tentative placements)."""
    total = len(pending) + sum(ready_by_task.values()) if total_tasks is None else total_tasks
    formed = sum(ready_by_task.values()) >= min_member and task_minimums_met(
        ready_by_task, min_member, min_task
    )
    plan = GangPlan(ready=False)
    failed_tasks: set[str] = set()
    for pod in pending:
        if pod.task and pod.task in failed_tasks:
            continue  # Volcano skips the rest of a task that already failed to fit
        node, statuses = find_node(
            pod, nodes, ledger, filter_fn=volcano_filter_node, taint_details=taint_details
        )
        if node is None:
            plan.failures[pod.key] = statuses
            if not formed and min_member >= total:
                break  # every pod is needed: no point trying the others
            failed_tasks.add(pod.task)
            continue
        ledger.add(node, pod.requests)
        plan.assignments[pod.key] = node
    counts = Counter(ready_by_task)
    by_key = {p.key: p for p in pending}
    for key in plan.assignments:
        counts[by_key[key].task] += 1
    plan.ready = formed or (
        sum(counts.values()) >= min_member and task_minimums_met(counts, min_member, min_task)
    )
    return plan


def gang_resource(name: str) -> bool:
    """Whether a ``minResources`` key is a resource Volcano compares (not ``pods``, ``count/…``, or
    quota-style ``requests.``/``limits.`` keys)."""
    return name != "pods" and not name.startswith(("count/", "requests.", "limits."))


def enqueueable(
    min_resources: Mapping[str, int] | None,
    total: Mapping[str, int],
    used: Mapping[str, int],
    reserved: Mapping[str, int],
    overcommit_factor: float = 1.2,
) -> bool:
    """Volcano's ``overcommit`` enqueue check: ``reserved + minResources <= total * factor - used`` in each
    dimension ``minResources`` names; no ``minResources``: always."""
    if min_resources is None:
        return True
    for name, amount in min_resources.items():
        if amount <= 0 or not gang_resource(name):
            continue
        idle = total.get(name, 0) * overcommit_factor - used.get(name, 0)
        if reserved.get(name, 0) + amount > idle:
            return False
    return True


def podgroup_phase(current: str, statuses: Mapping[str, int], min_member: int, unschedulable: bool) -> str:
    """Volcano's ``jobStatus`` phase: ``Unknown`` if pods run but the gang is unschedulable now; ``Running``
    when allocated + finished pods reach ``minMember`` (``Completed`` when all of them succeeded); else
    ``Inqueue`` stays, anything else becomes ``Pending``."""
    if statuses.get("Running", 0) and unschedulable:
        return "Unknown"
    allocated = sum(n for s, n in statuses.items() if s in ALLOCATED or s in ("Succeeded", "Failed"))
    if allocated and allocated >= min_member:
        return "Completed" if statuses.get("Succeeded", 0) == allocated else "Running"
    return "Inqueue" if current == "Inqueue" else "Pending"


def set_condition(
    conditions: Sequence[Mapping[str, Any]], kind: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """``UpdatePodGroupCondition`` with ``status: True``; an unchanged condition keeps its time and
    ``transitionID``."""
    out = [dict(c) for c in conditions]
    new = {
        "type": kind,
        "status": "True",
        "lastTransitionTime": now,
        "transitionID": str(uuid.uuid4()),
        "reason": reason,
    }
    if message:
        new["message"] = message
    for i, cond in enumerate(out):
        if cond.get("type") != kind:
            continue
        if (
            cond.get("status") == "True"
            and cond.get("reason") == reason
            and (cond.get("message") or "") == message
        ):
            return out
        out[i] = new
        return out
    out.append(new)
    return out


def podgroup_name_for(pod: Obj) -> str:
    """``GeneratePodgroupName``: ``podgroup-`` + the uid of the pod's controller, or of the pod."""
    for ref in objects.meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return f"{PODGROUP_PREFIX}{ref.get('uid')}"
    return f"{PODGROUP_PREFIX}{objects.uid(pod)}"


def podgroup_for(pod: Obj, requests: Mapping[str, int]) -> Obj:
    """The PodGroup Volcano's controller creates for a Volcano pod without one (``minMember: 1``)."""
    meta = objects.meta(pod)
    refs = meta.get("ownerReferences") or []
    if not any(ref.get("controller") for ref in refs):
        refs = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    minimum = {
        name: Quantity.from_milli(value).canonical() if name == "cpu" else str(value)
        for name, value in sorted(requests.items())
    }
    spec: Obj = {"minMember": 1, "minResources": minimum}
    priority_class = objects.spec(pod).get("priorityClassName")
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name_for(pod),
            "namespace": meta.get("namespace"),
            "ownerReferences": [dict(r) for r in refs],
        },
        "spec": spec,
    }


# --- the agent -------------------------------------------------------------------------------------------


def group_of(pod: Obj) -> str | None:
    """The PodGroup a Volcano pod belongs to (``None`` for pods of other schedulers or without one)."""
    if objects.spec(pod).get("schedulerName") != VOLCANO:
        return None
    name = objects.annotations(pod).get(GROUP_NAME_KEY)
    return str(name) if name else None


def gang_view(pod: Obj | None) -> tuple[Any, ...]:
    """The parts of a member pod whose change matters to its group (not its conditions)."""
    if pod is None:
        return ()
    return (
        objects.spec(pod).get("nodeName"),
        objects.status(pod).get("phase"),
        objects.meta(pod).get("deletionTimestamp"),
        group_of(pod),
        objects.spec(pod).get("schedulingGates"),
        objects.spec(pod).get("tolerations"),
    )


__all__ = [
    "GangPlan",
    "enqueueable",
    "job_fit_error",
    "plan_gang",
    "podgroup_for",
    "podgroup_name_for",
    "podgroup_phase",
    "set_condition",
    "task_minimums_met",
    "task_status",
    "volcano_filter_node",
    "volcano_fit_error",
]

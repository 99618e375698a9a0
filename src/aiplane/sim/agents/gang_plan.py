"""What Volcano decides about a gang, as pure functions: placement, admission, PodGroup phase and conditions.

The agent in :mod:`aiplane.sim.agents.gang` feeds these with the cluster it sees and acts on the
answers; they are unit-tested without a cluster. Messages and reasons are Volcano's, since our
controllers and users read them.
"""

from __future__ import annotations

import functools
import math
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


# --- node scoring: Volcano's binpack and nodeorder plugins ------------------------------------------------

#: kube-scheduler's ``MaxNodeScore``, the scale of every plugin score.
MAX_NODE_SCORE = 100
#: What kube scores a pod without a cpu or memory request as (``schedutil.DefaultMilliCPURequest``,
#: ``DefaultMemoryRequest``), for ``NodeResourcesLeastAllocated``/``MostAllocated``.
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
#: ``NodeResourcesBalancedAllocation``'s resources in Volcano's ``nodeorder`` (``nvidia.com/gpu`` only).
BALANCED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


@dataclass(frozen=True)
class VolcanoScoring:
    """The arguments of Volcano's ``binpack`` and ``nodeorder`` plugins (``volcano-scheduler.conf``);
    the defaults are Volcano's when the plugins are listed without arguments."""

    binpack_weight: int = 1
    binpack_cpu: int = 1
    binpack_memory: int = 1
    #: ``binpack.resources`` with their ``binpack.resources.<name>`` weights (Volcano: none).
    binpack_resources: Mapping[str, int] = field(default_factory=dict)
    least_requested: int = 1
    most_requested: int = 0
    balanced_resource: int = 1
    node_affinity: int = 2
    taint_toleration: int = 3

    def binpack_weights(self) -> dict[str, int]:
        return {**self.binpack_resources, "cpu": self.binpack_cpu, "memory": self.binpack_memory}


#: Volcano's default ``volcano-scheduler.conf`` (binpack counts cpu and memory only).
VOLCANO_DEFAULT_SCORING = VolcanoScoring()
#: What the sim runs: the default plus ``binpack.resources: amd.com/gpu, nvidia.com/gpu`` (weight 1
#: each), the setting GPU clusters use so that binpack packs accelerators.
GPU_BINPACK_SCORING = VolcanoScoring(binpack_resources={"amd.com/gpu": 1, "nvidia.com/gpu": 1})


def binpack_score(pod: PodInfo, node: NodeInfo, used: Mapping[str, int], scoring: VolcanoScoring) -> float:
    """``BinPackingScore``: per requested resource with a weight, ``(used + request) / allocatable *
    weight`` (0 if it overflows), summed, divided by the weights summed, * 100 * ``binpack.weight``."""
    weights = scoring.binpack_weights()
    score = 0.0
    weight_sum = 0
    for resource, request in pod.requests.items():
        weight = weights.get(resource)
        if request <= 0 or weight is None:
            continue
        capacity = node.allocatable.get(resource, 0)
        total = used.get(resource, 0) + request
        if capacity and weight and total <= capacity:
            score += total * weight / capacity
        weight_sum += weight
    if weight_sum:
        score /= weight_sum
    return score * MAX_NODE_SCORE * scoring.binpack_weight


def _non_zero(pod: PodInfo, resource: str) -> int:
    request = pod.requests.get(resource, 0)
    if request:
        return request
    return DEFAULT_MILLI_CPU if resource == "cpu" else DEFAULT_MEMORY


def _allocated_score(pod: PodInfo, node: NodeInfo, used: Mapping[str, int], *, least: bool) -> int:
    """``NodeResourcesFit`` ``LeastAllocated``/``MostAllocated`` over cpu and memory (equal weights),
    integer arithmetic as kube's."""
    total = 0
    count = 0
    for resource in ("cpu", "memory"):
        capacity = node.allocatable.get(resource, 0)
        if capacity <= 0:
            continue
        requested = used.get(resource, 0) + _non_zero(pod, resource)
        if least:
            total += 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        else:
            total += min(requested, capacity) * MAX_NODE_SCORE // capacity
        count += 1
    return total // count if count else 0


def balanced_score(pod: PodInfo, node: NodeInfo, used: Mapping[str, int]) -> int:
    """``NodeResourcesBalancedAllocation``: 100 * (1 - the standard deviation of the requested fractions
    of cpu, memory and, when the pod asks for it, ``nvidia.com/gpu``)."""
    fractions = []
    for resource in BALANCED_RESOURCES:
        request = pod.requests.get(resource, 0)
        capacity = node.allocatable.get(resource, 0)
        if capacity <= 0 or (resource not in ("cpu", "memory") and request <= 0):
            continue
        fractions.append(min((used.get(resource, 0) + request) / capacity, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def nodeorder_score(pod: PodInfo, node: NodeInfo, used: Mapping[str, int], scoring: VolcanoScoring) -> float:
    """``nodeorder``'s per-node part: least/most allocated, balanced allocation and the preferred
    node-affinity weights (not normalized, as Volcano calls the plugin), each times its weight."""
    score = 0.0
    if scoring.least_requested:
        score += _allocated_score(pod, node, used, least=True) * scoring.least_requested
    if scoring.most_requested:
        score += _allocated_score(pod, node, used, least=False) * scoring.most_requested
    if scoring.balanced_resource:
        score += balanced_score(pod, node, used) * scoring.balanced_resource
    if scoring.node_affinity:
        score += pod.affinity.preference(node) * scoring.node_affinity
    return score


def _soft_taints(pod: PodInfo, node: NodeInfo) -> int:
    return sum(1 for t in node.taints if t.get("effect") == "PreferNoSchedule" and not pod.tolerates(t))


def volcano_find_node(
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    ledger: Ledger,
    scoring: VolcanoScoring = GPU_BINPACK_SCORING,
    *,
    taint_details: bool = True,
) -> tuple[str | None, list[NodeStatus]]:
    """Volcano's predicate-then-prioritize for one task: the fitting node with the highest sum of the
    plugins' scores (``binpack`` + ``nodeorder`` + the batch ``TaintToleration`` score, normalized over
    the fitting nodes), ties by name; and the statuses of the nodes that do not fit."""
    fitting: list[tuple[NodeInfo, float]] = []
    failed: list[NodeStatus] = []
    for node in nodes:
        used = ledger.requested(node.name)
        status = volcano_filter_node(pod, node, used, ledger.pods(node.name), taint_details=taint_details)
        if status is not None:
            failed.append(status)
            continue
        score = binpack_score(pod, node, used, scoring) if scoring.binpack_weight else 0.0
        fitting.append((node, score + nodeorder_score(pod, node, used, scoring)))
    if not fitting:
        return None, failed
    soft = {node.name: _soft_taints(pod, node) for node, _ in fitting}
    most = max(soft.values())

    def total(item: tuple[NodeInfo, float]) -> float:
        normalized = soft[item[0].name] * MAX_NODE_SCORE // most if most else 0
        return item[1] + scoring.taint_toleration * (MAX_NODE_SCORE - normalized)

    # ``max`` keeps the first of equals: the first name (Volcano picks one of them at random).
    best = max(sorted(fitting, key=lambda item: item[0].name), key=total)
    return best[0].name, failed


def pod_index(name: str) -> int | None:
    """``GetPodIndexUnderTask``: the number after the last ``-`` of a name with at least three parts."""
    parts = name.split("-")
    if len(parts) < 3:
        return None
    try:
        return int(parts[-1])
    except ValueError:
        return None


def task_order(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """Volcano's ``TaskOrderFn`` in the default tiers: the ``priority`` plugin (higher first), then
    ``CompareTask``: the pod index when both names carry one, then creation time; the name stands in
    for Volcano's last tie-break, the uid."""

    def compare(left: PodInfo, right: PodInfo) -> int:
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        li, ri = pod_index(left.name), pod_index(right.name)
        if li is not None and ri is not None and li != ri:
            return -1 if li < ri else 1
        if left.created != right.created:
            return -1 if left.created < right.created else 1
        return -1 if left.name < right.name else (1 if left.name > right.name else 0)

    return sorted(pods, key=functools.cmp_to_key(compare))


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
    scoring: VolcanoScoring = GPU_BINPACK_SCORING,
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
        node, statuses = volcano_find_node(pod, nodes, ledger, scoring, taint_details=taint_details)
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
    "GPU_BINPACK_SCORING",
    "VOLCANO_DEFAULT_SCORING",
    "GangPlan",
    "VolcanoScoring",
    "binpack_score",
    "enqueueable",
    "job_fit_error",
    "nodeorder_score",
    "plan_gang",
    "podgroup_for",
    "podgroup_name_for",
    "podgroup_phase",
    "set_condition",
    "task_minimums_met",
    "task_order",
    "task_status",
    "volcano_filter_node",
    "volcano_find_node",
    "volcano_fit_error",
]

"""Kube-scheduler-lite: binds unbound pods to nodes, as kube-scheduler's default profile would.

Why: controllers create pods without ``spec.nodeName`` (Deployments, ModelInfer roles, Jobs) and wait for
them to run; an operator also reads *why* a pod is Pending (``PodScheduled=False``, ``Unschedulable``,
the ``0/13 nodes are available: …`` message) and reacts to ``FailedScheduling`` events. Without a
scheduler every such pod would stay Pending with no reason.

**What it schedules**: pods without ``spec.nodeName`` whose ``spec.schedulerName`` is empty or
``default-scheduler``, not being deleted, not Succeeded/Failed. Pods with scheduling gates get
``PodScheduled=False``/``SchedulingGated`` and wait. Pods naming another scheduler are left alone (the
gang scheduler in :mod:`.gang` takes ``volcano``).

**Filters**, in kube's plugin order, the first failing one giving the node's reasons:
``NodeUnschedulable`` (``spec.unschedulable`` unless the pod tolerates
``node.kubernetes.io/unschedulable:NoSchedule``), ``TaintToleration`` (``NoSchedule``/``NoExecute``
taints; a node whose ``Ready`` condition is ``False`` has the ``node.kubernetes.io/not-ready:NoSchedule``
taint and one whose condition is ``Unknown`` or missing ``node.kubernetes.io/unreachable:NoSchedule``,
as the node lifecycle controller would add), ``NodeAffinity`` (``spec.nodeSelector`` and the required
node-affinity terms: ``matchExpressions`` In/NotIn/Exists/DoesNotExist/Gt/Lt, ``matchFields``
``metadata.name``), ``NodeResourcesFit`` (every requested resource against ``status.allocatable`` minus
the requests of the non-terminal pods bound to the node; ``pods`` against the pod count).

**Score** (our choice, deterministic; kube sums weighted plugin scores): fewest untolerated
``PreferNoSchedule`` taints, then the highest sum of matching preferred node-affinity weights, then the
least allocated node (mean free fraction after placement over cpu, memory and the extended resources
the pod requests), then the node name.

**Reporting**: a fitting pod is bound through ``POST pods/{name}/binding`` (:meth:`Api.bind`) and gets a
``Scheduled`` event ("Successfully assigned ns/pod to node"); an unfitting one gets
``PodScheduled=False``/``Unschedulable`` with kube's ``FitError`` message (``0/N nodes are available:
<histogram>. preemption: 0/N nodes are available: <histogram>.``) and a ``FailedScheduling`` Warning
event, both only when the message changes. An unschedulable pod is retried when a
node it now passes the filters on appears or changes (a node added, uncordoned, untainted, relabelled,
Ready again, or with more allocatable; a bound pod on it deleted or finished: kube's queueing hints,
checked against that one node), and every ``retry_interval`` seconds (30) with all pending pods,
which also refreshes their messages. Nothing is preempted.

The cluster state (nodes, requests per node) is kept incrementally by :class:`SchedulerCache` from
store events, shared with the gang scheduler, so a scheduling attempt costs O(nodes) and an unrelated
event costs O(1).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    StoreIndex,
    Work,
    pod_terminal,
    record_event,
    write_status,
)
from aiplane.sim.agents.daemonsets import toleration_tolerates_taint
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions, rfc3339, upsert_condition
from aiplane.sim.apiserver.store import ADDED, DELETED, Event

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
#: Event source of kube-scheduler (its profile's scheduler name) and its field manager.
COMPONENT = "default-scheduler"
FIELD_MANAGER = "kube-scheduler"

ERR_NODE_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
#: kube-scheduler ≥ 1.34.2 no longer names the taint in pod statuses and events (kubernetes#134740).
ERR_TAINT = "node(s) had untolerated taint(s)"
ERR_TOO_MANY_PODS = "Too many pods"
ERR_NO_NODES = "no nodes available to schedule pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

#: Resource amounts as integers: ``cpu`` in millicores, everything else in units (bytes, devices).
ResourceList = dict[str, int]
PodKey = tuple[str, str]


# --- requests and allocatable ----------------------------------------------------------------------


def quantity_int(resource: str, value: Any) -> int:
    """``value`` as the scheduler counts it: millicores for ``cpu``, whole units (rounded up) otherwise.
    Unparseable quantities count as 0 (the API server would have rejected them)."""
    try:
        quantity = Quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        return 0
    return quantity.milli_value() if resource == "cpu" else quantity.value()


def resource_list(resources: Mapping[str, Any] | None) -> ResourceList:
    return {name: quantity_int(name, value) for name, value in (resources or {}).items()}


def container_requests(container: Mapping[str, Any]) -> ResourceList:
    """A container's requests, with its limits standing in for missing requests (Kubernetes defaulting)."""
    resources = container.get("resources") or {}
    out = resource_list(resources.get("limits"))
    out.update(resource_list(resources.get("requests")))
    return out


def _add_into(total: ResourceList, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def pod_requests(spec: Mapping[str, Any]) -> ResourceList:
    """``resourcehelper.PodRequests``: per resource the larger of the containers' sum and the largest init
    container (restartable "sidecar" init containers add to what runs beside the containers), plus
    ``spec.overhead``."""
    total: ResourceList = {}
    for container in spec.get("containers") or []:
        _add_into(total, container_requests(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add_into(sidecars, requests)
            current = dict(sidecars)
        else:
            current = dict(sidecars)
            _add_into(current, requests)
        for name, value in current.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    _add_into(total, sidecars)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    _add_into(total, resource_list(spec.get("overhead")))
    return {name: value for name, value in total.items() if value}


# --- nodes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeInfo:
    """What scheduling needs of a Node, parsed once per node change."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False
    #: The ``Ready`` condition's status: ``True``, ``False`` or ``Unknown`` (also when missing).
    ready: str = "True"
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_node(cls, node: Obj) -> NodeInfo:
        meta = objects.meta(node)
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        ready = "Unknown"
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Ready":
                ready = str(cond.get("status") or "Unknown")
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            taints=tuple(spec.get("taints") or ()),
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            allocatable=resource_list(status.get("allocatable")),
        )

    def effective_taints(self) -> tuple[Mapping[str, Any], ...]:
        """The node's taints plus the ``NoSchedule`` taint the node lifecycle controller adds to a node
        that is not Ready (``not-ready`` for ``False``, ``unreachable`` for ``Unknown``)."""
        if self.ready == "True":
            return self.taints
        key = TAINT_NOT_READY if self.ready == "False" else TAINT_UNREACHABLE
        if any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in self.taints):
            return self.taints
        return (*self.taints, {"key": key, "effect": "NoSchedule"})


def node_scheduling_view(node: Obj) -> tuple[Any, ...]:
    """The parts of a Node that can change a scheduling decision (labels, taints, cordon, Ready,
    allocatable): a node event that leaves this unchanged frees no capacity."""
    info = NodeInfo.from_node(node)
    return (
        tuple(sorted(info.labels.items())),
        tuple(tuple(sorted(t.items())) for t in info.taints),
        info.unschedulable,
        info.ready,
        tuple(sorted(info.allocatable.items())),
    )


# --- node affinity ---------------------------------------------------------------------------------


def _int64(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def node_selector_requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` entry (``NodeSelectorRequirement``) against node labels.

    ``In``/``NotIn`` compare values (``NotIn`` also matches a missing label), ``Exists``/``DoesNotExist``
    test presence, ``Gt``/``Lt`` compare the label and the single value as integers (a missing label
    or a non-integer never matches). Raises :class:`ValueError` for an unknown operator or a malformed
    ``Gt``/``Lt`` value, which makes the whole term fail, as in kube.
    """
    key = str(expr.get("key", ""))
    operator = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if len(values) != 1 or _int64(values[0]) is None:
            raise ValueError(f"{operator} needs one integer value, got {values!r}")
        bound = _int64(values[0])
        actual = _int64(labels[key]) if present else None
        if actual is None or bound is None:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    raise ValueError(f"unknown node selector operator {operator!r}")


def node_selector_term_matches(term: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
    """One ``NodeSelectorTerm``: its ``matchExpressions`` and ``matchFields`` (``metadata.name`` with
    ``In``/``NotIn``) ANDed; a term with neither matches nothing; an invalid term matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    try:
        for expr in exprs:
            if not node_selector_requirement_matches(expr, labels):
                return False
        for expr in fields:
            if expr.get("key") != "metadata.name" or expr.get("operator") not in ("In", "NotIn"):
                return False
            inside = node_name in [str(v) for v in expr.get("values") or []]
            if inside != (expr.get("operator") == "In"):
                return False
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class NodeAffinity:
    """A pod's node selector, required and preferred node-affinity terms."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: ``None``: no required node affinity (every node matches); ``()``: no term (none matches).
    required: tuple[Mapping[str, Any], ...] | None = None
    preferred: tuple[tuple[int, Mapping[str, Any]], ...] = ()

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> NodeAffinity:
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = None if required is None else tuple(required.get("nodeSelectorTerms") or ())
        preferred = tuple(
            (int(p.get("weight") or 0), p.get("preference") or {})
            for p in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        )
        return cls(
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required=terms,
            preferred=preferred,
        )

    def matches(self, node: NodeInfo) -> bool:
        """``GetRequiredNodeAffinity(pod).Match(node)``: node selector AND any required term."""
        labels = node.labels
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required is None:
            return True
        return any(node_selector_term_matches(term, labels, node.name) for term in self.required)

    def preference(self, node: NodeInfo) -> int:
        return sum(
            weight
            for weight, term in self.preferred
            if node_selector_term_matches(term, node.labels, node.name)
        )


# --- pods ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """What scheduling needs of a pod."""

    namespace: str
    name: str
    uid: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: NodeAffinity = field(default_factory=NodeAffinity)
    priority: int = 0
    created: str = ""
    #: Volcano's task (``volcano.sh/task-spec``), for gangs.
    task: str = ""

    @property
    def key(self) -> PodKey:
        return (self.namespace, self.name)

    @classmethod
    def from_pod(cls, pod: Obj, requests: Mapping[str, int] | None = None) -> PodInfo:
        meta = objects.meta(pod)
        spec = pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            requests=pod_requests(spec) if requests is None else requests,
            tolerations=tuple(spec.get("tolerations") or ()),
            affinity=NodeAffinity.from_spec(spec),
            priority=int(spec.get("priority") or 0),
            created=str(meta.get("creationTimestamp") or ""),
            task=str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""),
        )

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        return any(toleration_tolerates_taint(t, taint) for t in self.tolerations)


#: Volcano's task annotation (also read from labels, as Volcano does).
TASK_SPEC_KEY = "volcano.sh/task-spec"


# --- filtering -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStatus:
    """Why a pod does not fit one node: kube's reasons, and whether preemption could help (``False`` for
    ``UnschedulableAndUnresolvable`` plugins: cordon, taints, affinity)."""

    reasons: tuple[str, ...]
    resolvable: bool = False


def taint_reason(taint: Mapping[str, Any], details: bool) -> str:
    if details:
        return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '') or ''}}}"
    return ERR_TAINT


def insufficient(pod: PodInfo, node: NodeInfo, requested: Mapping[str, int], pods: int) -> list[str]:
    """``NodeResourcesFit``'s reasons: ``Too many pods`` then ``Insufficient <resource>`` for each requested
    resource (cpu, memory, ephemeral-storage first, then the others by name) that does not fit."""
    reasons = []
    allowed = node.allocatable.get("pods")
    if allowed is not None and pods + 1 > allowed:
        reasons.append(ERR_TOO_MANY_PODS)
    order = sorted(pod.requests, key=lambda r: (r not in ("cpu", "memory", "ephemeral-storage"), r))
    for resource in order:
        amount = pod.requests[resource]
        if amount <= 0 or resource == "pods":
            continue
        if requested.get(resource, 0) + amount > node.allocatable.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return reasons


def filter_node(
    pod: PodInfo,
    node: NodeInfo,
    requested: Mapping[str, int],
    pods: int,
    *,
    taint_details: bool = False,
) -> NodeStatus | None:
    """kube-scheduler's filters for ``pod`` on ``node`` (``requested``/``pods``: what the node already
    runs); ``None`` when the pod fits."""
    if node.unschedulable and not pod.tolerates({"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}):
        return NodeStatus((ERR_NODE_UNSCHEDULABLE,))
    for taint in node.effective_taints():
        if taint.get("effect") in _BLOCKING_EFFECTS and not pod.tolerates(taint):
            return NodeStatus((taint_reason(taint, taint_details),))
    if not pod.affinity.matches(node):
        return NodeStatus((ERR_NODE_AFFINITY,))
    reasons = insufficient(pod, node, requested, pods)
    if reasons:
        return NodeStatus(tuple(reasons), resolvable=True)
    return None


def _histogram(reasons: Iterable[str]) -> str:
    counts = Counter(reasons)
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def fit_error_message(total_nodes: int, statuses: Sequence[NodeStatus]) -> str:
    """kube-scheduler's ``FitError.Error()`` after ``DefaultPreemption`` found nothing to preempt.

    ``0/N nodes are available: <reason histogram>. preemption: 0/N nodes are available: <histogram>.``
    Histograms are "count reason" sorted as strings (Go's ``sort.Strings``); preemption reports
    ``Preemption is not helpful for scheduling`` for nodes rejected by an unresolvable filter and
    ``No preemption victims found for incoming pod`` for the others (the sim has no lower-priority
    victims to offer). No nodes at all: ``no nodes available to schedule pods``.
    """
    if total_nodes == 0:
        return ERR_NO_NODES
    message = f"0/{total_nodes} nodes are available: {_histogram(r for s in statuses for r in s.reasons)}."
    preemption = _histogram(
        NO_PREEMPTION_VICTIMS if s.resolvable else PREEMPTION_NOT_HELPFUL for s in statuses
    )
    return f"{message} preemption: 0/{total_nodes} nodes are available: {preemption}."


# --- choosing and placing --------------------------------------------------------------------------


class Ledger:
    """Requests and pod counts per node: a base (what is bound) plus tentative placements on top.

    The base mappings are read, never written; :meth:`add` records a tentative placement (the gang
    scheduler's "allocate before commit").
    """

    def __init__(
        self,
        requested: Mapping[str, Mapping[str, int]] | None = None,
        pods: Mapping[str, int] | None = None,
    ) -> None:
        self._base = requested or {}
        self._base_pods = pods or {}
        self._extra: dict[str, ResourceList] = {}
        self._extra_pods: Counter[str] = Counter()

    def requested(self, node: str) -> Mapping[str, int]:
        base = self._base.get(node) or {}
        extra = self._extra.get(node)
        if not extra:
            return base
        merged = dict(base)
        _add_into(merged, extra)
        return merged

    def pods(self, node: str) -> int:
        return self._base_pods.get(node, 0) + self._extra_pods[node]

    def add(self, node: str, requests: Mapping[str, int]) -> None:
        _add_into(self._extra.setdefault(node, {}), requests)
        self._extra_pods[node] += 1


def least_allocated(pod: PodInfo, node: NodeInfo, requested: Mapping[str, int]) -> float:
    """Mean free fraction (0 to 1) after placing ``pod``, over cpu, memory and the pod's other resources."""
    resources = {"cpu", "memory"} | {r for r in pod.requests if r not in ("pods", "ephemeral-storage")}
    fractions = []
    for resource in sorted(resources):
        allocatable = node.allocatable.get(resource, 0)
        if allocatable <= 0:
            continue
        used = requested.get(resource, 0) + pod.requests.get(resource, 0)
        fractions.append(max(allocatable - used, 0) / allocatable)
    return sum(fractions) / len(fractions) if fractions else 0.0


def score_key(pod: PodInfo, node: NodeInfo, requested: Mapping[str, int]) -> tuple[int, int, float, str]:
    """Sort key among fitting nodes (smallest first): untolerated ``PreferNoSchedule`` taints, minus the
    preferred node-affinity weight, minus :func:`least_allocated`, the node name."""
    soft = sum(1 for t in node.taints if t.get("effect") == "PreferNoSchedule" and not pod.tolerates(t))
    return (soft, -pod.affinity.preference(node), -least_allocated(pod, node, requested), node.name)


def find_node(
    pod: PodInfo,
    nodes: Iterable[NodeInfo],
    ledger: Ledger,
    *,
    filter_fn: Callable[..., NodeStatus | None] = filter_node,
    taint_details: bool = False,
) -> tuple[str | None, list[NodeStatus]]:
    """The best node for ``pod`` (``None`` if none fits) and the statuses of the nodes that do not fit."""
    best: tuple[tuple[int, int, float, str], str] | None = None
    failed: list[NodeStatus] = []
    for node in nodes:
        requested = ledger.requested(node.name)
        status = filter_fn(pod, node, requested, ledger.pods(node.name), taint_details=taint_details)
        if status is not None:
            failed.append(status)
            continue
        key = score_key(pod, node, requested)
        if best is None or key < best[0]:
            best = (key, node.name)
    return (best[1] if best else None), failed


def scheduling_order(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """kube's active-queue order (``PrioritySort``): higher priority first, then older, then by name."""
    return sorted(pods, key=lambda p: (-p.priority, p.created, p.namespace, p.name))


# --- the cluster state both schedulers read ----------------------------------------------------------


def pod_counts_on_node(pod: Obj | None) -> str | None:
    """The node whose capacity ``pod`` uses: its ``spec.nodeName`` unless it is Succeeded or Failed."""
    if pod is None or pod_terminal(pod):
        return None
    node = objects.spec(pod).get("nodeName")
    return str(node) if node else None


class SchedulerCache(StoreIndex):
    """Nodes and the requests bound to each, kept current from store events (kube-scheduler's cache).

    Shared by :class:`Scheduler` and the gang scheduler. Unlike :class:`~aiplane.sim.agents.PodIndex` it
    counts only the pods that use capacity (:func:`pod_counts_on_node`), with their requests, parsed
    once per pod uid (a pod's resources cannot change).
    """

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.nodes: dict[str, NodeInfo] = {}
        self.requested: dict[str, ResourceList] = defaultdict(dict)
        self.pod_counts: Counter[str] = Counter()
        self._bound: dict[PodKey, tuple[str, ResourceList]] = {}
        self._requests: dict[str, ResourceList] = {}

    def _load(self) -> None:
        for node in self.store.items(NODES):
            self._set_node(node)
        for pod in self.store.items(PODS):
            self._update_pod(pod, removed=False)

    def _clear(self) -> None:
        self.nodes.clear()
        self.requested.clear()
        self.pod_counts.clear()
        self._bound.clear()
        self._requests.clear()

    def _on_event(self, event: Event) -> None:
        if event.key == NODES:
            if event.type == DELETED:
                self.nodes.pop(objects.name(event.obj), None)
            else:
                self._set_node(event.obj)
        elif event.key == PODS:
            self._update_pod(event.obj, removed=event.type == DELETED)

    def _set_node(self, node: Obj) -> None:
        info = NodeInfo.from_node(node)
        self.nodes[info.name] = info

    def requests_of(self, pod: Obj) -> ResourceList:
        uid = objects.uid(pod)
        cached = self._requests.get(uid) if uid else None
        if cached is None:
            cached = pod_requests(objects.spec(pod))
            if uid:
                self._requests[uid] = cached
        return cached

    def _update_pod(self, pod: Obj, *, removed: bool) -> None:
        meta = objects.meta(pod)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        previous = self._bound.pop(key, None)
        if previous is not None:
            node, requests = previous
            used = self.requested[node]
            for name, value in requests.items():
                left = used.get(name, 0) - value
                if left:
                    used[name] = left
                else:
                    used.pop(name, None)
            self.pod_counts[node] -= 1
            if self.pod_counts[node] <= 0:
                del self.pod_counts[node]
            if not used:
                del self.requested[node]
        if removed:
            self._requests.pop(str(meta.get("uid", "")), None)
            return
        node_name = pod_counts_on_node(pod)
        if node_name:
            requests = self.requests_of(pod)
            self._bound[key] = (node_name, requests)
            _add_into(self.requested[node_name], requests)
            self.pod_counts[node_name] += 1

    def ledger(self) -> Ledger:
        """A ledger over the current bound requests (tentative additions do not touch the cache)."""
        return Ledger(self.requested, self.pod_counts)

    def pod_info(self, pod: Obj) -> PodInfo:
        return PodInfo.from_pod(pod, self.requests_of(pod))


def capacity_node(event: Event) -> str | None:
    """The node on which a store event may let a pending pod fit (kube's queueing hints, narrowed to one
    node): a node added, or changed in a way scheduling sees (labels, taints, cordon, Ready,
    allocatable); the node of a bound pod that was deleted or finished. ``None`` for anything else."""
    if event.key == NODES:
        if event.type == DELETED:
            return None
        if (
            event.type == ADDED
            or event.old is None
            or node_scheduling_view(event.old) != node_scheduling_view(event.obj)
        ):
            return objects.name(event.obj)
        return None
    if event.key == PODS:
        before = pod_counts_on_node(event.obj if event.type == DELETED else event.old)
        if before and (event.type == DELETED or pod_counts_on_node(event.obj) is None):
            return before
    return None


def fits_on_any(pod: PodInfo, names: Iterable[str], nodes: Mapping[str, NodeInfo], ledger: Ledger) -> bool:
    """Whether ``pod`` passes the filters on one of the nodes ``names`` (those that still exist)."""
    for name in names:
        node = nodes.get(name)
        if node is not None and filter_node(pod, node, ledger.requested(name), ledger.pods(name)) is None:
            return True
    return False


# --- conditions --------------------------------------------------------------------------------------


def with_pod_scheduled_false(
    status: Mapping[str, Any], reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """``status`` with ``PodScheduled=False`` (``reason``, ``message``), or ``None`` if it already says so
    (``lastTransitionTime`` moves only when the status flips, as ``UpdatePodCondition`` does)."""
    conditions = status.get("conditions") or []
    current: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if (
        current.get("status") == "False"
        and current.get("reason") == reason
        and current.get("message") == message
    ):
        return None
    wanted = {
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    return {**status, "conditions": upsert_condition(conditions, wanted)}


def binding_for(pod: Obj, node: str) -> Obj:
    meta = objects.meta(pod)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


class PendingPodReporter:
    """Writes ``PodScheduled=False`` and ``FailedScheduling`` events for one scheduler, only on change."""

    def __init__(self, api: Api, *, component: str, field_manager: str) -> None:
        self.api = api
        self.component = component
        self.field_manager = field_manager
        self.pod_rt: ResourceType = api.resource("v1", "Pod")
        self._reported: dict[str, str] = {}  # pod uid -> last message with an event

    def forget(self, uid: str) -> None:
        self._reported.pop(uid, None)

    def report(self, pod: Obj, reason: str, message: str, *, event: bool = True) -> bool:
        """Set the condition (when it differs) and send a ``FailedScheduling`` event (when the message
        differs from the last one sent). False when the pod changed meanwhile (retry later)."""
        meta = objects.meta(pod)
        uid = str(meta.get("uid", ""))
        status = with_pod_scheduled_false(pod.get("status") or {}, reason, message, rfc3339(self.api.clock()))
        written = pod
        if status is not None:
            try:
                written = write_status(self.api, self.pod_rt, pod, status, self.field_manager)
            except ApiError as err:
                if err.code in (404, 409):
                    return False
                raise
        if event and self._reported.get(uid) != message:
            self._reported[uid] = message
            record_event(self.api, written, "Warning", "FailedScheduling", message, component=self.component)
        return True


# --- the agent -----------------------------------------------------------------------------------------


def is_pending(pod: Obj) -> bool:
    """Unbound, not being deleted, not finished: a pod a scheduler may still place."""
    return not objects.spec(pod).get("nodeName") and not objects.is_deleting(pod) and not pod_terminal(pod)


class SchedulingLoop(AgentLoop):
    """What both schedulers share: the :class:`SchedulerCache`, a :class:`PendingPodReporter`, the
    periodic retry (``("retry",)`` work every ``retry_interval`` seconds while something waits), the
    nodes whose capacity changed (``("nodes",)`` work) and binding a pod with its ``Scheduled`` event."""

    #: Event source and field manager of the scheduler's writes.
    component = COMPONENT
    field_manager = FIELD_MANAGER

    def __init__(
        self, api: Api, cache: SchedulerCache, *, retry_interval: float | None, taint_details: bool
    ) -> None:
        super().__init__(api)
        self.cache = cache
        #: Seconds between full retries of what waits for capacity (which also refreshes its messages);
        #: ``None``/0: only events retry it.
        self.retry_interval: float | None = retry_interval
        #: Name the untolerated taint in messages (``{key: value}``).
        self.taint_details = taint_details
        self.reporter = PendingPodReporter(api, component=self.component, field_manager=self.field_manager)
        self._changed_nodes: set[str] = set()
        self._periodic: asyncio.TimerHandle | None = None

    def _note_capacity(self, event: Event) -> None:
        """Queue ``("nodes",)`` work if ``event`` may let a waiting pod fit (:func:`capacity_node`)."""
        node = capacity_node(event)
        if node:
            self._changed_nodes.add(node)
            self.enqueue(("nodes",))

    def _schedule_periodic_retry(self) -> None:
        if self._periodic is None and self.retry_interval and self.running:
            self._periodic = self.later(self.retry_interval, ("retry",))

    def retry_now(self) -> None:
        """Try everything that waits again now (what the periodic retry does)."""
        self.cancel(self._periodic)
        self._periodic = None
        self.enqueue(("retry",))

    def _bind(self, pod: Obj, node: str) -> bool:
        """Bind ``pod`` to ``node`` (``pods/binding``) with a ``Scheduled`` event; ``False`` if the pod was
        deleted or changed meanwhile (its own event brings it back if still pending)."""
        meta = objects.meta(pod)
        namespace, name = str(meta["namespace"]), str(meta["name"])
        try:
            self.api.bind(
                namespace, name, binding_for(pod, node), WriteOptions(field_manager=self.field_manager)
            )
        except ApiError as err:
            if err.code in (404, 409):
                return False
            raise
        self.reporter.forget(str(meta.get("uid", "")))
        record_event(
            self.api,
            self.store.get(PODS, namespace, name) or pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {node}",
            component=self.component,
        )
        return True


class Scheduler(SchedulingLoop):
    """kube-scheduler-lite for pods whose ``schedulerName`` is empty or ``default-scheduler``."""

    name = "scheduler"

    def __init__(
        self,
        api: Api,
        cache: SchedulerCache,
        *,
        retry_interval: float | None = 30.0,
        taint_details: bool = False,
    ) -> None:
        # taint_details: kube-scheduler before 1.34.2 named the taint.
        super().__init__(api, cache, retry_interval=retry_interval, taint_details=taint_details)
        self._pending: dict[PodKey, None] = {}
        #: The pods found unschedulable, as last tried (the queueing hints check them node by node).
        self._unschedulable: dict[PodKey, PodInfo] = {}

    @staticmethod
    def responsible_for(pod: Obj) -> bool:
        return objects.spec(pod).get("schedulerName") in (None, "", DEFAULT_SCHEDULER)

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for pod in self.store.items(PODS):
            if self.responsible_for(pod) and is_pending(pod):
                meta = objects.meta(pod)
                key = (str(meta["namespace"]), str(meta["name"]))
                self._pending[key] = None
                self.enqueue(("pod", *key))

    def on_event(self, event: Event) -> None:
        if event.key == PODS:
            pod = event.obj
            meta = objects.meta(pod)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event.type == DELETED or not self.responsible_for(pod) or not is_pending(pod):
                self._forget(key)
                if event.type == DELETED:
                    self.reporter.forget(str(meta.get("uid", "")))
            else:
                old_spec = (event.old or {}).get("spec")
                if key not in self._pending or event.type == ADDED or old_spec != pod.get("spec"):
                    self._pending[key] = None
                    self.enqueue(("pod", *key))
        if self._unschedulable:
            self._note_capacity(event)

    def _forget(self, key: PodKey) -> None:
        self._pending.pop(key, None)
        self._unschedulable.pop(key, None)

    # --- work -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        if work[0] == "pod":
            self._schedule(work[1], work[2])
        elif work[0] == "nodes":
            # Retry the unschedulable pods that now pass the filters on a node that changed.
            changed, self._changed_nodes = self._changed_nodes, set()
            ledger = self.cache.ledger()
            hopeful = [
                info
                for info in self._unschedulable.values()
                if fits_on_any(info, changed, self.cache.nodes, ledger)
            ]
            for info in scheduling_order(hopeful):
                self.enqueue(("pod", *info.key))
        elif work[0] == "retry":
            self._periodic = None
            pods = [self.store.get(PODS, ns, name) for ns, name in self._pending]
            for info in scheduling_order(self.cache.pod_info(p) for p in pods if p is not None):
                self.enqueue(("pod", *info.key))

    def _schedule(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        pod = self.store.get(PODS, namespace, name)
        if pod is None or not self.responsible_for(pod) or not is_pending(pod):
            self._forget(key)
            return
        self._pending[key] = None
        if objects.spec(pod).get("schedulingGates"):
            self._unschedulable.pop(key, None)
            self.reporter.report(pod, "SchedulingGated", SCHEDULING_GATED_MESSAGE, event=False)
            return
        info = self.cache.pod_info(pod)
        nodes = list(self.cache.nodes.values())
        node, failed = find_node(info, nodes, self.cache.ledger(), taint_details=self.taint_details)
        if node is None:
            self._unschedulable[key] = info
            if not self.reporter.report(pod, "Unschedulable", fit_error_message(len(nodes), failed)):
                self.later(0.05, ("pod", namespace, name))
            self._schedule_periodic_retry()
            return
        if self._bind(pod, node):
            self._forget(key)

    @property
    def pending(self) -> list[PodKey]:
        """The pods waiting for this scheduler (unschedulable or not tried yet)."""
        return list(self._pending)


__all__ = [
    "DEFAULT_SCHEDULER",
    "Ledger",
    "NodeAffinity",
    "NodeInfo",
    "NodeStatus",
    "PodInfo",
    "Scheduler",
    "SchedulerCache",
    "SchedulingLoop",
    "capacity_node",
    "container_requests",
    "filter_node",
    "find_node",
    "fit_error_message",
    "fits_on_any",
    "node_selector_requirement_matches",
    "node_selector_term_matches",
    "pod_requests",
    "score_key",
    "with_pod_scheduled_false",
]

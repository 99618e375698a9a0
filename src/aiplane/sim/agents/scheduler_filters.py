"""kube-scheduler's filters and scores on plain data: what a pod asks for, what a node offers,
whether it fits and how well.

Both simulated schedulers (:mod:`aiplane.sim.agents.scheduler`, the default one, and the Volcano
gang scheduler) place pods with these, and their fit-error messages are kube-scheduler's, because
controllers and users read them. Nothing here touches the store: the node and pod views
(:class:`NodeInfo`, :class:`PodInfo`) and the running :class:`Ledger` of requests are built by the
agents.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import Obj
from aiplane.sim.agents.daemonsets import toleration_tolerates_taint

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


def add_into(total: ResourceList, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def pod_requests(spec: Mapping[str, Any]) -> ResourceList:
    """``resourcehelper.PodRequests``: per resource the larger of the containers' sum and the largest init
    container (restartable "sidecar" init containers add to what runs beside the containers), plus
    ``spec.overhead``."""
    total: ResourceList = {}
    for container in spec.get("containers") or []:
        add_into(total, container_requests(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_into(sidecars, requests)
            current = dict(sidecars)
        else:
            current = dict(sidecars)
            add_into(current, requests)
        for name, value in current.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    add_into(total, sidecars)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    add_into(total, resource_list(spec.get("overhead")))
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
        add_into(merged, extra)
        return merged

    def pods(self, node: str) -> int:
        return self._base_pods.get(node, 0) + self._extra_pods[node]

    def add(self, node: str, requests: Mapping[str, int]) -> None:
        add_into(self._extra.setdefault(node, {}), requests)
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


def fits_on_any(pod: PodInfo, names: Iterable[str], nodes: Mapping[str, NodeInfo], ledger: Ledger) -> bool:
    """Whether ``pod`` passes the filters on one of the nodes ``names`` (those that still exist)."""
    for name in names:
        node = nodes.get(name)
        if node is not None and filter_node(pod, node, ledger.requested(name), ledger.pods(name)) is None:
            return True
    return False


__all__ = [
    "Ledger",
    "NodeAffinity",
    "NodeInfo",
    "NodeStatus",
    "PodInfo",
    "container_requests",
    "filter_node",
    "find_node",
    "fit_error_message",
    "fits_on_any",
    "node_selector_requirement_matches",
    "node_selector_term_matches",
    "pod_requests",
    "score_key",
]


# --- VolumeBinding's PreFilter -----------------------------------------------------------------------

ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
#: The annotation through which the scheduler tells a provisioner the node of a delayed claim's pod.
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def pod_claim_names(pod: Obj) -> list[str]:
    """The claims a pod mounts: its ``persistentVolumeClaim`` volumes and the claims of its generic
    ephemeral volumes (``<pod>-<volume>``)."""
    names = []
    for volume in objects.spec(pod).get("volumes") or []:
        if volume.get("persistentVolumeClaim"):
            names.append(str(volume["persistentVolumeClaim"].get("claimName") or ""))
        elif volume.get("ephemeral"):
            names.append(f"{objects.name(pod)}-{volume.get('name')}")
    return names


def volume_prefilter(
    pod: Obj, claim: Callable[[str], Obj | None], binding_mode: Callable[[str], str | None]
) -> tuple[str | None, list[Obj]]:
    """VolumeBinding's PreFilter: why the pod cannot be scheduled on any node (a missing or deleted
    claim, an unbound claim of an ``Immediate`` class), or ``None`` and the unbound claims that wait
    for this pod's node (``WaitForFirstConsumer``)."""
    delayed = []
    unbound_immediate = False
    for name in pod_claim_names(pod):
        found = claim(name)
        if found is None:
            return f'persistentvolumeclaim "{name}" not found', []
        if objects.is_deleting(found):
            return f'persistentvolumeclaim "{name}" is being deleted', []
        if objects.spec(found).get("volumeName"):
            continue
        class_name = str(objects.spec(found).get("storageClassName") or "")
        if class_name and binding_mode(class_name) == "WaitForFirstConsumer":
            delayed.append(found)
        else:
            unbound_immediate = True
    return (ERR_UNBOUND_IMMEDIATE if unbound_immediate else None), delayed


def prefilter_message(total_nodes: int, reason: str) -> str:
    """``FitError.Error()`` for a PreFilter rejection (UnschedulableAndUnresolvable on every node)."""
    if total_nodes == 0:
        return ERR_NO_NODES
    return (
        f"0/{total_nodes} nodes are available: {reason}. preemption: 0/{total_nodes} nodes are available: "
        f"{total_nodes} {PREEMPTION_NOT_HELPFUL}."
    )

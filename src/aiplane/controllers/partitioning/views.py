"""From cached API objects to the typed views the partitioning decisions read (pure).

Why a separate step: the decision modules reason about phases, hashes, marks and quantities, not
about where a field lives or whether a client stored a list where a map belongs. Every object is
read here once; a malformed field becomes its empty value (``""``, ``None``, ``False``, ``()``), the
same reading the decisions made of it before, so nothing downstream tests ``isinstance`` again.

The views are for reading. Where a decision produces something to write (a NodePartitioning to
apply, a Node update, a status), it still produces the plain dict the API server takes; the views
that a writer needs to start from (a NodePartitioning to patch, a Node to update) keep the object
they were read from as ``obj``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition
from aiplane.apimachinery.meta import controller_of, deep_get, owner_references_of
from aiplane.apimachinery.quantity import Quantity
from aiplane.apimachinery.selectors import Selector, compile_selector
from aiplane.controllers.partitioning.hashing import desired_hash
from aiplane.controllers.partitioning.vocabulary import (
    ADMITTED_ANNOTATION,
    CONTROL_PLANE_LABELS,
    MIRROR_ANNOTATION,
    PENDING,
    PLAN_LABEL,
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
)

__all__ = [
    "Amount",
    "BlockedEviction",
    "DcmEventView",
    "NodePartitioningView",
    "NodeView",
    "PlanView",
    "PodView",
    "ProfileView",
    "ReadyCondition",
    "RolloutLimits",
    "RuleSpec",
    "carries_dcm_taint",
    "dcm_event_for_cache",
    "dcm_event_view",
    "dcm_event_views",
    "is_dcm_taint",
    "node_partitioning_view",
    "node_partitioning_views",
    "node_view",
    "node_views",
    "plan_view",
    "pod_for_drain",
    "pod_has_dcm_toleration",
    "pod_tolerates_dcm_taint",
    "pod_view",
    "pod_views",
    "profile_view",
    "profile_views",
]

Obj = Mapping[str, Any]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _positive_generation(obj: Obj) -> int | None:
    """``metadata.generation`` when it is a real one (the API server starts at 1)."""
    gen = objects.generation(obj)
    return gen if gen is not None and gen > 0 else None


def _conditions(section: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    raw = section.get("conditions")
    return tuple(c for c in raw if isinstance(c, Mapping)) if isinstance(raw, list) else ()


# --- PartitioningPlan ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RolloutLimits:
    """``spec.rollout`` with the CRD defaults applied (also when ``rollout`` is omitted)."""

    max_parallel: int = 1
    max_unavailable: int = 1
    exclude_control_plane: bool = True


def _non_negative_int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(value, 0)


def _rollout_limits(spec: Mapping[str, Any]) -> RolloutLimits:
    """Defaults are the CRD's (1, 1, exclude control plane). Upstream excluded control-plane nodes only
    when ``rollout`` was present with ``maxParallel`` set; here only an explicit
    ``excludeControlPlane: false`` includes them. A value the CRD would reject (``maxParallel: 0``) is
    taken literally — admit nothing — rather than "fixed", because a limit must never be loosened."""
    rollout = spec.get("rollout")
    if not isinstance(rollout, Mapping):
        return RolloutLimits()
    return RolloutLimits(
        max_parallel=_non_negative_int(rollout.get("maxParallel"), 1),
        max_unavailable=_non_negative_int(rollout.get("maxUnavailable"), 1),
        exclude_control_plane=rollout.get("excludeControlPlane") is not False,
    )


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One ``spec.rules[i]`` as written: its selector compiled, or why it does not compile."""

    index: int
    description: str  # as written, stripped ("" when absent)
    profile_name: str
    selector: Selector | None
    selector_error: str | None = None


def _rule_spec(index: int, raw: Any) -> RuleSpec:
    rule: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    try:
        selector, error = compile_selector(rule.get("selector")), None
    except ValueError as exc:
        selector, error = None, str(exc)
    return RuleSpec(
        index=index,
        description=_str(rule.get("description")).strip(),
        profile_name=_str(deep_get(rule, "profileRef.name")),
        selector=selector,
        selector_error=error,
    )


@dataclass(frozen=True)
class PlanView:
    """A PartitioningPlan as the plan decisions read it; ``obj`` is kept for the owner reference."""

    name: str
    uid: str | None
    generation: int | None
    paused: bool
    dry_run: bool
    limits: RolloutLimits
    rules: tuple[RuleSpec, ...]
    status: Mapping[str, Any]
    obj: Obj


def plan_view(plan: Obj) -> PlanView:
    spec = objects.spec(plan)
    rules = spec.get("rules")
    return PlanView(
        name=objects.name(plan),
        uid=objects.uid(plan) or None,
        generation=_positive_generation(plan),
        paused=spec.get("paused") is True,
        dry_run=spec.get("dryRun") is True,
        limits=_rollout_limits(spec),
        rules=tuple(_rule_spec(i, r) for i, r in enumerate(rules if isinstance(rules, list) else [])),
        status=objects.status(plan),
        obj=plan,
    )


# --- PartitioningProfile -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadyCondition:
    """The profile controller's ``Ready`` condition, and the generation it vouches for."""

    true: bool
    reason: str
    message: str
    observed_generation: int | None  # the condition's, else status.observedGeneration


def _ready_condition(status: Mapping[str, Any]) -> ReadyCondition | None:
    conditions = status.get("conditions")
    ready = get_condition(conditions if isinstance(conditions, list) else None, "Ready")
    if ready is None:
        return None
    observed = ready.get("observedGeneration")
    if not isinstance(observed, int):
        observed = status.get("observedGeneration")
    return ReadyCondition(
        true=ready.get("status") == "True",
        reason=_str(ready.get("reason")),
        message=_str(ready.get("message")),
        observed_generation=observed if isinstance(observed, int) else None,
    )


@dataclass(frozen=True)
class ProfileView:
    """A PartitioningProfile, read once for both controllers.

    The plan needs the hash, the guard rail and the Ready condition; the node state machine needs
    the DCM profile name and the expected resources as quantities. ``unusable`` says (in the node
    controller's words) why the node side cannot work with it; ``hash_error`` why no hash exists.
    """

    name: str
    deleting: bool
    generation: int | None
    desired_hash: str | None
    hash_error: str | None
    target_selector: Selector | None  # None: no guard rail (or an invalid one, see the error)
    target_selector_error: str | None
    ready: ReadyCondition | None
    dcm: str
    expected: tuple[tuple[str, Quantity, str], ...]  # (resource, value, spelling from the profile)
    unusable: str | None

    @property
    def guard(self) -> Selector:
        """The targetSelector a node must match; everything when the profile sets none."""
        return self.target_selector if self.target_selector is not None else Selector.everything()


def _expected_resources(raw: Mapping[str, Any]) -> tuple[tuple[str, Quantity, str], ...] | str:
    expected: list[tuple[str, Quantity, str]] = []
    for resource in sorted(raw):
        value = raw[resource]
        try:
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
            expected.append((str(resource), Quantity(value), str(value)))
        except (ValueError, OverflowError) as exc:
            return f"spec.expectedResources[{resource}]: {exc}"
    return tuple(expected)


def _usable(
    profile: Obj, selector_error: str | None
) -> tuple[str, tuple[tuple[str, Quantity, str], ...], str | None]:
    """``(dcm, expected, why not usable)``, checked in the order the node controller reports them."""
    name = str(deep_get(profile, "metadata.name") or "")
    spec = profile.get("spec")
    if not isinstance(spec, Mapping):
        return "", (), f"profile {name} has no spec"
    dcm = spec.get("dcmProfileName")
    if not isinstance(dcm, str) or not dcm:
        return "", (), f"profile {name}: spec.dcmProfileName: Required value"
    raw = spec.get("expectedResources") or {}
    if not isinstance(raw, Mapping):
        return dcm, (), f"profile {name}: spec.expectedResources: must be a map of quantities"
    expected = _expected_resources(raw)
    if isinstance(expected, str):
        return dcm, (), f"profile {name}: {expected}"
    if selector_error is not None:
        return dcm, expected, f"profile {name}: spec.targetSelector: {selector_error}"
    return dcm, expected, None


def profile_view(profile: Obj) -> ProfileView:
    spec = objects.spec(profile)
    try:
        hash_, hash_error = desired_hash(spec), None
    except ValueError as exc:
        hash_, hash_error = None, str(exc)
    target: Selector | None = None
    target_error: str | None = None
    if spec.get("targetSelector") is not None:
        try:
            target = compile_selector(spec["targetSelector"])
        except ValueError as exc:
            target_error = str(exc)
    dcm, expected, unusable = _usable(profile, target_error)
    return ProfileView(
        name=objects.name(profile),
        deleting=objects.is_deleting(profile),
        generation=_positive_generation(profile),
        desired_hash=hash_,
        hash_error=hash_error,
        target_selector=target,
        target_selector_error=target_error,
        ready=_ready_condition(objects.status(profile)),
        dcm=dcm,
        expected=expected,
        unusable=unusable,
    )


def profile_views(profiles: Iterable[Obj]) -> dict[str, ProfileView]:
    """Views by ``metadata.name`` (how rules and NodePartitionings reference profiles)."""
    return {objects.name(p): profile_view(p) for p in profiles}


# --- Node ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Amount:
    """One ``status.allocatable`` entry: its spelling, and its value when it is a quantity."""

    text: str | None  # None: the entry is null
    quantity: Quantity | None


def _amount(value: Any) -> Amount:
    if value is None:
        return Amount(None, None)
    try:
        ok = not isinstance(value, bool) and isinstance(value, str | int | float)
        quantity = Quantity(value) if ok else None
    except (ValueError, OverflowError):
        quantity = None
    return Amount(f"{value}", quantity)


def is_dcm_taint(taint: Mapping[str, Any]) -> bool:
    """Upstream's idempotency key: key + effect (any value)."""
    return taint.get("key") == TAINT_KEY and taint.get("effect") == TAINT_EFFECT


def carries_dcm_taint(node: Obj) -> bool:
    """Does the Node carry ``amd-dcm=…:NoExecute`` (whoever put it there)?"""
    taints = deep_get(node, "spec.taints")
    return isinstance(taints, list) and any(isinstance(t, Mapping) and is_dcm_taint(t) for t in taints)


@dataclass(frozen=True)
class NodeView:
    """A Node as both controllers read it; ``obj`` is what the node update starts from."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    has_dcm_taint: bool  # an ``amd-dcm:NoExecute`` taint, whoever put it there
    allocatable: Mapping[str, Amount]
    obj: Obj

    @property
    def control_plane(self) -> bool:
        """Label *presence* of ``node-role.kubernetes.io/control-plane`` or ``/master`` (any value)."""
        return any(key in self.labels for key in CONTROL_PLANE_LABELS)


def node_view(node: Obj, *, allocatable: Mapping[str, Amount] | None = None) -> NodeView:
    """``allocatable``: the parsed ``status.allocatable`` when known already (a copy of a Node whose
    status did not change: the state machine's work copy after each of its actions)."""
    if allocatable is not None:
        return NodeView(
            name=objects.name(node),
            labels=objects.labels(node),
            annotations=objects.annotations(node),
            unschedulable=deep_get(node, "spec.unschedulable") is True,
            has_dcm_taint=carries_dcm_taint(node),
            allocatable=allocatable,
            obj=node,
        )
    allocatable = deep_get(node, "status.allocatable")
    return NodeView(
        name=objects.name(node),
        labels=objects.labels(node),
        annotations=objects.annotations(node),
        unschedulable=deep_get(node, "spec.unschedulable") is True,
        has_dcm_taint=carries_dcm_taint(node),
        allocatable={str(k): _amount(v) for k, v in allocatable.items()}
        if isinstance(allocatable, Mapping)
        else {},
        obj=node,
    )


def node_views(nodes: Iterable[Obj]) -> list[NodeView]:
    return [node_view(n) for n in nodes]


# --- NodePartitioning ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePartitioningView:
    """A NodePartitioning as the plan and the node state machine read it; ``obj`` is what writers
    (admission patches, finalizer patches, status replaces, deletes) start from."""

    name: str
    uid: str
    resource_version: str
    generation: int | None
    deleting: bool
    finalizers: tuple[str, ...]
    plan_label: Any
    admitted_hash: str
    has_controller: bool
    controller_uid: Any
    node_name: str
    desired_hash: str
    profile_name: str
    plan_name: str
    plan_uid: Any  # spec.planRef.uid as written (compared, never trusted to be a string)
    dry_run: bool
    phase: str  # status.phase as written ("" when absent); see np_phase for the counted one
    current_hash: str
    spec_changed: bool  # status.observedGeneration is set and differs from metadata.generation
    retries: int | None
    last_error: str
    conditions: tuple[Mapping[str, Any], ...]
    status: Mapping[str, Any]
    obj: Obj

    @property
    def admitted(self) -> bool:
        """Admitted by the plan for its *current* ``spec.desiredHash`` (see ``admission``)."""
        return bool(self.desired_hash) and self.admitted_hash == self.desired_hash

    @property
    def counted_phase(self) -> str:
        """The phase, with the empty/absent one read as ``Pending`` (as upstream counts it)."""
        return self.phase or PENDING


def _retries(status: Mapping[str, Any]) -> int | None:
    value = status.get("retries", status.get("attempts"))
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def node_partitioning_view(np: Obj) -> NodePartitioningView:
    spec, status = objects.spec(np), objects.status(np)
    generation = objects.generation(np)
    observed = status.get("observedGeneration")
    owner = controller_of(np)
    finalizers = objects.meta(np).get("finalizers")
    return NodePartitioningView(
        name=objects.name(np),
        uid=objects.uid(np),
        resource_version=objects.resource_version(np),
        generation=generation,
        deleting=objects.is_deleting(np),
        finalizers=tuple(f for f in finalizers if isinstance(f, str)) if isinstance(finalizers, list) else (),
        plan_label=objects.labels(np).get(PLAN_LABEL),
        admitted_hash=_str(objects.annotations(np).get(ADMITTED_ANNOTATION)),
        has_controller=owner is not None,
        controller_uid=owner.get("uid") if owner is not None else None,
        node_name=_str(spec.get("nodeName")),
        desired_hash=_str(spec.get("desiredHash")),
        profile_name=_str(deep_get(spec, "profileRef.name")),
        plan_name=_str(deep_get(spec, "planRef.name")),
        plan_uid=deep_get(spec, "planRef.uid"),
        dry_run=spec.get("dryRun") is True,
        phase=_str(status.get("phase")),
        current_hash=_str(status.get("currentHash")),
        spec_changed=observed is not None and generation is not None and observed != generation,
        retries=_retries(status),
        last_error=_str(status.get("lastError")),
        conditions=_conditions(status),
        status=status,
        obj=np,
    )


def node_partitioning_views(nps: Iterable[Obj]) -> list[NodePartitioningView]:
    return [node_partitioning_view(np) for np in nps]


# --- Pod (for the drain) -------------------------------------------------------------------------


def pod_tolerates_dcm_taint(pod: Obj) -> bool:
    """Does the pod tolerate ``amd-dcm=up:NoExecute`` indefinitely?

    A toleration matches when its effect is empty or NoExecute and either its key is empty with
    operator Exists (tolerates everything), or its key is ``amd-dcm`` with Exists or Equal ``up``
    (Equal is the default operator). One with ``tolerationSeconds`` only delays the taint manager's
    eviction, so it does not count: we evict that pod ourselves, politely.
    """
    return _tolerates(pod, timed=False)


def pod_has_dcm_toleration(pod: Obj) -> bool:
    """Does any toleration of the pod match ``amd-dcm=up:NoExecute``, ``tolerationSeconds`` or not?

    What kube's DaemonSet controller asks (``NodeShouldRunDaemonPod``: a daemon pod keeps running
    while it tolerates every NoExecute taint, a timed toleration included)."""
    return _tolerates(pod, timed=True)


def _tolerates(pod: Obj, *, timed: bool) -> bool:
    tolerations = deep_get(pod, "spec.tolerations") or []
    for t in tolerations:
        if not isinstance(t, Mapping) or (not timed and t.get("tolerationSeconds") is not None):
            continue
        if (t.get("effect") or "") not in ("", TAINT_EFFECT):
            continue
        key = t.get("key") or ""
        operator = t.get("operator") or "Equal"
        if key == "" and operator == "Exists":
            return True
        if key == TAINT_KEY and (
            operator == "Exists" or (operator == "Equal" and t.get("value") == TAINT_VALUE)
        ):
            return True
    return False


@dataclass(frozen=True, slots=True)
class PodView:
    """What the drain needs of a Pod."""

    namespace: str
    name: str
    uid: str | None
    node_name: Any  # spec.nodeName as written
    daemonset: bool  # owned by a DaemonSet: tolerates a cordon, so only the NoExecute taint moves it
    mirror: bool  # a static pod's mirror: the kubelet owns it, nobody can evict it
    finished: bool  # phase Succeeded or Failed: holds nothing
    terminating: bool
    tolerates_dcm_taint: bool
    workload: str = ""  # "Kind namespace/name" of what keeps the pod alive (empty: a bare pod)
    #: A DaemonSet pod with no toleration of the taint at all: the DaemonSet controller deletes it as
    #: soon as the node carries the taint (kube's ``NodeShouldRunDaemonPod``), so the drain waits for
    #: it instead of evicting it (an eviction racing that delete is a write that ends in 404).
    removed_by_taint: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


#: Label every ModelInfer pod carries: it names the workload an operator knows, not its InferGroup.
MODELINFER_NAME_LABEL = "modelinfer.volcano.sh/name"


def _workload_of(pod: Obj, namespace: str) -> str:
    """The workload a user recognises: the ModelInfer (by its label), else the controlling owner."""
    labels = deep_get(pod, "metadata.labels") or {}
    modelinfer = labels.get(MODELINFER_NAME_LABEL)
    if isinstance(modelinfer, str) and modelinfer:
        return f"ModelInfer {namespace}/{modelinfer}"
    owner = controller_of(pod)
    if owner is not None and owner.get("kind") and owner.get("name"):
        return f"{owner['kind']} {namespace}/{owner['name']}"
    return ""


@dataclass(frozen=True, slots=True)
class BlockedEviction:
    """The Eviction API refused to evict a pod because of a PodDisruptionBudget (429
    ``DisruptionBudget``): what the executor remembers from that answer, for the drain to report."""

    namespace: str
    pod: str
    uid: str | None
    budget: str  # the PodDisruptionBudget's name (same namespace as the pod)
    detail: str  # e.g. "needs 2 healthy pods and has 2", from the server's cause message

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def budget_key(self) -> str:
        return f"{self.namespace}/{self.budget}"


def pod_view(pod: Obj) -> PodView:
    owner_kinds = {ref.get("kind") for ref in owner_references_of(pod)}
    annotations = deep_get(pod, "metadata.annotations") or {}
    uid = deep_get(pod, "metadata.uid")
    namespace = str(deep_get(pod, "metadata.namespace") or "")
    return PodView(
        namespace=namespace,
        name=str(deep_get(pod, "metadata.name") or ""),
        uid=str(uid) if uid else None,
        node_name=deep_get(pod, "spec.nodeName"),
        daemonset="DaemonSet" in owner_kinds,
        mirror=MIRROR_ANNOTATION in annotations or "Node" in owner_kinds,
        finished=deep_get(pod, "status.phase") in ("Succeeded", "Failed"),
        terminating=bool(deep_get(pod, "metadata.deletionTimestamp")),
        tolerates_dcm_taint=pod_tolerates_dcm_taint(pod),
        workload=_workload_of(pod, namespace),
        removed_by_taint="DaemonSet" in owner_kinds and not pod_has_dcm_toleration(pod),
    )


def pod_views(pods: Iterable[Obj]) -> tuple[PodView, ...]:
    return tuple(pod_view(p) for p in pods)


#: What the drain reads of a Pod (:func:`pod_view`, the by-node index, PodDisruptionBudget selectors).
_POD_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "ownerReferences",
    "deletionTimestamp",
    "creationTimestamp",
)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_for_drain(pod: Obj) -> dict[str, Any]:
    """The Pod informer's cache transform: only what :func:`pod_view` and the drain's mappers read.

    The drain caches every Pod of the cluster; containers, volumes and container statuses are most
    of a Pod and nothing here decides on them (peak memory at 1,000 nodes). Annotations
    are cut to the mirror-pod marker, which can be all a static pod carries to say what it is.
    The transform is on the shared all-Pods informer: a controller that needs more of a Pod must
    watch Pods with a label selector of its own (as the ModelInfer and Dynamo controllers do).
    """
    meta = _mapping(pod.get("metadata"))
    kept: dict[str, Any] = {k: meta[k] for k in _POD_METADATA if k in meta}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and MIRROR_ANNOTATION in annotations:
        kept["annotations"] = {MIRROR_ANNOTATION: annotations[MIRROR_ANNOTATION]}
    spec, status = _mapping(pod.get("spec")), _mapping(pod.get("status"))
    out: dict[str, Any] = {"apiVersion": pod.get("apiVersion"), "kind": pod.get("kind"), "metadata": kept}
    out["spec"] = {k: spec[k] for k in ("nodeName", "tolerations") if k in spec}
    out["status"] = {"phase": status["phase"]} if "phase" in status else {}
    return out


# --- DCM Events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DcmEventView:
    """A core/v1 Event, as far as telling DCM's answers apart needs it."""

    component: Any  # source.component, else reportingComponent
    host: Any
    involved_kind: Any
    involved_name: Any
    type: Any
    reason: str
    message: str
    time: datetime | None  # eventTime, lastTimestamp, firstTimestamp or creationTimestamp


def _event_time(event: Obj) -> datetime | None:
    for path in ("eventTime", "lastTimestamp", "firstTimestamp", "metadata.creationTimestamp"):
        t = objects.parse_time(deep_get(event, path))
        if t is not None:
            return t
    return None


def dcm_event_view(event: Obj) -> DcmEventView:
    return DcmEventView(
        component=deep_get(event, "source.component") or deep_get(event, "reportingComponent"),
        host=deep_get(event, "source.host"),
        involved_kind=deep_get(event, "involvedObject.kind"),
        involved_name=deep_get(event, "involvedObject.name"),
        type=event.get("type"),
        reason=str(event.get("reason") or ""),
        message=_str(event.get("message")),
        time=_event_time(event),
    )


_EVENT_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
_EVENT_FIELDS = ("type", "reason", "message", "eventTime", "lastTimestamp", "firstTimestamp")


def dcm_event_for_cache(event: Obj) -> dict[str, Any]:
    """The DCM Event informer's cache transform: only what :func:`dcm_event_view` and the node index
    read. DCM writes a few Events per node per repartition and kube-apiserver keeps them an hour, so
    at 1,000 nodes this cache is thousands of objects that grow for the whole rollout."""
    meta, source, involved = (_mapping(event.get(k)) for k in ("metadata", "source", "involvedObject"))
    out: dict[str, Any] = {
        "apiVersion": event.get("apiVersion"),
        "kind": event.get("kind"),
        "metadata": {k: meta[k] for k in _EVENT_METADATA if k in meta},
        "source": {k: source[k] for k in ("component", "host") if k in source},
        "involvedObject": {k: involved[k] for k in ("kind", "name") if k in involved},
    }
    out.update((k, event[k]) for k in ("reportingComponent", *_EVENT_FIELDS) if k in event)
    return out


def dcm_event_views(events: Sequence[Any]) -> tuple[DcmEventView, ...]:
    """Views in list order (the order breaks ties between equal timestamps); non-objects dropped."""
    return tuple(dcm_event_view(e) for e in events if isinstance(e, Mapping))

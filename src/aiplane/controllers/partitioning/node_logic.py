"""The NodePartitioning state machine, as one pure function: :func:`decide`.

A NodePartitioning (NP) is the per-node work item of a PartitioningPlan: drain the node, label it with
a Device Config Manager (DCM) profile, wait for the AMD GPU operator to repartition the GPUs, check
``status.allocatable``, and give the node back. The controller that runs it is thin: it observes the
NP, its Node, its PartitioningProfile, the Pods on the node and DCM's Events from informer caches, calls
:func:`decide` with ``now``, and executes the :class:`Decision`. Nothing here does I/O or reads a
clock, so every transition is table- and property-tested (``tests/unit/partitioning/test_node_logic.py``).

Phases: ``Pending → Draining → Applying → WaitingOperator → Verifying → Succeeded``, plus ``Failed``
and ``Skipped`` (dry run). Conditions ``NodeCordoned``, ``NodeTainted``, ``DrainCompleted``,
``ProfileApplied``, ``OperatorReady``, ``Verified`` and ``DryRun`` keep upstream's reasons; upstream's
behaviour and bugs are in ``../shared/reference/partitioning-and-kaiwo.md`` §3 and §4.

How the executor runs a decision
--------------------------------
:func:`decide` advances through as many phases as the observed world allows in one call (a fixpoint),
so applying its decision and deciding again with the same pods, events and clock changes nothing (no
node write, no status write, no event; evictions blocked by a PodDisruptionBudget are simply asked
for again). The executor must apply a decision **in this order**, stopping at the first API error and
requeueing with backoff (an API error never makes an NP Failed — nothing in this module sees one):

1. ``finalizer == "add"``: JSON-patch the finalizer onto the NP, guarded by a ``test`` of
   ``/metadata/resourceVersion``. This is the commit point of the plan's admission: a concurrent
   revocation makes it conflict before the node is touched.
2. Node mutations (:attr:`Decision.node_mutations`): apply them with :func:`apply_node_actions` to the
   Node *as observed* and write it once (update with its ``resourceVersion``). One write keeps a
   cordon and the annotation recording who cordoned atomic.
3. Evictions (:attr:`Decision.evictions`) through the Eviction API with ``preconditions.uid``; a 429
   (PodDisruptionBudget) or 404 is not an error — the decision's ``requeue_after`` retries.
4. ``status`` (when not ``None``) through ``/status``, with the NP's latest ``resourceVersion``.
5. ``events`` on the NP.
6. ``finalizer == "remove"``: only now, after the node write of step 2 has succeeded.

Decisions where the issue (silogen/kaiwo#334) and upstream were silent
---------------------------------------------------------------------
* **Ownership on the Node.** Cordon and taint each record their owner (the NP's name) in annotations
  :data:`CORDONED_BY_ANNOTATION` / :data:`TAINTED_BY_ANNOTATION`, written with the change itself. We
  undo only what carries our name: a node already unschedulable (or already tainted) before we
  started is left so. The name, not the uid, so an NP recreated under the same name (a plan recreated
  after someone stripped the finalizer) adopts and cleans up what its predecessor left.
* **Release points.** The taint is removed as soon as DCM reports ``success`` (the device plugin and
  node labeller do not tolerate it and must restart to publish the new partitions); the cordon stays
  until verification passes, so no workload lands on an unverified node. Every resting phase
  (Pending, Skipped, Succeeded, Failed) and deletion undo whatever of ours is still on the node.
* **Finalizer** ``infrastructure.silogen.ai/node-partitioning`` is present exactly while the node may
  carry our marks: added when the NP leaves Pending, removed once a resting phase (or deletion) has
  released the node. Deleting a Succeeded NP is therefore instant.
* **Re-triggering DCM.** Current DCM (ROCm/device-config-manager ``NodeLabelWatcher``) acts only when
  ``dcm.amd.com/gpu-config-profile`` *changes* to a non-empty value; older DCM also reacted to the
  trigger label ``dcm.amd.com/apply-gpu-config-profile``. We set the trigger label (``apply``) with the
  profile label, and when the node already carries the desired value we first remove the profile,
  state and trigger labels in a separate write (condition ``ProfileApplied=False DCMRetrigger``) and set
  them on the next reconcile, so either DCM sees a change. The trigger label is removed when the
  operator step ends, so the next ``apply`` is a change again.
* **DCM ``failure`` is not always final.** DCM writes ``failure`` on every failed attempt and then
  retries every minute for 30 minutes (Event ``PartitionRetrying``). So ``failure`` fails the NP only
  when DCM's latest Event since we applied the profile is a warning other than ``PartitionRetrying``
  / ``PartitionInProgress`` (its message, usually JSON with a ``Reason``, goes into the condition and
  event). With ``PartitionRetrying`` we keep waiting (``OperatorReady=False DCMRetrying``) until the
  operator timeout. With no DCM event at all we wait :attr:`NodeLogicConfig.dcm_failure_grace` for one
  (``OperatorReady=Unknown DCMFailureReported``; its ``lastTransitionTime`` is that grace's clock), then
  fail with what we have. DCM's newer ``in-progress`` state value is treated like an absent label.
* **Clocks live in conditions.** The drain, operator and verify timeouts run from the
  ``lastTransitionTime`` of ``DrainCompleted=False`` (set when draining starts), ``ProfileApplied=True``
  and ``Verified`` (set when verification starts); every attempt starts from cleared conditions, so
  these are fresh. No extra status fields, no annotation writes on the NP.
* **Drain.** Terminating pods are not evicted again but are waited for: a pod in its grace period can
  still hold ``/dev/kfd`` and make DCM fail with "Device busy". Pods that finished (phase Succeeded /
  Failed) hold nothing and are ignored. A toleration with ``tolerationSeconds`` does not count as
  tolerating (the taint manager would evict the pod anyway, ignoring its PodDisruptionBudget).
* **targetSelector** is checked in Pending only: a node that does not match is *held* in Pending and
  never touched (consistent with the plan, which excludes such nodes without failing). It is not
  re-checked once the node is being partitioned, because partitioning itself changes labels the node
  labeller publishes. An unusable profile (missing, bad selector or quantity) likewise holds a Pending
  NP, and fails an in-flight one (``ProfileNotFound`` / ``ProfileInvalid``) after releasing the node.
* **Spec changes.** A new ``metadata.generation`` (a new ``desiredHash``) while Draining … Verifying
  restarts the attempt at Draining (event ``Restarted``): the node stays out of service and admission
  is not needed again (the plan counts it in progress all along). On a Failed NP any spec change
  (that is what bumps generation) goes back to Pending; on a Succeeded one only a new desiredHash does.
  ``dryRun`` is honoured in Pending only, as upstream.
* **Node deleted** → Failed ``NodeNotFound`` (any phase but deletion); there is nothing to release.
* **Verification** also requires the profile label to hold ``dcmProfileName`` (upstream G3); the
  capacity short-circuit in Pending requires the label, state ``success`` *and* the allocatable.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, TypeAlias

from aiplane.apimachinery.conditions import get_condition, set_condition, status_changed
from aiplane.apimachinery.meta import deep_get, has_finalizer
from aiplane.apimachinery.quantity import Quantity
from aiplane.apimachinery.selectors import Selector, compile_selector

__all__ = [
    "ACTIVE_PHASES",
    "APPLY_TRIGGER_LABEL",
    "CORDONED_BY_ANNOTATION",
    "DCM_EVENT_SOURCE",
    "DEFAULT_CONFIG",
    "FINALIZER",
    "PROFILE_LABEL",
    "PROFILE_STATE_LABEL",
    "RESTING_PHASES",
    "TAINTED_BY_ANNOTATION",
    "TAINT_EFFECT",
    "TAINT_KEY",
    "TAINT_VALUE",
    "Cordon",
    "Decision",
    "Event",
    "Evict",
    "NodeAction",
    "NodeLogicConfig",
    "NodeMutation",
    "RemoveLabels",
    "SetLabels",
    "Taint",
    "Uncordon",
    "Untaint",
    "apply_node_actions",
    "decide",
    "has_dcm_taint",
    "is_dcm_event_for",
    "pod_tolerates_dcm_taint",
    "pods_to_drain",
]

# --- vocabulary --------------------------------------------------------------------------------------

FINALIZER: Final = "infrastructure.silogen.ai/node-partitioning"
CORDONED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/cordoned-by"
TAINTED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/tainted-by"
#: ``<np>/<desiredHash>`` of the NP whose profile label is on the node, written with the label itself: a
#: lost status write must not make our own in-flight request look like a pre-existing label.
APPLIED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/profile-applied-by"

PROFILE_LABEL: Final = "dcm.amd.com/gpu-config-profile"
PROFILE_STATE_LABEL: Final = "dcm.amd.com/gpu-config-profile-state"
APPLY_TRIGGER_LABEL: Final = "dcm.amd.com/apply-gpu-config-profile"
APPLY_TRIGGER_VALUE: Final = "apply"
DCM_STATE_SUCCESS: Final = "success"
DCM_STATE_FAILURE: Final = "failure"
DCM_STATE_IN_PROGRESS: Final = "in-progress"
DCM_EVENT_SOURCE: Final = "amd-device-config-manager"
# DCM events that mean "still working", even though DCM emits PartitionRetrying as a Warning.
_DCM_PROGRESS_REASONS: Final = frozenset({"PartitionRetrying", "PartitionInProgress"})

TAINT_KEY: Final = "amd-dcm"
TAINT_VALUE: Final = "up"
TAINT_EFFECT: Final = "NoExecute"
GPU_RESOURCE: Final = "amd.com/gpu"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"

PENDING: Final = "Pending"
DRAINING: Final = "Draining"
APPLYING: Final = "Applying"
WAITING_OPERATOR: Final = "WaitingOperator"
VERIFYING: Final = "Verifying"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SKIPPED: Final = "Skipped"
ACTIVE_PHASES: Final = frozenset({DRAINING, APPLYING, WAITING_OPERATOR, VERIFYING})
RESTING_PHASES: Final = frozenset({PENDING, SUCCEEDED, FAILED, SKIPPED})

# Condition types.
NODE_CORDONED: Final = "NodeCordoned"
NODE_TAINTED: Final = "NodeTainted"
DRAIN_COMPLETED: Final = "DrainCompleted"
PROFILE_APPLIED: Final = "ProfileApplied"
OPERATOR_READY: Final = "OperatorReady"
VERIFIED: Final = "Verified"
DRY_RUN: Final = "DryRun"
_STEP_CONDITIONS: Final = (
    NODE_CORDONED,
    NODE_TAINTED,
    DRAIN_COMPLETED,
    PROFILE_APPLIED,
    OPERATOR_READY,
    VERIFIED,
)

NORMAL: Final = "Normal"
WARNING: Final = "Warning"


# --- configuration and results -----------------------------------------------------------------------


@dataclass(frozen=True)
class NodeLogicConfig:
    """Timeouts and polling intervals. Defaults follow upstream's G1 drain timeout (20 min), DCM's own
    retry window (30 min) and a generous device-plugin refresh (5 min)."""

    drain_timeout: timedelta = timedelta(minutes=20)
    operator_timeout: timedelta = timedelta(minutes=30)
    verify_timeout: timedelta = timedelta(minutes=5)
    dcm_failure_grace: timedelta = timedelta(seconds=30)
    """How long a ``failure`` state label without any DCM Event may be a retry about to be announced."""
    eviction_retry: timedelta = timedelta(seconds=5)
    """Requeue while pods remain (a PodDisruptionBudget answers 429; nothing watches PDBs for us)."""
    poll_interval: timedelta = timedelta(seconds=15)
    """Safety requeue while waiting on DCM or the device plugin (Node watches normally wake us first)."""
    retrigger_delay: timedelta = timedelta(seconds=1)
    """Requeue between removing and re-setting the profile label (the watch may filter annotations)."""


DEFAULT_CONFIG: Final = NodeLogicConfig()


@dataclass(frozen=True)
class Event:
    """A core/v1 Event to record on the NodePartitioning (``type`` is ``Normal`` or ``Warning``)."""

    type: str
    reason: str
    message: str


def _annotations(node: Mapping[str, Any]) -> Mapping[str, Any]:
    ann = deep_get(node, "metadata.annotations")
    return ann if isinstance(ann, Mapping) else {}


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = deep_get(node, "metadata.labels")
    return labels if isinstance(labels, Mapping) else {}


def _taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    taints = deep_get(node, "spec.taints")
    return [t for t in taints if isinstance(t, Mapping)] if isinstance(taints, list) else []


def _is_dcm_taint(taint: Mapping[str, Any]) -> bool:
    # Upstream's idempotency key: key + effect (any value).
    return taint.get("key") == TAINT_KEY and taint.get("effect") == TAINT_EFFECT


def has_dcm_taint(node: Mapping[str, Any]) -> bool:
    """Does the node carry ``amd-dcm=…:NoExecute`` (whoever put it there)?"""
    return any(_is_dcm_taint(t) for t in _taints(node))


def _unschedulable(node: Mapping[str, Any]) -> bool:
    return deep_get(node, "spec.unschedulable") is True


def _meta_dict(node: dict[str, Any], key: str) -> dict[str, Any]:
    md = node.setdefault("metadata", {})
    value = md.get(key)
    if not isinstance(value, dict):
        value = {}
        md[key] = value
    return value


def _drop_empty_meta(node: dict[str, Any], key: str) -> None:
    md = node.get("metadata")
    if isinstance(md, dict) and md.get(key) == {}:
        del md[key]


# Node actions: small, idempotent, each mutates a private copy of the Node in place and says whether it
# changed anything. Ownership checks live in the actions too, so replaying one on a fresher Node
# (a patch-style executor) never undoes somebody else's cordon or taint.


@dataclass(frozen=True)
class Cordon:
    """``spec.unschedulable = true`` and record ``owner`` — only if the node is schedulable now, so a
    node cordoned by someone else is never claimed (and never uncordoned by us)."""

    owner: str

    def mutate(self, node: dict[str, Any]) -> bool:
        if _unschedulable(node):
            return False
        node.setdefault("spec", {})["unschedulable"] = True
        _meta_dict(node, "annotations")[CORDONED_BY_ANNOTATION] = self.owner
        return True


@dataclass(frozen=True)
class Uncordon:
    """Undo :class:`Cordon` of ``owner``: clear ``spec.unschedulable`` and our annotation. No-op when
    the cordon is not ours."""

    owner: str

    def mutate(self, node: dict[str, Any]) -> bool:
        if _annotations(node).get(CORDONED_BY_ANNOTATION) != self.owner:
            return False
        spec = node.get("spec")
        if isinstance(spec, dict):
            spec.pop("unschedulable", None)
        del _meta_dict(node, "annotations")[CORDONED_BY_ANNOTATION]
        _drop_empty_meta(node, "annotations")
        return True


@dataclass(frozen=True)
class Taint:
    """Add ``amd-dcm=up:NoExecute`` and record ``owner`` — only if no ``amd-dcm:NoExecute`` taint is
    there yet (one that was there before us is not ours to remove)."""

    owner: str

    def mutate(self, node: dict[str, Any]) -> bool:
        if has_dcm_taint(node):
            return False
        spec = node.setdefault("spec", {})
        taints = spec.get("taints")
        new = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT}
        spec["taints"] = [*taints, new] if isinstance(taints, list) else [new]
        _meta_dict(node, "annotations")[TAINTED_BY_ANNOTATION] = self.owner
        return True


@dataclass(frozen=True)
class Untaint:
    """Undo :class:`Taint` of ``owner``: drop ``amd-dcm:NoExecute`` taints and our annotation. No-op
    when the taint is not ours."""

    owner: str

    def mutate(self, node: dict[str, Any]) -> bool:
        if _annotations(node).get(TAINTED_BY_ANNOTATION) != self.owner:
            return False
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("taints"), list):
            kept = [t for t in spec["taints"] if not (isinstance(t, Mapping) and _is_dcm_taint(t))]
            if kept:
                spec["taints"] = kept
            else:
                del spec["taints"]
        del _meta_dict(node, "annotations")[TAINTED_BY_ANNOTATION]
        _drop_empty_meta(node, "annotations")
        return True


@dataclass(frozen=True)
class SetLabels:
    """Set node labels (``labels`` is a tuple of ``(key, value)`` pairs, so the action is hashable)."""

    labels: tuple[tuple[str, str], ...]

    def mutate(self, node: dict[str, Any]) -> bool:
        current = _labels(node)
        if all(current.get(k) == v for k, v in self.labels):
            return False
        target = _meta_dict(node, "labels")
        for k, v in self.labels:
            target[k] = v
        return True


@dataclass(frozen=True)
class MarkApplied:
    """Record on the node which NP (and desiredHash) set its DCM profile label."""

    value: str

    def mutate(self, node: dict[str, Any]) -> bool:
        if _annotations(node).get(APPLIED_BY_ANNOTATION) == self.value:
            return False
        _meta_dict(node, "annotations")[APPLIED_BY_ANNOTATION] = self.value
        return True


@dataclass(frozen=True)
class UnmarkApplied:
    """Drop our application record (the partitioning attempt is over)."""

    owner: str

    def mutate(self, node: dict[str, Any]) -> bool:
        value = _annotations(node).get(APPLIED_BY_ANNOTATION)
        if not isinstance(value, str) or value.split("/", 1)[0] != self.owner:
            return False
        del _meta_dict(node, "annotations")[APPLIED_BY_ANNOTATION]
        _drop_empty_meta(node, "annotations")
        return True


@dataclass(frozen=True)
class RemoveLabels:
    """Remove node labels (absent ones are ignored)."""

    keys: tuple[str, ...]

    def mutate(self, node: dict[str, Any]) -> bool:
        current = _labels(node)
        if not any(k in current for k in self.keys):
            return False
        target = _meta_dict(node, "labels")
        for k in self.keys:
            target.pop(k, None)
        _drop_empty_meta(node, "labels")
        return True


@dataclass(frozen=True)
class Evict:
    """Evict one pod through the Eviction API (``preconditions.uid`` = ``uid`` when known)."""

    namespace: str
    name: str
    uid: str | None = None


NodeMutation: TypeAlias = (
    Cordon | Uncordon | Taint | Untaint | SetLabels | RemoveLabels | MarkApplied | UnmarkApplied
)
NodeAction: TypeAlias = NodeMutation | Evict


def apply_node_actions(node: Mapping[str, Any], actions: Sequence[NodeAction]) -> dict[str, Any]:
    """The Node after ``actions`` (evictions ignored): a new dict, the input is never mutated.

    The executor writes the result in one update guarded by the observed ``resourceVersion``; tests
    use it as the model of what the API server would store.
    """
    result = copy.deepcopy(dict(node))
    for action in actions:
        if not isinstance(action, Evict):
            action.mutate(result)
    return result


@dataclass(frozen=True)
class Decision:
    """What the executor does for one reconcile (see the module docstring for the order).

    ``phase`` is the NP's phase after this decision; ``status`` the full status to write, or ``None``
    when it is unchanged (a steady NP costs zero writes); ``requeue_after`` seconds, or ``None`` when
    only a watch event can change the answer.
    """

    phase: str
    status: dict[str, Any] | None = None
    node_actions: tuple[NodeAction, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    finalizer: Literal["add", "remove"] | None = None

    @property
    def node_mutations(self) -> tuple[NodeMutation, ...]:
        """The actions that change the Node object (one write)."""
        return tuple(a for a in self.node_actions if not isinstance(a, Evict))

    @property
    def evictions(self) -> tuple[Evict, ...]:
        """The Eviction API calls, made after the Node write."""
        return tuple(a for a in self.node_actions if isinstance(a, Evict))

    @property
    def is_noop(self) -> bool:
        """Nothing to write, evict or record."""
        return self.status is None and not self.node_actions and not self.events and self.finalizer is None


# --- pods --------------------------------------------------------------------------------------------


def _is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Owned by a DaemonSet: it tolerates a cordon, so only the NoExecute taint moves it."""
    return any(ref.get("kind") == "DaemonSet" for ref in deep_get(pod, "metadata.ownerReferences") or [])


def _is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    if MIRROR_ANNOTATION in (deep_get(pod, "metadata.annotations") or {}):
        return True
    owners = deep_get(pod, "metadata.ownerReferences") or []
    return any(isinstance(o, Mapping) and o.get("kind") == "Node" for o in owners)


def pod_tolerates_dcm_taint(pod: Mapping[str, Any]) -> bool:
    """Does the pod tolerate ``amd-dcm=up:NoExecute`` indefinitely?

    A toleration matches when its effect is empty or NoExecute and either its key is empty with
    operator Exists (tolerates everything), or its key is ``amd-dcm`` with Exists or Equal ``up``
    (Equal is the default operator). One with ``tolerationSeconds`` only delays the taint manager's
    eviction, so it does not count: we evict that pod ourselves, politely.
    """
    tolerations = deep_get(pod, "spec.tolerations") or []
    for t in tolerations:
        if not isinstance(t, Mapping) or t.get("tolerationSeconds") is not None:
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


def pods_to_drain(pods: Sequence[Mapping[str, Any]], node_name: str) -> list[Mapping[str, Any]]:
    """Pods that must be gone before DCM may touch the GPUs: on ``node_name``, not mirror pods, not
    finished, not tolerating the taint. DaemonSet pods are included (the device plugin must restart).
    Terminating pods are included too (waited for, not evicted again)."""
    out = []
    for pod in pods:
        if deep_get(pod, "spec.nodeName") != node_name:
            continue
        if _is_mirror_pod(pod) or deep_get(pod, "status.phase") in ("Succeeded", "Failed"):
            continue
        if pod_tolerates_dcm_taint(pod):
            continue
        out.append(pod)
    return out


def _pod_key(pod: Mapping[str, Any]) -> str:
    return f"{deep_get(pod, 'metadata.namespace') or ''}/{deep_get(pod, 'metadata.name') or ''}"


# --- DCM events --------------------------------------------------------------------------------------


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _event_time(event: Mapping[str, Any]) -> datetime | None:
    for path in ("eventTime", "lastTimestamp", "firstTimestamp", "metadata.creationTimestamp"):
        t = _parse_time(deep_get(event, path))
        if t is not None:
            return t
    return None


def is_dcm_event_for(event: Mapping[str, Any], node_name: str) -> bool:
    """Was ``event`` emitted by DCM about ``node_name``?

    DCM records its Events on its own Pod with ``source.component = amd-device-config-manager`` and
    ``source.host = <node>``; an Event on the Node itself (``involvedObject.kind = Node``) counts too.
    """
    component = deep_get(event, "source.component") or deep_get(event, "reportingComponent")
    if component != DCM_EVENT_SOURCE:
        return False
    if deep_get(event, "source.host") == node_name:
        return True
    return (
        deep_get(event, "involvedObject.kind") == "Node"
        and deep_get(event, "involvedObject.name") == node_name
    )


def _dcm_event_detail(event: Mapping[str, Any]) -> str:
    """``<reason>: <message>``; DCM's messages are JSON of its PartitionStatus, whose ``Reason`` is the
    human part."""
    reason = str(event.get("reason") or "")
    raw = event.get("message")
    message = raw if isinstance(raw, str) else ""
    if message.lstrip().startswith("{"):
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping):
            inner = parsed.get("Reason") or parsed.get("reason")
            if isinstance(inner, str) and inner:
                message = inner
    message = message.strip()
    if len(message) > 512:
        message = message[:509] + "..."
    return f"{reason}: {message}" if reason and message else reason or message


# --- profile -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Profile:
    name: str
    dcm: str
    expected: tuple[tuple[str, Quantity, str], ...]  # (resource, value, spelling from the profile)
    selector: Selector


def _read_profile(profile: Mapping[str, Any]) -> _Profile | str:
    """The usable parts of a PartitioningProfile, or a message saying why it is unusable."""
    name = str(deep_get(profile, "metadata.name") or "")
    spec = profile.get("spec")
    if not isinstance(spec, Mapping):
        return f"profile {name} has no spec"
    dcm = spec.get("dcmProfileName")
    if not isinstance(dcm, str) or not dcm:
        return f"profile {name}: spec.dcmProfileName: Required value"
    raw = spec.get("expectedResources") or {}
    if not isinstance(raw, Mapping):
        return f"profile {name}: spec.expectedResources: must be a map of quantities"
    expected: list[tuple[str, Quantity, str]] = []
    for resource in sorted(raw):
        value = raw[resource]
        try:
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
            expected.append((str(resource), Quantity(value), str(value)))
        except (ValueError, OverflowError) as exc:
            return f"profile {name}: spec.expectedResources[{resource}]: {exc}"
    try:
        selector = (
            compile_selector(spec["targetSelector"])
            if spec.get("targetSelector") is not None
            else Selector.everything()
        )
    except ValueError as exc:
        return f"profile {name}: spec.targetSelector: {exc}"
    return _Profile(name=name, dcm=dcm, expected=tuple(expected), selector=selector)


def _resource_problems(node: Mapping[str, Any], profile: _Profile) -> list[str]:
    """``<res>: got X (expected Y)`` / ``<res>: not found (expected Y)`` for every expected resource
    ``status.allocatable`` does not match by value (``Quantity`` equality: ``64 == 64000m``)."""
    allocatable = deep_get(node, "status.allocatable") or {}
    if not isinstance(allocatable, Mapping):
        allocatable = {}
    problems = []
    for resource, want, spelling in profile.expected:
        got = allocatable.get(resource)
        if got is None:
            problems.append(f"{resource}: not found (expected {spelling})")
            continue
        try:
            ok = not isinstance(got, bool) and isinstance(got, str | int | float) and Quantity(got) == want
        except (ValueError, OverflowError):
            ok = False
        if not ok:
            problems.append(f"{resource}: got {got} (expected {spelling})")
    return problems


def _already_configured(node: Mapping[str, Any], profile: _Profile) -> bool:
    """Upstream's capacity short-circuit, made strict: allocatable matches every expected resource and
    DCM reports the desired profile applied (label + state ``success``)."""
    labels = _labels(node)
    return (
        bool(profile.expected)
        and labels.get(PROFILE_LABEL) == profile.dcm
        and labels.get(PROFILE_STATE_LABEL) == DCM_STATE_SUCCESS
        and not _resource_problems(node, profile)
    )


def _fmt_duration(td: timedelta) -> str:
    seconds = int(td.total_seconds())
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s or not (h or m) else "")
    return out


# --- the state machine -------------------------------------------------------------------------------

AdmissionCheck: TypeAlias = Callable[[Mapping[str, Any]], bool]


@dataclass
class _Run:
    """Working state of one :func:`decide` call. ``node`` is a private copy that node actions are
    applied to as they are decided, so later steps see the node as it will be."""

    np: Mapping[str, Any]
    node: dict[str, Any]
    node_name: str
    owner: str
    profile_ref: str
    profile: _Profile | None
    profile_error: str | None
    pods: Sequence[Mapping[str, Any]]
    dcm_events: Sequence[Mapping[str, Any]]
    now: datetime
    config: NodeLogicConfig
    admitted: bool
    generation: int | None
    phase: str
    conditions: list[dict[str, Any]]
    current_hash: str | None
    actions: list[NodeAction] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue: float | None = None
    finalizer: Literal["add", "remove"] | None = None
    drop_trigger: bool = False

    # -- helpers

    def act(self, action: NodeAction) -> None:
        if isinstance(action, Evict):
            if action not in self.actions:
                self.actions.append(action)
        elif action.mutate(self.node):
            self.actions.append(action)

    def cond(self, type_: str, status: str, reason: str, message: str) -> None:
        self.conditions, _ = set_condition(
            self.conditions, type_, status, reason, message, observed_generation=self.generation, now=self.now
        )

    def cond_if_present(self, type_: str, status: str, reason: str, message: str) -> None:
        if get_condition(self.conditions, type_) is not None:
            self.cond(type_, status, reason, message)

    def since(self, type_: str) -> datetime:
        """When condition ``type_`` last flipped (``now`` when absent or unreadable)."""
        c = get_condition(self.conditions, type_)
        t = _parse_time(c.get("lastTransitionTime")) if c is not None else None
        return t if t is not None else self.now

    def wait(self, seconds: float) -> None:
        seconds = max(seconds, 0.001)
        self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def ensure_finalizer(self) -> None:
        if not has_finalizer(self.np, FINALIZER):
            self.finalizer = "add"

    def has_marks(self) -> bool:
        ann = _annotations(self.node)
        applied = str(ann.get(APPLIED_BY_ANNOTATION) or "").split("/", 1)[0]
        return self.owner in (ann.get(CORDONED_BY_ANNOTATION), ann.get(TAINTED_BY_ANNOTATION), applied)

    def release(self) -> None:
        """Undo our taint and cordon (only ours), drop the trigger label if the operator step was
        interrupted, then drop the finalizer once nothing of ours is left."""
        if _annotations(self.node).get(TAINTED_BY_ANNOTATION) == self.owner:
            self.act(Untaint(self.owner))
            self.cond_if_present(
                NODE_TAINTED,
                "False",
                "TaintRemoved",
                f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} removed",
            )
        if _annotations(self.node).get(CORDONED_BY_ANNOTATION) == self.owner:
            self.act(Uncordon(self.owner))
            self.cond_if_present(NODE_CORDONED, "False", "Uncordoned", f"Node {self.node_name} uncordoned")
        if self.drop_trigger:
            self.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        if str(_annotations(self.node).get(APPLIED_BY_ANNOTATION) or "").split("/", 1)[0] == self.owner:
            self.act(UnmarkApplied(self.owner))
        if has_finalizer(self.np, FINALIZER) and not self.has_marks():
            self.finalizer = "remove"

    def goto(self, phase: str, *, reset: bool = False) -> bool:
        self.phase = phase
        if reset:
            self.conditions = []
        return True

    def fail(self, type_: str, reason: str, message: str, *, event_reason: str | None = None) -> bool:
        self.cond(type_, "False", reason, message)
        self.event(WARNING, event_reason or reason, message)
        if self.phase in (APPLYING, WAITING_OPERATOR):
            self.drop_trigger = True
        return self.goto(FAILED)

    def profile_gone(self) -> bool:
        """Fail an in-flight NP whose profile vanished or became unusable (after releasing the node)."""
        if self.profile_error is None:
            return self.fail(
                VERIFIED,
                "ProfileNotFound",
                f"PartitioningProfile {self.profile_ref} not found",
                event_reason="ProfileNotFound",
            )
        return self.fail(VERIFIED, "ProfileInvalid", self.profile_error)

    # -- phases (each returns True to keep going with the new phase, False to stop)

    def pending(self) -> bool:
        if deep_get(self.np, "spec.dryRun") is True:
            self.event(NORMAL, "DryRunSkipped", self.dry_run_message())
            return self.goto(SKIPPED)
        self.phase = PENDING
        if self.profile is None:
            self.release()  # held until the profile is usable; the plan holds such nodes too
            return False
        if not self.profile.selector.matches(_labels(self.node)):
            self.release()  # never touched: see "targetSelector" in the module docstring
            return False
        if _already_configured(self.node, self.profile):
            message = (
                f"Node {self.node_name} already has DCM profile {self.profile.dcm} and the expected resources"
            )
            self.conditions = []
            for type_ in _STEP_CONDITIONS:
                self.cond(type_, "True", "AlreadyInDesiredState", message)
            self.current_hash = self.desired_hash()
            self.event(NORMAL, "AlreadyConfigured", message)
            return self.goto(SUCCEEDED)
        if not self.admitted:
            self.release()
            return False
        self.goto(DRAINING, reset=True)
        self.cond(DRAIN_COMPLETED, "False", "DrainInProgress", "drain started")
        self.event(
            NORMAL, "DrainStarted", f"Draining node {self.node_name} to apply DCM profile {self.profile.dcm}"
        )
        return True

    def draining(self) -> bool:
        if self.profile is None:
            return self.profile_gone()
        self.ensure_finalizer()
        if not _unschedulable(self.node):
            self.act(Cordon(self.owner))
        if _annotations(self.node).get(CORDONED_BY_ANNOTATION) == self.owner:
            self.cond(NODE_CORDONED, "True", "CordonSucceeded", f"Node {self.node_name} cordoned")
        else:
            self.cond(
                NODE_CORDONED,
                "True",
                "AlreadyCordoned",
                f"Node {self.node_name} was already unschedulable; it will be left cordoned",
            )
        remaining = pods_to_drain(self.pods, self.node_name)
        # The NoExecute taint comes only once the Eviction API has emptied the node of everything but
        # DaemonSet pods: the taint manager evicts without asking PodDisruptionBudgets (upstream's bug),
        # while a cordon cannot remove DaemonSet pods (they tolerate unschedulable) such as the device
        # plugin, which must restart to publish the new partitions.
        workload = [p for p in remaining if not _is_daemonset_pod(p)]
        if not workload or has_dcm_taint(self.node):
            if not has_dcm_taint(self.node):
                self.act(Taint(self.owner))
            if _annotations(self.node).get(TAINTED_BY_ANNOTATION) == self.owner or not has_dcm_taint(
                self.node
            ):
                self.cond(
                    NODE_TAINTED,
                    "True",
                    "TaintApplied",
                    f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} applied",
                )
            else:
                self.cond(
                    NODE_TAINTED,
                    "True",
                    "AlreadyTainted",
                    f"Node {self.node_name} already had an {TAINT_KEY}:{TAINT_EFFECT} taint; it will be left in place",
                )
        else:
            self.cond(
                NODE_TAINTED,
                "False",
                "WaitingForEvictions",
                f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} waits until {len(workload)} pods are evicted "
                "through the Eviction API (PodDisruptionBudgets honoured)",
            )
            remaining = workload
        if not remaining:
            message = f"All pods evicted from node {self.node_name}"
            self.cond(DRAIN_COMPLETED, "True", "DrainSucceeded", message)
            self.event(NORMAL, "DrainCompleted", message)
            return self.goto(APPLYING)
        deadline = self.since(DRAIN_COMPLETED) + self.config.drain_timeout
        if self.now >= deadline:
            names = ", ".join(sorted(_pod_key(p) for p in remaining)[:10])
            more = f" and {len(remaining) - 10} more" if len(remaining) > 10 else ""
            return self.fail(
                DRAIN_COMPLETED,
                "DrainTimeout",
                f"drain of node {self.node_name} did not complete within "
                f"{_fmt_duration(self.config.drain_timeout)}: {len(remaining)} pods remain ({names}{more})",
            )
        for pod in remaining:
            if not deep_get(pod, "metadata.deletionTimestamp"):
                uid = deep_get(pod, "metadata.uid")
                self.act(
                    Evict(
                        str(deep_get(pod, "metadata.namespace") or ""),
                        str(deep_get(pod, "metadata.name") or ""),
                        str(uid) if uid else None,
                    )
                )
        self.cond(
            DRAIN_COMPLETED,
            "False",
            "DrainInProgress",
            f"waiting for {len(remaining)} pods to be evicted: drain in progress",
        )
        self.wait(min(self.config.eviction_retry, deadline - self.now).total_seconds())
        return False

    def applying(self) -> bool:
        if self.profile is None:
            return self.profile_gone()
        self.ensure_finalizer()
        dcm = self.profile.dcm
        labels = _labels(self.node)
        applied = get_condition(self.conditions, PROFILE_APPLIED)
        retriggering = applied is not None and applied.get("reason") == "DCMRetrigger"
        mark = f"{self.owner}/{self.desired_hash()}"
        message = f"Set {PROFILE_LABEL}={dcm} on node {self.node_name}"
        if labels.get(PROFILE_LABEL) == dcm and _annotations(self.node).get(APPLIED_BY_ANNOTATION) == mark:
            # Our own request is already on the node (the status write after it was lost): in flight.
            self.conditions = [c for c in self.conditions if c.get("type") != PROFILE_APPLIED]
            self.cond(PROFILE_APPLIED, "True", "DCMConfigUpdated", message)
            self.goto(WAITING_OPERATOR)
            self.cond(
                OPERATOR_READY,
                "False",
                "DCMProcessing",
                f"Waiting for the Device Config Manager to apply {dcm}",
            )
            return True
        if labels.get(PROFILE_LABEL) == dcm and not retriggering:
            # DCM reacts to a *change* of the label: take it off now, put it back next time.
            self.act(RemoveLabels((PROFILE_LABEL, PROFILE_STATE_LABEL, APPLY_TRIGGER_LABEL)))
            self.cond(
                PROFILE_APPLIED,
                "False",
                "DCMRetrigger",
                f"Node {self.node_name} already carries DCM profile {dcm}; "
                "removing the label so that setting it again makes DCM re-apply it",
            )
            self.wait(self.config.retrigger_delay.total_seconds())
            return False
        self.act(SetLabels(((PROFILE_LABEL, dcm), (APPLY_TRIGGER_LABEL, APPLY_TRIGGER_VALUE))))
        self.act(RemoveLabels((PROFILE_STATE_LABEL,)))
        self.act(MarkApplied(mark))
        # Remove first: the operator clock must start now even after a DCMRetrigger False.
        self.conditions = [c for c in self.conditions if c.get("type") != PROFILE_APPLIED]
        self.cond(PROFILE_APPLIED, "True", "DCMConfigUpdated", message)
        self.event(NORMAL, "ProfileApplied", message)
        self.goto(WAITING_OPERATOR)
        self.cond(
            OPERATOR_READY, "False", "DCMProcessing", f"Waiting for the Device Config Manager to apply {dcm}"
        )
        return True

    def waiting_operator(self) -> bool:
        if self.profile is None:
            return self.profile_gone()
        self.ensure_finalizer()
        dcm = self.profile.dcm
        started = self.since(PROFILE_APPLIED)
        deadline = started + self.config.operator_timeout
        wake = deadline
        state = _labels(self.node).get(PROFILE_STATE_LABEL)
        latest = self.latest_dcm_event(started)
        detail = _dcm_event_detail(latest) if latest is not None else ""
        if state == DCM_STATE_SUCCESS:
            self.cond(OPERATOR_READY, "True", "DCMSucceeded", f"DCM applied profile {dcm}")
            if _annotations(self.node).get(TAINTED_BY_ANNOTATION) == self.owner:
                self.act(Untaint(self.owner))
                self.cond(
                    NODE_TAINTED,
                    "False",
                    "TaintRemoved",
                    f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} removed so the device plugin can restart",
                )
            self.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
            return self.goto(VERIFYING)
        if state == DCM_STATE_FAILURE:
            if latest is not None and latest.get("reason") in _DCM_PROGRESS_REASONS:
                self.cond(OPERATOR_READY, "False", "DCMRetrying", f"DCM is retrying profile {dcm}: {detail}")
            elif latest is not None and latest.get("type") == WARNING:
                return self.fail(
                    OPERATOR_READY,
                    "DCMFailed",
                    f"DCM failed to apply profile {dcm} on node {self.node_name}: {detail}",
                )
            else:
                # DCM sets the label before announcing a retry: give the announcement a moment.
                self.cond(
                    OPERATOR_READY,
                    "Unknown",
                    "DCMFailureReported",
                    f"DCM reported failure for profile {dcm}; waiting for its events (it may be retrying)",
                )
                grace_end = self.since(OPERATOR_READY) + self.config.dcm_failure_grace
                if self.now >= grace_end:
                    return self.fail(
                        OPERATOR_READY,
                        "DCMFailed",
                        f"DCM failed to apply profile {dcm} on node {self.node_name} "
                        f"({PROFILE_STATE_LABEL}={DCM_STATE_FAILURE}; no DCM event explains it)",
                    )
                wake = min(wake, grace_end)
        elif state in (None, "", DCM_STATE_IN_PROGRESS):
            self.cond(
                OPERATOR_READY,
                "False",
                "DCMProcessing",
                f"Waiting for the Device Config Manager to apply {dcm}",
            )
        else:
            self.cond(
                OPERATOR_READY, "False", "UnknownDCMState", f"Unknown DCM state {state!r} for profile {dcm}"
            )
        if self.now >= deadline:
            last = f"; last DCM event: {detail}" if detail else ""
            return self.fail(
                OPERATOR_READY,
                "OperatorUnavailable",
                f"DCM did not apply profile {dcm} on node {self.node_name} within "
                f"{_fmt_duration(self.config.operator_timeout)} ({PROFILE_STATE_LABEL}: {state or 'absent'}{last})",
            )
        self.wait(min(self.config.poll_interval, wake - self.now).total_seconds())
        return False

    def verifying(self) -> bool:
        if self.profile is None:
            return self.profile_gone()
        self.ensure_finalizer()
        problem = self.verification_problem(self.profile)
        if problem is None:
            summary = ", ".join(f"{r}={s}" for r, _, s in self.profile.expected) or f"{GPU_RESOURCE} present"
            self.cond(
                VERIFIED, "True", "VerificationSucceeded", f"Node allocatable matches profile: {summary}"
            )
            self.event(NORMAL, "VerificationSucceeded", f"Node {self.node_name} verified: {summary}")
            self.event(
                NORMAL,
                "NodeSucceeded",
                f"Node {self.node_name} partitioned with DCM profile {self.profile.dcm}",
            )
            self.current_hash = self.desired_hash()
            return self.goto(SUCCEEDED)
        reason, message = problem
        if get_condition(self.conditions, VERIFIED) is None:
            self.cond(VERIFIED, "False", reason, message)
        deadline = self.since(VERIFIED) + self.config.verify_timeout
        if self.now >= deadline:
            hint = (
                f" (the node still carries an {TAINT_KEY}:{TAINT_EFFECT} taint that is not ours, "
                "which keeps the device plugin off it)"
                if has_dcm_taint(self.node)
                else ""
            )
            return self.fail(
                VERIFIED,
                "VerifyFailed",
                f"verification of node {self.node_name} failed after "
                f"{_fmt_duration(self.config.verify_timeout)}: {message}{hint}",
            )
        self.cond(VERIFIED, "False", reason, message)
        self.wait(min(self.config.poll_interval, deadline - self.now).total_seconds())
        return False

    def succeeded(self) -> bool:
        if self.current_hash != self.desired_hash():
            return self.goto(PENDING, reset=True)
        self.release()
        return False

    def failed(self) -> bool:
        self.release()
        return False

    def skipped(self) -> bool:
        if deep_get(self.np, "spec.dryRun") is not True:
            return self.goto(PENDING, reset=True)
        message = self.dry_run_message()
        self.cond(DRY_RUN, "True", "DryRunEnabled", message)
        for type_ in _STEP_CONDITIONS:
            self.cond(type_, "False", "DryRunSkipped", "Dry-run: no changes are made to the node")
        self.release()
        return False

    # -- support

    def desired_hash(self) -> str | None:
        value = deep_get(self.np, "spec.desiredHash")
        return str(value) if value else None

    def dry_run_message(self) -> str:
        p = self.profile
        if p is not None and not p.selector.matches(_labels(self.node)):
            return (
                f"Dry-run: node {self.node_name} does not match the targetSelector of profile "
                f"{self.profile_ref}; it would not be partitioned"
            )
        if p is not None and _already_configured(self.node, p):
            return f"Dry-run: node {self.node_name} already has profile {self.profile_ref}; it would not be touched"
        return f"Dry-run: would partition node {self.node_name} with profile {self.profile_ref}"

    def latest_dcm_event(self, since: datetime) -> Mapping[str, Any] | None:
        """DCM's newest Event about this node since the profile was applied (list order breaks ties)."""
        best: tuple[datetime, int] | None = None
        chosen: Mapping[str, Any] | None = None
        for i, ev in enumerate(self.dcm_events):
            if not isinstance(ev, Mapping) or not is_dcm_event_for(ev, self.node_name):
                continue
            t = _event_time(ev)
            if t is None or t < since:
                continue
            if best is None or (t, i) >= best:
                best, chosen = (t, i), ev
        return chosen

    def verification_problem(self, profile: _Profile) -> tuple[str, str] | None:
        label = _labels(self.node).get(PROFILE_LABEL)
        if label != profile.dcm:
            return (
                "DCMLabelMissing",
                f"node label {PROFILE_LABEL} is {label or 'absent'} (expected {profile.dcm})",
            )
        if profile.expected:
            problems = _resource_problems(self.node, profile)
            return ("ResourceMismatch", "; ".join(problems)) if problems else None
        allocatable = deep_get(self.node, "status.allocatable") or {}
        if not isinstance(allocatable, Mapping) or GPU_RESOURCE not in allocatable:
            return "GPUResourcesNotFound", f"{GPU_RESOURCE}: not found in node allocatable"
        return None


_HANDLERS: Final[dict[str, Callable[[_Run], bool]]] = {
    "": _Run.pending,
    PENDING: _Run.pending,
    DRAINING: _Run.draining,
    APPLYING: _Run.applying,
    WAITING_OPERATOR: _Run.waiting_operator,
    VERIFYING: _Run.verifying,
    SUCCEEDED: _Run.succeeded,
    FAILED: _Run.failed,
    SKIPPED: _Run.skipped,
}
_MAX_STEPS: Final = 16  # far more than the longest chain (Succeeded → Pending → … → WaitingOperator)


def _default_admission(np: Mapping[str, Any]) -> bool:
    from aiplane.controllers.partitioning.plan_logic import is_admitted

    return is_admitted(np)


def decide(
    np: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    profile: Mapping[str, Any] | None,
    pods_on_node: Sequence[Mapping[str, Any]],
    now: datetime,
    config: NodeLogicConfig = DEFAULT_CONFIG,
    *,
    dcm_events: Sequence[Mapping[str, Any]] = (),
    is_admitted: AdmissionCheck | None = None,
) -> Decision:
    """The next step for NodePartitioning ``np``. Pure: nothing is mutated, no I/O, no clock.

    * ``node``: the Node named by ``spec.nodeName``, or ``None`` when it does not exist.
    * ``profile``: the PartitioningProfile named by ``spec.profileRef.name``, or ``None``.
    * ``pods_on_node``: the Pods with ``spec.nodeName`` = the node (any namespace, any phase).
    * ``now``: the reconcile's clock (timezone-aware; a naive one is taken as UTC).
    * ``dcm_events``: recent Events from ``source.component = amd-device-config-manager`` for this node
      (filtered again here by :func:`is_dcm_event_for` and by time).
    * ``is_admitted``: the plan's admission check; defaults to ``plan_logic.is_admitted``.
    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    raw_status = np.get("status")
    old_status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    phase = str(old_status.get("phase") or "")
    generation = deep_get(np, "metadata.generation")
    generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
    owner = str(deep_get(np, "metadata.name") or "")
    node_name = str(deep_get(np, "spec.nodeName") or "")
    profile_ref = str(deep_get(np, "spec.profileRef.name") or "")

    parsed = _read_profile(profile) if profile is not None else None
    view = parsed if isinstance(parsed, _Profile) else None
    profile_error = parsed if isinstance(parsed, str) else None

    if deep_get(np, "metadata.deletionTimestamp"):
        return _decide_deletion(np, node, owner, phase)
    if node is None:
        return _decide_node_missing(np, node_name, phase, old_status, generation, now)

    admission = is_admitted or _default_admission
    run = _Run(
        np=np,
        node=copy.deepcopy(dict(node)),
        node_name=node_name,
        owner=owner,
        profile_ref=profile_ref,
        profile=view,
        profile_error=profile_error,
        pods=pods_on_node,
        dcm_events=dcm_events,
        now=now,
        config=config,
        admitted=admission(np),
        generation=generation,
        phase=phase,
        conditions=[dict(c) for c in old_status.get("conditions") or [] if isinstance(c, Mapping)],
        current_hash=old_status.get("currentHash"),
    )

    observed = old_status.get("observedGeneration")
    spec_changed = observed is not None and generation is not None and observed != generation
    if spec_changed and phase in ACTIVE_PHASES:
        run.event(
            NORMAL,
            "Restarted",
            f"NodePartitioning spec changed during {phase}; restarting the partitioning of node {node_name}",
        )
        if phase in (APPLYING, WAITING_OPERATOR):
            run.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        run.goto(DRAINING, reset=True)
        run.cond(DRAIN_COMPLETED, "False", "DrainInProgress", "drain restarted")
    elif spec_changed and phase == FAILED:
        run.goto(PENDING, reset=True)

    for _ in range(_MAX_STEPS):
        if not _HANDLERS.get(run.phase, _Run.pending)(run):
            break

    status = dict(old_status)
    status["phase"] = run.phase
    status["conditions"] = run.conditions
    if run.current_hash:
        status["currentHash"] = run.current_hash
    if generation is not None:
        status["observedGeneration"] = generation
    changed = status_changed(old_status, status)
    return Decision(
        phase=run.phase,
        status=status if changed else None,
        node_actions=tuple(run.actions),
        events=tuple(run.events),
        requeue_after=run.requeue,
        finalizer=run.finalizer,
    )


def _decide_deletion(
    np: Mapping[str, Any], node: Mapping[str, Any] | None, owner: str, phase: str
) -> Decision:
    """The NP is being deleted: give back what we took (only ours), then let it go. No status write:
    nobody reads the status of an object on its way out."""
    actions: list[NodeAction] = []
    if node is not None:
        work = copy.deepcopy(dict(node))
        candidates: list[NodeMutation] = [Untaint(owner), Uncordon(owner)]
        if phase in (APPLYING, WAITING_OPERATOR):
            candidates.append(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        actions = [a for a in candidates if a.mutate(work)]
    return Decision(
        phase=phase or PENDING,
        node_actions=tuple(actions),
        finalizer="remove" if has_finalizer(np, FINALIZER) else None,
    )


def _decide_node_missing(
    np: Mapping[str, Any],
    node_name: str,
    phase: str,
    old_status: Mapping[str, Any],
    generation: int | None,
    now: datetime,
) -> Decision:
    """The Node is gone: Failed ``NodeNotFound`` (once), and nothing left to release."""
    finalizer: Literal["remove"] | None = "remove" if has_finalizer(np, FINALIZER) else None
    observed = old_status.get("observedGeneration")
    if phase == FAILED and not (observed is not None and generation is not None and observed != generation):
        return Decision(phase=FAILED, finalizer=finalizer)
    message = f"Node {node_name} not found"
    conditions, _ = set_condition(
        [dict(c) for c in old_status.get("conditions") or [] if isinstance(c, Mapping)],
        NODE_CORDONED,
        "False",
        "NodeNotFound",
        message,
        observed_generation=generation,
        now=now,
    )
    status = {**old_status, "phase": FAILED, "conditions": conditions}
    if generation is not None:
        status["observedGeneration"] = generation
    return Decision(
        phase=FAILED,
        status=status if status_changed(old_status, status) else None,
        events=(Event(WARNING, "NodeNotFound", message),),
        finalizer=finalizer,
    )

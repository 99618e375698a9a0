"""PartitioningPlan decisions, as pure functions of observed objects.

The plan controller observes Nodes, PartitioningProfiles and NodePartitionings from informer caches,
calls the functions below, and acts on their answers; nothing here does I/O or reads a clock (``now``
is an argument), so every decision can be unit- and property-tested. Objects are plain dicts as the
API server returns them and are never mutated.

Reconcile, in the order the controller should run it::

    sel = select_nodes(plan, nodes, profiles_by_name, all_nps)      # who gets what, and problems
    children = children_by_node(plan, all_nps)                      # this plan's, one per node
    for node, body in desired_node_partitionings(plan, sel, profiles_by_name).items():
        if np_needs_update(children.get(node), body): server-side apply body
    for name in stale_node_partitionings(plan, sel, all_nps): delete name
    for node in revoke(plan, children, eligible=sel.admissible): patch revocation_patch(children[node])
    for node in admit(plan, children, eligible=sel.admissible): patch admission_patch(children[node])
    status, changed = plan_status(plan, sel, all_nps, now, plan.get("status"))
    if changed: write status

Functions taking ``all_nps`` keep only this plan's own (:func:`is_child`). What upstream did, and the
bugs fixed here, are in ``../shared/reference/partitioning-and-kaiwo.md`` §1-§3.

Admission contract (read this if you implement the NodePartitioning state machine)
---------------------------------------------------------------------------------
Upstream never enforced ``rollout.maxParallel``/``maxUnavailable``: every node started draining at
once. Here the plan controller is the *only* place that lets a node leave Pending, so the limits are
checked by one serialised actor (the work queue never runs one plan key twice concurrently, and leader
election keeps one process) instead of by N NodePartitioning reconciles racing each other.

* The signal is the annotation :data:`ADMITTED_ANNOTATION` (``infrastructure.silogen.ai/admitted``) on
  the NodePartitioning, whose value is the ``spec.desiredHash`` it admits. :func:`is_admitted` is true
  only when that value equals the *current* ``spec.desiredHash``. A profile edit changes the hash,
  which revokes the admission by itself: the node waits for a new one.
* The NodePartitioning controller must not leave ``Pending`` (or the empty phase) for any phase that
  touches the node (``Draining`` onwards) unless ``spec.dryRun`` is true or :func:`is_admitted` is
  true *on the object it acts on*, and its first write after that decision (before any node write:
  e.g. adding its finalizer with a JSON patch that tests ``metadata.resourceVersion``) must be
  conditional on the ``resourceVersion`` it decided on, so a concurrent revocation or hash change
  makes that write conflict instead of being overtaken. It MAY go ``Pending`` → ``Succeeded``
  without admission when the node is already in the desired state (the capacity short-circuit),
  because that takes nothing out of service. Once out of Pending, admission is not re-checked: an
  operation in flight always finishes (that is what "paused" means), and a hash change mid-flight
  keeps the node's slot, because slots are counted by phase.
* Dry-run NodePartitionings need no admission: they go straight to ``Skipped``.
* Only the plan controller writes the annotation, with :func:`admission_patch` /
  :func:`revocation_patch` (JSON merge patches carrying ``metadata.resourceVersion``, so it admits
  exactly the hash it saw). It must *not* put the annotation in its server-side-apply body of the
  NodePartitioning, and must not write the annotation with that apply's field manager: an apply that
  omits a field its manager owns deletes the field.
* Counting: a node occupies a ``maxParallel`` slot while its phase is Draining, Applying,
  WaitingOperator or Verifying, *or* while it is Pending but admitted (the NodePartitioning controller
  has not picked it up yet). It is unavailable while it occupies a slot or is Failed. :func:`admit`
  admits, in node-name order, at most ``min(maxParallel - in progress, maxUnavailable - unavailable)``
  nodes, and none when that is ≤ 0 — also when the input already exceeds a limit.
* Stale caches: after admitting, the controller must not call :func:`admit` again on a cache that does
  not yet show its own annotation writes (otherwise the admitted nodes look un-admitted and would be
  admitted twice over). Keep the objects returned by the admission patches and overlay them on the
  cache until the informer has caught up (controller-runtime's "expectations"). Every other staleness
  (a phase change not yet seen) only makes :func:`admit` more conservative.
* Failed is terminal for its hash; a new ``desiredHash`` (profile edit) or deleting the
  NodePartitioning retries. A Failed node counts as unavailable, so with ``maxUnavailable: 1`` one
  failure halts the rollout until someone looks — the intended safety stop.
* Deleting a NodePartitioning (stale node, rule removed, node deleted) relies on the NodePartitioning
  controller's finalizer to undo a half-done operation (untaint, uncordon); upstream had no finalizer
  and left such nodes cordoned. If the node itself is gone, the finalizer has nothing to restore.

Decisions where the issue and upstream were silent
--------------------------------------------------
* Names: ``<plan>-<node>``; over 253 characters, a 236-character prefix (trailing ``-``/``.``
  trimmed), ``-`` and 16 hex digits of SHA-256 of ``<plan>/<node>`` (see :func:`np_name`). The plan
  label value is shortened the same way to 63 characters. An existing object of another plan holding
  the name we want is a NodeConflict instead of being silently taken over.
* Profiles must be ``Ready`` (the PartitioningProfile controller's condition) at the profile's
  current generation; a stale ``Ready=True`` (``observedGeneration`` < ``generation``) is not Ready,
  so an edit is validated before any node is drained for it. Nodes of such a rule are *held*: no new
  or updated NodePartitioning, no admission, and existing ones are kept (not deleted).
* targetSelector mismatches are not an error: such nodes are held like the above and listed in
  condition ``NodesExcluded``; they do not stop the plan from reaching Completed.
* A plan that matches no node is ``Pending`` with ``RolloutCompleted=False NoMatchingNodes``, not
  Completed as upstream: a selector typo must not report success to ``kubectl wait``/GitOps gates.
* An all-``Skipped`` dry-run plan is ``Completed`` (``RolloutCompleted=True DryRunCompleted``).
* A paused plan is ``Paused`` even if it is also invalid (PlanReady says why); otherwise an invalid
  plan (bad selector, rule overlap, cross-plan conflict) is ``Degraded`` and nothing is applied,
  admitted or deleted.
* Summary counts and the phase use each node's *effective* phase: a Succeeded/Failed/Skipped
  NodePartitioning whose hash or dry-run flag is about to be replaced counts as pending, so a profile
  edit never flashes Completed. ``nodeStatuses`` shows the NodePartitionings' own phases.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery.conditions import format_time, get_condition, set_condition, status_changed
from aiplane.apimachinery.meta import controller_of, controller_owner_reference, deep_get
from aiplane.apimachinery.selectors import Selector, compile_selector
from aiplane.controllers.partitioning.hashing import desired_hash

__all__ = [
    "ADMITTED_ANNOTATION",
    "API_VERSION",
    "CONTROL_PLANE_LABELS",
    "IN_PROGRESS_PHASES",
    "NODE_PARTITIONING_KIND",
    "PLAN_LABEL",
    "UNAVAILABLE_PHASES",
    "ProfileState",
    "RolloutCounts",
    "RolloutLimits",
    "RuleView",
    "Selection",
    "admission_capacity",
    "admission_patch",
    "admit",
    "children_by_node",
    "desired_node_partitionings",
    "effective_phase",
    "is_admitted",
    "is_child",
    "is_control_plane",
    "np_name",
    "np_needs_update",
    "np_phase",
    "plan_label_value",
    "plan_status",
    "profile_state",
    "revocation_patch",
    "revoke",
    "rollout_counts",
    "rollout_limits",
    "select_nodes",
    "stale_node_partitionings",
]

API_VERSION: Final = "infrastructure.silogen.ai/v1alpha1"
NODE_PARTITIONING_KIND: Final = "NodePartitioning"
PLAN_LABEL: Final = "infrastructure.silogen.ai/plan"
ADMITTED_ANNOTATION: Final = "infrastructure.silogen.ai/admitted"
CONTROL_PLANE_LABELS: Final = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

MAX_NAME_LENGTH: Final = 253  # DNS-1123 subdomain
MAX_LABEL_VALUE_LENGTH: Final = 63
_DIGEST_LENGTH: Final = 16  # hex digits (64 bits) appended to shortened names

PENDING: Final = "Pending"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SKIPPED: Final = "Skipped"
VERIFYING: Final = "Verifying"
APPLYING_PHASES: Final = frozenset({"Draining", "Applying", "WaitingOperator"})
IN_PROGRESS_PHASES: Final = APPLYING_PHASES | {VERIFYING}
UNAVAILABLE_PHASES: Final = IN_PROGRESS_PHASES | {FAILED}

# Plan condition types (upstream names) and ours.
PLAN_READY: Final = "PlanReady"
NODES_EXCLUDED: Final = "NodesExcluded"
ROLLOUT_PROGRESSING: Final = "RolloutProgressing"
ROLLOUT_COMPLETED: Final = "RolloutCompleted"
ROLLOUT_DEGRADED: Final = "RolloutDegraded"
PAUSED: Final = "Paused"

_MAX_LISTED: Final = 10  # names listed in one message before "and N more"
_MAX_MESSAGE: Final = 4000


# --- small readers -------------------------------------------------------------------------------


def _name(obj: Mapping[str, Any]) -> str:
    name = deep_get(obj, "metadata.name")
    return name if isinstance(name, str) else ""


def _uid(obj: Mapping[str, Any]) -> str | None:
    uid = deep_get(obj, "metadata.uid")
    return uid if isinstance(uid, str) and uid else None


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(deep_get(obj, "metadata.deletionTimestamp"))


def _generation(obj: Mapping[str, Any]) -> int | None:
    gen = deep_get(obj, "metadata.generation")
    return gen if isinstance(gen, int) and not isinstance(gen, bool) and gen > 0 else None


def _flag(spec: Mapping[str, Any], key: str) -> bool:
    return spec.get(key) is True


def _listed(names: Iterable[str]) -> str:
    """``a, b, c`` or ``a, b, … and 7 more``: messages stay readable on thousand-node fleets."""
    items = list(names)
    if len(items) <= _MAX_LISTED:
        return ", ".join(items)
    return f"{', '.join(items[:_MAX_LISTED])} and {len(items) - _MAX_LISTED} more"


def _cap(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 14] + " … (truncated)"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- naming --------------------------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_LENGTH]


def _shorten(full: str, limit: int, digest_of: str) -> str:
    """``full`` if it fits, else a prefix of it, ``-`` and a digest of ``digest_of``.

    The prefix loses trailing ``-``/``.`` so the result still ends a DNS label with an alphanumeric;
    the digest (lower-case hex) keeps distinct inputs apart although their prefixes coincide.
    """
    if len(full) <= limit:
        return full
    prefix = full[: limit - _DIGEST_LENGTH - 1].rstrip("-.")
    return f"{prefix}-{_digest(digest_of)}"


def np_name(plan_name: str, node_name: str) -> str:
    """The NodePartitioning name for a node: ``<plan>-<node>``, or a shortened form over 253 chars.

    Both inputs are DNS-1123 subdomains (the API server enforces it for plans and nodes), so the
    joined name is one too. When it is too long it becomes ``<first 236 chars, trailing -/. trimmed>-
    <16 hex of sha256("<plan>/<node>")>``: deterministic, still a valid subdomain of at most 253
    characters, and distinct pairs differ in the digest (``/`` cannot occur in either name, so the
    digest input is unambiguous even where ``<plan>-<node>`` is not, e.g. ``a-b``+``c`` vs ``a``+``b-c``;
    :func:`select_nodes` reports an object of another plan that already holds a name as a conflict).
    """
    return _shorten(f"{plan_name}-{node_name}", MAX_NAME_LENGTH, f"{plan_name}/{node_name}")


def plan_label_value(plan_name: str) -> str:
    """The ``infrastructure.silogen.ai/plan`` label value: the plan name, shortened like
    :func:`np_name` when it exceeds the 63 characters a label value may have. The label is for
    ``kubectl get np -l`` and informer selectors; ownership itself is ``spec.planRef`` + ownerRef."""
    return _shorten(plan_name, MAX_LABEL_VALUE_LENGTH, plan_name)


# --- rollout policy ------------------------------------------------------------------------------


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


def rollout_limits(plan: Mapping[str, Any]) -> RolloutLimits:
    """The effective rollout policy.

    Defaults are the CRD's (1, 1, exclude control plane). Upstream excluded control-plane nodes only
    when ``rollout`` was present with ``maxParallel`` set; here only an explicit
    ``excludeControlPlane: false`` includes them. A value the CRD would reject (``maxParallel: 0``) is
    taken literally — admit nothing — rather than "fixed", because a limit must never be loosened.
    """
    rollout = _spec(plan).get("rollout")
    if not isinstance(rollout, Mapping):
        return RolloutLimits()
    return RolloutLimits(
        max_parallel=_non_negative_int(rollout.get("maxParallel"), 1),
        max_unavailable=_non_negative_int(rollout.get("maxUnavailable"), 1),
        exclude_control_plane=rollout.get("excludeControlPlane") is not False,
    )


def is_control_plane(node: Mapping[str, Any]) -> bool:
    """Label *presence* of ``node-role.kubernetes.io/control-plane`` or ``/master`` (any value)."""
    labels = deep_get(node, "metadata.labels") or {}
    return isinstance(labels, Mapping) and any(key in labels for key in CONTROL_PLANE_LABELS)


# --- NodePartitioning accessors ------------------------------------------------------------------


def np_phase(np: Mapping[str, Any]) -> str:
    """``status.phase``, with the empty/absent phase read as ``Pending`` (as upstream counts it)."""
    return _str(_status(np).get("phase")) or PENDING


def _np_node(np: Mapping[str, Any]) -> str:
    return _str(_spec(np).get("nodeName"))


def _np_hash(np: Mapping[str, Any]) -> str:
    return _str(_spec(np).get("desiredHash"))


def is_admitted(np: Mapping[str, Any]) -> bool:
    """Has the plan admitted this NodePartitioning for its *current* ``spec.desiredHash``?

    The one check the NodePartitioning controller makes before leaving Pending (see the module
    docstring). An admission for an older hash does not count, so a profile edit never rides on the
    admission of the previous rollout.
    """
    annotations = deep_get(np, "metadata.annotations") or {}
    if not isinstance(annotations, Mapping):
        return False
    admitted = annotations.get(ADMITTED_ANNOTATION)
    current = _np_hash(np)
    return bool(current) and admitted == current


def admission_patch(np: Mapping[str, Any]) -> dict[str, Any]:
    """JSON merge patch admitting ``np`` for the hash it carries now.

    ``metadata.resourceVersion`` makes it conditional: if the object changed since it was read (a new
    hash, a phase change), the API server answers 409 and the controller re-decides.
    """
    return {
        "metadata": {
            "resourceVersion": deep_get(np, "metadata.resourceVersion"),
            "annotations": {ADMITTED_ANNOTATION: _np_hash(np)},
        }
    }


def revocation_patch(np: Mapping[str, Any]) -> dict[str, Any]:
    """JSON merge patch withdrawing an admission (``null`` deletes the key), conditional like
    :func:`admission_patch`, so it cannot race the NodePartitioning controller's status write."""
    return {
        "metadata": {
            "resourceVersion": deep_get(np, "metadata.resourceVersion"),
            "annotations": {ADMITTED_ANNOTATION: None},
        }
    }


def is_child(plan: Mapping[str, Any], np: Mapping[str, Any]) -> bool:
    """Is ``np`` this plan's NodePartitioning?

    Upstream matched ``spec.planRef.name`` only, so a plan deleted and re-created under the same
    name adopted its predecessor's objects while the garbage collector was deleting them (and an
    apply adding a second controller reference is rejected). Here the UID must agree too, wherever
    one is recorded (``spec.planRef.uid``, the controller ownerReference).
    """
    if _str(deep_get(np, "spec.planRef.name")) != _name(plan) or not _name(plan):
        return False
    uid = _uid(plan)
    if uid is None:
        return True
    ref_uid = deep_get(np, "spec.planRef.uid")
    if ref_uid and ref_uid != uid:
        return False
    owner = controller_of(np)
    return owner is None or owner.get("uid") == uid


def children_by_node(
    plan: Mapping[str, Any], nps: Iterable[Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """This plan's NodePartitionings keyed by ``spec.nodeName`` (sorted), one per node.

    If a node has more than one (an object left over from an older naming), the one with the
    expected name wins, then one not being deleted; :func:`stale_node_partitionings` deletes the
    rest.
    """
    plan_name = _name(plan)
    best: dict[str, Mapping[str, Any]] = {}

    def rank(np: Mapping[str, Any], node: str) -> tuple[bool, bool, str]:
        return (_name(np) != np_name(plan_name, node), _deleting(np), _name(np))

    for np in nps:
        if not is_child(plan, np):
            continue
        node = _np_node(np)
        if not node:
            continue
        if node not in best or rank(np, node) < rank(best[node], node):
            best[node] = np
    return {node: best[node] for node in sorted(best)}


# --- profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfileState:
    """Can nodes be started on this profile? ``reason`` is ``Ready`` when they can."""

    ready: bool
    reason: str
    message: str
    desired_hash: str | None = None
    target_selector: Selector | None = None  # None: no guard rail


def profile_state(name: str, profile: Mapping[str, Any] | None) -> ProfileState:
    """Readiness of the PartitioningProfile a rule references.

    Not ready when it is missing, being deleted, unusable (no ``dcmProfileName``, a bad quantity, an
    invalid ``targetSelector``), or its ``Ready`` condition is absent, not ``True``, or older than the
    profile's generation (an edit the profile controller has not validated yet).
    """
    if not name:
        return ProfileState(False, "NotFound", "the rule has no profileRef.name")
    if profile is None:
        return ProfileState(False, "NotFound", f"PartitioningProfile {name} not found")
    if _deleting(profile):
        return ProfileState(False, "Deleting", f"PartitioningProfile {name} is being deleted")
    spec = _spec(profile)
    try:
        hash_ = desired_hash(spec)
    except ValueError as exc:
        return ProfileState(False, "InvalidSpec", f"PartitioningProfile {name} is invalid: {exc}")
    target: Selector | None = None
    raw_target = spec.get("targetSelector")
    if raw_target is not None:
        try:
            target = compile_selector(raw_target)
        except ValueError as exc:
            return ProfileState(
                False, "InvalidSpec", f"PartitioningProfile {name} has an invalid targetSelector: {exc}"
            )
    conditions = _status(profile).get("conditions")
    ready = get_condition(conditions if isinstance(conditions, list) else None, "Ready")
    if ready is None:
        return ProfileState(False, "NotReady", f"PartitioningProfile {name} has no Ready condition yet")
    if ready.get("status") != "True":
        detail = ": ".join(x for x in (_str(ready.get("reason")), _str(ready.get("message"))) if x)
        return ProfileState(
            False, "NotReady", f"PartitioningProfile {name} is not Ready" + (f" ({detail})" if detail else "")
        )
    generation = _generation(profile)
    observed = ready.get("observedGeneration")
    if not isinstance(observed, int):
        observed = _status(profile).get("observedGeneration")
    if generation is not None and isinstance(observed, int) and observed < generation:
        return ProfileState(
            False,
            "NotReady",
            f"PartitioningProfile {name} generation {generation} is not validated yet "
            f"(Ready is for generation {observed})",
        )
    return ProfileState(True, "Ready", f"PartitioningProfile {name} is Ready", hash_, target)


# --- selection -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleView:
    """One ``spec.rules[i]`` as evaluated: its name in messages, its profile and whether it works."""

    index: int
    description: str  # the rule's description, or "rule-<i> (<dcmProfileName>)"
    profile_name: str
    profile: ProfileState
    selector_error: str | None = None

    @property
    def desired_hash(self) -> str | None:
        return self.profile.desired_hash


@dataclass(frozen=True)
class Selection:
    """What a plan selects, and every reason it cannot apply some or all of it.

    Node names and all lists are sorted, so messages and orders are deterministic.
    """

    plan_name: str
    rules: tuple[RuleView, ...]
    node_names: tuple[str, ...]  # every node observed
    matches: Mapping[str, tuple[int, ...]]  # node -> indices of the rules matching it (≥ 1)
    control_plane_excluded: tuple[str, ...] = ()  # control-plane nodes some rule would match
    overlaps: tuple[tuple[str, tuple[int, ...]], ...] = ()  # node matched by > 1 rule
    conflicts: tuple[tuple[str, tuple[str, ...]], ...] = ()  # node -> "<plan>/<np>" of other plans
    name_collisions: tuple[tuple[str, str], ...] = ()  # node -> "<plan>/<np>" already holding its name
    held: tuple[tuple[str, int], ...] = ()  # (node, rule): profile not Ready
    target_mismatches: tuple[tuple[str, int], ...] = ()  # (node, rule): profile targetSelector
    _assigned: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def selector_errors(self) -> tuple[str, ...]:
        return tuple(r.selector_error for r in self.rules if r.selector_error)

    @property
    def valid(self) -> bool:
        """False when nothing may be applied: a bad selector, a rule overlap or a conflict."""
        return not (self.selector_errors or self.overlaps or self.conflicts or self.name_collisions)

    @property
    def assigned(self) -> Mapping[str, int]:
        """Nodes matched by exactly one rule -> that rule: the nodes whose NodePartitioning is kept."""
        return self._assigned

    @property
    def targets(self) -> dict[str, int]:
        """Assigned nodes that may be worked on (profile Ready, targetSelector matched)."""
        blocked = {n for n, _ in self.held} | {n for n, _ in self.target_mismatches}
        return {n: i for n, i in self._assigned.items() if n not in blocked}

    @property
    def admissible(self) -> frozenset[str]:
        """Nodes :func:`admit` may admit: the targets of a valid plan, nothing otherwise."""
        return frozenset(self.targets) if self.valid else frozenset()


def _rule_description(index: int, rule: Mapping[str, Any], profile: Mapping[str, Any] | None) -> str:
    described = _str(rule.get("description")).strip()
    if described:
        return described
    dcm = _str(deep_get(profile, "spec.dcmProfileName")) if profile else ""
    return f"rule-{index} ({dcm or _str(deep_get(rule, 'profileRef.name')) or 'no profile'})"


def select_nodes(
    plan: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    profiles_by_name: Mapping[str, Mapping[str, Any]],
    other_nps: Iterable[Mapping[str, Any]],
) -> Selection:
    """Which rule selects which node, and what stops the plan from applying it.

    * Rules in index order; ``matchLabels``/``matchExpressions`` with kube semantics (``{}`` matches
      every node). An invalid selector matches nothing and invalidates the plan (ObservationFailed).
    * Control-plane nodes are skipped unless ``excludeControlPlane: false``.
    * A node matched by two rules is an overlap (upstream's docs said "first match wins", its code
      failed the plan; we fail the plan, naming both rules). A node for which another plan has a
      NodePartitioning, in any phase (even one of a deleted plan), is a conflict: two plans must never
      drive one node. ``other_nps`` may contain every NodePartitioning; this plan's own are ignored.
    * Nodes of a rule whose profile is not Ready are held; nodes that do not match their profile's
      ``targetSelector`` are listed and not touched.
    """
    plan_name = _name(plan)
    limits = rollout_limits(plan)
    raw_rules = _spec(plan).get("rules")
    rules: list[RuleView] = []
    selectors: list[Selector | None] = []
    for i, raw in enumerate(raw_rules if isinstance(raw_rules, list) else []):
        rule: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        profile_name = _str(deep_get(rule, "profileRef.name"))
        profile = profiles_by_name.get(profile_name) if profile_name else None
        description = _rule_description(i, rule, profile)
        selector: Selector | None
        error: str | None = None
        try:
            selector = compile_selector(rule.get("selector"))
        except ValueError as exc:
            selector, error = None, f"rule {description!r}: invalid selector: {exc}"
        rules.append(RuleView(i, description, profile_name, profile_state(profile_name, profile), error))
        selectors.append(selector)

    named = sorted(((_name(n), n) for n in nodes if _name(n)), key=lambda item: item[0])
    matches: dict[str, tuple[int, ...]] = {}
    excluded: list[str] = []
    for node_name, node in named:
        labels = deep_get(node, "metadata.labels") or {}
        labels = labels if isinstance(labels, Mapping) else {}
        hits = tuple(i for i, sel in enumerate(selectors) if sel is not None and sel.matches(labels))
        if not hits:
            continue
        if limits.exclude_control_plane and is_control_plane(node):
            excluded.append(node_name)
            continue
        matches[node_name] = hits
    labels_by_node = {name: deep_get(node, "metadata.labels") or {} for name, node in named}

    others = [np for np in other_nps if not is_child(plan, np)]
    others_by_node: dict[str, list[str]] = {}
    others_by_name: dict[str, Mapping[str, Any]] = {}
    for np in others:
        ref = f"{_str(deep_get(np, 'spec.planRef.name')) or '<no plan>'}/{_name(np)}"
        others_by_node.setdefault(_np_node(np), []).append(ref)
        others_by_name[_name(np)] = np

    overlaps: list[tuple[str, tuple[int, ...]]] = []
    conflicts: list[tuple[str, tuple[str, ...]]] = []
    collisions: list[tuple[str, str]] = []
    held: list[tuple[str, int]] = []
    mismatched: list[tuple[str, int]] = []
    assigned: dict[str, int] = {}
    for node_name, hits in matches.items():
        if len(hits) > 1:
            overlaps.append((node_name, hits))
        if node_name in others_by_node:
            conflicts.append((node_name, tuple(sorted(others_by_node[node_name]))))
        if len(hits) != 1:
            continue
        index = hits[0]
        assigned[node_name] = index
        holder = others_by_name.get(np_name(plan_name, node_name))
        if holder is not None and _np_node(holder) != node_name:
            ref = f"{_str(deep_get(holder, 'spec.planRef.name')) or '<no plan>'}/{_name(holder)}"
            collisions.append((node_name, ref))
        state = rules[index].profile
        if not state.ready:
            held.append((node_name, index))
        elif state.target_selector is not None and not state.target_selector.matches(
            labels_by_node.get(node_name)
        ):
            mismatched.append((node_name, index))

    return Selection(
        plan_name=plan_name,
        rules=tuple(rules),
        node_names=tuple(name for name, _ in named),
        matches=matches,
        control_plane_excluded=tuple(excluded),
        overlaps=tuple(overlaps),
        conflicts=tuple(conflicts),
        name_collisions=tuple(collisions),
        held=tuple(held),
        target_mismatches=tuple(mismatched),
        _assigned=assigned,
    )


# --- desired NodePartitionings -------------------------------------------------------------------


def desired_node_partitionings(
    plan: Mapping[str, Any],
    selection: Selection,
    profiles_by_name: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """The NodePartitioning each target node should have, for server-side apply, keyed by node.

    Empty for an invalid plan ("nothing is applied"). Held and mismatched nodes get nothing, so
    their existing objects keep their old hash (a profile edit that is not validated yet does not
    reach them). The body never carries the admission annotation (see the module docstring).
    """
    if not selection.valid:
        return {}
    plan_name = _name(plan)
    owner = controller_owner_reference(plan)
    dry_run = _flag(_spec(plan), "dryRun")
    label = plan_label_value(plan_name)
    result: dict[str, dict[str, Any]] = {}
    for node, index in sorted(selection.targets.items()):
        profile_name = selection.rules[index].profile_name
        profile = profiles_by_name.get(profile_name)
        if profile is None:
            continue
        try:
            hash_ = desired_hash(_spec(profile))
        except ValueError:
            continue
        result[node] = {
            "apiVersion": API_VERSION,
            "kind": NODE_PARTITIONING_KIND,
            "metadata": {
                "name": np_name(plan_name, node),
                "labels": {PLAN_LABEL: label},
                "ownerReferences": [owner],
            },
            "spec": {
                "planRef": {"name": plan_name, "uid": owner["uid"]},
                "dryRun": dry_run,
                "nodeName": node,
                "desiredHash": hash_,
                "profileRef": {"name": profile_name},
            },
        }
    return result


def np_needs_update(existing: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Must ``desired`` be applied over ``existing``? (Absent objects must be created.)

    Compares exactly the fields the plan owns: the spec (hash, profile, dry-run, node, planRef),
    the plan label and the controller reference. Status, the admission annotation and fields other
    managers own are ignored, so a steady cluster causes no apply at all.
    """
    if existing is None:
        return True
    have, want = _spec(existing), _spec(desired)
    if _flag(have, "dryRun") != _flag(want, "dryRun"):
        return True
    for path in ("desiredHash", "nodeName", "profileRef.name", "planRef.name", "planRef.uid"):
        if deep_get(have, path) != deep_get(want, path):
            return True
    if deep_get(existing, ("metadata", "labels", PLAN_LABEL)) != deep_get(
        desired, ("metadata", "labels", PLAN_LABEL)
    ):
        return True
    have_owner, want_owner = controller_of(existing), controller_of(desired)
    return (have_owner or {}).get("uid") != (want_owner or {}).get("uid")


# --- admission -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RolloutCounts:
    """How many nodes occupy a ``maxParallel`` slot, and how many are Failed."""

    in_progress: int
    failed: int

    @property
    def unavailable(self) -> int:
        return self.in_progress + self.failed


def _occupies_slot(np: Mapping[str, Any]) -> bool:
    phase = np_phase(np)
    if phase in IN_PROGRESS_PHASES:
        return True
    return phase == PENDING and is_admitted(np) and not _flag(_spec(np), "dryRun")


def rollout_counts(nps: Iterable[Mapping[str, Any]]) -> RolloutCounts:
    """In-progress (admitted-but-Pending included) and Failed NodePartitionings among ``nps``."""
    in_progress = failed = 0
    for np in nps:
        if _occupies_slot(np):
            in_progress += 1
        elif np_phase(np) == FAILED:
            failed += 1
    return RolloutCounts(in_progress, failed)


def admission_capacity(plan: Mapping[str, Any], nps: Iterable[Mapping[str, Any]]) -> int:
    """How many more nodes may be admitted now (≥ 0), ignoring pause and dry-run."""
    limits = rollout_limits(plan)
    counts = rollout_counts(nps)
    return max(0, min(limits.max_parallel - counts.in_progress, limits.max_unavailable - counts.unavailable))


def _awaiting_admission(np: Mapping[str, Any]) -> bool:
    return (
        np_phase(np) == PENDING
        and not _flag(_spec(np), "dryRun")
        and bool(_np_hash(np))
        and not is_admitted(np)
        and not _deleting(np)
    )


def admit(
    plan: Mapping[str, Any],
    nps_by_node: Mapping[str, Mapping[str, Any]],
    *,
    eligible: Collection[str] | None = None,
) -> list[str]:
    """The nodes to admit now, in node-name order (patch each with :func:`admission_patch`).

    Nothing when the plan is paused or dry-run (dry-run NodePartitionings need no admission). Only
    Pending, non-dry-run NodePartitionings not yet admitted for their current hash are candidates,
    and only nodes in ``eligible`` when given (pass ``selection.admissible``: it is empty for an
    invalid plan and leaves out held nodes). The limits count *every* NodePartitioning in
    ``nps_by_node``, eligible or not: a held node that is mid-operation still occupies its slot.
    """
    spec = _spec(plan)
    if _flag(spec, "paused") or _flag(spec, "dryRun"):
        return []
    capacity = admission_capacity(plan, nps_by_node.values())
    if capacity <= 0:
        return []
    candidates = sorted(
        node
        for node, np in nps_by_node.items()
        if (eligible is None or node in eligible) and _awaiting_admission(np)
    )
    return candidates[:capacity]


def revoke(
    plan: Mapping[str, Any],
    nps_by_node: Mapping[str, Mapping[str, Any]],
    *,
    eligible: Collection[str] | None = None,
) -> list[str]:
    """Admitted nodes that have not started yet and should not start now (paused, dry-run, or no
    longer eligible), in node-name order; patch each with :func:`revocation_patch`.

    Without this, a node admitted just before the user paused the plan would still start. Best
    effort by design: if the NodePartitioning controller already left Pending, the conditional
    patch or its own conditional status write conflicts, and the operation finishes as in flight.
    """
    spec = _spec(plan)
    stop_all = _flag(spec, "paused") or _flag(spec, "dryRun")
    return sorted(
        node
        for node, np in nps_by_node.items()
        if np_phase(np) == PENDING
        and is_admitted(np)
        and not _deleting(np)
        and (stop_all or (eligible is not None and node not in eligible))
    )


# --- cleanup -------------------------------------------------------------------------------------


def stale_node_partitionings(
    plan: Mapping[str, Any], selection: Selection, nps: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Names of this plan's NodePartitionings to delete, sorted.

    A NodePartitioning is stale when its node is no longer matched by exactly one rule (relabelled,
    rule removed or changed, node became an excluded control-plane node, node deleted), or when it
    duplicates the one :func:`children_by_node` keeps for its node. Held and mismatched nodes keep
    theirs. Nothing is deleted while the plan is invalid (upstream did the same): an overlap or a
    conflict is usually a half-finished edit, and deleting would restart nodes.

    Deleting one mid-operation is safe only because the NodePartitioning controller's finalizer
    restores the node (untaint, uncordon) before the object goes away. Objects already being deleted
    are not listed again, so a steady cluster sees no delete calls.
    """
    if not selection.valid:
        return []
    children = [np for np in nps if is_child(plan, np)]
    kept = children_by_node(plan, children)
    stale: list[str] = []
    for np in children:
        if _deleting(np):
            continue
        node = _np_node(np)
        if node not in selection.assigned or kept.get(node) is not np:
            stale.append(_name(np))
    return sorted(stale)


# --- status --------------------------------------------------------------------------------------


def effective_phase(np: Mapping[str, Any], desired: str | None, plan_dry_run: bool) -> str:
    """The phase a node counts under in the plan's summary.

    A terminal NodePartitioning that the plan is about to re-target (``desired`` hash differs from
    ``spec.desiredHash``), a Succeeded one whose ``currentHash`` lags its ``desiredHash``, and a
    Skipped one of a plan that is no longer dry-run all count as ``Pending``: they will go back to
    Pending once the NodePartitioning controller sees them, and the plan is not done with them.
    """
    phase = np_phase(np)
    if phase in (SUCCEEDED, FAILED, SKIPPED) and desired is not None and _np_hash(np) != desired:
        return PENDING
    if phase == SUCCEEDED and _str(_status(np).get("currentHash")) != _np_hash(np):
        return PENDING
    if phase == SKIPPED and not plan_dry_run:
        return PENDING
    return phase


def _last_error(np: Mapping[str, Any]) -> str | None:
    status = _status(np)
    explicit = status.get("lastError")
    if isinstance(explicit, str) and explicit:
        return explicit
    if np_phase(np) != FAILED:
        return None
    conditions = status.get("conditions")
    failing = [
        c
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, Mapping) and c.get("status") == "False" and _str(c.get("message"))
    ]
    if not failing:
        return None
    latest = max(failing, key=lambda c: _str(c.get("lastTransitionTime")))
    return f"{_str(latest.get('reason'))}: {_str(latest.get('message'))}".lstrip(": ")


def _node_status(np: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"nodeName": _np_node(np), "desiredHash": _np_hash(np)}
    current = _str(_status(np).get("currentHash"))
    if current:
        entry["currentHash"] = current
    entry["phase"] = np_phase(np)
    retries = _status(np).get("retries", _status(np).get("attempts"))
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        entry["retries"] = retries
    error = _last_error(np)
    if error:
        entry["lastError"] = _cap(error)
    return entry


def _node_statuses(
    children: Sequence[Mapping[str, Any]], previous: Mapping[str, Any], stamp: str
) -> list[dict[str, Any]]:
    """One entry per NodePartitioning; ``lastUpdateTime`` moves only when the entry changed."""
    before: dict[str, Mapping[str, Any]] = {}
    old = previous.get("nodeStatuses")
    for item in old if isinstance(old, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("nodeName"), str):
            before.setdefault(item["nodeName"], item)
    result: list[dict[str, Any]] = []
    for np in children:
        entry = _node_status(np)
        prior = before.get(entry["nodeName"])
        kept = stamp
        if prior is not None and {k: v for k, v in prior.items() if k != "lastUpdateTime"} == entry:
            kept = _str(prior.get("lastUpdateTime")) or stamp
        entry["lastUpdateTime"] = kept
        result.append(entry)
    return result


def _plan_ready(selection: Selection, matching: int) -> tuple[str, str, str]:
    if selection.selector_errors:
        return (
            "False",
            "ObservationFailed",
            "Failed to observe cluster state: " + "; ".join(selection.selector_errors),
        )
    desc = {r.index: r.description for r in selection.rules}
    conflict_parts = [
        f"node {node} is already targeted by other partitioning plan(s): {', '.join(refs)}"
        for node, refs in selection.conflicts
    ] + [
        f"NodePartitioning name {np_name(selection.plan_name, node)} for node {node} is already used by {ref}"
        for node, ref in selection.name_collisions
    ]
    if selection.overlaps:
        parts = [
            f"multiple partitioning rules match node {node}: {', '.join(desc[i] for i in hits)}"
            for node, hits in selection.overlaps
        ]
        return (
            "False",
            "PlanningFailed",
            "Failed to compute desired state: " + "; ".join(parts + conflict_parts),
        )
    if conflict_parts:
        return "False", "NodeConflict", "; ".join(conflict_parts)
    if selection.held:
        by_rule: dict[int, list[str]] = {}
        for node, index in selection.held:
            by_rule.setdefault(index, []).append(node)
        parts = [
            f"{selection.rules[i].profile.message} (rule {desc[i]!r}); holding nodes {_listed(nodes)}"
            for i, nodes in sorted(by_rule.items())
        ]
        return "False", "ProfileNotReady", "; ".join(parts)
    message = f"Plan is valid, targeting {matching} nodes"
    if selection.control_plane_excluded:
        message += f" ({_plural(len(selection.control_plane_excluded), 'control-plane node')} excluded)"
    return "True", "PlanValid", message


def _nodes_excluded(selection: Selection, profiles: Mapping[int, RuleView]) -> tuple[str, str, str]:
    if not selection.target_mismatches:
        return "False", "NoNodesExcluded", "Every selected node matches its profile's targetSelector"
    by_rule: dict[int, list[str]] = {}
    for node, index in selection.target_mismatches:
        by_rule.setdefault(index, []).append(node)
    parts = []
    for i, nodes in sorted(by_rule.items()):
        rule = profiles[i]
        target = rule.profile.target_selector
        parts.append(
            f"{_listed(nodes)} not touched: PartitioningProfile {rule.profile_name} requires "
            f"targetSelector {target.to_string() if target is not None else ''!r}"
        )
    return "True", "TargetSelectorMismatch", "; ".join(parts)


def plan_status(
    plan: Mapping[str, Any],
    selection: Selection,
    nps: Iterable[Mapping[str, Any]],
    now: datetime,
    previous_status: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], bool]:
    """The plan's status and whether it differs from ``previous_status`` (False: write nothing).

    Summary buckets (over this plan's NodePartitionings, by :func:`effective_phase`): pending,
    applying (Draining, Applying, WaitingOperator), verifying, succeeded, failed, skipped;
    ``matchingNodes`` counts nodes any rule selects (after control-plane exclusion), ``totalNodes``
    the NodePartitionings. Phase: paused → Paused; invalid plan or failed > 0 → Degraded; anything
    pending or in progress → Progressing; every target done (Succeeded, or Skipped for a dry-run
    plan) with no node held → Completed; else Pending. Conditions follow ``set_condition``
    (``lastTransitionTime`` moves only on a flip), all carrying ``observedGeneration``;
    ``lastSyncTime`` moves only when something else changed, so a steady plan is never rewritten.
    """
    prev: Mapping[str, Any] = previous_status if isinstance(previous_status, Mapping) else {}
    spec = _spec(plan)
    paused, dry_run = _flag(spec, "paused"), _flag(spec, "dryRun")
    generation = _generation(plan)
    stamp = format_time(now)
    limits = rollout_limits(plan)

    children = sorted((np for np in nps if is_child(plan, np)), key=lambda np: (_np_node(np), _name(np)))
    desired_by_node: dict[str, str | None] = (
        {n: selection.rules[i].desired_hash for n, i in selection.targets.items()} if selection.valid else {}
    )
    effective = {id(np): effective_phase(np, desired_by_node.get(_np_node(np)), dry_run) for np in children}
    counts = Counter(effective.values())
    pending = counts[PENDING]
    applying = sum(counts[p] for p in APPLYING_PHASES)
    verifying = counts[VERIFYING]
    succeeded, failed, skipped = counts[SUCCEEDED], counts[FAILED], counts[SKIPPED]
    in_progress = applying + verifying
    matching = len(selection.matches)
    summary = {
        "totalNodes": len(children),
        "matchingNodes": matching,
        "pending": pending,
        "applying": applying,
        "verifying": verifying,
        "succeeded": succeeded,
        "failed": failed,
        "skipped": skipped,
    }

    done_phases = {SUCCEEDED, SKIPPED} if dry_run else {SUCCEEDED}
    done_nodes = {_np_node(np) for np in children if effective[id(np)] in done_phases}
    targets = selection.targets
    complete = (
        selection.valid
        and not selection.held
        and bool(targets)
        and all(node in done_nodes for node in targets)
        and pending == in_progress == failed == 0
    )

    if paused:
        phase = "Paused"
    elif not selection.valid or failed > 0:
        phase = "Degraded"
    elif in_progress + pending > 0:
        phase = "Progressing"
    elif complete:
        phase = "Completed"
    else:
        phase = PENDING

    # RolloutProgressing: is anything moving, and if pending nodes are not, why.
    by_node = children_by_node(plan, children)
    if complete:
        progressing = ("False", "RolloutComplete", f"All {len(targets)} nodes done")
    elif in_progress > 0:
        progressing = (
            "True",
            "NodeOperationsInProgress",
            f"{_plural(in_progress, 'node')} in progress, {pending} pending",
        )
    elif pending > 0:
        admissible_pending = [
            n for n, np in by_node.items() if n in selection.admissible and effective[id(np)] == PENDING
        ]
        counts_now = rollout_counts(by_node.values())
        if paused:
            progressing = ("False", "PlanPaused", f"Plan is paused; {_plural(pending, 'node')} pending")
        elif not selection.valid:
            progressing = ("False", "PlanNotReady", f"{_plural(pending, 'node')} pending; see PlanReady")
        elif dry_run:
            progressing = ("True", "NodeOperationsInProgress", f"Dry run: {_plural(pending, 'node')} pending")
        elif not admissible_pending:
            progressing = (
                "False",
                "RolloutBlocked",
                f"{_plural(pending, 'node')} pending, none can start: their profile is not Ready or "
                "does not target them (see PlanReady, NodesExcluded)",
            )
        elif admission_capacity(plan, by_node.values()) == 0 and counts_now.in_progress == 0:
            why = (
                "maxUnavailable is 0, so no node may be taken out of service"
                if limits.max_unavailable == 0
                else f"{_plural(counts_now.failed, 'failed node')} use up maxUnavailable="
                f"{limits.max_unavailable}; delete or re-target the failed NodePartitionings to continue"
                if counts_now.failed
                else f"maxParallel is {limits.max_parallel}"
            )
            progressing = ("False", "RolloutBlocked", f"{_plural(pending, 'node')} pending: {why}")
        else:
            progressing = ("True", "NodeOperationsInProgress", f"0 nodes in progress, {pending} pending")
    else:
        progressing = ("False", "NoNodesInProgress", "No node operations in progress")

    if complete:
        completed = (
            ("True", "DryRunCompleted", f"Dry run complete: {len(targets)} nodes would be partitioned")
            if dry_run
            else ("True", "AllNodesSucceeded", f"All {len(targets)} nodes succeeded")
        )
    elif matching == 0:
        completed = ("False", "NoMatchingNodes", "No nodes match the plan's rules")
    else:
        completed = ("False", "RolloutInProgress", f"{len(done_nodes & set(targets))}/{matching} nodes done")

    failed_nodes = [_np_node(np) for np in children if effective[id(np)] == FAILED]
    degraded = (
        ("True", "NodeFailures", f"{_plural(failed, 'node')} failed: {_listed(failed_nodes)}")
        if failed
        else ("False", "NoFailures", "No node failures")
    )
    paused_cond = (
        ("True", "PlanPaused", "Plan is paused by user")
        if paused
        else ("False", "PlanActive", "Plan is active")
    )

    old_conditions = prev.get("conditions")
    conditions: list[dict[str, Any]] = [
        dict(c)
        for c in (old_conditions if isinstance(old_conditions, list) else [])
        if isinstance(c, Mapping)
    ]
    rules_by_index = {r.index: r for r in selection.rules}
    for type_, (status, reason, message) in (
        (PLAN_READY, _plan_ready(selection, matching)),
        (NODES_EXCLUDED, _nodes_excluded(selection, rules_by_index)),
        (ROLLOUT_PROGRESSING, progressing),
        (ROLLOUT_COMPLETED, completed),
        (ROLLOUT_DEGRADED, degraded),
        (PAUSED, paused_cond),
    ):
        conditions, _ = set_condition(
            conditions, type_, status, reason, _cap(message), observed_generation=generation, now=now
        )

    status_out: dict[str, Any] = {}
    if generation is not None:
        status_out["observedGeneration"] = generation
    status_out["phase"] = phase
    status_out["summary"] = summary
    status_out["conditions"] = conditions
    status_out["nodeStatuses"] = _node_statuses(children, prev, stamp)

    without_sync = {k: v for k, v in prev.items() if k != "lastSyncTime"}
    changed = status_changed(without_sync, status_out) or not prev.get("lastSyncTime")
    status_out["lastSyncTime"] = stamp if changed else prev["lastSyncTime"]
    return status_out, changed

"""Which rule of a plan selects which node, and everything that stops the plan from applying it.

Decisions where the issue and upstream were silent:

* Profiles must be ``Ready`` (the PartitioningProfile controller's condition) at the profile's
  current generation; a stale ``Ready=True`` (``observedGeneration`` < ``generation``) is not Ready,
  so an edit is validated before any node is drained for it. Nodes of such a rule are *held*: no new
  or updated NodePartitioning, no admission, and existing ones are kept (not deleted).
* targetSelector mismatches are not an error: such nodes are held like the above and listed in
  condition ``NodesExcluded``; they do not stop the plan from reaching Completed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from aiplane.apimachinery.selectors import Selector
from aiplane.controllers.partitioning.identity import is_child, np_name
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    NodeView,
    PlanView,
    ProfileView,
    RuleSpec,
)

__all__ = [
    "NodeMatch",
    "ProfileState",
    "RuleView",
    "Selection",
    "node_match",
    "profile_state",
    "rule_views",
    "select_nodes",
    "selection_of",
]


# --- profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfileState:
    """Can nodes be started on this profile? ``reason`` is ``Ready`` when they can."""

    ready: bool
    reason: str
    message: str
    desired_hash: str | None = None
    target_selector: Selector | None = None  # None: no guard rail


def _not_ready(name: str, profile: ProfileView) -> ProfileState | None:
    """Why the profile's ``Ready`` condition does not vouch for its current generation, if it does not."""
    ready = profile.ready
    if ready is None:
        return ProfileState(False, "NotReady", f"PartitioningProfile {name} has no Ready condition yet")
    if not ready.true:
        detail = ": ".join(x for x in (ready.reason, ready.message) if x)
        return ProfileState(
            False, "NotReady", f"PartitioningProfile {name} is not Ready" + (f" ({detail})" if detail else "")
        )
    observed = ready.observed_generation
    generation = profile.generation
    if generation is not None and observed is not None and observed < generation:
        return ProfileState(
            False,
            "NotReady",
            f"PartitioningProfile {name} generation {generation} is not validated yet "
            f"(Ready is for generation {observed})",
        )
    return None


def profile_state(name: str, profile: ProfileView | None) -> ProfileState:
    """Readiness of the PartitioningProfile a rule references.

    Not ready when it is missing, being deleted, unusable (no ``dcmProfileName``, a bad quantity, an
    invalid ``targetSelector``), or its ``Ready`` condition is absent, not ``True``, or older than the
    profile's generation (an edit the profile controller has not validated yet).
    """
    if not name:
        return ProfileState(False, "NotFound", "the rule has no profileRef.name")
    if profile is None:
        return ProfileState(False, "NotFound", f"PartitioningProfile {name} not found")
    if profile.deleting:
        return ProfileState(False, "Deleting", f"PartitioningProfile {name} is being deleted")
    if profile.hash_error is not None:
        return ProfileState(
            False, "InvalidSpec", f"PartitioningProfile {name} is invalid: {profile.hash_error}"
        )
    if profile.target_selector_error is not None:
        return ProfileState(
            False,
            "InvalidSpec",
            f"PartitioningProfile {name} has an invalid targetSelector: {profile.target_selector_error}",
        )
    not_ready = _not_ready(name, profile)
    if not_ready is not None:
        return not_ready
    return ProfileState(
        True, "Ready", f"PartitioningProfile {name} is Ready", profile.desired_hash, profile.target_selector
    )


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

    @cached_property
    def targets(self) -> Mapping[str, int]:
        """Assigned nodes that may be worked on (profile Ready, targetSelector matched).

        Computed once per selection (a reconcile reads it several times, and the plan controller
        keeps one selection for as long as no node's place in it changes)."""
        blocked = {n for n, _ in self.held} | {n for n, _ in self.target_mismatches}
        if not blocked:
            return dict(self._assigned)
        return {n: i for n, i in self._assigned.items() if n not in blocked}

    @cached_property
    def admissible(self) -> frozenset[str]:
        """Nodes ``admit`` may admit: the targets of a valid plan, nothing otherwise."""
        return frozenset(self.targets) if self.valid else frozenset()


def _rule_view(rule: RuleSpec, profiles_by_name: Mapping[str, ProfileView]) -> RuleView:
    profile = profiles_by_name.get(rule.profile_name) if rule.profile_name else None
    description = rule.description
    if not description:
        dcm = profile.dcm if profile is not None else ""
        description = f"rule-{rule.index} ({dcm or rule.profile_name or 'no profile'})"
    error = None
    if rule.selector_error is not None:
        # A spec error, so it names the field to fix: spec.rules[i].selector.<what is wrong>.
        at = f"spec.rules[{rule.index}].selector"
        what = rule.selector_error
        where = f"{at}.{what}" if what.startswith(("matchLabels", "matchExpressions")) else f"{at}: {what}"
        error = f"rule {description!r}: {where}"
    return RuleView(
        rule.index, description, rule.profile_name, profile_state(rule.profile_name, profile), error
    )


def rule_views(plan: PlanView, profiles_by_name: Mapping[str, ProfileView]) -> tuple[RuleView, ...]:
    """The plan's rules as evaluated against the profiles they reference."""
    return tuple(_rule_view(rule, profiles_by_name) for rule in plan.rules)


def _ref(np: NodePartitioningView) -> str:
    return f"{np.plan_name or '<no plan>'}/{np.name}"


@dataclass(frozen=True, slots=True)
class NodeMatch:
    """One node's place in a plan's selection: what :func:`select_nodes` finds out node by node.

    A node's place depends only on the node (its labels), the plan's rules and profiles, the other
    plans' NodePartitionings on the node and the one holding this plan's name for it: so the plan
    controller recomputes it for the nodes an event touched, not for the fleet.
    """

    hits: tuple[int, ...]  # indices of the rules matching the node (≥ 1)
    excluded: bool = False  # a control-plane node left out
    conflicts: tuple[str, ...] = ()  # "<plan>/<np>" of other plans' NodePartitionings on the node
    collision: str | None = None  # "<plan>/<np>" of another plan's object holding our name for it
    held: bool = False  # its rule's profile is not Ready
    mismatched: bool = False  # its profile's targetSelector does not match it

    @property
    def assigned(self) -> int | None:
        """The one rule that assigns the node, if exactly one matches (and it is not excluded)."""
        return self.hits[0] if len(self.hits) == 1 and not self.excluded else None

    @property
    def target(self) -> bool:
        """Assigned, and its profile is Ready and targets it."""
        return self.assigned is not None and not self.held and not self.mismatched


def node_match(
    plan: PlanView,
    rules: tuple[RuleView, ...],
    node: NodeView,
    others_on_node: Iterable[NodePartitioningView],
    holder: NodePartitioningView | None,
) -> NodeMatch | None:
    """``node``'s place in the plan's selection; ``None`` when no rule matches it.

    ``others_on_node``: other plans' NodePartitionings whose ``spec.nodeName`` is this node;
    ``holder``: another plan's NodePartitioning named ``np_name(plan, node)``, if any.
    """
    hits = tuple(r.index for r in plan.rules if r.selector is not None and r.selector.matches(node.labels))
    if not hits:
        return None
    if plan.limits.exclude_control_plane and node.control_plane:
        return NodeMatch(hits, excluded=True)
    conflicts = tuple(sorted(_ref(np) for np in others_on_node))
    if len(hits) != 1:
        return NodeMatch(hits, conflicts=conflicts)
    collision = _ref(holder) if holder is not None and holder.node_name != node.name else None
    state = rules[hits[0]].profile
    held = not state.ready
    mismatched = (
        not held and state.target_selector is not None and not state.target_selector.matches(node.labels)
    )
    return NodeMatch(hits, False, conflicts, collision, held, mismatched)


def selection_of(
    plan: PlanView,
    rules: tuple[RuleView, ...],
    node_names: tuple[str, ...],
    matched: Iterable[tuple[str, NodeMatch]],
) -> Selection:
    """The :class:`Selection` made of every matched node's :class:`NodeMatch`, in node-name order."""
    matches: dict[str, tuple[int, ...]] = {}
    excluded: list[str] = []
    overlaps: list[tuple[str, tuple[int, ...]]] = []
    conflicts: list[tuple[str, tuple[str, ...]]] = []
    collisions: list[tuple[str, str]] = []
    held: list[tuple[str, int]] = []
    mismatched: list[tuple[str, int]] = []
    assigned: dict[str, int] = {}
    for name, m in matched:
        if m.excluded:
            excluded.append(name)
            continue
        matches[name] = m.hits
        if len(m.hits) > 1:
            overlaps.append((name, m.hits))
        if m.conflicts:
            conflicts.append((name, m.conflicts))
        if len(m.hits) != 1:
            continue
        index = m.hits[0]
        assigned[name] = index
        if m.collision is not None:
            collisions.append((name, m.collision))
        if m.held:
            held.append((name, index))
        elif m.mismatched:
            mismatched.append((name, index))
    return Selection(
        plan_name=plan.name,
        rules=rules,
        node_names=node_names,
        matches=matches,
        control_plane_excluded=tuple(excluded),
        overlaps=tuple(overlaps),
        conflicts=tuple(conflicts),
        name_collisions=tuple(collisions),
        held=tuple(held),
        target_mismatches=tuple(mismatched),
        _assigned=assigned,
    )


def select_nodes(
    plan: PlanView,
    nodes: Iterable[NodeView],
    profiles_by_name: Mapping[str, ProfileView],
    other_nps: Iterable[NodePartitioningView],
) -> Selection:
    """Which rule selects which node, and what stops the plan from applying it.

    * Rules in index order; ``matchLabels``/``matchExpressions`` with kube semantics (``{}`` matches
      every node). An invalid selector matches nothing and invalidates the plan (InvalidSelector).
    * Control-plane nodes are skipped unless ``excludeControlPlane: false``.
    * A node matched by two rules is an overlap (upstream's docs said "first match wins", its code
      failed the plan; we fail the plan, naming both rules). A node for which another plan has a
      NodePartitioning, in any phase (even one of a deleted plan), is a conflict: two plans must never
      drive one node. ``other_nps`` may contain every NodePartitioning; this plan's own are ignored.
    * Nodes of a rule whose profile is not Ready are held; nodes that do not match their profile's
      ``targetSelector`` are listed and not touched.
    """
    rules = rule_views(plan, profiles_by_name)
    named = sorted((n for n in nodes if n.name), key=lambda n: n.name)
    others_by_node: dict[str, list[NodePartitioningView]] = {}
    others_by_name: dict[str, NodePartitioningView] = {}
    for np in other_nps:
        if not is_child(plan, np):
            others_by_node.setdefault(np.node_name, []).append(np)
            others_by_name[np.name] = np
    matched = []
    for node in named:
        found = node_match(
            plan,
            rules,
            node,
            others_by_node.get(node.name, ()),
            others_by_name.get(np_name(plan.name, node.name)),
        )
        if found is not None:
            matched.append((node.name, found))
    return selection_of(plan, rules, tuple(n.name for n in named), matched)

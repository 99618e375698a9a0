"""One plan's selection, children and rollup counts, kept up to date per Node / NodePartitioning change.

The plan controller is woken by every NodePartitioning event of its plan and by Node label changes.
Recomputing the selection (every Node), the desired bodies (every target), the stale check, the
admission candidates and the status rollup (every child) on each of them cost O(fleet) per event,
so a rollout cost the operator O(fleet²) (half its CPU at 1,000 nodes). Here an event
costs O(what it touched):

* a node's place in the selection (:func:`~.selection.node_match`) is recomputed for the nodes an
  event touched, and the :class:`~.selection.Selection` is reassembled only when a place changed;
* each child contributes its effective phase, its ``nodeStatuses`` entry and its slot to sums that
  are adjusted (old contribution out, new one in) when the child or its node changes;
* the nodes whose desired NodePartitioning or stale check may have changed are queued for the
  reconcile (:attr:`PlanIndex.unchecked`), instead of comparing every target on every reconcile;
* the nodes awaiting admission are kept sorted, so :func:`~.admission.admit_from` reads only as
  many as it admits.

The pure functions stay the specification: :meth:`PlanIndex.selection` equals
:func:`~.selection.select_nodes` and :meth:`PlanIndex.rollup` equals :func:`~.plan_status.rollup`
over the same objects after any sequence of events (a property test holds them together). A change
of the plan's spec or of a profile rebuilds the index from the caches (O(fleet), rare).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import format_time, semantic_equal
from aiplane.controllers.partitioning.admission import (
    RolloutCounts,
    admitted_not_started,
    awaiting_admission,
    occupies_slot,
)
from aiplane.controllers.partitioning.identity import is_child, np_name
from aiplane.controllers.partitioning.plan_status import (
    Rollup,
    child_order,
    done_phases,
    effective_phase,
    node_status_entry,
    node_statuses,
)
from aiplane.controllers.partitioning.selection import (
    NodeMatch,
    RuleView,
    Selection,
    node_match,
    rule_views,
    selection_of,
)
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    NodeView,
    PlanView,
    ProfileView,
)
from aiplane.controllers.partitioning.vocabulary import FAILED, PENDING

__all__ = ["PlanIndex", "build_index", "index_key", "kept_child"]

Obj = dict[str, Any]


def index_key(plan: PlanView, profiles: Mapping[str, ProfileView]) -> tuple[Any, ...]:
    """What the index is built for: the plan's identity and spec, and the profiles as viewed (views
    are memoised per cached object, so an unchanged profile keeps its view). Any other key: rebuild."""
    return (
        plan.name,
        plan.uid,
        plan.generation,
        objects.spec(plan.obj),
        tuple(sorted((name, id(view)) for name, view in profiles.items())),
    )


def kept_child(plan: str, children: Iterable[NodePartitioningView]) -> NodePartitioningView | None:
    """``children_by_node``'s choice among one node's children of plan ``plan``: the one of the
    node's own name first, then one not being deleted, then by name."""
    best: NodePartitioningView | None = None
    best_rank: tuple[bool, bool, str] | None = None
    for np in children:
        if not np.node_name:
            continue
        rank = (np.name != np_name(plan, np.node_name), np.deleting, np.name)
        if best_rank is None or rank < best_rank:
            best, best_rank = np, rank
    return best


class _NodeState:
    """What one node contributes to the sums (see :meth:`PlanIndex._touch`)."""

    __slots__ = ("awaiting", "done_target", "pending_target", "revocable", "slot")

    def __init__(self) -> None:
        self.slot = ""  # "in_progress", "failed" or ""
        self.awaiting = False
        self.revocable = False
        self.done_target = False
        self.pending_target = False


class PlanIndex:
    """The incremental state of one plan (see the module docstring).

    Feed it with :meth:`put_node` / :meth:`put_np` (a view, or ``None`` for a deleted object);
    ``visits`` counts the nodes and children it recomputed: what a test counts to hold an event to
    O(1) work.
    """

    def __init__(self, plan: PlanView, profiles: Mapping[str, ProfileView], key: tuple[Any, ...]) -> None:
        self.key = key
        self.plan = plan
        self.rules: tuple[RuleView, ...] = rule_views(plan, profiles)
        self.visits = 0
        self.nodes: dict[str, NodeView] = {}
        self.matched: dict[str, NodeMatch] = {}
        self._np_names: dict[str, str] = {}  # np_name(plan, node) -> node
        self.children: dict[str, NodePartitioningView] = {}
        self._on_node: dict[str, dict[str, NodePartitioningView]] = {}
        self.kept: dict[str, NodePartitioningView] = {}  # node -> the child children_by_node keeps
        self.others: dict[str, NodePartitioningView] = {}
        self._others_on_node: dict[str, dict[str, NodePartitioningView]] = {}
        # Problems of the selection, by node (a plan is valid when all are empty).
        self._overlaps: set[str] = set()
        self._conflicts: set[str] = set()
        self._collisions: set[str] = set()
        self._valid = bool(not any(r.selector_error for r in self.rules))
        self._selection: Selection | None = None
        self._names: tuple[str, ...] | None = None
        # Per child: effective phase and nodeStatuses entry; per node: its contribution.
        self._effective: dict[str, str] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        self._states: dict[str, _NodeState] = {}
        self._counts: Counter[str] = Counter()
        self._failed: set[tuple[str, str]] = set()
        self._in_progress = 0
        self._slot_failed = 0
        self._awaiting: list[str] = []
        self.revocable: set[str] = set()
        self._done_targets = 0
        self._pending_targets = 0
        self._order: list[tuple[str, str]] = []
        self._multi = 0  # nodes with more than one child: nodeStatuses stamped from scratch then
        # nodeStatuses with lastUpdateTime as last made, and what changed since.
        self._stamped: dict[str, dict[str, Any]] = {}
        self._restamp: set[str] = set()  # entries changed since the last node_statuses()
        self._fresh: set[str] = set()  # entries stamped now, not kept from the written status
        self._basis: str | None = None  # resourceVersion of the plan whose status shows _prior
        self._basis_multi = False
        self._prior: dict[str, dict[str, Any]] = {}  # the written nodeStatuses, by node (first one)
        self._prior_len = 0
        #: Nodes whose desired NodePartitioning or stale check may have changed since the reconcile
        #: last looked (every node at first).
        self.unchecked: set[str] = set()

    # --- feeding ------------------------------------------------------------------------------------

    def put_node(self, name: str, node: NodeView | None) -> None:
        if node is None:
            if self.nodes.pop(name, None) is None:
                return
            self._names = self._selection = None
        else:
            if name not in self.nodes:
                self._names = self._selection = None
                self._np_names[np_name(self.plan.name, name)] = name
            self.nodes[name] = node
        self._rematch(name)

    def put_np(self, name: str, np: NodePartitioningView | None) -> None:
        old = self.children.pop(name, None)
        if old is not None:
            del self._on_node[old.node_name][name]
            if len(self._on_node[old.node_name]) == 1:
                self._multi -= 1
            elif not self._on_node[old.node_name]:
                del self._on_node[old.node_name]
            self._unorder(old)
            self._child_out(name)
            self._touch(old.node_name)
        other = self.others.pop(name, None)
        if other is not None:
            del self._others_on_node[other.node_name][name]
            self._rematch(other.node_name)
            self._rematch(self._np_names.get(name, ""))
        if old is not None and (np is None or not is_child(self.plan, np)):
            # Gone from the list: its entry with it.
            self._entries.pop(name, None)
            self._stamped.pop(name, None)
            self._fresh.discard(name)
            self._restamp.discard(name)
        if np is None:
            return
        if is_child(self.plan, np):
            self.children[name] = np
            siblings = self._on_node.setdefault(np.node_name, {})
            siblings[name] = np
            if len(siblings) == 2:
                self._multi += 1
            bisect.insort(self._order, child_order(np))
            self._touch(np.node_name)
        else:
            self.others[name] = np
            self._others_on_node.setdefault(np.node_name, {})[name] = np
            self._rematch(np.node_name)
            self._rematch(self._np_names.get(name, ""))

    def _unorder(self, np: NodePartitioningView) -> None:
        key = child_order(np)
        at = bisect.bisect_left(self._order, key)
        if at < len(self._order) and self._order[at] == key:
            del self._order[at]

    # --- selection ----------------------------------------------------------------------------------

    def _rematch(self, name: str) -> None:
        """Recompute node ``name``'s place in the selection; touch it when the place changed."""
        node = self.nodes.get(name) if name else None
        self.visits += 1
        found = None
        if node is not None:
            holder = self.others.get(np_name(self.plan.name, name))
            found = node_match(
                self.plan, self.rules, node, self._others_on_node.get(name, {}).values(), holder
            )
        if found == self.matched.get(name):
            return
        if found is None:
            del self.matched[name]
        else:
            self.matched[name] = found
        self._selection = None
        for problems, has in (
            (self._overlaps, found is not None and not found.excluded and len(found.hits) > 1),
            (self._conflicts, found is not None and bool(found.conflicts)),
            (self._collisions, found is not None and found.collision is not None),
        ):
            if has:
                problems.add(name)
            else:
                problems.discard(name)
        valid = not (
            any(r.selector_error for r in self.rules) or self._overlaps or self._conflicts or self._collisions
        )
        if valid != self._valid:
            self._valid = valid
            for node_name in list(self._on_node.keys() | self.matched.keys()):
                self._touch(node_name)  # every desired hash, hence every effective phase, moved
        self._touch(name)

    def selection(self) -> Selection:
        """:func:`~.selection.select_nodes` over the nodes and NodePartitionings fed in."""
        if self._selection is None:
            if self._names is None:
                self._names = tuple(sorted(self.nodes))
            self._selection = selection_of(
                self.plan, self.rules, self._names, [(n, self.matched[n]) for n in sorted(self.matched)]
            )
        return self._selection

    # --- contributions ------------------------------------------------------------------------------

    def _desired_hash(self, node: str) -> str | None:
        found = self.matched.get(node)
        if not self._valid or found is None or not found.target:
            return None
        return self.rules[found.hits[0]].desired_hash

    def _touch(self, node: str) -> None:
        """Take node ``node``'s and its children's contributions out of the sums and put them back."""
        self.unchecked.add(node)
        desired = self._desired_hash(node)
        children = self._on_node.get(node, {})
        done = done_phases(self.plan)
        any_done = False
        for name, np in children.items():
            self.visits += 1
            self._child_out(name)
            phase = effective_phase(np, desired, self.plan.dry_run)
            self._effective[name] = phase
            self._counts[phase] += 1
            if phase == FAILED:
                self._failed.add(child_order(np))
            entry = node_status_entry(np)
            if self._entries.get(name) != entry:
                self._restamp.add(name)
            self._entries[name] = entry
            any_done = any_done or phase in done
        self._node_out(node)
        if not node:
            return
        state = self._states[node] = _NodeState()
        found = self.matched.get(node)
        target = found is not None and found.target
        kept = self._keep(children)
        if kept is None:
            self.kept.pop(node, None)
        else:
            self.kept[node] = kept
            state.slot = (
                "in_progress" if occupies_slot(kept) else "failed" if kept.counted_phase == FAILED else ""
            )
            state.awaiting = awaiting_admission(kept)
            state.revocable = admitted_not_started(kept)
            state.pending_target = target and self._effective[kept.name] == PENDING
        state.done_target = target and any_done
        self._node_in(node, state)

    def _keep(self, children: Mapping[str, NodePartitioningView]) -> NodePartitioningView | None:
        return kept_child(self.plan.name, children.values())

    def _child_out(self, name: str) -> None:
        phase = self._effective.pop(name, None)
        if phase is None:
            return
        self._counts[phase] -= 1
        if not self._counts[phase]:
            del self._counts[phase]
        if phase == FAILED:
            self._failed = {k for k in self._failed if k[1] != name}

    def _node_out(self, node: str) -> None:
        state = self._states.pop(node, None)
        if state is None:
            return
        self._in_progress -= state.slot == "in_progress"
        self._slot_failed -= state.slot == "failed"
        if state.awaiting:
            at = bisect.bisect_left(self._awaiting, node)
            del self._awaiting[at]
        self.revocable.discard(node)
        self._done_targets -= state.done_target
        self._pending_targets -= state.pending_target

    def _node_in(self, node: str, state: _NodeState) -> None:
        self._in_progress += state.slot == "in_progress"
        self._slot_failed += state.slot == "failed"
        if state.awaiting:
            bisect.insort(self._awaiting, node)
        if state.revocable:
            self.revocable.add(node)
        self._done_targets += state.done_target
        self._pending_targets += state.pending_target

    # --- reading ------------------------------------------------------------------------------------

    @property
    def slots(self) -> RolloutCounts:
        return RolloutCounts(self._in_progress, self._slot_failed)

    @property
    def awaiting(self) -> list[str]:
        """Nodes whose kept child awaits admission, in node-name order."""
        return self._awaiting

    def rollup(self, plan: PlanView) -> Rollup:
        """:func:`~.plan_status.rollup` of the children fed in (``plan``: the current view of the plan,
        whose spec is the one this index was built for)."""
        return Rollup(
            plan=plan,
            selection=self.selection(),
            counts=dict(self._counts),
            total=len(self.children),
            slots=self.slots,
            failed_nodes=tuple(node for node, _ in sorted(self._failed)),
            done_targets=self._done_targets,
            pending_targets=self._pending_targets,
        )

    def entries(self) -> list[dict[str, Any]]:
        """``nodeStatuses`` without ``lastUpdateTime``, in the status's order."""
        return [self._entries[name] for _, name in self._order]

    def children_on(self, nodes: Iterable[str]) -> list[NodePartitioningView]:
        """Every child on these nodes (what the stale check of those nodes reads)."""
        return [np for node in nodes for np in self._on_node.get(node, {}).values()]

    # --- nodeStatuses -------------------------------------------------------------------------------

    def node_statuses(
        self, previous: Mapping[str, Any], previous_rv: str, now: datetime
    ) -> tuple[list[dict[str, Any]], bool]:
        """``nodeStatuses`` exactly as :func:`~.plan_status.node_statuses` makes them against
        ``previous``, and whether they differ from ``previous``'s.

        When ``previous`` is the status last reported :meth:`written` (the controller's own write), only
        the entries changed since are looked at: each is compared with ``previous``'s entry for its
        node and restamped when it differs. Otherwise (first time, someone else's status, a node with
        two children) the whole list is made from scratch.
        """
        stamp = format_time(now)
        names = [name for _, name in self._order]
        if self._basis is None or self._basis != previous_rv or self._multi or self._basis_multi:
            listed = node_statuses([self._entries[n] for n in names], previous, stamp)
            self._stamped = dict(zip(names, listed, strict=True))
            self._restamp.clear()
            self._fresh = {n for n, entry in self._stamped.items() if entry["lastUpdateTime"] == stamp}
            old = previous.get("nodeStatuses")
            self._basis = None  # until written(): the index does not know what `previous` shows
            return listed, not semantic_equal(old if isinstance(old, list) else [], listed)
        for name in self._restamp | self._fresh:
            entry = self._entries.get(name)
            if entry is None:
                self._fresh.discard(name)
                continue
            prior = self._prior.get(entry["nodeName"])
            if prior is not None and {k: v for k, v in prior.items() if k != "lastUpdateTime"} == entry:
                self._stamped[name] = dict(prior)
                self._fresh.discard(name)
            else:
                self._stamped[name] = {**entry, "lastUpdateTime": stamp}
                self._fresh.add(name)
        self._restamp.clear()
        listed = [self._stamped[n] for n in names]
        return listed, bool(self._fresh) or len(listed) != self._prior_len

    def written(self, resource_version: str, listed: list[dict[str, Any]]) -> None:
        """``listed`` (from the last :meth:`node_statuses`) is what the plan's status shows at
        ``resource_version``, written by us (or found equal, nothing written)."""
        if self._basis is not None and not self._fresh and len(listed) == self._prior_len:
            self._basis = resource_version  # the same list: what it was compared against still holds
            return
        self._basis = resource_version
        self._basis_multi = bool(self._multi)
        prior: dict[str, dict[str, Any]] = {}
        for entry in listed:
            prior.setdefault(entry["nodeName"], entry)
        self._prior = prior
        self._prior_len = len(listed)
        self._fresh.clear()


def build_index(
    plan: PlanView,
    profiles: Mapping[str, ProfileView],
    key: tuple[Any, ...],
    nodes: Iterable[tuple[str, NodeView]],
    nps: Iterable[tuple[str, NodePartitioningView]],
    *,
    on_build: Callable[[], None] | None = None,
) -> PlanIndex:
    """A :class:`PlanIndex` fed with every node and NodePartitioning (a rebuild: O(fleet))."""
    index = PlanIndex(plan, profiles, key)
    for name, np in nps:
        index.put_np(name, np)
    for name, node in nodes:
        index.put_node(name, node)
    if on_build is not None:
        on_build()
    return index

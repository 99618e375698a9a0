"""PartitioningPlan decisions, as pure functions of observed objects: the names the executor uses.

The decisions live in modules named for what they decide, each pure (no I/O, no clock: ``now`` is an
argument) and property-tested:

* :mod:`~aiplane.controllers.partitioning.views` reads the cached objects once into typed views
  (``plan_view``, ``node_views``, ``profile_views``, ``node_partitioning_views``);
* :mod:`~aiplane.controllers.partitioning.selection` — which rule selects which node, and what holds
  it back (profiles not Ready, targetSelector, overlaps, cross-plan conflicts);
* :mod:`~aiplane.controllers.partitioning.identity` — names, ownership, one child per node;
* :mod:`~aiplane.controllers.partitioning.children` — the NodePartitionings to apply and to delete;
* :mod:`~aiplane.controllers.partitioning.admission` — the admission contract (read it if you touch
  the NodePartitioning state machine) and ``maxParallel``/``maxUnavailable``;
* :mod:`~aiplane.controllers.partitioning.plan_status` — summary, phase and conditions.

Reconcile, in the order the controller should run it::

    plan = plan_view(obj); nps = node_partitioning_views(all_nps); profiles = profile_views(...)
    sel = select_nodes(plan, node_views(nodes), profiles, nps)      # who gets what, and problems
    children = children_by_node(plan, nps)                          # this plan's, one per node
    for node, body in desired_node_partitionings(plan, sel, profiles).items():
        if np_needs_update(children.get(node), body): server-side apply body
    for name in stale_node_partitionings(plan, sel, nps): delete name
    for node in revoke(plan, children, eligible=sel.admissible): patch revocation_patch(children[node])
    for node in admit(plan, children, eligible=sel.admissible): patch admission_patch(children[node])
    status, changed = plan_status(plan, sel, nps, now, plan.status)
    if changed: write status

The controller does not call these over the whole fleet on every event: its
:class:`~aiplane.controllers.partitioning.plan_index.PlanIndex` keeps the same results up to date
per Node / NodePartitioning event (``admit_from``, ``status_of`` take what it keeps); the functions
above are the specification it is tested against.

The controller's decision is :func:`decide` (one reconcile, pure): the children to apply and to
delete on the nodes the index says changed, and the admission (revocations, then admissions) *on the
view those writes leave*. Admission is decided only on a view where every kept child is exact
(module docstring of ``plan``): an apply is unconditional, so a node whose child is applied admits
nothing in that reconcile (the write's watch event brings the plan back); a delete leaves its child
terminating when a finalizer holds it (unconditional too: no admission) and gone otherwise, and the
admission is computed with the gone children's slots and places in the queue taken out
(:func:`_after_deletes`), as the index will show them once the executor has fed it the deletes. The
executor checks the prediction after its deletes and admits nothing when a delete left something else
(a finalizer the cache did not show yet), asking to look again instead.

What upstream did (silogen/kaiwo, ``internal/controller/infrastructure/partitioning/
partitioningplan_controller.go``), and the bugs fixed here, are in docs/partitioning.md.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.controllers.partitioning.admission import (
    RolloutCounts,
    admission_patch,
    admit,
    admit_from,
    admitted_not_started,
    awaiting_admission,
    occupies_slot,
    revocation_patch,
    revoke,
)
from aiplane.controllers.partitioning.children import (
    desired_node_partitionings,
    np_needs_update,
    stale_node_partitionings,
)
from aiplane.controllers.partitioning.identity import children_by_node
from aiplane.controllers.partitioning.plan_index import PlanIndex, kept_child
from aiplane.controllers.partitioning.plan_status import (
    NODES_EXCLUDED,
    PAUSED,
    PLAN_READY,
    ROLLOUT_COMPLETED,
    ROLLOUT_DEGRADED,
    plan_status,
)
from aiplane.controllers.partitioning.selection import Selection, select_nodes
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    PlanView,
    ProfileView,
    node_partitioning_views,
    node_views,
    plan_view,
    profile_views,
)
from aiplane.controllers.partitioning.vocabulary import API_VERSION, FAILED, NODE_PARTITIONING_KIND

__all__ = [
    "API_VERSION",
    "NODES_EXCLUDED",
    "NODE_PARTITIONING_KIND",
    "PAUSED",
    "PLAN_READY",
    "ROLLOUT_COMPLETED",
    "ROLLOUT_DEGRADED",
    "Apply",
    "Delete",
    "PlanDecision",
    "PlanObserved",
    "admission_patch",
    "admit",
    "children_by_node",
    "decide",
    "desired_node_partitionings",
    "node_partitioning_views",
    "node_views",
    "np_needs_update",
    "plan_status",
    "plan_view",
    "profile_views",
    "revocation_patch",
    "revoke",
    "select_nodes",
    "stale_node_partitionings",
]


@dataclass(frozen=True)
class PlanObserved:
    """One plan as observed: the object, its view, the profiles, and its index fed with every Node
    and NodePartitioning change so far (overlaid with our own writes). ``decide`` reads the index,
    never feeds it."""

    plan: dict[str, Any]
    view: PlanView
    profiles: Mapping[str, ProfileView]
    index: PlanIndex
    selection: Selection
    #: The nodes whose desired child or stale check may have changed (the index's, sorted).
    unchecked: tuple[str, ...]
    #: Every informer the decision reads heard from the API server recently (``all_fresh``).
    fresh: bool
    #: Children whose view rests on an unconditional write of ours the cache does not show yet.
    inexact: frozenset[str]


@dataclass(frozen=True)
class Apply:
    """Server-side apply ``body`` on ``node``, over ``live`` (the child kept there, if any)."""

    node: str
    body: Mapping[str, Any]
    live: NodePartitioningView | None


@dataclass(frozen=True)
class Delete:
    """Delete a stale child; ``gone``: predicted to go at once (no finalizer holds it)."""

    np: NodePartitioningView
    gone: bool


@dataclass(frozen=True)
class PlanDecision:
    """The child writes, in order, and the admission decided on the view they leave."""

    now: datetime
    applies: tuple[Apply, ...] = ()
    deletes: tuple[Delete, ...] = ()
    #: The informers are stale: nothing admitted or revoked; look again after ``STALE_RECHECK``.
    stale: bool = False
    #: Revocations then admissions were decided (the predicted view is exact and fresh).
    admission: bool = False
    revoke: tuple[NodePartitioningView, ...] = ()
    admit: tuple[NodePartitioningView, ...] = ()


def decide(observed: PlanObserved, now: datetime) -> PlanDecision:
    """Everything one reconcile of a plan writes to its children (module docstring); the status is
    the index's after those writes (``plan_status.status_of``, written by the report)."""
    view, index, selection = observed.view, observed.index, observed.selection
    nodes = observed.unchecked
    applies = tuple(
        Apply(node, body, index.kept.get(node))
        for node, body in desired_node_partitionings(view, selection, observed.profiles, nodes=nodes).items()
        if np_needs_update(index.kept.get(node), body)
    )
    deletes = tuple(
        Delete(index.children[name], gone=not index.children[name].finalizers)
        for name in stale_node_partitionings(view, selection, index.children_on(nodes))
    )
    base = PlanDecision(now, applies, deletes)
    if not observed.fresh:
        # A stale informer may hide nodes already out of service: admitting from it could exceed
        # the limits.
        return dataclasses.replace(base, stale=True)
    if applies:
        return base  # each applied child is its node's kept one, and inexact after the apply
    after = _after_deletes(observed, deletes)
    if after is None:
        return base
    counts, awaiting, changed = after

    def kept(node: str) -> NodePartitioningView:
        found = changed[node] if node in changed else index.kept[node]
        assert found is not None  # revocable and awaiting nodes have a kept child
        return found

    eligible = selection.admissible
    revocable = {node: kept(node) for node in index.revocable if node not in changed}
    revocable.update({n: np for n, np in changed.items() if np is not None and admitted_not_started(np)})
    revoked = [revocable[node] for node in revoke(view, revocable, eligible=eligible)]
    if revoked:
        counts, awaiting = _after_revocations(counts, awaiting, revoked)
    admitted = admit_from(view, counts, awaiting, eligible=eligible)
    return dataclasses.replace(
        base, admission=True, revoke=tuple(revoked), admit=tuple(kept(node) for node in admitted)
    )


_Changed = dict[str, NodePartitioningView | None]


def _slot(np: NodePartitioningView | None) -> tuple[int, int]:
    """What a node's kept child adds to :class:`RolloutCounts` (in progress, failed)."""
    if np is None:
        return 0, 0
    if occupies_slot(np):
        return 1, 0
    return 0, int(np.counted_phase == FAILED)


def _after_deletes(
    observed: PlanObserved, deletes: Sequence[Delete]
) -> tuple[RolloutCounts, list[str], _Changed] | None:
    """The admission's inputs (rollout counts, nodes awaiting admission in name order, and the kept
    child of each node whose kept child changes) as the index will show them after ``deletes``;
    ``None`` when a kept child's view will not be exact then (no admission in this reconcile)."""
    index = observed.index
    inexact = set(observed.inexact)
    by_node: dict[str, dict[str, NodePartitioningView | None]] = {}
    for delete in deletes:
        gone = delete.np
        # Gone, or terminating (recorded as an unconditional write: inexact until the cache shows it).
        by_node.setdefault(gone.node_name, {})[gone.name] = (
            None if delete.gone else dataclasses.replace(gone, deleting=True)
        )
        if not delete.gone:
            inexact.add(gone.name)
    changed: _Changed = {}
    for node, after in by_node.items():
        children = {np.name: np for np in index.children_on((node,))}
        for name, left in after.items():
            if left is None:
                children.pop(name, None)
            else:
                children[name] = left
        now = kept_child(observed.view.name, children.values())
        before = index.kept.get(node)
        if now is not before:
            changed[node] = now
    for name in inexact:
        child = index.children.get(name)
        if child is None or child.node_name in changed:
            continue
        if index.kept.get(child.node_name) is child:
            return None
    if any(np is not None and np.name in inexact for np in changed.values()):
        return None
    if not changed:
        return index.slots, index.awaiting, changed
    in_progress, failed = index.slots.in_progress, index.slots.failed
    awaiting = list(index.awaiting)
    for node, now in changed.items():
        before = index.kept.get(node)
        old_in, old_failed = _slot(before)
        new_in, new_failed = _slot(now)
        in_progress += new_in - old_in
        failed += new_failed - old_failed
        if before is not None and awaiting_admission(before):
            awaiting.remove(node)
        if now is not None and awaiting_admission(now):
            bisect.insort(awaiting, node)
    return RolloutCounts(in_progress, failed), awaiting, changed


def _after_revocations(
    counts: RolloutCounts, awaiting: list[str], revoked: Sequence[NodePartitioningView]
) -> tuple[RolloutCounts, list[str]]:
    """The counts and queue once ``revoked`` (admitted, not started) are no longer admitted: their
    slots are free again, and they await admission again (as the index shows them after the patches)."""
    in_progress = counts.in_progress
    queue = list(awaiting)
    for np in revoked:
        in_progress -= occupies_slot(np)
        if awaiting_admission(dataclasses.replace(np, admitted_hash="")):
            bisect.insort(queue, np.node_name)
    return RolloutCounts(in_progress, counts.failed), queue

"""Admission: the one place a node may leave Pending, under ``maxParallel``/``maxUnavailable``.

Admission contract (read this if you implement the NodePartitioning state machine)
---------------------------------------------------------------------------------
Upstream never enforced ``rollout.maxParallel``/``maxUnavailable``: every node started draining at
once. Here the plan controller is the *only* place that lets a node leave Pending, so the limits are
checked by one serialised actor (the work queue never runs one plan key twice concurrently, and leader
election keeps one process) instead of by N NodePartitioning reconciles racing each other.

* The signal is the annotation ``infrastructure.silogen.ai/admitted`` (``ADMITTED_ANNOTATION``) on
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
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiplane.controllers.partitioning.views import NodePartitioningView, PlanView
from aiplane.controllers.partitioning.vocabulary import (
    ADMITTED_ANNOTATION,
    FAILED,
    IN_PROGRESS_PHASES,
    PENDING,
)

__all__ = [
    "RolloutCounts",
    "admission_capacity",
    "admission_patch",
    "admit",
    "admit_from",
    "admitted_not_started",
    "awaiting_admission",
    "capacity_for",
    "is_admitted",
    "np_phase",
    "occupies_slot",
    "revocation_patch",
    "revoke",
    "rollout_counts",
]


def np_phase(np: NodePartitioningView) -> str:
    """``status.phase``, with the empty/absent phase read as ``Pending`` (as upstream counts it)."""
    return np.counted_phase


def is_admitted(np: NodePartitioningView) -> bool:
    """Has the plan admitted this NodePartitioning for its *current* ``spec.desiredHash``?

    The one check the NodePartitioning controller makes before leaving Pending (see the module
    docstring). An admission for an older hash does not count, so a profile edit never rides on the
    admission of the previous rollout.
    """
    return np.admitted


def admission_patch(np: NodePartitioningView) -> dict[str, Any]:
    """JSON merge patch admitting ``np`` for the hash it carries now.

    ``metadata.resourceVersion`` makes it conditional: if the object changed since it was read (a new
    hash, a phase change), the API server answers 409 and the controller re-decides.
    """
    return _annotation_patch(np, np.desired_hash)


def revocation_patch(np: NodePartitioningView) -> dict[str, Any]:
    """JSON merge patch withdrawing an admission (``null`` deletes the key), conditional like
    :func:`admission_patch`, so it cannot race the NodePartitioning controller's status write."""
    return _annotation_patch(np, None)


def _annotation_patch(np: NodePartitioningView, value: str | None) -> dict[str, Any]:
    return {
        "metadata": {
            "resourceVersion": np.resource_version or None,
            "annotations": {ADMITTED_ANNOTATION: value},
        }
    }


@dataclass(frozen=True, slots=True)
class RolloutCounts:
    """How many nodes occupy a ``maxParallel`` slot, and how many are Failed."""

    in_progress: int
    failed: int

    @property
    def unavailable(self) -> int:
        return self.in_progress + self.failed


def _occupies_slot(np: NodePartitioningView) -> bool:
    phase = np.counted_phase
    if phase in IN_PROGRESS_PHASES:
        return True
    return phase == PENDING and np.admitted and not np.dry_run


def rollout_counts(nps: Iterable[NodePartitioningView]) -> RolloutCounts:
    """In-progress (admitted-but-Pending included) and Failed NodePartitionings among ``nps``."""
    in_progress = failed = 0
    for np in nps:
        if _occupies_slot(np):
            in_progress += 1
        elif np.counted_phase == FAILED:
            failed += 1
    return RolloutCounts(in_progress, failed)


def admission_capacity(plan: PlanView, nps: Iterable[NodePartitioningView]) -> int:
    """How many more nodes may be admitted now (≥ 0), ignoring pause and dry-run."""
    return capacity_for(plan, rollout_counts(nps))


def capacity_for(plan: PlanView, counts: RolloutCounts) -> int:
    """:func:`admission_capacity` from counts already made (the plan controller keeps them per event)."""
    limits = plan.limits
    return max(0, min(limits.max_parallel - counts.in_progress, limits.max_unavailable - counts.unavailable))


def occupies_slot(np: NodePartitioningView) -> bool:
    """Does ``np`` hold a ``maxParallel`` slot (in progress, or admitted but still Pending)?"""
    return _occupies_slot(np)


def awaiting_admission(np: NodePartitioningView) -> bool:
    """Is ``np`` a candidate for :func:`admit` (Pending, not dry-run, not admitted, not deleting)?"""
    return _awaiting_admission(np)


def admitted_not_started(np: NodePartitioningView) -> bool:
    """Is ``np`` a candidate for :func:`revoke` (admitted, still Pending, not deleting)?"""
    return np.counted_phase == PENDING and np.admitted and not np.deleting


def _awaiting_admission(np: NodePartitioningView) -> bool:
    return (
        np.counted_phase == PENDING
        and not np.dry_run
        and bool(np.desired_hash)
        and not np.admitted
        and not np.deleting
    )


def admit(
    plan: PlanView,
    nps_by_node: Mapping[str, NodePartitioningView],
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
    return admit_from(
        plan,
        rollout_counts(nps_by_node.values()),
        sorted(node for node, np in nps_by_node.items() if _awaiting_admission(np)),
        eligible=eligible,
    )


def admit_from(
    plan: PlanView,
    counts: RolloutCounts,
    awaiting: Iterable[str],
    *,
    eligible: Collection[str] | None = None,
) -> list[str]:
    """:func:`admit` from the rollout counts and the nodes awaiting admission in node-name order
    (what the plan controller's index keeps per event): it reads only as many candidates as it
    admits, skipping ineligible ones."""
    if plan.paused or plan.dry_run:
        return []
    capacity = capacity_for(plan, counts)
    if capacity <= 0:
        return []
    chosen: list[str] = []
    for node in awaiting:
        if eligible is None or node in eligible:
            chosen.append(node)
            if len(chosen) == capacity:
                break
    return chosen


def revoke(
    plan: PlanView,
    nps_by_node: Mapping[str, NodePartitioningView],
    *,
    eligible: Collection[str] | None = None,
) -> list[str]:
    """Admitted nodes that have not started yet and should not start now (paused, dry-run, or no
    longer eligible), in node-name order; patch each with :func:`revocation_patch`.

    Without this, a node admitted just before the user paused the plan would still start. Best
    effort by design: if the NodePartitioning controller already left Pending, the conditional
    patch or its own conditional status write conflicts, and the operation finishes as in flight.
    """
    stop_all = plan.paused or plan.dry_run
    return sorted(
        node
        for node, np in nps_by_node.items()
        if admitted_not_started(np) and (stop_all or (eligible is not None and node not in eligible))
    )

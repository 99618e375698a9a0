"""A PartitioningPlan's status: summary counts, phase and conditions, from what the plan observed.

Decisions where the issue and upstream were silent:

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

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery.conditions import format_time, set_condition, status_changed
from aiplane.controllers.partitioning.admission import RolloutCounts, capacity_for, rollout_counts
from aiplane.controllers.partitioning.identity import children_by_node, is_child, np_name
from aiplane.controllers.partitioning.selection import RuleView, Selection
from aiplane.controllers.partitioning.views import NodePartitioningView, PlanView
from aiplane.controllers.partitioning.vocabulary import (
    APPLYING_PHASES,
    FAILED,
    PENDING,
    SKIPPED,
    SUCCEEDED,
    VERIFYING,
)

__all__ = [
    "NODES_EXCLUDED",
    "PAUSED",
    "PLAN_READY",
    "ROLLOUT_COMPLETED",
    "ROLLOUT_DEGRADED",
    "ROLLOUT_PROGRESSING",
    "Rollup",
    "child_order",
    "desired_hashes",
    "done_phases",
    "effective_phase",
    "node_entries",
    "node_status_entry",
    "node_statuses",
    "plan_status",
    "rollup",
    "status_of",
    "this_plans",
]

# Plan condition types (upstream names) and ours.
PLAN_READY: Final = "PlanReady"
NODES_EXCLUDED: Final = "NodesExcluded"
ROLLOUT_PROGRESSING: Final = "RolloutProgressing"
ROLLOUT_COMPLETED: Final = "RolloutCompleted"
ROLLOUT_DEGRADED: Final = "RolloutDegraded"
PAUSED: Final = "Paused"

_MAX_LISTED: Final = 10  # names listed in one message before "and N more"
_MAX_MESSAGE: Final = 4000

_Condition = tuple[str, str, str]  # (status, reason, message)


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


# --- per node ------------------------------------------------------------------------------------


def effective_phase(np: NodePartitioningView, desired: str | None, plan_dry_run: bool) -> str:
    """The phase a node counts under in the plan's summary.

    A terminal NodePartitioning that the plan is about to re-target (``desired`` hash differs from
    ``spec.desiredHash``), a Succeeded one whose ``currentHash`` lags its ``desiredHash``, and a
    Skipped one of a plan that is no longer dry-run all count as ``Pending``: they will go back to
    Pending once the NodePartitioning controller sees them, and the plan is not done with them.
    """
    phase = np.counted_phase
    if phase in (SUCCEEDED, FAILED, SKIPPED) and desired is not None and np.desired_hash != desired:
        return PENDING
    if phase == SUCCEEDED and np.current_hash != np.desired_hash:
        return PENDING
    if phase == SKIPPED and not plan_dry_run:
        return PENDING
    return phase


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _last_error(np: NodePartitioningView) -> str | None:
    if np.last_error:
        return np.last_error
    if np.counted_phase != FAILED:
        return None
    failing = [c for c in np.conditions if c.get("status") == "False" and _text(c.get("message"))]
    if not failing:
        return None
    latest = max(failing, key=lambda c: _text(c.get("lastTransitionTime")))
    return f"{_text(latest.get('reason'))}: {_text(latest.get('message'))}".lstrip(": ")


def _node_status(np: NodePartitioningView) -> dict[str, Any]:
    entry: dict[str, Any] = {"nodeName": np.node_name, "desiredHash": np.desired_hash}
    if np.current_hash:
        entry["currentHash"] = np.current_hash
    entry["phase"] = np.counted_phase
    if np.retries is not None:
        entry["retries"] = np.retries
    error = _last_error(np)
    if error:
        entry["lastError"] = _cap(error)
    return entry


def node_statuses(
    entries: Sequence[Mapping[str, Any]], previous: Mapping[str, Any], stamp: str
) -> list[dict[str, Any]]:
    """One entry per NodePartitioning; ``lastUpdateTime`` moves only when the entry changed."""
    before: dict[str, Mapping[str, Any]] = {}
    old = previous.get("nodeStatuses")
    for item in old if isinstance(old, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("nodeName"), str):
            before.setdefault(item["nodeName"], item)
    result: list[dict[str, Any]] = []
    for fresh in entries:
        entry = dict(fresh)
        prior = before.get(entry["nodeName"])
        kept = stamp
        if prior is not None and {k: v for k, v in prior.items() if k != "lastUpdateTime"} == entry:
            kept = _text(prior.get("lastUpdateTime")) or stamp
        entry["lastUpdateTime"] = kept
        result.append(entry)
    return result


# --- counts --------------------------------------------------------------------------------------


#: Phases a node is done in, for a dry-run plan and for a real one.
DONE_PHASES: Final = frozenset({SUCCEEDED, SKIPPED})
DONE_PHASES_REAL: Final = frozenset({SUCCEEDED})


def done_phases(plan: PlanView) -> frozenset[str]:
    return DONE_PHASES if plan.dry_run else DONE_PHASES_REAL


def desired_hashes(selection: Selection) -> Mapping[str, str | None]:
    """Node -> the hash its NodePartitioning is about to get (targets of a valid plan only)."""
    if not selection.valid:
        return {}
    return {n: selection.rules[i].desired_hash for n, i in selection.targets.items()}


@dataclass(frozen=True)
class Rollup:
    """Everything the status reads of this plan's NodePartitionings, as counts and short lists.

    :func:`rollup` computes it from every NodePartitioning (the specification); the plan
    controller's :class:`~aiplane.controllers.partitioning.plan_index.PlanIndex` keeps the same
    numbers up to date per event (a property test holds the two equal), so a reconcile's status
    costs O(changed) instead of a pass over the fleet.
    """

    plan: PlanView
    selection: Selection
    counts: Mapping[str, int]  # effective phase -> children in it (no zero entries)
    total: int  # this plan's NodePartitionings
    slots: RolloutCounts  # over the one kept child per node, exactly as admission counts
    failed_nodes: tuple[str, ...]  # nodes of the effectively Failed children, in (node, name) order
    done_targets: int  # target nodes with a child done (Succeeded; Skipped too for a dry run)
    pending_targets: int  # target nodes whose kept child is effectively Pending

    @property
    def pending(self) -> int:
        return self.counts.get(PENDING, 0)

    @property
    def in_progress(self) -> int:
        counts = self.counts
        return sum(counts.get(p, 0) for p in APPLYING_PHASES) + counts.get(VERIFYING, 0)

    @property
    def failed(self) -> int:
        return self.counts.get(FAILED, 0)

    @property
    def complete(self) -> bool:
        sel = self.selection
        targets = sel.targets
        return (
            sel.valid
            and not sel.held
            and bool(targets)
            and self.done_targets == len(targets)
            and self.pending == self.in_progress == self.failed == 0
        )

    def summary(self) -> dict[str, int]:
        counts = self.counts
        return {
            "totalNodes": self.total,
            "matchingNodes": len(self.selection.matches),
            "pending": counts.get(PENDING, 0),
            "applying": sum(counts.get(p, 0) for p in APPLYING_PHASES),
            "verifying": counts.get(VERIFYING, 0),
            "succeeded": counts.get(SUCCEEDED, 0),
            "failed": counts.get(FAILED, 0),
            "skipped": counts.get(SKIPPED, 0),
            # What the rollout limit counts (admitted-but-Pending included), so `kubectl get -o wide`
            # shows the maxParallel slots actually held, not one phase bucket.
            "inProgress": self.slots.in_progress,
        }


def node_status_entry(np: NodePartitioningView) -> dict[str, Any]:
    """One ``nodeStatuses`` entry, without ``lastUpdateTime``."""
    return _node_status(np)


def child_order(np: NodePartitioningView) -> tuple[str, str]:
    """The order of ``nodeStatuses``: by node, then by name."""
    return (np.node_name, np.name)


def this_plans(plan: PlanView, nps: Iterable[NodePartitioningView]) -> list[NodePartitioningView]:
    """This plan's NodePartitionings among ``nps``, in :func:`child_order`."""
    return sorted((np for np in nps if is_child(plan, np)), key=child_order)


def node_entries(children: Iterable[NodePartitioningView]) -> list[dict[str, Any]]:
    """``nodeStatuses`` without ``lastUpdateTime``, one per child, in the order given."""
    return [_node_status(np) for np in children]


def rollup(plan: PlanView, selection: Selection, children: Sequence[NodePartitioningView]) -> Rollup:
    """:class:`Rollup` of ``children`` (:func:`this_plans`), from scratch: the specification."""
    desired_by_node = desired_hashes(selection)
    effective = [effective_phase(np, desired_by_node.get(np.node_name), plan.dry_run) for np in children]
    targets = selection.targets
    done = done_phases(plan)
    done_nodes = {np.node_name for np, phase in zip(children, effective, strict=True) if phase in done}
    kept = children_by_node(plan, children)
    effective_of = {id(np): phase for np, phase in zip(children, effective, strict=True)}
    return Rollup(
        plan=plan,
        selection=selection,
        counts=dict(Counter(effective)),
        total=len(children),
        slots=rollout_counts(kept.values()),
        failed_nodes=tuple(
            np.node_name for np, phase in zip(children, effective, strict=True) if phase == FAILED
        ),
        done_targets=len(done_nodes & targets.keys()),
        pending_targets=sum(1 for n, np in kept.items() if n in targets and effective_of[id(np)] == PENDING),
    )


# --- phase and conditions ------------------------------------------------------------------------


def _phase(r: Rollup) -> str:
    """Paused, then Degraded (invalid or failures), Progressing, Completed, else Pending."""
    if r.plan.paused:
        return "Paused"
    if not r.selection.valid or r.failed > 0:
        return "Degraded"
    if r.in_progress + r.pending > 0:
        return "Progressing"
    return "Completed" if r.complete else PENDING


def _plan_ready(selection: Selection) -> _Condition:
    if selection.selector_errors:
        # A spec error, not a cluster one (upstream said ObservationFailed, "Failed to observe cluster
        # state"): it waits for the plan to change, no retry; the transition's Warning Event says it once.
        return "False", "InvalidSelector", "Invalid selector: " + "; ".join(selection.selector_errors)
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
        parts = [
            f"{selection.rules[i].profile.message} (rule {desc[i]!r}); holding nodes {_listed(nodes)}"
            for i, nodes in _by_rule(selection.held)
        ]
        return "False", "ProfileNotReady", "; ".join(parts)
    if not selection.matches:
        # Nothing to do is not "ready": a selector that matches no node is most likely a typo (a label
        # value, a product name), and would otherwise sit as "Pending 0 0 0" with nothing to say why.
        rules = ", ".join(repr(r.description) for r in selection.rules) or "none"
        excluded = (
            f"; {_plural(len(selection.control_plane_excluded), 'control-plane node')} excluded"
            if selection.control_plane_excluded
            else ""
        )
        return (
            "False",
            "NoMatchingNodes",
            f"No node matches the plan's rules ({rules}): none of the cluster's "
            f"{_plural(len(selection.node_names), 'node')} is selected{excluded}",
        )
    message = f"Plan is valid, targeting {len(selection.matches)} nodes"
    if selection.control_plane_excluded:
        message += f" ({_plural(len(selection.control_plane_excluded), 'control-plane node')} excluded)"
    return "True", "PlanValid", message


def _by_rule(pairs: Iterable[tuple[str, int]]) -> list[tuple[int, list[str]]]:
    by_rule: dict[int, list[str]] = {}
    for node, index in pairs:
        by_rule.setdefault(index, []).append(node)
    return sorted(by_rule.items())


def _nodes_excluded(selection: Selection) -> _Condition:
    if not selection.target_mismatches:
        return "False", "NoNodesExcluded", "Every selected node matches its profile's targetSelector"
    rules: dict[int, RuleView] = {r.index: r for r in selection.rules}
    parts = []
    for i, nodes in _by_rule(selection.target_mismatches):
        target = rules[i].profile.target_selector
        parts.append(
            f"{_listed(nodes)} not touched: PartitioningProfile {rules[i].profile_name} requires "
            f"targetSelector {target.to_string() if target is not None else ''!r}"
        )
    return "True", "TargetSelectorMismatch", "; ".join(parts)


def _blocked_why(r: Rollup) -> str | None:
    """Why pending nodes cannot be admitted now, or ``None`` when they can (or one is in flight)."""
    limits = r.plan.limits
    counts = r.slots
    if capacity_for(r.plan, counts) != 0 or counts.in_progress != 0:
        return None
    if limits.max_unavailable == 0:
        return "maxUnavailable is 0, so no node may be taken out of service"
    if counts.failed:
        return (
            f"{_plural(counts.failed, 'failed node')} use up maxUnavailable={limits.max_unavailable}; "
            "delete or re-target the failed NodePartitionings to continue"
        )
    return f"maxParallel is {limits.max_parallel}"


def _pending_progress(r: Rollup) -> _Condition:
    """RolloutProgressing while nodes are pending and none is in progress: why they are not moving."""
    pending = _plural(r.pending, "node")
    if r.plan.paused:
        return "False", "PlanPaused", f"Plan is paused; {pending} pending"
    if not r.selection.valid:
        return "False", "PlanNotReady", f"{pending} pending; see PlanReady"
    if r.plan.dry_run:
        return "True", "NodeOperationsInProgress", f"Dry run: {pending} pending"
    if not r.pending_targets:
        return (
            "False",
            "RolloutBlocked",
            f"{pending} pending, none can start: their profile is not Ready or "
            "does not target them (see PlanReady, NodesExcluded)",
        )
    why = _blocked_why(r)
    if why is not None:
        return "False", "RolloutBlocked", f"{pending} pending: {why}"
    return "True", "NodeOperationsInProgress", f"0 nodes in progress, {r.pending} pending"


def _progressing(r: Rollup) -> _Condition:
    """Is anything moving, and if pending nodes are not, why."""
    if r.complete:
        return "False", "RolloutComplete", f"All {len(r.selection.targets)} nodes done"
    if r.in_progress > 0:
        return (
            "True",
            "NodeOperationsInProgress",
            f"{_plural(r.in_progress, 'node')} in progress, {r.pending} pending",
        )
    if r.pending > 0:
        return _pending_progress(r)
    return "False", "NoNodesInProgress", "No node operations in progress"


def _completed(r: Rollup) -> _Condition:
    targets = r.selection.targets
    if r.complete and r.plan.dry_run:
        return "True", "DryRunCompleted", f"Dry run complete: {len(targets)} nodes would be partitioned"
    if r.complete:
        return "True", "AllNodesSucceeded", f"All {len(targets)} nodes succeeded"
    matching = len(r.selection.matches)
    if matching == 0:
        return "False", "NoMatchingNodes", "No nodes match the plan's rules"
    return "False", "RolloutInProgress", f"{r.done_targets}/{matching} nodes done"


def _degraded(r: Rollup) -> _Condition:
    if not r.failed:
        return "False", "NoFailures", "No node failures"
    return "True", "NodeFailures", f"{_plural(r.failed, 'node')} failed: {_listed(r.failed_nodes)}"


def _paused(plan: PlanView) -> _Condition:
    if plan.paused:
        return "True", "PlanPaused", "Plan is paused by user"
    return "False", "PlanActive", "Plan is active"


def _conditions(r: Rollup, previous: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    """Every plan condition, set on the previous ones (``lastTransitionTime`` moves only on a flip)."""
    old = previous.get("conditions")
    conditions = [dict(c) for c in (old if isinstance(old, list) else []) if isinstance(c, Mapping)]
    for type_, (status, reason, message) in (
        (PLAN_READY, _plan_ready(r.selection)),
        (NODES_EXCLUDED, _nodes_excluded(r.selection)),
        (ROLLOUT_PROGRESSING, _progressing(r)),
        (ROLLOUT_COMPLETED, _completed(r)),
        (ROLLOUT_DEGRADED, _degraded(r)),
        (PAUSED, _paused(r.plan)),
    ):
        conditions, _ = set_condition(
            conditions, type_, status, reason, _cap(message), observed_generation=r.plan.generation, now=now
        )
    return conditions


def plan_status(
    plan: PlanView,
    selection: Selection,
    nps: Iterable[NodePartitioningView],
    now: datetime,
    previous_status: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], bool]:
    """The plan's status and whether it differs from ``previous_status`` (False: write nothing).

    Summary buckets (over this plan's NodePartitionings, by :func:`effective_phase`): pending,
    applying (Draining, Applying, WaitingOperator), verifying, succeeded, failed, skipped;
    ``inProgress`` counts the nodes holding a ``maxParallel`` slot, exactly as admission does;
    ``matchingNodes`` counts nodes any rule selects (after control-plane exclusion), ``totalNodes``
    the NodePartitionings. Phase: paused → Paused; invalid plan or failed > 0 → Degraded; anything
    pending or in progress → Progressing; every target done (Succeeded, or Skipped for a dry-run
    plan) with no node held → Completed; else Pending. Conditions follow ``set_condition``
    (``lastTransitionTime`` moves only on a flip), all carrying ``observedGeneration``;
    ``lastSyncTime`` moves only when something else changed, so a steady plan is never rewritten.
    """
    children = this_plans(plan, nps)
    return status_of(rollup(plan, selection, children), now, previous_status, entries=node_entries(children))


def status_of(
    r: Rollup,
    now: datetime,
    previous_status: Mapping[str, Any] | None,
    *,
    entries: Sequence[Mapping[str, Any]] | None = None,
    stamped: tuple[list[dict[str, Any]], bool] | None = None,
) -> tuple[dict[str, Any], bool]:
    """:func:`plan_status` of a :class:`Rollup`, with ``nodeStatuses`` made of ``entries`` (see
    :func:`node_statuses`) or given already ``stamped`` together with whether they differ from
    ``previous_status``'s (the plan controller's index keeps them per event, so a reconcile does not
    compare a thousand entries to find the one that changed)."""
    prev: Mapping[str, Any] = previous_status if isinstance(previous_status, Mapping) else {}
    stamp = format_time(now)
    plan = r.plan
    status_out: dict[str, Any] = {}
    if plan.generation is not None:
        status_out["observedGeneration"] = plan.generation
    status_out["phase"] = _phase(r)
    status_out["summary"] = r.summary()
    status_out["conditions"] = _conditions(r, prev, now)
    if stamped is None:
        status_out["nodeStatuses"] = node_statuses(entries or (), prev, stamp)
        without_sync = {k: v for k, v in prev.items() if k != "lastSyncTime"}
        changed = status_changed(without_sync, status_out)
    else:
        listed, listed_changed = stamped
        rest = {k: v for k, v in prev.items() if k not in ("lastSyncTime", "nodeStatuses")}
        changed = listed_changed or status_changed(rest, status_out)
        status_out["nodeStatuses"] = listed
    changed = changed or not prev.get("lastSyncTime")
    status_out["lastSyncTime"] = stamp if changed else prev["lastSyncTime"]
    return status_out, changed

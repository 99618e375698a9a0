"""The NodePartitioning state machine, as one pure function: :func:`decide`.

A NodePartitioning (NP) is the per-node work item of a PartitioningPlan: drain the node, label it with
a Device Config Manager (DCM) profile, wait for the AMD GPU operator to repartition the GPUs, check
``status.allocatable``, and give the node back. The controller that runs it is thin: it observes the
NP, its Node, its PartitioningProfile, the Pods on the node and DCM's Events from informer caches
(:func:`observe` turns them into views), calls :func:`decide` with ``now``, and executes the
:class:`~aiplane.controllers.partitioning.node_run.Decision`. Nothing here does I/O or reads a clock,
so every transition is table- and property-tested (``tests/unit/partitioning/test_node_decide.py``).

Phases: ``Pending → Draining → Applying → WaitingOperator → Verifying → Succeeded``, plus ``Failed``
and ``Skipped`` (dry run). Conditions ``NodeCordoned``, ``NodeTainted``, ``DrainCompleted``,
``ProfileApplied``, ``OperatorReady``, ``Verified`` and ``DryRun`` keep upstream's reasons; upstream's
behaviour (silogen/kaiwo, ``nodepartitioning_controller.go``) and bugs are in docs/partitioning.md. The phases
live where their subject does: ``drain`` (Draining), ``dcm`` (Applying, WaitingOperator), ``verify``
(Verifying); the resting phases, deletion and the driver are here.

How the executor runs a decision
--------------------------------
:func:`decide` advances through as many phases as the observed world allows in one call (a fixpoint),
so applying its decision and deciding again with the same pods, events and clock changes nothing (no
node write, no status write, no event; evictions blocked by a PodDisruptionBudget are simply asked
for again). One step stops short on purpose: the ``amd-dcm`` taint never rides on the write of our
own cordon (``drain``); the next decision, on the committed cordon, takes it, and the executor
confirms its pods with a LIST first. The executor must apply a decision **in this order**, stopping at the first API error and
requeueing with backoff (an API error never makes an NP Failed — nothing in this module sees one):

1. ``finalizer == "add"``: JSON-patch the finalizer onto the NP, guarded by a ``test`` of
   ``/metadata/resourceVersion``. This is the commit point of the plan's admission: a concurrent
   revocation makes it conflict before the node is touched.
2. Node mutations (``Decision.node_mutations``): apply them with ``apply_node_actions`` to the
   Node *as observed* and write it once (update with its ``resourceVersion``). One write keeps a
   cordon and the annotation recording who cordoned atomic.
3. Evictions (``Decision.evictions``) through the Eviction API with ``preconditions.uid``; a 429
   (PodDisruptionBudget) or 404 is not an error — the decision's ``requeue_after`` retries.
4. ``status`` (when not ``None``) through ``/status``, with the NP's latest ``resourceVersion``.
5. ``events`` on the NP.
6. ``finalizer == "remove"``: only now, after the node write of step 2 has succeeded.

Decisions where the issue (silogen/kaiwo#334) and upstream were silent
---------------------------------------------------------------------
* **Ownership on the Node.** Cordon and taint each record their owner (the NP's name) in annotations
  ``CORDONED_BY_ANNOTATION`` / ``TAINTED_BY_ANNOTATION``, written with the change itself. We
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
* **Clocks live in conditions.** The drain, operator and verify timeouts run from the
  ``lastTransitionTime`` of ``DrainCompleted=False`` (set when draining starts), ``ProfileApplied=True``
  and ``Verified`` (set when verification starts); every attempt starts from cleared conditions, so
  these are fresh. No extra status fields, no annotation writes on the NP.
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
* Draining, DCM and verification have their own decisions: see ``drain``, ``dcm`` and ``verify``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias

from aiplane.apimachinery.conditions import set_condition, status_changed
from aiplane.controllers.partitioning.admission import is_admitted as plan_admitted
from aiplane.controllers.partitioning.dcm import applying, waiting_operator
from aiplane.controllers.partitioning.drain import draining
from aiplane.controllers.partitioning.node_actions import (
    Cordon,
    Evict,
    NodeAction,
    NodeMutation,
    RemoveLabels,
    Taint,
    Uncordon,
    Untaint,
    writable_copy,
)
from aiplane.controllers.partitioning.node_run import (
    DEFAULT_CONFIG,
    DRAIN_COMPLETED,
    DRY_RUN,
    NODE_CORDONED,
    NORMAL,
    STEP_CONDITIONS,
    WARNING,
    Decision,
    Event,
    NodeLogicConfig,
    Run,
)
from aiplane.controllers.partitioning.verify import already_configured, verifying
from aiplane.controllers.partitioning.views import (
    BlockedEviction,
    DcmEventView,
    NodePartitioningView,
    NodeView,
    PodView,
    ProfileView,
    dcm_event_views,
    node_partitioning_view,
    node_view,
    pod_views,
    profile_view,
)
from aiplane.controllers.partitioning.vocabulary import (
    ACTIVE_PHASES,
    APPLY_TRIGGER_LABEL,
    APPLYING,
    DRAINING,
    FAILED,
    FINALIZER,
    PENDING,
    SKIPPED,
    SUCCEEDED,
    VERIFYING,
    WAITING_OPERATOR,
)

__all__ = [
    "AdmissionCheck",
    "NodeObservation",
    "Observed",
    "Step",
    "decide",
    "decide_step",
    "disrupts",
    "observe",
    "taints",
]

AdmissionCheck: TypeAlias = Callable[[NodePartitioningView], bool]


@dataclass(frozen=True)
class NodeObservation:
    """Everything :func:`decide` reads, as views."""

    np: NodePartitioningView
    node: NodeView | None  # None: the Node named by spec.nodeName does not exist
    profile: ProfileView | None  # None: the PartitioningProfile named by spec.profileRef does not exist
    pods: tuple[PodView, ...]  # the Pods with spec.nodeName = the node (any namespace, any phase)
    dcm_events: tuple[DcmEventView, ...]  # recent DCM Events (filtered again by node and time)
    blocked: tuple[BlockedEviction, ...] = ()  # the Eviction API's last 429s for pods on the node


def observe(
    np: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    profile: Mapping[str, Any] | None,
    pods_on_node: Sequence[Mapping[str, Any]],
    dcm_events: Sequence[Mapping[str, Any]] = (),
    blocked: Sequence[BlockedEviction] = (),
) -> NodeObservation:
    """The views of what the executor found in its caches (``None`` for an object that is absent),
    plus what the Eviction API last answered it (``blocked``: nothing watches that answer)."""
    return NodeObservation(
        np=node_partitioning_view(np),
        node=node_view(node) if node is not None else None,
        profile=profile_view(profile) if profile is not None else None,
        pods=pod_views(pods_on_node),
        dcm_events=dcm_event_views(dcm_events),
        blocked=tuple(blocked),
    )


# --- the resting phases (each returns True to keep going with the new phase, False to stop) ---------


def _dry_run_message(run: Run) -> str:
    p = run.profile
    if p is not None and not p.guard.matches(run.node.labels):
        return (
            f"Dry-run: node {run.node_name} does not match the targetSelector of profile "
            f"{run.profile_ref}; it would not be partitioned"
        )
    if p is not None and already_configured(run.node, p):
        return f"Dry-run: node {run.node_name} already has profile {run.profile_ref}; it would not be touched"
    return f"Dry-run: would partition node {run.node_name} with profile {run.profile_ref}"


def _already_in_desired_state(run: Run, profile: ProfileView) -> bool:
    message = f"Node {run.node_name} already has DCM profile {profile.dcm} and the expected resources"
    run.conditions = []
    for type_ in STEP_CONDITIONS:
        run.cond(type_, "True", "AlreadyInDesiredState", message)
    run.current_hash = run.desired_hash()
    run.event(NORMAL, "AlreadyConfigured", message)
    return run.goto(SUCCEEDED)


def pending(run: Run) -> bool:
    """Hold (releasing anything of ours) until admitted; short-circuit a node already configured."""
    if run.np.dry_run:
        run.event(NORMAL, "DryRunSkipped", _dry_run_message(run))
        return run.goto(SKIPPED)
    run.phase = PENDING
    profile = run.profile
    # Held while the profile is unusable (the plan holds such nodes too), or the node does not match
    # its targetSelector (never touched: see "targetSelector" in the module docstring), or not admitted.
    if profile is None or not profile.guard.matches(run.node.labels):
        run.release()
        return False
    if already_configured(run.node, profile):
        return _already_in_desired_state(run, profile)
    if not run.admitted:
        run.release()
        return False
    run.goto(DRAINING, reset=True)
    run.cond(DRAIN_COMPLETED, "False", "DrainInProgress", "drain started")
    run.event(NORMAL, "DrainStarted", f"Draining node {run.node_name} to apply DCM profile {profile.dcm}")
    return True


def succeeded(run: Run) -> bool:
    if run.current_hash != run.desired_hash():
        return run.goto(PENDING, reset=True)
    run.release()
    return False


def failed(run: Run) -> bool:
    run.release()
    return False


def skipped(run: Run) -> bool:
    if not run.np.dry_run:
        return run.goto(PENDING, reset=True)
    run.cond(DRY_RUN, "True", "DryRunEnabled", _dry_run_message(run))
    for type_ in STEP_CONDITIONS:
        run.cond(type_, "False", "DryRunSkipped", "Dry-run: no changes are made to the node")
    run.release()
    return False


_HANDLERS: Final[dict[str, Callable[[Run], bool]]] = {
    "": pending,
    PENDING: pending,
    DRAINING: draining,
    APPLYING: applying,
    WAITING_OPERATOR: waiting_operator,
    VERIFYING: verifying,
    SUCCEEDED: succeeded,
    FAILED: failed,
    SKIPPED: skipped,
}
_MAX_STEPS: Final = 16  # far more than the longest chain (Succeeded → Pending → … → WaitingOperator)


# --- the driver ------------------------------------------------------------------------------------


def _start(
    seen: NodeObservation, node: NodeView, now: datetime, config: NodeLogicConfig, admitted: bool
) -> Run:
    profile = seen.profile
    return Run(
        np=seen.np,
        work=writable_copy(node.obj),
        observed=node,
        profile=profile if profile is not None and profile.unusable is None else None,
        profile_error=profile.unusable if profile is not None else None,
        pods=seen.pods,
        dcm_events=seen.dcm_events,
        blocked=seen.blocked,
        now=now,
        config=config,
        admitted=admitted,
        phase=seen.np.phase,
        conditions=[dict(c) for c in seen.np.conditions],
        current_hash=seen.np.current_hash or None,
    )


def _follow_spec_change(run: Run) -> None:
    """A new generation restarts an attempt in flight at Draining, and retries a Failed one."""
    phase = run.phase
    if not run.np.spec_changed:
        return
    if phase in ACTIVE_PHASES:
        run.event(
            NORMAL,
            "Restarted",
            f"NodePartitioning spec changed during {phase}; restarting the partitioning of node {run.node_name}",
        )
        if phase in (APPLYING, WAITING_OPERATOR):
            run.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        run.goto(DRAINING, reset=True)
        run.cond(DRAIN_COMPLETED, "False", "DrainInProgress", "drain restarted")
    elif phase == FAILED:
        run.goto(PENDING, reset=True)


def _decision(run: Run) -> Decision:
    old_status = run.np.status
    status = dict(old_status)
    status["phase"] = run.phase
    status["conditions"] = run.conditions
    if run.current_hash:
        status["currentHash"] = run.current_hash
    if run.blocked_by:
        status["blockedBy"] = run.blocked_by
    else:
        status.pop("blockedBy", None)
    if run.np.generation is not None:
        status["observedGeneration"] = run.np.generation
    return Decision(
        phase=run.phase,
        status=status if status_changed(old_status, status) else None,
        node_actions=tuple(run.actions),
        events=tuple(run.events),
        requeue_after=run.requeue,
        finalizer=run.finalizer,
    )


def decide(
    seen: NodeObservation,
    now: datetime,
    config: NodeLogicConfig = DEFAULT_CONFIG,
    *,
    is_admitted: AdmissionCheck | None = None,
) -> Decision:
    """The next step for the observed NodePartitioning. Pure: nothing is mutated, no I/O, no clock.

    ``now`` is the reconcile's clock (timezone-aware; a naive one is taken as UTC); ``is_admitted``
    the plan's admission check, by default ``admission.is_admitted``.
    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    if seen.np.deleting:
        return _decide_deletion(seen.np, seen.node)
    if seen.node is None:
        return _decide_node_missing(seen.np, now)
    run = _start(seen, seen.node, now, config, (is_admitted or plan_admitted)(seen.np))
    _follow_spec_change(run)
    for _ in range(_MAX_STEPS):
        if not _HANDLERS.get(run.phase, pending)(run):
            break
    return _decision(run)


def _finalizer_removal(np: NodePartitioningView) -> Literal["remove"] | None:
    return "remove" if FINALIZER in np.finalizers else None


def _decide_deletion(np: NodePartitioningView, node: NodeView | None) -> Decision:
    """The NP is being deleted: give back what we took (only ours), then let it go. No status write:
    nobody reads the status of an object on its way out."""
    actions: list[NodeAction] = []
    if node is not None:
        work = writable_copy(node.obj)
        candidates: list[NodeMutation] = [Untaint(np.name), Uncordon(np.name)]
        if np.phase in (APPLYING, WAITING_OPERATOR):
            candidates.append(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        actions = [a for a in candidates if a.mutate(work)]
    return Decision(phase=np.phase or PENDING, node_actions=tuple(actions), finalizer=_finalizer_removal(np))


def _decide_node_missing(np: NodePartitioningView, now: datetime) -> Decision:
    """The Node is gone: Failed ``NodeNotFound`` (once), and nothing left to release."""
    finalizer = _finalizer_removal(np)
    if np.phase == FAILED and not np.spec_changed:
        return Decision(phase=FAILED, finalizer=finalizer)
    message = f"Node {np.node_name} not found"
    conditions, _ = set_condition(
        [dict(c) for c in np.conditions],
        NODE_CORDONED,
        "False",
        "NodeNotFound",
        message,
        observed_generation=np.generation,
        now=now,
    )
    old_status = np.status
    status = {**old_status, "phase": FAILED, "conditions": conditions}
    status.pop("blockedBy", None)
    if np.generation is not None:
        status["observedGeneration"] = np.generation
    return Decision(
        phase=FAILED,
        status=status if status_changed(old_status, status) else None,
        events=(Event(WARNING, "NodeNotFound", message),),
        finalizer=finalizer,
    )


# --- the executor's step: the decision, unless it would disrupt on a stale view -----------------------


@dataclass(frozen=True)
class Observed:
    """What the executor observed for one NodePartitioning: the views, and whether its caches are fresh."""

    seen: NodeObservation
    config: NodeLogicConfig
    #: Every cache a disruption rests on (NPs, Nodes, pods) heard from the API server recently.
    fresh: bool


@dataclass(frozen=True)
class Step:
    decision: Decision
    #: The decision would take a node (further) out of service on a stale view: nothing is done, the
    #: executor looks again later (a dead watch may hide a node already out of service, or moved pods).
    stale: bool


def disrupts(decision: Decision) -> bool:
    """Does ``decision`` take a node (further) out of service: a cordon, a taint, an eviction?"""
    return any(isinstance(action, Cordon | Taint | Evict) for action in decision.node_actions)


def taints(decision: Decision) -> bool:
    """Does ``decision`` put the ``amd-dcm`` NoExecute taint on the node?"""
    return any(isinstance(action, Taint) for action in decision.node_actions)


def decide_step(observed: Observed, now: datetime) -> Step:
    """:func:`decide`, held back when it disrupts and the view is stale."""
    decision = decide(observed.seen, now, observed.config)
    return Step(decision, stale=disrupts(decision) and not observed.fresh)

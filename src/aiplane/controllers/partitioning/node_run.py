"""The working state of one NodePartitioning decision, and what a decision returns.

The phase handlers (``drain``, ``dcm``, ``verify``, ``node_decide``) all work on one :class:`Run`:
it holds the conditions being rewritten, the node actions decided so far, and a private copy of the
Node those actions are applied to as they are decided, so a later step in the same decision sees
the node as it will be. The helpers here are the state machine's shared vocabulary: set a
condition, start or read a clock, fail, release the node, wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, set_condition
from aiplane.controllers.partitioning.node_actions import (
    Evict,
    NodeAction,
    NodeMutation,
    RemoveLabels,
    Uncordon,
    UnmarkApplied,
    Untaint,
    applied_by,
)
from aiplane.controllers.partitioning.views import (
    BlockedEviction,
    DcmEventView,
    NodePartitioningView,
    NodeView,
    PodView,
    ProfileView,
    node_view,
)
from aiplane.controllers.partitioning.vocabulary import (
    APPLY_TRIGGER_LABEL,
    APPLYING,
    CORDONED_BY_ANNOTATION,
    FAILED,
    FINALIZER,
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
    TAINTED_BY_ANNOTATION,
    WAITING_OPERATOR,
)

__all__ = ["DEFAULT_CONFIG", "Decision", "Event", "NodeLogicConfig", "Run", "fmt_duration"]

# Condition types.
NODE_CORDONED: Final = "NodeCordoned"
NODE_TAINTED: Final = "NodeTainted"
DRAIN_COMPLETED: Final = "DrainCompleted"
PROFILE_APPLIED: Final = "ProfileApplied"
OPERATOR_READY: Final = "OperatorReady"
VERIFIED: Final = "Verified"
DRY_RUN: Final = "DryRun"
STEP_CONDITIONS: Final = (
    NODE_CORDONED,
    NODE_TAINTED,
    DRAIN_COMPLETED,
    PROFILE_APPLIED,
    OPERATOR_READY,
    VERIFIED,
)

NORMAL: Final = "Normal"
WARNING: Final = "Warning"


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


@dataclass(frozen=True)
class Decision:
    """What the executor does for one reconcile (see ``node_decide`` for the order).

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


def fmt_duration(td: timedelta) -> str:
    seconds = int(td.total_seconds())
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s or not (h or m) else "")


@dataclass
class Run:
    """Working state of one decision. ``work`` is a private copy of the Node that node actions are
    applied to as they are decided; ``node`` is always the view of it."""

    np: NodePartitioningView
    work: dict[str, Any]
    profile: ProfileView | None  # usable profiles only
    profile_error: str | None  # why the profile is unusable (None: usable or missing)
    pods: Sequence[PodView]
    dcm_events: Sequence[DcmEventView]
    blocked: Sequence[BlockedEviction]
    now: datetime
    config: NodeLogicConfig
    admitted: bool
    phase: str
    conditions: list[dict[str, Any]]
    current_hash: str | None
    observed: InitVar[NodeView | None] = None
    node: NodeView = field(init=False)
    actions: list[NodeAction] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue: float | None = None
    finalizer: Literal["add", "remove"] | None = None
    drop_trigger: bool = False
    blocked_by: str | None = None  # status.blockedBy: the budgets holding the drain (None: nothing)

    def __post_init__(self, observed: NodeView | None) -> None:
        # The view of the Node as observed (the work copy starts equal to it); rebuilt on each mutation.
        self.node = observed if observed is not None else node_view(self.work)

    @property
    def owner(self) -> str:
        """Who our marks on the Node name: the NP's name (see "Ownership on the Node")."""
        return self.np.name

    @property
    def node_name(self) -> str:
        return self.np.node_name

    @property
    def profile_ref(self) -> str:
        return self.np.profile_name

    def desired_hash(self) -> str | None:
        return self.np.desired_hash or None

    def act(self, action: NodeAction) -> None:
        if isinstance(action, Evict):
            if action not in self.actions:
                self.actions.append(action)
        elif action.mutate(self.work):
            self.actions.append(action)
            # Actions write labels, annotations and spec only: the parsed allocatable is still right.
            self.node = node_view(self.work, allocatable=self.node.allocatable)

    def cond(self, type_: str, status: str, reason: str, message: str) -> None:
        self.conditions, _ = set_condition(
            self.conditions,
            type_,
            status,
            reason,
            message,
            observed_generation=self.np.generation,
            now=self.now,
        )

    def cond_if_present(self, type_: str, status: str, reason: str, message: str) -> None:
        if get_condition(self.conditions, type_) is not None:
            self.cond(type_, status, reason, message)

    def drop_condition(self, type_: str) -> None:
        """Forget a condition, so setting it again starts its clock now."""
        self.conditions = [c for c in self.conditions if c.get("type") != type_]

    def since(self, type_: str) -> datetime:
        """When condition ``type_`` last flipped (``now`` when absent or unreadable)."""
        c = get_condition(self.conditions, type_)
        t = objects.parse_time(c.get("lastTransitionTime")) if c is not None else None
        return t if t is not None else self.now

    def wait(self, seconds: float) -> None:
        seconds = max(seconds, 0.001)
        self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)

    def wait_until(self, deadline: datetime, interval: timedelta) -> None:
        """Requeue after ``interval``, but never past ``deadline``."""
        self.wait(min(interval, deadline - self.now).total_seconds())

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def ensure_finalizer(self) -> None:
        if FINALIZER not in self.np.finalizers:
            self.finalizer = "add"

    def ours(self, annotation: str) -> bool:
        """Does the Node's ``annotation`` (cordoned-by, tainted-by) name us?"""
        return self.node.annotations.get(annotation) == self.owner

    def has_marks(self) -> bool:
        ann = self.node.annotations
        mine = (ann.get(CORDONED_BY_ANNOTATION), ann.get(TAINTED_BY_ANNOTATION), applied_by(ann))
        return self.owner in mine

    def untaint(self) -> None:
        """Remove our taint (only ours) so the device plugin, which does not tolerate it, can come back;
        the cordon stays until verification passes."""
        if self.ours(TAINTED_BY_ANNOTATION):
            self.act(Untaint(self.owner))
            self.cond(
                NODE_TAINTED,
                "False",
                "TaintRemoved",
                f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} removed so the device plugin can restart",
            )

    def release(self) -> None:
        """Undo our taint and cordon (only ours), drop the trigger label if the operator step was
        interrupted, then drop the finalizer once nothing of ours is left."""
        if self.ours(TAINTED_BY_ANNOTATION):
            self.act(Untaint(self.owner))
            self.cond_if_present(
                NODE_TAINTED,
                "False",
                "TaintRemoved",
                f"Taint {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT} removed",
            )
        if self.ours(CORDONED_BY_ANNOTATION):
            self.act(Uncordon(self.owner))
            self.cond_if_present(NODE_CORDONED, "False", "Uncordoned", f"Node {self.node_name} uncordoned")
        if self.drop_trigger:
            self.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
        if applied_by(self.node.annotations) == self.owner:
            self.act(UnmarkApplied(self.owner))
        if FINALIZER in self.np.finalizers and not self.has_marks():
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

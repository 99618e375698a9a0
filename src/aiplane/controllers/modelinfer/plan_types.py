"""the decision's vocabulary: what the executor hands :func:`~.decide.plan` and what it gets back.

Kept apart from the decisions in :mod:`.decide` so the executor, the status computation and the
views built in :mod:`.observe` depend on plain records, not on how the decision reaches its verdict.
Every record is frozen: a plan is a value, compared and replayed by the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiplane.controllers.gang import VOLCANO, GangBackend

if TYPE_CHECKING:  # records of the modules that build on these (no import cycle at run time)
    from aiplane.controllers.causes import Held
    from aiplane.controllers.modelinfer.disruption import BudgetWrite
    from aiplane.controllers.modelinfer.disruption import Decision as Arbitration
    from aiplane.controllers.modelinfer.podgroups import PodGroups
    from aiplane.controllers.modelinfer.queued import QueueView, WorkloadWrite

__all__ = [
    "Action",
    "CreateRoleReplica",
    "DeleteGroup",
    "DeletePods",
    "DeleteRoleReplica",
    "GroupState",
    "GroupSummary",
    "ModelInferDecision",
    "ModelInferObserved",
    "Plan",
    "PlanInput",
    "PodPhase",
    "PodView",
    "RecoveryPolicy",
    "RoleShape",
    "ServiceView",
]

RecoveryPolicy = Literal["RoleRecreate", "InferGroupRecreate", "None"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
#: ``Creating``: not available yet, no failure seen (new, starting, or a pod merely NotReady).
#: ``Running``: available. ``Recovering``: a pod failed, restarted and is not ready, went missing or
#: is being deleted under the recovery policy. ``Deleting``: being removed as a whole.
GroupState = Literal["Creating", "Running", "Recovering", "Deleting"]


# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoleShape:
    """One role of a revision: ``replicas`` role replicas of ``1 + worker_replicas`` pods each, and a
    headless Service per role replica when ``has_service``.

    In :attr:`PlanInput.shapes` only ``worker_replicas`` and ``has_service`` are read (``replicas``
    is used only for a role the current spec no longer has); in :attr:`PlanInput.roles` ``replicas``
    is the current role replica count that every group follows, whatever its revision.
    """

    name: str
    replicas: int
    worker_replicas: int
    has_service: bool

    @property
    def pods_per_replica(self) -> int:
        return 1 + self.worker_replicas


@dataclass(frozen=True)
class PodView:
    """What the decision needs of one pod of the ModelInfer (from its labels and status).

    ``restarted``: any container or init container has ``restartCount > 0``. ``not_ready_since``:
    epoch seconds of the ``Ready`` condition's ``lastTransitionTime`` while the pod is not ready
    (``None`` when ready or unknown). ``terminating``: ``deletionTimestamp`` is set.
    """

    name: str
    uid: str
    ordinal: int
    role: str
    role_index: int
    pod_index: int
    revision: str
    phase: PodPhase = "Pending"
    ready: bool = False
    restarted: bool = False
    not_ready_since: float | None = None
    terminating: bool = False


@dataclass(frozen=True)
class ServiceView:
    """One headless Service of a role replica (named like its entry pod)."""

    name: str
    ordinal: int
    role: str
    role_index: int
    terminating: bool = False


@dataclass(frozen=True)
class PlanInput:
    """The spec and the observation of one ModelInfer.

    ``shapes`` must hold every revision a pod carries (the executor keeps their ControllerRevisions
    while any pod uses them), and ``current_revision`` and ``update_revision``; ``update_revision``
    falls back to ``roles``. ``max_unavailable`` and ``max_surge`` are resolved against ``replicas``
    by the caller (percent: down / up). ``current_revision`` is ``status.currentRevision``, or
    ``update_revision`` for a new ModelInfer (see :func:`aiplane.controllers.modelinfer.status.compute_status`).

    Disruption (docs/modelinfer.md, "Disruption"): ``cordoned`` are the ordinals with a live pod on
    a cordoned node, ``released`` those whose PodDisruptionBudget lets a drain evict them (the
    arbiter's verdict: their capacity is spent, the rolling update may not count them), ``held``
    the available ones a drain waits for (the floor would break): with ``max_surge`` they get
    replacement groups first.
    """

    replicas: int
    roles: tuple[RoleShape, ...]
    shapes: Mapping[str, tuple[RoleShape, ...]]
    update_revision: str
    current_revision: str
    partition: int = 0
    max_unavailable: int = 1
    max_surge: int = 0
    recovery_policy: RecoveryPolicy = "RoleRecreate"
    restart_grace_period_seconds: int = 0
    pods: tuple[PodView, ...] = ()
    services: tuple[ServiceView, ...] = ()
    now: float = 0.0
    cordoned: frozenset[int] = frozenset()
    released: frozenset[int] = frozenset()
    held: frozenset[int] = frozenset()


# --- outputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateRoleReplica:
    """Create the listed pods of one role replica from ``revision``'s template, and its Service when
    ``service`` is true. New groups, role scale-up and refills all use it; ``pod_indices`` may be
    empty when only the Service is missing."""

    ordinal: int
    role: str
    role_index: int
    revision: str
    pod_indices: tuple[int, ...]
    service: bool


@dataclass(frozen=True)
class DeletePods:
    """Delete these pods, each as ``(name, uid)`` (the uid is the delete's precondition)."""

    pods: tuple[tuple[str, str], ...]
    reason: str


@dataclass(frozen=True)
class DeleteRoleReplica:
    """Delete every pod and the Service of one role replica that is not terminating yet."""

    ordinal: int
    role: str
    role_index: int
    reason: str


@dataclass(frozen=True)
class DeleteGroup:
    """Delete every pod and Service of group ``ordinal`` that is not terminating yet. The group's
    PodGroup is *not* part of it: see :attr:`Plan.groups`."""

    ordinal: int
    reason: str


Action = CreateRoleReplica | DeletePods | DeleteRoleReplica | DeleteGroup


@dataclass(frozen=True)
class GroupSummary:
    """A group as it will be once the plan's actions are applied (deleted groups are ``Deleting``,
    new ones ``Creating``). ``expected_pods``/``ready_pods`` count the pods the group should have
    and those of them Running and Ready. ``outdated``: the rolling update still has to replace it."""

    ordinal: int
    revision: str
    state: GroupState
    available: bool
    expected_pods: int
    ready_pods: int
    outdated: bool = False


@dataclass(frozen=True)
class Plan:
    """What to do now, when to look again, and the groups (ordinal order) for PodGroups and status."""

    actions: tuple[Action, ...]
    requeue_after: float | None
    groups: tuple[GroupSummary, ...]


# --- the whole controller's observation and decision ---------------------------------------------------

Obj = dict[str, Any]


@dataclass(frozen=True)
class ModelInferObserved:
    """One ModelInfer and what its decision reads (from the caches; the pods from a LIST when the
    decision would spend serving capacity, see :func:`~.disruption.spends_floor`).

    ``problems``: the formatted validation problems ("" when the spec is valid; nothing else is
    then read). ``revisions``: every recorded revision's roles, the update revision's included;
    ``recorded``: whether the update revision has its ControllerRevision. ``decided``: none of our
    own child writes is still missing from the caches (else only the status is refreshed).
    ``podgroups`` ``None``: the gang scheduler's PodGroup API is not served.
    """

    mi: Obj
    problems: str = ""
    pods: tuple[Obj, ...] = ()
    services: tuple[Obj, ...] = ()
    roles: tuple[Mapping[str, Any], ...] = ()
    revisions: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    recorded: bool = True
    owned_revisions: tuple[Obj, ...] = ()
    update_revision: str = ""
    current_revision: str = ""
    decided: bool = True
    budgets: Mapping[str, Obj] = field(default_factory=dict)
    released: frozenset[int] = frozenset()
    cordoned_nodes: frozenset[str] = frozenset()
    podgroups: tuple[Obj, ...] | None = None
    gang: GangBackend = VOLCANO
    #: What holds the pods (for ``waitingFor``) and the groups in Kueue (for ``QuotaReserved``).
    waiting: tuple[Held, ...] = ()
    queue: QueueView | None = None
    #: The Kueue LocalQueue the platform gives this ModelInfer's new groups (None: none, or opted out).
    platform_queue: str | None = None
    #: The Kueue Workloads it owns or may own (None: Kueue is not served); see ``queued.workload_writes``.
    workloads: tuple[Obj, ...] | None = None


@dataclass(frozen=True)
class ModelInferDecision:
    """What to write, in the executor's order, and the status wanted.

    ``revision``: the ControllerRevision to create first; ``podgroups`` before any pod;
    ``budgets`` before any pod delete; the ``plan``'s actions (pods in ``spared`` are left to the
    drain); ``prune``: unused ControllerRevisions. ``invalid``: the spec's problems (nothing is written
    but the status). Nothing but the status and the revision is written unless ``observed.decided``.
    """

    status: Mapping[str, Any]
    invalid: str = ""
    plan: Plan | None = None
    arbitration: Arbitration | None = None
    revision: Obj | None = None
    podgroups: PodGroups | None = None
    budgets: tuple[BudgetWrite, ...] = ()
    spared: frozenset[str] = frozenset()
    prune: tuple[Obj, ...] = ()
    #: The Kueue queue of the pods each ``CreateRoleReplica`` makes, by ``(ordinal, revision)``
    #: (None: not queued): its group's pods' when the group has any, else the platform's.
    queues: Mapping[tuple[int, str], str | None] = field(default_factory=dict)
    #: The Workloads of its groups to take ownership of, or to delete (``queued.workload_writes``).
    workloads: tuple[WorkloadWrite, ...] = ()

"""ModelInfer decisions, as one pure function of the observed pods and services: :func:`plan`.

The executor observes a ModelInfer's pods and Services from informer caches, turns them into
:class:`PodView`/:class:`ServiceView` records, calls :func:`plan` with the spec (as :class:`PlanInput`)
and ``now``, and carries out the :class:`Plan`. Nothing here does I/O or reads a clock, so every rule
below is table-tested (``tests/unit/modelinfer/test_decide.py``) and checked by a hypothesis step
simulator (``test_decide_properties.py``). Upstream's behaviour (volcano-sh/kthena,
``pkg/infer-controller/controller/modelinfer_controller.go``), the bugs fixed here and the design notes
are in docs/modelinfer-decide.md.

The decision is stateless: everything it knows comes from the observation. Whatever happened before
(a lost event, a crashed executor, a half-done deletion) the next call decides from what is there,
which is why it can be re-run on every reconcile and why a lost delete event never stalls anything.

The terms (group, shape, unit, available, outdated), the steps of one call, recovery per
``recovery_policy`` and why rollout limits hold across calls are in docs/modelinfer-decide.md
("Terms", "One call", "Recovery", "Rolling update"); each rule is a test in
``tests/unit/modelinfer/test_decide.py``.

:func:`decide` is the whole controller's decision around :func:`plan`: the ControllerRevision of a
new revision, the arbiter's verdict (:mod:`.disruption`) fed to the plan, the PodGroups
(:mod:`.podgroups`), the budgets, the revisions to prune and the status (:mod:`.status`).

What the executor must respect
------------------------------
* **Expectations.** Call :func:`plan` only when the cache shows the executor's own recent creates and
  deletes (as created / terminating or gone). The decision takes the observation as complete; on a
  stale cache it would create again what was just created (harmless: AlreadyExists) or delete more
  than the budget allows (not harmless).
* **Deletes skip terminating objects.** ``DeleteGroup`` and ``DeleteRoleReplica`` mean "delete the
  pods and Services of this group / role replica that are not terminating yet", each pod with a UID
  precondition; the decision never emits one for a unit that has nothing left to delete, so the same
  delete is never issued twice.
* **Creates.** ``CreateRoleReplica`` creates exactly the listed pods (entry first), and the Service
  when ``service`` is true, from the template of ``revision``; AlreadyExists is success.
* **Order.** Apply actions in the order given (deletions, then creations); stop at the first API
  error and requeue with backoff. A partly applied plan is fine: the next call finishes it.
* **PodGroups.** Every ordinal in :attr:`Plan.groups` should have a PodGroup (when gang scheduling
  is on), built from that group's ``revision``; every other ordinal should not. A Deleting group
  keeps its PodGroup (as it is: no need to update it) until its last pod and Service are gone, so a
  group recreated on the same ordinal reuses it, updated to the new revision's sizes before the
  new pods are created.
* **Requeue.** Honour :attr:`Plan.requeue_after` (a grace period running out, or a periodic recheck
  while something is terminating); also reconcile on every pod and Service event of the ModelInfer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import deep_get
from aiplane.controllers import queueing
from aiplane.controllers.modelinfer.disruption import Decision as Arbitration
from aiplane.controllers.modelinfer.disruption import (
    budget_writes,
    cordoned_groups,
    desired_budgets,
    left_to_the_drain,
)
from aiplane.controllers.modelinfer.disruption import decide as arbitrate
from aiplane.controllers.modelinfer.naming import LABEL_GROUP_NAME, LABEL_REVISION, group_name
from aiplane.controllers.modelinfer.observe import controlled_by, shape_of, shapes_of, views
from aiplane.controllers.modelinfer.plan_types import (
    Action,
    CreateRoleReplica,
    DeleteGroup,
    DeletePods,
    DeleteRoleReplica,
    GroupState,
    GroupSummary,
    ModelInferDecision,
    ModelInferObserved,
    Plan,
    PlanInput,
    PodPhase,
    PodView,
    RecoveryPolicy,
    RoleShape,
    ServiceView,
)
from aiplane.controllers.modelinfer.podgroups import podgroup_writes
from aiplane.controllers.modelinfer.queued import kept_pod_groups, live_revisions, workload_writes
from aiplane.controllers.modelinfer.revision import (
    REVISION_HISTORY_LIMIT,
    controller_revision,
    next_revision_number,
    revision_of,
    with_current_replicas,
)
from aiplane.controllers.modelinfer.status import invalid_status, modelinfer_status
from aiplane.controllers.modelinfer.validation import (
    resolve_max_surge,
    resolve_max_unavailable,
    rolling_update_configuration,
)

# The records are re-exported: ``plan`` and its vocabulary are one API.
__all__ = [
    "AVAILABLE_PHASE",
    "DELETING_RECHECK_SECONDS",
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
    "arbitrate_and_plan",
    "decide",
    "group_availability",
    "plan",
]


AVAILABLE_PHASE: Final = "Running"
#: Phases a pod never leaves: its containers have all exited and will not be restarted.
_TERMINAL_PHASES: Final = frozenset({"Failed", "Succeeded"})
#: While anything of the ModelInfer is terminating, plan again after at most this long, so a lost
#: delete event (or a Service deletion nobody watches) cannot stall a rebuild.
DELETING_RECHECK_SECONDS: Final = 10.0


# --- observation -----------------------------------------------------------------------------------


@dataclass
class _Unit:
    role: str
    index: int
    pods: list[PodView] = field(default_factory=list)
    services: list[ServiceView] = field(default_factory=list)

    def terminating(self) -> bool:
        return any(p.terminating for p in self.pods) or any(s.terminating for s in self.services)

    def live(self) -> bool:
        return any(not p.terminating for p in self.pods) or any(not s.terminating for s in self.services)


@dataclass
class _Group:
    ordinal: int
    pods: list[PodView] = field(default_factory=list)
    services: list[ServiceView] = field(default_factory=list)
    units: dict[tuple[str, int], _Unit] = field(default_factory=dict)
    revision: str = ""
    shape: tuple[RoleShape, ...] | None = None
    available: bool = False
    expected: int = 0
    ready: int = 0
    outdated: bool = False
    # Recovery and role-level analysis (step 2 and 7).
    actions: list[Action] = field(default_factory=list)
    delete_reason: str | None = None
    trouble: bool = False
    requeue: float | None = None

    def unit(self, role: str, index: int) -> _Unit:
        key = (role, index)
        if key not in self.units:
            self.units[key] = _Unit(role, index)
        return self.units[key]

    def live_pods(self) -> list[PodView]:
        return [p for p in self.pods if not p.terminating]

    def deleting(self) -> bool:
        """Everything left is terminating: wait until it is gone."""
        return not any(not p.terminating for p in self.pods) and not any(
            not s.terminating for s in self.services
        )

    def orphaned(self) -> bool:
        """Live Services but no pod at all: not a group any more, only debris to clean up.

        (Pods still terminating keep it a group: its units decide, so that a plan's own pod
        deletions are not followed by a second delete on the next call.)
        """
        return not self.pods and any(not s.terminating for s in self.services)


def _min_opt(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _is_ready(pod: PodView, revision: str) -> bool:
    return not pod.terminating and pod.phase == AVAILABLE_PHASE and pod.ready and pod.revision == revision


class _Decider:
    def __init__(self, inp: PlanInput) -> None:
        self.inp = inp
        self.current_roles = {r.name: r for r in inp.roles}

    # -- shapes -----------------------------------------------------------------------------------

    def shape(self, revision: str) -> tuple[RoleShape, ...] | None:
        shape = self.inp.shapes.get(revision)
        if shape is None and revision == self.inp.update_revision:
            return self.inp.roles
        return shape

    def desired_role_replicas(self, role: RoleShape) -> int:
        current = self.current_roles.get(role.name)
        return max(current.replicas if current is not None else role.replicas, 0)

    def target_revision(self, ordinal: int) -> str:
        """A new group's revision: partition-protected ordinals stay on ``current_revision``
        (StatefulSet semantics), the others get ``update_revision``. A protected ordinal goes to
        ``update_revision`` too when ``current_revision`` is unknown or would give it no pod at all
        (its roles were all scaled to 0 since): a group of no pods cannot exist."""
        inp = self.inp
        if ordinal < inp.partition:
            current = self.shape(inp.current_revision)
            if current is not None and self.expected_pods(current) > 0:
                return inp.current_revision
        return inp.update_revision

    def is_outdated(self, ordinal: int, revision: str) -> bool:
        return ordinal >= self.inp.partition and revision != self.inp.update_revision

    def expected_pods(self, shape: Iterable[RoleShape]) -> int:
        return sum(self.desired_role_replicas(r) * r.pods_per_replica for r in shape)

    # -- observation --------------------------------------------------------------------------------

    def observe(self) -> dict[int, _Group]:
        groups: dict[int, _Group] = {}
        for pod in self.inp.pods:
            g = groups.setdefault(pod.ordinal, _Group(pod.ordinal))
            g.pods.append(pod)
            g.unit(pod.role, pod.role_index).pods.append(pod)
        for svc in self.inp.services:
            g = groups.setdefault(svc.ordinal, _Group(svc.ordinal))
            g.services.append(svc)
            g.unit(svc.role, svc.role_index).services.append(svc)
        for g in groups.values():
            self.classify(g)
        return groups

    def group_revision(self, g: _Group) -> str:
        pods = g.live_pods() or g.pods
        if not pods:
            return ""
        counts = Counter(p.revision for p in pods)
        inp = self.inp
        return min(
            counts,
            key=lambda r: (-counts[r], r != inp.update_revision, r != inp.current_revision, r),
        )

    def classify(self, g: _Group) -> None:
        g.revision = self.group_revision(g)
        g.shape = self.shape(g.revision) if g.revision else None
        if g.deleting() or g.orphaned():
            g.expected = self.expected_pods(g.shape) if g.shape is not None else len(g.pods)
            g.outdated = bool(g.revision) and self.is_outdated(g.ordinal, g.revision)
            return
        if g.shape is None:
            # Unknown revision: nothing can be rebuilt on it, so the rollout replaces the group.
            g.outdated = True
            g.expected = len(g.pods)
            g.ready = sum(1 for p in g.pods if _is_ready(p, p.revision))
            g.available = 0 < g.ready == g.expected
            return
        g.outdated = self.is_outdated(g.ordinal, g.revision)
        expected = ready = 0
        for role in g.shape:
            for index in range(self.desired_role_replicas(role)):
                unit = g.units.get((role.name, index))
                by_index = {p.pod_index: p for p in unit.pods} if unit else {}
                for k in range(role.pods_per_replica):
                    expected += 1
                    pod = by_index.get(k)
                    if pod is not None and _is_ready(pod, g.revision):
                        ready += 1
        g.expected, g.ready = expected, ready
        g.available = 0 < ready == expected  # a group that should have no pod serves nothing
        self.analyse_units(g)

    # -- role level and recovery (steps 2 and 7) ------------------------------------------------------

    def grace(self, pod: PodView) -> float | None:
        """``None`` when the grace period of a failing pod is over, else the seconds left."""
        period = self.inp.restart_grace_period_seconds
        if period <= 0 or pod.not_ready_since is None:
            return None
        left = pod.not_ready_since + period - self.inp.now
        return left if left > 0 else None

    def analyse_units(self, g: _Group) -> None:
        assert g.shape is not None
        shape = {r.name: r for r in g.shape}
        order = {r.name: i for i, r in enumerate(g.shape)}
        keys = set(g.units) | {(r.name, i) for r in g.shape for i in range(self.desired_role_replicas(r))}
        for role_name, index in sorted(keys, key=lambda k: (order.get(k[0], len(order)), k[0], k[1])):
            unit = g.units.get((role_name, index)) or _Unit(role_name, index)
            role = shape.get(role_name)
            if role is None or index >= self.desired_role_replicas(role):
                if unit.live():
                    why = (
                        "role scale down"
                        if role is not None
                        else f"role {role_name} not in revision {g.revision}"
                    )
                    g.actions.append(DeleteRoleReplica(g.ordinal, role_name, index, why))
                continue
            self.analyse_unit(g, role, unit)
            if g.delete_reason is not None:
                g.actions.clear()
                return

    def analyse_unit(self, g: _Group, role: RoleShape, unit: _Unit) -> None:
        """Role replica ``unit`` of live group ``g``, which the current spec wants to exist."""
        size = role.pods_per_replica
        strays = [p for p in unit.pods if not 0 <= p.pod_index < size and not p.terminating]
        why = self.unit_actions(g, role, unit)
        if why is None:
            if strays:
                # Pods the revision's shape has no place for (not built by us, or relabelled).
                # Nothing is created in the unit before they are gone.
                here = (g.ordinal, role.name, unit.index)
                g.actions[:] = [
                    a
                    for a in g.actions
                    if not (isinstance(a, CreateRoleReplica) and (a.ordinal, a.role, a.role_index) == here)
                ]
                g.actions.append(
                    DeletePods(
                        tuple((p.name, p.uid) for p in strays), f"unexpected pod in {role.name}-{unit.index}"
                    )
                )
            return
        # A failure due now, handled as a whole by the policy.
        g.trouble = True
        if self.inp.recovery_policy == "InferGroupRecreate":
            g.delete_reason = f"{why} (InferGroupRecreate)"
        else:  # RoleRecreate; its delete covers the stray pods too
            g.actions.append(DeleteRoleReplica(g.ordinal, role.name, unit.index, f"{why} (RoleRecreate)"))

    def unit_actions(self, g: _Group, role: RoleShape, unit: _Unit) -> str | None:
        """Append the unit's own actions to ``g.actions``, or return why it must be rebuilt as a
        whole (never under policy ``None``, which rebuilds pods one by one)."""
        rebuild = self.inp.recovery_policy != "None"
        size = role.pods_per_replica
        expected = {p.pod_index: p for p in unit.pods if 0 <= p.pod_index < size}
        services = unit.services if role.has_service else []
        live_services = any(not s.terminating for s in services)
        gone_pods = [p for p in expected.values() if p.terminating]
        live_pods = [p for p in expected.values() if not p.terminating]
        missing = tuple(k for k in range(size) if k not in expected)

        if gone_pods:
            # Being deleted (by us or someone else): never rebuilt before it is all gone. If parts of
            # it live on, RoleRecreate deletes them too; None waits and then refills the pods alone.
            g.trouble = True
            if rebuild and (live_pods or live_services):
                return f"pod {gone_pods[0].name} deleted"
            return None
        if not live_pods:
            return self.absent_unit(g, role, unit, missing, live_services)
        due = self.due_problems(g, f"{role.name}-{unit.index}", live_pods, missing)
        if due:
            g.trouble = True
            if rebuild:
                return due[0][0]
            doomed = [(why, pod) for why, pod in due if pod is not None]
            if doomed:
                # Refills wait until these are gone: a unit with pods terminating is not rebuilt.
                g.actions.append(
                    DeletePods(tuple((pod.name, pod.uid) for _, pod in doomed), f"{doomed[0][0]} (None)")
                )
                return None
        create_service = role.has_service and not services
        if missing or create_service:
            g.actions.append(
                CreateRoleReplica(g.ordinal, role.name, unit.index, g.revision, missing, create_service)
            )
        return None

    def absent_unit(
        self, g: _Group, role: RoleShape, unit: _Unit, missing: tuple[int, ...], live_services: bool
    ) -> str | None:
        """:meth:`unit_actions` for a unit with no live pod in its shape."""
        if not live_services:
            # Not there at all: a new role replica (role scale-up) or one fully deleted. Wait for a
            # terminating stray pod or Service of it to be gone first.
            if not unit.terminating():
                g.actions.append(
                    CreateRoleReplica(g.ordinal, role.name, unit.index, g.revision, missing, role.has_service)
                )
            return None
        # Only the Service is left: its pods were deleted out from under us.
        g.trouble = True
        if self.inp.recovery_policy != "None":
            return f"pods of {role.name}-{unit.index} missing"
        g.actions.append(CreateRoleReplica(g.ordinal, role.name, unit.index, g.revision, missing, False))
        return None

    def due_problems(
        self, g: _Group, rid: str, live_pods: list[PodView], missing: tuple[int, ...]
    ) -> list[tuple[str, PodView | None]]:
        """The unit's problems due now, as (why, pod to delete under policy ``None``); failures
        still within their grace period only shorten ``g.requeue``."""
        rebuild = self.inp.recovery_policy != "None"
        due: list[tuple[str, PodView | None]] = []
        if missing:
            due.append((f"pods {', '.join(map(str, missing))} of {rid} missing", None))
        for pod in live_pods:
            if pod.revision != g.revision:
                due.append((f"pod {pod.name} on revision {pod.revision}, its group on {g.revision}", pod))
                continue
            why = _failure(pod)
            if why is None:
                continue
            g.trouble = True
            if not rebuild and pod.phase not in _TERMINAL_PHASES:
                continue  # policy None: the kubelet restarts containers, nothing for us to do
            left = self.grace(pod)
            if left is None:
                due.append((why, pod))
            else:
                g.requeue = _min_opt(g.requeue, left)
        return due


def _failure(pod: PodView) -> str | None:
    """Why a pod on its group's revision counts as failed (see the module docstring), or ``None``."""
    if pod.phase in _TERMINAL_PHASES:
        return f"pod {pod.name} {pod.phase.lower()}"
    if pod.restarted and not pod.ready:
        return f"pod {pod.name} restarted and is not ready"
    return None


# --- group level (steps 2-6) -----------------------------------------------------------------------


@dataclass(frozen=True)
class _NewGroup:
    """A group step 6 adds; ``creates`` is empty when its shape has no pod (it is then not built)."""

    ordinal: int
    revision: str
    shape: tuple[RoleShape, ...]
    creates: tuple[CreateRoleReplica, ...]


class _Groups:
    """One call's group-level decisions over the observed groups: ``deletes`` (ordinal → reason)
    and ``new`` accumulate as the steps run, each step reading what the earlier ones decided."""

    def __init__(self, decider: _Decider) -> None:
        self.decider = decider
        self.inp = decider.inp
        self.groups = decider.observe()
        self.live = [g for g in sorted(self.groups.values(), key=lambda g: g.ordinal) if not g.deleting()]
        self.deletes: dict[int, str] = {}
        self.new: list[_NewGroup] = []

    def alive(self) -> list[_Group]:
        """Live groups this call does not delete."""
        return [g for g in self.live if g.ordinal not in self.deletes]

    def desired(self, rolling: bool) -> int:
        """``replicas`` plus the surge allowance: all of ``max_surge`` while outdated groups remain;
        otherwise only the surge groups that stand in (kept while rolling) or that groups a drain
        moves need (one each, never more than ``max_surge``)."""
        inp = self.inp
        if inp.max_surge <= 0:
            return inp.replicas
        if any(g.outdated for g in self.alive()):
            return inp.replicas + inp.max_surge
        surges = sum(1 for g in self.alive() if g.ordinal >= inp.replicas) if rolling else 0
        moving = len((inp.held | inp.released) & inp.cordoned)
        return inp.replicas + min(inp.max_surge, max(surges, moving))

    def serving(self) -> int:
        """Available groups not released to a drain: a released group's capacity is spent on the
        drain (the floor is shared), so the rolling update may not spend it again."""
        return sum(1 for g in self.alive() if g.available and g.ordinal not in self.inp.released)

    # -- step 2 -------------------------------------------------------------------------------------

    def delete_debris(self) -> None:
        """Groups that are debris, or that the recovery policy rebuilds as a whole."""
        for g in self.live:
            if g.orphaned():
                self.deletes[g.ordinal] = "no pods left, only Services"
            elif g.delete_reason is not None:
                self.deletes[g.ordinal] = g.delete_reason

    # -- steps 3 and 5 ------------------------------------------------------------------------------

    def rollout_running(self) -> bool:
        """Outdated groups remain, or surge groups still stand in for in-range ordinals that are not
        yet updated and available: surge groups are removed only when groups 0…replicas-1 are
        all back (so a rollout ends on the ordinals it started with)."""
        inp = self.inp
        staying = self.alive()
        if any(g.outdated for g in staying):
            return True
        if inp.max_surge <= 0 or not any(g.ordinal >= inp.replicas for g in staying):
            return False
        if inp.cordoned:
            return True  # surge groups stay while any group stands on a cordoned node
        in_range = {g.ordinal for g in staying if g.ordinal < inp.replicas and g.available}
        return len(in_range) < inp.replicas

    def scale_down(self, desired: int) -> None:
        """Surplus groups go: not-available ones first, then those released to a drain (their
        capacity is spent already), then highest ordinal first."""
        staying = self.alive()
        surplus = len(staying) - desired
        if surplus <= 0:
            return
        released = self.inp.released
        order = sorted(staying, key=lambda g: (g.available, g.ordinal not in released, -g.ordinal))
        for g in order[:surplus]:
            self.deletes[g.ordinal] = "scale down" if g.available else "scale down (not available)"

    # -- step 4 -------------------------------------------------------------------------------------

    def rolling_update(self) -> None:
        """Not-available outdated groups go at no cost; available ones, highest ordinal first, only
        while the available count stays at or above ``replicas - max_unavailable``."""
        target = self.inp.update_revision
        for g in self.alive():
            if g.outdated and not g.available:
                self.deletes[g.ordinal] = f"rolling update to revision {target} (group not available)"
        budget = self.serving() - self.floor()
        for g in sorted((g for g in self.alive() if g.outdated), key=lambda g: -g.ordinal):
            if budget <= 0:
                break
            self.deletes[g.ordinal] = f"rolling update to revision {target}"
            budget -= 1

    def floor(self) -> int:
        """The fewest available groups a rollout may leave."""
        return self.inp.replicas - max(self.inp.max_unavailable, 0)

    # -- step 6 -------------------------------------------------------------------------------------

    def scale_up(self, desired: int) -> None:
        """Create the lowest unused ordinals until ``desired`` groups exist (deleting ones count)."""
        p = self.decider
        ordinal = 0
        for _ in range(desired - len(self.groups)):
            while ordinal in self.groups:
                ordinal += 1
            revision = p.target_revision(ordinal)
            shape = p.shape(revision) or self.inp.roles
            creates = tuple(
                CreateRoleReplica(
                    ordinal, r.name, i, revision, tuple(range(r.pods_per_replica)), r.has_service
                )
                for r in shape
                for i in range(p.desired_role_replicas(r))
            )
            self.new.append(_NewGroup(ordinal, revision, shape, creates))
            ordinal += 1

    def surge_gives_way(self, desired: int) -> None:
        """Only surge groups stand in for a hole below ``replicas`` that this call cannot refill:
        with no room left under the ceiling, give up the highest surge group (within the
        availability budget, one at a time) so the next call refills the hole."""
        inp = self.inp
        filled = {n.ordinal for n in self.new}
        holes = [o for o in range(inp.replicas) if o not in self.groups and o not in filled]
        busy = any(g.deleting() for g in self.groups.values())
        surges = [g for g in self.alive() if g.ordinal >= inp.replicas]
        room = len(self.groups) - len(self.deletes) + len(self.new) < desired
        if not holes or not surges or busy or room:
            return
        surge = max(surges, key=lambda g: g.ordinal)
        if not surge.available or self.serving() - 1 >= self.floor():
            self.deletes[surge.ordinal] = "surge group gives way to a rebuilt in-range group"

    # -- emit ---------------------------------------------------------------------------------------

    def actions(self) -> list[Action]:
        """Group deletions, role-level deletions of the groups that stay, their creations, then the
        new groups' creations."""
        actions: list[Action] = [DeleteGroup(o, self.deletes[o]) for o in sorted(self.deletes)]
        creates: list[Action] = []
        for g in self.alive():
            for action in g.actions:
                (creates if isinstance(action, CreateRoleReplica) else actions).append(action)
        actions.extend(creates)
        for n in self.new:
            actions.extend(n.creates)  # a group of no pods cannot exist; see docs/modelinfer-decide.md
        return actions

    def summaries(self) -> list[GroupSummary]:
        out: list[GroupSummary] = []
        for g in sorted(self.groups.values(), key=lambda g: g.ordinal):
            if g.ordinal in self.deletes or g.deleting():
                state: GroupState = "Deleting"
                available = False
            else:
                available = g.available
                state = "Running" if available else "Recovering" if g.trouble else "Creating"
            out.append(GroupSummary(g.ordinal, g.revision, state, available, g.expected, g.ready, g.outdated))
        out.extend(
            GroupSummary(
                n.ordinal, n.revision, "Creating", False, self.decider.expected_pods(n.shape), 0, False
            )
            for n in self.new
            if n.creates
        )
        out.sort(key=lambda s: s.ordinal)
        return out

    def requeue_after(self) -> float | None:
        """The soonest grace period running out, or the recheck while anything is terminating."""
        requeue: float | None = None
        for g in self.alive():
            requeue = _min_opt(requeue, g.requeue)
        inp = self.inp
        if any(pod.terminating for pod in inp.pods) or any(s.terminating for s in inp.services):
            requeue = _min_opt(requeue, DELETING_RECHECK_SECONDS)
        return requeue


def group_availability(inp: PlanInput) -> dict[int, bool]:
    """Each live group's availability as observed, before any action: the disruption arbiter's
    input (it decides before the plan, so a drain's release is not undercut by the rollout)."""
    return {o: g.available for o, g in _Decider(inp).observe().items() if not g.deleting()}


def plan(inp: PlanInput) -> Plan:
    """Decide the next actions for one ModelInfer; see the module docstring for the rules."""
    d = _Groups(_Decider(inp))  # step 1 and the per-unit analysis of step 7 (role level, recovery)
    d.delete_debris()  # step 2
    d.scale_down(d.desired(d.rollout_running()))  # step 3: with the surge allowance while rolling
    d.rolling_update()  # step 4
    # Step 5: the rollout is over once no outdated group is left alive and the in-range ordinals are
    # all available again; then the surge groups go.
    rolling = d.rollout_running()
    desired = d.desired(rolling)
    if not rolling:
        d.scale_down(desired)
    d.scale_up(desired)  # step 6
    if rolling and not any(g.outdated for g in d.alive()):
        d.surge_gives_way(desired)
    return Plan(tuple(d.actions()), d.requeue_after(), tuple(d.summaries()))


# --- the whole controller's decision -------------------------------------------------------------------


def arbitrate_and_plan(observed: ModelInferObserved, now: datetime) -> tuple[Arbitration, Plan]:
    """Arbitrate, then plan with what the arbiter left (the drain wins over the rollout)."""
    mi, roles = observed.mi, list(observed.roles)
    spec = objects.spec(mi)
    replicas = int(spec.get("replicas", 1))
    pod_views, service_views = views(mi, observed.pods, observed.services)
    rolling = rolling_update_configuration(mi)
    max_unavailable = resolve_max_unavailable(rolling.get("maxUnavailable"), replicas)
    inp = PlanInput(
        replicas=replicas,
        roles=shape_of(roles),
        shapes=shapes_of(roles, observed.revisions),
        update_revision=observed.update_revision,
        current_revision=observed.current_revision,
        partition=int(rolling.get("partition") or 0),
        max_unavailable=max_unavailable,
        max_surge=resolve_max_surge(rolling.get("maxSurge"), replicas),
        recovery_policy=spec.get("recoveryPolicy") or "RoleRecreate",
        restart_grace_period_seconds=int(deep_get(mi, "spec.template.restartGracePeriodSeconds") or 0),
        pods=pod_views,
        services=service_views,
        now=now.timestamp(),
    )
    cordoned = cordoned_groups(objects.name(mi), observed.pods, set(observed.cordoned_nodes))
    arbitration = arbitrate(
        mi_name=objects.name(mi),
        replicas=replicas,
        max_unavailable=max_unavailable,
        available=group_availability(inp),
        cordoned=cordoned,
        released=observed.released,
    )
    the_plan = plan(
        replace(inp, cordoned=frozenset(cordoned), released=arbitration.released, held=arbitration.held)
    )
    return arbitration, the_plan


def decide(observed: ModelInferObserved, now: datetime) -> ModelInferDecision:
    """Everything the ModelInfer controller does for one ModelInfer (see :class:`ModelInferDecision`)."""
    mi = observed.mi
    if observed.problems:
        return ModelInferDecision(
            status=invalid_status(mi, observed.problems, now), invalid=observed.problems
        )
    roles = list(observed.roles)
    revision = None
    if not observed.recorded:
        number = next_revision_number(observed.owned_revisions)
        revision = controller_revision(mi, observed.update_revision, roles, number)
    arbitration, the_plan = arbitrate_and_plan(observed, now)
    status = modelinfer_status(observed, the_plan, arbitration, now)
    if not observed.decided:
        return ModelInferDecision(status, plan=the_plan, arbitration=arbitration, revision=revision)

    def roles_for(rev: str) -> list[dict[str, Any]]:
        return with_current_replicas(observed.revisions.get(rev) or [dict(r) for r in roles], roles)

    desired, keep = desired_budgets(mi, the_plan.groups, arbitration.released)
    in_use = {observed.update_revision, observed.current_revision}
    in_use |= {str(objects.labels(p).get(LABEL_REVISION)) for p in observed.pods}
    unused = sorted(
        (cr for cr in observed.owned_revisions if revision_of(cr) not in in_use),
        key=lambda cr: int(cr.get("revision") or 0),
    )
    return ModelInferDecision(
        status,
        plan=the_plan,
        arbitration=arbitration,
        revision=revision,
        podgroups=podgroup_writes(observed.gang, mi, observed.podgroups, the_plan, roles_for),
        budgets=tuple(budget_writes(observed.budgets, desired, keep)),
        spared=left_to_the_drain(
            objects.name(mi), observed.pods, set(observed.cordoned_nodes), arbitration.released
        ),
        prune=tuple(
            cr for cr in unused[: max(0, len(unused) - REVISION_HISTORY_LIMIT)] if not objects.is_deleting(cr)
        ),
        queues={
            (a.ordinal, a.revision): queue_of_group(
                observed.pods, mi, a.ordinal, a.revision, observed.platform_queue
            )
            for a in the_plan.actions
            if isinstance(a, CreateRoleReplica)
        },
        workloads=tuple(
            workload_writes(mi, observed.workloads or (), kept_workloads(observed), _pod_groups(observed))
        ),
    )


def _pod_groups(observed: ModelInferObserved) -> frozenset[str]:
    return frozenset(str(g) for p in observed.pods if (g := objects.labels(p).get(queueing.POD_GROUP_LABEL)))


def kept_workloads(observed: ModelInferObserved) -> frozenset[str]:
    """The Kueue pod groups (Workload names) whose Workloads the ModelInfer owns (``queued``)."""
    name = objects.name(observed.mi)
    return kept_pod_groups(
        name,
        int(objects.spec(observed.mi).get("replicas", 1)),
        (observed.update_revision, observed.current_revision),
        live_revisions(name, (p for p in observed.pods if controlled_by(p, observed.mi))),
    )


def queue_of_group(
    pods: Iterable[Mapping[str, Any]],
    mi: Mapping[str, Any],
    ordinal: int,
    revision: str,
    platform: str | None,
) -> str | None:
    """The Kueue queue of a new pod of group ``ordinal`` on ``revision``: its siblings' when the group
    has pods already (a group is never split between Kueue and the scheduler), else ``platform``'s."""
    group = group_name(objects.name(mi), ordinal)
    siblings = [
        p
        for p in pods
        if objects.labels(p).get(LABEL_GROUP_NAME) == group
        and objects.labels(p).get(LABEL_REVISION) == revision
    ]
    queue, any_sibling = queueing.sibling_queue(siblings)
    return queue if any_sibling else platform

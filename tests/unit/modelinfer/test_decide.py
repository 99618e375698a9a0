"""The ModelInfer decision (``decide.plan``): one table test per rule, plus :class:`World`, a small
step simulator of the executor and the cluster that the multi-step tests here and the hypothesis
properties in ``test_decide_properties.py`` share."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from aiplane.controllers.modelinfer.decide import (
    DELETING_RECHECK_SECONDS,
    Action,
    CreateRoleReplica,
    DeleteGroup,
    DeletePods,
    DeleteRoleReplica,
    Plan,
    PlanInput,
    PodView,
    RecoveryPolicy,
    RoleShape,
    ServiceView,
    plan,
)
from aiplane.controllers.modelinfer.status import next_current_revision

NOW = 1_000_000.0
PREFILL = RoleShape("prefill", 1, 1, True)  # entry + 1 worker, with a Service
DECODE = RoleShape("decode", 2, 0, False)  # 2 single-pod role replicas
SHAPE = (PREFILL, DECODE)  # 4 pods and 1 Service per group
SHAPE_B = (RoleShape("prefill", 1, 2, True), DECODE)  # workerReplicas changed: 5 pods per group


# --- fixtures --------------------------------------------------------------------------------------


def pod_name(ordinal: int, role: str, index: int, k: int) -> str:
    return f"mi-{ordinal}-{role}-{index}-{k}"


def group_objects(
    ordinal: int,
    revision: str = "r1",
    shape: Sequence[RoleShape] = SHAPE,
    roles: Sequence[RoleShape] | None = None,
    *,
    ready: bool = True,
) -> tuple[list[PodView], list[ServiceView]]:
    """A complete group: every pod Running and Ready (or Pending), every Service."""
    counts = {r.name: r.replicas for r in (roles if roles is not None else shape)}
    pods: list[PodView] = []
    services: list[ServiceView] = []
    for role in shape:
        for i in range(counts.get(role.name, role.replicas)):
            for k in range(role.pods_per_replica):
                name = pod_name(ordinal, role.name, i, k)
                pods.append(
                    PodView(
                        name=name,
                        uid=f"uid-{name}",
                        ordinal=ordinal,
                        role=role.name,
                        role_index=i,
                        pod_index=k,
                        revision=revision,
                        phase="Running" if ready else "Pending",
                        ready=ready,
                        not_ready_since=None if ready else NOW - 1,
                    )
                )
            if role.has_service:
                services.append(ServiceView(pod_name(ordinal, role.name, i, 0), ordinal, role.name, i))
    return pods, services


def cluster(
    ordinals: Iterable[int], revision: str = "r1", shape: Sequence[RoleShape] = SHAPE
) -> tuple[list[PodView], list[ServiceView]]:
    pods: list[PodView] = []
    services: list[ServiceView] = []
    for o in ordinals:
        p, s = group_objects(o, revision, shape)
        pods += p
        services += s
    return pods, services


def inp(pods: Sequence[PodView] = (), services: Sequence[ServiceView] = (), **kw: Any) -> PlanInput:
    base: dict[str, Any] = {
        "replicas": 3,
        "roles": SHAPE,
        "shapes": {"r0": SHAPE, "r1": SHAPE},
        "update_revision": "r1",
        "current_revision": "r1",
        "partition": 0,
        "max_unavailable": 1,
        "max_surge": 0,
        "recovery_policy": "RoleRecreate",
        "restart_grace_period_seconds": 0,
        "now": NOW,
    }
    base.update(kw)
    return PlanInput(pods=tuple(pods), services=tuple(services), **base)


def change(pods: Sequence[PodView], name: str, **changes: Any) -> list[PodView]:
    assert any(p.name == name for p in pods), name
    return [replace(p, **changes) if p.name == name else p for p in pods]


def without(pods: Sequence[PodView], *names: str) -> list[PodView]:
    return [p for p in pods if p.name not in names]


def kinds(actions: Iterable[Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def group_deletes(p: Plan) -> list[int]:
    return [a.ordinal for a in p.actions if isinstance(a, DeleteGroup)]


def created_groups(p: Plan) -> dict[int, str]:
    """Ordinals that get a role replica created, with the revision."""
    return {a.ordinal: a.revision for a in p.actions if isinstance(a, CreateRoleReplica)}


# --- a step simulator ------------------------------------------------------------------------------


class DecisionContractError(AssertionError):
    """The plan asked for something the executor contract forbids."""


@dataclass
class World:
    """The executor plus a toy cluster: pods, Services and time.

    * Deletions mark objects terminating; they vanish on a later :meth:`tick`.
    * Creations appear ``Pending``; they become ``Running``/``Ready`` on a later tick.
    * With ``rng`` those delays are random (0-3 extra ticks), otherwise one tick each.
    * :meth:`apply` enforces the executor contract: no delete of an object already terminating, no
      create of an existing object, no rebuild of a unit or group while any of it is terminating,
      no pod outside its revision's shape.
    """

    replicas: int = 3
    roles: tuple[RoleShape, ...] = SHAPE
    shapes: dict[str, tuple[RoleShape, ...]] = field(default_factory=lambda: {"r1": SHAPE})
    update_revision: str = "r1"
    current_revision: str = "r1"
    partition: int = 0
    max_unavailable: int = 1
    max_surge: int = 0
    policy: RecoveryPolicy = "RoleRecreate"
    grace: int = 0
    now: float = NOW
    rng: random.Random | None = None
    pods: dict[str, PodView] = field(default_factory=dict)
    services: dict[str, ServiceView] = field(default_factory=dict)
    # name -> ticks left before the pod is ready / the terminating object is gone / a crash heals
    starting: dict[str, int] = field(default_factory=dict)
    vanishing: dict[str, int] = field(default_factory=dict)
    healing: dict[str, int] = field(default_factory=dict)
    uids: int = 0
    stats: dict[str, str] = field(default_factory=dict)  # what a property run saw, for its events

    def input(self) -> PlanInput:
        return PlanInput(
            replicas=self.replicas,
            roles=self.roles,
            shapes=dict(self.shapes),
            update_revision=self.update_revision,
            current_revision=self.current_revision,
            partition=self.partition,
            max_unavailable=self.max_unavailable,
            max_surge=self.max_surge,
            recovery_policy=self.policy,
            restart_grace_period_seconds=self.grace,
            pods=tuple(sorted(self.pods.values(), key=lambda p: p.name)),
            services=tuple(sorted(self.services.values(), key=lambda s: s.name)),
            now=self.now,
        )

    def _delay(self) -> int:
        return 1 + (self.rng.randint(0, 3) if self.rng else 0)

    # -- the executor ---------------------------------------------------------------------------

    def _unit_objects(self, ordinal: int, role: str, index: int) -> list[PodView | ServiceView]:
        objs: list[PodView | ServiceView] = [
            p for p in self.pods.values() if (p.ordinal, p.role, p.role_index) == (ordinal, role, index)
        ]
        objs += [
            s for s in self.services.values() if (s.ordinal, s.role, s.role_index) == (ordinal, role, index)
        ]
        return objs

    def _group_objects(self, ordinal: int) -> list[PodView | ServiceView]:
        return [p for p in self.pods.values() if p.ordinal == ordinal] + [
            s for s in self.services.values() if s.ordinal == ordinal
        ]

    def _terminate(self, obj: PodView | ServiceView) -> None:
        if obj.terminating:
            return
        if isinstance(obj, PodView):
            self.pods[obj.name] = replace(obj, terminating=True)
        else:
            self.services[obj.name] = replace(obj, terminating=True)
        self.vanishing[obj.name] = self._delay()

    def _delete_all(self, objs: Sequence[PodView | ServiceView], what: str) -> None:
        live = [o for o in objs if not o.terminating]
        if not live:
            raise DecisionContractError(f"{what}: nothing left to delete (delete issued twice)")
        for o in live:
            self._terminate(o)

    def apply(self, p: Plan) -> None:
        """Carry out the plan, then persist ``currentRevision`` as the status would."""
        self._apply(p)
        self.current_revision = next_current_revision(
            p.groups,
            replicas=self.replicas,
            update_revision=self.update_revision,
            current_revision=self.current_revision,
        )

    def _apply(self, p: Plan) -> None:
        # What is being deleted, before this plan and by it: nothing may be created there.
        deleting_groups = {o for o in self.ordinals() if all(x.terminating for x in self._group_objects(o))}
        objects: list[PodView | ServiceView] = [*self.pods.values(), *self.services.values()]
        busy_units = {(x.ordinal, x.role, x.role_index) for x in objects if x.terminating}
        for a in p.actions:
            if isinstance(a, DeleteGroup):
                self._delete_all(self._group_objects(a.ordinal), f"DeleteGroup {a.ordinal}")
                deleting_groups.add(a.ordinal)
            elif isinstance(a, DeleteRoleReplica):
                self._delete_all(
                    self._unit_objects(a.ordinal, a.role, a.role_index),
                    f"DeleteRoleReplica {a.ordinal}/{a.role}-{a.role_index}",
                )
                busy_units.add((a.ordinal, a.role, a.role_index))
            elif isinstance(a, DeletePods):
                for name, uid in a.pods:
                    pod = self.pods.get(name)
                    if pod is None or pod.uid != uid or pod.terminating:
                        raise DecisionContractError(
                            f"DeletePods {name}: gone, replaced or already terminating"
                        )
                    self._terminate(pod)
                    busy_units.add((pod.ordinal, pod.role, pod.role_index))
            else:
                if a.ordinal in deleting_groups:
                    raise DecisionContractError(f"create in group {a.ordinal} while it is being deleted")
                if (a.ordinal, a.role, a.role_index) in busy_units:
                    raise DecisionContractError(
                        f"rebuild of {a.ordinal}/{a.role}-{a.role_index} while it is terminating"
                    )
                self._create(a)

    def _create(self, a: CreateRoleReplica) -> None:
        shape = {r.name: r for r in self.shapes[a.revision]}
        role = shape[a.role]
        for k in a.pod_indices:
            if not 0 <= k < role.pods_per_replica:
                raise DecisionContractError(f"pod index {k} outside the shape of {a.revision}")
            name = pod_name(a.ordinal, a.role, a.role_index, k)
            if name in self.pods:
                raise DecisionContractError(f"create {name}: already exists")
            self.uids += 1
            self.pods[name] = PodView(
                name, f"uid-{self.uids}", a.ordinal, a.role, a.role_index, k, a.revision, "Pending", False
            )
            self.starting[name] = self._delay()
        if a.service:
            if not role.has_service:
                raise DecisionContractError(f"Service for role {a.role} that has none")
            name = pod_name(a.ordinal, a.role, a.role_index, 0)
            if name in self.services:
                raise DecisionContractError(f"create Service {name}: already exists")
            self.services[name] = ServiceView(name, a.ordinal, a.role, a.role_index)

    # -- the cluster ----------------------------------------------------------------------------

    def tick(self, seconds: float = 5.0) -> None:
        self.now += seconds
        for name in list(self.vanishing):
            self.vanishing[name] -= 1
            if self.vanishing[name] <= 0:
                del self.vanishing[name]
                self.pods.pop(name, None)
                self.services.pop(name, None)
                self.starting.pop(name, None)
                self.healing.pop(name, None)
        for table in (self.starting, self.healing):
            for name in list(table):
                table[name] -= 1
                if table[name] <= 0:
                    del table[name]
                    pod = self.pods.get(name)
                    if pod is not None and pod.phase in ("Pending", "Running"):
                        self.pods[name] = replace(pod, phase="Running", ready=True, not_ready_since=None)

    # -- failures ---------------------------------------------------------------------------------

    def fail(self, name: str) -> None:
        pod = self.pods[name]
        self.pods[name] = replace(pod, phase="Failed", ready=False, not_ready_since=self.now)
        self.starting.pop(name, None)
        self.healing.pop(name, None)

    def crash(self, name: str, heals_in: int | None = None) -> None:
        """A container restart: not ready until it heals (the kubelet restarts it)."""
        pod = self.pods[name]
        self.pods[name] = replace(pod, restarted=True, ready=False, not_ready_since=self.now)
        self.starting.pop(name, None)
        self.healing[name] = heals_in if heals_in is not None else self._delay()

    def unready(self, name: str) -> None:
        pod = self.pods[name]
        self.pods[name] = replace(pod, ready=False, not_ready_since=self.now)
        self.healing[name] = self._delay()

    def kill(self, name: str) -> None:
        """Someone deletes the pod (graceful: terminating first)."""
        pod = self.pods[name]
        if not pod.terminating:
            self._terminate(pod)

    def clone(self) -> World:
        """An independent copy (views are frozen, so copying the tables is enough)."""
        rng = None
        if self.rng is not None:
            rng = random.Random()
            rng.setstate(self.rng.getstate())
        return replace(
            self,
            shapes=dict(self.shapes),
            rng=rng,
            pods=dict(self.pods),
            services=dict(self.services),
            starting=dict(self.starting),
            vanishing=dict(self.vanishing),
            healing=dict(self.healing),
        )

    # -- running it -------------------------------------------------------------------------------

    def step(self, seconds: float = 5.0) -> Plan:
        p = plan(self.input())
        self.apply(p)
        self.tick(seconds)
        return p

    def run(self, max_steps: int = 100) -> int:
        """Step until a plan has no action and nothing is in flight; returns the steps taken."""
        for i in range(max_steps):
            p = plan(self.input())
            self.apply(p)
            settled = not self.starting and not self.vanishing and not self.healing
            if not p.actions and p.requeue_after is None and settled:
                return i
            self.tick()
        raise AssertionError(f"no convergence in {max_steps} steps: {plan(self.input())}")

    # -- reading it -------------------------------------------------------------------------------

    def ordinals(self) -> set[int]:
        return {p.ordinal for p in self.pods.values()} | {s.ordinal for s in self.services.values()}

    def revisions(self) -> dict[int, str]:
        out: dict[int, set[str]] = {}
        for p in self.pods.values():
            out.setdefault(p.ordinal, set()).add(p.revision)
        return {o: next(iter(r)) if len(r) == 1 else "mixed" for o, r in out.items()}

    def available(self) -> set[int]:
        """Groups whose expected pods are all Running and Ready, computed here independently of
        the decision: revision = the one most live pods carry, shape from it, counts from the spec."""
        counts = {r.name: r.replicas for r in self.roles}
        out: set[int] = set()
        for o in self.ordinals():
            live = [p for p in self.pods.values() if p.ordinal == o and not p.terminating]
            if not live:
                continue
            revs = [p.revision for p in live]
            rev = max(sorted(set(revs)), key=revs.count)
            shape = self.shapes.get(rev)
            if shape is None:
                continue
            by_name = {p.name: p for p in live}
            want = [
                pod_name(o, r.name, i, k)
                for r in shape
                for i in range(counts.get(r.name, r.replicas))
                for k in range(r.pods_per_replica)
            ]
            if want and all(
                (p := by_name.get(n)) is not None and p.phase == "Running" and p.ready and p.revision == rev
                for n in want
            ):
                out.add(o)
        return out

    def desired_objects(self) -> tuple[set[str], set[str]]:
        """The exact pod and Service names the current spec asks for, for the groups that exist."""
        roles = {r.name: r.replicas for r in self.roles}
        pods: set[str] = set()
        services: set[str] = set()
        for o, rev in self.revisions().items():
            for role in self.shapes[rev]:
                for i in range(roles.get(role.name, role.replicas)):
                    pods |= {pod_name(o, role.name, i, k) for k in range(role.pods_per_replica)}
                    if role.has_service:
                        services.add(pod_name(o, role.name, i, 0))
        return pods, services


def world(ordinals: Iterable[int] = (0, 1, 2), revision: str = "r1", **kw: Any) -> World:
    w = World(**kw)
    pods, services = cluster(ordinals, revision, w.shapes[revision])
    w.pods = {p.name: p for p in pods}
    w.services = {s.name: s for s in services}
    return w


def assert_converged(w: World) -> None:
    p = plan(w.input())
    assert p.actions == ()
    assert p.requeue_after is None
    assert len(w.ordinals()) == w.replicas
    pods, services = w.desired_objects()
    assert set(w.pods) == pods
    assert set(w.services) == services
    for o, rev in w.revisions().items():
        if o >= w.partition:
            assert rev == w.update_revision, (o, rev)
        else:
            assert rev in w.shapes
    assert all(g.available and g.state == "Running" for g in p.groups)
    assert {g.ordinal for g in p.groups} == w.ordinals()  # the PodGroups to keep


# --- steady state and scaling ----------------------------------------------------------------------


def test_converged_state_has_no_action_and_no_requeue() -> None:
    pods, services = cluster([0, 1, 2])
    p = plan(inp(pods, services))
    assert p.actions == ()
    assert p.requeue_after is None
    assert [(g.ordinal, g.state, g.available, g.expected_pods, g.ready_pods) for g in p.groups] == [
        (o, "Running", True, 4, 4) for o in range(3)
    ]


def test_empty_creates_every_group_role_replica_by_role_replica() -> None:
    p = plan(inp(replicas=2))
    assert p.actions == (
        CreateRoleReplica(0, "prefill", 0, "r1", (0, 1), True),
        CreateRoleReplica(0, "decode", 0, "r1", (0,), False),
        CreateRoleReplica(0, "decode", 1, "r1", (0,), False),
        CreateRoleReplica(1, "prefill", 0, "r1", (0, 1), True),
        CreateRoleReplica(1, "decode", 0, "r1", (0,), False),
        CreateRoleReplica(1, "decode", 1, "r1", (0,), False),
    )
    assert [(g.ordinal, g.state, g.expected_pods) for g in p.groups] == [
        (0, "Creating", 4),
        (1, "Creating", 4),
    ]


def test_scale_3_to_5_to_2() -> None:
    w = world([0, 1, 2], replicas=5)
    p = w.step()
    assert set(created_groups(p)) == {3, 4}
    w.run()
    assert w.ordinals() == {0, 1, 2, 3, 4}
    w.replicas = 2
    p = plan(w.input())
    assert group_deletes(p) == [2, 3, 4]
    assert all(a.reason == "scale down" for a in p.actions if isinstance(a, DeleteGroup))
    w.run()
    assert w.ordinals() == {0, 1}
    assert_converged(w)


def test_scale_up_fills_the_lowest_missing_ordinals() -> None:
    pods, services = cluster([0, 2, 5])
    p = plan(inp(pods, services, replicas=5))
    assert created_groups(p) == {1: "r1", 3: "r1"}


def test_scale_down_removes_not_available_groups_first_highest_first() -> None:
    pods, services = cluster([0, 1, 2, 3])
    pods = change(pods, pod_name(1, "decode", 0, 0), ready=False, not_ready_since=NOW - 3)
    pods = change(pods, pod_name(0, "decode", 1, 0), ready=False, not_ready_since=NOW - 3)
    assert group_deletes(plan(inp(pods, services, replicas=3))) == [1]
    assert group_deletes(plan(inp(pods, services, replicas=2))) == [0, 1]
    # then the highest available ones
    assert group_deletes(plan(inp(pods, services, replicas=1))) == [0, 1, 3]
    reasons = {
        a.ordinal: a.reason
        for a in plan(inp(pods, services, replicas=1)).actions
        if isinstance(a, DeleteGroup)
    }
    assert reasons == {0: "scale down (not available)", 1: "scale down (not available)", 3: "scale down"}


def test_ordinals_are_numbers() -> None:
    pods, services = cluster([2, 10, 9])
    assert group_deletes(plan(inp(pods, services, replicas=2))) == [10]
    assert created_groups(plan(inp(pods, services, replicas=4))) == {0: "r1"}
    # the rollout too ("mi-10" sorted before "mi-2" upstream)
    pods, services = cluster([2, 10], "r0")
    p = plan(inp(pods, services, replicas=2, max_unavailable=1, current_revision="r0"))
    assert p.actions == (DeleteGroup(10, "rolling update to revision r1"),)


def test_scale_to_zero_deletes_everything() -> None:
    pods, services = cluster([0, 1])
    p = plan(inp(pods, services, replicas=0))
    assert group_deletes(p) == [0, 1]
    assert all(g.state == "Deleting" for g in p.groups)


def test_role_scale_up_fills_lowest_missing_role_indices_in_every_group() -> None:
    pods, services = cluster([0, 1])
    pods = without(pods, pod_name(1, "decode", 0, 0))  # hole in group 1 is filled first
    roles = (PREFILL, replace(DECODE, replicas=3))
    p = plan(inp(pods, services, replicas=2, roles=roles))
    assert p.actions == (
        CreateRoleReplica(0, "decode", 2, "r1", (0,), False),
        CreateRoleReplica(1, "decode", 0, "r1", (0,), False),
        CreateRoleReplica(1, "decode", 2, "r1", (0,), False),
    )
    # role replicas count from the current spec; expected pods follow
    assert [g.expected_pods for g in p.groups] == [5, 5]
    assert [g.state for g in p.groups] == ["Creating", "Creating"]


def test_role_scale_down_removes_highest_role_indices_and_keeps_groups_available() -> None:
    pods, services = cluster([0, 1])
    roles = (replace(PREFILL, replicas=0), replace(DECODE, replicas=1))
    p = plan(inp(pods, services, replicas=2, roles=roles))
    assert p.actions == (
        DeleteRoleReplica(0, "prefill", 0, "role scale down"),
        DeleteRoleReplica(0, "decode", 1, "role scale down"),
        DeleteRoleReplica(1, "prefill", 0, "role scale down"),
        DeleteRoleReplica(1, "decode", 1, "role scale down"),
    )
    assert all(g.available and g.expected_pods == 1 for g in p.groups)


def test_role_replica_count_comes_from_the_current_spec_for_every_revision() -> None:
    # Group 0 is protected by the partition on r0 (shape SHAPE); the spec's decode count is 1.
    pods, services = cluster([0], "r0")
    roles = (replace(SHAPE_B[0], replicas=1), replace(DECODE, replicas=1))
    p = plan(
        inp(
            pods,
            services,
            replicas=1,
            partition=1,
            roles=roles,
            shapes={"r0": SHAPE, "r1": roles},
            current_revision="r0",
        )
    )
    assert p.actions == (DeleteRoleReplica(0, "decode", 1, "role scale down"),)


# --- rolling update --------------------------------------------------------------------------------


def test_rollout_deletes_highest_ordinal_first_numerically() -> None:
    pods, services = cluster(range(11), "r0")
    p = plan(inp(pods, services, replicas=11, current_revision="r0"))
    assert group_deletes(p) == [10]
    assert p.actions[0] == DeleteGroup(10, "rolling update to revision r1")
    p = plan(inp(pods, services, replicas=11, max_unavailable=2, current_revision="r0"))
    assert group_deletes(p) == [9, 10]


def test_rollout_replaces_one_group_at_a_time_with_max_unavailable_1() -> None:
    w = world([0, 1, 2], "r0", shapes={"r0": SHAPE, "r1": SHAPE_B}, roles=SHAPE_B, current_revision="r0")
    order: list[int] = []
    for _ in range(40):
        p = w.step()
        order += group_deletes(p)
        assert len(group_deletes(p)) <= 1
        if not p.actions and not w.starting and not w.vanishing:
            break
    assert order == [2, 1, 0]
    assert_converged(w)
    assert {g.expected_pods for g in plan(w.input()).groups} == {5}


def test_rollout_respects_partition() -> None:
    w = world(
        [0, 1, 2, 3], "r0", replicas=4, partition=2, shapes={"r0": SHAPE, "r1": SHAPE}, current_revision="r0"
    )
    w.run()
    assert w.revisions() == {0: "r0", 1: "r0", 2: "r1", 3: "r1"}
    assert_converged(w)


def test_partition_protected_group_is_rebuilt_on_its_own_revision() -> None:
    w = world(
        [0, 1, 2],
        "r0",
        partition=2,
        shapes={"r0": SHAPE, "r1": SHAPE_B},
        roles=SHAPE_B,
        current_revision="r0",
    )
    w.run()
    assert w.revisions() == {0: "r0", 1: "r0", 2: "r1"}
    # RoleRecreate: the failed role replica comes back on r0, with r0's shape
    w.fail(pod_name(1, "prefill", 0, 1))
    p = w.step()
    assert p.actions == (DeleteRoleReplica(1, "prefill", 0, "pod mi-1-prefill-0-1 failed (RoleRecreate)"),)
    w.run()
    assert w.revisions() == {0: "r0", 1: "r0", 2: "r1"}
    assert len([p for p in w.pods.values() if p.ordinal == 1]) == 4
    # InferGroupRecreate: the whole group comes back on the current revision (r0)
    w.policy = "InferGroupRecreate"
    w.fail(pod_name(0, "decode", 1, 0))
    assert group_deletes(w.step()) == [0]
    w.run()
    assert w.revisions() == {0: "r0", 1: "r0", 2: "r1"}
    assert_converged(w)


def test_protected_ordinal_goes_to_the_update_revision_when_its_own_has_no_pod_left() -> None:
    # r0 had only role "prefill", now scaled to 0; r1 added "decode".
    shapes = {"r0": (PREFILL,), "r1": SHAPE}
    roles = (replace(PREFILL, replicas=0), DECODE)
    kw: dict[str, Any] = {
        "replicas": 2,
        "partition": 1,
        "roles": roles,
        "shapes": shapes,
        "current_revision": "r0",
    }
    assert created_groups(plan(inp(**kw))) == {0: "r1", 1: "r1"}
    assert created_groups(plan(inp(**{**kw, "roles": SHAPE}))) == {0: "r0", 1: "r1"}


def test_surge_creates_new_ordinals_first_then_removes_the_excess() -> None:
    w = world(
        [0, 1, 2],
        "r0",
        max_unavailable=0,
        max_surge=1,
        shapes={"r0": SHAPE, "r1": SHAPE},
        current_revision="r0",
    )
    p = w.step()
    assert group_deletes(p) == []
    assert created_groups(p) == {3: "r1"}
    peak = 0
    for _ in range(60):
        avail = len(w.available())
        assert avail >= 3
        peak = max(peak, len(w.ordinals()))
        assert len(w.ordinals()) <= 4
        p = w.step()
        if not p.actions and not w.starting and not w.vanishing:
            break
    assert peak == 4
    assert_converged(w)


def test_surge_with_unavailability_budget_deletes_and_surges_at_once() -> None:
    pods, services = cluster([0, 1, 2], "r0")
    p = plan(inp(pods, services, max_surge=1, max_unavailable=1, current_revision="r0"))
    assert group_deletes(p) == [2]
    assert created_groups(p) == {3: "r1"}


def test_surge_is_not_used_for_the_last_outdated_group() -> None:
    # Deleting the last outdated group ends the rollout: no surge group to scale away later.
    pods, services = cluster([0, 1], "r1")
    p0, s0 = group_objects(2, "r0")
    p = plan(inp(pods + p0, services + s0, max_surge=1, max_unavailable=1, current_revision="r0"))
    assert group_deletes(p) == [2]
    assert created_groups(p) == {}


def test_unhealthy_outdated_groups_go_first_and_cost_no_budget() -> None:
    pods, services = cluster([0, 1, 2], "r0")
    pods = change(pods, pod_name(0, "decode", 0, 0), phase="Failed", ready=False)
    p = plan(inp(pods, services, current_revision="r0"))
    # available 2, floor 3-1: nothing available may go, but the broken old group does
    assert group_deletes(p) == [0]
    assert p.actions == (DeleteGroup(0, "rolling update to revision r1 (group not available)"),)


def test_unhealthy_outdated_groups_never_block_the_rollout() -> None:
    w = world([0, 1, 2], "r0", shapes={"r0": SHAPE, "r1": SHAPE}, current_revision="r0")
    for name in (pod_name(0, "prefill", 0, 0), pod_name(1, "prefill", 0, 0)):
        w.pods[name] = replace(w.pods[name], ready=False, not_ready_since=NOW)  # stuck NotReady
    p = w.step()
    assert group_deletes(p) == [0, 1]
    w.run()
    assert_converged(w)


@pytest.mark.parametrize(("max_unavailable", "max_surge"), [(0, 1), (1, 0), (2, 0), (0, 2), (3, 3)])
def test_rollout_is_deadlock_free(max_unavailable: int, max_surge: int) -> None:
    w = world(
        range(4),
        "r0",
        replicas=4,
        max_unavailable=max_unavailable,
        max_surge=max_surge,
        shapes={"r0": SHAPE, "r1": SHAPE_B},
        roles=SHAPE_B,
        current_revision="r0",
    )
    for _ in range(80):
        assert len(w.available()) >= 4 - max_unavailable
        assert len(w.ordinals()) <= 4 + max_surge
        p = w.step()
        if not p.actions and not w.starting and not w.vanishing:
            break
    assert_converged(w)


def test_unknown_revision_is_outdated_even_below_partition() -> None:
    pods, services = cluster([0, 1, 2], "gone")
    p = plan(inp(pods, services, partition=3, current_revision="r0"))
    assert [g.outdated for g in p.groups] == [True, True, True]
    assert group_deletes(p) == [2]


def test_mixed_revisions_in_a_group_follow_the_majority() -> None:
    pods, services = cluster([0], "r1")
    pods = change(pods, pod_name(0, "decode", 1, 0), revision="r0")
    p = plan(inp(pods, services, replicas=1))
    assert p.groups[0].revision == "r1"
    assert not p.groups[0].available
    assert p.actions == (
        DeleteRoleReplica(
            0, "decode", 1, "pod mi-0-decode-1-0 on revision r0, its group on r1 (RoleRecreate)"
        ),
    )


# --- recovery --------------------------------------------------------------------------------------

FAILED_POD = pod_name(1, "prefill", 0, 1)


def failed_cluster(**changes: Any) -> tuple[list[PodView], list[ServiceView]]:
    pods, services = cluster([0, 1, 2])
    fields = {"phase": "Failed", "ready": False, "not_ready_since": NOW - 2}
    fields.update(changes)
    return change(pods, FAILED_POD, **fields), services


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("RoleRecreate", (DeleteRoleReplica(1, "prefill", 0, f"pod {FAILED_POD} failed (RoleRecreate)"),)),
        ("InferGroupRecreate", (DeleteGroup(1, f"pod {FAILED_POD} failed (InferGroupRecreate)"),)),
        ("None", (DeletePods(((FAILED_POD, f"uid-{FAILED_POD}"),), f"pod {FAILED_POD} failed (None)"),)),
    ],
)
def test_failed_pod_by_policy(policy: RecoveryPolicy, expected: tuple[Action, ...]) -> None:
    pods, services = failed_cluster()
    p = plan(inp(pods, services, recovery_policy=policy))
    assert p.actions == expected
    assert p.groups[1].state == ("Deleting" if policy == "InferGroupRecreate" else "Recovering")
    assert not p.groups[1].available


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            "RoleRecreate",
            (
                DeleteRoleReplica(
                    1, "prefill", 0, f"pod {FAILED_POD} restarted and is not ready (RoleRecreate)"
                ),
            ),
        ),
        (
            "InferGroupRecreate",
            (DeleteGroup(1, f"pod {FAILED_POD} restarted and is not ready (InferGroupRecreate)"),),
        ),
        ("None", ()),  # the kubelet restarts containers
    ],
)
def test_restarted_not_ready_pod_by_policy(policy: RecoveryPolicy, expected: tuple[Action, ...]) -> None:
    pods, services = failed_cluster(phase="Running", restarted=True)
    p = plan(inp(pods, services, recovery_policy=policy))
    assert p.actions == expected
    assert p.requeue_after is None


def test_restarted_pod_that_is_ready_again_is_tolerated() -> None:
    pods, services = failed_cluster(phase="Running", restarted=True, ready=True, not_ready_since=None)
    p = plan(inp(pods, services))
    assert p.actions == ()
    assert p.groups[1].state == "Running"


def test_not_ready_without_restart_makes_the_group_unavailable_but_deletes_nothing() -> None:
    pods, services = failed_cluster(phase="Running")
    for policy in ("RoleRecreate", "InferGroupRecreate", "None"):
        p = plan(inp(pods, services, recovery_policy=policy))
        assert p.actions == ()
        assert (p.groups[1].available, p.groups[1].state) == (False, "Creating")


@pytest.mark.parametrize("policy", ["RoleRecreate", "InferGroupRecreate", "None"])
def test_grace_period_waits_then_acts(policy: RecoveryPolicy) -> None:
    pods, services = failed_cluster(not_ready_since=NOW - 10)
    p = plan(inp(pods, services, recovery_policy=policy, restart_grace_period_seconds=30))
    assert p.actions == ()
    assert p.requeue_after == pytest.approx(20)
    assert p.groups[1].state == "Recovering"
    p = plan(inp(pods, services, recovery_policy=policy, restart_grace_period_seconds=30, now=NOW + 20))
    assert len(p.actions) == 1
    assert p.requeue_after is None


def test_grace_period_applies_to_restarts_and_ready_again_is_tolerated() -> None:
    pods, services = failed_cluster(phase="Running", restarted=True, not_ready_since=NOW - 5)
    p = plan(inp(pods, services, restart_grace_period_seconds=60))
    assert p.actions == ()
    assert p.requeue_after == pytest.approx(55)
    pods = change(pods, FAILED_POD, ready=True, not_ready_since=None)
    p = plan(inp(pods, services, restart_grace_period_seconds=60, now=NOW + 100))
    assert (p.actions, p.requeue_after) == ((), None)


def test_unknown_not_ready_time_acts_at_once() -> None:
    pods, services = failed_cluster(not_ready_since=None)
    p = plan(inp(pods, services, restart_grace_period_seconds=60))
    assert kinds(p.actions) == ["DeleteRoleReplica"]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("RoleRecreate", (DeleteRoleReplica(1, "prefill", 0, "pods 1 of prefill-0 missing (RoleRecreate)"),)),
        ("InferGroupRecreate", (DeleteGroup(1, "pods 1 of prefill-0 missing (InferGroupRecreate)"),)),
        ("None", (CreateRoleReplica(1, "prefill", 0, "r1", (1,), False),)),
    ],
)
def test_pod_deleted_out_from_under_us(policy: RecoveryPolicy, expected: tuple[Action, ...]) -> None:
    pods, services = cluster([0, 1, 2])
    p = plan(inp(without(pods, FAILED_POD), services, recovery_policy=policy))
    assert p.actions == expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("RoleRecreate", (DeleteRoleReplica(1, "prefill", 0, f"pod {FAILED_POD} deleted (RoleRecreate)"),)),
        ("InferGroupRecreate", (DeleteGroup(1, f"pod {FAILED_POD} deleted (InferGroupRecreate)"),)),
        ("None", ()),  # wait until it is gone, then refill it alone
    ],
)
def test_pod_being_deleted_by_someone_else(policy: RecoveryPolicy, expected: tuple[Action, ...]) -> None:
    pods, services = cluster([0, 1, 2])
    p = plan(inp(change(pods, FAILED_POD, terminating=True), services, recovery_policy=policy))
    assert p.actions == expected
    assert p.requeue_after == DELETING_RECHECK_SECONDS


def test_single_pod_role_replica_deleted_is_rebuilt_by_every_policy() -> None:
    # upstream #517: a role made of a single pod never finished deleting
    for policy in ("RoleRecreate", "InferGroupRecreate", "None"):
        w = world(policy=policy)
        w.kill(pod_name(1, "decode", 0, 0))
        w.run()
        assert_converged(w)


def test_only_the_service_left_in_a_role_replica() -> None:
    pods, services = cluster([0, 1, 2])
    pods = without(pods, pod_name(1, "prefill", 0, 0), FAILED_POD)
    assert kinds(plan(inp(pods, services)).actions) == ["DeleteRoleReplica"]
    assert plan(inp(pods, services, recovery_policy="None")).actions == (
        CreateRoleReplica(1, "prefill", 0, "r1", (0, 1), False),
    )


def test_missing_service_is_refilled_alone() -> None:
    pods, services = cluster([0, 1, 2])
    services = [s for s in services if s.ordinal != 1]
    assert plan(inp(pods, services)).actions == (CreateRoleReplica(1, "prefill", 0, "r1", (), True),)


def test_orphaned_services_are_cleaned_up() -> None:
    pods, services = cluster([0, 1, 2])
    pods = [p for p in pods if p.ordinal != 2]
    p = plan(inp(pods, services))
    assert p.actions == (DeleteGroup(2, "no pods left, only Services"),)


def test_stray_pod_is_deleted_alone() -> None:
    pods, services = cluster([0, 1, 2])
    stray = replace(pods[0], name="mi-0-prefill-0-7", uid="u7", pod_index=7)
    p = plan(inp([*pods, stray], services))
    assert p.actions == (DeletePods((("mi-0-prefill-0-7", "u7"),), "unexpected pod in prefill-0"),)
    assert p.groups[0].available


# --- deletion in progress --------------------------------------------------------------------------


def test_deleting_group_is_waited_out_and_never_deleted_twice() -> None:
    pods, services = cluster([0, 1, 2])
    pods = [replace(p, terminating=True) if p.ordinal == 1 else p for p in pods]
    services = [replace(s, terminating=True) if s.ordinal == 1 else s for s in services]
    p = plan(inp(pods, services))
    assert p.actions == ()
    assert p.requeue_after == DELETING_RECHECK_SECONDS
    assert p.groups[1].state == "Deleting"
    # the last pod goes; a Service still terminating keeps the ordinal busy
    p = plan(inp([x for x in pods if x.ordinal != 1], services))
    assert p.actions == ()
    # all gone: rebuilt (no event needed: the next plan call sees it)
    p = plan(inp([x for x in pods if x.ordinal != 1], [s for s in services if s.ordinal != 1]))
    assert created_groups(p) == {1: "r1"}


def test_deleting_role_replica_is_not_rebuilt_until_all_gone() -> None:
    pods, services = cluster([0, 1, 2])
    pods = change(pods, FAILED_POD, terminating=True)
    pods = change(pods, pod_name(1, "prefill", 0, 0), terminating=True)
    services = [replace(s, terminating=True) if s.ordinal == 1 else s for s in services]
    assert plan(inp(pods, services)).actions == ()
    pods = without(pods, FAILED_POD)
    assert plan(inp(pods, services)).actions == ()
    pods = without(pods, pod_name(1, "prefill", 0, 0))
    assert plan(inp(pods, services)).actions == ()  # the Service is still terminating
    services = [s for s in services if s.ordinal != 1]
    assert plan(inp(pods, services)).actions == (CreateRoleReplica(1, "prefill", 0, "r1", (0, 1), True),)


def test_lost_delete_event_does_not_stall() -> None:
    w = world(policy="InferGroupRecreate")
    w.fail(FAILED_POD)
    w.apply(plan(w.input()))
    # the pods vanish without anyone telling the decision; any later call rebuilds the group
    objects: dict[str, PodView | ServiceView] = {**w.pods, **w.services}
    for name in [n for n, x in objects.items() if x.terminating]:
        w.pods.pop(name, None)
        w.services.pop(name, None)
    w.vanishing.clear()
    assert created_groups(plan(w.input())) == {1: "r1"}


@pytest.mark.parametrize("policy", ["RoleRecreate", "InferGroupRecreate", "None"])
def test_plan_after_its_own_deletions_repeats_nothing(policy: RecoveryPolicy) -> None:
    w = world(
        [0, 1, 2, 3],
        "r0",
        replicas=3,
        policy=policy,
        shapes={"r0": SHAPE, "r1": SHAPE},
        current_revision="r0",
    )
    w.fail(pod_name(1, "decode", 0, 0))
    w.crash(pod_name(2, "prefill", 0, 0), heals_in=50)
    first = plan(w.input())
    assert first.actions
    w.apply(first)
    again = plan(w.input())
    assert [a for a in again.actions if not isinstance(a, CreateRoleReplica)] == []
    assert again.requeue_after == DELETING_RECHECK_SECONDS


# --- group summaries -------------------------------------------------------------------------------


def test_group_summaries_describe_the_state_after_the_plan() -> None:
    pods, services = cluster([0, 1, 2], "r0")
    pods = change(pods, pod_name(0, "prefill", 0, 0), phase="Pending", ready=False)
    p = plan(inp(pods, services, current_revision="r0", max_unavailable=2, max_surge=1))
    by = {g.ordinal: g for g in p.groups}
    assert set(by) == {0, 1, 2, 3}
    assert (by[0].state, by[0].outdated) == ("Deleting", True)  # unhealthy old group
    assert (by[2].state, by[2].available) == ("Deleting", False)  # budgeted rollout delete
    assert (by[1].state, by[1].available, by[1].ready_pods) == ("Running", True, 4)
    assert (by[3].state, by[3].revision, by[3].expected_pods, by[3].ready_pods) == ("Creating", "r1", 4, 0)


def test_groups_of_no_pods_are_never_created() -> None:
    roles = (replace(PREFILL, replicas=0), replace(DECODE, replicas=0))
    p = plan(inp(replicas=2, roles=roles))
    assert p == Plan((), None, ())


def test_converged_fixtures_are_consistent() -> None:
    w = world()
    assert_converged(w)
    assert isinstance(w.input().shapes, Mapping)

"""Hypothesis properties of the ModelInfer decision, on the step simulator of ``test_decide.World``.

Random specs (roles, worker counts, replicas, maxUnavailable, maxSurge, partition, recovery policy,
grace period), random spec changes (template revisions, replicas, limits, partition, role replicas)
and random failures (pod failed, container restart, NotReady, pod deleted) at random steps, with
random delays for pods to start and objects to go away. Checked:

1. A rollout that starts healthy, with no failure injected: at every step the available groups stay
   at or above ``replicas - max_unavailable`` (or, if already below, do not drop), and the groups in
   existence (deleting ones included) stay at or below ``replicas + max_surge`` (or do not grow).
2. With failures: the decision's own deletions never take available groups below that floor (recovery
   only ever deletes groups that are already unavailable).
3. Once events stop, the cluster converges within a bounded number of steps to exactly the desired
   groups, role replicas, pods, Services and revisions, with no action left and no requeue.
4. Planning again on the state a plan's actions leave (pods created Pending, deletions terminating)
   asks for nothing: no delete is repeated, no create doubled.
5. A drain (some groups' pods on a cordoned node, the disruption arbiter releasing groups, an
   eager drain evicting every released group's pods at once) during a rollout: the decision's
   deletions and the evictions together never take the available groups below the floor (the
   floor is shared: a released group is spent capacity), the groups never exceed
   ``replicas + max_surge``, the drain completes and the ModelInfer converges.

The simulator also enforces the executor contract on every action (``World.apply``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from aiplane.controllers.modelinfer.decide import (
    CreateRoleReplica,
    PlanInput,
    RecoveryPolicy,
    RoleShape,
    group_availability,
    plan,
)
from aiplane.controllers.modelinfer.disruption import decide
from tests.unit.modelinfer.test_decide import World, assert_converged

ROLE_NAMES = ("p", "d")
MAX_STEPS = 30  # events happen in steps 0..MAX_STEPS-1
CONVERGE_STEPS = 400

Event = tuple[str, int, int]


@dataclass(frozen=True)
class Scenario:
    replicas: int
    roles: tuple[RoleShape, ...]
    max_unavailable: int
    max_surge: int
    partition: int
    policy: RecoveryPolicy
    grace: int
    seed: int
    events: tuple[tuple[int, Event], ...]


def _role(name: str, replicas: int, workers: int) -> RoleShape:
    return RoleShape(name, replicas, workers, workers > 0)


@st.composite
def _roles(draw: st.DrawFn) -> tuple[RoleShape, ...]:
    n = draw(st.integers(1, 2))
    # The first role has a replica: a group of no pods cannot exist (see test_decide).
    return tuple(
        _role(ROLE_NAMES[i], draw(st.integers(1 if i == 0 else 0, 2)), draw(st.integers(0, 2)))
        for i in range(n)
    )


SPEC_EVENTS = st.one_of(
    st.tuples(st.just("template"), st.integers(0, 2**16), st.integers(0, 2**16)),
    st.tuples(st.just("replicas"), st.integers(0, 5), st.just(0)),
    st.tuples(st.just("maxUnavailable"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("maxSurge"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("partition"), st.integers(0, 4), st.just(0)),
)
ROLE_EVENTS = st.tuples(st.just("roleReplicas"), st.integers(0, 1), st.integers(0, 2))
FAILURE_EVENTS = st.tuples(
    st.sampled_from(["fail", "crash", "unready", "kill"]), st.integers(0, 10_000), st.integers(1, 12)
)


@st.composite
def scenarios(draw: st.DrawFn, *, failures: bool, role_scaling: bool) -> Scenario:
    kinds = [SPEC_EVENTS]
    if role_scaling:
        kinds.append(ROLE_EVENTS)
    if failures:
        kinds += [FAILURE_EVENTS, FAILURE_EVENTS]  # twice as likely as a spec change
    drawn = draw(
        st.lists(st.tuples(st.integers(0, MAX_STEPS - 1), st.one_of(*kinds)), min_size=1, max_size=8)
    )
    if not failures:
        # Every run of the no-failure property is a rollout that starts healthy at step 0.
        drawn.append((0, ("template", draw(st.integers(0, 2**16)), draw(st.integers(0, 3)))))
    events = tuple(sorted(drawn, key=lambda x: x[0]))
    replicas = draw(st.integers(0, 5))
    max_unavailable = draw(st.integers(0, 3))
    return Scenario(
        replicas=replicas,
        roles=draw(_roles()),
        max_unavailable=max_unavailable,
        max_surge=draw(st.integers(1 if max_unavailable == 0 else 0, 3)),
        partition=draw(st.integers(0, max(replicas - 1, 0))),
        policy=draw(st.sampled_from(["RoleRecreate", "InferGroupRecreate", "None"])),
        grace=draw(st.sampled_from([0, 0, 12, 30])),
        seed=draw(st.integers(0, 2**32 - 1)),
        events=events,
    )


def start(sc: Scenario) -> World:
    """A healthy, converged ModelInfer on revision r0."""
    w = World(
        replicas=sc.replicas,
        roles=sc.roles,
        shapes={"r0": sc.roles},
        update_revision="r0",
        current_revision="r0",
        partition=sc.partition,
        max_unavailable=sc.max_unavailable,
        max_surge=sc.max_surge,
        policy=sc.policy,
        grace=sc.grace,
        rng=random.Random(sc.seed),
    )
    w.run(CONVERGE_STEPS)
    assert_converged(w)
    return w


def _keep_valid(w: World) -> None:
    """What the validating webhook guarantees: partition < replicas, not both limits 0."""
    w.partition = min(w.partition, max(w.replicas - 1, 0))
    if w.max_unavailable == 0 and w.max_surge == 0:
        w.max_surge = 1


def apply_event(w: World, ev: Event) -> None:
    kind, a, b = ev
    if kind == "template":
        # A new revision: new worker counts, and maybe another set of roles (replicas kept).
        rng = random.Random(a)
        names = [n for i, n in enumerate(ROLE_NAMES) if (b >> i) & 1] or [ROLE_NAMES[b % 2]]
        current = {r.name: r.replicas for r in w.roles}
        roles = tuple(_role(n, current.get(n, rng.randint(1, 2)), rng.randint(0, 2)) for n in names)
        if not any(r.replicas for r in roles):
            roles = (replace(roles[0], replicas=1), *roles[1:])
        revision = f"r{len(w.shapes)}"
        w.shapes[revision] = roles
        w.roles = roles
        w.update_revision = revision
    elif kind == "replicas":
        w.replicas = a
    elif kind == "maxUnavailable":
        w.max_unavailable = a
    elif kind == "maxSurge":
        w.max_surge = a
    elif kind == "partition":
        w.partition = a
    elif kind == "roleReplicas":
        if a < len(w.roles):
            scaled = list(w.roles)
            scaled[a] = replace(scaled[a], replicas=b)
            if any(r.replicas for r in scaled):  # keep groups non-empty
                w.roles = tuple(scaled)
    else:
        live = sorted(n for n, p in w.pods.items() if not p.terminating)
        if not live:
            return
        name = live[a % len(live)]
        if kind == "fail":
            w.fail(name)
        elif kind == "crash":
            w.crash(name, heals_in=b)
        elif kind == "unready":
            w.unready(name)
        else:
            w.kill(name)
    _keep_valid(w)


def floor(w: World) -> int:
    return w.replicas - w.max_unavailable


def drive(sc: Scenario, *, check_limits: bool) -> World:
    w = start(sc)
    pending = list(sc.events)
    floor_held = surge_full = deleted = 0
    for step in range(MAX_STEPS):
        while pending and pending[0][0] == step:
            apply_event(w, pending.pop(0)[1])
        inp = w.input()
        p = plan(inp)
        avail_before = len(w.available())
        total_before = len(w.ordinals())

        # (2) the decision's own deletions keep the floor (checked before anything starts or heals)
        after = w.clone()
        after.apply(p)
        assert len(after.available()) >= min(floor(w), avail_before), p
        # (4) planning again on that state asks for nothing
        again = plan(after.input())
        assert again.actions == (), (p.actions, again.actions)

        deleted += sum(1 for a in p.actions if not isinstance(a, CreateRoleReplica))
        floor_held += len(after.available()) == floor(w) < avail_before
        surge_full += w.max_surge > 0 and len(after.ordinals()) == w.replicas + w.max_surge
        w.apply(p)
        w.tick()
        if check_limits:
            # (1) rollout limits, across the step (creations, deletions, pods starting, vanishing)
            assert len(w.available()) >= min(floor(w), avail_before)
            assert len(w.ordinals()) <= max(w.replicas + w.max_surge, total_before)

    w.stats = {
        "steps where the decision deleted down to the floor": f"{min(floor_held, 3)}+",
        "steps at the surge limit": f"{min(surge_full, 3)}+",
        "deletions": "none" if not deleted else "1-5" if deleted <= 5 else "more",
    }

    # (3) convergence
    w.run(CONVERGE_STEPS)
    assert_converged(w)
    if all(rev == w.update_revision for rev in w.revisions().values()):
        assert w.current_revision == w.update_revision
    return w


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(failures=False, role_scaling=False))
def test_rollout_keeps_its_limits_and_converges(sc: Scenario) -> None:
    w = drive(sc, check_limits=True)
    for name, value in w.stats.items():
        event(f"{name}: {value}")
    event(f"revisions: {len(w.shapes)}")
    event(f"surge used: {w.max_surge > 0}")


def _seen(
    replicas: int,
    workers: int,
    max_surge: int,
    events: tuple[tuple[int, Event], ...],
    *,
    partition: int = 0,
    policy: RecoveryPolicy = "RoleRecreate",
) -> Scenario:
    """A scenario once found failing: one role ``p`` of one replica, ``max_unavailable`` 0."""
    return Scenario(replicas, (_role("p", 1, workers),), 0, max_surge, partition, policy, 0, 0, events)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(failures=True, role_scaling=True))
# Found by longer runs: a group whose roles are all scaled to 0 on its (old) revision.
@example(_seen(2, 0, 1, ((0, ("template", 0, 3)), (0, ("roleReplicas", 0, 0))), partition=1))
@example(_seen(0, 0, 1, ((0, ("replicas", 1, 0)), (1, ("template", 0, 3)), (1, ("roleReplicas", 0, 0)))))
# A unit whose pods all fail under policy None (delete both, then rebuild).
@example(_seen(0, 1, 1, ((0, ("replicas", 1, 0)), (1, ("fail", 1, 1)), (2, ("fail", 0, 1))), policy="None"))
def test_failures_and_spec_changes_never_break_the_floor_and_converge(sc: Scenario) -> None:
    w = drive(sc, check_limits=False)
    for name, value in w.stats.items():
        event(f"{name}: {value}")
    event(f"policy: {sc.policy}")
    event(f"failures: {sum(1 for _, e in sc.events if e[0] in ('fail', 'crash', 'unready', 'kill'))}")


# --- (5) drains --------------------------------------------------------------------------------------


@dataclass
class Drain:
    """A node being drained: the uids of the pods on it, and what each group's budget says."""

    on_node: set[str]
    released: frozenset[int] = frozenset()

    def cordoned(self, w: World) -> frozenset[int]:
        return frozenset(p.ordinal for p in w.pods.values() if p.uid in self.on_node and not p.terminating)

    def input(self, w: World) -> PlanInput:
        """Arbitrate (budgets written), then the plan's input with the verdict."""
        base = w.input()
        cordoned = self.cordoned(w)
        decision = decide(
            mi_name="mi",
            replicas=w.replicas,
            max_unavailable=w.max_unavailable,
            available=group_availability(base),
            cordoned={o: ("n",) for o in cordoned},
            released=self.released,
        )
        self.released = decision.released
        return replace(base, cordoned=cordoned, released=decision.released, held=decision.held)

    def evict(self, w: World) -> None:
        """An eager drain: every pod of a released group on the node is evicted now."""
        for p in list(w.pods.values()):
            if p.uid in self.on_node and p.ordinal in self.released and not p.terminating:
                w._terminate(p)


def drain_step(w: World, d: Drain) -> tuple[int, int]:
    inp = d.input(w)
    before = (len(w.available()), len(w.ordinals()))
    p = plan(inp)
    w.apply(p)
    d.evict(w)
    return before


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sc=scenarios(failures=False, role_scaling=False),
    at=st.integers(0, MAX_STEPS - 1),
    mask=st.integers(1, 2**6 - 1),
)
def test_a_drain_during_a_rollout_keeps_the_shared_floor_and_completes(
    sc: Scenario, at: int, mask: int
) -> None:
    w = start(sc)
    pending = list(sc.events)
    d = Drain(set())
    for step in range(MAX_STEPS + CONVERGE_STEPS):
        while pending and pending[0][0] == step:
            apply_event(w, pending.pop(0)[1])
        if step == at:  # the groups in the mask have their pods on the node being drained
            d.on_node = {p.uid for p in w.pods.values() if (mask >> (p.ordinal % 6)) & 1}
        avail_before, total_before = drain_step(w, d)
        assert len(w.available()) >= min(floor(w), avail_before)
        assert len(w.ordinals()) <= max(w.replicas + w.max_surge, total_before)
        w.tick()
        assert len(w.available()) >= min(floor(w), avail_before)
        if step > max(at, MAX_STEPS) and not d.cordoned(w) and not plan(d.input(w)).actions:
            break
    assert not d.cordoned(w), "the drain never completed"
    event(f"surge: {w.max_surge > 0}, maxUnavailable 0: {w.max_unavailable == 0}")
    w.run(CONVERGE_STEPS)
    assert_converged(w)

"""The Deployment controller's rolling-update arithmetic (``agents/rollout.py``) against kube's rules,
and a model of a rollout in which the ReplicaSet controller and the kubelet act in any order: on every
step the pods stay within ``replicas + maxSurge`` and the available ones above ``replicas -
maxUnavailable``, and the rollout ends with exactly ``replicas`` updated pods."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.sim.agents import rollout
from aiplane.sim.agents.daemonsets import template_hash
from aiplane.sim.agents.deployments import HASH_LABEL, without_hash
from aiplane.sim.agents.rollout import RsView


def spec(
    replicas: int, surge: Any = None, unavailable: Any = None, type_: str = "RollingUpdate"
) -> dict[str, Any]:
    rolling = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable)) if v is not None}
    return {"replicas": replicas, "strategy": {"type": type_, "rollingUpdate": rolling}}


def test_fenceposts_round_surge_up_and_unavailable_down() -> None:
    assert rollout.fenceposts(spec(10)) == (3, 2)  # 25% of 10: surge 2.5 → 3, unavailable 2.5 → 2
    assert rollout.fenceposts(spec(1)) == (1, 0)
    assert rollout.fenceposts(spec(4, surge=0, unavailable=0)) == (0, 1)  # never both 0
    assert rollout.fenceposts(spec(5, surge="50%", unavailable=2)) == (3, 2)
    assert rollout.max_unavailable(spec(3, unavailable=7)) == 3
    assert rollout.max_unavailable(spec(3, type_="Recreate")) == 0
    assert rollout.max_surge(spec(3, type_="Recreate")) == 0
    assert rollout.desired({}) == 1


def test_proportional_scaling_keeps_the_total_at_replicas_plus_surge() -> None:
    active = [RsView("new", 6, 6, 6), RsView("old", 4, 4, 4)]
    sized = rollout.proportional_scale(spec(20, surge=0, unavailable=2), active)
    assert sized == {"new": 12, "old": 8}
    sized = rollout.proportional_scale(spec(5, surge=0, unavailable=1), active)
    assert sum(sized.values()) == 5 and all(v >= 0 for v in sized.values())


def test_template_hash_is_stable_and_follows_the_template() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}}
    changed = {**template, "spec": {"containers": [{"name": "c", "image": "b"}]}}
    assert template_hash(template) == template_hash({**template})
    assert template_hash(template) != template_hash(changed)
    assert template_hash(template) != template_hash(template, collision_count=1)
    labelled = {**template, "metadata": {"labels": {"app": "web", HASH_LABEL: template_hash(template)}}}
    assert without_hash(labelled) == template


def rs_sync(rs: RsView) -> RsView:
    """The ReplicaSet controller: create missing pods (not ready), delete surplus (not ready first)."""
    if rs.pods < rs.replicas:
        return replace(rs, pods=rs.replicas)
    excess = rs.pods - rs.replicas
    unready_cut = min(excess, rs.pods - rs.available)
    return replace(rs, pods=rs.replicas, available=rs.available - (excess - unready_cut))


def deploy_sync(dspec: dict[str, Any], new: RsView, old: list[RsView]) -> tuple[RsView, list[RsView]]:
    """One ``rolloutRolling`` step, as ``DeploymentController._rolling`` does it."""
    target = rollout.new_rs_replicas(dspec, new, [*old, new])
    if target != new.replicas:
        return replace(new, replicas=target), old
    cuts = rollout.old_rs_scale_down(dspec, new, old)
    return new, [replace(rs, replicas=cuts.get(rs.name, rs.replicas)) for rs in old]


def check(dspec: dict[str, Any], sets: list[RsView]) -> None:
    replicas = rollout.desired(dspec)
    assert sum(rs.pods for rs in sets) <= replicas + rollout.max_surge(dspec)
    assert sum(rs.available for rs in sets) >= replicas - rollout.max_unavailable(dspec)


percent_or_int = st.one_of(st.integers(0, 4), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@settings(max_examples=300, deadline=None)
@given(
    replicas=st.integers(1, 12),
    surge=percent_or_int,
    unavailable=percent_or_int,
    old_count=st.integers(1, 3),
    actions=st.lists(st.tuples(st.sampled_from(["deploy", "rs", "ready"]), st.integers(0, 3)), max_size=80),
)
def test_rolling_update_stays_within_its_limits(
    replicas: int, surge: Any, unavailable: Any, old_count: int, actions: list[tuple[str, int]]
) -> None:
    dspec = spec(replicas, surge, unavailable)
    # a finished earlier rollout: the newest old ReplicaSet has every pod, available
    old = [RsView(f"old{i}", 0) for i in range(old_count - 1)] + [
        RsView("last", replicas, replicas, replicas)
    ]
    new = RsView("new", 0)

    def step(kind: str, index: int) -> None:
        nonlocal new, old
        sets = [*old, new]
        if kind == "deploy":
            new, old = deploy_sync(dspec, new, old)
        elif kind == "rs":
            synced = rs_sync(sets[index % len(sets)])
            new = synced if synced.name == "new" else new
            old = [synced if rs.name == synced.name else rs for rs in old]
        else:  # the kubelet: every pod of one ReplicaSet becomes available
            chosen = sets[index % len(sets)]
            made = replace(chosen, available=chosen.pods)
            new = made if made.name == "new" else new
            old = [made if rs.name == made.name else rs for rs in old]
        check(dspec, [*old, new])

    for kind, index in actions:
        step(kind, index)
    for _ in range(10 * (replicas + 2)):  # then everyone keeps acting until the rollout is done
        for index in range(len(old) + 1):
            step("deploy", 0)
            step("rs", index)
            step("ready", index)
    assert (new.replicas, new.pods, new.available) == (replicas, replicas, replicas)
    assert all(rs.replicas == 0 and rs.pods == 0 for rs in old)

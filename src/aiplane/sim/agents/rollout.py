"""The arithmetic of kube-controller-manager's Deployment controller (``pkg/controller/deployment``
``rolling.go``, ``sync.go``, ``util/deployment_util.go``), kept free of the API so that it can be
checked on its own: how far a rolling update may surge and how many pods it may take down.

A ReplicaSet is seen here as a :class:`RsView`: its ``spec.replicas``, its live pods and how many of them
are available. The controller builds the views from the pods themselves (not from the ReplicaSets'
possibly stale ``status``), which is what keeps the limits true on every committed change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"


@dataclass(frozen=True)
class RsView:
    """One ReplicaSet of a Deployment as the rollout sees it."""

    name: str
    #: ``spec.replicas``.
    replicas: int
    #: Live pods (not terminating, not finished): the pods it has now, above or below ``replicas``.
    pods: int = 0
    #: Of the live pods, those Ready for ``minReadySeconds``.
    available: int = 0

    @property
    def counted(self) -> int:
        """Pods it may have at once: surplus pods are not gone until the ReplicaSet controller deletes
        them, so they count against the surge."""
        return max(self.replicas, self.pods)

    @property
    def counted_available(self) -> int:
        """Available pods it keeps: the ReplicaSet controller deletes not-ready pods first, so after a
        scale-down at most ``replicas`` of the available ones remain."""
        return min(self.available, self.replicas)


def scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int, or a percentage of ``total`` rounded up or
    down. Malformed values count as 0 (the API server's validation would have refused them)."""
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            try:
                return int(text)
            except ValueError:
                return 0
        try:
            pct = int(text[:-1])
        except ValueError:
            return 0
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    if isinstance(value, bool) or value is None:
        return 0
    return int(value)


def strategy_type(spec: Mapping[str, Any]) -> str:
    return str((spec.get("strategy") or {}).get("type") or "RollingUpdate")


def fenceposts(spec: Mapping[str, Any]) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge, maxUnavailable) in pods; surge rounds up, unavailable down, and
    both 0 would deadlock, so unavailable becomes 1."""
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    replicas = desired(spec)
    surge = scaled_value(rolling.get("maxSurge", DEFAULT_MAX_SURGE), replicas, round_up=True)
    unavailable = scaled_value(
        rolling.get("maxUnavailable", DEFAULT_MAX_UNAVAILABLE), replicas, round_up=False
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def desired(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas")
    return 1 if value is None else int(value)


def max_surge(spec: Mapping[str, Any]) -> int:
    """``MaxSurge``: 0 unless ``RollingUpdate``."""
    return fenceposts(spec)[0] if strategy_type(spec) == "RollingUpdate" else 0


def max_unavailable(spec: Mapping[str, Any]) -> int:
    """``MaxUnavailable``: 0 unless ``RollingUpdate`` with replicas; never more than the replicas."""
    replicas = desired(spec)
    if strategy_type(spec) != "RollingUpdate" or replicas == 0:
        return 0
    return min(fenceposts(spec)[1], replicas)


def new_rs_replicas(spec: Mapping[str, Any], new: RsView, all_rs: Sequence[RsView]) -> int:
    """``NewRSNewReplicas`` for ``RollingUpdate``: scale the new ReplicaSet up as far as the surge allows."""
    replicas = desired(spec)
    if new.replicas >= replicas:
        return replicas
    max_total = replicas + max_surge(spec)
    current = sum(rs.counted for rs in all_rs)
    if current >= max_total:
        return new.replicas
    return new.replicas + min(max_total - current, replicas - new.replicas)


def old_rs_scale_down(spec: Mapping[str, Any], new: RsView, old: Sequence[RsView]) -> dict[str, int]:
    """``reconcileOldReplicaSets``: the old ReplicaSets' new ``spec.replicas`` (only those that change).

    First unhealthy replicas go (``cleanupUnhealthyReplicas``: they cost no availability), then available
    ones, oldest ReplicaSet first, while the available pods stay above ``replicas - maxUnavailable``.
    ``old`` is ordered oldest first.
    """
    if sum(rs.replicas for rs in old) == 0:
        return {}
    min_available = desired(spec) - max_unavailable(spec)
    all_rs = [*old, new]
    new_unavailable = max(new.replicas - new.counted_available, 0)
    budget = sum(rs.replicas for rs in all_rs) - min_available - new_unavailable
    if budget <= 0:
        return {}
    scaled = {rs.name: rs.replicas for rs in old}
    for rs in old:  # unhealthy replicas first
        if budget <= 0:
            break
        unhealthy = max(rs.replicas - rs.counted_available, 0)
        cut = min(unhealthy, budget)
        if cut:
            scaled[rs.name] -= cut
            budget -= cut
    available = sum(min(rs.counted_available, scaled.get(rs.name, rs.replicas)) for rs in all_rs)
    room = available - min_available
    for rs in old:
        if room <= 0:
            break
        cut = min(scaled[rs.name], room)
        scaled[rs.name] -= cut
        room -= cut
    return {rs.name: scaled[rs.name] for rs in old if scaled[rs.name] != rs.replicas}


def proportional_scale(spec: Mapping[str, Any], active: Sequence[RsView]) -> dict[str, int]:
    """``scale`` of ``sync.go`` while several ReplicaSets have replicas (a scaling event mid-rollout): the
    difference to ``replicas + maxSurge`` shared out in proportion to their sizes, the rest to the
    largest. ``active`` are the ReplicaSets with ``spec.replicas > 0``, newest first."""
    allowed = desired(spec) + max_surge(spec)
    total = sum(rs.replicas for rs in active)
    diff = allowed - total
    if diff == 0 or total == 0:
        return {}
    order = (
        sorted(active, key=lambda rs: -rs.replicas)
        if diff > 0
        else sorted(active, key=lambda rs: rs.replicas)
    )
    out: dict[str, int] = {}
    left = diff
    for rs in order:
        share = int(diff * rs.replicas / total)
        share = max(share, -rs.replicas)
        out[rs.name] = rs.replicas + share
        left -= share
    for rs in order:  # leftovers (rounding) go to the largest first, never below 0
        if left == 0:
            break
        step = left if left > 0 else max(left, -out[rs.name])
        out[rs.name] += step
        left -= step
    return {
        name: value
        for name, value in out.items()
        if value != next(r.replicas for r in active if r.name == name)
    }

"""ModelInfer ``status``, computed from the decision's group summaries: :func:`compute_status`.

Pure, like :mod:`.decide`: the executor passes the :attr:`~.decide.Plan.groups` of the plan it just
carried out, the spec numbers it planned with, the status it read from the cache and ``now``, and
writes the result through ``/status`` only when :func:`~aiplane.apimachinery.conditions.status_changed` says
it differs. On a steady state the result equals the stored status exactly (same values, same
condition order, unchanged ``lastTransitionTime``s), so a settled ModelInfer costs zero writes.

Counts (upstream §10, fixed where noted)
---------------------------------------
* ``replicas``: groups that exist, Deleting ones included (upstream counted its stored groups the
  same way), plus the groups the plan is creating.
* ``updatedReplicas``: groups on ``updateRevision``. ``currentReplicas``: groups on
  ``currentRevision``. ``availableReplicas``: groups whose expected pods are all Running and Ready.
* ``currentRevision`` / ``updateRevision`` (added, as upstream HEAD and StatefulSets have them).
  ``currentRevision`` moves to ``updateRevision`` once every group is on it and available, none is
  being deleted and there are exactly ``spec.replicas`` of them: the rollout is complete. Until then
  it stays put, and groups below ``partition`` that are rebuilt come back on it. So with a
  ``partition`` above 0 it does not move while protected groups stay on the old revision (StatefulSet
  semantics); when it does move, ``currentReplicas`` equals ``updatedReplicas``.
* ``labelSelector``: as given (the scale subresource's selector, one pod per group).

Conditions (``metav1.Condition``; ``lastTransitionTime`` moves only when ``status`` flips, but
reason and message are rewritten on every call, so they never go stale as upstream's did)
--------------------------------------------------------------------------------------------------
* ``Available``: ``True``/``AllGroupsReady`` "All infer groups are ready" when at least
  ``spec.replicas`` groups are available; else ``False``/``GroupsNotReady`` naming the groups that
  are not.
* ``Progressing`` (spelled right; upstream wrote ``Progerssing``, which is removed if found):
  ``True``/``GroupProgressing`` naming every group that is not Running, numerically sorted, with
  its state; else ``False``/``NoGroupProgressing``.
* ``UpdateInProgress``: ``True``/``GroupsUpdating`` while groups at or above ``partition`` are not
  on ``updateRevision`` (the message counts updated and outdated groups); else
  ``False``/``AllGroupsUpdated``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import remove_condition, set_condition
from aiplane.controllers import causes, queueing
from aiplane.controllers.modelinfer.disruption import Decision, disruption_condition
from aiplane.controllers.modelinfer.objects import label_selector
from aiplane.controllers.modelinfer.plan_types import GroupSummary, ModelInferObserved, Plan
from aiplane.controllers.modelinfer.validation import rolling_update_configuration

__all__ = [
    "AVAILABLE",
    "PROGRESSING",
    "UPDATE_IN_PROGRESS",
    "compute_status",
    "invalid_status",
    "modelinfer_status",
    "next_current_revision",
]

AVAILABLE: Final = "Available"
PROGRESSING: Final = "Progressing"
UPDATE_IN_PROGRESS: Final = "UpdateInProgress"
#: Upstream's misspelt condition type (fixed upstream in 7e258748); dropped from old statuses.
_MISSPELT_PROGRESSING: Final = "Progerssing"

_MAX_LISTED: Final = 20  # groups named in one message before "and N more"
_STATUS_KEYS: Final = (
    "observedGeneration",
    "replicas",
    "currentReplicas",
    "updatedReplicas",
    "availableReplicas",
    "labelSelector",
    "currentRevision",
    "updateRevision",
    "conditions",
    "waitingFor",
)


def _listed(groups: Iterable[GroupSummary]) -> str:
    """``1 (Creating), 2 (Deleting), 10 (Recovering)``: ordinals as numbers, capped."""
    items = [f"{g.ordinal} ({g.state})" for g in sorted(groups, key=lambda g: g.ordinal)]
    if len(items) <= _MAX_LISTED:
        return ", ".join(items)
    return f"{', '.join(items[:_MAX_LISTED])} and {len(items) - _MAX_LISTED} more"


def _time(now: str | datetime) -> datetime:
    if isinstance(now, datetime):
        return now
    moment = objects.parse_time(now)
    if moment is None:
        raise ValueError(f"not an RFC 3339 time: {now!r}")
    return moment


def next_current_revision(
    groups: Sequence[GroupSummary], *, replicas: int, update_revision: str, current_revision: str
) -> str:
    """``status.currentRevision`` after this plan: ``update_revision`` once the rollout is complete
    (exactly ``replicas`` groups, all on it and available, none deleting), else unchanged. An empty
    ``current_revision`` (a new ModelInfer) is ``update_revision``."""
    if not current_revision:
        return update_revision
    done = len(groups) == replicas and all(
        g.revision == update_revision and g.available and g.state != "Deleting" for g in groups
    )
    return update_revision if done else current_revision


def compute_status(
    groups: Sequence[GroupSummary],
    *,
    generation: int,
    replicas: int,
    partition: int,
    update_revision: str,
    current_revision: str,
    label_selector: str,
    existing: Mapping[str, Any] | None,
    now: str | datetime,
    waiting: Sequence[causes.Held] = (),
) -> dict[str, Any]:
    """The ModelInfer's new ``status``; equal to ``existing`` when nothing changed.

    ``groups`` are :attr:`Plan.groups`; ``replicas``/``partition`` the spec's; ``current_revision``
    the one the plan used; ``now`` an RFC 3339 time (or an aware datetime) for condition
    transitions. Fields of ``existing`` this function does not own are kept; conditions of other
    types keep their place. ``waiting`` is what holds the pods (:mod:`aiplane.controllers.causes`):
    named in ``Available`` and ``Progressing`` while groups are not available, and in ``waitingFor``.
    """
    at = _time(now)
    current = next_current_revision(
        groups, replicas=replicas, update_revision=update_revision, current_revision=current_revision
    )
    available = [g for g in groups if g.available]
    not_available = [g for g in groups if not g.available]
    progressing = [g for g in groups if g.state != "Running"]
    updated = sum(1 for g in groups if g.revision == update_revision)
    outdated = [g for g in groups if g.outdated]

    old = dict(existing or {})
    conditions: list[dict[str, Any]] = [
        dict(c) for c in old.get("conditions") or () if isinstance(c, Mapping)
    ]
    conditions, _ = remove_condition(conditions, _MISSPELT_PROGRESSING)

    def put(type_: str, ok: bool, reason: str, message: str) -> None:
        nonlocal conditions
        conditions, _ = set_condition(
            conditions,
            type_,
            "True" if ok else "False",
            reason,
            message,
            observed_generation=generation,
            now=at,
        )

    held = waiting if not_available or len(available) < replicas else ()
    why = f"; {causes.describe(held)}" if held else ""
    if len(available) >= replicas:
        put(AVAILABLE, True, "AllGroupsReady", "All infer groups are ready")
    else:
        message = f"{len(available)} of {replicas} infer groups are available"
        if not_available:
            message += f"; not available: {_listed(not_available)}"
        put(AVAILABLE, False, "GroupsNotReady", message + why)
    if progressing:
        put(
            PROGRESSING,
            True,
            "GroupProgressing",
            f"Some infer groups are progressing: {_listed(progressing)}{why}",
        )
    else:
        put(PROGRESSING, False, "NoGroupProgressing", "No infer group is progressing")
    scope = f" at or above partition {partition}" if partition > 0 else ""
    if outdated:
        put(
            UPDATE_IN_PROGRESS,
            True,
            "GroupsUpdating",
            f"Updating infer groups to revision {update_revision}: {updated} updated, "
            f"{len(outdated)} outdated{scope}",
        )
    else:
        put(
            UPDATE_IN_PROGRESS,
            False,
            "AllGroupsUpdated",
            f"All infer groups{scope} are on revision {update_revision}",
        )

    ours: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": len(groups),
        "currentReplicas": sum(1 for g in groups if g.revision == current),
        "updatedReplicas": updated,
        "availableReplicas": len(available),
        "labelSelector": label_selector,
        "currentRevision": current,
        "updateRevision": update_revision,
        "conditions": conditions,
        "waitingFor": causes.summary(held),
    }
    status = {key: ours[key] for key in _STATUS_KEYS if ours[key] is not None}
    status.update({k: v for k, v in old.items() if k not in ours})
    return status


def modelinfer_status(
    observed: ModelInferObserved, the_plan: Plan, arbitration: Decision, now: datetime
) -> dict[str, Any]:
    """The whole status of a valid ModelInfer: :func:`compute_status`, ``Valid``, ``DisruptionHeld``
    and, for a queued one, Kueue's quota condition."""
    mi = observed.mi
    generation = objects.generation(mi) or 0
    status = compute_status(
        the_plan.groups,
        generation=generation,
        replicas=int(objects.spec(mi).get("replicas", 1)),
        partition=int(rolling_update_configuration(mi).get("partition") or 0),
        update_revision=observed.update_revision,
        current_revision=observed.current_revision,
        label_selector=label_selector(mi),
        existing=objects.status(mi),
        now=now,
        waiting=observed.waiting,
    )
    conditions, _ = set_condition(
        status.get("conditions"),
        "Valid",
        "True",
        "SpecValid",
        "The spec describes objects the controller can build",
        observed_generation=generation,
        now=now,
    )
    conditions = disruption_condition(conditions, arbitration, generation=generation, now=now)
    queue = observed.queue
    conditions = queueing.quota_condition(
        conditions,
        queue.waits if queue is not None else (),
        queued=queue is not None and queue.queued,
        undecided_parts=queue.undecided if queue is not None else (),
        generation=generation,
        now=now,
    )
    return {**status, "conditions": conditions}


def invalid_status(mi: Mapping[str, Any], message: str, now: datetime) -> dict[str, Any]:
    """The status of a ModelInfer whose spec cannot be built: ``Valid=False`` naming every problem."""
    old = dict(objects.status(mi))
    generation = objects.generation(mi) or 0
    conditions, _ = set_condition(
        old.get("conditions"),
        "Valid",
        "False",
        "InvalidSpec",
        message,
        observed_generation=generation,
        now=now,
    )
    return {**old, "conditions": conditions, "observedGeneration": generation}

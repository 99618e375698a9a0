"""Reporting: one status writer, condition mutators, and the table of conditions worth an Event.

Every controller reports the same way, after kueue's ``pkg/workload`` patching:

* **Pure mutators** (:data:`StatusMutator`) change a status dict and say whether they changed
  anything; :func:`condition` is the one for a condition, with Kubernetes semantics
  (``lastTransitionTime`` moves only when ``status`` flips, ``observedGeneration`` is set).
* **One writer** (:class:`StatusWriter`) sends a status to ``/status`` only when it differs from the
  observed one, as a JSON merge patch of just the difference (a field the controller dropped is
  removed, not left behind), guarded by the observed ``resourceVersion`` so a decision taken on a
  stale view is rejected with a conflict instead of overwriting a newer status. A steady object is
  never written.
* **Transition Events** come from a table (:class:`ConditionEvent`) compared between the status
  before and after a write: a condition *turning* to a status is reported once, because the status
  is written only when it changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, semantic_equal, set_condition, status_changed
from aiplane.apimachinery.mergepatch import create_merge_patch
from aiplane.kube.client import KubeClient
from aiplane.kube.events import EventRecorder
from aiplane.kube.resources import Resource

__all__ = [
    "ConditionEvent",
    "StatusMutator",
    "StatusWriter",
    "condition",
    "emit_transitions",
    "transition_events",
]

Obj = dict[str, Any]

#: Changes a status dict in place; returns whether it changed anything.
StatusMutator = Callable[[dict[str, Any]], bool]


def condition(
    type_: str,
    status: str,
    reason: str,
    message: str,
    *,
    observed_generation: int | None = None,
    now: datetime,
) -> StatusMutator:
    """A mutator that sets one condition (``metav1`` semantics; see ``apimachinery.conditions``)."""

    def mutate(target: dict[str, Any]) -> bool:
        conditions, changed = set_condition(
            target.get("conditions"),
            type_,
            status,
            reason,
            message,
            observed_generation=observed_generation,
            now=now,
        )
        if changed or "conditions" not in target:
            target["conditions"] = conditions
        return changed

    return mutate


class StatusWriter:
    """Writes an object's ``/status`` subresource, only when the status changed (module docstring)."""

    def __init__(self, client: KubeClient, resource: Resource, field_manager: str) -> None:
        self.client = client
        self.resource = resource
        self.field_manager = field_manager

    async def write(self, obj: Mapping[str, Any], desired: Mapping[str, Any]) -> Obj | None:
        """Make ``obj``'s status ``desired``; returns the written object, or ``None`` if nothing changed.

        Conflicts (the object moved on since it was observed) and NotFound are raised as the
        client's ``ApiError``: the controller runtime treats them as expected races.
        """
        current = objects.status(obj)
        if not status_changed(current, desired):
            return None
        return await self._patch(obj, create_merge_patch(dict(current), dict(desired)))

    async def write_keys(
        self, obj: Mapping[str, Any], desired: Mapping[str, Any], *, hints: Mapping[str, bool]
    ) -> Obj:
        """Write the top-level status keys that differ from ``obj``'s, each whole; a key in ``hints``
        is written when its hint says it changed, without comparing it. For a status with a large
        list whose changes the caller already knows (the PartitioningPlan's one entry per node):
        comparing it again on every write would cost the whole fleet each time."""
        current = objects.status(obj)
        patch: Obj = {}
        for key in current.keys() | desired.keys():
            if key in hints:
                if hints[key]:
                    patch[key] = desired.get(key)
            elif not semantic_equal(current.get(key), desired.get(key)):
                patch[key] = desired.get(key)
        return await self._patch(obj, patch)

    async def _patch(self, obj: Mapping[str, Any], status_patch: Obj) -> Obj:
        """A merge patch of ``/status`` guarded by the observed resourceVersion."""
        body = {"metadata": {"resourceVersion": objects.resource_version(obj)}, "status": status_patch}
        return await self.client.patch(
            self.resource,
            objects.name(obj),
            body,
            namespace=objects.namespace(obj) or None,
            subresource="status",
            field_manager=self.field_manager,
        )

    async def apply(self, obj: Mapping[str, Any], *mutators: StatusMutator) -> Obj | None:
        """Run every mutator on a copy of ``obj``'s status, then :meth:`write` it if any changed."""
        status = copy.deepcopy(dict(objects.status(obj)))
        changed = [m(status) for m in mutators]
        return await self.write(obj, status) if any(changed) else None


@dataclass(frozen=True)
class ConditionEvent:
    """A condition reaching ``status`` deserves an Event of ``type`` (``Normal``/``Warning``).

    ``reason``/``message`` default to the condition's own. ``from_absent``: also when the condition
    did not exist before (False for "Resumed"-like rules that need the opposite status first).
    ``on_reason_change``: also when the status stays but the reason changes (a plan blocked for a
    new reason). ``from_statuses``: only when the condition had one of these statuses before ("lost
    availability" is True → False, not the Unknown → False of a component still starting);
    ``reasons``: only when the condition's reason is one of these (a failure, not progress).
    """

    condition: str
    status: str
    type: str
    reason: str | None = None
    message: str | None = None
    from_absent: bool = True
    on_reason_change: bool = False
    from_statuses: tuple[str, ...] | None = None
    reasons: tuple[str, ...] | None = None


def _conditions(status: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    raw = (status or {}).get("conditions")
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def _fires(rule: ConditionEvent, now: Mapping[str, Any], was: Mapping[str, Any] | None) -> bool:
    if now.get("status") != rule.status:
        return False
    if rule.reasons is not None and now.get("reason") not in rule.reasons:
        return False
    if rule.from_statuses is not None and (was is None or was.get("status") not in rule.from_statuses):
        return False
    if was is None:
        return rule.from_absent
    if was.get("status") != rule.status:
        return True
    return rule.on_reason_change and was.get("reason") != now.get("reason")


def transition_events(
    rules: Sequence[ConditionEvent], before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` for every rule a status change from ``before`` to ``after`` fires."""
    old, new = _conditions(before), _conditions(after)
    events: list[tuple[str, str, str]] = []
    for rule in rules:
        now = get_condition(new, rule.condition)
        if now is None or not _fires(rule, now, get_condition(old, rule.condition)):
            continue
        reason = rule.reason if rule.reason is not None else str(now.get("reason", ""))
        message = rule.message if rule.message is not None else str(now.get("message", ""))
        events.append((rule.type, reason, message))
    return events


def emit_transitions(
    recorder: EventRecorder,
    obj: Obj,
    rules: Iterable[ConditionEvent],
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> None:
    """Record the Events :func:`transition_events` finds, about ``obj``."""
    for type_, reason, message in transition_events(tuple(rules), before, after):
        recorder.emit(obj, type_, reason, message)

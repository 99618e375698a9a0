"""``metav1.Condition`` helpers on plain dicts (``k8s.io/apimachinery/pkg/api/meta/conditions.go``).

A controller recomputes its status from scratch on every reconcile; these helpers turn that into
the smallest honest change, so that:

* ``lastTransitionTime`` means what users read it as — when ``status`` last flipped. Reason,
  message and ``observedGeneration`` updates leave it alone (``SetStatusCondition``).
* Unchanged status is detectable (``changed`` from :func:`set_condition`,
  :func:`status_changed`), so the controller can skip the write. Writing identical status
  anyway costs an API call, bumps ``resourceVersion`` and wakes every watcher, including itself.
* Nothing reads a clock: ``now`` is an argument, so decisions stay pure and tests deterministic.
* Nothing mutates its input: the informer cache hands out shared objects.

Conditions are dicts with kube's field names (``type``, ``status``, ``observedGeneration``,
``lastTransitionTime``, ``reason``, ``message``). The field rules the API server enforces for
``metav1.Condition`` (status ``True``/``False``/``Unknown``, a CamelCase ``reason``, a qualified
``type``) are checked here too, so a controller bug surfaces as a :class:`ValueError` at the call
site instead of a rejected status write later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "CONDITION_STATUSES",
    "format_time",
    "get_condition",
    "is_false",
    "is_true",
    "remove_condition",
    "semantic_equal",
    "set_condition",
    "status_changed",
]

CONDITION_STATUSES: Final = ("True", "False", "Unknown")

# metav1.Condition's validation markers.
_TYPE_RE: Final = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])"
)
_TYPE_MAX: Final = 316
_REASON_RE: Final = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_REASON_MAX: Final = 1024
_MESSAGE_MAX: Final = 32768


def format_time(now: datetime) -> str:
    """``metav1.Time`` JSON: RFC 3339 in UTC at whole seconds, ``2024-05-01T12:00:00Z``.

    A naive datetime is taken to be UTC already; an aware one is converted. Sub-second precision
    is truncated, as Go's marshaller does.
    """
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _validate(type_: str, status: str, reason: str, message: str, observed_generation: int | None) -> None:
    if not isinstance(type_, str) or len(type_) > _TYPE_MAX or not _TYPE_RE.fullmatch(type_):
        raise ValueError(
            f"condition type: Invalid value: {type_!r}: must be a qualified name such as 'Ready'"
        )
    if status not in CONDITION_STATUSES:
        raise ValueError(
            f'condition {type_} status: Unsupported value: {status!r}: supported values: "True", "False", "Unknown"'
        )
    if not isinstance(reason, str) or len(reason) > _REASON_MAX or not _REASON_RE.fullmatch(reason):
        raise ValueError(
            f"condition {type_} reason: Invalid value: {reason!r}: must be a non-empty CamelCase word "
            "(letters, digits, '_', ',', ':'; starting with a letter)"
        )
    if not isinstance(message, str) or len(message) > _MESSAGE_MAX:
        raise ValueError(f"condition {type_} message: must be a string of at most {_MESSAGE_MAX} characters")
    if observed_generation is not None and (
        isinstance(observed_generation, bool)
        or not isinstance(observed_generation, int)
        or observed_generation < 0
    ):
        raise ValueError(
            f"condition {type_} observedGeneration: Invalid value: {observed_generation!r}: must be a non-negative int"
        )


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """``FindStatusCondition``: the first condition of this type, or ``None``."""
    for c in conditions or ():
        if c.get("type") == type_:
            return c
    return None


def is_true(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    """``IsStatusConditionTrue``: present with status ``"True"`` (absent is not true)."""
    c = get_condition(conditions, type_)
    return c is not None and c.get("status") == "True"


def is_false(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    """``IsStatusConditionFalse``: present with status ``"False"`` (absent is not false)."""
    c = get_condition(conditions, type_)
    return c is not None and c.get("status") == "False"


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: str,
    reason: str,
    message: str,
    *,
    observed_generation: int | None,
    now: datetime,
) -> tuple[list[dict[str, Any]], bool]:
    """``SetStatusCondition`` without mutation: returns ``(new_conditions, changed)``.

    * A new type is appended (order is kept, so status diffs stay small) with
      ``lastTransitionTime = now``.
    * An existing condition keeps its position. Its ``lastTransitionTime`` moves to ``now`` only
      when ``status`` differs; ``reason``, ``message`` and ``observedGeneration`` are updated in
      place.
    * ``changed`` is false when the result equals the input, i.e. the write can be skipped.

    ``observed_generation=None`` (or 0, which Go's ``omitempty`` drops) leaves the field out.
    The input list and its dicts are never modified; unchanged conditions are shared with it.
    """
    _validate(type_, status, reason, message, observed_generation)
    stamp = format_time(now)
    existing = list(conditions or ())
    new: dict[str, Any] = {"type": type_, "status": status}
    if observed_generation:
        new["observedGeneration"] = observed_generation
    new["lastTransitionTime"] = stamp
    new["reason"] = reason
    new["message"] = message

    for i, old in enumerate(existing):
        if old.get("type") != type_:
            continue
        if old.get("status") == status and old.get("lastTransitionTime"):
            new["lastTransitionTime"] = old["lastTransitionTime"]
        # Keep any fields a newer API version might add, then overlay ours.
        merged = {**old, **new}
        if not observed_generation:
            merged.pop("observedGeneration", None)
        if merged == dict(old):
            return [dict(c) if not isinstance(c, dict) else c for c in existing], False
        result = [dict(c) if not isinstance(c, dict) else c for c in existing]
        result[i] = merged
        return result, True
    return [*(dict(c) if not isinstance(c, dict) else c for c in existing), new], True


def remove_condition(
    conditions: Sequence[Mapping[str, Any]] | None, type_: str
) -> tuple[list[dict[str, Any]], bool]:
    """``RemoveStatusCondition`` without mutation: ``(conditions without type_, removed)``."""
    existing = [dict(c) if not isinstance(c, dict) else c for c in conditions or ()]
    kept = [c for c in existing if c.get("type") != type_]
    return kept, len(kept) != len(existing)


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, dict | list | tuple) and len(v) == 0)


def semantic_equal(a: Any, b: Any) -> bool:
    """``equality.Semantic.DeepEqual`` for JSON values.

    As kube's, it treats an empty list or map as equal to an absent (``None``) one; here a map
    key whose value is ``None``/``[]``/``{}`` also equals a missing key, since that is the same
    object once ``omitempty`` serialisation is done. Unlike ``==`` it does not confuse ``True``
    with ``1``. Numbers compare by value (``1 == 1.0``), as JSON numbers do.
    """
    if _is_empty(a) and _is_empty(b):
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return all(semantic_equal(a.get(k), b.get(k)) for k in a.keys() | b.keys())
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(semantic_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def status_changed(old_status: Mapping[str, Any] | None, new_status: Mapping[str, Any] | None) -> bool:
    """Would writing ``new_status`` over ``old_status`` change the stored object?

    Use it to skip no-op status writes: false when the two are :func:`semantic_equal` (so a
    freshly computed status with ``conditions: []`` does not count as a change against a stored
    status without conditions). Condition order matters, as it does on the server.
    """
    return not semantic_equal(old_status, new_status)

"""Reading Kubernetes objects held as plain dicts: the one place that knows where fields live.

Controllers, the embedded API server and its agents all read decoded JSON. Each reader here
tolerates a malformed object (a missing or wrongly typed ``metadata``, ``spec`` or ``status``)
and returns an empty value instead of raising, because cached objects can be anything a client
managed to store and a reader must never be the thing that crashes a reconcile. Writers stay with
their callers: mutating a cached object is forbidden, so nothing here returns a live sub-dict meant
to be changed.
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "EMPTY",
    "annotations",
    "creation_time",
    "deletion_time",
    "generation",
    "is_deleting",
    "key",
    "labels",
    "meta",
    "name",
    "namespace",
    "parse_time",
    "resource_version",
    "spec",
    "status",
    "uid",
]

#: The empty mapping readers return for an absent section (shared, read-only by convention).
EMPTY: Final[Mapping[str, Any]] = {}


def _section(obj: Mapping[str, Any] | None, field: str) -> Mapping[str, Any]:
    value = obj.get(field) if obj is not None else None
    return value if isinstance(value, Mapping) else EMPTY


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``metadata``, or an empty mapping."""
    return _section(obj, "metadata")


def spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``spec``, or an empty mapping."""
    return _section(obj, "spec")


def status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``status``, or an empty mapping."""
    return _section(obj, "status")


def name(obj: Mapping[str, Any] | None) -> str:
    """``metadata.name``, or ``""``."""
    return _text(meta(obj).get("name"))


def namespace(obj: Mapping[str, Any] | None) -> str:
    """``metadata.namespace``, or ``""`` (cluster-scoped objects have none)."""
    return _text(meta(obj).get("namespace"))


def uid(obj: Mapping[str, Any] | None) -> str:
    """``metadata.uid``, or ``""`` (an object not yet created has none)."""
    return _text(meta(obj).get("uid"))


def resource_version(obj: Mapping[str, Any] | None) -> str:
    """``metadata.resourceVersion`` as the opaque string it is: compare for equality only."""
    return _text(meta(obj).get("resourceVersion"))


def generation(obj: Mapping[str, Any] | None) -> int | None:
    """``metadata.generation``, or ``None`` when absent or not an integer."""
    value = meta(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """``metadata.labels``, or an empty mapping."""
    return _section(meta(obj), "labels")


def annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """``metadata.annotations``, or an empty mapping."""
    return _section(meta(obj), "annotations")


def key(obj: Mapping[str, Any] | None) -> str:
    """The informer cache key: ``namespace/name``, or ``name`` for a cluster-scoped object."""
    ns = namespace(obj)
    return f"{ns}/{name(obj)}" if ns else name(obj)


def is_deleting(obj: Mapping[str, Any] | None) -> bool:
    """Has deletion started (``metadata.deletionTimestamp`` set, finalizers still pending)?"""
    return bool(meta(obj).get("deletionTimestamp"))


def parse_time(value: Any) -> datetime | None:
    """A ``metav1.Time`` (RFC 3339) as an aware UTC datetime; ``None`` for absent or unreadable text.

    A naive timestamp is taken to be UTC, as Go's ``time.Parse`` of a ``Z``-less layout does for
    the API server's own output.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def creation_time(obj: Mapping[str, Any] | None) -> datetime | None:
    """``metadata.creationTimestamp`` parsed, or ``None``."""
    return parse_time(meta(obj).get("creationTimestamp"))


def deletion_time(obj: Mapping[str, Any] | None) -> datetime | None:
    """``metadata.deletionTimestamp`` parsed, or ``None``."""
    return parse_time(meta(obj).get("deletionTimestamp"))

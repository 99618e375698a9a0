"""Object-metadata helpers for controllers working on plain dicts.

What ``metav1`` accessors, ``metav1.NewControllerRef``/``GetControllerOf``, controller-runtime's
``controllerutil`` finalizer helpers and client-go's ``cache.MetaNamespaceKeyFunc`` give a Go
controller, for JSON-decoded objects. Everything here is pure: helpers that "change" an object
return a new value (a copy or a JSON patch) and never mutate their input, because objects come
from a shared informer cache.

Finalizers are changed with RFC 6902 JSON patches that carry their own precondition (a ``test``
op), so two controllers adding or removing finalizers concurrently cannot overwrite each other:
the API server applies the whole patch or rejects it with a conflict, and the controller requeues.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

__all__ = [
    "controller_of",
    "controller_owner_reference",
    "deep_copy",
    "deep_get",
    "finalizer_patch_add",
    "finalizer_patch_remove",
    "has_finalizer",
    "is_controlled_by",
    "is_owned_by",
    "object_key",
    "owner_references_of",
    "split_key",
    "strip_managed_fields",
]

_T = TypeVar("_T")
_MISSING: Final = object()


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    return md if isinstance(md, Mapping) else {}


def controller_owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """``metav1.NewControllerRef``: the ownerReference an owned object carries.

    ``controller: true`` makes the owner *the* managing controller (at most one per object), and
    ``blockOwnerDeletion: true`` makes foreground deletion of the owner wait for this object.
    The owner must have ``apiVersion``, ``kind``, ``metadata.name`` and ``metadata.uid`` — an
    owner not yet created (no uid) cannot own anything, so that is a :class:`ValueError`.
    """
    md = _metadata(owner)
    missing = [
        name
        for name, value in (
            ("apiVersion", owner.get("apiVersion")),
            ("kind", owner.get("kind")),
            ("metadata.name", md.get("name")),
            ("metadata.uid", md.get("uid")),
        )
        if not value
    ]
    if missing:
        raise ValueError(f"cannot reference an owner without {', '.join(missing)}")
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": md["name"],
        "uid": md["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owner_references_of(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``metadata.ownerReferences``, or ``[]``."""
    refs = _metadata(obj).get("ownerReferences")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metav1.GetControllerOf``: the first ownerReference with ``controller: true``."""
    for ref in owner_references_of(obj):
        if ref.get("controller") is True:
            return ref
    return None


def is_owned_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """Does any ownerReference (controller or not) point at ``owner_uid``?"""
    return any(ref.get("uid") == owner_uid for ref in owner_references_of(obj))


def is_controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """``metav1.IsControlledBy``: is ``owner_uid`` the object's controller?"""
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == owner_uid


def has_finalizer(obj: Mapping[str, Any], name: str) -> bool:
    """``controllerutil.ContainsFinalizer``."""
    finalizers = _metadata(obj).get("finalizers")
    return isinstance(finalizers, list) and name in finalizers


def _require_metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    if not isinstance(md, Mapping):
        raise ValueError("the object has no metadata")
    return md


def finalizer_patch_add(obj: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """A JSON patch that adds finalizer ``name``, or ``[]`` when it is already there.

    If the object has a finalizer list, the patch tests that list is unchanged and appends, so a
    concurrent change to the finalizers (and only that) makes it fail. With no list to test
    (absent — JSON patch cannot test for absence), it tests ``metadata.resourceVersion`` instead,
    because an ``add`` of the whole list would otherwise replace one added concurrently.
    """
    if not name:
        raise ValueError("a finalizer name must be non-empty")
    md = _require_metadata(obj)
    finalizers = md.get("finalizers")
    if isinstance(finalizers, list):
        if name in finalizers:
            return []
        return [
            {"op": "test", "path": "/metadata/finalizers", "value": list(finalizers)},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ]
    rv = md.get("resourceVersion")
    if not rv:
        raise ValueError("cannot guard a finalizer patch: the object has no metadata.resourceVersion")
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/finalizers", "value": [name]},
    ]


def finalizer_patch_remove(obj: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """A JSON patch that removes every occurrence of finalizer ``name``, or ``[]`` if absent.

    It tests the finalizer list is still what the caller saw, then removes by index (highest
    first, so earlier indices stay valid). Removing the last finalizer of an object being deleted
    lets the API server delete it.
    """
    md = _require_metadata(obj)
    finalizers = md.get("finalizers")
    if not isinstance(finalizers, list) or name not in finalizers:
        return []
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/finalizers", "value": list(finalizers)}]
    for i in reversed(range(len(finalizers))):
        if finalizers[i] == name:
            patch.append({"op": "remove", "path": f"/metadata/finalizers/{i}"})
    return patch


def object_key(obj: Mapping[str, Any]) -> str:
    """``cache.MetaNamespaceKeyFunc``: ``"namespace/name"``, or ``"name"`` when cluster-scoped."""
    md = _metadata(obj)
    name = md.get("name")
    if not name:
        raise ValueError("the object has no metadata.name")
    ns = md.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str, str]:
    """``cache.SplitMetaNamespaceKey``: ``"ns/name"`` -> ``("ns", "name")``, ``"name"`` ->
    ``("", "name")``. More than one ``/`` is a :class:`ValueError`."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def deep_get(obj: Any, path: str | Sequence[str | int], default: _T | None = None) -> Any | _T | None:
    """Read a nested field: ``deep_get(pod, "status.podIP")``, or with a sequence of keys when a
    key contains dots: ``deep_get(obj, ("metadata", "labels", "app.kubernetes.io/name"))``.

    Integer keys (or all-digit segments of a dotted path) index lists. Returns ``default`` when
    any step is missing, ``None``, or of the wrong type — never raises on shape.
    """
    keys: Iterable[str | int] = path.split(".") if isinstance(path, str) else path
    cur: Any = obj
    for key in keys:
        if isinstance(cur, Mapping):
            cur = cur.get(key, _MISSING) if isinstance(key, str) else _MISSING
        elif isinstance(cur, list):
            idx = (
                key if isinstance(key, int) else int(key) if isinstance(key, str) and key.isdigit() else None
            )
            cur = cur[idx] if idx is not None and -len(cur) <= idx < len(cur) else _MISSING
        else:
            cur = _MISSING
        if cur is _MISSING or cur is None:
            return default
    return cur


def strip_managed_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without ``metadata.managedFields``, as the informer cache stores it.

    Managed fields are server-side-apply bookkeeping, often larger than the object itself, and no
    controller decision reads them. Only the top level and ``metadata`` are copied (the rest is
    shared with the input), which is what makes this cheap enough to run on every watch event;
    treat the result as read-only like any cached object, or deep-copy before mutating.
    """
    out = dict(obj)
    md = obj.get("metadata")
    if isinstance(md, Mapping) and "managedFields" in md:
        out["metadata"] = {k: v for k, v in md.items() if k != "managedFields"}
    elif isinstance(md, Mapping):
        out["metadata"] = dict(md)
    return out


def deep_copy(obj: _T) -> _T:
    """``copy.deepcopy``, named for the place controllers need it: before mutating a cached
    object."""
    return copy.deepcopy(obj)

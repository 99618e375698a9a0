"""Pruning of unknown fields and of non-nullable nulls, as kube-apiserver does when decoding.

kube-apiserver silently drops every field a structural schema does not specify (apiextensions
``pruning.PruneWithOptions``) and then every ``null`` whose schema is neither ``nullable`` nor
defaulted (``defaulting.PruneNonNullableNullsWithoutDefaults``); nulls with a default survive so
that defaulting can replace them. Doing the same offline is what lets ``aiplane validate`` tell a
user that ``maxParalel`` would vanish, instead of the field being lost without a trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Fields of a resource (the root, or an ``x-kubernetes-embedded-resource``) that pruning leaves to
#: the ObjectMeta/TypeMeta handling.
META_FIELDS = frozenset({"apiVersion", "kind", "metadata"})

#: The JSON fields of ``metav1.ObjectMeta``: kube round-trips an embedded resource's metadata through
#: that struct, which drops anything else.
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

Schema = Mapping[str, Any]


def prune(obj: Any, schema: Schema | None, *, root: bool = True, drop_nulls: bool = True) -> list[str]:
    """Remove, in place, the fields of ``obj`` that ``schema`` does not specify.

    ``root`` says that ``obj`` is a whole resource: its ``apiVersion``, ``kind`` and ``metadata`` are
    then never touched, as in kube. ``x-kubernetes-preserve-unknown-fields`` keeps unknown fields
    (known ones are still pruned below), ``additionalProperties`` prunes map values against its
    schema, and ``x-kubernetes-embedded-resource`` objects keep their type and object meta (unknown
    ObjectMeta fields are dropped, as kube's coercion does). Afterwards (unless ``drop_nulls`` is
    false) non-nullable ``null`` values without a default are removed.

    Returns the sorted paths of the pruned fields in kube's notation for unknown fields
    (``spec.foo``, ``spec.items[0].bar``; map keys are joined with dots like any other key).
    """
    return [kube for kube, _ in prune_with_field_paths(obj, schema, root=root, drop_nulls=drop_nulls)]


def prune_with_field_paths(
    obj: Any, schema: Schema | None, *, root: bool = True, drop_nulls: bool = True
) -> list[tuple[str, str]]:
    """:func:`prune`, returning each pruned field as (kube's unknown-field path, field path).

    The two differ under maps: kube reports ``spec.labels.a.b`` where the field path, as used in
    field errors, is ``spec.labels[a].b``.
    """
    unknown: list[_Path] = []
    start: Schema = schema if schema is not None else {}
    if root and not start.get("x-kubernetes-embedded-resource"):
        start = {**start, "x-kubernetes-embedded-resource": True}
    _prune(obj, start, ("", ""), unknown, is_root=root)
    if drop_nulls:
        prune_nulls(obj, schema)
    unknown.sort()
    return unknown


_Path = tuple[str, str]


def _join(path: _Path, key: str, *, map_key: bool = False) -> _Path:
    kube, fld = path
    kube = f"{kube}.{key}" if kube else key
    if map_key:
        return kube, f"{fld}[{key}]"
    return kube, f"{fld}.{key}" if fld else key


def _index(path: _Path, i: int) -> _Path:
    return f"{path[0]}[{i}]", f"{path[1]}[{i}]"


def _additional(schema: Schema) -> tuple[bool, Schema | None]:
    """(whether additionalProperties is set, its schema if it is one)."""
    if "additionalProperties" not in schema:
        return False, None
    value = schema["additionalProperties"]
    return True, value if isinstance(value, Mapping) else None


def _prune(x: Any, s: Schema | None, path: _Path, unknown: list[_Path], *, is_root: bool = False) -> None:
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(x, s, path, unknown, is_root=is_root)
        return
    if isinstance(x, dict):
        if s is None:
            for k in list(x):
                unknown.append(_join(path, k))
                del x[k]
            return
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        props: Mapping[str, Any] = s.get("properties") or {}
        has_additional, additional = _additional(s)
        for k in list(x):
            if embedded and k in META_FIELDS:
                continue
            if k in props:
                _prune(x[k], props[k], _join(path, k), unknown)
            elif has_additional:
                _prune(x[k], additional, _join(path, k, map_key=True), unknown)
            else:
                unknown.append(_join(path, k))
                del x[k]
        if embedded and not is_root:
            _coerce_embedded_metadata(x, path, unknown)
    elif isinstance(x, list):
        items = s.get("items") if s is not None else None
        for i, v in enumerate(x):
            _prune(v, items, _index(path, i), unknown)


def _skip_prune(x: Any, s: Schema, path: _Path, unknown: list[_Path], *, is_root: bool = False) -> None:
    if isinstance(x, dict):
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        props: Mapping[str, Any] = s.get("properties") or {}
        has_additional, additional = _additional(s)
        for k in list(x):
            if embedded and k in META_FIELDS:
                continue
            if k in props:
                _prune(x[k], props[k], _join(path, k), unknown)
            elif has_additional:
                _prune(x[k], additional, _join(path, k, map_key=True), unknown)
        if embedded and not is_root:
            _coerce_embedded_metadata(x, path, unknown)
    elif isinstance(x, list):
        items = s.get("items")
        if items is None:
            return
        for i, v in enumerate(x):
            _skip_prune(v, items, _index(path, i), unknown)


def _coerce_embedded_metadata(x: dict[str, Any], path: _Path, unknown: list[_Path]) -> None:
    meta = x.get("metadata")
    if not isinstance(meta, dict):
        return
    base = _join(path, "metadata")
    for k in list(meta):
        if k not in OBJECT_META_FIELDS:
            unknown.append(_join(base, k))
            del meta[k]


def _field_schema(field: str, s: Schema | None) -> Schema | None:
    if s is None:
        return None
    props: Mapping[str, Any] = s.get("properties") or {}
    if field in props:
        sub: Schema = props[field]
        return sub
    return _additional(s)[1]


def prune_nulls(x: Any, s: Schema | None) -> None:
    """Drop ``null`` values whose schema is neither nullable nor defaulted (in place)."""
    if isinstance(x, dict):
        for k in list(x):
            sub = _field_schema(k, s)
            v = x[k]
            if v is None and sub is not None and not sub.get("nullable") and sub.get("default") is None:
                del x[k]
            else:
                prune_nulls(v, sub)
    elif isinstance(x, list):
        items = s.get("items") if s is not None else None
        for v in x:
            prune_nulls(v, items)

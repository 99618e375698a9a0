"""SMD's ``typed`` walkers: a value and its schema turned into field sets, merged, compared, pruned.

Each walker follows the same schema dispatch (scalar, list by list type, map unless atomic) but
does something different at each node — :func:`to_field_set` collects paths, :func:`merge` builds
the applied result, :func:`compare` diffs two values, :func:`remove_items` drops owned subtrees —
so they stay separate functions, as in SMD, sharing the schema questions of :mod:`.schema`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from aiplane.sim.apiserver.smd.fieldpath import FieldSet, Path, PathElement
from aiplane.sim.apiserver.smd.schema import (
    Schema,
    SmdError,
    atom,
    field_schema,
    index_items,
    is_declared,
    is_struct,
    item_pe,
    item_schema,
    list_type,
    map_atomic,
)
from aiplane.sim.apiserver.smd.value import ABSENT, value_equal


def to_field_set(value: Any, s: Schema | None) -> FieldSet:
    """``TypedValue.ToFieldSet``: every leaf and list/map item the value mentions."""
    out = FieldSet()
    _tfs(value, s, (), out)
    return out


def _tfs(v: Any, s: Schema | None, path: Path, out: FieldSet) -> None:
    kind = atom(s, v)
    if kind == "scalar":
        out.insert(path)
        return
    if kind == "list":
        lt, _ = list_type(s)
        if lt == "atomic":
            out.insert(path)
            return
        if not isinstance(v, list):
            return
        elem = item_schema(s)
        for i, item in enumerate(v):
            try:
                pe = item_pe(s, i, item)
            except SmdError:
                continue
            _tfs(item, elem, (*path, pe), out)
            out.insert((*path, pe))
        return
    if map_atomic(s):
        out.insert(path)
        return
    if not isinstance(v, dict):
        return
    for key, val in v.items():
        pe = PathElement.field(key)
        _tfs(val, field_schema(s, key), (*path, pe), out)
        # SMD's visitMapItems: a null or an empty map is itself a member (an applied `spec: {}` owns
        # `.spec`), as is every field the schema does not declare.
        if val is None or (isinstance(val, dict) and not val) or not is_declared(s, key):
            out.insert((*path, pe))


def merge(lhs: Any, rhs: Any, s: Schema | None) -> Any:
    """``TypedValue.Merge``: ``rhs`` (an applied configuration) merged into ``lhs`` (the live object).

    Either side may be :data:`ABSENT`; the result is :data:`ABSENT` when nothing is left.
    """
    if rhs is ABSENT:
        return copy.deepcopy(lhs)
    kind = atom(s, rhs)
    if lhs is not ABSENT and atom(s, lhs) != kind:
        lhs = ABSENT
    if kind == "scalar":
        return copy.deepcopy(rhs)
    if kind == "list":
        lt, _ = list_type(s)
        lhs_l = lhs if isinstance(lhs, list) else None
        rhs_l = rhs if isinstance(rhs, list) else None
        if lt == "atomic" or (not lhs_l and not rhs_l):
            return copy.deepcopy(rhs)
        merged = _merge_list_items(lhs_l or [], rhs_l or [], s)
        return merged if merged else ABSENT
    lhs_m = lhs if isinstance(lhs, dict) else None
    rhs_m = rhs if isinstance(rhs, dict) else None
    if map_atomic(s) or (not lhs_m and not rhs_m):
        return copy.deepcopy(rhs)
    out: dict[str, Any] = {}
    lhs_m = lhs_m or {}
    rhs_m = rhs_m or {}
    for key in [*lhs_m, *(k for k in rhs_m if k not in lhs_m)]:
        m = merge(lhs_m.get(key, ABSENT), rhs_m.get(key, ABSENT), field_schema(s, key))
        if m is not ABSENT:
            out[key] = m
    return out if out else ABSENT


def _merge_list_items(lhs: list[Any], rhs: list[Any], s: Schema | None) -> list[Any]:
    """The merging walker's ``visitListItems``: RHS order, LHS-only items kept in place."""
    elem = item_schema(s)
    rhs_order, observed_rhs = index_items(s, rhs)
    lhs_order, observed_lhs = index_items(s, lhs)
    shared = [pe for pe in rhs_order if pe in observed_lhs]
    next_shared = shared.pop(0) if shared else None
    out: list[Any] = []

    def item(pe: PathElement, left: Any, right: Any) -> None:
        m = merge(left, right, elem)
        if m is not ABSENT:
            out.append(m)

    li = ri = 0
    while li < len(lhs_order) or ri < len(rhs_order):
        if li < len(lhs_order) and ri < len(rhs_order):
            pe = lhs_order[li]
            if pe == rhs_order[ri]:
                item(pe, observed_lhs[pe], observed_rhs[pe])
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in observed_rhs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_order):
            pe = lhs_order[li]
            if pe not in observed_rhs:
                item(pe, observed_lhs[pe], ABSENT)
                li += 1
                continue
        if ri < len(rhs_order):
            pe = rhs_order[ri]
            item(pe, observed_lhs.get(pe, ABSENT), observed_rhs[pe])
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


@dataclass
class Comparison:
    """``typed.Comparison``: what ``rhs`` removed, modified and added relative to ``lhs``."""

    removed: FieldSet = field(default_factory=FieldSet)
    modified: FieldSet = field(default_factory=FieldSet)
    added: FieldSet = field(default_factory=FieldSet)

    def exclude(self, ignored: FieldSet | None) -> Comparison:
        """``ExcludeFields``: drop everything at or below ``ignored``."""
        if ignored is None:
            return self
        return Comparison(
            self.removed.recursive_difference(ignored),
            self.modified.recursive_difference(ignored),
            self.added.recursive_difference(ignored),
        )

    def same(self) -> bool:
        return self.removed.empty() and self.modified.empty() and self.added.empty()


def compare(lhs: Any, rhs: Any, s: Schema | None, *, zero_structs: bool = False) -> Comparison:
    """``TypedValue.Compare``.

    With ``zero_structs`` a declared field missing on one side takes the value a Go struct has
    there when its parent is present (see :func:`_go_zero`): built-in kinds are Go structs, whose
    struct fields always exist, so kube never reports such a field itself as added or removed.
    """
    out = Comparison()
    _compare(lhs, rhs, s, (), out, zero_structs)
    return out


def _compare(l: Any, r: Any, s: Schema | None, path: Path, out: Comparison, zero: bool) -> None:  # noqa: E741
    if l is not ABSENT and r is not ABSENT and l == r and value_equal(l, r):
        # Equal on both sides: nothing below is added, removed or modified. ``==`` runs in C and
        # refutes most changed values at once (``value_equal`` implies it); ``value_equal`` then
        # tells ``True`` from ``1``. A status write used to walk the whole object, field by field.
        return
    atom_l = atom(s, l) if l is not ABSENT else None
    atom_r = atom(s, r) if r is not ABSENT else None
    kind = atom_r or atom_l
    if atom_l and atom_r and atom_l != atom_r:
        kind = "scalar"  # a deduced value that changed kind: compare it as a whole
    if kind == "list":
        lt, _ = list_type(s)
        lhs_l = l if isinstance(l, list) else None
        rhs_l = r if isinstance(r, list) else None
        if lt == "atomic" or (not lhs_l and not rhs_l):
            _leaf(l, r, path, out)
            return
        elem = item_schema(s)
        lhs_order, observed_lhs = index_items(s, lhs_l or [])
        rhs_order, observed_rhs = index_items(s, rhs_l or [])
        for pe in [*lhs_order, *(p for p in rhs_order if p not in observed_lhs)]:
            _compare(observed_lhs.get(pe, ABSENT), observed_rhs.get(pe, ABSENT), elem, (*path, pe), out, zero)
        _post(l, r, path, out)
        return
    if kind == "map":
        lhs_m = l if isinstance(l, dict) else None
        rhs_m = r if isinstance(r, dict) else None
        if map_atomic(s) or (not lhs_m and not rhs_m):
            _leaf(l, r, path, out)
            return
        lhs_m = lhs_m or {}
        rhs_m = rhs_m or {}
        for key in [*lhs_m, *(k for k in rhs_m if k not in lhs_m)]:
            cs = field_schema(s, key)
            lv = lhs_m.get(key, ABSENT)
            rv = rhs_m.get(key, ABSENT)
            if zero:
                if lv is ABSENT and l is not ABSENT:
                    lv = _go_zero(s, key, cs)
                if rv is ABSENT and r is not ABSENT:
                    rv = _go_zero(s, key, cs)
            _compare(lv, rv, cs, (*path, PathElement.field(key)), out, zero)
        _post(l, r, path, out)
        return
    _leaf(l, r, path, out)


def _go_zero(parent: Schema | None, key: str, child: Schema | None) -> Any:
    """What a Go struct has in field ``key`` when the JSON lacks it.

    A struct field is an empty struct; a field serialized without ``omitempty`` (the OpenAPI
    document marks those ``required``) is ``null``; anything else is really absent.
    """
    if is_struct(child):
        return {}
    if parent is not None and key in (parent.get("required") or ()):
        return None
    return ABSENT


def _leaf(l: Any, r: Any, path: Path, out: Comparison) -> None:  # noqa: E741
    if l is not ABSENT and r is not ABSENT:
        if not value_equal(l, r):
            out.modified.insert(path)
        return
    _post(l, r, path, out)


def _post(l: Any, r: Any, path: Path, out: Comparison) -> None:  # noqa: E741
    """A list or map present on one side only is itself added or removed (after its contents)."""
    if l is ABSENT:
        out.added.insert(path)
    elif r is ABSENT:
        out.removed.insert(path)


def remove_items(value: Any, to_remove: FieldSet, s: Schema | None) -> Any:
    """``TypedValue.RemoveItems``: drop every field and item ``to_remove`` names (with its subtree).

    As in SMD, a map or list that ends up empty becomes ``None``.
    """
    kind = atom(s, value)
    if kind == "scalar":
        return value
    if kind == "list":
        if not isinstance(value, list) or not value:
            return None
        lt, _ = list_type(s)
        if lt == "atomic":
            return None
        elem = item_schema(s)
        kept: list[Any] = []
        for i, item in enumerate(value):
            try:
                pe = item_pe(s, i, item)
            except SmdError:
                kept.append(item)
                continue
            if pe in to_remove.members:
                continue
            sub = to_remove.children.get(pe)
            kept.append(remove_items(item, sub, elem) if sub is not None and not sub.empty() else item)
        return kept if kept else None
    if not isinstance(value, dict) or not value or map_atomic(s):
        return None
    out: dict[str, Any] = {}
    for key, val in value.items():
        pe = PathElement.field(key)
        if pe in to_remove.members:
            continue
        sub = to_remove.children.get(pe)
        if sub is not None and not sub.empty():
            out[key] = remove_items(val, sub, field_schema(s, key))
        else:
            out[key] = val
    return out if out else None


def ensure_named_fields_are_members(fs: FieldSet, s: Schema | None) -> FieldSet:
    """``Set.EnsureNamedFieldsAreMembers``: a declared struct field with owned children is owned too."""
    members = set(fs.members)
    children: dict[PathElement, FieldSet] = {}
    for pe, child in fs.children.items():
        if pe.kind == "f":
            if is_declared(s, pe.payload):
                members.add(pe)
            children[pe] = ensure_named_fields_are_members(child, field_schema(s, pe.payload))
        else:
            children[pe] = ensure_named_fields_are_members(child, item_schema(s))
    return FieldSet(members, children)

"""SMD's ``merge.Updater``: who owns which fields, and what an update or an apply does to that.

An update takes every field it changed away from the other managers. An apply merges the applied
configuration into the live object, prunes the fields its manager applied last time and no longer
does (unless someone else owns them), and refuses — unless forced — to change a field another
manager owns: a :class:`ConflictsError`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery.values import go_json, go_quote
from aiplane.sim.apiserver.smd.fieldpath import FieldSet, Path
from aiplane.sim.apiserver.smd.schema import Schema
from aiplane.sim.apiserver.smd.typed import (
    Comparison,
    compare,
    ensure_named_fields_are_members,
    merge,
    remove_items,
    to_field_set,
)
from aiplane.sim.apiserver.smd.value import ABSENT, value_equal

Obj = dict[str, Any]


@dataclass(frozen=True)
class Manager:
    """A manager's identity (``BuildManagerIdentifier``): apiVersion only counts for Update entries."""

    manager: str
    operation: str
    api_version: str = ""
    subresource: str = ""

    def identifier(self) -> str:
        """The JSON kube uses as the manager's key (and sorts conflict messages by)."""
        parts = [f'"manager":{go_json(self.manager)}', f'"operation":{go_json(self.operation)}']
        if self.api_version:
            parts.append(f'"apiVersion":{go_json(self.api_version)}')
        if self.subresource:
            parts.append(f'"subresource":{go_json(self.subresource)}')
        return "{" + ",".join(parts) + "}"

    def describe(self) -> str:
        """``printManager``: ``"name"``, ``"name" with subresource "status"``, ``… using v1``."""
        text = go_quote(self.manager)
        if self.subresource:
            text += f" with subresource {go_quote(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text


@dataclass
class VersionedSet:
    """One manager's fields, the apiVersion they were written at, and whether by apply."""

    fields: FieldSet
    api_version: str
    applied: bool


@dataclass
class Managed:
    """Decoded managedFields: each manager's set and the time of its last change."""

    sets: dict[Manager, VersionedSet] = field(default_factory=dict)
    times: dict[Manager, str | None] = field(default_factory=dict)

    def copy(self) -> Managed:
        return Managed(
            {m: VersionedSet(vs.fields.copy(), vs.api_version, vs.applied) for m, vs in self.sets.items()},
            dict(self.times),
        )


@dataclass(frozen=True)
class Conflict:
    """A field an apply would change that ``manager`` owns."""

    manager: Manager
    path: Path


class ConflictsError(Exception):
    """``merge.Conflicts``."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


@dataclass
class TypedContext:
    """How one write's objects are typed: the schema, the request version, the ignored fields."""

    schema: Schema | None
    version: str
    ignored: FieldSet | None
    zero_structs: bool

    def compare(self, lhs: Any, rhs: Any) -> Comparison:
        return compare(lhs, rhs, self.schema, zero_structs=self.zero_structs)


def update(
    ctx: TypedContext, live: Any, new: Any, managed: Managed, workflow: Manager | None, force: bool
) -> Comparison:
    """``Updater.update``: take changed fields away from every manager but ``workflow``."""
    cmp = ctx.compare(live, new)
    excluded = cmp.exclude(ctx.ignored)
    changed = excluded.modified.union(excluded.added)
    conflicts: dict[Manager, FieldSet] = {}
    for key, vs in managed.sets.items():
        if key == workflow:
            continue
        clash = vs.fields.intersection(changed)
        if not clash.empty():
            conflicts[key] = clash
    if conflicts and not force:
        found = [
            Conflict(key, p)
            for key in sorted(conflicts, key=lambda m: m.identifier())
            for p in conflicts[key].paths()
        ]
        raise ConflictsError(found)
    for key, vs in list(managed.sets.items()):
        if key == workflow:
            continue
        fields = vs.fields
        if key in conflicts:
            fields = fields.difference(conflicts[key])
        if not excluded.removed.empty():
            fields = fields.difference(excluded.removed)
        if fields.empty():
            del managed.sets[key]
        else:
            managed.sets[key] = VersionedSet(fields, vs.api_version, vs.applied)
    return cmp


def apply(ctx: TypedContext, live: Any, config: Obj, managed: Managed, manager: Manager, force: bool) -> Any:
    """``Updater.Apply``: merge, prune what the manager stopped applying, check conflicts.

    Returns the new object, or :data:`ABSENT` when applying changed nothing.
    """
    schema = ctx.schema
    new = merge(live, config, schema)
    last = managed.sets.get(manager)
    fields = to_field_set(config, schema)
    if ctx.ignored is not None:
        fields = fields.recursive_difference(ctx.ignored)
    managed.sets[manager] = VersionedSet(fields, ctx.version, True)
    if last is not None and not last.fields.empty():
        new = prune(new, managed, last.fields, schema)
    update(ctx, live, new, managed, manager, force)
    if value_equal(live, new):
        return ABSENT
    return new


def prune(merged: Any, managed: Managed, last: FieldSet, schema: Schema | None) -> Any:
    """``Updater.prune`` with ``addBackOwnedItems`` and ``addBackDanglingItems``."""
    enf = functools.partial(ensure_named_fields_are_members, s=schema)
    pruned = remove_items(merged, enf(last), schema)
    owned = FieldSet()
    for vs in managed.sets.values():
        owned = owned.union(vs.fields)
    merged_set = enf(to_field_set(merged, schema))
    pruned_set = enf(to_field_set(pruned, schema))
    pruned = remove_items(merged, merged_set.difference(pruned_set.union(enf(owned))), schema)
    pruned_set = enf(to_field_set(pruned, schema))
    return remove_items(merged, merged_set.difference(pruned_set).intersection(enf(last)), schema)

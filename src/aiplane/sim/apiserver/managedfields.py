"""kube's field-manager wrappers around SMD: ``metadata.managedFields`` entries and who writes them.

``k8s.io/apimachinery/pkg/util/managedfields`` decodes and encodes the entries (sorted as kube
sorts them), names a write's manager after the client's User-Agent when the request has no
``fieldManager``, keeps TypeMeta and identity metadata out of every manager's set
(``NewStripMetaManager``), caps the number of Update entries (``capManagersManager``) and turns
SMD conflicts into the 409 clients see.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any, Final

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_quote
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.smd.fieldpath import FieldSet, Path, PathElement, path_string
from aiplane.sim.apiserver.smd.merge import Conflict, Managed, Manager, TypedContext, VersionedSet, update

#: kube's ``DefaultMaxUpdateManagers``: older Update entries are merged into ``ancient-changes``.
MAX_UPDATE_MANAGERS: Final = 10
FIELD_MANAGER_MAX_LENGTH: Final = 128

#: What ``NewStripMetaManager`` keeps out of every manager's set.
STRIPPED: Final = FieldSet.of(
    (PathElement.field("apiVersion"),),
    (PathElement.field("kind"),),
    (PathElement.field("metadata"),),
    *(
        (PathElement.field("metadata"), PathElement.field(name))
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    ),
)


class ManagedFieldsError(ValueError):
    """managedFields that kube's ``DecodeManagedFields`` refuses."""


def decode_managed_fields(entries: Any) -> Managed:
    """``DecodeManagedFields``."""
    out = Managed()
    if entries is None:
        return out
    if not isinstance(entries, list):
        raise ManagedFieldsError("managedFields must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ManagedFieldsError(f"managed fields entry {i} must be an object")
        operation = entry.get("operation")
        if operation not in ("Apply", "Update"):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion") or ""
        if not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType") or ""
        if fields_type == "":
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {i}")
        if fields_type != "FieldsV1":
            raise ManagedFieldsError(
                f"invalid fieldsType {go_quote(str(fields_type))} in managed fields entry {i}"
            )
        try:
            fs = FieldSet.from_json(entry.get("fieldsV1") or {})
        except (ValueError, TypeError) as exc:
            raise ManagedFieldsError(f"error decoding set: {exc}") from exc
        key = Manager(
            str(entry.get("manager") or ""),
            operation,
            "" if operation == "Apply" else api_version,
            str(entry.get("subresource") or ""),
        )
        out.sets[key] = VersionedSet(fs, api_version, operation == "Apply")
        out.times[key] = entry.get("time")
    return out


def _epoch(moment: str | None) -> int:
    if not moment:
        return 0
    try:
        return int(datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def encode_managed_fields(managed: Managed) -> list[dict[str, Any]] | None:
    """``encodeManagedFields``: one entry per manager, sorted as kube sorts them."""
    if not managed.sets:
        return None
    entries: list[dict[str, Any]] = []
    for key, vs in managed.sets.items():
        entry: dict[str, Any] = {
            "manager": key.manager,
            "operation": "Apply" if vs.applied else "Update",
            "apiVersion": vs.api_version,
        }
        moment = managed.times.get(key)
        if moment:
            entry["time"] = moment
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = vs.fields.to_json()
        if key.subresource:
            entry["subresource"] = key.subresource
        entries.append(entry)
    entries.sort(
        key=lambda e: (
            e["operation"],
            _epoch(e.get("time")),
            e["manager"],
            e["apiVersion"],
            e.get("subresource", ""),
        )
    )
    return entries


def is_reset(entries: Any) -> bool:
    """``isResetManagedFields``: ``[]`` or ``[{}]`` asks kube to drop all managedFields."""
    if not isinstance(entries, list):
        return False
    return len(entries) == 0 or (len(entries) == 1 and entries[0] == {})


def manager_from_user_agent(user_agent: str) -> str:
    """``prefixFromUserAgent``: the User-Agent up to the first ``/``, printable, at most 128 bytes."""
    out: list[str] = []
    size = 0
    for ch in user_agent.split("/", maxsplit=1)[0]:
        if not _is_print(ch):
            continue
        width = len(ch.encode("utf-8"))
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
        size += width
    return "".join(out)


def _is_print(ch: str) -> bool:
    """Go's ``unicode.IsPrint``: letters, marks, numbers, punctuation, symbols and ASCII space."""
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def field_manager_errors(name: str | None) -> list[FieldError]:
    """``ValidateFieldManager`` (at most 128 bytes, printable characters only)."""
    if not name:
        return []
    out: list[FieldError] = []
    if len(name.encode("utf-8")) > FIELD_MANAGER_MAX_LENGTH:
        out.append(
            FieldError(
                "fieldManager",
                fe.TOO_LONG,
                name,
                f"may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
            )
        )
    offset = 0
    for ch in name:
        if not _is_print(ch):
            out.append(
                FieldError(
                    "fieldManager",
                    fe.INVALID,
                    name,
                    f"invalid character U+{ord(ch):04X} (at position {offset})",
                )
            )
        offset += len(ch.encode("utf-8"))
    return out


def conflict_error(conflicts: list[Conflict]) -> ApiError:
    """``NewConflictError``: 409 with one ``FieldManagerConflict`` cause per conflicting field."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {c.manager.describe()}",
            "field": path_string(c.path),
        }
        for c in conflicts
    ]
    if len(conflicts) == 1:
        c = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {c.manager.describe()}: {path_string(c.path)}"
    else:
        by_manager: dict[Manager, list[Path]] = {}
        for c in conflicts:
            by_manager.setdefault(c.manager, []).append(c.path)
        lines: list[str] = []
        for m in sorted(by_manager, key=lambda m: m.identifier()):
            lines.append(f"conflicts with {m.describe()}:")
            lines.extend(f"- {path_string(p)}" for p in by_manager[m])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, details={"causes": causes})


def record_update(
    ctx: TypedContext, live: Any, new: Any, managed: Managed, manager: Manager, now: str
) -> None:
    """One non-apply write, as the field manager's wrappers record it.

    ``Updater.Update`` with a stand-in manager, the StripMeta filter, then (when the write changed
    anything the manager now owns) a merge into the manager's entry with a fresh time
    (``managedFieldsUpdater``).
    """
    cmp = update(ctx, live, new, managed, None, True)
    current = cmp.modified.union(cmp.added).difference(cmp.removed)
    if ctx.ignored is not None:
        current = current.recursive_difference(ctx.ignored)
    current = current.difference(STRIPPED)
    if current.empty():
        return
    previous = managed.sets.get(manager)
    fields = current.union(previous.fields) if previous is not None else current
    managed.sets[manager] = VersionedSet(fields, ctx.version, False)
    managed.times[manager] = now


def cap_update_managers(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> None:
    """``capManagersManager``: merge the oldest Update entries into ``ancient-changes`` buckets."""
    updaters = [m for m, vs in managed.sets.items() if not vs.applied]
    if len(updaters) <= limit:
        return
    updaters.sort(key=lambda m: (_epoch(managed.times.get(m)), m.identifier()))
    first_of_version: dict[str, Manager] = {}
    length = len(updaters)
    for m in updaters:
        if length <= limit:
            break
        vs = managed.sets[m]
        moment = managed.times.get(m)
        bucket = Manager("ancient-changes", "Update", vs.api_version)
        if vs.api_version in first_of_version:
            if bucket not in managed.sets:
                first = first_of_version[vs.api_version]
                managed.sets[bucket] = managed.sets.pop(first)
            merged = vs.fields.union(managed.sets[bucket].fields)
            managed.sets[bucket] = VersionedSet(merged, vs.api_version, vs.applied)
            del managed.sets[m]
            length -= 1
            managed.times[bucket] = moment
        else:
            first_of_version[vs.api_version] = m


def decode_or_empty(entries: Any) -> Managed:
    """Stored managedFields as kube reads them back: entries it cannot decode count as none."""
    try:
        return decode_managed_fields(entries)
    except ManagedFieldsError:
        return Managed()

"""Server-side apply and ``metadata.managedFields``, as kube-apiserver's field manager does them.

kube-apiserver tracks, for every object, which *manager* (a ``fieldManager`` query parameter or the
client's User-Agent) owns which fields, and uses that to merge apply configurations. The work is
done by ``k8s.io/apimachinery/pkg/util/managedfields`` on top of sigs.k8s.io/structured-merge-diff
(SMD). The SMD port lives in :mod:`aiplane.sim.apiserver.smd`, the managedFields bookkeeping in
:mod:`aiplane.sim.apiserver.managedfields`; this module is the entry point the write paths call:

* :func:`apply` is ``FieldManager.Apply`` (version check, ``before-first-apply``, merge, prune of
  fields the manager stopped applying, conflicts, the last-applied annotation of ``kubectl``);
* :class:`FieldManager` is installed as ``Api.managed_fields_hook`` and records the ``Update``
  entries of every other write (create, update, patch), taking changed fields away from other
  managers, as ``FieldManager.UpdateNoErrors`` does.

Intended differences are listed in ``docs/sim.md`` ("Patch and server-side apply").
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.values import go_json, json_copy
from aiplane.sim.apiserver import errors, gojson
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.managedfields import (
    STRIPPED,
    ManagedFieldsError,
    cap_update_managers,
    conflict_error,
    decode_managed_fields,
    decode_or_empty,
    encode_managed_fields,
    is_reset,
    manager_from_user_agent,
    record_update,
)
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.smd import merge as smd
from aiplane.sim.apiserver.smd.fieldpath import FieldSet, Path, PathElement
from aiplane.sim.apiserver.smd.merge import ConflictsError, Managed, Manager, TypedContext, VersionedSet
from aiplane.sim.apiserver.smd.schema import Schema, validate, with_meta
from aiplane.sim.apiserver.smd.typed import compare, to_field_set
from aiplane.sim.apiserver.smd.value import ABSENT
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api

Obj = dict[str, Any]

LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"

#: The User-Agent of the request being served (set by the HTTP layer): kube names a write's manager
#: after it when the request has no ``fieldManager``.
REQUEST_USER_AGENT: contextvars.ContextVar[str] = contextvars.ContextVar(
    "aiplane_sim_request_user_agent", default=""
)


def kind_schema(rt: ResourceType) -> Schema | None:
    """The kind's structural schema, or ``None`` for a kind without one (its objects are untyped)."""
    try:
        return rt.schema()
    except ValueError:
        return None


def resource_schema(rt: ResourceType) -> Schema | None:
    """The schema SMD types objects of ``rt`` with: the kind's schema plus TypeMeta and ObjectMeta."""
    return with_meta(kind_schema(rt))


def typed_context(rt: ResourceType, subresource: str | None) -> TypedContext:
    """The typing of writes to ``rt`` (``subresource`` ``status`` or the main resource)."""
    ignored: FieldSet | None = None
    if subresource == "status":
        paths: list[Path] = [(PathElement.field("spec"),)]
        if not rt.is_custom:
            paths += [
                (PathElement.field("metadata"), PathElement.field("labels")),
                (PathElement.field("metadata"), PathElement.field("annotations")),
            ]
        ignored = FieldSet.of(*paths)
    elif "status" in rt.subresources:
        ignored = FieldSet.of((PathElement.field("status"),))
    return TypedContext(resource_schema(rt), rt.api_version, ignored, zero_structs=not rt.is_custom)


def _gvk_string(api_version: Any, kind: Any) -> str:
    """``schema.GroupVersionKind.String()`` of an object's apiVersion and kind."""
    av = api_version if isinstance(api_version, str) else ""
    kd = kind if isinstance(kind, str) else ""
    parts = av.split("/")
    if av == "":
        group, version = "", ""
    elif len(parts) == 1:
        group, version = "", parts[0]
    elif len(parts) == 2:
        group, version = parts
    else:
        group, version = "", ""
    return f"{group}/{version}, Kind={kd}"


def _object_gvknn(obj: Obj) -> str:
    return (
        f"{objects.namespace(obj)}/{objects.name(obj)}; {_gvk_string(obj.get('apiVersion'), obj.get('kind'))}"
    )


class UnknownReasonError(ApiError):
    """An error kube answers with a bare 500: a plain Go error, no ``reason`` in the Status."""

    def __init__(self, message: str) -> None:
        super().__init__(500, "", message)

    def status(self) -> dict[str, Any]:
        body = super().status()
        body.pop("reason", None)
        return body


def _without_managed(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (a shallow copy: callers must not mutate it)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@dataclass
class ApplyResult:
    """What :func:`apply` produced: the object to store and its managedFields."""

    obj: Obj
    managed_fields: list[dict[str, Any]] | None
    changed: bool


def apply(
    rt: ResourceType,
    live: Obj | None,
    config: Obj,
    manager: str,
    *,
    force: bool,
    subresource: str | None = None,
    now: str,
) -> ApplyResult:
    """``FieldManager.Apply`` with kube's default wrappers, for a live object (``None`` to create)."""
    expected = _gvk_string(rt.api_version, rt.kind)
    got = _gvk_string(config.get("apiVersion"), config.get("kind"))
    if got != expected:
        raise errors.bad_request(f"invalid object type: {got}")
    if isinstance(objects.meta(config).get("managedFields"), list):
        raise errors.bad_request("metadata.managedFields must be nil")
    ctx = typed_context(rt, subresource)
    problems = validate(config, ctx.schema)
    if problems:
        text = problems[0] if len(problems) == 1 else "errors:\n" + "\n".join("  " + p for p in problems)
        raise UnknownReasonError(f"failed to create typed patch object ({_object_gvknn(config)}): {text}")
    base: Obj = json_copy(_without_managed(live)) if live is not None else {}
    try:
        managed = decode_managed_fields(objects.meta(live).get("managedFields"))
    except ManagedFieldsError as exc:
        raise UnknownReasonError(f"failed to decode managed fields: {exc}") from exc
    key = Manager(manager, "Apply", "", subresource or "")
    try:
        result, out = _apply_once(ctx, base, config, managed.copy(), key, force, subresource, now)
    except ConflictsError as exc:
        allowed = _allowed_conflicts(ctx, base, manager) if manager == "kubectl" else None
        remaining = [c for c in exc.conflicts if allowed is None or not allowed.has(c.path)]
        if allowed is None or remaining:
            raise conflict_error(remaining or exc.conflicts) from exc
        result, out = _apply_once(ctx, base, config, managed.copy(), key, True, subresource, now)
    changed = result is not ABSENT
    obj = result if changed else json_copy(base)
    assert isinstance(obj, dict)
    if manager == "kubectl" and _has_last_applied(obj):
        obj.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = _last_applied(
            config
        )
    return ApplyResult(obj, encode_managed_fields(out), changed)


def _apply_once(
    ctx: TypedContext,
    live: Obj,
    config: Obj,
    managed: Managed,
    key: Manager,
    force: bool,
    subresource: str | None,
    now: str,
) -> tuple[Any, Managed]:
    if not managed.sets:
        # skipNonAppliedManager: fields set before the first apply belong to "before-first-apply".
        before = Manager("before-first-apply", "Update", ctx.version, subresource or "")
        record_update(ctx, {}, live, managed, before, now)
    result = smd.apply(ctx, live, config, managed, key, force)
    vs = managed.sets.get(key)
    if vs is not None:
        stripped = vs.fields.difference(STRIPPED)
        if stripped.empty():
            del managed.sets[key]
        else:
            managed.sets[key] = VersionedSet(stripped, vs.api_version, vs.applied)
    if result is not ABSENT:
        managed.times[key] = now
    return result, managed


def _allowed_conflicts(ctx: TypedContext, live: Obj, manager: str) -> FieldSet | None:
    """``lastAppliedManager``: fields ``kubectl`` may take over from client-side apply."""
    text = objects.annotations(live).get(LAST_APPLIED_ANNOTATION)
    if not text:
        return None
    try:
        last = gojson.loads(text.encode())
    except ValueError:  # also nested too deep for the embedded server: ignored, as unparseable
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != ctx.version:
        return None
    if validate(last, ctx.schema):
        return None
    fields = to_field_set(last, ctx.schema)
    cmp = compare(last, live, ctx.schema, zero_structs=ctx.zero_structs)
    return fields.difference(cmp.modified).difference(cmp.added).difference(cmp.removed)


def _has_last_applied(obj: Obj) -> bool:
    return bool(objects.annotations(obj).get(LAST_APPLIED_ANNOTATION))


def _last_applied(config: Obj) -> str:
    """``buildLastApplied``: the applied configuration without the annotation, as kubectl encodes it."""
    obj = json_copy(config)
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta["annotations"].pop(LAST_APPLIED_ANNOTATION, None)
    return go_json(obj) + "\n"


def update_managed_fields(
    rt: ResourceType,
    old: Obj | None,
    new: Obj,
    manager: str,
    *,
    subresource: str | None,
    now: str,
) -> None:
    """``FieldManager.UpdateNoErrors`` on a create (``old`` is ``None``) or update, in place on ``new``."""
    meta = new.setdefault("metadata", {})
    old_entries = objects.meta(old).get("managedFields")
    requested = meta.get("managedFields")
    if subresource:
        managed = decode_or_empty(old_entries)
    elif is_reset(requested):
        managed = Managed()
    else:
        managed = decode_or_empty(requested)
        if not managed.sets:
            managed = decode_or_empty(old_entries)
    meta.pop("managedFields", None)
    if not managed.sets and old is not None:
        return  # skipNonAppliedManager: objects without managedFields stay untracked until applied
    ctx = typed_context(rt, subresource)
    live = _without_managed(old) if old is not None else {}
    record_update(
        ctx,
        live,
        _without_managed(new),
        managed,
        Manager(manager or "unknown", "Update", ctx.version, subresource or ""),
        now,
    )
    cap_update_managers(managed)
    entries = encode_managed_fields(managed)
    if entries:
        meta["managedFields"] = entries


@dataclass
class ManagedOptions(WriteOptions):
    """Write options carrying what the PATCH handler knows: the subresource and, for apply, the result."""

    subresource: str | None = None
    #: Set for server-side apply: the managedFields :func:`apply` computed, stored as they are.
    applied_fields: list[dict[str, Any]] | None = None
    apply: bool = False

    @classmethod
    def of(cls, opts: WriteOptions, **extra: Any) -> ManagedOptions:
        """``opts`` (every :class:`WriteOptions` field) plus ``extra``."""
        return cls(**{f.name: getattr(opts, f.name) for f in dataclass_fields(WriteOptions)}, **extra)


class FieldManager:
    """``Api.managed_fields_hook``: records ``Update`` entries, stores what apply computed."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def __call__(
        self, rt: ResourceType, old: Obj | None, new: Obj, opts: WriteOptions, operation: str
    ) -> None:
        if isinstance(opts, ManagedOptions) and opts.apply:
            meta = new.setdefault("metadata", {})
            if opts.applied_fields:
                meta["managedFields"] = json_copy(opts.applied_fields)
            else:
                meta.pop("managedFields", None)
            return
        if operation == "Apply":
            return
        subresource = (
            opts.subresource if isinstance(opts, ManagedOptions) else _infer_subresource(rt, old, new)
        )
        manager = opts.field_manager or manager_from_user_agent(REQUEST_USER_AGENT.get())
        update_managed_fields(rt, old, new, manager, subresource=subresource, now=rfc3339(self.api.clock()))


def _infer_subresource(rt: ResourceType, old: Obj | None, new: Obj) -> str | None:
    """A write that changed only ``status`` of a kind with a status subresource came through /status.

    (The main resource cannot change status there, and /status keeps everything else as stored.)
    """
    if old is None or "status" not in rt.subresources:
        return None
    if old.get("status") == new.get("status"):
        return None
    rest_old = {k: v for k, v in old.items() if k not in ("status", "apiVersion")}
    rest_new = {k: v for k, v in new.items() if k not in ("status", "apiVersion")}
    return "status" if rest_old == rest_new else None


def install(api: Api) -> None:
    """Make ``api`` maintain managedFields on every create and update."""
    api.managed_fields_hook = FieldManager(api)

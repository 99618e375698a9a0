"""PATCH: the handler that picks a patch mechanism and sends its result through an update.

This is kube-apiserver's ``handlers/patch.go`` on plain dicts: the content type picks the mechanism
(``application/strategic-merge-patch+json`` only for built-in kinds, as custom resources have no Go
struct to carry patch strategies), the patch is applied to the object as currently stored, and the
result goes through :meth:`Api.update` — admission, validation, conflicts, managedFields — as any
update does. Errors carry the codes and messages kube answers with, which depend on the mechanism:

* an unknown content type is 415 with the list of accepted types;
* bad ``PatchOptions`` (``fieldManager`` missing on apply, ``force`` on a non-apply patch) are 422;
* a body that is not JSON (or, for apply, YAML) is 400 before anything is looked up (1.37's
  ``validateAndTranscodePatch``); one of the wrong shape is 400 in Go's ``encoding/json`` wording
  (from :mod:`aiplane.sim.apiserver.gojson`); a JSON patch that does not apply is kube's generic 422;
* strategic merge patch errors keep apimachinery's ``strategicpatch`` messages and codes;
* apply errors come from :mod:`aiplane.sim.apiserver.apply`.

The mechanisms themselves live in :mod:`~aiplane.sim.apiserver.merge_patch`,
:mod:`~aiplane.sim.apiserver.json_patch` and :mod:`~aiplane.sim.apiserver.strategic`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

import yaml

from aiplane.apimachinery import boundedyaml
from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_json, json_copy
from aiplane.schema.prune import prune_with_field_paths
from aiplane.sim.apiserver import apply as ssa
from aiplane.sim.apiserver import errors, gojson
from aiplane.sim.apiserver.gojson import MAP_TARGET, json_kind, undecodable_patch
from aiplane.sim.apiserver.goyaml import go_yaml_error
from aiplane.sim.apiserver.json_patch import apply_json_patch
from aiplane.sim.apiserver.managedfields import field_manager_errors
from aiplane.sim.apiserver.merge_patch import apply_merge_patch
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Result, WriteOptions
from aiplane.sim.apiserver.strategic import apply_strategic_patch
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

Obj = dict[str, Any]


def supported_patch_types(rt: ResourceType) -> list[str]:
    """The patch content types kube accepts for ``rt`` (CBOR apply is behind an alpha gate)."""
    if rt.is_custom:
        return [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    return [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]


def patch(
    api: Api,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    content_type: str,
    raw: bytes,
    opts: WriteOptions,
    *,
    subresource: str | None = None,
) -> Result:
    """PATCH ``name``: apply ``raw`` (of ``content_type``) to the stored object and update it."""
    content_type = (content_type or "").split(";", 1)[0].strip()
    accepted = supported_patch_types(rt)
    if content_type not in accepted:
        raise errors.unsupported_media_type(", ".join(accepted))
    _validate_patch_options(opts, content_type)
    _validate_and_transcode(raw, content_type)
    if content_type == APPLY_PATCH:
        return _apply(api, rt, namespace, name, raw, opts, subresource)
    current = api.find(rt, namespace, name)
    if current is None:
        raise errors.not_found(rt.plural, rt.group, name)
    current = json_copy(current)
    if content_type == STRATEGIC_MERGE_PATCH:
        patched, strict_value = apply_strategic_patch(rt, current, raw)
    elif content_type == MERGE_PATCH:
        patched = apply_merge_patch(current, raw, opts.field_validation)
        strict_value = None
    else:
        patched = apply_json_patch(current, raw, opts.field_validation)
        strict_value = None
    _strict_unknown_fields(rt, patched, opts, strict_value)
    options = ssa.ManagedOptions.of(opts, subresource=subresource)
    return api.update(
        rt, namespace, name, patched, options, subresource=subresource, operation="Update", owned=True
    )


def _validate_patch_options(opts: WriteOptions, content_type: str) -> None:
    """``ValidatePatchOptions``."""
    errs: list[FieldError] = []
    if content_type != APPLY_PATCH:
        if opts.force:
            errs.append(FieldError("force", fe.FORBIDDEN, None, "may not be specified for non-apply patch"))
    elif not opts.field_manager:
        errs.append(FieldError("fieldManager", fe.REQUIRED, None, "is required for apply patch"))
    errs += field_manager_errors(opts.field_manager)
    if errs:
        raise errors.invalid("PatchOptions", "meta.k8s.io", "", errs)


def _validate_and_transcode(raw: bytes, content_type: str) -> None:
    """kube 1.37's ``validateAndTranscodePatch``, before the object is looked up (the audit log records
    the patch as JSON): a JSON, merge or strategic patch must be valid JSON, else 400 "invalid JSON
    patch"; an apply body that does not start as a JSON object must convert from YAML, else 400
    "error encoding patch: <go-yaml's words>". What decodes but is the wrong shape fails later."""
    if content_type != APPLY_PATCH:
        try:
            gojson.loads(raw)
        except ValueError as exc:
            raise errors.bad_request("invalid JSON patch") from exc
        return
    if raw.lstrip()[:1] == b"{":  # apimachinery's ToJSON takes a JSON buffer as it is
        return
    try:
        boundedyaml.check_depth(boundedyaml.load(raw.decode("utf-8", "replace"), _BoundedApplyLoader))
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"error encoding patch: {go_yaml_error(exc)}") from exc


def _strict_unknown_fields(rt: ResourceType, patched: Obj, opts: WriteOptions, value: str | None) -> None:
    """``fieldValidation=Strict`` on a patch: unknown fields are a 422 on the field ``patch``.

    (With ``Warn`` the update reports them as warnings, as kube does for patches too.)
    """
    if opts.field_validation != "Strict":
        return
    schema = ssa.kind_schema(rt)
    if schema is None:
        return
    unknown = [kube for kube, _ in prune_with_field_paths(json_copy(patched), schema)]
    if not unknown:
        return
    detail = "strict decoding error: " + ", ".join(f'unknown field "{path}"' for path in unknown)
    shown = value if value is not None else go_json(patched)
    raise undecodable_patch(shown, detail)


# --- server-side apply: the request body and the create-or-update it turns into -------------------


class _ApplyLoader(yaml.SafeLoader):
    """YAML as sigs.k8s.io/yaml reads an apply body: timestamps stay strings."""


_ApplyLoader.yaml_implicit_resolvers = {
    ch: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
#: ... and bounded as go-yaml bounds it: a "billion laughs" of aliases fails fast, as does deep nesting.
_BoundedApplyLoader: Final = boundedyaml.bounded(_ApplyLoader)


def _stringify_keys(value: Any) -> Any:
    """YAMLToJSON: every map key becomes a string (``true`` → ``"true"``, ``1`` → ``"1"``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, bool):
                key = "true" if k else "false"
            elif k is None:
                key = "null"
            else:
                key = str(k)
            out[key] = _stringify_keys(v)
        return out
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


def decode_apply_body(raw: bytes) -> Obj:
    """``yaml.Unmarshal`` of an apply body into ``map[string]interface{}``, with kube's errors."""
    if raw.lstrip()[:1] == b"{":
        # kubectl sends apply bodies as JSON, which YAML reads to the same map; the C decoder is ~50x
        # faster than PyYAML (a Pod with 10,000 env vars: seconds of a stalled server otherwise).
        # Anything it refuses goes through the YAML path, for go-yaml's words.
        with contextlib.suppress(ValueError):
            fast = gojson.loads(raw)
            if isinstance(fast, dict):
                return fast
    try:
        doc = boundedyaml.load(raw.decode("utf-8", "replace"), _BoundedApplyLoader)
        boundedyaml.check_depth(doc)
    except yaml.YAMLError as exc:
        raise errors.bad_request(
            f"error decoding patch: error converting YAML to JSON: {go_yaml_error(exc)}"
        ) from exc
    doc = _stringify_keys(doc)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise errors.bad_request(
            "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
            f"{json_kind(doc)} into Go value of type {MAP_TARGET}"
        )
    return doc


_SYSTEM_META: Final = (
    "creationTimestamp",
    "uid",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def _apply(
    api: Api,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    raw: bytes,
    opts: WriteOptions,
    subresource: str | None,
) -> Result:
    current = api.find(rt, namespace, name)
    if current is None and subresource:
        raise errors.not_found(rt.plural, rt.group, name)
    config = decode_apply_body(raw)
    outcome = ssa.apply(
        rt,
        current,
        config,
        opts.field_manager or "",
        force=opts.force,
        subresource=subresource,
        now=rfc3339(api.clock()),
    )
    obj = outcome.obj
    options = ssa.ManagedOptions.of(
        opts, subresource=subresource, applied_fields=outcome.managed_fields, apply=True
    )
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if current is None:
        if meta.get("uid"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"uid mismatch: the provided object specified uid {meta['uid']}, and no existing object was found",
            )
        for key in _SYSTEM_META:
            meta.pop(key, None)
    _check_namespace(rt, namespace, meta)
    obj_name = meta.get("name")
    if not obj_name:
        raise errors.bad_request(
            f"the name of the object ({name} based on URL) was undeterminable: name must be provided"
        )
    if obj_name != name:
        raise errors.bad_request(
            f"the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )
    if current is None:
        return api.create(rt, namespace, obj, options)
    return api.update(rt, namespace, name, obj, options, subresource=subresource, operation="Apply")


def _check_namespace(rt: ResourceType, namespace: str | None, meta: Obj) -> None:
    """``EnsureObjectNamespaceMatchesRequestNamespace``."""
    if not rt.namespaced:
        meta.pop("namespace", None)
        return
    body_ns = meta.get("namespace")
    if not body_ns:
        if namespace:
            meta["namespace"] = namespace
        return
    if namespace and body_ns != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )

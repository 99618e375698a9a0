"""The API verbs, as kube-apiserver's registry implements them, on plain dicts.

The request dispatch (``dispatch.py``) and in-process agents (GC, kubelet-lite, the simulated GPU
operator) call the same methods, so both see the same admission, conflicts and events. Every write goes through one
pipeline: type and object meta checks, unknown-field handling (``fieldValidation``), defaulting and
validation against the kind's structural schema (CEL included, for CRDs), status-subresource
semantics, generation, then a single commit to the store.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import GoLiteral, json_copy
from aiplane.schema.prune import prune_with_field_paths
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.defaults import admit_claim_class, apply_defaults
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.store import Event, Store
from aiplane.sim.apiserver.validation import (
    check_pod_update,
    check_type_meta,
    default_pod_requests,
    validate_object,
)
from aiplane.sim.apiserver.write_defaults import crd_status, normalize, qos_class, rfc3339, utcnow

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

FieldValidation = str  # "Strict" | "Warn" | "Ignore"


def upsert_condition(conditions: Iterable[Mapping[str, Any]], wanted: dict[str, Any]) -> list[dict[str, Any]]:
    """A copy of ``conditions`` with ``wanted`` in place of the first condition of its type (appended if none), as
    kube's ``UpdatePodCondition``/``SetNodeCondition`` do: when the status does not change, the old
    ``lastTransitionTime`` is kept (``wanted``'s when the old one is missing)."""
    out = [dict(c) for c in conditions]
    for i, cond in enumerate(out):
        if cond.get("type") == wanted["type"]:
            if cond.get("status") == wanted["status"]:
                wanted = {
                    **wanted,
                    "lastTransitionTime": cond.get("lastTransitionTime") or wanted["lastTransitionTime"],
                }
            out[i] = wanted
            return out
    out.append(wanted)
    return out


@dataclass
class WriteOptions:
    """Query parameters every write accepts."""

    dry_run: bool = False
    field_manager: str | None = None
    field_validation: FieldValidation = "Warn"
    force: bool = False


@dataclass
class DeleteOptions:
    propagation_policy: str | None = None  # Background | Foreground | Orphan
    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None  # the deprecated DeleteOptions.orphanDependents, as sent


def delete_options(
    body: dict[str, Any], query: Any, *, dry_run_values: list[str] | None = None
) -> DeleteOptions:
    """DeleteOptions as kube-apiserver reads them: from the body if one was sent, else from the query.

    ``query`` is any mapping of query parameters (first values); ``dry_run_values`` the repeated
    ``dryRun`` values. Invalid options are kube's 422 on ``DeleteOptions.meta.k8s.io``.
    """
    if not body:
        body = {
            key: query[key]
            for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents")
            if key in query
        }
        if dry_run_values:
            body["dryRun"] = list(dry_run_values)
        if "orphanDependents" in body:
            body["orphanDependents"] = body["orphanDependents"] in ("true", "1")
    pre = body.get("preconditions") or {}
    policy = body.get("propagationPolicy")
    invalid: list[FieldError] = []
    if policy not in (None, "Background", "Foreground", "Orphan"):
        invalid.append(
            FieldError(
                "propagationPolicy",
                fe.NOT_SUPPORTED,
                policy,
                'supported values: "Foreground", "Background", "Orphan", "nil"',
                bad_value=[policy],
            )
        )
    if body.get("orphanDependents") is not None and policy is not None:
        invalid.append(
            FieldError(
                "orphanDependents",
                fe.INVALID,
                body["orphanDependents"],
                "orphanDependents and deletionPropagation cannot be both set",
            )
        )
    if invalid:
        rendered = ", ".join(e.render_kube() for e in invalid)
        raise errors.ApiError(
            422,
            "Invalid",
            'DeleteOptions.meta.k8s.io "" is invalid: '
            + (rendered if len(invalid) == 1 else f"[{rendered}]"),
            details={"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [e.cause() for e in invalid]},
        )
    orphan = body.get("orphanDependents")
    if orphan is True:
        policy = "Orphan"
    grace = body.get("gracePeriodSeconds")
    return DeleteOptions(
        propagation_policy=policy,
        grace_period_seconds=int(grace) if grace is not None else None,
        precondition_uid=pre.get("uid"),
        precondition_rv=pre.get("resourceVersion"),
        dry_run=bool(body.get("dryRun") or []),
        orphan_dependents=orphan if isinstance(orphan, bool) else None,
    )


@dataclass
class Result:
    """A write's outcome: the object as stored (or as it would be, for dry runs) and warnings."""

    obj: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    created: bool = False


#: Called with (api, rt, stored object, options) when an object gets a deletionTimestamp or is removed;
#: the deletion/GC module registers itself here.
DeleteHook = Callable[["Api", ResourceType, dict[str, Any], DeleteOptions], None]
#: Called with (rt, old, new, options, operation) to maintain managedFields; the apply module registers it.
ManagedFieldsHook = Callable[[ResourceType, dict[str, Any] | None, dict[str, Any], WriteOptions, str], None]
#: A mutating webhook stand-in (rt, new, stored or None): on creates and updates, before validation.
MutatingHook = Callable[[ResourceType, dict[str, Any], dict[str, Any] | None], None]


class Api:
    """The verbs on one store. Raises :class:`ApiError` exactly where kube-apiserver answers an error."""

    def __init__(self, store: Store, registry: Registry, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.managed_fields_hook: ManagedFieldsHook | None = None
        self.mutating_hooks: list[MutatingHook] = []
        self.deletion: Any = None  # the deletion/GC controller (gc.py) installs itself here
        self._service_ips = 0

    # --- lookup -----------------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.for_kind(api_version, kind)
        if rt is None:
            raise errors.ApiError(
                404, "NotFound", f"the server could not find the requested resource ({kind} {api_version})"
            )
        return rt

    def served(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as served at ``rt``'s version (objects are stored at the storage version)."""
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}

    def _ns(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    # --- reads ------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.storage_key, self._ns(rt, namespace), name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return self.served(rt, obj)

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        obj = self.store.get(rt.storage_key, self._ns(rt, namespace), name)
        return None if obj is None else self.served(rt, obj)

    def items(self, rt: ResourceType, namespace: str | None = None) -> list[dict[str, Any]]:
        ns = namespace if rt.namespaced else None
        return [self.served(rt, o) for o in self.store.items(rt.storage_key, ns or None)]

    # --- create -----------------------------------------------------------------------------------

    def create(
        self, rt: ResourceType, namespace: str | None, body: dict[str, Any], opts: WriteOptions | None = None
    ) -> Result:
        opts = opts or WriteOptions()
        obj = json_copy(body)
        check_type_meta(rt, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        ns = self._resolve_namespace(rt, namespace, meta)
        name = meta.get("name")
        if not name:
            generate = meta.get("generateName")
            if not generate:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [FieldError("metadata.name", fe.REQUIRED, None, "name or generateName is required")],
                )
            name = self._generated_name(rt, ns, generate)
            meta["name"] = name
        if ns:
            self._check_namespace_open(rt, ns, name)
        if rt.crd_name is not None:
            crd = self.store.get("apiextensions.k8s.io/customresourcedefinitions", "", rt.crd_name)
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                raise errors.method_not_allowed(
                    "create not allowed while custom resource definition is terminating"
                )
        warnings = self._prune(rt, obj, opts)
        self._prepare_create(rt, obj)
        for hook in self.mutating_hooks:
            hook(rt, obj, None)
        normalize(rt, obj)
        now = rfc3339(self.clock())
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if ns:
            meta["namespace"] = ns
        validate_object(rt, obj, None)
        if self.store.get(rt.storage_key, ns, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        if self.managed_fields_hook is not None:
            self.managed_fields_hook(rt, None, obj, opts, "Update")
        obj["apiVersion"] = self._storage_api_version(rt)
        if opts.dry_run:
            return Result(self.served(rt, obj), warnings, created=True)
        event = self.store.put(rt.storage_key, obj)
        self._after_commit(rt, event)
        return Result(self.served(rt, event.obj), warnings, created=True)

    # --- update -----------------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        opts: WriteOptions | None = None,
        *,
        subresource: str | None = None,
        operation: str = "Update",
        owned: bool = False,
    ) -> Result:
        """PUT (also the final step of PATCH and apply, with ``operation`` set accordingly).

        ``owned``: ``body`` is the caller's own copy, shared with nothing, which the store may keep
        (PATCH builds one from the stored object: copying it again doubled the copying of a write).
        """
        opts = opts or WriteOptions()
        ns = self._ns(rt, namespace)
        current = self.store.get(rt.storage_key, ns, name)
        if current is None:
            raise errors.not_found(rt.plural, rt.group, name)
        obj = body if owned else json_copy(body)
        check_type_meta(rt, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        body_ns = meta.get("namespace")
        if rt.namespaced and body_ns not in (None, "", ns):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        rv = meta.get("resourceVersion")
        if rv:
            if rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.MODIFIED)
        elif rt.is_custom and operation == "Update" and subresource is None:
            raise errors.invalid(
                rt.kind,
                rt.group,
                name,
                [
                    FieldError(
                        "metadata.resourceVersion",
                        fe.INVALID,
                        0,
                        "must be specified for an update",
                        bad_value=GoLiteral("0x0"),
                    )
                ],
            )
        warnings = self._prune(rt, obj, opts)
        if subresource is None:
            apply_defaults(rt.group, rt.kind, obj)  # as decoding the body does
        obj = self._merge_for_update(rt, current, obj, subresource)
        for hook in self.mutating_hooks if subresource is None else ():  # they register for the resource only
            hook(rt, obj, current)
        normalize(rt, obj)
        validate_object(rt, obj, current)
        if self.managed_fields_hook is not None:
            self.managed_fields_hook(rt, current, obj, opts, operation)
        obj["apiVersion"] = self._storage_api_version(rt)
        if obj == current:
            # A no-op write: kube-apiserver does not write etcd, the resourceVersion stays, no event.
            return Result(self.served(rt, current), warnings)
        if opts.dry_run:
            return Result(self.served(rt, obj), warnings)
        cur_meta = current["metadata"]
        if (
            self.deletion.delete_during_update(rt, current, obj)  # also pending grace periods, namespaces
            if self.deletion is not None
            else cur_meta.get("deletionTimestamp") and not obj["metadata"].get("finalizers")
        ):
            # The last finalizer is gone from an object being deleted: it goes away now.
            event = self.store.remove(rt.storage_key, ns, name)
            assert event is not None
            self._after_commit(rt, event)
            return Result(self.served(rt, event.obj), warnings)
        event = self.store.put(rt.storage_key, obj)
        self._after_commit(rt, event)
        return Result(self.served(rt, event.obj), warnings)

    def _merge_for_update(
        self, rt: ResourceType, current: dict[str, Any], new: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        """Apply kube's update rules: system metadata kept, status vs main resource, generation."""
        cur_meta = current["metadata"]
        meta = new["metadata"]
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        if "managedFields" not in meta and "managedFields" in cur_meta:
            meta["managedFields"] = cur_meta["managedFields"]
        meta["resourceVersion"] = cur_meta["resourceVersion"]
        if subresource == "status":
            # Only .status changes through /status; everything else stays as stored.
            merged = {k: v for k, v in current.items() if k != "status"}
            merged["metadata"] = {**cur_meta}
            if "status" in new:
                merged["status"] = new["status"]
            return merged
        if "status" in rt.subresources:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        if (rt.group, rt.kind) == ("", "Namespace") and subresource != "finalize":
            # kube's namespace strategy: spec.finalizers only change through the /finalize subresource
            spec, cur_spec = dict(new.get("spec") or {}), current.get("spec") or {}
            spec.pop("finalizers", None)
            new["spec"] = {
                **spec,
                **({"finalizers": cur_spec["finalizers"]} if "finalizers" in cur_spec else {}),
            }
        if cur_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
            if added:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    meta["name"],
                    [
                        FieldError(
                            "metadata.finalizers",
                            fe.FORBIDDEN,
                            None,
                            f"no new finalizers can be added if the object is being deleted, found new finalizers {sorted(added)!r}".replace(
                                "'", '"'
                            ),
                        )
                    ],
                )
        if rt.group == "" and rt.kind == "Pod":
            check_pod_update(current, new)
        if rt.has_generation and self._spec_changed(rt, current, new):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        return new

    @staticmethod
    def _spec_changed(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
        skip = {"metadata", "status"} if "status" in rt.subresources else {"metadata"}
        keys = (set(old) | set(new)) - skip - {"apiVersion", "kind"}
        return any(old.get(k) != new.get(k) for k in keys)

    # --- delete -----------------------------------------------------------------------------------

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, options: DeleteOptions | None = None
    ) -> dict[str, Any]:
        """DELETE: the object goes at once, or gets a deletionTimestamp while finalizers remain."""
        options = options or DeleteOptions()
        ns = self._ns(rt, namespace)
        current = self.store.get(rt.storage_key, ns, name)
        if current is None:
            raise errors.not_found(rt.plural, rt.group, name)
        meta = current["metadata"]
        if options.precondition_uid and options.precondition_uid != meta.get("uid"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in object meta: {meta.get('uid')}",
            )
        if options.precondition_rv and options.precondition_rv != meta.get("resourceVersion"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {options.precondition_rv}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        if self.deletion is not None:
            return self.served(rt, self.deletion.delete(rt, current, options))
        if options.dry_run:
            return self.served(rt, current)
        if meta.get("finalizers"):
            return self.served(rt, self.mark_deleted(rt, current))
        event = self.store.remove(rt.storage_key, ns, name)
        assert event is not None
        self._after_commit(rt, event)
        return self.served(rt, event.obj)

    def mark_deleted(
        self,
        rt: ResourceType,
        current: dict[str, Any],
        *,
        add_finalizers: list[str] | None = None,
        grace: int = 0,
    ) -> dict[str, Any]:
        """Set deletionTimestamp (idempotently), optionally adding finalizers; returns the stored object."""
        meta = dict(current["metadata"])
        changed = False
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = rfc3339(self.clock())
            meta["deletionGracePeriodSeconds"] = grace
            changed = True
        finalizers = list(meta.get("finalizers") or [])
        for item in add_finalizers or []:
            if item not in finalizers:
                finalizers.append(item)
                changed = True
        if finalizers:
            meta["finalizers"] = finalizers
        if not changed:
            return current
        if rt.has_generation:
            meta["generation"] = int(meta.get("generation", 1)) + 1
        event = self.store.put(rt.storage_key, {**current, "metadata": meta})
        self._after_commit(rt, event)
        return event.obj

    # --- pods/binding ----------------------------------------------------------------------------

    def bind(
        self, namespace: str, name: str, body: dict[str, Any], opts: WriteOptions | None = None
    ) -> dict[str, Any]:
        """POST pods/{name}/binding, as kube-apiserver's ``BindingREST.Create`` does it.

        Sets ``spec.nodeName`` to ``target.name``, copies the Binding's annotations onto the pod and
        sets the ``PodScheduled=True`` condition, in one write that (like kube's ``GuaranteedUpdate``
        on storage) bypasses the pod strategy: no generation bump, no managedFields entry. Returns
        the 201 ``Status``. 404 for a missing pod; 409 (``pods/binding``) for a pod already bound,
        being deleted or scheduling-gated; 409 (``pods``) for a failed uid/resourceVersion
        precondition (the Binding's ``metadata.uid``/``resourceVersion``). The target node is not
        checked (kube does not either).
        """
        opts = opts or WriteOptions()
        rt = self.resource("v1", "Pod")
        kind = body.get("kind")
        if kind not in (None, "Binding"):
            raise errors.bad_request(f"not a Binding object: {kind}")
        meta = body.get("metadata") or {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if meta.get("name") != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        target = body.get("target") or {}
        invalid: list[FieldError] = []
        if target.get("kind") not in (None, "", "Node"):
            invalid.append(
                FieldError(
                    "target.kind", fe.NOT_SUPPORTED, target.get("kind"), 'supported values: "Node", "<empty>"'
                )
            )
        if not target.get("name"):
            invalid.append(FieldError("target.name", fe.REQUIRED, None, ""))
        if invalid:
            # ValidatePodBinding's aggregate is not a Status error: kube-apiserver answers 500 without a reason.
            rendered = [e.render_kube() for e in invalid]
            raise _ReasonlessError(500, "", rendered[0] if len(rendered) == 1 else f"[{', '.join(rendered)}]")
        pod = self.store.get(rt.storage_key, namespace, name)
        if pod is None:
            raise errors.not_found(rt.plural, rt.group, name)
        pod_meta = pod["metadata"]
        spec = pod.get("spec") or {}
        node = str(target["name"])
        if meta.get("uid") and meta["uid"] != pod_meta.get("uid"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {pod_meta.get('uid')}",
            )
        if meta.get("resourceVersion") and meta["resourceVersion"] != pod_meta.get("resourceVersion"):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {meta['resourceVersion']}, "
                f"ResourceVersion in object meta: {pod_meta.get('resourceVersion')}",
            )
        if pod_meta.get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        if spec.get("nodeName"):
            raise errors.conflict(
                "pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if spec.get("schedulingGates"):
            raise errors.conflict("pods/binding", "", name, f"pod {name} has non-empty .spec.schedulingGates")
        new_meta = dict(pod_meta)
        if meta.get("annotations"):
            new_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **meta["annotations"]}
        status = dict(pod.get("status") or {})
        now = rfc3339(self.clock())
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        status["conditions"] = upsert_condition(status.get("conditions") or [], scheduled)
        new = {**pod, "metadata": new_meta, "spec": {**spec, "nodeName": node}, "status": status}
        if not opts.dry_run:
            event = self.store.put(rt.storage_key, new)
            self._after_commit(rt, event)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Event | None:
        """Remove an object from storage right away (the end of a deletion)."""
        event = self.store.remove(rt.storage_key, namespace, name)
        if event is not None:
            self._after_commit(rt, event)
        return event

    # --- pipeline pieces --------------------------------------------------------------------------

    def _storage_api_version(self, rt: ResourceType) -> str:
        return f"{rt.group}/{rt.storage_version}" if rt.group else rt.storage_version

    def _resolve_namespace(self, rt: ResourceType, namespace: str | None, meta: dict[str, Any]) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        ns = namespace or body_ns
        if not ns:
            raise errors.bad_request("an empty namespace may not be set during creation")
        return str(ns)

    def _check_namespace_open(self, rt: ResourceType, ns: str, name: str) -> None:
        namespace = self.store.get("/namespaces", "", ns)
        if namespace is None:
            raise errors.not_found("namespaces", "", ns)
        if namespace["metadata"].get("deletionTimestamp"):
            # kube's NamespaceLifecycle admission: a 403 whose cause tells it from an RBAC refusal.
            error = errors.forbidden(
                rt.plural,
                rt.group,
                name,
                f"unable to create new content in namespace {ns} because it is being terminated",
            )
            error.details = error.details or {}
            error.details.setdefault("causes", []).append(
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {ns} is being terminated",
                    "field": "metadata.namespace",
                }
            )
            raise error

    def _generated_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        prefix = prefix[: 63 - 5] if len(prefix) > 58 else prefix
        for _ in range(8):
            name = prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            if self.store.get(rt.storage_key, ns, name) is None:
                return name
        raise errors.ApiError(
            409,
            "AlreadyExists",
            f'{errors.qualified(rt.plural, rt.group)} "{prefix}" already exists, the server was not able to generate a unique name for the object',
        )

    def _prune(self, rt: ResourceType, obj: dict[str, Any], opts: WriteOptions) -> list[str]:
        """Drop unknown fields; Strict rejects them, Warn reports them as warnings (kube's fieldValidation)."""
        schema = rt.schema()
        if schema is None:
            return []
        unknown = [kube for kube, _ in prune_with_field_paths(obj, schema)]
        if not unknown:
            return []
        if opts.field_validation == "Strict":
            detail = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise errors.bad_request(f"strict decoding error: {detail}")
        if opts.field_validation == "Ignore":
            return []
        return [f'unknown field "{path}"' for path in unknown]

    def _prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """What each kind's strategy does to a new object (status reset, defaults)."""
        key = (rt.group, rt.kind)
        apply_defaults(rt.group, rt.kind, obj)
        if key == ("", "Pod"):
            spec = obj.setdefault("spec", {})
            default_pod_requests(spec)
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("serviceAccountName", "default")
            spec.setdefault("enableServiceLinks", True)
        elif key == ("", "Namespace"):
            obj["status"] = {"phase": "Active"}
            spec = obj.setdefault("spec", {})
            spec["finalizers"] = [
                *[f for f in spec.get("finalizers") or [] if f != "kubernetes"],
                "kubernetes",
            ]
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif key == ("", "Node"):
            pass  # the kubelet registers its node with status; kube keeps it
        elif key == ("", "Secret"):
            obj.setdefault("type", "Opaque")
        elif key == ("", "Service"):
            self._default_service(obj)
            obj["status"] = {"loadBalancer": {}}
        elif key == ("", "PersistentVolumeClaim"):
            sc_rt = self.registry.for_kind("storage.k8s.io/v1", "StorageClass")
            admit_claim_class(obj, lambda: self.store.items(sc_rt.storage_key) if sc_rt else [])
            obj.pop("status", None)
        elif key == ("", "PersistentVolume"):
            obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": rfc3339(self.clock())}
        elif key == ("apiextensions.k8s.io", "CustomResourceDefinition") or "status" in rt.subresources:
            obj.pop("status", None)

    def _default_service(self, obj: dict[str, Any]) -> None:
        """What the Service strategy and IP allocator do: type, cluster IP, target ports, policies."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                self._service_ips += 1
                n = self._service_ips
                spec["clusterIP"] = f"10.96.{(n // 254) % 256}.{n % 254 + 1}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))

    def _after_commit(self, rt: ResourceType, event: Event) -> None:
        """Side effects of a committed write that kube performs in its own controllers."""
        if (rt.group, rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            self._crd_changed(event)

    def _crd_changed(self, event: Event) -> None:
        crd = event.obj
        name = crd["metadata"]["name"]
        if event.type == "DELETED":
            for rt in self.registry.remove_crd(name):
                self.store.drop_key(rt.storage_key)
            return
        if crd["metadata"].get("deletionTimestamp"):
            return
        self.registry.add_crd(crd)
        status = crd_status(crd)
        if crd.get("status") != status:
            # kube's establishing controller: accepted names, stored versions, Established.
            self.store.put(event.key, {**crd, "status": status, "metadata": dict(crd["metadata"])})


class _ReasonlessError(errors.ApiError):
    """An error kube-apiserver answers with a Status without ``reason`` (a non-Status error)."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        body.pop("reason", None)
        return body

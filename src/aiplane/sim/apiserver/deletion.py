"""Deletion on the registry's side: how a DELETE turns propagation policies into finalizers, and what it answers.

``k8s.io/apiserver/pkg/registry/generic/registry/store.go`` (``shouldOrphanDependents``,
``shouldDeleteDependents``, ``deletionFinalizersForGarbageCollection``) and the DELETE handler's choice
of status code and body. The controllers that act on these finalizers live in ``gc.py`` and the modules
it composes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import DeleteOptions

Obj = dict[str, Any]

FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
NAMESPACE_FINALIZER = "kubernetes"  # the namespace controller's spec.finalizers token
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
#: The field manager (user-agent prefix) of kube-controller-manager's writes.
CONTROLLER_MANAGER = "kube-controller-manager"
#: kube-apiserver's NamespaceLifecycle admission refuses to delete these.
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})

NAMESPACES = "/namespaces"
PODS = "/pods"
PDBS = "policy/poddisruptionbudgets"
CRDS = "apiextensions.k8s.io/customresourcedefinitions"

#: Registries with ``ReturnDeletedObject: true``: DELETE answers with the object; the others answer a
#: ``Status`` once the object is gone (with the object while it lingers).
RETURNS_DELETED_OBJECT = frozenset(
    {
        ("", "Pod"),
        ("", "Service"),
        ("", "Namespace"),
        ("", "Node"),
        ("", "ServiceAccount"),
        ("", "PersistentVolumeClaim"),
    }
)
#: Kinds whose strategy's DefaultGarbageCollectionPolicy is OrphanDependents, by (group, version, kind):
#: batch/v1 Job keeps its pods unless told otherwise, for backwards compatibility (kubectl sends
#: Background explicitly). Every other kind we serve defaults to background deletion of dependents.
ORPHAN_BY_DEFAULT = frozenset({("batch", "v1", "Job")})


class PodTerminator(Protocol):
    """What a kubelet-lite implements to take over graceful termination of the pods it runs."""

    def claims(self, pod: Obj) -> bool:
        """Whether deleting ``pod`` should wait for its grace period (``True``: the terminator will
        delete it with grace 0 when its containers are gone)."""
        ...


def finalizers_of(obj: Obj) -> list[str]:
    """A private copy of the object's finalizers."""
    return list(objects.meta(obj).get("finalizers") or [])


def deleting_dependents(obj: Obj) -> bool:
    """Being deleted in the foreground: its blocking dependents go first."""
    return bool(objects.meta(obj).get("deletionTimestamp")) and FOREGROUND in finalizers_of(obj)


def ok_status(code: int | None = None) -> Obj:
    status: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if code is not None:
        status["code"] = code
    return status


class StatusError(ApiError):
    """An error whose Status has no ``reason`` (kube-apiserver omits an empty one)."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        if not body.get("reason"):
            body.pop("reason", None)
        return body


def orphan_dependents_option(options: DeleteOptions) -> bool | None:
    value = options.orphan_dependents
    return value if isinstance(value, bool) else None


def should_orphan(rt: ResourceType, finalizers: Iterable[str], options: DeleteOptions) -> bool:
    """store.go ``shouldOrphanDependents``: options first, then the object's finalizers, then the kind."""
    explicit = orphan_dependents_option(options)
    if explicit is not None:
        return explicit
    if options.propagation_policy == "Orphan":
        return True
    if options.propagation_policy in ("Background", "Foreground"):
        return False
    for item in finalizers:
        if item == ORPHAN:
            return True
        if item == FOREGROUND:
            return False
    return (rt.group, rt.version, rt.kind) in ORPHAN_BY_DEFAULT


def should_delete_dependents(finalizers: Iterable[str], options: DeleteOptions) -> bool:
    """store.go ``shouldDeleteDependents`` (foreground)."""
    if orphan_dependents_option(options) is not None:
        return False
    if options.propagation_policy == "Foreground":
        return True
    if options.propagation_policy in ("Background", "Orphan"):
        return False
    for item in finalizers:
        if item == FOREGROUND:
            return True
        if item == ORPHAN:
            return False
    return False


def gc_finalizers(rt: ResourceType, current: list[str], options: DeleteOptions) -> tuple[bool, list[str]]:
    """store.go ``deletionFinalizersForGarbageCollection``: (changed, the finalizers the object should have)."""
    orphan = should_orphan(rt, current, options)
    foreground = should_delete_dependents(current, options)
    wanted = [f for f in current if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        wanted.append(ORPHAN)
    if foreground:
        wanted.append(FOREGROUND)
    if set(wanted) == set(current):
        return False, current
    return True, wanted


def lingers(obj: Obj) -> bool:
    """Whether a DELETE left ``obj`` in storage (finalizers, a pending grace period, a namespace to finalize)."""
    meta = objects.meta(obj)
    if not meta.get("deletionTimestamp"):
        return False
    if meta.get("finalizers") or int(meta.get("deletionGracePeriodSeconds") or 0) > 0:
        return True
    return obj.get("kind") == "Namespace" and bool((obj.get("spec") or {}).get("finalizers"))


def delete_response(rt: ResourceType, obj: Obj, options: DeleteOptions) -> tuple[int, Obj]:
    """The HTTP status and body of a DELETE, as kube-apiserver's handler and registry choose them.

    200 unless the object was not deleted immediately *and* the client sent ``orphanDependents: false``
    (then 202); the body is the object while it lingers, and once it is gone either the object (the
    registries with ``ReturnDeletedObject``) or a ``Status`` naming it.
    """
    remaining = lingers(obj)
    code = 202 if remaining and orphan_dependents_option(options) is False else 200
    if remaining or (rt.group, rt.kind) in RETURNS_DELETED_OBJECT:
        return code, obj
    meta = objects.meta(obj)
    details: Obj = {"name": meta.get("name", "")}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return code, {**ok_status(), "details": details}


def set_crd_condition(conditions: list[Obj], status: str, reason: str, message: str, now: str) -> bool:
    """``SetCRDCondition`` for the Terminating condition; whether anything changed."""
    for cond in conditions:
        if cond.get("type") == "Terminating":
            if (cond.get("status"), cond.get("reason"), cond.get("message")) == (status, reason, message):
                return False
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now
            cond.update(status=status, reason=reason, message=message)
            return True
    conditions.append(
        {
            "type": "Terminating",
            "status": status,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
    )
    return True

"""Deletion as kube-apiserver and kube-controller-manager do it, for the clients of the embedded cluster.

Four pieces of Kubernetes live here, because clients only see them together:

* the generic registry's ``Delete`` (``k8s.io/apiserver/pkg/registry/generic/registry/store.go``):
  finalizers, ``deletionTimestamp``, propagation policies turned into the ``orphan`` and
  ``foregroundDeletion`` finalizers, graceful pod deletion, ``dryRun`` — :meth:`Deletion.delete`, which
  ``rest.Api.delete`` calls once preconditions are checked; the namespace and CRD registries' own
  ``Delete`` (first delete marks them Terminating) are here too;
* the garbage collector (``pkg/controller/garbagecollector``): an index of ownerReferences by owner uid,
  deleting dependents whose owners are gone, foreground deletion, orphaning;
* the namespace controller (``pkg/controller/namespace/deletion``, pods first as OrderedNamespaceDeletion
  does since 1.34) and the CRD finalizer (``apiextensions-apiserver/pkg/controller/finalizer``);
* the disruption controller (``pkg/controller/disruption``) computing PodDisruptionBudget status, and the
  eviction subresource (``pkg/registry/core/pod/storage/eviction.go``) that consults it — :func:`evict`.

The controllers are driven by store events: the store calls :meth:`Deletion._on_event` synchronously for
every committed write, which only updates the indexes and queues work; a task on the event loop
(:meth:`Deletion.start`) does the work, through the same ``Api`` verbs HTTP clients use. Without a running
loop (unit tests, bootstrap) the queue waits; :meth:`Deletion.run_pending` drains it synchronously.

Pods: there is no kubelet, so by default a deleted pod is removed at once (its grace period is honoured as
0, exactly as kube does for a pod that is not bound to a node). A kubelet-lite can claim pods by setting
:attr:`Deletion.pod_terminator`; claimed pods then get kube's graceful deletion (``deletionTimestamp`` in
the future, ``deletionGracePeriodSeconds``) and stay until the terminator deletes them with grace 0.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.cleanup import CrdCleanup, NamespaceCleanup
from aiplane.sim.apiserver.collector import GarbageCollector
from aiplane.sim.apiserver.deletion import (
    CRD_FINALIZER,
    FOREGROUND,
    IMMORTAL_NAMESPACES,
    ORPHAN,
    Obj,
    PodTerminator,
    finalizers_of,
    gc_finalizers,
    orphan_dependents_option,
    set_crd_condition,
)
from aiplane.sim.apiserver.disruption import DisruptionController
from aiplane.sim.apiserver.ownergraph import Work
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions
from aiplane.sim.apiserver.write_defaults import rfc3339

log = logging.getLogger(__name__)


class Deletion(GarbageCollector, NamespaceCleanup, CrdCleanup, DisruptionController):
    """``api.deletion``: the registry's Delete, the garbage collector, and the namespace, CRD-cleanup and
    disruption controllers of one embedded cluster."""

    name = "deletion"

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        #: Set by a kubelet-lite to do graceful pod termination (``None``: pods go at once).
        self.pod_terminator: PodTerminator | None = None

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker on the running event loop (``EmbeddedCluster.start``)."""
        self.start_worker()

    async def stop(self) -> None:
        await self.stop_worker(drop_queue=False)

    def process(self, work: Work) -> None:
        kind, what = work
        if kind == "attempt":
            self._attempt_to_delete(what)
        elif kind == "orphan":
            self._orphan_dependents(what)
        elif kind == "namespace":
            self._sync_namespace(what)
        elif kind == "crd":
            self._sync_crd(what)
        elif kind == "pdb":
            self._sync_pdbs(what)

    # --- the registry's Delete --------------------------------------------------------------------

    def delete(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        """Delete ``current`` (preconditions already checked); returns the object as stored afterwards
        (its last state if it is gone; what it would be, for ``dryRun``)."""
        kind = (rt.group, rt.kind)
        if kind == ("", "Namespace"):
            return self._delete_namespace(rt, current, options)
        if kind == ("apiextensions.k8s.io", "CustomResourceDefinition") and not objects.is_deleting(current):
            return self._delete_crd(rt, current, options)
        return self._delete(rt, current, options)

    def delete_during_update(self, rt: ResourceType, current: Obj, new: Obj) -> bool:
        """``ShouldDeleteDuringUpdate``: an update that leaves a deleted object without finalizers removes
        it, unless a grace period is pending (or, for a namespace, spec.finalizers remain)."""
        if objects.meta(new).get("finalizers") or not objects.is_deleting(current):
            return False
        if (rt.group, rt.kind) == ("", "Namespace") and (new.get("spec") or {}).get("finalizers"):
            return False
        return not int(objects.meta(current).get("deletionGracePeriodSeconds") or 0)

    def _delete(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        obj: Obj = {**current, "metadata": dict(objects.meta(current))}
        meta: dict[str, Any] = obj["metadata"]  # the copy made above
        graceful, period = False, 0
        if (rt.group, rt.kind) == ("", "Pod"):
            verdict = self._pod_before_delete(obj, options)
            if verdict is None:  # graceful deletion already pending: nothing changes
                return current
            graceful, period = verdict
        update, finalizers = gc_finalizers(rt, finalizers_of(current), options)
        if not (graceful or meta.get("finalizers") or update):
            return self._remove(rt, current, options)
        if update:
            if finalizers:
                meta["finalizers"] = finalizers
            else:
                meta.pop("finalizers", None)
        pending = bool(meta.get("finalizers"))
        if not graceful:
            if not pending:
                return self._remove(rt, current, options)
            self._mark_deleting(meta)
            return self._commit(rt, current, obj, options)
        stored = self._commit(rt, current, obj, options)
        if pending or period > 0:
            return stored
        return self._remove(rt, stored, options)

    def _pod_before_delete(self, pod: Obj, options: DeleteOptions) -> tuple[bool, int] | None:
        """``rest.BeforeDelete`` with the pod strategy: (graceful, period), or ``None`` if already pending."""
        meta: dict[str, Any] = pod["metadata"]  # the copy ``_delete`` made
        grace = options.grace_period_seconds
        if grace is not None and grace < 0:
            grace = 1
        if meta.get("deletionTimestamp"):
            current = int(meta.get("deletionGracePeriodSeconds") or 0)
            if current <= 0:
                return False, 0
            if grace is None or grace >= current:
                return None
            started = objects.parse_time(meta["deletionTimestamp"]) or self.api.clock()
            meta["deletionTimestamp"] = rfc3339(
                started - timedelta(seconds=current) + timedelta(seconds=grace)
            )
            meta["deletionGracePeriodSeconds"] = grace
            return True, grace
        period = self._grace_period(pod, grace)
        meta["deletionTimestamp"] = rfc3339(self.api.clock() + timedelta(seconds=period))
        meta["deletionGracePeriodSeconds"] = period
        if int(meta.get("generation") or 0) > 0:
            meta["generation"] = int(meta["generation"]) + 1
        return True, period

    def _grace_period(self, pod: Obj, grace: int | None) -> int:
        """The pod strategy's ``CheckGracefulDelete``; 0 unless a terminator claims the pod."""
        terminator = self.pod_terminator
        if terminator is None or not terminator.claims(pod):
            return 0
        spec = pod.get("spec") or {}
        period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName"):
            period = 0
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period

    def _mark_deleting(self, meta: dict[str, Any]) -> None:
        """store.go ``markAsDeleting``."""
        now = self.api.clock()
        existing = objects.parse_time(meta.get("deletionTimestamp"))
        if existing is None:
            if int(meta.get("generation") or 0) > 0:
                meta["generation"] = int(meta["generation"]) + 1
            meta["deletionTimestamp"] = rfc3339(now)
        elif existing > now:
            meta["deletionTimestamp"] = rfc3339(now)
        meta["deletionGracePeriodSeconds"] = 0

    def _commit(self, rt: ResourceType, current: Obj, obj: Obj, options: DeleteOptions) -> Obj:
        if options.dry_run:
            return obj
        if obj == current:
            return current
        event = self.store.put(rt.storage_key, obj)
        self.api._after_commit(rt, event)
        return event.obj

    def _remove(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        if options.dry_run:
            return current
        meta = objects.meta(current)
        event = self.api.remove(rt, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        return current if event is None else event.obj

    def _delete_namespace(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        """The namespace registry's Delete: the first one only marks it Terminating."""
        meta = objects.meta(current)
        if meta["name"] in IMMORTAL_NAMESPACES:
            raise errors.forbidden("namespaces", "", meta["name"], "this namespace may not be deleted")
        if not meta.get("deletionTimestamp"):
            new_meta = {**meta, "deletionTimestamp": rfc3339(self.api.clock())}
            status = {**(current.get("status") or {}), "phase": "Terminating"}
            finalizers = finalizers_of(current)
            explicit = orphan_dependents_option(options)
            policy = options.propagation_policy
            for finalizer, wanted in (
                (ORPHAN, explicit if explicit is not None else (policy == "Orphan" if policy else None)),
                (
                    FOREGROUND,
                    (not explicit) if explicit is not None else (policy == "Foreground" if policy else None),
                ),
            ):
                if wanted is True and finalizer not in finalizers:
                    finalizers.append(finalizer)
                elif wanted is False and finalizer in finalizers:
                    finalizers.remove(finalizer)
            if finalizers:
                new_meta["finalizers"] = finalizers
            else:
                new_meta.pop("finalizers", None)
            return self._commit(rt, current, {**current, "metadata": new_meta, "status": status}, options)
        if (current.get("spec") or {}).get("finalizers"):
            return current
        return self._delete(rt, current, options)

    def _delete_crd(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        """The CRD registry's Delete: add the cleanup finalizer; the instances go first."""
        meta = {**objects.meta(current), "deletionTimestamp": rfc3339(self.api.clock())}
        finalizers = finalizers_of(current)
        if CRD_FINALIZER not in finalizers:
            finalizers.append(CRD_FINALIZER)
        meta["finalizers"] = finalizers
        status = dict(current.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        set_crd_condition(
            conditions,
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            rfc3339(self.api.clock()),
        )
        status["conditions"] = conditions
        return self._commit(rt, current, {**current, "metadata": meta, "status": status}, options)


def install(api: Api) -> Deletion:
    """Install deletion, garbage collection and the related controllers on ``api`` (as ``api.deletion``)."""
    deletion = Deletion(api)
    api.deletion = deletion
    return deletion

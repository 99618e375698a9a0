"""The garbage collector (``pkg/controller/garbagecollector``): dependents whose owners are gone are
deleted, foreground deletion waits for blocking dependents, orphaning strips the owner from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.deletion import FOREGROUND, ORPHAN, Obj, deleting_dependents, finalizers_of
from aiplane.sim.apiserver.ownergraph import OwnerGraph
from aiplane.sim.apiserver.resources import ResourceType


@dataclass
class _Classified:
    solid: list[dict[str, Any]]
    dangling: list[dict[str, Any]]
    waiting: list[dict[str, Any]]


class _UnresolvableError(Exception):
    """An ownerReference names a kind the server does not serve (kube's GC retries; so do we, on CRD changes)."""


class _InvalidOwnerError(Exception):
    """A cluster-scoped object names a namespaced owner (kube's GC gives up on the object)."""


class GarbageCollector(OwnerGraph):
    """``attemptToDeleteItem`` and ``attemptToOrphanWorker`` on the owner graph."""

    # --- the garbage collector ---------------------------------------------------------------------

    def _attempt_to_delete(self, uid: str) -> None:
        """``attemptToDeleteItem``."""
        obj = self._get_uid(uid)
        if obj is None or (objects.is_deleting(obj) and not deleting_dependents(obj)):
            return
        if deleting_dependents(obj):
            self._process_deleting_dependents(uid, obj)
            return
        refs = [r for r in objects.meta(obj).get("ownerReferences") or [] if isinstance(r, dict)]
        rt = self._rt_for(self._where[uid][0], obj) if refs else None
        if rt is None:
            return
        try:
            classified = self._classify(rt, obj, refs)
        except _UnresolvableError:
            self._unresolved.add(uid)
            return
        except _InvalidOwnerError:
            return
        self._act_on(uid, rt, obj, refs, classified)

    def _act_on(
        self, uid: str, rt: ResourceType, obj: Obj, refs: list[dict[str, Any]], classified: _Classified
    ) -> None:
        """The second half of ``attemptToDeleteItem``: keep, strip dangling owners, or delete."""
        if classified.solid:
            gone = {r.get("uid") for r in classified.dangling + classified.waiting}
            if gone:
                self._set_owner_refs(rt, obj, [r for r in refs if r.get("uid") not in gone])
            return
        if classified.waiting and self._dependents.get(uid):
            if any(self._is_deleting_dependents(d) for d in list(self._dependents[uid])):
                # A cycle would otherwise block forever: stop blocking the owners, then go foreground.
                unblocked = [
                    {**r, "blockOwnerDeletion": False} if r.get("blockOwnerDeletion") else r for r in refs
                ]
                obj = self._set_owner_refs(rt, obj, unblocked) or obj
            self._delete_object(rt, obj, "Foreground")
            return
        finalizers = finalizers_of(obj)
        policy = (
            "Orphan" if ORPHAN in finalizers else "Foreground" if FOREGROUND in finalizers else "Background"
        )
        self._delete_object(rt, obj, policy)

    def _classify(self, rt: ResourceType, obj: Obj, refs: list[dict[str, Any]]) -> _Classified:
        """``classifyReferences``: owners that exist (solid), are gone (dangling), or wait for dependents."""
        out = _Classified([], [], [])
        namespace = objects.meta(obj).get("namespace", "") if rt.namespaced else ""
        for ref in refs:
            owner_rt = self.api.registry.for_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if owner_rt is None:
                raise _UnresolvableError(ref)
            if not namespace and owner_rt.namespaced:
                raise _InvalidOwnerError(ref)
            owner = self.store.get(
                owner_rt.storage_key, namespace if owner_rt.namespaced else "", str(ref.get("name"))
            )
            if owner is None or objects.meta(owner).get("uid") != ref.get("uid"):
                out.dangling.append(ref)
            elif deleting_dependents(owner):
                out.waiting.append(ref)
            else:
                out.solid.append(ref)
        return out

    def _set_owner_refs(self, rt: ResourceType, obj: Obj, refs: list[dict[str, Any]]) -> Obj | None:
        meta = dict(objects.meta(obj))
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        return self._update(rt, {**obj, "metadata": meta})

    def _process_deleting_dependents(self, uid: str, obj: Obj) -> None:
        """``processDeletingDependentsItem``: the finalizer goes once no blocking dependent is left."""
        blocking = [
            d for d in self._dependents.get(uid, ()) if any(o == uid and b for o, b in self._refs.get(d, ()))
        ]
        if not blocking:
            self._remove_finalizer(uid, FOREGROUND)
            return
        for dependent in blocking:
            dep = self._get_uid(dependent)
            if dep is not None and not objects.is_deleting(dep):
                self.enqueue(("attempt", dependent))

    def _orphan_dependents(self, uid: str) -> None:
        """``attemptToOrphanWorker``: drop the owner from its dependents, then the ``orphan`` finalizer."""
        owner = self._get_uid(uid)
        if owner is None or not objects.is_deleting(owner) or ORPHAN not in finalizers_of(owner):
            return
        for dependent in list(self._dependents.get(uid, ())):
            dep = self._get_uid(dependent)
            if dep is None:
                continue
            rt = self._rt_for(self._where[dependent][0], dep)
            if rt is None:
                continue
            refs = [r for r in objects.meta(dep).get("ownerReferences") or [] if r.get("uid") != uid]
            self._set_owner_refs(rt, dep, refs)
        self._remove_finalizer(uid, ORPHAN)

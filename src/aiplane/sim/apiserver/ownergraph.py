"""The garbage collector's graph: every object's place, owners and dependents, kept from store events.

``pkg/controller/garbagecollector``'s GraphBuilder, reduced to what the embedded cluster needs: an
index of ownerReferences by owner uid, the objects of each namespace, the namespaces and CRDs being
deleted, and the PodDisruptionBudgets per namespace. Store events update it synchronously and queue
work; the controllers built on it (``collector.py``, ``cleanup.py``, ``disruption.py``) do the work, and
write through the same ``Api`` verbs HTTP clients use.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.deletion import (
    CONTROLLER_MANAGER,
    CRD_FINALIZER,
    CRDS,
    FOREGROUND,
    NAMESPACES,
    ORPHAN,
    PDBS,
    PODS,
    Obj,
    deleting_dependents,
    finalizers_of,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions, WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.workloop import WorkLoop

Ident = tuple[str, str, str]  # storage key, namespace ("" if cluster-scoped), name
Work = tuple[str, str]  # (kind of work, uid or name)
_Ref = tuple[str, bool]  # (owner uid, blockOwnerDeletion)


class OwnerGraph(WorkLoop[Work]):
    """The index every deletion controller reads, and the writes they share."""

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api
        self.store = api.store
        self._where: dict[str, Ident] = {}  # uid -> where the object is stored
        self._refs: dict[str, tuple[_Ref, ...]] = {}  # uid -> its ownerReferences (owner uid, blocking)
        self._dependents: dict[str, set[str]] = defaultdict(set)  # owner uid -> dependent uids
        self._in_ns: dict[str, set[str]] = defaultdict(set)  # namespace -> uids of its objects
        self._terminating: set[str] = set()  # namespaces with a deletionTimestamp
        self._pdbs: Counter[str] = Counter()  # namespace -> number of PodDisruptionBudgets
        #: namespace -> uids of its Pods / its PodDisruptionBudgets: what the disruption controller reads
        #: (it read every object of the namespace, Events and all, for every PDB on every Pod event).
        self._kind_in_ns: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._crd_cleanup: dict[str, str] = {}  # storage key -> name of the CRD being deleted
        self._unresolved: set[str] = set()  # dependents waiting for their owners' kinds to be served
        for key in list(self.store.storage_keys()):
            for obj in self.store.items(key):
                self._index(key, obj)
        self.store.subscribe(self._on_event)

    # --- the index (the garbage collector's graph) --------------------------------------------------

    def _on_event(self, event: Event) -> None:
        obj = event.obj
        meta = objects.meta(obj)
        uid = meta.get("uid", "")
        namespace = meta.get("namespace", "")
        if event.type == DELETED:
            self._unindex(event.key, obj)
            for dependent in self._dependents.get(uid, ()):
                self.enqueue(("attempt", dependent))
            if event.key == NAMESPACES:
                self._terminating.discard(meta["name"])
            elif event.key == CRDS:
                self._crd_cleanup = {k: v for k, v in self._crd_cleanup.items() if v != meta["name"]}
        else:
            self._index(event.key, obj)
            self._transitions(event.key, obj, event.old)
        if namespace and namespace in self._terminating:
            self.enqueue(("namespace", namespace))
        if event.key in self._crd_cleanup:
            self.enqueue(("crd", self._crd_cleanup[event.key]))
        if event.key == PDBS and event.type != DELETED:
            self.enqueue(("pdb", f"{namespace}/{meta['name']}"))
        elif event.key == PODS and self._pdbs[namespace] > 0:
            for name in self._pdbs_for_pod(namespace, obj, event.old):
                self.enqueue(("pdb", f"{namespace}/{name}"))

    def _index(self, key: str, obj: Obj) -> None:
        meta = objects.meta(obj)
        uid = meta.get("uid", "")
        namespace = meta.get("namespace", "")
        new_object = uid not in self._where
        self._where[uid] = (key, namespace, meta["name"])
        if namespace:
            self._in_ns[namespace].add(uid)
            if key in (PODS, PDBS):
                self._kind_in_ns[(key, namespace)].add(uid)
        if key == PDBS and new_object:
            self._pdbs[namespace] += 1
        refs = tuple(
            (str(r.get("uid", "")), bool(r.get("blockOwnerDeletion")))
            for r in meta.get("ownerReferences") or []
            if isinstance(r, dict)
        )
        before = self._refs.get(uid, ())
        if refs == before and not new_object:
            return
        if refs:
            self._refs[uid] = refs
        else:
            self._refs.pop(uid, None)
        owners_before = {o for o, _ in before}
        owners_now = {o for o, _ in refs}
        for owner in owners_before - owners_now:
            self._forget_dependent(owner, uid)
        for owner in owners_now:
            self._dependents[owner].add(uid)
        # An owner waiting for its blocking dependents may be unblocked (addUnblockedOwnersToDeleteQueue).
        for owner, blocking in before:
            if blocking and (owner, True) not in refs and self._is_deleting_dependents(owner):
                self.enqueue(("attempt", owner))
        added = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in owners_before]
        if added and not self._owners_known(key, obj, added):
            self.enqueue(("attempt", uid))

    def _unindex(self, key: str, obj: Obj) -> None:
        meta = objects.meta(obj)
        uid = meta.get("uid", "")
        namespace = meta.get("namespace", "")
        if self._where.get(uid) == (key, namespace, meta["name"]):
            del self._where[uid]
        if namespace:
            members = self._in_ns.get(namespace)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self._in_ns[namespace]
            same_kind = self._kind_in_ns.get((key, namespace))
            if same_kind is not None:
                same_kind.discard(uid)
                if not same_kind:
                    del self._kind_in_ns[(key, namespace)]
        if key == PDBS:
            self._pdbs[namespace] -= 1
            if self._pdbs[namespace] <= 0:
                del self._pdbs[namespace]
        self._unresolved.discard(uid)
        for owner, _ in self._refs.pop(uid, ()):
            self._forget_dependent(owner, uid)
            if self._is_deleting_dependents(owner):
                self.enqueue(("attempt", owner))

    def _forget_dependent(self, owner: str, dependent: str) -> None:
        dependents = self._dependents.get(owner)
        if dependents is not None:
            dependents.discard(dependent)
            if not dependents:
                del self._dependents[owner]

    def _owners_known(self, key: str, obj: Obj, refs: list[dict[str, Any]]) -> bool:
        """Whether every owner in ``refs`` is an object we know, at the coordinates the reference gives and
        not waiting for its dependents (else the dependent is verified, as kube's graph builder does for
        virtual owner nodes and mismatched coordinates)."""
        namespace = objects.meta(obj).get("namespace", "")
        for ref in refs:
            where = self._where.get(str(ref.get("uid", "")))
            if where is None:
                return False
            owner_rt = self.api.registry.for_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if owner_rt is None or owner_rt.storage_key != where[0] or where[2] != ref.get("name"):
                return False
            if where[1] not in ("", namespace) or (not namespace and owner_rt.namespaced):
                return False
            if self._is_deleting_dependents(str(ref.get("uid", ""))):
                return False
        return True

    def _transitions(self, key: str, obj: Obj, old: Obj | None) -> None:
        meta = objects.meta(obj)
        uid = meta.get("uid", "")
        if key == NAMESPACES and objects.is_deleting(obj):
            self._terminating.add(meta["name"])
            self.enqueue(("namespace", meta["name"]))
        if key == CRDS and objects.is_deleting(obj) and CRD_FINALIZER in finalizers_of(obj):
            spec = obj.get("spec") or {}
            storage = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
            self._crd_cleanup[storage] = meta["name"]
            self.enqueue(("crd", meta["name"]))
        if key == CRDS and self._unresolved:
            for dependent in self._unresolved:
                self.enqueue(("attempt", dependent))
            self._unresolved.clear()
        if not objects.is_deleting(obj):
            return
        finalizers = finalizers_of(obj)
        was_deleting = old is not None and objects.is_deleting(old)
        old_finalizers = finalizers_of(old) if old is not None else []
        if ORPHAN in finalizers and not (was_deleting and ORPHAN in old_finalizers):
            self.enqueue(("orphan", uid))
        if FOREGROUND in finalizers and not (was_deleting and FOREGROUND in old_finalizers):
            for dependent in list(self._dependents.get(uid, ())):
                self.enqueue(("attempt", dependent))
            self.enqueue(("attempt", uid))

    # --- lookups -----------------------------------------------------------------------------------

    def _get_uid(self, uid: str) -> Obj | None:
        where = self._where.get(uid)
        if where is None:
            return None
        obj = self.store.get(*where)
        if obj is None or objects.meta(obj).get("uid") != uid:
            return None
        return obj

    def _is_deleting_dependents(self, uid: str) -> bool:
        obj = self._get_uid(uid)
        return obj is not None and deleting_dependents(obj)

    def _rt_for(self, key: str, obj: Obj | None = None) -> ResourceType | None:
        registry = self.api.registry
        if obj is not None:
            rt = registry.for_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            if rt is not None and rt.storage_key == key:
                return rt
        candidates = [rt for rt in registry.all() if rt.storage_key == key]
        preferred = [rt for rt in candidates if rt.version == rt.storage_version]
        return next(iter(preferred or candidates), None)

    def _update(self, rt: ResourceType, obj: Obj, *, subresource: str | None = None) -> Obj | None:
        """Write ``obj`` as kube-controller-manager would (Update with the stored resourceVersion)."""
        meta = objects.meta(obj)
        try:
            result = self.api.update(
                rt,
                meta.get("namespace") if rt.namespaced else None,
                meta["name"],
                obj,
                WriteOptions(field_manager=CONTROLLER_MANAGER),
                subresource=subresource,
            )
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        return result.obj

    def _delete_object(self, rt: ResourceType, obj: Obj, policy: str | None) -> None:
        """The GC's ``deleteObject``: a DELETE with a uid precondition."""
        meta = objects.meta(obj)
        try:
            self.api.delete(
                rt,
                meta.get("namespace") if rt.namespaced else None,
                meta["name"],
                DeleteOptions(propagation_policy=policy, precondition_uid=meta.get("uid")),
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise

    def _remove_finalizer(self, uid: str, finalizer: str) -> None:
        obj = self._get_uid(uid)
        if obj is None or finalizer not in finalizers_of(obj):
            return
        rt = self._rt_for(self._where[uid][0], obj)
        if rt is None:
            return
        finalizers = [f for f in finalizers_of(obj) if f != finalizer]
        meta = {**objects.meta(obj), "finalizers": finalizers}
        if not finalizers:
            meta.pop("finalizers")
        self._update(rt, {**obj, "metadata": meta})

    def _of_kind(self, key: str, namespace: str) -> list[Obj]:
        """The Pods or PodDisruptionBudgets stored in ``namespace``."""
        found = (self._get_uid(uid) for uid in list(self._kind_in_ns.get((key, namespace), ())))
        return [obj for obj in found if obj is not None]

    def _pdbs_for_pod(self, namespace: str, pod: Obj, old: Obj | None) -> list[str]:
        """Overridden by the disruption controller: the PDBs a Pod event concerns."""
        return []

    def _members(self, namespace: str) -> dict[str, list[Obj]]:
        """The objects stored in ``namespace``, by storage key."""
        out: dict[str, list[Obj]] = defaultdict(list)
        for uid in list(self._in_ns.get(namespace, ())):
            obj = self._get_uid(uid)
            if obj is not None:
                out[self._where[uid][0]].append(obj)
        return out

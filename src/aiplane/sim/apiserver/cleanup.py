"""The namespace controller (``pkg/controller/namespace/deletion``, pods first as OrderedNamespaceDeletion
does since 1.34) and the CRD finalizer (``apiextensions-apiserver/pkg/controller/finalizer``): empty what
is being deleted, then let it go.
"""

from __future__ import annotations

from collections import Counter

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.deletion import (
    CRD_FINALIZER,
    CRDS,
    NAMESPACE_FINALIZER,
    NAMESPACES,
    PODS,
    Obj,
    finalizers_of,
    set_crd_condition,
)
from aiplane.sim.apiserver.ownergraph import OwnerGraph
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.write_defaults import rfc3339

_NS_CONDITIONS = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
)


def namespace_conditions(
    old: list[Obj], remaining: dict[str, int], finalizers: dict[str, int], now: str
) -> list[Obj] | None:
    """The namespace's conditions after a deletion pass (``updateConditions``), or ``None`` if unchanged.

    ``remaining`` counts objects left per ``resource.group`` (``pods.`` for the core group), ``finalizers``
    counts them per finalizer, as ``ProcessContentTotals`` reports them.
    """
    failing: dict[str, tuple[str, str]] = {}
    left = sorted(f"{res} has {n} resource instances" for res, n in remaining.items() if n)
    if left:
        failing["NamespaceContentRemaining"] = (
            "SomeResourcesRemain",
            "Some resources are remaining: " + ", ".join(left),
        )
    held = sorted(f"{fin} in {n} resource instances" for fin, n in finalizers.items() if n)
    if held:
        failing["NamespaceFinalizersRemaining"] = (
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: " + ", ".join(held),
        )
    conditions = [dict(c) for c in old]
    changed = False
    for kind, ok_reason, ok_message in _NS_CONDITIONS:
        status, (reason, message) = (
            ("True", failing[kind]) if kind in failing else ("False", (ok_reason, ok_message))
        )
        current = next((c for c in conditions if c.get("type") == kind), None)
        if current is None:
            conditions.append(
                {
                    "type": kind,
                    "status": status,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
            )
            changed = True
        elif (current.get("status"), current.get("reason"), current.get("message")) != (
            status,
            reason,
            message,
        ):
            if current.get("status") != status:
                current["lastTransitionTime"] = now
            current.update(status=status, reason=reason, message=message)
            changed = True
    return conditions if changed else None


class NamespaceCleanup(OwnerGraph):
    """Deletes a terminating namespace's content, then removes its ``kubernetes`` finalizer."""

    # --- the namespace controller ------------------------------------------------------------------

    def _sync_namespace(self, name: str) -> None:
        """``namespacedResourcesDeleter.Delete``: empty the namespace, pods first, then finalize it."""
        ns = self.store.get(NAMESPACES, "", name)
        if ns is None or not objects.is_deleting(ns):
            return
        ns_rt = self._rt_for(NAMESPACES, ns)
        assert ns_rt is not None
        if (ns.get("status") or {}).get("phase") != "Terminating":
            ns = (
                self._update(
                    ns_rt,
                    {**ns, "status": {**(ns.get("status") or {}), "phase": "Terminating"}},
                    subresource="status",
                )
                or ns
            )
        if NAMESPACE_FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or []):
            return
        remaining: dict[str, int] = {}
        held: Counter[str] = Counter()
        members = self._members(name)
        keys = [PODS, *sorted(k for k in members if k != PODS)]
        for key in keys:
            objs = members.get(key, [])
            rt = self._rt_for(key, objs[0]) if objs else None
            if rt is None or not rt.namespaced:
                continue
            for obj in objs:
                self._delete_object(rt, obj, "Background")
            left = [o for o in (self._get_uid(objects.meta(obj)["uid"]) for obj in objs) if o is not None]
            if left:
                remaining[f"{rt.plural}.{rt.group}"] = len(left)
                for obj in left:
                    held.update(finalizers_of(obj))
            if key == PODS and left:
                break  # OrderedNamespaceDeletion: nothing else goes while pods remain
        now = rfc3339(self.api.clock())
        conditions = namespace_conditions(
            list((ns.get("status") or {}).get("conditions") or []), remaining, held, now
        )
        if conditions is not None:
            status = {**(ns.get("status") or {}), "conditions": conditions}
            ns = self._update(ns_rt, {**ns, "status": status}, subresource="status") or ns
        if remaining:
            return
        finalizers = [f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != NAMESPACE_FINALIZER]
        self._update(
            ns_rt,
            {**ns, "spec": {**(ns.get("spec") or {}), "finalizers": finalizers}},
            subresource="finalize",
        )


class CrdCleanup(OwnerGraph):
    """Deletes a deleted CRD's instances, then removes its cleanup finalizer."""

    # --- the CRD finalizer -------------------------------------------------------------------------

    def _sync_crd(self, name: str) -> None:
        """``CRDFinalizer.sync``: delete every instance, then let the CRD go."""
        crd = self.store.get(CRDS, "", name)
        if crd is None or not objects.is_deleting(crd) or CRD_FINALIZER not in finalizers_of(crd):
            return
        crd_rt = self._rt_for(CRDS, crd)
        assert crd_rt is not None
        spec = crd.get("spec") or {}
        key = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
        items = self.store.items(key)
        now = rfc3339(self.api.clock())
        if items:
            crd = self._crd_status(
                crd_rt,
                crd,
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                now,
            )
            rt = self._rt_for(key, items[0])
            if rt is not None:
                for obj in items:
                    if not objects.is_deleting(obj):
                        self._delete_object(rt, obj, None)
            if self.store.count(key):
                return
        crd = self._crd_status(
            crd_rt, crd, "False", "InstanceDeletionCompleted", "removed all instances", now
        )
        self._remove_finalizer(objects.meta(crd)["uid"], CRD_FINALIZER)

    def _crd_status(
        self, rt: ResourceType, crd: Obj, status: str, reason: str, message: str, now: str
    ) -> Obj:
        new_status = dict(crd.get("status") or {})
        conditions = [dict(c) for c in new_status.get("conditions") or []]
        if not set_crd_condition(conditions, status, reason, message, now):
            return crd
        new_status["conditions"] = conditions
        return self._update(rt, {**crd, "status": new_status}, subresource="status") or crd

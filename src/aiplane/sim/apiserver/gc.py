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
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from aiplane.apimachinery.selectors import Selector, compile_selector
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import DeleteOptions, WriteOptions, rfc3339
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.workloop import WorkLoop

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

Obj = dict[str, Any]

FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
NAMESPACE_FINALIZER = "kubernetes"  # the namespace controller's spec.finalizers token
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
#: The field manager (user-agent prefix) of kube-controller-manager's writes.
CONTROLLER_MANAGER = "kube-controller-manager"
#: kube-apiserver's NamespaceLifecycle admission refuses to delete these.
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
#: The disruption controller forgets an approved eviction whose pod is still there after this long.
DELETION_TIMEOUT = timedelta(minutes=2)
#: The eviction subresource refuses to evict when this many evictions await the disruption controller.
MAX_DISRUPTED_PODS = 2000

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


# --- small helpers ------------------------------------------------------------------------------


def _meta(obj: Obj) -> dict[str, Any]:
    meta: dict[str, Any] = obj["metadata"]
    return meta


def _finalizers(obj: Obj) -> list[str]:
    return list(_meta(obj).get("finalizers") or [])


def _deleting(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _deleting_dependents(obj: Obj) -> bool:
    return _deleting(obj) and FOREGROUND in _finalizers(obj)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _group_of(api_version: Any) -> str:
    text = str(api_version or "")
    return text.rpartition("/")[0]


def _controller_of(obj: Obj) -> dict[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _ok_status(code: int | None = None) -> Obj:
    status: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if code is not None:
        status["code"] = code
    return status


class _StatusError(ApiError):
    """An error whose Status has no ``reason`` (kube-apiserver omits an empty one)."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        if not body.get("reason"):
            body.pop("reason", None)
        return body


# --- the registry's side: finalizers for propagation, DELETE responses ------------------------


def _orphan_dependents_option(options: DeleteOptions) -> bool | None:
    value = options.orphan_dependents
    return value if isinstance(value, bool) else None


def should_orphan(rt: ResourceType, finalizers: Iterable[str], options: DeleteOptions) -> bool:
    """store.go ``shouldOrphanDependents``: options first, then the object's finalizers, then the kind."""
    explicit = _orphan_dependents_option(options)
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
    if _orphan_dependents_option(options) is not None:
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
    meta = _meta(obj)
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
    code = 202 if remaining and _orphan_dependents_option(options) is False else 200
    if remaining or (rt.group, rt.kind) in RETURNS_DELETED_OBJECT:
        return code, obj
    meta = _meta(obj)
    details: Obj = {"name": meta.get("name", "")}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return code, {**_ok_status(), "details": details}


# --- PodDisruptionBudget arithmetic (the disruption controller) ---------------------------------


class PdbError(Exception):
    """The status of a PDB cannot be computed (the disruption controller's failSafe path)."""


_ATOI = re.compile(r"^[+-]?[0-9]+$")


def scaled_value(value: Any, total: int, *, round_up: bool = True) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` of ``total`` rounded up (or down)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PdbError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise PdbError("invalid value for IntOrString: invalid type: string is not a percentage")
    number = value[:-1]
    if not _ATOI.match(number):
        raise PdbError(
            f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing "{number}": invalid syntax'
        )
    scaled = float(int(number)) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def desired_healthy(
    spec: dict[str, Any], matching: int, expected_scale: Callable[[], int]
) -> tuple[int, int]:
    """(expectedPods, desiredHealthy) as ``getExpectedPodCount`` computes them.

    ``matching`` is the number of pods the selector matches; ``expected_scale`` sums the scale of their
    controllers (and raises :class:`PdbError` when that is impossible). An integer ``minAvailable`` needs
    no controllers; ``maxUnavailable`` and percentages do.
    """
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale()
        return expected, max(0, expected - scaled_value(max_unavailable, expected))
    if min_available is not None:
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            return matching, min_available
        expected = expected_scale()
        return expected, scaled_value(min_available, expected)
    return 0, 0


def disruptions_allowed(current: int, desired: int, expected: int) -> int:
    """``updatePdbStatus``: none while no pods are expected (a PDB that matches nothing is safe)."""
    allowed = current - desired
    return 0 if expected <= 0 or allowed <= 0 else allowed


def is_pod_ready(pod: Obj) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True (the phase is not consulted)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def count_healthy(pods: Iterable[Obj], disrupted: dict[str, datetime], now: datetime) -> int:
    """``countHealthyPods``: ready pods not being deleted and not approved for eviction recently."""
    healthy = 0
    for pod in pods:
        if _deleting(pod):
            continue
        since = disrupted.get(_meta(pod)["name"])
        if since is not None and since + DELETION_TIMEOUT > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def pdb_selector(selector: Any) -> Selector:
    """``metav1.LabelSelectorAsSelector`` of a PDB's ``spec.selector``: nil matches nothing, ``{}``
    everything. A selector kube would refuse to convert raises :class:`PdbError` with kube's text."""
    try:
        return compile_selector(selector, field_paths=False)
    except ValueError as err:
        raise PdbError(str(err)) from None


def _set_condition(conditions: list[Obj], new: Obj, now: str) -> bool:
    """``apimeta.SetStatusCondition``: keeps lastTransitionTime unless the status changes."""
    for cond in conditions:
        if cond.get("type") == new["type"]:
            changed = False
            if cond.get("status") != new["status"]:
                cond["status"] = new["status"]
                cond["lastTransitionTime"] = now
                changed = True
            for key in ("reason", "message", "observedGeneration"):
                if cond.get(key) != new.get(key):
                    if new.get(key) is None:
                        cond.pop(key, None)
                    else:
                        cond[key] = new[key]
                    changed = True
            return changed
    conditions.append({**new, "lastTransitionTime": now})
    return True


def _disruption_condition(allowed: int, observed_generation: int) -> Obj:
    """``pdbhelper.UpdateDisruptionAllowedCondition``'s condition."""
    cond: Obj = {"type": "DisruptionAllowed", "message": ""}
    if allowed > 0:
        cond.update(status="True", reason="SufficientPods")
    else:
        cond.update(status="False", reason="InsufficientPods")
    if observed_generation:
        cond["observedGeneration"] = observed_generation
    return cond


def _conditions_up_to_date(pdb: Obj) -> bool:
    status = pdb.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    if cond is None or status.get("observedGeneration") != _meta(pdb).get("generation"):
        return False
    wanted = (
        ("True", "SufficientPods")
        if int(status.get("disruptionsAllowed") or 0) > 0
        else ("False", "InsufficientPods")
    )
    return (cond.get("status"), cond.get("reason")) == wanted


# --- namespace conditions (the namespace controller) --------------------------------------------

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


# --- the controllers ----------------------------------------------------------------------------

Ident = tuple[str, str, str]  # storage key, namespace ("" if cluster-scoped), name
Work = tuple[str, str]  # (kind of work, uid or name)
_Ref = tuple[str, bool]  # (owner uid, blockOwnerDeletion)


@dataclass
class _Classified:
    solid: list[dict[str, Any]]
    dangling: list[dict[str, Any]]
    waiting: list[dict[str, Any]]


class _UnresolvableError(Exception):
    """An ownerReference names a kind the server does not serve (kube's GC retries; so do we, on CRD changes)."""


class _InvalidOwnerError(Exception):
    """A cluster-scoped object names a namespaced owner (kube's GC gives up on the object)."""


class Deletion(WorkLoop[Work]):
    """``api.deletion``: the registry's Delete, the garbage collector, and the namespace, CRD-cleanup and
    disruption controllers of one embedded cluster."""

    name = "deletion"

    def __init__(self, api: Api) -> None:
        super().__init__()
        self.api = api
        self.store = api.store
        #: Set by a kubelet-lite to do graceful pod termination (``None``: pods go at once).
        self.pod_terminator: PodTerminator | None = None
        self._where: dict[str, Ident] = {}  # uid -> where the object is stored
        self._refs: dict[str, tuple[_Ref, ...]] = {}  # uid -> its ownerReferences (owner uid, blocking)
        self._dependents: dict[str, set[str]] = defaultdict(set)  # owner uid -> dependent uids
        self._in_ns: dict[str, set[str]] = defaultdict(set)  # namespace -> uids of its objects
        self._terminating: set[str] = set()  # namespaces with a deletionTimestamp
        self._pdbs: Counter[str] = Counter()  # namespace -> number of PodDisruptionBudgets
        self._crd_cleanup: dict[str, str] = {}  # storage key -> name of the CRD being deleted
        self._unresolved: set[str] = set()  # dependents waiting for their owners' kinds to be served
        for key in list(self.store.storage_keys()):
            for obj in self.store.items(key):
                self._index(key, obj)
        self.store.subscribe(self._on_event)

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
        if kind == ("apiextensions.k8s.io", "CustomResourceDefinition") and not _deleting(current):
            return self._delete_crd(rt, current, options)
        return self._delete(rt, current, options)

    def delete_during_update(self, rt: ResourceType, current: Obj, new: Obj) -> bool:
        """``ShouldDeleteDuringUpdate``: an update that leaves a deleted object without finalizers removes
        it, unless a grace period is pending (or, for a namespace, spec.finalizers remain)."""
        if _meta(new).get("finalizers") or not _deleting(current):
            return False
        if (rt.group, rt.kind) == ("", "Namespace") and (new.get("spec") or {}).get("finalizers"):
            return False
        return not int(_meta(current).get("deletionGracePeriodSeconds") or 0)

    def _delete(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        obj: Obj = {**current, "metadata": dict(_meta(current))}
        meta = _meta(obj)
        graceful, period = False, 0
        if (rt.group, rt.kind) == ("", "Pod"):
            verdict = self._pod_before_delete(obj, options)
            if verdict is None:  # graceful deletion already pending: nothing changes
                return current
            graceful, period = verdict
        update, finalizers = gc_finalizers(rt, _finalizers(current), options)
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
        meta = _meta(pod)
        grace = options.grace_period_seconds
        if grace is not None and grace < 0:
            grace = 1
        if meta.get("deletionTimestamp"):
            current = int(meta.get("deletionGracePeriodSeconds") or 0)
            if current <= 0:
                return False, 0
            if grace is None or grace >= current:
                return None
            started = _parse_time(meta["deletionTimestamp"]) or self.api.clock()
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
        existing = _parse_time(meta.get("deletionTimestamp"))
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
        meta = _meta(current)
        event = self.api.remove(rt, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        return current if event is None else event.obj

    def _delete_namespace(self, rt: ResourceType, current: Obj, options: DeleteOptions) -> Obj:
        """The namespace registry's Delete: the first one only marks it Terminating."""
        meta = _meta(current)
        if meta["name"] in IMMORTAL_NAMESPACES:
            raise errors.forbidden("namespaces", "", meta["name"], "this namespace may not be deleted")
        if not meta.get("deletionTimestamp"):
            new_meta = {**meta, "deletionTimestamp": rfc3339(self.api.clock())}
            status = {**(current.get("status") or {}), "phase": "Terminating"}
            finalizers = _finalizers(current)
            explicit = _orphan_dependents_option(options)
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
        meta = {**_meta(current), "deletionTimestamp": rfc3339(self.api.clock())}
        finalizers = _finalizers(current)
        if CRD_FINALIZER not in finalizers:
            finalizers.append(CRD_FINALIZER)
        meta["finalizers"] = finalizers
        status = dict(current.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        _set_crd_condition(
            conditions,
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            rfc3339(self.api.clock()),
        )
        status["conditions"] = conditions
        return self._commit(rt, current, {**current, "metadata": meta, "status": status}, options)

    # --- the index (the garbage collector's graph) --------------------------------------------------

    def _on_event(self, event: Event) -> None:
        obj = event.obj
        meta = _meta(obj)
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
        if event.key in (PODS, PDBS) and self._pdbs[namespace] > 0:
            self.enqueue(("pdb", namespace))

    def _index(self, key: str, obj: Obj) -> None:
        meta = _meta(obj)
        uid = meta.get("uid", "")
        namespace = meta.get("namespace", "")
        new_object = uid not in self._where
        self._where[uid] = (key, namespace, meta["name"])
        if namespace:
            self._in_ns[namespace].add(uid)
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
        meta = _meta(obj)
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
        namespace = _meta(obj).get("namespace", "")
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
        meta = _meta(obj)
        uid = meta.get("uid", "")
        if key == NAMESPACES and _deleting(obj):
            self._terminating.add(meta["name"])
            self.enqueue(("namespace", meta["name"]))
        if key == CRDS and _deleting(obj) and CRD_FINALIZER in _finalizers(obj):
            spec = obj.get("spec") or {}
            storage = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
            self._crd_cleanup[storage] = meta["name"]
            self.enqueue(("crd", meta["name"]))
        if key == CRDS and self._unresolved:
            for dependent in self._unresolved:
                self.enqueue(("attempt", dependent))
            self._unresolved.clear()
        if not _deleting(obj):
            return
        finalizers = _finalizers(obj)
        was_deleting = old is not None and _deleting(old)
        old_finalizers = _finalizers(old) if old is not None else []
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
        if obj is None or _meta(obj).get("uid") != uid:
            return None
        return obj

    def _is_deleting_dependents(self, uid: str) -> bool:
        obj = self._get_uid(uid)
        return obj is not None and _deleting_dependents(obj)

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
        meta = _meta(obj)
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
        meta = _meta(obj)
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
        if obj is None or finalizer not in _finalizers(obj):
            return
        rt = self._rt_for(self._where[uid][0], obj)
        if rt is None:
            return
        finalizers = [f for f in _finalizers(obj) if f != finalizer]
        meta = {**_meta(obj), "finalizers": finalizers}
        if not finalizers:
            meta.pop("finalizers")
        self._update(rt, {**obj, "metadata": meta})

    # --- the garbage collector ---------------------------------------------------------------------

    def _attempt_to_delete(self, uid: str) -> None:
        """``attemptToDeleteItem``."""
        obj = self._get_uid(uid)
        if obj is None:
            return
        if _deleting(obj) and not _deleting_dependents(obj):
            return
        if _deleting_dependents(obj):
            self._process_deleting_dependents(uid, obj)
            return
        refs = [r for r in _meta(obj).get("ownerReferences") or [] if isinstance(r, dict)]
        if not refs:
            return
        key = self._where[uid][0]
        rt = self._rt_for(key, obj)
        if rt is None:
            return
        try:
            classified = self._classify(rt, obj, refs)
        except _UnresolvableError:
            self._unresolved.add(uid)
            return
        except _InvalidOwnerError:
            return
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
        finalizers = _finalizers(obj)
        policy = (
            "Orphan" if ORPHAN in finalizers else "Foreground" if FOREGROUND in finalizers else "Background"
        )
        self._delete_object(rt, obj, policy)

    def _classify(self, rt: ResourceType, obj: Obj, refs: list[dict[str, Any]]) -> _Classified:
        """``classifyReferences``: owners that exist (solid), are gone (dangling), or wait for dependents."""
        out = _Classified([], [], [])
        namespace = _meta(obj).get("namespace", "") if rt.namespaced else ""
        for ref in refs:
            owner_rt = self.api.registry.for_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if owner_rt is None:
                raise _UnresolvableError(ref)
            if not namespace and owner_rt.namespaced:
                raise _InvalidOwnerError(ref)
            owner = self.store.get(
                owner_rt.storage_key, namespace if owner_rt.namespaced else "", str(ref.get("name"))
            )
            if owner is None or _meta(owner).get("uid") != ref.get("uid"):
                out.dangling.append(ref)
            elif _deleting_dependents(owner):
                out.waiting.append(ref)
            else:
                out.solid.append(ref)
        return out

    def _set_owner_refs(self, rt: ResourceType, obj: Obj, refs: list[dict[str, Any]]) -> Obj | None:
        meta = dict(_meta(obj))
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
            if dep is not None and not _deleting(dep):
                self.enqueue(("attempt", dependent))

    def _orphan_dependents(self, uid: str) -> None:
        """``attemptToOrphanWorker``: drop the owner from its dependents, then the ``orphan`` finalizer."""
        owner = self._get_uid(uid)
        if owner is None or not _deleting(owner) or ORPHAN not in _finalizers(owner):
            return
        for dependent in list(self._dependents.get(uid, ())):
            dep = self._get_uid(dependent)
            if dep is None:
                continue
            rt = self._rt_for(self._where[dependent][0], dep)
            if rt is None:
                continue
            refs = [r for r in _meta(dep).get("ownerReferences") or [] if r.get("uid") != uid]
            self._set_owner_refs(rt, dep, refs)
        self._remove_finalizer(uid, ORPHAN)

    # --- the namespace controller ------------------------------------------------------------------

    def _members(self, namespace: str) -> dict[str, list[Obj]]:
        """The objects stored in ``namespace``, by storage key."""
        out: dict[str, list[Obj]] = defaultdict(list)
        for uid in list(self._in_ns.get(namespace, ())):
            obj = self._get_uid(uid)
            if obj is not None:
                out[self._where[uid][0]].append(obj)
        return out

    def _sync_namespace(self, name: str) -> None:
        """``namespacedResourcesDeleter.Delete``: empty the namespace, pods first, then finalize it."""
        ns = self.store.get(NAMESPACES, "", name)
        if ns is None or not _deleting(ns):
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
            left = [o for o in (self._get_uid(_meta(obj)["uid"]) for obj in objs) if o is not None]
            if left:
                remaining[f"{rt.plural}.{rt.group}"] = len(left)
                for obj in left:
                    held.update(_finalizers(obj))
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

    # --- the CRD finalizer -------------------------------------------------------------------------

    def _sync_crd(self, name: str) -> None:
        """``CRDFinalizer.sync``: delete every instance, then let the CRD go."""
        crd = self.store.get(CRDS, "", name)
        if crd is None or not _deleting(crd) or CRD_FINALIZER not in _finalizers(crd):
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
                    if not _deleting(obj):
                        self._delete_object(rt, obj, None)
            if self.store.count(key):
                return
        crd = self._crd_status(
            crd_rt, crd, "False", "InstanceDeletionCompleted", "removed all instances", now
        )
        self._remove_finalizer(_meta(crd)["uid"], CRD_FINALIZER)

    def _crd_status(
        self, rt: ResourceType, crd: Obj, status: str, reason: str, message: str, now: str
    ) -> Obj:
        new_status = dict(crd.get("status") or {})
        conditions = [dict(c) for c in new_status.get("conditions") or []]
        if not _set_crd_condition(conditions, status, reason, message, now):
            return crd
        new_status["conditions"] = conditions
        return self._update(rt, {**crd, "status": new_status}, subresource="status") or crd

    # --- the disruption controller -----------------------------------------------------------------

    def _sync_pdbs(self, namespace: str) -> None:
        """``DisruptionController.sync`` for every PDB of ``namespace``."""
        members = self._members(namespace)
        pdbs = members.get(PDBS, [])
        if not pdbs:
            return
        pods = members.get(PODS, [])
        now = self.api.clock()
        for pdb in pdbs:
            rt = self._rt_for(PDBS, pdb)
            if rt is None:
                continue
            new_status, recheck = self._pdb_status(pdb, pods, now)
            if recheck is not None:
                self.later((recheck - now).total_seconds() + 0.01, ("pdb", namespace))
            if new_status is not None:
                self._update(rt, {**pdb, "status": new_status}, subresource="status")

    def _pdb_status(self, pdb: Obj, pods: list[Obj], now: datetime) -> tuple[Obj | None, datetime | None]:
        """The PDB's new status (``None`` if up to date) and when to look again (expiring disruptions)."""
        old = dict(pdb.get("status") or {})
        generation = int(_meta(pdb).get("generation") or 0)
        spec = pdb.get("spec") or {}
        stamp = rfc3339(now)
        try:
            selector = pdb_selector(spec.get("selector"))
            matching = [p for p in pods if selector.matches(_meta(p).get("labels"))]
            expected, desired = desired_healthy(
                spec, len(matching), lambda: self._expected_scale(matching, _meta(pdb).get("namespace", ""))
            )
        except PdbError as err:
            # failSafe: no disruptions until the PDB can be computed again.
            conditions = [dict(c) for c in old.get("conditions") or []]
            cond: Obj = {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": str(err),
            }
            if old.get("observedGeneration"):
                cond["observedGeneration"] = old["observedGeneration"]
            changed = _set_condition(conditions, cond, stamp)
            if not changed and "disruptionsAllowed" in old and int(old["disruptionsAllowed"] or 0) == 0:
                return None, None
            base = {"currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
            return {**base, **old, "disruptionsAllowed": 0, "conditions": conditions}, None
        disrupted: dict[str, datetime] = {}
        recheck: datetime | None = None
        old_disrupted = old.get("disruptedPods") or {}
        for pod in matching:
            since = _parse_time(old_disrupted.get(_meta(pod)["name"]))
            if since is None or _deleting(pod):
                continue
            expires = since + DELETION_TIMEOUT
            if expires > now:
                disrupted[_meta(pod)["name"]] = since
                recheck = expires if recheck is None or expires < recheck else recheck
        current = count_healthy(matching, disrupted, now)
        allowed = disruptions_allowed(current, desired, expected)
        disrupted_out = {k: old_disrupted[k] for k in disrupted}
        if (
            old.get("currentHealthy") == current
            and old.get("desiredHealthy") == desired
            and old.get("expectedPods") == expected
            and old.get("disruptionsAllowed") == allowed
            and (old.get("disruptedPods") or {}) == disrupted_out
            and old.get("observedGeneration") == generation
            and _conditions_up_to_date(pdb)
        ):
            return None, recheck
        new: Obj = {
            "currentHealthy": current,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
        }
        if disrupted_out:
            new["disruptedPods"] = disrupted_out
        if generation:
            new["observedGeneration"] = generation
        conditions = [dict(c) for c in old.get("conditions") or []]
        _set_condition(conditions, _disruption_condition(allowed, generation), stamp)
        new["conditions"] = conditions
        return new, recheck

    def _expected_scale(self, pods: list[Obj], namespace: str) -> int:
        """``getExpectedScale``: the sum of the scales of the pods' controllers."""
        scales: dict[str, int] = {}
        seen: set[str] = set()
        for pod in pods:
            ref = _controller_of(pod)
            if ref is None:
                continue  # an unmanaged pod (kube emits an UnmanagedPods event and carries on)
            if ref.get("uid") in seen:
                continue
            found = None
            for finder in (
                self._find_deployment,
                self._find_replicaset,
                self._find_statefulset,
                self._find_scale,
            ):
                found = finder(ref, namespace)
                if found is not None:
                    break
            if found is None:
                raise PdbError(f'found no controllers for pod "{_meta(pod)["name"]}"')
            seen.add(str(ref.get("uid")))
            scales[found[0]] = found[1]
        return sum(scales.values())

    def _lookup(self, key: str, namespace: str, ref: dict[str, Any]) -> Obj | None:
        obj = self.store.get(key, namespace, str(ref.get("name", "")))
        if obj is None or _meta(obj).get("uid") != ref.get("uid"):
            return None
        return obj

    def _find_replicaset(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "ReplicaSet" or _group_of(ref.get("apiVersion")) not in ("apps", "extensions"):
            return None
        rs = self._lookup("apps/replicasets", namespace, ref)
        if rs is None:
            return None
        owner = _controller_of(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            return None
        return _meta(rs)["uid"], int((rs.get("spec") or {}).get("replicas", 1))

    def _find_deployment(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "ReplicaSet" or _group_of(ref.get("apiVersion")) not in ("apps", "extensions"):
            return None
        rs = self._lookup("apps/replicasets", namespace, ref)
        owner = None if rs is None else _controller_of(rs)
        if owner is None or owner.get("kind") != "Deployment":
            return None
        if _group_of(owner.get("apiVersion")) not in ("apps", "extensions"):
            return None
        deployment = self._lookup("apps/deployments", namespace, owner)
        if deployment is None:
            return None
        return _meta(deployment)["uid"], int((deployment.get("spec") or {}).get("replicas", 1))

    def _find_statefulset(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "StatefulSet" or _group_of(ref.get("apiVersion")) != "apps":
            return None
        sts = self._lookup("apps/statefulsets", namespace, ref)
        if sts is None:
            return None
        return _meta(sts)["uid"], int((sts.get("spec") or {}).get("replicas", 1))

    def _find_scale(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
        rt = self.api.registry.for_kind(api_version, kind)
        if rt is None:
            raise PdbError(f'no matches for kind "{kind}" in version "{api_version}"')
        resource = errors.qualified(rt.plural, rt.group)
        if "scale" not in rt.subresources:
            raise PdbError(f"{resource} does not implement the scale subresource")
        obj = self._lookup(rt.storage_key, namespace if rt.namespaced else "", ref)
        if obj is None:
            return None
        from aiplane.sim.apiserver.scale import scale_of

        if rt.scale_paths is None:
            return _meta(obj)["uid"], int((obj.get("spec") or {}).get("replicas", 1))
        return _meta(obj)["uid"], int(scale_of(rt, obj)["spec"]["replicas"])


def _set_crd_condition(conditions: list[Obj], status: str, reason: str, message: str, now: str) -> bool:
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


def install(api: Api) -> Deletion:
    """Install deletion, garbage collection and the related controllers on ``api`` (as ``api.deletion``)."""
    deletion = Deletion(api)
    api.deletion = deletion
    return deletion


# --- eviction ------------------------------------------------------------------------------------


def _too_many_requests(message: str, retry_after: int, cause: str) -> ApiError:
    details: Obj = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers: dict[str, str] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message, details=details, headers=headers)


_CANNOT_EVICT = "Cannot evict pod as it would violate the pod's disruption budget."


def _still_processing(pdb_name: str) -> ApiError:
    return _too_many_requests(
        _CANNOT_EVICT, 10, f"The disruption budget {pdb_name} is still being processed by the server."
    )


def _eviction_options(body: dict[str, Any]) -> DeleteOptions:
    raw = body.get("deleteOptions") or {}
    if not isinstance(raw, dict):
        raise errors.bad_request("deleteOptions must be an object")
    policy = raw.get("propagationPolicy")
    if policy not in (None, "Background", "Foreground", "Orphan"):
        raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}"')
    orphan = raw.get("orphanDependents")
    if orphan is True and not policy:
        policy = "Orphan"
    dry_run = raw.get("dryRun") or []
    if any(v != "All" for v in dry_run):
        raise errors.bad_request('dryRun: Unsupported value: only "All" is supported')
    pre = raw.get("preconditions") or {}
    grace = raw.get("gracePeriodSeconds")
    return DeleteOptions(
        propagation_policy=policy,
        grace_period_seconds=int(grace) if grace is not None else None,
        precondition_uid=pre.get("uid"),
        precondition_rv=pre.get("resourceVersion"),
        dry_run=bool(dry_run),
        orphan_dependents=orphan if isinstance(orphan, bool) else None,
    )


def _can_ignore_pdb(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or _deleting(pod)


def _should_enforce_resource_version(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not (phase in ("Succeeded", "Failed") or _deleting(pod))


def _add_condition_and_delete(
    api: Api, rt: ResourceType, namespace: str, name: str, options: DeleteOptions
) -> None:
    """``addConditionAndDeletePod``: mark the pod DisruptionTarget, then delete it."""
    if not options.dry_run:
        pod = api.store.get(rt.storage_key, namespace, name)
        if pod is None:
            raise errors.not_found(rt.plural, rt.group, name)
        meta = _meta(pod)
        if options.precondition_uid and options.precondition_uid != meta.get("uid"):
            raise errors.conflict(
                "Pod",
                "",
                name,
                f"the UID in the precondition ({options.precondition_uid}) does not match the UID in record "
                f"({meta.get('uid')}). The object might have been deleted and then recreated",
            )
        if options.precondition_rv and options.precondition_rv != meta.get("resourceVersion"):
            raise errors.conflict(
                "Pod",
                "",
                name,
                f"the ResourceVersion in the precondition ({options.precondition_rv}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
            )
        status = dict(pod.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(api.clock()),
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
        for i, cond in enumerate(conditions):
            if cond.get("type") == "DisruptionTarget":
                if cond.get("status") == "True":
                    condition["lastTransitionTime"] = cond.get("lastTransitionTime")
                conditions[i] = condition
                break
        else:
            conditions.append(condition)
        status["conditions"] = conditions
        updated = api.update(
            rt, namespace, name, {**pod, "status": status}, WriteOptions(), subresource="status"
        ).obj
        if options.precondition_rv:
            options = replace(options, precondition_rv=_meta(updated)["resourceVersion"])
    api.delete(rt, namespace, name, options)


def evict(api: Api, rt: ResourceType, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST pods/{name}/eviction: delete the pod unless a PodDisruptionBudget forbids it (``EvictionREST.Create``).

    Returns the ``Status`` the server answers 201 with; raises 404 (no such pod), 429 (the budget allows no
    disruption now), 500 (more than one budget matches the pod), 409 (preconditions).
    """
    kind = body.get("kind")
    if kind not in (None, "Eviction"):
        raise errors.bad_request(f"not a Eviction object: {kind}")
    meta = body.get("metadata") or {}
    if meta.get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    original = _eviction_options(body)
    pod = api.store.get(rt.storage_key, namespace, name)
    if pod is None:
        raise errors.not_found(rt.plural, rt.group, name)
    if _can_ignore_pdb(pod):
        options = original
        if _should_enforce_resource_version(pod) and not original.precondition_rv:
            options = replace(options, precondition_rv=_meta(pod)["resourceVersion"])
        _add_condition_and_delete(api, rt, namespace, name, options)
        return _ok_status(201)

    pdbs = [
        pdb
        for pdb in api.store.items(PDBS, namespace)
        if _matches_quietly((pdb.get("spec") or {}).get("selector"), _meta(pod).get("labels") or {})
    ]
    if len(pdbs) > 1:
        raise _StatusError(
            500,
            "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    update_options = False
    pdb_name = ""
    if pdbs:
        pdb = pdbs[0]
        pdb_name = _meta(pdb)["name"]
        status = pdb.get("status") or {}
        spec = pdb.get("spec") or {}
        if not is_pod_ready(pod) and (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or (
                int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0)
                and int(status.get("desiredHealthy") or 0) > 0
            )
        ):
            update_options = True
        else:
            _check_and_decrement(api, pdb, name, original.dry_run)
    options = original
    if update_options:
        options = replace(options, precondition_rv=_meta(pod)["resourceVersion"])
    try:
        _add_condition_and_delete(api, rt, namespace, name, options)
    except ApiError as err:
        if err.code == 409 and update_options and not original.precondition_rv:
            raise _still_processing(pdb_name) from err
        raise
    return _ok_status(201)


def _matches_quietly(selector: Any, labels: dict[str, Any]) -> bool:
    try:
        return pdb_selector(selector).matches(labels)
    except PdbError:
        return False  # an invalid selector matches nothing


def _check_and_decrement(api: Api, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    """``checkAndDecrement``: take one disruption from the budget, recording the pod as disrupted."""
    meta = _meta(pdb)
    name = meta["name"]
    status = dict(pdb.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _still_processing(name)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden("poddisruptionbudget", "policy", name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            "poddisruptionbudget",
            "policy",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many_requests(
            _CANNOT_EVICT,
            0,
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods and has "
            f"{int(status.get('currentHealthy') or 0)} currently",
        )
    status["disruptionsAllowed"] = allowed - 1
    now = rfc3339(api.clock())
    if allowed - 1 == 0:
        conditions = [dict(c) for c in status.get("conditions") or []]
        _set_condition(conditions, _disruption_condition(0, int(status.get("observedGeneration") or 0)), now)
        status["conditions"] = conditions
    if dry_run:
        return
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
    rt = api.resource("policy/v1", "PodDisruptionBudget")
    api.update(
        rt, meta.get("namespace"), name, {**pdb, "status": status}, WriteOptions(), subresource="status"
    )

"""PartitioningPlan controller: one NodePartitioning per selected node, admitted out of Pending under limits.

A :class:`~aiplane.kube.shape.Shape` (``PlanController``, run by ``Shaped``). The decision is
:func:`aiplane.controllers.partitioning.plan_decide.decide` (pure; read its module docstring, and
``admission``'s for the admission contract)::

    observe   plan, Nodes, PartitioningProfiles and *all* NodePartitionings, from informer caches,
              overlaid with this controller's own writes the caches have not shown yet (Expectations),
              fed per event into the plan's PlanIndex (plan_index: only what changed is recomputed)
    decide    selection → desired_node_partitionings / stale_node_partitionings (of the nodes that
              changed) → revoke → admit_from, on the view those child writes leave (the index equals
              the from-scratch select_nodes / rollup, a property test holds them together)
    act       through the ChildWriter (overlay keys ``NodePartitioning//name``): server-side apply of
              new or changed NodePartitionings (field manager FIELD_MANAGER, never carrying the
              admission annotation); delete stale ones (uid precondition); merge patches of the
              admission annotation carrying the resourceVersion they decided on (a second writer,
              field manager ADMISSION_FIELD_MANAGER, so an apply can never drop an admission)
    report    ``status_of`` the index as the writes left it; /status merge patch with the plan's
              resourceVersion through ``StatusWriter.write_keys``, only when it changed; Events on
              transitions a human cares about

Why the pieces are the way they are:

* **One admitting actor.** The plan controller is the only place a node leaves Pending, so the limits
  hold as long as *this* controller never decides on a view that hides its own admissions. The work
  queue never runs one plan concurrently with itself, and the controller runs a single worker so two
  plans never interleave either: together with the shared overlay below, the cross-plan conflict
  check then sees every NodePartitioning another plan has just created (a per-process guarantee;
  leader election keeps it to one process). Plans are few and a reconcile is cheap, so one worker
  is not a bottleneck.
* **Expectations.** After a write the informer lags behind; deciding on the lagging cache could admit
  the same capacity twice. :class:`Expectations` keeps the object each write returned and serves it
  instead of the cached one until the cache shows a resourceVersion that does not predate the write.
  Admission and revocation are decided only when the view of *every* child of the plan is exact —
  straight from the cache, or from a chain of *conditional* writes starting at a cached version —
  because only then is every version between the cache and our latest write one we wrote ourselves,
  and only a complete view keeps the node-name order of admission deterministic. After creating or
  re-applying a NodePartitioning (unconditional writes) the plan admits nothing in that reconcile;
  the watch event of that very write brings it back as soon as the cache shows it. ``decide``
  foresees this (and what its deletes leave: gone, or terminating when a finalizer holds the child),
  so one observe → decide → act → report pass admits exactly what deciding again after the writes
  would; ``act`` checks the deletes' outcome and admits nothing on a prediction they did not bear
  out (a finalizer the cache did not show yet), asking to look again instead.
* **Zero writes at steady state.** Every write is guarded by a pure "does it differ" check
  (``np_needs_update``, ``stale_node_partitionings`` skipping objects already being deleted,
  ``plan_status``'s ``changed``, ``admit``/``revoke`` returning nothing), and ``lastSyncTime`` moves
  only with another change, so re-reconciling a stable plan writes nothing. The controller never asks
  for a timed requeue: nothing in a plan waits on the clock.
* **Errors.** API errors are raised (the runtime requeues with backoff); a conflict or a vanished
  object is an expected race and asks for a rate-limited requeue without an error log. Nothing here
  turns an API error into a Failed phase.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.memo import ViewMemo
from aiplane.apimachinery.meta import deep_get
from aiplane.controllers.partitioning.plan_decide import (
    NODE_PARTITIONING_KIND,
    NODES_EXCLUDED,
    PAUSED,
    PLAN_READY,
    ROLLOUT_COMPLETED,
    ROLLOUT_DEGRADED,
    PlanDecision,
    PlanObserved,
    admission_patch,
    decide,
    plan_view,
    revocation_patch,
)
from aiplane.controllers.partitioning.plan_index import PlanIndex, build_index, index_key
from aiplane.controllers.partitioning.plan_status import status_of
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    NodeView,
    PlanView,
    ProfileView,
    node_partitioning_view,
    node_view,
    profile_view,
)
from aiplane.controllers.partitioning.vocabulary import RETRY_BACKOFF_CAP, STALE_RECHECK
from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.client import KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import (
    Controller,
    Request,
    Result,
    event_source_for,
    field_manager_for,
    labels_changed,
)
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer, all_fresh
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import NODES
from aiplane.kube.shape import Shaped
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions
from aiplane.kube.status import transition_events as status_events

__all__ = [
    "ADMISSION_FIELD_MANAGER",
    "COMPONENT",
    "FIELD_MANAGER",
    "PlanController",
    "setup",
    "setup_controller",
    "transition_events",
]

Obj = dict[str, Any]

#: Server-side apply manager of the NodePartitionings' spec, plan label and owner reference.
#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "partitioningplan"
FIELD_MANAGER: Final = field_manager_for(NAME)
#: Manager of the admission annotation (merge patches). Kept apart from :data:`FIELD_MANAGER` so an
#: apply, which deletes fields its manager owns but omits, can never remove an admission.
ADMISSION_FIELD_MANAGER: Final = "aiplane-partitioningplan-admission"
#: The kind of the plans (their keys in the overlay of our status writes).
PLAN_KIND: Final = "PartitioningPlan"
#: The Event source component.
COMPONENT: Final = event_source_for(NAME)

log = structlog.get_logger("aiplane.partitioningplan")


# --- events --------------------------------------------------------------------------------------


#: Status flips a human acts on (the status is written only when it changed, so each fires once):
#: the plan became invalid or blocked for a new reason (Warning, the PlanReady reason:
#: PlanningFailed, NodeConflict, InvalidSelector, ProfileNotReady), nodes were excluded by a
#: targetSelector, the first node failed, the rollout completed, pause and resume.
TRANSITION_EVENTS: Final = (
    ConditionEvent(PLAN_READY, "False", WARNING, on_reason_change=True),
    ConditionEvent(NODES_EXCLUDED, "True", NORMAL, reason="NodesExcluded"),
    ConditionEvent(ROLLOUT_DEGRADED, "True", WARNING, reason="RolloutDegraded"),
    ConditionEvent(ROLLOUT_COMPLETED, "True", NORMAL, reason="RolloutCompleted"),
    ConditionEvent(PAUSED, "True", NORMAL, reason="Paused"),
    ConditionEvent(
        PAUSED,
        "False",
        NORMAL,
        reason="Resumed",
        message="Plan resumed: new node operations may start",
        from_absent=False,
    ),
)


def transition_events(
    before: Mapping[str, Any] | None, after: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events a plan status change deserves (:data:`TRANSITION_EVENTS`)."""
    return status_events(TRANSITION_EVENTS, before, after)


# --- the controller ------------------------------------------------------------------------------


def _np_key(name: str) -> str:
    """The expectation key of a NodePartitioning (cluster-scoped): the ``ChildWriter``'s scheme."""
    return expectation_key(NODE_PARTITIONING_KIND, None, name)


def _plan_key(name: str) -> str:
    return expectation_key(PLAN_KIND, None, name)


#: ``_np_key(name)[_NP_KEY_PREFIX:]`` is ``name``.
_NP_KEY_PREFIX: Final = len(_np_key(""))


class PlanController:
    """The plan's four steps (:class:`~aiplane.kube.shape.Shape`); what is shared across reconciles is
    the overlay of our writes and each plan's index."""

    def __init__(
        self,
        client: KubeClient,
        plans: Informer,
        nodes: Informer,
        profiles: Informer,
        nps: Informer,
        recorder: EventRecorder,
        clock: Clock,
    ) -> None:
        self.client = client
        self.plans = plans
        self.nodes = nodes
        self.profiles = profiles
        self.nps = nps
        self.recorder = recorder
        self.clock = clock
        self.status = StatusWriter(client, kinds.PARTITIONINGPLANS, FIELD_MANAGER)
        self.plan_writes = Expectations()
        self.np_writes = Expectations()
        #: The NodePartitionings' spec, plan label and owner reference (server-side apply), deletes.
        self.children = ChildWriter(client, FIELD_MANAGER, self.np_writes)
        #: The admission annotation, under its own field manager (see ADMISSION_FIELD_MANAGER).
        self.admissions = ChildWriter(client, ADMISSION_FIELD_MANAGER, self.np_writes)
        self.profile_views = ViewMemo(profile_view)
        # Each plan's index, and per plan the Nodes and NodePartitionings changed since it was fed:
        # a reconcile costs O(changed), not O(fleet) (plan_index's module docstring).
        self.indexes: dict[str, PlanIndex] = {}
        self._dirty: dict[str, tuple[set[str], set[str]]] = {}
        self._node_memo: dict[str, NodeView] = {}
        self._np_memo: dict[str, NodePartitioningView] = {}
        #: Indexes built from the whole caches so far: what a test counts.
        self.rebuilds = 0
        #: Plans whose last act found the view its writes left other than decided: look again.
        self._again: set[str] = set()
        nps.add_handler(on_delete=lambda obj: self.np_writes.deleted(_np_key(objects.name(obj)), obj))
        nps.add_handler(
            on_add=self._np_event,
            on_update=lambda _old, new: self._np_event(new),
            on_delete=self._np_event,
        )
        nodes.add_handler(
            on_add=self._node_event,
            on_update=lambda old, new: self._node_event(new, old),
            on_delete=self._node_deleted,
        )
        plans.add_handler(on_delete=lambda obj: self.plan_writes.deleted(_plan_key(objects.name(obj)), obj))

    # --- observe ----------------------------------------------------------------------------------

    def plan(self, name: str) -> Obj | None:
        return self.plan_writes.view(_plan_key(name), self.plans.get(name))

    async def observe(self, request: Request) -> PlanObserved | None:
        """The plan through the overlay of our status writes, its index fed with what changed since
        the last reconcile, and which children's views rest on unconditional writes of ours."""
        name = request.name
        plan = self.plan(name)
        if plan is None or objects.is_deleting(plan):
            # Deleted: the garbage collector removes the NodePartitionings (owner references), and
            # their finalizers restore nodes mid-operation. Nothing to admit for a plan going away.
            self.indexes.pop(name, None)
            self._dirty.pop(name, None)
            self._again.discard(name)
            return None
        view = plan_view(plan)
        profiles = {p.name: p for p in self.profile_views.all(self.profiles.list())}
        index = self._index(view, profiles)
        return PlanObserved(
            plan=plan,
            view=view,
            profiles=profiles,
            index=index,
            selection=index.selection(),
            unchecked=tuple(sorted(index.unchecked)),
            fresh=all_fresh((self.plans, self.nodes, self.nps)),
            inexact=self._inexact(),
        )

    def _inexact(self) -> frozenset[str]:
        """Children whose view is not exact (only names with an outstanding write can be)."""
        written = self.np_writes
        pending = written.keys()
        return frozenset(key[_NP_KEY_PREFIX:] for key in pending if not written.exact(key))

    def _index(self, view: PlanView, profiles: Mapping[str, ProfileView]) -> PlanIndex:
        """The plan's index, fed with what changed since the last reconcile; rebuilt from the caches
        when the plan's spec or a profile changed (or on the first reconcile)."""
        key = index_key(view, profiles)
        index = self.indexes.get(view.name)
        if index is not None and index.key == key:
            self._sync(index)
            return index
        dirty = self._dirty.setdefault(view.name, (set(), set()))
        dirty[0].clear()
        dirty[1].clear()
        index = build_index(
            view,
            profiles,
            key,
            ((objects.name(n), self._node_view(objects.name(n), n)) for n in self.nodes.list()),
            ((objects.name(np), self._np_view(objects.name(np), np)) for np in self.node_partitionings()),
        )
        self.indexes[view.name] = index
        self.rebuilds += 1
        return index

    def _sync(self, index: PlanIndex) -> None:
        """Feed ``index`` the Nodes and NodePartitionings that changed since it was last fed, and every
        NodePartitioning with a write of ours the cache may not show yet (read through the overlay)."""
        nodes, nps = self._dirty.setdefault(index.plan.name, (set(), set()))
        for name in nodes:
            obj = self.nodes.get(name)
            index.put_node(name, self._node_view(name, obj) if obj is not None else None)
        nodes.clear()
        keys = self.np_writes.keys()
        pending = [key[_NP_KEY_PREFIX:] for key in keys]
        for name in nps.union(pending) if pending else nps:
            obj = self.np_writes.view(_np_key(name), self.nps.get(name))
            if obj is None:
                self._np_memo.pop(name, None)
                index.put_np(name, None)
                continue
            seen = index.children.get(name) or index.others.get(name)
            if seen is None or seen.obj is not obj:
                index.put_np(name, self._np_view(name, obj))
        nps.clear()

    def _node_view(self, name: str, obj: Obj) -> NodeView:
        seen = self._node_memo.get(name)
        if seen is not None and seen.obj is obj:
            return seen
        view = self._node_memo[name] = node_view(obj)
        return view

    def _np_view(self, name: str, obj: Obj) -> NodePartitioningView:
        seen = self._np_memo.get(name)
        if seen is not None and seen.obj is obj:
            return seen
        view = self._np_memo[name] = node_partitioning_view(obj)
        return view

    def _node_event(self, obj: Obj, old: Obj | None = None) -> None:
        # Selection reads a Node's labels only: heartbeats and cordons change nothing here.
        if old is not None and objects.labels(old) == objects.labels(obj):
            return
        name = objects.name(obj)
        for nodes, _ in self._dirty.values():
            nodes.add(name)

    def _node_deleted(self, obj: Obj) -> None:
        self._node_memo.pop(objects.name(obj), None)
        self._node_event(obj)

    def _np_event(self, obj: Obj) -> None:
        name = objects.name(obj)
        for _, nps in self._dirty.values():
            nps.add(name)

    def node_partitionings(self) -> list[Obj]:
        """Every NodePartitioning, as cached, overlaid with our writes the cache does not show yet."""
        # Cluster-scoped: the cache key is the name. Only names with an outstanding write need the
        # overlay; the rest (nearly all, at scale) are taken as cached.
        get = self.nps.get
        names = self.nps.keys()
        keys = self.np_writes.keys()
        pending = {key[_NP_KEY_PREFIX:] for key in keys}
        views = []
        for name in sorted(pending.union(names) if pending else names):
            view = self.np_writes.view(_np_key(name), get(name)) if name in pending else get(name)
            if view is not None:
                views.append(view)
        return views

    # --- decide -----------------------------------------------------------------------------------

    def decide(self, observed: PlanObserved, now: datetime) -> PlanDecision:
        return decide(observed, now)

    # --- act: API errors propagate; a conflict or NotFound is retried quietly by the runtime --------

    async def act(self, observed: PlanObserved, decision: PlanDecision) -> None:
        """The children's writes, then (when decided, and the deletes left the view predicted) the
        revocations and admissions; the index is fed each write's result."""
        index, plan = observed.index, observed.plan
        index.unchecked.clear()
        try:
            for apply in decision.applies:
                live = apply.live.obj if apply.live is not None else None
                before = live if live is not None and objects.name(live) == objects.name(apply.body) else None
                await self.children.apply(kinds.NODEPARTITIONINGS, before, apply.body)
            deleted: list[str] = []
            for delete in decision.deletes:
                np = delete.np
                if await self.children.delete(kinds.NODEPARTITIONINGS, np.obj, record_gone=True):
                    deleted.append(f"{np.name} (node {np.node_name})")
        except BaseException:
            index.unchecked.update(observed.unchecked)  # not done: look again next time
            raise
        finally:
            self._sync(index)
        if deleted:
            self.recorder.emit(
                plan, NORMAL, "NodePartitioningDeleted", f"Removed NodePartitioning {', '.join(deleted)}"
            )
        if not self._as_predicted(observed, decision):
            self._again.add(observed.view.name)
            return
        if decision.admission:
            await self._admit(plan, index, decision)

    def _as_predicted(self, observed: PlanObserved, decision: PlanDecision) -> bool:
        """Did the child writes leave the view ``decide`` predicted (deletes gone or terminating as
        foreseen; applied children inexact)? Otherwise nothing is admitted on that prediction."""
        index = observed.index
        for delete in decision.deletes:
            if (index.children.get(delete.np.name) is None) != delete.gone:
                return False
        # An apply the server found identical records nothing: the view may be exact after all, and
        # no watch event would bring the plan back to admit.
        return not decision.applies or decision.stale or not self._exact(index)

    def _exact(self, index: PlanIndex) -> bool:
        """Is the view of every child the plan keeps (one per node) exact? Only names with an
        outstanding write can be inexact."""
        for name in self._inexact():
            np = index.children.get(name)
            if np is not None and index.kept.get(np.node_name) is np:
                return False
        return True

    async def _admit(self, plan: Obj, index: PlanIndex, decision: PlanDecision) -> None:
        for np in decision.revoke:
            await self.admissions.patch(kinds.NODEPARTITIONINGS, np.obj, revocation_patch(np))
        self._sync(index)
        try:
            for np in decision.admit:
                await self.admissions.patch(kinds.NODEPARTITIONINGS, np.obj, admission_patch(np))
        finally:
            self._sync(index)
        if decision.admit:
            admitted = [np.node_name for np in decision.admit]
            self.recorder.emit(
                plan,
                NORMAL,
                "NodesAdmitted",
                f"Admitted {len(admitted)} node(s) to start partitioning: {', '.join(admitted)}",
            )

    # --- report -----------------------------------------------------------------------------------

    async def report(self, observed: PlanObserved, decision: PlanDecision) -> Result | None:
        """The status as the writes left the index, through the status writer when it changed."""
        plan, index, now = observed.plan, observed.index, decision.now
        again = observed.view.name in self._again
        self._again.discard(observed.view.name)
        previous = plan.get("status")
        stamped = index.node_statuses(
            previous if isinstance(previous, Mapping) else {}, objects.resource_version(plan), now
        )
        status, changed = status_of(index.rollup(observed.view), now, previous, stamped=stamped)
        if not changed:
            index.written(objects.resource_version(plan), stamped[0])
        else:
            written = await self._write_status(plan, status, list_changed=stamped[1])
            index.written(objects.resource_version(written), stamped[0])
            emit_transitions(self.recorder, plan, TRANSITION_EVENTS, plan.get("status"), status)
        if decision.stale:
            return Result(requeue_after=STALE_RECHECK)
        return Result(requeue=True) if again else None

    async def _write_status(self, plan: Obj, status: Obj, *, list_changed: bool) -> Obj:
        """The status keys that changed, through the status writer, guarded by the plan's resourceVersion.

        ``nodeStatuses`` (one entry per node) goes in only when ``list_changed`` says so: the index
        knows which entries changed, and comparing a thousand entries to find out again (as
        ``StatusWriter.write`` would) was a fleet-wide cost on every status write.
        """
        result = await self.status.write_keys(plan, status, hints={"nodeStatuses": list_changed})
        self.plan_writes.wrote(_plan_key(objects.name(plan)), plan, result, conditional=True)
        return result


# --- wiring --------------------------------------------------------------------------------------


def _plans_using_profile(plans: Informer) -> Callable[[Obj], Iterable[Request]]:
    def mapper(profile: Obj) -> Iterable[Request]:
        name = objects.name(profile)
        found = []
        for plan in plans.list():
            rules = deep_get(plan, "spec.rules")
            if isinstance(rules, list) and any(
                isinstance(rule, Mapping) and deep_get(rule, "profileRef.name") == name for rule in rules
            ):
                found.append(Request(None, objects.name(plan)))
        return found

    return mapper


def _every_plan(plans: Informer) -> Callable[[Obj], Iterable[Request]]:
    def mapper(_: Obj) -> Iterable[Request]:
        return [Request(None, key) for key in list(plans.keys())]

    return mapper


def _np_identity_changed(old: Obj, new: Obj) -> bool:
    """Only what other plans' conflict checks read of a NodePartitioning: its node and its plan."""
    return bool(
        deep_get(old, "spec.nodeName") != deep_get(new, "spec.nodeName")
        or deep_get(old, "spec.planRef") != deep_get(new, "spec.planRef")
        or deep_get(old, "metadata.ownerReferences") != deep_get(new, "metadata.ownerReferences")
    )


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("infrastructure.silogen.ai", ("partitioningplans", "partitioningprofiles"), READ),
    Permission("infrastructure.silogen.ai", ("partitioningplans/status",), ("patch",)),
    # Owner of its NodePartitionings (blockOwnerDeletion, OwnerReferencesPermissionEnforcement).
    Permission("infrastructure.silogen.ai", ("partitioningplans/finalizers",), ("update",)),
    # Children: server-side apply (may create), admission patches, deletes.
    Permission(
        "infrastructure.silogen.ai",
        ("nodepartitionings",),
        ("list", "watch", "create", "patch", "delete"),
    ),
    Permission("", ("nodes",), READ),
    EVENTS_WRITE,
)


def setup_controller(manager: Manager) -> Controller:
    """Build the controller on the manager's client, shared informers and clock (not yet added).

    Sources: the plans themselves (no predicate: a status-only event costs a write-free reconcile,
    and a status someone else overwrote is put back); the plan's own NodePartitionings (their phases
    feed admission and the summary); creates/deletes and node/plan changes of *any*
    NodePartitioning for every plan (the cross-plan conflict check); Node creates, deletes and label
    changes for every plan (selection reads labels only, so heartbeats are filtered out); profiles
    for the plans that reference them (a Ready flip or an edit changes what may run, and the hash).
    """
    client = manager.client
    informers = manager.informers
    plans = informers.informer(kinds.PARTITIONINGPLANS)
    nodes = informers.informer(NODES)
    profiles = informers.informer(kinds.PARTITIONINGPROFILES)
    nps = informers.informer(kinds.NODEPARTITIONINGS)
    shape = PlanController(
        client,
        plans,
        nodes,
        profiles,
        nps,
        manager.recorder(NAME),
        manager.clock,
    )
    return (
        Controller.build(NAME)
        .for_(kinds.PARTITIONINGPLANS)
        .owns(kinds.NODEPARTITIONINGS)
        .watches(kinds.NODEPARTITIONINGS, _every_plan(plans), predicates=[_np_identity_changed])
        .watches(NODES, _every_plan(plans), predicates=[labels_changed])
        .watches(kinds.PARTITIONINGPROFILES, _plans_using_profile(plans))
        .workers(1, fixed="the plan controller is the single admission point (one admitting actor)")
        .max_backoff(RETRY_BACKOFF_CAP)
        .reconcile(Shaped(shape, manager.clock))
    )


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers partitioningplan`` (also part of ``all``)."""
    manager.add_controller(setup_controller(manager))

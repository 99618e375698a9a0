"""PartitioningPlan controller: one NodePartitioning per selected node, admitted out of Pending under limits.

All decisions live in :mod:`aiplane.controllers.partitioning.plan_logic` (pure; read its module
docstring, in particular the admission contract). This module observes, acts and reports::

    observe   plan, Nodes, PartitioningProfiles and *all* NodePartitionings, from informer caches,
              overlaid with this controller's own writes the caches have not shown yet (Expectations)
    decide    select_nodes → desired_node_partitionings / stale_node_partitionings → revoke → admit
              → plan_status
    act       server-side apply of new or changed NodePartitionings (field manager FIELD_MANAGER,
              never carrying the admission annotation); delete stale ones (uid precondition); merge
              patches of the admission annotation carrying the resourceVersion they decided on (field
              manager ADMISSION_FIELD_MANAGER, so an apply can never drop an admission)
    report    /status merge patch with the plan's resourceVersion, only when ``plan_status`` says it
              changed; Events on transitions a human cares about

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
  the watch event of that very write brings it back as soon as the cache shows it.
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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import structlog

from aiplane.apimachinery.conditions import get_condition
from aiplane.apimachinery.meta import deep_get, strip_managed_fields
from aiplane.controllers.partitioning.plan_logic import (
    API_VERSION,
    NODE_PARTITIONING_KIND,
    NODES_EXCLUDED,
    PAUSED,
    PLAN_READY,
    ROLLOUT_COMPLETED,
    ROLLOUT_DEGRADED,
    admission_patch,
    admit,
    children_by_node,
    desired_node_partitionings,
    node_partitioning_views,
    node_views,
    np_needs_update,
    plan_status,
    plan_view,
    profile_views,
    revocation_patch,
    revoke,
    select_nodes,
    stale_node_partitionings,
)
from aiplane.controllers.partitioning.profile import profiles_resource
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.controller import Controller, Request, Result, labels_changed
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.informer import Informer, object_rv
from aiplane.kube.resources import NODES, Resource, resource_for

if TYPE_CHECKING:
    from aiplane.kube.manager import Manager

__all__ = [
    "ADMISSION_FIELD_MANAGER",
    "COMPONENT",
    "FIELD_MANAGER",
    "Expectations",
    "PlanReconciler",
    "node_partitionings_resource",
    "plans_resource",
    "setup",
    "setup_controller",
    "transition_events",
]

Obj = dict[str, Any]

#: Server-side apply manager of the NodePartitionings' spec, plan label and owner reference.
FIELD_MANAGER: Final = "aiplane-partitioningplan"
#: Manager of the admission annotation (merge patches). Kept apart from :data:`FIELD_MANAGER` so an
#: apply, which deletes fields its manager owns but omits, can never remove an admission.
ADMISSION_FIELD_MANAGER: Final = "aiplane-partitioningplan-admission"
#: The Event source component.
COMPONENT: Final = "partitioningplan-controller"

log = structlog.get_logger("aiplane.partitioningplan")


def plans_resource() -> Resource:
    return resource_for(API_VERSION, "PartitioningPlan")


def node_partitionings_resource() -> Resource:
    return resource_for(API_VERSION, NODE_PARTITIONING_KIND)


def _name(obj: Mapping[str, Any]) -> str:
    name = deep_get(obj, "metadata.name")
    return name if isinstance(name, str) else ""


def _uid(obj: Mapping[str, Any] | None) -> str:
    uid = deep_get(obj, "metadata.uid") if obj is not None else None
    return uid if isinstance(uid, str) else ""


# --- expectations --------------------------------------------------------------------------------


@dataclass
class _Expected:
    stale: set[str]  # resourceVersions that predate our latest write ("" = the object was absent)
    obj: Obj | None  # what our latest write returned; None: deleted
    exact: bool  # every write since the cached version was conditional on the version it read


class Expectations:
    """This controller's own writes, served in place of cached objects until the informer shows them.

    controller-runtime's "expectations", by resourceVersion: after a write based on version ``v``
    returned version ``w``, the informer will show ``v`` (stale) and later ``w`` or something newer.
    Versions are opaque, so they are only compared for equality: the versions known to predate the
    latest write are remembered, and as soon as the cache shows any other version (or a delete event
    for the object arrives) the entry is dropped and the cache is trusted again. Entries are checked
    lazily whenever a key is viewed, so the map holds only writes the cache has not caught up with.
    """

    def __init__(self) -> None:
        self._items: dict[str, _Expected] = {}

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        return list(self._items)

    def view(self, key: str, cached: Obj | None) -> Obj | None:
        """What to decide on for ``key``: our latest write while the cache predates it, else the cache."""
        expected = self._items.get(key)
        if expected is None:
            return cached
        if (object_rv(cached) if cached is not None else "") in expected.stale:
            return expected.obj
        del self._items[key]
        return cached

    def exact(self, key: str) -> bool:
        """Is the view of ``key`` known to be the server's current object, as far as we wrote it?"""
        expected = self._items.get(key)
        return expected is None or expected.exact

    def wrote(
        self, key: str, before: Mapping[str, Any] | None, after: Obj | None, *, conditional: bool
    ) -> None:
        """Record a successful write of ``key`` that was based on ``before`` and returned ``after``.

        ``conditional``: the write carried ``before``'s resourceVersion (or, for a create, could only
        succeed on an absent object), so no foreign version can lie between the two.
        """
        expected = self._items.get(key)
        before_rv = object_rv(before) if before is not None else ""
        after_rv = object_rv(after) if after is not None else None
        if expected is None and after_rv == before_rv:
            return  # a no-op write: the server kept the version, there is nothing to wait for
        stale = set(expected.stale) if expected is not None else set()
        stale.add(before_rv)
        if after_rv is not None:
            stale.discard(after_rv)
        exact = conditional and (expected is None or expected.exact)
        self._items[key] = _Expected(stale, strip_managed_fields(after) if after else None, exact)

    def deleted(self, key: str, obj: Mapping[str, Any]) -> None:
        """The informer saw ``obj`` deleted: forget what we expected of it (not of a newer incarnation)."""
        expected = self._items.get(key)
        if expected is not None and (expected.obj is None or _uid(expected.obj) == _uid(obj)):
            del self._items[key]

    def forget(self, key: str) -> None:
        self._items.pop(key, None)


# --- events --------------------------------------------------------------------------------------


def _conditions(status: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    raw = (status or {}).get("conditions")
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def transition_events(
    before: Mapping[str, Any] | None, after: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events a status change deserves, from old to new status.

    Only flips a human acts on: the plan became invalid or blocked for a new reason (Warning, the
    PlanReady reason: PlanningFailed, NodeConflict, ObservationFailed, ProfileNotReady), nodes were
    excluded by a targetSelector, the first node failed, the rollout completed, pause and resume.
    The status is written only when it changed, so each transition yields its Event once.
    """
    old, new = _conditions(before), _conditions(after)
    events: list[tuple[str, str, str]] = []

    def pair(type_: str) -> tuple[Mapping[str, Any], Mapping[str, Any] | None] | None:
        now = get_condition(new, type_)
        return None if now is None else (now, get_condition(old, type_))

    found = pair(PLAN_READY)
    if found is not None:
        now, was = found
        if now.get("status") == "False" and (
            was is None or was.get("status") != "False" or was.get("reason") != now.get("reason")
        ):
            events.append((WARNING, str(now.get("reason")), str(now.get("message"))))
    # Conditions whose turning True is worth an Event of the same reason.
    for condition, type_, reason in (
        (NODES_EXCLUDED, NORMAL, "NodesExcluded"),
        (ROLLOUT_DEGRADED, WARNING, "RolloutDegraded"),
        (ROLLOUT_COMPLETED, NORMAL, "RolloutCompleted"),
    ):
        found = pair(condition)
        if found is not None:
            now, was = found
            if now.get("status") == "True" and (was is None or was.get("status") != "True"):
                events.append((type_, reason, str(now.get("message"))))
    found = pair(PAUSED)
    if found is not None:
        now, was = found
        if now.get("status") == "True" and (was is None or was.get("status") != "True"):
            events.append((NORMAL, "Paused", str(now.get("message"))))
        elif now.get("status") == "False" and was is not None and was.get("status") == "True":
            events.append((NORMAL, "Resumed", "Plan resumed: new node operations may start"))
    return events


# --- the reconciler ------------------------------------------------------------------------------


class _RaceError(Exception):
    """An expected race (conflict, object gone): requeue with backoff, no error log."""


def _raced(exc: ApiError) -> bool:
    return exc.conflict or exc.not_found


class PlanReconciler:
    """Observe → decide → act → report for one plan; state shared across reconciles is the overlay."""

    def __init__(
        self,
        client: KubeClient,
        plans: Informer,
        nodes: Informer,
        profiles: Informer,
        nps: Informer,
        recorder: EventRecorder,
        clock: Callable[[], datetime],
    ) -> None:
        self.client = client
        self.plans = plans
        self.nodes = nodes
        self.profiles = profiles
        self.nps = nps
        self.recorder = recorder
        self.clock = clock
        self.plan_writes = Expectations()
        self.np_writes = Expectations()
        nps.add_handler(on_delete=lambda obj: self.np_writes.deleted(_name(obj), obj))
        plans.add_handler(on_delete=lambda obj: self.plan_writes.deleted(_name(obj), obj))

    # --- observe ----------------------------------------------------------------------------------

    def plan(self, name: str) -> Obj | None:
        return self.plan_writes.view(name, self.plans.get(name))

    def node_partitionings(self) -> list[Obj]:
        """Every NodePartitioning, as cached, overlaid with our writes the cache does not show yet."""
        cached = {_name(np): np for np in self.nps.list()}
        views = []
        for name in sorted(set(cached) | set(self.np_writes.keys())):
            view = self.np_writes.view(name, cached.get(name))
            if view is not None:
                views.append(view)
        return views

    # --- act --------------------------------------------------------------------------------------

    async def _apply(self, body: Obj, existing: Mapping[str, Any] | None) -> None:
        name = body["metadata"]["name"]
        try:
            result = await self.client.apply(
                node_partitionings_resource(), body, field_manager=FIELD_MANAGER, force=True
            )
        except ApiError as exc:
            if _raced(exc):
                raise _RaceError(f"apply NodePartitioning {name}: {exc}") from exc
            raise
        before = existing if existing is not None and _name(existing) == name else None
        self.np_writes.wrote(name, before, result, conditional=False)

    async def _delete(self, np: Mapping[str, Any]) -> bool:
        name = _name(np)
        try:
            result = await self.client.delete(
                node_partitionings_resource(), name, preconditions={"uid": _uid(np)}
            )
        except ApiError as exc:
            if exc.not_found:
                self.np_writes.wrote(name, np, None, conditional=False)
                return False
            if exc.conflict:
                raise _RaceError(f"delete NodePartitioning {name}: {exc}") from exc
            raise
        terminating = result.get("kind") == NODE_PARTITIONING_KIND and deep_get(
            result, "metadata.deletionTimestamp"
        )
        self.np_writes.wrote(name, np, result if terminating else None, conditional=False)
        return True

    async def _annotate(self, np: Mapping[str, Any], patch: Obj) -> None:
        name = _name(np)
        try:
            result = await self.client.patch(
                node_partitionings_resource(), name, patch, field_manager=ADMISSION_FIELD_MANAGER
            )
        except ApiError as exc:
            if _raced(exc):
                raise _RaceError(f"admission of NodePartitioning {name}: {exc}") from exc
            raise
        self.np_writes.wrote(name, np, result, conditional=True)

    async def _write_status(self, plan: Obj, status: Obj) -> None:
        name = _name(plan)
        try:
            result = await self.client.patch(
                plans_resource(),
                name,
                {"metadata": {"resourceVersion": object_rv(plan)}, "status": status},
                subresource="status",
                field_manager=FIELD_MANAGER,
            )
        except ApiError as exc:
            if _raced(exc):
                raise _RaceError(f"status of PartitioningPlan {name}: {exc}") from exc
            raise
        self.plan_writes.wrote(name, plan, result, conditional=True)

    # --- reconcile --------------------------------------------------------------------------------

    async def __call__(self, request: Request) -> Result | None:
        try:
            await self.reconcile(request.name)
        except _RaceError as race:
            log.debug("requeue after a race", plan=request.name, reason=str(race))
            return Result(requeue=True)
        return None

    async def reconcile(self, name: str) -> None:
        plan = self.plan(name)
        if plan is None or deep_get(plan, "metadata.deletionTimestamp"):
            # Deleted: the garbage collector removes the NodePartitionings (owner references), and
            # their finalizers restore nodes mid-operation. Nothing to admit for a plan going away.
            return
        now = self.clock()
        view = plan_view(plan)
        profiles = profile_views(self.profiles.list())
        all_nps = node_partitioning_views(self.node_partitionings())
        selection = select_nodes(view, node_views(self.nodes.list()), profiles, all_nps)

        children = children_by_node(view, all_nps)
        for node, body in desired_node_partitionings(view, selection, profiles).items():
            existing = children.get(node)
            if np_needs_update(existing, body):
                await self._apply(body, existing.obj if existing is not None else None)
        by_name = {np.name: np for np in all_nps}
        deleted: list[str] = []
        for np_name_ in stale_node_partitionings(view, selection, all_nps):
            if await self._delete(by_name[np_name_].obj):
                deleted.append(f"{np_name_} (node {by_name[np_name_].node_name})")
        if deleted:
            self.recorder.emit(
                plan, NORMAL, "NodePartitioningDeleted", f"Removed NodePartitioning {', '.join(deleted)}"
            )

        # Admission and revocation decide on exact views only (see the module docstring). While
        # a child is inexact, the informer event of our own write will bring this plan back.
        all_nps = node_partitioning_views(self.node_partitionings())
        children = children_by_node(view, all_nps)
        if all(self.np_writes.exact(np.name) for np in children.values()):
            for node in revoke(view, children, eligible=selection.admissible):
                await self._annotate(children[node].obj, revocation_patch(children[node]))
                all_nps = node_partitioning_views(self.node_partitionings())
            children = children_by_node(view, all_nps)
            admitted = admit(view, children, eligible=selection.admissible)
            for node in admitted:
                await self._annotate(children[node].obj, admission_patch(children[node]))
            if admitted:
                self.recorder.emit(
                    plan,
                    NORMAL,
                    "NodesAdmitted",
                    f"Admitted {len(admitted)} node(s) to start partitioning: {', '.join(admitted)}",
                )
                all_nps = node_partitioning_views(self.node_partitionings())

        status, changed = plan_status(view, selection, all_nps, now, plan.get("status"))
        if not changed:
            return
        await self._write_status(plan, status)
        for type_, reason, message in transition_events(plan.get("status"), status):
            self.recorder.emit(plan, type_, reason, message)


# --- wiring --------------------------------------------------------------------------------------


def _plans_using_profile(plans: Informer) -> Callable[[Obj], Iterable[Request]]:
    def mapper(profile: Obj) -> Iterable[Request]:
        name = _name(profile)
        found = []
        for plan in plans.list():
            rules = deep_get(plan, "spec.rules")
            if isinstance(rules, list) and any(
                isinstance(rule, Mapping) and deep_get(rule, "profileRef.name") == name for rule in rules
            ):
                found.append(Request(None, _name(plan)))
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


def setup_controller(manager: Manager, *, clock: Callable[[], datetime] | None = None) -> Controller:
    """Build the controller on the manager's client and shared informers (not yet bound or added).

    Sources: the plans themselves (no predicate: a status-only event costs a write-free reconcile,
    and a status someone else overwrote is put back); the plan's own NodePartitionings (their phases
    feed admission and the summary); creates/deletes and node/plan changes of *any*
    NodePartitioning for every plan (the cross-plan conflict check); Node creates, deletes and label
    changes for every plan (selection reads labels only, so heartbeats are filtered out); profiles
    for the plans that reference them (a Ready flip or an edit changes what may run, and the hash).
    """
    client = manager.client
    informers = manager.informers
    plans = informers.informer(plans_resource())
    nodes = informers.informer(NODES)
    profiles = informers.informer(profiles_resource())
    nps = informers.informer(node_partitionings_resource())
    reconciler = PlanReconciler(
        client,
        plans,
        nodes,
        profiles,
        nps,
        EventRecorder(client, COMPONENT),
        clock or (lambda: datetime.now(UTC)),
    )
    return (
        Controller.build("partitioningplan")
        .for_(plans_resource())
        .owns(node_partitionings_resource())
        .watches(node_partitionings_resource(), _every_plan(plans), predicates=[_np_identity_changed])
        .watches(NODES, _every_plan(plans), predicates=[labels_changed])
        .watches(profiles_resource(), _plans_using_profile(plans))
        # One worker on purpose: see "One admitting actor" in the module docstring.
        .workers(1)
        .reconcile(reconciler)
    )


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers partitioningplan`` (also part of ``all``)."""
    controller = setup_controller(manager)
    controller.bind(
        manager.informers, observer=manager.metrics.controllers, queue_metrics=manager.metrics.workqueue
    )
    manager.add_controller(controller)

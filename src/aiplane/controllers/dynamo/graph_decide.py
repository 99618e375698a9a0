"""The DynamoGraphDeployment controller's decision (pure): what to write, and what the status says.

:func:`decide` takes one :class:`GraphObserved` (the graph, its DCDs, the claims it names, whether
the ServiceAccount of Dynamo's Planner service exists and LeaderWorkerSet is served) and returns a
:class:`GraphDecision`: the finalizer change, that ServiceAccount and the PVCs to create, each DCD
write (:func:`~.graph_sync.plan_dcd`), the stale DCDs to delete, and the status wanted once those
writes are done. Upstream's order (ai-dynamo/dynamo ``dynamographdeployment_controller.go``) is
kept: validation first (an invalid graph creates nothing), then the Planner service's account, the PVCs (a
missing claim stops before any DCD), then the DCDs.

A DCD the decision writes is judged, for the status, as the write will leave it (the #3567 fix
below): created, it has no status yet ("Reconciling"); updated, its new generation is not observed
by its controller yet.

The status part:

Upstream (ai-dynamo/dynamo ``internal/controller/dynamographdeployment_controller.go``; docs/dynamo.md)
reports ``status.state`` (``pending`` | ``successful`` | ``failed``) and one condition ``Ready``
whose reasons are ``all_resources_are_ready``, ``some_resources_are_not_ready``,
``failed_to_reconcile_the_resources`` and ``failed_to_handle_the_finalizer``. We keep those.

Where we depart from upstream, on purpose:

* **#3567 (premature ``successful`` during a rollout).** Upstream counted a DCD ready when its
  ``Available`` condition was True — also right after the DGD changed it, before the DCD controller
  had looked at the new spec. Here a DCD is ready only when ``Available=True`` was observed at the
  DCD's current ``metadata.generation`` *and* the DCD carries the spec this graph wants now (its
  ``nvidia.com/last-applied-hash`` and, when the graph owns them, its replicas).
* **``invalid_spec``.** A graph whose children the API server would reject (names too long, a
  Dynamo namespace conflict) is reported before anything is created, naming each field.
* **``status.readyServices``** (``"2/3"``) feeds ``kubectl get dgd``'s ``Ready-Services`` column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, set_condition
from aiplane.apimachinery.meta import has_finalizer, is_controlled_by
from aiplane.controllers.dynamo.graph import (
    desired_dcds,
    multinode_problem,
    node_count,
    services,
    stale_dcds,
    validate_graph,
)
from aiplane.controllers.dynamo.graph_sync import (
    DcdVerb,
    DcdWrite,
    WantedDcd,
    needs_planner_account,
    plan_dcd,
    plan_pvcs,
    planner_service_account,
    wanted_dcd,
)
from aiplane.controllers.dynamo.naming import ANNOTATION_LAST_APPLIED_HASH
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.queueing import REASON_PENDING
from aiplane.kube.children import after_write
from aiplane.kube.status import ConditionEvent, transition_events

__all__ = [
    "ANNOTATION_LAST_APPLIED_HASH",
    "MAX_MESSAGE",
    "REASON_ALL_READY",
    "REASON_FAILED",
    "REASON_FINALIZER",
    "REASON_INVALID",
    "REASON_NOT_READY",
    "STATE_FAILED",
    "STATE_PENDING",
    "STATE_SUCCESSFUL",
    "DcdView",
    "Failure",
    "GraphDecision",
    "GraphObserved",
    "GraphReport",
    "WantedDcd",
    "dcd_view",
    "decide",
    "graph_events",
    "not_ready_reason",
    "report_of",
    "status_of",
]

Obj = Mapping[str, Any]

#: The hash of what the DGD last wrote into a DCD (upstream's child-sync annotation).

CONDITION_READY: Final = "Ready"
CONDITION_AVAILABLE: Final = "Available"

STATE_PENDING: Final = "pending"
STATE_SUCCESSFUL: Final = "successful"
STATE_FAILED: Final = "failed"

REASON_ALL_READY: Final = "all_resources_are_ready"
REASON_NOT_READY: Final = "some_resources_are_not_ready"
REASON_FAILED: Final = "failed_to_reconcile_the_resources"
REASON_FINALIZER: Final = "failed_to_handle_the_finalizer"
REASON_INVALID: Final = "invalid_spec"
#: The Warning Event for a new cause holding the graph's pods (the DCD's own Event names its reason).
REASON_WAITING: Final = "PodsWaiting"

#: Condition messages are capped (the API allows 32 KiB; a human reads far less).
MAX_MESSAGE: Final = 4096


@dataclass(frozen=True)
class DcdView:
    """What the status needs of one observed DCD."""

    name: str
    generation: int
    controlled: bool  # controlled by this DGD (a DCD of the same name owned by someone else is not ours)
    deleting: bool
    applied_hash: str
    replicas: int | None
    available: str | None  # the Available condition's status; None when there is none
    available_reason: str
    available_generation: int | None
    #: ``QuotaPending: <the Available message>`` when the DCD waits for Kueue (the graph repeats it).
    quota_message: str = ""
    waiting_for: str = ""  # the DCD's status.waitingFor: what holds its pods


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dcd_view(dcd: Obj, owner_uid: str) -> DcdView:
    """Read one DCD (tolerating malformed objects)."""
    conditions = objects.status(dcd).get("conditions")
    available = get_condition(conditions if isinstance(conditions, list) else None, CONDITION_AVAILABLE)
    return DcdView(
        name=objects.name(dcd),
        generation=objects.generation(dcd) or 0,
        controlled=bool(owner_uid) and is_controlled_by(dcd, owner_uid),
        deleting=objects.is_deleting(dcd),
        applied_hash=str(objects.annotations(dcd).get(ANNOTATION_LAST_APPLIED_HASH) or ""),
        replicas=_int(objects.spec(dcd).get("replicas")),
        available=str(available.get("status")) if available is not None else None,
        available_reason=str((available or {}).get("reason") or ""),
        available_generation=_int((available or {}).get("observedGeneration")),
        quota_message=f"{REASON_PENDING}: {(available or {}).get('message') or ''}"
        if (available or {}).get("reason") == REASON_PENDING
        else "",
        waiting_for=str(objects.status(dcd).get("waitingFor") or ""),
    )


@dataclass(frozen=True)
class Failure:
    """Reconcile could not go on: the Ready reason and a message naming what to fix."""

    reason: str
    message: str


@dataclass(frozen=True)
class GraphReport:
    state: str
    reason: str
    message: str
    ready_services: str | None
    #: What holds the pods of the services that are not ready (each cause once), for ``waitingFor``.
    waiting_for: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == STATE_SUCCESSFUL


def _not_available_reason(view: DcdView) -> str:
    """A component waiting for Kueue says why, in Kueue's words; otherwise what holds its pods."""
    if view.quota_message:
        return view.quota_message
    why = view.available_reason or f"Available is {view.available}"
    return f"{why}, waiting for: {view.waiting_for}" if view.waiting_for else why


def not_ready_reason(wanted: WantedDcd, view: DcdView | None) -> str | None:
    """Why this DCD does not count as ready yet; ``None`` when it does (the #3567 fix lives here)."""
    if view is None:
        return "not created yet"
    if not view.controlled:
        return "exists but is not controlled by this DynamoGraphDeployment"
    if view.deleting:
        return "being deleted"
    if view.applied_hash != wanted.hash or (wanted.replicas is not None and view.replicas != wanted.replicas):
        return "not yet updated to the graph's spec"
    if view.available is None:
        # What the DCD's own first status says (upstream: Available starts Unknown/Reconciling): one
        # word for "its controller has not reported yet", so the graph's message (and a status write)
        # does not change when that first status lands.
        return "Reconciling"
    if view.available_generation is None or view.available_generation < view.generation:
        return (
            f"generation {view.generation} not yet observed by its controller "
            f"(Available observed generation {view.available_generation or 0})"
        )
    if view.available != "True":
        return _not_available_reason(view)
    return None


def _cap(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def report_of(
    wanted: Sequence[WantedDcd], views: Mapping[str, DcdView], failure: Failure | None = None
) -> GraphReport:
    """The graph's state: ``failed`` when reconcile could not go on, else ``successful`` only when
    every wanted DCD is ready (:func:`not_ready_reason`), else ``pending``."""
    reasons = {w.name: not_ready_reason(w, views.get(w.name)) for w in wanted}
    not_ready = [(name, why) for name, why in sorted(reasons.items()) if why is not None]
    ready_services = f"{len(wanted) - len(not_ready)}/{len(wanted)}" if wanted else None
    if failure is not None:
        return GraphReport(STATE_FAILED, failure.reason, _cap(failure.message), ready_services)
    if not wanted:
        # validate_graph refuses a graph without services, so this is a graph still being read.
        return GraphReport(STATE_PENDING, REASON_NOT_READY, "no services", ready_services)
    if not not_ready:
        return GraphReport(STATE_SUCCESSFUL, REASON_ALL_READY, "All resources are ready", ready_services)
    listed = "; ".join(f"{name}: {why}" for name, why in not_ready)
    return GraphReport(
        STATE_PENDING,
        REASON_NOT_READY,
        _cap(f"{len(not_ready)} of {len(wanted)} resources not ready: {listed}"),
        ready_services,
        _waiting_for([views[name] for name, _ in not_ready if name in views]),
    )


def _waiting_for(views: Sequence[DcdView]) -> str | None:
    """The not-ready services' causes, each once (two workers short of the same Secret: one cause)."""
    seen: dict[str, None] = {}
    for view in views:
        if view.available != "True":
            for cause in view.waiting_for.split("; ") if view.waiting_for else ():
                seen.setdefault(cause, None)
    return _cap("; ".join(seen)) if seen else None


def status_of(report: GraphReport, generation: int, existing: Obj | None, now: datetime) -> dict[str, Any]:
    """The DGD's whole status for ``report`` (fields we do not own are kept; the Ready condition's
    ``lastTransitionTime`` moves only when it flips)."""
    old = dict(existing or {})
    conditions, _ = set_condition(
        old.get("conditions") if isinstance(old.get("conditions"), list) else None,
        CONDITION_READY,
        "True" if report.ready else "False",
        report.reason,
        report.message,
        observed_generation=generation,
        now=now,
    )
    status = {**old, "state": report.state, "conditions": conditions, "observedGeneration": generation}
    if report.ready_services is None:
        status.pop("readyServices", None)
    else:
        status["readyServices"] = report.ready_services
    if report.waiting_for is None:
        status.pop("waitingFor", None)
    else:
        status["waitingFor"] = report.waiting_for
    return status


_BECAME_READY: Final = (ConditionEvent(CONDITION_READY, "True", "Normal"),)


def _ready(status: Obj | None) -> Mapping[str, Any]:
    conditions = (status or {}).get("conditions")
    return get_condition(conditions if isinstance(conditions, list) else None, CONDITION_READY) or {}


def graph_events(before: Obj | None, after: Obj | None) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` Events for a status change: Ready turning True (Normal), a new
    failure (Warning, once per distinct reason and message), and a ready graph losing readiness
    (Warning). A graph that is merely still coming up gets no Event."""
    events = transition_events(_BECAME_READY, before, after)
    old, new = _ready(before), _ready(after)
    if (after or {}).get("state") == STATE_FAILED:
        if (before or {}).get("state") != STATE_FAILED or (old.get("reason"), old.get("message")) != (
            new.get("reason"),
            new.get("message"),
        ):
            events.append(("Warning", str(new.get("reason", "")), str(new.get("message", ""))))
    elif new.get("status") == "False" and old.get("status") == "True":
        events.append(("Warning", str(new.get("reason", "")), str(new.get("message", ""))))
    before_waiting = str((before or {}).get("waitingFor") or "")
    for cause in str((after or {}).get("waitingFor") or "").split("; "):
        if cause and cause not in before_waiting:
            events.append(("Warning", REASON_WAITING, f"Pods of the graph wait for: {cause}"))
    return events


# --- the whole decision ------------------------------------------------------------------------------

#: Added before anything is created, as upstream; kept for upstream compatibility only (upstream's
#: ``FinalizeResource`` for a DGD does nothing, and neither do we).
FINALIZER: Final = "nvidia.com/finalizer"
#: How long a graph refused for want of LeaderWorkerSet waits before it is looked at again (the
#: controller's LWS probe trusts its answer as long), so installing LWS later is noticed.
LWS_RECHECK_SECONDS: Final = 60.0


@dataclass(frozen=True)
class GraphObserved:
    """One graph and what its decision reads, from the caches overlaid with our own writes.

    ``dcds``: the DCDs the graph wants (by name) or controls; ``pvcs``: the names of the claims
    ``spec.pvcs`` names that exist; ``lws_served``: asked only for a graph with a multinode service.
    """

    dgd: Mapping[str, Any]
    dcds: Mapping[str, Mapping[str, Any]]
    pvcs: frozenset[str]
    planner_account: bool
    lws_served: bool | None
    default_storage_class: str | None
    options: DynamoOptions = field(default_factory=DynamoOptions)


@dataclass(frozen=True)
class DcdChange:
    """One DCD write and the DCD it is based on (``None``: created)."""

    live: Mapping[str, Any] | None
    write: DcdWrite


@dataclass(frozen=True)
class GraphDecision:
    """What to write, in this order, and the status wanted after it (``None``: no status write)."""

    #: The graph is being deleted: drop our finalizer (when it is there), write nothing else.
    deleting: bool = False
    remove_finalizer: bool = False
    add_finalizer: bool = False
    planner_account: Mapping[str, Any] | None = None
    pvcs: tuple[Mapping[str, Any], ...] = ()
    dcds: tuple[DcdChange, ...] = ()
    stale: tuple[Mapping[str, Any], ...] = ()
    status: Mapping[str, Any] | None = None
    requeue_after: float | None = None


def failure_status(observed: GraphObserved, failure: Failure, now: datetime) -> dict[str, Any]:
    """The status of a graph whose reconcile stopped on ``failure`` (nothing wanted is counted)."""
    dgd = observed.dgd
    return status_of(report_of([], {}, failure), objects.generation(dgd) or 0, objects.status(dgd), now)


def _with_status(
    observed: GraphObserved,
    decision: GraphDecision,
    wanted: Sequence[WantedDcd],
    views: Mapping[str, DcdView],
    now: datetime,
    failure: Failure | None = None,
) -> GraphDecision:
    dgd = observed.dgd
    report = report_of(wanted, views, failure)
    return replace(decision, status=status_of(report, objects.generation(dgd) or 0, objects.status(dgd), now))


def decide(observed: GraphObserved, now: datetime) -> GraphDecision:
    """Everything the controller does for one graph (module docstring)."""
    dgd = observed.dgd
    finalized = has_finalizer(dgd, FINALIZER)
    if objects.is_deleting(dgd):
        return GraphDecision(deleting=True, remove_finalizer=finalized)
    base = GraphDecision(add_finalizer=not finalized)
    problems = validate_graph(dgd)
    if problems:
        listed = "; ".join(str(p) for p in problems)
        return _with_status(observed, base, [], {}, now, Failure(REASON_INVALID, f"invalid spec: {listed}"))
    if any(node_count(s) > 1 for s in services(dgd).values()):
        problem = multinode_problem(dgd, bool(observed.lws_served))
        if problem is not None:
            refused = replace(base, requeue_after=LWS_RECHECK_SECONDS)
            return _with_status(observed, refused, [], {}, now, Failure(REASON_FAILED, problem))
    namespace = objects.namespace(dgd)
    account = (
        planner_service_account(namespace)
        if needs_planner_account(dgd) and not observed.planner_account
        else None
    )
    desired = desired_dcds(dgd, observed.options)
    wanted = [wanted_dcd(body) for body in desired.values()]
    uid = objects.uid(dgd)
    pvcs = plan_pvcs(dgd, lambda name: {} if name in observed.pvcs else None, observed.default_storage_class)
    before = replace(base, planner_account=account, pvcs=tuple(pvcs.create))
    if pvcs.missing:
        views = {n: dcd_view(o, uid) for n, o in observed.dcds.items() if n in desired}
        return _with_status(
            observed, before, wanted, views, now, Failure(REASON_FAILED, "; ".join(pvcs.missing))
        )
    after: dict[str, Mapping[str, Any]] = dict(observed.dcds)
    changes: list[DcdChange] = []
    for name, body in desired.items():
        write = plan_dcd(body, observed.dcds.get(name), uid)
        if write is None:
            continue
        live = observed.dcds.get(name) if write.verb is DcdVerb.UPDATE else None
        change = DcdChange(live, write)
        changes.append(change)
        after[name] = after_write(change.live, change.write.body)
    stale = tuple(observed.dcds[n] for n in stale_dcds(dgd, observed.dcds.values()))
    act = replace(before, dcds=tuple(changes), stale=stale)
    views = {n: dcd_view(o, uid) for n, o in after.items() if n in desired}
    return _with_status(observed, act, wanted, views, now)

"""The DGDR state machine (pure: typed views in, the next status + typed actions + Events out; no I/O).

:func:`decide` takes a :class:`RequestObserved` (the request as read, and what was seen of its
profiling and its DGD); :func:`next_step` is the same function over the two parts.

Upstream (``dynamographdeploymentrequest_controller.go`` of the first DGDR release, reference §3)::

    "" ──validate──► Pending ──Job / plan──► Profiling ──spec generated──► Ready        (autoApply off)
     │                                         │                    └──► Deploying ◄──► Ready
     └► Failed ◄───── Job failed / bad plan ───┘                             │ DGD deleted
                                                                             ▼
                                                                     DeploymentDeleted (terminal)

Fixes over upstream, each with a test (tests/unit/dynamo_request):

* the DGD state ``successful`` is ready (upstream compared ``"Ready"`` and never left Deploying);
* a spec change in an immutable state (Profiling, Deploying, Ready, DeploymentDeleted) is reported by
  a ``SpecChangeRejected`` condition naming the rejected generation as well as the Event, and nothing
  of it is applied; a Deploying or Ready request keeps following the DGD it created (that uses only
  its status, never the changed spec);
* a spec change of a Failed request starts it again from validation (upstream: Failed is final, so a
  missing ConfigMap once meant deleting the request);
* transient API errors never reach this module: the executor lets them propagate and retries.

One reconcile may take several steps (validate, then start profiling): each step is a pure function
of the previous step's status, so the chain is the same as upstream's requeue-per-step.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery.conditions import get_condition, set_condition

__all__ = [
    "CONDITION_TYPES",
    "Decision",
    "DgdSeen",
    "JobSeen",
    "Observed",
    "Profile",
    "RequestAction",
    "RequestObserved",
    "RequestView",
    "decide",
    "next_step",
]

Obj = dict[str, Any]

PENDING: Final = "Pending"
PROFILING: Final = "Profiling"
DEPLOYING: Final = "Deploying"
READY: Final = "Ready"
FAILED: Final = "Failed"
DELETED: Final = "DeploymentDeleted"
IMMUTABLE: Final = (PROFILING, DEPLOYING, READY, DELETED)
#: The DGD controller's state for "every component ready".
DGD_SUCCESSFUL: Final = "successful"

VALIDATION: Final = "Validation"
PROFILING_COND: Final = "Profiling"
SPEC_GENERATED: Final = "SpecGenerated"
DEPLOYMENT_READY: Final = "DeploymentReady"
SPEC_CHANGE_REJECTED: Final = "SpecChangeRejected"
#: Whether the generated plan meets the SLA (``kubectl get dgdr`` shows it; False says by how much).
SLA_MET: Final = "SLAMet"
CONDITION_TYPES: Final = (
    VALIDATION,
    PROFILING_COND,
    SPEC_GENERATED,
    SLA_MET,
    DEPLOYMENT_READY,
    SPEC_CHANGE_REJECTED,
)


class RequestAction(enum.StrEnum):
    """What the executor does for a decision, in the decision's order."""

    CREATE_JOB = "create_job"  # the online profiling Job
    START_PLAN = "start_plan"  # the offline plan, in a worker thread
    WRITE_OUTPUT = "write_output"  # the output ConfigMap of a finished plan
    CREATE_DGD = "create_dgd"  # the generated DynamoGraphDeployment (autoApply)


Action = RequestAction
Event = tuple[str, str, str]  # (Normal|Warning, reason, message)


@dataclass(frozen=True)
class RequestView:
    """What the state machine reads of a DGDR."""

    name: str
    namespace: str
    generation: int
    online: bool
    auto_apply: bool
    status: Mapping[str, Any]
    #: spec.autoApplyBestEffort: apply a plan that misses the SLA too.
    best_effort: bool = False

    @property
    def state(self) -> str:
        return str(self.status.get("state") or "")

    @property
    def observed_generation(self) -> int:
        value = self.status.get("observedGeneration")
        return value if isinstance(value, int) else 0


@dataclass(frozen=True)
class JobSeen:
    """The online profiling Job: finished (Complete or Failed) or still running."""

    complete: bool = False
    failed: bool = False
    message: str = ""


@dataclass(frozen=True)
class Profile:
    """What profiling produced: the generated DGD, or why there is none.

    ``invalid``: the request itself is at fault (an unknown model): ``Validation=False`` as well.
    """

    generated: Mapping[str, Any] | None = None
    results: str = ""
    message: str = ""
    error: str = ""
    invalid: bool = False
    #: Non-empty when the plan misses the SLA: by how much, per target.
    sla_miss: str = ""


@dataclass(frozen=True)
class DgdSeen:
    """The DGD the request created: ``exists=False`` only once a live read confirmed it is gone."""

    exists: bool
    state: str = ""
    #: The DGD's ``status.waitingFor``: what holds its pods (the Deploying message repeats it).
    waiting_for: str = ""


@dataclass(frozen=True)
class Observed:
    """Everything the executor found out; a field is None when it was not (yet) looked at."""

    #: Validation problems, each naming its field (ConfigMap, GPU type, profiler image…).
    problems: tuple[str, ...] = ()
    #: What validation settled (e.g. the GPU type discovered and the budget), for the message.
    validated: str = ""
    job: JobSeen | None = None
    profile: Profile | None = None
    #: Profiling is done but its output is not there yet (why, for the message).
    waiting: str = ""
    dgd: DgdSeen | None = None
    #: Where the DGD would be created: (name, namespace).
    target: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class RequestObserved:
    """What :func:`decide` reads: the request, and what was seen of its profiling and DGD."""

    view: RequestView
    seen: Observed


@dataclass(frozen=True)
class Decision:
    status: Obj
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


class _Step:
    """A status being rewritten, step by step (the mutable half of :func:`decide`)."""

    def __init__(self, view: RequestView, now: datetime) -> None:
        self.view = view
        self.now = now
        self.status: Obj = copy.deepcopy(dict(view.status))
        self.actions: list[Action] = []
        self.events: list[Event] = []

    def cond(self, type_: str, status: str, reason: str, message: str) -> None:
        conditions, _ = set_condition(
            self.status.get("conditions"),
            type_,
            status,
            reason,
            message,
            observed_generation=self.status.get("observedGeneration") or self.view.generation,
            now=self.now,
        )
        self.status["conditions"] = conditions

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def act(self, action: Action) -> None:
        self.actions.append(action)

    @property
    def decision(self) -> Decision:
        return Decision(self.status, self.actions, self.events)

    def state(self, state: str) -> None:
        self.status["state"] = state


def decide(observed: RequestObserved, now: datetime) -> Decision:
    """The next status of the request, what to do to get there, and the Events to tell."""
    return next_step(observed.view, observed.seen, now)


def next_step(view: RequestView, seen: Observed, now: datetime) -> Decision:
    """:func:`decide` over the request's view and what was seen of it."""
    step = _Step(view, now)
    state = view.state
    changed = view.observed_generation > 0 and view.generation != view.observed_generation
    if changed and state in IMMUTABLE:
        _reject(step)
        if state in (DEPLOYING, READY):
            _follow(step, seen)
        return step.decision
    if state == "" or (state == FAILED and changed):
        _validate(step, seen)
    elif state == PENDING:
        _start(step, seen)
    elif state == PROFILING:
        _profile(step, seen)
    elif state in (DEPLOYING, READY):
        _follow(step, seen)
    elif state not in (FAILED, DELETED):
        step.state(FAILED)
        step.cond(VALIDATION, "False", "UnknownState", f"status.state: unknown state {state!r}")
    return step.decision


def _reject(step: _Step) -> None:
    generation, observed = step.view.generation, step.view.observed_generation
    message = (
        f"spec change of generation {generation} rejected in state {step.view.state}: generation "
        f"{observed} stays in effect; delete the request and create a new one to change it"
    )
    before = get_condition(step.status.get("conditions"), SPEC_CHANGE_REJECTED)
    step.cond(SPEC_CHANGE_REJECTED, "True", "SpecChangeRejected", message)
    if before is None or before.get("message") != message:
        step.event("Warning", "SpecChangeRejected", message)


def _validate(step: _Step, seen: Observed) -> None:
    """ "" → Pending (then on to profiling), or Failed naming every problem."""
    view = step.view
    step.status = {"observedGeneration": view.generation}
    if seen.problems:
        message = "; ".join(seen.problems)
        step.state(FAILED)
        step.cond(VALIDATION, "False", "ValidationFailed", message)
        step.event("Warning", "ValidationFailed", message)
        return
    step.state(PENDING)
    step.cond(VALIDATION, "True", "ValidationPassed", seen.validated or "spec is valid")
    step.event("Normal", "Initialized", f"DynamoGraphDeploymentRequest {view.name} initialized")
    _start(step, seen)


def _start(step: _Step, seen: Observed) -> None:
    """Pending → Profiling: the Job (online) or the plan (offline) is started."""
    step.state(PROFILING)
    if step.view.online:
        job = f"profile-online-{step.view.name}"
        step.act(RequestAction.CREATE_JOB)
        step.cond(PROFILING_COND, "False", "ProfilingRunning", f"profiling Job {job} is running")
        step.event("Normal", "ProfilingJobCreated", f"Created profiling Job {job}")
    else:
        step.act(RequestAction.START_PLAN)
        step.cond(PROFILING_COND, "False", "ProfilingRunning", "planning with the performance model")
    _profile(step, seen, started=True)


def _profile(step: _Step, seen: Observed, *, started: bool = False) -> None:
    view = step.view
    if view.online:
        job = seen.job
        if job is None:
            if not started:
                step.act(RequestAction.CREATE_JOB)  # gone while Profiling (deleted by hand): created again
            return
        if job.failed:
            message = f"profiling Job profile-online-{view.name} failed: {job.message or 'no reason given'}"
            step.state(FAILED)
            step.cond(PROFILING_COND, "False", "ProfilingFailed", message)
            step.event("Warning", "ProfilingJobFailed", message)
            return
        if not job.complete:
            return
    elif seen.profile is None and not started:
        step.act(RequestAction.START_PLAN)  # after an operator restart the plan is made again
    profile = seen.profile
    if profile is None:
        if seen.waiting:
            step.cond(PROFILING_COND, "False", "ProfilingRunning", seen.waiting)
        return
    if profile.generated is None:
        _profiling_failed(step, profile)
        return
    _generated(step, seen, profile)


def _profiling_failed(step: _Step, profile: Profile) -> None:
    step.state(FAILED)
    if profile.invalid:
        step.cond(VALIDATION, "False", "ValidationFailed", profile.error)
        step.cond(PROFILING_COND, "False", "ProfilingFailed", profile.error)
        step.event("Warning", "ValidationFailed", profile.error)
        return
    step.cond(PROFILING_COND, "False", "ProfilingFailed", profile.error)
    step.cond(SPEC_GENERATED, "False", "GenerationFailed", profile.error)
    step.event("Warning", "ProfilingJobFailed" if step.view.online else "ProfilingFailed", profile.error)


def _generated(step: _Step, seen: Observed, profile: Profile) -> None:
    view = step.view
    if not view.online:
        step.act(RequestAction.WRITE_OUTPUT)
    step.cond(PROFILING_COND, "True", "ProfilingCompleted", profile.message or "profiling completed")
    step.status["profilingResults"] = profile.results
    step.status["generatedDeployment"] = dict(profile.generated or {})
    name = (profile.generated or {}).get("metadata", {}).get("name", "")
    # A plan that misses the SLA is not applied unless the request opts in (spec.autoApplyBestEffort).
    apply = view.auto_apply and (not profile.sla_miss or view.best_effort)
    held = view.auto_apply and not apply
    message = f"generated DynamoGraphDeployment {name}" + (
        "; not applied: it misses the SLA (set spec.autoApplyBestEffort to apply it anyway)"
        if held
        else ("" if view.auto_apply else "; autoApply is off")
    )
    step.cond(SPEC_GENERATED, "True", "SpecGenerated", message)
    step.event("Normal", "SpecGenerated", message)
    if profile.sla_miss:
        step.cond(SLA_MET, "False", "SLANotMet", profile.sla_miss)
        step.event(
            "Warning", "SLANotMet", profile.sla_miss + ("; applied (autoApplyBestEffort)" if apply else "")
        )
    else:
        step.cond(SLA_MET, "True", "SLAMet", "the plan meets the TTFT and ITL targets")
    if apply:
        step.state(DEPLOYING)
        _follow(step, seen)
    else:
        step.state(READY)


def _follow(step: _Step, seen: Observed) -> None:
    """Deploying / Ready: create the DGD once, then mirror its state."""
    deployment = dict(step.status.get("deployment") or {})
    if not deployment.get("created"):
        if step.status.get("state") != DEPLOYING:
            return  # Ready without autoApply: nothing to follow
        meta = (step.status.get("generatedDeployment") or {}).get("metadata") or {}
        name = str(meta.get("name") or seen.target[0])
        namespace = str(meta.get("namespace") or seen.target[1])
        step.act(RequestAction.CREATE_DGD)
        step.status["deployment"] = {
            "name": name,
            "namespace": namespace,
            "state": "pending",
            "created": True,
        }
        message = f"Created DynamoGraphDeployment {namespace}/{name}"
        step.cond(DEPLOYMENT_READY, "False", "DeploymentCreated", message)
        step.event("Normal", "DeploymentCreated", message)
        return
    dgd = seen.dgd
    if dgd is None:
        return
    where = f"{deployment.get('namespace')}/{deployment.get('name')}"
    if not dgd.exists:
        message = (
            f"DynamoGraphDeployment {where} was deleted; it will not be created again: delete this "
            "request and create a new one to deploy again"
        )
        step.state(DELETED)
        step.status["deployment"] = {**deployment, "state": "Deleted"}
        step.cond(DEPLOYMENT_READY, "False", "DeploymentDeleted", message)
        step.event("Warning", "DeploymentDeleted", message)
        return
    step.status["deployment"] = {**deployment, "state": dgd.state or "pending"}
    state = step.status.get("state")
    if dgd.state == DGD_SUCCESSFUL and state == DEPLOYING:
        step.state(READY)
        step.cond(DEPLOYMENT_READY, "True", "DeploymentReady", f"DynamoGraphDeployment {where} is ready")
        step.event("Normal", "DeploymentReady", f"DynamoGraphDeployment {where} is ready")
    elif state == DEPLOYING and dgd.waiting_for:
        # Deploying says what the graph waits for (a missing Secret, no free GPU, …), not just "pending".
        message = f"DynamoGraphDeployment {where} is {dgd.state or 'pending'}, waiting for: {dgd.waiting_for}"
        step.cond(DEPLOYMENT_READY, "False", "DeploymentPending", message)
    elif dgd.state != DGD_SUCCESSFUL and state == READY:
        message = f"DynamoGraphDeployment {where} is {dgd.state or 'pending'}, no longer ready"
        step.state(DEPLOYING)
        step.cond(DEPLOYMENT_READY, "False", "DeploymentDegraded", message)
        step.event("Warning", "DeploymentDegraded", message)

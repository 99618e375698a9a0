"""Applying the DCM profile and waiting for the AMD Device Config Manager's answer.

* **Re-triggering DCM.** Current DCM (ROCm/device-config-manager ``NodeLabelWatcher``) acts only when
  ``dcm.amd.com/gpu-config-profile`` *changes* to a non-empty value; older DCM also reacted to the
  trigger label ``dcm.amd.com/apply-gpu-config-profile``. We set the trigger label (``apply``) with the
  profile label, and when the node already carries the desired value we first remove the profile,
  state and trigger labels in a separate write (condition ``ProfileApplied=False DCMRetrigger``) and set
  them on the next reconcile, so either DCM sees a change. The trigger label is removed when the
  operator step ends, so the next ``apply`` is a change again.
* **DCM ``failure`` is not always final.** DCM writes ``failure`` on every failed attempt and then
  retries every minute for 30 minutes (Event ``PartitionRetrying``). So ``failure`` fails the NP only
  when DCM's latest Event since we applied the profile is a warning other than ``PartitionRetrying``
  / ``PartitionInProgress`` (its message, usually JSON with a ``Reason``, goes into the condition and
  event). With ``PartitionRetrying`` we keep waiting (``OperatorReady=False DCMRetrying``) until the
  operator timeout. With no DCM event at all we wait ``NodeLogicConfig.dcm_failure_grace`` for one
  (``OperatorReady=Unknown DCMFailureReported``; its ``lastTransitionTime`` is that grace's clock), then
  fail with what we have. DCM's newer ``in-progress`` state value is treated like an absent label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Final

from aiplane.apimachinery.conditions import get_condition
from aiplane.controllers.partitioning.node_actions import MarkApplied, RemoveLabels, SetLabels
from aiplane.controllers.partitioning.node_run import (
    NORMAL,
    OPERATOR_READY,
    PROFILE_APPLIED,
    WARNING,
    Run,
    fmt_duration,
)
from aiplane.controllers.partitioning.views import DcmEventView, ProfileView
from aiplane.controllers.partitioning.vocabulary import (
    APPLIED_BY_ANNOTATION,
    APPLY_TRIGGER_LABEL,
    APPLY_TRIGGER_VALUE,
    DCM_EVENT_SOURCE,
    DCM_STATE_FAILURE,
    DCM_STATE_IN_PROGRESS,
    DCM_STATE_SUCCESS,
    PROFILE_LABEL,
    PROFILE_STATE_LABEL,
    VERIFYING,
    WAITING_OPERATOR,
)

__all__ = ["applying", "dcm_event_detail", "is_dcm_event_for", "latest_dcm_event", "waiting_operator"]

# DCM events that mean "still working", even though DCM emits PartitionRetrying as a Warning.
_DCM_PROGRESS_REASONS: Final = frozenset({"PartitionRetrying", "PartitionInProgress"})
_MAX_DETAIL: Final = 512


# --- DCM's Events --------------------------------------------------------------------------------


def is_dcm_event_for(event: DcmEventView, node_name: str) -> bool:
    """Was ``event`` emitted by DCM about ``node_name``?

    DCM records its Events on its own Pod with ``source.component = amd-device-config-manager`` and
    ``source.host = <node>``; an Event on the Node itself (``involvedObject.kind = Node``) counts too.
    """
    if event.component != DCM_EVENT_SOURCE:
        return False
    if event.host == node_name:
        return True
    return bool(event.involved_kind == "Node" and event.involved_name == node_name)


def latest_dcm_event(run: Run, since: datetime) -> DcmEventView | None:
    """DCM's newest Event about this node since the profile was applied (list order breaks ties)."""
    best: tuple[datetime, int] | None = None
    chosen: DcmEventView | None = None
    for i, ev in enumerate(run.dcm_events):
        if not is_dcm_event_for(ev, run.node_name) or ev.time is None or ev.time < since:
            continue
        if best is None or (ev.time, i) >= best:
            best, chosen = (ev.time, i), ev
    return chosen


def dcm_event_detail(event: DcmEventView) -> str:
    """``<reason>: <message>``; DCM's messages are JSON of its PartitionStatus, whose ``Reason`` is the
    human part."""
    message = event.message
    if message.lstrip().startswith("{"):
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping):
            inner = parsed.get("Reason") or parsed.get("reason")
            if isinstance(inner, str) and inner:
                message = inner
    message = message.strip()
    if len(message) > _MAX_DETAIL:
        message = message[: _MAX_DETAIL - 3] + "..."
    reason = event.reason
    return f"{reason}: {message}" if reason and message else reason or message


# --- Applying ------------------------------------------------------------------------------------


def _wait_for_operator(run: Run, profile: ProfileView, message: str) -> bool:
    """ProfileApplied now, then wait for DCM. The condition is dropped first: the operator clock
    (its ``lastTransitionTime``) must start now, also after a ``DCMRetrigger`` False."""
    run.drop_condition(PROFILE_APPLIED)
    run.cond(PROFILE_APPLIED, "True", "DCMConfigUpdated", message)
    run.goto(WAITING_OPERATOR)
    run.cond(
        OPERATOR_READY,
        "False",
        "DCMProcessing",
        f"Waiting for the Device Config Manager to apply {profile.dcm}",
    )
    return True


def _application_mark(run: Run) -> str:
    """Our record on the node of the request: ``<np>/<desiredHash>``, written with the profile label."""
    return f"{run.owner}/{run.desired_hash()}"


def _shows_our_request(run: Run, dcm: str) -> bool:
    """Does the Node view show our request (the profile label and our record, written together)?"""
    return run.node.labels.get(PROFILE_LABEL) == dcm and run.node.annotations.get(
        APPLIED_BY_ANNOTATION
    ) == _application_mark(run)


def applying(run: Run) -> bool:
    """Label the node with the DCM profile (re-triggering DCM if the label is there already)."""
    if run.profile is None:
        return run.profile_gone()
    run.ensure_finalizer()
    dcm = run.profile.dcm
    labels = run.node.labels
    applied = get_condition(run.conditions, PROFILE_APPLIED)
    retriggering = applied is not None and applied.get("reason") == "DCMRetrigger"
    mark = _application_mark(run)
    message = f"Set {PROFILE_LABEL}={dcm} on node {run.node_name}"
    if _shows_our_request(run, dcm):
        # Our own request is already on the node (the status write after it was lost): in flight.
        return _wait_for_operator(run, run.profile, message)
    if labels.get(PROFILE_LABEL) == dcm and not retriggering:
        # DCM reacts to a *change* of the label: take it off now, put it back next time.
        run.act(RemoveLabels((PROFILE_LABEL, PROFILE_STATE_LABEL, APPLY_TRIGGER_LABEL)))
        run.cond(
            PROFILE_APPLIED,
            "False",
            "DCMRetrigger",
            f"Node {run.node_name} already carries DCM profile {dcm}; "
            "removing the label so that setting it again makes DCM re-apply it",
        )
        run.wait(run.config.retrigger_delay.total_seconds())
        return False
    run.act(SetLabels(((PROFILE_LABEL, dcm), (APPLY_TRIGGER_LABEL, APPLY_TRIGGER_VALUE))))
    run.act(RemoveLabels((PROFILE_STATE_LABEL,)))
    run.act(MarkApplied(mark))
    run.event(NORMAL, "ProfileApplied", message)
    return _wait_for_operator(run, run.profile, message)


# --- WaitingOperator -----------------------------------------------------------------------------


def _dcm_succeeded(run: Run, dcm: str) -> bool:
    """Untaint right away (the device plugin must restart), keep the cordon until verified."""
    run.cond(OPERATOR_READY, "True", "DCMSucceeded", f"DCM applied profile {dcm}")
    run.untaint()
    run.act(RemoveLabels((APPLY_TRIGGER_LABEL,)))
    return run.goto(VERIFYING)


def _dcm_failed(run: Run, dcm: str, latest: DcmEventView | None) -> tuple[bool, datetime | None]:
    """DCM wrote ``failure``: ``(failed, wake up by)`` — final only when its Events say so."""
    detail = dcm_event_detail(latest) if latest is not None else ""
    if latest is not None and latest.reason in _DCM_PROGRESS_REASONS:
        run.cond(OPERATOR_READY, "False", "DCMRetrying", f"DCM is retrying profile {dcm}: {detail}")
        return False, None
    if latest is not None and latest.type == WARNING:
        message = f"DCM failed to apply profile {dcm} on node {run.node_name}: {detail}"
        return run.fail(OPERATOR_READY, "DCMFailed", message), None
    # DCM sets the label before announcing a retry: give the announcement a moment.
    run.cond(
        OPERATOR_READY,
        "Unknown",
        "DCMFailureReported",
        f"DCM reported failure for profile {dcm}; waiting for its events (it may be retrying)",
    )
    grace_end = run.since(OPERATOR_READY) + run.config.dcm_failure_grace
    if run.now >= grace_end:
        message = (
            f"DCM failed to apply profile {dcm} on node {run.node_name} "
            f"({PROFILE_STATE_LABEL}={DCM_STATE_FAILURE}; no DCM event explains it)"
        )
        return run.fail(OPERATOR_READY, "DCMFailed", message), None
    return False, grace_end


def _dcm_busy(run: Run, dcm: str, state: str | None) -> None:
    if state in (None, "", DCM_STATE_IN_PROGRESS):
        run.cond(
            OPERATOR_READY, "False", "DCMProcessing", f"Waiting for the Device Config Manager to apply {dcm}"
        )
    else:
        run.cond(OPERATOR_READY, "False", "UnknownDCMState", f"Unknown DCM state {state!r} for profile {dcm}")


def waiting_operator(run: Run) -> bool:
    """Wait for DCM's state label: success → Verifying; failure → see the module docstring."""
    if run.profile is None:
        return run.profile_gone()
    run.ensure_finalizer()
    dcm = run.profile.dcm
    started = run.since(PROFILE_APPLIED)
    deadline = started + run.config.operator_timeout
    wake = deadline
    # DCM's state label answers our request only on a Node view that shows the request. The Node
    # cache can lag our own label write (the NodePartitioning's view cannot: it is our write): such a
    # view still carries the state of the node's previous profile (SPX's `success`, say), and taking
    # that for DCM's answer moved a node to Verifying on a view older than its own taint, so the
    # taint was never removed (the drain's taint and the label are one write when no pod had to go).
    state = run.node.labels.get(PROFILE_STATE_LABEL) if _shows_our_request(run, dcm) else None
    latest = latest_dcm_event(run, started)
    if state == DCM_STATE_SUCCESS:
        return _dcm_succeeded(run, dcm)
    if state == DCM_STATE_FAILURE:
        failed, grace_end = _dcm_failed(run, dcm, latest)
        if failed:
            return True
        wake = min(wake, grace_end) if grace_end is not None else wake
    else:
        _dcm_busy(run, dcm, state)
    if run.now >= deadline:
        detail = dcm_event_detail(latest) if latest is not None else ""
        last = f"; last DCM event: {detail}" if detail else ""
        return run.fail(
            OPERATOR_READY,
            "OperatorUnavailable",
            f"DCM did not apply profile {dcm} on node {run.node_name} within "
            f"{fmt_duration(run.config.operator_timeout)} ({PROFILE_STATE_LABEL}: {state or 'absent'}{last})",
        )
    run.wait_until(wake, run.config.poll_interval)
    return False

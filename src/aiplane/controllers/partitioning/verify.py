"""Verification: does the node now offer what the profile promises?

Verification requires the profile label to hold ``dcmProfileName`` (upstream G3) and
``status.allocatable`` to match every expected resource *by value* (``64 == 64000m``); a profile
without expected resources only needs ``amd.com/gpu`` to be present. The capacity short-circuit in
Pending (:func:`already_configured`) is the same check made strict: label, state ``success`` *and*
the allocatable. The verify clock is the ``lastTransitionTime`` of ``Verified``, set when
verification starts. A taint of ours found on the node while verifying is removed: the device plugin
does not tolerate it, so nothing would publish the partitions while it stays.
"""

from __future__ import annotations

from aiplane.apimachinery.conditions import get_condition
from aiplane.controllers.partitioning.node_run import NORMAL, VERIFIED, Run, fmt_duration
from aiplane.controllers.partitioning.views import NodeView, ProfileView
from aiplane.controllers.partitioning.vocabulary import (
    DCM_STATE_SUCCESS,
    GPU_RESOURCE,
    PROFILE_LABEL,
    PROFILE_STATE_LABEL,
    SUCCEEDED,
    TAINT_EFFECT,
    TAINT_KEY,
)

__all__ = ["already_configured", "resource_problems", "verification_problem", "verifying"]


def resource_problems(node: NodeView, profile: ProfileView) -> list[str]:
    """``<res>: got X (expected Y)`` / ``<res>: not found (expected Y)`` for every expected resource
    ``status.allocatable`` does not match by value (``Quantity`` equality: ``64 == 64000m``)."""
    problems = []
    for resource, want, spelling in profile.expected:
        got = node.allocatable.get(resource)
        if got is None or got.text is None:
            problems.append(f"{resource}: not found (expected {spelling})")
        elif got.quantity is None or got.quantity != want:
            problems.append(f"{resource}: got {got.text} (expected {spelling})")
    return problems


def already_configured(node: NodeView, profile: ProfileView) -> bool:
    """Upstream's capacity short-circuit, made strict: allocatable matches every expected resource and
    DCM reports the desired profile applied (label + state ``success``)."""
    return (
        bool(profile.expected)
        and node.labels.get(PROFILE_LABEL) == profile.dcm
        and node.labels.get(PROFILE_STATE_LABEL) == DCM_STATE_SUCCESS
        and not resource_problems(node, profile)
    )


def verification_problem(node: NodeView, profile: ProfileView) -> tuple[str, str] | None:
    """``(reason, message)`` of what does not match yet, or ``None`` when the node is verified."""
    label = node.labels.get(PROFILE_LABEL)
    if label != profile.dcm:
        return (
            "DCMLabelMissing",
            f"node label {PROFILE_LABEL} is {label or 'absent'} (expected {profile.dcm})",
        )
    if profile.expected:
        problems = resource_problems(node, profile)
        return ("ResourceMismatch", "; ".join(problems)) if problems else None
    if GPU_RESOURCE not in node.allocatable:
        return "GPUResourcesNotFound", f"{GPU_RESOURCE}: not found in node allocatable"
    return None


def _verified(run: Run, profile: ProfileView) -> bool:
    summary = ", ".join(f"{r}={s}" for r, _, s in profile.expected) or f"{GPU_RESOURCE} present"
    run.cond(VERIFIED, "True", "VerificationSucceeded", f"Node allocatable matches profile: {summary}")
    run.event(NORMAL, "VerificationSucceeded", f"Node {run.node_name} verified: {summary}")
    run.event(NORMAL, "NodeSucceeded", f"Node {run.node_name} partitioned with DCM profile {profile.dcm}")
    run.current_hash = run.desired_hash()
    return run.goto(SUCCEEDED)


def verifying(run: Run) -> bool:
    """Wait for the device plugin to publish the new partitions, up to the verify timeout."""
    if run.profile is None:
        return run.profile_gone()
    run.ensure_finalizer()
    # The taint is removed when DCM reports success; one of ours still here (put back, or missed by
    # that step) keeps the device plugin off the node, and the partitions would never show.
    run.untaint()
    problem = verification_problem(run.node, run.profile)
    if problem is None:
        return _verified(run, run.profile)
    reason, message = problem
    if get_condition(run.conditions, VERIFIED) is None:
        run.cond(VERIFIED, "False", reason, message)
    deadline = run.since(VERIFIED) + run.config.verify_timeout
    if run.now >= deadline:
        hint = (
            f" (the node still carries an {TAINT_KEY}:{TAINT_EFFECT} taint that is not ours, "
            "which keeps the device plugin off it)"
            if run.node.has_dcm_taint
            else ""
        )
        return run.fail(
            VERIFIED,
            "VerifyFailed",
            f"verification of node {run.node_name} failed after "
            f"{fmt_duration(run.config.verify_timeout)}: {message}{hint}",
        )
    run.cond(VERIFIED, "False", reason, message)
    run.wait_until(deadline, run.config.poll_interval)
    return False

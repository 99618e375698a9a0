"""A DynamoComponentDeployment's status, decided by pure functions over its children as observed.

``Available`` and ``DynamoComponentReady`` always agree (upstream keeps both: the DGD reads
``Available``, older tooling the other). They start ``Unknown``/``Reconciling`` until the child's own
controller has reported on it, and are ``True`` only when the rollout of the *current* spec is done:
a Deployment counts as ready when its controller has observed its generation and every desired
replica is updated and available (the gate upstream added late, #9499, after DGDs reported success
in the middle of rollouts, #3567). ``status.replicas``/``readyReplicas``/``labelSelector`` serve the
scale subresource, so ``kubectl scale dcd`` and an HPA on the DCD work.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, set_condition
from aiplane.controllers import causes
from aiplane.controllers.dynamo.podtemplate import LABEL_SELECTOR

__all__ = [
    "CONDITION_AVAILABLE",
    "CONDITION_READY",
    "REASON_RECONCILING",
    "Availability",
    "compute_status",
    "deployment_availability",
    "lws_availability",
]

CONDITION_AVAILABLE: Final = "Available"
CONDITION_READY: Final = "DynamoComponentReady"
REASON_RECONCILING: Final = "Reconciling"


@dataclass(frozen=True)
class Availability:
    """The two conditions' status, reason and message, and the replica counts behind them."""

    status: str
    reason: str
    message: str
    replicas: int | None = None
    ready_replicas: int | None = None


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _available_condition(obj: Mapping[str, Any]) -> bool:
    cond = get_condition(objects.status(obj).get("conditions"), "Available")
    return cond is not None and cond.get("status") == "True"


def deployment_availability(deployment: Mapping[str, Any] | None, name: str) -> Availability:
    """``DeploymentReady`` once the Deployment's controller observed its generation and every desired
    replica is updated and available with its ``Available`` condition True; 0 desired is ready.

    Also, as ``kubectl rollout status`` decides it: no old replica is left (``replicas`` ≤
    ``updatedReplicas``) and every updated one is available. Without this, the first surge pod of a
    one-replica rollout makes ``updated`` and ``available`` (the old pod) both reach 1 while the new
    pod is still starting — a rollout in flight reported ready, which is upstream #3567 again."""
    if deployment is None:
        return Availability("Unknown", REASON_RECONCILING, f"Deployment {name} is being created")
    status = objects.status(deployment)
    if "observedGeneration" not in status:
        return Availability(
            "Unknown", REASON_RECONCILING, f"Waiting for the Deployment controller to observe {name}", 0, 0
        )
    spec = objects.spec(deployment)
    desired = _int(spec.get("replicas"), 1)
    counts = {
        "replicas": _int(status.get("replicas")),
        "ready": _int(status.get("readyReplicas")),
        "updated": _int(status.get("updatedReplicas")),
        "available": _int(status.get("availableReplicas")),
    }
    have = (counts["replicas"], counts["ready"])
    if desired == 0:
        return Availability("True", "DeploymentReady", f"Deployment {name} has 0 replicas desired", *have)
    if spec.get("paused"):
        return Availability("False", "DeploymentNotReady", f"Deployment {name} is paused", *have)
    generation = objects.generation(deployment) or 0
    if _int(status.get("observedGeneration")) < generation:
        message = f"Deployment {name}: generation {generation} not yet observed by its controller"
        return Availability("False", "DeploymentNotReady", message, *have)
    progress = f"{counts['updated']}/{desired} updated, {counts['available']}/{desired} available"
    if counts["replicas"] > counts["updated"]:
        old = counts["replicas"] - counts["updated"]
        message = f"Deployment {name}: {progress}, {old} old replica(s) pending termination"
        return Availability("False", "DeploymentNotReady", message, *have)
    if (
        counts["updated"] >= desired
        and counts["available"] >= max(desired, counts["updated"])
        and _available_condition(deployment)
    ):
        return Availability("True", "DeploymentReady", f"Deployment {name}: {progress}", *have)
    return Availability("False", "DeploymentNotReady", f"Deployment {name}: {progress}", *have)


def _lws_ready(lws: Mapping[str, Any]) -> bool:
    desired = _int(objects.spec(lws).get("replicas"), 1)
    if desired == 0:
        return True
    status = objects.status(lws)
    # ``updatedReplicas`` (when the LWS controller reports it): a group still on the old template is a
    # rollout in flight, not a ready component.
    updated = _int(status.get("updatedReplicas"), desired)
    return _int(status.get("readyReplicas")) >= desired and updated >= desired and _available_condition(lws)


def lws_availability(names: Sequence[str], observed: Mapping[str, Mapping[str, Any] | None]) -> Availability:
    """``AllLeaderWorkerSetsReady`` when every wanted LeaderWorkerSet is ready (none wanted: ready)."""
    found = [observed.get(n) for n in names]
    replicas = sum(_int(objects.status(o).get("replicas")) for o in found if o is not None)
    ready = sum(_int(objects.status(o).get("readyReplicas")) for o in found if o is not None)
    if names and all(o is None or not objects.status(o) for o in found):
        return Availability(
            "Unknown", REASON_RECONCILING, "Waiting for the LeaderWorkerSet controller", replicas, ready
        )
    not_ready = [n for n, o in zip(names, found, strict=True) if o is None or not _lws_ready(o)]
    if not not_ready:
        message = f"All {len(names)} LeaderWorkerSets are ready"
        return Availability("True", "AllLeaderWorkerSetsReady", message, replicas, ready)
    message = f"{len(names) - len(not_ready)}/{len(names)} LeaderWorkerSets ready; not ready: {', '.join(not_ready)}"
    return Availability("False", "LeaderWorkerSetsNotReady", message, replicas, ready)


def compute_status(
    dcd: Mapping[str, Any],
    availability: Availability,
    *,
    now: datetime,
    waiting: Sequence[causes.Held] = (),
) -> dict[str, Any]:
    """The DCD's new status: both conditions (with ``observedGeneration``), replica counts when known
    (else the previous ones), the selector the scale subresource serves, and what holds the pods
    (``waiting``: named in the conditions' message and in ``waitingFor``)."""
    status: dict[str, Any] = copy.deepcopy(dict(objects.status(dcd)))
    generation = objects.generation(dcd) or 0
    conditions = status.get("conditions")
    message = availability.message
    if waiting:
        message = f"{message}; {causes.describe(waiting)}"
    for type_ in (CONDITION_AVAILABLE, CONDITION_READY):
        conditions, _ = set_condition(
            conditions,
            type_,
            availability.status,
            availability.reason,
            message,
            observed_generation=generation,
            now=now,
        )
    status["conditions"] = conditions
    status["observedGeneration"] = generation
    waiting_for = causes.summary(waiting)
    if waiting_for is None:
        status.pop("waitingFor", None)
    else:
        status["waitingFor"] = waiting_for
    if availability.replicas is not None:
        status["replicas"] = availability.replicas
    if availability.ready_replicas is not None:
        status["readyReplicas"] = availability.ready_replicas
    name = objects.name(dcd)
    status["labelSelector"] = f"{LABEL_SELECTOR}={name}"
    status["podSelector"] = {LABEL_SELECTOR: name}
    return status

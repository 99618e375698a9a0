"""What the monitor does to one workload after a poll: a pure decision, ``now`` passed in.

Per workload (a ModelInfer or a DynamoGraphDeployment) the monitor knows its GPU samples of this
poll, the two conditions it owns, whether it scaled the workload to zero earlier (the
:data:`ANNOTATION_SCALED_FROM` record) and whether the user asked for it back. The decision is a
list of conditions to set and, at most, one metadata+spec merge patch (scale to zero, or restore).

Rules (docs/kaiwo.md, "GPU utilisation monitoring"):

* **Low**: any sample below ``lowUtilizationThreshold`` percent (upstream's rule) sets
  ``ResourceUnderutilization=True`` (``GpuUtilizationLow``, naming the GPUs that are low, not their
  values, so the status does not churn every poll); otherwise ``False``/``GpuUtilizationNormal``.
  ``lastTransitionTime`` moves only on a flip, so it marks the start of the low streak.
* **No samples** (pods gone, not yet scheduled): a condition already set turns ``Unknown``
  (``NoGpuSamples``), so an old streak never counts once samples come back.
* **Scale to zero**: with ``terminateUnderutilized``, a workload whose condition has been ``True``
  for at least ``terminateUnderutilizedAfter`` is scaled to zero, never deleted; what it had is
  recorded in the annotation and ``WorkloadTerminatedEarly=True`` (``GpuUtilizationLow``) is set.
* **Back**: annotating the workload ``kaiwo.silogen.ai/restore=true`` puts the recorded replicas
  back; a user who scales it up by hand is taken to have restored it too. Either way the record goes,
  ``WorkloadTerminatedEarly`` turns ``False`` (``WorkloadRestored``) and ``ResourceUnderutilization``
  turns ``Unknown``, so the streak starts again from the next samples.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, set_condition
from aiplane.controllers.monitoring.scrape import GpuSample
from aiplane.kube.status import ConditionEvent

__all__ = [
    "ANNOTATION_RESTORE",
    "ANNOTATION_SCALED_FROM",
    "DGD",
    "MODELINFER",
    "RESOURCE_UNDERUTILIZATION",
    "TRANSITION_EVENTS",
    "WORKLOAD_TERMINATED_EARLY",
    "ConditionChange",
    "Decision",
    "Observed",
    "Thresholds",
    "WorkloadView",
    "decide",
    "decide_workload",
    "in_target_namespace",
    "with_conditions",
]

MODELINFER: Final = "ModelInfer"
DGD: Final = "DynamoGraphDeployment"

RESOURCE_UNDERUTILIZATION: Final = "ResourceUnderutilization"
WORKLOAD_TERMINATED_EARLY: Final = "WorkloadTerminatedEarly"
REASON_LOW: Final = "GpuUtilizationLow"
REASON_NORMAL: Final = "GpuUtilizationNormal"
REASON_NO_SAMPLES: Final = "NoGpuSamples"
REASON_RESTORED: Final = "WorkloadRestored"

#: JSON of what the workload had before the monitor scaled it to zero (the way back).
ANNOTATION_SCALED_FROM: Final = "kaiwo.silogen.ai/scaled-to-zero-from"
#: ``"true"``: put the recorded replicas back.
ANNOTATION_RESTORE: Final = "kaiwo.silogen.ai/restore"

_MAX_LISTED: Final = 10

#: Events, once per flip (the status is written only when it changed).
TRANSITION_EVENTS: Final = (
    ConditionEvent(RESOURCE_UNDERUTILIZATION, "True", "Warning", reason=REASON_LOW),
    ConditionEvent(WORKLOAD_TERMINATED_EARLY, "True", "Warning", reason=WORKLOAD_TERMINATED_EARLY),
    ConditionEvent(
        WORKLOAD_TERMINATED_EARLY, "False", "Normal", reason=REASON_RESTORED, from_statuses=("True",)
    ),
)


@dataclass(frozen=True)
class Thresholds:
    """The live ``resourceMonitoring`` settings of the KaiwoConfig."""

    low: float = 1.0
    terminate: bool = False
    terminate_after: timedelta = timedelta(hours=24)
    target_namespaces: tuple[str, ...] = ()


def in_target_namespace(namespace: str, thresholds: Thresholds) -> bool:
    """``targetNamespaces``, or (empty) every namespace but kube-system (as upstream documents)."""
    if thresholds.target_namespaces:
        return namespace in thresholds.target_namespaces
    return namespace != "kube-system"


@dataclass(frozen=True)
class WorkloadView:
    """What the decision needs of one workload, read from the informer cache."""

    kind: str
    namespace: str
    name: str
    generation: int
    conditions: tuple[Mapping[str, Any], ...]
    annotations: Mapping[str, str]
    #: ModelInfer: ``{"replicas": n, "partition": p?}``; DGD: ``{"services": {name: n or None}}``.
    scale: Mapping[str, Any]
    deleting: bool = False

    @property
    def scaled_from(self) -> dict[str, Any] | None:
        """The record the monitor left when it scaled this workload to zero (``None``: it did not)."""
        raw = self.annotations.get(ANNOTATION_SCALED_FROM)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
        except ValueError:
            return {}
        return record if isinstance(record, dict) else {}

    @property
    def running_replicas(self) -> int:
        """How many replicas the spec asks for now (a DGD: over its services; unset counts 1)."""
        if self.kind == MODELINFER:
            return int(self.scale.get("replicas") or 0)
        services = self.scale.get("services") or {}
        return sum(1 if n is None else int(n) for n in services.values())


@dataclass(frozen=True)
class ConditionChange:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    conditions: tuple[ConditionChange, ...] = ()
    #: A merge patch of metadata and spec (scale to zero or restore), or ``None``.
    patch: dict[str, Any] | None = None
    #: Human summary for the debug log.
    action: str = ""
    #: The status with ``conditions`` applied (None: no condition to report).
    status: dict[str, Any] | None = None


def _listed(low: Sequence[GpuSample]) -> str:
    names = sorted({f"{s.pod} GPU {s.gpu}" if s.gpu else s.pod for s in low})
    if len(names) <= _MAX_LISTED:
        return ", ".join(names)
    return f"{', '.join(names[:_MAX_LISTED])} and {len(names) - _MAX_LISTED} more"


def _fmt(td: timedelta) -> str:
    seconds = int(td.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def _scale_to_zero_patch(view: WorkloadView) -> dict[str, Any]:
    """Zero replicas, and the record of what there was; a ModelInfer's ``partition`` must go too (its
    CEL rule wants ``partition < replicas``) and is recorded with the replicas."""
    record = dict(view.scale)
    spec: dict[str, Any]
    if view.kind == MODELINFER:
        spec = {"replicas": 0}
        if record.get("partition") is not None:
            spec["rolloutStrategy"] = {"rollingUpdateConfiguration": {"partition": None}}
    else:
        spec = {"services": {name: {"replicas": 0} for name in record.get("services") or {}}}
    annotations = {ANNOTATION_SCALED_FROM: json.dumps(record, sort_keys=True, separators=(",", ":"))}
    return {"metadata": {"annotations": annotations}, "spec": spec}


def _restore_patch(view: WorkloadView, record: Mapping[str, Any], *, put_back: bool) -> dict[str, Any]:
    """Drop the record and the restore request; with ``put_back``, the recorded replicas return.

    Services deleted from a DGD since are not brought back; an unset replicas (``null``) is unset
    again.
    """
    patch: dict[str, Any] = {
        "metadata": {"annotations": {ANNOTATION_SCALED_FROM: None, ANNOTATION_RESTORE: None}}
    }
    if not put_back:
        return patch
    if view.kind == MODELINFER:
        spec: dict[str, Any] = {"replicas": int(record.get("replicas") or 1)}
        if record.get("partition") is not None:
            spec["rolloutStrategy"] = {"rollingUpdateConfiguration": {"partition": record["partition"]}}
    else:
        current = view.scale.get("services") or {}
        recorded = record.get("services") or {}
        spec = {"services": {name: {"replicas": recorded[name]} for name in recorded if name in current}}
    patch["spec"] = spec
    return patch


def _restore(view: WorkloadView, record: Mapping[str, Any]) -> Decision | None:
    requested = view.annotations.get(ANNOTATION_RESTORE, "").strip().lower() == "true"
    scaled_by_user = view.running_replicas > 0
    if not requested and not scaled_by_user:
        return None  # still scaled to zero: nothing to watch until someone brings it back
    how = "by request" if requested and not scaled_by_user else "scaled up by the user"
    return Decision(
        conditions=(
            ConditionChange(
                WORKLOAD_TERMINATED_EARLY,
                "False",
                REASON_RESTORED,
                f"Restored ({how}) after being scaled to zero for low GPU utilisation",
            ),
            ConditionChange(
                RESOURCE_UNDERUTILIZATION,
                "Unknown",
                REASON_RESTORED,
                "Restored; GPU utilisation is judged again from the next samples",
            ),
        ),
        patch=_restore_patch(view, record, put_back=not scaled_by_user),
        action=f"restore ({how})",
    )


def _utilisation(
    view: WorkloadView, samples: Sequence[GpuSample], thresholds: Thresholds
) -> ConditionChange | None:
    current = get_condition(view.conditions, RESOURCE_UNDERUTILIZATION)
    if not samples:
        if current is None or current.get("status") == "Unknown":
            return None
        return ConditionChange(
            RESOURCE_UNDERUTILIZATION, "Unknown", REASON_NO_SAMPLES, "No GPU utilisation samples for its pods"
        )
    low = [s for s in samples if s.value < thresholds.low]
    if low:
        return ConditionChange(
            RESOURCE_UNDERUTILIZATION,
            "True",
            REASON_LOW,
            f"{len(low)} of {len(samples)} GPUs below {thresholds.low:g}% utilisation: {_listed(low)}",
        )
    return ConditionChange(
        RESOURCE_UNDERUTILIZATION,
        "False",
        REASON_NORMAL,
        f"All {len(samples)} GPUs at or above {thresholds.low:g}% utilisation",
    )


def _low_since(view: WorkloadView) -> datetime | None:
    current = get_condition(view.conditions, RESOURCE_UNDERUTILIZATION)
    if current is None or current.get("status") != "True":
        return None
    return objects.parse_time(current.get("lastTransitionTime"))


@dataclass(frozen=True)
class Observed:
    """One workload at one poll: its view, the samples of its pods, the thresholds, its status."""

    view: WorkloadView
    samples: tuple[GpuSample, ...]
    thresholds: Thresholds
    status: Mapping[str, Any]
    generation: int


def decide(observed: Observed, now: datetime) -> Decision:
    """:func:`decide_workload`, with the status its condition changes leave (observedGeneration set)."""
    decision = decide_workload(observed.view, observed.samples, observed.thresholds, now)
    if not decision.conditions:
        return decision
    status = with_conditions(observed.status, decision.conditions, observed.generation, now)
    return dataclasses.replace(decision, status=status)


def with_conditions(
    status: Mapping[str, Any], changes: Sequence[ConditionChange], generation: int, now: datetime
) -> dict[str, Any]:
    """``status`` with ``changes`` set (Kubernetes condition semantics)."""
    conditions: list[dict[str, Any]] | None = [dict(c) for c in status.get("conditions") or ()]
    for change in changes:
        conditions, _ = set_condition(
            conditions,
            change.type,
            change.status,
            change.reason,
            change.message,
            observed_generation=generation,
            now=now,
        )
    return {**status, "conditions": conditions}


def decide_workload(
    view: WorkloadView, samples: Sequence[GpuSample], thresholds: Thresholds, now: datetime
) -> Decision:
    """This poll's decision for ``view`` given its ``samples`` (already filtered to its pods)."""
    if view.deleting:
        return Decision()
    record = view.scaled_from
    if record is not None:
        return _restore(view, record) or Decision()
    utilisation = _utilisation(view, samples, thresholds)
    since = _low_since(view)
    still_low = utilisation is not None and utilisation.status == "True"
    if thresholds.terminate and still_low and since is not None and now - since >= thresholds.terminate_after:
        assert utilisation is not None
        message = (
            f"Scaled to zero: GPU utilisation below {thresholds.low:g}% for {_fmt(now - since)} "
            f"(terminateUnderutilizedAfter {_fmt(thresholds.terminate_after)}); the previous replicas are in "
            f"annotation {ANNOTATION_SCALED_FROM}: annotate {ANNOTATION_RESTORE}=true or scale up to restore"
        )
        return Decision(
            conditions=(utilisation, ConditionChange(WORKLOAD_TERMINATED_EARLY, "True", REASON_LOW, message)),
            patch=_scale_to_zero_patch(view),
            action="scale to zero",
        )
    return Decision(conditions=(utilisation,) if utilisation is not None else ())

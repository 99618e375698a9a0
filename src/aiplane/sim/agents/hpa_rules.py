"""The decisions of kube-controller-manager's HorizontalPodAutoscaler controller
(``pkg/controller/podautoscaler/horizontal.go``), pure: no I/O, ``now`` passed in.

:func:`reconcile` is ``reconcileAutoscaler`` for a cluster without metrics APIs (the embedded cluster
serves none of ``metrics.k8s.io``, ``custom.metrics.k8s.io``, ``external.metrics.k8s.io``): the bounds
(``minReplicas``/``maxReplicas``, "scaling disabled" at 0) apply before metrics as upstream; the metrics
fail with the errors the real metrics clients give, unless the HPA carries the sim-only annotation
:data:`SIM_DESIRED`, which stands in for the metrics' recommendation. Recommendations are then
normalised as upstream: downscale stabilisation, the scale-up limit, or the ``behavior`` policies.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aiplane.apimachinery import objects

Obj = dict[str, Any]

#: Sim-only knob: the replica count "the metrics" recommend (docs/sim.md).
SIM_DESIRED = "sim.aiplane.io/desired-replicas"
SIM_METRIC = f"annotation {SIM_DESIRED}"
#: ``--horizontal-pod-autoscaler-downscale-stabilization``.
DOWNSCALE_STABILIZATION = timedelta(minutes=5)
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

_RESOURCE_API = (
    "unable to fetch metrics from resource metrics API: "
    "the server could not find the requested resource (get pods.metrics.k8s.io)"
)
_CUSTOM_API = "unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"


@dataclass
class Memory:
    """What the real controller keeps per HPA between syncs: recent recommendations and scale events."""

    recommendations: list[tuple[int, datetime]] = field(default_factory=list)
    scale_up: list[tuple[int, datetime]] = field(default_factory=list)
    scale_down: list[tuple[int, datetime]] = field(default_factory=list)


@dataclass
class Decision:
    """The status to write (compared by the caller), the Events to record, and a rescale to do."""

    status: Obj
    events: list[tuple[str, str, str]] = field(default_factory=list)
    scale_to: int | None = None
    reason: str = ""


def set_condition(
    conditions: list[Obj], type_: str, status: str, reason: str, message: str, now: str
) -> None:
    """``setConditionInList``: reason and message always replaced, the transition time only when the
    status changes; a new type is appended."""
    for cond in conditions:
        if cond.get("type") == type_:
            break
    else:
        cond = {"type": type_}
        conditions.append(cond)
    if cond.get("status") != status:
        cond["lastTransitionTime"] = now
    cond.update(status=status, reason=reason, message=message)


def _status(old: Obj, conditions: list[Obj], generation: int, **fields: Any) -> Obj:
    """``setStatus``: a status rebuilt from the counters, keeping ``lastScaleTime`` and conditions."""
    out: Obj = {"observedGeneration": generation}
    if old.get("lastScaleTime"):
        out["lastScaleTime"] = old["lastScaleTime"]
    if fields.get("currentReplicas"):  # omitempty in the Go type, unlike desiredReplicas
        out["currentReplicas"] = int(fields["currentReplicas"])
    out["desiredReplicas"] = int(fields.get("desiredReplicas") or 0)
    if fields.get("currentMetrics"):
        out["currentMetrics"] = fields["currentMetrics"]
    if fields.get("lastScaleTime"):
        out["lastScaleTime"] = fields["lastScaleTime"]
    out["conditions"] = conditions
    return out


def go_selector(selector: Obj | None) -> str:
    """A ``*metav1.LabelSelector`` as Go's ``%v`` prints it (gogo's ``String()``)."""
    if selector is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.get("matchLabels") or {}).items()))
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key')},Operator:{e.get('operator')},"
        f"Values:[{' '.join(e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or []
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )


def metric_failure(metric: Obj, namespace: str) -> tuple[str, str, str]:
    """(event reason, the metric's error, its wrapped error) of ``computeReplicasForMetric`` when the
    metrics API behind the metric is not served."""
    kind = str(metric.get("type") or "")
    if kind in ("Resource", "ContainerResource"):
        source = metric.get("resource" if kind == "Resource" else "containerResource") or {}
        name = str(source.get("name") or "")
        target = source.get("target") or {}
        what = "usage" if target.get("averageValue") is not None else "utilization"
        inner = f"failed to get {name} {what}: unable to get metrics for resource {name}: {_RESOURCE_API}"
        if kind == "Resource":
            return "FailedGetResourceMetric", inner, f"failed to get {name} resource metric value: {inner}"
        container = source.get("container")
        inner = inner.replace(f"resource {name}:", f"resource {name} in container {container}:", 1)
        return (
            "FailedGetContainerResourceMetric",
            inner,
            f"failed to get {name} container metric value: {inner}",
        )
    if kind == "Pods":
        name = str(((metric.get("pods") or {}).get("metric") or {}).get("name") or "")
        inner = f"unable to get metric {name}: {_CUSTOM_API}"
        return "FailedGetPodsMetric", inner, f"failed to get pods metric value: {inner}"
    if kind == "Object":
        source = metric.get("object") or {}
        name = str((source.get("metric") or {}).get("name") or "")
        described = source.get("describedObject") or {}
        # upstream's format string puts the error last: "unable to get metric %s: %v on %s %s/%s"
        # with (name, kind, namespace, object, err)
        inner = f"unable to get metric {name}: {described.get('kind')} on {namespace} {described.get('name')}/{_CUSTOM_API}"
        return "FailedGetObjectMetric", inner, f"failed to get object metric value: {inner}"
    if kind == "External":
        source = metric.get("external") or {}
        ident = source.get("metric") or {}
        name = str(ident.get("name") or "")
        inner = (
            f"unable to get external metric {namespace}/{name}/{go_selector(ident.get('selector'))}: "
            "unable to fetch metrics from external metrics API: the server could not find the requested "
            f"resource (get {name}.external.metrics.k8s.io)"
        )
        per_pod = (source.get("target") or {}).get("averageValue") is not None
        wrapped = (
            f"failed to get {name} external metric" if per_pod else f"failed to get external metric {name}"
        )
        return (
            "FailedGetExternalMetric",
            inner,
            f"failed to get {name} external metric value: {wrapped}: {inner}",
        )
    err = f'unknown metric source type "{kind}"'
    return "InvalidMetricSourceType", err, err


def _metrics(
    hpa: Obj, scale: Obj, conditions: list[Obj], events: list[tuple[str, str, str]], now: str
) -> tuple[int, str] | None:
    """``computeReplicasForMetrics``: the recommendation and its metric name, or ``None`` (conditions
    and Events say why)."""
    if not (scale.get("status") or {}).get("selector"):
        events.append(("Warning", "SelectorRequired", "selector is required"))
        set_condition(
            conditions,
            "ScalingActive",
            "False",
            "InvalidSelector",
            "the HPA target's scale is missing a selector",
            now,
        )
        return None
    knob = objects.annotations(hpa).get(SIM_DESIRED)
    if knob is not None:
        try:
            wanted = int(knob)
            if wanted < 0:
                raise ValueError(knob)
        except ValueError:
            msg = f"metadata.annotations[{SIM_DESIRED}]: Invalid value: {knob!r}: must be a non-negative integer"
            events.append(("Warning", "FailedGetSimMetric", msg))
            set_condition(
                conditions,
                "ScalingActive",
                "False",
                "FailedGetSimMetric",
                f"the HPA was unable to compute the replica count: {msg}",
                now,
            )
            return None
        set_condition(
            conditions,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {SIM_METRIC}",
            now,
        )
        return wanted, SIM_METRIC
    metrics = list(objects.spec(hpa).get("metrics") or [])
    first: tuple[str, str, str] | None = None
    for metric in metrics:
        failure = metric_failure(metric, objects.namespace(hpa))
        events.append(("Warning", failure[0], failure[1]))
        first = first or failure
    if first is None:  # no metrics (the API defaults one): nothing can be computed
        first = metric_failure(
            {"type": "Resource", "resource": {"name": "cpu", "target": {}}}, objects.namespace(hpa)
        )
    reason, inner, wrapped = first
    set_condition(
        conditions,
        "ScalingActive",
        "False",
        reason,
        f"the HPA was unable to compute the replica count: {inner}",
        now,
    )
    count = max(len(metrics), 1)
    events.append(
        (
            "Warning",
            "FailedComputeMetricsReplicas",
            f"invalid metrics ({count} invalid out of {count}), first error is: {wrapped}",
        )
    )
    return None


# --- normalisation ----------------------------------------------------------------------------------


def _within(history: list[tuple[int, datetime]], seconds: int, now: datetime) -> int:
    cutoff = now - timedelta(seconds=seconds)
    return sum(change for change, at in history if at > cutoff)


def _remember(history: list[tuple[int, datetime]], value: int, now: datetime, keep: timedelta) -> None:
    """Append a sample, reusing one older than ``keep`` (upstream replaces one outdated sample)."""
    cutoff = now - keep
    for i, (_, at) in enumerate(history):
        if at < cutoff:
            history[i] = (value, now)
            return
    history.append((value, now))


def _longest_period(rules: Obj) -> int:
    return max((int(p.get("periodSeconds") or 0) for p in rules.get("policies") or []), default=0)


def scale_up_limit(current: int, events: list[tuple[int, datetime]], rules: Obj, now: datetime) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = min if select == "Min" else max
    result: int | None = None
    for policy in rules.get("policies") or []:
        start = current - _within(events, int(policy.get("periodSeconds") or 0), now)
        value = int(policy.get("value") or 0)
        proposed = start + value if policy.get("type") == "Pods" else math.ceil(start * (1 + value / 100))
        result = proposed if result is None else pick(result, proposed)
    return 0 if result is None else result


def scale_down_limit(current: int, events: list[tuple[int, datetime]], rules: Obj, now: datetime) -> int:
    """``calculateScaleDownLimitWithBehaviors``."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = max if select == "Min" else min
    result: int | None = None
    for policy in rules.get("policies") or []:
        start = current + _within(events, int(policy.get("periodSeconds") or 0), now)
        value = int(policy.get("value") or 0)
        proposed = start - value if policy.get("type") == "Pods" else int(start * (1 - value / 100))
        result = proposed if result is None else pick(result, proposed)
    return 2**31 - 1 if result is None else result


def _normalize_plain(
    memory: Memory, current: int, wanted: int, low: int, high: int, now: datetime
) -> tuple[int, list[tuple[str, str, str, str]]]:
    """``normalizeDesiredReplicas`` (no ``behavior``): the highest recommendation of the downscale
    window, then ``convertDesiredReplicasWithRules``."""
    cutoff = now - DOWNSCALE_STABILIZATION
    stabilized = max([wanted, *(r for r, at in memory.recommendations if at >= cutoff)])
    _remember(memory.recommendations, wanted, now, DOWNSCALE_STABILIZATION)
    conds = []
    if stabilized != wanted:
        conds.append(
            (
                "AbleToScale",
                "True",
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        )
    else:
        conds.append(("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size"))
    limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if high > limit:
        allowed_max, reason, msg = (
            limit,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    else:
        allowed_max, reason, msg = (
            high,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    desired = stabilized
    if stabilized < low:
        desired, reason, msg = (
            low,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    elif stabilized > allowed_max:
        desired = allowed_max
    else:
        reason, msg = "DesiredWithinRange", "the desired count is within the acceptable range"
    conds.append(("ScalingLimited", "False" if desired == stabilized else "True", reason, msg))
    return desired, conds


def _stabilize(
    memory: Memory, current: int, wanted: int, up: Obj, down: Obj, now: datetime
) -> tuple[int, str, str]:
    """``stabilizeRecommendationWithBehaviors``."""
    up_window = int(up.get("stabilizationWindowSeconds") or 0)
    down_window = int(down.get("stabilizationWindowSeconds") or 0)
    if wanted >= current:
        window, pick = up_window, min
        reason = "ScaleUpStabilized"
        msg = "recent recommendations were lower than current one, applying the lowest recent recommendation"
    else:
        window, pick = down_window, max
        reason = "ScaleDownStabilized"
        msg = (
            "recent recommendations were higher than current one, applying the highest recent recommendation"
        )
    cutoff = now - timedelta(seconds=window)
    recommendation = wanted
    for value, at in memory.recommendations:
        if at > cutoff:
            recommendation = pick(value, recommendation)
    _remember(memory.recommendations, wanted, now, timedelta(seconds=max(up_window, down_window)))
    return recommendation, reason, msg


def _normalize_behavior(
    memory: Memory, behavior: Obj, current: int, wanted: int, low: int, high: int, now: datetime
) -> tuple[int, list[tuple[str, str, str, str]]]:
    """``normalizeDesiredReplicasWithBehaviors``: stabilisation windows, then the rate policies."""
    up = dict(behavior.get("scaleUp") or {})
    down = dict(behavior.get("scaleDown") or {})
    if down.get("stabilizationWindowSeconds") is None:  # maybeInitScaleDownStabilizationWindow
        down["stabilizationWindowSeconds"] = int(DOWNSCALE_STABILIZATION.total_seconds())
    stabilized, reason, msg = _stabilize(memory, current, wanted, up, down, now)
    conds = []
    if stabilized != wanted:
        conds.append(("AbleToScale", "True", reason, msg))
    else:
        conds.append(("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size"))
    desired, reason, msg = (
        stabilized,
        "DesiredWithinRange",
        "the desired count is within the acceptable range",
    )
    if stabilized > current:
        limit = max(scale_up_limit(current, memory.scale_up, up, now), current)
        if high > limit:
            top, why, text = (
                limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            top, why, text = (
                high,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        if stabilized > top:
            desired, reason, msg = top, why, text
    elif stabilized < current:
        limit = min(scale_down_limit(current, memory.scale_down, down, now), current)
        if low < limit:
            bottom, why, text = (
                limit,
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            bottom, why, text = (
                low,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        if stabilized < bottom:
            desired, reason, msg = bottom, why, text
    conds.append(("ScalingLimited", "False" if desired == stabilized else "True", reason, msg))
    return desired, conds


def store_scale_event(memory: Memory, behavior: Obj | None, previous: int, new: int, now: datetime) -> None:
    """``storeScaleEvent``: kept only when ``behavior`` is set (its policies read them)."""
    if behavior is None:
        return
    if new > previous:
        keep = _longest_period(behavior.get("scaleUp") or {})
        _remember(memory.scale_up, new - previous, now, timedelta(seconds=keep))
    else:
        keep = _longest_period(behavior.get("scaleDown") or {})
        _remember(memory.scale_down, previous - new, now, timedelta(seconds=keep))


# --- reconcile ---------------------------------------------------------------------------------------


def target_unreachable(hpa: Obj, error: str, now: str) -> Decision:
    """``FailedGetScale``: the target's scale could not be read (its kind unknown, or it is gone)."""
    old = dict(objects.status(hpa))
    conditions = copy.deepcopy(list(old.get("conditions") or []))
    set_condition(
        conditions,
        "AbleToScale",
        "False",
        "FailedGetScale",
        f"the HPA controller was unable to get the target's current scale: {error}",
        now,
    )
    status = {
        **old,
        "desiredReplicas": int(old.get("desiredReplicas") or 0),
        "conditions": conditions,
        "observedGeneration": objects.generation(hpa) or 1,
    }
    return Decision(status, [("Warning", "FailedGetScale", error)])


def reconcile(hpa: Obj, scale: Obj, memory: Memory, now: datetime, stamp: str) -> Decision:
    """``reconcileAutoscaler`` from the target's ``scale`` (autoscaling/v1 Scale) on."""
    spec = objects.spec(hpa)
    old = dict(objects.status(hpa))
    generation = objects.generation(hpa) or 1
    conditions = copy.deepcopy(list(old.get("conditions") or []))
    events: list[tuple[str, str, str]] = []
    set_condition(
        conditions,
        "AbleToScale",
        "True",
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
        stamp,
    )
    current = int((scale.get("spec") or {}).get("replicas") or 0)
    if not memory.recommendations:
        memory.recommendations.append((current, now))
    low = 1 if spec.get("minReplicas") is None else int(spec["minReplicas"])
    high = int(spec.get("maxReplicas") or 0)
    desired, reason, rescale = 0, "", True
    if current == 0 and low != 0:
        rescale = False
        set_condition(
            conditions,
            "ScalingActive",
            "False",
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
            stamp,
        )
    elif current > high:
        desired, reason = high, "Current number of replicas above Spec.MaxReplicas"
    elif current < low:
        desired, reason = low, "Current number of replicas below Spec.MinReplicas"
    else:
        found = _metrics(hpa, scale, conditions, events, stamp)
        if found is None:
            # upstream writes one empty MetricStatus per metric that could not be read
            unread = [{"type": ""} for _ in spec.get("metrics") or []]
            status = _status(
                old,
                conditions,
                generation,
                currentReplicas=current,
                desiredReplicas=old.get("desiredReplicas"),
                currentMetrics=unread,
            )
            return Decision(status, events)
        wanted, metric = found
        desired = max(wanted, 0)
        if desired > current:
            reason = f"{metric} above target"
        elif desired < current:
            reason = "All metrics below target"
        behavior = spec.get("behavior")
        if behavior is None:
            desired, conds = _normalize_plain(memory, current, desired, low, high, now)
        else:
            desired, conds = _normalize_behavior(memory, behavior, current, desired, low, high, now)
        for cond in conds:
            set_condition(conditions, *cond, stamp)
        rescale = desired != current
    if not rescale:
        status = _status(old, conditions, generation, currentReplicas=current, desiredReplicas=current)
        return Decision(status, events)
    set_condition(
        conditions,
        "AbleToScale",
        "True",
        "SucceededRescale",
        f"the HPA controller was able to update the target scale to {desired}",
        stamp,
    )
    events.append(("Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}"))
    status = _status(
        old, conditions, generation, currentReplicas=current, desiredReplicas=desired, lastScaleTime=stamp
    )
    return Decision(status, events, scale_to=desired, reason=reason)


def rescale_failed(hpa: Obj, decision: Decision, current: int, error: str, stamp: str) -> Decision:
    """``FailedRescale``: the scale update was refused; the status keeps the old desired count."""
    assert decision.scale_to is not None
    old = dict(objects.status(hpa))
    conditions = copy.deepcopy(list(decision.status.get("conditions") or []))
    set_condition(
        conditions,
        "AbleToScale",
        "False",
        "FailedUpdateScale",
        f"the HPA controller was unable to update the target scale: {error}",
        stamp,
    )
    events = [e for e in decision.events if e[1] != "SuccessfulRescale"]
    events.append(
        (
            "Warning",
            "FailedRescale",
            f"New size: {decision.scale_to}; reason: {decision.reason}; error: {error}",
        )
    )
    status = _status(
        old,
        conditions,
        objects.generation(hpa) or 1,
        currentReplicas=current,
        desiredReplicas=old.get("desiredReplicas"),
    )
    return Decision(status, events)

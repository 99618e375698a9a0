"""Why a workload's pods are not ready: pure functions from observed pods (and their PodGroups and
claims) to a short list of causes a status can name.

Why this exists: a DCD, DGD or ModelInfer that only counts ready pods ("0/1 available") leaves the
user to find the cause in pod Events. Every cause kube leaves on a pod or its gang is already in what
the controllers observe — ``PodScheduled=False`` with the scheduler's message, a container waiting in
``CreateContainerConfigError`` (a missing Secret, ConfigMap or key), image pull back-off, a crash loop,
a Volcano PodGroup that cannot be admitted, a claim that is not bound — so the status says it, once
per distinct cause with how many pods it holds. Controllers feed this module what they watch and add
their own sources (a quota wait, say) as further :class:`Cause` values through ``extra``.

Messages are kept stable across reconciles (no pod names, no restart counts, no timestamps), so a
workload stuck on the same cause is a steady state: no status write, no new Event.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.controllers.gang import COSCHEDULING_LABEL, VOLCANO_GROUP_ANNOTATION, group_of_pod
from aiplane.kube.events import WARNING, EventRecorder

__all__ = [
    "MAX_CAUSES",
    "Cause",
    "Held",
    "collect",
    "describe",
    "emit_new",
    "event_message",
    "new_causes",
    "of_coscheduled",
    "of_pod",
    "of_podgroup",
    "summary",
    "waiting_changed",
]

Obj = Mapping[str, Any]

#: Causes named in a status (the biggest first); the rest are counted, not named.
MAX_CAUSES: Final = 5
#: The annotation a Volcano gang member names its PodGroup with.
GROUP_NAME_ANNOTATION: Final = VOLCANO_GROUP_ANNOTATION
#: kubelet's waiting reasons that mean "starting", not "held".
_STARTING: Final = frozenset({"ContainerCreating", "PodInitializing", ""})
_PULL_REASONS: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
_UNBOUND: Final = "unbound immediate PersistentVolumeClaims"
#: A gang whose pods are still being created says so (Volcano's NotEnoughTasks): not a cause.
_FORMING: Final = frozenset({"NotEnoughTasks", "NotEnoughPodsOfTask"})
#: The Coscheduling plugin's words for a gang still forming (members not all created yet, or some held by
#: a scheduling gate such as Kueue's, which is a cause of its own): not a cause.
_COSCHEDULING_FORMING: Final = ("cannot find enough sibling pods", "due to gated pods in the same PodGroup")
#: Volcano's words on each member of a gang it has not admitted (its ``JobInfo.FitError``,
#: volcano-sh/volcano pkg/scheduler/api/job_info.go): the gang's verdict, which its PodGroup's
#: ``Unschedulable`` condition gives once (a member may show it before the PodGroup does).
_VOLCANO_GANG: Final = "pod group is not ready"
#: One entry of the Coscheduling plugin's "resource gap" (a Go map of Quantities printed with %v):
#: ``amd.com/gpu:{{8 0} {<nil>} 8 DecimalSI}`` is 8 (unscaled value 8, scale 0).
_GAP_ENTRY: Final = re.compile(r"([\w./-]+):\{\{(-?\d+) (-?\d+)\} \{[^}]*\} \S* \w+\}")
_GAP: Final = re.compile(r"resource gap: map\[(.*?)\]")
_REJECTED: Final = re.compile(
    r"PodGroup \S+ gets rejected due to Pod \S+ is unschedulable even after PostFilter"
)


@dataclass(frozen=True, order=True)
class Cause:
    """One reason pods wait: a kube-style reason (``Unschedulable``, ``CreateContainerConfigError``,
    ``ImagePullBackOff``, ``CrashLoopBackOff``, ``ClaimUnbound``, …) and what kube said."""

    reason: str
    message: str

    def __post_init__(self) -> None:
        # "; " separates causes in ``waitingFor`` (Volcano's messages use it inside one cause).
        object.__setattr__(self, "message", self.message.replace("; ", ", "))


@dataclass(frozen=True)
class Held:
    """A cause and the pods (names) it holds; ``pods`` is empty for a gang-level cause."""

    cause: Cause
    pods: tuple[str, ...] = ()


def _conditions(obj: Obj) -> list[Mapping[str, Any]]:
    found = objects.status(obj).get("conditions")
    return [c for c in found or () if isinstance(c, Mapping)] if isinstance(found, list) else []


def _condition(obj: Obj, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == type_), None)


def _ready(pod: Obj) -> bool:
    ready = _condition(pod, "Ready")
    return ready is not None and ready.get("status") == "True"


def scheduler_message(message: str) -> str:
    """The scheduler's fit error without its post-filter postscripts: preemption's (the same counts
    again) and dynamic resource allocation's ``no new claims to deallocate``, which the scheduler-plugins
    scheduler (kube-scheduler 1.34's framework) writes before it."""
    head, _, _ = message.partition("preemption:")
    head = head.strip().rstrip(",").strip().removesuffix("no new claims to deallocate")
    return head.strip().rstrip(".,").strip()


def _claim_cause(
    pod: Obj, claims: Callable[[str], Obj | None] | None, storage_classes: Callable[[str], bool] | None
) -> Cause | None:
    """An unbound claim the pod mounts, with the StorageClass it names when that class is missing."""
    for volume in objects.spec(pod).get("volumes") or ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if not isinstance(source, Mapping):
            continue
        name = str(source.get("claimName") or "")
        claim = claims(name) if claims is not None else None
        if claim is None:
            continue
        if objects.status(claim).get("phase") == "Bound" or objects.spec(claim).get("volumeName"):
            continue
        class_name = str(objects.spec(claim).get("storageClassName") or "")
        if class_name and storage_classes is not None and not storage_classes(class_name):
            message = f'persistentvolumeclaim "{name}" is not bound: storageclass "{class_name}" not found'
        else:
            message = f'persistentvolumeclaim "{name}" is not bound'
        return Cause("ClaimUnbound", message)
    return None


def _container_cause(status: Mapping[str, Any]) -> Cause | None:
    waiting = (status.get("state") or {}).get("waiting")
    if not isinstance(waiting, Mapping):
        return None
    reason = str(waiting.get("reason") or "")
    if reason in _STARTING:
        return None
    name = str(status.get("name") or "")
    if reason in _PULL_REASONS:
        return Cause("ImagePullBackOff", f'cannot pull image "{status.get("image") or ""}"')
    if reason == "CrashLoopBackOff":
        terminated = (status.get("lastState") or {}).get("terminated") or {}
        code = terminated.get("exitCode") if isinstance(terminated, Mapping) else None
        tail = f" (last exit code {code})" if code is not None else ""
        return Cause("CrashLoopBackOff", f'container "{name}" keeps crashing{tail}')
    message = str(waiting.get("message") or reason)
    return Cause(reason, message)


def of_pod(
    pod: Obj,
    *,
    claims: Callable[[str], Obj | None] | None = None,
    storage_classes: Callable[[str], bool] | None = None,
) -> Cause | None:
    """What holds this pod, or ``None`` (ready, finished, terminating, or simply still starting).

    ``claims`` looks up a claim of the pod's namespace by name; ``storage_classes`` says whether a
    StorageClass exists. Without them an unbound claim is reported as the scheduler words it."""
    if objects.is_deleting(pod) or _ready(pod):
        return None
    if objects.status(pod).get("phase") in ("Succeeded", "Failed"):
        return None
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or "")
        if _UNBOUND in message and (found := _claim_cause(pod, claims, storage_classes)) is not None:
            return found
        if scheduled.get("reason") == "Unschedulable" and message:
            return Cause("Unschedulable", scheduler_message(message))
        return None
    status = objects.status(pod)
    for container in (*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())):
        if isinstance(container, Mapping) and (found := _container_cause(container)) is not None:
            return found
    return None


def _wanted_resources(podgroup: Obj) -> str:
    """The gang's accelerator requests (``amd.com/gpu 100``), or all of them when it asks for none:
    what a gang Volcano would not admit needs, which its message does not say."""
    wanted = objects.spec(podgroup).get("minResources") or {}
    if not isinstance(wanted, Mapping):
        return ""
    special = {k: v for k, v in wanted.items() if k not in ("cpu", "memory", "pods")}
    chosen = special or dict(wanted)
    return ", ".join(f"{k} {v}" for k, v in sorted(chosen.items()))


def of_podgroup(podgroup: Obj) -> Cause | None:
    """Why a Volcano gang is not running: its ``Unschedulable`` condition while it has not formed
    (Volcano keeps that condition beside ``Scheduled`` once it has, so a formed gang is not held)."""
    if objects.status(podgroup).get("phase") not in (None, "", "Pending", "Inqueue"):
        return None
    condition = _condition(podgroup, "Unschedulable")
    if condition is None or condition.get("status") != "True" or condition.get("reason") in _FORMING:
        return None
    message = scheduler_message(str(condition.get("message") or condition.get("reason") or "unschedulable"))
    wanted = _wanted_resources(podgroup)
    if wanted and "Insufficient" not in message:
        message = f"{message} (the gang needs {wanted})"
    return Cause("Unschedulable", f"PodGroup {objects.name(podgroup)}: {message}")


def _gap(match: re.Match[str]) -> str:
    parts = []
    for name, value, scale in _GAP_ENTRY.findall(match.group(1)):
        amount = int(value) * 10 ** int(scale) if int(scale) >= 0 else int(value) / 10 ** -int(scale)
        parts.append(f"{name} {amount}")
    return "resource gap: " + (", ".join(parts) or match.group(1))


def of_coscheduled(message: str, group: str, podgroup: Obj | None) -> Cause | None:
    """A Coscheduling gang member's ``Unschedulable`` message as its gang's cause, or ``None`` while the
    gang is still forming. The scheduler writes it on each member (its PodGroup has no conditions);
    pod names and Go's rendering of quantities are taken out so the message is stable and readable."""
    if any(words in message for words in _COSCHEDULING_FORMING):
        return None
    text = _REJECTED.sub("the gang was rejected: a member does not fit", _GAP.sub(_gap, message))
    wanted = _wanted_resources(podgroup) if podgroup is not None else ""
    if wanted and "Insufficient" not in text:
        text = f"{text} (the gang needs {wanted})"
    return Cause("Unschedulable", f"PodGroup {group}: {text}")


def collect(
    pods: Iterable[Obj],
    *,
    podgroups: Iterable[Obj] = (),
    claims: Callable[[str], Obj | None] | None = None,
    storage_classes: Callable[[str], bool] | None = None,
    extra: Iterable[Cause] = (),
) -> tuple[Held, ...]:
    """Every distinct cause and the pods it holds, the cause holding most pods first.

    A gang that cannot be admitted is one cause (its PodGroup's); its members' own "unschedulable"
    would say the same thing once per pod, so they are folded into it."""
    held_groups: dict[str, Cause] = {}
    coscheduling: dict[str, Obj] = {}
    for podgroup in podgroups:
        if (cause := of_podgroup(podgroup)) is not None:
            held_groups[objects.name(podgroup)] = cause
        coscheduling[objects.name(podgroup)] = podgroup
    pods_of: dict[Cause, list[str]] = {cause: [] for cause in [*held_groups.values(), *extra]}
    for pod in pods:
        cause = of_pod(pod, claims=claims, storage_classes=storage_classes)
        if cause is None:
            continue
        group = group_of_pod(pod)
        if cause.reason == "Unschedulable" and group in held_groups:
            cause = held_groups[group]
        elif cause.reason == "Unschedulable" and COSCHEDULING_LABEL in objects.labels(pod):
            gang_cause = of_coscheduled(cause.message, group, coscheduling.get(group))
            if gang_cause is None:
                continue
            cause = gang_cause
        elif cause.reason == "Unschedulable" and group and _VOLCANO_GANG in cause.message:
            continue  # the gang's own verdict, not yet on its PodGroup (or a gang still forming)
        pods_of.setdefault(cause, []).append(objects.name(pod))
    held = [Held(cause, tuple(sorted(names))) for cause, names in pods_of.items()]
    return tuple(sorted(held, key=lambda h: (-len(h.pods), h.cause)))


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def describe(held: Sequence[Held]) -> str:
    """For a condition message: ``waiting for: secret "x" not found (2 pods); …`` ('' when none)."""
    if not held:
        return ""
    parts = [
        f"{h.cause.message} ({_pods(len(h.pods))})" if h.pods else h.cause.message for h in held[:MAX_CAUSES]
    ]
    if len(held) > MAX_CAUSES:
        parts.append(f"and {len(held) - MAX_CAUSES} more")
    return "waiting for: " + "; ".join(parts)


def summary(held: Sequence[Held]) -> str | None:
    """For ``status.waitingFor`` (a ``kubectl get`` column): the causes' messages, no counts, so the
    field changes only when a cause does; ``None`` when nothing holds the pods."""
    if not held:
        return None
    text = "; ".join(h.cause.message for h in held[:MAX_CAUSES])
    return text if len(held) <= MAX_CAUSES else f"{text}; and {len(held) - MAX_CAUSES} more"


def new_causes(previous: str | None, held: Sequence[Held]) -> list[Held]:
    """The causes the previous ``waitingFor`` did not name: one Warning Event each."""
    before = previous or ""
    return [h for h in held[:MAX_CAUSES] if h.cause.message not in before]


def event_message(held: Held) -> str:
    """A Warning Event's message: the cause and (a few of) the pods it holds."""
    if not held.pods:
        return held.cause.message
    shown = ", ".join(held.pods[:3])
    more = f" and {len(held.pods) - 3} more" if len(held.pods) > 3 else ""
    return f"{held.cause.message} (pod {shown}{more})"


def emit_new(recorder: EventRecorder, obj: Obj, previous: str | None, held: Sequence[Held]) -> None:
    """One Warning Event per cause the previous ``waitingFor`` did not name (reason: the cause's)."""
    for found in new_causes(previous, held):
        recorder.emit(dict(obj), WARNING, found.cause.reason, event_message(found))


def waiting_changed(old: Obj, new: Obj) -> bool:
    """A watch predicate: the pod's cause changed (so the owner's status may have to say so)."""
    return of_pod(old) != of_pod(new)

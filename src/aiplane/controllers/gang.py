"""Which gang scheduler places the all-or-nothing groups we create, and how a group joins it.

A ModelInfer group (``gangSchedule``) and a multinode Dynamo replica (a LeaderWorkerSet) are gangs: their
pods run together or not at all. Two real schedulers do that, each with a PodGroup API of its own:

* **Volcano** (``volcano``, the default; what upstream's ModelInfer and Dynamo operators use): a
  ``scheduling.volcano.sh/v1beta1`` PodGroup (``minMember``, ``minTaskMember``, ``minResources``,
  ``queue``, ``networkTopology``); a member names it with the annotation ``scheduling.k8s.io/group-name``
  (and its task with ``volcano.sh/task-spec``) and asks for ``schedulerName: volcano``.
* **Coscheduling** (``coscheduling``): the scheduler-plugins scheduler (kubernetes-sigs/scheduler-plugins,
  ``pkg/coscheduling``), a kube-scheduler with the Coscheduling plugin run beside the default one. A
  ``scheduling.x-k8s.io/v1alpha1`` PodGroup (``minMember``, ``minResources``; no queues, tasks or network
  topology); a member names it with the label ``scheduling.x-k8s.io/pod-group`` and asks for that
  scheduler's profile by name (``scheduler-plugins-scheduler``, its Helm chart's default).

Which one a cluster runs is an install-time fact, like its ingress class: an operator option
(``--gang-scheduler``, :class:`GangOptions`), not KaiwoConfig. Switching it at run time would leave the
other API's PodGroups behind and could not move pods already bound by the other scheduler.

Everything that differs between the two is in :class:`GangBackend`; the controllers decide the same way
for both and ask the backend for the PodGroup body and a member's marks.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from aiplane.kube.flags import flag
from aiplane.kube.resources import COSCHEDULING_PODGROUPS, PODGROUPS, Resource

__all__ = [
    "COSCHEDULING",
    "COSCHEDULING_LABEL",
    "COSCHEDULING_SCHEDULER_NAME",
    "VOLCANO",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_SCHEDULER_NAME",
    "VOLCANO_TASK_ANNOTATION",
    "GangBackend",
    "GangOptions",
    "GangScheduler",
    "backend_of",
    "group_of_pod",
    "parse_scheduler",
]

#: A Volcano gang member names its PodGroup (and its task) with these annotations.
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION: Final = "volcano.sh/task-spec"
VOLCANO_SCHEDULER_NAME: Final = "volcano"
#: A Coscheduling gang member names its PodGroup with this label (scheduler-plugins,
#: ``apis/scheduling/v1alpha1``: ``PodGroupLabel``).
COSCHEDULING_LABEL: Final = "scheduling.x-k8s.io/pod-group"
#: The scheduler-plugins scheduler's profile name in its Helm chart
#: (``manifests/install/charts/as-a-second-scheduler/values.yaml``).
COSCHEDULING_SCHEDULER_NAME: Final = "scheduler-plugins-scheduler"

_Obj = dict[str, Any]


class GangScheduler(StrEnum):
    """The gang scheduler the operator's PodGroups and pods are made for."""

    VOLCANO = "volcano"
    COSCHEDULING = "coscheduling"


@dataclass(frozen=True)
class GangBackend:
    """How a gang is expressed for one scheduler: the PodGroup API, its spec fields, a member's marks."""

    scheduler: GangScheduler
    #: The PodGroup resource (its API version and kind).
    resource: Resource
    #: What a human calls it in messages: "Volcano", "scheduler-plugins Coscheduling".
    title: str
    #: The schedulerName member pods ask for.
    scheduler_name: str
    #: The PodGroup spec fields this API has (the rest of a Volcano-shaped spec is left out).
    spec_fields: tuple[str, ...]
    #: ``status.phase`` values the PodGroup's own controller never leaves (scheduler-plugins'
    #: ``podgroup_controller.go`` returns early on Finished and Failed): such a PodGroup is made anew
    #: when its group is rebuilt, or it says Failed of a running group for ever.
    final_phases: tuple[str, ...] = ()

    def stuck(self, podgroup: Mapping[str, Any]) -> bool:
        """Is ``podgroup`` in one of :attr:`final_phases`?"""
        status = podgroup.get("status")
        return isinstance(status, Mapping) and status.get("phase") in self.final_phases

    def podgroup(self, metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> _Obj:
        """A PodGroup of this API from a Volcano-shaped ``spec`` (the richest of the two)."""
        kept = {k: v for k, v in spec.items() if k in self.spec_fields}
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": dict(metadata),
            "spec": kept,
        }

    def join(
        self,
        labels: MutableMapping[str, str],
        annotations: MutableMapping[str, str],
        pod_spec: MutableMapping[str, Any],
        group: str,
        task: str | None = None,
    ) -> None:
        """Mark a pod (its labels, annotations and spec, changed in place) a member of PodGroup ``group``:
        the scheduler's own marks; for Coscheduling also its scheduler name (only its profile gangs, and a
        member left to kube-scheduler would be placed alone). Volcano's members keep the scheduler name
        their workload gave them, as upstream's controllers do."""
        if self.scheduler is GangScheduler.VOLCANO:
            annotations[VOLCANO_GROUP_ANNOTATION] = group
            if task is not None:
                annotations[VOLCANO_TASK_ANNOTATION] = task
            return
        labels[COSCHEDULING_LABEL] = group
        pod_spec["schedulerName"] = self.scheduler_name

    def scheduler_for(self, requested: str | None) -> str | None:
        """The schedulerName of a pod whose workload asked for ``requested``: Coscheduling reads a
        workload's ``volcano`` (the API's customary value) as "the gang scheduler", its own profile."""
        if requested == VOLCANO_SCHEDULER_NAME and self.scheduler is GangScheduler.COSCHEDULING:
            return self.scheduler_name
        return requested


VOLCANO: Final = GangBackend(
    GangScheduler.VOLCANO,
    PODGROUPS,
    "Volcano",
    VOLCANO_SCHEDULER_NAME,
    ("minMember", "minTaskMember", "minResources", "networkTopology", "queue"),
)


def _coscheduling(scheduler_name: str) -> GangBackend:
    return GangBackend(
        GangScheduler.COSCHEDULING,
        COSCHEDULING_PODGROUPS,
        "scheduler-plugins Coscheduling",
        scheduler_name,
        ("minMember", "minResources"),
        ("Finished", "Failed"),
    )


COSCHEDULING: Final = _coscheduling(COSCHEDULING_SCHEDULER_NAME)


def parse_scheduler(value: str) -> GangScheduler:
    """``--gang-scheduler``'s value, or a ``ValueError`` naming the flag and the choices."""
    try:
        return GangScheduler(value)
    except ValueError:
        choices = ", ".join(s.value for s in GangScheduler)
        raise ValueError(f"--gang-scheduler: {value!r} is not one of {choices}") from None


@dataclass(frozen=True)
class GangOptions:
    """``--gang-scheduler``: read by the ModelInfer and Dynamo controllers through
    ``manager.options(GangOptions)``."""

    scheduler: GangScheduler = flag(
        GangScheduler.VOLCANO,
        "--gang-scheduler",
        "The gang scheduler of ModelInfer groups and multinode Dynamo: volcano or coscheduling "
        "(scheduler-plugins, profile scheduler-plugins-scheduler).",
        metavar="NAME",
        cli_type=str,
        parse=parse_scheduler,
    )
    #: Coscheduling only: the scheduler-plugins profile's ``schedulerName``. Not a flag: the profile
    #: the scheduler-plugins chart installs; code (a test's second scheduler) may name another.
    scheduler_name: str = COSCHEDULING_SCHEDULER_NAME

    def backend(self) -> GangBackend:
        return backend_of(self.scheduler, self.scheduler_name)


def backend_of(scheduler: GangScheduler, scheduler_name: str = COSCHEDULING_SCHEDULER_NAME) -> GangBackend:
    """The backend of ``scheduler`` (Coscheduling's with the given profile name)."""
    if scheduler is GangScheduler.VOLCANO:
        return VOLCANO
    return COSCHEDULING if scheduler_name == COSCHEDULING_SCHEDULER_NAME else _coscheduling(scheduler_name)


def group_of_pod(pod: Mapping[str, Any]) -> str:
    """The PodGroup a pod belongs to, by either scheduler's mark ('' for none)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    return str(annotations.get(VOLCANO_GROUP_ANNOTATION) or labels.get(COSCHEDULING_LABEL) or "")

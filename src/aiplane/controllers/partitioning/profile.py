"""PartitioningProfile controller: is the profile's DCM profile really there?

A profile names a profile of the AMD GPU operator's Device Config Manager (``dcmProfileName``), which
must exist under ``gpu-config-profiles`` in DCM's ``config.json`` (the ConfigMap named by
``--dcm-config``, ``kube-amd-gpu/config-manager-config`` by default). Upstream never checked, so a typo
surfaced only as a node stuck in WaitingOperator. Here the profile gets condition ``Ready``: True, or
False with reason ``ConfigMapNotFound`` / ``InvalidDCMConfig`` / ``ProfileNotFound``; plans do not start
nodes on a profile that is not Ready.

Observe (profiles, and the one ConfigMap, from caches) → decide (:mod:`.profile_decide`, pure) → report:
write status only when it changed, Events on transitions to not-Ready.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.controllers.partitioning.profile_decide import READY, Decision, Observed, decide
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import WARNING
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import CONFIGMAPS
from aiplane.kube.shape import Shaped
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "partitioningprofile"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)


#: Events for a profile turning not-Ready, or not-Ready for a new reason (Warning, the condition's reason).
TRANSITION_EVENTS: Final = (ConditionEvent(READY, "False", WARNING, on_reason_change=True),)


class ProfileReconciler:
    """One profile against DCM's ConfigMap (a :class:`~aiplane.kube.shape.Shape`)."""

    def __init__(self, manager: Manager) -> None:
        self.dcm_config = manager.options(PartitioningOptions).dcm_config
        namespace, _, self.cm_name = self.dcm_config.partition("/")
        self.namespace = namespace
        self.profiles = manager.informers.informer(kinds.PARTITIONINGPROFILES)
        self.configmaps = manager.informers.informer(
            CONFIGMAPS, namespace=namespace, field_selector=f"metadata.name={self.cm_name}"
        )
        self.recorder = manager.recorder(NAME)
        self.status = StatusWriter(manager.client, kinds.PARTITIONINGPROFILES, FIELD_MANAGER)

    async def observe(self, request: Request) -> Observed | None:
        profile = self.profiles.get(request.key)
        if profile is None or objects.is_deleting(profile):
            return None
        return Observed(profile, self.configmaps.get(f"{self.namespace}/{self.cm_name}"), self.dcm_config)

    def decide(self, observed: Observed, now: datetime) -> Decision:
        return decide(observed, now)

    async def act(self, observed: Observed, decision: Decision) -> None:
        """Nothing: a profile owns no objects."""

    async def report(self, observed: Observed, decision: Decision) -> Result | None:
        profile = observed.profile
        if decision.changed and await self.status.write(profile, decision.status) is not None:
            emit_transitions(
                self.recorder, profile, TRANSITION_EVENTS, objects.status(profile), decision.status
            )
        return None


def setup_controller(manager: Manager) -> Controller:
    """Observe the profile and DCM's ConfigMap → :mod:`.profile_decide` → write it if changed → Events."""
    reconciler = ProfileReconciler(manager)
    profiles = reconciler.profiles

    def all_profiles(_: dict[str, Any]) -> Iterable[Request]:
        return [Request(None, name) for name in list(profiles.keys())]

    return (
        Controller.build(NAME)
        .for_(kinds.PARTITIONINGPROFILES)
        .watches(
            CONFIGMAPS,
            all_profiles,
            namespace=reconciler.namespace,
            field_selector=f"metadata.name={reconciler.cm_name}",
        )
        .workers(1)
        .reconcile(Shaped(reconciler, manager.clock))
    )


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("infrastructure.silogen.ai", ("partitioningprofiles",), READ),
    Permission("infrastructure.silogen.ai", ("partitioningprofiles/status",), ("patch",)),
    # The AMD GPU operator's DCM ConfigMap (--dcm-config): one object, watched by name.
    Permission("", ("configmaps",), READ),
    EVENTS_WRITE,
)


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers partitioningprofile`` (also part of ``all``)."""
    manager.add_controller(setup_controller(manager))

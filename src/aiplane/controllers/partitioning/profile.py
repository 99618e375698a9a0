"""PartitioningProfile controller: is the profile's DCM profile really there?

A profile names a profile of the AMD GPU operator's Device Config Manager (``dcmProfileName``), which
must exist under ``gpu-config-profiles`` in DCM's ``config.json`` (the ConfigMap named by
``--dcm-config``, ``kube-amd-gpu/config-manager-config`` by default). Upstream never checked, so a typo
surfaced only as a node stuck in WaitingOperator. Here the profile gets condition ``Ready``: True, or
False with reason ``ConfigMapNotFound`` / ``InvalidDCMConfig`` / ``ProfileNotFound``; plans do not start
nodes on a profile that is not Ready.

Observe (profiles, and the one ConfigMap, from caches) → decide (:func:`profile_status`, pure) → write
status only when it changed → Events on transitions to not-Ready.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import set_condition
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import WARNING, EventRecorder
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import CONFIGMAPS
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

READY: Final = "Ready"
#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "partitioningprofile"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)


def dcm_profiles(configmap: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str, str]:
    """The ``gpu-config-profiles`` of DCM's ConfigMap, or (None, reason, message) saying what is wrong."""
    if configmap is None:
        return None, "ConfigMapNotFound", "the DCM ConfigMap does not exist"
    meta = configmap["metadata"]
    where = f"{meta.get('namespace')}/{meta['name']}"
    raw = (configmap.get("data") or {}).get("config.json")
    if raw is None:
        return None, "InvalidDCMConfig", f"ConfigMap {where} has no key config.json"
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        return (
            None,
            "InvalidDCMConfig",
            f"config.json in ConfigMap {where} is not valid JSON: {exc.msg} at line {exc.lineno}",
        )
    profiles = config.get("gpu-config-profiles") if isinstance(config, dict) else None
    if not isinstance(profiles, dict):
        return None, "InvalidDCMConfig", f"config.json in ConfigMap {where} has no gpu-config-profiles object"
    return profiles, "", where


def profile_status(
    profile: dict[str, Any], configmap: dict[str, Any] | None, dcm_config: str, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The status the profile should have, and whether it differs from the current one."""
    current = dict(profile.get("status") or {})
    name = profile["spec"].get("dcmProfileName", "")
    profiles, reason, detail = dcm_profiles(configmap)
    if profiles is None:
        status, message = "False", f"{detail} ({dcm_config})" if reason == "ConfigMapNotFound" else detail
    elif name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        status, reason = "False", "ProfileNotFound"
        message = (
            f'DCM profile "{name}" is not in gpu-config-profiles of ConfigMap {detail} (it has: {known})'
        )
    else:
        status, reason, message = "True", "ProfileFound", f'DCM profile "{name}" found in ConfigMap {detail}'
    generation = profile["metadata"].get("generation")
    conditions, changed = set_condition(
        list(current.get("conditions") or []),
        READY,
        status,
        reason,
        message,
        observed_generation=generation,
        now=now,
    )
    desired = {**current, "conditions": conditions}
    if generation is not None:
        desired["observedGeneration"] = generation
    return desired, changed or desired != current


#: Events for a profile turning not-Ready, or not-Ready for a new reason (Warning, the condition's reason).
TRANSITION_EVENTS: Final = (ConditionEvent(READY, "False", WARNING, on_reason_change=True),)


def setup_controller(manager: Manager) -> Controller:
    """Observe the profile and DCM's ConfigMap → :func:`profile_status` → write it if changed → Events."""
    dcm_config = manager.options(PartitioningOptions).dcm_config
    namespace, _, cm_name = dcm_config.partition("/")
    profiles = manager.informers.informer(kinds.PARTITIONINGPROFILES)
    configmaps = manager.informers.informer(
        CONFIGMAPS, namespace=namespace, field_selector=f"metadata.name={cm_name}"
    )
    recorder = EventRecorder(manager.client, COMPONENT)
    writer = StatusWriter(manager.client, kinds.PARTITIONINGPROFILES, FIELD_MANAGER)
    clock = manager.clock

    def all_profiles(_: dict[str, Any]) -> Iterable[Request]:
        return [Request(None, name) for name in list(profiles.keys())]

    async def reconcile(request: Request) -> Result | None:
        profile = profiles.get(request.key)
        if profile is None or objects.is_deleting(profile):
            return None
        configmap = configmaps.get(f"{namespace}/{cm_name}")
        desired, changed = profile_status(profile, configmap, dcm_config, clock.now())
        if changed and await writer.write(profile, desired) is not None:
            emit_transitions(recorder, profile, TRANSITION_EVENTS, objects.status(profile), desired)
        return None

    return (
        Controller.build(NAME)
        .for_(kinds.PARTITIONINGPROFILES)
        .watches(CONFIGMAPS, all_profiles, namespace=namespace, field_selector=f"metadata.name={cm_name}")
        .workers(1)
        .reconcile(reconcile)
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

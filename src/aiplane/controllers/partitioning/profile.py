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
from datetime import UTC, datetime
from typing import Any

from aiplane.apimachinery.conditions import get_condition, set_condition
from aiplane.kube.controller import Controller, Request, Result
from aiplane.kube.events import WARNING, EventRecorder
from aiplane.kube.resources import CONFIGMAPS, resource_for

READY = "Ready"
FIELD_MANAGER = "aiplane-partitioningprofile"


def profiles_resource() -> Any:
    return resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningProfile")


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


def setup_controller(manager: Any) -> Controller:
    client = manager.client
    dcm_config: str = manager.controller_options.dcm_config
    namespace, _, cm_name = dcm_config.partition("/")
    profiles = manager.informers.informer(profiles_resource())
    configmaps = manager.informers.informer(
        CONFIGMAPS, namespace=namespace, field_selector=f"metadata.name={cm_name}"
    )
    recorder = EventRecorder(client, "partitioningprofile-controller")

    def all_profiles(_: dict[str, Any]) -> Iterable[Request]:
        return [Request(None, name) for name in list(profiles.keys())]

    async def reconcile(request: Request) -> Result | None:
        profile = profiles.get(request.key)
        if profile is None or profile["metadata"].get("deletionTimestamp"):
            return None
        configmap = configmaps.get(f"{namespace}/{cm_name}")
        desired, changed = profile_status(profile, configmap, dcm_config, datetime.now(UTC))
        if not changed:
            return None
        before = get_condition((profile.get("status") or {}).get("conditions") or [], READY)
        await client.patch(
            profiles_resource(),
            request.name,
            {"metadata": {"resourceVersion": profile["metadata"]["resourceVersion"]}, "status": desired},
            subresource="status",
            field_manager=FIELD_MANAGER,
        )
        after = get_condition(desired["conditions"], READY)
        if (
            after
            and after["status"] == "False"
            and (before is None or before.get("reason") != after["reason"])
        ):
            recorder.emit(profile, WARNING, after["reason"], after["message"])
        return None

    controller = (
        Controller.build("partitioningprofile")
        .for_(profiles_resource())
        .watches(CONFIGMAPS, all_profiles, namespace=namespace, field_selector=f"metadata.name={cm_name}")
        .workers(manager.controller_options.max_concurrent_reconciles)
        .reconcile(reconcile)
    )
    return controller


async def setup(manager: Any) -> None:
    """``aiplane run --controllers partitioningprofile`` (also part of ``all``)."""
    controller = setup_controller(manager)
    controller.bind(
        manager.informers, observer=manager.metrics.controllers, queue_metrics=manager.metrics.workqueue
    )
    manager.add_controller(controller)

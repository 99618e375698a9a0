"""The PartitioningProfile's decision, pure: its ``Ready`` condition from DCM's ConfigMap.

``Ready`` is True when the profile's ``dcmProfileName`` is under ``gpu-config-profiles`` in the
``config.json`` of DCM's ConfigMap; False with ``ConfigMapNotFound`` / ``InvalidDCMConfig`` /
``ProfileNotFound`` otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery.conditions import set_condition

__all__ = ["READY", "Decision", "Observed", "dcm_profiles", "decide", "profile_status"]

READY: Final = "Ready"


@dataclass(frozen=True)
class Observed:
    profile: dict[str, Any]
    #: DCM's ConfigMap (None: absent) and where it is looked for (``namespace/name``).
    configmap: dict[str, Any] | None
    dcm_config: str


@dataclass(frozen=True)
class Decision:
    status: dict[str, Any]
    changed: bool


def decide(observed: Observed, now: datetime) -> Decision:
    """The profile's status (:func:`profile_status`)."""
    return Decision(*profile_status(observed.profile, observed.configmap, observed.dcm_config, now))


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

"""API defaulting of the storage and autoscaling kinds (``pkg/apis/*/v1/defaults.go``, ``SetDefaults_*``).

kube-apiserver applies these when it decodes a request body, so every client (and the controllers
that read the objects back) sees them; ``rest.Api`` calls :func:`apply_defaults` on create.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Obj = dict[str, Any]

#: ``autoscaling.DefaultCPUUtilization``: the metric of an HPA that names none.
DEFAULT_CPU_UTILIZATION = 80


def _scale_up_rules() -> Obj:
    """``GenerateHPAScaleUpRules`` defaults: no window, the larger of 4 pods or 100 % per 15 s."""
    return {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    }


def _scale_down_rules() -> Obj:
    """``GenerateHPAScaleDownRules`` defaults: 100 % per 15 s; the window is left to the controller
    (``--horizontal-pod-autoscaler-downscale-stabilization``, 5 minutes)."""
    return {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _fill(rules: Obj | None, defaults: Obj) -> Obj:
    rules = dict(rules or {})
    for key, value in defaults.items():
        if rules.get(key) in (None, []):
            rules[key] = value
    return rules


def default_hpa(obj: Obj) -> None:
    """``SetDefaults_HorizontalPodAutoscaler`` (autoscaling/v2)."""
    spec = obj.setdefault("spec", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION},
                },
            }
        ]
    behavior = spec.get("behavior")
    if behavior is not None:
        spec["behavior"] = {
            **behavior,
            "scaleUp": _fill(behavior.get("scaleUp"), _scale_up_rules()),
            "scaleDown": _fill(behavior.get("scaleDown"), _scale_down_rules()),
        }


def default_storage_class(obj: Obj) -> None:
    """``SetDefaults_StorageClass``: reclaim ``Delete``, binding ``Immediate``."""
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def default_pvc(obj: Obj) -> None:
    """``SetDefaults_PersistentVolumeClaimSpec``: ``Filesystem`` volumes (the phase is the PV
    controller's to write)."""
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")


def default_pv(obj: Obj) -> None:
    """``SetDefaults_PersistentVolume``: reclaim ``Retain``, ``Filesystem`` (the strategy sets phase
    ``Pending``)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")


_DEFAULTERS = {
    ("autoscaling", "HorizontalPodAutoscaler"): default_hpa,
    ("storage.k8s.io", "StorageClass"): default_storage_class,
    ("", "PersistentVolumeClaim"): default_pvc,
    ("", "PersistentVolume"): default_pv,
}


def apply_defaults(group: str, kind: str, obj: Obj) -> None:
    """Default a new ``obj`` of ``group``/``kind`` (nothing for kinds without a defaulter here)."""
    defaulter = _DEFAULTERS.get((group, kind))
    if defaulter is not None:
        defaulter(obj)


DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def is_default_class(storage_class: Obj) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def default_class_name(classes: Iterable[Obj]) -> str | None:
    """``GetDefaultClass``: the newest class annotated as default (name breaks ties), if any."""
    defaults = [sc for sc in classes if is_default_class(sc)]
    if not defaults:
        return None
    newest = max(
        defaults, key=lambda sc: (str(sc["metadata"].get("creationTimestamp", "")), sc["metadata"]["name"])
    )
    return str(newest["metadata"]["name"])


def admit_claim_class(claim: Obj, classes: Callable[[], Iterable[Obj]]) -> None:
    """The ``DefaultStorageClass`` admission plugin: a new claim without ``storageClassName`` gets the
    default class (an empty string means "no class" and is kept)."""
    spec = claim.setdefault("spec", {})
    if spec.get("storageClassName") is not None:
        return
    name = default_class_name(classes())
    if name is not None:
        spec["storageClassName"] = name

"""Objects and schemas shared by the schema tests."""

from __future__ import annotations

import copy
from typing import Any

from aiplane.api.crdgen import crd_for
from aiplane.api.infrastructure import PartitioningPlan

_PLAN_SCHEMA: dict[str, Any] = crd_for(PartitioningPlan)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

PLAN_API_VERSION = "infrastructure.silogen.ai/v1alpha1"


def plan_schema() -> dict[str, Any]:
    """The PartitioningPlan schema (one instance: schemas are treated as immutable by the validator)."""
    return _PLAN_SCHEMA


def plan(spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A PartitioningPlan with one valid rule unless ``spec`` says otherwise."""
    body: dict[str, Any] = {
        "apiVersion": PLAN_API_VERSION,
        "kind": "PartitioningPlan",
        "metadata": {"name": "plan-a"},
        "spec": spec
        if spec is not None
        else {"rules": [{"selector": {}, "profileRef": {"name": "mi300x-cpx"}}]},
    }
    body.update(extra)
    return copy.deepcopy(body)

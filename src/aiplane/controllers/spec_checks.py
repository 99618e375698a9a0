"""What the controllers refuse that the API server lets through, by kind: the functions the controllers
themselves call at reconcile (a DGD's names, a ModelInfer's roles and gang), offered to ``aiplane
validate`` so "valid" there means what it means to the controller — not only to the CRD schema.

Only checks that need nothing but the object are here; those that depend on the cluster (which APIs are
served, the GPU inventory a DGDR plans on) stay with their controllers and are reported in status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from aiplane.controllers.dynamo.graph import validate_graph
from aiplane.controllers.modelinfer.validation import validate as validate_modelinfer

__all__ = ["CHECKS", "spec_problems"]

Obj = Mapping[str, Any]

#: (API group, kind) → the controller's own check, each problem as "field: rule".
CHECKS: Final[dict[tuple[str, str], Callable[[Obj], list[str]]]] = {
    ("nvidia.com", "DynamoGraphDeployment"): lambda obj: [str(p) for p in validate_graph(obj)],
    ("workload.volcano.sh", "ModelInfer"): lambda obj: [str(p) for p in validate_modelinfer(obj)],
}


def spec_problems(obj: Obj) -> list[str]:
    """Everything the object's controller would refuse in it; ``[]`` for kinds without such checks."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    check = CHECKS.get((group, str(obj.get("kind") or "")))
    return check(obj) if check is not None else []

"""SLA-driven sizing of disaggregated inference (issue #12): pure, no Kubernetes imports.

``plan(PlanRequest) -> PlanResult`` answers "which prefill/decode tensor-parallel sizes, decode batch
and worker counts serve model M on system S within TTFT/ITL targets at the best tokens/s/GPU", as
NVIDIA's AIConfigurator does offline, in process. ``aiplane plan`` and the DGDR controller share it.
"""

from aiplane.planner.types import (
    EnginePlan,
    LatencyModel,
    ModelSpec,
    Plan,
    PlannerError,
    PlanRequest,
    PlanResult,
    SystemSpec,
)

__all__ = [
    "EnginePlan",
    "LatencyModel",
    "ModelSpec",
    "Plan",
    "PlanRequest",
    "PlanResult",
    "PlannerError",
    "SystemSpec",
]

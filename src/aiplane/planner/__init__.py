"""SLA-driven sizing of disaggregated inference: pure, no Kubernetes imports.

``plan(PlanRequest) -> PlanResult`` answers "which prefill/decode tensor-parallel sizes, decode batch
and worker counts serve model M on system S within TTFT/ITL targets at the best tokens/s/GPU", as
NVIDIA's AIConfigurator does offline, in process. ``aiplane plan`` and the DGDR controller share it.
"""

from aiplane.planner.api import load_latency_model, plan
from aiplane.planner.latency import BuiltinLatency, max_batch
from aiplane.planner.models import model_from_hf_config, resolve_model
from aiplane.planner.systems import partition, resolve_system
from aiplane.planner.types import (
    DecodeSimulating,
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
    "BuiltinLatency",
    "DecodeSimulating",
    "EnginePlan",
    "LatencyModel",
    "ModelSpec",
    "Plan",
    "PlanRequest",
    "PlanResult",
    "PlannerError",
    "SystemSpec",
    "load_latency_model",
    "max_batch",
    "model_from_hf_config",
    "partition",
    "plan",
    "resolve_model",
    "resolve_system",
]

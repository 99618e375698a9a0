"""Every kind we serve, in the order CRDs are listed and installed."""

from __future__ import annotations

from aiplane.api import config, dynamo, infrastructure, workload
from aiplane.api.base import Resource

RESOURCES: tuple[type[Resource], ...] = (
    infrastructure.PartitioningProfile,
    infrastructure.PartitioningPlan,
    infrastructure.NodePartitioning,
    config.KaiwoConfig,
    config.AIMNamespaceConfig,
    workload.ModelInfer,
    *dynamo.RESOURCES,
)

BY_API_VERSION_KIND: dict[tuple[str, str], type[Resource]] = {
    (model.crd.api_version, model.crd.kind): model for model in RESOURCES
}


def model_for(api_version: str, kind: str) -> type[Resource] | None:
    return BY_API_VERSION_KIND.get((api_version, kind))

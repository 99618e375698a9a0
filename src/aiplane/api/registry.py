"""Every kind we serve, in the order CRDs are listed and installed."""

from __future__ import annotations

from aiplane.api.base import Resource
from aiplane.api.infrastructure import NodePartitioning, PartitioningPlan, PartitioningProfile

RESOURCES: tuple[type[Resource], ...] = (
    PartitioningProfile,
    PartitioningPlan,
    NodePartitioning,
)

BY_API_VERSION_KIND: dict[tuple[str, str], type[Resource]] = {
    (model.crd.api_version, model.crd.kind): model for model in RESOURCES
}

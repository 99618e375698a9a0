"""Each kind aiplane serves, defined once: group, version, plural, kind and scope.

The CRDs (the pydantic models' ``crd``), the runtime (``aiplane.kube.resources.resource_for``), the
controllers and the tests all take a kind's identity from here. Cheap to import: no pydantic.
"""

from __future__ import annotations

from typing import Any, Final

from aiplane.apimachinery.resource import Resource

__all__ = [
    "AIMNAMESPACECONFIGS",
    "DCDS",
    "DGDRS",
    "DGDS",
    "KAIWOCONFIGS",
    "MODELINFERS",
    "NODEPARTITIONINGS",
    "OURS",
    "PARTITIONINGPLANS",
    "PARTITIONINGPROFILES",
    "serving",
]

VERSION: Final = "v1alpha1"
INFRASTRUCTURE: Final = "infrastructure.silogen.ai"
CONFIG: Final = "config.kaiwo.silogen.ai"
WORKLOAD: Final = "workload.volcano.sh"
DYNAMO: Final = "nvidia.com"

PARTITIONINGPROFILES: Final = Resource(
    INFRASTRUCTURE, VERSION, "partitioningprofiles", "PartitioningProfile", False
)
PARTITIONINGPLANS: Final = Resource(INFRASTRUCTURE, VERSION, "partitioningplans", "PartitioningPlan", False)
NODEPARTITIONINGS: Final = Resource(INFRASTRUCTURE, VERSION, "nodepartitionings", "NodePartitioning", False)
KAIWOCONFIGS: Final = Resource(CONFIG, VERSION, "kaiwoconfigs", "KaiwoConfig", False)
AIMNAMESPACECONFIGS: Final = Resource(CONFIG, VERSION, "aimnamespaceconfigs", "AIMNamespaceConfig", True)
MODELINFERS: Final = Resource(WORKLOAD, VERSION, "modelinfers", "ModelInfer", True)
DCDS: Final = Resource(DYNAMO, VERSION, "dynamocomponentdeployments", "DynamoComponentDeployment", True)
DGDS: Final = Resource(DYNAMO, VERSION, "dynamographdeployments", "DynamoGraphDeployment", True)
DGDRS: Final = Resource(
    DYNAMO, VERSION, "dynamographdeploymentrequests", "DynamoGraphDeploymentRequest", True
)

#: In the order CRDs are listed and installed (``aiplane.api.registry``).
OURS: Final = (
    PARTITIONINGPROFILES,
    PARTITIONINGPLANS,
    NODEPARTITIONINGS,
    KAIWOCONFIGS,
    AIMNAMESPACECONFIGS,
    MODELINFERS,
    DGDS,
    DCDS,
    DGDRS,
)


def serving(res: Resource) -> dict[str, Any]:
    """The identity fields of a model's ``CrdInfo``, from the kind's one definition."""
    return {
        "group": res.group,
        "version": res.version,
        "kind": res.kind,
        "plural": res.plural,
        "scope": "Namespaced" if res.namespaced else "Cluster",
    }

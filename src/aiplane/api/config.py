"""config.kaiwo.silogen.ai/v1alpha1: platform runtime configuration.

Spec: ``spec/seeds/001_*.txt`` and ``spec/seeds/004_*.txt``. The two seeds disagree on the name of the
storage section (``storage`` vs ``data``): both are accepted, ``storage`` is canonical, and a config that
sets only ``data`` means the same (see :meth:`KaiwoConfigSpec.effective_storage`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from aiplane.api import kinds
from aiplane.api.base import AGE, ApiModel, Conditions, CrdInfo, PrinterColumn, Resource, conditions_field

GROUP = "config.kaiwo.silogen.ai"

#: The KaiwoConfig the operator reads (upstream hard-codes the name; others are ignored with an event).
KAIWO_CONFIG_NAME = "kaiwo"


class KaiwoRayConfig(ApiModel):
    """KaiwoRayConfig contains the Ray-specific configuration that Kaiwo uses."""

    defaultRayImage: str = Field(
        "ghcr.io/silogen/rocm-ray:6.4",
        description=(
            "DefaultRayImage is the image that is used for Ray workloads if no image is provided in the workload CRD"
        ),
    )
    headPodMemory: str = Field(
        "16Gi", description="HeadPodMemory is the amount of memory that is requested for the Ray head pod"
    )


class KaiwoStorageConfig(ApiModel):
    """KaiwoStorageConfig holds the storage defaults for workloads."""

    defaultStorageClass: str | None = Field(
        None,
        description=(
            "DefaultStorageClass is the storage class that is used for workloads that don't explicitly specify "
            "a storage class."
        ),
    )
    defaultDataMountPath: str = Field(
        "/workload",
        description=(
            "DefaultDataMountPath is the default path for the data storage and downloads that gets mounted in "
            "the workload pods.\nThis value can be overwritten in the workload CRD."
        ),
    )
    defaultHfMountPath: str = Field(
        "/hf_cache",
        description=(
            "DefaultHfMountPath is the default path for the HuggingFace that gets mounted in the workload pods. "
            "The `HF_HOME` environmental variable\nis also set to this value. This value can be overwritten in "
            "the workload CRD."
        ),
    )


class KaiwoNodeConfig(ApiModel):
    """KaiwoNodeConfig holds how GPU nodes are discovered, tainted and pooled."""

    defaultGpuResourceKey: str = Field(
        "amd.com/gpu",
        description="DefaultGpuResourceKey defines the default GPU resource key that is used to reserve GPU capacity for pods",
    )
    defaultGpuTaintKey: str = Field(
        "kaiwo.silogen.ai/gpu", description="DefaultGpuTaintKey is the key that is used to taint GPU nodes"
    )
    excludeMasterNodesFromNodePools: bool = Field(
        False,
        description="ExcludeMasterNodesFromNodePools allows excluding the master node(s) from the node pools",
    )
    addTaintsToGpuNodes: bool = Field(
        False,
        description="AddTaintsToGpuNodes if set to true, will add the DefaultGpuTaintKey taint to the GPU nodes",
    )


class KaiwoSchedulingConfig(ApiModel):
    """KaiwoSchedulingConfig contains the configuration Kaiwo uses for workload scheduling"""

    kubeSchedulerName: str = Field(
        "kaiwo-scheduler",
        description="KubeSchedulerName defines the default scheduler name that is used to schedule the workload",
    )
    pendingThresholdForPreemption: str = Field(
        "5m",
        description=(
            "PendingThresholdForPreemption is the threshold that is used to determine if a workload is awaiting "
            "for compute resources to be available.\nIf the workload is requesting GPUs and pending for longer "
            "than this threshold, kaiwo will start preempting workloads that have exceeded their duration "
            "deadline and are using GPUs of the same vendor as the pending workload."
        ),
    )


class KaiwoResourceMonitoringConfig(ApiModel):
    """KaiwoResourceMonitoringConfig configures the resource monitoring feature.
    Note that the following must be set as environmental variables inside the Kaiwo controller manager as
    these cannot be updated without restarting the operator process:
    RESOURCE_MONITORING_ENABLED=true, RESOURCE_MONITORING_METRICS_ENDPOINT, RESOURCE_MONITORING_POLLING_INTERVAL."""

    lowUtilizationThreshold: float = Field(
        1,
        ge=0,
        description=(
            "LowUtilizationThreshold is the threshold which, if the metric goes under, the workload is considered "
            "underutilized. The threshold is interpreted as the percentage utilization versus the requested capacity."
        ),
    )
    targetNamespaces: list[str] | None = Field(
        None,
        description=(
            "TargetNamespaces is a list of namespaces to apply the monitoring to. If not supplied or empty, all "
            "namespaces apart from kube-system will be inspected. However, only pods associated with KaiwoJobs "
            "or KaiwoServices are impacted."
        ),
    )
    profile: Literal["gpu"] = Field("gpu", description="Profile chooses the target resource to monitor.")
    terminateUnderutilized: bool = Field(
        False,
        description="TerminateUnderutilized will terminate workloads that are underutilizing resources if set to `true`",
    )
    terminateUnderutilizedAfter: str = Field(
        "24h",
        pattern=r"^([0-9]+(s|m|h))+$",
        description=(
            "TerminateUnderutilizedAfter specifies the duration after which the workload will be terminated if it "
            "has been underutilizing resources (for this amount of time)"
        ),
    )


def _empty_default(description: str) -> Any:
    """An object field defaulted to ``{}``, so the API server fills its nested defaults."""
    return Field(description=description, json_schema_extra={"default": {}})


class KaiwoConfigSpec(ApiModel):
    """KaiwoConfigSpec defines the desired configuration for the Kaiwo operator's configuration.
    There should typically be only one KaiwoConfig resource in the cluster."""

    ray: KaiwoRayConfig = _empty_default("Ray defines the Ray-specific settings")
    storage: KaiwoStorageConfig = _empty_default("Storage defines the storage-specific settings")
    data: KaiwoStorageConfig | None = Field(
        None,
        description=(
            "Data is the older name of Storage (deprecated, still accepted). Settings given here apply where "
            "Storage leaves a field at its default."
        ),
    )
    nodes: KaiwoNodeConfig = _empty_default("Nodes defines the node configuration settings")
    scheduling: KaiwoSchedulingConfig = _empty_default(
        "Scheduling contains the configuration Kaiwo uses for workload scheduling"
    )
    resourceMonitoring: KaiwoResourceMonitoringConfig = _empty_default(
        "ResourceMonitoring defines the resource-monitoring specific settings"
    )
    defaultClusterQueueName: str = Field(
        "kaiwo",
        description=(
            "DefaultClusterQueueName is the name of the default cluster queue that is used for workloads that "
            "don't explicitly specify a cluster queue."
        ),
    )
    defaultClusterQueueCohortName: str = Field(
        "kaiwo",
        description=(
            "DefaultClusterQueueCohortName is the name of the default cohort that is used for the default "
            "cluster queue.\nClusterQueues in the same cohort can share resources."
        ),
    )
    dynamicallyUpdateDefaultClusterQueue: bool = Field(
        False,
        description=(
            "DynamicallyUpdateDefaultClusterQueue defines whether the Kaiwo operator should dynamically update "
            'default "kaiwo" clusterqueue.\nIf set to true, the operator will make sure that the default '
            "clusterqueue is always up to date and reflects total resources available.\nIf nodes are added or "
            "removed, the operator will update the default clusterqueue to reflect the current state of the cluster."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_sections(cls, data: Any) -> Any:
        # The API server defaults every section to {} (then fills its fields); mirror that so a model
        # built from a manifest equals one read back from the server.
        if isinstance(data, dict):
            data = dict(data)
            for section in ("ray", "storage", "nodes", "scheduling", "resourceMonitoring"):
                data.setdefault(section, {})
        return data

    def effective_storage(self) -> KaiwoStorageConfig:
        """The storage settings in force: ``storage``, with ``data`` filling what ``storage`` leaves default.

        Both sections arrive defaulted from the API server, so "left at its default" is the only signal
        that a field of ``storage`` was not set; a field set in both wins from ``storage``.
        """
        return merge_storage(self.storage.to_dict(), self.data.to_dict() if self.data else None)


def merge_storage(storage: dict[str, Any], data: dict[str, Any] | None) -> KaiwoStorageConfig:
    """Merge the canonical ``storage`` section with the legacy ``data`` one (plain dicts, as in the cache)."""
    defaults = KaiwoStorageConfig().to_dict()
    merged = {**defaults, **storage}
    for key, value in (data or {}).items():
        if merged.get(key) == defaults.get(key):
            merged[key] = value
    return KaiwoStorageConfig.model_validate(merged)


class KaiwoNodePoolStatus(ApiModel):
    """KaiwoNodePoolStatus is one discovered node pool: a Kueue ResourceFlavor and what it contributes."""

    name: str = Field(description="Name is the pool's (and its ResourceFlavor's) name.")
    nodes: int = Field(0, description="Nodes is the number of nodes counted in the pool.")
    nominalQuota: dict[str, str] | None = Field(
        None, description="NominalQuota is the quota this pool gives the default ClusterQueue, per resource."
    )


class KaiwoConfigStatus(ApiModel):
    """KaiwoConfigStatus is what the KaiwoConfig controller applied (the seed has no status; aiplane adds it)."""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the generation of the spec the status describes."
    )
    conditions: Conditions = conditions_field(
        "Conditions: Ready (queues and taints applied as the spec says) with the reason when not."
    )
    nodePools: list[KaiwoNodePoolStatus] | None = Field(
        None, description="NodePools are the discovered pools, one ResourceFlavor each."
    )
    clusterQueue: str | None = Field(None, description="ClusterQueue is the default ClusterQueue managed.")
    localQueues: list[str] | None = Field(
        None, description="LocalQueues are the namespaces holding our LocalQueue of the default ClusterQueue."
    )
    taintedNodes: list[str] | None = Field(
        None, description="TaintedNodes are the nodes carrying our GPU taint."
    )
    notConsumed: list[str] | None = Field(
        None,
        description=(
            "NotConsumed lists spec fields accepted but read by no controller of this suite "
            "(no workload kind here uses them)."
        ),
    )


class KaiwoConfig(Resource):
    """KaiwoConfig manages the Kaiwo operator's configuration which can be modified during runtime."""

    crd = CrdInfo(
        **kinds.serving(kinds.KAIWOCONFIGS),
        short_names=("kcfg",),
        categories=("kaiwo", "aiplane"),
        printer_columns=(
            PrinterColumn("Cluster-Queue", ".spec.defaultClusterQueueName"),
            PrinterColumn("Dynamic-Queue", ".spec.dynamicallyUpdateDefaultClusterQueue", "boolean"),
            PrinterColumn("GPU-Taints", ".spec.nodes.addTaintsToGpuNodes", "boolean"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            AGE,
        ),
    )

    spec: KaiwoConfigSpec = Field(
        default_factory=KaiwoConfigSpec,
        description="Spec defines the desired state for the Kaiwo operator configuration.",
    )
    status: KaiwoConfigStatus | None = None


# --- AIMNamespaceConfig ----------------------------------------------------------------------------


class SecretValueReference(ApiModel):
    """SecretValueReference references a key within a Kubernetes Secret."""

    secretName: str | None = Field(None, description="SecretName is the name of the Secret.")
    secretKey: str | None = Field(None, description="SecretKey is the key within the Secret.")


class AIMS3Credential(ApiModel):
    """AIMS3Credential configures S3 credential references for a specific endpoint.
    Provide an endpoint and secret references for authentication."""

    endpointUrl: str | None = None
    accessKeyId: SecretValueReference | None = None
    secretAccessKey: SecretValueReference | None = None


class AIMGCSCredential(ApiModel):
    """AIMGCSCredential configures a GCS service account credential reference.
    The referenced secret key should contain the JSON content of the service account."""

    applicationCredentials: SecretValueReference | None = None


class AIMAzureBlobCredential(ApiModel):
    """AIMAzureBlobCredential configures an Azure Blob Storage connection string reference."""

    connectionString: SecretValueReference | None = None


class AIMNamespaceCredentials(ApiModel):
    """AIMNamespaceCredentials gathers optional credentials for model discovery and caching.
    One or more providers can be configured."""

    huggingFaceToken: SecretValueReference | None = Field(
        None, description="HuggingFaceToken is the token used to access Hugging Face repositories."
    )
    s3: list[AIMS3Credential] | None = Field(
        None, description="S3 contains one or more S3 credential configurations."
    )
    gcs: list[AIMGCSCredential] | None = Field(
        None, description="GCS contains one or more GCS credential configurations."
    )
    azureBlob: list[AIMAzureBlobCredential] | None = Field(
        None, description="AzureBlob contains one or more Azure Blob credential configurations."
    )


class AIMNamespaceImageConfig(ApiModel):
    """AIMNamespaceImageConfig defines image pull configuration for AIM workloads in the namespace.
    Configure one or more image pull secrets to access private registries hosting AIM images."""

    imagePullSecrets: list[str] | None = Field(
        None, description="ImagePullSecrets is the list of Secret names to use for pulling AIM images."
    )


class GatewayRef(ApiModel):
    """GatewayRef identifies a KGateway instance the namespace should use for exposure and routing.
    The operator can create or link to this instance according to policy."""

    name: str | None = Field(None, description="Name is the name of the gateway object.")
    namespace: str | None = Field(
        None, description="Namespace is the namespace where the gateway object resides."
    )


class AIMNamespaceConfigSpec(ApiModel):
    """AIMNamespaceConfigSpec defines the desired configuration for an AIM-enabled namespace:
    the gateway used for exposure and routing, and secret references for model sources and caches."""

    gateway: GatewayRef | None = Field(
        None, description="Gateway references the KGateway instance to use for exposure and routing."
    )
    credentials: AIMNamespaceCredentials | None = Field(
        None, description="Credentials provide secret references used during model access and caching."
    )
    images: AIMNamespaceImageConfig | None = Field(
        None, description="Images configures image pull behavior for AIM images within this namespace."
    )


class AIMNamespaceConfigStatus(ApiModel):
    """AIMNamespaceConfigStatus reports whether this config applies and whether what it references exists.

    Condition types: ``Applied`` (True: this is the namespace's effective config; False with reason
    ``NotDefault`` when another config named ``default`` applies, or ``Ambiguous`` when several exist
    and none is named ``default``), ``SecretsResolved`` (False: ``SecretNotFound`` /
    ``SecretKeyNotFound``, the message names the field path, Secret and key; never a value),
    ``GatewayResolved`` (False: ``GatewayNotFound``) and ``RoutesReady`` (HTTPRoutes created).
    """

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the generation the conditions were computed for."
    )
    conditions: Conditions = conditions_field("Conditions are the observations above, one per type.")
    routes: list[str] | None = Field(
        None, description="Routes are the names of the HTTPRoutes created for this namespace's workloads."
    )


class AIMNamespaceConfig(Resource):
    """AIMNamespaceConfig configures credentials and routing for a namespace.
    It is namespaced and typically created by a tenant administrator."""

    crd = CrdInfo(
        **kinds.serving(kinds.AIMNAMESPACECONFIGS),
        short_names=("aimns",),
        categories=("kaiwo", "aiplane"),
        printer_columns=(
            PrinterColumn("Gateway", ".spec.gateway.name"),
            PrinterColumn("Gateway-Namespace", ".spec.gateway.namespace", priority=1),
            AGE,
        ),
    )

    spec: AIMNamespaceConfigSpec | None = None
    status: AIMNamespaceConfigStatus | None = Field(
        None, description="Status is what the aimnamespaceconfig controller found (not in the seed: ours)."
    )

"""nvidia.com/v1alpha1: NVIDIA Dynamo graph deployments, component deployments and SLA-driven requests.

Spec: ``spec/seeds/003_*.txt`` (the upstream API reference of ai-dynamo/dynamo). Where we depart from or
add to the seed:

- DynamoGraphDeploymentSpec has ``services`` (map of DynamoComponentDeploymentSharedSpec) as upstream does.
- DynamoComponentDeploymentSpec subclasses DynamoComponentDeploymentSharedSpec (upstream inlines it).
- Resources, ResourceItem, ExtraPodMetadata and ExtraPodSpec come from upstream's ``api/dynamo/common``.
- ExtraPodSpec is PodSpec's structural schema with ``containers`` optional plus ``mainContainer``.
- ExtraPodSpec's schema is built lazily, protected so the CRD generator re-emits it unchanged.
- ExtraPodSpec values are checked as PodSpec/Container overrides (no containers and no name needed).
- DGDR ``status.generatedDeployment`` is a RawExtension marked ``x-kubernetes-embedded-resource``.
- PVC has a CEL rule: storageClass, size and volumeAccessMode are required when create is true.
- DynamoComponentDeployment has a status (conditions, podSelector, replicas…) and a scale subresource.
- DynamoGraphDeploymentStatus has ``observedGeneration`` and ``readyServices`` (``"2/3"``) in addition to the
  seed's state and conditions.
- SLASpec ``itl`` and ``ttft`` have ``minimum: 1`` (the upstream controller rejects values <= 0).
- Printer columns: DGD Backend/State/Ready/Ready-Services, DCD Service/Backend/Replicas/Ready-Replicas/Available,
  DGDR Model/Backend/State/DGD-State, each followed by Age.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field

from aiplane.api import kinds
from aiplane.api.base import (
    AGE,
    ApiModel,
    Conditions,
    CrdInfo,
    EnvVar,
    HorizontalPodAutoscalerBehavior,
    LazyStructuralSchema,
    MetricSpec,
    PersistentVolumeAccessMode,
    PrinterColumn,
    Probe,
    Quantity,
    RawExtension,
    Resource,
    ResourceClaim,
    Scale,
    conditions_field,
    rule,
    schema_checked,
)
from aiplane.apimachinery import builtin

GROUP = "nvidia.com"
CATEGORIES = ("dynamo", "aiplane")

BackendFramework = Literal["sglang", "vllm", "trtllm"]
ProfilingBackend = Literal["vllm", "sglang", "trtllm"]

# --- ExtraPodSpec: a PodSpec override with a main-container override --------------------------------

_POD_SPEC = "io.k8s.api.core.v1.PodSpec"
_CONTAINER = "io.k8s.api.core.v1.Container"
_MAIN_CONTAINER_DESCRIPTION = (
    "MainContainer is the main container of the component; it is merged over the generated container."
)


def extra_pod_spec_structural() -> dict[str, Any]:
    """The structural CRD schema of ExtraPodSpec: PodSpec and a ``mainContainer``, both overrides.

    An override need not repeat what the controller generates, so ``containers`` (PodSpec) and
    ``name`` (the main container is always named by the controller) are optional here.
    """
    schema = builtin.structural(_POD_SPEC)
    _drop_required(schema, "containers")
    main = builtin.structural(_CONTAINER, description=_MAIN_CONTAINER_DESCRIPTION)
    _drop_required(main, "name")
    schema["properties"]["mainContainer"] = main
    return schema


def _drop_required(schema: dict[str, Any], name: str) -> None:
    required = [item for item in schema.get("required", []) if item != name]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)


ExtraPodSpec = Annotated[
    dict[str, Any],
    LazyStructuralSchema(extra_pod_spec_structural),
    AfterValidator(schema_checked(extra_pod_spec_structural)),
]


# --- Shared component types --------------------------------------------------------------------------


class Autoscaling(ApiModel):
    # The seed documents neither the type nor its fields.

    enabled: bool | None = None
    minReplicas: int | None = None
    maxReplicas: int | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None
    metrics: list[MetricSpec] | None = None


class ResourceItem(ApiModel):
    # From upstream api/dynamo/common (the seed does not define it).

    cpu: str | None = None
    memory: str | None = None
    gpu: str | None = Field(
        None,
        description=(
            "Indicates the number of GPUs to request.\n"
            "total number of GPUs is NumberOfNodes * GPU in case of multinode deployment."
        ),
    )
    gpuType: str | None = Field(
        None,
        description=(
            'Can specify a custom GPU type, e.g. "gpu.intel.com/xe"\n'
            'By default if not specified, the GPU type is "nvidia.com/gpu"'
        ),
    )
    custom: dict[str, str] | None = None


class Resources(ApiModel):
    # From upstream api/dynamo/common (the seed does not define it).

    requests: ResourceItem | None = None
    limits: ResourceItem | None = None
    claims: list[ResourceClaim] | None = None


class ExtraPodMetadata(ApiModel):
    # From upstream api/dynamo/common (the seed does not define it).

    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None


class IngressTLSSpec(ApiModel):
    # The seed documents no type description.

    secretName: str | None = Field(
        None,
        description="SecretName is the name of a Kubernetes Secret containing the TLS certificate and key.",
    )


class IngressSpec(ApiModel):
    # The seed documents no type description.

    enabled: bool | None = Field(
        None, description="Enabled exposes the component through an ingress or virtual service when true."
    )
    host: str | None = Field(
        None, description="Host is the base host name to route external traffic to this component."
    )
    useVirtualService: bool | None = Field(
        None,
        description=(
            "UseVirtualService indicates whether to configure a service-mesh VirtualService "
            "instead of a standard Ingress."
        ),
    )
    virtualServiceGateway: str | None = Field(
        None,
        description=(
            "VirtualServiceGateway optionally specifies the gateway name to attach the VirtualService to."
        ),
    )
    hostPrefix: str | None = Field(
        None, description="HostPrefix is an optional prefix added before the host."
    )
    annotations: dict[str, str] | None = Field(
        None, description="Annotations to set on the generated Ingress/VirtualService resources."
    )
    labels: dict[str, str] | None = Field(
        None, description="Labels to set on the generated Ingress/VirtualService resources."
    )
    tls: IngressTLSSpec | None = Field(
        None, description="TLS holds the TLS configuration used by the Ingress/VirtualService."
    )
    hostSuffix: str | None = Field(
        None, description="HostSuffix is an optional suffix appended after the host."
    )
    ingressControllerClassName: str | None = Field(
        None, description='IngressControllerClassName selects the ingress controller class (e.g., "nginx").'
    )


class SharedMemorySpec(ApiModel):
    # The seed documents neither the type nor its fields.

    disabled: bool | None = None
    size: Quantity | None = None


class VolumeMount(ApiModel):
    """VolumeMount references a PVC defined at the top level for volumes to be mounted by the component"""

    name: str = Field(description="Name references a PVC name defined in the top-level PVCs map")
    mountPoint: str | None = Field(
        None,
        description=(
            "MountPoint specifies where to mount the volume.\n"
            "If useAsCompilationCache is true and mountPoint is not specified,\n"
            "a backend-specific default will be used."
        ),
    )
    useAsCompilationCache: bool = Field(
        False,
        description=(
            "UseAsCompilationCache indicates this volume should be used as a compilation cache.\n"
            "When true, backend-specific environment variables will be set "
            "and default mount points may be used."
        ),
    )


class MultinodeSpec(ApiModel):
    # The seed documents no type description.

    nodeCount: int = Field(
        2,
        ge=2,
        description=(
            "Indicates the number of nodes to deploy for multinode components.\n"
            "Total number of GPUs is NumberOfNodes * GPU limit.\n"
            "Must be greater than 1."
        ),
    )


class DynamoComponentDeploymentSharedSpec(ApiModel):
    # The seed documents no type description.

    annotations: dict[str, str] | None = Field(
        None,
        description=(
            "Annotations to add to generated Kubernetes resources for this component\n"
            "(such as Pod, Service, and Ingress when applicable)."
        ),
    )
    labels: dict[str, str] | None = Field(
        None, description="Labels to add to generated Kubernetes resources for this component."
    )
    serviceName: str | None = Field(None, description="The name of the component")
    componentType: str | None = Field(
        None, description='ComponentType indicates the role of this component (for example, "main").'
    )
    subComponentType: str | None = Field(
        None,
        description='SubComponentType indicates the sub-role of this component (for example, "prefill").',
    )
    dynamoNamespace: str | None = Field(
        None,
        description=(
            "Dynamo namespace of the service (allows to override the Dynamo namespace of the service "
            "defined in annotations inside the Dynamo archive)"
        ),
    )
    resources: Resources | None = Field(
        None,
        description=(
            "Resources requested and limits for this component, including CPU, memory,\n"
            "GPUs/devices, and any runtime-specific resources."
        ),
    )
    autoscaling: Autoscaling | None = Field(
        None, description="Autoscaling config for this component (replica range, target utilization, etc.)."
    )
    envs: list[EnvVar] | None = Field(
        None,
        description="Envs defines additional environment variables to inject into the component containers.",
    )
    envFromSecret: str | None = Field(
        None,
        description=(
            "EnvFromSecret references a Secret whose key/value pairs will be exposed as\n"
            "environment variables in the component containers."
        ),
    )
    volumeMounts: list[VolumeMount] | None = Field(
        None,
        description=(
            "VolumeMounts references PVCs defined at the top level "
            "for volumes to be mounted by the component."
        ),
    )
    ingress: IngressSpec | None = Field(
        None,
        description="Ingress config to expose the component outside the cluster (or through a service mesh).",
    )
    sharedMemory: SharedMemorySpec | None = Field(
        None, description="SharedMemory controls the tmpfs mounted at /dev/shm (enable/disable and size)."
    )
    extraPodMetadata: ExtraPodMetadata | None = Field(
        None, description="ExtraPodMetadata adds labels/annotations to the created Pods."
    )
    extraPodSpec: ExtraPodSpec | None = Field(
        None,
        description=(
            "ExtraPodSpec allows to override the main pod spec configuration.\n"
            "It is a k8s standard PodSpec. It also contains a MainContainer (standard k8s Container) field\n"
            "that allows overriding the main container configuration."
        ),
    )
    livenessProbe: Probe | None = Field(
        None, description="LivenessProbe to detect and restart unhealthy containers."
    )
    readinessProbe: Probe | None = Field(
        None, description="ReadinessProbe to signal when the container is ready to receive traffic."
    )
    replicas: int | None = Field(
        None,
        description="Replicas is the desired number of Pods for this component when autoscaling is not used.",
    )
    multinode: MultinodeSpec | None = Field(
        None, description="Multinode is the configuration for multinode components."
    )


# --- DynamoComponentDeployment -----------------------------------------------------------------------


class DynamoComponentDeploymentSpec(DynamoComponentDeploymentSharedSpec):
    """DynamoComponentDeploymentSpec defines the desired state of DynamoComponentDeployment"""

    dynamoComponent: str | None = Field(
        None,
        description=(
            "DynamoComponent selects the Dynamo component from the archive to deploy.\n"
            "Typically corresponds to a component defined in the packaged Dynamo artifacts."
        ),
    )
    dynamoTag: str | None = Field(
        None, description='contains the tag of the DynamoComponent: for example, "my_package:MyService"'
    )
    backendFramework: BackendFramework | None = Field(
        None,
        description='BackendFramework specifies the backend framework (e.g., "sglang", "vllm", "trtllm")',
    )


class DynamoComponentDeploymentStatus(ApiModel):
    """DynamoComponentDeploymentStatus defines the observed state of DynamoComponentDeployment"""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the most recent generation observed by the controller."
    )
    conditions: Conditions = conditions_field(
        "Conditions captures the latest observed state of the component (including\n"
        "availability and readiness) using standard Kubernetes condition types."
    )
    podSelector: dict[str, str] | None = Field(
        None,
        description=(
            "PodSelector contains the labels that can be used to select Pods belonging to\n"
            "this component deployment."
        ),
    )
    replicas: int | None = Field(
        None, description="Replicas is the number of pods of this component that exist."
    )
    readyReplicas: int | None = Field(
        None, description="ReadyReplicas is the number of pods of this component that are ready."
    )
    labelSelector: str | None = Field(
        None,
        description="LabelSelector is the pod selector in string form, for the scale subresource and HPA.",
    )
    waitingFor: str | None = Field(
        None,
        description=(
            "WaitingFor names what holds the pods while they are not ready (a scheduler message, a\n"
            "missing Secret, image pull back-off, a crash loop, an unbound claim), one cause per item."
        ),
    )


class DynamoComponentDeployment(Resource):
    """DynamoComponentDeployment is the Schema for the dynamocomponentdeployments API"""

    crd = CrdInfo(
        **kinds.serving(kinds.DCDS),
        short_names=("dcd",),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Service", ".spec.serviceName"),
            PrinterColumn("Backend", ".spec.backendFramework"),
            PrinterColumn("Replicas", ".spec.replicas", "integer"),
            PrinterColumn("Ready-Replicas", ".status.readyReplicas", "integer"),
            PrinterColumn("Available", '.status.conditions[?(@.type=="Available")].status'),
            PrinterColumn("Waiting-For", ".status.waitingFor", description="What holds the pods"),
            AGE,
        ),
        scale=Scale(),
    )

    spec: DynamoComponentDeploymentSpec = Field(
        description="Spec defines the desired state for this Dynamo component deployment."
    )
    status: DynamoComponentDeploymentStatus | None = Field(
        None, description="Status reflects the current observed state of the component deployment."
    )


# --- DynamoGraphDeployment ---------------------------------------------------------------------------


class PVC(ApiModel):
    # The seed documents no type description.

    model_config = {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                rule(
                    "!has(self.create) || !self.create || "
                    "(has(self.storageClass) && has(self.size) && has(self.volumeAccessMode))",
                    "storageClass, size and volumeAccessMode are required when create is true",
                )
            ]
        }
    }

    create: bool | None = Field(None, description="Create indicates to create a new PVC")
    name: str = Field(description="Name is the name of the PVC")
    storageClass: str | None = Field(
        None, description="StorageClass to be used for PVC creation. Required when create is true."
    )
    size: Quantity | None = Field(
        None, description="Size of the volume in Gi, used during PVC creation. Required when create is true."
    )
    volumeAccessMode: PersistentVolumeAccessMode | None = Field(
        None,
        description="VolumeAccessMode is the volume access mode of the PVC. Required when create is true.",
    )


class DynamoGraphDeploymentSpec(ApiModel):
    """DynamoGraphDeploymentSpec defines the desired state of DynamoGraphDeployment."""

    dynamoGraph: str | None = Field(
        None,
        description=(
            "DynamoGraph selects the graph (workflow/topology) to deploy. This must match\n"
            "a graph name packaged with the Dynamo archive."
        ),
    )
    pvcs: list[PVC] | None = Field(
        None,
        description=(
            "PVCs defines a list of persistent volume claims that can be referenced by components.\n"
            "Each PVC must have a unique name that can be referenced in component specifications."
        ),
    )
    services: dict[str, DynamoComponentDeploymentSharedSpec] | None = Field(
        None, description="Services are the services to deploy as part of this deployment."
    )
    envs: list[EnvVar] | None = Field(
        None,
        description=(
            "Envs are environment variables applied to all services in the graph unless\n"
            "overridden by service-specific configuration."
        ),
    )
    backendFramework: BackendFramework | None = Field(
        None,
        description='BackendFramework specifies the backend framework (e.g., "sglang", "vllm", "trtllm").',
    )


class DynamoGraphDeploymentStatus(ApiModel):
    """DynamoGraphDeploymentStatus defines the observed state of DynamoGraphDeployment."""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the most recent generation observed by the controller."
    )
    state: str | None = Field(
        None, description="State is a high-level textual status of the graph deployment lifecycle."
    )
    conditions: Conditions = conditions_field(
        "Conditions contains the latest observed conditions of the graph deployment.\n"
        "The slice is merged by type on patch updates."
    )
    readyServices: str | None = Field(
        None,
        description=(
            'ReadyServices is "<ready>/<services>": how many of the graph\'s services have a\n'
            "DynamoComponentDeployment that is Available at its current generation."
        ),
    )
    waitingFor: str | None = Field(
        None,
        description=(
            "WaitingFor names what holds the pods while they are not ready (a scheduler message, a\n"
            "missing Secret, image pull back-off, a crash loop, an unbound claim), per service."
        ),
    )


class DynamoGraphDeployment(Resource):
    """DynamoGraphDeployment is the Schema for the dynamographdeployments API."""

    crd = CrdInfo(
        **kinds.serving(kinds.DGDS),
        short_names=("dgd",),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Backend", ".spec.backendFramework"),
            PrinterColumn("State", ".status.state"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Ready-Services", ".status.readyServices"),
            PrinterColumn("Waiting-For", ".status.waitingFor", description="What holds the pods"),
            AGE,
        ),
    )

    spec: DynamoGraphDeploymentSpec = Field(
        description="Spec defines the desired state for this graph deployment."
    )
    status: DynamoGraphDeploymentStatus | None = Field(
        None, description="Status reflects the current observed state of this graph deployment."
    )


# --- DynamoGraphDeploymentRequest --------------------------------------------------------------------


class SLASpec(ApiModel):
    """SLASpec defines the Service Level Agreement profiling targets."""

    itl: int = Field(ge=1, description="ITL is the target Inter-Token Latency in milliseconds.")
    ttft: int = Field(ge=1, description="TTFT is the target Time To First Token in milliseconds.")
    isl: int = Field(
        3000,
        ge=1,
        description="ISL is the Input Sequence Length (number of tokens) profiled for. Default: 3000.",
    )
    osl: int = Field(
        500,
        ge=1,
        description="OSL is the Output Sequence Length (number of tokens) profiled for. Default: 500.",
    )


class GPUSpec(ApiModel):
    """GPUSpec defines optional GPU type specification."""

    type: str | None = Field(None, description='Type specifies the GPU type (e.g., "h200", "h100", "a100").')
    minNumGPUsPerEngine: int = Field(
        1,
        ge=1,
        description="MinNumGPUsPerEngine is the smallest number of GPUs one engine may use. Default: 1.",
    )
    maxNumGPUsPerEngine: int = Field(
        8,
        ge=1,
        description=(
            "MaxNumGPUsPerEngine is the largest number of GPUs one engine may use. Default: 8 with the\n"
            "built-in latency model; unset, AIConfigurator's engine searches its own sizes (up to 16\n"
            "for mixture-of-experts workers)."
        ),
    )
    totalGpus: int | None = Field(
        None,
        ge=1,
        description=(
            "TotalGPUs caps the GPU budget of the plan. When omitted, the budget is the GPUs of this\n"
            "type on schedulable nodes that other pods do not already request (upstream v1beta1:\n"
            "spec.hardware.totalGpus)."
        ),
    )


class DeploymentOverridesSpec(ApiModel):
    """DeploymentOverridesSpec defines metadata overrides for the auto-created DGD."""

    name: str | None = Field(
        None,
        description=(
            "Name is the name for the created DynamoGraphDeployment.\n"
            "If not specified, defaults to the DGDR name."
        ),
    )
    namespace: str | None = Field(
        None,
        description=(
            "Namespace is the namespace for the created DynamoGraphDeployment.\n"
            "If not specified, defaults to the DGDR namespace."
        ),
    )
    labels: dict[str, str] | None = Field(
        None,
        description=(
            "Labels are additional labels to add to the DynamoGraphDeployment.\n"
            "These are merged with auto-generated labels."
        ),
    )
    annotations: dict[str, str] | None = Field(
        None, description="Annotations are additional annotations to add to the DynamoGraphDeployment."
    )


class ConfigMapKeySelector(ApiModel):
    """ConfigMapKeySelector selects a key from a ConfigMap."""

    name: str = Field(description="Name of the ConfigMap.")
    key: str = Field("disagg.yaml", description="Key in the ConfigMap to select.")


class ProfilingConfigSpec(ApiModel):
    """ProfilingConfigSpec defines the profiling configuration."""

    configMapRef: ConfigMapKeySelector | None = Field(
        None,
        description=(
            "ConfigMapRef is a reference to a ConfigMap containing the profiling configuration.\n"
            'The ConfigMap should contain a key (default: "disagg.yaml") with the configuration file.\n'
            "This is only used for online profiling."
        ),
    )


class DynamoGraphDeploymentRequestSpec(ApiModel):
    """DynamoGraphDeploymentRequestSpec defines the desired state of DynamoGraphDeploymentRequest.
    This CRD serves as the primary interface for users to request model deployments
    with specific performance and resource constraints for SLA-driven deployments."""

    modelName: str = Field(description='ModelName specifies the model to deploy (e.g., "meta/llama3-70b").')
    backend: ProfilingBackend = Field("trtllm", description="Backend specifies the backend framework to use.")
    sla: SLASpec = Field(description="SLA defines the Service Level Agreement profiling targets.")
    gpu: GPUSpec | None = Field(None, description="GPU defines optional GPU type specification.")
    online: bool = Field(
        False,
        description=(
            "Online indicates whether to use online profiler (true) or AI Configurator (false).\n"
            "When true, uses real deployment for profiling (2-4 hours).\n"
            "When false, uses AI Configurator for fast profiling (20-30 seconds)."
        ),
    )
    autoApply: bool = Field(
        False,
        description=(
            "AutoApply indicates whether to automatically create a DynamoGraphDeployment\n"
            "after profiling completes. If false, only the spec is generated in status."
        ),
    )
    autoApplyBestEffort: bool = Field(
        False,
        description=(
            "AutoApplyBestEffort lets autoApply create the DynamoGraphDeployment even when the best\n"
            "plan misses the SLA (the SLAMet condition says by how much). Default: false, such a plan\n"
            "is generated but not applied."
        ),
    )
    deploymentOverrides: DeploymentOverridesSpec | None = Field(
        None,
        description=(
            "DeploymentOverrides allows overriding metadata for the auto-created DGD.\n"
            "Only used when AutoApply is true."
        ),
    )
    profilingConfig: ProfilingConfigSpec | None = Field(
        None,
        description=(
            "ProfilingConfig provides configuration for the profiling job.\nOnly used when Online is true."
        ),
    )


class DeploymentStatus(ApiModel):
    """DeploymentStatus tracks the auto-created DGD status."""

    name: str | None = Field(None, description="Name is the name of the created DynamoGraphDeployment.")
    namespace: str | None = Field(
        None, description="Namespace is the namespace of the created DynamoGraphDeployment."
    )
    state: str | None = Field(
        None,
        description=(
            "State is the current state of the DynamoGraphDeployment.\n"
            "This is mirrored from the DGD's status.state field."
        ),
    )
    created: bool | None = Field(
        None,
        description=(
            "Created indicates whether the DGD has been created.\n"
            "Used to prevent recreation if DGD is deleted by user."
        ),
    )


class DynamoGraphDeploymentRequestStatus(ApiModel):
    """DynamoGraphDeploymentRequestStatus defines the observed state of DynamoGraphDeploymentRequest."""

    state: str | None = Field(
        None,
        description=(
            "State is a high-level textual status of the deployment request lifecycle.\n"
            'Possible values: "Pending", "Profiling", "Deploying", "Ready", "DeploymentDeleted", "Failed"'
        ),
    )
    observedGeneration: int | None = Field(
        None,
        description=(
            "ObservedGeneration reflects the generation of the most recently observed spec.\n"
            "Used to detect spec changes and enforce immutability."
        ),
    )
    conditions: Conditions = conditions_field(
        "Conditions contains the latest observed conditions of the deployment request.\n"
        "The slice is merged by type on patch updates."
    )
    profilingResults: str | None = Field(
        None, description="ProfilingResults contains references to the profiling data and results."
    )
    generatedDeployment: RawExtension | None = Field(
        None,
        description=(
            "GeneratedDeployment contains the full generated DynamoGraphDeployment (including metadata)\n"
            "based on profiling results. This can be used to create a DynamoGraphDeployment resource.\n"
            "Stored as RawExtension to preserve all fields including metadata."
        ),
        json_schema_extra={"x-kubernetes-embedded-resource": True},
    )
    deployment: DeploymentStatus | None = Field(
        None, description="Deployment tracks the auto-created DGD if AutoApply is true."
    )


#: The states in which the DGDR controller ignores a spec change (its ``IMMUTABLE``; a test keeps the two
#: equal): from profiling on, the request is what was planned. Refused at admission by a transition
#: rule on the whole object (a rule on ``spec`` alone cannot see the state), so ``kubectl edit`` says
#: so instead of printing "patched" for a change nothing will apply.
FROZEN_STATES: Final = ("Profiling", "Deploying", "Ready", "DeploymentDeleted")
SPEC_FROZEN_RULE: Final = rule(
    "self.spec == oldSelf.spec || !has(oldSelf.status) || !has(oldSelf.status.state) || "
    "!(oldSelf.status.state in [" + ", ".join(f"'{s}'" for s in FROZEN_STATES) + "])",
    "spec is immutable once the request is Profiling, Deploying, Ready or DeploymentDeleted: "
    "delete the request and create a new one",
    field_path=".spec",
)


class DynamoGraphDeploymentRequest(Resource):
    """DynamoGraphDeploymentRequest is the Schema for the dynamographdeploymentrequests API.
    It serves as the primary interface for users to request model deployments with
    specific performance and resource constraints, enabling SLA-driven deployments."""

    crd = CrdInfo(
        **kinds.serving(kinds.DGDRS),
        short_names=("dgdr",),
        categories=CATEGORIES,
        root_validations=(SPEC_FROZEN_RULE,),
        printer_columns=(
            PrinterColumn("Model", ".spec.modelName"),
            PrinterColumn("Backend", ".spec.backend"),
            PrinterColumn("State", ".status.state"),
            PrinterColumn("SLA-Met", '.status.conditions[?(@.type=="SLAMet")].status'),
            PrinterColumn("DGD-State", ".status.deployment.state"),
            AGE,
        ),
    )

    spec: DynamoGraphDeploymentRequestSpec = Field(
        description="Spec defines the desired state for this deployment request."
    )
    status: DynamoGraphDeploymentRequestStatus | None = Field(
        None, description="Status reflects the current observed state of this deployment request."
    )


RESOURCES: tuple[type[Resource], ...] = (
    DynamoGraphDeployment,
    DynamoComponentDeployment,
    DynamoGraphDeploymentRequest,
)

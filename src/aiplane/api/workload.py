"""workload.volcano.sh/v1alpha1: ModelInfer, multi-role multi-node inference groups.

Spec: ``spec/seeds/002_*.txt`` (kthena at e4fb6663). Additions to the seed, all from upstream's webhook
or its later versions (see docs/api.md): unique role names and ``partition < replicas`` as CEL rules,
non-negative counts, the percent pattern of maxUnavailable/maxSurge, ``status.labelSelector`` and the
scale subresource. The seed repeats ``kind``/``apiVersion`` in its tables; they are one field each.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from aiplane.api import kinds
from aiplane.api.base import (
    AGE,
    ApiModel,
    Conditions,
    CrdInfo,
    IntOrString,
    LabelSelector,
    PodSpec,
    PrinterColumn,
    Resource,
    Scale,
    conditions_field,
    rule,
)

GROUP = "workload.volcano.sh"

RecoveryPolicy = Literal["InferGroupRecreate", "RoleRecreate", "None"]

ROLE_NAME_PATTERN = r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
_INT_OR_PERCENT: dict[str, JsonValue] = {"pattern": r"^(100|[1-9]?[0-9])%$"}


class NetworkTopologySpec(ApiModel):
    """NetworkTopologySpec is the Volcano network-topology constraint of a gang (with HyperNodes)."""

    mode: Literal["hard", "soft"] = Field(
        "hard", description="Mode specifies the mode of the network topology constrain."
    )
    highestTierAllowed: int = Field(
        1,
        ge=0,
        description="HighestTierAllowed specifies the highest tier that a job allowed to cross when scheduling.",
    )


class GangSchedule(ApiModel):
    """GangSchedule defines the gang scheduling configuration."""

    networkTopology: NetworkTopologySpec | None = Field(
        None,
        description=(
            "NetworkTopology defines the NetworkTopology config, this field works in conjunction with network "
            "topology feature and hyperNode CRD."
        ),
    )
    minRoleReplicas: dict[str, int] | None = Field(
        None,
        description=(
            "MinRoleReplicas defines the minimum number of replicas required for each role\nin gang scheduling. "
            "This map allows users to specify different\nminimum replica requirements for different roles.\n"
            "Key: role name\nValue: minimum number of replicas required for that role"
        ),
    )


class Metadata(ApiModel):
    """Metadata is a simplified version of ObjectMeta in Kubernetes."""

    labels: dict[str, str] | None = Field(
        None,
        description=(
            "Map of string keys and values that can be used to organize and categorize\n(scope and select) "
            "objects. May match selectors of replication controllers\nand services.\nMore info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels"
        ),
    )
    annotations: dict[str, str] | None = Field(
        None,
        description=(
            "Annotations is an unstructured key value map stored with a resource that may be\nset by external "
            "tools to store and retrieve arbitrary metadata. They are not\nqueryable and should be preserved "
            "when modifying objects.\nMore info: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations"
        ),
    )


class PodTemplateSpec(ApiModel):
    """PodTemplateSpec describes the data a pod should have when created from a template"""

    metadata: Metadata | None = Field(
        None, description="Refer to Kubernetes API documentation for fields of `metadata`."
    )
    spec: PodSpec = Field(description="Specification of the desired behavior of the pod.")


class Role(ApiModel):
    """Role defines the specific pod instance role that performs the inference task."""

    name: str = Field(
        max_length=12,
        pattern=ROLE_NAME_PATTERN,
        description="The name of a role. Name must be unique within an infergroup",
    )
    replicas: int = Field(
        1,
        ge=0,
        description=(
            "The number of a certain role.\nFor example, in Disaggregated Prefilling, setting the replica count "
            "for both the P and D roles to 1 results in 1P1D deployment configuration.\nThis approach can "
            "similarly be applied to configure a xPyD deployment scenario.\nDefault to 1."
        ),
    )
    entryTemplate: PodTemplateSpec = Field(
        description=(
            "EntryTemplate defines the template for the entry pod of a role.\nRequired: Currently, a role must "
            "have only one entry-pod."
        )
    )
    workerReplicas: int = Field(
        ge=0,
        description=(
            "WorkerReplicas defines the number for the worker pod of a role.\nRequired: Need to set the number "
            "of worker-pod replicas."
        ),
    )
    workerTemplate: PodTemplateSpec | None = Field(
        None, description="WorkerTemplate defines the template for the worker pod of a role."
    )


class InferGroup(ApiModel):
    """InferGroup is the smallest unit to complete the inference task"""

    restartGracePeriodSeconds: int = Field(
        0,
        ge=0,
        description=(
            "RestartGracePeriodSeconds defines the grace time for the controller to rebuild the infergroup when "
            "an error occurs\nDefaults to 0 (infergroup will be rebuilt immediately after an error)"
        ),
    )
    gangSchedule: GangSchedule | None = Field(
        None, description="GangSchedule defines the GangSchedule config."
    )
    roles: list[Role] = Field(
        min_length=1,
        max_length=4,
        description="Roles are the pod roles of every InferGroup (for example prefill and decode).",
        json_schema_extra={
            "x-kubernetes-validations": [
                rule("self.all(x, self.exists_one(y, y.name == x.name))", "role names must be unique")
            ]
        },
    )


class RollingUpdateConfiguration(ApiModel):
    """RollingUpdateConfiguration defines the parameters to be used for RollingUpdateStrategyType."""

    maxUnavailable: IntOrString = Field(
        1,
        description=(
            "The maximum number of replicas that can be unavailable during the update.\nValue can be an "
            "absolute number (ex: 5) or a percentage of total replicas at the start of update (ex: 10%).\n"
            "Absolute number is calculated from percentage by rounding down.\nThis can not be 0 if MaxSurge is "
            "0.\nBy default, a fixed value of 1 is used."
        ),
        json_schema_extra=_INT_OR_PERCENT,
    )
    maxSurge: IntOrString = Field(
        0,
        description=(
            "The maximum number of replicas that can be scheduled above the original number of\nreplicas.\n"
            "Value can be an absolute number (ex: 5) or a percentage of total replicas at\nthe start of the "
            "update (ex: 10%).\nAbsolute number is calculated from percentage by rounding up.\nBy default, a "
            "value of 0 is used."
        ),
        json_schema_extra=_INT_OR_PERCENT,
    )
    partition: int | None = Field(
        None,
        ge=0,
        description=(
            "Partition indicates the ordinal at which the ModelInfer should be partitioned\nfor updates. During "
            "a rolling update, all inferGroups from ordinal Replicas-1 to\nPartition are updated. All "
            "inferGroups from ordinal Partition-1 to 0 remain untouched.\nThe default value is 0."
        ),
    )


class RolloutStrategy(ApiModel):
    """RolloutStrategy defines the strategy that the ModelInfer controller
    will use to perform replica updates."""

    type: Literal["InferGroupRollingUpdate"] = Field(
        "InferGroupRollingUpdate",
        description="Type defines the rollout strategy, it can only be “InferGroupRollingUpdate” for now.",
    )
    rollingUpdateConfiguration: RollingUpdateConfiguration | None = Field(
        None,
        description=(
            "RollingUpdateConfiguration defines the parameters to be used when type is RollingUpdateStrategyType."
            "\noptional"
        ),
    )


class TopologySpreadConstraint(ApiModel):
    """TopologySpreadConstraint defines the topology spread constraint."""

    maxSkew: int | None = Field(
        None, description="MaxSkew describes the degree to which inferGroup may be unevenly distributed."
    )
    topologyKey: str | None = Field(
        None,
        description=(
            "TopologyKey is the key of node labels. Nodes that have a label with this key\nand identical values "
            "are considered to be in the same topology."
        ),
    )
    whenUnsatisfiable: str | None = Field(
        None,
        description=(
            "WhenUnsatisfiable indicates how to deal with an inferGroup if it doesn't satisfy\nthe spread "
            "constraint."
        ),
    )
    labelSelector: LabelSelector | None = Field(
        None, description="LabelSelector is used to find matching inferGroups."
    )


_PARTITION_PATH = "self.rolloutStrategy.rollingUpdateConfiguration"


class ModelInferSpec(ApiModel):
    """ModelInferSpec defines the specification of the ModelInfer resource."""

    model_config = {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                rule(
                    f"!has(self.rolloutStrategy) || !has({_PARTITION_PATH}) || "
                    f"!has({_PARTITION_PATH}.partition) || {_PARTITION_PATH}.partition < self.replicas",
                    "partition must be less than replicas",
                    field_path=".rolloutStrategy.rollingUpdateConfiguration.partition",
                )
            ]
        }
    }

    replicas: int = Field(
        1,
        ge=0,
        description="Number of InferGroups. That is the number of instances that run infer tasks\nDefault to 1.",
    )
    schedulerName: str | None = Field(
        None, description="SchedulerName defines the name of the scheduler used by ModelInfer"
    )
    template: InferGroup = Field(description="Template defines the template for InferGroup")
    rolloutStrategy: RolloutStrategy | None = Field(
        None, description="RolloutStrategy defines the strategy that will be applied to update replicas"
    )
    recoveryPolicy: RecoveryPolicy = Field(
        "RoleRecreate",
        description="RecoveryPolicy defines the recovery policy for the failed Pod to be rebuilt",
    )
    topologySpreadConstraints: list[TopologySpreadConstraint] | None = Field(
        None,
        description=(
            "TopologySpreadConstraints spread InferGroups over topology domains (applied to the entry pods of "
            "each group)."
        ),
    )


class ModelInferStatus(ApiModel):
    """ModelInferStatus defines the observed state of ModelInfer"""

    observedGeneration: int | None = Field(
        None,
        description=(
            "observedGeneration is the most recent generation observed for ModelInfer. It corresponds to the\n"
            "ModelInfer's generation, which is updated on mutation by the API Server."
        ),
    )
    replicas: int | None = Field(
        None,
        description=(
            "Replicas track the total number of InferGroup that have been created (updated or not, ready or not)"
        ),
    )
    currentReplicas: int | None = Field(
        None,
        description=(
            "CurrentReplicas is the number of InferGroup created by the ModelInfer controller from the ModelInfer "
            "version"
        ),
    )
    updatedReplicas: int | None = Field(
        None,
        description="UpdatedReplicas track the number of InferGroup that have been updated (ready or not).",
    )
    availableReplicas: int | None = Field(
        None,
        description="AvailableReplicas track the number of InferGroup that are in ready state (updated or not).",
    )
    conditions: Conditions = conditions_field("Conditions track the condition of the ModelInfer.")
    currentRevision: str | None = Field(
        None,
        description=(
            "CurrentRevision is the revision of the InferGroups that are not (yet) updated: groups below the "
            "rolling update's partition are (re)created on it."
        ),
    )
    updateRevision: str | None = Field(
        None, description="UpdateRevision is the revision of spec.template.roles that groups are updated to."
    )
    labelSelector: str | None = Field(
        None,
        description=(
            "LabelSelector selects one pod per InferGroup (the entry pod of the first role), in string form, "
            "for the scale subresource and HPA/KEDA."
        ),
    )
    waitingFor: str | None = Field(
        None,
        description=(
            "WaitingFor names what holds the pods while they are not ready (a scheduler message, a\n"
            "missing Secret, image pull back-off, a crash loop, an unbound claim), one per cause."
        ),
    )


class ModelInfer(Resource):
    """ModelInfer is the Schema for the LLM infer API"""

    crd = CrdInfo(
        **kinds.serving(kinds.MODELINFERS),
        short_names=("mi",),
        categories=("all", "kthena", "aiplane"),
        printer_columns=(
            PrinterColumn("Desired", ".spec.replicas", "integer", "Desired InferGroups"),
            PrinterColumn("Current", ".status.replicas", "integer", "InferGroups that exist"),
            PrinterColumn(
                "Updated", ".status.updatedReplicas", "integer", "InferGroups on the latest revision"
            ),
            PrinterColumn(
                "Available", ".status.availableReplicas", "integer", "InferGroups whose pods are all ready"
            ),
            PrinterColumn("Waiting-For", ".status.waitingFor", description="What holds the pods"),
            PrinterColumn("Recovery", ".spec.recoveryPolicy", priority=1),
            AGE,
        ),
        scale=Scale(),
    )

    spec: ModelInferSpec
    status: ModelInferStatus | None = None

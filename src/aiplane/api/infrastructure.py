"""infrastructure.silogen.ai/v1alpha1: GPU partition profiles rolled across nodes.

Spec: ``spec/seeds/000_*.txt``. Upstream never merged this API (silogen/kaiwo#341); we keep its G2 object
model (separate PartitioningProfile) with the G3 semantics, see docs/api.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aiplane.api import kinds
from aiplane.api.base import (
    AGE,
    ApiModel,
    Conditions,
    CrdInfo,
    LabelSelector,
    PrinterColumn,
    Quantity,
    Resource,
    Time,
    conditions_field,
    rule,
)

GROUP = "infrastructure.silogen.ai"
CATEGORIES = ("infrastructure", "gpu", "aiplane")

NodePartitioningPhase = Literal[
    "Pending", "Draining", "Applying", "WaitingOperator", "Verifying", "Succeeded", "Failed", "Skipped"
]
PartitioningPlanPhase = Literal["Pending", "Progressing", "Paused", "Completed", "Degraded"]


# --- PartitioningProfile ---------------------------------------------------------------------------


class PartitioningProfileSpec(ApiModel):
    """PartitioningProfileSpec defines the desired state of PartitioningProfile."""

    description: str | None = Field(
        None, description="Description is a human-readable description of this profile."
    )
    targetSelector: LabelSelector | None = Field(
        None,
        description=(
            "TargetSelector is an optional guardrail to ensure the profile is only\n"
            "applied to compatible nodes. If specified, the controller will validate\n"
            "that nodes match this selector before applying the profile."
        ),
    )
    expectedResources: dict[str, Quantity] | None = Field(
        None,
        description=(
            "ExpectedResources defines the resources that should appear in\n"
            "node.status.allocatable after partitioning succeeds."
        ),
    )
    dcmProfileName: str = Field(
        min_length=1,
        description=(
            "DcmProfileName is the name of the profile to be applied.\n"
            "This is the name of the profile under `gpu-config-profile` in DCM config.json."
        ),
    )


class PartitioningProfileStatus(ApiModel):
    """PartitioningProfileStatus defines the observed state of PartitioningProfile."""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the most recent generation observed by the controller."
    )
    conditions: Conditions = conditions_field(
        "Conditions represent the latest available observations of the profile's state."
    )


class PartitioningProfile(Resource):
    """PartitioningProfile is the Schema for the partitioningprofiles API.
    It defines a reusable GPU partition configuration that can be referenced by PartitioningPlans."""

    crd = CrdInfo(
        **kinds.serving(kinds.PARTITIONINGPROFILES),
        short_names=("gpuprofile", "pp"),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("DCM-Profile", ".spec.dcmProfileName", description="DCM profile name"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Reason", '.status.conditions[?(@.type=="Ready")].reason', priority=1),
            AGE,
        ),
    )

    spec: PartitioningProfileSpec
    status: PartitioningProfileStatus | None = None


# --- PartitioningPlan ------------------------------------------------------------------------------


class ProfileReference(ApiModel):
    """ProfileReference references a PartitioningProfile."""

    name: str = Field(min_length=1, description="Name of the PartitioningProfile.")


class PlanReference(ApiModel):
    """PlanReference references the parent PartitioningPlan."""

    name: str | None = Field(None, description="Name of the PartitioningPlan.")
    uid: str | None = Field(None, description="UID of the PartitioningPlan (for strong ownership).")


class PartitioningRule(ApiModel):
    """PartitioningRule maps a node selector to a partition profile."""

    description: str | None = Field(
        None, description="Description is an optional human-readable name for this rule."
    )
    selector: LabelSelector = Field(description="Selector selects nodes to partition.")
    profileRef: ProfileReference = Field(
        description="ProfileRef references the PartitioningProfile to apply."
    )


class RolloutPolicy(ApiModel):
    """RolloutPolicy defines how to orchestrate the rollout across multiple nodes."""

    maxParallel: int = Field(
        1, ge=1, description="MaxParallel is the maximum number of nodes to process in parallel."
    )
    maxUnavailable: int = Field(
        1,
        ge=0,
        description=(
            "MaxUnavailable is the maximum number of nodes allowed to be unavailable at once.\n"
            "Unavailable means: Draining, Applying, Verifying, or Failed."
        ),
    )
    excludeControlPlane: bool = Field(
        True, description="ExcludeControlPlane controls if control plane nodes are excluded or not."
    )


class PartitioningPlanSpec(ApiModel):
    """PartitioningPlanSpec defines the desired state of PartitioningPlan."""

    model_config = {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                rule(
                    "!(has(self.dryRun) && self.dryRun && (!has(oldSelf.dryRun) || !oldSelf.dryRun))",
                    "dryRun cannot be re-enabled once disabled",
                )
            ]
        }
    }

    paused: bool | None = Field(
        None,
        description=(
            "Paused indicates whether the plan should stop reconciling.\n"
            "When true, no new node operations will be started, but status updates continue."
        ),
    )
    dryRun: bool | None = Field(
        None,
        description=(
            "DryRun indicates whether to simulate the plan without making any changes.\n"
            "When true, NodePartitioning resources are created but marked as Skipped."
        ),
    )
    rollout: RolloutPolicy | None = Field(
        None, description="Rollout defines how to orchestrate node changes."
    )
    rules: list[PartitioningRule] = Field(
        min_length=1, description="Rules defines the rules mapping nodes to partition profiles."
    )


class PlanSummary(ApiModel):
    """PlanSummary aggregates node counts by phase."""

    totalNodes: int | None = Field(
        None, description="TotalNodes is the total number of nodes tracked by the plan."
    )
    matchingNodes: int | None = Field(
        None, description="MatchingNodes is the number of nodes matched by the plan's selectors."
    )
    pending: int | None = Field(None, description="Pending is the number of nodes in Pending phase.")
    applying: int | None = Field(
        None, description="Applying is the number of nodes in Applying or related phases."
    )
    verifying: int | None = Field(None, description="Verifying is the number of nodes in Verifying phase.")
    succeeded: int | None = Field(
        None, description="Succeeded is the number of nodes that completed successfully."
    )
    failed: int | None = Field(None, description="Failed is the number of nodes that failed.")
    skipped: int | None = Field(None, description="Skipped is the number of nodes that were skipped.")
    inProgress: int | None = Field(
        None,
        description=(
            "InProgress is the number of nodes holding a rollout.maxParallel slot: Draining, Applying,\n"
            "WaitingOperator, Verifying, or admitted and not yet picked up."
        ),
    )


class NodeStatusSummary(ApiModel):
    """NodeStatusSummary provides a lightweight summary of a node's partitioning status."""

    nodeName: str | None = Field(None, description="NodeName is the name of the node.")
    desiredHash: str | None = Field(None, description="DesiredHash is the desired state hash.")
    currentHash: str | None = Field(None, description="CurrentHash is the current state hash.")
    phase: NodePartitioningPhase | None = Field(None, description="Phase is the current phase.")
    retries: int | None = Field(None, description="Retries is the number of retry attempts so far.")
    lastError: str | None = Field(None, description="LastError is the most recent error message.")
    lastUpdateTime: Time | None = Field(
        None, description="LastUpdateTime is the timestamp of the last status update."
    )


class PartitioningPlanStatus(ApiModel):
    """PartitioningPlanStatus defines the observed state of PartitioningPlan."""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the most recent generation observed by the controller."
    )
    phase: PartitioningPlanPhase | None = Field(
        None, description="Phase represents the overall phase of the plan."
    )
    summary: PlanSummary | None = Field(None, description="Summary aggregates node counts by phase.")
    conditions: Conditions = conditions_field(
        "Conditions represent the latest available observations of the plan's state."
    )
    lastSyncTime: Time | None = Field(
        None, description="LastSyncTime is the timestamp of the last successful reconciliation."
    )
    nodeStatuses: list[NodeStatusSummary] | None = Field(
        None,
        description=(
            "NodeStatuses is a lightweight cache of per-node status for dashboards.\n"
            "The source of truth is in the NodePartitioning resources."
        ),
    )


class PartitioningPlan(Resource):
    """PartitioningPlan is the Schema for the partitioningplans API.
    It orchestrates the application of partition profiles across a set of nodes."""

    crd = CrdInfo(
        **kinds.serving(kinds.PARTITIONINGPLANS),
        short_names=("gpuplan", "plan"),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Succeeded", ".status.summary.succeeded", "integer"),
            PrinterColumn("Failed", ".status.summary.failed", "integer"),
            PrinterColumn("Total", ".status.summary.matchingNodes", "integer", "Nodes matched by the rules"),
            PrinterColumn(
                "In-Progress",
                ".status.summary.inProgress",
                "integer",
                "Nodes holding a maxParallel slot",
                priority=1,
            ),
            PrinterColumn("Max-Parallel", ".spec.rollout.maxParallel", "integer", priority=1),
            PrinterColumn("Paused", ".spec.paused", "boolean", priority=1),
            PrinterColumn("Dry-Run", ".spec.dryRun", "boolean", priority=1),
            AGE,
        ),
    )

    spec: PartitioningPlanSpec
    status: PartitioningPlanStatus | None = None


# --- NodePartitioning ------------------------------------------------------------------------------


class NodePartitioningSpec(ApiModel):
    """NodePartitioningSpec defines the desired state of NodePartitioning."""

    planRef: PlanReference | None = Field(None, description="PlanRef references the parent PartitioningPlan.")
    dryRun: bool | None = Field(
        None,
        description=(
            "DryRun indicates whether this is a dry-run operation.\n"
            "When true, the controller will skip all actual operations and set phase to Skipped."
        ),
    )
    nodeName: str = Field(min_length=1, description="NodeName is the name of the target node.")
    desiredHash: str = Field(
        min_length=1,
        description=(
            "DesiredHash is a deterministic hash of the desired partition state.\n"
            "Used for idempotency and change detection."
        ),
    )
    profileRef: ProfileReference | None = Field(
        None, description="ProfileRef references the PartitioningProfile to apply."
    )


class NodePartitioningStatus(ApiModel):
    """NodePartitioningStatus defines the observed state of NodePartitioning."""

    observedGeneration: int | None = Field(
        None, description="ObservedGeneration is the most recent generation observed by the controller."
    )
    phase: NodePartitioningPhase | None = Field(
        None, description="Phase represents the current phase in the state machine."
    )
    conditions: Conditions = conditions_field(
        "Conditions represent the latest available observations of the operation's state."
    )
    currentHash: str | None = Field(None, description="CurrentHash is the hash of the current applied state.")
    blockedBy: str | None = Field(
        None,
        description=(
            "BlockedBy names the PodDisruptionBudgets (namespace/name, comma-separated) whose refusals "
            "are holding the drain; unset when nothing blocks it."
        ),
    )


class NodePartitioning(Resource):
    """NodePartitioning is the Schema for the nodepartitionings API.
    It represents a per-node work item for applying a partition profile."""

    crd = CrdInfo(
        **kinds.serving(kinds.NODEPARTITIONINGS),
        short_names=("nodepartition", "np"),
        categories=CATEGORIES,
        printer_columns=(
            PrinterColumn("Node", ".spec.nodeName"),
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Profile", ".spec.profileRef.name"),
            PrinterColumn("Blocked-By", ".status.blockedBy"),
            PrinterColumn("Plan", ".spec.planRef.name", priority=1),
            PrinterColumn("Dry-Run", ".spec.dryRun", "boolean", priority=1),
            AGE,
        ),
    )

    spec: NodePartitioningSpec
    status: NodePartitioningStatus | None = None

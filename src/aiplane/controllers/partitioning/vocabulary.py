"""The names both partitioning state machines agree on: kinds, labels, annotations, phases, the taint.

One module, because the plan controller and the NodePartitioning controller talk to each other only
through these strings (the admission annotation, the phases the plan counts, the marks on a Node);
defining them twice is how the two sides drift apart.
"""

from __future__ import annotations

from typing import Final

API_VERSION: Final = "infrastructure.silogen.ai/v1alpha1"
NODE_PARTITIONING_KIND: Final = "NodePartitioning"
PLAN_LABEL: Final = "infrastructure.silogen.ai/plan"
ADMITTED_ANNOTATION: Final = "infrastructure.silogen.ai/admitted"
CONTROL_PLANE_LABELS: Final = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

# --- NodePartitioning phases ---------------------------------------------------------------------

PENDING: Final = "Pending"
DRAINING: Final = "Draining"
APPLYING: Final = "Applying"
WAITING_OPERATOR: Final = "WaitingOperator"
VERIFYING: Final = "Verifying"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SKIPPED: Final = "Skipped"
APPLYING_PHASES: Final = frozenset({DRAINING, APPLYING, WAITING_OPERATOR})
IN_PROGRESS_PHASES: Final = APPLYING_PHASES | {VERIFYING}
ACTIVE_PHASES: Final = IN_PROGRESS_PHASES

# --- what the NodePartitioning controller leaves on a Node ---------------------------------------

FINALIZER: Final = "infrastructure.silogen.ai/node-partitioning"
CORDONED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/cordoned-by"
TAINTED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/tainted-by"
#: ``<np>/<desiredHash>`` of the NP whose profile label is on the node, written with the label itself: a
#: lost status write must not make our own in-flight request look like a pre-existing label.
APPLIED_BY_ANNOTATION: Final = "infrastructure.silogen.ai/profile-applied-by"

TAINT_KEY: Final = "amd-dcm"
TAINT_VALUE: Final = "up"
TAINT_EFFECT: Final = "NoExecute"
GPU_RESOURCE: Final = "amd.com/gpu"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"

# --- the AMD Device Config Manager ---------------------------------------------------------------

PROFILE_LABEL: Final = "dcm.amd.com/gpu-config-profile"
PROFILE_STATE_LABEL: Final = "dcm.amd.com/gpu-config-profile-state"
APPLY_TRIGGER_LABEL: Final = "dcm.amd.com/apply-gpu-config-profile"
APPLY_TRIGGER_VALUE: Final = "apply"
DCM_STATE_SUCCESS: Final = "success"
DCM_STATE_FAILURE: Final = "failure"
DCM_STATE_IN_PROGRESS: Final = "in-progress"
DCM_EVENT_SOURCE: Final = "amd-device-config-manager"

# --- liveness (docs/architecture.md, "Liveness") -------------------------------------------------

#: The per-item retry backoff cap of both controllers: their pending work holds nodes cordoned and
#: tainted, so after an API outage it must resume within seconds, not up to the outage's length later
#: (client-go's 1000 s cap). Each controller's 10 qps bucket still bounds a mass retry.
RETRY_BACKOFF_CAP: Final = 2.0
#: How soon a disruption deferred on a stale informer (nothing heard from the API server) looks again.
STALE_RECHECK: Final = 1.0

"""The column definitions of each built-in kind's Table, paired with its row printer.

kube-apiserver prints with all columns (the wide ones at ``priority: 1``; kubectl hides them unless
``-o wide``); descriptions come from the API's field documentation, as kube's printers take them.
"""

from __future__ import annotations

import functools
from typing import Any

from aiplane.sim.apiserver.printers_apis import (
    print_binding,
    print_controller_revision,
    print_crd,
    print_daemonset,
    print_deployment,
    print_hpa,
    print_ingress,
    print_job,
    print_lease,
    print_pdb,
    print_replicaset,
    print_statefulset,
    print_storage_class,
)
from aiplane.sim.apiserver.printers_v1 import (
    print_configmap,
    print_endpoints,
    print_event,
    print_namespace,
    print_node,
    print_pod,
    print_pv,
    print_pvc,
    print_secret,
    print_service,
    print_service_account,
)
from aiplane.sim.apiserver.printing import Printer, age_column, column, doc, name_column, object_meta_doc

_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."


@functools.cache
def builtin_printers() -> dict[tuple[str, str], tuple[tuple[dict[str, Any], ...], Printer]]:
    """Column definitions and row printer of each built-in kind kube has a print handler for."""
    name, age = name_column(), age_column()
    core = "io.k8s.api.core.v1."
    apps = "io.k8s.api.apps.v1."

    def c(col: str, kind: str, doc: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
        return column(col, kind, doc, priority=priority, fmt=fmt)

    wide_workload = (
        c("Containers", "string", _CONTAINERS_DOC, 1),
        c("Images", "string", _IMAGES_DOC, 1),
    )
    binding_columns = (
        name,
        c("Role", "string", doc("io.k8s.api.rbac.v1.RoleBinding", "roleRef")),
        age,
        c("Users", "string", "Users in the roleBinding", 1),
        c("Groups", "string", "Groups in the roleBinding", 1),
        c("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", 1),
    )
    cluster_binding_columns = (
        name,
        c("Role", "string", doc("io.k8s.api.rbac.v1.ClusterRoleBinding", "roleRef")),
        age,
        c("Users", "string", "Users in the clusterRoleBinding", 1),
        c("Groups", "string", "Groups in the clusterRoleBinding", 1),
        c("ServiceAccounts", "string", "ServiceAccounts in the clusterRoleBinding", 1),
    )
    event_columns = (
        c("Last Seen", "string", doc(core + "Event", "lastTimestamp")),
        c("Type", "string", doc(core + "Event", "type")),
        c("Reason", "string", doc(core + "Event", "reason")),
        c("Object", "string", doc(core + "Event", "involvedObject")),
        c("Subobject", "string", doc(core + "ObjectReference", "fieldPath"), 1),
        c("Source", "string", doc(core + "Event", "source"), 1),
        c("Message", "string", doc(core + "Event", "message")),
        c("First Seen", "string", doc(core + "Event", "firstTimestamp"), 1),
        c("Count", "string", doc(core + "Event", "count"), 1),
        c("Name", "string", object_meta_doc("name"), 1, "name"),
    )
    return {
        ("", "Pod"): (
            (
                name,
                c("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
                c("Status", "string", "The aggregate status of the containers in this pod."),
                c(
                    "Restarts",
                    "string",
                    "The number of times the containers in this pod have been restarted and when the last "
                    "container in this pod has restarted.",
                ),
                age,
                c("IP", "string", doc(core + "PodStatus", "podIP"), 1),
                c("Node", "string", doc(core + "PodSpec", "nodeName"), 1),
                c("Nominated Node", "string", doc(core + "PodStatus", "nominatedNodeName"), 1),
                c("Readiness Gates", "string", doc(core + "PodSpec", "readinessGates"), 1),
            ),
            print_pod,
        ),
        ("", "Node"): (
            (
                name,
                c("Status", "string", "The status of the node"),
                c("Roles", "string", "The roles of the node"),
                age,
                c("Version", "string", doc(core + "NodeSystemInfo", "kubeletVersion")),
                c("Internal-IP", "string", doc(core + "NodeStatus", "addresses"), 1),
                c("External-IP", "string", doc(core + "NodeStatus", "addresses"), 1),
                c("OS-Image", "string", doc(core + "NodeSystemInfo", "osImage"), 1),
                c("Kernel-Version", "string", doc(core + "NodeSystemInfo", "kernelVersion"), 1),
                c("Container-Runtime", "string", doc(core + "NodeSystemInfo", "containerRuntimeVersion"), 1),
            ),
            print_node,
        ),
        ("", "Namespace"): (
            (name, c("Status", "string", "The status of the namespace"), age),
            print_namespace,
        ),
        ("", "ConfigMap"): (
            (name, c("Data", "string", doc(core + "ConfigMap", "data")), age),
            print_configmap,
        ),
        ("", "Secret"): (
            (
                name,
                c("Type", "string", doc(core + "Secret", "type")),
                c("Data", "string", doc(core + "Secret", "data")),
                age,
            ),
            print_secret,
        ),
        ("", "ServiceAccount"): (
            (name, c("Secrets", "string", doc(core + "ServiceAccount", "secrets")), age),
            print_service_account,
        ),
        ("", "Service"): (
            (
                name,
                c("Type", "string", doc(core + "ServiceSpec", "type")),
                c("Cluster-IP", "string", doc(core + "ServiceSpec", "clusterIP")),
                c("External-IP", "string", doc(core + "ServiceSpec", "externalIPs")),
                c("Port(s)", "string", doc(core + "ServiceSpec", "ports")),
                age,
                c("Selector", "string", doc(core + "ServiceSpec", "selector"), 1),
            ),
            print_service,
        ),
        ("", "Endpoints"): (
            (name, c("Endpoints", "string", doc(core + "Endpoints", "subsets")), age),
            print_endpoints,
        ),
        ("", "Event"): (event_columns, print_event),
        ("events.k8s.io", "Event"): (event_columns, print_event),
        ("", "PersistentVolumeClaim"): (
            (
                name,
                c("Status", "string", doc(core + "PersistentVolumeClaimStatus", "phase")),
                c("Volume", "string", doc(core + "PersistentVolumeClaimSpec", "volumeName")),
                c("Capacity", "string", doc(core + "PersistentVolumeClaimStatus", "capacity")),
                c("Access Modes", "string", doc(core + "PersistentVolumeClaimStatus", "accessModes")),
                c("StorageClass", "string", "StorageClass of the pvc"),
                c("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
                age,
                c("VolumeMode", "string", doc(core + "PersistentVolumeClaimSpec", "volumeMode"), 1),
            ),
            print_pvc,
        ),
        ("", "PersistentVolume"): (
            (
                name,
                c("Capacity", "string", doc(core + "PersistentVolumeSpec", "capacity")),
                c("Access Modes", "string", doc(core + "PersistentVolumeSpec", "accessModes")),
                c(
                    "Reclaim Policy",
                    "string",
                    doc(core + "PersistentVolumeSpec", "persistentVolumeReclaimPolicy"),
                ),
                c("Status", "string", doc(core + "PersistentVolumeStatus", "phase")),
                c("Claim", "string", doc(core + "PersistentVolumeSpec", "claimRef")),
                c("StorageClass", "string", "StorageClass of the pv"),
                c("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
                c("Reason", "string", doc(core + "PersistentVolumeStatus", "reason")),
                age,
                c("VolumeMode", "string", doc(core + "PersistentVolumeSpec", "volumeMode"), 1),
            ),
            print_pv,
        ),
        ("storage.k8s.io", "StorageClass"): (
            (
                name,
                c("Provisioner", "string", "Indicates the type of the provisioner."),
                c(
                    "ReclaimPolicy",
                    "string",
                    "Dynamically provisioned PersistentVolumes of this storage class are created with this reclaimPolicy. Defaults to Delete.",
                ),
                c(
                    "VolumeBindingMode",
                    "string",
                    "VolumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
                ),
                c(
                    "AllowVolumeExpansion",
                    "string",
                    "AllowVolumeExpansion shows whether the storage class allow volume expand.",
                ),
                age,
            ),
            print_storage_class,
        ),
        ("apps", "Deployment"): (
            (
                name,
                c("Ready", "string", "Number of the pod with ready state"),
                c("Up-to-date", "string", doc(apps + "DeploymentStatus", "updatedReplicas")),
                c("Available", "string", doc(apps + "DeploymentStatus", "availableReplicas")),
                age,
                *wide_workload,
                c("Selector", "string", doc(apps + "DeploymentSpec", "selector"), 1),
            ),
            print_deployment,
        ),
        ("apps", "StatefulSet"): (
            (name, c("Ready", "string", "Number of the pod with ready state"), age, *wide_workload),
            print_statefulset,
        ),
        ("apps", "DaemonSet"): (
            (
                name,
                c("Desired", "integer", doc(apps + "DaemonSetStatus", "desiredNumberScheduled")),
                c("Current", "integer", doc(apps + "DaemonSetStatus", "currentNumberScheduled")),
                c("Ready", "integer", doc(apps + "DaemonSetStatus", "numberReady")),
                c("Up-to-date", "integer", doc(apps + "DaemonSetStatus", "updatedNumberScheduled")),
                c("Available", "integer", doc(apps + "DaemonSetStatus", "numberAvailable")),
                c("Node Selector", "string", doc(core + "PodSpec", "nodeSelector")),
                age,
                *wide_workload,
                c("Selector", "string", doc(apps + "DaemonSetSpec", "selector"), 1),
            ),
            print_daemonset,
        ),
        ("apps", "ReplicaSet"): (
            (
                name,
                c("Desired", "integer", doc(apps + "ReplicaSetSpec", "replicas")),
                c("Current", "integer", doc(apps + "ReplicaSetStatus", "replicas")),
                c("Ready", "integer", doc(apps + "ReplicaSetStatus", "readyReplicas")),
                age,
                *wide_workload,
                c("Selector", "string", doc(apps + "ReplicaSetSpec", "selector"), 1),
            ),
            print_replicaset,
        ),
        ("apps", "ControllerRevision"): (
            (
                name,
                c("Controller", "string", "Controller of the object"),
                c("Revision", "string", doc(apps + "ControllerRevision", "revision")),
                age,
            ),
            print_controller_revision,
        ),
        ("batch", "Job"): (
            (
                name,
                c("Status", "string", "Status of the job."),
                c("Completions", "string", doc("io.k8s.api.batch.v1.JobStatus", "succeeded")),
                c("Duration", "string", "Time required to complete the job."),
                age,
                *wide_workload,
                c("Selector", "string", doc("io.k8s.api.batch.v1.JobSpec", "selector"), 1),
            ),
            print_job,
        ),
        ("policy", "PodDisruptionBudget"): (
            (
                name,
                c("Min Available", "string", "The minimum number of pods that must be available."),
                c("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
                c(
                    "Allowed Disruptions",
                    "integer",
                    "Calculated number of pods that may be disrupted at this time.",
                ),
                age,
            ),
            print_pdb,
        ),
        ("coordination.k8s.io", "Lease"): (
            (
                name,
                c("Holder", "string", doc("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")),
                age,
            ),
            print_lease,
        ),
        ("autoscaling", "HorizontalPodAutoscaler"): (
            (
                name,
                c(
                    "Reference",
                    "string",
                    doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "scaleTargetRef"),
                ),
                c(
                    "Targets",
                    "string",
                    doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "metrics"),
                ),
                c(
                    "MinPods",
                    "string",
                    doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "minReplicas"),
                ),
                c(
                    "MaxPods",
                    "string",
                    doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "maxReplicas"),
                ),
                c(
                    "Replicas",
                    "string",
                    doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "currentReplicas"),
                ),
                age,
            ),
            print_hpa,
        ),
        ("networking.k8s.io", "Ingress"): (
            (
                name,
                c(
                    "Class",
                    "string",
                    "The name of the IngressClass resource that should be used for additional configuration",
                ),
                c(
                    "Hosts",
                    "string",
                    "Hosts that incoming requests are matched against before the ingress rule",
                ),
                c("Address", "string", "Address is a list containing ingress points for the load-balancer"),
                c("Ports", "string", "Ports of TLS configurations that open"),
                age,
            ),
            print_ingress,
        ),
        ("rbac.authorization.k8s.io", "RoleBinding"): (binding_columns, print_binding),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (cluster_binding_columns, print_binding),
        ("apiextensions.k8s.io", "CustomResourceDefinition"): (
            (
                name,
                c("Scope", "string", "Cluster/Namespaced"),
                c("Versions", "string", "Served versions"),
                c("Created At", "date", object_meta_doc("creationTimestamp")),
                c("Group", "string", "API group", 1),
                c("Kind", "string", "CustomResource kind", 1),
                c("ShortNames", "string", "Short names", 1),
                c("Established", "boolean", "Established status", 1),
            ),
            print_crd,
        ),
    }

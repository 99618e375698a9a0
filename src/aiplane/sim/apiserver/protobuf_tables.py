"""The protobuf field tables: which field number of which Kubernetes message is which JSON field.

The tables were written from the upstream ``generated.proto`` files of k8s.io/api and
k8s.io/apimachinery and the Go types' json tags; they cover the kinds in :data:`KINDS` (what
kubectl's typed clients send, and a little more). They are kept as compact text, one line of items
per message, because hundreds of fields read better that way than as nested literals; they are
parsed and cross-checked once, at import, so a typo fails loudly rather than mis-decoding a body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --- the field tables ------------------------------------------------------------------------------
#
# One entry per message: "<number> <jsonName> [<type>]" items separated by ";" or newlines.
#   type     s string (default) | b bool | i32 | i64 | y bytes (JSON: base64) | a message name |
#            Time | MicroTime | Duration | IntOrString | Quantity | RawExtension | FieldsV1 |
#            "-" (a known field this decoder does not support: a clear 400 rather than a wrong object)
#   [T]      repeated T          {T}  map<string, T>
#   T?       a Go pointer: written only when set, so a zero value is kept
#   T!       json tag without omitempty: a zero scalar is kept ("value": 0)
#   ^name    an embedded Go struct: its fields are inlined into the parent's JSON object

_TABLES: dict[str, str] = {
    # --- k8s.io/apimachinery: meta/v1, runtime, intstr, resource -------------------------------------
    "ObjectMeta": """1 name; 2 generateName; 3 namespace; 4 selfLink; 5 uid; 6 resourceVersion;
        7 generation i64; 8 creationTimestamp Time; 9 deletionTimestamp Time?; 10 deletionGracePeriodSeconds i64?;
        11 labels {s}; 12 annotations {s}; 13 ownerReferences [OwnerReference]; 14 finalizers [s];
        15 clusterName; 17 managedFields [ManagedFieldsEntry]""",
    "OwnerReference": """5 apiVersion s!; 1 kind s!; 3 name s!; 4 uid s!; 6 controller b?;
        7 blockOwnerDeletion b?""",
    "ManagedFieldsEntry": """1 manager; 2 operation; 3 apiVersion; 4 time Time?; 6 fieldsType;
        7 fieldsV1 FieldsV1?; 8 subresource""",
    "LabelSelector": "1 matchLabels {s}; 2 matchExpressions [LabelSelectorRequirement]",
    "LabelSelectorRequirement": "1 key s!; 2 operator s!; 3 values [s]",
    "DeleteOptions": """1 gracePeriodSeconds i64?; 2 preconditions Preconditions?; 3 orphanDependents b?;
        4 propagationPolicy s?; 5 dryRun [s]; 6 ignoreStoreReadErrorWithClusterBreakingPotential b?""",
    "Preconditions": "1 uid s?; 2 resourceVersion s?",
    "Condition": """1 type s!; 2 status s!; 3 observedGeneration i64; 4 lastTransitionTime Time;
        5 reason s!; 6 message s!""",
    # --- core/v1 ---------------------------------------------------------------------------------------
    "Namespace": "1 metadata ObjectMeta; 2 spec NamespaceSpec; 3 status NamespaceStatus",
    "NamespaceSpec": "1 finalizers [s]",
    "NamespaceStatus": "1 phase; 2 conditions [NamespaceCondition]",
    "NamespaceCondition": """1 type s!; 2 status s!; 4 lastTransitionTime Time; 5 reason; 6 message""",
    "ConfigMap": "1 metadata ObjectMeta; 4 immutable b?; 2 data {s}; 3 binaryData {y}",
    "Secret": "1 metadata ObjectMeta; 5 immutable b?; 2 data {y}; 4 stringData {s}; 3 type",
    "ServiceAccount": """1 metadata ObjectMeta; 2 secrets [ObjectReference];
        3 imagePullSecrets [LocalObjectReference]; 4 automountServiceAccountToken b?""",
    "ObjectReference": """1 kind; 2 namespace; 3 name; 4 uid; 5 apiVersion; 6 resourceVersion;
        7 fieldPath""",
    "LocalObjectReference": "1 name",
    "TypedLocalObjectReference": "1 apiGroup s?; 2 kind s!; 3 name s!",
    "TypedObjectReference": "1 apiGroup s?; 2 kind s!; 3 name s!; 4 namespace s?",
    "Binding": "1 metadata ObjectMeta; 2 target ObjectReference",
    "Service": "1 metadata ObjectMeta; 2 spec ServiceSpec; 3 status ServiceStatus",
    "ServiceSpec": """1 ports [ServicePort]; 2 selector {s}; 3 clusterIP; 18 clusterIPs [s]; 4 type;
        5 externalIPs [s]; 7 sessionAffinity; 8 loadBalancerIP; 9 loadBalancerSourceRanges [s];
        10 externalName; 11 externalTrafficPolicy; 12 healthCheckNodePort i32;
        13 publishNotReadyAddresses b; 14 sessionAffinityConfig SessionAffinityConfig?;
        19 ipFamilies [s]; 17 ipFamilyPolicy s?; 20 allocateLoadBalancerNodePorts b?;
        21 loadBalancerClass s?; 22 internalTrafficPolicy s?; 23 trafficDistribution s?""",
    "ServicePort": """1 name; 2 protocol; 6 appProtocol s?; 3 port i32!; 4 targetPort IntOrString;
        5 nodePort i32""",
    "SessionAffinityConfig": "1 clientIP ClientIPConfig?",
    "ClientIPConfig": "1 timeoutSeconds i32?",
    "ServiceStatus": "1 loadBalancer LoadBalancerStatus; 2 conditions [Condition]",
    "LoadBalancerStatus": "1 ingress [LoadBalancerIngress]",
    "LoadBalancerIngress": "1 ip; 2 hostname; 3 ipMode s?; 4 ports [PortStatus]",
    "PortStatus": "1 port i32!; 2 protocol s!; 3 error s?",
    "ResourceQuota": "1 metadata ObjectMeta; 2 spec ResourceQuotaSpec; 3 status ResourceQuotaStatus",
    "ResourceQuotaSpec": "1 hard {Quantity}; 2 scopes [s]; 3 scopeSelector ScopeSelector?",
    "ScopeSelector": "1 matchExpressions [ScopedResourceSelectorRequirement]",
    "ScopedResourceSelectorRequirement": "1 scopeName s!; 2 operator s!; 3 values [s]",
    "ResourceQuotaStatus": "1 hard {Quantity}; 2 used {Quantity}",
    "Pod": "1 metadata ObjectMeta; 2 spec PodSpec; 3 status PodStatus",
    "PodTemplateSpec": "1 metadata ObjectMeta; 2 spec PodSpec",
    "PodSpec": """1 volumes [Volume]; 20 initContainers [Container]; 2 containers [Container];
        34 ephemeralContainers [EphemeralContainer]; 3 restartPolicy;
        4 terminationGracePeriodSeconds i64?; 5 activeDeadlineSeconds i64?; 6 dnsPolicy;
        7 nodeSelector {s}; 8 serviceAccountName; 9 serviceAccount; 21 automountServiceAccountToken b?;
        10 nodeName; 11 hostNetwork b; 12 hostPID b; 13 hostIPC b; 27 shareProcessNamespace b?;
        14 securityContext PodSecurityContext?; 15 imagePullSecrets [LocalObjectReference]; 16 hostname;
        17 subdomain; 18 affinity Affinity?; 19 schedulerName; 22 tolerations [Toleration];
        23 hostAliases [HostAlias]; 24 priorityClassName; 25 priority i32?; 26 dnsConfig PodDNSConfig?;
        28 readinessGates [PodReadinessGate]; 29 runtimeClassName s?; 30 enableServiceLinks b?;
        31 preemptionPolicy s?; 32 overhead {Quantity};
        33 topologySpreadConstraints [TopologySpreadConstraint]; 35 setHostnameAsFQDN b?; 36 os PodOS?;
        37 hostUsers b?; 38 schedulingGates [PodSchedulingGate]; 39 resourceClaims [PodResourceClaim];
        40 resources ResourceRequirements?; 41 hostnameOverride s?; 42 workloadRef WorkloadReference?""",
    "Container": """1 name s!; 2 image; 3 command [s]; 4 args [s]; 5 workingDir; 6 ports [ContainerPort];
        19 envFrom [EnvFromSource]; 7 env [EnvVar]; 8 resources ResourceRequirements;
        23 resizePolicy [ContainerResizePolicy]; 24 restartPolicy s?;
        25 restartPolicyRules [ContainerRestartRule]; 9 volumeMounts [VolumeMount];
        21 volumeDevices [VolumeDevice]; 10 livenessProbe Probe?; 11 readinessProbe Probe?;
        22 startupProbe Probe?; 12 lifecycle Lifecycle?; 13 terminationMessagePath;
        20 terminationMessagePolicy; 14 imagePullPolicy; 15 securityContext SecurityContext?;
        16 stdin b; 17 stdinOnce b; 18 tty b""",
    "EphemeralContainer": "1 ^ephemeralContainerCommon Container; 2 targetContainerName",
    "ContainerPort": "1 name; 2 hostPort i32; 3 containerPort i32!; 4 protocol; 5 hostIP",
    "ContainerResizePolicy": "1 resourceName s!; 2 restartPolicy s!",
    "ContainerRestartRule": "1 action s!; 2 exitCodes ContainerRestartRuleOnExitCodes?",
    "ContainerRestartRuleOnExitCodes": "1 operator s!; 2 values [i32]",
    "EnvFromSource": "1 prefix; 2 configMapRef ConfigMapEnvSource?; 3 secretRef SecretEnvSource?",
    "ConfigMapEnvSource": "1 ^localObjectReference LocalObjectReference; 2 optional b?",
    "SecretEnvSource": "1 ^localObjectReference LocalObjectReference; 2 optional b?",
    "EnvVar": "1 name s!; 2 value; 3 valueFrom EnvVarSource?",
    "EnvVarSource": """1 fieldRef ObjectFieldSelector?; 2 resourceFieldRef ResourceFieldSelector?;
        3 configMapKeyRef ConfigMapKeySelector?; 4 secretKeyRef SecretKeySelector?;
        5 fileKeyRef FileKeySelector?""",
    "ObjectFieldSelector": "1 apiVersion; 2 fieldPath s!",
    "ResourceFieldSelector": "1 containerName; 2 resource s!; 3 divisor Quantity",
    "ConfigMapKeySelector": "1 ^localObjectReference LocalObjectReference; 2 key s!; 3 optional b?",
    "SecretKeySelector": "1 ^localObjectReference LocalObjectReference; 2 key s!; 3 optional b?",
    "FileKeySelector": "1 volumeName s!; 2 path s!; 3 key s!; 4 optional b?",
    "ResourceRequirements": "1 limits {Quantity}; 2 requests {Quantity}; 3 claims [ResourceClaim]",
    "ResourceClaim": "1 name s!; 2 request",
    "VolumeMount": """1 name s!; 2 readOnly b; 7 recursiveReadOnly s?; 3 mountPath s!; 4 subPath;
        5 mountPropagation s?; 6 subPathExpr""",
    "VolumeDevice": "1 name s!; 2 devicePath s!",
    "Probe": """1 ^handler ProbeHandler; 2 initialDelaySeconds i32; 3 timeoutSeconds i32;
        4 periodSeconds i32; 5 successThreshold i32; 6 failureThreshold i32;
        7 terminationGracePeriodSeconds i64?""",
    "ProbeHandler": """1 exec ExecAction?; 2 httpGet HTTPGetAction?; 3 tcpSocket TCPSocketAction?;
        4 grpc GRPCAction?""",
    "ExecAction": "1 command [s]",
    "HTTPGetAction": "1 path; 2 port IntOrString; 3 host; 4 scheme; 5 httpHeaders [HTTPHeader]",
    "HTTPHeader": "1 name s!; 2 value s!",
    "TCPSocketAction": "1 port IntOrString; 2 host",
    "GRPCAction": "1 port i32!; 2 service s?",
    "Lifecycle": "1 postStart LifecycleHandler?; 2 preStop LifecycleHandler?; 3 stopSignal s?",
    "LifecycleHandler": """1 exec ExecAction?; 2 httpGet HTTPGetAction?; 3 tcpSocket TCPSocketAction?;
        4 sleep SleepAction?""",
    "SleepAction": "1 seconds i64!",
    "SecurityContext": """1 capabilities Capabilities?; 2 privileged b?; 3 seLinuxOptions SELinuxOptions?;
        10 windowsOptions WindowsSecurityContextOptions?; 4 runAsUser i64?; 8 runAsGroup i64?;
        5 runAsNonRoot b?; 6 readOnlyRootFilesystem b?; 7 allowPrivilegeEscalation b?; 9 procMount s?;
        11 seccompProfile SeccompProfile?; 12 appArmorProfile AppArmorProfile?; 13 ulimits [Ulimit]""",
    "Capabilities": "1 add [s]; 2 drop [s]",
    "SELinuxOptions": "1 user; 2 role; 3 type; 4 level",
    "WindowsSecurityContextOptions": """1 gmsaCredentialSpecName s?; 2 gmsaCredentialSpec s?;
        3 runAsUserName s?; 4 hostProcess b?""",
    "SeccompProfile": "1 type s!; 2 localhostProfile s?",
    "AppArmorProfile": "1 type s!; 2 localhostProfile s?",
    "Ulimit": "1 name s!; 2 hard i64!; 3 soft i64!",
    "PodSecurityContext": """1 seLinuxOptions SELinuxOptions?; 8 windowsOptions WindowsSecurityContextOptions?;
        2 runAsUser i64?; 6 runAsGroup i64?; 3 runAsNonRoot b?; 4 supplementalGroups [i64];
        12 supplementalGroupsPolicy s?; 5 fsGroup i64?; 7 sysctls [Sysctl]; 9 fsGroupChangePolicy s?;
        10 seccompProfile SeccompProfile?; 11 appArmorProfile AppArmorProfile?;
        13 seLinuxChangePolicy s?""",
    "Sysctl": "1 name s!; 2 value s!",
    "Affinity": """1 nodeAffinity NodeAffinity?; 2 podAffinity PodAffinity?;
        3 podAntiAffinity PodAntiAffinity?""",
    "NodeAffinity": """1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector?;
        2 preferredDuringSchedulingIgnoredDuringExecution [PreferredSchedulingTerm]""",
    "NodeSelector": "1 nodeSelectorTerms [NodeSelectorTerm]",
    "NodeSelectorTerm": """1 matchExpressions [NodeSelectorRequirement];
        2 matchFields [NodeSelectorRequirement]""",
    "NodeSelectorRequirement": "1 key s!; 2 operator s!; 3 values [s]",
    "PreferredSchedulingTerm": "1 weight i32!; 2 preference NodeSelectorTerm",
    "PodAffinity": """1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm];
        2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]""",
    "PodAntiAffinity": """1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm];
        2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]""",
    "PodAffinityTerm": """1 labelSelector LabelSelector?; 2 namespaces [s]; 3 topologyKey s!;
        4 namespaceSelector LabelSelector?; 5 matchLabelKeys [s]; 6 mismatchLabelKeys [s]""",
    "WeightedPodAffinityTerm": "1 weight i32!; 2 podAffinityTerm PodAffinityTerm",
    "Toleration": "1 key; 2 operator; 3 value; 4 effect; 5 tolerationSeconds i64?",
    "HostAlias": "1 ip s!; 2 hostnames [s]",
    "PodDNSConfig": "1 nameservers [s]; 2 searches [s]; 3 options [PodDNSConfigOption]",
    "PodDNSConfigOption": "1 name; 2 value s?",
    "PodReadinessGate": "1 conditionType s!",
    "TopologySpreadConstraint": """1 maxSkew i32!; 2 topologyKey s!; 3 whenUnsatisfiable s!;
        4 labelSelector LabelSelector?; 5 minDomains i32?; 6 nodeAffinityPolicy s?;
        7 nodeTaintsPolicy s?; 8 matchLabelKeys [s]""",
    "PodOS": "1 name s!",
    "PodSchedulingGate": "1 name s!",
    "PodResourceClaim": "1 name s!; 3 resourceClaimName s?; 4 resourceClaimTemplateName s?",
    "WorkloadReference": "1 name s!; 2 podGroup s!; 3 podGroupReplicaKey",
    "Volume": "1 name s!; 2 ^volumeSource VolumeSource",
    # Only the volume sources in use today; the deprecated in-tree ones are known but not decoded.
    "VolumeSource": """1 hostPath HostPathVolumeSource?; 2 emptyDir EmptyDirVolumeSource?;
        3 gcePersistentDisk -; 4 awsElasticBlockStore -; 5 gitRepo -; 6 secret SecretVolumeSource?;
        7 nfs NFSVolumeSource?; 8 iscsi -; 9 glusterfs -;
        10 persistentVolumeClaim PersistentVolumeClaimVolumeSource?; 11 rbd -; 12 flexVolume -;
        13 cinder -; 14 cephfs -; 15 flocker -; 16 downwardAPI DownwardAPIVolumeSource?; 17 fc -;
        18 azureFile -; 19 configMap ConfigMapVolumeSource?; 20 vsphereVolume -; 21 quobyte -;
        22 azureDisk -; 23 photonPersistentDisk -; 26 projected ProjectedVolumeSource?;
        24 portworxVolume -; 25 scaleIO -; 27 storageos -; 28 csi CSIVolumeSource?;
        29 ephemeral EphemeralVolumeSource?; 30 image ImageVolumeSource?""",
    "HostPathVolumeSource": "1 path s!; 2 type s?",
    "EmptyDirVolumeSource": "1 medium; 2 sizeLimit Quantity?",
    "SecretVolumeSource": "1 secretName; 2 items [KeyToPath]; 3 defaultMode i32?; 4 optional b?",
    "KeyToPath": "1 key s!; 2 path s!; 3 mode i32?",
    "NFSVolumeSource": "1 server s!; 2 path s!; 3 readOnly b",
    "PersistentVolumeClaimVolumeSource": "1 claimName s!; 2 readOnly b",
    "DownwardAPIVolumeSource": "1 items [DownwardAPIVolumeFile]; 2 defaultMode i32?",
    "DownwardAPIVolumeFile": """1 path s!; 2 fieldRef ObjectFieldSelector?;
        3 resourceFieldRef ResourceFieldSelector?; 4 mode i32?""",
    "ConfigMapVolumeSource": """1 ^localObjectReference LocalObjectReference; 2 items [KeyToPath];
        3 defaultMode i32?; 4 optional b?""",
    "ProjectedVolumeSource": "1 sources [VolumeProjection]; 2 defaultMode i32?",
    "VolumeProjection": """1 secret SecretProjection?; 2 downwardAPI DownwardAPIProjection?;
        3 configMap ConfigMapProjection?; 4 serviceAccountToken ServiceAccountTokenProjection?;
        5 clusterTrustBundle ClusterTrustBundleProjection?; 6 podCertificate PodCertificateProjection?""",
    "SecretProjection": """1 ^localObjectReference LocalObjectReference; 2 items [KeyToPath];
        4 optional b?""",
    "ConfigMapProjection": """1 ^localObjectReference LocalObjectReference; 2 items [KeyToPath];
        4 optional b?""",
    "DownwardAPIProjection": "1 items [DownwardAPIVolumeFile]",
    "ServiceAccountTokenProjection": "1 audience; 2 expirationSeconds i64?; 3 path s!",
    "ClusterTrustBundleProjection": """1 name s?; 2 signerName s?; 3 labelSelector LabelSelector?;
        5 optional b?; 4 path s!""",
    "PodCertificateProjection": """1 signerName; 2 keyType; 3 maxExpirationSeconds i32?;
        4 credentialBundlePath; 5 keyPath; 6 certificateChainPath; 7 userAnnotations {s}""",
    "CSIVolumeSource": """1 driver s!; 2 readOnly b?; 3 fsType s?; 4 volumeAttributes {s};
        5 nodePublishSecretRef LocalObjectReference?""",
    "EphemeralVolumeSource": "1 volumeClaimTemplate PersistentVolumeClaimTemplate?",
    "PersistentVolumeClaimTemplate": "1 metadata ObjectMeta; 2 spec PersistentVolumeClaimSpec",
    "PersistentVolumeClaimSpec": """1 accessModes [s]; 4 selector LabelSelector?;
        2 resources VolumeResourceRequirements; 3 volumeName; 5 storageClassName s?; 6 volumeMode s?;
        7 dataSource TypedLocalObjectReference?; 8 dataSourceRef TypedObjectReference?;
        9 volumeAttributesClassName s?""",
    "VolumeResourceRequirements": "1 limits {Quantity}; 2 requests {Quantity}",
    "ImageVolumeSource": "1 reference; 2 pullPolicy",
    "PodStatus": """17 observedGeneration i64; 1 phase; 2 conditions [PodCondition]; 3 message; 4 reason;
        11 nominatedNodeName; 5 hostIP; 16 hostIPs [HostIP]; 6 podIP; 12 podIPs [PodIP];
        7 startTime Time?; 10 initContainerStatuses [ContainerStatus];
        8 containerStatuses [ContainerStatus]; 9 qosClass; 13 ephemeralContainerStatuses [ContainerStatus];
        14 resize; 15 resourceClaimStatuses [PodResourceClaimStatus];
        18 extendedResourceClaimStatus PodExtendedResourceClaimStatus?; 19 allocatedResources {Quantity};
        20 resources ResourceRequirements?""",
    "PodCondition": """1 type s!; 7 observedGeneration i64; 2 status s!; 3 lastProbeTime Time;
        4 lastTransitionTime Time; 5 reason; 6 message""",
    "HostIP": "1 ip s!",
    "PodIP": "1 ip s!",
    "ContainerStatus": """1 name s!; 2 state ContainerState; 3 lastState ContainerState; 4 ready b!;
        5 restartCount i32!; 6 image s!; 7 imageID s!; 8 containerID; 9 started b?;
        10 allocatedResources {Quantity}; 11 resources ResourceRequirements?;
        12 volumeMounts [VolumeMountStatus]; 13 user ContainerUser?;
        14 allocatedResourcesStatus [ResourceStatus]; 15 stopSignal s?""",
    "ContainerState": """1 waiting ContainerStateWaiting?; 2 running ContainerStateRunning?;
        3 terminated ContainerStateTerminated?""",
    "ContainerStateWaiting": "1 reason; 2 message",
    "ContainerStateRunning": "1 startedAt Time",
    "ContainerStateTerminated": """1 exitCode i32!; 2 signal i32; 3 reason; 4 message; 5 startedAt Time;
        6 finishedAt Time; 7 containerID""",
    "VolumeMountStatus": "1 name s!; 2 mountPath s!; 3 readOnly b; 4 recursiveReadOnly s?; 5 volumeStatus -",
    "ContainerUser": "1 linux LinuxContainerUser?",
    "LinuxContainerUser": "1 uid i64!; 2 gid i64!; 3 supplementalGroups [i64]",
    "ResourceStatus": "1 name s!; 2 resources [ResourceHealth]",
    "ResourceHealth": "1 resourceID s!; 2 health; 6 message s?",
    "PodResourceClaimStatus": "1 name s!; 2 resourceClaimName s?",
    "PodExtendedResourceClaimStatus": """1 requestMappings [ContainerExtendedResourceRequest];
        2 resourceClaimName s!""",
    "ContainerExtendedResourceRequest": "1 containerName s!; 2 resourceName s!; 3 requestName s!",
    # --- apps/v1 ---------------------------------------------------------------------------------------
    "Deployment": "1 metadata ObjectMeta; 2 spec DeploymentSpec; 3 status DeploymentStatus",
    "DeploymentSpec": """1 replicas i32?; 2 selector LabelSelector?; 3 template PodTemplateSpec;
        4 strategy DeploymentStrategy; 5 minReadySeconds i32; 6 revisionHistoryLimit i32?; 7 paused b;
        9 progressDeadlineSeconds i32?""",
    "DeploymentStrategy": "1 type; 2 rollingUpdate RollingUpdateDeployment?",
    "RollingUpdateDeployment": "1 maxUnavailable IntOrString?; 2 maxSurge IntOrString?",
    "DeploymentStatus": """1 observedGeneration i64; 2 replicas i32; 3 updatedReplicas i32;
        7 readyReplicas i32; 4 availableReplicas i32; 5 unavailableReplicas i32;
        9 terminatingReplicas i32?; 6 conditions [DeploymentCondition]; 8 collisionCount i32?""",
    "DeploymentCondition": """1 type s!; 2 status s!; 6 lastUpdateTime Time; 7 lastTransitionTime Time;
        4 reason; 5 message""",
    # --- batch/v1 --------------------------------------------------------------------------------------
    "Job": "1 metadata ObjectMeta; 2 spec JobSpec; 3 status JobStatus",
    "JobSpec": """1 parallelism i32?; 2 completions i32?; 3 activeDeadlineSeconds i64?;
        11 podFailurePolicy PodFailurePolicy?; 16 successPolicy SuccessPolicy?; 7 backoffLimit i32?;
        12 backoffLimitPerIndex i32?; 13 maxFailedIndexes i32?; 4 selector LabelSelector?;
        5 manualSelector b?; 6 template PodTemplateSpec; 8 ttlSecondsAfterFinished i32?;
        9 completionMode s?; 10 suspend b?; 14 podReplacementPolicy s?; 15 managedBy s?""",
    "JobStatus": """1 conditions [JobCondition]; 2 startTime Time?; 3 completionTime Time?; 4 active i32;
        5 succeeded i32; 6 failed i32; 11 terminating i32?; 7 completedIndexes; 10 failedIndexes s?;
        8 uncountedTerminatedPods UncountedTerminatedPods?; 9 ready i32?""",
    "JobCondition": """1 type s!; 2 status s!; 3 lastProbeTime Time; 4 lastTransitionTime Time;
        5 reason; 6 message""",
    "PodFailurePolicy": "1 rules [PodFailurePolicyRule]",
    "PodFailurePolicyRule": """1 action s!; 2 onExitCodes PodFailurePolicyOnExitCodesRequirement?;
        3 onPodConditions [PodFailurePolicyOnPodConditionsPattern]""",
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName s?; 2 operator s!; 3 values [i32]",
    "PodFailurePolicyOnPodConditionsPattern": "1 type s!; 2 status",
    "SuccessPolicy": "1 rules [SuccessPolicyRule]",
    "SuccessPolicyRule": "1 succeededIndexes s?; 2 succeededCount i32?",
    "UncountedTerminatedPods": "1 succeeded [s]; 2 failed [s]",
    "CronJob": "1 metadata ObjectMeta; 2 spec CronJobSpec; 3 status CronJobStatus",
    "CronJobSpec": """1 schedule s!; 8 timeZone s?; 2 startingDeadlineSeconds i64?; 3 concurrencyPolicy;
        4 suspend b?; 5 jobTemplate JobTemplateSpec; 6 successfulJobsHistoryLimit i32?;
        7 failedJobsHistoryLimit i32?""",
    "JobTemplateSpec": "1 metadata ObjectMeta; 2 spec JobSpec",
    "CronJobStatus": "1 active [ObjectReference]; 4 lastScheduleTime Time?; 5 lastSuccessfulTime Time?",
    # --- policy/v1 -------------------------------------------------------------------------------------
    "PodDisruptionBudget": """1 metadata ObjectMeta; 2 spec PodDisruptionBudgetSpec;
        3 status PodDisruptionBudgetStatus""",
    "PodDisruptionBudgetSpec": """1 minAvailable IntOrString?; 2 selector LabelSelector?;
        3 maxUnavailable IntOrString?; 4 unhealthyPodEvictionPolicy s?""",
    "PodDisruptionBudgetStatus": """1 observedGeneration i64; 2 disruptedPods {Time}; 3 disruptionsAllowed i32!;
        4 currentHealthy i32!; 5 desiredHealthy i32!; 6 expectedPods i32!; 7 conditions [Condition]""",
    "Eviction": "1 metadata ObjectMeta; 2 deleteOptions DeleteOptions?",
    # --- rbac.authorization.k8s.io/v1 ----------------------------------------------------------------
    "Role": "1 metadata ObjectMeta; 2 rules [PolicyRule]",
    "ClusterRole": "1 metadata ObjectMeta; 2 rules [PolicyRule]; 3 aggregationRule AggregationRule?",
    "AggregationRule": "1 clusterRoleSelectors [LabelSelector]",
    "PolicyRule": "1 verbs [s]; 2 apiGroups [s]; 3 resources [s]; 4 resourceNames [s]; 5 nonResourceURLs [s]",
    "RoleBinding": "1 metadata ObjectMeta; 2 subjects [Subject]; 3 roleRef RoleRef",
    "ClusterRoleBinding": "1 metadata ObjectMeta; 2 subjects [Subject]; 3 roleRef RoleRef",
    "Subject": "1 kind s!; 2 apiGroup; 3 name s!; 4 namespace",
    "RoleRef": "1 apiGroup s!; 2 kind s!; 3 name s!",
    # --- scheduling.k8s.io/v1 --------------------------------------------------------------------------
    "PriorityClass": "1 metadata ObjectMeta; 2 value i32!; 3 globalDefault b; 4 description; 5 preemptionPolicy s?",
    # --- networking.k8s.io/v1 --------------------------------------------------------------------------
    "Ingress": "1 metadata ObjectMeta; 2 spec IngressSpec; 3 status IngressStatus",
    "IngressSpec": """4 ingressClassName s?; 1 defaultBackend IngressBackend?; 2 tls [IngressTLS];
        3 rules [IngressRule]""",
    "IngressBackend": "4 service IngressServiceBackend?; 3 resource TypedLocalObjectReference?",
    "IngressServiceBackend": "1 name s!; 2 port ServiceBackendPort",
    "ServiceBackendPort": "1 name; 2 number i32",
    "IngressTLS": "1 hosts [s]; 2 secretName",
    "IngressRule": "1 host; 2 ^ingressRuleValue IngressRuleValue",
    "IngressRuleValue": "1 http HTTPIngressRuleValue?",
    "HTTPIngressRuleValue": "1 paths [HTTPIngressPath]",
    "HTTPIngressPath": "1 path; 3 pathType s?; 2 backend IngressBackend",
    "IngressStatus": "1 loadBalancer IngressLoadBalancerStatus",
    "IngressLoadBalancerStatus": "1 ingress [IngressLoadBalancerIngress]",
    "IngressLoadBalancerIngress": "1 ip; 2 hostname; 4 ports [IngressPortStatus]",
    "IngressPortStatus": "1 port i32!; 2 protocol s!; 3 error s?",
    # --- authentication.k8s.io/v1 ----------------------------------------------------------------------
    "TokenRequest": "1 metadata ObjectMeta; 2 spec TokenRequestSpec; 3 status TokenRequestStatus",
    "TokenRequestSpec": """1 audiences [s]; 4 expirationSeconds i64?;
        3 boundObjectRef BoundObjectReference?""",
    "BoundObjectReference": "1 kind; 2 apiVersion; 3 name; 4 uid",
    "TokenRequestStatus": "1 token s!; 2 expirationTimestamp Time",
    "SelfSubjectReview": "1 metadata ObjectMeta; 2 status SelfSubjectReviewStatus",
    "SelfSubjectReviewStatus": "1 userInfo UserInfo",
    "UserInfo": "1 username; 2 uid; 3 groups [s]",
    # --- authorization.k8s.io/v1 (kubectl auth can-i) ---------------------------------------------------
    "SelfSubjectAccessReview": """1 metadata ObjectMeta; 2 spec SelfSubjectAccessReviewSpec;
        3 status SubjectAccessReviewStatus""",
    "SelfSubjectAccessReviewSpec": "1 resourceAttributes ResourceAttributes?; 2 nonResourceAttributes NonResourceAttributes?",
    "ResourceAttributes": """1 namespace; 2 verb; 3 group; 4 version; 5 resource; 6 subresource; 7 name;
        8 fieldSelector FieldSelectorAttributes?; 9 labelSelector LabelSelectorAttributes?""",
    "FieldSelectorAttributes": "1 rawSelector; 2 requirements [FieldSelectorRequirement]",
    "FieldSelectorRequirement": "1 key s!; 2 operator s!; 3 values [s]",
    "LabelSelectorAttributes": "1 rawSelector; 2 requirements [LabelSelectorRequirement]",
    "NonResourceAttributes": "1 path; 2 verb",
    "SubjectAccessReviewStatus": "1 allowed b!; 4 denied b; 2 reason; 3 evaluationError",
    "SelfSubjectRulesReview": """1 metadata ObjectMeta; 2 spec SelfSubjectRulesReviewSpec;
        3 status SubjectRulesReviewStatus""",
    "SelfSubjectRulesReviewSpec": "1 namespace",
    "SubjectRulesReviewStatus": """1 resourceRules [ResourceRule]; 2 nonResourceRules [NonResourceRule];
        3 incomplete b!; 4 evaluationError""",
    "ResourceRule": "1 verbs [s]; 2 apiGroups [s]; 3 resources [s]; 4 resourceNames [s]",
    "NonResourceRule": "1 verbs [s]; 2 nonResourceURLs [s]",
    # --- autoscaling/v1 --------------------------------------------------------------------------------
    "Scale": "1 metadata ObjectMeta; 2 spec ScaleSpec; 3 status ScaleStatus",
    "ScaleSpec": "1 replicas i32",
    "ScaleStatus": "1 replicas i32!; 2 selector",
    # --- autoscaling/v2 (kubectl autoscale) ------------------------------------------------------------
    "HorizontalPodAutoscaler": """1 metadata ObjectMeta; 2 spec HorizontalPodAutoscalerSpec;
        3 status HorizontalPodAutoscalerStatus""",
    "HorizontalPodAutoscalerSpec": """1 scaleTargetRef CrossVersionObjectReference; 2 minReplicas i32?;
        3 maxReplicas i32!; 4 metrics [MetricSpec]; 5 behavior HorizontalPodAutoscalerBehavior?""",
    "CrossVersionObjectReference": "1 kind s!; 2 name s!; 3 apiVersion",
    "MetricSpec": """1 type s!; 2 object ObjectMetricSource?; 3 pods PodsMetricSource?;
        4 resource ResourceMetricSource?; 7 containerResource ContainerResourceMetricSource?;
        5 external ExternalMetricSource?""",
    "ObjectMetricSource": """1 describedObject CrossVersionObjectReference; 2 target MetricTarget;
        3 metric MetricIdentifier""",
    "PodsMetricSource": "1 metric MetricIdentifier; 2 target MetricTarget",
    "ResourceMetricSource": "1 name s!; 2 target MetricTarget",
    "ContainerResourceMetricSource": "1 name s!; 2 target MetricTarget; 3 container s!",
    "ExternalMetricSource": "1 metric MetricIdentifier; 2 target MetricTarget",
    "MetricIdentifier": "1 name s!; 2 selector LabelSelector?",
    "MetricTarget": "1 type s!; 2 value Quantity?; 3 averageValue Quantity?; 4 averageUtilization i32?",
    "HorizontalPodAutoscalerBehavior": "1 scaleUp HPAScalingRules?; 2 scaleDown HPAScalingRules?",
    "HPAScalingRules": """3 stabilizationWindowSeconds i32?; 1 selectPolicy s?; 2 policies [HPAScalingPolicy];
        4 tolerance Quantity?""",
    "HPAScalingPolicy": "1 type s!; 2 value i32!; 3 periodSeconds i32!",
    "HorizontalPodAutoscalerStatus": """1 observedGeneration i64?; 2 lastScaleTime Time?;
        3 currentReplicas i32; 4 desiredReplicas i32!; 5 currentMetrics [MetricStatus];
        6 conditions [HorizontalPodAutoscalerCondition]""",
    "MetricStatus": """1 type s!; 2 object ObjectMetricStatus?; 3 pods PodsMetricStatus?;
        4 resource ResourceMetricStatus?; 7 containerResource ContainerResourceMetricStatus?;
        5 external ExternalMetricStatus?""",
    "ObjectMetricStatus": """1 metric MetricIdentifier; 2 current MetricValueStatus;
        3 describedObject CrossVersionObjectReference""",
    "PodsMetricStatus": "1 metric MetricIdentifier; 2 current MetricValueStatus",
    "ResourceMetricStatus": "1 name s!; 2 current MetricValueStatus",
    "ContainerResourceMetricStatus": "1 name s!; 2 current MetricValueStatus; 3 container s!",
    "ExternalMetricStatus": "1 metric MetricIdentifier; 2 current MetricValueStatus",
    "MetricValueStatus": "1 value Quantity?; 2 averageValue Quantity?; 3 averageUtilization i32?",
    "HorizontalPodAutoscalerCondition": """1 type s!; 2 status s!; 3 lastTransitionTime Time; 4 reason;
        5 message; 6 observedGeneration i64""",
    # --- the wire messages behind the special types (decoded, then turned into their JSON form) --------
    "runtime.Unknown": "1 typeMeta runtime.TypeMeta; 2 raw y!; 3 contentEncoding s!; 4 contentType s!",
    "runtime.TypeMeta": "1 apiVersion s!; 2 kind s!",
    "Timestamp": "1 seconds i64!; 2 nanos i32!",
    "Duration.wire": "1 duration i64!",
    "IntOrString.wire": "1 type i64!; 2 intVal i32!; 3 strVal s!",
    "Quantity.wire": "1 string s!",
    "RawExtension.wire": "1 raw y!",
    "FieldsV1.wire": "1 Raw y!",
}

#: The kinds a protobuf body may carry, by (apiVersion, kind) of the envelope, and their message.
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("v1", "Pod"): "Pod",
    ("v1", "Binding"): "Binding",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("apps/v1", "Deployment"): "Deployment",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("policy/v1beta1", "Eviction"): "Eviction",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("autoscaling/v1", "Scale"): "Scale",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "HorizontalPodAutoscaler",
}

#: The object a subresource's request body holds (the main resource and status/finalize hold the kind).
SUBRESOURCE_KINDS: dict[str, tuple[str, str]] = {
    "eviction": ("policy/v1", "Eviction"),
    "binding": ("v1", "Binding"),
    "scale": ("autoscaling/v1", "Scale"),
    "token": ("authentication.k8s.io/v1", "TokenRequest"),
}
#: Other apiVersions the same endpoint accepts for a kind (kube's eviction takes policy/v1beta1 too).
ALSO_ACCEPTED = {("policy/v1beta1", "Eviction"): ("policy/v1", "Eviction")}

SCALARS = frozenset({"s", "b", "i32", "i64", "y"})
SPECIALS = frozenset({"Time", "MicroTime", "Duration", "IntOrString", "Quantity", "RawExtension", "FieldsV1"})
UNSUPPORTED = "-"
WIRE_OF_SPECIAL = {
    "Time": "Timestamp",
    "MicroTime": "Timestamp",
    "Duration": "Duration.wire",
    "IntOrString": "IntOrString.wire",
    "Quantity": "Quantity.wire",
    "RawExtension": "RawExtension.wire",
    "FieldsV1": "FieldsV1.wire",
}
# Go's zero time.Time (0001-01-01T00:00:00Z) in Unix seconds: metav1.Time encodes it as null.


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message table."""

    number: int
    name: str
    type: str
    repeated: bool = False
    map: bool = False
    pointer: bool = False
    required: bool = False
    inline: bool = False

    @property
    def keep_zero(self) -> bool:
        return self.pointer or self.required


_ITEM = re.compile(r"^(\d+)\s+(\^?)([A-Za-z][A-Za-z0-9]*)(?:\s+(\S+))?$")


def _parse_table(message: str, spec: str) -> dict[int, Field]:
    fields: dict[int, Field] = {}
    for raw_item in re.split(r"[;\n]", spec):
        item = raw_item.strip()
        if not item:
            continue
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(f"protobuf table {message}: cannot parse {item!r}")
        number, inline, name, type_ = int(match[1]), bool(match[2]), match[3], match[4] or "s"
        pointer, required = type_.endswith("?"), type_.endswith("!")
        type_ = type_.rstrip("?!")
        repeated, mapped = type_.startswith("["), type_.startswith("{")
        if repeated or mapped:
            type_ = type_[1:-1]
        if number in fields:
            raise ValueError(f"protobuf table {message}: field {number} twice")
        fields[number] = Field(number, name, type_, repeated, mapped, pointer, required, inline)
    return fields


MESSAGES: dict[str, dict[int, Field]] = {name: _parse_table(name, spec) for name, spec in _TABLES.items()}


def _check_tables() -> None:
    for message, fields in MESSAGES.items():
        for f in fields.values():
            known = f.type in SCALARS or f.type in SPECIALS or f.type in MESSAGES or f.type == UNSUPPORTED
            if not known:
                raise ValueError(f"protobuf table {message}.{f.name}: unknown type {f.type}")
            if f.inline and (f.type not in MESSAGES or f.repeated or f.map):
                raise ValueError(f"protobuf table {message}.{f.name}: only a single message can be inlined")
    for message in KINDS.values():
        if message not in MESSAGES:
            raise ValueError(f"protobuf kind table names unknown message {message}")


_check_tables()

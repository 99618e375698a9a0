"""The AMD side of a simulated GPU node: the hardware's partition modes and the operator's objects.

What a physical GPU can be partitioned into (:class:`GpuModel`), how many logical GPUs the device
plugin then advertises (:func:`advertised_resources`), which pods hold GPUs (:func:`gpu_busy_pods`),
and the objects the AMD GPU operator and its user create (DaemonSets, ``DeviceConfig``, the profiles
ConfigMap). Pure data and functions: the agent that acts on them is
:mod:`aiplane.sim.hardware.amd_operator`, DCM's decisions are :mod:`aiplane.sim.hardware.amd_dcm`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim import thirdparty

NAMESPACE = "kube-amd-gpu"
DEVICE_CONFIG = "gpu-operator"
CONFIG_MAP = "config-manager-config"
#: The ConfigMap the operator mounts when ``spec.configManager.config.name`` is empty.
DEFAULT_CONFIG_MAP = "default-dcm-config"
CONFIG_KEY = "config.json"
DEVICE_PLUGIN = "amd-gpu-device-plugin"
DCM_DAEMONSET = f"{DEVICE_CONFIG}-device-config-manager"
APP_LABEL = "app.kubernetes.io/name"

AMD_NODE_LABEL = "feature.node.kubernetes.io/amd-gpu"
PROFILE_LABEL = "dcm.amd.com/gpu-config-profile"
STATE_LABEL = "dcm.amd.com/gpu-config-profile-state"
TRIGGER_LABEL = "dcm.amd.com/apply-gpu-config-profile"
PHYSICAL_COUNT_LABEL = "beta.amd.com/gpu.family.AI"
PRODUCT_LABEL = "amd.com/gpu.product-name"
PARTITIONABLE_LABEL = "amd.com/gpu.compute-partitioning-supported"
#: The taint the partitioning workflow puts on a node; DCM tolerates it, the device plugin does not.
DCM_TAINT = {"key": "amd-dcm", "value": "up", "effect": "NoExecute"}

STATE_SUCCESS = "success"
STATE_FAILURE = "failure"
STATE_IN_PROGRESS = "in-progress"

RESOURCE = "amd.com/gpu"
#: Resource names of the device plugin's ``mixed`` naming strategy (``amd.com/cpx_nps4``).
_MIXED_RESOURCE = re.compile(r"^amd\.com/(spx|dpx|tpx|qpx|cpx)_nps[1248]$")

#: Event source component (``globals.EventSourceComponentName``) and field manager of DCM's writes.
COMPONENT = "amd-device-config-manager"
KUBELET = "kubelet"
OPERATOR = "amd-gpu-operator"

# Event reasons (ROCm/device-config-manager pkg/config_manager/globals/constants.go).
SUCCESSFULLY_PARTITIONED = "SuccessfullyPartitioned"
ALREADY_EXISTS = "RequestedPartitionConfigAlreadyExists"
PARTITION_FAILURE = "PartitionFailure"
PARTITION_RETRYING = "PartitionRetrying"
PARTITION_IN_PROGRESS = "PartitionInProgress"
INVALID_PROFILE = "InvalidProfileInfo"
NON_EXISTENT_PROFILE = "NonExistentProfile"
CONFIGMAP_NOT_PRESENT = "ConfigMapNotPresent"
INVALID_JSON = "InvalidJSONInConfigMap"
DUPLICATE_PROFILE = "DuplicateProfileExists"
AMDSMI_FAILURE = "AMDSMIAPIFailure"

#: What DCM accepts in a profile (``ValidComputePartitions``/``ValidMemoryPartitions``); whether the GPU
#: can do it is the hardware's business (:class:`GpuModel`).
VALID_COMPUTE = ("SPX", "CPX", "DPX", "QPX")
VALID_MEMORY = ("NPS1", "NPS2", "NPS4", "NPS8")

#: amd-smi status strings DCM puts in its messages.
DEVICE_BUSY = "Device busy."
NOT_SUPPORTED = "Command not supported."
API_CALL_FAILED = "API call failed."

Obj = dict[str, Any]
Mode = tuple[str, str]  # (compute partition, memory partition) of one physical GPU; ("", "") = none


# --- hardware -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuModel:
    """What one physical GPU can do: XCDs (CPX partitions), memory modes, valid compute/memory pairs."""

    xcds: int
    memory_modes: tuple[str, ...]
    combinations: frozenset[Mode]
    partitionable: bool = True


#: MI300X (and, assumed alike, MI325X/MI308X): 8 XCDs; NPS1 with SPX/DPX/QPX/CPX, NPS4 only with CPX
#: (AMD's MI300X partitioning docs; amdgpu's aqua_vanjaram tables also allow DPX/NPS2, which MI300X's
#: memory does not offer).
MI300_SERIES = GpuModel(
    xcds=8,
    memory_modes=("NPS1", "NPS4"),
    combinations=frozenset(
        {("SPX", "NPS1"), ("DPX", "NPS1"), ("QPX", "NPS1"), ("CPX", "NPS1"), ("CPX", "NPS4")}
    ),
)
#: MI250X, MI210 …: no partitioning (amd-smi answers "Command not supported").
UNPARTITIONABLE = GpuModel(xcds=1, memory_modes=(), combinations=frozenset(), partitionable=False)


def gpu_model(labels: Mapping[str, str]) -> GpuModel:
    """The model of a node's GPUs, from the node labeller's labels."""
    if labels.get(PARTITIONABLE_LABEL, "false") != "true":
        return UNPARTITIONABLE
    return MI300_SERIES


def partitions_per_gpu(compute: str, xcds: int = 8) -> int:
    """Logical GPUs one physical GPU shows in ``compute`` mode (MI300X: SPX 1, DPX 2, QPX 4, CPX 8)."""
    return {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": xcds}.get(compute, 1)


def logical_gpus(modes: Sequence[Mode], model: GpuModel = MI300_SERIES) -> int:
    """Logical GPUs of a node whose physical GPUs are in ``modes``."""
    return sum(partitions_per_gpu(compute, model.xcds) for compute, _ in modes)


def advertised_resources(
    modes: Sequence[Mode], model: GpuModel = MI300_SERIES, strategy: str = "single"
) -> dict[str, int]:
    """The extended resources the device plugin registers (``resource_naming_strategy``): ``single``
    → everything as ``amd.com/gpu``; ``mixed`` → ``amd.com/<compute>_<memory>`` per mode
    (unpartitionable GPUs stay ``amd.com/gpu``)."""
    if strategy != "mixed" or not model.partitionable:
        return {RESOURCE: logical_gpus(modes, model)}
    out: dict[str, int] = {}
    for compute, memory in modes:
        name = f"amd.com/{compute.lower()}_{memory.lower()}"
        out[name] = out.get(name, 0) + partitions_per_gpu(compute, model.xcds)
    return out


def initial_modes(count: int, logical: int, model: GpuModel = MI300_SERIES) -> list[Mode]:
    """The modes a node's GPUs are in when the sim starts, guessed from its ``amd.com/gpu`` capacity
    (8 GPUs showing 64 → CPX; memory NPS1)."""
    if not model.partitionable:
        return [("", "")] * count
    per_gpu = logical // count if count else 1
    compute = {model.xcds: "CPX", 4: "QPX", 2: "DPX"}.get(per_gpu, "SPX")
    return [(compute, "NPS1")] * count


# --- the ConfigMap ------------------------------------------------------------------------------------


def _profile(compute: str, memory: str, count: int = 8) -> dict[str, Any]:
    return {
        "skippedGPUs": {"ids": []},
        "profiles": [{"computePartition": compute, "memoryPartition": memory, "numGPUsAssigned": count}],
    }


#: ``config.json`` of ``kube-amd-gpu/config-manager-config``: the layouts of an 8-GPU MI300X node, and the
#: GPU clients DCM stops while partitioning (ROCm/gpu-operator#421: the metrics exporter keeps GPUs busy).
DEFAULT_CONFIG: dict[str, Any] = {
    "gpu-config-profiles": {
        "spx": _profile("SPX", "NPS1"),
        "dpx": _profile("DPX", "NPS1"),
        "qpx": _profile("QPX", "NPS1"),
        "cpx": _profile("CPX", "NPS1"),
        "cpx_nps4": _profile("CPX", "NPS4"),
    },
    "gpuClientSystemdServices": {"names": ["amd-metrics-exporter", "gpuagent"]},
}


def requests_gpu(pod: Mapping[str, Any]) -> bool:
    """Whether a pod asks for AMD GPUs (``amd.com/gpu`` or a mixed-strategy partition resource)."""
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            for name, value in (resources.get(kind) or {}).items():
                if name == RESOURCE or _MIXED_RESOURCE.match(name):
                    try:
                        if Quantity(str(value)).sign() > 0:
                            return True
                    except ValueError:
                        continue
    return False


def gpu_busy_pods(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """``namespace/name`` of the pods holding GPUs: non-terminating, not finished, asking for GPUs."""
    return [
        f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        for pod in pods
        if not objects.is_deleting(pod)
        and objects.status(pod).get("phase") not in ("Succeeded", "Failed")
        and requests_gpu(pod)
    ]


# --- objects the operator (and its user) create ----------------------------------------------------


def _daemonset(
    name: str, container: dict[str, Any], *, tolerations: list[dict[str, Any]] | None = None
) -> Obj:
    labels = {APP_LABEL: name, "daemonset-name": name}
    spec: dict[str, Any] = {
        "nodeSelector": {AMD_NODE_LABEL: "true"},
        "priorityClassName": "system-node-critical",
        "containers": [container],
    }
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {APP_LABEL: name}},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "revisionHistoryLimit": 10,
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def device_plugin_daemonset(strategy: str = "single") -> Obj:
    """The device plugin: no ``amd-dcm`` toleration (it must restart to see new partitions) and no
    ``amd.com/gpu`` request (it provides them)."""
    ds = _daemonset(
        DEVICE_PLUGIN,
        {
            "name": "device-plugin",
            "image": "docker.io/rocm/k8s-device-plugin:latest",
            "args": [f"-resource_naming_strategy={strategy}"],
            "securityContext": {"privileged": True},
            "volumeMounts": [
                {"name": "kubelet-device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"},
                {"name": "sys", "mountPath": "/sys"},
            ],
        },
    )
    ds["spec"]["template"]["spec"]["volumes"] = [
        {"name": "kubelet-device-plugins", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
        {"name": "sys", "hostPath": {"path": "/sys"}},
    ]
    return ds


def dcm_daemonset(config_map: str = CONFIG_MAP) -> Obj:
    """DCM itself: tolerates the ``amd-dcm=up:NoExecute`` partitioning taint, mounts the ConfigMap."""
    ds = _daemonset(
        DCM_DAEMONSET,
        {
            "name": "device-config-manager",
            "image": "docker.io/rocm/device-config-manager:v1.4.1",
            "env": [{"name": "DS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "config-manager", "mountPath": "/etc/config-manager"}],
        },
        tolerations=[{"key": "amd-dcm", "operator": "Equal", "value": "up", "effect": "NoExecute"}],
    )
    ds["spec"]["template"]["spec"]["volumes"] = [
        {"name": "config-manager", "configMap": {"name": config_map, "optional": True}}
    ]
    return ds


def device_config() -> Obj:
    """The operator's custom resource, as a user enables DCM with it (ROCm/gpu-operator's example)."""
    return {
        "apiVersion": "amd.com/v1alpha1",
        "kind": "DeviceConfig",
        "metadata": {"name": DEVICE_CONFIG, "namespace": NAMESPACE},
        "spec": {
            "driver": {"enable": False},
            "devicePlugin": {
                "devicePluginImage": "docker.io/rocm/k8s-device-plugin:latest",
                "enableNodeLabeller": True,
            },
            "configManager": {
                "enable": True,
                "image": "docker.io/rocm/device-config-manager:v1.4.1",
                "config": {"name": CONFIG_MAP},
            },
            "selector": {AMD_NODE_LABEL: "true"},
        },
    }


def config_map(config: Mapping[str, Any] | None = None) -> Obj:
    """The profiles ConfigMap DCM reads; the user creates it on a real cluster (default: :data:`DEFAULT_CONFIG`)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {CONFIG_KEY: json.dumps(DEFAULT_CONFIG if config is None else config, indent=2) + "\n"},
    }


def device_config_crd() -> Obj:
    """The ``DeviceConfig`` CRD (the operator's chart installs it; the embedded cluster has it from the
    start), with the open schema of the sim's third-party CRDs."""
    (crd,) = (c for c in thirdparty.crds() if c["metadata"]["name"] == "deviceconfigs.amd.com")
    return crd

"""The AMD GPU operator on the simulated fleet: its objects, its device plugin, its Device Config Manager.

Why: GPU partitioning (``infrastructure.silogen.ai``) is a conversation with these components — label a
node ``dcm.amd.com/gpu-config-profile=<profile>``, wait for ``dcm.amd.com/gpu-config-profile-state``,
then for ``amd.com/gpu`` allocatable to show the new partition count — and the failure modes that
matter (a GPU held by a pod is "Device busy", an unknown profile, a device plugin that has not
re-registered yet) come from them. This module plays them as faithfully as their sources describe
(ROCm/gpu-operator ``docs/dcm``, ROCm/device-config-manager ``pkg/config_manager``).

At start (:meth:`AmdGpuOperator.install`): namespace ``kube-amd-gpu``; the ``DeviceConfig``
``gpu-operator`` (``spec.configManager.enable: true``, ``config.name: config-manager-config``); the
ConfigMap ``config-manager-config`` whose ``config.json`` holds MI300X profiles (:data:`DEFAULT_CONFIG`);
the DaemonSets ``amd-gpu-device-plugin`` (not tolerating ``amd-dcm=up:NoExecute``, so a partitioning
drain evicts it) and ``gpu-operator-device-config-manager`` (tolerating it, as DCM does). The sim's
DaemonSet controller and kubelet run their pods.

**Device Config Manager** (per AMD node, ``feature.node.kubernetes.io/amd-gpu=true``): when the profile
label changes to a non-empty value, when the trigger label ``dcm.amd.com/apply-gpu-config-profile``
is set, or when the ConfigMap's content changes, DCM reads the profile from the ConfigMap (missing →
``ConfigMapNotPresent``, bad JSON → ``InvalidJSONInConfigMap``, unknown name → ``NonExistentProfile``,
invalid layout → ``InvalidProfileInfo``; all ``failure``), compares it with the GPUs' current modes
(all equal → ``success`` + ``RequestedPartitionConfigAlreadyExists``), fails with ``Device busy`` if a
pod on the node uses a GPU, and otherwise partitions for ``dcm_delay`` seconds, then writes ``success``
and emits ``SuccessfullyPartitioned``. It writes no state while working (newer DCM versions write
``in-progress``: ``in_progress_label=True``).

**Device plugin**: when its pod on a node is Running it registers the node's logical GPUs with the
kubelet (``status.capacity``/``allocatable`` ``amd.com/gpu`` = physical GPUs times partitions per GPU,
``plugin_refresh_delay`` later); when the pod goes (e.g. evicted by the partitioning taint) the kubelet
marks the devices unhealthy (allocatable 0). A partition change is re-registered while the pod runs
(``plugin_refresh="auto"``) or only when the pod restarts (``"on-restart"``: the field problem of
ROCm/gpu-operator#382/#420).

The decisions are pure functions (:func:`parse_config`, :func:`validate_profile`, :func:`decide`,
:func:`advertised_resources`), unit-tested without a cluster.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    pod_terminal,
    record_event,
    write_status,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class ProfileEntry:
    compute: str
    memory: str
    count: int


@dataclass(frozen=True)
class Profile:
    """One ``gpu-config-profiles`` entry: GPUs left alone, and modes for the others in GPU-id order."""

    skipped: tuple[int, ...]
    entries: tuple[ProfileEntry, ...]


class DcmError(Exception):
    """A DCM answer other than partitioning: the event reason and ``partStatus.Reason``."""

    def __init__(self, reason: str, status_reason: str, *, retryable: bool = False) -> None:
        super().__init__(status_reason)
        self.reason = reason
        self.status_reason = status_reason
        self.retryable = retryable


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs, so duplicate keys can be seen."""


def _uint(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**32 - 1:
        raise ValueError(value)
    return value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, _Pairs):
        raise ValueError(value)
    return dict(value)


def _profile_from(value: Any) -> Profile:
    """Go's ``json.Unmarshal`` into DCM's ``GPUConfigProfile`` (unknown fields ignored; wrong types fail)."""
    if value is None:
        return Profile((), ())
    obj = _object(value)
    skipped: tuple[int, ...] = ()
    if obj.get("skippedGPUs") is not None:
        ids = _object(obj["skippedGPUs"]).get("ids")
        if ids is not None:
            if not isinstance(ids, list):
                raise ValueError(ids)
            skipped = tuple(_uint(i) for i in ids)
    entries = []
    profiles = obj.get("profiles")
    if profiles is not None:
        if not isinstance(profiles, list):
            raise ValueError(profiles)
        for item in profiles:
            entry = _object(item) if item is not None else {}
            compute = entry.get("computePartition", "") or ""
            memory = entry.get("memoryPartition", "") or ""
            if not isinstance(compute, str) or not isinstance(memory, str):
                raise ValueError(entry)
            entries.append(ProfileEntry(compute, memory, _uint(entry.get("numGPUsAssigned") or 0)))
    return Profile(skipped, tuple(entries))


def parse_config(text: str | None) -> dict[str, Profile]:
    """``config.json`` → profiles by name, or the :class:`DcmError` DCM answers for the file.

    ``None`` (no ConfigMap, or no ``config.json`` key) is ``ConfigMapNotPresent``; anything Go would
    fail to unmarshal into DCM's structs is ``InvalidJSONInConfigMap``; a profile name given twice
    is ``DuplicateProfileExists``.
    """
    if text is None:
        raise DcmError(CONFIGMAP_NOT_PRESENT, "Configmap does not exist")
    try:
        top = json.loads(text, object_pairs_hook=_Pairs)
        if not isinstance(top, _Pairs):
            raise ValueError(top)
        raw_profiles = dict(top).get("gpu-config-profiles")
        names: list[tuple[str, Any]] = []
        if raw_profiles is not None:
            if not isinstance(raw_profiles, _Pairs):
                raise ValueError(raw_profiles)
            names = list(raw_profiles)
        profiles = {name: _profile_from(value) for name, value in names}
        services = dict(top).get("gpuClientSystemdServices")
        if services is not None:
            listed = _object(services).get("names")
            if listed is not None and (
                not isinstance(listed, list) or not all(isinstance(n, str) for n in listed)
            ):
                raise ValueError(listed)
    except ValueError:  # json.JSONDecodeError is a ValueError
        raise DcmError(INVALID_JSON, "Invalid JSON inside configmap") from None
    seen: set[str] = set()
    duplicates = []
    for name, _ in names:
        if name in seen:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise DcmError(DUPLICATE_PROFILE, "Duplicate Profile names exist in the configmap")
    return profiles


def validate_profile(profile: Profile, total: int) -> list[Mode | None]:
    """DCM's ``validateProfile``: the target mode of every GPU (``None``: skipped), or
    ``InvalidProfileInfo`` with DCM's message."""

    def invalid(message: str) -> DcmError:
        return DcmError(INVALID_PROFILE, f"Partition failed with reason: {message}")

    if len(profile.skipped) > total:
        raise invalid(
            "GPU ID list specified in the device filter is invalid, list length is exceeding the total "
            "number of GPUs available on this node"
        )
    if any(i + 1 > total for i in profile.skipped):
        raise invalid("invalid gpu id")
    if sum(e.count for e in profile.entries) + len(profile.skipped) != total:
        raise invalid(
            "the total of all numGPUsAssigned values across profiles, combined with the count of IDs in "
            "the skippedGPUs list, does not equal the total number of GPUs available on this node"
        )
    first_memory = profile.entries[0].memory if profile.entries else ""
    for entry in profile.entries:
        if entry.compute not in VALID_COMPUTE:
            raise invalid("not a valid profile. Invalid compute type")
        if entry.memory not in VALID_MEMORY:
            raise invalid("not a valid profile. Invalid memory type")
        if entry.memory != first_memory:
            raise invalid("profile cannot have combination of NPS1, NPS2 and NPS4 memory types")
    targets: list[Mode | None] = [None] * total
    usable = [i for i in range(total) if i not in set(profile.skipped)]
    index = 0
    for entry in profile.entries:
        for _ in range(entry.count):
            targets[usable[index]] = (entry.compute, entry.memory)
            index += 1
    return targets


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
        if not objects.is_deleting(dict(pod)) and not pod_terminal(dict(pod)) and requests_gpu(pod)
    ]


# --- the decision -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What DCM does about one trigger.

    ``kind``: ``partition`` (start; ``success`` after ``dcm_delay``), ``success`` (nothing to change),
    ``failure``. ``reason``/``event_type``/``message``: the event (``message`` is DCM's JSON
    ``PartitionStatus``). ``retryable``: DCM's retry loop would try again (amd-smi failures, busy GPUs).
    ``target``: the GPUs' modes afterwards.
    """

    kind: Literal["partition", "success", "failure"]
    reason: str
    event_type: str
    message: str
    retryable: bool = False
    target: tuple[Mode, ...] = ()
    gpu_status: tuple[dict[str, Any], ...] = field(default=(), compare=False)


def status_message(
    profile: str, final: str, reason: str, gpus: Sequence[Mapping[str, Any]] | None = None
) -> str:
    """DCM's event message: its ``PartitionStatus`` as Go's ``json.Marshal`` writes it."""
    return json.dumps(
        {
            "SelectedProfile": profile,
            "FinalStatus": final,
            "Reason": reason,
            "GPUStatus": [dict(g) for g in gpus] if gpus else None,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _gpu_entry(gpu: int, mode: Mode, status: str, message: str) -> dict[str, Any]:
    return {"GpuID": gpu, "PartitionType": f"{mode[0]}-{mode[1]}", "Status": status, "Message": message}


def decide(
    profile_name: str,
    config_text: str | None,
    modes: Sequence[Mode],
    model: GpuModel = MI300_SERIES,
    *,
    busy: Sequence[str] = (),
    fail: bool = False,
) -> Outcome:
    """DCM's ``PartitionGPU`` for one node, without the waiting (pure).

    Order as in DCM: the ConfigMap (present, valid JSON, no duplicate names), the profile (exists;
    ``fail`` stands for an amd-smi failure here), its layout (:func:`validate_profile`), GPUs already in
    the requested modes (→ ``success``, ``RequestedPartitionConfigAlreadyExists``), what the hardware
    supports, then ``busy`` (pods using GPUs: amd-smi's "Device busy").
    """

    def failed(err: DcmError, gpus: Sequence[Mapping[str, Any]] = ()) -> Outcome:
        return Outcome(
            "failure",
            err.reason,
            "Warning",
            status_message(profile_name, "Failure", err.status_reason, gpus),
            retryable=err.retryable,
            gpu_status=tuple(dict(g) for g in gpus),
        )

    try:
        profiles = parse_config(config_text)
    except DcmError as err:
        return failed(err)
    profile = profiles.get(profile_name)
    if profile is None:
        return failed(DcmError(NON_EXISTENT_PROFILE, "Profile does not exist in the configmap"))
    if fail:
        return failed(
            DcmError(PARTITION_FAILURE, f"Partition failed with reason: {API_CALL_FAILED}", retryable=True)
        )
    try:
        targets = validate_profile(profile, len(modes))
    except DcmError as err:
        return failed(err)
    new_modes = tuple(t if t is not None else m for t, m in zip(targets, modes, strict=True))
    assigned = [(gpu, t) for gpu, t in enumerate(targets) if t is not None]
    changes = [(gpu, t) for gpu, t in assigned if modes[gpu] != t]
    if not changes:
        gpus = [_gpu_entry(gpu, t, "Success", "Partition not required") for gpu, t in assigned]
        return Outcome(
            "success",
            ALREADY_EXISTS,
            "Warning",  # DCM reports it through its error path
            status_message(
                profile_name,
                "Success",
                "Existing GPU's partition configuration same as profile's partition config",
                gpus,
            ),
            target=new_modes,
            gpu_status=tuple(gpus),
        )
    for gpu, (compute, memory) in changes:
        if not model.partitionable:
            break
        if modes[gpu][1] != memory and memory not in model.memory_modes:
            supported = " ".join(model.memory_modes)
            message = (
                f"Unsupported memory partition type {memory} given in profile. "
                f"List of supported memory partition types are [{supported}]"
            )
            entry = _gpu_entry(gpu, (compute, memory), "Failure", message)
            return failed(DcmError(INVALID_PROFILE, f"Partition failed with reason: {message}"), [entry])
        if (compute, memory) not in model.combinations:
            message = (
                f"Unsupported compute partition combination {compute}-{memory} given in profile. "
                f"The memory partition {memory} does not support compute partition {compute}"
            )
            entry = _gpu_entry(gpu, (compute, memory), "Failure", message)
            return failed(DcmError(INVALID_PROFILE, f"Partition failed with reason: {message}"), [entry])
    problem = NOT_SUPPORTED if not model.partitionable else DEVICE_BUSY if busy else None
    if problem is not None:
        text = f"Partition failed with reason: {problem}"
        changed = {gpu for gpu, _ in changes}
        gpus = [
            _gpu_entry(gpu, t, "Failure", text)
            if gpu in changed
            else _gpu_entry(gpu, t, "Success", "Partition not required")
            for gpu, t in assigned
        ]
        return failed(DcmError(PARTITION_FAILURE, text, retryable=True), gpus)
    changed = {gpu for gpu, _ in changes}
    gpus = [
        _gpu_entry(
            gpu, t, "Success", "Successfully partitioned" if gpu in changed else "Partition not required"
        )
        for gpu, t in assigned
    ]
    return Outcome(
        "partition",
        SUCCESSFULLY_PARTITIONED,
        "Normal",
        status_message(profile_name, "Success", "All GPUs were successfully partitioned", gpus),
        target=new_modes,
        gpu_status=tuple(gpus),
    )


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


# --- the agent ----------------------------------------------------------------------------------------


@dataclass
class _Node:
    """What the sim knows about one AMD node beyond its Node object: the GPUs' real modes (the
    "hardware"), DCM's current attempt, and the device plugin's registration."""

    modes: list[Mode]
    model: GpuModel
    attempt: int = 0
    profile: str = ""
    target: tuple[Mode, ...] = ()
    message: str = ""  # the SuccessfullyPartitioned message of the attempt in progress
    timer: asyncio.TimerHandle | None = None
    retry_started: float | None = None
    plugin_uid: str | None = None
    plugin_timer: asyncio.TimerHandle | None = None


class AmdGpuOperator(AgentLoop):
    """The AMD GPU operator's DCM and device plugin on every AMD node (see the module doc).

    Knobs (attributes, changeable at runtime): ``dcm_delay``, ``plugin_refresh_delay``,
    ``plugin_refresh`` (``"auto"`` | ``"on-restart"``), ``resource_naming_strategy`` (``"single"`` |
    ``"mixed"``), ``retry_interval`` (``None``: no retry loop; else seconds between attempts while a
    retryable failure lasts, up to ``retry_timeout``), ``in_progress_label``, ``event_target``
    (``"node"`` | ``"pod"``: the DCM pod, as the real DCM does) and ``fail_nodes`` (nodes on which
    amd-smi fails: ``failure`` + ``PartitionFailure``).
    """

    name = "amd-gpu-operator"

    def __init__(
        self,
        api: Api,
        pods: PodIndex,
        *,
        dcm_delay: float = 1.0,
        plugin_refresh_delay: float = 0.0,
        plugin_refresh: Literal["auto", "on-restart"] = "auto",
        resource_naming_strategy: Literal["single", "mixed"] = "single",
        retry_interval: float | None = None,
        retry_timeout: float = 1800.0,
        in_progress_label: bool = False,
        event_target: Literal["node", "pod"] = "node",
    ) -> None:
        super().__init__(api)
        self.pods = pods
        self.dcm_delay = dcm_delay
        self.plugin_refresh_delay = plugin_refresh_delay
        self.plugin_refresh = plugin_refresh
        self.resource_naming_strategy = resource_naming_strategy
        self.retry_interval = retry_interval
        self.retry_timeout = retry_timeout
        self.in_progress_label = in_progress_label
        self.event_target = event_target
        #: Nodes on which DCM's amd-smi calls fail (answered ``failure`` + ``PartitionFailure``).
        self.fail_nodes: set[str] = set()
        self.node_rt = api.resource("v1", "Node")
        self.dc_rt = api.resource("amd.com/v1alpha1", "DeviceConfig")
        self.cm_rt = api.resource("v1", "ConfigMap")
        self.ds_rt = api.resource("apps/v1", "DaemonSet")
        self._nodes: dict[str, _Node] = {}

    # --- install ----------------------------------------------------------------------------------

    def install(self) -> None:
        """Create what the operator's install and its user would have created (idempotently)."""
        opts = WriteOptions(field_manager=OPERATOR)
        ns_rt = self.api.resource("v1", "Namespace")
        if self.store.get("/namespaces", "", NAMESPACE) is None:
            self.api.create(
                ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, opts
            )
        if self.store.get(self.cm_rt.storage_key, NAMESPACE, CONFIG_MAP) is None:
            self.api.create(self.cm_rt, NAMESPACE, config_map(), opts)
        owner = self.store.get(self.dc_rt.storage_key, NAMESPACE, DEVICE_CONFIG)
        if owner is None:
            owner = self.api.create(self.dc_rt, NAMESPACE, device_config(), opts).obj
        self._sync_daemonsets(owner)

    def _owner_ref(self, dc: Obj) -> dict[str, Any]:
        meta = objects.meta(dc)
        return {
            "apiVersion": "amd.com/v1alpha1",
            "kind": "DeviceConfig",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _sync_daemonsets(self, dc: Obj | None) -> None:
        """The operator's DaemonSets follow the DeviceConfig (owned by it; DCM only while enabled)."""
        if dc is None or objects.is_deleting(dc):
            return
        opts = WriteOptions(field_manager=OPERATOR)
        wanted = {DEVICE_PLUGIN: device_plugin_daemonset(self.resource_naming_strategy)}
        if self._dcm_enabled(dc):
            wanted[DCM_DAEMONSET] = dcm_daemonset(self._config_map_name(dc))
        elif self.store.get(self.ds_rt.storage_key, NAMESPACE, DCM_DAEMONSET) is not None:
            try:
                self.api.delete(self.ds_rt, NAMESPACE, DCM_DAEMONSET)
            except ApiError as err:
                if err.code != 404:
                    raise
        for name, body in wanted.items():
            if self.store.get(self.ds_rt.storage_key, NAMESPACE, name) is None:
                body["metadata"]["ownerReferences"] = [self._owner_ref(dc)]
                self.api.create(self.ds_rt, NAMESPACE, body, opts)

    # --- configuration ----------------------------------------------------------------------------

    def _device_config(self) -> Obj | None:
        return self.store.get(self.dc_rt.storage_key, NAMESPACE, DEVICE_CONFIG)

    @staticmethod
    def _dcm_enabled(dc: Obj | None) -> bool:
        if dc is None or objects.is_deleting(dc):
            return False
        return bool((objects.spec(dc).get("configManager") or {}).get("enable"))

    @staticmethod
    def _config_map_name(dc: Obj | None) -> str:
        config = (((dc or {}).get("spec") or {}).get("configManager") or {}).get("config") or {}
        return str(config.get("name") or DEFAULT_CONFIG_MAP)

    def _config_text(self) -> str | None:
        cm = self.store.get(self.cm_rt.storage_key, NAMESPACE, self._config_map_name(self._device_config()))
        if cm is None:
            return None
        value = (cm.get("data") or {}).get(CONFIG_KEY)
        return None if value is None else str(value)

    def _is_amd(self, node: Obj) -> bool:
        labels = objects.labels(node)
        dc = self._device_config()
        selector = ((dc or {}).get("spec") or {}).get("selector") or {AMD_NODE_LABEL: "true"}
        return all(labels.get(k) == v for k, v in selector.items())

    def _state(self, node: Obj) -> _Node:
        """The sim's record of a node's GPUs, made the first time the node is looked at."""
        name = objects.name(node)
        state = self._nodes.get(name)
        if state is None:
            labels = objects.labels(node)
            model = gpu_model(labels)
            capacity = objects.status(node).get("capacity") or {}
            logical = _int(capacity.get(RESOURCE), 0)
            count = _int(labels.get(PHYSICAL_COUNT_LABEL), logical)
            modes = initial_modes(count, logical, model)
            # A node labelled with a known profile whose layout gives its capacity is in that layout.
            try:
                profile = parse_config(self._config_text()).get(labels.get(PROFILE_LABEL, ""))
                if profile is not None:
                    targets = validate_profile(profile, count)
                    guess = [t or m for t, m in zip(targets, modes, strict=True)]
                    if logical_gpus(guess, model) == logical:
                        modes = guess
            except DcmError:
                pass
            state = self._nodes[name] = _Node(modes=modes, model=model)
        return state

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for node in self.store.items(NODES):
            if self._is_amd(node):
                self._state(node)
                self.enqueue(("plugin", objects.name(node)))

    def on_event(self, event: Event) -> None:
        if event.key == NODES:
            self._on_node(event)
        elif event.key == PODS:
            for obj in (event.obj, event.old):
                if obj is not None and self._is_plugin_pod(obj):
                    node = objects.spec(obj).get("nodeName")
                    if node:
                        self.enqueue(("plugin", str(node)))
        elif event.key == self.cm_rt.storage_key:
            meta = objects.meta(event.obj)
            if (
                meta.get("namespace") == NAMESPACE
                and meta["name"] == self._config_map_name(self._device_config())
                and event.type != DELETED
                and (event.old is None or (event.old.get("data") or {}) != (event.obj.get("data") or {}))
            ):
                self.enqueue(("configmap",))  # DCM's file watcher: re-apply every node's profile
        elif event.key == self.dc_rt.storage_key:
            meta = objects.meta(event.obj)
            if meta.get("namespace") == NAMESPACE and meta["name"] == DEVICE_CONFIG:
                self.enqueue(("deviceconfig",))
        elif event.key == self.ds_rt.storage_key and event.type == DELETED:
            meta = objects.meta(event.obj)
            if meta.get("namespace") == NAMESPACE and meta["name"] in (DEVICE_PLUGIN, DCM_DAEMONSET):
                self.enqueue(("deviceconfig",))  # the operator owns its DaemonSets: it puts them back

    def _on_node(self, event: Event) -> None:
        name = objects.name(event.obj)
        if event.type == DELETED:
            state = self._nodes.pop(name, None)
            if state is not None:
                self.cancel(state.timer)
                self.cancel(state.plugin_timer)
            return
        if event.type != "MODIFIED" or event.old is None or not self._is_amd(event.obj):
            return
        new, old = objects.labels(event.obj), objects.labels(event.old)
        profile = new.get(PROFILE_LABEL, "")
        changed = bool(profile) and profile != old.get(PROFILE_LABEL, "")
        trigger = new.get(TRIGGER_LABEL, "")
        triggered = bool(trigger) and trigger != old.get(TRIGGER_LABEL, "")
        if changed or triggered:
            self.enqueue(("trigger", name, profile))

    @staticmethod
    def _is_plugin_pod(pod: Obj) -> bool:
        return bool(
            objects.meta(pod).get("namespace") == NAMESPACE
            and objects.labels(pod).get(APP_LABEL) == DEVICE_PLUGIN
        )

    # --- work -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        kind = work[0]
        if kind == "trigger":
            self._trigger(work[1], work[2])
        elif kind == "attempt":
            self._attempt(work[1], int(work[2]))
        elif kind == "finish":
            self._finish(work[1], int(work[2]))
        elif kind == "plugin":
            self._plugin(work[1])
        elif kind == "report":
            self._report(work[1], work[2])
        elif kind == "configmap":
            for node in self.store.items(NODES):
                profile = objects.labels(node).get(PROFILE_LABEL, "")
                if profile and self._is_amd(node):
                    self._trigger(objects.name(node), profile)
        elif kind == "deviceconfig":
            self._sync_daemonsets(self._device_config())

    def _trigger(self, node_name: str, profile: str) -> None:
        """A new request: any attempt in progress (or retry loop) is abandoned, as DCM's worker does."""
        node = self.store.get(NODES, "", node_name)
        if node is None or not self._dcm_enabled(self._device_config()):
            return
        if not profile:
            log.info("dcm %s: no profile selected, nothing to apply", node_name)
            return
        state = self._state(node)
        self.cancel(state.timer)
        state.timer = None
        state.attempt += 1
        state.profile = profile
        state.retry_started = None
        if self.in_progress_label:
            self._set_labels(node_name, {STATE_LABEL: STATE_IN_PROGRESS})
            self._event(
                node_name,
                "Normal",
                PARTITION_IN_PROGRESS,
                status_message(profile, "", f"Starting partition process for profile: {profile}"),
            )
        self._attempt(node_name, state.attempt)

    def _attempt(self, node_name: str, attempt: int) -> None:
        node = self.store.get(NODES, "", node_name)
        state = self._nodes.get(node_name)
        if node is None or state is None or attempt != state.attempt:
            return
        state.timer = None
        outcome = decide(
            state.profile,
            self._config_text(),
            state.modes,
            state.model,
            busy=gpu_busy_pods(self.pods.on_node(node_name)),
            fail=node_name in self.fail_nodes,
        )
        if outcome.kind == "partition":
            state.target, state.message = outcome.target, outcome.message
            state.timer = self.later(self.dcm_delay, ("finish", node_name, str(attempt)))
            return
        if outcome.kind == "success":
            state.modes = list(outcome.target)
            self._conclude(node_name, STATE_SUCCESS, outcome.event_type, outcome.reason, outcome.message)
            return
        if outcome.retryable and self.retry_interval is not None:
            now = time.monotonic()
            first = state.retry_started is None
            if first:
                state.retry_started = now
                self._set_labels(node_name, {STATE_LABEL: STATE_FAILURE})
                self._event(
                    node_name,
                    "Warning",
                    PARTITION_RETRYING,
                    status_message(
                        state.profile,
                        "Partition failed, retrying.",
                        f"Partition retrying for profile: {state.profile}",
                        outcome.gpu_status,
                    ),
                )
            assert state.retry_started is not None
            if now + self.retry_interval - state.retry_started <= self.retry_timeout:
                state.timer = self.later(self.retry_interval, ("attempt", node_name, str(attempt)))
                return
            reason = PARTITION_FAILURE  # the retry loop expired
        else:
            reason = outcome.reason
        self._conclude(node_name, STATE_FAILURE, "Warning", reason, outcome.message)

    def _finish(self, node_name: str, attempt: int) -> None:
        """The partitioning took ``dcm_delay``: the GPUs are in their new modes."""
        state = self._nodes.get(node_name)
        if state is None or attempt != state.attempt or self.store.get(NODES, "", node_name) is None:
            return
        state.timer = None
        state.modes = list(state.target)
        if self.plugin_refresh == "auto" and state.plugin_uid is not None:
            self.cancel(state.plugin_timer)
            if self.plugin_refresh_delay <= 0:
                self._report(node_name, state.plugin_uid)
            else:
                state.plugin_timer = self.later(
                    self.plugin_refresh_delay, ("report", node_name, state.plugin_uid)
                )
        self._conclude(node_name, STATE_SUCCESS, "Normal", SUCCESSFULLY_PARTITIONED, state.message)

    def _conclude(self, node_name: str, state_value: str, event_type: str, reason: str, message: str) -> None:
        """Write the state label (and take the trigger label away), then tell the world."""
        state = self._nodes.get(node_name)
        if state is not None:
            state.retry_started = None
        self._set_labels(node_name, {STATE_LABEL: state_value}, remove=(TRIGGER_LABEL,))
        self._event(node_name, event_type, reason, message)

    # --- device plugin ----------------------------------------------------------------------------

    def _plugin(self, node_name: str) -> None:
        """(Un)register the node's device plugin with the kubelet as its pod comes and goes."""
        node = self.store.get(NODES, "", node_name)
        if node is None or not self._is_amd(node):
            return
        state = self._state(node)
        running = [
            p
            for p in self.pods.on_node(node_name)
            if self._is_plugin_pod(p)
            and not objects.is_deleting(p)
            and objects.status(p).get("phase") == "Running"
        ]
        uid = objects.uid(running[0]) if running else None
        if uid == state.plugin_uid:
            return
        self.cancel(state.plugin_timer)
        state.plugin_timer = None
        registered = state.plugin_uid is not None
        state.plugin_uid = uid
        if uid is None:
            if registered:
                self._write_resources(node_name, None)
            return
        state.plugin_timer = self.later(self.plugin_refresh_delay, ("report", node_name, uid))

    def _report(self, node_name: str, uid: str) -> None:
        state = self._nodes.get(node_name)
        if state is None or state.plugin_uid != uid:
            return
        state.plugin_timer = None
        self._write_resources(
            node_name, advertised_resources(state.modes, state.model, self.resource_naming_strategy)
        )

    def _write_resources(self, node_name: str, resources: dict[str, int] | None) -> None:
        """The kubelet's node status: the plugin's devices (``None``: plugin gone, devices unhealthy)."""
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        status = dict(objects.status(node))
        capacity = dict(status.get("capacity") or {})
        allocatable = dict(status.get("allocatable") or {})
        ours = {k for k in capacity if k == RESOURCE or _MIXED_RESOURCE.match(k)}
        if resources is None:
            for key in ours:
                allocatable[key] = "0"
        else:
            for key in ours - set(resources):
                capacity[key] = allocatable[key] = "0"
            for key, value in resources.items():
                capacity[key] = allocatable[key] = str(value)
        if capacity == status.get("capacity") and allocatable == status.get("allocatable"):
            return
        status["capacity"], status["allocatable"] = capacity, allocatable
        try:
            write_status(self.api, self.node_rt, node, status, KUBELET)
        except ApiError as err:
            if err.code != 404:
                raise

    # --- writes -----------------------------------------------------------------------------------

    def _set_labels(self, node_name: str, labels: Mapping[str, str], remove: Sequence[str] = ()) -> None:
        """DCM's ``AddNodeLabel``: a get-modify-update of the Node's labels."""
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        meta = dict(objects.meta(node))
        current = dict(meta.get("labels") or {})
        wanted = {**{k: v for k, v in current.items() if k not in remove}, **labels}
        if wanted == current:
            return
        meta["labels"] = wanted
        try:
            self.api.update(
                self.node_rt,
                None,
                node_name,
                {**node, "metadata": meta},
                WriteOptions(field_manager=COMPONENT),
            )
        except ApiError as err:
            if err.code != 404:
                raise

    def _event(self, node_name: str, type_: str, reason: str, message: str) -> None:
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        involved: Obj = node
        if self.event_target == "pod":
            dcm_pods = [
                p for p in self.pods.on_node(node_name) if objects.labels(p).get(APP_LABEL) == DCM_DAEMONSET
            ]
            if dcm_pods:
                involved = dcm_pods[0]
        record_event(self.api, involved, type_, reason, message, component=COMPONENT, host=node_name)


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


__all__ = [
    "DEFAULT_CONFIG",
    "MI300_SERIES",
    "AmdGpuOperator",
    "DcmError",
    "GpuModel",
    "Outcome",
    "Profile",
    "ProfileEntry",
    "advertised_resources",
    "decide",
    "gpu_busy_pods",
    "logical_gpus",
    "parse_config",
    "partitions_per_gpu",
    "requests_gpu",
    "status_message",
    "validate_profile",
]

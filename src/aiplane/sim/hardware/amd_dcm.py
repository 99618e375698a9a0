"""The Device Config Manager's decisions: the profiles ConfigMap read as DCM reads it, and what a
trigger leads to (partition, nothing to do, or which failure), as pure functions.

Messages and event reasons follow ROCm/device-config-manager (``pkg/config_manager``): clients and
our partitioning controller read them, so they are reproduced exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aiplane.sim.hardware.amd_gpu import (
    ALREADY_EXISTS,
    API_CALL_FAILED,
    CONFIGMAP_NOT_PRESENT,
    DEVICE_BUSY,
    DUPLICATE_PROFILE,
    INVALID_JSON,
    INVALID_PROFILE,
    MI300_SERIES,
    NON_EXISTENT_PROFILE,
    NOT_SUPPORTED,
    PARTITION_FAILURE,
    SUCCESSFULLY_PARTITIONED,
    VALID_COMPUTE,
    VALID_MEMORY,
    GpuModel,
    Mode,
)

# --- the ConfigMap ------------------------------------------------------------------------------------


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


def _unsupported_change(
    changes: Sequence[tuple[int, Mode]], modes: Sequence[Mode], model: GpuModel
) -> tuple[dict[str, Any], str] | None:
    """The first change the hardware cannot make, as its GPU status entry and amd-smi's message.

    An unpartitionable model is not judged here: every change to it fails later as "not supported".
    """
    if not model.partitionable:
        return None
    for gpu, (compute, memory) in changes:
        if modes[gpu][1] != memory and memory not in model.memory_modes:
            supported = " ".join(model.memory_modes)
            message = (
                f"Unsupported memory partition type {memory} given in profile. "
                f"List of supported memory partition types are [{supported}]"
            )
            return _gpu_entry(gpu, (compute, memory), "Failure", message), message
        if (compute, memory) not in model.combinations:
            message = (
                f"Unsupported compute partition combination {compute}-{memory} given in profile. "
                f"The memory partition {memory} does not support compute partition {compute}"
            )
            return _gpu_entry(gpu, (compute, memory), "Failure", message), message
    return None


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
    unsupported = _unsupported_change(changes, modes, model)
    if unsupported is not None:
        entry, message = unsupported
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

"""GPU systems from their vendors' public data sheets, and AMD compute partitions of them.

Numbers are per GPU: dense tensor TFLOPS (no 2:4 sparsity), HBM as the driver reports it (GiB),
HBM bandwidth, and the GPU's aggregate intra-node link bandwidth (NVLink / Infinity Fabric, both
directions), which is what an all-reduce inside one node can use. docs/planner.md cites each source.
"""

from __future__ import annotations

from dataclasses import replace

from aiplane.planner.types import PlannerError, SystemSpec

_NV = "nvidia.com/gpu"
_AMD = "amd.com/gpu"

SYSTEMS: dict[str, SystemSpec] = {
    s.name: s
    for s in (
        # H100 SXM5 80GB: 989 BF16 / 1979 FP8 dense, 3.35 TB/s HBM3, NVLink 4 900 GB/s. No FP4.
        SystemSpec("h100_sxm", "nvidia", 79.6, 3.35, 989.0, 1979.0, 0.0, 900.0, 8, _NV),
        # H200 SXM 141GB: H100's compute, 4.8 TB/s HBM3e.
        SystemSpec("h200_sxm", "nvidia", 140.4, 4.8, 989.0, 1979.0, 0.0, 900.0, 8, _NV),
        # A100 SXM4 80GB: 312 BF16 dense, no FP8/FP4 tensor cores, 2.039 TB/s, NVLink 3 600 GB/s.
        SystemSpec("a100_sxm", "nvidia", 79.3, 2.039, 312.0, 0.0, 0.0, 600.0, 8, _NV),
        # HGX B200 180GB: 2.25 PF BF16 / 4.5 PF FP8 / 9 PF FP4 dense, 8 TB/s, NVLink 5 1.8 TB/s.
        SystemSpec("b200_sxm", "nvidia", 179.0, 8.0, 2250.0, 4500.0, 9000.0, 1800.0, 8, _NV),
        # GB200 (per Blackwell GPU of an NVL72): 2.5 / 5 / 10 PF dense, 186 GB HBM3e, 8 TB/s; 4 GPUs a tray.
        SystemSpec("gb200", "nvidia", 184.0, 8.0, 2500.0, 5000.0, 10000.0, 1800.0, 4, _NV),
        # MI300X 192GB: 1307 BF16 / 2615 FP8 dense, 5.3 TB/s, 7 x 128 GB/s Infinity Fabric links. No FP4.
        SystemSpec("mi300x", "amd", 192.0, 5.3, 1307.4, 2614.9, 0.0, 896.0, 8, _AMD),
        # MI325X 256GB: MI300X's compute, 6 TB/s HBM3e.
        SystemSpec("mi325x", "amd", 256.0, 6.0, 1307.4, 2614.9, 0.0, 896.0, 8, _AMD),
        # MI355X 288GB: 2.5 PF BF16 / 5 PF FP8 / 10 PF MXFP4 dense, 8 TB/s, 7 x 153.6 GB/s links.
        SystemSpec("mi355x", "amd", 288.0, 8.0, 2516.6, 5033.2, 10066.3, 1075.2, 8, _AMD),
    )
}

_ALIASES = {
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "a100": "a100_sxm",
    "b200": "b200_sxm",
    "gb200_sxm": "gb200",
}

#: AMD compute-partition modes by partitions per GPU (amd-smi's names).
PARTITION_MODES = {2: "dpx", 4: "qpx", 8: "cpx"}


def known_systems() -> list[str]:
    return sorted({*SYSTEMS, *_ALIASES})


def resolve_system(name: str) -> SystemSpec:
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    spec = SYSTEMS.get(key)
    if spec is None:
        raise PlannerError(f"system: unknown GPU system {name!r}; known: {', '.join(known_systems())}")
    return spec


def partition(system: SystemSpec, partitions_per_gpu: int) -> SystemSpec:
    """One compute partition of ``system``: its share of compute, memory and bandwidth.

    A node then holds ``gpus_per_node * partitions_per_gpu`` engines' worth of devices, which is what
    the AMD device plugin advertises once the node is partitioned.
    """
    if partitions_per_gpu == 1:
        return system
    if system.vendor != "amd":
        raise PlannerError(
            f"partitionsPerGpu: {system.name} cannot be split into compute partitions "
            f"(got {partitions_per_gpu}; only AMD Instinct GPUs can, use 1)"
        )
    mode = PARTITION_MODES.get(partitions_per_gpu)
    if mode is None:
        raise PlannerError(
            f"partitionsPerGpu: {partitions_per_gpu} is not a compute-partition mode; use 1, "
            + ", ".join(f"{n} ({m.upper()})" for n, m in PARTITION_MODES.items())
        )
    share = 1.0 / partitions_per_gpu
    return replace(
        system,
        name=f"{system.name}-{mode}",
        memory_gib=system.memory_gib * share,
        memory_bandwidth_tbs=system.memory_bandwidth_tbs * share,
        bf16_tflops=system.bf16_tflops * share,
        fp8_tflops=system.fp8_tflops * share,
        fp4_tflops=system.fp4_tflops * share,
        interconnect_gbs=system.interconnect_gbs * share,
        gpus_per_node=system.gpus_per_node * partitions_per_gpu,
    )

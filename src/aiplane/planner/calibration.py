"""The built-in latency model's efficiencies and overheads: the only numbers it does not derive from
the model's architecture and the GPU's data sheet.

These start from public rules of thumb (docs/planner.md gives each one's provenance) and are meant to
be REPLACED by values fitted against aiconfigurator-core's measured kernel data: keep the names, the
units and the per-vendor keys, change only the values (and their comment).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiplane.planner.types import Vendor

#: Share of dense tensor peak that prefill GEMMs and attention reach (large, compute-bound matmuls).
PREFILL_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.60, "amd": 0.45}
#: Share of HBM bandwidth that a prefill's weight reads reach (matters only for very short prompts).
PREFILL_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.80, "amd": 0.70}
#: Share of HBM bandwidth that a decode step's weight and KV-cache reads reach.
DECODE_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.75, "amd": 0.60}
#: Share of dense tensor peak that decode matmuls reach when a large batch makes them compute-bound.
DECODE_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.50, "amd": 0.40}
#: Share of the aggregate link bandwidth a ring all-reduce reaches (bus bandwidth / link bandwidth).
ALLREDUCE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.40, "amd": 0.30}
#: Fixed cost of one all-reduce (launch + synchronisation), microseconds.
ALLREDUCE_LATENCY_US: Mapping[Vendor, float] = {"nvidia": 8.0, "amd": 15.0}
#: Fixed cost of one decode step outside the kernels (scheduler, sampling, launch gaps), milliseconds.
STEP_OVERHEAD_MS: Mapping[Vendor, float] = {"nvidia": 1.0, "amd": 1.5}
#: Fixed cost of one prefill (scheduling, tokenised input transfer, first sampling), milliseconds.
PREFILL_OVERHEAD_MS: Mapping[Vendor, float] = {"nvidia": 2.0, "amd": 3.0}
#: Share of HBM the engine may use (vLLM's gpu_memory_utilization, TRT-LLM's free_gpu_memory_fraction).
MEMORY_UTILIZATION = 0.9
#: Memory kept for activations, CUDA graphs and the runtime, GiB per GPU (AIC's "other" memory: 3.5 GB).
ACTIVATION_RESERVE_GIB = 3.5

"""The built-in latency model's efficiencies and overheads: the only numbers it does not derive from
the model's architecture and the GPU's data sheet.

These start from public rules of thumb (docs/planner.md gives each one's provenance) and are meant to
be REPLACED by values fitted against aiconfigurator-core's measured kernel data: keep the names, the
units and the per-vendor keys, change only the values (and their comment).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiplane.planner.types import Vendor

# fit summary: aiconfigurator-core 0.12.0, vllm tables; |ours / AIC engine - 1| with the nvidia values below over Qwen/Qwen3-8B, Qwen/Qwen3-32B, meta-llama/Llama-3.1-70B (TP 1-8, prefill ISL 512-8192, decode batch 1-128 at 1k/4k):
# fit summary:   h100_sxm: prefill median 4.1% p90 9.7%, decode median 7.9% p90 15.2% (its own fit: 3.1%/11.5%, 7.2%/13.2%)
# fit summary:   h200_sxm: prefill median 8.7% p90 12.3%, decode median 5.6% p90 13.2% (its own fit: 2.6%/8.1%, 6.2%/14.7%)
# fit summary:   b200_sxm: prefill median 9.4% p90 18.6%, decode median 8.1% p90 23.2% (its own fit: 5.3%/13.5%, 8.4%/18.5%)
# fit summary:   gb200: prefill median 18.0% p90 31.2%, decode median 8.0% p90 18.4% (its own fit: 9.9%/22.6%, 8.0%/18.3%)
# fit summary:   a100_sxm: prefill median 9.1% p90 20.3%, decode median 13.6% p90 23.3% (its own fit: 8.6%/16.7%, 6.5%/12.3%)

#: Share of dense tensor peak that prefill GEMMs and attention reach (large, compute-bound matmuls).
# fit PREFILL_COMPUTE_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_COMPUTE_EFFICIENCY:   h100_sxm: 0.677 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 22.0%)
# fit PREFILL_COMPUTE_EFFICIENCY:   h200_sxm: 0.705 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 15.8%)
# fit PREFILL_COMPUTE_EFFICIENCY:   b200_sxm: 0.626 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 16.6%)
# fit PREFILL_COMPUTE_EFFICIENCY:   gb200: 0.522 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 28.7%)
# fit PREFILL_COMPUTE_EFFICIENCY:   a100_sxm: 0.848 (gemm/vllm/0.14.0/gemm_perf.parquet, n=504, median |dev| 7.2%)
PREFILL_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.677, "amd": 0.45}
#: Share of HBM bandwidth that a prefill's weight reads reach (matters only for very short prompts).
# fit PREFILL_MEMORY_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_MEMORY_EFFICIENCY:   h100_sxm: 0.701 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 17.9%)
# fit PREFILL_MEMORY_EFFICIENCY:   h200_sxm: 0.633 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 22.7%)
# fit PREFILL_MEMORY_EFFICIENCY:   b200_sxm: 0.509 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 37.9%)
# fit PREFILL_MEMORY_EFFICIENCY:   gb200: 0.516 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 38.7%)
# fit PREFILL_MEMORY_EFFICIENCY:   a100_sxm: 0.662 (gemm/vllm/0.14.0/gemm_perf.parquet, n=840, median |dev| 8.2%)
PREFILL_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.633, "amd": 0.70}
#: Share of HBM bandwidth that a decode step's weight and KV-cache reads reach.
# fit DECODE_MEMORY_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit DECODE_MEMORY_EFFICIENCY:   h100_sxm: 0.78 (AIC engine, joint with the step overhead; kernel tables alone: 0.662 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15387, median |dev| 22.9%), n=69, median |dev| 7.2%)
# fit DECODE_MEMORY_EFFICIENCY:   h200_sxm: 0.75 (AIC engine, joint with the step overhead; kernel tables alone: 0.549 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15387, median |dev| 32.9%), n=86, median |dev| 6.2%)
# fit DECODE_MEMORY_EFFICIENCY:   b200_sxm: 0.72 (AIC engine, joint with the step overhead; kernel tables alone: 0.537 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15460, median |dev| 36.9%), n=92, median |dev| 8.4%)
# fit DECODE_MEMORY_EFFICIENCY:   gb200: 0.75 (AIC engine, joint with the step overhead; kernel tables alone: 0.54 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15318, median |dev| 39.3%), n=92, median |dev| 7.9%)
# fit DECODE_MEMORY_EFFICIENCY:   a100_sxm: 0.64 (AIC engine, joint with the step overhead; kernel tables alone: 0.638 (gemm/vllm/0.14.0/gemm_perf.parquet + attention/vllm/0.14.0/generation_attention_perf.parquet, n=2265, median |dev| 11.2%), n=69, median |dev| 6.5%)
DECODE_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.75, "amd": 0.60}
#: Share of dense tensor peak that decode matmuls reach when a large batch makes them compute-bound.
# fit DECODE_COMPUTE_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit DECODE_COMPUTE_EFFICIENCY:   h100_sxm: 0.546 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 37.2%)
# fit DECODE_COMPUTE_EFFICIENCY:   h200_sxm: 0.618 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 28.9%)
# fit DECODE_COMPUTE_EFFICIENCY:   b200_sxm: 0.429 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 38.3%)
# fit DECODE_COMPUTE_EFFICIENCY:   gb200: 0.401 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 37.7%)
# fit DECODE_COMPUTE_EFFICIENCY:   a100_sxm: 0.718 (gemm/vllm/0.14.0/gemm_perf.parquet, n=840, median |dev| 14.9%)
DECODE_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.546, "amd": 0.40}
#: Share of the aggregate link bandwidth a ring all-reduce reaches (bus bandwidth / link bandwidth).
# fit ALLREDUCE_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit ALLREDUCE_EFFICIENCY:   h100_sxm: 0.359 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.4%)
# fit ALLREDUCE_EFFICIENCY:   h200_sxm: 0.371 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 8.9%)
# fit ALLREDUCE_EFFICIENCY:   b200_sxm: 0.296 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.6%)
# fit ALLREDUCE_EFFICIENCY:   gb200: 0.216 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=46, median |dev| 12.4%)
# fit ALLREDUCE_EFFICIENCY:   a100_sxm: 0.305 (comm/vllm/0.14.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.9%)
ALLREDUCE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.305, "amd": 0.30}
#: Fixed cost of one all-reduce (launch + synchronisation), microseconds.
# fit ALLREDUCE_LATENCY_US: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit ALLREDUCE_LATENCY_US:   h100_sxm: 4.8 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.4%)
# fit ALLREDUCE_LATENCY_US:   h200_sxm: 4.9 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 8.9%)
# fit ALLREDUCE_LATENCY_US:   b200_sxm: 7.7 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.6%)
# fit ALLREDUCE_LATENCY_US:   gb200: 5.5 (comm/vllm/0.24.0/custom_allreduce_perf.parquet, n=46, median |dev| 12.4%)
# fit ALLREDUCE_LATENCY_US:   a100_sxm: 5.6 (comm/vllm/0.14.0/custom_allreduce_perf.parquet, n=69, median |dev| 10.9%)
ALLREDUCE_LATENCY_US: Mapping[Vendor, float] = {"nvidia": 5.5, "amd": 15.0}
#: Fixed cost of one decode step outside the kernels (scheduler, sampling, launch gaps), milliseconds.
# fit STEP_OVERHEAD_MS: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit STEP_OVERHEAD_MS:   h100_sxm: 1.32 (AIC engine vs our roofline, joint, n=69, median |dev| 7.2%)
# fit STEP_OVERHEAD_MS:   h200_sxm: 1.44 (AIC engine vs our roofline, joint, n=86, median |dev| 6.2%)
# fit STEP_OVERHEAD_MS:   b200_sxm: 1.41 (AIC engine vs our roofline, joint, n=92, median |dev| 8.4%)
# fit STEP_OVERHEAD_MS:   gb200: 1.38 (AIC engine vs our roofline, joint, n=92, median |dev| 7.9%)
# fit STEP_OVERHEAD_MS:   a100_sxm: 1.63 (AIC engine vs our roofline, joint, n=69, median |dev| 6.5%)
STEP_OVERHEAD_MS: Mapping[Vendor, float] = {"nvidia": 1.41, "amd": 1.5}
#: Fixed cost of one prefill (scheduling, tokenised input transfer, first sampling), milliseconds.
# fit PREFILL_OVERHEAD_MS: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_OVERHEAD_MS:   h100_sxm: 3.32 (AIC engine vs our roofline, n=45, median |dev| 3.1%)
# fit PREFILL_OVERHEAD_MS:   h200_sxm: 3.05 (AIC engine vs our roofline, n=55, median |dev| 2.6%)
# fit PREFILL_OVERHEAD_MS:   b200_sxm: 4.03 (AIC engine vs our roofline, n=60, median |dev| 5.3%)
# fit PREFILL_OVERHEAD_MS:   gb200: 3.1 (AIC engine vs our roofline, n=60, median |dev| 9.9%)
# fit PREFILL_OVERHEAD_MS:   a100_sxm: 7.94 (AIC engine vs our roofline, n=45, median |dev| 8.6%)
PREFILL_OVERHEAD_MS: Mapping[Vendor, float] = {"nvidia": 3.32, "amd": 3.0}
#: Extra time of one block-scaled FP8 GEMM (ModelSpec.fp8_block_scaled) per forward pass, microseconds.
# fit FP8_BLOCK_GEMM_US: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit FP8_BLOCK_GEMM_US:   h100_sxm: 54.2 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, n=50, median |dev| 14.6%)
# fit FP8_BLOCK_GEMM_US:   h200_sxm: 58.3 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, n=51, median |dev| 11.3%)
# fit FP8_BLOCK_GEMM_US:   b200_sxm: 187.8 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, n=51, median |dev| 6.9%)
# fit FP8_BLOCK_GEMM_US:   gb200: 331.6 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, n=52, median |dev| 6.9%)
FP8_BLOCK_GEMM_US: Mapping[Vendor, float] = {"nvidia": 123.1, "amd": 0.0}
#: The same per system where fitted: it splits by GPU generation (Hopper ~55 us, Blackwell 190-330 us),
#: which one vendor value cannot hold; the vendor value is for systems without a fit.
FP8_BLOCK_GEMM_US_BY_SYSTEM: Mapping[str, float] = {
    "h100_sxm": 54.2,
    "h200_sxm": 58.3,
    "b200_sxm": 187.8,
    "gb200": 331.6,
}
#: Share of HBM the engine may use (vLLM's gpu_memory_utilization, TRT-LLM's free_gpu_memory_fraction).
MEMORY_UTILIZATION = 0.9
#: Memory kept for activations, CUDA graphs and the runtime, GiB per GPU (AIC's "other" memory: 3.5 GB).
ACTIVATION_RESERVE_GIB = 3.5

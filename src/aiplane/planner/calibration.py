"""The built-in latency model's efficiencies and overheads: the only numbers it does not derive from
the model's architecture and the GPU's data sheet.

These start from public rules of thumb (docs/planner.md gives each one's provenance) and are meant to
be REPLACED by values fitted against aiconfigurator-core's measured kernel data: keep the names, the
units and the per-vendor keys, change only the values (and their comment).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiplane.planner.types import SystemSpec, Vendor

# fit summary: aiconfigurator-core 0.12.0, vllm tables; |ours / AIC engine - 1| with the vendor fallback values below over Qwen/Qwen3-8B, Qwen/Qwen3-32B, meta-llama/Llama-3.1-70B (TP 1-8, prefill ISL 512-8192, decode batch 1-128 at 1k/4k):
# fit summary:   h100_sxm: prefill median 3.1% p90 9.4%, decode median 5.3% p90 10.1% (its own values, which the model uses: 3.1%/8.6%, 3.8%/7.6%)
# fit summary:   h200_sxm: prefill median 6.2% p90 12.4%, decode median 3.1% p90 6.6% (its own values, which the model uses: 3.0%/8.0%, 3.1%/7.3%)
# fit summary:   b200_sxm: prefill median 10.6% p90 18.5%, decode median 3.4% p90 13.6% (its own values, which the model uses: 4.8%/12.0%, 4.6%/11.5%)
# fit summary:   gb200: prefill median 19.8% p90 31.6%, decode median 4.5% p90 8.2% (its own values, which the model uses: 9.5%/18.7%, 2.5%/6.9%)
# fit summary:   a100_sxm: prefill median 7.3% p90 15.4%, decode median 15.9% p90 25.4% (its own values, which the model uses: 6.7%/12.3%, 4.9%/10.9%)

#: Share of dense tensor peak that prefill GEMMs and attention reach (large, compute-bound matmuls).
# fit PREFILL_COMPUTE_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_COMPUTE_EFFICIENCY:   h100_sxm: 0.71 (AIC engine, joint with the prefill overhead; GEMM tables alone: 0.677 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 22.0%), n=45, median |dev| 3.1%)
# fit PREFILL_COMPUTE_EFFICIENCY:   h200_sxm: 0.73 (AIC engine, joint with the prefill overhead; GEMM tables alone: 0.705 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 15.8%), n=55, median |dev| 3.0%)
# fit PREFILL_COMPUTE_EFFICIENCY:   b200_sxm: 0.64 (AIC engine, joint with the prefill overhead; GEMM tables alone: 0.626 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 16.6%), n=60, median |dev| 4.8%)
# fit PREFILL_COMPUTE_EFFICIENCY:   gb200: 0.57 (AIC engine, joint with the prefill overhead; GEMM tables alone: 0.522 (gemm/vllm/0.24.0/gemm_perf.parquet, n=8970, median |dev| 28.7%), n=60, median |dev| 9.5%)
# fit PREFILL_COMPUTE_EFFICIENCY:   a100_sxm: 0.77 (AIC engine, joint with the prefill overhead; GEMM tables alone: 0.848 (gemm/vllm/0.14.0/gemm_perf.parquet, n=504, median |dev| 7.2%), n=45, median |dev| 6.7%)
PREFILL_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.71, "amd": 0.45}
#: Share of HBM bandwidth that a prefill's weight reads reach (matters only for very short prompts).
# fit PREFILL_MEMORY_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_MEMORY_EFFICIENCY:   h100_sxm: 0.701 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 17.9%)
# fit PREFILL_MEMORY_EFFICIENCY:   h200_sxm: 0.633 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 22.7%)
# fit PREFILL_MEMORY_EFFICIENCY:   b200_sxm: 0.509 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 37.9%)
# fit PREFILL_MEMORY_EFFICIENCY:   gb200: 0.516 (gemm/vllm/0.24.0/gemm_perf.parquet, n=6240, median |dev| 38.7%)
# fit PREFILL_MEMORY_EFFICIENCY:   a100_sxm: 0.662 (gemm/vllm/0.14.0/gemm_perf.parquet, n=840, median |dev| 8.2%)
PREFILL_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.633, "amd": 0.70}
#: Share of HBM bandwidth that a decode step's weight and KV-cache reads reach.
# amd DECODE_MEMORY_EFFICIENCY: fitted to public measurements (no AIC data for AMD): Oracle Cloud Infrastructure blog "Serving Llama 3.1 405B model with AMD MI300X GPUs" (blogs.oracle.com/cloud-infrastructure), vLLM benchmark_latency, 128/128 tokens, TP8, batch 1-256 (benchmarks/planner_amd_public.py)
# fit DECODE_MEMORY_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: fitted to OCI's public MI300X latency table (benchmarks/planner_amd_public.py)
# fit DECODE_MEMORY_EFFICIENCY:   h100_sxm: 0.87 (AIC engine, joint with the step overhead; kernel tables alone: 0.662 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15387, median |dev| 22.9%), n=69, median |dev| 3.8%)
# fit DECODE_MEMORY_EFFICIENCY:   h200_sxm: 0.83 (AIC engine, joint with the step overhead; kernel tables alone: 0.549 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15387, median |dev| 32.9%), n=86, median |dev| 3.1%)
# fit DECODE_MEMORY_EFFICIENCY:   b200_sxm: 0.82 (AIC engine, joint with the step overhead; kernel tables alone: 0.537 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15460, median |dev| 36.9%), n=92, median |dev| 4.6%)
# fit DECODE_MEMORY_EFFICIENCY:   gb200: 0.85 (AIC engine, joint with the step overhead; kernel tables alone: 0.54 (gemm/vllm/0.24.0/gemm_perf.parquet + attention/vllm/0.24.0/generation_attention_perf.parquet, n=15318, median |dev| 39.3%), n=92, median |dev| 2.5%)
# fit DECODE_MEMORY_EFFICIENCY:   a100_sxm: 0.69 (AIC engine, joint with the step overhead; kernel tables alone: 0.638 (gemm/vllm/0.14.0/gemm_perf.parquet + attention/vllm/0.14.0/generation_attention_perf.parquet, n=2265, median |dev| 11.2%), n=69, median |dev| 4.9%)
DECODE_MEMORY_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.83, "amd": 0.5}
#: Share of dense tensor peak that decode matmuls reach when a large batch makes them compute-bound.
# amd DECODE_COMPUTE_EFFICIENCY: fitted to public measurements (no AIC data for AMD): Oracle Cloud Infrastructure blog "Serving Llama 3.1 405B model with AMD MI300X GPUs" (blogs.oracle.com/cloud-infrastructure), vLLM benchmark_latency, 128/128 tokens, TP8, batch 1-256 (benchmarks/planner_amd_public.py)
# fit DECODE_COMPUTE_EFFICIENCY: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: fitted to OCI's public MI300X latency table (benchmarks/planner_amd_public.py)
# fit DECODE_COMPUTE_EFFICIENCY:   h100_sxm: 0.546 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 37.2%)
# fit DECODE_COMPUTE_EFFICIENCY:   h200_sxm: 0.618 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 28.9%)
# fit DECODE_COMPUTE_EFFICIENCY:   b200_sxm: 0.429 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 38.3%)
# fit DECODE_COMPUTE_EFFICIENCY:   gb200: 0.401 (gemm/vllm/0.24.0/gemm_perf.parquet, n=2730, median |dev| 37.7%)
# fit DECODE_COMPUTE_EFFICIENCY:   a100_sxm: 0.718 (gemm/vllm/0.14.0/gemm_perf.parquet, n=840, median |dev| 14.9%)
DECODE_COMPUTE_EFFICIENCY: Mapping[Vendor, float] = {"nvidia": 0.546, "amd": 0.1}
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
#: Fixed cost per transformer layer of one decode step outside the roofline's kernels (norms, RoPE,
#: residual adds, small-kernel launch floors), microseconds. Per layer, not per step: fitted one model
#: at a time, what AIC's engine adds is the same per layer whatever the depth (B200, vLLM: 34 us a
#: layer on Qwen3-8B's 36 layers, 32 on Qwen3-32B's 64, 31 on Llama-3.1-70B's 80), so one fixed step
#: cost over-charged shallow models and under-charged deep ones; per layer, the joint fit's decode
#: error fell from 6-8 % to 3-5 % (median) and from 12-18 % to 7-12 % (p90) on every system.
# amd DECODE_LAYER_US: the 6.0 ms step fitted to public measurements over Llama 3.1 405B's 126 layers (no AIC data for AMD): Oracle Cloud Infrastructure blog "Serving Llama 3.1 405B model with AMD MI300X GPUs" (blogs.oracle.com/cloud-infrastructure), vLLM benchmark_latency, 128/128 tokens, TP8, batch 1-256 (benchmarks/planner_amd_public.py)
# fit DECODE_LAYER_US: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: fitted to OCI's public MI300X latency table (benchmarks/planner_amd_public.py)
# fit DECODE_LAYER_US:   h100_sxm: 39.4 (AIC engine vs our roofline, joint, n=69, median |dev| 3.8%)
# fit DECODE_LAYER_US:   h200_sxm: 40.0 (AIC engine vs our roofline, joint, n=86, median |dev| 3.1%)
# fit DECODE_LAYER_US:   b200_sxm: 38.7 (AIC engine vs our roofline, joint, n=92, median |dev| 4.6%)
# fit DECODE_LAYER_US:   gb200: 37.3 (AIC engine vs our roofline, joint, n=92, median |dev| 2.5%)
# fit DECODE_LAYER_US:   a100_sxm: 49.1 (AIC engine vs our roofline, joint, n=69, median |dev| 4.9%)
DECODE_LAYER_US: Mapping[Vendor, float] = {"nvidia": 39.4, "amd": 47.6}
#: Fixed cost of one prefill (scheduling, tokenised input transfer, first sampling), milliseconds.
# fit PREFILL_OVERHEAD_MS: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit PREFILL_OVERHEAD_MS:   h100_sxm: 3.7 (AIC engine vs our roofline, joint, n=45, median |dev| 3.1%)
# fit PREFILL_OVERHEAD_MS:   h200_sxm: 3.34 (AIC engine vs our roofline, joint, n=55, median |dev| 3.0%)
# fit PREFILL_OVERHEAD_MS:   b200_sxm: 4.15 (AIC engine vs our roofline, joint, n=60, median |dev| 4.8%)
# fit PREFILL_OVERHEAD_MS:   gb200: 3.63 (AIC engine vs our roofline, joint, n=60, median |dev| 9.5%)
# fit PREFILL_OVERHEAD_MS:   a100_sxm: 6.33 (AIC engine vs our roofline, joint, n=45, median |dev| 6.7%)
PREFILL_OVERHEAD_MS: Mapping[Vendor, float] = {"nvidia": 3.7, "amd": 3.0}
#: Extra time of one block-scaled FP8 GEMM (ModelSpec.fp8_block_scaled) per forward pass, microseconds.
# fit FP8_BLOCK_GEMM_US: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit FP8_BLOCK_GEMM_US:   h100_sxm: 75.0 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of >= 32 rows, n=48, median |dev| 5.9%)
# fit FP8_BLOCK_GEMM_US:   h200_sxm: 74.2 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of >= 32 rows, n=51, median |dev| 5.5%)
# fit FP8_BLOCK_GEMM_US:   b200_sxm: 176.3 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of >= 32 rows, n=51, median |dev| 3.6%)
# fit FP8_BLOCK_GEMM_US:   gb200: 303.9 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of >= 32 rows, n=52, median |dev| 4.9%)
FP8_BLOCK_GEMM_US: Mapping[Vendor, float] = {"nvidia": 125.7, "amd": 0.0}
#: The same for a GEMM of fewer than 16 rows (a decode batch < 16): vLLM's block-FP8 kernels step up
#: between 16 and 32 rows (latency._fp8_block_ms).
# fit FP8_BLOCK_SMALL_M_US: nvidia = median over systems of aiconfigurator-core 0.12.0 (vllm tables, benchmarks/planner_calibrate.py); AMD: public-spec value, AIC has no AMD data
# fit FP8_BLOCK_SMALL_M_US:   h100_sxm: 43.6 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of < 16 rows, n=40, median |dev| 7.1%)
# fit FP8_BLOCK_SMALL_M_US:   h200_sxm: 46.4 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of < 16 rows, n=40, median |dev| 4.5%)
# fit FP8_BLOCK_SMALL_M_US:   b200_sxm: 190.7 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of < 16 rows, n=40, median |dev| 13.1%)
# fit FP8_BLOCK_SMALL_M_US:   gb200: 355.9 (AIC engine on Qwen/Qwen3-32B-FP8 vs our roofline, GEMMs of < 16 rows, n=40, median |dev| 17.2%)
FP8_BLOCK_SMALL_M_US: Mapping[Vendor, float] = {"nvidia": 118.5, "amd": 0.0}
#: Share of the dense compute efficiency that routed experts reach, prefill and decode (grouped GEMMs
#: over many small experts run below one large GEMM's rate), and a fixed cost per MoE layer and pass
#: (routing, token permutation, the grouped GEMMs' launches), microseconds.
# fit MOE_*, W4A16_READ_FACTOR, MOE_BACKEND_SHARE: fitted on the CALIBRATION cases' MoE models only
# fit MOE_*: (Qwen3-30B-A3B, Qwen3-235B-A22B-FP8, gpt-oss-120b, DeepSeek-V3/R1; H100/H200/B200; vLLM,
# fit MOE_*: SGLang, TRT-LLM) against aiconfigurator-core 0.12.0's engine per layout: 1,509 prefill
# fit MOE_*: (batch 1) and decode (batch 1-512) points, a grid scored by median + p90/2 of |ours/AIC - 1|
# fit MOE_*: (benchmarks/planner_builtin_validate.py --fit-moe; the held-out cases never scored);
# fit MOE_*: MOE_LAYER_US kept at the previous round's grid optimum. AMD: the NVIDIA values (no AMD data).
MOE_PREFILL_COMPUTE_SHARE: Mapping[Vendor, float] = {"nvidia": 0.3, "amd": 0.3}
MOE_DECODE_COMPUTE_SHARE: Mapping[Vendor, float] = {"nvidia": 0.15, "amd": 0.15}
MOE_LAYER_US: Mapping[Vendor, float] = {"nvidia": 45.0, "amd": 45.0}
#: Fixed cost per MLA layer and pass (DeepSeek's attention: latency._layer_fixed_ms), microseconds.
#: Fitted on the CALIBRATION cases' MLA models only (DeepSeek-V3 on H200 with SGLang and TRT-LLM,
#: DeepSeek-R1 on B200 with TRT-LLM: 248 per-layout points of AIC's engine, prefill at batch 1 and
#: decode at 1-512, the --fit-moe score; benchmarks/planner_builtin_validate.py --fit-mla, grid
#: 0-120: 70 best, score 0.881 against 0.889 at 60, after the per-layer decode cost).
#: Cross-check, AIC's B200 SGLang 0.5.14 kernel tables at one token: generation MLA 10.5 us, the
#: two absorbed BMMs ~6.7 us each (mla_bmm_perf.parquet), four small projections at a GEMM's launch
#: floor: ~55 us a layer that a byte-count roofline sees as ~1 us. AMD: the NVIDIA value.
MLA_LAYER_US: Mapping[Vendor, float] = {"nvidia": 70.0, "amd": 70.0}
#: How much more routed work the busiest expert-parallel rank gets than the mean, as ep ** this
#: (latency._ep_imbalance; 0: balanced routing). Same grid fit. Source of the mechanism: AIC's MoE
#: tables are measured with power-law token distributions (``distribution`` power_law_1.01 / 1.2 in
#: systems/data/*/moe/*/moe_perf.parquet), and its EP layouts time slower than MoE-TP ones of the
#: same GPUs (gpt-oss-120b, H200, SGLang, DP8 prefill: EP8 242 ms, EP1 x MoE TP8 83 ms).
MOE_EP_IMBALANCE_EXP: Mapping[Vendor, float] = {"nvidia": 0.25, "amd": 0.25}
#: Weight-only 4-bit (MXFP4) experts' reads cost as many times their bytes (latency._routed_wb).
#: Same grid fit when first fitted (only gpt-oss-120b's points moved it: 2.0 of 1-4); every MXFP4
#: calibration point now has its own per-backend factor below, so it no longer moves the score and
#: applies only to systems without one (AMD, A100). Cross-check: AIC's H200 vLLM
#: w4a16_mxfp4 MoE table streams a touched gpt-oss expert (13.2 MB) in 4.6-5.5 us at 16-256 tokens,
#: ~2x the 2.75 us of a plain read at 4.8 TB/s.
W4A16_READ_FACTOR: Mapping[Vendor, float] = {"nvidia": 2.0, "amd": 2.0}
#: The same per system and backend where AIC measured the backend's MXFP4 MoE kernel: the kernel, not
#: the GPU, sets it (TensorRT-LLM's B200 w4a16 path streams experts no faster than its H200 one; SGLang's
#: Hopper Triton kernel at about half vLLM's rate). A kernel-level fit, no case scored:
#: aiconfigurator-core 0.12.0's moe_perf.parquet (AIC's default version per backend: trtllm 1.3.0rc20,
#: vllm 0.24.0, sglang 0.5.14), w4a16_mxfp4 rows of gpt-oss's shapes at 16-256 tokens, no EP, median of measured latency
#: less MOE_LAYER_US over our read time of the touched experts (benchmarks/planner_w4a16_fit.py, n=5-10
#: each; the fit's variant chosen on the calibration cases' score).
#: A (system, backend) not listed takes W4A16_READ_FACTOR.
W4A16_READ_FACTOR_BY_BACKEND: Mapping[str, Mapping[str, float]] = {
    "h100_sxm": {"trtllm": 1.14, "vllm": 0.95, "sglang": 3.28},
    "h200_sxm": {"trtllm": 1.26, "vllm": 1.24, "sglang": 3.1},
    "b200_sxm": {"trtllm": 3.92, "vllm": 1.05, "sglang": 1.1},
    "gb200": {"trtllm": 3.93, "vllm": 1.03, "sglang": 1.04},
}
#: The backend's MoE kernels against vLLM's: a factor on both MoE compute shares above (SGLang's
#: Triton fused MoE runs the same expert GEMMs slower). Same grid fit (TensorRT-LLM: 1.0 of 1-1.5,
#: from its BF16 and FP8 experts, Qwen3-30B-A3B and DeepSeek; the calibration set has no MXFP4
#: expert on TensorRT-LLM). Refitted after the per-layer decode cost, the per-layout optimum (SGLang
#: 1.0, TensorRT-LLM 1.25) made the calibration cases worse (disaggregated worst 32.6 % -> 50.4 %):
#: these values were kept, chosen on the calibration cases.
MOE_BACKEND_SHARE: Mapping[str, float] = {"vllm": 1.0, "sglang": 0.8, "trtllm": 1.0}


def w4a16_read_factor(system: SystemSpec, backend: str) -> float:
    """W4A16_READ_FACTOR of ``backend``'s MXFP4 MoE kernel on ``system`` (else the vendor's value)."""
    own = W4A16_READ_FACTOR_BY_BACKEND.get(system.name, {}).get(backend)
    return own if own is not None else value("W4A16_READ_FACTOR", system)


#: Weight-only 4-bit experts' FLOPs take this many times what the MoE compute shares give, per
#: system and backend (latency._routed_compute_factor): their kernels dequantise in the main loop,
#: at a rate set by the backend's kernel on that GPU (TensorRT-LLM's B200 w4a16 MoE computes no
#: faster than its H200 one). A kernel-level fit relative to the calibration cases' kernels:
#: aiconfigurator-core 0.12.0's moe_perf.parquet (versions as above), w4a16_mxfp4 rows of gpt-oss's
#: shapes at 2048-8192 tokens, median of measured latency less MOE_LAYER_US over our routed compute
#: time, divided by that ratio's geometric mean over H200 vLLM and H200 SGLang (the calibration cases'
#: MXFP4 pairs, on which the compute shares were fitted); benchmarks/planner_w4a16_fit.py. Chosen over
#: the undivided ratios on the calibration cases (case medians 4.6 %/11.8 % against 5.2 %/11.3 %, and a
#: lower per-layout score), and kept over none (5.2 %/15.1 %) though its per-layout score on the
#: calibration gpt-oss points is higher (0.634 against 0.586). A system or backend not listed: 1.
W4A16_COMPUTE_FACTOR: Mapping[str, Mapping[str, float]] = {
    "h100_sxm": {"trtllm": 1.02, "vllm": 0.82, "sglang": 1.39},
    "h200_sxm": {"trtllm": 1.22, "vllm": 0.83, "sglang": 1.20},
    "b200_sxm": {"trtllm": 2.60, "vllm": 1.36, "sglang": 1.09},
    "gb200": {"trtllm": 2.35, "vllm": 1.24, "sglang": 1.00},
}


def w4a16_compute_factor(system: SystemSpec, backend: str) -> float:
    """W4A16_COMPUTE_FACTOR of ``backend``'s MXFP4 MoE kernel on ``system`` (1 where not measured)."""
    return W4A16_COMPUTE_FACTOR.get(system.name, {}).get(backend, 1.0)


def moe_backend_share(backend: str) -> float:
    """MOE_BACKEND_SHARE of ``backend`` (1 for one not listed)."""
    return MOE_BACKEND_SHARE.get(backend, 1.0)


#: Each constant per system where fitted (the provenance lines above give each value): the systems
#: differ more than one vendor value can hold (A100's prefill overhead is 2.4x H100's, Blackwell's
#: block-FP8 GEMMs 3-6x Hopper's). A system not listed (AMD, a partition) takes its vendor's value.
BY_SYSTEM: Mapping[str, Mapping[str, float]] = {
    "h100_sxm": {
        "PREFILL_COMPUTE_EFFICIENCY": 0.71,
        "PREFILL_MEMORY_EFFICIENCY": 0.701,
        "DECODE_MEMORY_EFFICIENCY": 0.87,
        "DECODE_COMPUTE_EFFICIENCY": 0.546,
        "ALLREDUCE_EFFICIENCY": 0.359,
        "ALLREDUCE_LATENCY_US": 4.8,
        "DECODE_LAYER_US": 39.4,
        "PREFILL_OVERHEAD_MS": 3.7,
        "FP8_BLOCK_GEMM_US": 75.0,
        "FP8_BLOCK_SMALL_M_US": 43.6,
    },
    "h200_sxm": {
        "PREFILL_COMPUTE_EFFICIENCY": 0.73,
        "PREFILL_MEMORY_EFFICIENCY": 0.633,
        "DECODE_MEMORY_EFFICIENCY": 0.83,
        "DECODE_COMPUTE_EFFICIENCY": 0.618,
        "ALLREDUCE_EFFICIENCY": 0.371,
        "ALLREDUCE_LATENCY_US": 4.9,
        "DECODE_LAYER_US": 40.0,
        "PREFILL_OVERHEAD_MS": 3.34,
        "FP8_BLOCK_GEMM_US": 74.2,
        "FP8_BLOCK_SMALL_M_US": 46.4,
    },
    "b200_sxm": {
        "PREFILL_COMPUTE_EFFICIENCY": 0.64,
        "PREFILL_MEMORY_EFFICIENCY": 0.509,
        "DECODE_MEMORY_EFFICIENCY": 0.82,
        "DECODE_COMPUTE_EFFICIENCY": 0.429,
        "ALLREDUCE_EFFICIENCY": 0.296,
        "ALLREDUCE_LATENCY_US": 7.7,
        "DECODE_LAYER_US": 38.7,
        "PREFILL_OVERHEAD_MS": 4.15,
        "FP8_BLOCK_GEMM_US": 176.3,
        "FP8_BLOCK_SMALL_M_US": 190.7,
    },
    "gb200": {
        "PREFILL_COMPUTE_EFFICIENCY": 0.57,
        "PREFILL_MEMORY_EFFICIENCY": 0.516,
        "DECODE_MEMORY_EFFICIENCY": 0.85,
        "DECODE_COMPUTE_EFFICIENCY": 0.401,
        "ALLREDUCE_EFFICIENCY": 0.216,
        "ALLREDUCE_LATENCY_US": 5.5,
        "DECODE_LAYER_US": 37.3,
        "PREFILL_OVERHEAD_MS": 3.63,
        "FP8_BLOCK_GEMM_US": 303.9,
        "FP8_BLOCK_SMALL_M_US": 355.9,
    },
    "a100_sxm": {
        "PREFILL_COMPUTE_EFFICIENCY": 0.77,
        "PREFILL_MEMORY_EFFICIENCY": 0.662,
        "DECODE_MEMORY_EFFICIENCY": 0.69,
        "DECODE_COMPUTE_EFFICIENCY": 0.718,
        "ALLREDUCE_EFFICIENCY": 0.305,
        "ALLREDUCE_LATENCY_US": 5.6,
        "DECODE_LAYER_US": 49.1,
        "PREFILL_OVERHEAD_MS": 6.33,
    },
}
#: Share of HBM the engine may use (vLLM's gpu_memory_utilization, TRT-LLM's free_gpu_memory_fraction).
MEMORY_UTILIZATION = 0.9
#: Memory kept for activations, CUDA graphs and the runtime, GiB per GPU (AIC's "other" memory: 3.5 GB).
ACTIVATION_RESERVE_GIB = 3.5


def value(name: str, system: SystemSpec) -> float:
    """Constant ``name`` for ``system``: its own fitted value, else its vendor's (the mapping ``name``)."""
    own = BY_SYSTEM.get(system.name, {}).get(name)
    if own is not None:
        return own
    vendor: Mapping[Vendor, float] = globals()[name]
    return vendor[system.vendor]

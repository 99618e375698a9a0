"""The built-in latency model on MI300X, MI325X and MI355X against MLPerf Inference (held out).

Source: MLPerf Inference v5.1, datacenter, closed division, AMD's own single-node submissions
(github.com/mlcommons/inference_results_v5.1: ``summary_results.json``, and AMD's harness settings in
``closed/AMD/code/llama2-70b-99.9/harness_llm/models/llama2-70b/offline_<gpu>.yaml``), benchmark
``llama2-70b-99``, scenario Offline, 8 GPUs, vLLM on ROCm. The metric is generated tokens per
second (loadgen's ``result_tokens_per_second``: samples/s x output tokens per sample). Nothing was
fitted on these figures: the AMD constants come from OCI's 2024 MI300X table
(``benchmarks/planner_amd_public.py``).

How AMD ran it, and how it is modelled here:

- eight independent TP1 engines, one per GPU, each given an eighth of the 24,576 prompts;
- MI300X and MI325X: FP8 weights; MI355X: MXFP4 weights and activations (AMD's ``quark``
  checkpoint; FP4 GEMMs at the MXFP4 rate); KV cache FP8 on all three;
- the harness's scheduler holds the decode batch at a target (``VLLM_LLAMA2_MLPERF_*_DECODE_BATCH``:
  1,536, 2,048 and 3,072), modelled as waves of that many sequences (fewer if the KV cache holds
  fewer), each a prefill and its decode steps;
- every request generates the log's mean output length (~300 tokens: 34,520.4 tokens/s over 114.7
  samples/s on MI325X). The mean prompt length is not in the results, so the error is given at
  prompts of 150, 300 and 600 tokens.

What differs from a user's deployment: AMD's harness is tuned for the benchmark (its own batch
scheduler, swizzled FP8 GEMMs, eager mode off on MI355X), beyond the public vLLM container the AMD
constants describe.

    python -m benchmarks.planner_amd_mlperf [--amd-decode-compute-efficiency X]

With ``--amd-decode-compute-efficiency`` the AMD ``DECODE_COMPUTE_EFFICIENCY`` is replaced for the
run, and AMD's 2025 MI300X table (``benchmarks/planner_amd_public.py``) is scored too: what a value
that fits MLPerf would do to the figures of AMD's public container.
"""

from __future__ import annotations

import argparse

from aiplane.planner import calibration, latency
from aiplane.planner.latency import BuiltinLatency, max_batch
from aiplane.planner.systems import resolve_system
from aiplane.planner.types import ModelSpec
from benchmarks import planner_amd_public as public

#: (system, weight dtype, the harness's decode batch target, result tokens/s on 8 GPUs)
MLPERF_V51_OFFLINE: tuple[tuple[str, str, int, float], ...] = (
    ("mi300x", "fp8", 1536, 27803.9),
    ("mi325x", "fp8", 2048, 34520.4),
    ("mi355x", "fp4", 3072, 93045.8),
)
SAMPLES = 24576
GPUS = 8
OUTPUT_TOKENS = 301
PROMPT_TOKENS = (150, 300, 600)


def llama2_70b(weight_dtype: str) -> ModelSpec:
    """meta-llama/Llama-2-70b-chat-hf's config.json (GQA, 8 KV heads, a 32,000-token vocabulary)."""
    return ModelSpec(
        "meta-llama/Llama-2-70b-chat-hf",
        80,
        8192,
        64,
        8,
        128,
        28672,
        32000,
        weight_dtype=weight_dtype,
        kv_dtype="fp8",
    )


def offline_tokens_per_s(model: BuiltinLatency, system: str, weights: str, target: int, isl: int) -> float:
    """Output tokens/s of eight TP1 engines, each serving its eighth of the prompts in waves."""
    llama, spec = llama2_70b(weights), resolve_system(system)
    prompts = SAMPLES // GPUS
    wave = min(target, max_batch(llama, spec, 1, isl + OUTPUT_TOKENS))
    seconds = public.wave_seconds(model, llama, spec, 1, prompts, wave, isl, OUTPUT_TOKENS)
    return GPUS * prompts * OUTPUT_TOKENS / seconds


def _amd_2025_table(model: BuiltinLatency) -> None:
    """AMD's 2025 MI300X vLLM table, read as output tokens/s (planner_amd_public's reading)."""
    found = []
    for name, rows in public.AMD_MI300X_VLLM.items():
        for isl, osl, prompts, measured in rows:
            found.append(public._offline(model, name, isl, osl, prompts)[1] / measured - 1)
    print(f"AMD's 2025 MI300X table: {public.summary(found)} ({', '.join(f'{e:+.0%}' for e in found)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--amd-decode-compute-efficiency", type=float, help="replace the AMD constant")
    args = parser.parse_args(argv)
    if args.amd_decode_compute_efficiency is not None:
        calibration.DECODE_COMPUTE_EFFICIENCY = {
            **calibration.DECODE_COMPUTE_EFFICIENCY,
            "amd": args.amd_decode_compute_efficiency,
        }
        latency._decode_envelope.cache_clear()
    model = BuiltinLatency("vllm")
    print(
        "MLPerf Inference v5.1 Offline, llama2-70b-99, 8 GPUs (AMD): measured tok/s; built-in tok/s (error)"
    )
    print(f"{'system':8} {'measured':>9}  " + "  ".join(f"prompt {isl:>3}" for isl in PROMPT_TOKENS))
    errors: dict[int, list[float]] = {isl: [] for isl in PROMPT_TOKENS}
    for system, weights, target, measured in MLPERF_V51_OFFLINE:
        cells = []
        for isl in PROMPT_TOKENS:
            predicted = offline_tokens_per_s(model, system, weights, target, isl)
            errors[isl].append(predicted / measured - 1)
            cells.append(f"{predicted:7.0f} ({errors[isl][-1]:+.1%})")
        print(f"{system:8} {measured:9.1f}  " + "  ".join(cells))
    for isl, found in errors.items():
        print(f"prompt {isl}: {public.summary(found)}")
    if args.amd_decode_compute_efficiency is not None:
        _amd_2025_table(model)


if __name__ == "__main__":
    main()

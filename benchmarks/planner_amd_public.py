"""The built-in latency model on AMD against public measured figures (AIC has no AMD data).

Source: Oracle Cloud Infrastructure blog "Serving Llama 3.1 405B model with AMD MI300X GPUs"
(blogs.oracle.com/cloud-infrastructure, October 2024), BM.GPU.MI300X.8, Llama 3.1 405B FP8, vLLM,
tensor parallelism 8.

- Calibration: its latency table (``benchmarks/benchmark_latency.py``, 128 input and 128 output
  tokens, the average latency of one batch per batch size). The AMD values of
  ``DECODE_MEMORY_EFFICIENCY``, ``DECODE_COMPUTE_EFFICIENCY`` and ``STEP_OVERHEAD_MS`` were fitted to
  it (a grid, least median plus worst |error|). Our prediction of a run is one prefill of the batch
  plus OSL - 1 decode steps at the growing context (the first output token comes from the prefill).
- Held out: its throughput table (``benchmark_throughput.py``, offline: vLLM's default of at most 256
  sequences at once), modelled as batches of 256: output tokens / (prefill + decode steps).

A second source, held out too (nothing was fitted on it): AMD's own vLLM throughput table for
MI300X (amd.com, ROCm hub "Performance results", vLLM inference, container
rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006: Llama 3.1 70B and 405B, AMD's "-FP8-KV" checkpoints (FP8
weights and KV cache), TP8, every prompt submitted at once, ``max_num_seqs`` = the prompts). It is a
year newer than the OCI figures the AMD constants were fitted to. Modelled as waves of as many
sequences as the KV cache holds (vLLM preempts beyond that), each wave a prefill and its decode
steps. The table's column is "Throughput (tokens/s)"; whether vLLM's total or output tokens/s is not
stated, so the error is given against both (its 2048/2048 rows, where the two differ twofold, sit
near our output figure).

    python -m benchmarks.planner_amd_public
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from aiplane.planner.latency import BuiltinLatency, max_batch
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import resolve_system
from aiplane.planner.types import ModelSpec, SystemSpec

#: Batch size -> average latency, seconds (the blog's "Latency measurements" table).
OCI_405B_FP8_MI300X_TP8: dict[int, float] = {
    1: 3.530,
    2: 3.583,
    4: 3.734,
    8: 3.974,
    16: 4.375,
    32: 5.130,
    64: 6.919,
    128: 10.340,
    256: 17.750,
}
ISL = OSL = 128
#: (scenario, input tokens, output tokens, output tokens/s): the blog's "Throughput measurements".
OCI_THROUGHPUT: tuple[tuple[str, int, int, float], ...] = (
    ("chatbot", 128, 128, 1993.0),
    ("generation heavy", 128, 2048, 2794.0),
)
#: vLLM's default max_num_seqs: the offline throughput run's batch.
THROUGHPUT_BATCH = 256


#: model -> (input tokens, output tokens, prompts = max_num_seqs, tokens/s): AMD's MI300X vLLM table.
AMD_MI300X_VLLM: dict[str, tuple[tuple[int, int, int, float], ...]] = {
    "meta-llama/Llama-3.1-70B-Instruct-FP8": (
        (128, 2048, 3200, 13212.5),
        (128, 4096, 1500, 11312.8),
        (500, 2000, 2000, 11376.7),
        (2048, 2048, 1500, 7252.1),
    ),
    "meta-llama/Llama-3.1-405B-Instruct-FP8": (
        (128, 2048, 1500, 4201.7),
        (128, 4096, 1500, 3176.3),
        (500, 2000, 2000, 2992.0),
        (2048, 2048, 500, 2153.7),
    ),
}


def wave_seconds(
    latency: BuiltinLatency,
    model: ModelSpec,
    system: SystemSpec,
    tp: int,
    prompts: int,
    wave: int,
    isl: int,
    osl: int,
) -> float:
    """Seconds one engine of ``tp`` GPUs takes for ``prompts`` requests run in waves of ``wave``: each
    wave a prefill of its prompts, then OSL - 1 decode steps at the growing context."""
    seconds = 0.0
    for start in range(0, prompts, wave):
        batch = min(wave, prompts - start)
        steps = sum(latency.decode_step_ms(model, system, tp, batch, isl + i) for i in range(1, osl))
        seconds += (latency.prefill_ms(model, system, tp, batch, isl) + steps) / 1000.0
    return seconds


def _offline(latency: BuiltinLatency, name: str, isl: int, osl: int, prompts: int) -> tuple[float, float]:
    """(total, output) tokens/s of ``prompts`` requests submitted at once to one TP8 engine."""
    model = replace(resolve_model(name), kv_dtype="fp8")
    system = resolve_system("mi300x")
    wave = min(prompts, max_batch(model, system, 8, isl + osl))
    seconds = wave_seconds(latency, model, system, 8, prompts, wave, isl, osl)
    return prompts * (isl + osl) / seconds, prompts * osl / seconds


def _seconds(latency: BuiltinLatency, batch: int, isl: int, osl: int) -> float:
    model = resolve_model("meta-llama/Llama-3.1-405B-Instruct-FP8")
    system = resolve_system("mi300x")
    prefill = latency.prefill_ms(model, system, 8, batch, isl)
    decode = sum(latency.decode_step_ms(model, system, 8, batch, isl + i) for i in range(1, osl))
    return (prefill + decode) / 1000.0


def summary(errors: list[float]) -> str:
    absolute = sorted(abs(e) for e in errors)
    return f"median |error| {statistics.median(absolute):.1%}, worst {absolute[-1]:.1%}"


def main() -> None:
    latency = BuiltinLatency("vllm")
    errors = []
    print("calibration (latency table): batch  measured s  builtin s  error")
    for batch, measured in OCI_405B_FP8_MI300X_TP8.items():
        predicted = _seconds(latency, batch, ISL, OSL)
        errors.append(predicted / measured - 1)
        print(f"{batch:5}  {measured:10.3f}  {predicted:9.3f}  {errors[-1]:+6.1%}")
    print(f"calibration: {summary(errors)}")
    held_out = []
    print("held out (throughput table): scenario  ISL/OSL  measured tok/s  builtin tok/s  error")
    for name, isl, osl, measured in OCI_THROUGHPUT:
        predicted = THROUGHPUT_BATCH * osl / _seconds(latency, THROUGHPUT_BATCH, isl, osl)
        held_out.append(predicted / measured - 1)
        print(f"{name:17} {isl}/{osl}  {measured:8.0f}  {predicted:8.0f}  {held_out[-1]:+6.1%}")
    print(f"held out: {summary(held_out)}")
    newer: dict[str, list[float]] = {"total": [], "output": []}
    print(
        "held out (AMD's 2025 vLLM table): model  ISL/OSL  measured  builtin total (output) tok/s  error total (output)"
    )
    for name, rows in AMD_MI300X_VLLM.items():
        for isl, osl, prompts, measured in rows:
            total, output = _offline(latency, name, isl, osl, prompts)
            newer["total"].append(total / measured - 1)
            newer["output"].append(output / measured - 1)
            label = name.split("/")[1]
            errors_now = f"{newer['total'][-1]:+6.1%} ({newer['output'][-1]:+.1%})"
            print(f"{label:28} {isl}/{osl}  {measured:8.0f}  {total:8.0f} ({output:.0f})  {errors_now}")
    for kind, found in newer.items():
        print(f"held out, AMD's 2025 table read as {kind} tokens/s: {summary(found)}")


if __name__ == "__main__":
    main()

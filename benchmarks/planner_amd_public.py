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

    python -m benchmarks.planner_amd_public
"""

from __future__ import annotations

import statistics

from aiplane.planner.latency import BuiltinLatency
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import resolve_system

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


def _seconds(latency: BuiltinLatency, batch: int, isl: int, osl: int) -> float:
    model = resolve_model("meta-llama/Llama-3.1-405B-Instruct-FP8")
    system = resolve_system("mi300x")
    prefill = latency.prefill_ms(model, system, 8, batch, isl)
    decode = sum(latency.decode_step_ms(model, system, 8, batch, isl + i) for i in range(1, osl))
    return (prefill + decode) / 1000.0


def _summary(errors: list[float]) -> str:
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
    print(f"calibration: {_summary(errors)}")
    held_out = []
    print("held out (throughput table): scenario  ISL/OSL  measured tok/s  builtin tok/s  error")
    for name, isl, osl, measured in OCI_THROUGHPUT:
        predicted = THROUGHPUT_BATCH * osl / _seconds(latency, THROUGHPUT_BATCH, isl, osl)
        held_out.append(predicted / measured - 1)
        print(f"{name:17} {isl}/{osl}  {measured:8.0f}  {predicted:8.0f}  {held_out[-1]:+6.1%}")
    print(f"held out: {_summary(held_out)}")


if __name__ == "__main__":
    main()

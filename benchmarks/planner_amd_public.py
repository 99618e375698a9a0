"""The built-in latency model on AMD against public measured figures (AIC has no AMD data).

Source: Oracle Cloud Infrastructure blog "Serving Llama 3.1 405B model with AMD MI300X GPUs"
(blogs.oracle.com/cloud-infrastructure), BM.GPU.MI300X.8, Llama 3.1 405B FP8, vLLM's
``benchmarks/benchmark_latency.py``, 128 input and 128 output tokens, tensor parallelism 8: the
average latency of one batch, per batch size. Our prediction of the same run is one prefill of the
batch plus 127 decode steps at the growing context (the first output token comes from the prefill).

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


def main() -> None:
    model = resolve_model("meta-llama/Llama-3.1-405B-Instruct-FP8")
    system = resolve_system("mi300x")
    latency = BuiltinLatency("vllm")
    errors = []
    print("batch  measured s  builtin s  error")
    for batch, measured in OCI_405B_FP8_MI300X_TP8.items():
        prefill = latency.prefill_ms(model, system, 8, batch, ISL)
        decode = sum(latency.decode_step_ms(model, system, 8, batch, ISL + i) for i in range(1, OSL))
        predicted = (prefill + decode) / 1000.0
        errors.append(predicted / measured - 1)
        print(f"{batch:5}  {measured:10.3f}  {predicted:9.3f}  {errors[-1]:+6.1%}")
    absolute = sorted(abs(e) for e in errors)
    print(f"median |error| {statistics.median(absolute):.1%}, worst {absolute[-1]:.1%}")


if __name__ == "__main__":
    main()

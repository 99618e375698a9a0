"""The built-in model uses each system's own fitted constants; systems without a fit take the vendor's."""

from __future__ import annotations

import importlib.util

import pytest

from aiplane.planner import calibration as cal
from aiplane.planner.latency import BuiltinLatency
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import partition, resolve_system


def test_fitted_system_uses_its_own_value_and_others_fall_back_to_the_vendor() -> None:
    a100, mi300x = resolve_system("a100"), resolve_system("mi300x")
    assert cal.value("PREFILL_OVERHEAD_MS", a100) == cal.BY_SYSTEM["a100_sxm"]["PREFILL_OVERHEAD_MS"]
    assert cal.value("PREFILL_OVERHEAD_MS", a100) != cal.PREFILL_OVERHEAD_MS["nvidia"]
    assert cal.value("PREFILL_OVERHEAD_MS", mi300x) == cal.PREFILL_OVERHEAD_MS["amd"]
    assert cal.value("DECODE_LAYER_US", partition(mi300x, 2)) == cal.DECODE_LAYER_US["amd"]


def test_block_fp8_decode_steps_up_between_16_and_32_rows() -> None:
    """AIC's vLLM block-FP8 step is flat to batch 15 and ~45 % slower at 32 (H200, TP4)."""
    model, h200 = resolve_model("Qwen/Qwen3-32B-FP8"), resolve_system("h200")
    step = BuiltinLatency("vllm").decode_step_ms
    flat = step(model, h200, 4, 15, 4250) - step(model, h200, 4, 1, 4250)
    jump = step(model, h200, 4, 32, 4250) - step(model, h200, 4, 15, 4250)
    assert jump > 3 * flat
    assert step(model, h200, 4, 15, 4250) * 1.08 < 20.0  # AIC's plan at ITL 20 ms is reachable


@pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None, reason="needs aiconfigurator-core"
)
def test_a_decode_step_pays_its_fixed_cost_per_layer() -> None:
    """What AIC's engine adds to a decode step beyond the kernels' roofline grows with the depth. One
    fixed cost per step made a 36-layer model 13 % slow and an 80-layer one 5 % fast at batch 1 on
    B200; charged per layer, both are within 6 %."""
    from aiplane.planner.aic import AicLatency

    b200, aic, ours = resolve_system("b200"), AicLatency("vllm"), BuiltinLatency("vllm")
    for name, tp in (("Qwen/Qwen3-8B", 1), ("meta-llama/Llama-3.1-70B", 4)):
        model = resolve_model(name)
        measured = aic.decode_step_ms(model, b200, tp, 1, 2048)
        assert abs(ours.decode_step_ms(model, b200, tp, 1, 2048) / measured - 1) < 0.06, name

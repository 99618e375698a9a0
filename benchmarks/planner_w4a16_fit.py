"""How fast each (GPU, backend) streams weight-only 4-bit (MXFP4) experts: from AIC's MoE kernel tables.

The built-in model reads a weight-only 4-bit expert as ``W4A16_READ_FACTOR`` times its bytes
(``aiplane.planner.latency._routed_wb``): the kernel dequantises in its main loop. How much slower
than a plain read that is depends on the backend's kernel on that GPU, not on the GPU alone:
aiconfigurator-core 0.12.0's measured tables show TensorRT-LLM 1.3.0rc20's B200 ``w4a16_mxfp4`` MoE
(its ``moe_torch_flow`` path) no faster than its H200 one, while vLLM's and SGLang's B200 kernels
(FlashInfer's TRT-LLM MXFP4 MoE) run near B200's bandwidth, and SGLang's H200 Triton kernel runs at
about half of vLLM's.

The factor is a kernel-level fit (no end-to-end case is scored): for each system and backend, AIC's
default data version, the ``w4a16_mxfp4`` rows of gpt-oss's two MoE shapes (hidden 2880, 128 and 32
experts, top-4, no MoE TP or EP (EXPERT_PARALLEL below), power-law 1.01 routing) at 16-256 tokens (the decode regime, where
the kernel is bound by reading the touched experts): the median of the measured latency, less the model's MOE_LAYER_US, over the
built-in model's read time of those experts at factor 1 (HBM peak x DECODE_MEMORY_EFFICIENCY).

The compute side (``W4A16_COMPUTE_FACTOR``) likewise at prompt sizes (2048-8192 tokens, where the
kernels are bound by their math): measured latency over the model's routed compute time, divided by
the same ratio's geometric mean over the calibration cases' MXFP4 pairs (H200 with vLLM and SGLang),
so that the level stays the one the MoE compute shares were fitted to and the tables give only how
much faster or slower another kernel is.

    python -m benchmarks.planner_w4a16_fit
"""

from __future__ import annotations

import importlib
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aiplane.planner import calibration as cal
from aiplane.planner.aic import literal_version
from aiplane.planner.systems import resolve_system

SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "gb200")
BACKENDS = ("trtllm", "vllm", "sglang")
#: gpt-oss's MoE: hidden = expert intermediate = 2880, top-4; an expert's three matrices at 4.5 bits.
HIDDEN, TOP_K = 2880, 4
EXPERT_BYTES = 3 * HIDDEN * HIDDEN * 0.5625
TOKENS = (16, 32, 64, 128, 256)
#: Expert-parallel sizes fitted over. EP 1 only: of the variants EP 1, 1-2 and 1-8 it scored best on
#: the CALIBRATION cases (worst disaggregated |error| 50 % against 69 % and 78 %); at EP 4-8 a GPU's
#: share of the experts is so small that the kernel's fixed cost, not its streaming, dominates.
EXPERT_PARALLEL = (1,)


def _mxfp4_rows(system: str, backend: str, experts: int) -> Any | None:
    """AIC's ``w4a16_mxfp4`` rows of one of gpt-oss's MoE shapes (no MoE TP, power-law 1.01 routing),
    every EP size; None where AIC has no MoE table for this backend on this system."""
    pandas: Any = importlib.import_module("pandas")
    core = importlib.import_module("aiconfigurator_core")
    try:
        version = str(literal_version(system, backend, None))
    except Exception:  # AIC has no data for this backend on this system
        return None
    relative = f"{system}/moe/{backend}/{version}/moe_perf.parquet"
    path = Path(core.__file__).parent / "systems" / "data" / relative
    if not path.exists():
        return None
    table = pandas.read_parquet(path)
    return table[
        (table.hidden_size == HIDDEN)
        & (table.num_experts == experts)
        & (table.topk == TOP_K)
        & (table.moe_tp_size == 1)
        & (table.moe_dtype == "w4a16_mxfp4")
        & (table.distribution == "power_law_1.01")
    ]


def _source(system: str, backend: str) -> str:
    return f"moe/{backend}/{literal_version(system, backend, None)}/moe_perf.parquet"


def factor(system: str, backend: str) -> tuple[float, int, str] | None:
    """(median factor, points, source table) for one system and backend; None without MXFP4 rows."""
    spec = resolve_system(system)
    rate = spec.memory_bandwidth_tbs * 1e12 * cal.value("DECODE_MEMORY_EFFICIENCY", spec)
    fixed = cal.value("MOE_LAYER_US", spec) * 1e-6
    ratios: list[float] = []
    for experts in (128, 32):
        rows = _mxfp4_rows(system, backend, experts)
        if rows is None:
            return None
        for ep in EXPERT_PARALLEL:
            for tokens in TOKENS:
                measured = rows[(rows.num_tokens == tokens) & (rows.moe_ep_size == ep)].latency
                if measured.empty:
                    continue
                touched = experts * (1.0 - (1.0 - TOP_K / experts) ** tokens)
                # Less the model's own fixed cost per MoE layer, which it adds beside the read.
                streaming = float(measured.median()) * 1e-3 - fixed
                ratios.append(streaming / (touched * EXPERT_BYTES / ep / rate))
    if not ratios:
        return None
    return statistics.median(ratios), len(ratios), _source(system, backend)


#: Prompt-sized token counts, where the expert GEMMs are bound by their math.
PREFILL_TOKENS = (2048, 4096, 8192)
#: The (system, backend) pairs of the CALIBRATION cases with MXFP4 experts (gpt-oss-120b): the
#: compute factor is relative to them, as the MoE compute shares were fitted on them.
CALIBRATED = (("h200_sxm", "vllm"), ("h200_sxm", "sglang"))


def raw_compute(system: str, backend: str) -> float | None:
    """Median of measured w4a16 MoE latency (less MOE_LAYER_US) over the model's routed compute time
    at prompt sizes (no EP or MoE TP): how much slower than the MoE compute shares say."""
    spec = resolve_system(system)
    rate = spec.bf16_tflops * 1e12 * cal.value("PREFILL_COMPUTE_EFFICIENCY", spec)
    rate *= cal.value("MOE_PREFILL_COMPUTE_SHARE", spec) * cal.moe_backend_share(backend)
    fixed = cal.value("MOE_LAYER_US", spec) * 1e-6
    ratios = []
    for experts in (128, 32):
        shape = _mxfp4_rows(system, backend, experts)
        if shape is None:
            return None
        rows = shape[shape.moe_ep_size == 1]
        for tokens in PREFILL_TOKENS:
            measured = rows[rows.num_tokens == tokens].latency
            if not measured.empty:
                flops = 2.0 * TOP_K * tokens * 3 * HIDDEN * HIDDEN
                ratios.append((float(measured.median()) * 1e-3 - fixed) / (flops / rate))
    return statistics.median(ratios) if ratios else None


def main() -> None:
    for system in SYSTEMS:
        for backend in BACKENDS:
            found = factor(system, backend)
            if found is None:
                print(f"{system} {backend}: no w4a16_mxfp4 rows")
            else:
                print(f"{system} {backend}: read {found[0]:.2f} ({found[2]}, n={found[1]})")
    level = statistics.geometric_mean([raw_compute(s, b) or 1.0 for s, b in CALIBRATED])
    for system in SYSTEMS:
        for backend in BACKENDS:
            raw = raw_compute(system, backend)
            if raw is not None:
                print(f"{system} {backend}: compute {raw / level:.2f} (raw {raw:.2f}, level {level:.3f})")


if __name__ == "__main__":
    main()

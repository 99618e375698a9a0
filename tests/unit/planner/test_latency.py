"""The built-in latency model and the memory fit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.planner import BuiltinLatency, max_batch, resolve_model, resolve_system
from aiplane.planner.latency import kv_bytes_per_token
from aiplane.planner.models import MODELS
from aiplane.planner.systems import SYSTEMS, partition

LAT = BuiltinLatency()
models = st.sampled_from(sorted(MODELS))
systems = st.sampled_from(sorted(SYSTEMS))


def test_a_70b_bf16_model_needs_two_h100s_and_fp8_fits_on_one() -> None:
    h100 = resolve_system("h100")
    bf16 = resolve_model("meta-llama/Llama-3.1-70B-Instruct")
    fp8 = resolve_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert max_batch(bf16, h100, 1, 1000) == 0
    assert max_batch(bf16, h100, 2, 1000) > 0
    assert max_batch(fp8, h100, 1, 1000) > 0


def test_kv_cache_per_token_of_llama_70b_and_deepseek_mla() -> None:
    # Llama 3.1 70B: 80 layers x (K+V) x 8 KV heads x 128 dims x 2 bytes = 320 KiB per token.
    assert kv_bytes_per_token(MODELS["meta-llama/Llama-3.1-70B"], 1) == 80 * 2 * 8 * 128 * 2
    # KV heads split over TP until each GPU has one, then replicate.
    assert kv_bytes_per_token(MODELS["meta-llama/Llama-3.1-70B"], 16) == 80 * 2 * 1 * 128 * 2
    # MLA caches the 512-dim latent plus 64 RoPE dims, on every GPU.
    assert kv_bytes_per_token(MODELS["deepseek-ai/DeepSeek-V3"], 8) == 61 * 576 * 2


@settings(max_examples=80, deadline=None)
@given(models, systems, st.integers(1, 6), st.integers(1, 4096), st.integers(0, 6))
def test_max_batch_shrinks_with_context_and_grows_with_tp(
    name: str, system: str, k: int, context: int, tp_exp: int
) -> None:
    m, s, tp = MODELS[name], SYSTEMS[system], 1 << tp_exp
    assert max_batch(m, s, tp, context) >= max_batch(m, s, tp, context * k)
    assert max_batch(m, s, tp * 2, context) >= max_batch(m, s, tp, context)


@settings(max_examples=150, deadline=None)
@given(
    models,
    systems,
    st.integers(1, 63),
    st.integers(1, 64),
    st.integers(1, 256),
    st.integers(1, 32768),
)
def test_more_gpus_per_engine_never_raise_latency(
    name: str, system: str, tp: int, extra: int, batch: int, tokens: int
) -> None:
    m, s = MODELS[name], SYSTEMS[system]
    assert LAT.prefill_ms(m, s, tp + extra, 1, tokens) <= LAT.prefill_ms(m, s, tp, 1, tokens)
    assert LAT.decode_step_ms(m, s, tp + extra, batch, tokens) <= LAT.decode_step_ms(m, s, tp, batch, tokens)


@settings(max_examples=80, deadline=None)
@given(models, systems, st.integers(0, 3), st.integers(1, 255), st.integers(1, 16384))
def test_latency_grows_with_work(name: str, system: str, tp_exp: int, batch: int, tokens: int) -> None:
    m, s, tp = MODELS[name], SYSTEMS[system], 1 << tp_exp
    assert LAT.prefill_ms(m, s, tp, 1, tokens + 1) >= LAT.prefill_ms(m, s, tp, 1, tokens)
    assert LAT.decode_step_ms(m, s, tp, batch + 1, tokens) >= LAT.decode_step_ms(m, s, tp, batch, tokens)
    assert LAT.decode_step_ms(m, s, tp, batch, tokens + 1) >= LAT.decode_step_ms(m, s, tp, batch, tokens)


def test_engine_sizes_far_past_a_node_are_answered() -> None:
    m, s = MODELS["Qwen/Qwen3-0.6B"], SYSTEMS["h100_sxm"]
    assert LAT.decode_step_ms(m, s, 2048, 1, 100) <= LAT.decode_step_ms(m, s, 1, 1, 100)


def test_decode_is_memory_bound_at_small_batch() -> None:
    """Llama 8B BF16 on one H100: 16 GB of weights at ~2.5 TB/s is a ~6-7 ms step, plus overhead."""
    step = LAT.decode_step_ms(MODELS["meta-llama/Llama-3.1-8B"], resolve_system("h100"), 1, 1, 1000)
    assert 5.0 < step < 10.0


def test_a_cpx_partition_is_slower_than_the_whole_gpu() -> None:
    m, gpu = MODELS["Qwen/Qwen3-8B"], resolve_system("mi300x")
    cpx = partition(gpu, 8)
    assert LAT.decode_step_ms(m, cpx, 1, 8, 2000) > LAT.decode_step_ms(m, gpu, 1, 8, 2000)
    assert max_batch(m, cpx, 1, 2000) < max_batch(m, gpu, 1, 2000)


def test_block_scaled_fp8_costs_a_fixed_time_per_pass_on_vllm_only() -> None:
    """AIC's vLLM tables: a block-scaled FP8 decode step barely shrinks with TP (Qwen3-32B-FP8 on H200,
    17-23 ms at TP 1-8, batch 8); TRT-LLM runs the same checkpoint at per-tensor speed."""
    h200 = resolve_system("h200")
    block = resolve_model("Qwen/Qwen3-32B-FP8")
    per_tensor = resolve_model("nvidia/Qwen3-32B-FP8")
    vllm, trtllm = BuiltinLatency("vllm"), BuiltinLatency("trtllm")
    assert vllm.decode_step_ms(block, h200, 8, 8, 4250) > 3 * vllm.decode_step_ms(
        per_tensor, h200, 8, 8, 4250
    )
    for tp in (1, 2, 4, 8):
        assert 15.0 < vllm.decode_step_ms(block, h200, tp, 8, 4250) < 30.0
        assert trtllm.decode_step_ms(block, h200, tp, 8, 4250) == vllm.decode_step_ms(
            per_tensor, h200, tp, 8, 4250
        )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        ["Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b"]
    ),
    st.sampled_from(["h200", "b200", "mi300x"]),
    st.sampled_from([(1, 1, 1, 1), (2, 1, 2, 1), (1, 4, 1, 4), (2, 2, 1, 4), (1, 8, 8, 1)]),
    st.integers(1, 4),
    st.integers(1, 256),
)
def test_an_in_flight_batching_pass_costs_at_least_its_parts_alone_and_at_most_both(
    name: str, system: str, par: tuple[int, int, int, int], prompts: int, gen: int
) -> None:
    """A mixed step (prompts prefilled beside decoding sequences, AIC's aggregated model) is no
    faster than either part run alone and no slower than both in turn: the weights are read once."""
    model, gpu = resolve_model(name), resolve_system(system)
    isl, context = 2000, 2500
    mixed = LAT.layout_mixed_ms(model, gpu, par, prompts, isl, gen, context)
    prefill = LAT.layout_mixed_ms(model, gpu, par, prompts, isl, 0, context)
    decode = LAT.layout_decode_ms(model, gpu, par, gen, context)
    assert mixed >= max(decode, prefill) * 0.999
    assert mixed <= prefill + decode


def test_fp4_weights_on_a_gpu_without_fp4_compute_in_bf16() -> None:
    """MXFP4 gpt-oss on Hopper runs w4a16 (AIC's tables key its MoE that way): a compute-bound
    prefill takes about as long as BF16 math, twice FP8's, while Blackwell has FP4 tensor cores."""
    model = resolve_model("openai/gpt-oss-120b")
    h200, b200 = resolve_system("h200"), resolve_system("b200")
    long = LAT.prefill_ms(model, h200, 1, 4, 8000)
    assert long > 1.5 * LAT.prefill_ms(model, b200, 1, 4, 8000)

"""The built-in latency model and the memory fit."""

from __future__ import annotations

from dataclasses import replace

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


def test_mxfp4_weights_compute_in_bf16_and_nvfp4_ones_in_fp4() -> None:
    """MXFP4 gpt-oss runs w4a16 on Hopper and Blackwell alike (AIC's tables key its MoE
    ``w4a16_mxfp4`` on both): a compute-bound prefill takes about as long as BF16 math; an NVFP4
    checkpoint of the same model quantises its activations too and uses Blackwell's FP4 tensor cores."""
    b200 = resolve_system("b200")
    mxfp4 = resolve_model("openai/gpt-oss-120b")
    nvfp4 = resolve_model("nvidia/gpt-oss-120b-NVFP4")
    assert mxfp4.fp4_weight_only and not nvfp4.fp4_weight_only
    assert LAT.prefill_ms(mxfp4, b200, 1, 4, 8000) > 2 * LAT.prefill_ms(nvfp4, b200, 1, 4, 8000)


moe_models = st.sampled_from(sorted(name for name, m in MODELS.items() if m.num_experts))


@settings(max_examples=60, deadline=None)
@given(moe_models, systems, st.sampled_from((2, 4, 8)), st.integers(256, 8192))
def test_expert_parallelism_is_never_faster_than_splitting_every_expert(
    name: str, system: str, ep: int, isl: int
) -> None:
    """Routing is skewed: under EP the rank holding the hottest experts works longest, while MoE TP
    gives every GPU a slice of every expert. The same GPUs, the same bytes: EP is not faster."""
    model, gpus = MODELS[name], resolve_system(system)
    split = LAT.layout_prefill_ms(model, gpus, (1, ep, ep, 1), isl)
    assert LAT.layout_prefill_ms(model, gpus, (1, ep, 1, ep), isl) >= split


def test_expert_parallel_prefill_waits_for_the_busiest_rank() -> None:
    """AIC's engine, gpt-oss-120b on 8 H200s (SGLang), one 2000-token prompt per DP rank: EP8 242 ms,
    MoE TP8 83 ms. The built-in model has the EP layout slower too (not by as much)."""
    model, h200 = resolve_model("openai/gpt-oss-120b"), resolve_system("h200")
    ep = LAT.layout_prefill_ms(model, h200, (1, 8, 1, 8), 2000)
    assert ep > 1.2 * LAT.layout_prefill_ms(model, h200, (1, 8, 8, 1), 2000)


def test_mxfp4_expert_decode_speed_follows_the_backends_kernel_not_the_gpu_alone() -> None:
    """AIC's measured MoE tables: TensorRT-LLM's weight-only MXFP4 expert kernel on B200 streams
    gpt-oss's experts no faster than its H200 one, while vLLM's B200 kernel (FlashInfer's) runs at
    B200's bandwidth. So a memory-bound gpt-oss-120b decode step on B200 is not faster than on H200
    with TensorRT-LLM, but is clearly faster with vLLM."""
    model = resolve_model("openai/gpt-oss-120b")
    h200, b200 = resolve_system("h200"), resolve_system("b200")
    trtllm, vllm = BuiltinLatency("trtllm"), BuiltinLatency("vllm")
    for batch in (16, 64, 128):
        assert trtllm.decode_step_ms(model, b200, 1, batch, 2000) >= trtllm.decode_step_ms(
            model, h200, 1, batch, 2000
        )
        assert vllm.decode_step_ms(model, b200, 1, batch, 2000) < 0.8 * vllm.decode_step_ms(
            model, h200, 1, batch, 2000
        )


def test_an_mla_models_small_batch_decode_step_pays_its_layers_small_kernels() -> None:
    """DeepSeek's MLA runs several small kernels per layer (Q down/up and KV down projections, the
    absorbed BMMs) that take their launch floor at a small batch. AIC's engine: DeepSeek-R1 on 8
    B200s (TRT-LLM, TP8), a decode step of one sequence takes 11.1 ms; a byte-count roofline says
    ~6 ms. The built-in model is within 30 % of AIC's, and a same-sized GQA model is not charged."""
    b200 = resolve_system("b200")
    deepseek = resolve_model("deepseek-ai/DeepSeek-R1")
    step = BuiltinLatency("trtllm").decode_step_ms(deepseek, b200, 8, 1, 4500)
    assert 0.7 * 11.1 <= step <= 1.3 * 11.1
    without_mla = replace(deepseek, kv_lora_rank=0, q_lora_rank=0, num_kv_heads=8, head_dim=128)
    assert BuiltinLatency("trtllm").decode_step_ms(without_mla, b200, 8, 1, 4500) < step - 2.0


def test_mxfp4_expert_prefill_on_b200_with_trtllm_is_no_faster_than_on_h200() -> None:
    """The same kernel tables at prompt sizes: TensorRT-LLM's B200 w4a16 MoE takes 3.5 ms for 4096
    gpt-oss-120b tokens, its H200 one 3.6 ms, though B200 has 2.3x the BF16 peak. A compute-bound
    gpt-oss-120b prefill on B200 is then within 10 % of H200's with TensorRT-LLM, and clearly faster
    with vLLM, whose B200 kernel is FlashInfer's."""
    model = resolve_model("openai/gpt-oss-120b")
    h200, b200 = resolve_system("h200"), resolve_system("b200")
    trtllm, vllm = BuiltinLatency("trtllm"), BuiltinLatency("vllm")
    assert trtllm.prefill_ms(model, b200, 1, 1, 8000) >= 0.9 * trtllm.prefill_ms(model, h200, 1, 1, 8000)
    assert vllm.prefill_ms(model, b200, 1, 1, 8000) < 0.8 * vllm.prefill_ms(model, h200, 1, 1, 8000)

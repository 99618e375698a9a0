"""The model registry and the GPU systems: what users type resolves to the right architecture."""

from __future__ import annotations

import pytest

from aiplane.planner import PlannerError, model_from_hf_config, partition, resolve_model, resolve_system
from aiplane.planner.latency import active_params, total_params
from aiplane.planner.models import MODELS

LLAMA_70B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("typed", "canonical", "dtype"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", "bf16"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B", "bf16"),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "meta-llama/Llama-3.1-70B", "fp8"),
        ("nvidia/Llama-3.1-405B-Instruct-FP8", "meta-llama/Llama-3.1-405B", "fp8"),
        ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", "fp8"),
        ("qwen/qwen3-32b", "Qwen/Qwen3-32B", "bf16"),
        ("QWEN3_32B", "Qwen/Qwen3-32B", "bf16"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B", "bf16"),
        ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B", "fp8"),
        ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", "bf16"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1", "fp8"),
        ("nvidia/DeepSeek-R1-FP4", "deepseek-ai/DeepSeek-R1", "fp4"),
        ("DEEPSEEK_V3", "deepseek-ai/DeepSeek-V3", "fp8"),
        ("openai/gpt-oss-120b", "openai/gpt-oss-120b", "fp4"),
        ("GPT_OSS_20B", "openai/gpt-oss-20b", "fp4"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", "bf16"),
        ("MOE_Mixtral8x22B", "mistralai/Mixtral-8x22B-v0.1", "bf16"),
    ],
)
def test_hugging_face_and_aic_names_resolve_with_the_checkpoint_dtype(
    typed: str, canonical: str, dtype: str
) -> None:
    spec = resolve_model(typed)
    arch = MODELS[canonical]
    assert (spec.layers, spec.hidden_size, spec.num_experts) == (
        arch.layers,
        arch.hidden_size,
        arch.num_experts,
    )
    assert spec.weight_dtype == dtype
    assert spec.name == typed


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("meta-llama/Llama-3.1-8B", 8.0, None),
        ("meta-llama/Llama-3.1-70B", 70.6, None),
        ("meta-llama/Llama-3.1-405B", 405.9, None),
        ("Qwen/Qwen3-32B", 32.8, None),
        ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
        ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
        ("deepseek-ai/DeepSeek-V3", 671.0, 37.6),
        ("openai/gpt-oss-120b", 116.8, 5.1),
        ("openai/gpt-oss-20b", 20.9, 3.6),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9),
    ],
)
def test_parameter_counts_match_the_published_sizes(
    name: str, total_b: float, active_b: float | None
) -> None:
    """The architectures are right if they add up to the model cards' parameter counts (within 2%; active
    counts within 10%: cards count embeddings differently)."""
    spec = MODELS[name]
    assert total_params(spec) / 1e9 == pytest.approx(total_b, rel=0.02)
    if active_b is not None:
        assert active_params(spec) / 1e9 == pytest.approx(active_b, rel=0.1)


def test_unknown_model_names_the_known_ones_and_the_way_out() -> None:
    with pytest.raises(PlannerError, match=r"model: unknown model 'acme/Giant-1T'") as err:
        resolve_model("acme/Giant-1T")
    assert "Qwen/Qwen3-32B" in str(err.value)
    assert "config.json" in str(err.value)


def test_hf_config_gives_the_architecture_and_quantisation() -> None:
    spec = model_from_hf_config("acme/llama-like", LLAMA_70B_CONFIG)
    assert spec == MODELS["meta-llama/Llama-3.1-70B"].__class__(
        name="acme/llama-like",
        layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=128256,
    )
    fp8 = model_from_hf_config(
        "acme/llama-like", {**LLAMA_70B_CONFIG, "quantization_config": {"quant_method": "fp8"}}
    )
    assert fp8.weight_dtype == "fp8"
    # A supplied config wins over the registry (a fine-tune may change the shape).
    assert resolve_model("Qwen/Qwen3-32B", {**LLAMA_70B_CONFIG, "num_hidden_layers": 40}).layers == 40


def test_hf_config_of_deepseek_gives_mla_and_moe() -> None:
    config = {
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "num_hidden_layers": 61,
        "vocab_size": 129280,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"},
    }
    spec = model_from_hf_config("my/deepseek", config)
    reference = MODELS["deepseek-ai/DeepSeek-V3"]
    assert total_params(spec) == total_params(reference)
    assert (spec.kv_lora_rank, spec.weight_dtype, spec.dense_layers) == (512, "fp8", 3)


def test_hf_config_of_gpt_oss_is_mxfp4_moe() -> None:
    config = {
        "architectures": ["GptOssForCausalLM"],
        "head_dim": 64,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_hidden_layers": 24,
        "num_key_value_heads": 8,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "quantization_config": {"quant_method": "mxfp4"},
    }
    spec = model_from_hf_config("me/oss", config)
    assert spec.weight_dtype == "fp4"
    assert total_params(spec) == total_params(MODELS["openai/gpt-oss-20b"])


def test_hf_config_missing_a_field_names_it() -> None:
    with pytest.raises(PlannerError, match="num_hidden_layers"):
        model_from_hf_config("x", {k: v for k, v in LLAMA_70B_CONFIG.items() if k != "num_hidden_layers"})


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("h100", "h100_sxm"),
        ("H200_SXM", "h200_sxm"),
        ("a100", "a100_sxm"),
        ("b200", "b200_sxm"),
        ("GB200", "gb200"),
        ("MI300X", "mi300x"),
        ("mi325x", "mi325x"),
        ("mi355x", "mi355x"),
    ],
)
def test_system_names(name: str, canonical: str) -> None:
    assert resolve_system(name).name == canonical


def test_system_facts_users_check() -> None:
    assert resolve_system("gb200").gpus_per_node == 4
    assert resolve_system("h100").fp4_tflops == 0  # Hopper has no FP4 tensor cores
    assert resolve_system("mi300x").resource == "amd.com/gpu"
    with pytest.raises(PlannerError, match=r"unknown GPU system 'tpu'.*h100"):
        resolve_system("tpu")


def test_cpx_partition_is_an_eighth_of_an_mi300x() -> None:
    gpu = resolve_system("mi300x")
    cpx = partition(gpu, 8)
    assert cpx.name == "mi300x-cpx"
    assert cpx.memory_gib == gpu.memory_gib / 8
    assert cpx.bf16_tflops == gpu.bf16_tflops / 8
    assert cpx.memory_bandwidth_tbs == gpu.memory_bandwidth_tbs / 8
    assert cpx.gpus_per_node == 64
    assert partition(gpu, 1) is gpu


def test_partitions_are_amd_only_and_real_modes() -> None:
    with pytest.raises(PlannerError, match="partitionsPerGpu: h100_sxm cannot be split"):
        partition(resolve_system("h100"), 2)
    with pytest.raises(PlannerError, match="partitionsPerGpu: 3 is not a compute-partition mode"):
        partition(resolve_system("mi300x"), 3)


@pytest.mark.parametrize(
    ("name", "block"),
    [
        ("Qwen/Qwen3-32B-FP8", True),
        ("Qwen3-8B-FP8", True),
        ("deepseek-ai/DeepSeek-R1", True),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", False),
        ("RedHatAI/Qwen3-32B-FP8-dynamic", False),
        ("Qwen/Qwen3-32B", False),
        ("nvidia/DeepSeek-R1-FP4", False),
    ],
)
def test_block_scaled_fp8_checkpoints_are_marked(name: str, block: bool) -> None:
    """Qwen's and DeepSeek's own FP8 checkpoints carry 128x128 block scales; ModelOpt/RedHat ones do not."""
    assert resolve_model(name).fp8_block_scaled is block


def test_a_config_with_weight_block_size_is_block_scaled_fp8() -> None:
    quant = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    spec = model_from_hf_config("acme/llama-fp8", {**LLAMA_70B_CONFIG, "quantization_config": quant})
    assert (spec.weight_dtype, spec.fp8_block_scaled) == ("fp8", True)
    per_tensor = {"quant_method": "fp8"}
    spec = model_from_hf_config("acme/llama-fp8", {**LLAMA_70B_CONFIG, "quantization_config": per_tensor})
    assert (spec.weight_dtype, spec.fp8_block_scaled) == ("fp8", False)

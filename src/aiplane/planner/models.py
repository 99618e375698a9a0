"""The model registry: architectures of the popular families, copied from their Hugging Face
``config.json``, and the parser for a ``config.json`` the registry does not know.

Users type Hugging Face IDs (``Qwen/Qwen3-32B-FP8``, ``nvidia/Llama-3.1-70B-Instruct-FP8``) or
AIConfigurator's names (``QWEN3_32B``); both resolve to one architecture, and the weight dtype follows
the checkpoint: an ``-FP8``/``-FP4`` ID changes bytes per parameter, not the architecture.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from aiplane.planner.types import ModelSpec, PlannerError

_QWEN3_VOCAB = 151936
_LLAMA3_VOCAB = 128256


def _llama(name: str, layers: int, hidden: int, heads: int, inter: int) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, 8, 128, inter, _LLAMA3_VOCAB)


def _qwen3(name: str, layers: int, hidden: int, heads: int, inter: int, *, tied: bool = False) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, 8, 128, inter, _QWEN3_VOCAB, tie_word_embeddings=tied)


def _deepseek(name: str) -> ModelSpec:
    # deepseek-ai/DeepSeek-V3 config.json; R1 shares the architecture. The checkpoint is FP8 (block scales).
    return ModelSpec(
        name,
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        head_dim=192,
        intermediate_size=18432,
        vocab_size=129280,
        num_experts=256,
        experts_per_token=8,
        moe_intermediate_size=2048,
        dense_layers=3,
        shared_experts=1,
        weight_dtype="fp8",
        fp8_block_scaled=True,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        q_lora_rank=1536,
        qk_nope_head_dim=128,
        v_head_dim=128,
    )


def _gpt_oss(name: str, layers: int, experts: int) -> ModelSpec:
    # openai/gpt-oss-*: MoE weights in MXFP4 (attention stays BF16; we count all weights at FP4, which
    # under-counts ~2% of the bytes), head_dim 64 with 64 query and 8 KV heads.
    return ModelSpec(
        name,
        layers=layers,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        intermediate_size=2880,
        vocab_size=201088,
        num_experts=experts,
        experts_per_token=4,
        moe_intermediate_size=2880,
        weight_dtype="fp4",
        fp4_weight_only=True,
    )


def _mixtral(name: str, layers: int, hidden: int, heads: int, inter: int, vocab: int) -> ModelSpec:
    return ModelSpec(
        name,
        layers,
        hidden,
        heads,
        8,
        128,
        inter,
        vocab,
        num_experts=8,
        experts_per_token=2,
        moe_intermediate_size=inter,
    )


#: Canonical name -> architecture (weights as the original checkpoint ships them).
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        _llama("meta-llama/Llama-3.1-8B", 32, 4096, 32, 14336),
        _llama("meta-llama/Llama-3.1-70B", 80, 8192, 64, 28672),
        _llama("meta-llama/Llama-3.1-405B", 126, 16384, 128, 53248),
        _qwen3("Qwen/Qwen3-0.6B", 28, 1024, 16, 3072, tied=True),
        _qwen3("Qwen/Qwen3-1.7B", 28, 2048, 16, 6144, tied=True),
        _qwen3("Qwen/Qwen3-4B", 36, 2560, 32, 9728, tied=True),
        _qwen3("Qwen/Qwen3-8B", 36, 4096, 32, 12288),
        _qwen3("Qwen/Qwen3-14B", 40, 5120, 40, 17408),
        _qwen3("Qwen/Qwen3-32B", 64, 5120, 64, 25600),
        ModelSpec(
            "Qwen/Qwen3-30B-A3B",
            48,
            2048,
            32,
            4,
            128,
            6144,
            _QWEN3_VOCAB,
            num_experts=128,
            experts_per_token=8,
            moe_intermediate_size=768,
        ),
        ModelSpec(
            "Qwen/Qwen3-235B-A22B",
            94,
            4096,
            64,
            4,
            128,
            12288,
            _QWEN3_VOCAB,
            num_experts=128,
            experts_per_token=8,
            moe_intermediate_size=1536,
        ),
        _deepseek("deepseek-ai/DeepSeek-V3"),
        _deepseek("deepseek-ai/DeepSeek-R1"),
        _gpt_oss("openai/gpt-oss-20b", 24, 32),
        _gpt_oss("openai/gpt-oss-120b", 36, 128),
        _mixtral("mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 14336, 32000),
        _mixtral("mistralai/Mixtral-8x22B-v0.1", 56, 6144, 48, 16384, 32768),
    )
}

#: Name fragments that select a checkpoint or a fine-tune, not an architecture; removed before lookup.
_CHECKPOINT_SUFFIXES = re.compile(
    r"-(instruct|chat|base|hf|thinking|v0\.\d|\d{4}|fp8|fp4|nvfp4|mxfp4|w4a16|awq|gptq|int4|dynamic|kv)"
    r"(?=-|$)"
)
_DTYPE_MARKERS = (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"))


def _key(name: str) -> str:
    """A lookup key: organisation, checkpoint suffixes and punctuation removed, lower case.

    ``meta-llama/Meta-Llama-3.1-70B-Instruct``, ``nvidia/Llama-3.1-70B-Instruct-FP8`` and AIC's
    ``LLAMA3.1_70B`` all become ``llama3170b``.
    """
    base = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-")
    previous = None
    while previous != base:
        previous = base
        base = _CHECKPOINT_SUFFIXES.sub("", base)
    key = re.sub(r"[^a-z0-9]", "", base)
    for prefix in ("meta", "moe"):
        key = key.removeprefix(prefix)
    return key


_BY_KEY: dict[str, ModelSpec] = {_key(spec.name): spec for spec in MODELS.values()}


def _checkpoint_dtype(name: str) -> str | None:
    lowered = name.lower()
    for marker, dtype in _DTYPE_MARKERS:
        if re.search(rf"(^|[-_/]){marker}($|[-_])", lowered):
            return dtype
    return None


def known_models() -> list[str]:
    return sorted(MODELS)


def resolve_model(name: str, config: Mapping[str, Any] | None = None) -> ModelSpec:
    """The architecture of ``name``: from ``config`` (a ``config.json``) when given, else the registry.

    A supplied config wins over the registry so a user can plan a fine-tune with a changed shape.
    """
    if not name.strip():
        raise PlannerError("model: must not be empty")
    if config is not None:
        return model_from_hf_config(name, config)
    spec = _BY_KEY.get(_key(name))
    if spec is None:
        raise PlannerError(
            f"model: unknown model {name!r}; supply its Hugging Face config.json (`modelConfig`) or use one "
            f"of: {', '.join(known_models())}"
        )
    dtype = _checkpoint_dtype(name) or spec.weight_dtype
    return replace(
        spec,
        name=name.strip(),
        weight_dtype=dtype,
        fp8_block_scaled=_fp8_block_scaled(name, spec, dtype),
        # an NVFP4 checkpoint quantises the activations too (FP4 tensor cores)
        fp4_weight_only=spec.fp4_weight_only and dtype == "fp4" and "nvfp4" not in name.lower(),
    )


def _fp8_block_scaled(name: str, spec: ModelSpec, dtype: str) -> bool:
    """Whether the checkpoint's FP8 weights carry per-block scales.

    A natively FP8 architecture (DeepSeek) is; so are Qwen's own Qwen3 FP8 checkpoints (``Qwen/…-FP8``,
    or no organisation given). Other publishers' FP8 checkpoints (``nvidia/…-FP8``: ModelOpt,
    ``RedHatAI/…``) are per-tensor or per-channel.
    """
    if dtype != "fp8":
        return False
    if spec.fp8_block_scaled:
        return True
    org = name.strip().lower().rsplit("/", 1)[0] if "/" in name else None
    return _key(name).startswith("qwen3") and org in (None, "qwen")


def _int(config: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if default is None:
        raise PlannerError(f"model config: missing integer field {keys[0]!r} (config.json of a transformer)")
    return default


def _quant_dtype(config: Mapping[str, Any]) -> str:
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return "bf16"
    method = " ".join(
        str(quant.get(k, "")) for k in ("quant_method", "quant_algo", "fmt", "format", "weights")
    ).lower()
    if "fp4" in method:
        return "fp4"
    if "fp8" in method or "e4m3" in method:
        return "fp8"
    bits = quant.get("bits")
    if bits == 4:
        return "fp4"
    if bits == 8:
        return "fp8"
    return "bf16"


def model_from_hf_config(name: str, config: Mapping[str, Any]) -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` (Llama, Qwen, Mixtral, DeepSeek, gpt-oss).

    Multimodal configs nest the language model under ``text_config``; that part is what is served.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**config, **text}
    hidden = _int(config, "hidden_size", "d_model")
    heads = _int(config, "num_attention_heads", "n_head")
    head_dim = _int(config, "head_dim", default=hidden // heads)
    experts = _int(config, "n_routed_experts", "num_local_experts", "num_experts", default=0)
    kv_lora = _int(config, "kv_lora_rank", default=0)
    nope = _int(config, "qk_nope_head_dim", default=0)
    rope = _int(config, "qk_rope_head_dim", default=0)
    if kv_lora:
        head_dim = nope + rope
    intermediate = _int(config, "intermediate_size", "ffn_dim")
    return ModelSpec(
        name=name.strip(),
        layers=_int(config, "num_hidden_layers", "n_layer"),
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=_int(config, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=_int(config, "vocab_size"),
        num_experts=experts,
        experts_per_token=(
            _int(config, "num_experts_per_tok", "experts_per_token", "moe_topk", default=2) if experts else 0
        ),
        moe_intermediate_size=(_int(config, "moe_intermediate_size", default=intermediate) if experts else 0),
        dense_layers=_int(config, "first_k_dense_replace", default=0) if experts else 0,
        shared_experts=_int(config, "n_shared_experts", default=0) if experts else 0,
        weight_dtype=_checkpoint_dtype(name) or _quant_dtype(config),
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=rope,
        q_lora_rank=_int(config, "q_lora_rank", default=0) if kv_lora else 0,
        qk_nope_head_dim=nope,
        v_head_dim=_int(config, "v_head_dim", default=0) if kv_lora else 0,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        fp8_block_scaled=_block_scales(config),
        fp4_weight_only=_mxfp4(config),
    )


def _mxfp4(config: Mapping[str, Any]) -> bool:
    """MXFP4 weights (``quantization_config.quant_method`` of gpt-oss): weight-only, BF16 activations."""
    quant = config.get("quantization_config")
    return isinstance(quant, Mapping) and "mxfp4" in str(quant.get("quant_method", "")).lower()


def _block_scales(config: Mapping[str, Any]) -> bool:
    """FP8 with per-block scales: ``quantization_config.weight_block_size`` (DeepSeek, Qwen3-*-FP8)."""
    quant = config.get("quantization_config")
    return (
        _quant_dtype(config) == "fp8" and isinstance(quant, Mapping) and bool(quant.get("weight_block_size"))
    )

"""The built-in analytic latency model (a roofline per phase) and the memory fit.

Each phase costs max(compute time, memory time) plus the tensor-parallel all-reduces and a fixed
overhead; the efficiencies live in :mod:`aiplane.planner.calibration`. A bigger engine is never
predicted slower than a smaller one: where the all-reduce would cost more than the split saves, the
latency is that of the best smaller size (an engine can always leave GPUs idle). This keeps the
search's answers monotone (more GPUs per engine never hurt) — see docs/planner.md.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from aiplane.planner import calibration as cal
from aiplane.planner.types import Backend, ModelSpec, SystemSpec

_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625}  # fp4: 4 bits + one 8-bit scale per 16
_GIB = 1024.0**3
#: Activations cross the all-reduce in BF16.
_ACTIVATION_BYTES = 2.0


def dtype_bytes(dtype: str) -> float:
    return _BYTES.get(dtype, 2.0)


def _attention_params(m: ModelSpec) -> int:
    if m.kv_lora_rank:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (
            m.hidden_size * m.q_lora_rank + m.q_lora_rank * m.num_heads * qk
            if m.q_lora_rank
            else m.hidden_size * m.num_heads * qk
        )
        kv = m.hidden_size * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * m.num_heads * (
            m.qk_nope_head_dim + m.v_head_dim
        )
        return q + kv + m.num_heads * m.v_head_dim * m.hidden_size
    q_and_o = 2 * m.hidden_size * m.num_heads * m.head_dim
    return q_and_o + 2 * m.hidden_size * m.num_kv_heads * m.head_dim


def _moe_layers(m: ModelSpec) -> int:
    return m.layers - m.dense_layers if m.num_experts else 0


def _expert_params(m: ModelSpec) -> int:
    return 3 * m.hidden_size * m.moe_intermediate_size


def _always_read_params(m: ModelSpec) -> int:
    """Transformer parameters every token touches: attention, dense FFNs, shared experts (no embeddings)."""
    dense_ffn_layers = m.layers - _moe_layers(m)
    return (
        m.layers * _attention_params(m)
        + dense_ffn_layers * 3 * m.hidden_size * m.intermediate_size
        + _moe_layers(m) * (m.shared_experts * _expert_params(m) + m.hidden_size * m.num_experts)
    )


def total_params(m: ModelSpec) -> int:
    embeddings = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    return _always_read_params(m) + _moe_layers(m) * m.num_experts * _expert_params(m) + embeddings


def active_params(m: ModelSpec) -> int:
    """Parameters one token multiplies through (routed experts: top-k), LM head included."""
    routed = _moe_layers(m) * m.experts_per_token * _expert_params(m)
    return _always_read_params(m) + routed + m.vocab_size * m.hidden_size


def weight_bytes(m: ModelSpec) -> float:
    """Checkpoint bytes: transformer weights in the checkpoint's dtype, embeddings in BF16."""
    embeddings = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    return (total_params(m) - embeddings) * dtype_bytes(m.weight_dtype) + embeddings * 2.0


def kv_bytes_per_token(m: ModelSpec, tp: int) -> float:
    """KV-cache bytes one token holds on each GPU of a ``tp`` engine (KV heads replicate past tp = heads;
    MLA's latent is replicated on every GPU)."""
    if m.kv_lora_rank:
        per_layer = float(m.kv_lora_rank + m.qk_rope_head_dim)
    else:
        per_layer = 2.0 * math.ceil(m.num_kv_heads / tp) * m.head_dim
    return m.layers * per_layer * dtype_bytes(m.kv_dtype)


def kv_capacity_tokens(m: ModelSpec, s: SystemSpec, tp: int) -> int:
    """Tokens of KV cache that fit beside the weights and the reserve (0: the weights do not fit)."""
    usable = s.memory_gib * cal.MEMORY_UTILIZATION - cal.ACTIVATION_RESERVE_GIB
    free = usable * _GIB - weight_bytes(m) / tp
    if free <= 0:
        return 0
    return int(free // kv_bytes_per_token(m, tp))


def max_batch(m: ModelSpec, s: SystemSpec, tp: int, context: int) -> int:
    """How many requests of ``context`` tokens an engine of ``tp`` GPUs holds in KV cache at once."""
    return kv_capacity_tokens(m, s, tp) // max(1, context)


def _tflops(m: ModelSpec, s: SystemSpec) -> float:
    """Tensor peak for the checkpoint's dtype; a GPU without that format computes in the next wider one."""
    # FP4 weights on a GPU without FP4 tensor cores are dequantised and multiplied in BF16 (w4a16: AIC's
    # Hopper MoE tables for gpt-oss are keyed "w4a16_mxfp4"), not in FP8; so are weight-only FP4 ones
    # (MXFP4) on any GPU: their activations are BF16 (AIC's Blackwell tables: "w4a16_mxfp4" again).
    if m.fp4_weight_only:
        return s.bf16_tflops
    ladder = {"fp4": (s.fp4_tflops, s.bf16_tflops), "fp8": (s.fp8_tflops, s.bf16_tflops)}
    for value in ladder.get(m.weight_dtype, (s.bf16_tflops,)):
        if value > 0:
            return value
    return s.bf16_tflops


def _experts_touched(m: ModelSpec, tokens: int) -> float:
    """Expected distinct routed experts per MoE layer that ``tokens`` tokens select (uniform routing)."""
    if not m.num_experts:
        return 0.0
    miss = (1.0 - m.experts_per_token / m.num_experts) ** tokens
    return m.num_experts * (1.0 - miss)


def _weights_read(m: ModelSpec, tokens: int) -> float:
    """Bytes of weights a pass over ``tokens`` tokens reads (whole engine)."""
    wb = dtype_bytes(m.weight_dtype)
    routed = _moe_layers(m) * _experts_touched(m, tokens) * _expert_params(m) * wb
    return _always_read_params(m) * wb + routed + m.vocab_size * m.hidden_size * 2.0


def _allreduce_ms(m: ModelSpec, s: SystemSpec, tp: int, tokens: int) -> float:
    """Two ring all-reduces per layer (after attention and after the FFN) of the tokens' activations."""
    if tp <= 1:
        return 0.0
    size = tokens * m.hidden_size * _ACTIVATION_BYTES
    bandwidth = s.interconnect_gbs * 1e9 * cal.value("ALLREDUCE_EFFICIENCY", s)
    one = 2.0 * (tp - 1) / tp * size / bandwidth * 1e3 + cal.value("ALLREDUCE_LATENCY_US", s) / 1e3
    return 2 * m.layers * one


def _attention_dims(m: ModelSpec, *, decode: bool) -> int:
    """Per-head dims multiplied per (query, key) pair: QK plus PV (MLA decode runs absorbed, on the latent)."""
    if m.kv_lora_rank:
        if decode:
            return 2 * m.kv_lora_rank + m.qk_rope_head_dim
        return m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim
    return 2 * m.head_dim


#: GEMMs per transformer layer that carry FP8 block scales: QKV, attention output, gate-up, down.
_GEMMS_PER_LAYER = 4


def _fp8_block_ms(m: ModelSpec, s: SystemSpec, rows: int) -> float:
    """Extra time per forward pass of block-scaled FP8 GEMMs (vLLM's DeepGemm / FlashInfer kernels).

    AIC's measured tables show these kernels at a near-constant cost per GEMM whatever the shard size,
    so a pass of a block-scaled checkpoint costs a fixed time per GEMM on every GPU of the engine (it
    does not shrink with TP). That cost steps with the GEMM's M (tokens in the pass): flat up to 15
    rows, then ramping to a larger plateau from 32 (Qwen3-32B-FP8 on H200: a TP4 decode step of 18 ms
    at batch 1-15, 27 ms at 32). calibration.FP8_BLOCK_SMALL_M_US below 16 rows, FP8_BLOCK_GEMM_US
    from 32, linear between.
    """
    if not (m.fp8_block_scaled and m.weight_dtype == "fp8"):
        return 0.0
    small, large = cal.value("FP8_BLOCK_SMALL_M_US", s), cal.value("FP8_BLOCK_GEMM_US", s)
    if rows < _SMALL_M:
        per_gemm = small
    elif rows >= _LARGE_M:
        per_gemm = large
    else:
        per_gemm = small + (large - small) * (rows - _SMALL_M + 1) / (_LARGE_M - _SMALL_M + 1)
    # A MoE layer's experts run as grouped GEMMs (AIC times them in its MoE tables, not at this
    # cost): only its attention GEMMs (QKV, output) count.
    gemms = m.layers * _GEMMS_PER_LAYER - _moe_layers(m) * (_GEMMS_PER_LAYER - 2)
    return gemms * per_gemm / 1e3


#: GEMM rows (M) below which block-FP8 kernels cost FP8_BLOCK_SMALL_M_US, and from which FP8_BLOCK_GEMM_US.
_SMALL_M = 16
_LARGE_M = 32


def _routed_params(m: ModelSpec) -> int:
    return _moe_layers(m) * _expert_params(m)


def _step_ms(
    m: ModelSpec,
    s: SystemSpec,
    par: tuple[int, int, int, int],
    rows: int,
    context: int,
    *,
    decode: bool,
    backend: str = "vllm",
) -> float:
    """One forward pass on one worker of layout ``par`` = (attention TP, attention DP, MoE TP, MoE EP),
    each attention rank holding ``rows`` sequences (prefill: one prompt of ``context`` tokens; decode:
    ``rows`` sequences at ``context`` tokens). Everything is per GPU: attention, dense FFNs, shared
    experts and the LM head split over the attention TP; the routed experts (the tokens of every DP
    rank) over MoE TP x EP. A tensor-parallel worker (dp 1, EP 1, MoE TP = TP) is the plain roofline.
    """
    tp, dp, moe_tp, moe_ep = par
    gpus = tp * dp
    rank_tokens = rows if decode else rows * context
    moe_tokens = rank_tokens * dp
    wb = dtype_bytes(m.weight_dtype)
    head = m.vocab_size * m.hidden_size
    if decode:
        attention = 2.0 * m.layers * m.num_heads * _attention_dims(m, decode=True) * rows * context
    else:  # causal: each of the prompt's queries sees on average half of it
        attention = (
            2.0 * m.layers * m.num_heads * _attention_dims(m, decode=False) * rows * context * context / 2
        )
    shared_flops = 2.0 * (_always_read_params(m) + head) * rank_tokens + attention
    routed_flops = 2.0 * m.experts_per_token * _routed_params(m) * moe_tokens
    peak = _tflops(m, s) * 1e12
    efficiency = cal.value("DECODE_COMPUTE_EFFICIENCY" if decode else "PREFILL_COMPUTE_EFFICIENCY", s)
    # Routed experts run as grouped GEMMs over many small experts, below one large GEMM's rate.
    moe_share = cal.value("MOE_DECODE_COMPUTE_SHARE" if decode else "MOE_PREFILL_COMPUTE_SHARE", s)
    moe_share *= cal.moe_backend_share(backend)
    routed_flops *= _ep_imbalance(s, moe_ep) * _routed_compute_factor(m, s, backend)
    compute = (shared_flops / tp / efficiency + routed_flops / gpus / (efficiency * moe_share)) / peak * 1e3
    routed_bytes = (
        _experts_touched(m, moe_tokens) * _routed_params(m) * _routed_wb(m, s, backend) / (moe_tp * moe_ep)
    )
    bytes_ = (_always_read_params(m) * wb + head * 2.0) / tp + routed_bytes
    kv = kv_bytes_per_token(m, tp)
    bytes_ += rows * context * kv if decode else rank_tokens * kv
    memory_eff = cal.value("DECODE_MEMORY_EFFICIENCY" if decode else "PREFILL_MEMORY_EFFICIENCY", s)
    memory = bytes_ / (s.memory_bandwidth_tbs * 1e12 * memory_eff) * 1e3
    if _plain_tp(m, par):
        comm = _allreduce_ms(m, s, tp, rank_tokens)
    else:  # attention's all-reduce within its TP group; the MoE layers' token exchange over the worker
        comm = _allreduce_ms(m, s, tp, rank_tokens) / 2 + _exchange_ms(m, s, gpus, moe_tokens)
    fixed = (_decode_fixed_ms(m, s) if decode else cal.value("PREFILL_OVERHEAD_MS", s)) + _layer_fixed_ms(
        m, s
    )
    return max(compute, memory) + comm + fixed + _fp8_block_ms(m, s, rank_tokens)


def _decode_fixed_ms(m: ModelSpec, s: SystemSpec) -> float:
    """A decode pass's cost outside the roofline's kernels: calibration.DECODE_LAYER_US per layer."""
    return m.layers * cal.value("DECODE_LAYER_US", s) / 1e3


def _layer_fixed_ms(m: ModelSpec, s: SystemSpec) -> float:
    """Fixed cost per pass of the layers' small kernels that a roofline does not see: a MoE layer's
    routing, permutation and grouped-GEMM launches (calibration.MOE_LAYER_US), and an MLA layer's
    extra kernels beside a GQA layer's two GEMMs (the Q down/up and KV down projections, their norms,
    the two absorbed BMMs; calibration.MLA_LAYER_US), each near its launch floor at decode sizes."""
    fixed = _moe_layers(m) * cal.value("MOE_LAYER_US", s)
    if m.kv_lora_rank:
        fixed += m.layers * cal.value("MLA_LAYER_US", s)
    return fixed / 1e3


def mixed_ms(
    m: ModelSpec,
    s: SystemSpec,
    par: tuple[int, int, int, int],
    prompts: float,
    isl: int,
    gen: int,
    context: int,
    backend: str = "vllm",
) -> float:
    """One in-flight-batching pass on a worker of layout ``par``: per attention rank, ``prompts``
    prompts of ``isl`` tokens prefilled together with one token of each of ``gen`` decoding sequences
    at ``context`` tokens (AIC's "mixed step"). The GEMMs run once over all the pass's tokens (the
    weights are read once); each part's FLOPs at its phase's efficiency."""
    tp, dp, moe_tp, moe_ep = par
    gpus = tp * dp
    p_tokens = prompts * isl
    tokens = p_tokens + gen
    wb = dtype_bytes(m.weight_dtype)
    head = m.vocab_size * m.hidden_size
    dense_params = _always_read_params(m) + head
    p_flops = 2.0 * dense_params * p_tokens
    p_flops += 2.0 * m.layers * m.num_heads * _attention_dims(m, decode=False) * prompts * isl * isl / 2
    d_flops = (
        2.0 * dense_params * gen
        + 2.0 * m.layers * m.num_heads * _attention_dims(m, decode=True) * gen * context
    )
    routed = 2.0 * m.experts_per_token * _routed_params(m) * dp * _ep_imbalance(s, moe_ep)
    routed *= _routed_compute_factor(m, s, backend)
    eff_p, eff_d = cal.value("PREFILL_COMPUTE_EFFICIENCY", s), cal.value("DECODE_COMPUTE_EFFICIENCY", s)
    kernels = cal.moe_backend_share(backend)
    share_p = cal.value("MOE_PREFILL_COMPUTE_SHARE", s) * kernels
    share_d = cal.value("MOE_DECODE_COMPUTE_SHARE", s) * kernels
    compute = (
        p_flops / tp / eff_p
        + d_flops / tp / eff_d
        + routed * p_tokens / gpus / (eff_p * share_p)
        + routed * gen / gpus / (eff_d * share_d)
    ) / (_tflops(m, s) * 1e12)
    bytes_ = (_always_read_params(m) * wb + head * 2.0) / tp
    bytes_ += (
        _experts_touched(m, round(tokens * dp))
        * _routed_params(m)
        * _routed_wb(m, s, backend)
        / (moe_tp * moe_ep)
    )
    bytes_ += (gen * context + p_tokens) * kv_bytes_per_token(m, tp)
    # The weights stream at the slower of the two phases' rates when both share the pass.
    memory_eff = cal.value("PREFILL_MEMORY_EFFICIENCY", s)
    if gen:
        decode_eff = cal.value("DECODE_MEMORY_EFFICIENCY", s)
        memory_eff = min(memory_eff, decode_eff) if p_tokens > 0 else decode_eff
    memory = bytes_ / (s.memory_bandwidth_tbs * 1e12 * memory_eff)
    rank_tokens = round(tokens)
    if _plain_tp(m, par):
        comm = _allreduce_ms(m, s, tp, rank_tokens)
    else:
        comm = _allreduce_ms(m, s, tp, rank_tokens) / 2 + _exchange_ms(m, s, gpus, rank_tokens * dp)
    # A pass with prompts in it pays a prefill's fixed cost (their scheduling and first sampling).
    fixed = cal.value("PREFILL_OVERHEAD_MS", s) if p_tokens > 0 else _decode_fixed_ms(m, s)
    fixed += _layer_fixed_ms(m, s)
    return max(compute, memory) * 1e3 + comm + fixed + _fp8_block_ms(m, s, rank_tokens)


def _routed_wb(m: ModelSpec, s: SystemSpec, backend: str) -> float:
    """Bytes per routed-expert weight as the MoE kernels stream them: weight-only 4-bit experts are
    dequantised in the GEMM's main loop, which streams them slower than plain reads, by how much
    depending on the backend's kernel on that GPU (calibration.w4a16_read_factor: the time of reading
    that many times the bytes)."""
    wb = dtype_bytes(m.weight_dtype)
    return wb * cal.w4a16_read_factor(s, backend) if m.fp4_weight_only else wb


def _routed_compute_factor(m: ModelSpec, s: SystemSpec, backend: str) -> float:
    """How much longer weight-only 4-bit experts' FLOPs take than the MoE compute shares say, for the
    backend's kernel on that GPU (calibration.w4a16_compute_factor); 1 for any other experts."""
    return cal.w4a16_compute_factor(s, backend) if m.fp4_weight_only else 1.0


def _ep_imbalance(s: SystemSpec, moe_ep: int) -> float:
    """The busiest expert-parallel rank's routed tokens over the mean: routing is skewed (a few hot
    experts take many tokens; AIC measures its MoE kernels with power-law token distributions), and
    under EP the rank holding the hottest experts does their work alone while the others wait. Split
    by MoE TP instead, every GPU holds a slice of every expert: no imbalance. ``ep ** exponent``
    (calibration.MOE_EP_IMBALANCE_EXP), never more than all tokens on one rank."""
    if moe_ep <= 1:
        return 1.0
    return float(min(moe_ep ** cal.value("MOE_EP_IMBALANCE_EXP", s), moe_ep))


def _plain_tp(m: ModelSpec, par: tuple[int, int, int, int]) -> bool:
    """Whether layout ``par`` is tensor parallelism only (a dense model's MoE sizes do not matter)."""
    tp, dp, moe_tp, moe_ep = par
    return dp == 1 and moe_ep == 1 and (moe_tp == tp or not m.num_experts)


def _exchange_ms(m: ModelSpec, s: SystemSpec, gpus: int, tokens: int) -> float:
    """Dispatch and combine of every MoE layer's tokens over ``gpus`` GPUs (all-gather and
    reduce-scatter, or all-to-all: each moves (n-1)/n of the tokens' activations per GPU)."""
    if gpus <= 1:
        return 0.0
    size = tokens * m.hidden_size * _ACTIVATION_BYTES
    bandwidth = s.interconnect_gbs * 1e9 * cal.value("ALLREDUCE_EFFICIENCY", s)
    one = 2.0 * (gpus - 1) / gpus * size / bandwidth * 1e3 + cal.value("ALLREDUCE_LATENCY_US", s) / 1e3
    return _moe_layers(m) * one


def prefill_raw_ms(
    m: ModelSpec, s: SystemSpec, tp: int, batch: int, isl: int, backend: str = "vllm"
) -> float:
    return _step_ms(m, s, (tp, 1, tp, 1), batch, isl, decode=False, backend=backend)


def decode_raw_ms(
    m: ModelSpec, s: SystemSpec, tp: int, batch: int, context: int, backend: str = "vllm"
) -> float:
    return _step_ms(m, s, (tp, 1, tp, 1), batch, context, decode=True, backend=backend)


@lru_cache(maxsize=1 << 16)
def _prefill_envelope(m: ModelSpec, s: SystemSpec, tp: int, batch: int, isl: int, backend: str) -> float:
    return min(prefill_raw_ms(m, s, t, batch, isl, backend) for t in range(1, tp + 1))


@lru_cache(maxsize=1 << 16)
def _decode_envelope(m: ModelSpec, s: SystemSpec, tp: int, batch: int, context: int, backend: str) -> float:
    return min(decode_raw_ms(m, s, t, batch, context, backend) for t in range(1, tp + 1))


class BuiltinLatency:
    """The analytic roofline model: needs no data, covers every registry system (AMD included).

    ``backend`` matters only for block-scaled FP8 checkpoints: AIC's vLLM tables show their GEMMs'
    fixed cost (:func:`_fp8_block_ms`), its TRT-LLM and SGLang tables do not (per-tensor speed).
    """

    name = "builtin"

    def __init__(self, backend: Backend = "vllm") -> None:
        self.backend = backend

    def _model(self, model: ModelSpec) -> ModelSpec:
        if model.fp8_block_scaled and self.backend != "vllm":
            return replace(model, fp8_block_scaled=False)
        return model

    def prefill_ms(self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int) -> float:
        return _prefill_envelope(self._model(model), system, tp, batch, isl, self.backend)

    def decode_step_ms(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, context: int
    ) -> float:
        return _decode_envelope(self._model(model), system, tp, batch, context, self.backend)

    def layout_prefill_ms(
        self, model: ModelSpec, system: SystemSpec, par: tuple[int, int, int, int], isl: int
    ) -> float:
        """One prompt per attention data-parallel rank of a worker laid out as ``par`` (TP, DP, MoE
        TP, MoE EP); a tensor-parallel layout answers as :meth:`prefill_ms` (its envelope)."""
        if _plain_tp(model, par):
            return self.prefill_ms(model, system, par[0], 1, isl)
        return _step_ms(self._model(model), system, par, 1, isl, decode=False, backend=self.backend)

    def layout_mixed_ms(
        self,
        model: ModelSpec,
        system: SystemSpec,
        par: tuple[int, int, int, int],
        prompts: float,
        isl: int,
        gen: int,
        context: int,
    ) -> float:
        """An in-flight-batching pass (:func:`mixed_ms`); without prefill tokens a decode step."""
        if prompts <= 0:
            return self.layout_decode_ms(model, system, par, gen, context)
        return mixed_ms(self._model(model), system, par, prompts, isl, gen, context, self.backend)

    def layout_decode_ms(
        self, model: ModelSpec, system: SystemSpec, par: tuple[int, int, int, int], batch: int, context: int
    ) -> float:
        """One decode step of ``batch`` sequences per attention rank of layout ``par``."""
        if _plain_tp(model, par):
            return self.decode_step_ms(model, system, par[0], batch, context)
        return _step_ms(self._model(model), system, par, batch, context, decode=True, backend=self.backend)


def layout_kv_capacity(m: ModelSpec, s: SystemSpec, par: tuple[int, int, int, int]) -> int:
    """Tokens of KV cache one attention rank of layout ``par`` holds beside its share of the weights."""
    tp, _dp, moe_tp, moe_ep = par
    embeddings = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    routed = _moe_layers(m) * m.num_experts * _expert_params(m)
    wb = dtype_bytes(m.weight_dtype)
    per_gpu = (total_params(m) - embeddings - routed) * wb / tp + embeddings * 2.0 / tp
    per_gpu += routed * wb / (moe_tp * moe_ep)
    usable = s.memory_gib * cal.MEMORY_UTILIZATION - cal.ACTIVATION_RESERVE_GIB
    free = usable * _GIB - per_gpu
    return 0 if free <= 0 else int(free // kv_bytes_per_token(m, tp))

"""The planner's vocabulary: what is asked (:class:`PlanRequest`), what is known about models and GPU
systems (:class:`ModelSpec`, :class:`SystemSpec`), where latencies come from (:class:`LatencyModel`)
and what is answered (:class:`PlanResult`).

These types are the contract between the planner, ``aiplane plan`` and the DGDR controller: they are
frozen dataclasses of plain values, so a plan can cross a thread or process boundary and be compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Backend = Literal["vllm", "sglang", "trtllm"]
Vendor = Literal["nvidia", "amd"]


class PlannerError(ValueError):
    """Bad input: the message names the field and, for unknown names, the known ones."""


@dataclass(frozen=True)
class ModelSpec:
    """What the latency and memory models need of a transformer (from its Hugging Face config)."""

    name: str
    layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    #: 0 for a dense model.
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    #: Dense layers before the MoE ones (DeepSeek's first_k_dense_replace), and shared experts.
    dense_layers: int = 0
    shared_experts: int = 0
    #: bf16 | fp8 | fp4 — follows the checkpoint (``-FP8`` IDs, ``quantization_config``).
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    #: Multi-head latent attention (DeepSeek): the KV cache holds kv_lora_rank + rope dims per token.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    #: MLA's query compression rank and per-head no-RoPE query/key and value dims (0: not MLA).
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    #: Input embedding and LM head share one matrix (small Qwen3 models).
    tie_word_embeddings: bool = False
    #: FP8 weights with per-block scales (``weight_block_size``, 128x128: Qwen's own Qwen3-*-FP8,
    #: DeepSeek-V3/R1), whose GEMMs vLLM runs much slower than per-tensor FP8 at decode sizes.
    fp8_block_scaled: bool = False
    #: 4-bit weights with 16-bit activations (MXFP4: gpt-oss): the GEMMs dequantise the weights and
    #: multiply at the BF16 rate, not the FP4 one (AIC's tables key them ``w4a16_mxfp4`` on every system).
    fp4_weight_only: bool = False


@dataclass(frozen=True)
class SystemSpec:
    """One GPU system's public specification (per GPU unless said otherwise)."""

    name: str
    vendor: Vendor
    memory_gib: float
    memory_bandwidth_tbs: float
    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float
    #: Intra-node GPU-to-GPU bandwidth per GPU (NVLink / Infinity Fabric), GB/s.
    interconnect_gbs: float
    gpus_per_node: int
    #: The extended resource pods request: ``nvidia.com/gpu`` or ``amd.com/gpu``.
    resource: str


class LatencyModel(Protocol):
    """Where latencies come from: the built-in analytic model or AIConfigurator's engine."""

    name: str

    def prefill_ms(self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int) -> float:
        """Time to prefill ``batch`` requests of ``isl`` tokens on one engine of ``tp`` GPUs."""
        ...

    def decode_step_ms(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, context: int
    ) -> float:
        """One decode step for ``batch`` requests at ``context`` tokens on one engine of ``tp`` GPUs."""
        ...


@runtime_checkable
class DecodeSimulating(Protocol):
    """A :class:`LatencyModel` that can also time a request's whole decode (optional).

    One step at the mean context is a close stand-in for the mean step over a request's decode, but
    not an exact one (attention grows with the context, GEMMs do not), and the few per cent between
    them move which batch is the last under an ITL target. AIC's CLI simulates the decode step by
    step; a model that can do the same offers it here, and the search then rates decode workers by it.
    """

    def decode_tpot_ms(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int, osl: int
    ) -> float:
        """Mean time per output token over the ``osl - 1`` decode steps of ``batch`` requests whose
        prompts are ``isl`` tokens (the first output token comes from the prefill)."""
        ...

    def decode_fits(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int, osl: int
    ) -> bool:
        """Whether one engine of ``tp`` GPUs holds ``batch`` such requests (the model's own memory
        model, so that the decode batches tried end where its simulation's do)."""
        ...


@dataclass(frozen=True)
class PlanRequest:
    """One question, as ``aiplane plan``'s flags and the DGDR's spec ask it."""

    model: str
    backend: Backend
    system: str
    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float
    min_gpus_per_engine: int = 1
    #: None: the latency model's own limit (builtin: one node; aic: the sizes AIC's CLI searches).
    max_gpus_per_engine: int | None = None
    #: The GPUs (or partitions) the plan may use in all; None: no budget (size one engine pair).
    total_gpus: int | None = None
    #: AMD compute partitions per physical GPU on the target nodes (CPX on MI300X: 8); 1 = whole GPUs.
    partitions_per_gpu: int = 1
    #: auto: AIC's engine where aiconfigurator-core has data for (model, system, backend), else builtin.
    latency_model: Literal["auto", "builtin", "aic"] = "auto"
    #: A Hugging Face ``config.json`` for a model the registry does not know.
    model_config: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EnginePlan:
    """A worker kind: tensor-parallel size, how many workers, and (decode, aggregated) the batch."""

    tp: int
    workers: int
    #: Per attention data-parallel rank (a worker holds ``batch x dp`` requests).
    batch: int | None = None
    #: Attention data-parallel ranks, MoE tensor and expert parallelism (1: dense/TP only).
    dp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.dp

    @property
    def moe(self) -> bool:
        """Whether the worker uses more than tensor parallelism (data-parallel attention or EP)."""
        return self.dp > 1 or self.moe_ep > 1


@dataclass(frozen=True)
class Plan:
    """A disaggregated plan (prefill and decode) or an aggregated one (``agg``)."""

    tokens_per_second_per_gpu: float
    tokens_per_second_per_user: float
    ttft_ms: float
    itl_ms: float
    gpus: int
    meets_sla: bool
    prefill: EnginePlan | None = None
    decode: EnginePlan | None = None
    agg: EnginePlan | None = None


@dataclass(frozen=True)
class ProfilePoint:
    """One measured-or-modelled point of the profile data the SLA planner service reads."""

    x: int
    latency_ms: float
    tokens_per_second_per_gpu: float


@dataclass(frozen=True)
class PlanResult:
    """The answer: the best disaggregated and aggregated plans (None when infeasible at all)."""

    model: str
    system: str
    backend: Backend
    latency_model: str
    disagg: Plan | None
    agg: Plan | None
    #: (tokens/s/user, tokens/s/GPU) of the disaggregated candidates on the Pareto frontier.
    frontier: tuple[tuple[float, float], ...] = ()
    #: The GPU budget planned for (None: none given, one replica sized).
    total_gpus: int | None = None
    #: Prefill TTFT against ISL, decode ITL against context, at the chosen TPs.
    prefill_profile: tuple[ProfilePoint, ...] = field(default=())
    decode_profile: tuple[ProfilePoint, ...] = field(default=())

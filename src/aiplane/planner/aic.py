"""AIConfigurator's measured-kernel engine behind our :class:`LatencyModel` (``latency_model: aic``).

``aiconfigurator-core`` (a dependency) ships NVIDIA's measured kernel tables and a
compiled estimator. Its Python entry points are internal and versioned, so everything it is asked goes
through this module: our model and system names are mapped to AIC's here, its engine is reached only
through an ``Any``-typed handle, and its failures come out as :class:`PlannerError` naming the field.
The mapping is plain data and is tested without the package installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from aiplane.planner.types import ModelSpec, PlannerError, SystemSpec

#: The engine release this mapping was written and calibrated against (pyproject's ``aic`` extra).
AIC_PACKAGE = "aiconfigurator-core"
AIC_VERSION = "0.12.0"
INSTALL_HINT = "pip install aiconfigurator-core==0.12.0 (a dependency of aiplane)"

AicBackend = Literal["vllm", "sglang", "trtllm"]

#: AIC's systems with measured data (0.12.0: ``aiconfigurator_core/systems/*.yaml``), keyed by our
#: normalised names. An NVIDIA system missing here has no data; AMD systems have none at all.
AIC_SYSTEMS: dict[str, str] = {
    "a100": "a100_sxm",
    "a100sxm": "a100_sxm",
    "a100pcie": "a100_pcie",
    "a30": "a30",
    "h100": "h100_sxm",
    "h100sxm": "h100_sxm",
    "h100pcie": "h100_pcie",
    "h200": "h200_sxm",
    "h200sxm": "h200_sxm",
    "b200": "b200_sxm",
    "b200sxm": "b200_sxm",
    "b300": "b300_sxm",
    "b300sxm": "b300_sxm",
    "gb200": "gb200",
    "gb200sxm": "gb200",
    "gb300": "gb300",
    "l4": "l4",
    "l40s": "l40s",
    "rtxpro6000": "rtx_pro_6000_server",
    "rtxpro6000server": "rtx_pro_6000_server",
}


@dataclass(frozen=True)
class AicModel:
    """One of AIC's bundled model configs and the weight dtype its checkpoint ships in."""

    model_id: str
    weight_dtype: str


#: Our architecture key -> AIC's bundled checkpoints (``aiconfigurator_core/model_configs``), one per
#: weight dtype it ships. A dtype without its own checkpoint is asked of the first one with an explicit
#: GEMM quantisation, as AIC's CLI does for ``--gemm-quant-mode``.
AIC_MODELS: dict[str, tuple[AicModel, ...]] = {
    "llama318b": (AicModel("meta-llama/Meta-Llama-3.1-8B", "bf16"),),
    "llama3170b": (
        AicModel("meta-llama/Meta-Llama-3.1-70B", "bf16"),
        AicModel("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),
    ),
    "llama31405b": (AicModel("meta-llama/Meta-Llama-3.1-405B", "bf16"),),
    "qwen306b": (AicModel("Qwen/Qwen3-0.6B", "bf16"),),
    "qwen317b": (AicModel("Qwen/Qwen3-1.7B", "bf16"),),
    "qwen38b": (AicModel("Qwen/Qwen3-8B", "bf16"),),
    "qwen332b": (AicModel("Qwen/Qwen3-32B", "bf16"), AicModel("Qwen/Qwen3-32B-FP8", "fp8")),
    "qwen330ba3b": (AicModel("Qwen/Qwen3-30B-A3B", "bf16"), AicModel("Qwen/Qwen3-30B-A3B-FP8", "fp8")),
    "qwen3235ba22b": (
        AicModel("Qwen/Qwen3-235B-A22B", "bf16"),
        AicModel("Qwen/Qwen3-235B-A22B-FP8", "fp8"),
        AicModel("nvidia/Qwen3-235B-A22B-NVFP4", "fp4"),
    ),
    "deepseekv3": (AicModel("deepseek-ai/DeepSeek-V3", "fp8"),),
    "deepseekr1": (AicModel("deepseek-ai/DeepSeek-R1", "fp8"),),
    "gptoss20b": (AicModel("openai/gpt-oss-20b", "fp4"),),
    "gptoss120b": (AicModel("openai/gpt-oss-120b", "fp4"),),
    "mixtral8x7b": (AicModel("mistralai/Mixtral-8x7B-v0.1", "bf16"),),
    "mixtral8x22b": (AicModel("mistralai/Mixtral-8x22B-v0.1", "bf16"),),
}

#: Our weight dtype -> AIC's GEMM quantisation mode (``GEMMQuantMode`` member names).
_GEMM_QUANT = {"bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4"}
_SUFFIXES = re.compile(
    r"-(instruct|chat|base|hf|thinking|v0\.\d|\d{4}|fp8|fp4|nvfp4|mxfp4|static|pertensor|dynamic)(?=-|$)"
)


def _model_key(name: str) -> str:
    """Organisation, checkpoint suffixes, a ``meta-`` prefix and punctuation removed, lower case."""
    base = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-")
    previous = None
    while previous != base:
        previous = base
        base = _SUFFIXES.sub("", base)
    return re.sub(r"[^a-z0-9]", "", base).removeprefix("meta")


@dataclass(frozen=True)
class AicTarget:
    """What AIC is asked for one of our models: its model id and GEMM quantisation (None: as shipped)."""

    model_id: str
    gemm_quant_mode: str | None


def aic_system(system: SystemSpec) -> str:
    """AIC's name for ``system``, or a :class:`PlannerError` when AIC has no measured data for it."""
    if system.vendor != "nvidia":
        raise PlannerError(
            f"system: AIConfigurator has no measured data for {system.name} ({system.vendor.upper()}); "
            "use latencyModel builtin for non-NVIDIA systems"
        )
    # "nvidia-h100-sxm5-80gb" -> "h100sxm": vendor, memory size and SXM generation do not change the data.
    name = re.sub(r"[-_ ]\d+gb\b", "", system.name.lower()).removeprefix("nvidia")
    key = re.sub(r"(sxm)\d$", r"\1", re.sub(r"[^a-z0-9]", "", name))
    found = AIC_SYSTEMS.get(key)
    if found is None:
        raise PlannerError(
            f"system: AIConfigurator has no measured data for {system.name!r}; it has: "
            + ", ".join(sorted(set(AIC_SYSTEMS.values())))
        )
    return found


def aic_model(model: ModelSpec) -> AicTarget:
    """AIC's bundled config for ``model`` and the quantisation to ask for its weight dtype."""
    variants = AIC_MODELS.get(_model_key(model.name))
    if variants is None:
        raise PlannerError(
            f"model: AIConfigurator {AIC_VERSION} bundles no config for {model.name!r}; use latencyModel "
            "builtin, or one of: " + ", ".join(v[0].model_id for v in AIC_MODELS.values())
        )
    if model.weight_dtype not in _GEMM_QUANT:
        raise PlannerError(f"model: weight dtype {model.weight_dtype!r} of {model.name!r} is not supported")
    for variant in variants:
        if variant.weight_dtype == model.weight_dtype:
            return AicTarget(variant.model_id, None)
    return AicTarget(variants[0].model_id, _GEMM_QUANT[model.weight_dtype])


_DATABASES: dict[tuple[str, str, str | None], Any] = {}


@contextmanager
def fast_yaml() -> Iterator[None]:
    """AIC's YAML reads through libyaml's C parser while inside: its first version lookup parses
    every system's YAML file (over a second in pure Python, most of a cold plan's set-up). The same
    documents, the same safe constructor; only the parser differs. Without libyaml, unchanged."""
    yaml: Any = importlib.import_module("yaml")
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None or getattr(yaml.safe_load, "_aiplane_fast", False):
        yield
        return
    original = yaml.safe_load

    def safe_load(stream: Any) -> Any:
        return yaml.load(stream, Loader=loader)

    safe_load._aiplane_fast = True  # type: ignore[attr-defined]
    yaml.safe_load = safe_load
    try:
        yield
    finally:
        yaml.safe_load = original


_VERSIONS: dict[tuple[str, str, str | None], Any] = {}


def literal_version(aic_sys: str, backend: str, version: str | None) -> Any:
    """AIC's data version for (system, backend) (an error when it has none); the default one from
    the shipped facts (aic_facts), else looked up once per process: AIC parses every system's YAML
    file for it (~0.1-0.3 s), and a plan asks twice (whether AIC has data, then to load it)."""
    key = (aic_sys, backend, version)
    if key not in _VERSIONS:
        facts = importlib.import_module("aiplane.planner.aic_facts")
        found = facts.default_version(aic_sys, backend) if version is None else None
        if found is None:
            with fast_yaml():
                found = _load_engine_module()._literal_backend_version(aic_sys, backend, version, None, None)
        _VERSIONS[key] = found
    return _VERSIONS[key]


def _database(aic_sys: str, backend: str, version: str | None) -> Any:
    """AIC's measured tables for (system, backend): loaded once per process (seconds), then shared."""
    key = (aic_sys, backend, version)
    found = _DATABASES.get(key)
    if found is None:
        found = _DATABASES[key] = load_database(aic_sys, backend, literal_version(aic_sys, backend, version))
        if found is not None:
            # AIC's attention-lane ranking input, measured once per release (the largest part of a
            # cold plan otherwise): aic_facts.
            importlib.import_module("aiplane.planner.aic_facts").seed(found)
    return found


def load_database(aic_sys: str, backend: str, literal: Any) -> Any:
    """A new load of AIC's tables for (system, backend, data version); None where it has none."""
    with fast_yaml():
        return _load_engine_module()._maybe_load_database(aic_sys, backend, literal, None)


def installed() -> bool:
    """Whether aiconfigurator-core can be imported (without importing it: that takes seconds)."""
    if "aiconfigurator_core" in sys.modules:
        return sys.modules["aiconfigurator_core"] is not None
    try:
        return importlib.util.find_spec("aiconfigurator_core") is not None
    except (ImportError, ValueError):
        return False


def _load_engine_module() -> Any:
    if not installed():
        raise ImportError(f"the aic latency model needs {AIC_PACKAGE}=={AIC_VERSION}: {INSTALL_HINT}")
    try:
        return importlib.import_module("aiconfigurator_core.sdk.engine")
    except ImportError as err:
        raise ImportError(
            f"the aic latency model needs {AIC_PACKAGE}=={AIC_VERSION}: {INSTALL_HINT}"
        ) from err


#: The role a session without MoE phases is asked as (a dense model's roles share one session).
PREFILL_ROLE = ("context",)


def comm_phases(mode: str) -> tuple[str, ...]:
    """The phases whose large-EP data a run of ``mode`` needs (a prefill worker only the context)."""
    return ("context",) if mode == "static_ctx" else ("context", "generation")


class AicLatency:
    """Latencies from AIC's compiled engine: one engine per (model, system, TP), queries memoised.

    A prefill is AIC's context phase for ``batch`` prompts of ``isl`` tokens; a decode step is one
    generation step of ``batch`` sequences at ``context`` tokens; the TPOT of a request
    (:meth:`decode_tpot_ms`, what the search rates decode workers by) is AIC's whole simulated
    generation divided by its ``osl - 1`` steps, as its CLI's ``static_gen`` run computes it. AIC's own search multiplies these
    (prefill x1.1, TPOT x1.08, queueing x1.8); those are search policy and stay in the planner.
    """

    name = "aic"

    def __init__(self, backend: AicBackend = "vllm", backend_version: str | None = None) -> None:
        # Checked now (a missing package is bad input), imported when first needed: a plan answered
        # from the on-disk cache (aic_search) never pays AIC's import (numpy, pandas: seconds).
        if not installed():
            raise ImportError(f"the aic latency model needs {AIC_PACKAGE}=={AIC_VERSION}: {INSTALL_HINT}")
        self._module: Any = None
        # AIC warns on stderr about every low-fidelity table it loads; only its errors matter here.
        for logger in ("aiconfigurator", "aiconfigurator_core"):
            logging.getLogger(logger).setLevel(logging.ERROR)
        self.backend = backend
        self.backend_version = backend_version
        self._engines: dict[tuple[str, str | None, str, int], Any] = {}
        self._sessions: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
        self._fits: dict[tuple[str, str, int, int, int, int], bool] = {}
        #: Per (model, quantisation, system, role): whether its context attention is timed at BF16.
        self._fmha: dict[tuple[str, str | None, str, tuple[str, ...]], bool] = {}
        self._memo: dict[tuple[str, str, str, int, int, int, int], float] = {}

    @property
    def _engine_module(self) -> Any:
        if self._module is None:
            self._module = _load_engine_module()
        return self._module

    def _engine(self, model: ModelSpec, system: SystemSpec, tp: int) -> Any:
        target = aic_model(model)
        aic_sys = aic_system(system)
        key = (target.model_id, target.gemm_quant_mode, aic_sys, tp)
        engine = self._engines.get(key)
        if engine is None:
            with fast_yaml():
                engine = self._compile(target, aic_sys, tp, model)
            self._engines[key] = engine
        return engine

    def _compile(self, target: AicTarget, aic_sys: str, tp: int, model: ModelSpec) -> Any:
        return self._engine_module.EngineHandle.compile(
            target.model_id,
            aic_sys,
            self.backend,
            backend_version=self.backend_version,
            tp_size=tp,
            gemm_quant_mode=target.gemm_quant_mode,
            # MoE layers split like attention (AIC requires tp x dp == moe_tp x moe_ep).
            **({"moe_tp_size": tp, "moe_ep_size": 1} if model.num_experts else {}),
        )

    def key(self, model: ModelSpec, system: SystemSpec) -> tuple[Any, ...]:
        """What AIC's answers for a model on a system depend on (memo key across plans)."""
        target = aic_model(model)
        key = (
            target.model_id,
            target.gemm_quant_mode,
            aic_system(system),
            self.backend,
            self.backend_version,
        )
        # MoE answers depend on the large-EP pricing (aic_moe_comm): answers cached before it are stale.
        return (*key, "large-ep") if model.num_experts else key

    def _session(
        self, model: ModelSpec, system: SystemSpec, tp: int, layout: Any = None, phases: tuple[str, ...] = ()
    ) -> tuple[Any, Any, Any]:
        """AIC's (model, database, backend) for its static runs: what its CLI sizes workers with.

        ``layout`` (a :class:`aiplane.planner.search.Layout`) adds attention data parallelism and the
        MoE layers' TP/EP; without it a MoE model's experts are split like its attention (MoE TP = TP).
        """
        target = aic_model(model)
        aic_sys = aic_system(system)
        dp, moe_tp, moe_ep = (1, tp, 1) if layout is None else (layout.dp, layout.moe_tp, layout.moe_ep)
        if not model.num_experts:
            moe_tp = 1
        # The phases matter only to a MoE model's large-EP pricing: a dense model's prefill, decode and
        # aggregated runs share one session (each new one costs AIC's engine a warm-up of ~0.2 s).
        phases = phases if model.num_experts else ()
        key = (target.model_id, target.gemm_quant_mode, aic_sys, tp, dp, moe_tp, moe_ep, phases)
        session = self._sessions.get(key)
        if session is None:
            with fast_yaml():
                session = self._new_session(model, system, target, aic_sys, (tp, dp, moe_tp, moe_ep), phases)
            self._sessions[key] = session
        return session

    def _new_session(
        self,
        model: ModelSpec,
        system: SystemSpec,
        target: AicTarget,
        aic_sys: str,
        par: tuple[int, int, int, int],
        phases: tuple[str, ...],
    ) -> tuple[Any, Any, Any]:
        """A new (model, database, backend) of AIC for one layout (its YAML read with libyaml)."""
        tp, dp, moe_tp, moe_ep = par
        try:
            database = _database(aic_sys, self.backend, self.backend_version)
            config = importlib.import_module("aiconfigurator_core.sdk.config_builders").build_model_config(
                tp_size=tp,
                pp_size=1,
                attention_dp_size=dp,
                moe_tp_size=moe_tp,
                moe_ep_size=moe_ep,
                gemm_quant_mode=target.gemm_quant_mode,
            )
            # An FP8 checkpoint's context attention is timed at BF16 where its CLI would: decided per
            # role from the tables before the model is built, never from an earlier run's error, so an
            # answer does not depend on what this process (or the answer cache) was asked before.
            if self._bf16_fmha(target, aic_sys, database, phases or PREFILL_ROLE):
                config.fmha_quant_mode = importlib.import_module(
                    "aiconfigurator_core.sdk.common"
                ).FMHAQuantMode.bfloat16
            if model.num_experts and phases:
                self._large_ep(config, target, database, (dp, moe_tp, moe_ep), phases)
            aic_model_obj = importlib.import_module("aiconfigurator_core.sdk.models").get_model(
                target.model_id, config, self.backend
            )
        except PlannerError:
            raise
        except Exception as err:  # AIC's own failures mean "cannot model this"
            raise PlannerError(
                f"latencyModel aic: AIConfigurator cannot model {model.name} on {system.name} "
                f"({self.backend}): {err}"
            ) from err
        backend = importlib.import_module("aiconfigurator_core.sdk.backends.factory").get_backend(
            self.backend
        )
        return (aic_model_obj, database, backend)

    def _bf16_fmha(self, target: AicTarget, aic_sys: str, database: Any, phases: tuple[str, ...]) -> bool:
        key = (target.model_id, target.gemm_quant_mode, aic_sys, phases)
        found = self._fmha.get(key)
        if found is None:
            comm = importlib.import_module("aiplane.planner.aic_moe_comm")
            found = self._fmha[key] = comm.context_fmha_bf16(
                target.model_id, self.backend, database, target.gemm_quant_mode, phases
            )
        return found

    def _large_ep(
        self,
        config: Any,
        target: AicTarget,
        database: Any,
        par: tuple[int, int, int],
        phases: tuple[str, ...],
    ) -> None:
        """Price the layout's MoE all-to-all from AIC's large-EP data where its CLI would
        (:mod:`aiplane.planner.aic_moe_comm`); an EP across nodes without that data is no layout."""
        comm = importlib.import_module("aiplane.planner.aic_moe_comm")
        dp, moe_tp, moe_ep = par
        found = comm.coverage(target.model_id, self.backend, database, target.gemm_quant_mode)
        resolved = comm.resolve(found, self.backend, dp, moe_tp, moe_ep, phases)
        per_node = int(
            (getattr(database, "system_spec", {}) or {}).get("node", {}).get("num_gpus_per_node", 8)
        )
        if resolved is None:
            if moe_ep > per_node:
                raise ValueError(
                    f"expert parallelism {moe_ep} spans nodes and AIC has no all-to-all data for it"
                )
            return
        config.moe_comm_backend = resolved
        config.num_gpus_per_node = per_node
        config.system = getattr(database, "system", None)
        if self.backend == "sglang" and "deepseek" in target.model_id.lower():
            # AIC's SGLang wide-EP MLA rows are FP8: its resolver gives a DeepSeek layout that selects
            # DeepEP FP8 attention and KV cache unless the user set them, whatever the role's fallback.
            common = importlib.import_module("aiconfigurator_core.sdk.common")
            config.fmha_quant_mode = common.FMHAQuantMode.fp8_block
            config.kvcache_quant_mode = common.KVCacheQuantMode.fp8

    def run(
        self,
        model: ModelSpec,
        system: SystemSpec,
        layout: Any,
        mode: str,
        batch: int,
        isl: int,
        osl: int,
        correction: float,
    ) -> Any:
        """AIC's static run (``static_ctx`` or ``static_gen``) of one worker layout: its summary."""
        runtime = importlib.import_module("aiconfigurator_core.sdk.config").RuntimeConfig(
            batch_size=batch, isl=isl, osl=osl
        )
        try:
            phases = comm_phases(mode)
            aic_model_obj, database, backend = self._session(model, system, layout.tp, layout, phases)
            return backend.run_static(aic_model_obj, database, runtime, mode, 32, correction)
        except Exception as err:  # as in _query
            raise PlannerError(
                f"latencyModel aic: AIConfigurator cannot model {model.name} on {system.name} "
                f"({self.backend}, {layout.label}): {err}"
            ) from err

    def run_agg(
        self,
        model: ModelSpec,
        system: SystemSpec,
        layout: Any,
        batch: int,
        isl: int,
        osl: int,
        ctx_tokens: int,
    ) -> Any:
        """AIC's in-flight-batching step model for one layout: ``batch`` requests, ``ctx_tokens`` of
        prefill per step (its aggregated sweep's point)."""
        runtime = importlib.import_module("aiconfigurator_core.sdk.config").RuntimeConfig(
            batch_size=batch, isl=isl, osl=osl
        )
        try:
            phases = comm_phases("agg")
            aic_model_obj, database, backend = self._session(model, system, layout.tp, layout, phases)
            return backend.run_agg(aic_model_obj, database, runtime, ctx_tokens=ctx_tokens)
        except Exception as err:  # as in _query
            raise PlannerError(
                f"latencyModel aic: AIConfigurator cannot model {model.name} on {system.name} "
                f"({self.backend}, {layout.label}, aggregated): {err}"
            ) from err

    def _query(
        self, kind: str, model: ModelSpec, system: SystemSpec, tp: int, batch: int, x: int, osl: int = 2
    ) -> float:
        key = (kind, model.name, system.name, tp, batch, x, osl)
        value = self._memo.get(key)
        if value is not None:
            return value
        # Kept across processes too (aic_search's cache): a repeated plan needs no engine at all.
        cache = importlib.import_module("aiplane.planner.aic_search")
        disk_key = ("query", kind, *self.key(model, system), tp, batch, x, osl)
        stored = cache.recall(disk_key)
        if stored is not cache.MISSING:
            value = self._memo[key] = float(stored)
            return value
        if value is None:
            try:
                engine = self._engine(model, system, tp)
                if kind == "prefill":
                    value = float(engine.predict_prefill_latency(batch, x))
                else:
                    # The whole generation of `osl - 1` steps from `x` tokens of context (osl 2: one
                    # step), summed by the engine's stride quadrature: AIC's static_gen run exactly.
                    value = float(engine.predict_decode_latency(batch, x, osl)) / (osl - 1)
            except PlannerError:
                raise
            # AIC raises ValueError, its own errors (missing FLOPs for a dtype, no database version) and
            # download errors; each means "cannot model this", which the caller must see as bad input.
            except Exception as err:
                raise PlannerError(
                    f"latencyModel aic: AIConfigurator cannot model {model.name} on {system.name} "
                    f"({self.backend}, TP {tp}): {err}"
                ) from err
            self._memo[key] = cache.remember(disk_key, value)
        return value

    def prefill_ms(self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int) -> float:
        return self._query("prefill", model, system, tp, batch, isl)

    def decode_step_ms(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, context: int
    ) -> float:
        return self._query("decode", model, system, tp, batch, context)

    def decode_fits(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int, osl: int
    ) -> bool:
        """Whether AIC's memory model admits ``batch`` decoding requests: weights, activations and KV
        within the GPU, and the KV within the backend's cache fraction (its static_gen OOM checks)."""
        key = (model.name, system.name, tp, batch, isl, osl)
        fits = self._fits.get(key)
        if fits is None:
            try:
                aic_model_obj, database, backend = self._session(model, system, tp)
                runtime = importlib.import_module("aiconfigurator_core.sdk.config").RuntimeConfig(
                    batch_size=batch, isl=isl, osl=osl
                )
                summary = backend.run_static(aic_model_obj, database, runtime, mode="static_gen")
                fits = not (summary.check_oom() or summary.check_kv_cache_oom())
            except PlannerError:
                raise
            except Exception as err:  # as in _query: AIC's own failures mean "cannot model this"
                raise PlannerError(
                    f"latencyModel aic: AIConfigurator cannot size {model.name} on {system.name} "
                    f"({self.backend}, TP {tp}): {err}"
                ) from err
            self._fits[key] = fits
        return fits

    def decode_tpot_ms(
        self, model: ModelSpec, system: SystemSpec, tp: int, batch: int, isl: int, osl: int
    ) -> float:
        """AIC's TPOT: its generation time over ``osl - 1`` steps from ``isl`` tokens, per step."""
        return self._query("decode", model, system, tp, batch, isl, osl)

"""The aic latency model: our names mapped to AIConfigurator's (always), its engine (when installed)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from aiplane.planner import aic
from aiplane.planner.aic import AIC_VERSION, AicLatency, AicTarget, aic_model, aic_system
from aiplane.planner.types import ModelSpec, PlannerError, SystemSpec

HAVE_AIC = importlib.util.find_spec("aiconfigurator_core") is not None
needs_aic = pytest.mark.skipif(
    not HAVE_AIC, reason=f"aiconfigurator-core=={AIC_VERSION} not installed (pip install 'aiplane[aic]')"
)

QWEN3_32B = ModelSpec("Qwen/Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936)
H200 = SystemSpec("h200_sxm", "nvidia", 140.4, 4.8, 989.0, 1979.0, 0.0, 900.0, 8, "nvidia.com/gpu")
MI300X = SystemSpec("mi300x", "amd", 192.0, 5.3, 1307.4, 2614.9, 0.0, 896.0, 8, "amd.com/gpu")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("h200_sxm", "h200_sxm"),
        ("H200", "h200_sxm"),
        ("nvidia-h100-sxm5-80gb", "h100_sxm"),
        ("a100_sxm", "a100_sxm"),
        ("a100-80gb", "a100_sxm"),
        ("b200_sxm", "b200_sxm"),
        ("gb200", "gb200"),
        ("l40s", "l40s"),
    ],
)
def test_nvidia_systems_map_to_aic_names(name: str, expected: str) -> None:
    assert aic_system(replace(H200, name=name)) == expected


def test_amd_systems_are_refused_naming_the_system() -> None:
    with pytest.raises(PlannerError, match=r"system: AIConfigurator has no measured data for mi300x \(AMD\)"):
        aic_system(MI300X)


def test_an_nvidia_system_without_data_lists_the_ones_with_data() -> None:
    with pytest.raises(PlannerError, match=r"'v100'.*h200_sxm"):
        aic_system(replace(H200, name="v100"))


@pytest.mark.parametrize(
    ("name", "dtype", "expected"),
    [
        # The checkpoint AIC ships in the asked dtype is used as it is...
        ("Qwen/Qwen3-32B", "bf16", AicTarget("Qwen/Qwen3-32B", None)),
        ("Qwen/Qwen3-32B-FP8", "fp8", AicTarget("Qwen/Qwen3-32B-FP8", None)),
        ("meta-llama/Llama-3.1-70B-Instruct", "bf16", AicTarget("meta-llama/Meta-Llama-3.1-70B", None)),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8", AicTarget("nvidia/Llama-3.1-70B-Instruct-FP8", None)),
        ("deepseek-ai/DeepSeek-R1-0528", "fp8", AicTarget("deepseek-ai/DeepSeek-R1", None)),
        ("openai/gpt-oss-120b", "fp4", AicTarget("openai/gpt-oss-120b", None)),
        # ...and a dtype it has no checkpoint for is asked as an explicit GEMM quantisation.
        ("Qwen/Qwen3-8B-FP8", "fp8", AicTarget("Qwen/Qwen3-8B", "fp8")),
        ("meta-llama/Llama-3.1-8B", "fp4", AicTarget("meta-llama/Meta-Llama-3.1-8B", "nvfp4")),
    ],
)
def test_models_map_to_aic_bundled_configs(name: str, dtype: str, expected: AicTarget) -> None:
    assert aic_model(replace(QWEN3_32B, name=name, weight_dtype=dtype)) == expected


def test_a_model_aic_does_not_bundle_is_refused_without_reaching_the_hub() -> None:
    with pytest.raises(
        PlannerError, match=r"model: AIConfigurator 0\.12\.0 bundles no config for 'Qwen/Qwen3-4B'"
    ):
        aic_model(replace(QWEN3_32B, name="Qwen/Qwen3-4B"))


def test_without_the_package_construction_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import fail, as on a machine without the extra.
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk", None)
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.engine", None)
    with pytest.raises(ImportError, match=r"pip install aiconfigurator-core==0.12.0"):
        AicLatency()


def test_the_pinned_version_is_the_one_pyproject_installs() -> None:
    from pathlib import Path

    pyproject = (Path(aic.__file__).parents[3] / "pyproject.toml").read_text()
    assert f'  "aiconfigurator-core=={AIC_VERSION}",' in pyproject  # a runtime dependency


@needs_aic
def test_engine_latencies_grow_with_work_and_shrink_with_tp() -> None:
    model = AicLatency("vllm")
    fp8 = replace(QWEN3_32B, name="Qwen/Qwen3-32B-FP8", weight_dtype="fp8")
    short, long = model.prefill_ms(fp8, H200, 1, 1, 1000), model.prefill_ms(fp8, H200, 1, 1, 4000)
    assert 0 < short < long
    assert model.prefill_ms(fp8, H200, 4, 1, 4000) < long
    small, big = model.decode_step_ms(fp8, H200, 2, 8, 4000), model.decode_step_ms(fp8, H200, 2, 128, 4000)
    assert 0 < small < big


@needs_aic
def test_engine_agrees_with_aic_cli_figures() -> None:
    # `aiconfigurator cli default` (0.12.0) for Qwen3-32B-FP8 on h200_sxm, vLLM, ISL 4000 / OSL 500
    # printed TTFT 509.162 ms for a TP1 prefill worker (= prefill x 1.1 x 1.8) and TPOT 19.947 ms at
    # TP4 batch 15 (= mean step x 1.08).
    model = AicLatency("vllm")
    fp8 = replace(QWEN3_32B, name="Qwen/Qwen3-32B-FP8", weight_dtype="fp8")
    assert model.prefill_ms(fp8, H200, 1, 1, 4000) * 1.1 * 1.8 == pytest.approx(509.162, rel=0.01)
    assert model.decode_step_ms(fp8, H200, 4, 15, 4250) * 1.08 == pytest.approx(19.947, rel=0.01)


@needs_aic
def test_engine_failures_come_out_as_planner_errors() -> None:
    # A100 has no FP8 tensor cores: AIC refuses an FP8 checkpoint there.
    a100 = replace(H200, name="a100_sxm", fp8_tflops=0.0)
    fp8 = replace(QWEN3_32B, name="Qwen/Qwen3-32B-FP8", weight_dtype="fp8")
    with pytest.raises(
        PlannerError, match=r"latencyModel aic: AIConfigurator cannot model Qwen/Qwen3-32B-FP8"
    ):
        AicLatency("vllm").prefill_ms(fp8, a100, 1, 1, 1000)


def test_the_request_backend_reaches_the_aic_latency_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM, SGLang and TRT-LLM have different measured tables: a TRT-LLM request must not be
    answered from vLLM's (the first wiring always built the vLLM engine)."""
    import aiplane.planner.aic as aic_module
    from aiplane.planner.api import load_latency_model

    built: list[str] = []

    class Recorder:
        name = "aic"

        def __init__(self, backend: str = "vllm") -> None:
            built.append(backend)

    monkeypatch.setattr(aic_module, "AicLatency", Recorder)
    monkeypatch.setattr("aiplane.planner.api._AIC_LATENCY", {})
    load_latency_model("aic", "trtllm")
    load_latency_model("aic", "sglang")
    assert built == ["trtllm", "sglang"]


@needs_aic
def test_a_process_loads_aic_tables_once_per_system_and_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DGDR controller plans many requests in one process: AIC's measured tables for a (system,
    backend) are loaded once and its latency model (with its compiled models) is reused."""
    import importlib

    from aiplane.planner import PlanRequest, aic_search, plan
    from aiplane.planner.api import load_latency_model

    engine = importlib.import_module("aiconfigurator_core.sdk.engine")
    perf_database = importlib.import_module("aiconfigurator_core.sdk.perf_database")
    loaded: list[tuple[str, str, object]] = []
    real = engine._maybe_load_database

    def recording(*args: object, **kwargs: object) -> object:
        database = real(*args, **kwargs)
        loaded.append((str(args[0]), str(args[1]), database))
        return database

    monkeypatch.setattr(engine, "_maybe_load_database", recording)
    fresh = type(perf_database.databases_cache)(perf_database.databases_cache.default_factory)
    monkeypatch.setattr(perf_database, "databases_cache", fresh)  # nothing loaded yet in this process
    monkeypatch.setattr(aic, "_DATABASES", {})
    monkeypatch.setattr("aiplane.planner.api._AIC_LATENCY", {})
    monkeypatch.setattr(aic_search, "_MEMO", {})
    monkeypatch.setenv("AIPLANE_CACHE_DIR", "off")  # every answer from AIC's engine, none from disk
    for isl in (1000, 1500):
        plan(
            PlanRequest(
                model="Qwen/Qwen3-0.6B",
                backend="vllm",
                system="h200",
                isl=isl,
                osl=200,
                ttft_ms=500,
                itl_ms=20,
                total_gpus=2,
                latency_model="aic",
            )
        )
    # Asked for by our sessions and by AIC's compiled engines, always the one object: loaded once.
    assert {(system, backend) for system, backend, _ in loaded} == {("h200_sxm", "vllm")}
    first = loaded[0][2]
    assert first is not None and all(database is first for _, _, database in loaded)
    assert load_latency_model("aic", "vllm") is load_latency_model("aic", "vllm")


@needs_aic
def test_decode_is_rated_as_aic_cli_simulates_it() -> None:
    """AIC's CLI times a decode worker over the request's OSL - 1 steps, and stops its batch sweep at
    its memory model's limit; one step at the mean context was a few per cent off, which moved ties."""
    # `aiconfigurator cli default` (0.12.0), Llama-3.1-8B on a100_sxm, vLLM, ISL 2000 / OSL 256:
    # TPOT 16.964 ms at TP4 batch 168 (x 1.08 included); no TP1 decode worker past batch 184.
    model = AicLatency("vllm")
    llama = ModelSpec("meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256)
    a100 = replace(H200, name="a100_sxm", memory_gib=80.0)
    assert model.decode_tpot_ms(llama, a100, 4, 168, 2000, 256) * 1.08 == pytest.approx(16.964, abs=5e-4)
    assert model.decode_fits(llama, a100, 1, 184, 2000, 256)
    assert not model.decode_fits(llama, a100, 1, 192, 2000, 256)


@needs_aic
def test_aic_plan_is_aic_cli_plan_among_equal_throughputs() -> None:
    """Prefill-bound plans tie on tokens/s/GPU for every decode batch past the bound; AIC's CLI names
    the first of equals in its (pandas-sorted) frame: TP4 batch 168 here, as our plan must."""
    from aiplane.planner import PlanRequest, plan

    result = plan(
        PlanRequest(
            model="meta-llama/Llama-3.1-8B",
            backend="vllm",
            system="a100",
            isl=2000,
            osl=256,
            ttft_ms=500,
            itl_ms=25,
            total_gpus=8,
            latency_model="aic",
        )
    )
    assert (
        result.disagg is not None and result.disagg.prefill is not None and result.disagg.decode is not None
    )
    assert (result.disagg.prefill.tp, result.disagg.prefill.workers) == (1, 4)
    assert (result.disagg.decode.tp, result.disagg.decode.workers, result.disagg.decode.batch) == (4, 1, 168)
    assert result.disagg.tokens_per_second_per_gpu == pytest.approx(856.397, abs=0.01)


@needs_aic
def test_moe_plan_is_aic_cli_best_plan_with_attention_dp() -> None:
    """A mixture-of-experts model: AIC's CLI searches attention data parallelism and MoE TP/EP, and
    its best plan here decodes on 4 attention-DP ranks whose experts are split 4-way by MoE TP."""
    from aiplane.planner import PlanRequest, plan

    # `aiconfigurator cli default` (0.12.0), Qwen3-30B-A3B on h200_sxm, vLLM, 8 GPUs, ISL 4000 /
    # OSL 500, TTFT 600 ms, TPOT 20 ms: 4 x prefill tp1 + 1 x decode tp1pp1dp4etp4ep1 bs 84, 1967.075.
    result = plan(
        PlanRequest(
            model="Qwen/Qwen3-30B-A3B",
            backend="vllm",
            system="h200",
            isl=4000,
            osl=500,
            ttft_ms=600,
            itl_ms=20,
            total_gpus=8,
        )
    )
    assert result.latency_model == "aic"  # chosen by default: AIC has data for this model and system
    disagg = result.disagg
    assert disagg is not None and disagg.prefill is not None and disagg.decode is not None
    assert (disagg.prefill.tp, disagg.prefill.dp, disagg.prefill.workers) == (1, 1, 4)
    decode = disagg.decode
    assert (decode.tp, decode.dp, decode.moe_tp, decode.moe_ep, decode.workers) == (1, 4, 4, 1, 1)
    assert decode.batch == 84
    assert disagg.tokens_per_second_per_gpu == pytest.approx(1967.075, abs=0.01)
    assert disagg.meets_sla
    # Its aggregated search too: 2 replicas of tp1pp1dp4etp4ep1 at batch 32 per rank, 1734.5 tokens/s/GPU.
    agg = result.agg
    assert agg is not None and agg.agg is not None
    assert (agg.agg.tp, agg.agg.dp, agg.agg.moe_tp, agg.agg.workers, agg.agg.batch) == (1, 4, 4, 2, 32)
    assert agg.tokens_per_second_per_gpu == pytest.approx(1734.5, abs=0.05)


@needs_aic
def test_deepseek_expert_parallel_layouts_are_priced_with_aic_large_ep_data() -> None:
    """AIC's CLI prices DeepSeek's pure expert-parallel layouts with its all-to-all data (large EP), not
    the fused MoE path: its best aggregated plan on 16 H200s (TRT-LLM, ISL 4000 / OSL 500) is
    tp1pp1dp16etp1ep16 at batch 11 and 4000 context tokens a step, 247.713 tokens/s/GPU."""
    from aiplane.planner.models import resolve_model
    from aiplane.planner.search import Layout
    from aiplane.planner.systems import resolve_system

    latency = AicLatency("trtllm")
    model, system = resolve_model("deepseek-ai/DeepSeek-V3"), resolve_system("h200")
    summary = latency.run_agg(model, system, Layout(1, 16, 1, 16), 11, 4000, 500, 4000)
    assert float(summary.get_result_dict()["tokens/s/gpu"]) == pytest.approx(247.713, abs=0.001)
    # MoE TP with EP stays on the fused path, and an EP across nodes without data is no layout.
    from aiplane.planner import aic_moe_comm

    found = {"context": {"a2a": {8, 16}}, "generation": {"a2a": {8, 16}}}
    assert aic_moe_comm.resolve(found, "trtllm", 16, 1, 16, aic_moe_comm.DECODE_PHASES) == {
        "context": "a2a",
        "generation": "a2a",
    }
    assert (
        aic_moe_comm.resolve(found, "trtllm", 1, 1, 8, aic_moe_comm.DECODE_PHASES) is None
    )  # no attention DP
    assert aic_moe_comm.resolve(found, "vllm", 8, 2, 4, aic_moe_comm.DECODE_PHASES) is None  # MoE TP
    assert (
        aic_moe_comm.resolve({"generation": {"a2a": {8}}}, "vllm", 8, 1, 8, aic_moe_comm.DECODE_PHASES)
        is None
    )


@needs_aic
def test_an_answer_does_not_depend_on_what_the_process_asked_before() -> None:
    """DeepSeek-V3 is an FP8 checkpoint whose fused context attention AIC measured only at BF16 on H200
    with SGLang. The BF16 fallback used to be taken when a run first raised AIC's missing-data error and
    then held for every later session, so an expert-parallel prefill priced before any fused one ran
    with FP8 attention and the same prefill priced after one at BF16: the plan for one request changed
    with the answers already on disk (395 against 220 tokens/s/GPU)."""
    from aiplane.planner.models import resolve_model
    from aiplane.planner.search import Layout
    from aiplane.planner.systems import resolve_system

    model, system = resolve_model("deepseek-ai/DeepSeek-V3"), resolve_system("h200")
    wide, fused = Layout(1, 8, 1, 8), Layout(1, 1, 1, 1)

    def ttft(latency: AicLatency) -> float:
        summary = latency.run(model, system, wide, "static_ctx", 1, 4000, 500, 1.0)
        return float(summary.get_result_dict()["ttft"])

    first = ttft(AicLatency("sglang"))
    after_fused = AicLatency("sglang")
    after_fused.run(model, system, fused, "static_ctx", 1, 4000, 500, 1.0)
    assert ttft(after_fused) == first


def test_without_aic_data_the_builtin_model_plans() -> None:
    """AMD systems have no AIC data: the default latency model falls back to the built-in one."""
    from aiplane.planner import PlanRequest, plan

    result = plan(
        PlanRequest(
            model="meta-llama/Llama-3.1-8B",
            backend="vllm",
            system="mi300x",
            isl=2000,
            osl=256,
            ttft_ms=500,
            itl_ms=25,
            total_gpus=8,
        )
    )
    assert result.latency_model == "builtin"


def test_the_answer_cache_is_per_aic_release() -> None:
    from aiplane.planner import aic_search

    assert aic_search.AIC_RELEASE == AIC_VERSION


@needs_aic
def test_the_documented_example_meets_its_sla_with_aic_by_default() -> None:
    """docs/planner.md's example, as a user types it (no --latency-model): AIC's engine plans it and
    the SLA is met, 5 x prefill TP4 + 3 x decode TP4 at batch 64 on 32 H200s, 572.7 tokens/s/GPU."""
    import json

    from typer.testing import CliRunner

    from aiplane.cli import app

    args = ["plan", "--model", "Qwen/Qwen3-32B-FP8", "--system", "h200", "--backend", "trtllm"]
    args += [
        "--isl",
        "4000",
        "--osl",
        "500",
        "--ttft",
        "300",
        "--itl",
        "10",
        "--total-gpus",
        "32",
        "-o",
        "json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["latencyModel"] == "aic" and doc["totalGpus"] == 32
    disagg = doc["disagg"]
    assert disagg["meetsSla"] and disagg["ttftMs"] <= 300 and disagg["itlMs"] <= 10
    assert (disagg["prefill"]["tp"], disagg["prefill"]["workers"]) == (4, 5)
    assert (disagg["decode"]["tp"], disagg["decode"]["workers"], disagg["decode"]["batch"]) == (4, 3, 64)
    assert disagg["tokensPerSecondPerGpu"] == pytest.approx(572.657, abs=0.01)


def test_answers_kept_by_other_planner_code_are_not_read_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """AIC's answers are kept on disk per aiconfigurator-core release and per digest of the code that
    asked: an aiplane whose AIC-facing code changed (how it sizes a layout, prices an all-to-all)
    must not plan from the answers an older one kept."""
    from aiplane.planner import aic_search

    monkeypatch.setenv("AIPLANE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aic_search, "_MEMO", {})
    aic_search.remember(("prefill", "some layout"), {"ttft": 1.0})
    monkeypatch.setattr(aic_search, "_MEMO", {})
    assert aic_search.recall(("prefill", "some layout")) == {"ttft": 1.0}  # read back from disk
    aic_search._code_digest.cache_clear()
    monkeypatch.setattr(aic_search, "_ASKING_CODE", ("aic.py", "search.py"))  # other code
    try:
        monkeypatch.setattr(aic_search, "_MEMO", {})
        assert aic_search.recall(("prefill", "some layout")) is aic_search.MISSING
    finally:
        aic_search._code_digest.cache_clear()


@needs_aic
def test_moe_coverage_reads_expert_tables_only_where_an_all_to_all_backend_has_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether a MoE layout's EP is priced with AIC's all-to-all data needs its expert-compute tables
    only when some all-to-all backend has rows (reading them costs a cold plan ~2 s): Qwen3-30B-A3B
    on vLLM/H200 has none, so no large-EP pricing and no read; DeepSeek-V3 on TRT-LLM has some, and
    its covered EP sizes are exactly those both tables cover."""
    from aiplane.planner import aic_moe_comm

    reads: list[str] = []
    real = aic_moe_comm._compute_eps

    def counting(database: object, backend: str, shape: object, quant: object, phase: str) -> set[int]:
        reads.append(phase)
        return real(database, backend, shape, quant, phase)

    monkeypatch.setattr(aic_moe_comm, "_compute_eps", counting)
    monkeypatch.setattr(aic_moe_comm, "_COVERAGE", {})
    vllm = aic._database("h200_sxm", "vllm", None)
    assert aic_moe_comm.coverage("Qwen/Qwen3-30B-A3B", "vllm", vllm, None) == {}
    assert reads == []
    trtllm = aic._database("h200_sxm", "trtllm", None)
    found = aic_moe_comm.coverage("deepseek-ai/DeepSeek-V3", "trtllm", trtllm, None)
    assert found and set(reads) == set(found)
    assert all(16 in eps for per_backend in found.values() for eps in per_backend.values())


@needs_aic
def test_shipped_table_facts_are_what_aic_answers_for_every_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold plan no longer asks AIC to rank its attention lanes nor to load its attention tables
    into Python for the FMHA fallback (most of a cold plan): the shipped facts must be AIC's own
    answers, for every (system, backend) it has attention data for at its default data version, and
    a database seeded with them must give AIC's lane order without asking its extension."""
    import importlib

    from aiplane.planner import aic_facts

    attention = importlib.import_module("aiconfigurator_core.sdk.operations.attention")
    held = {tuple(key.split("/")[:2]) for key in aic_facts._shipped()["databases"]}
    assert held == set(aic_facts.databases())
    engine = importlib.import_module("aiconfigurator_core.sdk.engine")
    for system, backend in held:
        assert aic_facts.default_version(system, backend) == engine._literal_backend_version(
            system, backend, None, None, None
        )
    version = aic.literal_version("h200_sxm", "sglang", None)
    live = aic.load_database("h200_sxm", "sglang", version)
    # The ops of the registry's models (DeepSeek V3.2's and V4's take AIC ~8 s more to answer).
    ops = ("context_attention", "context_mla", "context_mla_granular")
    measured = aic_facts.measure(live, ops)
    shipped = aic_facts._shipped()["databases"][f"h200_sxm/sglang/{version}"]
    assert shipped["lanes"] == measured["lanes"]
    assert {op: shipped["fmha"][op] for op in ops} == measured["fmha"]
    assert measured["fmha"]["context_mla"]["fp8"]  # the fallback's question has a non-trivial answer here
    tables = ("_context_attention_data", "_generation_attention_data")
    orders = {table: attention.resolved_lane_order_for_op(live, table) for table in tables}
    assert all(order != ["default"] for order in orders.values())  # ranked by density, not failed closed

    def no_probe(*_: object) -> None:
        raise AssertionError("the seeded database asked AIC's extension for the lane density")

    seeded = aic.load_database("h200_sxm", "sglang", version)
    assert aic_facts.seed(seeded)
    monkeypatch.setattr(
        importlib.import_module("aiconfigurator_core.sdk.engine_table_view"), "_probe_engine_handle", no_probe
    )
    for table, order in orders.items():
        assert attention.resolved_lane_order_for_op(seeded, table) == order


@needs_aic
def test_table_facts_of_another_release_or_an_unshipped_version_are_asked_of_aic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aiplane.planner import aic_facts

    version = aic.literal_version("h100_sxm", "vllm", None)
    database = aic.load_database("h100_sxm", "vllm", version)
    assert aic_facts.lane_density(database) is not None
    # AIC points this at its own tree on its first engine run: the facts still hold then.
    own = aic_facts.packaged_systems()
    assert own is not None
    monkeypatch.setenv("AICONFIGURATOR_SYSTEMS_PATH", str(own))
    assert aic_facts.lane_density(database) is not None
    monkeypatch.setenv("AICONFIGURATOR_SYSTEMS_PATH", str(own.parent))  # another tree: AIC answers
    assert aic_facts.lane_density(database) is None
    monkeypatch.setenv("AICONFIGURATOR_SYSTEMS_PATH", str(own))
    monkeypatch.setattr(aic_facts, "installed_release", lambda: "0.11.0")
    assert not aic_facts.seed(database)
    assert aic_facts.lane_density(database) is None
    answers: list[str] = []

    def asked(_: object, op: str, __: object) -> list[str]:
        answers.append(op)
        return ["asked"]

    perf = importlib.import_module("aiconfigurator_core.sdk.perf_database")
    monkeypatch.setattr(perf, "context_fmha_supported_modes", asked)
    assert aic_facts.fmha_modes(database, "context_attention", None) == ["asked"]
    assert answers == ["context_attention"]

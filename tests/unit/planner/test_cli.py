"""``aiplane plan``: exit statuses, the JSON document, flags named in errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiplane.cli import app

BASE = ["plan", "--model", "Qwen/Qwen3-32B-FP8", "--system", "h200", "--backend", "trtllm", "--isl", "4000"]
BASE += ["--osl", "500", "--latency-model", "builtin"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*BASE, *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_plan_meeting_the_sla_exits_zero() -> None:
    code, out, _ = run("--ttft", "300", "--itl", "10", "--total-gpus", "32", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert {k: doc[k] for k in ("model", "system", "backend", "latencyModel")} == {
        "model": "Qwen/Qwen3-32B-FP8",
        "system": "h200_sxm",
        "backend": "trtllm",
        "latencyModel": "builtin",
    }
    disagg, agg = doc["disagg"], doc["agg"]
    assert set(disagg["prefill"]) == {"tp", "workers"}
    assert set(disagg["decode"]) == {"tp", "workers", "batch"}
    assert set(agg["agg"]) == {"tp", "workers", "batch"}
    for p in (disagg, agg):
        assert p["meetsSla"] is True
        assert p["gpus"] <= 32
        assert {"tokensPerSecondPerGpu", "tokensPerSecondPerUser", "ttftMs", "itlMs"} <= set(p)


def test_best_effort_exits_three_and_table_says_so() -> None:
    code, out, _ = run("--ttft", "1", "--itl", "0.5")
    assert code == 3
    assert "NO (best effort)" in out


def test_table_shows_both_plans_and_the_frontier() -> None:
    code, out, _ = run("--ttft", "300", "--itl", "10")
    assert code == 0
    assert "prefill TP" in out and "agg TP" in out and "Pareto frontier" in out


HUGE = "plan --model meta-llama/Llama-3.1-405B --backend vllm --system h100 --isl 100 --osl 100 --ttft 1000 --itl 50"
HUGE += " --latency-model builtin"


def test_a_model_no_engine_holds_exits_two() -> None:
    result = CliRunner().invoke(app, [*HUGE.split(), "-o", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--ttft", "300", "--itl", "10", "--partitions-per-gpu", "8"], "--partitions-per-gpu"),
        (["--ttft", "300", "--itl", "10", "--backend", "tgi"], "--backend"),
        (
            ["--ttft", "300", "--itl", "10", "--min-gpus-per-engine", "4", "--max-gpus-per-engine", "2"],
            "--max-gpus",
        ),
        (["--ttft", "300", "--itl", "10", "-o", "yaml"], "--output"),
        (["--ttft", "300", "--itl", "10", "--system", "tpu-v5"], "--system"),
    ],
)
def test_bad_input_exits_two_naming_the_flag(args: list[str], flag: str) -> None:
    code, _, err = run(*args)
    assert code == 2
    assert flag in err


UNKNOWN = "plan --model acme/x --system h100 --isl 1 --osl 2 --ttft 1 --itl 1"


def test_unknown_model_lists_known_ones() -> None:
    result = CliRunner().invoke(app, [*UNKNOWN.split(), "--backend", "vllm"])
    assert result.exit_code == 2
    assert "--model: unknown model 'acme/x'" in result.stderr
    assert "openai/gpt-oss-120b" in " ".join(result.stderr.split())


MY_8B = "plan --model acme/my-8b --backend sglang --system h100 --isl 1000 --osl 200 --ttft 500 --itl 30"


def test_model_config_file_plans_an_unknown_model(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_attention_heads": 32,
                "num_hidden_layers": 32,
                "num_key_value_heads": 8,
                "vocab_size": 128256,
            }
        )
    )
    result = CliRunner().invoke(
        app,
        [*MY_8B.split(), "--model-config", str(config), "-o", "json"],
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "acme/my-8b"
    same = CliRunner().invoke(app, [*MY_8B.split(), "--model-config", str(tmp_path), "-o", "json"])
    assert same.exit_code == 0 and same.stdout == result.stdout
    config.write_text("not json")
    result = CliRunner().invoke(
        app,
        [*MY_8B.split(), "--model-config", str(config)],
    )
    assert result.exit_code == 2
    assert "--model-config" in result.stderr


def test_aic_latency_model_absent_exits_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiplane.planner.aic", None)  # as if the module were not shipped
    code, _, err = run("--ttft", "300", "--itl", "10", "--latency-model", "aic")
    assert code == 2
    assert "aic latency model not available" in err


def test_backend_is_required() -> None:
    result = CliRunner().invoke(app, ["plan", *BASE[1:5], *BASE[7:], "--ttft", "300", "--itl", "10"])
    assert result.exit_code == 2
    assert "--backend" in result.stderr


def test_a_backend_the_system_cannot_run_is_an_input_error() -> None:
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--model",
            "Qwen/Qwen3-32B",
            "--system",
            "mi300x",
            "--backend",
            "trtllm",
            "--isl",
            "2000",
            "--osl",
            "500",
            "--ttft",
            "1000",
            "--itl",
            "30",
        ],
    )
    assert result.exit_code == 2
    assert "--backend: trtllm does not run on mi300x" in result.stderr


def test_a_model_that_fits_no_engine_names_the_gpus_it_needs() -> None:
    """Llama-3.1-405B's BF16 weights (~810 GB) need 8 H200s: 2 GPUs are an input error, not a plan."""
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--model",
            "meta-llama/Llama-3.1-405B",
            "--system",
            "h200",
            "--backend",
            "vllm",
            "--isl",
            "2000",
            "--osl",
            "500",
            "--ttft",
            "1000",
            "--itl",
            "30",
            "--total-gpus",
            "2",
            "--latency-model",
            "builtin",
        ],
    )
    assert result.exit_code == 2
    assert "--total-gpus:" in result.stderr
    assert "smallest engine that holds it has 8 GPUs" in result.stderr


def test_the_budget_planned_for_is_printed() -> None:
    code, out, _ = run("--ttft", "300", "--itl", "10")
    assert code in (0, 3)
    assert "no --total-gpus" in out
    code, out, _ = run("--ttft", "300", "--itl", "10", "--total-gpus", "16", "-o", "json")
    assert json.loads(out)["totalGpus"] == 16

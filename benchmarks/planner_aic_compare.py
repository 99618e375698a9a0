"""Our planner against AIConfigurator's own CLI, dense and mixture-of-experts, disaggregated and aggregated.

For each case (model, system, backend, GPUs, ISL/OSL, TTFT/ITL targets):

- ``aiconfigurator cli default`` (the ``aiconfigurator`` 0.12.0 distribution, installed for the benchmark
  only, in a separate venv: ``pip install aiconfigurator==0.12.0``) is run once with ``--aic-cli``; its
  best disaggregated and aggregated rows are stored in ``benchmarks/aic_cli_results.json`` so the
  comparison can be repeated without the CLI (it takes 1-3 minutes a case);
- ``aiplane plan`` runs in process with the default latency model (AIC's engine where it has data),
  and, with ``--builtin``, with the built-in analytic model too.

It prints one line per case: AIC's best plan, ours, and the tokens/s/GPU difference. Targets: with
AIC's engine the same disaggregated plan (layouts, workers, batch) and tokens/s/GPU within 2 %.

    python -m benchmarks.planner_aic_compare [--aic-cli /venv/bin/aiconfigurator] [--builtin]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiplane.planner.aic import aic_model
from aiplane.planner.api import plan
from aiplane.planner.models import resolve_model
from aiplane.planner.report import layout
from aiplane.planner.types import Backend, Plan, PlanRequest

STORE = Path(__file__).with_name("aic_cli_results.json")


@dataclass(frozen=True)
class Case:
    model: str
    system: str
    backend: Backend
    gpus: int
    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float

    @property
    def key(self) -> str:
        return (
            f"{self.model} {self.system} {self.backend} {self.gpus}g {self.isl}/{self.osl} "
            f"ttft{self.ttft_ms:g} itl{self.itl_ms:g}"
        )

    def request(self, latency_model: str) -> PlanRequest:
        return PlanRequest(
            model=self.model,
            backend=self.backend,
            system=self.system,
            isl=self.isl,
            osl=self.osl,
            ttft_ms=self.ttft_ms,
            itl_ms=self.itl_ms,
            total_gpus=self.gpus,
            latency_model=latency_model,  # type: ignore[arg-type]
        )


DENSE = (
    Case("Qwen/Qwen3-32B-FP8", "h200_sxm", "vllm", 8, 4000, 500, 600, 20),
    Case("Qwen/Qwen3-32B-FP8", "h200_sxm", "vllm", 32, 4000, 500, 300, 10),
    Case("Qwen/Qwen3-8B", "h200_sxm", "vllm", 8, 4000, 1000, 300, 10),
    Case("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", 16, 2000, 500, 1000, 30),
    Case("Qwen/Qwen3-32B", "b200_sxm", "trtllm", 8, 8000, 500, 1000, 15),
    Case("meta-llama/Llama-3.1-8B", "a100_sxm", "sglang", 8, 2000, 256, 500, 25),
)
MOE = (
    Case("Qwen/Qwen3-30B-A3B", "h200_sxm", "vllm", 8, 4000, 500, 600, 20),
    Case("Qwen/Qwen3-30B-A3B", "h100_sxm", "sglang", 8, 2000, 500, 600, 20),
    Case("Qwen/Qwen3-30B-A3B", "h200_sxm", "trtllm", 8, 4000, 500, 600, 20),
    Case("Qwen/Qwen3-235B-A22B-FP8", "h200_sxm", "vllm", 16, 4000, 500, 1000, 30),
    Case("openai/gpt-oss-120b", "h200_sxm", "vllm", 8, 2000, 500, 600, 20),
    Case("deepseek-ai/DeepSeek-V3", "h200_sxm", "trtllm", 16, 4000, 500, 2000, 50),
    # SGLang's wide-EP attention (FP8 for DeepSeek's DeepEP layouts, BF16 for its fused ones).
    Case("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", 16, 4000, 500, 2000, 50),
)
CASES = (*DENSE, *MOE)


def run_aic_cli(cli: str, case: Case) -> dict[str, Any]:
    """AIC's best disaggregated and aggregated rows for ``case`` (its own ranking's first rows)."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            cli,
            "cli",
            "default",
            *("--model-path", aic_model(resolve_model(case.model)).model_id),
            *("--system", case.system, "--backend", case.backend),
            *("--total-gpus", str(case.gpus), "--isl", str(case.isl), "--osl", str(case.osl)),
            *("--ttft", str(case.ttft_ms), "--tpot", str(case.itl_ms)),
            *("--save-dir", out, "--log-level", "ERROR"),
        ]
        start = time.perf_counter()
        done = subprocess.run(command, check=False, capture_output=True, text=True)
        found: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 1)}
        if done.returncode != 0:
            found["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
        for mode in ("disagg", "agg"):
            files = sorted(Path(out).rglob(f"{mode}/best_config_topn.csv"))
            if files:
                with files[0].open() as f:
                    rows = list(csv.DictReader(f))
                found[mode] = rows[0] if rows else None
    return found


def _ours_disagg(p: Plan | None) -> str:
    if p is None or p.prefill is None or p.decode is None:
        return "none"
    return (
        f"{p.prefill.workers}x P {layout(p.prefill)} + {p.decode.workers}x D {layout(p.decode)} "
        f"@{p.decode.batch}: {p.tokens_per_second_per_gpu:.1f}"
    )


def _ours_agg(p: Plan | None) -> str:
    if p is None or p.agg is None:
        return "none"
    return f"{p.agg.workers}x {layout(p.agg)} @{p.agg.batch}: {p.tokens_per_second_per_gpu:.1f}"


def _aic_disagg(row: dict[str, Any] | None) -> str:
    if not row:
        return "none"
    return (
        f"{row['(p)workers']}x P {row['(p)parallel']} + {row['(d)workers']}x D {row['(d)parallel']} "
        f"@{row['(d)bs']}: {float(row['tokens/s/gpu']):.1f}"
    )


def _aic_agg(row: dict[str, Any] | None) -> str:
    if not row:
        return "none"
    workers = row.get("replicas") or row.get("workers") or "?"
    return f"{workers}x {row.get('parallel')} @{row.get('bs')}: {float(row['tokens/s/gpu']):.1f}"


def _ratio(ours: Plan | None, row: dict[str, Any] | None) -> float | None:
    if ours is None or not row:
        return None
    return ours.tokens_per_second_per_gpu / float(row["tokens/s/gpu"]) - 1


def _diff(ours: Plan | None, row: dict[str, Any] | None) -> str:
    r = _ratio(ours, row)
    return "-" if r is None else f"{r:+.1%}"


def process_seconds(case: Case, repeat: int) -> float:
    """Median wall time of a whole ``aiplane plan`` process (start-up included) for ``case``."""
    args = [
        *("--model", case.model, "--system", case.system, "--backend", case.backend),
        *(
            "--isl",
            str(case.isl),
            "--osl",
            str(case.osl),
            "--ttft",
            str(case.ttft_ms),
            "--itl",
            str(case.itl_ms),
        ),
        *("--total-gpus", str(case.gpus), "-o", "json"),
    ]
    code = "import sys; from aiplane.cli import main; sys.argv = ['aiplane', 'plan', *sys.argv[1:]]; main()"
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code, *args], check=False, capture_output=True, env=dict(os.environ)
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _summary(name: str, errors: list[float]) -> str:
    if not errors:
        return f"{name}: no cases"
    absolute = sorted(abs(e) for e in errors)
    return (
        f"{name}: {len(errors)} cases, median |error| {statistics.median(absolute):.1%}, "
        f"worst {absolute[-1]:.1%}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic-cli", help="the aiconfigurator CLI: refresh the stored AIC results")
    parser.add_argument("--builtin", action="store_true", help="also plan with the built-in model")
    parser.add_argument("--only", help="cases whose key contains this")
    parser.add_argument("--repeat", type=int, default=3, help="timed aiplane plan processes per case")
    args = parser.parse_args(argv)
    errors: dict[str, list[float]] = {}
    stored: dict[str, Any] = json.loads(STORE.read_text()) if STORE.exists() else {}
    cases = [c for c in CASES if not args.only or args.only in c.key]
    for case in cases:
        if args.aic_cli:
            stored[case.key] = {"case": asdict(case), **run_aic_cli(args.aic_cli, case)}
            STORE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        aic = stored.get(case.key, {})
        start = time.perf_counter()
        ours = plan(case.request("auto"))
        took = time.perf_counter() - start
        # A process after the in-process plan: AIC's answers are on disk now (what a repeat costs).
        warm = process_seconds(case, args.repeat) if args.repeat else float("nan")
        print(
            f"{case.key}  ({ours.latency_model}; in process {took:.1f} s, then aiplane plan "
            f"{warm:.2f} s a process; AIC CLI {aic.get('seconds', '?')} s)"
        )
        for kind, mine in (("disagg", ours.disagg), ("agg", ours.agg)):
            r = _ratio(mine, aic.get(kind))
            if r is not None:
                errors.setdefault(f"{ours.latency_model} {kind}", []).append(r)
        print(f"  disagg  AIC {_aic_disagg(aic.get('disagg')):60} ours {_ours_disagg(ours.disagg):60}")
        print(f"          diff {_diff(ours.disagg, aic.get('disagg'))}")
        print(f"  agg     AIC {_aic_agg(aic.get('agg')):60} ours {_ours_agg(ours.agg):60}")
        print(f"          diff {_diff(ours.agg, aic.get('agg'))}")
        if args.builtin:
            mine = plan(case.request("builtin"))
            print(
                f"  builtin disagg {_ours_disagg(mine.disagg)} {_diff(mine.disagg, aic.get('disagg'))}; "
                f"agg {_ours_agg(mine.agg)} {_diff(mine.agg, aic.get('agg'))}"
            )
            for kind, p in (("disagg", mine.disagg), ("agg", mine.agg)):
                r = _ratio(p, aic.get(kind))
                if r is not None:
                    errors.setdefault(f"builtin {kind}", []).append(r)
    print("\ntokens/s/GPU against AIC's CLI:")
    for name in sorted(errors):
        print("  " + _summary(name, errors[name]))


if __name__ == "__main__":
    main()

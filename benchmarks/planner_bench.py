"""The planner against AIConfigurator: speed and agreement of the chosen disaggregated plan.

For each case (model, system, GPUs, ISL/OSL, TTFT/ITL targets) this runs, side by side in one run:

- ``plan()`` with the built-in latency model (caches cleared: a cold plan) -> plans/s;
- ``plan()`` with the aic latency model, cold (a fresh :class:`AicLatency`: engines compiled) and warm;
- ``aiconfigurator cli default --serving-mode disagg`` as a subprocess (the ``aiconfigurator`` package,
  installed for the benchmark only: ``pip install aiconfigurator==0.12.0`` in a separate venv, passed
  with ``--aic-cli``), timed end to end, its best plan read from ``best_config_topn.csv``.

It prints a speed table and an agreement table: prefill TP x workers, decode TP x workers @ batch, GPUs
and tokens/s/GPU of each, with the tokens/s/GPU difference to AIC's. Targets: aic model ->
the same plan and tokens/s/GPU within 2 %; builtin -> the same prefill/decode TP in most cases and
tokens/s/GPU within 25 %; every plan < 1 s.

    python -m benchmarks.planner_bench --aic-cli /path/to/venv/bin/aiconfigurator [--repeat 5]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiplane.planner import latency
from aiplane.planner.aic import AicLatency, aic_model
from aiplane.planner.api import plan
from aiplane.planner.models import resolve_model
from aiplane.planner.types import Backend, LatencyModel, Plan, PlanRequest


@dataclass(frozen=True)
class Case:
    model: str
    system: str
    gpus: int
    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float
    backend: Backend = "vllm"

    @property
    def label(self) -> str:
        return (
            f"{self.model.rsplit('/', 1)[-1]} {self.system} {self.gpus}g "
            f"{self.isl}/{self.osl} ttft{self.ttft_ms:g} itl{self.itl_ms:g}"
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
            latency_model="aic" if latency_model == "aic" else "builtin",
        )


#: Cases where AIC has measured data (the agreement table); AMD cases only time the built-in model.
CASES = (
    Case("Qwen/Qwen3-32B-FP8", "h200_sxm", 8, 4000, 500, 600, 20),
    Case("Qwen/Qwen3-32B-FP8", "h200_sxm", 32, 4000, 500, 300, 10),
    Case("Qwen/Qwen3-8B", "h200_sxm", 8, 4000, 1000, 300, 10),
    Case("Qwen/Qwen3-32B", "h100_sxm", 16, 2000, 500, 1000, 30),
    Case("meta-llama/Llama-3.1-70B", "h100_sxm", 16, 2000, 500, 1000, 30),
    Case("Qwen/Qwen3-32B", "b200_sxm", 8, 8000, 500, 1000, 15),
    Case("meta-llama/Llama-3.1-8B", "a100_sxm", 8, 2000, 256, 500, 25),
)
AMD_CASES = (Case("meta-llama/Llama-3.1-70B", "mi300x", 16, 2000, 500, 1000, 30),)


@dataclass(frozen=True)
class Row:
    """One plan, ours or AIC's, in the terms the agreement table compares."""

    prefill_tp: int
    prefill_workers: int
    decode_tp: int
    decode_workers: int
    decode_batch: int
    gpus: int
    tokens_per_gpu: float
    meets_sla: bool

    def shape(self) -> str:
        return (
            f"P{self.prefill_tp}x{self.prefill_workers} D{self.decode_tp}x{self.decode_workers}"
            f"@{self.decode_batch} {self.gpus}g"
        )


def _row(p: Plan | None) -> Row | None:
    if p is None or p.prefill is None or p.decode is None:
        return None
    return Row(
        p.prefill.tp,
        p.prefill.workers,
        p.decode.tp,
        p.decode.workers,
        p.decode.batch or 0,
        p.gpus,
        p.tokens_per_second_per_gpu,
        p.meets_sla,
    )


def _ours(case: Case, name: str, model: LatencyModel | None) -> tuple[Row | None, float]:
    """Our plan and its wall time; ``model`` None for the built-in model with its caches cleared."""
    if model is None:
        latency._prefill_envelope.cache_clear()
        latency._decode_envelope.cache_clear()
    start = time.perf_counter()
    result = plan(case.request(name), model)
    return _row(result.disagg), time.perf_counter() - start


def _aic_cli(cli: str, case: Case) -> tuple[Row | None, float]:
    """AIC's best disaggregated plan for ``case`` and the CLI's wall time."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            cli,
            "cli",
            "default",
            # AIC's own name for the checkpoint (it would fetch any other from the hub).
            *("--model-path", aic_model(resolve_model(case.model)).model_id),
            *("--system", case.system, "--backend", case.backend),
            *("--total-gpus", str(case.gpus), "--isl", str(case.isl), "--osl", str(case.osl)),
            *("--ttft", str(case.ttft_ms), "--tpot", str(case.itl_ms), "--serving-mode", "disagg"),
            *("--save-dir", out, "--log-level", "ERROR"),
        ]
        start = time.perf_counter()
        done = subprocess.run(command, check=False, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            print(f"aiconfigurator failed for {case.label}: {done.stderr.strip().splitlines()[-1:]}")
            return None, elapsed
        found = sorted(Path(out).rglob("disagg/best_config_topn.csv"))
        if not found:
            return None, elapsed
        with found[0].open() as f:
            rows = list(csv.DictReader(f))
    if not rows:
        return None, elapsed
    # AIC's own ranking; when nothing meets the SLA it still lists (best-effort) plans that miss it.
    best = rows[0]
    meets = float(best["tpot"]) <= case.itl_ms and float(best["ttft"]) <= case.ttft_ms
    return (
        Row(
            int(best["(p)tp"]),
            int(best["(p)workers"]),
            int(best["(d)tp"]),
            int(best["(d)workers"]),
            int(best["(d)bs"]),
            int(best["num_total_gpus"]),
            float(best["tokens/s/gpu"]),
            meets,
        ),
        elapsed,
    )


def _diff(ours: Row | None, aic: Row | None) -> str:
    if ours is None or aic is None:
        return "-"
    # A plan and its multiple (P1x8 D4x2 against P1x4 D4x1) serve the same tokens/s/GPU: "same".
    ratio = ours.prefill_workers * aic.decode_workers == aic.prefill_workers * ours.decode_workers
    if _tps(ours) != _tps(aic):
        same = "other"
    else:
        same = "same" if ratio and ours.decode_batch == aic.decode_batch else "same TPs"
    return f"{ours.tokens_per_gpu / aic.tokens_per_gpu - 1:+.1%} {same}"


def _tps(r: Row) -> tuple[int, int]:
    return r.prefill_tp, r.decode_tp


def _fmt(r: Row | None) -> str:
    if r is None:
        return "none"
    return f"{r.shape()} {r.tokens_per_gpu:.1f}{'' if r.meets_sla else ' (SLA missed)'}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic-cli", default=shutil.which("aiconfigurator"), help="the aiconfigurator CLI")
    parser.add_argument("--repeat", type=int, default=5, help="timed plans per case and model")
    args = parser.parse_args(argv)

    speed: list[str] = []
    agreement: list[str] = []
    for case in (*CASES, *AMD_CASES):
        builtin_times = []
        for _ in range(args.repeat):
            ours_builtin, t = _ours(case, "builtin", None)
            builtin_times.append(t)
        line = f"{case.label:58} builtin {args.repeat / sum(builtin_times):8.1f} plans/s"
        if case in AMD_CASES:
            speed.append(line + " (AMD: no AIC data)")
            continue
        ours_aic, cold = _ours(case, "aic", AicLatency(case.backend))
        warm_model = AicLatency(case.backend)
        _ours(case, "aic", warm_model)
        warm = statistics.median(_ours(case, "aic", warm_model)[1] for _ in range(args.repeat))
        line += f" | aic cold {cold * 1e3:7.0f} ms, warm {1 / warm:7.1f} plans/s"
        aic_row: Row | None = None
        if args.aic_cli:
            aic_row, cli_time = _aic_cli(args.aic_cli, case)
            line += f" | aiconfigurator cli {cli_time:5.1f} s"
        speed.append(line)
        agreement.append(
            f"{case.label:58} AIC {_fmt(aic_row):28} | aic {_fmt(ours_aic):28} {_diff(ours_aic, aic_row):16}"
            f" | builtin {_fmt(ours_builtin):28} {_diff(ours_builtin, aic_row)}"
        )
    print("Speed (plans/s; aic cold = first plan with a fresh engine cache)")
    print("\n".join(speed))
    print("\nAgreement (P<tp>x<workers> D<tp>x<workers>@<batch> <gpus> tokens/s/GPU; diff vs AIC CLI)")
    print("\n".join(agreement))


if __name__ == "__main__":
    main()

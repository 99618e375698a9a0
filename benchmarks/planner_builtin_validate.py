"""The built-in latency model against AIConfigurator's engine: calibration cases and held-out cases.

The built-in (analytic) model plans where aiconfigurator-core has no data. Its constants
(``aiplane.planner.calibration``) were fitted on the CALIBRATION cases below (the dense kernel-level
fit of ``benchmarks/planner_calibrate.py`` plus the case-level checks here); the HELD_OUT cases were
chosen afterwards and never used to choose a constant: other models, systems, backends, budgets and
workloads (long prompt, chat, long answer), dense and mixture-of-experts.

The reference is AIC's own engine (``latency_model="aic"``: its measured kernel tables, its static
runs, its search), the tokens/s/GPU of its best disaggregated and aggregated plans. The references are
stored in ``benchmarks/builtin_reference.json`` (computing them takes minutes); ``--refresh`` recomputes
them. The error of a case is builtin tokens/s/GPU / AIC's - 1, for each plan kind.

    python -m benchmarks.planner_builtin_validate [--refresh] [--only TEXT] [--fit-moe] [--fit-mla]

``--fit-moe`` refits the mixture-of-experts constants (``MOE_PREFILL_COMPUTE_SHARE``,
``MOE_DECODE_COMPUTE_SHARE``, ``MOE_EP_IMBALANCE_EXP``, ``MOE_BACKEND_SHARE``, ``W4A16_READ_FACTOR``;
``MOE_LAYER_US`` held at 45) on the CALIBRATION cases only: a grid, scored by the
median plus half the 90th percentile of |built-in / AIC - 1| over AIC's per-layout static runs (its
prefill at batch 1 and decode TPOT at batches 1-512, read from the answer cache the references left),
prefill and decode together. It prints the best values; calibration.py is edited by hand. (The
per-(system, backend) MXFP4 factors, which override ``W4A16_READ_FACTOR`` where AIC has the kernel,
come from AIC's kernel tables instead: ``benchmarks/planner_w4a16_fit.py``.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplane.planner import aic_search, latency
from aiplane.planner import calibration as cal
from aiplane.planner.aic import AicLatency
from aiplane.planner.api import plan
from aiplane.planner.latency import BuiltinLatency
from aiplane.planner.models import resolve_model
from aiplane.planner.report import layout
from aiplane.planner.search import DECODE_LATENCY_CORRECTION, PREFILL_LATENCY_CORRECTION
from aiplane.planner.systems import resolve_system
from aiplane.planner.types import Plan
from benchmarks.planner_aic_compare import CASES as COMPARED
from benchmarks.planner_aic_compare import Case

STORE = Path(__file__).with_name("builtin_reference.json")


#: The cases the constants were chosen on (benchmarks/planner_aic_compare.py's twelve).
CALIBRATION = (
    *COMPARED,
    # Added after the first held-out run showed no Blackwell MoE among the cases above.
    Case("Qwen/Qwen3-30B-A3B", "b200_sxm", "trtllm", 8, 2000, 500, 600, 20),
    Case("deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", 16, 4000, 1000, 2000, 50),
    # Added after the second held-out run: SGLang's mixture-of-experts tables on another system
    # (DeepSeek-V3 on H200 with SGLang, now among the cases above, compared with AIC's CLI).
    Case("openai/gpt-oss-120b", "h200_sxm", "sglang", 8, 2000, 500, 600, 20),
)
#: Held out: never used to choose a constant. Long prompt (ISL >= 8000), chat (~1-2k/0.5-1k), long
#: answer (OSL >= 2000); H100, H200, B200; 8-64 GPUs; all three backends; dense and MoE.
HELD_OUT = (
    Case("meta-llama/Llama-3.1-8B", "h100_sxm", "trtllm", 8, 8000, 200, 1000, 20),
    Case("Qwen/Qwen3-8B", "b200_sxm", "sglang", 16, 1000, 1000, 300, 10),
    Case("meta-llama/Llama-3.1-70B", "h200_sxm", "trtllm", 32, 1000, 4000, 1000, 30),
    Case("Qwen/Qwen3-32B", "h200_sxm", "sglang", 16, 2000, 500, 500, 20),
    Case("meta-llama/Llama-3.1-405B", "b200_sxm", "vllm", 64, 4000, 500, 2000, 50),
    Case("Qwen/Qwen3-8B", "b200_sxm", "vllm", 8, 500, 2000, 200, 8),
    Case("Qwen/Qwen3-30B-A3B", "b200_sxm", "vllm", 16, 1000, 1000, 300, 15),
    Case("Qwen/Qwen3-235B-A22B-FP8", "b200_sxm", "sglang", 16, 8000, 500, 3000, 40),
    Case("openai/gpt-oss-120b", "b200_sxm", "trtllm", 8, 2000, 1000, 600, 15),
    Case("openai/gpt-oss-20b", "h200_sxm", "sglang", 8, 1000, 4000, 300, 10),
    Case("Qwen/Qwen3-30B-A3B", "h100_sxm", "trtllm", 16, 8000, 500, 1500, 25),
    Case("deepseek-ai/DeepSeek-V3", "b200_sxm", "sglang", 16, 2000, 1000, 2000, 40),
)


def _engines(p: Plan) -> str:
    if p.agg is not None:
        return f"{p.agg.workers}x {layout(p.agg)} @{p.agg.batch}"
    assert p.prefill is not None and p.decode is not None
    return f"{p.prefill.workers}x P {layout(p.prefill)} + {p.decode.workers}x D {layout(p.decode)} @{p.decode.batch}"


def _summary(p: Plan | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "engines": _engines(p),
        "tokensPerGpu": round(p.tokens_per_second_per_gpu, 2),
        "meetsSla": p.meets_sla,
    }


def reference(case: Case) -> dict[str, Any]:
    """AIC's engine on ``case``: its best plans' layouts and tokens/s/GPU."""
    start = time.perf_counter()
    try:
        found = plan(case.request("aic"))
    except Exception as err:  # recorded: a case AIC cannot plan is reported, not fatal
        return {"case": asdict(case), "error": str(err)}
    return {
        "case": asdict(case),
        "seconds": round(time.perf_counter() - start, 1),
        "disagg": _summary(found.disagg),
        "agg": _summary(found.agg),
    }


def _error(ours: Plan | None, ref: dict[str, Any] | None) -> float | None:
    if ours is None or not ref:
        return None
    return ours.tokens_per_second_per_gpu / float(ref["tokensPerGpu"]) - 1


def evaluate(cases: tuple[Case, ...], stored: dict[str, Any], verbose: bool = True) -> dict[str, list[float]]:
    """Errors of the built-in model per plan kind over ``cases`` (those with a reference)."""
    errors: dict[str, list[float]] = {"disagg": [], "agg": []}
    for case in cases:
        ref = stored.get(case.key)
        if ref is None or "error" in ref:
            if verbose:
                print(f"{case.key}: no reference ({(ref or {}).get('error', 'not computed')})")
            continue
        mine = plan(case.request("builtin"))
        line = [case.key]
        for kind, ours in (("disagg", mine.disagg), ("agg", mine.agg)):
            e = _error(ours, ref.get(kind))
            if e is not None:
                errors[kind].append(e)
            line.append(
                f"  {kind:6} AIC {(ref.get(kind) or {}).get('engines', 'none')} "
                f"{(ref.get(kind) or {}).get('tokensPerGpu', '-')} | builtin "
                f"{(_summary(ours) or {}).get('engines', 'none')} {(_summary(ours) or {}).get('tokensPerGpu', '-')}"
                f"  {'-' if e is None else f'{e:+.1%}'}"
            )
        if verbose:
            print("\n".join(line))
    return errors


def describe(name: str, errors: list[float]) -> str:
    if not errors:
        return f"{name}: no cases"
    absolute = sorted(abs(e) for e in errors)
    return f"{name}: {len(errors)} cases, median |error| {statistics.median(absolute):.1%}, worst {absolute[-1]:.1%}"


def _moe_points(
    cases: tuple[Case, ...],
) -> list[tuple[str, Case, Any, Any, tuple[int, int, int, int], int, float]]:
    """AIC's per-layout prefill TTFT and decode TPOT for the MoE cases (from the answer cache)."""
    points = []
    for case in cases:
        model, system = resolve_model(case.model), resolve_system(case.system)
        if not model.num_experts:
            continue
        key = AicLatency(case.backend).key(model, system)
        found = aic_search.layouts(moe=True, backend=case.backend, aic_system=key[2], budget=case.gpus, hi=8)
        for par in found:
            p4 = (par.tp, par.dp, par.moe_tp, par.moe_ep)
            rows = aic_search.recall(("decode", *key, par.label, case.isl, case.osl))
            for batch, row in rows if isinstance(rows, list) else []:
                if batch in (1, 4, 16, 32, 64, 128, 256, 512):
                    points.append(("decode", case, model, system, p4, batch, float(row["tpot"])))
            row = aic_search.recall(("prefill", *key, par.label, case.isl, case.osl))
            if isinstance(row, dict):
                points.append(("prefill", case, model, system, p4, 1, float(row["ttft"])))
    return points


def _score(points: list[tuple[str, Case, Any, Any, tuple[int, int, int, int], int, float]]) -> float:
    """Median plus half the 90th percentile of |built-in / AIC - 1|, prefill and decode each."""
    latency._prefill_envelope.cache_clear()
    latency._decode_envelope.cache_clear()
    errors: dict[str, list[float]] = {"prefill": [], "decode": []}
    for kind, case, model, system, p4, batch, reference in points:
        lat = BuiltinLatency(case.backend)
        if kind == "decode":
            ours = lat.layout_decode_ms(model, system, p4, batch, case.isl + case.osl // 2)
            ours *= DECODE_LATENCY_CORRECTION
        else:
            ours = lat.layout_prefill_ms(model, system, p4, case.isl) * PREFILL_LATENCY_CORRECTION
        errors[kind].append(abs(ours / reference - 1))
    score = 0.0
    for values in errors.values():
        values.sort()
        score += statistics.median(values) + 0.5 * values[int(0.9 * len(values))]
    return score


def fit_mla() -> None:
    """Grid-fit MLA_LAYER_US on the calibration cases' MLA models (DeepSeek) only, by the same score."""
    points = [p for p in _moe_points(CALIBRATION) if p[2].kv_lora_rank]
    scores = []
    for us in range(0, 130, 10):
        cal.MLA_LAYER_US = {"nvidia": float(us), "amd": float(us)}
        scores.append((_score(points), us))
        print(f"MLA_LAYER_US {us}: score {scores[-1][0]:.3f}")
    print(f"{len(points)} points; best MLA_LAYER_US {min(scores)[1]} (score {min(scores)[0]:.3f})")


def fit_moe() -> None:
    """Grid-fit the MoE constants on the calibration cases (module docstring)."""
    points = _moe_points(CALIBRATION)
    best: tuple[float, tuple[float, ...]] | None = None
    grid = itertools.product(
        (0.2, 0.25, 0.3, 0.4),
        (0.075, 0.1, 0.15),
        (45,),
        (0.0, 0.25, 0.5),
        (0.65, 0.8, 1.0),
        (1.0, 1.25, 1.5),
        (1.0, 2.0, 3.0),
    )
    for chosen in grid:
        for name, value in zip(FITTED_MOE[:4], chosen, strict=False):
            setattr(cal, name, {"nvidia": value, "amd": value})
        cal.MOE_BACKEND_SHARE = {"vllm": 1.0, "sglang": chosen[4], "trtllm": chosen[5]}
        cal.W4A16_READ_FACTOR = {"nvidia": chosen[6], "amd": chosen[6]}
        score = _score(points)
        if best is None or score < best[0]:
            best = (score, chosen)
    assert best is not None
    print(f"{len(points)} points; best {', '.join(FITTED_MOE)}: {best[1]} (score {best[0]:.3f})")


#: The constants --fit-moe grids over, in its grid's order.
FITTED_MOE = (
    "MOE_PREFILL_COMPUTE_SHARE",
    "MOE_DECODE_COMPUTE_SHARE",
    "MOE_LAYER_US",
    "MOE_EP_IMBALANCE_EXP",
    "MOE_BACKEND_SHARE sglang",
    "MOE_BACKEND_SHARE trtllm",
    "W4A16_READ_FACTOR",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="recompute AIC's references (minutes)")
    parser.add_argument("--only", help="cases whose key contains this")
    parser.add_argument("--quiet", action="store_true", help="only the summary")
    parser.add_argument(
        "--fit-moe", action="store_true", help="refit the MoE constants on the calibration cases"
    )
    parser.add_argument("--fit-mla", action="store_true", help="refit MLA_LAYER_US on the calibration cases")
    args = parser.parse_args(argv)
    if args.fit_moe:
        fit_moe()
        return
    if args.fit_mla:
        fit_mla()
        return
    stored: dict[str, Any] = json.loads(STORE.read_text()) if STORE.exists() else {}
    sets: dict[str, tuple[Case, ...]] = {"calibration": CALIBRATION, "held-out": HELD_OUT}
    for name, cases in sets.items():
        chosen = tuple(c for c in cases if not args.only or args.only in c.key)
        if args.refresh:
            for case in chosen:
                stored[case.key] = reference(case)
                print(f"reference {case.key}: {json.dumps(stored[case.key])}", flush=True)
                STORE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        sets[name] = chosen
    results = {name: evaluate(cases, stored, not args.quiet) for name, cases in sets.items()}
    print("\nbuilt-in model, tokens/s/GPU of the best plan against AIC's engine:")
    for name, errors in results.items():
        for kind, values in errors.items():
            print("  " + describe(f"{name} {kind}", values))


if __name__ == "__main__":
    main()

"""Wall time of whole ``aiplane plan`` processes, interpreter start-up included: cold and warm cache.

What a user waits for: each run is a fresh ``python`` process running the CLI (what the console
script does), timed from spawn to exit. Per case:

- **cold**: an empty ``$AIPLANE_CACHE_DIR`` (a new temporary directory each run): AIC's import, its
  measured tables loaded, every static run of the search;
- **warm**: the same directory again: AIC's answers read back, AIC not imported.

The cases are the README example and the AIC-backed cases of ``benchmarks/planner_bench.py``, one
mixture-of-experts case and the built-in model on an AMD system. The output of every run of a case
must be the same bytes (checked; a difference is an error). No pass/fail on time: the figures go to
docs/benchmarks.md.

    python -m benchmarks.planner_process_bench [--repeat 3] [--only TEXT] [--src SRC] [--baseline OTHER/src]

With ``--baseline`` another commit's tree is timed too, its processes alternating with ours so that
both see the same load; both must print the same bytes (a speed change must not change a plan).

``--floor`` times, beside the cases, the least any process answering from AIC's engine must do: a
``python`` process that imports aiconfigurator-core, loads its tables for the README example's
(system, backend) and makes one static run of that model, with no aiplane code at all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: (label, arguments of ``aiplane plan``)
CASES: tuple[tuple[str, str], ...] = (
    (
        "README: Qwen3-32B-FP8 h200 trtllm 32g",
        "--model Qwen/Qwen3-32B-FP8 --system h200 --backend trtllm --isl 4000 --osl 500 --ttft 300 --itl 10 "
        "--total-gpus 32",
    ),
    (
        "Qwen3-8B h200 vllm 8g",
        "--model Qwen/Qwen3-8B --system h200 --backend vllm --isl 4000 --osl 1000 --ttft 300 --itl 10 "
        "--total-gpus 8",
    ),
    (
        "Llama-3.1-70B h100 vllm 16g",
        "--model meta-llama/Llama-3.1-70B --system h100 --backend vllm --isl 2000 --osl 500 --ttft 1000 "
        "--itl 30 --total-gpus 16",
    ),
    (
        "Llama-3.1-8B a100 vllm 8g",
        "--model meta-llama/Llama-3.1-8B --system a100 --backend vllm --isl 2000 --osl 256 --ttft 500 "
        "--itl 25 --total-gpus 8",
    ),
    (
        "MoE: Qwen3-30B-A3B h200 vllm 8g",
        "--model Qwen/Qwen3-30B-A3B --system h200 --backend vllm --isl 4000 --osl 500 --ttft 600 --itl 20 "
        "--total-gpus 8",
    ),
    (
        "built-in: Llama-3.1-70B mi300x vllm 16g",
        "--model meta-llama/Llama-3.1-70B --system mi300x --backend vllm --isl 2000 --osl 500 --ttft 1000 "
        "--itl 30 --total-gpus 16",
    ),
)


#: The smallest process that asks AIC's engine anything: import, one database, one static run.
FLOOR = """
from aiconfigurator_core.sdk import config, config_builders, models
from aiconfigurator_core.sdk.backends.factory import get_backend
from aiconfigurator_core.sdk.perf_database import get_database
database = get_database("h200_sxm", "trtllm", "1.3.0rc20")
par = config_builders.build_model_config(
    tp_size=1, pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=1, gemm_quant_mode=None
)
model = models.get_model("Qwen/Qwen3-32B-FP8", par, "trtllm")
runtime = config.RuntimeConfig(batch_size=1, isl=4000, osl=500)
get_backend("trtllm").run_static(model, database, runtime, "static_gen", 32, 1.0)
"""


def floor_seconds() -> float:
    """Wall seconds of one :data:`FLOOR` process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], capture_output=True, check=True)
    return time.perf_counter() - start


def run(args: list[str], cache: str, src: str = SRC) -> tuple[float, bytes]:
    """One ``aiplane plan`` process (aiplane from ``src``): its wall seconds and its output."""
    env = dict(os.environ, AIPLANE_CACHE_DIR=cache, PYTHONPATH=src, COLUMNS="160")
    command = [
        sys.executable,
        "-c",
        "import sys; from aiplane.cli import main; sys.exit(main())",
        "plan",
        *args,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(f"aiplane plan {' '.join(args)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, done.stdout


def _time_case(
    plan_args: list[str], srcs: list[str], repeat: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Cold and warm seconds per source tree, the trees' processes alternating (paired under the
    same load); every run of every tree must print the same bytes."""
    times: dict[str, tuple[list[float], list[float]]] = {src: ([], []) for src in srcs}
    outputs: set[bytes] = set()
    for _ in range(repeat):
        for src in srcs:
            with tempfile.TemporaryDirectory() as cache:
                for kind in (0, 1):  # cold, then warm from the same directory
                    seconds, out = run(plan_args, cache, src)
                    times[src][kind].append(seconds)
                    outputs.add(out)
    if len(outputs) != 1:
        raise SystemExit(f"{' '.join(plan_args)}: the runs answered differently")
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="cold and warm runs per case")
    parser.add_argument("--only", help="cases whose label contains this")
    parser.add_argument("--src", default=SRC, help="the aiplane source tree to time (another commit's)")
    parser.add_argument(
        "--baseline",
        help="another commit's source tree, timed alternately with --src (same answers required)",
    )
    parser.add_argument("--floor", action="store_true", help="also time AIC's own import + first run")
    args = parser.parse_args(argv)
    srcs = [args.src] if args.baseline is None else [args.baseline, args.src]
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)")
    heads = " ".join(
        f"{'cold/warm s ' + ('base' if i < len(srcs) - 1 else 'now'):>30}" for i in range(len(srcs))
    )
    print(f"{'case':42} {heads}  (median, max)")
    for label, plan_args in CASES:
        if args.only and args.only not in label:
            continue
        times = _time_case(plan_args.split(), srcs, args.repeat)
        cells = [
            f"{statistics.median(c):.2f}, {max(c):.2f} / {statistics.median(w):.2f}, {max(w):.2f}"
            for c, w in (times[src] for src in srcs)
        ]
        print(f"{label:42} " + " ".join(f"{cell:>30}" for cell in cells), flush=True)
    if args.floor:
        floors = [floor_seconds() for _ in range(args.repeat)]
        print(
            f"{'floor: AIC import + tables + 1 static run':42} {statistics.median(floors):.2f}, {max(floors):.2f}"
        )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

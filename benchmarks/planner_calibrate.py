"""Fit the built-in latency model's efficiencies to aiconfigurator-core's measured kernel tables.

The built-in model (:mod:`aiplane.planner.latency`) is a roofline whose only free numbers are the
efficiencies and overheads in :mod:`aiplane.planner.calibration`. NVIDIA measured the kernels those
numbers stand for on real GPUs and ships the tables in ``aiconfigurator-core`` (Parquet, per system,
framework and version). This script reads them and fits, per NVIDIA system:

- ``PREFILL_COMPUTE_EFFICIENCY``: achieved / peak tensor FLOPs of GEMMs with M >= 2048 tokens
  (``gemm_perf``), BF16 against the BF16 peak and FP8 against the FP8 peak;
- ``DECODE_COMPUTE_EFFICIENCY``: the same at M 256..1024 (a large decode batch);
- ``PREFILL_MEMORY_EFFICIENCY``: weight bytes / time / HBM bandwidth of GEMMs with M <= 16;
- ``DECODE_MEMORY_EFFICIENCY``: those GEMM reads pooled with the KV-cache reads of decode attention
  (``generation_attention_perf``, context >= 1024);
- ``ALLREDUCE_EFFICIENCY`` / ``ALLREDUCE_LATENCY_US``: least squares of
  latency = a + 2(n-1)/n x bytes / (eff x our link bandwidth) over ``custom_allreduce_perf``;
- ``PREFILL_OVERHEAD_MS`` / ``DECODE_LAYER_US``: what AIC's whole-engine estimate (the same tables
  plus its norms, element-wise ops and corrections) adds on top of our roofline with the efficiencies
  above, over a grid of dense models, TP sizes, batches and lengths (least squares in relative error):
  a fixed time per prefill, and per layer of a decode step (the decode's addition grows with the depth).

A vendor key takes the median over its systems (the model's constants are per vendor). AMD has no
AIC data: its values stay the public-spec ones. The fitted values and their provenance (table,
version, system, sample count, fit error) are written into ``calibration.py`` in place.

Run (needs the extra: ``pip install 'aiplane[aic]'``)::

    python -m benchmarks.planner_calibrate            # fit and rewrite calibration.py
    python -m benchmarks.planner_calibrate --dry-run  # print only
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import re
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiplane.planner import calibration as cal
from aiplane.planner import latency
from aiplane.planner.aic import AicBackend, AicLatency
from aiplane.planner.models import resolve_model
from aiplane.planner.systems import resolve_system
from aiplane.planner.types import ModelSpec, SystemSpec

SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "a100_sxm")
FRAMEWORK: AicBackend = "vllm"
#: Dense BF16 models for the overhead fit. MoE routing is a modelling choice, not an overhead; and
#: block-scaled FP8 checkpoints (Qwen3-32B-FP8) run vLLM kernels 4x slower than per-tensor FP8 at
#: decode-sized M in the tables, which no per-vendor constant can absorb (docs/planner-calibration.md).
OVERHEAD_MODELS = ("Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B")
#: The AMD values fitted to public measurements instead (their "# amd" provenance lines stay put).
AMD_SOURCE = dict.fromkeys(
    ("DECODE_MEMORY_EFFICIENCY", "DECODE_COMPUTE_EFFICIENCY", "DECODE_LAYER_US"),
    "fitted to OCI's public MI300X latency table (benchmarks/planner_amd_public.py)",
)
CALIBRATION = Path(__file__).resolve().parents[1] / "src/aiplane/planner/calibration.py"
CONSTANTS = (
    "PREFILL_COMPUTE_EFFICIENCY",
    "PREFILL_MEMORY_EFFICIENCY",
    "DECODE_MEMORY_EFFICIENCY",
    "DECODE_COMPUTE_EFFICIENCY",
    "ALLREDUCE_EFFICIENCY",
    "ALLREDUCE_LATENCY_US",
    "DECODE_LAYER_US",
    "PREFILL_OVERHEAD_MS",
    "FP8_BLOCK_GEMM_US",
    "FP8_BLOCK_SMALL_M_US",
)
#: AIC's bundled block-scaled FP8 checkpoint (weight_block_size 128x128), for FP8_BLOCK_GEMM_US.
FP8_BLOCK_MODEL = "Qwen/Qwen3-32B-FP8"


@dataclass(frozen=True)
class Fit:
    """One constant fitted on one system: the value, its spread and where it came from."""

    value: float
    samples: int
    #: Median |sample / value - 1| (a median) or |fitted formula / sample - 1| (a least-squares fit).
    error: float
    source: str


def _data_root() -> Path:
    core = importlib.import_module("aiconfigurator_core")
    return Path(core.__file__).parent / "systems" / "data"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _table(system: str, op: str, file: str) -> tuple[Any, str]:
    """The newest version of one table for our framework, and its provenance ``op/vllm/<ver>/file``."""
    pandas = importlib.import_module("pandas")
    base = _data_root() / system / op / FRAMEWORK
    versions = sorted((d.name for d in base.iterdir() if (d / file).exists()), key=_version_key)
    if not versions:
        raise SystemExit(f"aiconfigurator-core has no {op}/{FRAMEWORK}/*/{file} for {system}")
    return pandas.read_parquet(base / versions[-1] / file), f"{op}/{FRAMEWORK}/{versions[-1]}/{file}"


def _median_fit(values: list[float], source: str) -> Fit:
    med = statistics.median(values)
    spread = statistics.median(abs(v / med - 1.0) for v in values)
    return Fit(round(med, 3), len(values), spread, source)


def fit_gemm(system: SystemSpec, aic_system: str) -> tuple[dict[str, Fit], list[float]]:
    """Compute efficiency at prefill-sized and decode-sized M, memory efficiency at M <= 16; and the
    memory efficiencies at decode-sized M (<= 64), to pool with decode attention's."""
    table, source = _table(aic_system, "gemm", "gemm_perf.parquet")
    peaks = {"bfloat16": system.bf16_tflops, "fp8": system.fp8_tflops}
    weight_bytes = {"bfloat16": 2.0, "fp8": 1.0}
    rows = table[table.gemm_dtype.isin([d for d, p in peaks.items() if p > 0])]
    rows = rows[(rows.n >= 2048) & (rows.k >= 2048)]
    # Several kernels per dtype: the framework picks the fastest, so do we.
    best = rows.groupby(["gemm_dtype", "m", "n", "k"], as_index=False).latency.min()
    flops = 2.0 * best.m * best.n * best.k / (best.latency * 1e-3)
    compute = flops / (best.gemm_dtype.map(peaks) * 1e12)
    bytes_ = best.n * best.k * best.gemm_dtype.map(weight_bytes) + 2.0 * best.m * (best.n + best.k)
    memory = bytes_ / (best.latency * 1e-3) / (system.memory_bandwidth_tbs * 1e12)
    fits = {
        "PREFILL_COMPUTE_EFFICIENCY": _median_fit(list(compute[best.m >= 2048]), source),
        "DECODE_COMPUTE_EFFICIENCY": _median_fit(list(compute[(best.m >= 256) & (best.m <= 1024)]), source),
        "PREFILL_MEMORY_EFFICIENCY": _median_fit(list(memory[best.m <= 16]), source),
    }
    return fits, list(memory[best.m <= 64])


def fit_decode_attention(system: SystemSpec, aic_system: str) -> tuple[list[float], str]:
    """Achieved KV-read bandwidth / HBM bandwidth of decode attention at 1k+ tokens of context."""
    table, source = _table(aic_system, "attention", "generation_attention_perf.parquet")
    if "window_size" in table:  # older tables (a100_sxm, vLLM 0.14) have no sliding-window rows
        table = table[table.window_size == 0]
    rows = table[(table.step >= 1023) & (table.batch_size >= 8)]
    rows = rows.groupby(
        ["batch_size", "step", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype"],
        as_index=False,
    ).latency.min()
    kv_bytes = rows.kv_cache_dtype.map({"bfloat16": 2.0, "fp8": 1.0})
    bytes_ = rows.batch_size * (rows.step + 1) * 2.0 * rows.num_key_value_heads * rows.head_dim * kv_bytes
    return list(bytes_ / (rows.latency * 1e-3) / (system.memory_bandwidth_tbs * 1e12)), source


def fit_allreduce(system: SystemSpec, aic_system: str) -> dict[str, Fit]:
    """latency_ms = a + 2(n-1)/n x bytes / (eff x link) by least squares in relative error."""
    numpy = importlib.import_module("numpy")
    table, source = _table(aic_system, "comm", "custom_allreduce_perf.parquet")
    rows = table[table.backend.str.endswith("graph")] if "backend" in table else table
    # message_size counts BF16 elements (checked: 8 x H200 reaches 446 GB/s bus bandwidth at 256 MiB).
    bytes_ = rows.message_size * 2.0
    x = 2.0 * (rows.num_gpus - 1) / rows.num_gpus * bytes_ / (system.interconnect_gbs * 1e9) * 1e3
    y = rows.latency.to_numpy()
    design = numpy.stack([numpy.ones(len(y)), x.to_numpy()], axis=1) / y[:, None]
    (a, b), *_ = numpy.linalg.lstsq(design, numpy.ones(len(y)), rcond=None)
    predicted = a + b * x.to_numpy()
    error = float(numpy.median(numpy.abs(predicted / y - 1.0)))
    return {
        "ALLREDUCE_EFFICIENCY": Fit(round(1.0 / b, 3), len(y), error, source),
        "ALLREDUCE_LATENCY_US": Fit(round(a * 1e3, 1), len(y), error, source),
    }


@contextmanager
def _constants(vendor: str, values: dict[str, float]) -> Iterator[None]:
    """Evaluate the built-in model with ``values`` for ``vendor`` (restored afterwards)."""
    saved = {name: getattr(cal, name) for name in values}
    by_system = cal.BY_SYSTEM
    try:
        cal.BY_SYSTEM = {}  # the per-system values would shadow the ones under test
        for name, value in values.items():
            setattr(cal, name, {**getattr(cal, name), vendor: value})
        yield
    finally:
        cal.BY_SYSTEM = by_system
        for name, mapping in saved.items():
            setattr(cal, name, mapping)


def _grid(model: ModelSpec, system: SystemSpec, fp8: bool = False) -> Iterator[tuple[str, int, int, int]]:
    # The block-FP8 fit needs more decode batches on each side of its 16-32 row step.
    batches = (1, 4, 8, 12, 15, 32, 48, 64, 128) if fp8 else (1, 8, 32, 128)
    for tp in (1, 2, 4, 8):
        if latency.kv_capacity_tokens(model, system, tp) < 64 * 1024:
            continue
        for isl in (512, 1024, 2048, 4096, 8192):
            yield "prefill", tp, 1, isl
        for batch in batches:
            for context in (1024, 4096):
                if batch * context <= latency.kv_capacity_tokens(model, system, tp):
                    yield "decode", tp, batch, context


def _points(system: SystemSpec, aic: AicLatency) -> list[tuple[str, ModelSpec, int, int, int, float]]:
    points = []
    for name in OVERHEAD_MODELS:
        model = resolve_model(name)
        if model.weight_dtype == "fp8" and system.fp8_tflops <= 0:
            continue
        for kind, tp, batch, x in _grid(model, system):
            measure = aic.prefill_ms if kind == "prefill" else aic.decode_step_ms
            points.append((kind, model, tp, batch, x, measure(model, system, tp, batch, x)))
    return points


def _ours(kind: str, model: ModelSpec, system: SystemSpec, tp: int, batch: int, x: int) -> float:
    raw: Callable[[ModelSpec, SystemSpec, int, int, int], float]
    raw = latency.prefill_raw_ms if kind == "prefill" else latency.decode_raw_ms
    return raw(model, system, tp, batch, x)


def _overhead(pts: list[tuple[float, float, float]]) -> tuple[float, float]:
    """The c >= 0 minimising sum(((ours + c x scale) / aic - 1)^2) over (ours, aic, scale), and that sum
    (scale 1: a fixed cost; a model's layers: a cost per layer)."""
    c = sum((aic - ours) * k / aic**2 for ours, aic, k in pts) / sum(k * k / aic**2 for _, aic, k in pts)
    c = max(0.0, c)
    return c, sum(((ours + c * k) / aic - 1.0) ** 2 for ours, aic, k in pts)


def _decode_points(system: SystemSpec, points: list[Any]) -> list[tuple[float, float, float]]:
    """(ours, AIC's, layers) of the decode points, at the constants in force."""
    return [
        (_ours(k, m, system, tp, b, x), aic, float(m.layers))
        for k, m, tp, b, x, aic in points
        if k == "decode"
    ]


def fit_overheads(system: SystemSpec, points: list[Any], fits: dict[str, Fit]) -> dict[str, Fit]:
    """The fixed cost per prefill / step that makes our roofline meet AIC's engine (relative LSQ).

    A decode step is mostly memory time, and AIC's engine adds per-layer costs (norms, RoPE, launch
    floors of small kernels) that the kernel tables alone do not show; so the decode memory efficiency
    is fitted jointly with the step overhead (grid over the efficiency, closed form for the overhead),
    and the kernel-table value is kept in the provenance.
    """
    values = {k: f.value for k, f in fits.items()}
    zero = {"PREFILL_OVERHEAD_MS": 0.0, "DECODE_LAYER_US": 0.0}
    out: dict[str, Fit] = {}
    # Prefill: the compute efficiency jointly with the overhead too. The GEMM tables' median MFU misses
    # AIC's whole prefill by ~10% on some systems (Qwen3-32B on H100: 201 vs 183 ms), enough to flip the
    # prefill:decode ratio and with it the decode TP the search picks.
    prefill_best: tuple[float, float, float] | None = None
    for step in range(40, 100):
        with _constants(system.vendor, {**values, **zero, "PREFILL_COMPUTE_EFFICIENCY": step / 100.0}):
            pts = [
                (_ours(k, m, system, tp, b, x), aic, 1.0) for k, m, tp, b, x, aic in points if k == "prefill"
            ]
        c, loss = _overhead(pts)
        if prefill_best is None or loss < prefill_best[2]:
            prefill_best = (step / 100.0, c, loss)
    assert prefill_best is not None
    peff, c, _ = prefill_best
    values["PREFILL_COMPUTE_EFFICIENCY"] = peff
    with _constants(system.vendor, {**values, **zero}):
        pts = [(_ours(k, m, system, tp, b, x), aic, 1.0) for k, m, tp, b, x, aic in points if k == "prefill"]
    error = statistics.median(abs((ours + c) / aic - 1.0) for ours, aic, _ in pts)
    out["PREFILL_OVERHEAD_MS"] = Fit(round(c, 2), len(pts), error, "AIC engine vs our roofline, joint")
    kernel_p = fits["PREFILL_COMPUTE_EFFICIENCY"]
    out["PREFILL_COMPUTE_EFFICIENCY"] = Fit(
        peff,
        len(pts),
        error,
        f"AIC engine, joint with the prefill overhead; GEMM tables alone: {kernel_p.value} "
        f"({kernel_p.source}, n={kernel_p.samples}, median |dev| {kernel_p.error:.1%})",
    )
    best: tuple[float, float, float] | None = None
    for step in range(40, 96):
        eff = step / 100.0
        with _constants(system.vendor, {**values, **zero, "DECODE_MEMORY_EFFICIENCY": eff}):
            pts = _decode_points(system, points)
        c, loss = _overhead(pts)
        if best is None or loss < best[2]:
            best = (eff, c, loss)
    assert best is not None
    eff, c, _ = best
    with _constants(system.vendor, {**values, **zero, "DECODE_MEMORY_EFFICIENCY": eff}):
        pts = _decode_points(system, points)
    error = statistics.median(abs((ours + c * layers) / aic - 1.0) for ours, aic, layers in pts)
    kernel = fits["DECODE_MEMORY_EFFICIENCY"]
    out["DECODE_MEMORY_EFFICIENCY"] = Fit(
        eff,
        len(pts),
        error,
        f"AIC engine, joint with the step overhead; kernel tables alone: {kernel.value} "
        f"({kernel.source}, n={kernel.samples}, median |dev| {kernel.error:.1%})",
    )
    out["DECODE_LAYER_US"] = Fit(round(c * 1e3, 1), len(pts), error, "AIC engine vs our roofline, joint")
    return out


def fit_fp8_block(system: SystemSpec, aic: AicLatency, values: dict[str, float]) -> dict[str, Fit]:
    """The fixed time per block-scaled FP8 GEMM that makes our roofline (which costs the checkpoint as
    per-tensor FP8) meet AIC's engine on a block-scaled checkpoint: relative least squares at the
    fitted constants, separately for GEMMs of < 16 rows (decode batches 1-15) and >= 32 (larger
    batches, prefills), as vLLM's block-FP8 kernels step between (latency._fp8_block_ms). They barely
    shrink with the shard, so the extra time is per GEMM and per GPU, not per byte."""
    model = resolve_model(FP8_BLOCK_MODEL)
    gemms = model.layers * latency._GEMMS_PER_LAYER
    small: list[tuple[float, float, float]] = []
    large: list[tuple[float, float, float]] = []
    zero = {"FP8_BLOCK_GEMM_US": 0.0, "FP8_BLOCK_SMALL_M_US": 0.0}
    with _constants(system.vendor, {**values, **zero}):
        for kind, tp, batch, x in _grid(model, system, fp8=True):
            measure = aic.prefill_ms if kind == "prefill" else aic.decode_step_ms
            rows = batch * x if kind == "prefill" else batch
            if latency._SMALL_M <= rows < latency._LARGE_M:
                continue
            point = (_ours(kind, model, system, tp, batch, x), measure(model, system, tp, batch, x), 1.0)
            (small if rows < latency._SMALL_M else large).append(point)
    out = {}
    for name, pts, label in (("FP8_BLOCK_GEMM_US", large, ">= 32"), ("FP8_BLOCK_SMALL_M_US", small, "< 16")):
        c, _ = _overhead(pts)
        error = statistics.median(abs((ours + c) / measured - 1.0) for ours, measured, _ in pts)
        source = f"AIC engine on {FP8_BLOCK_MODEL} vs our roofline, GEMMs of {label} rows"
        out[name] = Fit(round(c / gemms * 1e3, 1), len(pts), error, source)
    return out


def end_to_end_error(system: SystemSpec, points: list[Any], values: dict[str, float]) -> dict[str, float]:
    """Median and 90th-percentile |ours / AIC - 1| of whole prefills and decode steps."""
    out: dict[str, float] = {}
    with _constants(system.vendor, values):
        for kind in ("prefill", "decode"):  # (two kinds; one loop)
            errors = sorted(
                abs(_ours(k, m, system, tp, b, x) / aic - 1.0) for k, m, tp, b, x, aic in points if k == kind
            )
            out[f"{kind}_median"] = statistics.median(errors)
            out[f"{kind}_p90"] = errors[int(0.9 * (len(errors) - 1))]
    return out


def fit_system(name: str, aic: AicLatency) -> tuple[dict[str, Fit], list[Any]]:
    system = resolve_system(name)
    fits, gemm_memory = fit_gemm(system, name)
    attention, source = fit_decode_attention(system, name)
    gemm_source = fits["PREFILL_MEMORY_EFFICIENCY"].source
    fits["DECODE_MEMORY_EFFICIENCY"] = _median_fit(gemm_memory + attention, f"{gemm_source} + {source}")
    fits.update(fit_allreduce(system, name))
    points = _points(system, aic)
    fits.update(fit_overheads(system, points, fits))
    return fits, points


def render(
    text: str,
    vendor_values: dict[str, float],
    notes: dict[str, list[str]],
    summary: list[str],
    by_system: dict[str, dict[str, float]] | None = None,
) -> str:
    """``calibration.py`` with the NVIDIA value of each constant replaced and its provenance above it,
    and a summary (end-to-end error per system) after the imports."""
    text = re.sub(r"(?m)^# fit summary: .*\n", "", text)
    anchor = "from aiplane.planner.types import SystemSpec, Vendor\n"
    if anchor not in text:
        raise SystemExit("calibration.py's imports changed: update this script's anchor")
    text = text.replace(anchor, anchor + "\n" + "".join(f"# fit summary: {line}\n" for line in summary), 1)
    text = re.sub(r"(# fit summary: .*\n)\n\n+", r"\1\n", text)
    for name in CONSTANTS:
        # Drop the previous run's provenance lines, then replace the value.
        text = re.sub(rf"(?m)^# fit {name}: .*\n", "", text)
        pattern = re.compile(rf'(?m)^({name}: Mapping\[Vendor, float\] = \{{"nvidia": )([0-9.]+)')
        if not pattern.search(text):
            raise SystemExit(f"calibration.py has no NVIDIA entry for {name}: update this script")
        text = pattern.sub(lambda m, n=name: f"{m.group(1)}{vendor_values[n]}", text)
        lines = "".join(f"# fit {name}: {note}\n" for note in notes[name])
        text = re.sub(rf"(?m)^{name}: ", lambda m, lines=lines: lines + m.group(0), text, count=1)
    if by_system is not None:
        body = "".join(
            f'    "{s}": {{\n' + "".join(f'        "{k}": {v},\n' for k, v in values.items()) + "    },\n"
            for s, values in by_system.items()
        )
        line = "BY_SYSTEM: Mapping[str, Mapping[str, float]] = {\n" + body + "}"
        text = re.sub(r"(?ms)^BY_SYSTEM: .*?^\}", lambda _: line, text, count=1)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the fit, do not rewrite calibration.py")
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    version = importlib.metadata.version("aiconfigurator-core")
    aic = AicLatency(FRAMEWORK)
    per_system: dict[str, dict[str, Fit]] = {}
    points: dict[str, list[Any]] = {}
    for name in args.systems:
        per_system[name], points[name] = fit_system(name, aic)
        print(f"{name}: " + ", ".join(f"{k}={f.value}" for k, f in per_system[name].items()))
    vendor_values = {
        c: round(float(statistics.median(per_system[s][c].value for s in per_system)), 3)
        for c in CONSTANTS
        if not c.startswith("FP8_BLOCK")
    }
    fp8_systems = [s for s in per_system if resolve_system(s).fp8_tflops > 0]
    for name in fp8_systems:
        own = {k: f.value for k, f in per_system[name].items()}
        per_system[name].update(fit_fp8_block(resolve_system(name), aic, own))
    for c in ("FP8_BLOCK_GEMM_US", "FP8_BLOCK_SMALL_M_US"):
        vendor_values[c] = round(float(statistics.median(per_system[s][c].value for s in fp8_systems)), 1)
    summary = [
        f"aiconfigurator-core {version}, {FRAMEWORK} tables; |ours / AIC engine - 1| with the vendor fallback values "
        f"below over {', '.join(OVERHEAD_MODELS)} (TP 1-8, prefill ISL 512-8192, decode batch 1-128 at 1k/4k):"
    ]
    for name, fits in per_system.items():
        errors = end_to_end_error(resolve_system(name), points[name], vendor_values)
        own = end_to_end_error(resolve_system(name), points[name], {k: f.value for k, f in fits.items()})
        summary.append(
            f"  {name}: prefill median {errors['prefill_median']:.1%} p90 {errors['prefill_p90']:.1%}, "
            f"decode median {errors['decode_median']:.1%} p90 {errors['decode_p90']:.1%} "
            f"(its own values, which the model uses: {own['prefill_median']:.1%}/{own['prefill_p90']:.1%}, "
            f"{own['decode_median']:.1%}/{own['decode_p90']:.1%})"
        )
    notes = {
        c: [
            f"nvidia = median over systems of aiconfigurator-core {version} ({FRAMEWORK} tables, "
            f"benchmarks/planner_calibrate.py); AMD: {AMD_SOURCE.get(c, 'public-spec value, AIC has no AMD data')}"
        ]
        + [
            f"  {s}: {per_system[s][c].value} ({per_system[s][c].source}, n={per_system[s][c].samples}, "
            f"median |dev| {per_system[s][c].error:.1%})"
            for s in per_system
            if c in per_system[s]
        ]
        for c in CONSTANTS
    }
    print("nvidia:", vendor_values)
    print("\n".join(summary))
    if args.dry_run:
        return
    by_system = {s: {c: fits[c].value for c in CONSTANTS if c in fits} for s, fits in per_system.items()}
    CALIBRATION.write_text(render(CALIBRATION.read_text(), vendor_values, notes, summary, by_system))
    print(f"wrote {CALIBRATION}")


if __name__ == "__main__":
    main()

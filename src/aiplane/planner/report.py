"""``aiplane plan``'s output: the JSON document scripts read and the rows of the human table."""

from __future__ import annotations

from typing import Any

from aiplane.planner.types import EnginePlan, Plan, PlanResult

#: Exit statuses of ``aiplane plan``.
EXIT_MEETS_SLA = 0
EXIT_BAD_INPUT = 2
EXIT_BEST_EFFORT = 3


def _engine(e: EnginePlan, *, batch: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"tp": e.tp, "workers": e.workers}
    if e.moe:
        out.update(dp=e.dp, moeTp=e.moe_tp, moeEp=e.moe_ep, gpusPerWorker=e.gpus_per_worker)
    if batch:
        out["batch"] = e.batch
    return out


def layout(e: EnginePlan) -> str:
    """TP4, or with data-parallel attention / expert parallelism TP1 DP4 (EP4), as AIC's tables name it."""
    if not e.moe:
        return f"TP{e.tp}"
    attention = f"TP{e.tp}" + (f" DP{e.dp}" if e.dp > 1 else "")
    experts = f"EP{e.moe_ep}" + (f" ETP{e.moe_tp}" if e.moe_tp > 1 else "")
    return f"{attention} ({experts})"


def _plan(p: Plan | None) -> dict[str, Any] | None:
    if p is None:
        return None
    out: dict[str, Any] = {}
    if p.prefill is not None:
        out["prefill"] = _engine(p.prefill, batch=False)
    if p.decode is not None:
        out["decode"] = _engine(p.decode, batch=True)
    if p.agg is not None:
        out["agg"] = _engine(p.agg, batch=True)
    out.update(
        tokensPerSecondPerGpu=round(p.tokens_per_second_per_gpu, 3),
        tokensPerSecondPerUser=round(p.tokens_per_second_per_user, 3),
        ttftMs=round(p.ttft_ms, 3),
        itlMs=round(p.itl_ms, 3),
        gpus=p.gpus,
        meetsSla=p.meets_sla,
    )
    return out


def to_json(result: PlanResult) -> dict[str, Any]:
    return {
        "model": result.model,
        "system": result.system,
        "backend": result.backend,
        "latencyModel": result.latency_model,
        "totalGpus": result.total_gpus,
        "disagg": _plan(result.disagg),
        "agg": _plan(result.agg),
        "frontier": [{"tokensPerSecondPerUser": u, "tokensPerSecondPerGpu": g} for u, g in result.frontier],
    }


def exit_code(result: PlanResult) -> int:
    """0 when some plan meets the SLA, else 3 (a best-effort answer, or none at all)."""
    plans = (result.disagg, result.agg)
    return EXIT_MEETS_SLA if any(p is not None and p.meets_sla for p in plans) else EXIT_BEST_EFFORT


def _engines(p: Plan) -> str:
    if p.agg is not None:
        return f"{p.agg.workers} x agg {layout(p.agg)} (batch {_batch(p.agg)})"
    assert p.prefill is not None and p.decode is not None
    return (
        f"{p.prefill.workers} x prefill {layout(p.prefill)} + "
        f"{p.decode.workers} x decode {layout(p.decode)} (batch {_batch(p.decode)})"
    )


def _batch(e: EnginePlan) -> str:
    return f"{e.batch} x {e.dp} ranks" if e.dp > 1 else str(e.batch)


def plan_rows(result: PlanResult) -> list[tuple[str, ...]]:
    """One row per plan kind: kind, engines, GPUs, tokens/s/GPU, tokens/s/user, TTFT, ITL, SLA."""
    rows: list[tuple[str, ...]] = []
    for kind, p in (("disagg", result.disagg), ("agg", result.agg)):
        if p is None:
            rows.append((kind, "none: no engine size fits memory and budget", "-", "-", "-", "-", "-", "-"))
            continue
        rows.append(
            (
                kind,
                _engines(p),
                str(p.gpus),
                f"{p.tokens_per_second_per_gpu:.1f}",
                f"{p.tokens_per_second_per_user:.1f}",
                f"{p.ttft_ms:.1f}",
                f"{p.itl_ms:.2f}",
                "yes" if p.meets_sla else "NO (best effort)",
            )
        )
    return rows


_FLAGS = {
    "model": "--model",
    "model config": "--model-config",
    "system": "--system",
    "backend": "--backend",
    "isl": "--isl",
    "osl": "--osl",
    "ttft": "--ttft",
    "itl": "--itl",
    "minGpusPerEngine": "--min-gpus-per-engine",
    "maxGpusPerEngine": "--max-gpus-per-engine",
    "totalGpus": "--total-gpus",
    "partitionsPerGpu": "--partitions-per-gpu",
    "latencyModel": "--latency-model",
}


#: The same fields as the DynamoGraphDeploymentRequest names them (the controller's messages).
_CR_FIELDS = {
    "model": "spec.modelName",
    "model config": "spec.profilingConfig.configMapRef (key config.json)",
    "modelConfig": "spec.profilingConfig.configMapRef (key config.json)",
    "system": "spec.gpu.type",
    "backend": "spec.backend",
    "isl": "spec.sla.isl",
    "osl": "spec.sla.osl",
    "ttft": "spec.sla.ttft",
    "itl": "spec.sla.itl",
    "minGpusPerEngine": "spec.gpu.minNumGPUsPerEngine",
    "maxGpusPerEngine": "spec.gpu.maxNumGPUsPerEngine",
    "totalGpus": "spec.gpu.totalGpus",
    "partitionsPerGpu": "spec.gpu.type (partition mode)",
    "latencyModel": "latency model",
}
_FLAGS["modelConfig"] = "--model-config"


def _spelled(message: str, names: dict[str, str]) -> str:
    """``message`` with its leading field and every `backquoted` field spelled by ``names``."""
    field, sep, rest = message.partition(": ")
    if sep and field in names:
        message = f"{names[field]}: {rest}"
    for name, spelled in names.items():
        message = message.replace(f"`{name}`", spelled)
    return message


def flag_message(message: str) -> str:
    """A PlannerError's message with its fields ("isl: ...") spelled as CLI flags ("--isl: ...")."""
    return _spelled(message, _FLAGS)


def cr_message(message: str) -> str:
    """A PlannerError's message with its fields spelled as the DGDR's (``spec.sla.isl: ...``)."""
    return _spelled(message, _CR_FIELDS)


def frontier_rows(result: PlanResult, limit: int = 12) -> list[tuple[str, str]]:
    """At most ``limit`` frontier points, evenly spread, both ends kept (the JSON carries them all)."""
    points = result.frontier
    if len(points) > limit:
        step = (len(points) - 1) / (limit - 1)
        points = tuple(points[round(i * step)] for i in range(limit))
    return [(f"{user:.1f}", f"{gpu:.1f}") for user, gpu in points]

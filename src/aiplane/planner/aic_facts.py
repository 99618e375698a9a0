"""Facts of AIC's measured tables that no request changes, measured once per release and shipped.

A cold ``aiplane plan`` spent much of its time not in AIC's engine runs but in three lookups AIC
answers by reading whole tables or files, whose answers depend only on AIC's data for a (system,
backend, data version), never on the model, the layout or the workload:

- **attention-lane density**: before its compiled engine times attention, AIC ranks the measured
  kernel lanes of the system's attention tables by how much data each carries (aiconfigurator_core
  sdk/operations/attention.py ``resolved_lane_order_for_op`` through sdk/engine_table_view.py
  ``fetch_attention_lane_density``), four views per database, in its Rust extension;
- **context FMHA modes**: which attention quantisations have rows beside a KV-cache dtype
  (sdk/perf_database.py ``context_fmha_supported_modes``), which decides whether an FP8
  checkpoint's context attention is timed at BF16 (:func:`aiplane.planner.aic_moe_comm.context_fmha_bf16`);
  answering it loads the attention tables into Python;
- **the default data version** of a (system, backend): AIC's lookup parses every system's YAML file.

All three are measured here for every (system, backend) at its default data version
(``python -m aiplane.planner.aic_facts --write``) and shipped beside this module. The lane density
goes into AIC's own per-database memo (:func:`seed`), the one its code reads first, so its lane order
is unchanged; the FMHA modes are read by :func:`fmha_modes`. A database the file does not hold (a
user's ``backendVersion``) or another AIC release is left to AIC to answer. Tests check the shipped
facts against AIC's live answers.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The four (table, shared donor versions) views AIC asks the lane density of.
LANE_VIEWS: tuple[tuple[str, bool], ...] = (
    ("_context_attention_data", True),
    ("_context_attention_data", False),
    ("_generation_attention_data", True),
    ("_generation_attention_data", False),
)
#: The KV-cache dtypes a context FMHA question names (None: any).
KV_MODES: tuple[str | None, ...] = (None, "bfloat16", "int8", "fp8")
DATA = Path(__file__).with_name("aic_facts.json")
#: What AIC's memo holds per lane view: ``{kernel lane: (slices, rows)}``.
Density = dict[str, tuple[int, int]]


def _key(system: str, backend: str, version: str) -> str:
    return f"{system}/{backend}/{version}"


@functools.cache
def _shipped() -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded


@functools.cache
def installed_release() -> str | None:
    """The installed aiconfigurator-core's version: facts of another release are never used."""
    try:
        return importlib.metadata.version("aiconfigurator-core")
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def packaged_systems() -> Path | None:
    """The systems tree inside the installed aiconfigurator-core (found without importing it)."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    return None if spec is None or spec.origin is None else (Path(spec.origin).parent / "systems").resolve()


def _own_systems_tree() -> bool:
    """Whether AIC reads its own packaged systems tree: ``AICONFIGURATOR_SYSTEMS_PATH`` unset or set
    to it (AIC sets it so itself on its first engine run), not to a tree of the user's."""
    configured = os.environ.get("AICONFIGURATOR_SYSTEMS_PATH")
    return not configured or Path(configured).resolve() == packaged_systems()


def _databases_shipped() -> dict[str, Any]:
    """The shipped facts per database, when they are facts of the installed AIC's own data (not of
    another release, nor of a systems tree the user pointed AIC at)."""
    if _shipped().get("release") != installed_release() or not _own_systems_tree():
        return {}
    found: dict[str, Any] = _shipped().get("databases", {})
    return found


def default_version(system: str, backend: str) -> str | None:
    """AIC's default data version of (system, backend), as shipped (AIC's own lookup parses every
    system's YAML file); None when not shipped."""
    prefix = f"{system}/{backend}/"
    return next((key[len(prefix) :] for key in _databases_shipped() if key.startswith(prefix)), None)


def _database_facts(database: Any) -> dict[str, Any] | None:
    key = _key(str(database.system), str(database.backend), str(database.version))
    found: dict[str, Any] | None = _databases_shipped().get(key)
    return found


def lane_density(database: Any) -> dict[tuple[str, bool], Density] | None:
    """The shipped lane density of every view of ``database``, or None when not shipped."""
    found = _database_facts(database)
    if found is None:
        return None
    lanes = found["lanes"]
    return {
        (table, shared): {lane: (int(v[0]), int(v[1])) for lane, v in lanes[f"{table}:{int(shared)}"].items()}
        for table, shared in LANE_VIEWS
    }


def seed(database: Any) -> bool:
    """Put the shipped lane density of ``database`` into AIC's memo; whether there was one.

    Only where the database's own shared-layer view is on: AIC keys its memo by the effective view,
    and its default databases have it on.
    """
    density = lane_density(database) if bool(database.enable_shared_layer) else None
    if density is None:
        return False
    generation = importlib.import_module("aiconfigurator_core.sdk.engine")._PROBE_CACHE_GENERATION
    database.__dict__["_attention_lane_density_cache"] = (generation, density)
    return True


def fmha_modes(database: Any, ctx_op: str, kv_mode: Any) -> list[str]:
    """AIC's ``context_fmha_supported_modes`` for ``database``: shipped, else asked of AIC."""
    found = _database_facts(database)
    kv = None if kv_mode is None else str(getattr(kv_mode, "name", kv_mode))
    shipped = None if found is None else found["fmha"].get(ctx_op, {}).get(str(kv))
    if shipped is not None:
        return list(shipped)
    supported = importlib.import_module("aiconfigurator_core.sdk.perf_database").context_fmha_supported_modes
    return list(supported(database, ctx_op, kv_mode))


def measure(database: Any, ops: Sequence[str] | None = None) -> dict[str, Any]:
    """AIC's own answers for ``database`` (seconds: it reads the tables), for every context attention
    op AIC knows or those of ``ops``."""
    view = importlib.import_module("aiconfigurator_core.sdk.engine_table_view")
    perf = importlib.import_module("aiconfigurator_core.sdk.perf_database")
    kv_enum = importlib.import_module("aiconfigurator_core.sdk.common").KVCacheQuantMode
    lanes = {
        f"{table}:{int(shared)}": {
            lane: list(v)
            for lane, v in sorted(
                view.fetch_attention_lane_density(database, table, shared_layer=shared).items()
            )
        }
        for table, shared in LANE_VIEWS
    }
    fmha = {
        op: {
            str(kv): list(
                perf.context_fmha_supported_modes(database, op, None if kv is None else kv_enum[kv])
            )
            for kv in KV_MODES
        }
        for op in sorted(perf._CONTEXT_FMHA_OP_TABLES if ops is None else ops)
    }
    return {"lanes": lanes, "fmha": fmha}


def databases() -> list[tuple[str, str]]:
    """Every (AIC system, backend) with measured attention data in the installed AIC."""
    systems = packaged_systems()
    if systems is None or not (root := systems / "data").is_dir():
        return []
    return sorted(
        (system.name, backend.name)
        for system in root.iterdir()
        if (system / "attention").is_dir()
        for backend in (system / "attention").iterdir()
        if backend.is_dir()
    )


def write(progress: Callable[[str], None] = print) -> None:
    """Measure every (system, backend) at its default version and write :data:`DATA`."""
    aic = importlib.import_module("aiplane.planner.aic")
    for logger in ("aiconfigurator", "aiconfigurator_core"):  # its warnings on every fallback table
        logging.getLogger(logger).setLevel(logging.ERROR)
    out: dict[str, Any] = {}
    for system, backend in databases():
        try:
            version = aic.literal_version(system, backend, None)
        except Exception:  # a (system, backend) AIC lists no version of: nothing to ship
            continue
        database = aic.load_database(system, backend, version)
        if database is not None:
            out[_key(system, backend, str(version))] = measure(database)
            progress(_key(system, backend, str(version)))
    # One database a line: a new release's diff shows which databases changed.
    lines = [
        f"{json.dumps(k)}:{json.dumps(out[k], sort_keys=True, separators=(',', ':'))}" for k in sorted(out)
    ]
    release = json.dumps(installed_release())
    DATA.write_text(
        f'{{"release":{release},"databases":{{\n' + ",\n".join(lines) + "\n}}\n", encoding="utf-8"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help=f"measure and write {DATA.name}")
    if parser.parse_args().write:
        write()


if __name__ == "__main__":
    main()

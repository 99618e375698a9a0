"""Run ``aiplane ARGS`` under tracemalloc and write what holds memory when it exits (a benchmark helper).

``python benchmarks/memtrace.py OUT -- run --kubeconfig ...``: the command runs as ``aiplane.cli``
would, with ``tracemalloc`` tracing 1 frame. A thread samples the traced total every
``MEMTRACE_INTERVAL`` seconds (default 1) and keeps a snapshot of the highest total seen (tracemalloc
reports a peak total, but not what made it up); at exit ``OUT`` gets the top allocations by
file:line of that peak snapshot and of the final one, with VmHWM and VmRSS for comparison (RSS also
counts the interpreter, C extensions and freed-but-not-returned pages that tracemalloc does not see).

Tracing costs time and memory of its own (the traces); compare RSS figures only from runs without it.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path

TOP = 40


def _proc_status() -> str:
    lines = Path("/proc/self/status").read_text().splitlines()
    return " ".join(line.replace("\t", " ") for line in lines if line.startswith(("VmHWM", "VmRSS")))


def _report(title: str, snapshot: tracemalloc.Snapshot) -> list[str]:
    snapshot = snapshot.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    out = [f"== {title}: {total / 2**20:.1f} MiB traced in {sum(s.count for s in stats)} blocks"]
    for stat in stats[:TOP]:
        frame = stat.traceback[0]
        out.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}  {frame.filename}:{frame.lineno}")
    by_file = snapshot.statistics("filename")
    out.append(f"-- by file ({title})")
    out.extend(f"{s.size / 2**20:8.2f} MiB {s.count:9d}  {s.traceback[0].filename}" for s in by_file[:25])
    return out


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    out = Path(sys.argv[1])
    args = sys.argv[sys.argv.index("--") + 1 :]
    interval = float(os.environ.get("MEMTRACE_INTERVAL", "1"))
    tracemalloc.start(1)
    state: dict[str, object] = {"peak": 0, "snapshot": None, "at": 0.0, "rss": ""}
    started = time.monotonic()
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            current, _ = tracemalloc.get_traced_memory()
            if current > int(state["peak"]):  # type: ignore[call-overload]
                state.update(
                    peak=current,
                    snapshot=tracemalloc.take_snapshot(),
                    at=time.monotonic() - started,
                    rss=_proc_status(),
                )

    def write() -> None:
        stop.set()
        final = tracemalloc.take_snapshot()
        _, peak = tracemalloc.get_traced_memory()
        lines = [f"tracemalloc peak total {peak / 2**20:.1f} MiB; at exit {_proc_status()}"]
        snap = state["snapshot"]
        if isinstance(snap, tracemalloc.Snapshot):
            lines += _report(f"largest sampled, at {state['at']:.0f} s ({state['rss']})", snap)
        lines += _report("at exit", final)
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")

    threading.Thread(target=sample, daemon=True).start()
    atexit.register(write)
    # A SIGTERM before the manager installs its own handler would end the process without atexit.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    sys.argv = ["aiplane", *args]
    from aiplane.cli import main as cli_main  # noqa: PLC0415 (after start(): imports are traced too)

    cli_main()


if __name__ == "__main__":
    main()

"""The demo's tables at a terminal's 80 columns and in a pipe: names whole, nothing cut to "…"."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from aiplane.clibase import PipeConsole
from aiplane.demo.common import Narrowing, fit

COLUMNS = ("service", "DCD available", "Deployment", "ready/upd/want", "image", "pods", "on nodes")


def _graph_table() -> Table:
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for column in COLUMNS:
        table.add_column(column)
    pods = "Ready Ready Ready Ready Ready"
    nodes = "h100-0 h100-0 h100-1 h100-1 h100-0"
    table.add_row(
        "VllmPrefillWorker",
        "True",
        "llama-disagg-vllmprefillworker",
        "2/2/2",
        "vllm-runtime:0.6.0",
        pods,
        nodes,
    )
    table.add_row(
        "Frontend", "True", "llama-disagg-frontend", "1/1/1", "vllm-runtime:0.6.0", "Ready", "h100-0"
    )
    return table


def _nodes_table() -> Table:
    table = Table(box=None, padding=(0, 1))
    for column in (
        "node",
        "phase",
        "cordoned",
        "tainted",
        "DCM profile",
        "amd.com/gpu before → now",
        "workload pods",
    ):
        table.add_column(column)
    table.add_row("mi300x-train-0", "Succeeded", "no", "no", "spx (success)", "8 → 8", "0")
    return table


def _render(renderable: object, console: Console) -> list[str]:
    console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


def test_at_80_columns_names_stay_whole_and_nothing_is_cut() -> None:
    for table, keep, names in (
        (_graph_table(), ("service", "Deployment"), ["llama-disagg-vllmprefillworker", "VllmPrefillWorker"]),
        (_nodes_table(), ("node",), ["mi300x-train-0"]),
    ):
        lines = _render(
            Narrowing(fit(table, *keep), "image", "ready/upd/want", "pods"),
            Console(file=io.StringIO(), width=80),
        )
        text = "\n".join(lines)
        assert "…" not in text
        assert all(len(line) <= 80 for line in lines), text
        for name in names:
            assert name in text, text
        # Every word of the kept columns is whole: no header or cell broken inside a word.
        words = set(text.split())
        assert {"h100-0", "Succeeded", "service"} & words


def test_a_narrow_terminal_drops_the_least_needed_columns_first() -> None:
    lines = _render(
        Narrowing(fit(_graph_table(), "service", "Deployment"), "image", "ready/upd/want", "pods"),
        Console(file=io.StringIO(), width=80),
    )
    header = " ".join(lines[:2]).split()  # "DCD available" wraps onto two lines
    assert "image" not in header and "service" in header and "Deployment" in header
    wide = _render(
        Narrowing(fit(_graph_table(), "service", "Deployment"), "image"),
        Console(file=io.StringIO(), width=200),
    )
    assert "image" in wide[0] and "ready/upd/want" in wide[0]


def test_in_a_pipe_rows_are_never_wrapped_or_cut() -> None:
    console = PipeConsole(file=io.StringIO())
    lines = _render(fit(_graph_table(), "service", "Deployment"), console)
    assert len(lines) == 3  # header and two rows, each on one line
    assert "h100-0 h100-0 h100-1 h100-1 h100-0" in lines[1]
    console.rule("section")
    assert len(console.file.getvalue().splitlines()[-1]) == 100  # type: ignore[attr-defined]

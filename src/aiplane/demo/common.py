"""What every demo section shares: its options, applying manifests, and waiting while showing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.table import Table
from rich.text import Text

from aiplane.kube.client import KubeClient
from aiplane.kube.resources import resource_for
from aiplane.sim.apiserver.store import Event

FIELD_MANAGER = "aiplane-demo"
DEMO_NAMESPACE = "default"


@dataclass(frozen=True)
class DemoOptions:
    examples: Path
    kubeconfig: Path
    log_file: Path
    keep: bool
    timeout: float
    dcm_delay: float
    pod_ready_delay: float
    plugin_refresh_delay: float
    quiet_seconds: float
    real: bool = False


class Feed(Protocol):
    """Where the live views get every committed change: the embedded store's listeners, or watches of a
    real cluster (:class:`aiplane.demo.real.WatchFeed`)."""

    def subscribe(self, listener: Callable[[Event], None]) -> None: ...

    def unsubscribe(self, listener: Callable[[Event], None]) -> None: ...


class StoreView(Protocol):
    """Objects read once, before following their changes: the embedded store, or a listing of the real
    cluster's objects (:class:`aiplane.demo.real.Listed`), keyed as the store keys them."""

    def items(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None: ...


class WriteCount(Protocol):
    """The operator's write requests so far, as its client counts them."""

    @property
    def writes(self) -> int: ...

    def reset_counts(self) -> None: ...


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def fit(table: Table, *keep: str | int) -> Table:
    """Readable at any width, cut nowhere: the columns named (header, or index) in ``keep`` — names a
    user types into kubectl — are as wide as their longest cell and never wrap; the others wrap
    between words, never inside one narrower than the column's longest word, and fold (not "…") what
    still does not fit. Call it once the rows are in."""
    for index, column in enumerate(table.columns):
        cells = [_plain(c) for c in column.cells] + [_plain(column.header)]
        if column.header in keep or index in keep:
            column.no_wrap = True
            column.min_width = max((len(c) for c in cells), default=0)
        else:
            column.overflow = "fold"
            column.min_width = max((len(w) for c in cells for w in c.split()), default=0)
    return table


class Narrowing:
    """A table that leaves out its least needed columns (``droppable``, first dropped first) while its
    columns' narrowest widths do not fit the terminal, instead of breaking every word."""

    def __init__(self, table: Table, *droppable: str) -> None:
        self.table = table
        self.droppable = droppable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table
        for header in self.droppable:
            if _narrowest(table) <= options.max_width:
                break
            table = _without(table, header)
        yield table


def _narrowest(table: Table) -> int:
    left, right = table.padding[3], table.padding[1]
    return sum((c.min_width or 1) + left + right for c in table.columns) + (len(table.columns) + 1) * (
        1 if table.box else 0
    )


def _without(table: Table, header: str) -> Table:
    kept = [c for c in table.columns if c.header != header]
    copy = Table(
        box=table.box, padding=table.padding, header_style=table.header_style, show_header=table.show_header
    )
    for column in kept:
        copy.add_column(
            column.header,
            no_wrap=column.no_wrap,
            overflow=column.overflow,
            min_width=column.min_width,
            style=column.style,
        )
    for row in range(table.row_count):
        copy.add_row(*(list(c.cells)[row] for c in kept))
    return copy


def load_manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


async def apply_all(client: KubeClient, docs: list[dict[str, Any]]) -> None:
    """Server-side apply, as ``kubectl apply --server-side`` would."""
    for doc in docs:
        res = resource_for(doc["apiVersion"], doc["kind"])
        obj = doc
        if res.namespaced and not doc["metadata"].get("namespace"):
            obj = {**doc, "metadata": {**doc["metadata"], "namespace": DEMO_NAMESPACE}}
        await client.apply(res, obj, field_manager=FIELD_MANAGER, force=True)


async def until(check: Any, timeout: float, live: Live, render: Any) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        live.update(render())
        if check():
            return True
        await asyncio.sleep(0.2)
    live.update(render())
    return False


async def settled_writes(operator: WriteCount, *, idle: float = 0.5, timeout: float = 5.0) -> int:
    """The operator's write count once it has written nothing for ``idle`` seconds (or ``timeout``).

    What the live view sees converge is the status write; the Events that reconcile records after it
    are sent a moment later. The quiet window starts once those have landed, so it counts only what
    the operator writes with nothing left to do (a write loop never goes idle and still shows).
    """
    end = time.monotonic() + timeout
    last, since = operator.writes, time.monotonic()
    while time.monotonic() < end:
        await asyncio.sleep(0.05)
        if operator.writes != last:
            last, since = operator.writes, time.monotonic()
        elif time.monotonic() - since >= idle:
            break
    return operator.writes


async def writes_then_quiet(operator: WriteCount, opts: DemoOptions) -> tuple[int, int]:
    """The operator's writes once settled, then its writes in the ``quiet_seconds`` after: a steady
    cluster must see zero writes from us, and every section shows it."""
    writes = await settled_writes(operator)
    await asyncio.sleep(opts.quiet_seconds)
    return writes, operator.writes - writes


async def until_quiet(check: Any, timeout: float) -> bool:
    """Poll ``check`` (no live view) until true or ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        await asyncio.sleep(0.1)
    return bool(check())

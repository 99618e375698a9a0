"""The watch stream's line splitting: every event once, in order, however the bytes are chunked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
from hypothesis import given
from hypothesis import strategies as st

from aiplane.kube.client import _lines


async def _chunks(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted(set(cuts)):
        yield data[start:cut]
        start = cut
    yield data[start:]


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    async def collect() -> list[bytes]:
        return [line async for line in _lines(_chunks(data, cuts))]

    return asyncio.run(collect())


@given(
    st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3), max_size=30),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=40),
    st.booleans(),
)
def test_every_event_comes_out_once_in_order_however_chunked(
    events: list[dict[str, str]], cuts: list[int], final_newline: bool
) -> None:
    """Many events in one chunk (a busy watch), one event over many chunks (a large object), blank
    keep-alive lines, a last event without its newline: the same events either way."""
    lines = [orjson.dumps({"type": "MODIFIED", "object": e}) for e in events]
    data = b"\n\n".join(lines) + (b"\n" if final_newline else b"")
    cuts = [c % (len(data) + 1) for c in cuts]
    assert [orjson.loads(line)["object"] for line in _split(data, cuts)] == events

"""The chaos proxy itself: forwards, black-holes (new connections still work), resets, delays."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.chaos.proxy import ChaosProxy


@contextlib.asynccontextmanager
async def echo_behind_proxy() -> AsyncIterator[ChaosProxy]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    proxy = ChaosProxy("127.0.0.1", server.sockets[0].getsockname()[1])
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
        server.close()


async def roundtrip(reader_writer: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> bytes:
    reader, writer = reader_writer
    writer.write(b"ping")
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(4), 0.5)


async def test_black_hole_silences_open_connections_but_not_new_ones() -> None:
    async with echo_behind_proxy() as proxy:
        old = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await roundtrip(old) == b"ping"
        assert proxy.black_hole() == 1
        with pytest.raises(TimeoutError):
            await roundtrip(old)  # no bytes, and no FIN or RST either
        assert not old[0].at_eof()
        new = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await roundtrip(new) == b"ping"
        for _, writer in (old, new):
            writer.close()


async def test_black_holing_new_connections_until_healed() -> None:
    async with echo_behind_proxy() as proxy:
        proxy.black_hole(new_connections=True)
        held = await asyncio.open_connection("127.0.0.1", proxy.port)  # accepted, then nothing
        with pytest.raises(TimeoutError):
            await roundtrip(held)
        proxy.heal()
        fresh = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await roundtrip(fresh) == b"ping"
        for _, writer in (held, fresh):
            writer.close()


async def test_reset_and_latency() -> None:
    async with echo_behind_proxy() as proxy:
        proxy.latency = 0.1
        conn = await asyncio.open_connection("127.0.0.1", proxy.port)
        started = time.monotonic()
        assert await roundtrip(conn) == b"ping"
        assert time.monotonic() - started >= 0.2  # delayed each way
        assert proxy.reset() == 1
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await roundtrip(conn)
        conn[1].close()

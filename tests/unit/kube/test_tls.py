"""The operator's TLS connections read through 64 KiB buffers, not asyncio's 256 KiB."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl

import pytest

from aiplane.kube.tls import TLS_READ_BUFFER, limit_tls_read_buffer


async def test_a_tls_connection_opened_after_the_limit_holds_a_64_kib_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", asyncio.sslproto.SSLProtocol.max_size)
    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.sslproto.SSLProtocol:
        return asyncio.sslproto.SSLProtocol(
            loop, asyncio.Protocol(), ssl.create_default_context(), loop.create_future(), server_hostname="x"
        )

    assert len(protocol()._ssl_buffer) == 256 * 1024  # asyncio's own: what each connection cost
    assert limit_tls_read_buffer()
    assert len(protocol()._ssl_buffer) == TLS_READ_BUFFER == 64 * 1024

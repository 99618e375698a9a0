"""The TLS read buffer of every connection the operator opens (memory).

asyncio's TLS transport (``asyncio.sslproto.SSLProtocol``, Python 3.11+) gives every connection a
read buffer of ``max_size`` = 256 KiB, allocated and zero-filled when the connection opens, so all of
it is resident. The operator keeps one connection open per informer for its watch (40 with
``--controllers all``) plus its pool of request connections: about 60 at 1,000 nodes, 15 MB of
buffers. Kubernetes' answers arrive as TLS records of at most 16 KiB, so a 64 KiB buffer still reads
several records per socket read; :func:`limit_tls_read_buffer` sets that size for the process
(``aiplane run`` calls it at start). A Python without the attribute keeps its own behaviour.
"""

from __future__ import annotations

import asyncio.sslproto
from typing import Final

__all__ = ["TLS_READ_BUFFER", "limit_tls_read_buffer"]

#: Bytes of each TLS connection's read buffer in the operator (asyncio's default: 256 KiB).
TLS_READ_BUFFER: Final = 64 * 1024


def limit_tls_read_buffer(size: int = TLS_READ_BUFFER) -> bool:
    """Make TLS connections opened from now on read through a buffer of ``size`` bytes; whether the
    running Python has the setting (asyncio's ``SSLProtocol.max_size``)."""
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is None or not isinstance(getattr(protocol, "max_size", None), int):
        return False
    protocol.max_size = size
    return True

"""A TCP proxy that misbehaves on command, for chaos tests between a client and the API server.

It forwards bytes both ways, and on command:

* :meth:`ChaosProxy.black_hole` — the open connections stop carrying bytes while their sockets stay
  open (no FIN, no RST): what a client sees after a NAT/conntrack entry is dropped or a load balancer
  fails over. New connections still work unless ``new_connections=True`` (then they are accepted and
  black-holed too, until :meth:`ChaosProxy.heal`).
* :meth:`ChaosProxy.reset` — the open connections are aborted with a TCP RST.
* :attr:`ChaosProxy.latency` — every chunk is delayed this many seconds, each way.

It knows nothing about HTTP or TLS (TLS passes through: the certificate names the host, not the port),
so it fits any client and server. Runs on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    pumps: list[asyncio.Task[None]] = field(default_factory=list)
    black_holed: bool = False

    def stop_pumps(self) -> None:
        for task in self.pumps:
            task.cancel()

    def close(self) -> None:
        self.stop_pumps()
        for writer in (self.client, self.upstream):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class ChaosProxy:
    """``await ChaosProxy(host, port).start()`` listens on ``127.0.0.1`` (a free port: :attr:`port`)."""

    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        #: Seconds each forwarded chunk waits, each way.
        self.latency = 0.0
        self.port = 0
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._hole_new = False

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        self._connections.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def black_hole(self, *, new_connections: bool = False) -> int:
        """Open connections stop carrying bytes (sockets kept open); the number affected."""
        self._hole_new = new_connections
        count = 0
        for conn in self._connections:
            if not conn.black_holed:
                conn.black_holed = True
                conn.stop_pumps()
                count += 1
        return count

    def heal(self) -> None:
        """New connections work again (black-holed ones stay dead, as after a real failover)."""
        self._hole_new = False

    def reset(self) -> int:
        """Abort every open connection with a TCP RST; the number affected."""
        count = 0
        for conn in list(self._connections):
            for writer in (conn.client, conn.upstream):
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            self._connections.discard(conn)
            count += 1
        return count

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        conn = _Connection(writer, up_writer)
        self._connections.add(conn)
        if self._hole_new:
            conn.black_holed = True
            return
        conn.pumps = [
            asyncio.create_task(self._pump(conn, reader, up_writer)),
            asyncio.create_task(self._pump(conn, up_reader, writer)),
        ]

    async def _pump(self, conn: _Connection, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if self.latency > 0:
                    await asyncio.sleep(self.latency)
                dst.write(data)
                await dst.drain()
        except (OSError, ConnectionError):
            pass
        if not conn.black_holed:  # one side closed: close both, as a plain TCP relay does
            conn.close()
            self._connections.discard(conn)

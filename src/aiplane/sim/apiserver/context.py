"""What request handling needs of a server: :class:`ServerContext`, and the open-watch registry.

The feature modules (dispatch, watch, discovery, openapi) take this protocol instead of the aiohttp
``ApiServer``, so they sit below it: the server composes them, never the other way round. An
``ApiServer`` is a context; so is a :class:`Context` around a bare ``rest.Api`` (what the in-memory
client uses when there is no server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from aiplane.sim.apiserver.authn import TokenIssuer
from aiplane.sim.apiserver.faults import Faults, WatchLike
from aiplane.sim.apiserver.resources import Registry
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.apiserver.store import Event, Store

#: Events a watcher may have queued before it counts as unresponsive and is closed.
DEFAULT_WATCH_BUFFER = 10_000
_LINE_CACHE_SIZE = 8192


@dataclass
class Watches:
    """A server's open watches, the event lines they share, and whether the server is stopping."""

    sessions: set[WatchLike] = field(default_factory=set)
    lines: dict[tuple[int, str], bytes] = field(default_factory=dict)
    closing: bool = False

    def line(self, event: Event, kind: str) -> bytes:
        """``{"type": kind, "object": …}\\n`` for ``event``, encoded once for every watcher."""
        key = (event.rv, kind)
        cached = self.lines.get(key)
        if cached is None:
            cached = b'{"type":"' + kind.encode() + b'","object":' + event.raw() + b"}\n"
            if len(self.lines) >= _LINE_CACHE_SIZE:
                # Drop the oldest half: events are written in rv order, so old lines are done with.
                for stale in list(self.lines)[: _LINE_CACHE_SIZE // 2]:
                    del self.lines[stale]
            self.lines[key] = cached
        return cached

    def close_all(self) -> int:
        """End every watch and refuse new ones (the server is stopping)."""
        self.closing = True
        sessions = list(self.sessions)
        for session in sessions:
            session.close("server shutting down")
        return len(sessions)


class ServerContext(Protocol):
    """The parts of an API server that answering a request uses."""

    @property
    def api(self) -> Api: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def store(self) -> Store: ...

    @property
    def faults(self) -> Faults | None: ...

    @property
    def watches(self) -> Watches: ...

    @property
    def watch_buffer(self) -> int: ...

    @property
    def tokens(self) -> TokenIssuer:
        """Signs the ServiceAccount tokens the TokenRequest subresource mints."""


@dataclass(eq=False)
class Context:
    """A :class:`ServerContext` for a bare ``rest.Api`` (no HTTP server; faults only if given)."""

    api: Api
    faults: Faults | None = None
    watches: Watches = field(default_factory=Watches)
    watch_buffer: int = DEFAULT_WATCH_BUFFER
    tokens: TokenIssuer = field(default_factory=TokenIssuer)

    @property
    def registry(self) -> Registry:
        return self.api.registry

    @property
    def store(self) -> Store:
        return self.api.store

"""A request to the embedded API server and its response, as plain data.

The aiohttp server and the in-memory client both hand an :class:`ApiRequest` to
``dispatch.handle`` and get an :class:`ApiResponse` back, so the two front doors cannot drift: HTTP only
adds what a socket needs (auth, body limits, streaming), the in-memory client only what a function call
needs (decoding into private copies).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

import orjson
from multidict import MultiDict, MultiDictProxy, MultiMapping

from aiplane.sim.apiserver.errors import ApiError

JSON = "application/json"
_NO_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())


def path_parts(path: str) -> tuple[str, ...]:
    """The unquoted segments of a URL path (``/api/v1/pods`` → ``("api", "v1", "pods")``)."""
    clean = path.partition("?")[0].strip("/")
    if not clean:
        return ()
    segments = clean.split("/")
    return tuple([unquote(p) for p in segments] if "%" in clean else segments)


@dataclass(frozen=True)
class ApiRequest:
    """One request: what kube-apiserver's handlers read of an HTTP request, nothing more.

    ``body_too_large`` says the body was over the limit and not read: the 413 is answered where the
    body would be decoded, after the URL is resolved, as kube-apiserver does.
    """

    method: str
    path: str
    query: MultiMapping[str] = field(default_factory=lambda: _NO_QUERY)
    #: Request headers (case-insensitive when they come from aiohttp).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The body's media type without parameters (``application/merge-patch+json``).
    content_type: str = JSON
    body: bytes = b""
    body_too_large: bool = False
    #: The ``Host`` the client addressed (legacy discovery echoes it).
    host: str = ""
    #: The unquoted path segments (computed from ``path``).
    parts: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", path_parts(self.path))

    @property
    def accept(self) -> str | None:
        return self.headers.get("Accept")

    @property
    def user_agent(self) -> str:
        return self.headers.get("User-Agent", "")


class EventStream(Protocol):
    """The body of a watch response: batches of encoded event lines until the watch ends.

    The consumer calls :meth:`finish` when it stops reading, whatever the reason, so the watch is
    unregistered from the store and the faults.
    """

    @property
    def closed(self) -> bool: ...

    def batches(self) -> AsyncGenerator[list[bytes], None]: ...

    def watch_connection(self, gone: Callable[[], bool]) -> None:
        """Poll ``gone`` while idle, and end the watch when the client has disconnected."""

    def finish(self) -> None: ...


@dataclass(frozen=True)
class ApiResponse:
    """One answer: status, headers and an encoded body, or an event stream for a watch."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: EventStream | None = None


_JSON_HEADERS: Mapping[str, str] = {"Content-Type": JSON}


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> ApiResponse:
    """A JSON answer; ``body`` may already be encoded (the store's cached encodings)."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return ApiResponse(status, {**headers, "Content-Type": JSON} if headers else _JSON_HEADERS, raw)


def error_response(err: ApiError) -> ApiResponse:
    """kube's ``Status`` body for an error, with its headers (``Retry-After``)."""
    return json_response(err.status(), err.code, err.headers)

"""The HTTP front of the embedded API server (aiohttp): auth, request counting, body limits, streaming.

URL layout, status codes and bodies follow kube-apiserver, because real clients (kubectl, client-go
style libraries, the official Python clients) are what talk to it. Resource requests are answered by
``dispatch.handle`` — the same function the in-memory client calls — so this module only turns an
aiohttp request into an :class:`~aiplane.sim.apiserver.messages.ApiRequest` and the answer back into a
response (a chunked stream for a watch), and serves what only HTTP has: discovery, OpenAPI, health and
the ``/_sim`` endpoints.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from aiplane.sim.apiserver import apply, discovery, dispatch, errors, faults, gc, openapi
from aiplane.sim.apiserver.access import ALWAYS_ALLOW, Access
from aiplane.sim.apiserver.audit import AuditLog
from aiplane.sim.apiserver.authn import ADMIN, ANONYMOUS, TokenIssuer, UserInfo
from aiplane.sim.apiserver.context import DEFAULT_WATCH_BUFFER, Watches
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, error_response, json_response
from aiplane.sim.apiserver.resources import Registry
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.apiserver.store import Store

MAX_REQUEST_BYTES = dispatch.MAX_REQUEST_BYTES
_PUBLIC = ("/version", "/healthz", "/readyz", "/livez")

#: The authenticated user of a request, for the handlers after the middleware.
_USER = web.RequestKey("user", UserInfo)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def to_web(response: ApiResponse) -> web.Response:
    """An answer without a stream, as an aiohttp response."""
    return web.Response(body=response.body or None, status=response.status, headers=response.headers)


async def _read_body(request: web.Request) -> tuple[bytes, bool]:
    """The body and whether it is over the limit, reading at most the limit plus one chunk.

    As kube's ``limitedReadBody``: a chunked body (no Content-Length) is read until it passes the limit,
    then refused with the same 413 Status as a declared one, not aiohttp's plain-text 413.
    """
    if not request.can_read_body:
        return b"", False
    if request.content_length is not None:
        if request.content_length > MAX_REQUEST_BYTES:
            return b"", True
        return await request.read(), False
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return b"", True
        chunks.append(chunk)
    return b"".join(chunks), False


async def read_request(request: web.Request) -> ApiRequest:
    """The plain-data request; a body over the limit is not kept (``dispatch`` answers the 413)."""
    body, too_large = await _read_body(request)
    return ApiRequest(
        request.method,
        request.path,
        request.query,
        request.headers,
        request.content_type,
        body,
        too_large,
        request.host,
    )


async def stream_response(request: web.Request, response: ApiResponse) -> web.StreamResponse:
    """Write a watch's event batches as a chunked response until the watch or the client ends."""
    stream = response.stream
    assert stream is not None
    resp = web.StreamResponse(status=response.status, headers=response.headers)
    resp.enable_chunked_encoding()
    batches = stream.batches()

    def gone() -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    try:
        await resp.prepare(request)
        stream.watch_connection(gone)
        async for batch in batches:
            await resp.write(b"".join(batch))
        await resp.write_eof()
    except ConnectionError:
        pass  # the client went away
    finally:
        await batches.aclose()
        stream.finish()
    return resp


class ApiServer:
    """One embedded cluster's API: store, registry, verbs, and the aiohttp application serving them.

    It is the :class:`~aiplane.sim.apiserver.context.ServerContext` of its requests.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        history_size: int = 10_000,
        authorization_mode: str = ALWAYS_ALLOW,
        audit: AuditLog | None = None,
    ) -> None:
        self.token = token or secrets.token_hex(16)
        self.store = Store(history_size=history_size)
        self.registry = Registry()
        self.api = Api(self.store, self.registry)
        #: Authentication, the authorization mode and the audit log (``access.py``).
        self.access = Access(self.api, self.token, mode=authorization_mode, audit=audit)
        self.gc = gc.install(self.api)  # deletion, garbage collection, namespace/disruption controllers
        apply.install(self.api)  # managedFields on every write (server-side apply's field manager)
        self.faults = faults.Faults()
        #: The simulated agents (``EmbeddedCluster(agents=True)`` sets it), for ``/_sim/faults/<agent fault>``.
        self.agents: Any = None
        #: The simulated GPU metrics exporter (``EmbeddedCluster`` sets it), for ``/_sim/gpu-utilization``.
        self.gpu_metrics: Any = None
        self.watches = Watches()
        #: Events a watcher may have queued before it is closed as unresponsive.
        self.watch_buffer = DEFAULT_WATCH_BUFFER
        self.requests_total = 0
        self.request_stats: collections.Counter[tuple[str, str]] = collections.Counter()

    @property
    def tokens(self) -> TokenIssuer:
        return self.access.tokens

    @property
    def audit(self) -> AuditLog:
        return self.access.audit

    # --- application --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES + 1024 * 1024, middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # Built again when served again after a stop: accept watches again, and end them on shutdown
        # so open watches do not delay the stop.
        self.watches.closing = False
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_shutdown(self, app: web.Application) -> None:
        self.watches.close_all()
        await asyncio.sleep(0)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests_total += 1
        agent = request.headers.get("User-Agent", "").split("/", 1)[0] or "unknown"
        verb = "WATCH" if request.query.get("watch") in ("1", "true") else request.method
        self.request_stats[(verb, agent)] += 1
        # The default field manager for every write this request makes (``/_sim`` agent faults too).
        apply.REQUEST_USER_AGENT.set(request.headers.get("User-Agent", ""))
        access = self.access
        user_agent = request.headers.get("User-Agent", "")
        try:
            user = access.authenticate(request.headers.get("Authorization", ""))
            if user is ANONYMOUS and access.mode == ALWAYS_ALLOW and not request.path.startswith(_PUBLIC):
                # AlwaysAllow would let anonymous requests do everything: this server refuses them instead.
                raise errors.unauthorized()
            user = access.impersonate(user, request.headers)
        except ApiError as err:
            return to_web(error_response(err))
        attrs, decision, denied = access.admit(
            user, request.method, request.path, request.query, request.content_type
        )
        if denied is not None:
            access.record(user, attrs, 403, decision, user_agent, request.path_qs)
            return to_web(error_response(denied))
        request[_USER] = user
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except ApiError as err:
            code = err.code
            return to_web(error_response(err))
        except web.HTTPException as exc:
            code = exc.status
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            code = 499  # the client went away (nginx's code; kube audits such requests without a code)
            raise
        except Exception as exc:  # a bug of ours must still answer like a server, not drop the connection
            return to_web(error_response(errors.internal(f"{type(exc).__name__}: {exc}")))
        finally:
            access.record(user, attrs, code, decision, user_agent, request.path_qs)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        api_request = await read_request(request)
        user: UserInfo = request.get(_USER, ADMIN)
        response = self.access.review(user, api_request) or await self._answer(api_request)
        if response.stream is not None:
            return await stream_response(request, response)
        return to_web(response)

    async def _answer(self, request: ApiRequest) -> ApiResponse:
        parts = request.parts
        if parts == ("_sim", "stats") and request.method == "GET":
            return json_response(self._stats())
        if parts == ("_sim", "gpu-utilization"):
            if self.gpu_metrics is None:
                raise errors.not_found_path()
            return self.gpu_metrics.handle_http(request)  # type: ignore[no-any-return]
        if parts[:1] == ("_sim",):
            return faults.handle_http(self.faults, self.agents, request)
        if parts[:1] == ("openapi",):
            return openapi.handle(self, request)
        answered = discovery.handle(self, request)
        if answered is not None:
            return answered
        return await dispatch.handle(self, request)

    def _stats(self) -> dict[str, Any]:
        """Requests by verb and client (User-Agent product): how many writes an operator made."""
        stats: dict[str, dict[str, int]] = {}
        for (verb, agent), count in sorted(self.request_stats.items()):
            stats.setdefault(agent, {})[verb] = count
        return {"requests": stats, "resourceVersion": self.store.rv}

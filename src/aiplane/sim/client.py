"""InMemoryKubeClient: every :class:`~aiplane.kube.client.KubeClient` verb on the embedded server, no HTTP.

Controller unit tests want the API server's real behaviour — admission, conflicts, generation, finalizers,
garbage collection, patch and server-side apply semantics, selectors, pagination, watch transitions — but
not the cost of TLS, sockets and aiohttp on every call. This client builds the request a
:class:`~aiplane.kube.client.HttpKubeClient` would send (method, path, query, headers, body) as an
:class:`~aiplane.sim.apiserver.messages.ApiRequest` and hands it to ``dispatch.handle`` — the function
the HTTP server answers every resource request with. Verbs, subresources (scale, eviction, binding,
token), fault injection and watches (a ``WatchSession`` registered with the store, filtering and
transitioning events exactly as for HTTP) are therefore the server's own code, not a copy. So a test
passes or fails here for the same reason it would against ``aiplane sim`` over HTTPS.

What it preserves of HTTP on purpose:

* **Errors.** An error answer becomes :class:`aiplane.kube.client.ApiError` through the same
  ``ApiError.from_response`` the HTTP client uses, from the same ``Status`` body and headers, so status,
  reason, message, body and ``retry_after`` are identical. A bug in the sim surfaces as the 500 the
  server would send.
* **Isolation.** Request bodies are encoded to JSON and responses (and watch events) decoded from the
  bytes the server would write (the store's cached encodings where possible): a caller can neither
  mutate a stored object nor send something HTTP could not carry. ``orjson`` makes this cheaper than
  ``copy.deepcopy``.
* **Faults.** Built on an :class:`~aiplane.sim.cluster.EmbeddedCluster`, the cluster's fault rules apply
  (``faults.before`` for every request, ``close-watches`` and ``Faults.close_watches`` for watches), and
  429s are retried after ``Retry-After`` like ``HttpKubeClient`` does (unless ``retry_throttled=False``).

What differs: only the HTTP layer is skipped — authentication, discovery (``/api``, ``/apis``,
``/version``), OpenAPI and the ``/_sim`` endpoints are not served; like
``HttpKubeClient`` it asks for JSON (no Table, no protobuf) and ignores ``Warning`` headers. Everything
runs on the caller's event loop: the client, and the cluster it wraps, must be used from one loop (the
store is not thread-safe), which is also where the deletion/GC worker is started when the cluster is
not being served.

**Identity.** Without a user the client acts as the cluster's admin, unaudited (what controller tests
want). Given ``user`` (or built with :meth:`as_service_account`) on a cluster, every request is
authenticated as that user: authorized by the cluster's authorization mode — a denied request raises
the 403 kube would answer — and recorded in the cluster's audit log, exactly as over HTTP.

``requests`` counts requests by kube verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``, ``deletecollection``) so a test can assert how many writes a controller made;
``requests_by_resource`` counts ``(verb, "plural[.group][/subresource]")``.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any, Self

import orjson
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from aiplane.kube.client import JSON, ApiError, KubeClient, RequestObserver
from aiplane.sim import cluster as cluster_mod
from aiplane.sim.apiserver import dispatch, errors
from aiplane.sim.apiserver.authn import UserInfo, service_account_user
from aiplane.sim.apiserver.context import Context, ServerContext
from aiplane.sim.apiserver.faults import Faults
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, error_response
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.fleet import Fleet

__all__ = ["WRITE_VERBS", "InMemoryKubeClient"]

#: The kube verbs that change something (what "how many writes did the controller make" counts).
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_HOST = "memory"
#: A watch sent through ``request``: it has no single JSON body to return.
_STREAM_REFUSED = errors.bad_request("a watch is a stream: use KubeClient.stream()/watch()")


def _error(response: ApiResponse) -> ApiError:
    """The client's error for an error answer: exactly what ``HttpKubeClient`` builds from the response."""
    return ApiError.from_response(response.status, response.body, response.headers)


class InMemoryKubeClient(KubeClient):
    """The :class:`KubeClient` verbs answered by the embedded server's dispatch, without HTTP (see the module doc).

    ``InMemoryKubeClient()`` builds a fresh :class:`~aiplane.sim.cluster.EmbeddedCluster` (bootstrap
    namespaces, CRDs, fleet Nodes) without serving it; :meth:`fresh` does so with options and
    :meth:`for_cluster` wraps an existing one (served or not; same event loop). ``InMemoryKubeClient(api)``
    wraps a bare ``rest.Api``; pass ``faults`` to have fault rules apply.
    """

    def __init__(
        self,
        api: Api | None = None,
        *,
        faults: Faults | None = None,
        user_agent: str = "aiplane",
        max_throttle_retries: int = 5,
        observer: RequestObserver | None = None,
        user: UserInfo | None = None,
    ) -> None:
        self.cluster: cluster_mod.EmbeddedCluster | None = None
        #: Who the requests come from (``None``: the admin, neither authorized nor audited).
        self.user = user
        context: ServerContext
        if api is None:
            self.cluster = cluster_mod.EmbeddedCluster()
            context = self.cluster.server
            faults = faults if faults is not None else self.cluster.server.faults
        else:
            context = Context(api, faults)
        self.api: Api = context.api
        self.faults: Faults | None = faults
        self.user_agent = user_agent
        self._max_retries = max_throttle_retries
        self._observer = observer
        self._context = context  # what dispatch.handle answers with: an ApiServer or a bare-Api Context
        self._headers = CIMultiDictProxy(CIMultiDict({"Accept": JSON, "User-Agent": user_agent}))
        self._started_gc = False
        #: Requests by kube verb (each 429 retry counts again, as it is another request).
        self.requests: Counter[str] = Counter()
        #: Requests by ``(verb, "plural[.group][/subresource]")``.
        self.requests_by_resource: Counter[tuple[str, str]] = Counter()

    @classmethod
    def for_cluster(cls, cluster: cluster_mod.EmbeddedCluster, **kw: Any) -> Self:
        """A client of ``cluster``'s API server (its faults apply; its open-watch list includes ours)."""
        client = cls(cluster.server.api, faults=cluster.server.faults, **kw)
        client.cluster = cluster
        client._context = cluster.server
        return client

    @classmethod
    def as_service_account(
        cls, cluster: cluster_mod.EmbeddedCluster, namespace: str, name: str, **kw: Any
    ) -> Self:
        """A client of ``cluster`` authenticated as ServiceAccount ``namespace/name`` (created if missing)."""
        cluster.service_account_token(namespace, name)  # creates the ServiceAccount as a token request needs
        sa = cluster.server.store.get("/serviceaccounts", namespace, name)
        uid = sa["metadata"].get("uid", "") if sa else ""
        return cls.for_cluster(cluster, user=service_account_user(namespace, name, uid), **kw)

    @classmethod
    def fresh(
        cls,
        *,
        history_size: int = 10_000,
        install_crds: bool = True,
        fleet: Fleet | None = None,
        **kw: Any,
    ) -> Self:
        """A client of a new, unserved :class:`EmbeddedCluster` (``install_crds=False`` builds it ~20x faster)."""
        return cls.for_cluster(
            cluster_mod.EmbeddedCluster(history_size=history_size, install_crds=install_crds, fleet=fleet),
            **kw,
        )

    @property
    def server(self) -> ApiServer | None:
        """The wrapped ``ApiServer`` (``None`` for a bare ``Api``)."""
        return self._context if isinstance(self._context, ApiServer) else None

    @property
    def writes(self) -> int:
        """How many write requests were made (create, update, patch, delete, deletecollection)."""
        return sum(self.requests[verb] for verb in WRITE_VERBS)

    def reset_counts(self) -> None:
        self.requests.clear()
        self.requests_by_resource.clear()

    async def close(self) -> None:
        """Stop the deletion/GC worker if this client started it."""
        deletion = self.api.deletion
        if self._started_gc and deletion is not None:
            self._started_gc = False
            await deletion.stop()

    # --- plumbing ---------------------------------------------------------------------------------

    def _ensure_gc(self) -> None:
        """Run the deletion/GC controllers on this loop when no served cluster runs them already.

        ``EmbeddedCluster.start`` starts them; an unserved cluster would otherwise queue cascading
        deletes, namespace cleanup and PDB status forever.
        """
        deletion = self.api.deletion
        if self._started_gc or deletion is None:
            return
        if getattr(deletion, "_task", None) is None:
            deletion.start()
            self._started_gc = True

    def _observe(self, method: str, status: int) -> None:
        if self._observer is not None:
            self._observer(method, status, _HOST)

    async def _send(
        self, method: str, path: str, query: Mapping[str, str], body: bytes, content_type: str
    ) -> ApiResponse:
        """One request through the server's dispatch, counted as the server resolved it."""
        self._ensure_gc()
        request = ApiRequest(
            method.upper(),
            path,
            MultiDictProxy(MultiDict(query)),
            self._headers,
            content_type,
            body,
        )
        server = self.server
        if self.user is None or server is None:
            return await dispatch.handle(self._context, request, observe=self._count)
        access = server.access
        attrs, decision, denied = access.admit(self.user, method.upper(), path, request.query, content_type)
        if denied is not None:
            response = error_response(denied)
        else:
            try:
                reviewed = access.review(self.user, request)
            except errors.ApiError as err:
                reviewed = error_response(err)
            response = reviewed or await dispatch.handle(self._context, request, observe=self._count)
        uri = f"{path}?{urllib.parse.urlencode(query)}" if query else path
        access.record(self.user, attrs, response.status, decision, self.user_agent, uri)
        return response

    def _count(self, verb: str, target: dispatch.Target | None) -> None:
        self.requests[verb] += 1
        if target is not None:
            self.requests_by_resource[(verb, target.label)] += 1

    # --- request ----------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        """One API call, answered by the sim's dispatch; the decoded result, or :class:`ApiError`."""
        # A request is a suspension point over HTTP; here too, so a controller writing in a loop lets
        # its informers (and the GC worker) run between writes, as it would against a real server.
        await asyncio.sleep(0)
        raw = b"" if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        attempt = 0
        while True:
            response = await self._send(method, path, query or {}, raw, content_type)
            self._observe(method, response.status)
            if response.stream is not None:
                response.stream.finish()
                raise _error(error_response(_STREAM_REFUSED))
            if response.status < 400:
                decoded = orjson.loads(response.body) if response.body else {}
                return decoded if isinstance(decoded, dict) else {"items": decoded}
            error = _error(response)
            if error.too_many_requests and retry_throttled and attempt < self._max_retries:
                attempt += 1
                await asyncio.sleep(error.retry_after if error.retry_after is not None else 1.0)
                continue
            raise error

    # --- watch ------------------------------------------------------------------------------------

    async def stream(self, path: str, query: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A watch, as the server streams it: ``{"type", "object"}`` events until the stream ends.

        Like the HTTP stream, a request error (bad selector, an injected fault) raises
        :class:`ApiError` before the first event, a too old ``resourceVersion`` is one ERROR event with
        the 410 ``Status``, and the iterator simply ends when the server would end the stream (timeout,
        a fault closing watches, a watcher too far behind).
        """
        response = await self._send("GET", path, {**query, "watch": "true"}, b"", JSON)
        self._observe("WATCH", response.status)
        stream = response.stream
        if stream is None:
            raise _error(response)
        batches = stream.batches()
        try:
            async for batch in batches:
                for line in batch:
                    if stream.closed:  # closed between lines (a fault, a timeout): the stream ends here
                        return
                    yield orjson.loads(line)
        finally:
            await batches.aclose()
            stream.finish()

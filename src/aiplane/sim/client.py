"""InMemoryKubeClient: every :class:`~aiplane.kube.client.KubeClient` verb on the embedded server, no HTTP.

Controller unit tests want the API server's real behaviour — admission, conflicts, generation, finalizers,
garbage collection, patch and server-side apply semantics, selectors, pagination, watch transitions — but
not the cost of TLS, sockets and aiohttp on every call. This client takes the request a
:class:`~aiplane.kube.client.HttpKubeClient` would send (method, path, query, body, content type) and
hands it to the same code the HTTP server dispatches to (``aiplane.sim.apiserver``): the path is resolved
with the server's :class:`~aiplane.sim.apiserver.resources.Registry`, then ``rest.Api`` verbs,
``patch.patch`` (all four patch types), ``selectors.list_objects``, ``gc.evict``/``gc.delete_response``
and, for watches, a :class:`~aiplane.sim.apiserver.watch.WatchSession` registered with the store, which
filters and transitions events exactly as the HTTP watch does. So a test passes or fails here for the
same reason it would against ``aiplane sim`` over HTTPS.

What it preserves of HTTP on purpose:

* **Errors.** The sim's ``ApiError`` becomes :class:`aiplane.kube.client.ApiError` through the same
  ``ApiError.from_response`` the HTTP client uses, from the same ``Status`` body and headers, so status,
  reason, message, body and ``retry_after`` are identical. A bug in the sim surfaces as the 500 the
  server's middleware would send.
* **Isolation.** Request bodies are encoded to JSON and responses decoded from JSON (the store's cached
  encodings where possible): a caller can neither mutate a stored object nor send something HTTP could
  not carry. ``orjson`` makes this cheaper than ``copy.deepcopy``.
* **Faults.** Built on an :class:`~aiplane.sim.cluster.EmbeddedCluster`, the cluster's fault rules apply
  (``faults.before`` for every request, ``close-watches`` and ``Faults.close_watches`` for watches), and
  429s are retried after ``Retry-After`` like ``HttpKubeClient`` does (unless ``retry_throttled=False``).

What differs: there is no authentication, discovery (``/api``, ``/apis``, ``/version``), Table output,
protobuf or the ``token`` subresource; the server's ``Warning`` headers are dropped (the HTTP client
ignores them too). Everything runs on the caller's event loop: the client, and the cluster it wraps, must
be used from one loop (the store is not thread-safe), which is also where the deletion/GC worker is
started when the cluster is not being served.

``requests`` counts requests by kube verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``, ``deletecollection``) so a test can assert how many writes a controller made;
``requests_by_resource`` counts ``(verb, "plural[.group][/subresource]")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Self, cast
from urllib.parse import unquote

import orjson
from multidict import MultiDict, MultiDictProxy

from aiplane.kube.client import JSON, ApiError, KubeClient, RequestObserver
from aiplane.sim.apiserver import apply, errors, gc, patch, scale, selectors, watch
from aiplane.sim.apiserver.errors import ApiError as SimApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions, delete_options
from aiplane.sim.apiserver.server import ApiServer, resolve_target
from aiplane.sim.apiserver.store import Store

if TYPE_CHECKING:
    from aiplane.sim.apiserver.faults import Faults
    from aiplane.sim.cluster import EmbeddedCluster
    from aiplane.sim.fleet import Fleet

__all__ = ["WRITE_VERBS", "InMemoryKubeClient"]

Obj = dict[str, Any]

#: The kube verbs that change something (what "how many writes did the controller make" counts).
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_TRUE = ("1", "true", "True")
_HOST = "memory"


class _Target:
    """What a resource URL names (``server.Target``, resolved without the HTTP server)."""

    __slots__ = ("name", "namespace", "rt", "subresource")

    def __init__(self, rt: ResourceType, namespace: str | None, name: str | None, sub: str | None) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = sub

    @property
    def label(self) -> str:
        base = f"{self.rt.plural}.{self.rt.group}" if self.rt.group else self.rt.plural
        return f"{base}/{self.subresource}" if self.subresource else base


class _WatchHost:
    """What a ``WatchSession`` needs of a server (store, verbs) when the client wraps a bare ``Api``."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.store: Store = api.store
        self.watch_buffer = watch.DEFAULT_BUFFER


class _ScaleRequest:
    """The three things ``scale.handle`` reads of an aiohttp request, so the sim's own handler runs."""

    def __init__(self, raw: bytes, content_type: str, query: Mapping[str, str]) -> None:
        self._raw = raw
        self.content_type = content_type
        self.query = query

    async def read(self) -> bytes:
        return self._raw


class _MemoryWatch(watch.WatchSession):
    """A ``WatchSession`` whose consumer is an async iterator instead of an HTTP response writer.

    Filtering, selector transitions (an object that stops matching arrives as DELETED), the slow-watcher
    buffer, bookmarks, deadlines and fault-injected closes are all the parent's; only the writer loop of
    ``WatchSession.run`` is replaced by :meth:`items`, which hands out the queued events in order and ends
    when the session is closed — the moment the HTTP stream would end.
    """

    async def items(self, initial: list[watch.Queued]) -> AsyncIterator[watch.Queued]:
        loop = self.loop
        self._timers.append(loop.call_at(self.deadline, self._close, "timeout"))
        try:
            for item in initial:
                if self.closed:
                    return
                yield item
            while not self.closed:
                if self.pending:
                    batch = list(self.pending)
                    self.pending.clear()
                    for item in batch:
                        if self.closed:
                            return
                        yield item
                    continue
                self._waiter = loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        finally:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()


def _convert(err: SimApiError) -> ApiError:
    """The client's error for a sim error: exactly what ``HttpKubeClient`` builds from the response."""
    return ApiError.from_response(err.code, orjson.dumps(err.status()), err.headers)


def _copy(obj: Any) -> Any:
    """A private deep copy of a JSON value (what decoding an HTTP response gives)."""
    return orjson.loads(orjson.dumps(obj))


class InMemoryKubeClient(KubeClient):
    """The :class:`KubeClient` verbs on an embedded API server's ``Api``, without HTTP (see the module doc).

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
    ) -> None:
        self.cluster: EmbeddedCluster | None = None
        host: Any
        if api is None:
            from aiplane.sim.cluster import EmbeddedCluster

            cluster = EmbeddedCluster()
            self.cluster = cluster
            api = cluster.server.api
            host = cluster.server
            faults = faults if faults is not None else cluster.server.faults
        else:
            host = _WatchHost(api)
        self.api: Api = api
        self.faults: Faults | None = faults
        self.user_agent = user_agent
        self._max_retries = max_throttle_retries
        self._observer = observer
        self._host: Any = host  # the ``server`` of watch sessions: an ApiServer or a _WatchHost
        self._started_gc = False
        #: Requests by kube verb (each 429 retry counts again, as it is another request).
        self.requests: Counter[str] = Counter()
        #: Requests by ``(verb, "plural[.group][/subresource]")``.
        self.requests_by_resource: Counter[tuple[str, str]] = Counter()

    @classmethod
    def for_cluster(cls, cluster: EmbeddedCluster, **kw: Any) -> Self:
        """A client of ``cluster``'s API server (its faults apply; its open-watch list includes ours)."""
        client = cls(cluster.server.api, faults=cluster.server.faults, **kw)
        client.cluster = cluster
        client._host = cluster.server
        return client

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
        from aiplane.sim.cluster import EmbeddedCluster

        return cls.for_cluster(
            EmbeddedCluster(history_size=history_size, install_crds=install_crds, fleet=fleet), **kw
        )

    @property
    def server(self) -> ApiServer | None:
        """The wrapped ``ApiServer`` (``None`` for a bare ``Api``)."""
        return self._host if isinstance(self._host, ApiServer) else None

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

    def _target(self, path: str) -> _Target:
        """``ApiServer._target``: the same resolution (and 404s), without the HTTP server."""
        clean = path.split("?", 1)[0].rstrip("/") or "/"
        parts = [unquote(p) for p in clean.strip("/").split("/")] if clean != "/" else []
        t = resolve_target(self.api.registry, parts)
        return _Target(t.rt, t.namespace, t.name, t.subresource)

    def _count(self, verb: str, target: _Target | None) -> None:
        self.requests[verb] += 1
        if target is not None:
            self.requests_by_resource[(verb, target.label)] += 1

    def _observe(self, method: str, status: int) -> None:
        if self._observer is not None:
            self._observer(method, status, _HOST)

    @staticmethod
    def _verb(method: str, target: _Target, query: Mapping[str, str]) -> str:
        if method == "GET":
            return "watch" if query.get("watch") in _TRUE else ("list" if target.name is None else "get")
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        verb = _METHOD_VERBS.get(method)
        if verb is None:
            raise errors.method_not_allowed()
        return verb

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
        """One API call, answered by the sim's verbs; the decoded result, or :class:`ApiError`."""
        # A request is a suspension point over HTTP; here too, so a controller writing in a loop lets
        # its informers (and the GC worker) run between writes, as it would against a real server.
        await asyncio.sleep(0)
        q: Mapping[str, str] = dict(query or {})
        raw: bytes | None = (
            None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        )
        attempt = 0
        while True:
            try:
                status, result = await self._handle(method.upper(), path, q, raw, content_type)
            except SimApiError as err:
                error = _convert(err)
            except Exception as exc:  # the server's middleware: a bug answers 500, never a traceback
                error = _convert(errors.internal(f"{type(exc).__name__}: {exc}"))
            else:
                self._observe(method, status)
                return result
            self._observe(method, error.status)
            if error.too_many_requests and retry_throttled and attempt < self._max_retries:
                attempt += 1
                await asyncio.sleep(error.retry_after if error.retry_after is not None else 1.0)
                continue
            raise error

    async def _handle(
        self, method: str, path: str, q: Mapping[str, str], raw: bytes | None, content_type: str
    ) -> tuple[int, dict[str, Any]]:
        """``ApiServer._resource`` for one request: (HTTP status, decoded body)."""
        self._ensure_gc()
        try:
            target = self._target(path)
        except SimApiError:
            self._count(method.lower(), None)
            raise
        t = target
        verb = self._verb(method, t, q)
        self._count(verb, t)
        token = apply.REQUEST_USER_AGENT.set(self.user_agent)  # the default field manager, as over HTTP
        try:
            if self.faults is not None:
                await self.faults.before(verb, t.rt, t.subresource, t.namespace, t.name)
            if verb == "watch":
                raise errors.bad_request("a watch is a stream: use KubeClient.stream()/watch()")
            if verb == "list":
                return 200, self._list(t, q)
            if t.subresource == "scale":
                return 200, await self._scale(t, verb, raw, content_type, q)
            if verb == "get":
                return 200, self._get(t)
            if t.subresource == "eviction":
                status = gc.evict(self.api, t.rt, t.namespace or "", t.name or "", self._decode(raw))
                return 201, status
            if t.subresource == "binding":
                if verb != "create":
                    raise errors.method_not_allowed()
                return 201, self.api.bind(
                    t.namespace or "", t.name or "", self._decode(raw), self._write_options(q)
                )
            if t.subresource == "token":
                raise errors.method_not_allowed("the token subresource is not served by InMemoryKubeClient")
            if verb == "create":
                if t.name is not None and t.subresource is None:
                    raise errors.method_not_allowed()
                result = self.api.create(t.rt, t.namespace, self._decode(raw), self._write_options(q))
                return 201, _copy(result.obj)
            if verb == "update":
                result = self.api.update(
                    t.rt,
                    t.namespace,
                    t.name or "",
                    self._decode(raw),
                    self._write_options(q),
                    subresource=t.subresource,
                )
                return 200, _copy(result.obj)
            if verb == "patch":
                opts = self._write_options(q)
                opts.force = q.get("force") in ("true", "1")
                result = patch.patch(
                    self.api,
                    t.rt,
                    t.namespace,
                    t.name or "",
                    content_type,
                    raw or b"",
                    opts,
                    subresource=t.subresource,
                )
                return (201 if result.created else 200), _copy(result.obj)
            if verb == "delete":
                options = self._delete_options(raw, q)
                obj = self.api.delete(t.rt, t.namespace, t.name or "", options)
                code, answer = gc.delete_response(t.rt, obj, options)
                return code, _copy(answer)
            # deletecollection
            options = self._delete_options(raw, q)
            label = selectors.label_selector(q.get("labelSelector"))
            fieldsel = selectors.field_selector(t.rt, q.get("fieldSelector"), store=self.api.store)
            for obj in [o for o in self.api.items(t.rt, t.namespace) if label(o) and fieldsel(o)]:
                meta = obj["metadata"]
                with contextlib.suppress(SimApiError):
                    self.api.delete(t.rt, meta.get("namespace"), meta["name"], options)
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        finally:
            apply.REQUEST_USER_AGENT.reset(token)

    # --- verbs ------------------------------------------------------------------------------------

    def _get(self, t: _Target) -> dict[str, Any]:
        if t.subresource not in (None, "status"):
            raise errors.method_not_allowed()
        store = self.api.store
        ns = (t.namespace or "") if t.rt.namespaced else ""
        stored = store.get(t.rt.storage_key, ns, t.name or "")
        if stored is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
        if stored.get("apiVersion") == t.rt.api_version:
            encoded = store.raw(t.rt.storage_key, ns, t.name or "")
            if encoded is not None:
                decoded: dict[str, Any] = orjson.loads(encoded)
                return decoded
        return cast(dict[str, Any], _copy(self.api.served(t.rt, stored)))

    def _list(self, t: _Target, q: Mapping[str, str]) -> dict[str, Any]:
        limit_text = q.get("limit", "")
        items, rv, cont, remaining = selectors.list_objects(
            self.api,
            t.rt,
            t.namespace,
            label=q.get("labelSelector"),
            field=q.get("fieldSelector"),
            limit=int(limit_text) if limit_text.isdigit() and int(limit_text) > 0 else None,
            continue_token=q.get("continue") or None,
            query=q,
        )
        meta: dict[str, Any] = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        # As the server does: splice the store's cached encodings, then decode once (a private copy).
        store = self.api.store
        key = t.rt.storage_key
        encoded: list[bytes] = []
        for obj in items:
            item_meta = obj["metadata"]
            ns, name = item_meta.get("namespace", ""), item_meta["name"]
            cached = store.raw(key, ns, name) if store.get(key, ns, name) is obj else None
            encoded.append(cached if cached is not None else orjson.dumps(obj))
        head = orjson.dumps({"apiVersion": t.rt.api_version, "kind": f"{t.rt.kind}List", "metadata": meta})
        decoded: dict[str, Any] = orjson.loads(head[:-1] + b',"items":[' + b",".join(encoded) + b"]}")
        return decoded

    async def _scale(
        self, t: _Target, verb: str, raw: bytes | None, content_type: str, q: Mapping[str, str]
    ) -> dict[str, Any]:
        """The sim's own scale handler, given the three request attributes it reads."""
        server = cast(ApiServer, self._host if isinstance(self._host, ApiServer) else _WatchHost(self.api))
        request = _ScaleRequest(raw or b"", content_type, q)
        response = await scale.handle(server, cast(Any, request), t.rt, t.namespace, t.name or "", verb)
        body = getattr(response, "body", b"")
        decoded: dict[str, Any] = orjson.loads(body if isinstance(body, bytes) else b"{}")
        return decoded

    # --- request decoding (``ApiServer._body``, ``_write_options``, ``_delete_options``) -----------

    @staticmethod
    def _decode(raw: bytes | None) -> dict[str, Any]:
        try:
            body = orjson.loads(raw or b"")
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        return body

    @staticmethod
    def _write_options(q: Mapping[str, str]) -> Any:
        # The server's own parser; it reads repeated ``dryRun`` values through ``getall``.
        return ApiServer._write_options(MultiDictProxy(MultiDict(q)))

    @staticmethod
    def _delete_options(raw: bytes | None, q: Mapping[str, str]) -> DeleteOptions:
        """``ApiServer._delete_options`` for a JSON body (the only kind this client sends)."""
        body: dict[str, Any] = {}
        if raw and raw.strip():
            try:
                decoded = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
            if isinstance(decoded, dict):
                body = decoded
        return delete_options(body, q, dry_run_values=[q["dryRun"]] if "dryRun" in q else None)

    # --- watch ------------------------------------------------------------------------------------

    async def stream(self, path: str, query: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A watch, as ``watch.serve`` starts one: ``{"type", "object"}`` events until the stream ends.

        Like the HTTP stream, a request error (bad selector, an injected fault) raises
        :class:`ApiError` before the first event, a too old ``resourceVersion`` is one ERROR event with
        the 410 ``Status``, and the iterator simply ends when the server would end the stream (timeout,
        a fault closing watches, a watcher too far behind).
        """
        q: Mapping[str, str] = dict(query)
        session: _MemoryWatch | None = None
        try:
            try:
                session, initial, failure = await self._open_watch(path, q)
            except SimApiError as err:
                self._observe("WATCH", err.code)
                raise _convert(err) from None
            self._observe("WATCH", 200)
            if failure is not None:
                yield {"type": watch.ERROR, "object": failure.status()}
                return
            assert session is not None
            async for item in session.items(initial):
                yield self._event(session, item)
        finally:
            if session is not None:
                session._close(session.close_reason or "ended")
                watch._state(self._host).sessions.discard(session)
                if self.faults is not None:
                    self.faults.watch_closed(session)

    async def _open_watch(
        self, path: str, q: Mapping[str, str]
    ) -> tuple[_MemoryWatch | None, list[watch.Queued], SimApiError | None]:
        """``watch.serve`` up to the response: validate, then register with the store without awaiting."""
        self._ensure_gc()
        t = self._target(path)
        self._count("watch", t)
        if self.faults is not None:
            await self.faults.before("watch", t.rt, t.subresource, t.namespace, t.name)
        if t.subresource is not None:
            raise errors.method_not_allowed()
        selectors.validate_list_options(q, watch=True)
        store = self.api.store
        label = selectors.label_selector(q.get("labelSelector"))
        fields = selectors.field_selector(t.rt, q.get("fieldSelector"), store=store)
        if t.name is not None and not fields.empty and fields.exact("metadata.name") != t.name:
            raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
        send_initial = watch._bool_param(q, "sendInitialEvents")
        bookmarks = bool(watch._bool_param(q, "allowWatchBookmarks"))
        timeout_seconds = watch._int_param(q, "timeoutSeconds")
        try:
            wanted = selectors.parse_rv(q.get("resourceVersion", ""))
        except selectors.InvalidResourceVersionError as exc:
            raise selectors.storage_invalid(exc) from None
        timeout = (
            float(timeout_seconds) if timeout_seconds else watch.MIN_REQUEST_TIMEOUT * (1.0 + random.random())
        )
        session = _MemoryWatch(
            cast(ApiServer, self._host),
            t.rt,
            (t.namespace or None) if t.rt.namespaced else None,
            name=t.name,
            label=label,
            fields=fields,
            bookmarks=bookmarks,
            timeout=timeout,
            buffer=int(getattr(self._host, "watch_buffer", watch.DEFAULT_BUFFER)),
        )
        # From here to add_watcher nothing awaits: the initial state and the live events join seamlessly.
        key = t.rt.storage_key
        initial: list[watch.Queued] = []
        initial_events_end = False
        if send_initial:
            if wanted > store.rv:
                return None, [], selectors.too_large(wanted, store.rv)
            initial = watch._initial_events(session)
            initial_events_end = bookmarks
        elif send_initial is None and wanted == 0:
            initial = watch._initial_events(session)
        elif wanted:
            events = store.events_since(key, wanted)
            if events is None:
                return None, [], watch.expired(wanted, watch._oldest(store, key, wanted))
            for event in events:
                session.offer(event, replay=True)
        store.add_watcher(key, session)
        watch._state(self._host).sessions.add(session)
        if initial_events_end:
            session._bookmark(initial_events_end=True)
        if self.faults is not None:
            self.faults.watch_opened(session)
        if bookmarks:
            session._schedule_bookmark()
        return session, initial, None

    def _event(self, session: _MemoryWatch, item: watch.Queued) -> dict[str, Any]:
        """One queued event as the HTTP stream would encode it, decoded into a private copy."""
        kind, event, obj, _rv = item
        if kind == watch.BOOKMARK:
            assert obj is not None
            return {"type": kind, "object": obj}
        if obj is None:
            assert event is not None
            if event.obj.get("apiVersion") == session.rt.api_version:
                return {"type": kind, "object": orjson.loads(event.raw())}
            obj = event.obj
        return {"type": kind, "object": _copy(self.api.served(session.rt, obj))}

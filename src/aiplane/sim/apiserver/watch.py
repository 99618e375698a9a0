"""Watch streams, as kube-apiserver's watch handler and cacher serve them.

A watch is a chunked HTTP/1.1 response of newline-delimited JSON events ``{"type": …, "object": …}``.
The store calls :meth:`WatchSession.offer` synchronously for every committed event of the watched
resource; the session filters it (namespace, name, label and field selectors, with kube's transitions:
an object that starts matching arrives as ADDED, one that stops matching as DELETED) and queues it; a
writer task drains the queue into the response in batches. Events are shared immutable objects whose
JSON is encoded once (``Event.raw()``), and so is each event line, however many watchers send it.

What follows kube (``staging/src/k8s.io/apiserver/pkg/storage/cacher``):

* ``resourceVersion`` unset or ``"0"``: synthetic ADDED events for the current objects, then changes;
  ``N``: the changes after N; N older than the retained history: one ERROR event with a 410 ``Expired``
  Status (``too old resource version: N (M)``), then the stream ends.
* ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` (the WatchList protocol): the
  current objects as ADDED, then, with ``allowWatchBookmarks``, a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``.
* ``allowWatchBookmarks``: a BOOKMARK (kind, apiVersion, metadata.resourceVersion) about every minute
  and 2 s before the watch's deadline.
* ``timeoutSeconds`` ends the stream; without it the server picks 30 to 60 minutes (kube's
  ``--min-request-timeout`` of 1800 s times a random factor in [1, 2)).
* A watcher that falls too far behind (its queue exceeds ``watch_buffer`` events) is closed: the stream
  simply ends, as kube's cacher does to unresponsive watchers.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from aiplane.sim.apiserver import errors, selectors, table
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.store import ADDED, DELETED, MODIFIED, Event

if TYPE_CHECKING:
    from aiplane.sim.apiserver.server import ApiServer

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: kube-apiserver's default ``--min-request-timeout``.
MIN_REQUEST_TIMEOUT = 1800.0
#: How often the cacher sends a watcher a bookmark (``bookmarkFrequency``).
BOOKMARK_FREQUENCY = 60.0
#: Events a watcher may have queued before it counts as unresponsive and is closed (see ``watch_buffer``).
DEFAULT_BUFFER = 10_000
#: How often an idle watch checks that its client is still connected.
DISCONNECT_POLL = 1.0
#: Lines written to the socket in one go while sending initial events.
_CHUNK = 512
_LINE_CACHE_SIZE = 8192
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")

Obj = dict[str, Any]
#: A queued event: (type, store event or None, object to send instead of the event's, rv).
Queued = tuple[str, Event | None, Obj | None, int]


@dataclass
class _ServerWatches:
    """Per-server watch state: open sessions, shared event lines, and whether the server is stopping."""

    sessions: set[WatchSession] = field(default_factory=set)
    lines: dict[tuple[int, str], bytes] = field(default_factory=dict)
    closing: bool = False

    def line(self, event: Event, kind: str) -> bytes:
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


_registry: weakref.WeakKeyDictionary[Any, _ServerWatches] = weakref.WeakKeyDictionary()


def _state(server: Any) -> _ServerWatches:
    state = _registry.get(server)
    if state is None:
        state = _registry[server] = _ServerWatches()
    return state


def open_watches(server: Any, rt: ResourceType | None = None) -> list[WatchSession]:
    """The watches ``server`` is serving (of ``rt``'s resource, if given)."""
    sessions = list(_state(server).sessions)
    if rt is not None:
        sessions = [s for s in sessions if s.rt.storage_key == rt.storage_key]
    return sessions


def close_all(server: Any) -> int:
    """End every watch stream of ``server`` and refuse new ones (the server is stopping)."""
    state = _state(server)
    state.closing = True
    sessions = list(state.sessions)
    for session in sessions:
        session.close("server shutting down")
    return len(sessions)


def shutdown_hook(server: Any) -> Any:
    """An ``on_shutdown`` callback for the aiohttp application: open watches must not delay the stop.

    Called when the application is built, so a server served again after a stop accepts watches again.
    """
    _state(server).closing = False

    async def _on_shutdown(app: web.Application) -> None:
        close_all(server)
        await asyncio.sleep(0)

    return _on_shutdown


def _bool_param(query: Any, name: str) -> bool | None:
    value = query.get(name)
    if value is None:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _int_param(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value, 10)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def _status_event(err: errors.ApiError) -> bytes:
    return orjson.dumps({"type": ERROR, "object": err.status()}) + b"\n"


def expired(requested: int, oldest: int) -> errors.ApiError:
    return errors.gone(f"too old resource version: {requested} ({oldest})")


class WatchSession:
    """One open watch: the store's ``Watcher`` for its resource, and the writer of its stream."""

    def __init__(
        self,
        server: ApiServer,
        rt: ResourceType,
        namespace: str | None,
        *,
        name: str | None = None,
        label: selectors.LabelSelector | None = None,
        fields: selectors.FieldSelector | None = None,
        bookmarks: bool = False,
        timeout: float,
        buffer: int = DEFAULT_BUFFER,
        table_request: web.Request | None = None,
    ) -> None:
        self.server = server
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.label = label or selectors.LabelSelector()
        self.fields = fields or selectors.FieldSelector()
        self.filtered = not (self.label.empty and self.fields.empty)
        self.bookmarks = bookmarks
        self.buffer = buffer
        self.table_request = table_request
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.deadline = self.started + timeout
        self.pending: deque[Queued] = deque()
        self.closed = False
        self.close_reason = ""
        self.sent = 0
        self._first_table = True
        self._waiter: asyncio.Future[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._state = _state(server)

    # --- the store's side (synchronous) -----------------------------------------------------------

    def _matches(self, obj: Obj) -> bool:
        return self.label(obj) and self.fields(obj)

    def offer(self, event: Event, *, replay: bool = False) -> None:
        """Queue ``event`` if this watch wants it (called by the store for every committed event)."""
        if self.closed:
            return
        meta = event.obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return
        if self.name is not None and meta["name"] != self.name:
            return
        if not self.filtered:
            self.pending.append((event.type, event, None, event.rv))
        else:
            now = event.type != DELETED and self._matches(event.obj)
            before = event.old is not None and self._matches(event.old)
            if now and before:
                self.pending.append((MODIFIED, event, None, event.rv))
            elif now:
                self.pending.append((ADDED, event, None, event.rv))
            elif before:
                if event.type == DELETED:
                    self.pending.append((DELETED, event, None, event.rv))
                else:
                    assert event.old is not None
                    last = {
                        **event.old,
                        "metadata": {**event.old["metadata"], "resourceVersion": str(event.rv)},
                    }
                    self.pending.append((DELETED, event, last, event.rv))
            else:
                return
        if not replay and len(self.pending) > self.buffer:
            # An unresponsive watcher: kube's cacher terminates it rather than block everyone else.
            self._close("watcher buffer overflow")
            return
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self, reason: str = "closed") -> None:
        """End the stream (thread-safe): the client sees it end, as when kube closes a watch."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._close(reason)
        else:
            self.loop.call_soon_threadsafe(self._close, reason)

    def close_after(self, seconds: float) -> None:
        self._timers.append(self.loop.call_later(seconds, self._close, "closed by a fault"))

    def _close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.pending.clear()
        self.server.store.remove_watcher(self.rt.storage_key, self)
        self._wake()

    # --- bookmarks and deadlines -------------------------------------------------------------------

    def _bookmark(self, *, initial_events_end: bool = False) -> None:
        if self.closed:
            return
        meta: Obj = {"resourceVersion": str(self.server.store.rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta}
        self.pending.append((BOOKMARK, None, obj, self.server.store.rv))
        self._wake()

    def _schedule_bookmark(self) -> None:
        """``cacheWatcher.nextBookmarkTime``: every minute, and 2 s before the deadline."""
        now = self.loop.time()
        when = min(now + BOOKMARK_FREQUENCY, self.deadline - 2.0)
        if when < now:
            return
        self._timers.append(self.loop.call_at(when, self._periodic_bookmark))

    def _periodic_bookmark(self) -> None:
        self._bookmark()
        self._schedule_bookmark()

    def _poll_disconnect(self, request: web.Request) -> None:
        transport = request.transport
        if transport is None or transport.is_closing():
            self._close("client disconnected")
            return
        self._timers.append(self.loop.call_later(DISCONNECT_POLL, self._poll_disconnect, request))

    # --- the writer ----------------------------------------------------------------------------------

    def _encode(self, item: Queued) -> bytes:
        kind, event, obj, rv = item
        if kind == BOOKMARK:
            assert obj is not None
            if self.table_request is not None:
                obj = self._table([], obj["metadata"]["resourceVersion"], bookmark=obj)
            return orjson.dumps({"type": kind, "object": obj}) + b"\n"
        if obj is None:
            assert event is not None
            obj = event.obj
            if self.table_request is None and obj.get("apiVersion") == self.rt.api_version:
                return self._state.line(event, kind)
        served = self.server.api.served(self.rt, obj)
        if self.table_request is not None:
            served = self._table([served], served["metadata"].get("resourceVersion", str(rv)))
        return orjson.dumps({"type": kind, "object": served}) + b"\n"

    def _table(self, objs: list[Obj], rv: str, bookmark: Obj | None = None) -> Obj:
        assert self.table_request is not None
        first = self._first_table
        self._first_table = False
        result: Obj = table.to_table(
            self.server,
            self.rt,
            objs,
            self.table_request,
            list_rv=rv,
            include_column_definitions=first,
        )
        if bookmark is not None and "annotations" in bookmark["metadata"]:
            result.setdefault("metadata", {})["annotations"] = bookmark["metadata"]["annotations"]
        return result

    async def _send(self, resp: web.StreamResponse, items: list[Queued]) -> None:
        for start in range(0, len(items), _CHUNK):
            if self.closed:
                return
            chunk = items[start : start + _CHUNK]
            await resp.write(b"".join(self._encode(item) for item in chunk))
            self.sent += len(chunk)

    async def run(self, request: web.Request, resp: web.StreamResponse, initial: list[Queued]) -> None:
        """Write ``initial``, then queued events, until closed, timed out or disconnected."""
        loop = self.loop
        self._timers.append(loop.call_at(self.deadline, self._close, "timeout"))
        self._timers.append(loop.call_later(DISCONNECT_POLL, self._poll_disconnect, request))
        try:
            if initial:
                await self._send(resp, initial)
            while not self.closed:
                if self.pending:
                    batch = list(self.pending)
                    self.pending.clear()
                    await self._send(resp, batch)
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


def _initial_events(session: WatchSession) -> list[Queued]:
    """Synthetic ADDED events for the objects the watch selects now (each at its own version)."""
    store = session.server.store
    rt = session.rt
    ns = session.namespace if rt.namespaced else None
    out: list[Queued] = []
    for obj in store.items(rt.storage_key, ns):
        meta = obj["metadata"]
        if session.name is not None and meta["name"] != session.name:
            continue
        if session.filtered and not session._matches(obj):
            continue
        out.append((ADDED, None, obj, int(meta.get("resourceVersion") or 0)))
    return out


async def serve(
    server: ApiServer,
    request: web.Request,
    rt: ResourceType,
    namespace: str | None,
    *,
    name: str | None = None,
) -> web.StreamResponse:
    """GET …?watch=true: stream the resource's events (of one object, when ``name`` is given)."""
    q = request.query
    selectors.validate_list_options(q, watch=True)
    state = _state(server)
    if state.closing:
        raise errors.ApiError(503, "ServiceUnavailable", "apiserver is shutting down")
    store = server.store
    label = selectors.label_selector(q.get("labelSelector"))
    fields = selectors.field_selector(rt, q.get("fieldSelector"), store=store)
    if name is not None and not fields.empty and fields.exact("metadata.name") != name:
        raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
    send_initial = _bool_param(q, "sendInitialEvents")
    bookmarks = bool(_bool_param(q, "allowWatchBookmarks"))
    timeout_seconds = _int_param(q, "timeoutSeconds")
    rv_text = q.get("resourceVersion", "")
    try:
        wanted = selectors.parse_rv(rv_text)
    except selectors.InvalidResourceVersionError as exc:
        raise selectors.storage_invalid(exc) from None
    timeout = float(timeout_seconds) if timeout_seconds else MIN_REQUEST_TIMEOUT * (1.0 + random.random())
    session = WatchSession(
        server,
        rt,
        (namespace or None) if rt.namespaced else None,
        name=name,
        label=label,
        fields=fields,
        bookmarks=bookmarks,
        timeout=timeout,
        buffer=int(getattr(server, "watch_buffer", DEFAULT_BUFFER)),
        table_request=request if table.wants_table(request) else None,
    )

    # From here to add_watcher nothing awaits: the initial state and the live events join seamlessly.
    key = rt.storage_key
    initial: list[Queued] = []
    failure: errors.ApiError | None = None
    initial_events_end = False
    if send_initial:
        if wanted > store.rv:
            failure = selectors.too_large(wanted, store.rv)
        else:
            initial = _initial_events(session)
            initial_events_end = bookmarks
    elif send_initial is None and wanted == 0:
        initial = _initial_events(session)
    elif wanted:
        events = store.events_since(key, wanted)
        if events is None:
            failure = expired(wanted, _oldest(store, key, wanted))
        else:
            for event in events:
                session.offer(event, replay=True)
    if failure is None:
        store.add_watcher(key, session)
        state.sessions.add(session)
        if initial_events_end:
            session._bookmark(initial_events_end=True)
        faults = getattr(server, "faults", None)
        if faults is not None and hasattr(faults, "watch_opened"):
            faults.watch_opened(session)

    resp = web.StreamResponse(
        status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
    )
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(request)
        if failure is not None:
            await resp.write(_status_event(failure))
        else:
            if bookmarks:
                session._schedule_bookmark()
            await session.run(request, resp, initial)
        await resp.write_eof()
    except ConnectionError:
        pass  # the client went away
    finally:
        session._close(session.close_reason or "ended")
        state.sessions.discard(session)
        faults = getattr(server, "faults", None)
        if faults is not None and hasattr(faults, "watch_closed"):
            faults.watch_closed(session)
    return resp


def _oldest(store: Any, key: str, requested: int) -> int:
    """What kube prints after a too old resourceVersion: the oldest retained event's version minus one."""
    history = getattr(store, "_history", {}).get(key)
    return int(history[0].rv) - 1 if history else requested + 1

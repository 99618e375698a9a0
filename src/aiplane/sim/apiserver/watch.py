"""Watch streams, as kube-apiserver's watch handler and cacher serve them.

A watch is a chunked HTTP/1.1 response of newline-delimited JSON events ``{"type": …, "object": …}``.
The store calls :meth:`WatchSession.offer` synchronously for every committed event of the watched
resource; the session filters it (namespace, name, label and field selectors, with kube's transitions:
an object that starts matching arrives as ADDED, one that stops matching as DELETED) and queues it; the
consumer of :meth:`WatchSession.batches` (the HTTP writer, or the in-memory client) drains the queue in
batches of encoded lines. Events are shared immutable objects whose JSON is encoded once
(``Event.raw()``), and so is each event line, however many watchers send it.

What follows kube (``staging/src/k8s.io/apiserver/pkg/storage/cacher``):

* ``resourceVersion`` unset or ``"0"``: synthetic ADDED events for the current objects, then changes;
  ``N``: the changes after N; N older than the retained history: one ERROR event with a 410 ``Expired``
  Status (``too old resource version: N (M)``), then the stream ends.
* ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` (the WatchList protocol): the
  current objects as ADDED, then, with ``allowWatchBookmarks``, a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``.
* ``allowWatchBookmarks``: a BOOKMARK (kind, apiVersion, metadata.resourceVersion) about every minute
  and 2 s before the watch's deadline — but only when the resource has changed since the watch began:
  the cacher's bookmark carries its ``lastProcessedResourceVersion`` (the last event of this resource,
  whether or not this watcher's namespace or selectors let it through), and a watcher is sent only
  what is newer than the resourceVersion it started from (``cacheWatcher.process``). So a watch of a
  resource nobody writes hears nothing until its deadline, as on kube. (kube also advances that
  version with etcd's progress notifications; the twin has none.)
* ``timeoutSeconds`` ends the stream; without it the server picks 30 to 60 minutes (kube's
  ``--min-request-timeout`` of 1800 s times a random factor in [1, 2)).
* A watcher that falls too far behind (its queue exceeds ``watch_buffer`` events) is closed: the stream
  simply ends, as kube's cacher does to unresponsive watchers.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from multidict import MultiMapping

from aiplane.sim.apiserver import errors, selectors, table
from aiplane.sim.apiserver.context import DEFAULT_WATCH_BUFFER, ServerContext
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.store import ADDED, DELETED, MODIFIED, Event, Store
from aiplane.sim.apiserver.table import TableOptions

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: The timeouts' jitter, from a generator of our own (not the process-wide ``random`` state).
_JITTER = random.Random()
#: kube-apiserver's default ``--min-request-timeout``.
MIN_REQUEST_TIMEOUT = 1800.0
#: How often the cacher sends a watcher a bookmark (``bookmarkFrequency``).
BOOKMARK_FREQUENCY = 60.0
#: Events a watcher may have queued before it counts as unresponsive and is closed (see ``watch_buffer``).
DEFAULT_BUFFER = DEFAULT_WATCH_BUFFER
#: How often an idle watch checks that its client is still connected.
DISCONNECT_POLL = 1.0
#: Lines handed to the writer in one batch (one socket write) while sending initial events.
_CHUNK = 512
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")

Obj = dict[str, Any]
#: A queued event: (type, store event or None, object to send instead of the event's, rv).
Queued = tuple[str, Event | None, Obj | None, int]


def open_watches(ctx: ServerContext, rt: ResourceType | None = None) -> list[WatchSession]:
    """The watches ``ctx`` is serving (of ``rt``'s resource, if given)."""
    sessions = [s for s in ctx.watches.sessions if isinstance(s, WatchSession)]
    if rt is not None:
        sessions = [s for s in sessions if s.rt.storage_key == rt.storage_key]
    return sessions


def close_all(ctx: ServerContext) -> int:
    """End every watch stream of ``ctx`` and refuse new ones (the server is stopping)."""
    return ctx.watches.close_all()


def _bool_param(query: MultiMapping[str], name: str) -> bool | None:
    value = query.get(name)
    if value is None:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _int_param(query: MultiMapping[str], name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value, 10)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def expired(requested: int, oldest: int) -> errors.ApiError:
    return errors.gone(f"too old resource version: {requested} ({oldest})")


class WatchSession:
    """One open watch: the store's ``Watcher`` for its resource, and the source of its stream."""

    def __init__(
        self,
        ctx: ServerContext,
        rt: ResourceType,
        namespace: str | None,
        *,
        name: str | None = None,
        label: selectors.LabelSelector | None = None,
        fields: selectors.FieldSelector | None = None,
        bookmarks: bool = False,
        timeout: float,
        buffer: int = DEFAULT_BUFFER,
        table_options: TableOptions | None = None,
    ) -> None:
        self.ctx = ctx
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.label = label or selectors.LabelSelector()
        self.fields = fields or selectors.FieldSelector()
        self.filtered = not (self.label.empty and self.fields.empty)
        self.bookmarks = bookmarks
        self.buffer = buffer
        self.table_options = table_options
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.deadline = self.started + timeout
        self.pending: deque[Queued] = deque()
        self.initial: list[Queued] = []
        self.closed = False
        self.close_reason = ""
        self.sent = 0
        #: kube's ``cacheWatcher.process`` resourceVersion: the watch's starting point, raised to the
        #: resource's last event when its initial or replayed events are queued; only periodic
        #: bookmarks newer than it are sent.
        self.start_rv = 0
        self._first_table = True
        self._waiter: asyncio.Future[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []

    # --- the store's side (synchronous) -----------------------------------------------------------

    def _matches(self, obj: Obj) -> bool:
        return self.label(obj) and self.fields(obj)

    def _transition(self, event: Event) -> Queued | None:
        """What a filtered watch sends for ``event``: kube's selector transitions, or nothing."""
        now = event.type != DELETED and self._matches(event.obj)
        before = event.old is not None and self._matches(event.old)
        if now:
            return (MODIFIED if before else ADDED, event, None, event.rv)
        if not before:
            return None
        if event.type == DELETED:
            return (DELETED, event, None, event.rv)
        assert event.old is not None
        last = {**event.old, "metadata": {**event.old["metadata"], "resourceVersion": str(event.rv)}}
        return (DELETED, event, last, event.rv)

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
            item = self._transition(event)
            if item is None:
                return
            self.pending.append(item)
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
        self.ctx.store.remove_watcher(self.rt.storage_key, self)
        self._wake()

    def finish(self) -> None:
        """The consumer stopped reading: unregister everywhere (idempotent)."""
        self._close(self.close_reason or "ended")
        self._cancel_timers()
        self.ctx.watches.sessions.discard(self)
        faults = self.ctx.faults
        if faults is not None:
            faults.watch_closed(self)

    def _cancel_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    # --- bookmarks, deadlines, disconnects ---------------------------------------------------------

    def _bookmark(self, *, initial_events_end: bool = False, rv: int | None = None) -> None:
        if self.closed:
            return
        rv = self.ctx.store.rv if rv is None else rv
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta}
        self.pending.append((BOOKMARK, None, obj, rv))
        self._wake()

    def _schedule_bookmark(self) -> None:
        """``cacheWatcher.nextBookmarkTime``: every minute, and 2 s before the deadline."""
        now = self.loop.time()
        when = min(now + BOOKMARK_FREQUENCY, self.deadline - 2.0)
        if when < now:
            return
        self._timers.append(self.loop.call_at(when, self._periodic_bookmark))

    def _periodic_bookmark(self) -> None:
        processed = self.ctx.store.processed_rv(self.rt.storage_key)
        if processed > self.start_rv:  # kube sends nothing older than the watch's start
            self._bookmark(rv=processed)
        self._schedule_bookmark()

    def watch_connection(self, gone: Callable[[], bool]) -> None:
        """Check ``gone`` every second and end the watch once the client has disconnected."""
        if gone():
            self._close("client disconnected")
            return
        self._timers.append(self.loop.call_later(DISCONNECT_POLL, self.watch_connection, gone))

    # --- the stream ----------------------------------------------------------------------------------

    def _encode(self, item: Queued) -> bytes:
        kind, event, obj, rv = item
        if kind == BOOKMARK:
            assert obj is not None
            if self.table_options is not None:
                obj = self._table([], obj["metadata"]["resourceVersion"], bookmark=obj)
            return orjson.dumps({"type": kind, "object": obj}) + b"\n"
        if obj is None:
            assert event is not None
            obj = event.obj
            if self.table_options is None and obj.get("apiVersion") == self.rt.api_version:
                return self.ctx.watches.line(event, kind)
        served = self.ctx.api.served(self.rt, obj)
        if self.table_options is not None:
            served = self._table([served], served["metadata"].get("resourceVersion", str(rv)))
        return orjson.dumps({"type": kind, "object": served}) + b"\n"

    def _table(self, objs: list[Obj], rv: str, bookmark: Obj | None = None) -> Obj:
        assert self.table_options is not None
        first = self._first_table
        self._first_table = False
        result: Obj = table.to_table(
            self.ctx.api,
            self.rt,
            objs,
            self.table_options,
            list_rv=rv,
            include_column_definitions=first,
        )
        if bookmark is not None and "annotations" in bookmark["metadata"]:
            result.setdefault("metadata", {})["annotations"] = bookmark["metadata"]["annotations"]
        return result

    async def batches(self) -> AsyncGenerator[list[bytes], None]:
        """Encoded lines of the initial events, then of queued events, until closed or timed out."""
        loop = self.loop
        self._timers.append(loop.call_at(self.deadline, self._close, "timeout"))
        if self.bookmarks:
            self._schedule_bookmark()
        items, self.initial = self.initial, []
        try:
            while True:
                for start in range(0, len(items), _CHUNK):
                    if self.closed:
                        return
                    chunk = items[start : start + _CHUNK]
                    yield [self._encode(item) for item in chunk]
                    self.sent += len(chunk)
                if self.closed:
                    return
                if self.pending:
                    items = list(self.pending)
                    self.pending.clear()
                    continue
                items = []
                self._waiter = loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        finally:
            self._cancel_timers()


@dataclass
class ErrorStream:
    """A watch that answers one ERROR event (an expired or future resourceVersion), then ends."""

    error: errors.ApiError
    closed: bool = False

    async def batches(self) -> AsyncGenerator[list[bytes], None]:
        if not self.closed:
            yield [orjson.dumps({"type": ERROR, "object": self.error.status()}) + b"\n"]
            self.closed = True

    def watch_connection(self, gone: Callable[[], bool]) -> None:
        return None

    def finish(self) -> None:
        self.closed = True


def _initial_events(session: WatchSession) -> list[Queued]:
    """Synthetic ADDED events for the objects the watch selects now (each at its own version)."""
    rt = session.rt
    ns = session.namespace if rt.namespaced else None
    out: list[Queued] = []
    for obj in session.ctx.store.items(rt.storage_key, ns):
        meta = obj["metadata"]
        if session.name is not None and meta["name"] != session.name:
            continue
        if session.filtered and not session._matches(obj):
            continue
        out.append((ADDED, None, obj, int(meta.get("resourceVersion") or 0)))
    return out


@dataclass(frozen=True)
class _WatchOptions:
    """The query parameters of a watch, validated as kube's ``ListOptions`` decoding does."""

    label: selectors.LabelSelector
    fields: selectors.FieldSelector
    send_initial: bool | None
    bookmarks: bool
    timeout: float
    wanted: int

    @classmethod
    def parse(
        cls, ctx: ServerContext, rt: ResourceType, name: str | None, query: MultiMapping[str]
    ) -> _WatchOptions:
        label = selectors.label_selector(query.get("labelSelector"))
        fields = selectors.field_selector(rt, query.get("fieldSelector"), store=ctx.store)
        if name is not None and not fields.empty and fields.exact("metadata.name") != name:
            raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
        send_initial = _bool_param(query, "sendInitialEvents")
        bookmarks = bool(_bool_param(query, "allowWatchBookmarks"))
        timeout_seconds = _int_param(query, "timeoutSeconds")
        try:
            wanted = selectors.parse_rv(query.get("resourceVersion", ""))
        except selectors.InvalidResourceVersionError as exc:
            raise selectors.storage_invalid(exc) from None
        timeout = (
            float(timeout_seconds) if timeout_seconds else MIN_REQUEST_TIMEOUT * (1.0 + _JITTER.random())
        )
        return cls(label, fields, send_initial, bookmarks, timeout, wanted)


def _oldest(store: Store, key: str, requested: int) -> int:
    """What kube prints after a too old resourceVersion: the oldest retained event's version minus one."""
    oldest = store.oldest_rv(key)
    return oldest - 1 if oldest is not None else requested + 1


def _start(session: WatchSession, opts: _WatchOptions) -> errors.ApiError | None:
    """Queue what the watch starts with; the error to answer instead (as one ERROR event), if any."""
    store = session.ctx.store
    if opts.send_initial:
        if opts.wanted > store.rv:
            return selectors.too_large(opts.wanted, store.rv)
        session.initial = _initial_events(session)
    elif opts.send_initial is None and opts.wanted == 0:
        session.initial = _initial_events(session)
    elif opts.wanted:
        key = session.rt.storage_key
        events = store.events_since(key, opts.wanted)
        if events is None:
            return expired(opts.wanted, _oldest(store, key, opts.wanted))
        for event in events:
            session.offer(event, replay=True)
    return None


def open_stream(
    ctx: ServerContext,
    rt: ResourceType,
    namespace: str | None,
    query: MultiMapping[str],
    *,
    name: str | None = None,
    table_options: TableOptions | None = None,
) -> WatchSession | ErrorStream:
    """GET …?watch=true: a registered watch of the resource (of one object, when ``name`` is given).

    Request errors raise :class:`~aiplane.sim.apiserver.errors.ApiError` before anything is registered.
    """
    selectors.validate_list_options(query, watch=True)
    if ctx.watches.closing:
        raise errors.ApiError(503, "ServiceUnavailable", "apiserver is shutting down")
    opts = _WatchOptions.parse(ctx, rt, name, query)
    session = WatchSession(
        ctx,
        rt,
        (namespace or None) if rt.namespaced else None,
        name=name,
        label=opts.label,
        fields=opts.fields,
        bookmarks=opts.bookmarks,
        timeout=opts.timeout,
        buffer=ctx.watch_buffer,
        table_options=table_options,
    )
    # From here to add_watcher nothing awaits: the initial state and the live events join seamlessly.
    failure = _start(session, opts)
    if failure is not None:
        return ErrorStream(failure)
    # Initial or replayed events reach up to the resource's last event (kube's processInterval).
    session.start_rv = max(opts.wanted, ctx.store.processed_rv(rt.storage_key))
    ctx.store.add_watcher(rt.storage_key, session)
    ctx.watches.sessions.add(session)
    if opts.send_initial and opts.bookmarks:
        session._bookmark(initial_events_end=True)
    if ctx.faults is not None:
        ctx.faults.watch_opened(session)
    return session

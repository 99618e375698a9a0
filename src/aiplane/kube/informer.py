"""Informers: a local, indexed, always-catching-up copy of one kind of object, with change callbacks.

Controllers read from informer caches rather than the API server, so what the cache guarantees is what
every controller decision rests on. This is client-go's reflector + indexer + shared informer
(``k8s.io/client-go/tools/cache``) for asyncio and plain dicts:

* **List, then watch.** The initial LIST is paginated (``limit``, default 500, following ``continue``);
  every page of one list is served from the same snapshot, so the pages add up to one consistent state.
  If the snapshot expires mid-way (410 on the continue token) the list restarts as one unpaginated list,
  as client-go's pager does (restarting pagination could expire again, forever, on a busy resource). The
  WATCH then starts at the list's resourceVersion with ``allowWatchBookmarks``: nothing between the list
  and the watch is missed, and bookmarks keep the resourceVersion fresh when the resource changes
  outside the watch's namespace or selectors, so that a later re-watch rarely falls out of the
  server's history.
* **Re-watch, relist.** A stream that ends normally (the server's timeout, a load balancer), or that
  stays silent past the read deadline (below), is resumed from the last resourceVersion seen: no event
  is missed or repeated. When that is impossible — 410 Gone (an ERROR event with code 410, or HTTP
  410: the history no longer reaches back), or a stream that broke (a lost connection, a 5xx) — the informer relists and reconciles its cache against the fresh list,
  emitting synthetic ``on_add``, ``on_update`` (only for a changed resourceVersion) and ``on_delete`` for
  exactly the differences (:func:`diff`). So a handler sees every object's state converge to the server's,
  and never the same (key, resourceVersion) twice.
* **Liveness.** Silence on a watch is normal: kube-apiserver bookmarks a watch (about once a minute)
  only when its resource changed since the watch began (``k8s.io/apiserver`` ``pkg/storage/cacher``:
  the cacher's ``lastProcessedResourceVersion``, advanced by that resource's own events, must exceed
  the watch's resourceVersion), so a watch of a resource nobody writes hears nothing until the server
  ends it at ``timeoutSeconds``. A connection
  that silently died (a NAT entry dropped, a load balancer failed over: no FIN, no RST) looks the same,
  so, as client-go relies on TCP keepalive and HTTP/2 pings rather than on events, every watch has a
  client-side read deadline, ``watch_idle_timeout`` (default 45 s): when nothing arrived within it, the
  watch is ended and a new one is opened from the last resourceVersion over a fresh connection — no
  relist (a 410 then relists as usual), logged at debug level. A live server answers the new watch at
  once, and an established watch (the server's 200 response to it) counts as hearing from the server;
  a watch request it does not answer within the deadline is a failure (a warning).
  Each informer remembers when it last heard from the server (:attr:`Informer.last_heard`: a list, a
  watch established, an event, a bookmark); one that has heard nothing for ``stale_after`` seconds
  (default 90 s: two read deadlines, so a live server never lets a quiet informer go stale) is *stale*
  (:attr:`Informer.stale`): ``/readyz`` fails naming it, the metric ``aiplane_informer_stale`` says 1,
  a warning is logged once, and controllers that drain nodes start no new disruption from it
  (:func:`all_fresh`) until it has heard from the server again.
* **Backoff.** Failed attempts wait an exponentially growing, jittered delay capped at 30 s (client-go's
  reflector uses 800 ms … 30 s); a watch that delivers events resets it. A 429 re-watches after the
  server's ``Retry-After``; a first 410 relists at once (it is routine, not a failure).
* **Cache** (:mod:`aiplane.kube.cache`). Objects are stored in their cached form
  (:mod:`aiplane.kube.transforms`: without ``metadata.managedFields``, Secret values or the Node
  status no controller reads; an informer may also be given a ``transform``, as controller-runtime's
  cache ``TransformFunc``, that drops what its readers never read), keyed ``namespace/name`` (or
  ``name``), and shared: a cached object, and
  every object passed to a handler, must never be mutated (``meta.deep_copy`` first). Indexes — built in:
  ``namespace`` and ``owner`` (the uid of the controller ownerReference); more with :meth:`add_indexer` —
  are maintained incrementally. Each event costs O(1) (a shallow copy of the top level and metadata, one
  dict update, the index functions), never a deep copy, so caches of tens of thousands of objects are fine.
* **Handlers** are synchronous callbacks run on the event loop, in event order, after the cache has been
  updated (a handler reading the cache sees at least the state it is told about). A handler added once
  the informer has data first gets a synthetic ``on_add`` for every cached object, as client-go does. A
  handler that raises is logged and does not disturb the informer or the other handlers.

:class:`InformerFactory` shares one informer per (resource, namespace, label selector, field selector), so
controllers watching the same kind cost one list and one watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiplane.kube.cache import (
    NAMESPACE_INDEX,
    OWNER_INDEX,
    Cache,
    Change,
    IndexFunc,
    cache_key,
    diff,
    namespace_index,
    object_rv,
    owner_index,
)
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.forbidden import MissingPermission, ReportLimiter, missing_permission
from aiplane.kube.resources import Resource
from aiplane.kube.transforms import cached_form

# The cache's names are re-exported: callers know the informer, not how it is split.
__all__ = [
    "NAMESPACE_INDEX",
    "OWNER_INDEX",
    "AddHandler",
    "Backoff",
    "Cache",
    "Change",
    "DeleteHandler",
    "HandlerRegistration",
    "IndexFunc",
    "Informer",
    "InformerFactory",
    "InformerStats",
    "Transform",
    "UpdateHandler",
    "all_fresh",
    "diff",
    "namespace_index",
    "object_rv",
    "owner_index",
]

log = logging.getLogger(__name__)
_JITTER = random.Random()  # watch timeouts' jitter; leaves the process-wide random state alone

Obj = dict[str, Any]
AddHandler = Callable[[Obj], None]
UpdateHandler = Callable[[Obj, Obj], None]
DeleteHandler = Callable[[Obj], None]
# Aliases for annotations inside classes that define a ``list`` method (which shadows the builtin there).
ObjList = list[Obj]
StrList = list[str]
Sleep = Callable[[float], Awaitable[None]]
Transform = Callable[[Obj], Obj]

#: A watch that ends normally sooner than this without delivering anything counts as a failure
#: (client-go's "very short watch"), so a server that keeps closing watches is not hammered.
SHORT_WATCH: Final = 1.0
#: Defaults of the liveness bounds (module docstring): a watch silent for 45 s is re-opened (a live
#: server answers at once), so only a server unreachable for 90 s makes an informer stale.
DEFAULT_STALE_AFTER: Final = 90.0
DEFAULT_WATCH_IDLE_TIMEOUT: Final = 45.0


# --------------------------------------------------------------------------------------------------
# Backoff, handlers, stats
# --------------------------------------------------------------------------------------------------


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``initial * factor**n``, times ``1 + jitter * random()``, at most
    ``cap`` seconds. Tests pass a tiny one (``Backoff(initial=0.001, cap=0.01)``) to run fast."""

    initial: float = 0.8
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 1.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next(self) -> float:
        """The delay before the next attempt (and count this one)."""
        base = min(self.cap, self.initial * self.factor ** min(self.attempts, 64))
        self.attempts += 1
        return min(self.cap, base * (1.0 + self.jitter * self.rng.random()))

    def reset(self) -> None:
        self.attempts = 0


class HandlerRegistration:
    """One :meth:`Informer.add_handler` call; :meth:`remove` stops its callbacks."""

    __slots__ = ("_informer", "on_add", "on_delete", "on_update")

    def __init__(
        self,
        informer: Informer,
        on_add: AddHandler | None,
        on_update: UpdateHandler | None,
        on_delete: DeleteHandler | None,
    ) -> None:
        self._informer = informer
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete

    def remove(self) -> None:
        self._informer.remove_handler(self)


@dataclass
class InformerStats:
    """What the informer did, for tests and metrics."""

    lists: int = 0  #: LIST requests (pages)
    relists: int = 0  #: complete lists after the first
    watches: int = 0  #: WATCH requests
    events: int = 0  #: watch events applied (ADDED/MODIFIED/DELETED)
    bookmarks: int = 0
    expired: int = 0  #: 410s (watch history or list snapshot gone)
    failures: int = 0  #: failed attempts (errors, broken or very short streams)
    idle_timeouts: int = 0  #: watches abandoned after ``watch_idle_timeout`` without a word


def all_fresh(informers: Iterable[Informer]) -> bool:
    """None of ``informers`` is stale: a decision that disrupts nodes may rest on their caches."""
    return not any(informer.stale for informer in informers)


class _GoneError(Exception):
    """The watch's resourceVersion is no longer in the server's history: relist."""


class _IdleError(Exception):
    """Nothing within ``watch_idle_timeout``: a quiet resource or a dead connection; re-watch.
    ``opened``: the server had answered the watch request (a quiet watch), not left it unanswered."""

    def __init__(self, message: str, *, opened: bool) -> None:
        super().__init__(message)
        self.opened = opened


# --------------------------------------------------------------------------------------------------
# The informer
# --------------------------------------------------------------------------------------------------


class Informer:
    """A cache of one resource (in ``namespace``, matching the selectors), kept current by list + watch.

    See the module docstring for the guarantees. ``run()`` does the work until cancelled (or use
    :meth:`start`/:meth:`stop`); ``page_size`` is the LIST ``limit`` (``0``: unpaginated);
    ``watch_timeout`` the base of each watch's ``timeoutSeconds`` (randomised up to twice that, so
    informers do not re-watch in lockstep); ``watch_idle_timeout`` and ``stale_after`` the liveness
    bounds (module docstring); ``backoff`` and ``sleep`` are injectable for tests.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        watch_idle_timeout: float = DEFAULT_WATCH_IDLE_TIMEOUT,
        stale_after: float = DEFAULT_STALE_AFTER,
        backoff: Backoff | None = None,
        sleep: Sleep = asyncio.sleep,
        name: str | None = None,
        transform: Transform | None = None,
    ) -> None:
        self.client = client
        #: Applied to every object before it is cached (controller-runtime's cache ``TransformFunc``):
        #: drops what no reader of this informer decides on, so a big fleet's caches stay small.
        self.transform = transform
        self.resource = resource
        self.namespace = (namespace or None) if resource.namespaced else None
        self.label_selector = label_selector or None
        self.field_selector = field_selector or None
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.watch_idle_timeout = watch_idle_timeout
        self.stale_after = stale_after
        self.backoff = backoff if backoff is not None else Backoff()
        self.name = name or resource.label + (f"/{self.namespace}" if self.namespace else "")
        self.cache = Cache()
        self.stats = InformerStats()
        #: The resourceVersion the next watch starts from (the last event, bookmark or list seen).
        self.resource_version = ""
        #: When (event loop time) the server last said something: a list, an event, a bookmark.
        self.last_heard: float | None = None
        self._stale_logged = False
        self._sleep = sleep
        #: What the last list or watch was refused (403), until a list (for a refused list) or a watch
        #: event (for a refused watch: a list that succeeds between refused watches does not clear it).
        self.forbidden: MissingPermission | None = None
        self._forbidden_reports = ReportLimiter()
        self._handlers: tuple[HandlerRegistration, ...] = ()
        self._synced = asyncio.Event()
        self._running = False
        self._task: asyncio.Task[None] | None = None
        self._expired_streak = 0

    def __repr__(self) -> str:
        return (
            f"Informer({self.name!r}, objects={len(self.cache)}, synced={self.has_synced}, "
            f"rv={self.resource_version!r})"
        )

    # --- cache reads --------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self.cache.get(key)

    def get_by(self, namespace: str | None, name: str) -> Obj | None:
        return self.cache.get_by(namespace, name)

    def list(self, namespace: str | None = None) -> ObjList:
        return self.cache.list(namespace)

    def keys(self) -> StrList:
        return self.cache.keys()

    def by_index(self, index: str, value: str) -> ObjList:
        return self.cache.by_index(index, value)

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Add an index (e.g. pods by ``spec.nodeName``); if the cache has objects they are indexed now."""
        self.cache.add_indexer(name, fn)

    # --- sync -------------------------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """The first complete list is in the cache and its ``on_add`` calls have been made."""
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait for :attr:`has_synced`; ``False`` if ``timeout`` seconds passed first."""
        if self._synced.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._synced.wait(), timeout)
        return self._synced.is_set()

    @property
    def running(self) -> bool:
        return self._running

    # --- liveness -----------------------------------------------------------------------------------

    def silence(self) -> float | None:
        """Seconds since the server last said something (``None``: never, e.g. not started)."""
        if self.last_heard is None:
            return None
        return max(0.0, _now() - self.last_heard)

    @property
    def stale(self) -> bool:
        """Heard nothing from the server for more than ``stale_after`` seconds (module docstring).
        An informer that never heard anything is not stale but unsynced (:attr:`has_synced`)."""
        silence = self.silence()
        return silence is not None and silence > self.stale_after

    def _heard(self) -> None:
        self.last_heard = _now()
        if self._stale_logged:
            self._stale_logged = False
            log.info("informer %s: hearing from the API server again", self.name)

    def _warn_stale(self) -> None:
        if not self._stale_logged and self.stale:
            self._stale_logged = True
            log.warning(
                "informer %s: nothing from the API server for %.0f s (no list, watch or event): "
                "its cache is stale, drains wait for it",
                self.name,
                self.silence() or 0.0,
            )

    # --- handlers ---------------------------------------------------------------------------------

    def add_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> HandlerRegistration:
        """Register callbacks: ``on_add(obj)``, ``on_update(old, new)``, ``on_delete(last_state)``.

        Objects already in the cache are delivered to ``on_add`` right away (synchronously), then live
        changes follow, so a late handler misses nothing and sees nothing twice. For a delete found by a
        relist, ``last_state`` is the last state the informer saw (the final one is unknown).
        """
        registration = HandlerRegistration(self, on_add, on_update, on_delete)
        self._handlers = (*self._handlers, registration)
        if on_add is not None:
            for obj in list(self.cache.list()):
                self._call(on_add, obj)
        return registration

    def remove_handler(self, registration: HandlerRegistration) -> None:
        self._handlers = tuple(h for h in self._handlers if h is not registration)

    def _call(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("informer %s: event handler %r failed", self.name, fn)

    def _added(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_add is not None:
                self._call(handler.on_add, obj)

    def _updated(self, old: Obj, new: Obj) -> None:
        for handler in self._handlers:
            if handler.on_update is not None:
                self._call(handler.on_update, old, new)

    def _deleted(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_delete is not None:
                self._call(handler.on_delete, obj)

    # --- applying what the server says --------------------------------------------------------------

    def _prepare(self, obj: Mapping[str, Any]) -> Obj:
        """The cached form (:func:`aiplane.kube.transforms.cached_form`: no managedFields, no Secret
        values, no unread Node status), then this informer's own ``transform``."""
        out = cached_form(self.resource, obj)
        return self.transform(out) if self.transform is not None else out

    def _apply_event(self, kind: str, raw: Obj) -> None:
        key = cache_key(raw)
        if key is None:
            log.warning("informer %s: ignoring a %s event for an object without a name", self.name, kind)
            return
        obj = self._prepare(raw)
        if kind in ("ADDED", "MODIFIED"):
            old = self.cache.get(key)
            if old is not None and object_rv(old) == object_rv(obj):
                return  # already delivered
            self.cache.put(key, obj)
            if old is None:
                self._added(obj)
            else:
                self._updated(old, obj)
        elif kind == "DELETED":
            if self.cache.remove(key) is not None:
                self._deleted(obj)
        else:
            log.warning("informer %s: ignoring a watch event of type %r", self.name, kind)
            return
        self.stats.events += 1

    def _replace(self, fresh: Mapping[str, Obj]) -> None:
        """Make the cache equal ``fresh`` (a complete list), telling handlers about each difference."""
        cache = self.cache
        for change in diff(cache.items(), fresh):
            if change.type == "delete":
                assert change.old is not None
                cache.remove(change.key)
                self._deleted(change.old)
            elif change.type == "add":
                assert change.new is not None
                cache.put(change.key, change.new)
                self._added(change.new)
            else:
                assert change.old is not None and change.new is not None
                cache.put(change.key, change.new)
                self._updated(change.old, change.new)

    # --- list ---------------------------------------------------------------------------------------

    async def _list(self) -> tuple[dict[str, Obj], str]:
        """One complete, consistent list: ``({key: cached form}, its resourceVersion)``."""
        limit: int | None = self.page_size if self.page_size > 0 else None
        token: str | None = None
        items: dict[str, Obj] = {}
        rv = ""
        while True:
            self.stats.lists += 1
            try:
                page = await self.client.list(
                    self.resource,
                    self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    limit=limit,
                    continue_token=token,
                )
            except ApiError as err:
                if not (err.gone and token):
                    raise
                # The snapshot the pages came from is gone; client-go's pager falls back to one full list.
                log.info("informer %s: list continuation expired, listing again in one page", self.name)
                self.stats.expired += 1
                items.clear()
                token, limit = None, None
                continue
            for raw in page.get("items") or ():
                key = cache_key(raw)
                if key is not None:
                    items[key] = self._prepare(raw)
            meta = page.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            token = meta.get("continue") or None
            if not token:
                return items, rv

    async def _list_and_replace(self) -> None:
        fresh, rv = await self._list()
        if self._synced.is_set():
            self.stats.relists += 1
        self._replace(fresh)
        self.resource_version = rv
        self._heard()
        self._synced.set()

    # --- watch --------------------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """One watch stream until it ends; whether it was healthy (delivered something or ran a while)."""
        loop = asyncio.get_running_loop()
        timeout = max(1, int(self.watch_timeout * (1.0 + _JITTER.random())))
        self.stats.watches += 1
        started = loop.time()
        received = 0
        opened = False
        # The read deadline, pushed back by the server's answer and each event: one timer per stream.
        deadline = asyncio.timeout_at(started + self.watch_idle_timeout)

        def established() -> None:  # the server answered (its 200): it is there, the watch allowed
            nonlocal opened
            opened = True
            self._heard()
            self.forbidden = None
            deadline.reschedule(loop.time() + self.watch_idle_timeout)

        stream = self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version or None,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
            allow_bookmarks=True,
            on_open=established,
        )
        # A refused watch is refused at once (403): one still open after SHORT_WATCH is allowed.
        allowed = loop.call_later(SHORT_WATCH, self._watch_allowed)
        try:
            async with deadline:
                async for event in stream:
                    self._heard()
                    deadline.reschedule(loop.time() + self.watch_idle_timeout)
                    kind = event.get("type")
                    obj = event.get("object")
                    if not isinstance(obj, dict):
                        continue
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        if code == 410:
                            raise _GoneError(obj.get("message") or "")
                        raise ApiError(code, str(obj.get("reason") or ""), str(obj.get("message") or ""), obj)
                    received += 1
                    self.forbidden = None  # a watch the role refused before is allowed now
                    if kind == "BOOKMARK":
                        self.stats.bookmarks += 1
                    else:
                        self._apply_event(str(kind), obj)
                    rv = object_rv(obj)
                    if rv:
                        self.resource_version = rv
        except TimeoutError as exc:
            if deadline.expired():
                what = "nothing on the watch" if opened else "no answer to the watch request"
                raise _IdleError(f"{what} for {self.watch_idle_timeout:g} s", opened=opened) from exc
            raise
        finally:
            allowed.cancel()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return received > 0 or loop.time() - started >= SHORT_WATCH

    # --- the loop -----------------------------------------------------------------------------------

    async def _pause(self, retry_after: float | None = None) -> None:
        self.stats.failures += 1
        delay = self.backoff.next()
        if retry_after is not None:  # the server's Retry-After, but never a hot loop
            delay = max(delay, min(retry_after, self.backoff.cap))
        if delay > 0:
            await self._sleep(delay)

    async def _expired(self) -> None:
        """The history no longer reaches our resourceVersion: only a relist can catch up. Routine once;
        repeatedly (a tiny history, a write storm) it backs off like any failure."""
        self.stats.expired += 1
        self._expired_streak += 1
        if self._expired_streak > 1:
            await self._pause()

    async def run(self) -> None:
        """List, watch, re-watch and relist until cancelled; cancelling closes the open stream."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        try:
            await self._loop()
        finally:
            self._running = False

    async def _loop(self) -> None:
        need_list = True
        while True:
            if need_list:
                try:
                    await self._list_and_replace()
                except Exception as exc:
                    self._report("list", exc)
                    self._warn_stale()
                    await self._pause(_retry_after(exc))
                    continue
                need_list = False
                if self.forbidden is not None and self.forbidden.verb != "watch":
                    self.forbidden = None  # a refused watch stays refused until a watch delivers
            try:
                healthy = await self._watch()
            except _IdleError as exc:
                self._idle(exc)
                continue
            except _GoneError:
                need_list = True
                await self._expired()
                continue
            except ApiError as err:
                if err.gone:
                    need_list = True
                    await self._expired()
                    continue
                self._report("watch", err)
                self._warn_stale()
                # 429: the server asks us to wait, and the stream state is still valid: re-watch.
                # Anything else (a broken connection, 5xx, 403/404) may have lost events: relist.
                need_list = not err.too_many_requests
                await self._pause(err.retry_after)
                continue
            except Exception as exc:  # e.g. an undecodable line from a truncated stream
                log.warning("informer %s: watch stream broke: %r", self.name, exc)
                self._warn_stale()
                need_list = True
                await self._pause()
                continue
            self.forbidden = None  # the watch ran and ended normally: the role allows it
            if healthy:
                self.backoff.reset()
                self._expired_streak = 0
            else:
                await self._pause()  # a very short, empty watch: do not hammer the server

    def _idle(self, exc: _IdleError) -> None:
        """The read deadline passed: watch again from the same resourceVersion (the cache is right).
        Unanswered, it is a failure, but the deadline already spaced the attempts: no backoff."""
        self.stats.idle_timeouts += 1
        if exc.opened:  # a watch that was answered and lasted: as healthy as one the server ended
            log.debug("informer %s: %s: re-watching from %s", self.name, exc, self.resource_version)
            self.backoff.reset()
            self._expired_streak = 0
            return
        self.stats.failures += 1
        log.warning("informer %s: %s: the connection may be dead; watching again", self.name, exc)
        self._warn_stale()

    def _watch_allowed(self) -> None:
        self.forbidden = None

    def _report(self, what: str, exc: BaseException) -> None:
        """A failed list or watch: a warning, except a 403 (the role lacks a permission, which retries
        cannot fix): that names the permission at error level, once per interval."""
        missing = missing_permission(exc)
        if missing is None:
            log.warning("informer %s: %s failed: %s", self.name, what, exc)
            return
        self.forbidden = missing
        if self._forbidden_reports.allow(missing):
            log.error(
                "informer %s: %s forbidden: the operator's role lacks %s (rule {%s}); retrying with backoff",
                self.name,
                what,
                missing,
                missing.rule(),
            )

    def start(self) -> asyncio.Task[None]:
        """Run in a task of the running loop (idempotent while it runs)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer:{self.name}")
        return self._task

    async def stop(self) -> None:
        """Cancel :meth:`start`'s task and wait for it (its stream is closed)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _now() -> float:
    """The informer's clock: the running loop's (monotonic), or ``time.monotonic`` outside one."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, ApiError) and exc.too_many_requests else None


# --------------------------------------------------------------------------------------------------
# The factory
# --------------------------------------------------------------------------------------------------

InformerKey = tuple[Resource, str | None, str | None, str | None]


class InformerFactory:
    """Shares one :class:`Informer` per (resource, namespace, label selector, field selector).

    ``informer(...)`` may be called before or after :meth:`start`; like client-go's
    ``SharedInformerFactory.Start``, :meth:`start` starts whatever is not running yet, so call it again
    after asking for more informers. ``backoff`` builds each informer's :class:`Backoff`; the liveness
    bounds (``watch_idle_timeout``, ``stale_after``) apply to informers created after they are set.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        watch_idle_timeout: float = DEFAULT_WATCH_IDLE_TIMEOUT,
        stale_after: float = DEFAULT_STALE_AFTER,
        backoff: Callable[[], Backoff] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.client = client
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self.watch_idle_timeout = watch_idle_timeout
        self.stale_after = stale_after
        self._backoff = backoff or Backoff
        self._sleep = sleep
        self._informers: dict[InformerKey, Informer] = {}

    def informer(
        self,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        transform: Transform | None = None,
    ) -> Informer:
        """The shared informer for these arguments (created on first use, not started).

        ``transform``: see :attr:`Informer.transform`; it belongs to the component that set it up
        (as controller-runtime's per-type transforms), and a caller passing none gets the informer as
        set up (a controller's watch sources do). Asking for a different transform, or for one after
        the informer has started, is a ``ValueError``: the cache cannot hold two shapes."""
        key: InformerKey = (
            resource,
            (namespace or None) if resource.namespaced else None,
            label_selector or None,
            field_selector or None,
        )
        found = self._informers.get(key)
        if found is None:
            found = self._informers[key] = Informer(
                self.client,
                resource,
                key[1],
                label_selector=key[2],
                field_selector=key[3],
                page_size=self._page_size,
                watch_timeout=self._watch_timeout,
                watch_idle_timeout=self.watch_idle_timeout,
                stale_after=self.stale_after,
                backoff=self._backoff(),
                sleep=self._sleep,
                transform=transform,
            )
        elif transform is not None and found.transform is not transform:
            if found.transform is not None or found.running or len(found.cache):
                raise ValueError(f"informer {found.name}: shared with another cache transform")
            found.transform = transform
        return found

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def stale(self) -> list[Informer]:
        """The informers that are stale now (see :attr:`Informer.stale`)."""
        return [i for i in self._informers.values() if i.stale]

    def start(self) -> None:
        """Start every informer that is not running (on the running loop)."""
        for informer in self._informers.values():
            informer.start()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer has synced; ``False`` if ``timeout`` seconds passed first."""
        pending = [i for i in self._informers.values() if not i.has_synced]
        if pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(i.wait_synced() for i in pending)), timeout)
        return all(i.has_synced for i in self._informers.values())

    async def stop(self) -> None:
        """Stop every informer and wait for them (caches are kept)."""
        await asyncio.gather(*(i.stop() for i in self._informers.values()))

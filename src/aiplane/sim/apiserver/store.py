"""The object store: one monotonically increasing resourceVersion, a bounded event history, watch fan-out.

It plays etcd plus the watch cache. Stored objects are never mutated: every write stores a new dict,
so readers (handlers serialising a response, watchers, in-process agents) can hold a reference
without copying. Each object's JSON encoding is computed at most once and shared by every GET and
every watcher that sends it.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True)
class Event:
    """A committed change. ``obj`` is the object at ``rv`` (for DELETED: its last state, at ``rv``)."""

    type: str
    key: str  # storage key ("group/plural")
    obj: dict[str, Any]
    old: dict[str, Any] | None
    rv: int
    _raw: list[bytes] = field(default_factory=list, compare=False, repr=False)

    def raw(self) -> bytes:
        """``obj`` as JSON, encoded once however many watchers send it."""
        if not self._raw:
            self._raw.append(orjson.dumps(self.obj))
        return self._raw[0]


class Watcher(Protocol):
    """Something that receives the events of one storage key (see ``watch.py``)."""

    def offer(self, event: Event) -> None: ...


Listener = Callable[[Event], None]


class Store:
    """In-memory objects by storage key and (namespace, name), with history for watches."""

    def __init__(self, history_size: int = 10_000) -> None:
        self.rv = 0
        self.history_size = history_size
        self._data: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
        self._raw: dict[str, dict[tuple[str, str], bytes]] = defaultdict(dict)
        self._history: dict[str, deque[Event]] = defaultdict(lambda: deque(maxlen=self.history_size))
        # Highest resourceVersion whose event has been dropped from the history, per key.
        self._evicted: dict[str, int] = defaultdict(int)
        # The resourceVersion of the last event of each key: kube's cacher ``lastProcessedResourceVersion``.
        self._processed: dict[str, int] = defaultdict(int)
        self._watchers: dict[str, set[Watcher]] = defaultdict(set)
        self._listeners: list[Listener] = []

    # --- reads ------------------------------------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object (shared: never mutate it)."""
        return self._data[key].get((namespace, name))

    def raw(self, key: str, namespace: str, name: str) -> bytes | None:
        """The stored object's JSON encoding."""
        cached = self._raw[key].get((namespace, name))
        if cached is None:
            obj = self._data[key].get((namespace, name))
            if obj is None:
                return None
            cached = self._raw[key][(namespace, name)] = orjson.dumps(obj)
        return cached

    def items(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of ``key`` (in ``namespace`` if given), ordered by namespace then name, as etcd keys are."""
        data = self._data[key]
        keys = sorted(k for k in data if namespace is None or k[0] == namespace)
        return [data[k] for k in keys]

    def storage_keys(self) -> Iterable[str]:
        return list(self._data)

    def count(self, key: str) -> int:
        return len(self._data[key])

    # --- writes -----------------------------------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, key: str, obj: dict[str, Any]) -> Event:
        """Store ``obj`` (which the store now owns) at a new resourceVersion; ADDED or MODIFIED."""
        meta = obj["metadata"]
        ident = (meta.get("namespace", ""), meta["name"])
        old = self._data[key].get(ident)
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        self._data[key][ident] = obj
        self._raw[key].pop(ident, None)
        return self._emit(Event(ADDED if old is None else MODIFIED, key, obj, old, rv))

    def remove(self, key: str, namespace: str, name: str) -> Event | None:
        """Remove an object; the DELETED event carries its last state at a new resourceVersion."""
        old = self._data[key].pop((namespace, name), None)
        self._raw[key].pop((namespace, name), None)
        if old is None:
            return None
        rv = self.next_rv()
        last = {**old, "metadata": {**old["metadata"], "resourceVersion": str(rv)}}
        return self._emit(Event(DELETED, key, last, old, rv))

    def drop_key(self, key: str) -> list[Event]:
        """Remove every object of ``key`` (a CRD was deleted), emitting DELETED for each."""
        events = []
        for obj in self.items(key):
            meta = obj["metadata"]
            event = self.remove(key, meta.get("namespace", ""), meta["name"])
            if event is not None:
                events.append(event)
        return events

    def _emit(self, event: Event) -> Event:
        history = self._history[event.key]
        if len(history) == history.maxlen:
            self._evicted[event.key] = history[0].rv
        history.append(event)
        self._processed[event.key] = event.rv
        for watcher in list(self._watchers[event.key]):
            watcher.offer(event)
        for listener in list(self._listeners):
            listener(event)
        return event

    # --- watches ----------------------------------------------------------------------------------

    def events_since(self, key: str, rv: int) -> list[Event] | None:
        """Events of ``key`` after ``rv``, or ``None`` if some of them are no longer in the history."""
        if rv < self._evicted[key]:
            return None
        return [e for e in self._history[key] if e.rv > rv]

    def processed_rv(self, key: str) -> int:
        """The resourceVersion of the last event of ``key`` (0: none yet): what the periodic bookmarks of
        its watches carry, as kube's cacher bookmarks carry its ``lastProcessedResourceVersion``."""
        return self._processed[key]

    def oldest_rv(self, key: str) -> int | None:
        """The resourceVersion of the oldest event of ``key`` still retained (``None``: no history)."""
        history = self._history.get(key)
        return history[0].rv if history else None

    def add_watcher(self, key: str, watcher: Watcher) -> None:
        self._watchers[key].add(watcher)

    def remove_watcher(self, key: str, watcher: Watcher) -> None:
        self._watchers[key].discard(watcher)

    def watchers(self, key: str | None = None) -> list[Watcher]:
        if key is not None:
            return list(self._watchers[key])
        return [w for ws in self._watchers.values() for w in ws]

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` synchronously with every committed event (in-process agents, GC)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

"""The informer's store: objects by key with incrementally maintained indexes, and the relist diff.

Kept apart from the list-watch loop (:mod:`aiplane.kube.informer`) because this is what controllers
read and index, and what the loop only writes. Each event costs O(1) — a dict update and the index
functions, never a deep copy — so caches of tens of thousands of objects are fine; in exchange, every
object it returns is the shared cached one and must never be mutated (``meta.deep_copy`` first).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_of

__all__ = [
    "NAMESPACE_INDEX",
    "OWNER_INDEX",
    "Cache",
    "Change",
    "IndexFunc",
    "cache_key",
    "diff",
    "namespace_index",
    "object_rv",
    "owner_index",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: An index function: the values an object is indexed under (``[]``: not indexed).
IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]
# Aliases for annotations inside a class that defines a ``list`` method (which shadows the builtin there).
ObjList = list[Obj]
StrList = list[str]

NAMESPACE_INDEX: Final = "namespace"
OWNER_INDEX: Final = "owner"


def namespace_index(obj: Mapping[str, Any]) -> StrList:
    """``cache.MetaNamespaceIndexFunc``: the object's namespace (``""`` for cluster-scoped objects)."""
    return [objects.namespace(obj)]


def owner_index(obj: Mapping[str, Any]) -> StrList:
    """The uid of the object's controller (``controller: true`` ownerReference), if any."""
    ref = controller_of(obj)
    uid = ref.get("uid") if ref is not None else None
    return [str(uid)] if uid else []


def object_rv(obj: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion`` (``""`` if absent). Opaque: compared for equality only."""
    return objects.resource_version(obj)


def cache_key(obj: Mapping[str, Any]) -> str | None:
    """The cache key (``namespace/name``, or ``name``); ``None`` for an object without a name."""
    return objects.key(obj) if objects.name(obj) else None


class Cache:
    """The informer's store: objects by key, plus incrementally maintained indexes.

    Read-only for everyone but its informer. Every method returns the shared cached objects themselves
    (no copies: that is what makes reads free), which callers must not mutate.
    """

    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.add_indexer(NAMESPACE_INDEX, namespace_index)
        self.add_indexer(OWNER_INDEX, owner_index)

    # --- reads ------------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        """The object at ``namespace/name`` (or ``name``), or ``None``."""
        return self._items.get(key)

    def get_by(self, namespace: str | None, name: str) -> Obj | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self, namespace: str | None = None) -> ObjList:
        """Every object, or those in ``namespace`` (through the namespace index)."""
        if namespace is None:
            return list(self._items.values())
        return self.by_index(NAMESPACE_INDEX, namespace)

    def keys(self) -> StrList:
        return list(self._items)

    def items(self) -> Mapping[str, Obj]:
        """Every object by key: a live read-only view, for diffing against a fresh list."""
        return self._items

    def by_index(self, index: str, value: str) -> ObjList:
        """The objects whose index function returned ``value`` (``KeyError`` for an unknown index)."""
        items = self._items
        return [items[key] for key in self._bucket(index, value)]

    def index_keys(self, index: str, value: str) -> StrList:
        """The keys of :meth:`by_index`."""
        return list(self._bucket(index, value))

    def index_values(self, index: str) -> StrList:
        """The values ``index`` currently has objects under."""
        return list(self._indices_of(index))

    @property
    def indexers(self) -> StrList:
        return list(self._indexers)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def _indices_of(self, index: str) -> dict[str, set[str]]:
        try:
            return self._indices[index]
        except KeyError:
            raise KeyError(f"no index named {index!r} (known: {', '.join(self._indexers)})") from None

    def _bucket(self, index: str, value: str) -> set[str]:
        return self._indices_of(index).get(value) or set()

    # --- indexes ----------------------------------------------------------------------------------

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Index objects by ``fn(obj)`` under ``name``; existing objects are indexed at once (O(n))."""
        if name in self._indexers:
            raise ValueError(f"an index named {name!r} already exists")
        self._indexers[name] = fn
        buckets: dict[str, set[str]] = {}
        self._indices[name] = buckets
        for key, obj in self._items.items():
            for value in self._values(name, fn, obj):
                buckets.setdefault(value, set()).add(key)

    @staticmethod
    def _values(name: str, fn: IndexFunc, obj: Obj) -> StrList:
        try:
            return list(fn(obj))
        except Exception:
            # One bad index function must not stop the informer; the object is simply not indexed.
            log.exception("index function %r failed on %s", name, cache_key(obj))
            return []

    # --- writes (the informer's) --------------------------------------------------------------------

    def put(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` at ``key``; returns what was there. Index buckets move only where values changed."""
        old = self._items.get(key)
        self._items[key] = obj
        for name, fn in self._indexers.items():
            buckets = self._indices[name]
            new_values = self._values(name, fn, obj)
            old_values = self._values(name, fn, old) if old is not None else []
            if new_values == old_values:
                continue
            for value in old_values:
                if value not in new_values:
                    self._discard(buckets, value, key)
            for value in new_values:
                if value not in old_values:
                    buckets.setdefault(value, set()).add(key)
        return old

    def remove(self, key: str) -> Obj | None:
        """Drop ``key``; returns what was there (``None``: nothing)."""
        old = self._items.pop(key, None)
        if old is None:
            return None
        for name, fn in self._indexers.items():
            buckets = self._indices[name]
            for value in self._values(name, fn, old):
                self._discard(buckets, value, key)
        return old

    @staticmethod
    def _discard(buckets: dict[str, set[str]], value: str, key: str) -> None:
        bucket = buckets.get(value)
        if bucket is not None:
            bucket.discard(key)
            if not bucket:
                del buckets[value]


# --------------------------------------------------------------------------------------------------
# Relist reconciliation
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the cache and a fresh list, as a handler will be told about it."""

    type: Literal["add", "update", "delete"]
    key: str
    old: Obj | None
    new: Obj | None


def diff(before: Mapping[str, Obj], after: Mapping[str, Obj]) -> list[Change]:
    """The changes that turn ``before`` into ``after``, each key at most once.

    Keys only in ``after`` are adds, keys only in ``before`` deletes, and keys in both are updates when
    their resourceVersions differ — equal resourceVersions mean the same object state, which the
    handlers have already seen, so it is not delivered again. (An object deleted and re-created under the
    same key while the informer was not watching is an update whose ``uid`` changed, as in client-go.)
    """
    changes: list[Change] = []
    for key, new in after.items():
        old = before.get(key)
        if old is None:
            changes.append(Change("add", key, None, new))
        elif object_rv(old) != object_rv(new):
            changes.append(Change("update", key, old, new))
    changes.extend(Change("delete", key, old, None) for key, old in before.items() if key not in after)
    return changes

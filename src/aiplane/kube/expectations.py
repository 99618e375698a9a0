"""Expectations: a controller's own writes, remembered until its informer cache shows them.

After a write the informer lags behind. A controller that decides on the lagging cache repeats
what it just did (admits the same capacity twice, re-taints a node it already released, "recovers"
pods it has just created). controller-runtime's answer is *expectations*; this is the one
implementation every aiplane controller uses, in two ways:

* **Read your writes** (:meth:`Expectations.view`): serve the object a write returned in place of
  the cached one until the cache shows a version that does not predate the write. The partitioning
  controllers decide on these views.
* **Wait for the cache** (:meth:`Expectations.pending`): writes are grouped by an *owner* key; while
  any of an owner's writes is not yet visible, the owner's controller does not decide (it only
  reports). Entries older than ``timeout`` are dropped, for a watch event that never comes. The
  ModelInfer controller gates its planner this way.

resourceVersions are opaque strings (kube-apiserver promises nothing about their order), so they are
only ever compared for equality: the versions known to predate the latest write are remembered, and
as soon as the cache shows any other version (or a delete event for the object arrives) the entry
is dropped and the cache is trusted again. Entries are checked lazily whenever a key is viewed, so
the map holds only writes the cache has not caught up with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import strip_managed_fields

__all__ = ["Expectations"]

Obj = dict[str, Any]

log = structlog.get_logger("aiplane.expectations")


@dataclass
class _Expected:
    stale: set[str]  # resourceVersions that predate our latest write ("" = the object was absent)
    obj: Obj | None  # what our latest write returned; None: deleted
    exact: bool  # every write since the cached version was conditional on the version it read
    owner: str | None  # the key of the object whose controller made the write, for pending()
    since: float  # monotonic time of the first write the cache has not shown
    uid: str = ""  # the incarnation our latest write left (created or updated; "" for a delete)


class Expectations:
    """Our writes per object key, served in place of cached objects until the informer shows them.

    ``clock`` is a monotonic clock (the injected :class:`~aiplane.kube.clock.Clock`'s ``monotonic``);
    ``timeout`` bounds how long :meth:`pending` waits for the cache (``None``: for ever).
    ``keep_objects``: remember what each write returned, for :meth:`view`; a controller that only
    waits (:meth:`pending`) turns it off and keeps versions alone, which matters when it creates
    thousands of pods at once.
    """

    def __init__(
        self,
        *,
        timeout: float | None = None,
        clock: Callable[[], float] | None = None,
        keep_objects: bool = True,
    ) -> None:
        self._items: dict[str, _Expected] = {}
        self._by_owner: dict[str, set[str]] = {}
        self._timeout = timeout
        self._clock = clock or _zero
        self._keep = keep_objects

    def __len__(self) -> int:
        return len(self._items)

    def keys(self, owner: str | None = None) -> list[str]:
        """Keys with an outstanding write (of ``owner`` only, when given)."""
        return list(self._items) if owner is None else sorted(self._by_owner.get(owner, ()))

    def _drop(self, key: str) -> None:
        expected = self._items.pop(key)
        if expected.owner is not None:
            keys = self._by_owner[expected.owner]
            keys.discard(key)
            if not keys:
                del self._by_owner[expected.owner]

    def view(self, key: str, cached: Obj | None) -> Obj | None:
        """What to decide on for ``key``: our latest write while the cache predates it, else the cache."""
        if not self._keep:
            raise RuntimeError("Expectations(keep_objects=False) cannot serve views of writes")
        expected = self._items.get(key)
        return cached if expected is None or self._caught_up(key, cached) else expected.obj

    def _caught_up(self, key: str, cached: Obj | None) -> bool:
        """Does the cache show ``key`` at or past our latest write? Drops the entry when it does."""
        expected = self._items[key]
        if (objects.resource_version(cached) if cached is not None else "") in expected.stale:
            return False
        self._drop(key)
        return True

    def exact(self, key: str) -> bool:
        """Is the view of ``key`` known to be the server's current object, as far as we wrote it?"""
        expected = self._items.get(key)
        return expected is None or expected.exact

    def wrote(
        self,
        key: str,
        before: Mapping[str, Any] | None,
        after: Obj | None,
        *,
        conditional: bool,
        owner: str | None = None,
    ) -> None:
        """Record a successful write of ``key`` that was based on ``before`` and returned ``after``.

        ``before`` is ``None`` for a create, ``after`` is ``None`` for a delete that removed the
        object at once. ``conditional``: the write carried ``before``'s resourceVersion (or, for a
        create, could only succeed on an absent object), so no foreign version can lie between the two.
        """
        expected = self._items.get(key)
        before_rv = objects.resource_version(before) if before is not None else ""
        after_rv = objects.resource_version(after) if after is not None else None
        if expected is None and after_rv == before_rv:
            return  # a no-op write: the server kept the version, there is nothing to wait for
        stale = set(expected.stale) if expected is not None else set()
        stale.add(before_rv)
        if after_rv is not None:
            stale.discard(after_rv)
        exact = conditional and (expected is None or expected.exact)
        since = expected.since if expected is not None else self._clock()
        owner = owner if owner is not None else (expected.owner if expected is not None else None)
        if owner is not None:
            self._by_owner.setdefault(owner, set()).add(key)
        kept = strip_managed_fields(after) if after and self._keep else None
        uid = objects.uid(after) if after is not None else ""
        self._items[key] = _Expected(stale, kept, exact, owner, since, uid)

    def deleted(self, key: str, obj: Mapping[str, Any]) -> None:
        """The informer saw ``obj`` deleted: forget what we expected of it (not of a newer incarnation).

        Someone else may delete what we just created before our cache ever shows it (kube's taint
        manager deletes by name); without this the creation would be waited for until the timeout."""
        expected = self._items.get(key)
        if expected is not None and (not expected.uid or expected.uid == objects.uid(obj)):
            self._drop(key)

    def forget(self, key: str) -> None:
        if key in self._items:
            self._drop(key)

    def forget_owner(self, owner: str) -> None:
        """The owner is gone: nothing it wrote needs waiting for."""
        for key in self.keys(owner):
            self._drop(key)

    def pending(self, owner: str, lookup: Callable[[str], Obj | None]) -> bool:
        """Does ``owner`` still have a write its cache does not show? (``lookup`` reads the cache.)

        Writes the cache shows are dropped on the way; so are writes older than the timeout, with an
        info log, so that a watch event that never comes delays decisions but never stops them.
        """
        now = self._clock()
        waiting = False
        for key in self.keys(owner):
            expected = self._items[key]
            if self._timeout is not None and now - expected.since > self._timeout:
                log.info("expectation timed out; deciding on the cache", owner=owner, key=key)
                self._drop(key)
                continue
            waiting = not self._caught_up(key, lookup(key)) or waiting
        return waiting


def _zero() -> float:
    return 0.0

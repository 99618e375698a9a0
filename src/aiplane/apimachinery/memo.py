"""Typed views built once per cached object, not once per reconcile.

A controller's observe step turns cached objects into frozen views. A controller that reads a whole
collection on every reconcile (the plan controller reads every Node and NodePartitioning) would
otherwise rebuild thousands of views per second of rollout. Informer caches replace an object on
every change and never mutate one, so an object's identity stands for its version: a view is
reused for as long as the cache hands out the very same object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["ViewMemo"]

V = TypeVar("V")


class ViewMemo(Generic[V]):
    """``build(obj)`` per object, remembered by object identity (see the module docstring).

    Keyed by ``id(obj)`` with the object itself kept alongside (so an id is never reused while
    remembered): a hit costs two dict operations and no reading of the object, which matters when a
    controller reads a 1,000-object collection several times per reconcile (reading each
    object's key was 5 % of the operator's CPU at 1,000 nodes).
    """

    def __init__(self, build: Callable[[dict[str, Any]], V]) -> None:
        self._build = build
        self._memo: dict[int, tuple[dict[str, Any], V]] = {}
        #: Views built so far: what a test counts.
        self.builds = 0

    def __len__(self) -> int:
        return len(self._memo)

    def all(self, collection: Iterable[dict[str, Any]]) -> list[V]:
        """Views of a whole collection, in its order; objects no longer in it are forgotten."""
        fresh: dict[int, tuple[dict[str, Any], V]] = {}
        views: list[V] = []
        memo = self._memo
        for obj in collection:
            hit = memo.get(id(obj))
            if hit is not None and hit[0] is obj:
                view = hit[1]
            else:
                view = self._build(obj)
                self.builds += 1
            fresh[id(obj)] = (obj, view)
            views.append(view)
        self._memo = fresh
        return views

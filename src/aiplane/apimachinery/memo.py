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

from aiplane.apimachinery import objects

__all__ = ["ViewMemo"]

V = TypeVar("V")


class ViewMemo(Generic[V]):
    """``build(obj)`` per object, remembered by object key and identity (see the module docstring)."""

    def __init__(self, build: Callable[[dict[str, Any]], V]) -> None:
        self._build = build
        self._memo: dict[str, tuple[dict[str, Any], V]] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def all(self, collection: Iterable[dict[str, Any]]) -> list[V]:
        """Views of a whole collection, in its order; objects no longer in it are forgotten."""
        fresh: dict[str, tuple[dict[str, Any], V]] = {}
        views: list[V] = []
        for obj in collection:
            key = objects.key(obj)
            hit = self._memo.get(key)
            view = hit[1] if hit is not None and hit[0] is obj else self._build(obj)
            fresh[key] = (obj, view)
            views.append(view)
        self._memo = fresh
        return views

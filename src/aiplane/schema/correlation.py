"""Old values correlated with new ones: what transition rules and ratcheting compare against.

An update's new value is walked together with the old one. Object properties and map values
correlate by name, list-map items by their keys; items of atomic lists and sets never do. A rule that
references ``oldSelf`` runs only where a node correlates, and (with ratcheting) an error is forgiven
when the nearest correlated node did not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiplane.apimachinery.values import deep_equal, scalar_key

__all__ = ["ABSENT", "Correlation"]

Schema = Mapping[str, Any]


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class Correlation:
    """A new value paired with its old value, for transition rules and ratcheting.

    Mirrors ``common.CorrelatedObject`` plus the "nearest correlatable parent" of kube's ratcheting
    options: an error at an uncorrelated node is forgiven iff its nearest correlated ancestor did not
    change.
    """

    __slots__ = ("_equal", "_index", "_parent", "old", "value")

    def __init__(self, value: Any, old: Any = ABSENT, parent: Correlation | None = None) -> None:
        self.value = value
        self.old = old
        self._parent = parent
        self._equal: bool | None = None
        #: A list-map's old items by key, built on the first lookup: one pass over the old list per
        #: validation, not one per new item (3,000 env vars made every write take seconds).
        self._index: dict[tuple[Any, ...], Any] | None = None

    @property
    def correlated(self) -> bool:
        return self.old is not ABSENT

    def unchanged(self) -> bool:
        """``shouldRatchetError``: the nearest correlated node equals its old value."""
        if self.correlated:
            if self._equal is None:
                self._equal = deep_equal(self.value, self.old)
            return self._equal
        return self._parent.unchanged() if self._parent is not None else False

    def _nearest(self) -> Correlation | None:
        return self if self.correlated else self._parent

    def field(self, name: str, value: Any) -> Correlation:
        """The correlation of an object property or map value."""
        if self.correlated and isinstance(self.old, dict) and name in self.old:
            return Correlation(value, self.old[name], self)
        return Correlation(value, ABSENT, self._nearest())

    def item(self, i: int, value: Any, schema: Schema) -> Correlation:
        """The correlation of a list item: only list-map items correlate, by their keys."""
        old_item: Any = ABSENT
        if self.correlated and isinstance(self.old, list) and schema.get("x-kubernetes-list-type") == "map":
            keys = list(schema.get("x-kubernetes-list-map-keys") or [])
            if self._index is None:
                self._index = map_list_index(keys, self.old)
            wanted = _map_key(keys, value)
            if wanted is not None:
                old_item = self._index.get(wanted, ABSENT)
        if old_item is ABSENT:
            return Correlation(value, ABSENT, self._nearest())
        return Correlation(value, old_item, self)


def _map_key(keys: list[str], item: Any) -> tuple[Any, ...] | None:
    if not isinstance(item, dict) or any(k not in item for k in keys):
        return None
    return tuple(scalar_key(item[k]) for k in keys)


def map_list_index(keys: list[str], items: list[Any]) -> dict[tuple[Any, ...], Any]:
    """A list-map's items by their key values (the first of duplicates, as a scan would find it)."""
    index: dict[tuple[Any, ...], Any] = {}
    for item in items:
        key = _map_key(keys, item)
        if key is not None:
            index.setdefault(key, item)
    return index

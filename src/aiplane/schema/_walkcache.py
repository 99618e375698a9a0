"""What validation remembers between writes so that it walks only what changed.

A status write of a plan with 1,000 ``nodeStatuses`` re-validated every entry to change one, and the
embedded cluster spent most of its CPU there. Both caches are keyed by schema *node* (its ``id``,
with the node kept so that the id cannot be reused while cached): a CRD's schema is built once per
generation and shared by every write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

Schema = Mapping[str, Any]

#: ``has_list_map`` by schema node.
_LIST_MAP_BELOW: dict[int, tuple[Schema, bool]] = {}


def has_list_map(s: Schema) -> bool:
    """Whether ``s`` or a schema under it is an ``x-kubernetes-list-type: map`` (cached per node)."""
    hit = _LIST_MAP_BELOW.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    children = [*(s.get("properties") or {}).values(), s.get("additionalProperties"), s.get("items")]
    found = s.get("x-kubernetes-list-type") == "map" or any(
        has_list_map(c) for c in children if isinstance(c, Mapping)
    )
    if len(_LIST_MAP_BELOW) > 100_000:  # schemas of deleted or updated CRDs
        _LIST_MAP_BELOW.clear()
    _LIST_MAP_BELOW[id(s)] = (s, found)
    return found


class ValidItems:
    """List items (objects) already validated against an item schema with no error found.

    Whether the OpenAPI pass finds an error in a value depends on the value and the schema only (the
    path changes the words, ratcheting only hides errors), so an item once found valid is valid
    wherever it appears again. Items are keyed by their canonical JSON (sorted keys), i.e. as JSON
    decodes them: every write reaches the server as JSON, even the in-process agents'. Small items
    only (a plan's node entry is ~250 bytes), a bounded number of them.
    """

    MAX_BYTES = 1024
    MAX_ENTRIES = 50_000

    def __init__(self) -> None:
        self._seen: dict[tuple[int, bytes], Schema] = {}
        self.hits = 0

    def key(self, s: Schema, item: Any) -> tuple[int, bytes] | None:
        if not isinstance(item, dict):
            return None
        try:
            raw = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not JSON (a non-string key, an integer past 64 bits): no shortcut
            return None
        return (id(s), raw) if len(raw) <= self.MAX_BYTES else None

    def known(self, s: Schema, key: tuple[int, bytes] | None) -> bool:
        if key is not None and self._seen.get(key) is s:
            self.hits += 1
            return True
        return False

    def add(self, s: Schema, key: tuple[int, bytes] | None) -> None:
        if key is None:
            return
        if len(self._seen) >= self.MAX_ENTRIES:
            self._seen.clear()
        self._seen[key] = s


VALID_ITEMS = ValidItems()

"""SMD's ``fieldpath`` package: path elements and the field sets managers own.

A *field set* is a tree of path elements — ``f:name`` (a field or map key), ``k:{"name":"x"}`` (a
list-map item), ``v:"x"`` (a set item), ``i:0`` (an atomic list index) — serialized as
``fieldsV1`` exactly the way SMD writes it, order included, because clients diff managedFields.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any, Final

from aiplane.apimachinery.values import go_json
from aiplane.sim.apiserver.smd.value import canon, cmp, value_compare, value_string

_KIND_ORDER: Final = {"f": 0, "k": 1, "v": 2, "i": 3}


class PathElement:
    """One step of a field path: ``f`` field/map key, ``k`` list-map key, ``v`` set value, ``i`` index."""

    __slots__ = ("_canon", "kind", "payload")

    def __init__(self, kind: str, payload: Any) -> None:
        self.kind = kind
        self.payload = payload
        if kind == "k":
            self._canon: Any = ("k", tuple((n, canon(v)) for n, v in payload))
        elif kind == "v":
            self._canon = ("v", canon(payload))
        else:
            self._canon = (kind, payload)

    @classmethod
    def field(cls, name: str) -> PathElement:
        return cls("f", name)

    @classmethod
    def key(cls, fields: list[tuple[str, Any]]) -> PathElement:
        return cls("k", tuple(sorted(fields, key=lambda f: f[0])))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PathElement) and self._canon == other._canon

    def __hash__(self) -> int:
        return hash(self._canon)

    def compare(self, other: PathElement) -> int:
        """``PathElement.Compare``."""
        if self.kind != other.kind:
            return cmp(_KIND_ORDER[self.kind], _KIND_ORDER[other.kind])
        if self.kind in ("f", "i"):
            return cmp(self.payload, other.payload)
        if self.kind == "v":
            return value_compare(self.payload, other.payload)
        mine, theirs = self.payload, other.payload
        for (na, va), (nb, vb) in zip(mine, theirs, strict=False):
            c = cmp(na, nb) or value_compare(va, vb)
            if c:
                return c
        return cmp(len(mine), len(theirs))

    def __lt__(self, other: PathElement) -> bool:
        return self.compare(other) < 0

    def __str__(self) -> str:
        """``PathElement.String()``: ``.name``, ``[name="x"]``, ``[="x"]``, ``[0]``."""
        if self.kind == "f":
            return "." + str(self.payload)
        if self.kind == "k":
            return "[" + ",".join(f"{n}={value_string(v)}" for n, v in self.payload) + "]"
        if self.kind == "v":
            return f"[={value_string(self.payload)}]"
        return f"[{self.payload}]"

    def __repr__(self) -> str:
        return f"PathElement({self.serialize()})"

    def serialize(self) -> str:
        """The ``fieldsV1`` key: ``f:name``, ``k:{"name":"x"}``, ``v:"x"``, ``i:0``."""
        if self.kind == "f":
            return "f:" + str(self.payload)
        if self.kind == "k":
            return "k:{" + ",".join(f"{go_json(n)}:{go_json(v)}" for n, v in self.payload) + "}"
        if self.kind == "v":
            return "v:" + go_json(self.payload)
        return f"i:{self.payload}"

    @classmethod
    def deserialize(cls, text: str) -> PathElement | None:
        """``DeserializePathElement``; ``None`` for unknown element types (SMD skips those)."""
        if len(text) < 2:
            raise ValueError("key must be 2 characters long:")
        if text[1] != ":":
            return None
        kind, rest = text[0], text[2:]
        if kind == "f":
            return cls.field(rest)
        if kind == "v":
            return cls("v", json.loads(rest))
        if kind == "k":
            decoded = json.loads(rest)
            if not isinstance(decoded, dict):
                raise ValueError(f"expected an object in {text!r}")
            return cls.key(list(decoded.items()))
        if kind == "i":
            return cls("i", int(rest))
        return None


Path = tuple[PathElement, ...]


def path_string(path: Path) -> str:
    """``fieldpath.Path.String()``."""
    return "".join(str(pe) for pe in path)


def _pe_cmp(a: PathElement, b: PathElement) -> int:
    return a.compare(b)


def _scalar_key(v: Any) -> tuple[Any, ...] | None:
    """``value.Compare``'s order of a scalar as a tuple (``None`` for lists and maps)."""
    if v is None:
        return (5,)
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, int | float):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    return None


def _sort_key(pe: PathElement) -> tuple[Any, ...] | None:
    """``PathElement.Compare`` as a tuple, when every value in ``pe`` is a scalar (``None`` otherwise)."""
    order = _KIND_ORDER[pe.kind]
    if pe.kind in ("f", "i"):
        return (order, pe.payload)
    if pe.kind == "v":
        value = _scalar_key(pe.payload)
        return None if value is None else (order, value)
    parts = []
    for name, v in pe.payload:
        value = _scalar_key(v)
        if value is None:
            return None
        parts.append((name, value))
    return (order, tuple(parts))


def _sorted_pes(pes: Any) -> list[PathElement]:
    """Path elements in ``PathElement.Compare`` order.

    Sorting by a key tuple (the usual case: field names, indices, list-map keys of scalars) is an
    order of magnitude faster than a Python comparator, which made managedFields of a list of 10,000
    env vars cost a second per write; values that are lists or maps fall back to the comparator.
    """
    keyed: list[tuple[tuple[Any, ...], PathElement]] = []
    for pe in pes:
        key = _sort_key(pe)
        if key is None:
            return sorted(pes, key=functools.cmp_to_key(_pe_cmp))
        keyed.append((key, pe))
    keyed.sort(key=lambda pair: pair[0])
    return [pe for _, pe in keyed]


class FieldSet:
    """``fieldpath.Set``: members (paths owned here) and children (sets under a path element)."""

    __slots__ = ("children", "members")

    def __init__(
        self, members: set[PathElement] | None = None, children: dict[PathElement, FieldSet] | None = None
    ) -> None:
        self.members: set[PathElement] = members if members is not None else set()
        self.children: dict[PathElement, FieldSet] = children if children is not None else {}

    @classmethod
    def of(cls, *paths: Path) -> FieldSet:
        out = cls()
        for p in paths:
            out.insert(p)
        return out

    def insert(self, path: Path) -> None:
        if not path:
            return  # nobody owns "the entire object"
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.members.add(path[-1])

    def has(self, path: Path) -> bool:
        if not path:
            return False
        node: FieldSet | None = self
        for pe in path[:-1]:
            assert node is not None
            node = node.children.get(pe)
            if node is None:
                return False
        assert node is not None
        return path[-1] in node.members

    def empty(self) -> bool:
        return not self.members and all(c.empty() for c in self.children.values())

    def with_prefix(self, pe: PathElement) -> FieldSet:
        return self.children.get(pe) or FieldSet()

    def copy(self) -> FieldSet:
        return FieldSet(set(self.members), {pe: c.copy() for pe, c in self.children.items()})

    def union(self, other: FieldSet) -> FieldSet:
        children = {pe: c.copy() for pe, c in self.children.items()}
        for pe, c in other.children.items():
            children[pe] = children[pe].union(c) if pe in children else c.copy()
        return FieldSet(self.members | other.members, children)

    def difference(self, other: FieldSet) -> FieldSet:
        """Members of ``other`` leave; a member of ``other`` does not remove children here."""
        return self._minus(other, recursive=False)

    def recursive_difference(self, other: FieldSet) -> FieldSet:
        """Like :meth:`difference`, but a member of ``other`` also removes everything below it."""
        return self._minus(other, recursive=True)

    def _minus(self, other: FieldSet, *, recursive: bool) -> FieldSet:
        children: dict[PathElement, FieldSet] = {}
        for pe, c in self.children.items():
            if recursive and pe in other.members:
                continue
            theirs = other.children.get(pe)
            if theirs is None:
                children[pe] = c.copy()
            else:
                d = c._minus(theirs, recursive=recursive)
                if not d.empty():
                    children[pe] = d
        return FieldSet(self.members - other.members, children)

    def intersection(self, other: FieldSet) -> FieldSet:
        children: dict[PathElement, FieldSet] = {}
        for pe, c in self.children.items():
            theirs = other.children.get(pe)
            if theirs is not None:
                i = c.intersection(theirs)
                if not i.empty():
                    children[pe] = i
        return FieldSet(self.members & other.members, children)

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """``Set.Iterate``: members in order, then each child's paths, recursively."""
        for pe in _sorted_pes(self.members):
            yield (*prefix, pe)
        for pe in _sorted_pes(self.children):
            yield from self.children[pe].paths((*prefix, pe))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSet):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FieldSet({json.dumps(self.to_json())})"

    def to_json(self) -> dict[str, Any]:
        """The ``fieldsV1`` object, in SMD's order (a path that is also a parent gets ``"."`` last)."""
        out: dict[str, Any] = {}
        for pe in _sorted_pes(self.members | set(self.children)):
            child = self.children.get(pe)
            if child is None or child.empty():
                out[pe.serialize()] = {}
                continue
            body = child.to_json()
            if pe in self.members:
                body["."] = {}
            out[pe.serialize()] = body
        return out

    @classmethod
    def from_json(cls, data: Any) -> FieldSet:
        """``Set.FromJSON`` (unknown path element types are skipped, as SMD does)."""
        if not isinstance(data, dict):
            raise ValueError("fieldsV1 must be an object")
        out = cls()
        for key, sub in data.items():
            if key == ".":
                continue
            pe = PathElement.deserialize(key)
            if pe is None:
                continue
            if not isinstance(sub, dict):
                raise ValueError(f"fieldsV1 entry {key!r} must be an object")
            if not sub or "." in sub:
                out.members.add(pe)
            grandchildren = {k: v for k, v in sub.items() if k != "."}
            if grandchildren:
                child = cls.from_json(grandchildren)
                # from_json keeps no empty child, so this is ``not child.empty()`` without walking
                # the child again at every level (decoding managedFields on every write).
                if child.members or child.children:
                    out.children[pe] = child
        return out

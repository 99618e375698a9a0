"""SMD's ``value`` package: the total order and the equality of JSON values that field sets rely on.

Python's ``==`` is not SMD's: ``True == 1`` in Python, while booleans are never numbers in Go; and
ordering must span kinds (numbers < strings < booleans < lists < maps < null) for sorted output.
"""

from __future__ import annotations

from typing import Any, Final

from aiplane.apimachinery.values import go_json
from aiplane.sim.apiserver import gofmt


class _Absent:
    """SMD's ``nil`` value: the field is not there at all (JSON ``null`` is a present value)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


def is_num(v: Any) -> bool:
    """A JSON number (Go never takes a boolean for one)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def _rank(v: Any) -> int:
    """``value.Compare``'s order of kinds: numbers < strings < booleans < lists < maps < null."""
    if v is None:
        return 5
    if isinstance(v, bool):
        return 2
    if is_num(v):
        return 0
    if isinstance(v, str):
        return 1
    if isinstance(v, list):
        return 3
    return 4


def cmp(a: Any, b: Any) -> int:
    """Go's three-way comparison of two ordered scalars: -1, 0 or 1."""
    return int(a > b) - int(a < b)


def value_compare(a: Any, b: Any) -> int:
    """``value.Compare``: a total order over JSON values."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return cmp(ra, rb)
    if ra == 3:
        return _compare_lists(a, b)
    if ra == 4:
        return _compare_maps(a, b)
    return cmp(a, b) if ra in {0, 1, 2} else 0


def _compare_lists(a: list[Any], b: list[Any]) -> int:
    for x, y in zip(a, b, strict=False):
        c = value_compare(x, y)
        if c:
            return c
    return cmp(len(a), len(b))


def _compare_maps(a: dict[str, Any], b: dict[str, Any]) -> int:
    """Sorted keys pairwise (key first, then its value); a map that runs out first is smaller."""
    ka, kb = sorted(a), sorted(b)
    for x, y in zip(ka, kb, strict=False):
        c = cmp(x, y) or value_compare(a[x], b[y])
        if c:
            return c
    return cmp(len(ka), len(kb))


def value_equal(a: Any, b: Any) -> bool:
    """``value.Equals``: numbers compare numerically (``1 == 1.0``), booleans are not numbers."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and len(a) == len(b)
            and all(k in b and value_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(value_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if _rank(a) != _rank(b):
        return False
    return bool(a == b)


def canon(v: Any) -> Any:
    """A hashable form of a scalar that makes equal what :func:`value_equal` makes equal."""
    if v is None:
        return ("z",)
    if isinstance(v, bool):
        return ("b", v)
    if is_num(v):
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            return ("n", int(v))
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    return ("j", go_json(v))


def value_string(v: Any) -> str:
    """``value.ToString`` (how SMD prints values in paths: ``[name="nginx"]``)."""
    return gofmt.render(v, gofmt.VALUE_STRING)

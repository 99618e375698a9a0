"""How Go prints a decoded JSON value, for error messages that must match kube's byte for byte.

kube words many errors with ``fmt`` verbs over ``interface{}`` values (``%v``, ``%#v``, ``%T``) or
with structured-merge-diff's ``value.ToString``. The four differ only in how they spell ``nil``,
strings, slices and maps; numbers and booleans print the same everywhere, so one walker renders
them all from a :class:`Style`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery.values import go_float, go_quote

__all__ = ["PERCENT_SHARP_V", "PERCENT_V", "VALUE_STRING", "Style", "kind", "render", "type_name"]


@dataclass(frozen=True)
class Style:
    """The spelling of the non-numeric parts of one Go printer."""

    null: str
    string: Callable[[str], str]
    seq: Callable[[list[str]], str]
    mapping: Callable[[list[tuple[str, str]]], str]


def render(v: Any, style: Style) -> str:
    """``v`` as the printer ``style`` spells it (map keys sorted, as Go's ``fmt`` sorts them)."""
    if v is None:
        return style.null
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return style.string(v)
    if isinstance(v, list):
        return style.seq([render(x, style) for x in v])
    if isinstance(v, dict):
        return style.mapping([(k, render(v[k], style)) for k in sorted(v)])
    return str(v)


#: structured-merge-diff's ``value.ToString`` (values in field paths: ``[name="nginx"]``).
VALUE_STRING: Final = Style(
    "null",
    go_quote,
    lambda items: "[" + ",".join(items) + "]",
    lambda pairs: "".join(f"{k}={v}" for k, v in pairs),
)

#: Go's ``%v`` (``map[a:1]``, ``[a b]``, ``<nil>``).
PERCENT_V: Final = Style(
    "<nil>",
    str,
    lambda items: "[" + " ".join(items) + "]",
    lambda pairs: "map[" + " ".join(f"{k}:{v}" for k, v in pairs) + "]",
)

#: Go's ``%#v``.
PERCENT_SHARP_V: Final = Style(
    "interface {}(nil)",
    go_quote,
    lambda items: "[]interface {}{" + ", ".join(items) + "}",
    lambda pairs: "map[string]interface {}{" + ", ".join(f"{go_quote(k)}:{v}" for k, v in pairs) + "}",
)


def kind(v: Any) -> str:
    """``reflect.TypeOf(v).Kind()`` of a decoded JSON value: ``nil``, ``map``, ``slice``, ``int64``…"""
    if v is None:
        return "nil"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "slice"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    return "string"


_TYPE_NAMES: Final = {"nil": "<nil>", "map": "map[string]interface {}", "slice": "[]interface {}"}


def type_name(v: Any) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    k = kind(v)
    return _TYPE_NAMES.get(k, k)

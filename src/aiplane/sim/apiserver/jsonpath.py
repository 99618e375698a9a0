"""client-go's JSONPath (``k8s.io/client-go/util/jsonpath``), the subset printer columns use.

CRD ``additionalPrinterColumns`` are evaluated with it, and a string cell is printed the way Go's
``fmt.Fprint`` prints the decoded JSON value (:func:`go_print`), so ``kubectl get`` shows what it shows
against kube-apiserver.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


class JSONPathError(ValueError):
    pass


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Recursive:
    pass


@dataclass(frozen=True)
class _Wildcard:
    pass


@dataclass(frozen=True)
class _Slice:
    start: int | None
    end: int | None
    step: int | None
    single: bool


@dataclass(frozen=True)
class _Union:
    keys: tuple[_Field | _Slice, ...]


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Filter:
    left: tuple[Any, ...]
    op: str  # ==, !=, <, >, <=, >=, exists
    right: tuple[Any, ...]


_FILTER_SPLIT = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.S)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")


class JSONPath:
    """One printer-column JSONPath (``.status.conditions[?(@.type=="Ready")].status``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        source = text.strip()
        if source.startswith("{") and source.endswith("}"):
            source = source[1:-1]
        self.nodes = _parse_path(source)

    def find(self, data: Any) -> list[Any]:
        """Every value the path selects (missing keys select nothing). Raises JSONPathError."""
        return _evaluate(self.nodes, [data], data)


def _parse_path(text: str) -> tuple[Any, ...]:
    nodes: list[Any] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or (ch in "$@" and not nodes):
            i += 1
        elif text.startswith("..", i):
            nodes.append(_Recursive())
            i += 2
            i = _parse_field(text, i, nodes)
        elif ch == ".":
            i = _parse_field(text, i + 1, nodes)
        elif ch == "[":
            i = _parse_bracket(text, i, nodes)
        elif ch in ("'", '"') and not nodes:
            end = text.find(ch, i + 1)
            if end < 0:
                raise JSONPathError(f"unterminated quoted string in {text!r}")
            nodes.append(_Literal(text[i + 1 : end]))
            i = end + 1
        elif not nodes and (_NUMBER.match(text[i:].strip()) or text[i:].strip() in ("true", "false")):
            literal = text[i:].strip()
            if literal in ("true", "false"):
                nodes.append(_Literal(literal == "true"))
            elif re.fullmatch(r"-?\d+", literal):
                nodes.append(_Literal(int(literal)))
            else:
                nodes.append(_Literal(float(literal)))
            i = n
        else:
            raise JSONPathError(f"unrecognized character in action: {ch!r} in {text!r}")
    return tuple(nodes)


def _parse_field(text: str, i: int, nodes: list[Any]) -> int:
    name: list[str] = []
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            name.append(text[i + 1])
            i += 2
            continue
        if ch.isspace() or ch in ".,[]$@{}":
            break
        name.append(ch)
        i += 1
    value = "".join(name)
    nodes.append(_Wildcard() if value == "*" else _Field(value))
    return i


def _bracket_end(text: str, i: int) -> int:
    """The index of the ``]`` closing the bracket opened at ``i`` (quotes may hold a ``]``)."""
    quote: str | None = None
    for j in range(i + 1, len(text)):
        ch = text[j]
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "]":
            return j
    raise JSONPathError(f"unclosed array expect ] in {text!r}")


def _bracket_key(part: str) -> _Field | _Slice:
    """One key of a bracket: a quoted field name, an index or a slice."""
    if len(part) >= 2 and part[0] == part[-1] and part[0] in ("'", '"'):
        return _Field(part[1:-1])
    pieces = part.split(":")
    if len(pieces) > 3:
        raise JSONPathError(f"invalid array index {part!r}")
    try:
        values = [int(p) if p.strip() else None for p in pieces]
    except ValueError as exc:
        raise JSONPathError(f"invalid array index {part!r}") from exc
    if len(values) == 1:
        return _Slice(values[0], None, None, True)
    return _Slice(values[0], values[1], values[2] if len(values) > 2 else None, False)


def _parse_bracket(text: str, i: int, nodes: list[Any]) -> int:
    if text.startswith("[?(", i):
        end = text.find(")]", i)
        if end < 0:
            raise JSONPathError(f"unclosed filter in {text!r}")
        nodes.append(_parse_filter(text[i + 3 : end]))
        return end + 2
    j = _bracket_end(text, i)
    inner = text[i + 1 : j].strip()
    if inner == "*":
        nodes.append(_Wildcard())
        return j + 1
    keys = [_bracket_key(raw.strip()) for raw in _split_union(inner)]
    nodes.append(keys[0] if len(keys) == 1 else _Union(tuple(keys)))
    return j + 1


def _split_union(text: str) -> list[str]:
    parts, current, quote = [], [], None
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
            current.append(ch)
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse_filter(text: str) -> _Filter:
    match = _FILTER_SPLIT.match(text)
    if match is None:
        return _Filter(_parse_path(text), "exists", ())
    op = match.group(2)
    if op not in ("==", "!=", "<", ">", "<=", ">="):
        raise JSONPathError(f"unrecognized filter operator {op}")
    return _Filter(_parse_path(match.group(1)), op, _parse_path(match.group(3)))


def _evaluate(nodes: tuple[Any, ...], current: list[Any], root: Any) -> list[Any]:
    for node in nodes:
        current = _step(node, current, root)
    return current


def _field(node: _Field, values: list[Any], root: Any) -> list[Any]:
    if node.name == "":
        return list(values)
    return [v[node.name] for v in values if isinstance(v, dict) and v.get(node.name) is not None]


def _wildcard(node: _Wildcard, values: list[Any], root: Any) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, dict):
            out.extend(v for _, v in sorted(value.items()))
        elif isinstance(value, list):
            out.extend(value)
    return out


def _recursive(node: _Recursive, values: list[Any], root: Any) -> list[Any]:
    return [found for value in values for found in _descendants(value)]


def _slices(node: _Slice, values: list[Any], root: Any) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not isinstance(value, list):
            raise JSONPathError(f"{go_print(value)} is not array or slice")
        out.extend(_slice(value, node))
    return out


def _union(node: _Union, values: list[Any], root: Any) -> list[Any]:
    return [found for key in node.keys for found in _step(key, values, root)]


def _filtered(node: _Filter, values: list[Any], root: Any) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not isinstance(value, list):
            raise JSONPathError(f"{go_print(value)} is not array or slice and cannot be filtered")
        out.extend(item for item in value if _filter_passes(node, item, root))
    return out


_STEPS: dict[type, Callable[[Any, list[Any], Any], list[Any]]] = {
    _Literal: lambda node, values, root: [node.value],
    _Field: _field,
    _Wildcard: _wildcard,
    _Recursive: _recursive,
    _Slice: _slices,
    _Union: _union,
    _Filter: _filtered,
}


def _step(node: Any, values: list[Any], root: Any) -> list[Any]:
    step = _STEPS.get(type(node))
    if step is None:
        raise JSONPathError(f"unexpected node {node!r}")
    return step(node, values, root)


def _descendants(value: Any) -> list[Any]:
    out = [value]
    if isinstance(value, dict):
        for _, sub in sorted(value.items()):
            out.extend(_descendants(sub))
    elif isinstance(value, list):
        for sub in value:
            out.extend(_descendants(sub))
    return out


def _slice(value: list[Any], node: _Slice) -> list[Any]:
    length = len(value)
    start = node.start if node.start is not None else 0
    if start < 0:
        start += length
    if node.single:
        end = start + 1
    else:
        end = node.end if node.end is not None else length
        if end < 0:
            end += length
    if end == start:
        return []
    if start >= length or start < 0:
        raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
    if end > length or end < 0:
        raise JSONPathError(f"array index out of bounds: index {end - 1}, length {length}")
    if start > end:
        raise JSONPathError(f"starting index {start} is greater than ending index {end}")
    step = node.step if node.step is not None else 1
    if step <= 0:
        raise JSONPathError("step must be > 0")
    return value[start:end:step]


def _filter_passes(node: _Filter, item: Any, root: Any) -> bool:
    lefts = _evaluate(node.left, [item], root)
    if node.op == "exists":
        return bool(lefts)
    if not lefts:
        return False
    if len(lefts) > 1:
        raise JSONPathError("can only compare one element at a time")
    rights = _evaluate(node.right, [item], root)
    if not rights:
        return False
    if len(rights) > 1:
        raise JSONPathError("can only compare one element at a time")
    return _compare(lefts[0], node.op, rights[0])


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "other"


def _compare(left: Any, op: str, right: Any) -> bool:
    """text/template's eq/ne/lt/le/gt/ge: same basic kind only (int and float do not mix)."""
    kind = _kind(left)
    if kind != _kind(right) or kind == "other":
        raise JSONPathError("incompatible types for comparison")
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if kind == "bool":
        raise JSONPathError("invalid type for comparison")
    results: dict[str, bool] = {
        "<": left < right,
        ">": left > right,
        "<=": left <= right,
        ">=": left >= right,
    }
    return results[op]


def _go_float(value: float) -> str:
    """Go's ``%v`` of a float64: the shortest digits, in exponent form below 1e-4 and from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple)
    point = len(digits) + exponent  # value = 0.<digits> * 10**point
    prefix = "-" if sign else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return prefix + digits + "0" * (point - len(digits))
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def go_print(value: Any) -> str:
    """How client-go's JSONPath prints a value (Go's ``fmt.Fprint`` of the decoded JSON)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)

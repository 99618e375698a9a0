"""JSON value helpers that reproduce how Go sees a decoded object.

kube-apiserver decodes request bodies into ``map[string]interface{}`` with ``int64`` for integral
numbers and ``float64`` for everything else, compares values with ``reflect.DeepEqual`` and prints
them with ``fmt`` and ``encoding/json``. Python blurs several of those distinctions (``True == 1``,
``1 == 1.0``, ``repr`` of floats), so every place where the difference shows up in a decision or in
an error message goes through this module.
"""

from __future__ import annotations

import copy
import json
import math
from decimal import Decimal
from typing import Any

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: swag.IsFloat64AJSONInteger only accepts floats within +-(2^53 - 1).
_MAX_JSON_FLOAT = float(2**53 - 1)


def is_int(value: Any) -> bool:
    """An ``int64`` after Go's JSON decoding (``bool`` is not a number; huge ints become floats)."""
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX


def is_number(value: Any) -> bool:
    """A ``float64`` after Go's JSON decoding."""
    if isinstance(value, float):
        return True
    return isinstance(value, int) and not isinstance(value, bool) and not is_int(value)


def json_type(value: Any) -> str:
    """The OpenAPI type name kube-openapi infers for a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_int(value):
        return "integer"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_json_integer(value: float) -> bool:
    """``swag.IsFloat64AJSONInteger``: a float that kube accepts where an integer is required."""
    if math.isnan(value) or math.isinf(value) or abs(value) > _MAX_JSON_FLOAT:
        return False
    if value.is_integer():
        return True
    if value <= 0:
        # Go converts negative floats through uint64 here, which never matches.
        return False
    whole = float(math.trunc(value))
    if whole == 0:
        return False
    return abs(value - whole) / (value + whole) < 1e-9


def deep_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` on decoded JSON: types matter (``1 != 1.0``, ``True != 1``)."""
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        return all(k in b and deep_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if json_type(a) != json_type(b):
        return False
    return bool(a == b)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of a decoded JSON value, ~4x faster than ``copy.deepcopy``.

    Scalars are immutable and shared; only plain dicts and lists are rebuilt (no memo: decoded JSON
    has no shared or cyclic nodes). Anything else goes to ``copy.deepcopy``, so the copy is always as
    deep as ``deepcopy``'s. The embedded server copies a stored object on every write, whole.
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


def scalar_key(value: Any) -> tuple[str, Any]:
    """A hashable key that distinguishes values the way Go map keys of ``interface{}`` do."""
    kind = json_type(value)
    if kind in ("object", "array"):
        return (kind, go_json(value))
    if kind == "number":
        return (kind, float(value))
    return (kind, value)


# --- Go formatting -------------------------------------------------------------------------------


def go_quote(text: str) -> str:
    """``strconv.Quote`` (what ``%q`` prints)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits of ``|value|`` and ``point`` such that value = 0.DIGITS x 10^point."""
    _, raw, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(str(d) for d in raw)
    significant = text.lstrip("0")
    if not significant:
        return "0", 1
    point = len(text) + int(exponent) - (len(text) - len(significant))
    return significant.rstrip("0"), point


def _exp_notation(digits: str, point: int, negative: bool) -> str:
    exp = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exp < 0 else "+"
    return f"{'-' if negative else ''}{mantissa}e{sign}{abs(exp):02d}"


def _fixed_notation(digits: str, point: int, negative: bool) -> str:
    if point <= 0:
        text = "0." + "0" * (-point) + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if negative else "") + text


def go_float(value: float) -> str:
    """``fmt.Sprintf("%v", float64)``: shortest digits, exponent form below 1e-4 and from 1e6 on."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, point = _shortest_digits(value)
    exp = point - 1
    if exp < -4 or exp >= 6:
        return _exp_notation(digits, point, value < 0)
    return _fixed_notation(digits, point, value < 0)


def _json_float(value: float) -> str:
    """``encoding/json`` float formatting (``e`` notation below 1e-6 and from 1e21 on)."""
    if value == 0:
        return "0" if math.copysign(1.0, value) > 0 else "-0"
    digits, point = _shortest_digits(value)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        text = _exp_notation(digits, point, value < 0)
        mantissa, _, exp = text.partition("e")
        sign, number = exp[0], exp[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{number if sign == '-' else number.zfill(2)}"
    return _fixed_notation(digits, point, value < 0)


def go_json(value: Any) -> str:
    """``encoding/json.Marshal`` of a decoded value: sorted keys, compact, HTML-safe escapes."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if is_int(value) else _json_float(float(value))
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(raw, escaped)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if isinstance(value, dict):
        items = ",".join(f"{go_json(str(k))}:{go_json(value[k])}" for k in sorted(value, key=str))
        return "{" + items + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    return go_json(str(value))


class GoLiteral(str):
    """A bad value kube prints verbatim, not quoted (e.g. ``0x0``, Go's ``%#v`` of an unsigned zero)."""

    __slots__ = ()


def go_value(value: Any) -> str:
    """How ``field.Error.ErrorBody`` prints a bad value (Kubernetes >= 1.34: JSON for composites)."""
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_int(value):
        return str(value)
    if isinstance(value, int | float):
        return go_float(float(value))
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


def friendly(value: Any, limit: int = 80) -> str:
    """A short JSON rendering of a value for human-facing messages."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


# --- field paths ---------------------------------------------------------------------------------


def child(path: str, name: str) -> str:
    """``field.Path.Child``."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """``field.Path.Index``."""
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    """``field.Path.Key`` (map keys are printed bare inside brackets)."""
    return f"{path}[{k}]"

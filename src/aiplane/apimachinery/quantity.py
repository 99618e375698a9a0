"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``), exactly.

Controllers compare and add resource amounts (``requests``, ``limits``, node ``allocatable``, GPU
partition capacities) read from plain JSON dicts. Doing that with floats or ad-hoc suffix tables
gets ``"1Gi" != "1024Mi"`` or ``0.1 + 0.2 != 0.3`` wrong, and writing a quantity back in a
different spelling than kube would makes every reconcile look like a change. :class:`Quantity`
therefore mirrors the Go type:

* **Parsing** follows ``parseQuantityString``/``ParseQuantity`` byte for byte, including what kube
  accepts that its own documented grammar does not (``"."``, ``"+"``, a bare suffix such as ``"m"``
  or ``"Ki"`` all parse as zero; ``"1.G"`` is one giga) and what it rejects (``" 1"``, ``"1i"``,
  ``"0.1mi"``). Values are rounded *away from zero* to the nano unit (``"0.9n"`` is ``1n``), and a
  binary-SI quantity is capped, silently, at 2^63-1 (``"9Ei"``) exactly as kube does.
* **Values are exact**: a quantity is an integer mantissa and a base-10 exponent (never below -9,
  because of that rounding), normalised so that equality and hashing are by value:
  ``Quantity("1Gi") == Quantity("1024Mi")`` and ``Quantity("1") == Quantity("1000m")``.
* **Serialising**: :meth:`Quantity.canonical` is ``CanonicalizeBytes`` (keep the suffix family,
  pick the largest exact suffix, ``"1.5Gi"`` -> ``"1536Mi"``, ``"0.1"`` -> ``"100m"``);
  ``str(q)`` is Go's ``String()``/``MarshalJSON``, which additionally echoes the parsed text when
  kube's fast path judged it already canonical (so ``str(Quantity("1E3")) == "1E3"`` while
  ``Quantity("1E3").canonical() == "1e3"``). Use ``str()`` to predict what the API server stores
  for a built-in type, ``canonical()`` for a stable spelling.
* **Arithmetic** (``+``, ``-``, ``*`` by an int, unary ``-``) follows ``Add``/``Sub``/``Mul``/``Neg``,
  including the format rule: the result keeps the left operand's format unless the left operand is
  zero, in which case it takes the right one's.

Deviations, each on inputs no real object carries: an exponent outside int32 is rejected (Go
truncates it to int32 and so silently changes the value); a binary-SI amount of 1024Ei or more
renders with an ``Ei`` suffix (Go loses the magnitude, emitting no suffix); mantissas are limited
to :data:`MAX_DIGITS` significant digits and arithmetic that would materialise more raises
:class:`OverflowError` rather than allocating without bound (kube's ``inf.Dec`` path has no bound).
``value()`` and ``milli_value()`` return exact Python ints where Go's int64 would overflow.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Final, TypeAlias

__all__ = [
    "MAX_DIGITS",
    "Quantity",
    "QuantityFormat",
    "QuantityLike",
    "add_resource_lists",
    "format_resource_list",
    "parse_resource_list",
    "resource_lists_equal",
    "subtract_resource_lists",
]


class QuantityFormat(enum.StrEnum):
    """The three suffix families of a quantity; a parsed quantity remembers its own."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi (12 * 2^20)
    DECIMAL_SI = "DecimalSI"  # 12M  (12 * 10^6)


MAX_DIGITS: Final = 4000
"""Largest number of significant decimal digits a quantity may carry (Python's own int/str
conversion limit is 4300). Far beyond any real amount; it only stops hostile inputs or runaway
arithmetic from allocating without bound."""

_SPLIT_RE: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_ERR_FORMAT: Final = f"quantities must match the regular expression '{_SPLIT_RE}'"
_ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
_ERR_SUFFIX: Final = "unable to parse quantity's suffix"

_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")

# suffix -> (base, exponent, format), as quantitySuffixer.interpret resolves it.
_DEC_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BIN_SUFFIXES: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_EXP_TO_SUFFIX: Final[dict[int, str]] = {v: k for k, v in _DEC_SUFFIXES.items()}
_BIN_POWER_TO_SUFFIX: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_NANO: Final = -9
_MAX_INT64: Final = (1 << 63) - 1
_MAX_INT64_FACTORS: Final = 18  # resource/math.go maxInt64Factors
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_LOG10_2: Final = math.log10(2)


def _pow10(n: int) -> int:
    """``10**n`` for ``n >= 0``, typed as an int (mypy types ``int ** int`` as Any)."""
    return int(10**n)


def _digit_count(n: int) -> int:
    """Decimal digits of ``|n|`` (1 for 0) without ``str()``, which refuses huge ints."""
    n = abs(n)
    if n < 10:
        return 1
    estimate = int(n.bit_length() * _LOG10_2)  # digits - 1 or digits
    return estimate + 1 if n >= 10**estimate else estimate


def _check_digits(m: int) -> None:
    if m and m.bit_length() > MAX_DIGITS * 3.33 and _digit_count(m) > MAX_DIGITS:
        raise OverflowError(f"quantity needs more than {MAX_DIGITS} significant digits")


def _check_shift(shift: int) -> None:
    if shift > MAX_DIGITS:
        raise OverflowError(f"quantity arithmetic would need more than {MAX_DIGITS} digits")


def _normalise(m: int, e: int) -> tuple[int, int]:
    """Strip factors of ten from the mantissa into the exponent; zero is always ``(0, 0)``."""
    if m == 0:
        return 0, 0
    while m % 10 == 0:
        m //= 10
        e += 1
    return m, e


def _ceil_div_away(n: int, d: int) -> int:
    """``n / d`` rounded away from zero (``inf.RoundUp`` on a magnitude, sign restored)."""
    q, r = divmod(abs(n), d)
    if r:
        q += 1
    return q if n >= 0 else -q


def _round_to_nano(num: int, den: int) -> tuple[int, int]:
    """Exact ``num/den`` (``den > 0``) rounded away from zero to a multiple of 1e-9, as (m, e)."""
    nanos = _ceil_div_away(num * 10**9, den)
    return _normalise(nanos, _NANO)


class _Scan:
    """What ``parseQuantityString`` extracts from the text."""

    __slots__ = ("denom", "num", "positive", "suffix", "value")

    def __init__(self, positive: bool, value: str, num: str, denom: str, suffix: str) -> None:
        self.positive = positive
        self.value = value
        self.num = num
        self.denom = denom
        self.suffix = suffix


def _scan(text: str) -> _Scan:
    """Port of ``parseQuantityString``: split sign, integer digits, fraction digits and suffix."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    # strip leading zeros; a string of only zeros (after the sign) is zero with no suffix
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return _Scan(positive, "0", "0", "", "")
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return _Scan(positive, text, text[start:], "", "")
    num = text[start:pos] or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        dstart = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[dstart:pos]
        if pos >= end:
            return _Scan(positive, text, num, denom, "")
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(_ERR_FORMAT)
    return _Scan(positive, value, num, denom, text[suffix_start:])


def _go_parse_int64(s: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: optional sign, ASCII digits only, int64 range."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not all(c in _DIGITS for c in body):
        return None
    v = int(s)
    if not -(1 << 63) <= v <= _MAX_INT64:
        return None
    return v


def _interpret_suffix(suffix: str) -> tuple[int, int, QuantityFormat]:
    """``quantitySuffixer.interpret``: (base, exponent, format) or ValueError."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exp = _go_parse_int64(suffix[1:])
        if exp is None:
            raise ValueError(_ERR_SUFFIX)
        if not _INT32_MIN <= exp <= _INT32_MAX:
            # Go truncates to int32 here, silently changing the value; refuse instead.
            raise ValueError(f"{_ERR_SUFFIX}: exponent {exp} is outside int32")
        return 10, exp, QuantityFormat.DECIMAL_EXPONENT
    raise ValueError(_ERR_SUFFIX)


def _parse(text: str) -> tuple[int, int, QuantityFormat, str | None]:
    """``ParseQuantity``: (mantissa, exponent, format, text to echo from ``String()`` or None)."""
    if not text:
        raise ValueError(_ERR_FORMAT)
    if text == "0":
        return 0, 0, QuantityFormat.DECIMAL_SI, "0"
    sc = _scan(text)
    base, exponent, fmt = _interpret_suffix(sc.suffix)
    if len(sc.num) + len(sc.denom) > MAX_DIGITS:
        raise ValueError(f"quantity has more than {MAX_DIGITS} digits")
    echo = _echo(text, sc, exponent, fmt)
    digits = int(sc.num + sc.denom)
    if not sc.positive:
        digits = -digits
    if base == 10:
        m, e = _decimal_to_nano(digits, exponent - len(sc.denom))
        return m, e, fmt, echo
    m, e = _binary_to_nano(digits, exponent, len(sc.denom))
    if m != 0 and e < 0 and abs(m) < 10**-e:
        # 0 < |value| < 1 cannot be shown in binary units: kube switches to DecimalSI.
        fmt = QuantityFormat.DECIMAL_SI
    return m, e, fmt, echo


def _echo(text: str, sc: _Scan, exponent: int, fmt: QuantityFormat) -> str | None:
    """Would Go take its int64 fast path? That decides whether String() echoes the input (the text, or
    ``None``) and whether a digitless number ("+", ".") is an error (the slow path's inf.Dec needs a digit).
    """
    shifted = sc.num + sc.denom
    if fmt is QuantityFormat.BINARY_SI:
        precision = 15 - len(sc.num) - exponent * 3 // 10 - 1 if not sc.denom else -1
        scale = 0
    else:
        precision = _MAX_INT64_FACTORS - len(shifted)
        scale = exponent - len(sc.denom)
    if not (precision >= 0 and scale >= _NANO):
        if not any(c in _DIGITS for c in sc.value):
            raise ValueError(_ERR_NUMERIC)
        return None
    digits = int(shifted)
    if fmt is QuantityFormat.BINARY_SI:
        return text if exponent % 10 == 0 and digits & 0x07 != 0 else None
    return text if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0" else None


def _decimal_to_nano(digits: int, e: int) -> tuple[int, int]:
    """``digits * 10^e`` as a normalised (mantissa, exponent), rounded away from zero to nano."""
    return _normalise(digits, e) if e >= _NANO else _round_decimal_to_nano(digits, e)


def _binary_to_nano(digits: int, exponent: int, fraction_digits: int) -> tuple[int, int]:
    """``digits / 10^fraction_digits * 2^exponent``, rounded to nano and capped as kube caps it."""
    m, e = _round_to_nano(digits * (1 << exponent), 10**fraction_digits)
    if (abs(m) * 10**e if e >= 0 else Fraction(abs(m), 10**-e)) > _MAX_INT64:
        # kube caps a binary-SI amount at 2^63-1 ("8Ei" parses as 9223372036854775807).
        m, e = _normalise(_MAX_INT64 if m > 0 else -_MAX_INT64, 0)
    return m, e


def _round_decimal_to_nano(digits: int, e: int) -> tuple[int, int]:
    """``digits * 10^e`` with ``e < -9``, rounded away from zero to nano, without a huge power."""
    if digits == 0:
        return 0, 0
    shift = _NANO - e  # > 0 digits to drop
    if shift >= _digit_count(digits) + 1:
        # |value| < 1e-9: the smallest non-zero amount, away from zero.
        return (1 if digits > 0 else -1), _NANO
    return _normalise(_ceil_div_away(digits, 10**shift), _NANO)


def _from_decimal(d: Decimal) -> tuple[int, int]:
    if not d.is_finite():
        raise ValueError(f"quantity must be finite, not {d}")
    sign, digit_tuple, exp = d.as_tuple()
    assert isinstance(exp, int)
    if len(digit_tuple) > MAX_DIGITS:
        raise ValueError(f"quantity has more than {MAX_DIGITS} digits")
    if not _INT32_MIN <= exp <= _INT32_MAX:
        raise ValueError(f"quantity exponent {exp} is outside int32")
    m = int("".join(map(str, digit_tuple)) or "0")
    if sign:
        m = -m
    return _decimal_to_nano(m, exp)


class Quantity:
    """An exact Kubernetes quantity. Immutable and hashable; equality and ordering are by value.

    Build one from a quantity string (``Quantity("1.5Gi")``), an int (``Quantity(2)``), a float
    (``Quantity(0.5)``: its shortest decimal spelling, so ``0.1`` means one tenth) or a
    :class:`~decimal.Decimal`. Numbers get the DecimalSI format, as ``NewQuantity`` gives them.
    Invalid strings raise :class:`ValueError` with kube's message and the offending text.
    """

    __slots__ = ("_e", "_fmt", "_m", "_text")

    _m: int
    _e: int
    _fmt: QuantityFormat
    _text: str | None

    def __init__(self, value: Quantity | str | int | float | Decimal = 0) -> None:
        text: str | None = None
        if isinstance(value, Quantity):
            m, e, fmt, text = value._m, value._e, value._fmt, value._text
        elif isinstance(value, str):
            try:
                m, e, fmt, text = _parse(value)
            except ValueError as exc:
                raise ValueError(f"invalid quantity {value!r}: {exc}") from None
        elif isinstance(value, bool):
            raise TypeError("a quantity cannot be built from a bool")
        elif isinstance(value, int):
            _check_digits(value)
            m, e = _normalise(value, 0)
            fmt = QuantityFormat.DECIMAL_SI
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"invalid quantity {value!r}: must be finite")
            m, e = _from_decimal(Decimal(repr(value)))
            fmt = QuantityFormat.DECIMAL_SI
        elif isinstance(value, Decimal):
            m, e = _from_decimal(value)
            fmt = QuantityFormat.DECIMAL_SI
        else:
            raise TypeError(f"cannot build a quantity from {type(value).__name__}")
        self._m = m
        self._e = e
        self._fmt = fmt
        self._text = text

    @classmethod
    def _make(cls, m: int, e: int, fmt: QuantityFormat) -> Quantity:
        _check_digits(m)
        q = cls.__new__(cls)
        q._m, q._e = _normalise(m, e)
        q._fmt = fmt
        q._text = None
        return q

    @classmethod
    def from_milli(cls, milli: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """``NewMilliQuantity``: ``milli / 1000`` in ``fmt`` (e.g. CPU millicores)."""
        return cls._make(milli, -3, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """``NewQuantity``: an integer amount in the given format (``BinarySI`` for bytes)."""
        return cls._make(value, 0, fmt)

    @classmethod
    def from_decimal(cls, value: Decimal | int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """``NewDecimalQuantity``: an exact decimal in the given format. Amounts finer than a
        nano unit are rounded away from zero, as parsing rounds them."""
        m, e = _from_decimal(Decimal(value))
        return cls._make(m, e, fmt)

    # -- accessors ----------------------------------------------------------------------------

    @property
    def format(self) -> QuantityFormat:
        """The suffix family this quantity serialises with."""
        return self._fmt

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._m > 0) - (self._m < 0)

    def is_zero(self) -> bool:
        return self._m == 0

    def as_fraction(self) -> Fraction:
        """The exact value as a :class:`~fractions.Fraction`."""
        self._check_materialise()
        if self._e >= 0:
            return Fraction(self._m * 10**self._e)
        return Fraction(self._m, 10**-self._e)

    def as_decimal(self) -> Decimal:
        """The exact value as a :class:`~decimal.Decimal` (built from digits, never rounded by a
        context)."""
        sign = 1 if self._m < 0 else 0
        digits = tuple(int(c) for c in str(abs(self._m)))
        return Decimal((sign, digits, self._e))

    def __float__(self) -> float:
        """Approximate value (``AsApproximateFloat64``); never use it for decisions."""
        return float(self.as_decimal())

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue``: ``value / 10^scale`` rounded away from zero to an integer."""
        e = self._e - scale
        if e >= 0:
            _check_shift(e + _digit_count(self._m))
            return self._m * _pow10(e)
        if -e > _digit_count(self._m) + 1:
            return self.sign()  # 0 < |value / 10^scale| < 1 rounds away from zero
        return _ceil_div_away(self._m, 10**-e)

    def value(self) -> int:
        """``Value()``: the amount rounded up, away from zero, to an integer (``"1500m"`` -> 2,
        ``"-1.5"`` -> -2). Exact, where Go's int64 would overflow."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """``MilliValue()``: ``ceil(q * 1000)`` away from zero, e.g. CPU in millicores."""
        return self.scaled_value(-3)

    def _check_materialise(self) -> None:
        if self._e > 0:
            _check_shift(self._e + _digit_count(self._m))

    # -- serialisation ------------------------------------------------------------------------

    def canonical(self) -> str:
        """``CanonicalizeBytes``: the kube canonical spelling.

        DecimalSI/DecimalExponent: the exponent is moved down to a multiple of three and spelled
        with the suffix (``n u m "" k M G T P E``; beyond ``E`` kube falls back to ``e21``...) or
        as ``eN``. BinarySI: integral amounts of at least 1024 in magnitude use the largest exact
        power of 1024 (``1536Mi``); smaller or fractional ones are written as DecimalSI, since a
        binary suffix could not show them exactly.
        """
        m, e = self._m, self._e
        if m == 0:
            return "0"
        fmt = self._fmt
        if fmt is QuantityFormat.BINARY_SI:
            if e >= 0 and e + _digit_count(m) <= MAX_DIGITS and abs(m) * 10**e >= 1024:
                n = abs(m) * 10**e
                power = 0
                while n >= 1024 and n % 1024 == 0 and power < len(_BIN_POWER_TO_SUFFIX) - 1:
                    n //= 1024
                    power += 1
                return f"{'-' if m < 0 else ''}{n}{_BIN_POWER_TO_SUFFIX[power]}"
            fmt = QuantityFormat.DECIMAL_SI
        rem = e % 3  # Python's floor modulo: move the exponent *down* to a multiple of 3
        mant = m * 10**rem
        e3 = e - rem
        if fmt is QuantityFormat.DECIMAL_SI and e3 in _DEC_EXP_TO_SUFFIX:
            return f"{mant}{_DEC_EXP_TO_SUFFIX[e3]}"
        return f"{mant}e{e3}" if e3 else str(mant)

    def __str__(self) -> str:
        """Go's ``String()``: the parsed text when kube's fast path kept it, else canonical."""
        return self._text if self._text is not None else self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def to_json(self) -> str:
        """What ``MarshalJSON`` writes for this quantity (same as ``str()``)."""
        return str(self)

    # -- comparison ---------------------------------------------------------------------------

    def _cmp(self, other: Quantity) -> int:
        s1, s2 = self.sign(), other.sign()
        if s1 != s2:
            return -1 if s1 < s2 else 1
        if s1 == 0:
            return 0
        (m1, e1), (m2, e2) = (self._m, self._e), (other._m, other._e)
        mag1 = _digit_count(m1) + e1
        mag2 = _digit_count(m2) + e2
        if mag1 != mag2:
            return s1 if mag1 > mag2 else -s1
        # Same order of magnitude: the exponents differ by less than the digit counts.
        e = min(e1, e2)
        a, b = m1 * _pow10(e1 - e), m2 * _pow10(e2 - e)
        return (a > b) - (a < b)

    def cmp(self, other: Quantity) -> int:
        """Go's ``Cmp``: -1, 0 or 1."""
        return self._cmp(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._m == other._m and self._e == other._e

    def __hash__(self) -> int:
        return hash((self._m, self._e))

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._cmp(other) < 0

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._cmp(other) <= 0

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._cmp(other) > 0

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._cmp(other) >= 0

    def __bool__(self) -> bool:
        return self._m != 0

    # -- arithmetic ---------------------------------------------------------------------------

    def _aligned(self, other: Quantity) -> tuple[int, int, int]:
        e = min(self._e, other._e)
        _check_shift(max(self._e, other._e) - e)
        return self._m * 10 ** (self._e - e), other._m * 10 ** (other._e - e), e

    def _result_format(self, other: Quantity) -> QuantityFormat:
        # Add/Sub: a zero receiver adopts the other operand's format.
        return other._fmt if self._m == 0 else self._fmt

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        a, b, e = self._aligned(other)
        return Quantity._make(a + b, e, self._result_format(other))

    def __radd__(self, other: object) -> Quantity:
        # Only so that sum() (which starts from int 0) works; 0 + q keeps q's format.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self._make(self._m, self._e, self._fmt)
        return NotImplemented

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        a, b, e = self._aligned(other)
        return Quantity._make(a - b, e, self._result_format(other))

    def __mul__(self, factor: int) -> Quantity:
        """``Mul``: multiply by an integer (replica counts, GPUs per node, ...)."""
        if not isinstance(factor, int) or isinstance(factor, bool):
            return NotImplemented
        return Quantity._make(self._m * factor, self._e, self._fmt)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._m, self._e, self._fmt)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return self if self._m >= 0 else -self


QuantityLike: TypeAlias = Quantity | str | int | float | Decimal
"""What :func:`parse_resource_list` and the resource-list helpers accept for one amount."""


def _as_quantity(key: str, value: object) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, str | int | float | Decimal) and not isinstance(value, bool):
        try:
            return Quantity(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    raise ValueError(f"{key}: a quantity must be a string or a number, not {type(value).__name__}")


def parse_resource_list(resources: Mapping[str, QuantityLike] | None) -> dict[str, Quantity]:
    """A ``ResourceList`` (``{"cpu": "500m", "memory": "1Gi", "amd.com/gpu": 1}``) as quantities.

    ``None`` (an absent field) is the empty list. A bad amount raises :class:`ValueError` naming
    the resource.
    """
    if resources is None:
        return {}
    return {str(k): _as_quantity(str(k), v) for k, v in resources.items()}


def resource_lists_equal(a: Mapping[str, QuantityLike] | None, b: Mapping[str, QuantityLike] | None) -> bool:
    """``quota.Equals``: same resource names, and equal amounts by value per name.

    A resource present with amount zero is *not* equal to an absent one, as in kube.
    """
    qa, qb = parse_resource_list(a), parse_resource_list(b)
    if qa.keys() != qb.keys():
        return False
    return all(qa[k] == qb[k] for k in qa)


def add_resource_lists(*lists: Mapping[str, QuantityLike] | None) -> dict[str, Quantity]:
    """``quota.Add`` over any number of lists: the per-resource sum over the union of names."""
    result: dict[str, Quantity] = {}
    for rl in lists:
        for k, q in parse_resource_list(rl).items():
            result[k] = result[k] + q if k in result else q
    return result


def subtract_resource_lists(
    a: Mapping[str, QuantityLike] | None, b: Mapping[str, QuantityLike] | None
) -> dict[str, Quantity]:
    """``quota.Subtract``: ``a - b`` per resource; names only in ``b`` come out negated.

    A negative amount in the result is how a caller learns that ``b`` does not fit in ``a``.
    """
    qa, qb = parse_resource_list(a), parse_resource_list(b)
    result = {k: (q - qb[k] if k in qb else q) for k, q in qa.items()}
    for k, q in qb.items():
        if k not in result:
            result[k] = -q
    return result


def format_resource_list(
    resources: Mapping[str, Quantity] | Iterable[tuple[str, Quantity]],
) -> dict[str, str]:
    """Quantities back to the JSON strings an object carries (kube's ``String()`` spelling)."""
    items = resources.items() if isinstance(resources, Mapping) else resources
    return {k: str(q) for k, q in items}

"""Quantities behave as ``k8s.io/apimachinery/pkg/api/resource`` does.

The tables are kube's own (``quantity_test.go``: TestQuantityParse, TestQuantityString,
TestQuantityParseEmit, the invalid list), so a difference from the Go type shows up as a failing
row rather than as a controller that disagrees with the API server.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.apimachinery.quantity import (
    Quantity,
    QuantityFormat,
    add_resource_lists,
    format_resource_list,
    parse_resource_list,
    resource_lists_equal,
    subtract_resource_lists,
)

DSI = QuantityFormat.DECIMAL_SI
BSI = QuantityFormat.BINARY_SI
DEX = QuantityFormat.DECIMAL_EXPONENT
MAX_INT64 = (1 << 63) - 1

# (input, exact value, format) — TestQuantityParse.
PARSE_TABLE: list[tuple[str, Fraction, QuantityFormat]] = [
    ("0", Fraction(0), DSI),
    ("0n", Fraction(0), DSI),
    ("0u", Fraction(0), DSI),
    ("0m", Fraction(0), DSI),
    ("0Ki", Fraction(0), BSI),
    ("0k", Fraction(0), DSI),
    ("0Mi", Fraction(0), BSI),
    ("0M", Fraction(0), DSI),
    ("0Gi", Fraction(0), BSI),
    ("0G", Fraction(0), DSI),
    ("0Ti", Fraction(0), BSI),
    ("0T", Fraction(0), DSI),
    ("1", Fraction(1), DSI),
    ("1Ki", Fraction(1024), BSI),
    ("8Ki", Fraction(8 * 1024), BSI),
    ("7Mi", Fraction(7 * 1024**2), BSI),
    ("6Gi", Fraction(6 * 1024**3), BSI),
    ("5Ti", Fraction(5 * 1024**4), BSI),
    ("4Pi", Fraction(4 * 1024**5), BSI),
    ("3Ei", Fraction(3 * 1024**6), BSI),
    ("10Ti", Fraction(10 * 1024**4), BSI),
    ("100Ti", Fraction(100 * 1024**4), BSI),
    ("5n", Fraction(5, 10**9), DSI),
    ("4u", Fraction(4, 10**6), DSI),
    ("3m", Fraction(3, 1000), DSI),
    ("9", Fraction(9), DSI),
    ("8k", Fraction(8000), DSI),
    ("50k", Fraction(50000), DSI),
    ("7M", Fraction(7 * 10**6), DSI),
    ("6G", Fraction(6 * 10**9), DSI),
    ("5T", Fraction(5 * 10**12), DSI),
    ("40T", Fraction(4 * 10**13), DSI),
    ("300T", Fraction(3 * 10**14), DSI),
    ("2P", Fraction(2 * 10**15), DSI),
    ("1E", Fraction(10**18), DSI),
    ("1E-3", Fraction(1, 1000), DEX),
    ("1e3", Fraction(1000), DEX),
    ("1E6", Fraction(10**6), DEX),
    ("1e9", Fraction(10**9), DEX),
    ("1E12", Fraction(10**12), DEX),
    ("1e15", Fraction(10**15), DEX),
    ("1E18", Fraction(10**18), DEX),
    ("1e14", Fraction(10**14), DEX),
    ("1e13", Fraction(10**13), DEX),
    ("100.035k", Fraction(100035), DSI),
    ("0.001", Fraction(1, 1000), DSI),
    ("0.0005k", Fraction(1, 2), DSI),
    ("0.005", Fraction(5, 1000), DSI),
    ("0.05", Fraction(5, 100), DSI),
    ("0.5", Fraction(1, 2), DSI),
    ("0.00050k", Fraction(1, 2), DSI),
    ("0.00500", Fraction(5, 1000), DSI),
    ("0.05000", Fraction(5, 100), DSI),
    ("0.50000", Fraction(1, 2), DSI),
    ("0.5e0", Fraction(1, 2), DEX),
    ("0.5e-1", Fraction(5, 100), DEX),
    ("0.5e-2", Fraction(5, 1000), DEX),
    ("10.035M", Fraction(10035 * 1000), DSI),
    ("1.2e3", Fraction(1200), DEX),
    ("1.3E+6", Fraction(1300000), DEX),
    ("1.40e9", Fraction(14 * 10**8), DEX),
    ("1.53E12", Fraction(153 * 10**10), DEX),
    ("1.6e15", Fraction(16 * 10**14), DEX),
    ("1.7E18", Fraction(17 * 10**17), DEX),
    ("9.01", Fraction(901, 100), DSI),
    ("8.1k", Fraction(8100), DSI),
    ("7.123456M", Fraction(7123456), DSI),
    ("6.987654321G", Fraction(6987654321), DSI),
    ("5.444T", Fraction(5444 * 10**9), DSI),
    ("40.1T", Fraction(401 * 10**11), DSI),
    ("300.2T", Fraction(3002 * 10**11), DSI),
    ("2.5P", Fraction(25 * 10**14), DSI),
    ("1.01E", Fraction(101 * 10**16), DSI),
    # Things that saturate/round: away from zero to the nano unit; binary capped at 2^63-1.
    ("3.001n", Fraction(4, 10**9), DSI),
    ("1.1E-9", Fraction(2, 10**9), DEX),
    ("0.0000000001", Fraction(1, 10**9), DSI),
    ("0.0000000005", Fraction(1, 10**9), DSI),
    ("0.00000000050", Fraction(1, 10**9), DSI),
    ("0.5e-9", Fraction(1, 10**9), DEX),
    ("0.9n", Fraction(1, 10**9), DSI),
    ("0.00000012345", Fraction(124, 10**9), DSI),
    ("0.00000012354", Fraction(124, 10**9), DSI),
    ("9Ei", Fraction(MAX_INT64), BSI),
    ("9223372036854775807Ki", Fraction(MAX_INT64), BSI),
    ("12E", Fraction(12 * 10**18), DSI),
    # Fractional binary amounts.
    ("100.035Ki", Fraction(10243584, 100), BSI),
    ("0.5Mi", Fraction(512 * 1024), BSI),
    ("0.05Gi", Fraction(536870912, 10), BSI),
    ("0.025Ti", Fraction(274877906944, 10), BSI),
    # "Things written by trolls".
    ("0.000000000001Ki", Fraction(2, 10**9), DSI),  # rounds up, and leaves binary for DecimalSI
    (".001", Fraction(1, 1000), DSI),
    (".0001k", Fraction(1, 10), DSI),
    ("1.", Fraction(1), DSI),
    ("1.G", Fraction(10**9), DSI),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_TABLE)
def test_parse_table(text: str, value: Fraction, fmt: QuantityFormat) -> None:
    for prefix in ("", "+"):
        q = Quantity(prefix + text)
        assert q.as_fraction() == value, prefix + text
        assert q.format is fmt
    neg = Quantity("-" + text)
    assert neg.as_fraction() == -value
    assert neg.format is fmt


@pytest.mark.parametrize(
    "text",
    [
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "",
        "1KiB",
        "1e",
    ],
)
def test_invalid_strings_raise_naming_the_string(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity") as err:
        Quantity(text)
    assert repr(text) in str(err.value)


def test_format_error_carries_kubes_regular_expression() -> None:
    with pytest.raises(ValueError, match=r"quantities must match the regular expression '\^\(\[\+-\]\?"):
        Quantity("1.1.M")
    with pytest.raises(ValueError, match="unable to parse quantity's suffix"):
        Quantity("0.1mi")


def test_kube_leniencies_are_kept() -> None:
    """kube's scanner accepts more than its documented grammar; the API server stores these."""
    for zero in (".", "-.", "+", "-", "m", "Ki", "k", "00", "-0"):
        assert Quantity(zero).is_zero(), zero
    # ...but a digit-less number on the slow (inf.Dec) path is an error.
    for bad in ("Pi", "+Ei", ".e-10"):
        with pytest.raises(ValueError, match="unable to parse numeric part"):
            Quantity(bad)


# (value, format, canonical, alternate spelling with the same canonical) — TestQuantityString.
STRING_TABLE: list[tuple[str, QuantityFormat, str, str]] = [
    (str(1024**3), BSI, "1Gi", "1024Mi"),
    (str(300 * 1024**2), BSI, "300Mi", "307200Ki"),
    (str(6 * 1024), BSI, "6Ki", ""),
    (str(1001 * 1024**3), BSI, "1001Gi", "1025024Mi"),
    (str(1024**4), BSI, "1Ti", "1024Gi"),
    ("5", BSI, "5", "5000m"),
    ("0.5", BSI, "500m", "0.5"),
    ("1e9", DSI, "1G", "1000M"),
    ("1000e6", DSI, "1G", "0.001T"),
    ("1000000e3", DSI, "1G", ""),
    ("1000000000", DSI, "1G", ""),
    ("1e-3", DSI, "1m", "1000u"),
    ("80e-3", DSI, "80m", ""),
    ("1080e-3", DSI, "1080m", "1.08"),
    ("108e-2", DSI, "1080m", "1080000000n"),
    ("10800e-4", DSI, "1080m", ""),
    ("300e6", DSI, "300M", ""),
    ("1e12", DSI, "1T", ""),
    ("1e18", DSI, "1E", ""),
    ("1e21", DSI, "1e21", "1000E"),  # beyond E, DecimalSI falls back to exponent notation
    ("5e21", DSI, "5e21", "5000E"),
    ("1e24", DSI, "1e24", "1000000E"),
    ("1234567e6", DSI, "1234567M", ""),
    ("1234567e-3", BSI, "1234567m", ""),
    ("3e3", DSI, "3k", ""),
    ("1025", BSI, "1025", ""),
    ("0", DSI, "0", ""),
    ("0", BSI, "0", ""),
    ("1e9", DEX, "1e9", ".001e12"),
    ("1e-3", DEX, "1e-3", "0.001e0"),
    ("1e-9", DEX, "1e-9", "1000e-12"),
    ("80e-3", DEX, "80e-3", ""),
    ("300e6", DEX, "300e6", ""),
    ("1e12", DEX, "1e12", ""),
    ("1e3", DEX, "1e3", ""),
    ("3e3", DEX, "3e3", ""),
    ("0", DEX, "0", "00"),
    ("1e-9", DSI, "1n", ""),
    ("80e-9", DSI, "80n", ""),
    ("1080e-9", DSI, "1080n", ""),
    ("108e-8", DSI, "1080n", ""),
    ("10800e-10", DSI, "1080n", ""),
    ("1e-6", DSI, "1u", ""),
    ("80e-6", DSI, "80u", ""),
    ("1080e-6", DSI, "1080u", ""),
]


@pytest.mark.parametrize(("value", "fmt", "canonical", "alternate"), STRING_TABLE)
def test_canonical_table(value: str, fmt: QuantityFormat, canonical: str, alternate: str) -> None:
    q = Quantity.from_decimal(Decimal(value), fmt)
    assert q.canonical() == canonical
    assert str(q) == canonical
    assert Quantity(canonical) == q
    assert str(Quantity(canonical)) == canonical
    if alternate:
        assert Quantity(alternate).canonical() == canonical
    if not q.is_zero():
        assert (-q).canonical() == "-" + canonical


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        # The brief's examples.
        ("1.5Gi", "1536Mi"),
        ("1000m", "1"),
        ("0.1", "100m"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("1001m", "1001m"),
        ("1.5", "1500m"),
        ("100k", "100k"),
        ("2Ei", "2Ei"),
        ("+1", "1"),
        (".5", "500m"),
        ("1.5e0", "1500e-3"),
        ("0.5Ki", "512"),
        ("100.035Ki", "102435840m"),
    ],
)
def test_parse_emit(text: str, canonical: str) -> None:
    """TestQuantityParseEmit, and the same negated."""
    assert Quantity(text).canonical() == canonical
    assert Quantity("-" + text.lstrip("+")).canonical() == "-" + canonical


def test_str_echoes_the_input_where_kubes_fast_path_does() -> None:
    """``String()``/``MarshalJSON`` reuse the parsed text when kube's int64 fast path judged it
    canonical-looking; the API server therefore stores these spellings verbatim."""
    assert str(Quantity("1E3")) == "1E3"
    assert str(Quantity("+1")) == "+1"
    assert str(Quantity("1.500")) == "1.500"
    assert Quantity("1.500").canonical() == "1500m"
    assert str(Quantity("0009Ki")) == "0009Ki"
    # not echoed: trailing "000", a leading zero digit, a scale that is not a multiple of 3
    assert str(Quantity("1000m")) == "1"
    assert str(Quantity("0.5")) == "500m"
    assert str(Quantity("1.08")) == "1080m"
    assert str(Quantity("1024Ki")) == "1Mi"  # a multiple of 8 in front of Ki is recomputed
    # arithmetic forgets the text
    assert str(Quantity("1E3") + Quantity("0")) == "1e3"
    assert repr(Quantity("1E3")) == "Quantity('1E3')"


def test_equality_and_ordering_are_by_value() -> None:
    assert Quantity("1Gi") == Quantity("1024Mi")
    assert Quantity("1") == Quantity("1000m")
    assert Quantity("1") == Quantity(1) == Quantity(1.0) == Quantity(Decimal("1.000"))
    assert hash(Quantity("1Gi")) == hash(Quantity("1073741824"))
    assert Quantity("100m") > Quantity("50m")
    assert Quantity("10000T") > Quantity("100Gi")
    assert Quantity("-1") < Quantity("0") < Quantity("1n")
    assert Quantity("1e2000000000") > Quantity("1e1999999999") > Quantity("1E")
    assert Quantity("999m") < Quantity("1") <= Quantity("1000m")
    assert Quantity("1Gi") != "1Gi"
    assert sorted([Quantity("1Gi"), Quantity("1k"), Quantity("1m")]) == [
        Quantity("1m"),
        Quantity("1k"),
        Quantity("1Gi"),
    ]
    assert Quantity("1Gi").cmp(Quantity("1G")) == 1


def test_numbers() -> None:
    assert Quantity(0.1).canonical() == "100m"  # the float's shortest spelling, not its binary value
    assert Quantity(0.1) + Quantity(0.2) == Quantity("0.3")
    assert Quantity(2).format is DSI
    assert Quantity(1e-12) == Quantity("1n")
    with pytest.raises(ValueError, match="finite"):
        Quantity(float("nan"))
    with pytest.raises(TypeError):
        Quantity(True)
    with pytest.raises(TypeError):
        Quantity([1])  # type: ignore[arg-type]


def test_value_and_milli_value_round_away_from_zero() -> None:
    assert Quantity("1500m").value() == 2
    assert Quantity("-1.5").value() == -2
    assert Quantity("1Gi").value() == 1073741824
    assert Quantity("1n").value() == 1
    assert Quantity("0").value() == 0
    assert Quantity("1.5").milli_value() == 1500
    assert Quantity("0.1m").milli_value() == 1
    assert Quantity("1u").milli_value() == 1
    assert Quantity("-1u").milli_value() == -1
    assert Quantity("1").scaled_value(-9) == 10**9
    assert Quantity("1k").scaled_value(3) == 1
    assert Quantity("20E").value() == 20 * 10**18  # exact where Go's int64 would overflow


def test_as_decimal_is_exact() -> None:
    assert Quantity("1.5Gi").as_decimal() == Decimal(1610612736)
    assert Quantity("123456789.123456789").as_decimal() == Decimal("123456789.123456789")
    assert Quantity("-1n").as_decimal() == Decimal("-1E-9")
    assert float(Quantity("1.5")) == 1.5


def test_binary_cap_and_binary_formatting() -> None:
    assert Quantity("8Ei").value() == MAX_INT64  # kube caps binary amounts, silently
    assert Quantity("8E").value() == 8 * 10**18  # decimal ones are not capped
    assert (Quantity("4Ei") + Quantity("4Ei")).canonical() == "8Ei"  # arithmetic is not capped
    assert (Quantity("1Ki") * 2**70).canonical() == "1048576Ei"  # Go would drop the magnitude here
    assert Quantity("-1.5Gi").canonical() == "-1536Mi"
    assert Quantity("1023.5Ki").format is BSI
    assert Quantity("0.0001Ki").format is DSI  # 0 < |x| < 1 leaves binary at parse time


def test_arithmetic_and_format_rules() -> None:
    """Add/Sub keep the left format unless the left operand is zero (TestAdd, TestSub)."""
    assert (Quantity("10") + Quantity("1Ki")).format is DSI
    assert (Quantity("1Ki") + Quantity("10")).format is BSI
    assert (Quantity("0") + Quantity("1Gi")).canonical() == "1Gi"
    assert (Quantity("1Gi") + Quantity("0")).canonical() == "1Gi"
    assert (Quantity("100m") + Quantity("0")).canonical() == "100m"
    assert (Quantity("0") - Quantity("1Gi")).canonical() == "-1Gi"
    assert (Quantity("1Gi") - Quantity("512Mi")).canonical() == "512Mi"
    assert (Quantity("1Gi") + Quantity("500M")).canonical() == "1573741824"
    assert Quantity("100m") * 3 == Quantity("300m")
    assert 3 * Quantity("1Gi") == Quantity("3Gi")
    assert (Quantity("1Gi") * 0).is_zero()
    assert -Quantity("1Ki") == Quantity("-1Ki")
    assert abs(Quantity("-2")) == Quantity("2")
    assert sum([Quantity("1Gi"), Quantity("1Gi")]) == Quantity("2Gi")
    assert sum([Quantity("1Gi"), Quantity("1Gi")]).canonical() == "2Gi"  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        _ = Quantity("1") * 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = Quantity("1") + 1  # type: ignore[operator]


def test_huge_exponents_stay_cheap_and_bounded() -> None:
    big = Quantity("1e2000000000")
    assert big.canonical() == "100e1999999998"
    assert Quantity("1e-2000000000") == Quantity("1n")
    with pytest.raises(OverflowError):
        big.value()
    with pytest.raises(OverflowError):
        _ = big + Quantity("1")
    with pytest.raises(ValueError, match="outside int32"):
        Quantity("1e99999999999")  # Go would truncate the exponent to int32


def test_resource_lists() -> None:
    a = parse_resource_list({"cpu": "500m", "memory": "1Gi", "amd.com/gpu": 1})
    assert a == {"cpu": Quantity("0.5"), "memory": Quantity("1024Mi"), "amd.com/gpu": Quantity("1")}
    assert parse_resource_list(None) == {}
    with pytest.raises(ValueError, match=r"^memory: invalid quantity '1GB'"):
        parse_resource_list({"memory": "1GB"})
    with pytest.raises(ValueError, match="memory"):
        parse_resource_list({"memory": None})  # type: ignore[dict-item]

    assert resource_lists_equal({"cpu": "1", "memory": "1Gi"}, {"memory": "1024Mi", "cpu": "1000m"})
    assert not resource_lists_equal({"cpu": "1"}, {"cpu": "2"})
    assert not resource_lists_equal({"cpu": "1"}, {"cpu": "1", "memory": "0"})  # zero is not absent
    assert resource_lists_equal(None, {})

    total = add_resource_lists({"cpu": "1", "memory": "1Gi"}, {"cpu": "500m", "amd.com/gpu": "2"}, None)
    assert format_resource_list(total) == {"cpu": "1500m", "memory": "1Gi", "amd.com/gpu": "2"}

    free = subtract_resource_lists({"cpu": "4", "memory": "8Gi"}, {"cpu": "4500m", "amd.com/gpu": "1"})
    assert format_resource_list(free) == {"cpu": "-500m", "memory": "8Gi", "amd.com/gpu": "-1"}


# -- properties -----------------------------------------------------------------------------

_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.from_regex(r"[0-9]{1,12}", fullmatch=True))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,10}", fullmatch=True)))
    if whole.strip("0") == "" and frac.strip(".0") == "":
        whole = draw(st.sampled_from(["0", "1", "7"]))
    suffix = draw(
        st.one_of(
            st.sampled_from(_SUFFIXES),
            st.builds(
                lambda e, s: f"{e}{s}", st.sampled_from(["e", "E", "e+", "e-", "E-"]), st.integers(0, 40)
            ),
        )
    )
    return f"{sign}{whole}{frac}{suffix}"


quantities = quantity_strings().map(Quantity)


@given(quantities)
def test_canonical_preserves_the_value(q: Quantity) -> None:
    c = q.canonical()
    assert Quantity(c) == q
    assert Quantity(str(q)) == q


@given(quantities)
def test_canonical_is_idempotent(q: Quantity) -> None:
    """Re-canonicalising the canonical spelling changes nothing. Kube's one exception: a BinarySI
    integer of at least 1024 that is not a multiple of 1024 is spelled as a plain number, which
    re-parses as DecimalSI and may then shorten once (``"1.953125Ki"`` -> ``"2000"`` -> ``"2k"``);
    after that one step it is a fixpoint too."""
    c = q.canonical()
    again = Quantity(c).canonical()
    if q.format is not BSI:
        assert again == c
    assert Quantity(again).canonical() == again


def test_binary_canonical_idempotence_exception() -> None:
    q = Quantity("1.953125Ki")
    assert q.canonical() == "2000"
    assert Quantity("2000").canonical() == "2k"


@given(quantities, quantities)
def test_addition_commutes(a: Quantity, b: Quantity) -> None:
    assert a + b == b + a
    assert (a + b) - b == a
    assert a - b == -(b - a)


@given(quantities, quantities, quantities)
def test_addition_associates(a: Quantity, b: Quantity, c: Quantity) -> None:
    assert (a + b) + c == a + (b + c)


@given(quantities, st.integers(-1000, 1000))
def test_multiplication_is_repeated_addition(q: Quantity, k: int) -> None:
    assert (q * k).as_fraction() == q.as_fraction() * k


@given(quantities, quantities)
def test_ordering_agrees_with_exact_values(a: Quantity, b: Quantity) -> None:
    fa, fb = a.as_fraction(), b.as_fraction()
    assert (a < b) == (fa < fb)
    assert (a == b) == (fa == fb)
    assert (hash(a) == hash(b)) or a != b


def _ceil_away(x: Fraction) -> int:
    magnitude = -(-abs(x) // 1)
    return int(magnitude if x >= 0 else -magnitude)


@given(quantities)
def test_value_is_the_ceiling_away_from_zero(q: Quantity) -> None:
    f = q.as_fraction()
    assert q.value() == _ceil_away(f)
    assert q.milli_value() == _ceil_away(f * 1000)
    assert q.scaled_value(3) == _ceil_away(f / 1000)

"""String formats kube-apiserver checks in CRD schemas (kube-openapi ``strfmt`` registry).

apiextensions strips every ``format`` outside :data:`SUPPORTED` before validating
(``StripUnsupportedFormatsPostProcess``), so ``int32``/``int64``/``double`` are documentation only:
kube never range-checks them. The checkers reproduce go-openapi/govalidator closely enough for the
formats CRDs use; exotic corner cases of Go's parsers (``net/mail``, ``url.ParseRequestURI``) are
approximated.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Callable
from typing import Final

#: Formats kube keeps (normalized: dashes removed, as go-openapi's registry does).
SUPPORTED: Final = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    }
)


def normalize(fmt: str) -> str:
    return fmt.replace("-", "")


def effective_format(fmt: object) -> str:
    """The format kube validates against: ``""`` for unsupported ones."""
    if not isinstance(fmt, str) or not fmt:
        return ""
    return fmt if normalize(fmt) in SUPPORTED else ""


_UUID = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID3 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID4 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
_UUID5 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
# HostnamePattern with \p{S}\p{L} approximated by "any non-ASCII character".
_HN = r"[a-zA-Z0-9\u0080-\U0010ffff]"
_HOSTNAME = re.compile(
    rf"^({_HN}((-?{_HN}{{0,62}})?)|({_HN}(([a-zA-Z0-9\-\u0080-\U0010ffff]{{0,61}}{_HN})?)(\.)){{1,}}"
    rf"({_HN})(-?{_HN}){{1,62}})$"
)
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_OCTET = r"(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
_RGB = re.compile(rf"^rgb\(\s*{_OCTET}\s*,\s*{_OCTET}\s*,\s*{_OCTET}\s*\)$")
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
_CREDIT = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)"
    r"[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|"
    r"(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$"
)
_MAC = re.compile(
    r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}|"
    r"[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2}|"
    r"[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){3}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){9})$"
)
_EMAIL = re.compile(
    r"^(?:[^<>@]*<)?[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-\u0080-\U0010ffff]+@"
    r"(?:[A-Za-z0-9\-\u0080-\U0010ffff]+(?:\.[A-Za-z0-9\-\u0080-\U0010ffff]+)*|\[[^\]]*\])>?$"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_GO_DURATION = re.compile(r"^[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)$")
_UNIT = (
    r"(?:ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|sec|minutes?|min|"
    r"hours?|hr|days?|weeks?|wk)"
)
_STRFMT_DURATION = re.compile(rf"^(?:\s*\d+\s*{_UNIT}\s*)+$", re.IGNORECASE)


def _is_date(text: str) -> bool:
    match = _DATE.match(text)
    if not match:
        return False
    try:
        dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    """go-openapi ``IsDateTime``."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = _TIME.match(parts[1])
    if not match:
        return False
    return match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


def _is_uri(text: str) -> bool:
    """``url.ParseRequestURI`` succeeds (absolute URI or absolute path)."""
    if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return False
    if text.startswith("/"):
        return True
    match = _SCHEME.match(text)
    if not match:
        return False
    rest = text[match.end() :]
    if rest.startswith("//"):
        authority = rest[2:].split("/", 1)[0].split("?", 1)[0]
        host = authority.rsplit("@", 1)[-1]
        return not any(c in host for c in ' <>"{}|\\^`')
    return True


def _is_ip(text: str, marker: str) -> bool:
    if "%" in text or marker not in text:
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_cidr(text: str) -> bool:
    if "/" not in text or "%" in text:
        return False
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _is_isbn10(text: str) -> bool:
    s = re.sub(r"[\s-]", "", text)
    if not re.fullmatch(r"[0-9]{9}X|[0-9]{10}", s):
        return False
    total = sum((i + 1) * (10 if c == "X" else int(c)) for i, c in enumerate(s))
    return total % 11 == 0


def _is_isbn13(text: str) -> bool:
    s = re.sub(r"[\s-]", "", text)
    if not re.fullmatch(r"[0-9]{13}", s):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(s[:12]))
    return (10 - total % 10) % 10 == int(s[12])


def _is_credit_card(text: str) -> bool:
    digits = re.sub(r"[^0-9]", "", text)
    if not _CREDIT.match(digits):
        return False
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_hostname(text: str) -> bool:
    return (
        bool(_HOSTNAME.match(text))
        and len(text.encode()) <= 255
        and all(len(p.encode()) <= 63 for p in text.split("."))
    )


_CHECKERS: Final[dict[str, Callable[[str], bool]]] = {
    "bsonobjectid": lambda s: bool(re.fullmatch(r"[0-9a-fA-F]{24}", s)),
    "uri": _is_uri,
    "email": lambda s: bool(_EMAIL.match(s)),
    "hostname": _is_hostname,
    "ipv4": lambda s: _is_ip(s, "."),
    "ipv6": lambda s: _is_ip(s, ":"),
    "cidr": _is_cidr,
    "mac": lambda s: bool(_MAC.match(s)),
    "uuid": lambda s: bool(_UUID.match(s)),
    "uuid3": lambda s: bool(_UUID3.match(s)),
    "uuid4": lambda s: bool(_UUID4.match(s)),
    "uuid5": lambda s: bool(_UUID5.match(s)),
    "isbn": lambda s: _is_isbn10(s) or _is_isbn13(s),
    "isbn10": _is_isbn10,
    "isbn13": _is_isbn13,
    "creditcard": _is_credit_card,
    "ssn": lambda s: len(s) == 11 and bool(_SSN.match(s)),
    "hexcolor": lambda s: bool(_HEXCOLOR.match(s)),
    "rgbcolor": lambda s: bool(_RGB.match(s)),
    "byte": lambda s: bool(_BASE64.match(s)),
    "password": lambda s: True,
    "date": _is_date,
    "duration": lambda s: bool(_GO_DURATION.match(s) or _STRFMT_DURATION.match(s)),
    "datetime": _is_datetime,
}


def check(fmt: str, value: str) -> bool:
    """Whether ``value`` is valid for the (supported) format ``fmt``."""
    checker = _CHECKERS.get(normalize(fmt))
    return True if checker is None else checker(value)

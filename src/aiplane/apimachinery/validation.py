"""Label keys, label values and DNS-1123 names, validated with kube's exact error texts.

Ports ``k8s.io/apimachinery/pkg/api/validate/content`` (``IsLabelKey``, ``IsLabelValue``) and
``util/validation.IsDNS1123Subdomain``: label selectors check their keys and values with them, the
embedded API server validates ``metadata`` with them, and a controller checks a label it is about to
write. One implementation, so every one of them rejects the same strings with the same words.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "dns1123_subdomain_errors",
    "label_key_errors",
    "label_value_errors",
    "validate_label_key",
    "validate_label_value",
]

_LABEL_KEY_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE: Final = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_MAX: Final = 63
_LABEL_VALUE_FMT: Final = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MAX: Final = 63
_DNS1123_SUBDOMAIN_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MAX: Final = 253


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``content.RegexError`` (its odd ``',  or '`` spacing included)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return (
        msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"
    )


_LABEL_KEY_MSG: Final = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    _LABEL_KEY_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_MSG: Final = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)
_SUBDOMAIN_MSG: Final = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)


def _length_and_format_errors(value: str, max_length: int, regex: re.Pattern[str], msg: str) -> list[str]:
    """kube's usual pair of checks: ``MaxLenError``, then the ``RegexError`` (anchored at the very end,
    as Go's ``$`` is; Python's would let a trailing newline through)."""
    errs = [f"must be no more than {max_length} characters"] if len(value) > max_length else []
    if not regex.fullmatch(value):
        errs.append(msg)
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``: at most 253 characters of dot-separated lowercase DNS labels
    (most objects' ``metadata.name``, a label key's prefix)."""
    return _length_and_format_errors(value, _DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN_RE, _SUBDOMAIN_MSG)


def label_key_errors(key: str) -> list[str]:
    """``content.IsLabelKey`` (``validation.IsQualifiedName``): ``[DNS-subdomain "/"] name``."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _LABEL_KEY_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > _LABEL_KEY_MAX:
        errs.append(f"name part must be no more than {_LABEL_KEY_MAX} characters")
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append("name part " + _LABEL_KEY_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    """``content.IsLabelValue``: empty, or at most 63 alphanumerics/``-_.`` with alnum ends."""
    return _length_and_format_errors(value, _LABEL_VALUE_MAX, _LABEL_VALUE_RE, _LABEL_VALUE_MSG)


def validate_label_key(key: str) -> None:
    """Raise :class:`ValueError` unless ``key`` is a valid label key (a qualified name)."""
    errs = label_key_errors(key)
    if errs:
        raise ValueError(f"invalid label key {key!r}: {'; '.join(errs)}")


def validate_label_value(value: str) -> None:
    """Raise :class:`ValueError` unless ``value`` is a valid label value."""
    errs = label_value_errors(value)
    if errs:
        raise ValueError(f"invalid label value {value!r}: {'; '.join(errs)}")

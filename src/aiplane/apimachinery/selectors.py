"""Label selectors and node-selector terms, with kube's exact semantics and error texts.

This is the one implementation of label selectors in aiplane: the controllers use it to find their
pods, nodes and partitions, the simulated scheduler to place pods by node affinity, and the embedded
API server (:mod:`aiplane.sim.apiserver.selectors`) to answer ``?labelSelector=`` with the very
messages kube-apiserver prints. A selector that matches slightly differently from kube's makes a
controller adopt or ignore the wrong objects. This module ports:

* ``metav1.LabelSelectorAsSelector`` (``apis/meta/v1/helpers.go``): ``None`` matches nothing, an
  empty selector ``{}`` matches everything, ``matchLabels`` become ``key=value`` requirements and
  ``matchExpressions`` accept ``In``, ``NotIn``, ``Exists`` and ``DoesNotExist`` only. Errors are
  prefixed with the offending field (``matchExpressions[0].values: …``), the way kube's
  ``nodeaffinity`` helpers pass a ``field.Path`` to ``NewRequirement``, or, on request, are
  ``LabelSelectorAsSelector``'s own unprefixed texts. ``metav1.FormatLabelSelector`` prints one
  for a table (``<none>``, ``<error>``).
* ``labels.NewRequirement`` validation with its ``field.Error`` texts: keys must be label keys
  (``content.IsLabelKey``, which also validates ``metadata.labels`` and annotation keys), values
  label values (``content.IsLabelValue``); ``In``/``NotIn`` need at least one value,
  ``Exists``/``DoesNotExist`` none, ``=``/``==``/``!=`` exactly one, ``Gt``/``Lt`` exactly one int64.
  Several errors are aggregated as ``utilerrors.Aggregate`` prints them (``[a, b]``).
* ``Requirement.Matches`` (``NotIn`` and ``!=`` match when the label is absent; ``Gt``/``Lt`` never
  match an absent or non-integer label) and ``String()`` (requirements sorted by key, ``In`` values
  sorted on output: ``app=x,!legacy,tier in (a,b)``). One deliberate difference: values are
  printed once each, because kube's ``String()`` prints ``values: ["", "", ""]`` as ``(,,)``,
  which kube's own parser then rejects; kube's verbatim output is an option.
* ``labels.Parse``, the string syntax, with its lexer quirks (``in``/``notin`` are plain
  identifiers in value position, ``x in ()`` means the value ``""``, values are de-duplicated) and
  its error messages (:attr:`SelectorError.reason`).
* ``component-helpers/scheduling/corev1/nodeaffinity``: node-selector terms with
  ``Gt``/``Lt`` and ``matchFields`` on ``metadata.name``; terms are ORed, an empty term matches
  nothing.

Everything is pure and works on plain dicts, so it can be used in decision functions.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_quote

__all__ = [
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "compile_selector",
    "dns1123_subdomain_errors",
    "format_label_selector",
    "label_key_errors",
    "label_value_errors",
    "node_fields_of",
    "node_selector_matches",
    "node_selector_term_matches",
    "parse_selector",
    "required_node_affinity_matches",
    "selector_from_set",
    "selector_matches",
    "validate_label_key",
    "validate_label_value",
]


class Operator(enum.StrEnum):
    """``selection.Operator``; the values are kube's own spellings."""

    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    IN = "in"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    EXISTS = "exists"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS: Final = ("in", "notin", "=", "==", "!=", "gt", "lt")
#: ``validRequirementOperators``, in kube's order.
_VALID_OPERATORS: Final = ("in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt")

# -- label keys and values (k8s.io/apimachinery/pkg/api/validate/content) ------------------------

_LABEL_KEY_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE: Final = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_MAX: Final = 63
_LABEL_VALUE_FMT: Final = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MAX: Final = 63
_DNS1123_SUBDOMAIN_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MAX: Final = 253
_INT64_RE: Final = re.compile(r"[+-]?[0-9]+")


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


def _parse_int64(s: object) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``; Python's ``int()`` is laxer (spaces, ``_``, non-ASCII)."""
    if not isinstance(s, str) or not _INT64_RE.fullmatch(s):
        return None
    v = int(s)
    return v if -(1 << 63) <= v < (1 << 63) else None


# -- field.Error texts ---------------------------------------------------------------------------


def _child(path: str, name: str) -> str:
    """``field.Path.Child``: ``path.name``, or ``name`` below the root."""
    return f"{path}.{name}" if path else name


def _invalid(path: str, value: Any, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()`` (``<nil>`` for the root path)."""
    return FieldError(path, fe.INVALID, value, detail).render_kube()


def _not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    """``field.NotSupported(path, value, supported).Error()``."""
    detail = "supported values: " + ", ".join(go_quote(s) for s in supported)
    return FieldError(path, fe.NOT_SUPPORTED, value, detail).render_kube()


def _aggregate(messages: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as is, several de-duplicated in ``[]``."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# -- requirements and selectors ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed clause of a selector. Build it with :meth:`new` to get kube's validation."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def new(
        cls, key: str, operator: Operator | str, values: Iterable[str] = (), *, path: str = ""
    ) -> Requirement:
        """``labels.NewRequirement(key, op, values, field.WithPath(path))``: validate and build.

        Raises :class:`ValueError` with kube's ``field.Error`` texts, aggregated, e.g.
        ``values[0][app]: Invalid value: "-x": a valid label must be …`` (``path`` prefixes each).
        """
        vals = tuple(values)
        errs: list[str] = []
        key_path = _child(path, "key")
        if not isinstance(key, str):
            errs.append(_invalid(key_path, key, "must be a string"))
        else:
            key_errs = label_key_errors(key)
            if key_errs:
                errs.append(_invalid(key_path, key, "; ".join(key_errs)))
        op = Operator(operator) if operator in _VALID_OPERATORS else None
        vpath = _child(path, "values")
        if op is None:
            errs.append(_not_supported(_child(path, "operator"), operator, _VALID_OPERATORS))
        elif op in (Operator.IN, Operator.NOT_IN):
            if not vals:
                errs.append(_invalid(vpath, [], "for 'in', 'notin' operators, values set can't be empty"))
        elif op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
            if len(vals) != 1:
                errs.append(
                    _invalid(vpath, list(vals), "exact-match compatibility requires one single value")
                )
        elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            if vals:
                errs.append(
                    _invalid(vpath, list(vals), "values set must be empty for exists and does not exist")
                )
        else:  # Gt, Lt
            if len(vals) != 1:
                errs.append(
                    _invalid(vpath, list(vals), "for 'Gt', 'Lt' operators, exactly one value is required")
                )
            for i, v in enumerate(vals):
                if _parse_int64(v) is None:
                    errs.append(
                        _invalid(f"{vpath}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
                    )
        for i, v in enumerate(vals):
            if not isinstance(v, str):
                errs.append(_invalid(f"{vpath}[{i}]", v, "must be a string"))
                continue
            v_errs = label_value_errors(v)
            if v_errs:
                errs.append(_invalid(f"{vpath}[{i}][{key}]", v, "; ".join(v_errs)))
        if errs or op is None:
            raise ValueError(_aggregate(errs))
        return cls(key, op, vals)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches`` against a label set."""
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        # Gt / Lt: absent or non-integer label values never match.
        if self.key not in labels or len(self.values) != 1:
            return False
        have = _parse_int64(labels[self.key])
        want = _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def to_string(self, *, unique_values: bool = True) -> str:
        """``Requirement.String``: ``!k``, ``k``, ``k=v``, ``k!=v``, ``k in (a,b)``, ``k>5``...

        kube sorts the values; it also keeps duplicates, and then prints ``["", "", ""]`` as
        ``(,,)``, which its own parser rejects. Values are a set, so by default each is printed
        once, which is equivalent and always parses back; ``unique_values=False`` prints them as
        kube does, duplicates included (what kubectl shows in a table column).
        """
        op = self.operator
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op is Operator.EXISTS:
            return self.key
        if len(self.values) == 1:
            vals = self.values[0]
        else:
            vals = ",".join(sorted(set(self.values) if unique_values else self.values))
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({vals})"
        sym = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{sym}{vals}"

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled label selector: requirements ANDed, kept sorted by key as kube keeps them.

    ``Selector.everything()`` (no requirements) matches every label set;
    ``Selector.nothing()`` (from a ``None`` selector) matches none. Both print as ``""``, as in
    kube, so a "nothing" selector does not survive a trip through the string form.
    """

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = field(default=False)

    @classmethod
    def everything(cls) -> Selector:
        return cls()

    @classmethod
    def nothing(cls) -> Selector:
        return cls(matches_nothing=True)

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> Selector:
        """Requirements sorted by key (stable), as ``internalSelector.Add`` sorts them."""
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @property
    def empty(self) -> bool:
        """``Selector.Empty``: true when the selector does not restrict anything."""
        return not self.matches_nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.matches_nothing:
            return False
        ls: Mapping[str, str] = labels or {}
        return all(r.matches(ls) for r in self.requirements)

    def to_string(self, *, unique_values: bool = True) -> str:
        """``Selector.String``: the requirements' strings joined by ``,`` (``""`` if none).
        ``unique_values`` as in :meth:`Requirement.to_string`."""
        return ",".join(r.to_string(unique_values=unique_values) for r in self.requirements)

    def __str__(self) -> str:
        return self.to_string()

    def requires_exact_match(self, key: str) -> str | None:
        """``RequiresExactMatch``: the single value ``key`` must have, if the selector pins one."""
        for r in self.requirements:
            if r.key == key:
                if (
                    r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                    and len(r.values) == 1
                ):
                    return r.values[0]
                return None
        return None


_LABEL_SELECTOR_OPERATORS: Final[dict[str, Operator]] = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def _as_str_list(values: Any, path: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValueError(_invalid(path, values, "must be a list of strings"))
    return list(values)


def compile_selector(selector: Mapping[str, Any] | None, *, field_paths: bool = True) -> Selector:
    """``metav1.LabelSelectorAsSelector`` for a ``LabelSelector`` dict.

    ``None`` -> matches nothing; ``{}`` (or both fields empty) -> matches everything. Invalid
    input raises :class:`ValueError` naming the field, e.g.
    ``matchExpressions[0].operator: "Foo" is not a valid label selector operator``.

    ``field_paths=False`` gives ``LabelSelectorAsSelector``'s own messages, which name no
    ``matchLabels``/``matchExpressions`` entry: ``"Foo" is not a valid label selector operator``,
    ``values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty`` (what
    kube's controllers report, e.g. in a PodDisruptionBudget's ``SyncFailed`` condition).
    """
    if selector is None:
        return Selector.nothing()
    if not isinstance(selector, Mapping):
        raise ValueError(f"a label selector must be an object, not {type(selector).__name__}")
    match_labels = selector.get("matchLabels") or {}
    match_expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise ValueError(_invalid("matchLabels", match_labels, "must be a map of strings"))
    if isinstance(match_expressions, str) or not isinstance(match_expressions, Sequence):
        raise ValueError(_invalid("matchExpressions", match_expressions, "must be a list"))
    if not match_labels and not match_expressions:
        return Selector.everything()
    reqs: list[Requirement] = []
    for k in sorted(match_labels):
        v = match_labels[k]
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(_invalid(f"matchLabels[{k}]", v, "keys and values must be strings"))
        reqs.append(Requirement.new(k, Operator.EQUALS, [v], path=f"matchLabels[{k}]" if field_paths else ""))
    for i, expr in enumerate(match_expressions):
        path = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise ValueError(_invalid(path, expr, "must be an object"))
        raw_op = expr.get("operator")
        op = _LABEL_SELECTOR_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
        if op is None:
            where = f"{path}.operator: " if field_paths else ""
            raise ValueError(f"{where}{go_quote(str(raw_op))} is not a valid label selector operator")
        key: Any = expr.get("key")  # Requirement.new reports a missing or non-string key
        values = _as_str_list(expr.get("values"), f"{path}.values")
        reqs.append(Requirement.new(key, op, values, path=path if field_paths else ""))
    return Selector.of(reqs)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Does a ``LabelSelector`` dict select an object with these labels? (See
    :func:`compile_selector`; compile once when matching many objects.)"""
    return compile_selector(selector).matches(labels)


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: the selector's ``String()`` as kube prints it (duplicate
    values included), ``<none>`` when that is empty (``None`` or ``{}``), ``<error>`` when the
    selector does not convert. What kubectl shows in a ``SELECTOR`` column."""
    try:
        text = compile_selector(selector).to_string(unique_values=False)
    except ValueError:
        return "<error>"
    return text or "<none>"


def selector_from_set(labels: Mapping[str, str] | None) -> Selector:
    """``labels.SelectorFromSet``: ``key=value`` for each pair, no validation (a ``nodeSelector``
    or a Service selector); empty or ``None`` matches everything."""
    if not labels:
        return Selector.everything()
    return Selector.of(Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items())


# -- the string syntax (labels.Parse) -----------------------------------------------------------


class _Tok(enum.Enum):
    ERROR = 0
    END = 1
    CLOSE_PAR = 2
    COMMA = 3
    NOT = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GT = 7
    IDENT = 8
    IN = 9
    LT = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_STRING_TO_TOKEN: Final[dict[str, _Tok]] = {
    ")": _Tok.CLOSE_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.NOT,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GT,
    "in": _Tok.IN,
    "<": _Tok.LT,
    "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN,
    "(": _Tok.OPEN_PAR,
}
_SPECIAL: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")


def _lex(s: str) -> list[tuple[_Tok, str]]:
    """The ``labels.Lexer``: identifiers run until whitespace or a special symbol; special
    symbols are matched greedily (``!=``, ``==``). A NUL ends the input, as Go's lexer reads it."""
    s = s.split("\0", 1)[0]
    items: list[tuple[_Tok, str]] = []
    pos, n = 0, len(s)
    while True:
        while pos < n and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((_Tok.END, ""))
            return items
        if s[pos] in _SPECIAL:
            buf = ""
            last: tuple[_Tok, str] | None = None
            while pos < n and s[pos] in _SPECIAL:
                buf += s[pos]
                tok = _STRING_TO_TOKEN.get(buf)
                if tok is not None:
                    last = (tok, buf)
                elif last is not None:
                    break
                pos += 1
            if last is None:  # unreachable: every single special symbol is a token
                items.append((_Tok.ERROR, f"error expected: keyword found '{buf}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < n and s[pos] not in _SPECIAL and s[pos] not in _WHITESPACE:
            pos += 1
        word = s[start:pos]
        items.append((_STRING_TO_TOKEN.get(word, _Tok.IDENT), word))


class _Parser:
    """The ``labels.Parser``: recursive descent over the scanned tokens."""

    def __init__(self, s: str) -> None:
        self.items = _lex(s)
        self.pos = 0

    def _look(self, values: bool) -> tuple[_Tok, str]:
        tok, lit = self.items[min(self.pos, len(self.items) - 1)]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def _take(self, values: bool) -> tuple[_Tok, str]:
        item = self._look(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self._look(True)
            if tok in (_Tok.IDENT, _Tok.NOT):
                try:
                    reqs.append(self._requirement())
                except ValueError as exc:
                    raise ValueError(f"unable to parse requirement: {exc}") from None
                t, lit2 = self._take(True)
                if t is _Tok.END:
                    return reqs
                if t is _Tok.COMMA:
                    t2, lit3 = self._look(True)
                    if t2 not in (_Tok.IDENT, _Tok.NOT):
                        raise ValueError(f"found '{lit3}', expected: identifier after ','")
                    continue
                raise ValueError(f"found '{lit2}', expected: ',' or 'end of string'")
            if tok is _Tok.END:
                return reqs
            raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        op: Operator | None = None
        tok, key = self._take(True)
        if tok is _Tok.NOT:
            op = Operator.DOES_NOT_EXIST
            tok, key = self._take(True)
        if tok is not _Tok.IDENT:
            raise ValueError(f"found '{key}', expected: identifier")
        key_errs = label_key_errors(key)
        if key_errs:  # validateLabelKey(literal, p.path) with the parser's nil path
            raise ValueError(_invalid("", key, "; ".join(key_errs)))
        if self._look(True)[0] in (_Tok.END, _Tok.COMMA) and op is None:
            op = Operator.EXISTS
        if op is not None:
            return Requirement.new(key, op, ())
        tok, lit = self._take(False)
        ops = {
            _Tok.IN: Operator.IN,
            _Tok.EQUALS: Operator.EQUALS,
            _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
            _Tok.GT: Operator.GREATER_THAN,
            _Tok.LT: Operator.LESS_THAN,
            _Tok.NOT_IN: Operator.NOT_IN,
            _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
        }
        if tok not in ops:
            raise ValueError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        op = ops[tok]
        values = self._values() if op in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return Requirement.new(key, op, sorted(values))

    def _values(self) -> set[str]:
        tok, lit = self._take(True)
        if tok is not _Tok.OPEN_PAR:
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self._look(True)
        if tok in (_Tok.IDENT, _Tok.COMMA):
            vals = self._identifiers()
            if self._take(True)[0] is not _Tok.CLOSE_PAR:
                raise ValueError(f"found '{lit}', expected: ')'")
            return vals
        if tok is _Tok.CLOSE_PAR:  # "()" is the one value ""
            self._take(True)
            return {""}
        raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifiers(self) -> set[str]:
        vals: set[str] = set()
        while True:
            tok, lit = self._take(True)
            if tok is _Tok.IDENT:
                vals.add(lit)
                tok2, lit2 = self._look(True)
                if tok2 is _Tok.COMMA:
                    continue
                if tok2 is _Tok.CLOSE_PAR:
                    return vals
                raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            if tok is _Tok.COMMA:  # "(,", ",,", ",)" each stand for the empty value
                if not vals:
                    vals.add("")
                tok2, _ = self._look(True)
                if tok2 is _Tok.CLOSE_PAR:
                    vals.add("")
                    return vals
                if tok2 is _Tok.COMMA:
                    self._take(True)
                    vals.add("")
                continue
            raise ValueError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        tok, _ = self._look(True)
        if tok in (_Tok.END, _Tok.COMMA):
            return {""}
        tok, lit = self._take(True)
        if tok is _Tok.IDENT:
            return {lit}
        raise ValueError(f"found '{lit}', expected: identifier")


class SelectorError(ValueError):
    """A selector string that ``labels.Parse`` refuses.

    ``reason`` is kube's own message (what kube-apiserver answers a bad ``?labelSelector=`` with);
    ``str()`` also names the selector: ``invalid selector 'a b': unable to parse requirement: …``.
    """

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid selector {text!r}: {reason}")
        self.text = text
        self.reason = reason


def parse_selector(text: str) -> Selector:
    """``labels.Parse``: ``"a=b,c!=d,e in (x,y),!f,g notin (h),i>5"`` to a :class:`Selector`.

    The empty string selects everything. Errors raise :class:`SelectorError` (a
    :class:`ValueError`) carrying kube's message.
    """
    try:
        return Selector.of(_Parser(text).parse())
    except ValueError as exc:
        raise SelectorError(text, str(exc)) from None


# -- node affinity (component-helpers/scheduling/corev1/nodeaffinity) ----------------------------

_NODE_SELECTOR_OPERATORS: Final[dict[str, Operator]] = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _node_label_selector(exprs: Sequence[Mapping[str, Any]], path: str) -> Selector:
    """``nodeSelectorRequirementsAsSelector``."""
    reqs: list[Requirement] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        raw_op = expr.get("operator")
        op = _NODE_SELECTOR_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
        if op is None:
            raise ValueError(_not_supported(f"{p}.operator", raw_op, _NODE_SELECTOR_OPERATORS))
        key: Any = expr.get("key")
        reqs.append(Requirement.new(key, op, _as_str_list(expr.get("values"), f"{p}.values"), path=p))
    return Selector.of(reqs)


def _node_field_requirements(exprs: Sequence[Mapping[str, Any]], path: str) -> list[tuple[str, bool, str]]:
    """``nodeSelectorRequirementsAsFieldSelector``: (field, equal?, value) with one value each."""
    out: list[tuple[str, bool, str]] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        op = expr.get("operator")
        if op not in ("In", "NotIn"):
            raise ValueError(_not_supported(f"{p}.operator", op, ("In", "NotIn")))
        values = _as_str_list(expr.get("values"), f"{p}.values")
        if len(values) != 1:
            raise ValueError(_invalid(f"{p}.values", values, "must have one element"))
        out.append((str(expr.get("key", "")), op == "In", values[0]))
    return out


def node_fields_of(node: Mapping[str, Any]) -> dict[str, str]:
    """The fields a node-selector term can match: ``metadata.name`` (if the node has one)."""
    name = (node.get("metadata") or {}).get("name")
    return {"metadata.name": name} if name else {}


def node_selector_term_matches(
    term: Mapping[str, Any],
    node_labels: Mapping[str, str] | None,
    node_fields: Mapping[str, str] | None = None,
) -> bool:
    """Does one ``NodeSelectorTerm`` match a node?

    ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt) and ``matchFields`` (In/NotIn
    with exactly one value; kube only allows ``metadata.name``) are ANDed. A term with neither
    matches nothing. As in kube, ``matchFields`` is ignored when ``node_fields`` is empty.
    An invalid term raises :class:`ValueError` naming the field.
    """
    exprs = term.get("matchExpressions") or []
    field_exprs = term.get("matchFields") or []
    if not exprs and not field_exprs:
        return False
    labels_sel = _node_label_selector(exprs, "matchExpressions") if exprs else None
    field_reqs = _node_field_requirements(field_exprs, "matchFields") if field_exprs else None
    if labels_sel is not None and not labels_sel.matches(node_labels):
        return False
    if field_reqs is not None and node_fields:
        for key, equal, value in field_reqs:
            if (node_fields.get(key, "") == value) != equal:
                return False
    return True


def node_selector_matches(
    node_selector: Mapping[str, Any] | None,
    node_labels: Mapping[str, str] | None,
    node_fields: Mapping[str, str] | None = None,
) -> bool:
    """Does a ``NodeSelector`` (``requiredDuringSchedulingIgnoredDuringExecution``) match?

    Terms are ORed; empty terms are skipped; no term (or an empty list) matches nothing.
    Like the scheduler's ``LazyErrorNodeSelector``, an invalid term does not match (its error
    only surfaces when nothing matched, and the scheduler then just filters the node out).
    ``None`` means "no required node affinity", which every node satisfies.
    """
    if node_selector is None:
        return True
    for term in node_selector.get("nodeSelectorTerms") or []:
        try:
            if node_selector_term_matches(term, node_labels, node_fields):
                return True
        except ValueError:
            continue
    return False


def required_node_affinity_matches(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)``: ``spec.nodeSelector`` (exact
    label matches) AND the required node-affinity terms. What the scheduler's NodeAffinity filter
    checks."""
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    if not selector_from_set(pod_spec.get("nodeSelector")).matches(labels):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return node_selector_matches(required, labels, node_fields_of(node))

"""Label requirements and selectors (kube's ``k8s.io/apimachinery/pkg/labels``), with its exact semantics.

* ``labels.NewRequirement`` validation with its ``field.Error`` texts: keys must be label keys, values
  label values (:mod:`aiplane.apimachinery.validation`); ``In``/``NotIn`` need at least one value,
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

:mod:`aiplane.apimachinery.selectors` builds these from ``LabelSelector`` dicts and is where callers
import them from.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiplane.apimachinery.field import aggregate, invalid_message, not_supported_message
from aiplane.apimachinery.validation import label_key_errors, label_value_errors

__all__ = [
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "parse_selector",
    "requirement_values",
    "selector_from_set",
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

_INT64_RE: Final = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s: object) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``; Python's ``int()`` is laxer (spaces, ``_``, non-ASCII)."""
    if not isinstance(s, str) or not _INT64_RE.fullmatch(s):
        return None
    v = int(s)
    return v if -(1 << 63) <= v < (1 << 63) else None


# -- NewRequirement's checks, with its field.Error texts -------------------------------------------


def _child(path: str, name: str) -> str:
    """``field.Path.Child``: ``path.name``, or ``name`` below the root."""
    return f"{path}.{name}" if path else name


def _key_errors(key: object, path: str) -> list[str]:
    if not isinstance(key, str):
        return [invalid_message(path, key, "must be a string")]
    key_errs = label_key_errors(key)
    return [invalid_message(path, key, "; ".join(key_errs))] if key_errs else []


#: How many values each operator takes: ``(accepts this many?, kube's complaint otherwise)``.
_ARITY: Final[dict[Operator, tuple[Callable[[int], bool], str]]] = {
    **dict.fromkeys(
        (Operator.IN, Operator.NOT_IN),
        (lambda n: n > 0, "for 'in', 'notin' operators, values set can't be empty"),
    ),
    **dict.fromkeys(
        (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS),
        (lambda n: n == 1, "exact-match compatibility requires one single value"),
    ),
    **dict.fromkeys(
        (Operator.EXISTS, Operator.DOES_NOT_EXIST),
        (lambda n: n == 0, "values set must be empty for exists and does not exist"),
    ),
    **dict.fromkeys(
        (Operator.GREATER_THAN, Operator.LESS_THAN),
        (lambda n: n == 1, "for 'Gt', 'Lt' operators, exactly one value is required"),
    ),
}


def _arity_errors(op: Operator, vals: tuple[str, ...], path: str) -> list[str]:
    accepts, complaint = _ARITY[op]
    errs = [] if accepts(len(vals)) else [invalid_message(path, list(vals), complaint)]
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        errs.extend(
            invalid_message(f"{path}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
            for i, v in enumerate(vals)
            if _parse_int64(v) is None
        )
    return errs


def _value_errors(key: str, vals: tuple[str, ...], path: str) -> list[str]:
    errs: list[str] = []
    for i, v in enumerate(vals):
        if not isinstance(v, str):
            errs.append(invalid_message(f"{path}[{i}]", v, "must be a string"))
            continue
        v_errs = label_value_errors(v)
        if v_errs:
            errs.append(invalid_message(f"{path}[{i}][{key}]", v, "; ".join(v_errs)))
    return errs


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
        op = Operator(operator) if operator in _VALID_OPERATORS else None
        vpath = _child(path, "values")
        errs = _key_errors(key, _child(path, "key"))
        if op is None:
            errs.append(not_supported_message(_child(path, "operator"), operator, _VALID_OPERATORS))
        else:
            errs.extend(_arity_errors(op, vals, vpath))
        errs.extend(_value_errors(key, vals, vpath))
        if errs or op is None:
            raise ValueError(aggregate(errs))
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


def requirement_values(values: Any, path: str) -> list[str]:
    """A requirement's ``values`` from a selector dict: absent is none; anything but a list is an error."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValueError(invalid_message(path, values, "must be a list of strings"))
    return list(values)


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
            raise ValueError(invalid_message("", key, "; ".join(key_errs)))
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

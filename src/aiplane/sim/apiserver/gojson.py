"""Decoding request bodies the way Go's ``encoding/json`` does, and failing with its words.

kube decodes patch bodies with ``encoding/json`` and returns its error text to the client
verbatim (``invalid character 'x' looking for beginning of value``, ``json: cannot unmarshal
array into Go value of type …``). Python's decoders accept and reject different documents and word
errors differently, so a small scanner finds the first syntax error Go would report before the
fast decoder runs.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

from aiplane.apimachinery import boundedyaml
from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import go_quote
from aiplane.sim.apiserver import gofmt
from aiplane.sim.apiserver.errors import ApiError

#: The Go type kube decodes a patched object into.
MAP_TARGET: Final = "map[string]interface {}"

#: Nesting levels a request body may have. Go's ``encoding/json`` (and so kube-apiserver) stops at
#: 10,000 with "exceeded max depth"; the embedded server's validation, merging and managedFields code
#: recurses per level, so it stops well under Python's recursion limit instead (docs/sim.md).
MAX_DEPTH: Final = boundedyaml.MAX_DEPTH


class GoJSONError(ValueError):
    """A JSON decoding error, worded as Go's ``encoding/json`` words it."""


def _quote_char(c: int) -> str:
    """``encoding/json``'s ``quoteChar``."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


_EOF: Final = "unexpected end of JSON input"
_WS: Final = frozenset(b" \t\r\n")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_DIGITS: Final = frozenset(b"0123456789")


class _Scanner:
    """``checkValid``: the first syntax error of a JSON document, in Go's words."""

    def __init__(self, data: bytes) -> None:
        self.d = data
        self.i = 0
        self.depth = 0

    def descend(self) -> None:
        """Go's ``pushParseState``: nesting past the limit is a syntax error at the opening bracket."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("exceeded max depth")

    def fail(self, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {_quote_char(self.d[self.i])} {context}")

    def ws(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _WS:
            self.i += 1

    def peek(self) -> int:
        if self.i >= len(self.d):
            raise GoJSONError(_EOF)
        return self.d[self.i]

    def check(self) -> None:
        self.ws()
        self.value()
        self.ws()
        if self.i < len(self.d):
            raise self.fail("after top-level value")

    def value(self) -> None:
        self.ws()
        c = self.peek()
        if c == ord("{"):
            self.obj()
        elif c == ord("["):
            self.arr()
        elif c == ord('"'):
            self.string()
        elif c == ord("-") or c in _DIGITS:
            self.number()
        elif c == ord("t"):
            self.literal(b"true")
        elif c == ord("f"):
            self.literal(b"false")
        elif c == ord("n"):
            self.literal(b"null")
        else:
            raise self.fail("looking for beginning of value")

    def obj(self) -> None:
        self.descend()
        self.i += 1
        self.ws()
        if self.peek() == ord("}"):
            self.i += 1
            self.depth -= 1
            return
        while True:
            if self.peek() != ord('"'):
                raise self.fail("looking for beginning of object key string")
            self.string()
            self.ws()
            if self.peek() != ord(":"):
                raise self.fail("after object key")
            self.i += 1
            self.value()
            self.ws()
            c = self.peek()
            if c == ord(","):
                self.i += 1
                self.ws()
                continue
            if c == ord("}"):
                self.i += 1
                self.depth -= 1
                return
            raise self.fail("after object key:value pair")

    def arr(self) -> None:
        self.descend()
        self.i += 1
        self.ws()
        if self.peek() == ord("]"):
            self.i += 1
            self.depth -= 1
            return
        while True:
            self.value()
            self.ws()
            c = self.peek()
            if c == ord(","):
                self.i += 1
                continue
            if c == ord("]"):
                self.i += 1
                self.depth -= 1
                return
            raise self.fail("after array element")

    def string(self) -> None:
        self.i += 1
        while True:
            c = self.peek()
            if c == ord('"'):
                self.i += 1
                return
            if c == ord("\\"):
                self.i += 1
                e = self.peek()
                if e in b'"\\/bfnrt':
                    self.i += 1
                elif e == ord("u"):
                    self.i += 1
                    for _ in range(4):
                        if self.peek() not in _HEX:
                            raise self.fail("in \\u hexadecimal character escape")
                        self.i += 1
                else:
                    raise self.fail("in string escape code")
                continue
            if c < 0x20:
                raise self.fail("in string literal")
            self.i += 1

    def _digits(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _DIGITS:
            self.i += 1

    def number(self) -> None:
        if self.d[self.i] == ord("-"):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("in numeric literal")
        if self.d[self.i] == ord("0"):
            self.i += 1
        else:
            self._digits()
        if self.i < len(self.d) and self.d[self.i] == ord("."):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("after decimal point in numeric literal")
            self._digits()
        if self.i < len(self.d) and self.d[self.i] in b"eE":
            self.i += 1
            if self.peek() in b"+-":
                self.i += 1
            if self.peek() not in _DIGITS:
                raise self.fail("in exponent of numeric literal")
            self._digits()

    def literal(self, word: bytes) -> None:
        self.i += 1
        for expected in word[1:]:
            if self.peek() != expected:
                raise self.fail(f"in literal {word.decode()} (expecting {_quote_char(expected)})")
            self.i += 1


#: The word Go's ``UnmarshalTypeError`` uses for each kind of decoded value (``null`` never gets there).
_JSON_KINDS: Final = {"map": "object", "slice": "array", "string": "string", "bool": "bool"}


def json_kind(value: Any) -> str:
    """The word Go's ``UnmarshalTypeError`` uses for a JSON value."""
    return _JSON_KINDS.get(gofmt.kind(value), "number")


def check_depth(value: Any, raw: bytes | None = None) -> None:
    """Refuse a decoded body nested past :data:`MAX_DEPTH` with Go's syntax error.

    ``raw`` (the JSON it came from) lets the common case skip the walk: a document with fewer
    brackets than the limit cannot be nested that deep.
    """
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH:
        return
    bracket = boundedyaml.too_deep(value)
    if bracket is not None:
        raise GoJSONError(f"invalid character '{bracket}' exceeded max depth")


def loads(raw: bytes) -> Any:
    """``orjson.loads`` bounded in depth as Go's decoder is (:data:`MAX_DEPTH`), raising :class:`GoJSONError`.

    orjson's own limit (1,024 levels) is deeper than the embedded server's recursive code can take.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            raise GoJSONError(f"invalid character '{chr(raw[exc.pos - 1])}' exceeded max depth") from exc
        raise
    check_depth(value, raw)
    return value


def decode_body(raw: bytes, content_type: str) -> Any:
    """A JSON or YAML request body, bounded as kube's decoders bound it (aliasing, nesting).

    Raises ``ValueError`` (:class:`GoJSONError`, ``orjson.JSONDecodeError``) or ``yaml.YAMLError``
    (:class:`~aiplane.apimachinery.boundedyaml.ExcessiveAliasingError` among them) in the decoder's words.
    """
    if content_type == "application/yaml":
        value = boundedyaml.load(raw)
        boundedyaml.check_depth(value)
        return value
    return _decode(raw)


def _decode(raw: bytes) -> Any:
    """The decoded document, or Go's first syntax error.

    Every document orjson accepts, Go's scanner accepts too (orjson is strict RFC 8259; Go also takes
    invalid UTF-8, lone surrogates and numbers past 64 bits), so the Python scanner, ~100x slower than
    orjson, runs only for what orjson refuses and for documents nested past :data:`MAX_DEPTH`, to
    find the error in Go's words: the embedded server decoded every large patch twice over.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        _Scanner(raw).check()
        return json.loads(raw.decode("utf-8", "replace"))
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and boundedyaml.too_deep(value) is not None:
        _Scanner(raw).check()  # raises "exceeded max depth" at the bracket Go reports
    return value


def go_json_decode(raw: bytes, target: str | None = None) -> Any:
    """Decode ``raw`` as Go's ``json.Unmarshal`` would, raising its errors.

    ``target`` is the Go type decoded into (``map[string]interface {}``, ``[]handlers.jsonPatchOp``
    …) for the "cannot unmarshal" errors; ``None`` decodes into ``interface{}``.
    """
    value = _decode(raw)
    if target is not None and value is not None:
        wants_map = target.startswith("map[")
        if (wants_map and not isinstance(value, dict)) or (not wants_map and not isinstance(value, list)):
            raise GoJSONError(f"json: cannot unmarshal {json_kind(value)} into Go value of type {target}")
    return value


def undecodable_patch(value: str, detail: str) -> ApiError:
    """The 422 kube answers when the patched document does not decode into the object.

    The field is ``patch``, its value the document as kube shows it (``value``), ``detail`` the
    decoder's complaint.
    """
    err = FieldError("patch", fe.INVALID, value, detail)
    return ApiError(422, "Invalid", f' "" is invalid: {err.render_kube()}', details={"causes": [err.cause()]})

"""Protobuf request bodies (``application/vnd.kubernetes.protobuf``) for built-in kinds.

client-go's typed clients, and so ``kubectl create <generator>``, send built-in objects as Kubernetes
protobuf: the magic ``k8s\\x00``, then a ``runtime.Unknown`` envelope (``typeMeta{apiVersion, kind}``,
``raw``, ``contentEncoding``, ``contentType``) whose ``raw`` is the object's own message. This module
decodes such a body into the dict that kube's JSON encoding of the same Go object gives, so the verbs
see exactly what a JSON request would have sent.

It is a small generic reader of the protobuf wire format plus one field table per message: field
number -> JSON name (the Go json tag) and type. Zero values are
handled as Go's encoder and ``omitempty`` do: gogo-protobuf always writes a non-pointer field, even
when it is empty, so those are dropped when zero, while pointer fields (``?`` in the tables) are
written only when set and so keep a zero value (``replicas: 0``, ``emptyDir: {}``). Fields whose json
tag has no ``omitempty`` (``!``) keep zero scalars as kube's JSON does (``value: 0``).

Unlike kube-apiserver, which skips field numbers it does not know, a field number missing from a
table is a 400 naming the message and the number: the sim must not drop data silently.

The field tables are in :mod:`aiplane.sim.apiserver.protobuf_tables`; this module reads the wire
format against them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiplane.sim.apiserver import errors, gojson
from aiplane.sim.apiserver.protobuf_tables import (
    ALSO_ACCEPTED,
    KINDS,
    MESSAGES,
    SCALARS,
    SPECIALS,
    SUBRESOURCE_KINDS,
    UNSUPPORTED,
    WIRE_OF_SPECIAL,
    Field,
)
from aiplane.sim.apiserver.resources import ResourceType

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
#: What we can decode, for the 415 a body we cannot decode gets (kube lists protobuf for every built-in).
JSON_ONLY = "application/json, application/yaml"

# Go's zero time.Time (0001-01-01T00:00:00Z) in Unix seconds: metav1.Time encodes it as null.
_GO_ZERO_TIME = -62135596800
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- the wire format -------------------------------------------------------------------------------


class DecodeError(ValueError):
    """The body is not what it claims; the message never quotes the body's content."""


WIRE_VARINT, WIRE_64BIT, WIRE_BYTES, WIRE_32BIT = 0, 1, 2, 5
_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit"}


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("unexpected end of data in a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint is too long")


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field of one message: an int for varint, 64-bit and
    32-bit fields (fixed-width ones little-endian, unsigned), the bytes of a length-delimited one."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0 is invalid")
        if wire == WIRE_VARINT:
            value, pos = read_varint(buf, pos)
            yield number, wire, value
        elif wire == WIRE_64BIT:
            if pos + 8 > end:
                raise DecodeError("unexpected end of data in a 64-bit field")
            yield number, wire, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == WIRE_BYTES:
            length, pos = read_varint(buf, pos)
            if pos + length > end:
                raise DecodeError("unexpected end of data in a length-delimited field")
            yield number, wire, buf[pos : pos + length]
            pos += length
        elif wire == WIRE_32BIT:
            if pos + 4 > end:
                raise DecodeError("unexpected end of data in a 32-bit field")
            yield number, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {_WIRE_NAMES.get(wire, wire)} (field {number})")


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# --- messages -> JSON-shaped dicts ------------------------------------------------------------------


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def _wire_error(message: str, f: Field, wire: int, path: str) -> DecodeError:
    return DecodeError(
        f"field {f.number} ({f.name}) of message {message}{_where(path)} has wire type "
        f"{_WIRE_NAMES.get(wire, wire)}, which does not fit its type {f.type}"
    )


def _scalar(message: str, f: Field, wire: int, value: int | bytes, path: str) -> Any:
    t = f.type
    if t in ("s", "y"):
        if not isinstance(value, bytes):
            raise _wire_error(message, f, wire, path)
        # Go's JSON encoder replaces invalid UTF-8 in strings with U+FFFD; so do we.
        return value.decode("utf-8", "replace") if t == "s" else base64.b64encode(value).decode("ascii")
    if wire != WIRE_VARINT or isinstance(value, bytes):
        raise _wire_error(message, f, wire, path)
    if t == "b":
        return value != 0
    return _signed(value, 32 if t == "i32" else 64)


def _packed(message: str, f: Field, data: bytes, path: str) -> list[Any]:
    out: list[Any] = []
    pos = 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        out.append(_scalar(message, f, WIRE_VARINT, value, path))
    return out


def _format_time(seconds: int, nanos: int, micro: bool) -> str:
    try:
        moment = _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError as exc:
        raise DecodeError(f"time out of range: {seconds}s") from exc
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    return f"{text}.{nanos // 1000 % 1_000_000:06d}Z" if micro else f"{text}Z"


def go_duration(ns: int) -> str:
    """``time.Duration.String()``: 1h2m3.5s, 1.5ms, 0s."""
    if ns == 0:
        return "0s"
    sign, u = ("-", -ns) if ns < 0 else ("", ns)

    def frac(value: int, prec: int) -> tuple[str, int]:
        digits = f"{value % 10**prec:0{prec}d}".rstrip("0") if prec else ""
        return ("." + digits if digits else ""), value // 10**prec

    if u < 1_000_000_000:
        prec, unit = (0, "ns") if u < 1_000 else (3, "µs") if u < 1_000_000 else (6, "ms")
        fraction, whole = frac(u, prec)
        return f"{sign}{whole}{fraction}{unit}"
    fraction, seconds = frac(u, 9)
    text = f"{seconds % 60}{fraction}s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes // 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


_ABSENT: Any = object()  # a special whose JSON form is null: never written into an object


def _special(kind: str, data: bytes, path: str) -> tuple[Any, bool]:
    """(JSON value, whether it is the type's zero value) for one special-type message."""
    wire = _message(WIRE_OF_SPECIAL[kind], data, path)
    if kind in ("Time", "MicroTime"):
        seconds, nanos = wire.get("seconds", 0), wire.get("nanos", 0)
        if not data or (seconds == _GO_ZERO_TIME and nanos == 0):
            return _ABSENT, True
        return _format_time(seconds, nanos, kind == "MicroTime"), False
    if kind == "Duration":
        ns = wire.get("duration", 0)
        return go_duration(ns), ns == 0
    if kind == "IntOrString":
        if wire.get("type", 0) == 1:
            text = wire.get("strVal", "")
            return text, text == ""
        number = wire.get("intVal", 0)
        return number, number == 0
    if kind == "Quantity":
        text = wire.get("string", "")
        return text, text == ""
    raw = base64.b64decode(wire.get("raw" if kind == "RawExtension" else "Raw", ""))
    if not raw.strip() or raw.strip() == b"null":
        return _ABSENT, True
    if raw.startswith(MAGIC):
        raise DecodeError(f"a protobuf-encoded {kind}{_where(path)} is not supported; send JSON")
    try:
        return gojson.loads(raw), False
    except ValueError as exc:
        raise DecodeError(f"{kind}{_where(path)} does not hold JSON") from exc


def _element(message: str, f: Field, wire: int, value: int | bytes, path: str) -> Any:
    """One value of field ``f`` (an element, for repeated fields), zero values included."""
    if f.type in SCALARS:
        return _scalar(message, f, wire, value, path)
    if not isinstance(value, bytes):
        raise _wire_error(message, f, wire, path)
    if f.type in SPECIALS:
        result, _ = _special(f.type, value, path)
        return None if result is _ABSENT else result
    return _message(f.type, value, path)


def _map_entry(message: str, f: Field, data: bytes, path: str) -> tuple[str, Any]:
    key = ""
    raw_value: tuple[int, int | bytes] | None = None
    for number, wire, value in iter_fields(data):
        if number == 1:
            if not isinstance(value, bytes):
                raise _wire_error(message, f, wire, path)
            key = value.decode("utf-8", "replace")
        elif number == 2:
            raw_value = (wire, value)
        else:
            raise DecodeError(f"unknown field {number} in a map entry of {message}.{f.name}{_where(path)}")
    if raw_value is None:  # an absent value is the zero value of the map's value type
        raw_value = (WIRE_VARINT, 0) if f.type in ("b", "i32", "i64") else (WIRE_BYTES, b"")
    entry_path = f"{path}[{key}]"
    if f.type == "Quantity" and raw_value == (WIRE_BYTES, b""):
        return key, "0"
    return key, _element(message, f, raw_value[0], raw_value[1], entry_path)


def _field_path(path: str, f: Field) -> str:
    """Where field ``f`` of the message at ``path`` is, in error messages (inlined fields add nothing)."""
    if f.inline:
        return path
    return f"{path}.{f.name}" if path else f.name


@dataclass
class _Read:
    """One message's fields as read off the wire, before zero values are dropped."""

    singles: dict[int, Any] = field(default_factory=dict)
    #: Non-repeated messages: repeated occurrences merge, as in protobuf.
    nested: dict[int, bytearray] = field(default_factory=dict)
    lists: dict[int, list[Any]] = field(default_factory=dict)
    maps: dict[int, dict[str, Any]] = field(default_factory=dict)


def _message(message: str, data: bytes, path: str) -> dict[str, Any]:
    """Decode one message into its JSON object (zero-valued fields dropped as kube's JSON drops them)."""
    table = MESSAGES[message]
    read = _Read()
    for number, wire, value in iter_fields(data):
        _read_field(message, table.get(number), number, wire, value, path, read)
    out: dict[str, Any] = {}
    for f in table.values():
        _write_field(f, read, _field_path(path, f), out)
    return out


def _read_field(
    message: str, f: Field | None, number: int, wire: int, value: int | bytes, path: str, read: _Read
) -> None:
    if f is None:
        raise DecodeError(
            f"unknown field number {number} ({_WIRE_NAMES.get(wire, wire)}) in message {message}"
            f"{_where(path)}: aiplane sim rejects fields it cannot decode rather than dropping them"
        )
    field_path = _field_path(path, f)
    if f.type == UNSUPPORTED:
        raise DecodeError(
            f"field {number} ({f.name}) of message {message}{_where(field_path)} is not supported in "
            "protobuf bodies by aiplane sim; send this object as JSON"
        )
    if f.map:
        if not isinstance(value, bytes):
            raise _wire_error(message, f, wire, field_path)
        key, item = _map_entry(message, f, value, field_path)
        read.maps.setdefault(number, {})[key] = item
    elif f.repeated:
        items = read.lists.setdefault(number, [])
        if isinstance(value, bytes) and f.type in ("b", "i32", "i64"):
            items.extend(_packed(message, f, value, field_path))
        else:
            items.append(_element(message, f, wire, value, f"{field_path}[{len(items)}]"))
    elif f.type in SCALARS:
        read.singles[number] = _scalar(message, f, wire, value, field_path)
    else:
        if not isinstance(value, bytes):
            raise _wire_error(message, f, wire, field_path)
        read.nested.setdefault(number, bytearray()).extend(value)


def _write_field(f: Field, read: _Read, path: str, out: dict[str, Any]) -> None:
    """Field ``f`` into the JSON object ``out``, unless Go's encoder would have left it out."""
    number = f.number
    if number in read.singles:
        scalar = read.singles[number]
        if f.keep_zero or scalar not in (0, "", False):
            out[f.name] = scalar
    elif number in read.lists:
        out[f.name] = read.lists[number]
    elif number in read.maps:
        out[f.name] = read.maps[number]
    elif number in read.nested:
        _write_nested(f, bytes(read.nested[number]), path, out)


def _write_nested(f: Field, data: bytes, path: str, out: dict[str, Any]) -> None:
    if f.type in SPECIALS:
        special, zero = _special(f.type, data, path)
        if special is not _ABSENT and (f.keep_zero or not zero):
            out[f.name] = special
        return
    obj = _message(f.type, data, path)
    if f.inline:
        out.update(obj)
    elif obj or f.pointer:
        out[f.name] = obj


# --- the envelope and the request ------------------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """The ``runtime.Unknown`` wrapper of a protobuf body."""

    api_version: str
    kind: str
    raw: bytes
    content_encoding: str
    content_type: str


def read_envelope(body: bytes) -> Envelope:
    """The ``runtime.Unknown`` after the magic prefix (apiVersion and kind as sent, maybe empty)."""
    if not body:
        raise DecodeError("empty data")
    if not body.startswith(MAGIC):
        raise DecodeError(
            "provided data does not appear to be a protobuf message, expected prefix "
            f"[{' '.join(str(b) for b in MAGIC)}]"
        )
    if len(body) == len(MAGIC):
        raise DecodeError("empty body")
    unknown = _message("runtime.Unknown", body[len(MAGIC) :], "")
    type_meta = unknown.get("typeMeta", {})
    return Envelope(
        api_version=type_meta.get("apiVersion", ""),
        kind=type_meta.get("kind", ""),
        raw=base64.b64decode(unknown.get("raw", "")),
        content_encoding=unknown.get("contentEncoding", ""),
        content_type=unknown.get("contentType", ""),
    )


def _version(api_version: str) -> str:
    return api_version.rpartition("/")[2]


def decode_object(body: bytes, expected_api_version: str, expected_kind: str) -> dict[str, Any]:
    """Decode a protobuf body expected to hold ``expected_kind`` at ``expected_api_version``.

    As kube-apiserver does, an empty apiVersion or kind in the envelope defaults to the expected one;
    one that names another kind or version is a 400.
    """
    try:
        envelope = read_envelope(body)
    except DecodeError as exc:
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {expected_kind}): {exc}"
        ) from exc
    api_version = envelope.api_version or expected_api_version
    kind = envelope.kind or expected_kind
    prefix = f'{kind} in version "{_version(api_version)}" cannot be handled as a {expected_kind}'
    if envelope.content_encoding:
        raise errors.bad_request(f"{prefix}: unsupported content encoding {envelope.content_encoding!r}")
    canonical = ALSO_ACCEPTED.get((api_version, kind), (api_version, kind))
    if canonical[1] != expected_kind:
        raise errors.bad_request(
            f"{prefix}: the kind in the data ({kind}) does not match the expected kind ({expected_kind})"
        )
    if canonical[0] != expected_api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({expected_api_version})"
        )
    message = KINDS.get((api_version, kind))
    if message is None:
        raise errors.unsupported_media_type(JSON_ONLY)
    try:
        obj = _message(message, envelope.raw, "")
    except DecodeError as exc:
        raise errors.bad_request(f"{prefix}: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}


def expected_kind(rt: ResourceType, subresource: str | None) -> tuple[str, str]:
    """(apiVersion, kind) of the object a write to ``rt`` (and ``subresource``) carries."""
    if subresource in SUBRESOURCE_KINDS:
        return SUBRESOURCE_KINDS[subresource]
    return rt.api_version, rt.kind


def decode_request(body: bytes, rt: ResourceType, subresource: str | None = None) -> dict[str, Any]:
    """The object of a protobuf POST/PUT to ``rt``: custom resources have no protobuf form (415)."""
    if rt.is_custom:
        raise errors.unsupported_media_type(JSON_ONLY)
    api_version, kind = expected_kind(rt, subresource)
    if (api_version, kind) not in KINDS:
        raise errors.unsupported_media_type(JSON_ONLY)
    return decode_object(body, api_version, kind)


def decode_delete_options(body: bytes) -> dict[str, Any]:
    """A protobuf ``DeleteOptions`` body (client-go tags it with the client's group version)."""
    try:
        envelope = read_envelope(body)
        if envelope.kind not in ("", "DeleteOptions"):
            raise DecodeError(f"decoded object ({envelope.kind}) cannot be converted to DeleteOptions")
        return _message("DeleteOptions", envelope.raw, "")
    except DecodeError as exc:
        raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc

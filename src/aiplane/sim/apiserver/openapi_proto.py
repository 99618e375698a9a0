"""``/openapi/v2`` in protobuf (gnostic's ``openapi.v2.Document``), the form kubectl asks for.

Why: kubectl validates a manifest against the v3 document of its group-version; for a kind no v3
document has (a typo, a CRD not installed) it falls back to the v2 document, which client-go asks for in
protobuf only (``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``). A 406 there made
``kubectl apply`` fail with "the server was unable to respond with a content type that the client
supports" where kube-apiserver lets validation skip the unknown kind and kubectl says what is wrong:
``no matches for kind "X" in version "Y"``.

What is encoded: the document's ``swagger`` and ``info`` (fields 1 and 2 of gnostic's
``openapiv2/OpenAPIv2.proto``), not its paths or definitions. Every kind this server serves is in the
v3 documents, which kubectl reads first, so the v2 fallback is only ever reached for kinds it does
not serve; for those an empty v2 document answers as kube's full one does (nothing to validate
against). docs/sim.md lists this difference.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from aiplane.sim.apiserver.negotiation import parse_accept

__all__ = ["V2_PROTOBUF", "accepts_v2_protobuf", "encode_v2"]

#: What kube-openapi answers with: the dotted form, which Go's mime.ParseMediaType accepts (client-go
#: parses the response's Content-Type; an "@" there fails with "unexpected content after media subtype").
V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#: What it accepts: that, and the "@" form client-go still asks for.
_ACCEPTED: Final = frozenset({V2_PROTOBUF, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})


def accepts_v2_protobuf(accept: str | None) -> bool:
    """The ``Accept`` header names gnostic's protobuf media type, in either of kube-openapi's spellings."""
    return any(f"{c.type}/{c.subtype}" in _ACCEPTED for c in parse_accept(accept))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and embedded messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_v2(document: dict[str, Any]) -> tuple[bytes, str]:
    """The protobuf body and its ETag (sha512, upper-case hex, as the JSON document's)."""
    info = document.get("info") or {}
    body = _field(1, str(document.get("swagger", "2.0")).encode()) + _field(
        2, _field(1, str(info.get("title", "")).encode()) + _field(2, str(info.get("version", "")).encode())
    )
    return body, hashlib.sha512(body).hexdigest().upper()

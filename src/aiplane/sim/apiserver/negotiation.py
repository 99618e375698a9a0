"""Content negotiation: the ``Accept`` header read as kube-apiserver's ``negotiation`` package reads it.

Discovery (aggregated or legacy), Table output and the OpenAPI documents all choose their answer from
the same ranked clauses, so the parsing lives here, below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiplane.sim.apiserver import errors


@dataclass
class MediaClause:
    """One entry of an ``Accept`` header."""

    type: str
    subtype: str
    params: dict[str, str] = field(default_factory=dict)
    q: float = 1.0

    def matches_json(self) -> bool:
        return self.type in ("application", "*") and self.subtype in ("json", "*")

    @property
    def convert(self) -> tuple[str, str, str] | None:
        """The (group, version, kind) asked for with ``g``/``v``/``as``, as kube's negotiation reads it."""
        if not any(k in self.params for k in ("g", "v", "as")):
            return None
        return self.params.get("g", ""), self.params.get("v", ""), self.params.get("as", "")


def _clause(raw: str) -> MediaClause | None:
    pieces = [p.strip() for p in raw.split(";")]
    media = pieces[0]
    if not media:
        return None
    kind, _, sub = media.partition("/")
    clause = MediaClause(kind.strip().lower(), (sub or "*").strip().lower())
    for param in pieces[1:]:
        key, _, value = param.partition("=")
        key = key.strip()
        value = value.strip().strip('"')
        if key == "q":
            try:
                clause.q = float(value)
            except ValueError:
                clause.q = 0.0
        elif key:
            clause.params[key] = value
    return clause


def parse_accept(header: str | None) -> list[MediaClause]:
    """``Accept`` clauses best first (goautoneg: by q, then specificity; stable otherwise)."""
    clauses = [c for c in (_clause(raw) for raw in (header or "").split(",")) if c is not None]

    def rank(c: MediaClause) -> tuple[float, int, int]:
        return (-c.q, 1 if c.type == "*" else 0, 1 if c.subtype == "*" else 0)

    return sorted((c for c in clauses if c.q > 0), key=rank)


def not_acceptable() -> errors.ApiError:
    return errors.ApiError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf",
    )

"""Fault injection for reliability tests (stub: the full version is written next)."""

from __future__ import annotations

from typing import Any


class Faults:
    async def before(self, verb: str, rt: Any, subresource: str | None) -> None:
        return None

    def add_spec(self, spec: str) -> None:
        raise ValueError("fault injection is not implemented yet")


def _unused() -> None:
    return None

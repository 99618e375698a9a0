"""PATCH: merge, JSON, strategic merge and server-side apply (stub)."""

from __future__ import annotations

from typing import Any

from aiplane.sim.apiserver import errors


def patch(
    api: Any,
    rt: Any,
    namespace: Any,
    name: str,
    content_type: str,
    raw: bytes,
    opts: Any,
    *,
    subresource: Any = None,
) -> Any:
    raise errors.unsupported_media_type("none yet")

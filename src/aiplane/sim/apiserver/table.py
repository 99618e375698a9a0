"""Server-side printing (meta.k8s.io Table) (stub)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


def wants_table(request: web.Request) -> bool:
    return False


def to_table(
    server: Any, rt: Any, objs: list[dict[str, Any]], request: web.Request, **kw: Any
) -> dict[str, Any]:
    raise NotImplementedError

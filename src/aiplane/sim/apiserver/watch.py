"""Watch streams (stub)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aiplane.sim.apiserver import errors


async def serve(server: Any, request: web.Request, rt: Any, namespace: str | None) -> web.StreamResponse:
    raise errors.method_not_allowed("watch is not implemented yet")

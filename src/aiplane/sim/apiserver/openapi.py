"""OpenAPI v2/v3 documents (stub)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aiplane.sim.apiserver import errors


async def handle(server: Any, request: web.Request, parts: list[str]) -> web.StreamResponse:
    raise errors.not_found_path()

"""Deletion, garbage collection, namespaces and eviction (stub)."""

from __future__ import annotations

from typing import Any

from aiplane.sim.apiserver import errors


def evict(api: Any, rt: Any, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    raise errors.method_not_allowed()

"""Label and field selectors, and paginated LIST (minimal version: no selectors yet)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]


def label_selector(text: str | None) -> Predicate:
    return lambda obj: True


def field_selector(rt: Any, text: str | None) -> Predicate:
    return lambda obj: True


def list_objects(
    api: Any,
    rt: Any,
    namespace: str | None,
    *,
    label: str | None,
    field: str | None,
    limit: int | None,
    continue_token: str | None,
) -> tuple[list[dict[str, Any]], str, str | None, int | None]:
    return api.items(rt, namespace), str(api.store.rv), None, None

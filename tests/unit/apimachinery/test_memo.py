"""A view is built once per cached object and rebuilt when the cache hands out a new one."""

from __future__ import annotations

from typing import Any

from aiplane.apimachinery.memo import ViewMemo


def test_views_are_reused_by_identity_and_forgotten_with_their_object() -> None:
    built: list[str] = []

    def build(obj: dict[str, Any]) -> str:
        built.append(obj["metadata"]["name"])
        return f"view of {obj['metadata']['name']}@{obj['metadata']['resourceVersion']}"

    memo = ViewMemo(build)
    a1 = {"metadata": {"name": "a", "resourceVersion": "1"}}
    b1 = {"metadata": {"name": "b", "resourceVersion": "1"}}
    assert memo.all([a1, b1]) == ["view of a@1", "view of b@1"]
    assert memo.all([a1, b1]) == ["view of a@1", "view of b@1"] and built == ["a", "b"]
    a2 = {"metadata": {"name": "a", "resourceVersion": "2"}}  # the cache replaced a
    assert memo.all([a2]) == ["view of a@2"] and built == ["a", "b", "a"]
    assert len(memo) == 1  # b left the collection: its view is gone too

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


def test_a_hit_reads_nothing_of_the_object() -> None:
    """The plan controller reads every NodePartitioning several times per reconcile; a
    remembered view must cost no reading of the object (a dict that raises on any read proves it)."""

    class Untouchable(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise AssertionError(f"read {key}")

        def get(self, key: str, default: Any = None) -> Any:
            raise AssertionError(f"read {key}")

    memo: ViewMemo[int] = ViewMemo(len)
    fleet = [Untouchable(metadata={"name": f"n{i}"}) for i in range(1000)]
    memo.all(fleet)
    assert memo.builds == 1000
    assert memo.all(fleet) == [1] * 1000 and memo.builds == 1000

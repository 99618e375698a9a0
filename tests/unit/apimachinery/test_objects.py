"""The object readers never raise on a malformed object and read the right fields of a sound one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiplane.apimachinery import objects

anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=10,
)
fields = st.sampled_from(["metadata", "spec", "status", "name", "labels", "uid", "generation"])


# Nested generation is slow on a loaded 2-core machine; the property, not the speed, is tested.
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(fields, anything, max_size=4))
def test_readers_tolerate_any_shape(obj: dict[str, Any]) -> None:
    assert isinstance(objects.name(obj), str) and isinstance(objects.uid(obj), str)
    assert isinstance(objects.key(obj), str) and isinstance(objects.resource_version(obj), str)
    assert isinstance(dict(objects.labels(obj)), dict) and isinstance(dict(objects.spec(obj)), dict)
    assert objects.generation(obj) is None or isinstance(objects.generation(obj), int)
    objects.is_deleting(obj)
    objects.creation_time(obj)


def test_readers_read_a_sound_object() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "12",
            "generation": 3,
            "labels": {"a": "b"},
            "creationTimestamp": "2026-11-25T12:00:00Z",
        },
        "spec": {"nodeName": "n"},
    }
    assert (objects.key(pod), objects.uid(pod), objects.resource_version(pod)) == ("ns/p", "u", "12")
    assert objects.generation(pod) == 3 and objects.labels(pod) == {"a": "b"}
    assert objects.creation_time(pod) == datetime(2026, 11, 25, 12, tzinfo=UTC)
    assert objects.key({"metadata": {"name": "node"}}) == "node" and not objects.is_deleting(pod)
    assert (
        objects.parse_time("not a time") is None
        and objects.generation({"metadata": {"generation": True}}) is None
    )

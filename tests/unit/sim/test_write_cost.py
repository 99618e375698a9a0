"""What a write costs the embedded server, counted (the embedded cluster was the bottleneck
of every end-to-end benchmark): a patch body is decoded once, by the C decoder, with Go's scanner
kept for the bodies it refuses; stored objects are copied without ``copy.deepcopy``."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.values import deep_equal, json_copy
from aiplane.sim.apiserver import gojson
from aiplane.sim.apiserver import patch as p
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from tests.unit.sim.test_patch import configmap, make_api, rt_of, widget


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Replace ``module.name`` with a wrapper that counts its calls; the count is ``[0]`` of the result."""
    count = [0]
    real = getattr(module, name)

    def counting(*args: Any) -> Any:
        count[0] += 1
        return real(*args)

    monkeypatch.setattr(module, name, counting)
    return count


MERGE = "application/merge-patch+json"


class _Counts:
    def __init__(self) -> None:
        self.scans = 0
        self.decodes = 0
        self.deepcopies = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> _Counts:
    """Counts Go-scanner runs, ``go_json_decode`` calls and ``copy.deepcopy`` calls on whole objects."""
    seen = _Counts()
    scanner, decode, deepcopy = gojson._Scanner, gojson.go_json_decode, copy.deepcopy

    class CountingScanner(scanner):  # type: ignore[misc,valid-type]
        def check(self) -> None:
            seen.scans += 1
            super().check()

    def counting_decode(raw: bytes, target: str | None = None) -> Any:
        seen.decodes += 1
        return decode(raw, target)

    def counting_deepcopy(value: Any, memo: Any = None) -> Any:
        if memo is None and isinstance(value, dict) and "metadata" in value:  # a whole object
            seen.deepcopies += 1
        return deepcopy(value, memo)

    monkeypatch.setattr(gojson, "_Scanner", CountingScanner)
    monkeypatch.setattr("aiplane.sim.apiserver.merge_patch.go_json_decode", counting_decode)
    monkeypatch.setattr(copy, "deepcopy", counting_deepcopy)
    return seen


@pytest.mark.parametrize("validation", ["", "Strict", "Warn", "Ignore"])
def test_a_merge_patch_body_is_decoded_once_without_the_go_scanner(counts: _Counts, validation: str) -> None:
    """The profile of the 1,000-node partitioning benchmark: a quarter of the sim's CPU went to
    scanning every patch body in Python (twice with ``fieldValidation``) before orjson decoded it."""
    api = make_api()
    widget(api)
    body = json.dumps({"spec": {"description": "x" * 10_000, "replicas": 3}}).encode()
    rt = rt_of(api, "example.com/v1", "Widget")
    got = p.patch(api, rt, "default", "w", MERGE, body, WriteOptions(field_validation=validation)).obj
    assert got["spec"] == {"description": "x" * 10_000, "replicas": 3}
    assert (counts.decodes, counts.scans) == (1, 0)


def test_a_write_copies_no_object_with_deepcopy(counts: _Counts) -> None:
    """Patches and updates copy the stored object with :func:`json_copy` (``copy.deepcopy`` took a
    tenth of the sim's CPU in the profile). The first round warms the per-kind schema caches."""
    api = make_api()
    configmap(api)
    widget(api)
    cms, widgets = rt_of(api, "v1", "ConfigMap"), rt_of(api, "example.com/v1", "Widget")
    for replicas in (2, 3):
        counts.deepcopies = 0
        strict = WriteOptions(field_validation="Strict")
        p.patch(api, cms, "default", "cm", MERGE, f'{{"data":{{"b":"{replicas}"}}}}'.encode(), strict)
        op = f'[{{"op":"add","path":"/data/c","value":"{replicas}"}}]'.encode()
        p.patch(api, cms, "default", "cm", "application/json-patch+json", op, WriteOptions())
        w = json_copy(api.find(widgets, "default", "w"))
        w["spec"]["replicas"] = replicas
        api.update(widgets, "default", "w", w, WriteOptions())
    assert counts.deepcopies == 0


def test_syntax_errors_still_read_like_go(counts: _Counts) -> None:
    """A document orjson refuses goes through Go's scanner for Go's words; an invalid patch body needs
    none (kube answers "invalid JSON patch")."""
    api = make_api()
    configmap(api)
    rt = rt_of(api, "v1", "ConfigMap")
    with pytest.raises(ApiError) as caught:
        p.patch(api, rt, "default", "cm", MERGE, b'{"a":1,}', WriteOptions(field_validation="Strict"))
    assert caught.value.message == "invalid JSON patch"  # kube 1.37 checks json.Valid first: no words
    assert counts.scans == 0
    with pytest.raises(gojson.GoJSONError, match="invalid character '}' looking for beginning of object key"):
        gojson.go_json_decode(b'{"a":1,}')
    assert counts.scans == 1


def test_a_body_nested_past_the_limit_is_refused_in_gos_words() -> None:
    raw = b"[" * (gojson.MAX_DEPTH + 1) + b"]" * (gojson.MAX_DEPTH + 1)
    with pytest.raises(gojson.GoJSONError, match="exceeded max depth"):
        gojson.go_json_decode(raw)


_JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
).map(lambda v: json.dumps(v).encode())


@settings(max_examples=300, deadline=None)
@given(_JSON_TEXT, st.integers(min_value=0, max_value=200), st.binary(min_size=0, max_size=3), st.booleans())
def test_what_orjson_accepts_go_accepts_too(doc: bytes, at: int, junk: bytes, replace: bool) -> None:
    """The fast path skips Go's scanner for the documents orjson accepts: sound only if the scanner
    accepts every one of them (mutated documents probe the edges: bad escapes, numbers, literals)."""
    at = min(at, len(doc))
    mutated = doc[:at] + junk + doc[at + (len(junk) if replace else 0) :]
    try:
        fast = orjson.loads(mutated)
    except orjson.JSONDecodeError:
        return
    gojson._Scanner(mutated).check()  # raises if Go would refuse it
    assert deep_equal(gojson.go_json_decode(mutated), fast)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=20,
    )
)
def test_json_copy_is_an_independent_equal_copy(value: Any) -> None:
    copied = json_copy(value)
    assert deep_equal(copied, value)
    if isinstance(value, dict):
        copied["__new__"] = 1
        assert "__new__" not in value
    elif isinstance(value, list):
        copied.append(1)
        assert len(copied) == len(value) + 1


def test_an_update_validates_what_changed_not_the_whole_keyed_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing one item of a 1,000-item keyed list type-checks a handful of values, not the 3,000 of
    the list: unchanged subtrees are ratcheted whole (their errors would be warnings), so they are
    not walked. A change that breaks the schema is still refused."""
    from aiplane.schema import validate

    api = make_api()
    items = [{"name": f"n{i}", "size": i, "color": "red"} for i in range(1_000)]
    widget(api, spec={"items": items})
    widgets = rt_of(api, "example.com/v1", "Widget")
    checked = _count_calls(monkeypatch, validate, "_check_type")
    w = json_copy(api.find(widgets, "default", "w"))
    w["spec"]["items"][500]["size"] = 9_999
    api.update(widgets, "default", "w", w, WriteOptions())
    assert api.find(widgets, "default", "w")["spec"]["items"][500]["size"] == 9_999
    assert checked[0] < 20
    w = json_copy(api.find(widgets, "default", "w"))
    w["spec"]["items"][700]["size"] = "big"
    with pytest.raises(ApiError) as caught:
        api.update(widgets, "default", "w", w, WriteOptions())
    assert caught.value.code == 422
    assert "spec.items[700].size" in caught.value.message


def test_managed_fields_compare_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording an update's managedFields compares old and new field by field only where they
    differ: a status write to an object with a 1,000-item keyed list compares a handful of fields
    (it walked all ~4,000), and the writer still owns what it wrote."""
    from aiplane.sim.apiserver.smd import typed

    api = make_api()
    items = [{"name": f"n{i}", "size": i, "color": "red"} for i in range(1_000)]
    widget(api, spec={"items": items})
    widgets = rt_of(api, "example.com/v1", "Widget")
    compared = _count_calls(monkeypatch, typed, "_compare")
    body = b'{"status":{"ready":1,"phase":"Up"}}'
    got = p.patch(
        api, widgets, "default", "w", MERGE, body, WriteOptions(field_manager="st"), subresource="status"
    ).obj
    assert compared[0] < 20
    owners = {e["manager"]: e for e in got["metadata"]["managedFields"]}
    assert owners["st"]["fieldsV1"] == {"f:status": {".": {}, "f:phase": {}, "f:ready": {}}}
    assert owners["st"]["subresource"] == "status"


NODES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nodes": {
            "type": "array",  # atomic: its items never correlate with old ones
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "phase": {"type": "string", "enum": ["Pending", "Done"]},
                },
            },
        }
    },
}


def test_items_validated_before_are_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """An atomic list's items do not correlate, so ratcheting cannot skip them; an item already
    found valid against the same schema node is not walked again (a plan's ``nodeStatuses``: one
    entry changes per write). Errors are still found, in new items and in items seen invalid."""
    from aiplane.schema import validate

    old = {"nodes": [{"name": f"n{i}", "phase": "Pending"} for i in range(1_000)]}
    assert validate.validate(old, NODES_SCHEMA) == []
    checked = _count_calls(monkeypatch, validate, "_check_type")
    new = json_copy(old)
    new["nodes"][500]["phase"] = "Done"
    assert validate.validate(new, NODES_SCHEMA, old=old) == []
    assert checked[0] < 20
    bad = json_copy(new)
    bad["nodes"][7]["phase"] = "Lost"
    for _ in range(2):  # an invalid item is never remembered as valid
        errs = validate.validate(bad, NODES_SCHEMA, old=new)
        assert [(e.path, e.type) for e in errs] == [("nodes[7].phase", "FieldValueNotSupported")]


def test_an_item_ratcheted_whole_is_not_remembered_as_valid() -> None:
    """A keyed-list item equal to its old self is skipped (its errors would be ratcheted): that does
    not make it valid, and the same item in a new object is still refused."""
    from aiplane.schema import validate

    keyed = copy.deepcopy(NODES_SCHEMA)
    nodes = keyed["properties"]["nodes"]
    nodes["x-kubernetes-list-type"] = "map"
    nodes["x-kubernetes-list-map-keys"] = ["name"]
    nodes["items"]["required"] = ["name"]
    stored = {"nodes": [{"name": "a", "phase": "Lost"}, {"name": "b", "phase": "Pending"}]}
    new = json_copy(stored)
    new["nodes"][1]["phase"] = "Done"
    assert validate.validate(new, keyed, old=stored) == []  # "Lost" did not change: ratcheted
    errs = validate.validate({"nodes": [{"name": "a", "phase": "Lost"}]}, keyed)
    assert [(e.path, e.type) for e in errs] == [("nodes[0].phase", "FieldValueNotSupported")]


def test_a_patch_copies_the_stored_object_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATCH copies the stored object once (the copy it patches is what gets stored); a PUT copies
    its body once. Copying the plan's 3,000-entry status twice per patch was a tenth of the sim's
    CPU at 3,000 nodes."""
    from aiplane.sim.apiserver import rest

    api = make_api()
    configmap(api)
    cms = rt_of(api, "v1", "ConfigMap")
    copies = 0

    def counting(value: Any) -> Any:
        nonlocal copies
        if isinstance(value, dict) and "metadata" in value:
            copies += 1
        return json_copy(value)

    monkeypatch.setattr(p, "json_copy", counting)
    monkeypatch.setattr(rest, "json_copy", counting)
    got = p.patch(api, cms, "default", "cm", MERGE, b'{"data":{"b":"2"}}', WriteOptions()).obj
    assert got["data"] == {"a": "1", "b": "2"}
    assert copies == 1
    body = json_copy(api.find(cms, "default", "cm"))
    body["data"]["c"] = "3"
    sent = json_copy(body)
    api.update(cms, "default", "cm", body, WriteOptions())
    assert copies == 2
    assert body == sent  # a PUT's body is the caller's: not kept, not changed


def test_decoding_managed_fields_walks_each_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``FieldSet.from_json`` decodes the stored managedFields on every write; it asked each child
    whether it was empty, which walked the child's subtree again at every level above it."""
    from aiplane.sim.apiserver.smd import fieldpath

    deep: dict[str, Any] = {}
    node = deep
    for i in range(30):
        node[f"f:a{i}"] = {}
        node = node[f"f:a{i}"]
    calls = 0
    real = fieldpath.FieldSet.empty

    def counting(self: Any) -> bool:
        nonlocal calls
        calls += 1
        return bool(real(self))

    monkeypatch.setattr(fieldpath.FieldSet, "empty", counting)
    decoded = fieldpath.FieldSet.from_json(deep)
    assert calls <= 30
    assert decoded.to_json() == deep

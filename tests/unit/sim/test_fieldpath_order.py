"""managedFields list path elements in structured-merge-diff's order, whichever way they are sorted."""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.sim.apiserver.smd.fieldpath import PathElement, _pe_cmp, _sorted_pes

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from(["", "a", "b"]),
)
values = st.one_of(
    scalars, st.lists(scalars, max_size=2), st.dictionaries(st.sampled_from("ab"), scalars, max_size=2)
)


def _key(fields: list[tuple[str, Any]]) -> PathElement:
    return PathElement.key(fields)


elements = st.one_of(
    st.sampled_from(["a", "b", "name", ""]).map(PathElement.field),
    st.integers(0, 5).map(lambda i: PathElement("i", i)),
    scalars.map(lambda v: PathElement("v", v)),
    values.map(lambda v: PathElement("v", v)),
    st.lists(st.tuples(st.sampled_from(["name", "port", "protocol"]), scalars), max_size=3).map(_key),
)


@given(st.lists(elements, max_size=12))
def test_the_fast_sort_is_path_element_compare(pes: list[PathElement]) -> None:
    """The key-tuple sort (used when every value is a scalar) orders as ``PathElement.Compare`` does."""
    got = [
        pe.compare(other)
        for pe, other in zip(_sorted_pes(pes), sorted(pes, key=functools.cmp_to_key(_pe_cmp)), strict=True)
    ]
    assert got == [0] * len(pes)

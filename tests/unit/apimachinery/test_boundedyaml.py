"""YAML loading bounded as go-yaml bounds it: aliasing that does most of the work, and deep nesting."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aiplane.api.manifests import check_file
from aiplane.apimachinery import boundedyaml


def laughs(levels: int, fanout: int = 10) -> str:
    """``a0`` a list of ``fanout`` scalars, each next anchor a list of ``fanout`` aliases of the one before."""
    text = "a0: &a0 [" + ", ".join(["x"] * fanout) + "]\n"
    for i in range(1, levels + 1):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fanout) + "]\n"
    return text


def test_go_yaml_accepts_moderate_aliasing_and_refuses_a_document_that_is_mostly_expansion() -> None:
    # go-yaml v3.0.4 on the same documents: three anchor levels decode (1,358 nodes, 97% aliased),
    # four fail (13,580 nodes, 99.6% aliased: over the 99% allowed under 400,000 nodes).
    loaded = boundedyaml.load(laughs(2))
    assert len(loaded["a2"]) == 10 and loaded["a2"][0] == loaded["a1"]
    with pytest.raises(
        boundedyaml.ExcessiveAliasingError, match=r"^yaml: document contains excessive aliasing$"
    ):
        boundedyaml.load(laughs(3))


def test_a_billion_laughs_fails_before_anything_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = 0
    real = boundedyaml.allowed_alias_ratio

    def counting(decoded: int) -> float:
        nonlocal steps
        steps += 1
        return real(decoded)

    monkeypatch.setattr(boundedyaml, "allowed_alias_ratio", counting)
    with pytest.raises(boundedyaml.ExcessiveAliasingError):
        boundedyaml.load(laughs(9, 9))  # 9^10 nodes once expanded
    assert steps < 10_000  # refused a few thousand nodes in, as go-yaml refuses it


def test_ordinary_yaml_loads_as_pyyaml_loads_it() -> None:
    text = "base: &b {a: 1, t: [x, y]}\nd:\n  <<: *b\n  c: 2\nlist: [*b, *b]\nempty:\n"
    assert boundedyaml.load(text) == yaml.safe_load(text)
    assert list(boundedyaml.load_all("a: 1\n---\nb: &q 2\nc: *q\n")) == [{"a": 1}, {"b": 2, "c": 2}]
    assert boundedyaml.load("") is None


def test_nesting_is_bounded() -> None:
    limit = boundedyaml.MAX_DEPTH
    assert boundedyaml.too_deep(boundedyaml.load("[" * limit + "]" * limit)) is None
    with pytest.raises(boundedyaml.TooDeepError, match=rf"^yaml: exceeded max depth of {limit}$"):
        boundedyaml.load("[" * (limit + 1) + "]" * (limit + 1))
    with pytest.raises(boundedyaml.TooDeepError):
        boundedyaml.load("- " * 5_000 + "x")  # not a RecursionError
    # Aliases can nest one deep node inside another.
    half = limit // 2 + 1
    text = "a: &a " + "[" * half + "]" * half + "\nb: " + "[" * half + "*a" + "]" * half + "\n"
    with pytest.raises(boundedyaml.TooDeepError):
        boundedyaml.check_depth(boundedyaml.load(text))


def test_aiplane_validate_reports_a_billion_laughs_as_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(9, 9))
    [checked] = check_file(path)
    assert [p.message for p in checked.problems] == ["not valid YAML: document contains excessive aliasing"]

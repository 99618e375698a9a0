"""Every source module stays small enough to read in one sitting: at most 800 lines."""

from __future__ import annotations

from pathlib import Path

import aiplane

LIMIT = 800


def test_no_source_module_is_over_800_lines() -> None:
    root = Path(aiplane.__file__).parent
    sizes = {
        p.relative_to(root.parent).as_posix(): len(p.read_text().splitlines()) for p in root.rglob("*.py")
    }
    assert len(sizes) > 50  # the package was found
    assert {path: n for path, n in sizes.items() if n > LIMIT} == {}

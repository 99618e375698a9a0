"""Where the example manifests are, in a source tree and in an installed wheel.

The wheel carries ``examples/`` as ``aiplane/examples`` (pyproject.toml, ``force-include``), so
``aiplane demo`` and ``aiplane api`` work after ``pip install aiplane`` with no source tree. An
editable install has no such copy and uses the repository's ``examples/``. A directory named
``examples`` in the working directory wins over both (the user's own edited copies).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["examples_dir"]


def examples_dir(cwd: Path | None = None) -> Path:
    """``./examples`` if present, else the packaged copy, else the source tree's."""
    local = Path("examples") if cwd is None else cwd / "examples"
    if local.is_dir():
        return local  # relative, as the user would type it
    packaged = Path(str(resources.files("aiplane"))) / "examples"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "examples"

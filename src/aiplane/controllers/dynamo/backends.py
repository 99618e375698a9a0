"""Which inference backend a worker runs, and what a backend adds for a compilation cache.

Upstream matches ``python… -m dynamo.(vllm|sglang|trtllm)`` in the main container's command and
args, falls back to the DCD's (then the DGD's) ``backendFramework``, and fails on a mismatch. The
failure message here names the fields involved, because the user must fix one of them. A command
that launches two different backends is reported the same way (upstream took the first match).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

BACKENDS: Final = ("vllm", "sglang", "trtllm")
_LAUNCH: Final = re.compile(r"\bpython[0-9.]*\s+-m\s+dynamo\.(vllm|sglang|trtllm)\b")

COMMAND_FIELD: Final = "spec.extraPodSpec.mainContainer.command/args"

# Only vLLM has a default cache directory and an env var for it (upstream: SGLang and TRT-LLM are
# "not yet supported").
COMPILATION_CACHE_DEFAULT_MOUNT: Final = {"vllm": "/root/.cache/vllm"}
COMPILATION_CACHE_ENV: Final = {"vllm": "VLLM_CACHE_ROOT"}


def detected_backend(command: Sequence[str], args: Sequence[str]) -> str | None:
    """The backend the command line launches, None when it launches none."""
    found = sorted(set(_LAUNCH.findall(" ".join([*command, *args]))))
    if len(found) > 1:
        raise ValueError(f"{COMMAND_FIELD}: launches several backends ({', '.join(found)}); pick one")
    return found[0] if found else None


def worker_backend(
    command: Sequence[str],
    args: Sequence[str],
    declared: str | None,
    declared_field: str = "spec.backendFramework",
) -> str | None:
    """The detected backend, else the declared one; a disagreement between them is an error."""
    detected = detected_backend(command, args)
    if detected is not None and declared is not None and detected != declared:
        raise ValueError(
            f"{declared_field}: is {declared!r} but {COMMAND_FIELD} launches dynamo.{detected}; "
            "make them agree"
        )
    return detected or declared


def compilation_cache_mount(backend: str | None, mount_point: str | None, field: str) -> str:
    """Where a compilation-cache volume goes: the user's path, else the backend's default."""
    if mount_point:
        return mount_point
    default = COMPILATION_CACHE_DEFAULT_MOUNT.get(backend or "")
    if default is None:
        raise ValueError(
            f"{field}: required for a compilation cache with backend {backend or '(none)'!s}; "
            f"only {', '.join(COMPILATION_CACHE_DEFAULT_MOUNT)} has a default"
        )
    return default

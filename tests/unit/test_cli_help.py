"""What a newcomer reads first: every command's ``--help`` and ``aiplane validate``'s complaints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

from aiplane.api.manifests import check_file
from aiplane.cli import app
from aiplane.controllers import registry

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
# Python types as typer prints them (<bool>, <list[str]>, <float>), and the usage line's {files}.
PLACEHOLDER = re.compile(r"<[a-z][\w\[\]., |]*>|list\[|\{\w+\}")


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_covered() -> None:
    assert {"crds", "rbac", "validate", "demo", "api", "sim", "run", "plan"} <= set(COMMANDS)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_shows_metavars_not_python_types(command: str) -> None:
    text = _help(*([command] if command else []))
    assert PLACEHOLDER.findall(text) == [], text
    if command:
        # Every option taking a value names what it takes; a flag shows nothing.
        params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
        for param in params:
            if isinstance(param, TyperOption) and not param.is_flag:
                assert param.metavar and param.metavar.strip(), f"{command} {param.opts} has no metavar"
                assert param.metavar in text
            elif isinstance(param, TyperArgument):
                assert param.metavar and f"{param.metavar}..." in text


@pytest.mark.parametrize("command", ["run", "sim", "rbac"])
def test_controllers_help_names_every_registered_controller(command: str) -> None:
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", _help(command)).split())
    start = text.index("--controllers")
    said = text[start : start + 800]
    for name in registry.MODULES:
        assert re.search(rf"\b{name}\b", said), (name, said)


def test_sim_and_demo_simulate_the_dcm_equally_slowly() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]

    def default(command: str) -> object:
        return next(p.default for p in commands[command].params if p.name == "dcm_delay")

    assert default("sim") == default("demo")


def test_validate_says_plainly_why_a_file_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "missing.yaml"
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"kind: Pod\n\xff\xfe")
    broken = tmp_path / "broken.yaml"
    broken.write_text("metadata:\n  name: a\n kind: [unclosed\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(missing), str(binary), str(broken)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert f"{missing}: no such file" in lines
    assert f"{binary}: not UTF-8 text (byte 10); manifests are UTF-8 YAML" in lines
    assert any(line.startswith(f"{broken}: not valid YAML: line 3, column 2: ") for line in lines), lines
    assert "0 valid, 3 invalid" in lines
    assert "Errno" not in result.output and "#0" not in result.output

    # Unreadable (tests may run as root, whom file modes do not stop, so the OS answer is simulated).
    locked = tmp_path / "locked.yaml"
    locked.write_text("kind: Pod\n", encoding="utf-8")

    def refuse(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    [checked] = check_file(locked)
    assert [str(p) for p in checked.problems] == [f"{locked}: permission denied: cannot read it"]


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"aiplane {version('aiplane')}"
    for args in ([], ["run"], ["sim"], ["validate"]):
        short = CliRunner().invoke(app, [*args, "-h"], env={"COLUMNS": "80"}, prog_name="aiplane")
        assert short.exit_code == 0, short.output
        assert short.output.startswith(f"Usage: aiplane {' '.join(args)}".rstrip() + " ")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_named_in_full_at_80_columns(command: str) -> None:
    """At a terminal's 80 columns every option of every command shows its whole name, once: no two
    options look alike (rich once cut five --leader-election-… options to the same "--leader-election…")."""
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"}).output
    assert "…" not in text
    params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
    shown = re.findall(r"^\s+((?:-\w, )?--[\w-]+)", text, flags=re.MULTILINE)
    for param in params:
        if isinstance(param, TyperOption):
            long = max(param.opts, key=len)
            assert sum(1 for s in shown if s.split(", ")[-1] == long) == 1, (long, text)
    assert len(shown) == len(set(shown)), text
    assert max(len(line) for line in text.splitlines()) <= 80

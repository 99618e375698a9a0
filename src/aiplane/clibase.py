"""What the ``aiplane`` command line is built on: help in the command line's words, ``--version``,
and the console for output that goes to a pipe."""

from __future__ import annotations

import enum
import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Final, cast

import typer
from rich.console import Console
from rich.rule import Rule
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from aiplane.kube.flags import flags_of

__all__ = ["Command", "Group", "PipeConsole", "flag_signature", "version_callback"]


def _hide_flag_placeholder(option: object) -> None:
    """A flag takes no value, so its help shows none (typer would print ``<bool>``)."""
    if isinstance(option, TyperOption) and option.is_flag and option.metavar is None:
        option.metavar = ""


def _no_type(ctx: Any) -> None:
    return None


class Command(TyperCommand):
    """Help in the words of the command line, not Python's: metavars, no ``<bool>``, no ``{files}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _hide_flag_placeholder(param)
            if isinstance(param, TyperArgument) and param.metavar:
                # Its metavar (FILE) already says what to give; typer would add <list[Path]> beside it.
                setattr(param, "display_type_rich", _no_type)  # noqa: B010  # an instance override

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _hide_flag_placeholder(option)
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = (param.metavar or (param.name or "ARG").upper()) + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class Group(TyperGroup):
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _hide_flag_placeholder(option)
        return option


def version_callback(value: bool) -> None:
    """``--version``: the installed distribution's version (eager: before any command runs)."""
    if value:
        try:
            found = version("aiplane")
        except PackageNotFoundError:  # a source checkout on PYTHONPATH, not installed
            found = "unknown (not installed)"
        typer.echo(f"aiplane {found}")
        raise typer.Exit()


#: Wide enough that no line of ours wraps; rules are drawn at a terminal's usual width instead.
UNWRAPPED: Final = 10_000
RULE_WIDTH: Final = 100


class PipeConsole(Console):
    """For a pipe or a file: no terminal width to fit, so none is guessed (rich would assume 80
    columns and cut tables to it). Lines are as long as they need to be; rules a readable 100."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(width=UNWRAPPED, **kwargs)

    def rule(
        self, title: Any = "", *, characters: str = "─", style: Any = "rule.line", align: Any = "center"
    ) -> None:
        self.print(Rule(title, characters=characters, style=style, align=align), width=RULE_WIDTH)


def flag_signature(options: type[Any]) -> inspect.Signature:
    """A command's signature made of the flags ``options`` declares (:mod:`aiplane.kube.flags`), for
    typer to read as if written by hand: one keyword parameter per flag, named :attr:`Flag.param`,
    with the flag's help, metavar, bounds and the field's default (an enum's by its value)."""
    parameters = []
    for item in flags_of(options):
        spec = item.flag
        option = typer.Option(spec.name, metavar=spec.metavar, help=spec.help, min=spec.min)
        default = item.default.value if isinstance(item.default, enum.Enum) else item.default
        annotation = cast(Any, Annotated)[spec.cli_type or item.type, option]
        parameters.append(
            inspect.Parameter(
                spec.param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    return inspect.Signature(parameters, return_annotation=None)

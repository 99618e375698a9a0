"""Command-line flags declared on the options dataclasses they fill: one default, one place.

An option is a dataclass field whose default is the flag's default and whose metadata (:func:`flag`)
says the flag's name, help, metavar, bounds, and how a command-line value becomes the field's value.
A field holding a nested options dataclass (:func:`group`) contributes that dataclass's flags. The
command line (``aiplane run``) is generated from these declarations, and the options are built back
from the parsed values by :func:`build`, so a default, a help text or a flag name is written once.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["FLAG", "GROUP", "Flag", "FlagField", "build", "flag", "flags_of", "group"]

#: The metadata key of a field's :class:`Flag`.
FLAG: Final = "aiplane.flag"
#: The metadata key marking a field that holds a nested options dataclass.
GROUP: Final = "aiplane.group"


@dataclass(frozen=True)
class Flag:
    """How one option appears on the command line."""

    #: ``--name``, or ``--name/--no-name`` for a boolean that can be turned either way.
    name: str
    help: str
    #: What the value is, as the help shows it (``SECONDS``, ``NAMESPACE/NAME``); none for a switch.
    metavar: str | None = None
    #: The smallest value accepted (the parser refuses less, naming the flag).
    min: float | None = None
    #: The type the command line parses (default: the field's own), when the field holds something
    #: richer (an enum) that ``parse`` makes of it.
    cli_type: Any = None
    #: From the parsed command-line value to the field's value; raises ``ValueError`` naming the flag.
    parse: Callable[[Any], Any] | None = None

    @property
    def long(self) -> str:
        """The flag's name without a ``/--no-...`` half."""
        return self.name.split("/", 1)[0]

    @property
    def param(self) -> str:
        """The flag as a Python identifier (``--drain-timeout`` -> ``drain_timeout``): unique per command."""
        return self.long.removeprefix("--").replace("-", "_")


def flag(
    default: Any,
    name: str,
    help: str,
    *,
    metavar: str | None = None,
    min: float | None = None,
    cli_type: Any = None,
    parse: Callable[[Any], Any] | None = None,
) -> Any:
    """A dataclass field that is also a command-line flag, defaulting to ``default``."""
    spec = Flag(name, help, metavar, min, cli_type, parse)
    return dataclasses.field(default=default, metadata={FLAG: spec})


def group(factory: Callable[[], Any]) -> Any:
    """A dataclass field holding another options dataclass, whose flags are the command's too."""
    return dataclasses.field(default_factory=factory, metadata={GROUP: True})


@dataclass(frozen=True)
class FlagField:
    """A flag, the field it fills (``path``: field names from the root options class) and its type."""

    flag: Flag
    path: tuple[str, ...]
    type: Any
    default: Any


def flags_of(cls: type[Any], prefix: tuple[str, ...] = ()) -> Iterator[FlagField]:
    """Every flag of options class ``cls`` (nested groups included), in field order."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        path = (*prefix, field.name)
        if field.metadata.get(GROUP):
            yield from flags_of(hints[field.name], path)
            continue
        spec = field.metadata.get(FLAG)
        if isinstance(spec, Flag):
            yield FlagField(spec, path, hints[field.name], field.default)


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """``cls`` from parsed command-line ``values`` keyed by :attr:`Flag.param`; absent ones default.

    Each value goes through its flag's ``parse`` first; nested groups are built the same way.
    """
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get(GROUP):
            kwargs[field.name] = build(hints[field.name], values)
            continue
        spec = field.metadata.get(FLAG)
        if isinstance(spec, Flag) and spec.param in values:
            value = values[spec.param]
            kwargs[field.name] = spec.parse(value) if spec.parse is not None else value
    return cls(**kwargs)

"""A parser for the API reference tables in spec/seeds/ (crd-ref-docs markdown).

It reads what a reader of the seed reads: per type, its fields with type, description, default and
validation markers. The drift test walks these tables next to the generated CRDs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[2] / "spec" / "seeds"

_TYPE_HEADER = re.compile(r"^#### (\w+)\s*$")
_ROW = re.compile(
    r"^\| `(?P<name>[^`]+)` _(?P<type>.+?)_ \| (?P<desc>.*?) \| (?P<default>.*?) \| (?P<valid>.*?) \|$"
)
_LINK = re.compile(r"\[(\w+)\]\(([^)]*)\)")


@dataclass
class SeedField:
    name: str
    type_text: str
    description: str
    default: str
    validation: dict[str, str]

    @property
    def linked_type(self) -> str | None:
        """The seed-local type this field refers to (``#anchor`` links only)."""
        for name, target in _LINK.findall(self.type_text):
            if target.startswith("#"):
                return name
        return None

    @property
    def external_type(self) -> str | None:
        for name, target in _LINK.findall(self.type_text):
            if not target.startswith("#"):
                return name
        return None

    @property
    def is_array(self) -> bool:
        return self.type_text.rstrip().endswith("array")

    @property
    def is_map(self) -> bool:
        return self.type_text.startswith("object (keys:")


@dataclass
class SeedType:
    name: str
    fields: list[SeedField] = field(default_factory=list)
    enum: list[str] | None = None
    resource: bool = False


def _parse_validation(cell: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in cell.split("<br />"):
        part = raw.strip()
        if not part:
            continue
        key, _, value = part.partition(":")
        out[key.strip()] = value.strip()
    return out


def parse_seed(path: Path) -> dict[str, SeedType]:
    types: dict[str, SeedType] = {}
    current: SeedType | None = None
    resource_names: set[str] = set()
    in_resource_list = False
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if line.startswith("### Resource Types"):
            in_resource_list = True
            continue
        if in_resource_list:
            match = re.match(r"^- \[(\w+)\]", line)
            if match:
                resource_names.add(match.group(1))
                continue
            if line.strip():
                in_resource_list = False
        header = _TYPE_HEADER.match(line)
        if header:
            current = types.setdefault(header.group(1), SeedType(header.group(1)))
            current.resource = current.name in resource_names
            continue
        if current is None:
            continue
        if line.startswith("- Enum: ["):
            current.enum = line[len("- Enum: [") : line.rindex("]")].split()
            continue
        row = _ROW.match(line)
        type_meta = (
            ("apiVersion", "kind", "metadata") if current.resource or current.name.endswith("List") else ()
        )
        if row and row.group("name") not in type_meta:
            if any(f.name == row.group("name") for f in current.fields):
                continue  # the ModelInfer tables repeat kind/apiVersion; one field each
            current.fields.append(
                SeedField(
                    name=row.group("name"),
                    type_text=row.group("type"),
                    description=row.group("desc").replace("<br />", "\n").strip(),
                    default=row.group("default").strip(),
                    validation=_parse_validation(row.group("valid")),
                )
            )
    return types


def seed_files() -> list[Path]:
    """The seeds written as crd-ref-docs tables (004 is a plain-text copy of 001's KaiwoConfig part)."""
    return sorted(
        p for p in SEEDS.glob("*.txt") if "| Field | Description |" in p.read_text(encoding="utf-8")
    )

"""Every field, default and validation marker of the API specification is in the generated CRDs.

The seeds under spec/seeds/ are the API specification. This test reads their tables and walks the CRD
schemas from each root kind along the same fields, so a field dropped, renamed, retyped, left without
its default or without its validation marker fails here, naming the type and field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiplane.api.crdgen import all_crds
from tests.unit.seed_tables import SEEDS, SeedField, SeedType, parse_seed, seed_files

# Where our API deliberately goes beyond a seed table, the walk continues through these extra fields
# (docs/api.md explains each): the real DynamoGraphDeployment has `services`, which the seed omits.
EXTRA_FIELDS = {
    ("DynamoGraphDeploymentSpec", "services"): SeedField(
        name="services",
        type_text="object (keys:string, values:[DynamoComponentDeploymentSharedSpec](#dynamocomponentdeploymentsharedspec))",
        description="",
        default="",
        validation={},
    ),
}

_SCALARS = {"string": "string", "integer": "integer", "boolean": "boolean", "float": "number"}


def _crd_schemas() -> dict[str, dict[str, Any]]:
    return {
        crd["spec"]["names"]["kind"]: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for crd in all_crds()
    }


def _parse_default(text: str) -> Any:
    text = text.replace("\\", "").strip()
    if text in ("{  }", "{ }", "{}"):
        return {}
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _norm(text: str) -> str:
    return " ".join(text.split())


# Seed validation markers whose value is a number, and the schema key that must carry it.
_NUMERIC_MARKERS = {
    "Minimum": "minimum",
    "Maximum": "maximum",
    "MinLength": "minLength",
    "MaxLength": "maxLength",
    "MinItems": "minItems",
    "MaxItems": "maxItems",
}

# Seed validation markers that are flags, the schema extension that must be set, and what to say if not.
_FLAG_MARKERS = {
    "XIntOrString": ("x-kubernetes-int-or-string", "seed says int-or-string"),
    "EmbeddedResource": ("x-kubernetes-embedded-resource", "seed says EmbeddedResource"),
}


def _check_documentation(where: str, fld: SeedField, node: dict[str, Any], problems: list[str]) -> None:
    if fld.description and _norm(fld.description) not in _norm(node.get("description", "")):
        problems.append(f"{where}: description differs from the seed")
    if fld.default:
        expected = _parse_default(fld.default)
        if node.get("default") != expected:
            problems.append(f"{where}: default {node.get('default')!r}, seed says {expected!r}")


def _check_markers(
    where: str, fld: SeedField, node: dict[str, Any], parent: dict[str, Any], problems: list[str]
) -> None:
    v = fld.validation
    for marker, key in _NUMERIC_MARKERS.items():
        if marker in v and node.get(key) != int(v[marker]):
            problems.append(f"{where}: {key} is {node.get(key)!r}, seed says {v[marker]}")
    if "Enum" in v:
        expected_enum = v["Enum"].strip("[]").split()
        if sorted(node.get("enum", [])) != sorted(expected_enum):
            problems.append(f"{where}: enum {node.get('enum')}, seed says {expected_enum}")
    if "Pattern" in v:
        pattern = v["Pattern"].strip("`").replace("\\|", "|")
        if node.get("pattern") != pattern:
            problems.append(f"{where}: pattern {node.get('pattern')!r}, seed says {pattern!r}")
    if "Required" in v and fld.name not in parent.get("required", []):
        problems.append(f"{where}: seed says Required, CRD does not require it")
    for marker, (key, message) in _FLAG_MARKERS.items():
        if marker in v and not node.get(key):
            problems.append(f"{where}: {message}")


def _check_type(
    where: str, fld: SeedField, node: dict[str, Any], problems: list[str]
) -> dict[str, Any] | None:
    """The schema the walk continues into (array items, map values, the node itself), or None on a mismatch."""
    if fld.is_array:
        if node.get("type") != "array":
            problems.append(f"{where}: seed says array, CRD type is {node.get('type')!r}")
            return None
        return dict(node["items"])
    if fld.is_map:
        if node.get("type") != "object" or "additionalProperties" not in node:
            problems.append(f"{where}: seed says a map, CRD has no additionalProperties")
            return None
        return dict(node["additionalProperties"])
    scalar = _SCALARS.get(fld.type_text.strip())
    if scalar and node.get("type") != scalar:
        problems.append(f"{where}: seed says {fld.type_text}, CRD type is {node.get('type')!r}")
    if "Quantity" in (fld.external_type, fld.linked_type) and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{where}: a Quantity must be int-or-string")
    return node


def _check_field(
    type_name: str, fld: SeedField, parent: dict[str, Any], problems: list[str]
) -> dict[str, Any] | None:
    where = f"{type_name}.{fld.name}"
    node = parent.get("properties", {}).get(fld.name)
    if node is None:
        problems.append(f"{where}: missing from the CRD")
        return None
    _check_documentation(where, fld, node, problems)
    _check_markers(where, fld, node, parent, problems)
    return _check_type(where, fld, node, problems)


def _walk(
    types: dict[str, SeedType],
    type_name: str,
    node: dict[str, Any],
    visited: set[str],
    problems: list[str],
) -> None:
    visited.add(type_name)
    seed_type = types[type_name]
    fields = list(seed_type.fields)
    fields += [f for (owner, _), f in EXTRA_FIELDS.items() if owner == type_name]
    for fld in fields:
        child = _check_field(type_name, fld, node, problems)
        target = fld.linked_type
        if child is None or target is None or target not in types:
            continue
        target_type = types[target]
        if target_type.enum is not None:
            if sorted(child.get("enum", [])) != sorted(target_type.enum):
                problems.append(
                    f"{type_name}.{fld.name}: enum {child.get('enum')}, seed type {target} says {target_type.enum}"
                )
            visited.add(target)
            continue
        if target_type.fields:
            _walk(types, target, child, visited, problems)


@pytest.mark.parametrize("seed", seed_files(), ids=lambda p: p.name)
def test_every_seed_field_is_in_the_crds(seed: Path) -> None:
    types = parse_seed(seed)
    schemas = _crd_schemas()
    roots = [t for t in types.values() if t.resource and not t.name.endswith("List")]
    assert roots, f"{seed.name}: no resource types found: the parser no longer understands the seed"
    problems: list[str] = []
    visited: set[str] = set()
    for root in roots:
        schema = schemas.get(root.name)
        if schema is None:
            problems.append(f"{root.name}: no CRD")
            continue
        _walk(types, root.name, schema, visited, problems)
    unreached = sorted(
        name
        for name, t in types.items()
        if name not in visited and not name.endswith("List") and (t.fields or t.enum is not None)
    )
    assert not problems, "\n".join(problems)
    assert not unreached, f"seed types no root kind reaches in the CRDs: {unreached}"


def test_the_drift_check_detects_a_missing_field() -> None:
    """The check above must be able to fail: remove a field from a CRD and it must say so."""
    seed = next(p for p in seed_files() if "PartitioningPlan" in p.read_text(encoding="utf-8"))
    types = parse_seed(seed)
    schema = json.loads(json.dumps(_crd_schemas()["PartitioningPlan"]))
    del schema["properties"]["spec"]["properties"]["rollout"]["properties"]["maxUnavailable"]["default"]
    del schema["properties"]["spec"]["properties"]["rules"]["items"]["properties"]["profileRef"]
    problems: list[str] = []
    _walk(types, "PartitioningPlan", schema, set(), problems)
    assert "RolloutPolicy.maxUnavailable: default None, seed says 1" in problems
    assert "PartitioningRule.profileRef: missing from the CRD" in problems


def test_kaiwoconfig_plain_text_seed_uses_data_which_we_accept() -> None:
    text = next(SEEDS.glob("004_*.txt")).read_text(encoding="utf-8")
    assert "\ndata KaiwoStorageConfig" in text
    spec = _crd_schemas()["KaiwoConfig"]["properties"]["spec"]["properties"]
    assert spec["data"]["properties"].keys() == spec["storage"]["properties"].keys()

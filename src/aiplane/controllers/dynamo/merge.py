"""Override merges for container and pod-spec fragments, as plain dicts.

Upstream merges with mergo (override on, slices replaced), which loses default entries whenever a
user names one list item: a ``mainContainer.ports`` with one extra port dropped the ``http`` port the
Service targets. Here lists of named items (env, ports, volumeMounts, volumes, imagePullSecrets) are
merged by name instead, user items winning; every other list is replaced wholly, maps are merged
recursively. Inputs are never mutated: results are deep copies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

NAMED_LISTS: Final = frozenset({"env", "ports", "volumeMounts", "volumes", "imagePullSecrets"})

# A probe has exactly one handler: merging an exec override over an httpGet default would give two.
PROBE_HANDLERS: Final = ("exec", "httpGet", "tcpSocket", "grpc")
PROBES: Final = frozenset({"livenessProbe", "readinessProbe", "startupProbe"})


def merge_named(base: Iterable[Mapping[str, Any]], over: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Items of ``over`` replace same-named items of ``base`` in place; new names are appended."""
    merged = [copy.deepcopy(dict(item)) for item in base]
    index = {item.get("name"): i for i, item in enumerate(merged)}
    for item in over:
        name = item.get("name")
        if name in index:
            merged[index[name]] = copy.deepcopy(dict(item))
        else:
            index[name] = len(merged)
            merged.append(copy.deepcopy(dict(item)))
    return merged


def merge_probe(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Timings merge; a handler in ``over`` drops the handlers of ``base``."""
    start = dict(base)
    if any(handler in over for handler in PROBE_HANDLERS):
        for handler in PROBE_HANDLERS:
            start.pop(handler, None)
    return deep_merge(start, over)


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged over ``base``; ``None`` in ``over`` leaves the base value."""
    merged = copy.deepcopy(dict(base))
    for key, value in over.items():
        if value is None:
            continue
        current = merged.get(key)
        if key in NAMED_LISTS and isinstance(current, list) and isinstance(value, list):
            merged[key] = merge_named(current, value)
        elif key in PROBES and isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_probe(current, value)
        elif isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def set_env(container: dict[str, Any], name: str, value: str, *, override: bool) -> None:
    """Sets env var ``name``; with ``override`` off, a var the user already set is kept."""
    env: list[dict[str, Any]] = container.setdefault("env", [])
    for item in env:
        if item.get("name") == name:
            if override:
                item.clear()
                item.update({"name": name, "value": value})
            return
    env.append({"name": name, "value": value})

"""YAML loading with the bounds go-yaml (and so sigs.k8s.io/yaml and kube-apiserver) puts on hostile input.

PyYAML shares an aliased node instead of copying it, so a few hundred bytes of nested aliases (a
"billion laughs") load quickly into a structure whose *expansion* has billions of nodes; whatever walks
it next (JSON encoding, validation, managedFields) then runs for minutes. go-yaml refuses such a
document while decoding: it counts the nodes it decodes and those reached through an alias, and fails
with ``yaml: document contains excessive aliasing`` once aliases do most of the work
(``allowedAliasRatio``: 99% for documents under 400,000 decoded nodes, scaling down to 10% at
4,000,000). This module does the same count over the composed node graph before anything is
constructed, so the refusal costs at most a few hundred thousand steps whatever the document.

Nesting is bounded too: go-yaml stops at 10,000 levels (``yaml: exceeded max depth of 10000``); PyYAML's
composer recurses per level, so the bound here is :data:`MAX_DEPTH`, below Python's recursion limit
(the one place this differs from kube, see docs/sim.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import yaml
from yaml.events import AliasEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, SequenceNode

#: go-yaml's alias-ratio range (decode.go ``alias_ratio_range_low``/``_high``).
_RATIO_LOW: Final = 400_000
_RATIO_HIGH: Final = 4_000_000

#: Nesting levels a document may have. kube's decoders allow 10,000; the embedded cluster's recursive
#: Python code (PyYAML's composer among it) must stay under the interpreter's recursion limit.
MAX_DEPTH: Final = 200

EXCESSIVE_ALIASING: Final = "yaml: document contains excessive aliasing"


class ExcessiveAliasingError(yaml.YAMLError):
    """go-yaml's refusal of a document that is mostly alias expansion."""

    def __init__(self) -> None:
        super().__init__(EXCESSIVE_ALIASING)
        self.problem = "document contains excessive aliasing"


class TooDeepError(yaml.YAMLError):
    """A document nested deeper than :data:`MAX_DEPTH`."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"yaml: exceeded max depth of {limit}")
        self.problem = f"exceeded max depth of {limit}"


def allowed_alias_ratio(decode_count: int) -> float:
    """go-yaml's ``allowedAliasRatio``: the share of decoded nodes aliases may account for."""
    if decode_count <= _RATIO_LOW:
        return 0.99
    if decode_count >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decode_count - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


def _edge(parent: Node | None, index: Any) -> tuple[int, Any]:
    """Which child slot of ``parent`` a node is composed into (how the composer calls it)."""
    if parent is None:
        return (0, "root")
    if isinstance(parent, MappingNode):
        return (id(parent), ("k" if index is None else "v", len(parent.value)))
    return (id(parent), index)


class _BoundedComposer:
    """A composer mix-in that records which child slots are aliases and bounds the depth."""

    _aliases: set[tuple[int, Any]]
    _depth: int

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if not hasattr(self, "_aliases"):
            self._aliases, self._depth = set(), 0
        if self.check_event(AliasEvent):  # type: ignore[attr-defined]
            node: Node = super().compose_node(parent, index)  # type: ignore[misc]
            self._aliases.add(_edge(parent, index))
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH and not self.check_event(ScalarEvent):  # type: ignore[attr-defined]
                raise TooDeepError()
            composed: Node = super().compose_node(parent, index)  # type: ignore[misc]
            return composed
        finally:
            self._depth -= 1

    def check_aliasing(self, root: Node) -> None:
        """Count as go-yaml's decoder would, in document order; raise once aliases do too much."""
        aliases = getattr(self, "_aliases", None)
        if not aliases:
            return  # nothing is expanded: the document is its own size
        decoded = 1  # the document node
        aliased = 0
        # (node, under an alias, reached through an alias slot)
        stack: list[tuple[Node, bool, bool]] = [(root, False, (0, "root") in aliases)]
        while stack:
            node, inside, via_alias = stack.pop()
            if via_alias:  # the alias node itself, then its target one level deeper in aliasing
                decoded += 1
                aliased += inside
                inside = True
            decoded += 1
            aliased += inside
            if aliased > 100 and decoded > 1000 and aliased / decoded > allowed_alias_ratio(decoded):
                raise ExcessiveAliasingError()
            if isinstance(node, MappingNode):
                pid = id(node)
                for j in range(len(node.value) - 1, -1, -1):
                    key, value = node.value[j]
                    stack.append((value, inside, (pid, ("v", j)) in aliases))
                    stack.append((key, inside, (pid, ("k", j)) in aliases))
            elif isinstance(node, SequenceNode):
                pid = id(node)
                for i in range(len(node.value) - 1, -1, -1):
                    stack.append((node.value[i], inside, (pid, i) in aliases))


def too_deep(value: Any) -> str | None:
    """The opening bracket of the first container nested past :data:`MAX_DEPTH`, if any (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            return "{" if isinstance(node, dict) else "["
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return None


def check_depth(value: Any) -> None:
    """Refuse a loaded document nested past :data:`MAX_DEPTH` (aliases can nest one node in another)."""
    if too_deep(value) is not None:
        raise TooDeepError()


def bounded(loader: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """``loader`` with go-yaml's bounds on aliasing and depth."""
    return type(f"Bounded{loader.__name__}", (_BoundedComposer, loader), {})


BoundedSafeLoader: Final = bounded(yaml.SafeLoader)


def _documents(stream: str | bytes, loader: type[yaml.SafeLoader]) -> Iterator[Any]:
    inst = loader(stream)
    try:
        while inst.check_node():
            node = inst.get_node()
            inst.check_aliasing(node)  # type: ignore[attr-defined]
            inst._aliases = set()  # type: ignore[attr-defined]
            yield inst.construct_document(node)
    finally:
        inst.dispose()


def load(stream: str | bytes, loader: type[yaml.SafeLoader] = BoundedSafeLoader) -> Any:
    """``yaml.safe_load`` with go-yaml's bounds (``loader`` must come from :func:`bounded`)."""
    inst = loader(stream)
    try:
        node = inst.get_single_node()
        if node is None:
            return None
        inst.check_aliasing(node)  # type: ignore[attr-defined]
        return inst.construct_document(node)
    finally:
        inst.dispose()


def load_all(stream: str | bytes, loader: type[yaml.SafeLoader] = BoundedSafeLoader) -> Iterator[Any]:
    """``yaml.safe_load_all`` with go-yaml's bounds, document by document."""
    return _documents(stream, loader)

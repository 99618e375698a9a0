"""Label selectors (``metav1.LabelSelector`` dicts), with kube's exact semantics and error texts.

This is the one implementation of label selectors in aiplane: the controllers use it to find their
pods, nodes and partitions, the simulated scheduler to place pods by node affinity, and the embedded
API server (:mod:`aiplane.sim.apiserver.selectors`) to answer ``?labelSelector=`` with the very
messages kube-apiserver prints. A selector that matches slightly differently from kube's makes a
controller adopt or ignore the wrong objects. This module ports ``metav1.LabelSelectorAsSelector``
(``apis/meta/v1/helpers.go``): ``None`` matches nothing, an empty selector ``{}`` matches everything,
``matchLabels`` become ``key=value`` requirements and ``matchExpressions`` accept ``In``, ``NotIn``,
``Exists`` and ``DoesNotExist`` only. Errors are prefixed with the offending field
(``matchExpressions[0].values: …``), the way kube's ``nodeaffinity`` helpers pass a ``field.Path`` to
``NewRequirement``, or, on request, are ``LabelSelectorAsSelector``'s own unprefixed texts.
``metav1.FormatLabelSelector`` prints one for a table (``<none>``, ``<error>``).

It is also where callers import everything selector-shaped from; the parts live by concept:

* :mod:`aiplane.apimachinery.labels` — requirements, compiled selectors, the string syntax;
* :mod:`aiplane.apimachinery.nodeaffinity` — node-selector terms and required node affinity;
* :mod:`aiplane.apimachinery.validation` — label keys and values, DNS-1123 subdomains.

Everything is pure and works on plain dicts, so it can be used in decision functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiplane.apimachinery.field import invalid_message
from aiplane.apimachinery.labels import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    parse_selector,
    requirement_values,
    selector_from_set,
)
from aiplane.apimachinery.nodeaffinity import (
    node_fields_of,
    node_selector_matches,
    node_selector_term_matches,
    required_node_affinity_matches,
)
from aiplane.apimachinery.validation import (
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
    validate_label_key,
    validate_label_value,
)
from aiplane.apimachinery.values import go_quote

__all__ = [
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "compile_selector",
    "dns1123_subdomain_errors",
    "format_label_selector",
    "label_key_errors",
    "label_value_errors",
    "node_fields_of",
    "node_selector_matches",
    "node_selector_term_matches",
    "parse_selector",
    "required_node_affinity_matches",
    "selector_from_set",
    "selector_matches",
    "validate_label_key",
    "validate_label_value",
]


_LABEL_SELECTOR_OPERATORS: Final[dict[str, Operator]] = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def compile_selector(selector: Mapping[str, Any] | None, *, field_paths: bool = True) -> Selector:
    """``metav1.LabelSelectorAsSelector`` for a ``LabelSelector`` dict.

    ``None`` -> matches nothing; ``{}`` (or both fields empty) -> matches everything. Invalid
    input raises :class:`ValueError` naming the field, e.g.
    ``matchExpressions[0].operator: "Foo" is not a valid label selector operator``.

    ``field_paths=False`` gives ``LabelSelectorAsSelector``'s own messages, which name no
    ``matchLabels``/``matchExpressions`` entry: ``"Foo" is not a valid label selector operator``,
    ``values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty`` (what
    kube's controllers report, e.g. in a PodDisruptionBudget's ``SyncFailed`` condition).
    """
    if selector is None:
        return Selector.nothing()
    if not isinstance(selector, Mapping):
        raise ValueError(f"a label selector must be an object, not {type(selector).__name__}")
    match_labels = selector.get("matchLabels") or {}
    match_expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise ValueError(invalid_message("matchLabels", match_labels, "must be a map of strings"))
    if isinstance(match_expressions, str) or not isinstance(match_expressions, Sequence):
        raise ValueError(invalid_message("matchExpressions", match_expressions, "must be a list"))
    if not match_labels and not match_expressions:
        return Selector.everything()
    reqs: list[Requirement] = []
    for k in sorted(match_labels):
        v = match_labels[k]
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(invalid_message(f"matchLabels[{k}]", v, "keys and values must be strings"))
        reqs.append(Requirement.new(k, Operator.EQUALS, [v], path=f"matchLabels[{k}]" if field_paths else ""))
    for i, expr in enumerate(match_expressions):
        path = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise ValueError(invalid_message(path, expr, "must be an object"))
        raw_op = expr.get("operator")
        op = _LABEL_SELECTOR_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
        if op is None:
            where = f"{path}.operator: " if field_paths else ""
            raise ValueError(f"{where}{go_quote(str(raw_op))} is not a valid label selector operator")
        key: Any = expr.get("key")  # Requirement.new reports a missing or non-string key
        values = requirement_values(expr.get("values"), f"{path}.values")
        reqs.append(Requirement.new(key, op, values, path=path if field_paths else ""))
    return Selector.of(reqs)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Does a ``LabelSelector`` dict select an object with these labels? (See
    :func:`compile_selector`; compile once when matching many objects.)"""
    return compile_selector(selector).matches(labels)


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: the selector's ``String()`` as kube prints it (duplicate
    values included), ``<none>`` when that is empty (``None`` or ``{}``), ``<error>`` when the
    selector does not convert. What kubectl shows in a ``SELECTOR`` column."""
    try:
        text = compile_selector(selector).to_string(unique_values=False)
    except ValueError:
        return "<error>"
    return text or "<none>"

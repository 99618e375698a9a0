"""Node-selector terms and required node affinity (kube's ``component-helpers/scheduling/corev1/nodeaffinity``).

Terms take ``Gt``/``Lt`` and ``matchFields`` on ``metadata.name``; terms are ORed, an empty term
matches nothing. The simulated scheduler and DaemonSet controller place pods with these, so a pod lands
(or is refused) exactly where kube's scheduler would put it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.field import invalid_message, not_supported_message
from aiplane.apimachinery.labels import Operator, Requirement, Selector, requirement_values, selector_from_set

__all__ = [
    "node_fields_of",
    "node_selector_matches",
    "node_selector_term_matches",
    "required_node_affinity_matches",
]

_NODE_SELECTOR_OPERATORS: Final[dict[str, Operator]] = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _node_label_selector(exprs: Sequence[Mapping[str, Any]], path: str) -> Selector:
    """``nodeSelectorRequirementsAsSelector``."""
    reqs: list[Requirement] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        raw_op = expr.get("operator")
        op = _NODE_SELECTOR_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
        if op is None:
            raise ValueError(not_supported_message(f"{p}.operator", raw_op, _NODE_SELECTOR_OPERATORS))
        key: Any = expr.get("key")
        reqs.append(Requirement.new(key, op, requirement_values(expr.get("values"), f"{p}.values"), path=p))
    return Selector.of(reqs)


def _node_field_requirements(exprs: Sequence[Mapping[str, Any]], path: str) -> list[tuple[str, bool, str]]:
    """``nodeSelectorRequirementsAsFieldSelector``: (field, equal?, value) with one value each."""
    out: list[tuple[str, bool, str]] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        op = expr.get("operator")
        if op not in ("In", "NotIn"):
            raise ValueError(not_supported_message(f"{p}.operator", op, ("In", "NotIn")))
        values = requirement_values(expr.get("values"), f"{p}.values")
        if len(values) != 1:
            raise ValueError(invalid_message(f"{p}.values", values, "must have one element"))
        out.append((str(expr.get("key", "")), op == "In", values[0]))
    return out


def node_fields_of(node: Mapping[str, Any]) -> dict[str, str]:
    """The fields a node-selector term can match: ``metadata.name`` (if the node has one)."""
    name = objects.name(node)
    return {"metadata.name": name} if name else {}


def node_selector_term_matches(
    term: Mapping[str, Any],
    node_labels: Mapping[str, str] | None,
    node_fields: Mapping[str, str] | None = None,
) -> bool:
    """Does one ``NodeSelectorTerm`` match a node?

    ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt) and ``matchFields`` (In/NotIn
    with exactly one value; kube only allows ``metadata.name``) are ANDed. A term with neither
    matches nothing. As in kube, ``matchFields`` is ignored when ``node_fields`` is empty.
    An invalid term raises :class:`ValueError` naming the field.
    """
    exprs = term.get("matchExpressions") or []
    field_exprs = term.get("matchFields") or []
    if not exprs and not field_exprs:
        return False
    labels_sel = _node_label_selector(exprs, "matchExpressions") if exprs else None
    field_reqs = _node_field_requirements(field_exprs, "matchFields") if field_exprs else None
    if labels_sel is not None and not labels_sel.matches(node_labels):
        return False
    if field_reqs is not None and node_fields:
        for key, equal, value in field_reqs:
            if (node_fields.get(key, "") == value) != equal:
                return False
    return True


def node_selector_matches(
    node_selector: Mapping[str, Any] | None,
    node_labels: Mapping[str, str] | None,
    node_fields: Mapping[str, str] | None = None,
) -> bool:
    """Does a ``NodeSelector`` (``requiredDuringSchedulingIgnoredDuringExecution``) match?

    Terms are ORed; empty terms are skipped; no term (or an empty list) matches nothing.
    Like the scheduler's ``LazyErrorNodeSelector``, an invalid term does not match (its error
    only surfaces when nothing matched, and the scheduler then just filters the node out).
    ``None`` means "no required node affinity", which every node satisfies.
    """
    if node_selector is None:
        return True
    for term in node_selector.get("nodeSelectorTerms") or []:
        try:
            if node_selector_term_matches(term, node_labels, node_fields):
                return True
        except ValueError:
            continue
    return False


def required_node_affinity_matches(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)``: ``spec.nodeSelector`` (exact
    label matches) AND the required node-affinity terms. What the scheduler's NodeAffinity filter
    checks."""
    labels = objects.labels(node)
    if not selector_from_set(pod_spec.get("nodeSelector")).matches(labels):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return node_selector_matches(required, labels, node_fields_of(node))

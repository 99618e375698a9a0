"""Which NodePartitioning belongs to which plan and node, and under what name.

Names: ``<plan>-<node>``; over 253 characters, a 236-character prefix (trailing ``-``/``.``
trimmed), ``-`` and 16 hex digits of SHA-256 of ``<plan>/<node>`` (see :func:`np_name`). The plan
label value is shortened the same way to 63 characters. An existing object of another plan holding
the name we want is a NodeConflict (``selection``) instead of being silently taken over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

from aiplane.controllers.partitioning.views import NodePartitioningView, PlanView

__all__ = ["children_by_node", "is_child", "np_name", "plan_label_value"]

MAX_NAME_LENGTH: Final = 253  # DNS-1123 subdomain
MAX_LABEL_VALUE_LENGTH: Final = 63
_DIGEST_LENGTH: Final = 16  # hex digits (64 bits) appended to shortened names


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_LENGTH]


def _shorten(full: str, limit: int, digest_of: str) -> str:
    """``full`` if it fits, else a prefix of it, ``-`` and a digest of ``digest_of``.

    The prefix loses trailing ``-``/``.`` so the result still ends a DNS label with an alphanumeric;
    the digest (lower-case hex) keeps distinct inputs apart although their prefixes coincide.
    """
    if len(full) <= limit:
        return full
    prefix = full[: limit - _DIGEST_LENGTH - 1].rstrip("-.")
    return f"{prefix}-{_digest(digest_of)}"


def np_name(plan_name: str, node_name: str) -> str:
    """The NodePartitioning name for a node: ``<plan>-<node>``, or a shortened form over 253 chars.

    Both inputs are DNS-1123 subdomains (the API server enforces it for plans and nodes), so the
    joined name is one too. When it is too long it becomes ``<first 236 chars, trailing -/. trimmed>-
    <16 hex of sha256("<plan>/<node>")>``: deterministic, still a valid subdomain of at most 253
    characters, and distinct pairs differ in the digest (``/`` cannot occur in either name, so the
    digest input is unambiguous even where ``<plan>-<node>`` is not, e.g. ``a-b``+``c`` vs ``a``+``b-c``;
    ``select_nodes`` reports an object of another plan that already holds a name as a conflict).
    """
    return _shorten(f"{plan_name}-{node_name}", MAX_NAME_LENGTH, f"{plan_name}/{node_name}")


def plan_label_value(plan_name: str) -> str:
    """The ``infrastructure.silogen.ai/plan`` label value: the plan name, shortened like
    :func:`np_name` when it exceeds the 63 characters a label value may have. The label is for
    ``kubectl get np -l`` and informer selectors; ownership itself is ``spec.planRef`` + ownerRef."""
    return _shorten(plan_name, MAX_LABEL_VALUE_LENGTH, plan_name)


def is_child(plan: PlanView, np: NodePartitioningView) -> bool:
    """Is ``np`` this plan's NodePartitioning?

    Upstream matched ``spec.planRef.name`` only, so a plan deleted and re-created under the same
    name adopted its predecessor's objects while the garbage collector was deleting them (and an
    apply adding a second controller reference is rejected). Here the UID must agree too, wherever
    one is recorded (``spec.planRef.uid``, the controller ownerReference).
    """
    if np.plan_name != plan.name or not plan.name:
        return False
    if plan.uid is None:
        return True
    if np.plan_uid and np.plan_uid != plan.uid:
        return False
    return not np.has_controller or np.controller_uid == plan.uid


def children_by_node(plan: PlanView, nps: Iterable[NodePartitioningView]) -> dict[str, NodePartitioningView]:
    """This plan's NodePartitionings keyed by ``spec.nodeName`` (sorted), one per node.

    If a node has more than one (an object left over from an older naming), the one with the
    expected name wins, then one not being deleted; ``stale_node_partitionings`` deletes the rest.
    """
    best: dict[str, NodePartitioningView] = {}

    def rank(np: NodePartitioningView) -> tuple[bool, bool, str]:
        return (np.name != np_name(plan.name, np.node_name), np.deleting, np.name)

    for np in nps:
        if not is_child(plan, np) or not np.node_name:
            continue
        if np.node_name not in best or rank(np) < rank(best[np.node_name]):
            best[np.node_name] = np
    return {node: best[node] for node in sorted(best)}

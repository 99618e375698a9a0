"""What the operator may do, declared where it is done, and the RBAC objects built from it.

Each controller module declares its needs next to its ``setup`` as ``PERMISSIONS``: a tuple of
:class:`Permission` (API group, resources — ``pods/eviction``-style for subresources — and verbs). The
registry collects them (``aiplane.controllers.registry.permissions``) and :func:`cluster_role` merges
them into the one ClusterRole the Helm chart ships, so a controller that starts using a resource
changes one line beside its setup, and the chart test fails until the chart follows (``aiplane rbac``).

Why per controller and not one list: ``--controllers`` selects a subset, and a reader auditing a rule
should find the code that needs it by looking next to the setup that declares it.

The manager's own needs (the leader-election Lease in its namespace) are not cluster-wide:
:data:`LEADER_ELECTION` goes into a namespaced Role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "EVENTS_WRITE",
    "LEADER_ELECTION",
    "READ",
    "WRITE_CHILD",
    "Permission",
    "cluster_role",
    "merge",
    "role",
]

#: What an informer needs (the initial list, then the watch) plus single GETs.
READ: Final = ("get", "list", "watch")
#: A child the controller owns: created, replaced when it differs from what it wants, deleted.
WRITE_CHILD: Final = ("get", "list", "watch", "create", "update", "delete")

#: Verbs kube-apiserver's RBAC authorizer knows, in the order ``kubectl create role`` prints them.
_VERB_ORDER: Final = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Permission:
    """One RBAC rule: ``verbs`` on ``resources`` (``plural`` or ``plural/subresource``) of ``group``."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = [v for v in self.verbs if v not in _VERB_ORDER]
        if unknown or not self.verbs or not self.resources:
            raise ValueError(f"Permission({self.group!r}, {self.resources}): bad verbs {self.verbs}")


#: Events the EventRecorder writes (core/v1, into the involved object's namespace; repeats are patched).
EVENTS_WRITE: Final = Permission("", ("events",), ("create", "patch"))

#: The manager's Lease (kube/leaderelection.py: get, create, update), in the Lease's namespace only.
LEADER_ELECTION: Final = (
    Permission("coordination.k8s.io", ("leases",), ("get", "list", "watch", "create", "update", "patch")),
    EVENTS_WRITE,
)


def merge(permissions: Iterable[Permission]) -> list[Permission]:
    """One rule per (group, verb set), resources sorted: the smallest stable ClusterRole.

    Verbs are merged per (group, resource) first, so two controllers asking for different verbs on one
    resource give the union, and the result does not depend on the order controllers are listed in.
    """
    verbs: dict[tuple[str, str], set[str]] = {}
    for perm in permissions:
        for resource in perm.resources:
            verbs.setdefault((perm.group, resource), set()).update(perm.verbs)
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), vs in verbs.items():
        ordered = tuple(v for v in _VERB_ORDER if v in vs)
        grouped.setdefault((group, ordered), []).append(resource)
    rules = [Permission(group, tuple(sorted(res)), vs) for (group, vs), res in grouped.items()]
    return sorted(rules, key=lambda p: (p.group, p.resources))


def _rules(permissions: Iterable[Permission]) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [p.group], "resources": list(p.resources), "verbs": list(p.verbs)}
        for p in merge(permissions)
    ]


def cluster_role(name: str, permissions: Iterable[Permission]) -> dict[str, Any]:
    """The ClusterRole granting ``permissions`` (merged by :func:`merge`)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": _rules(permissions),
    }


def role(name: str, namespace: str, permissions: Iterable[Permission]) -> dict[str, Any]:
    """The namespaced Role granting ``permissions``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": _rules(permissions),
    }

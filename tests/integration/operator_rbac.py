"""The e2e suites run the operator as the Helm chart's ServiceAccount on an RBAC-enforcing cluster.

Each e2e fixture builds its cluster with :func:`cluster` and its operator's client with
:func:`operator_client`: the cluster authorizes by RBAC, the chart's rendered ClusterRole, Role and
bindings are granted to the chart's ServiceAccount, and the operator's Manager acts as it, while the test
itself keeps the admin client (unaudited), so the audit holds the operator's requests only.

``AIPLANE_E2E_RBAC=0`` runs the suites as before (AlwaysAllow, the operator as admin), to tell an RBAC
failure from a behaviour failure. ``tests/conftest.py`` fails a test whose operator was refused
anything (403) and, at the end of a complete run, compares what the operator used with the chart's rules
(``least_privilege.py``).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from aiplane.kube.leaderelection import LeaderElectionConfig
from aiplane.sim.apiserver.access import RBAC
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.identities import ServiceAccountAccess, grant
from tests import chart_helpers

ENV = "AIPLANE_E2E_RBAC"
_RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

#: Operator identities handed out since the last :func:`take_accesses` (one per e2e fixture).
_ACCESSES: list[ServiceAccountAccess] = []


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


@functools.cache
def chart_rbac() -> tuple[dict[str, Any], ...]:
    """The chart's ServiceAccount, and the roles it binds to it with their bindings, rendered with its
    defaults (not ``<release>-metrics-reader``, which is for the metrics scraper)."""
    docs = [doc for doc in chart_helpers.render() if doc["kind"] in _RBAC_KINDS]
    bound = {(d["roleRef"]["kind"], d["roleRef"]["name"]) for d in docs if d["kind"].endswith("Binding")}
    return tuple(
        d
        for d in docs
        if d["kind"] not in ("Role", "ClusterRole") or (d["kind"], d["metadata"]["name"]) in bound
    )


def service_account() -> tuple[str, str]:
    (sa,) = (doc for doc in chart_rbac() if doc["kind"] == "ServiceAccount")
    return sa["metadata"].get("namespace", chart_helpers.NAMESPACE), sa["metadata"]["name"]


def cluster(**kw: Any) -> EmbeddedCluster:
    """An embedded cluster authorizing by RBAC (unless ``AIPLANE_E2E_RBAC=0``)."""
    if enabled():
        kw.setdefault("authorization_mode", RBAC)
    return EmbeddedCluster(**kw)


def operator_client(sim: EmbeddedCluster, **kw: Any) -> InMemoryKubeClient:
    """The client the operator's Manager uses: the chart's ServiceAccount granted the chart's RBAC
    (the admin when ``AIPLANE_E2E_RBAC=0``)."""
    if not enabled():
        return InMemoryKubeClient.for_cluster(sim, **kw)
    namespace, name = service_account()
    access = grant(sim, namespace, name, chart_rbac())
    _ACCESSES.append(access)
    return access.client(**kw)


def take_accesses() -> list[ServiceAccountAccess]:
    """The operator identities handed out since the last call (the current test's)."""
    taken = list(_ACCESSES)
    _ACCESSES.clear()
    return taken


def leader_election() -> LeaderElectionConfig | None:
    """The chart's leader election (its Lease in the release namespace, which only its Role grants);
    none with ``AIPLANE_E2E_RBAC=0`` (no release namespace is made then)."""
    if not enabled():
        return None
    namespace, _ = service_account()
    return LeaderElectionConfig(name="aiplane-controller-manager", namespace=namespace)

"""The chart on the real control plane: installed by Helm's engine, its ServiceAccount's token from the
TokenRequest API, and an operator running as it, all controllers on, refused nothing by kube's RBAC."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import Resource, resource_for
from aiplane.realcluster import RealCluster
from tests.polling import eventually
from tests.real import operator as op

pytestmark = pytest.mark.real

LEASES = resource_for("coordination.k8s.io/v1", "Lease")
CSRS = Resource("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False)


async def test_the_operator_as_the_charts_service_account_leads_with_every_controller(
    admin: HttpKubeClient, release: op.Release, start_operator: Callable[[str], op.Process]
) -> None:
    kinds = {d["kind"] for d in release.manifest}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= kinds
    process = start_operator("all")

    async def leading() -> bool:
        leases = await admin.list(LEASES, release.namespace)
        return any(
            lease["metadata"]["name"] == "aiplane-controller-manager" and lease["spec"].get("holderIdentity")
            for lease in leases["items"]
        )

    await eventually(leading, timeout=60, what="the operator holding the chart's Lease", interval=0.2)
    assert process.alive(), process.tail()


async def test_the_audit_log_names_a_request_rbac_refused_the_service_account(
    real_cluster: RealCluster, release: op.Release
) -> None:
    """The check every real test ends with sees a refusal: the chart grants nothing on CSRs."""
    audit = op.Audit.from_now(real_cluster.audit_log, release.user)
    http = await HttpKubeClient.from_kubeconfig(str(release.kubeconfig))
    try:
        with pytest.raises(ApiError) as refused:
            await http.list(CSRS)
    finally:
        await http.close()
    assert refused.value.status == 403
    assert audit.refused() == ["403 list certificates.k8s.io/certificatesigningrequests"]

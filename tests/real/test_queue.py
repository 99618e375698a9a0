"""The KaiwoConfig's queue on the real control plane with upstream Kueue v0.17 and LeaderWorkerSet v0.9
(tests/queue_scenarios.py, the same scenarios the embedded twin runs in tests/integration/test_queue_e2e.py):
our ClusterQueue, ResourceFlavors, Topology and LocalQueues accepted by Kueue's CRDs and conversion
webhook, our Deployments admitted through Kueue's ``deployment`` and ``pod`` integrations, a ModelInfer
group as one pod group, a LeaderWorkerSet's groups whole, Kueue's own words in our status, a CPX
repartition admitting what waited, a lower quota evicting nothing.

The neighbours' control plane (tests/real/conftest.py ``neighbour_cluster``: two MI300X kwok nodes, Kueue,
LWS, the Gateway API CRDs; shared with test_neighbours.py), the chart installed by Helm's engine, the
simulated AMD GPU operator, and one operator process as the chart's ServiceAccount running the
partitioning, KaiwoConfig, DynamoComponentDeployment and ModelInfer controllers. The module fails if
kube's RBAC refused that operator anything or it logged an error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client, config

from aiplane.controllers.kaiwo.kueue import MANAGED_LABEL, MANAGED_VALUE, TOPOLOGY_NAME
from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import CLUSTERQUEUES, NAMESPACES, PODS, RESOURCEFLAVORS
from aiplane.realcluster import RealCluster
from tests import queue_scenarios as scenario
from tests.polling import eventually
from tests.real import operator as op
from tests.real.conftest import chart_release, hardware_process
from tests.real.watching import following

pytestmark = pytest.mark.real

CONTROLLERS = (
    "partitioningprofile,partitioningplan,nodepartitioning,kaiwoconfig,dynamocomponentdeployment,modelinfer"
)
KAIWO = ("config.kaiwo.silogen.ai", "v1alpha1", "kaiwoconfigs", "kaiwo")


@dataclass(frozen=True)
class QueueCluster:
    cluster: RealCluster
    operator: op.Process


def _kaiwo_dynamic(cluster: RealCluster) -> None:
    """Wait for the controller's KaiwoConfig singleton, then keep its queues current (as the twin does)."""
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    custom = client.CustomObjectsApi(api)
    group, version, plural, name = KAIWO
    end = time.monotonic() + 60
    try:
        while True:
            try:
                custom.get_cluster_custom_object(group, version, plural, name)
                break
            except client.ApiException as exc:
                assert exc.status == 404 and time.monotonic() < end, f"no KaiwoConfig kaiwo: {exc}"
                time.sleep(0.1)
        custom.patch_cluster_custom_object(
            group, version, plural, name, {"spec": {"dynamicallyUpdateDefaultClusterQueue": True}}
        )
    finally:
        api.close()


@pytest.fixture(scope="module")
def queue_cluster(
    neighbour_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueueCluster]:
    """The chart, the simulated AMD GPU operator and the operator on the neighbours' control plane (two
    MI300X nodes in SPX, Kueue and LWS); stopped at the end of the module, the audit and the log checked."""
    assert scenario.NODES_IN_POOL == 2, "the neighbours' fleet (tests/real/conftest.py) has two MI300X nodes"
    cluster = neighbour_cluster
    work = tmp_path_factory.mktemp("queue")
    release = chart_release(cluster, work)
    audit = op.Audit.from_now(cluster.audit_log, release.user)
    with op.running(hardware_process(cluster, work / "hardware.log")):
        operator = op.operator_process(
            release, CONTROLLERS, work / "operator.log", "--gang-scheduler", "coscheduling"
        ).start()
        try:
            _kaiwo_dynamic(cluster)
            yield QueueCluster(cluster, operator)
        finally:
            operator.stop()
    refused = audit.refused()
    assert not refused, f"kube's RBAC refused the chart's ServiceAccount (403): {refused}\n{operator.tail()}"
    errors = operator.errors()
    assert not errors, "the operator logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
async def admin(queue_cluster: QueueCluster) -> AsyncIterator[HttpKubeClient]:
    http = await HttpKubeClient.from_kubeconfig(str(queue_cluster.cluster.kubeconfig))
    yield http
    await http.close()


@pytest.fixture
async def namespace(admin: HttpKubeClient, queue_cluster: QueueCluster) -> AsyncIterator[str]:
    """A namespace of the test's own; deleted after it, and gone (its pods and Workloads with it) before
    the next test, which may need the quota they held."""
    name = f"q-{uuid.uuid4().hex[:8]}"
    await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    assert queue_cluster.operator.alive(), queue_cluster.operator.tail()
    await admin.delete(NAMESPACES, name)

    async def gone() -> bool:
        # Nothing stands in for Kueue here: the operator releases our pods Kueue would hold for ever.
        return all(n["metadata"]["name"] != name for n in (await admin.list(NAMESPACES))["items"])

    try:
        await eventually(gone, timeout=90, what=f"namespace {name} deleted", interval=0.2)
    except AssertionError:
        left = (await admin.list(PODS, namespace=name))["items"]
        held = [
            (p["metadata"]["name"], p["metadata"].get("finalizers"), p["spec"].get("nodeName")) for p in left
        ]
        ns = await admin.get(NAMESPACES, name)
        raise AssertionError(
            f"namespace {name} not deleted: pods {held}; status {ns.get('status')}"
        ) from None


# Module order matters: the first scenario starts from SPX and rolls to CPX; the others reach CPX themselves
# (scenario.to_cpx) and then find it done.


async def test_over_quota_waits_in_kueues_words_until_cpx_admits_it(
    admin: HttpKubeClient, namespace: str
) -> None:
    await scenario.over_quota_waits_in_kueues_words_until_cpx(admin, namespace)


async def test_lowering_the_quota_evicts_nothing(admin: HttpKubeClient, namespace: str) -> None:
    await scenario.lowering_the_quota_evicts_nothing(admin, namespace)


async def test_leaderworkerset_groups_are_admitted_whole(admin: HttpKubeClient, namespace: str) -> None:
    await scenario.leaderworkerset_groups_are_admitted_whole(admin, namespace)


async def test_a_modelinfer_group_over_quota_waits_in_kueues_words_until_cpx(
    admin: HttpKubeClient, namespace: str
) -> None:
    await scenario.modelinfer_group_waits_in_kueues_words_until_cpx(admin, namespace)


async def test_the_opt_out_annotation_keeps_a_modelinfer_out_of_the_queue(
    admin: HttpKubeClient, namespace: str
) -> None:
    await scenario.modelinfer_opt_out_is_never_queued(admin, namespace)


async def test_opt_out_is_never_queued(admin: HttpKubeClient, namespace: str) -> None:
    await scenario.opt_out_is_never_queued(admin, namespace)


async def test_a_queued_modelinfers_groups_are_replaced_and_admitted(
    admin: HttpKubeClient, namespace: str
) -> None:
    await scenario.queued_modelinfer_groups_are_replaced(admin, namespace, following)


async def test_a_queued_group_replaced_whole_keeps_its_workload_and_its_pods(
    admin: HttpKubeClient, namespace: str
) -> None:
    await scenario.a_wholly_replaced_group_keeps_its_workload(admin, namespace, following)


async def test_a_flavor_of_ours_made_topology_aware_is_recreated_without_a_topology(
    admin: HttpKubeClient, namespace: str
) -> None:
    """Someone gives one of our flavors a ``topologyName`` (immutable from then on): the controller deletes
    it past Kueue's in-use finalizer (our ClusterQueue keeps naming it, so Kueue alone would hold the
    delete for ever) and creates it again as ours, and the ClusterQueue admits again."""
    (flavor,) = [
        f
        for f in (await admin.list(RESOURCEFLAVORS))["items"]
        if f["metadata"].get("labels", {}).get(MANAGED_LABEL) == MANAGED_VALUE
        and f["metadata"]["name"].startswith("amd-mi300x-")
    ]
    name, uid = flavor["metadata"]["name"], flavor["metadata"]["uid"]
    await admin.patch(RESOURCEFLAVORS, name, {"spec": {"topologyName": TOPOLOGY_NAME}})

    async def recreated() -> bool:
        try:
            now = await admin.get(RESOURCEFLAVORS, name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return now["metadata"]["uid"] != uid and "topologyName" not in now["spec"]

    await eventually(
        recreated, timeout=60, what=f"flavor {name} recreated without topologyName", interval=0.2
    )

    async def active() -> bool:
        cq = await admin.get(CLUSTERQUEUES, scenario.QUEUE)
        conditions = {c["type"]: c["status"] for c in cq.get("status", {}).get("conditions", [])}
        return conditions.get("Active") == "True"

    await eventually(active, timeout=60, what="the ClusterQueue active again", interval=0.2)
    await scenario.opt_out_is_never_queued(admin, namespace)  # and workloads still run

"""The upstream neighbours run on the real control plane as ``cluster up --with`` starts them: LeaderWorkerSet
builds its groups (leader and worker StatefulSets, its webhook's env in each pod) and reports them ready once
kwok runs the pods; Kueue gates a queued pod, admits it within its ClusterQueue's quota (queues written at
v1beta1, converted by its webhook) and keeps the next one gated, saying which quota is short; the Gateway API's CRDs are served. One control plane with the
neighbours serves the whole module (tests/real/conftest.py: ``neighbour_cluster``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from aiplane.realcluster import RealCluster
from tests.polling import eventually

pytestmark = pytest.mark.real

LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
KUEUE = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
# The queues are written at v1beta1, as aiplane's KaiwoConfig controller writes them (controllers/kaiwo/kueue.py):
# Kueue v0.17 stores v1beta2, so the API server converts through Kueue's conversion webhook on 127.0.0.1.
QUEUES_VERSION = "v1beta1"
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture
def api(neighbour_cluster: RealCluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(neighbour_cluster.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"nb-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def _env(pod: client.V1Pod) -> dict[str, str]:
    (container,) = pod.spec.containers
    return {e.name: e.value for e in container.env or []}


async def test_leaderworkerset_group_gets_lws_env_and_turns_ready(
    api: client.ApiClient, namespace: str
) -> None:
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    container = {"name": "server", "image": "vllm:fake", "resources": {"requests": {"cpu": "100m"}}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [container]}}},
        },
    }
    custom.create_namespaced_custom_object(*LWS[:2], namespace, LWS[2], lws)

    def group() -> dict[str, client.V1Pod] | None:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        return pods if {"infer-0", "infer-0-1"} <= pods.keys() else None

    pods = await eventually(group, timeout=30, what="the leader pod infer-0 and its worker infer-0-1")
    leader, worker = _env(pods["infer-0"]), _env(pods["infer-0-1"])
    address = f"infer-0.infer.{namespace}"
    assert leader["LWS_LEADER_ADDRESS"] == worker["LWS_LEADER_ADDRESS"] == address
    assert leader["LWS_GROUP_SIZE"] == worker["LWS_GROUP_SIZE"] == "2"
    assert (leader["LWS_WORKER_INDEX"], worker["LWS_WORKER_INDEX"]) == ("0", "1")
    # The leader StatefulSet (one per LWS) and the group's worker StatefulSet (one per leader).
    assert apps.read_namespaced_stateful_set("infer", namespace).spec.replicas == 1
    assert apps.read_namespaced_stateful_set("infer-0", namespace).spec.replicas == 1

    def ready() -> bool:
        # What aiplane's Dynamo status reads of a LeaderWorkerSet (component_status._lws_ready).
        status = custom.get_namespaced_custom_object(*LWS[:2], namespace, LWS[2], "infer").get("status", {})
        available = {c["type"]: c["status"] for c in status.get("conditions", [])}.get("Available")
        return status.get("readyReplicas") == 1 and status.get("updatedReplicas") == 1 and available == "True"

    await eventually(
        ready, timeout=60, what="LWS readyReplicas 1, updatedReplicas 1, Available (kwok runs both pods)"
    )


def _queues(custom: client.CustomObjectsApi, namespace: str, flavor: str) -> None:
    """A ResourceFlavor, a ClusterQueue with one CPU of quota for this namespace alone, and its LocalQueue."""
    custom.create_cluster_custom_object(
        KUEUE,
        QUEUES_VERSION,
        "resourceflavors",
        {"apiVersion": f"{KUEUE}/{QUEUES_VERSION}", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
    )
    cluster_queue = {
        "apiVersion": f"{KUEUE}/{QUEUES_VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": namespace},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(KUEUE, QUEUES_VERSION, "clusterqueues", cluster_queue)
    local_queue = {
        "apiVersion": f"{KUEUE}/{QUEUES_VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": "team"},
        "spec": {"clusterQueue": namespace},
    }
    custom.create_namespaced_custom_object(KUEUE, QUEUES_VERSION, namespace, "localqueues", local_queue)


def _queued_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "containers": [{"name": "c", "image": "job:fake", "resources": {"requests": {"cpu": "600m"}}}]
        },
    }


def _gates(pod: client.V1Pod) -> set[str]:
    return {g.name for g in pod.spec.scheduling_gates or []}


async def test_kueue_admits_within_quota_and_names_the_quota_that_is_short(
    api: client.ApiClient, namespace: str
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    flavor = f"{namespace}-flavor"
    _queues(custom, namespace, flavor)
    try:
        made = core.create_namespaced_pod(namespace, _queued_pod("first"))
        assert GATE in _gates(made), "Kueue's webhook did not gate the queued pod"

        def running(name: str) -> bool:
            pod = core.read_namespaced_pod(name, namespace)
            return not _gates(pod) and bool(pod.spec.node_name) and pod.status.phase == "Running"

        await eventually(
            lambda: running("first"), timeout=30, what="the first pod admitted, bound and Running"
        )
        second = core.create_namespaced_pod(namespace, _queued_pod("second"))

        def pending_message() -> str | None:
            for workload in custom.list_namespaced_custom_object(
                KUEUE, KUEUE_VERSION, namespace, "workloads"
            )["items"]:
                owners = {o["uid"] for o in workload["metadata"].get("ownerReferences", [])}
                if second.metadata.uid not in owners:
                    continue
                for condition in workload.get("status", {}).get("conditions", []):
                    if condition["type"] == "QuotaReserved" and condition["status"] == "False":
                        return str(condition["message"])
            return None

        message = await eventually(
            pending_message, timeout=30, what="the second pod's Workload held for quota"
        )
        assert "insufficient" in message
        assert f"quota for cpu in flavor {flavor}" in message, message
        still = core.read_namespaced_pod("second", namespace)
        assert GATE in _gates(still)
        assert not still.spec.node_name
    finally:
        # Cluster-scoped, so the namespace's deletion does not take them along.
        custom.delete_cluster_custom_object(KUEUE, QUEUES_VERSION, "clusterqueues", namespace)
        custom.delete_cluster_custom_object(KUEUE, QUEUES_VERSION, "resourceflavors", flavor)


def test_gateway_api_crds_are_served(api: client.ApiClient) -> None:
    resources = client.CustomObjectsApi(api).get_api_resources("gateway.networking.k8s.io", "v1").resources
    assert {"Gateway", "GatewayClass", "HTTPRoute", "GRPCRoute"} <= {r.kind for r in resources}

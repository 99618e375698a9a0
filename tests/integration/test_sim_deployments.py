"""Deployments on an embedded cluster with its agents: the Deployment controller makes a ReplicaSet per
template, the ReplicaSet controller makes the pods, kube-scheduler-lite binds them and kubelet-lite runs
them. Driven through ``InMemoryKubeClient.for_cluster``; every wait polls with a deadline.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from aiplane.apimachinery import objects
from aiplane.kube.resources import DEPLOYMENTS, PODS, Resource
from aiplane.sim.agents.base import PODS as POD_KEY
from aiplane.sim.agents.base import pod_ready
from aiplane.sim.apiserver import table
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import agent_cluster, until

Obj = dict[str, Any]
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster() as sim:
        yield sim


@pytest.fixture
def client(cluster: EmbeddedCluster) -> InMemoryKubeClient:
    return InMemoryKubeClient.for_cluster(cluster)


def deployment(name: str = "web", replicas: int = 4, image: str = "web:1", **spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": image, "resources": {"requests": {"cpu": "100m"}}}
                    ]
                },
            },
            **spec,
        },
    }


async def replicasets(client: InMemoryKubeClient, app: str = "web") -> dict[str, Obj]:
    items = (await client.list(REPLICASETS, "default", label_selector=f"app={app}"))["items"]
    return {rs["metadata"]["name"]: rs for rs in items}


async def pods(client: InMemoryKubeClient, app: str = "web") -> list[Obj]:
    items = (await client.list(PODS, "default", label_selector=f"app={app}"))["items"]
    return [p for p in items if not objects.is_deleting(p)]


async def rolled_out(
    client: InMemoryKubeClient, name: str = "web", generation: int | None = None
) -> Obj | None:
    """The Deployment once its Progressing condition says the new ReplicaSet is available."""
    deploy = await client.get(DEPLOYMENTS, name, namespace="default")
    status = deploy.get("status") or {}
    if generation is not None and status.get("observedGeneration") != generation:
        return None
    reasons = {c["type"]: c["reason"] for c in status.get("conditions") or []}
    if (
        reasons.get("Progressing") != "NewReplicaSetAvailable"
        or reasons.get("Available") != "MinimumReplicasAvailable"
    ):
        return None
    return deploy


class Limits:
    """Checks, on every committed pod change, the rollout limits of the ``app=web`` pods."""

    def __init__(self, cluster: EmbeddedCluster, replicas: int, max_surge: int, max_unavailable: int) -> None:
        self.store = cluster.server.api.store
        self.replicas, self.surge, self.unavailable = replicas, max_surge, max_unavailable
        self.max_total = 0
        self.min_available = replicas
        self.checks = 0
        self.progress: list[str] = []

    def __call__(self, event: Event) -> None:
        if event.key != POD_KEY:
            return
        live = [
            p
            for p in self.store.items(POD_KEY, "default")
            if objects.labels(p).get("app") == "web" and not objects.is_deleting(p)
        ]
        self.max_total = max(self.max_total, len(live))
        self.min_available = min(self.min_available, sum(1 for p in live if pod_ready(p)))
        self.checks += 1

    def reasons(self, event: Event) -> None:
        """The Deployment's ``Progressing`` reasons, in the order they were committed."""
        if event.key.endswith("/deployments") and objects.name(event.obj) == "web":
            for cond in objects.status(event.obj).get("conditions") or []:
                if cond["type"] == "Progressing" and (
                    not self.progress or self.progress[-1] != cond["reason"]
                ):
                    self.progress.append(cond["reason"])

    def assert_held(self) -> None:
        assert self.checks > 0
        assert self.max_total <= self.replicas + self.surge
        assert self.min_available >= self.replicas - self.unavailable


async def test_deployment_becomes_available_with_its_replicaset_and_pods(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    await client.create(DEPLOYMENTS, deployment(), namespace="default")
    deploy = await until(lambda: rolled_out(client), "the Deployment rolled out")
    status = deploy["status"]
    assert (
        status["replicas"],
        status["updatedReplicas"],
        status["readyReplicas"],
        status["availableReplicas"],
    ) == (4, 4, 4, 4)
    assert "unavailableReplicas" not in status
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["message"] == "Deployment has minimum availability."

    (rs,) = (await replicasets(client)).values()
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": pod_hash}
    assert conditions["Progressing"]["message"] == f'ReplicaSet "web-{pod_hash}" has successfully progressed.'
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Deployment", "web", True)
    assert rs["status"]["availableReplicas"] == 4 and rs["status"]["fullyLabeledReplicas"] == 4

    running = await pods(client)
    assert len(running) == 4
    for pod in running:
        assert pod["metadata"]["name"].startswith(f"web-{pod_hash}-")
        assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": pod_hash}
        assert pod["metadata"]["ownerReferences"][0]["name"] == rs["metadata"]["name"]
        assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"]

    # what kubectl get deploy,rs prints comes from these status fields
    now = datetime.now(UTC)
    deploy_rt = cluster.server.api.resource("apps/v1", "Deployment")
    rs_rt = cluster.server.api.resource("apps/v1", "ReplicaSet")
    assert table.rows_for(deploy_rt, [deploy], now)[1][0]["cells"][:4] == ["web", "4/4", 4, 4]
    rs = (await replicasets(client))[rs["metadata"]["name"]]
    assert table.rows_for(rs_rt, [rs], now)[1][0]["cells"][:4] == [rs["metadata"]["name"], 4, 4, 4]

    # steady: a resync of both controllers writes nothing
    agents = cluster.agents
    assert agents is not None
    await until(lambda: _true(agents.idle), "the agents idle")
    writes: list[Event] = []
    cluster.server.api.store.subscribe(writes.append)
    try:
        agents.deployments.resync()
        agents.replicasets.resync()
        await until(lambda: _true(agents.idle), "the resync done")
    finally:
        cluster.server.api.store.unsubscribe(writes.append)
    assert writes == []


async def _true(value: bool) -> bool:
    return value


async def test_image_change_rolls_out_within_the_limits(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}
    await client.create(DEPLOYMENTS, deployment(replicas=4, **spec), namespace="default")
    await until(lambda: rolled_out(client), "the first rollout")
    (first,) = await replicasets(client)

    limits = Limits(cluster, replicas=4, max_surge=1, max_unavailable=1)
    cluster.server.api.store.subscribe(limits)
    cluster.server.api.store.subscribe(limits.reasons)
    try:
        await client.patch(
            DEPLOYMENTS,
            "web",
            {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:2"}]}}}},
            namespace="default",
        )
        deploy = await until(lambda: rolled_out(client, generation=2), "the image rolled out", timeout=10)
    finally:
        cluster.server.api.store.unsubscribe(limits)
        cluster.server.api.store.unsubscribe(limits.reasons)
    limits.assert_held()
    assert limits.progress == [
        "NewReplicaSetAvailable",
        "NewReplicaSetCreated",
        "ReplicaSetUpdated",
        "NewReplicaSetAvailable",
    ]

    sets = await replicasets(client)
    assert set(sets) >= {first} and len(sets) == 2
    assert sets[first]["spec"]["replicas"] == 0
    (second,) = set(sets) - {first}
    assert sets[second]["spec"]["replicas"] == 4
    assert sets[second]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert deploy["status"]["updatedReplicas"] == 4
    images = {p["spec"]["containers"][0]["image"] for p in await pods(client)}
    assert images == {"web:2"}


async def test_recreate_takes_every_old_pod_down_before_the_new_ones(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    await client.create(
        DEPLOYMENTS, deployment(replicas=3, strategy={"type": "Recreate"}), namespace="default"
    )
    await until(lambda: rolled_out(client), "the first rollout")
    (first,) = await replicasets(client)
    store = cluster.server.api.store
    mixed: list[set[str]] = []

    def watch(event: Event) -> None:
        if event.key == POD_KEY:
            images = {
                p["spec"]["containers"][0]["image"]
                for p in store.items(POD_KEY, "default")
                if objects.labels(p).get("app") == "web" and not objects.is_deleting(p)
            }
            if len(images) > 1:
                mixed.append(images)

    store.subscribe(watch)
    try:
        await client.patch(
            DEPLOYMENTS,
            "web",
            {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:2"}]}}}},
            namespace="default",
        )
        await until(lambda: rolled_out(client, generation=2), "the Recreate rollout", timeout=10)
    finally:
        store.unsubscribe(watch)
    assert mixed == []
    sets = await replicasets(client)
    assert sets[first]["spec"]["replicas"] == 0
    assert {p["spec"]["containers"][0]["image"] for p in await pods(client)} == {"web:2"}
    assert len(await pods(client)) == 3


async def test_scale_up_and_down(client: InMemoryKubeClient) -> None:
    await client.create(DEPLOYMENTS, deployment(replicas=2), namespace="default")
    await until(lambda: rolled_out(client), "two replicas")
    for replicas, generation in ((5, 2), (1, 3)):
        await client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": replicas}}, namespace="default")

        async def scaled(replicas: int = replicas, generation: int = generation) -> bool:
            deploy = await rolled_out(client, generation=generation)
            return bool(
                deploy
                and deploy["status"].get("availableReplicas") == replicas
                and len(await pods(client)) == replicas
            )

        await until(scaled, f"scaled to {replicas}")
        (rs,) = (await replicasets(client)).values()
        assert rs["spec"]["replicas"] == replicas
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == str(replicas)


async def test_deleted_pod_is_replaced_and_paused_deployment_does_not_roll(
    client: InMemoryKubeClient,
) -> None:
    await client.create(DEPLOYMENTS, deployment(replicas=2), namespace="default")
    await until(lambda: rolled_out(client), "rolled out")
    victim = (await pods(client))[0]["metadata"]["name"]
    await client.delete(PODS, victim, namespace="default")

    async def replaced() -> bool:
        names = {p["metadata"]["name"] for p in await pods(client) if pod_ready(p)}
        return len(names) == 2 and victim not in names

    await until(replaced, "the deleted pod replaced")

    await client.patch(DEPLOYMENTS, "web", {"spec": {"paused": True}}, namespace="default")
    changed = copy.deepcopy(deployment(image="web:2")["spec"]["template"])
    await client.patch(DEPLOYMENTS, "web", {"spec": {"template": changed}}, namespace="default")

    async def paused() -> bool:
        deploy = await client.get(DEPLOYMENTS, "web", namespace="default")
        status = deploy.get("status") or {}
        reasons = {c["type"]: c["reason"] for c in status.get("conditions") or []}
        return status.get("observedGeneration") == 3 and reasons.get("Progressing") == "DeploymentPaused"

    await until(paused, "the pause observed")
    assert len(await replicasets(client)) == 1
    assert {p["spec"]["containers"][0]["image"] for p in await pods(client)} == {"web:1"}

    await client.patch(DEPLOYMENTS, "web", {"spec": {"paused": False}}, namespace="default")
    await until(lambda: rolled_out(client, generation=4), "rolled out once resumed", timeout=10)
    assert {p["spec"]["containers"][0]["image"] for p in await pods(client)} == {"web:2"}

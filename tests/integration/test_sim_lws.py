"""The simulated LeaderWorkerSet controller on an embedded cluster with agents, driven through
``InMemoryKubeClient.for_cluster``: groups of pods Running with LWS's names, labels and env, the
headless Service, status, startup policy, scaling, group recreation and cascading deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiplane.controllers.dynamo.multinode import MultinodeInput, multinode_templates
from aiplane.kube.client import ApiError
from aiplane.kube.resources import LEADERWORKERSETS, PODS, SECRETS, SERVICES
from aiplane.sim.agents.base import pod_ready
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import agent_cluster, until
from tests.unit.dynamo_multinode.shell import expand, run_script

Obj = dict[str, Any]
NS = "default"
SELECT = "leaderworkerset.sigs.k8s.io/name=vllm"
WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster() as sim:
        yield sim


@pytest.fixture
def client(cluster: EmbeddedCluster) -> InMemoryKubeClient:
    return InMemoryKubeClient.for_cluster(cluster)


def lws_body(replicas: int = 2, size: int = 2, **spec: Any) -> Obj:
    container = {"name": "vllm", "image": "vllm/vllm-openai", "env": [{"name": "MODEL", "value": "m"}]}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "metadata": {"labels": {"app": "vllm"}},
                    "spec": {"containers": [container]},
                },
            },
            **spec,
        },
    }


async def pods(client: InMemoryKubeClient) -> dict[str, Obj]:
    listed = await client.list(PODS, NS, label_selector=SELECT)
    return {p["metadata"]["name"]: p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")}


def env(pod: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


def condition(lws: Obj, kind: str) -> str | None:
    for cond in (lws.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


async def available(client: InMemoryKubeClient, ready: int) -> Obj | None:
    lws = await client.get(LEADERWORKERSETS, "vllm", NS)
    status = lws.get("status") or {}
    ok = condition(lws, "Available") == "True" and status.get("readyReplicas", 0) == ready
    return lws if ok else None


async def test_two_groups_of_two_run_with_lws_names_labels_env_and_status(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    await client.create(LEADERWORKERSETS, lws_body(), namespace=NS)
    lws = await until(lambda: available(client, 2), "LWS Available with 2 ready groups")
    found = await pods(client)
    assert sorted(found) == ["vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1"]
    assert all(p["status"]["phase"] == "Running" and pod_ready(p) for p in found.values())
    for name, pod in found.items():
        group, worker = [*name.split("-")[1:], "0"][:2]
        labels = pod["metadata"]["labels"]
        assert labels["app"] == "vllm"
        assert labels["leaderworkerset.sigs.k8s.io/group-index"] == group
        assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == worker
        assert (
            labels["leaderworkerset.sigs.k8s.io/group-key"]
            == (found[f"vllm-{group}"]["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"])
        )
        assert env(pod) == {
            "LWS_LEADER_ADDRESS": f"vllm-{group}.vllm.{NS}",
            "LWS_GROUP_SIZE": "2",
            "LWS_WORKER_INDEX": worker,
            "MODEL": "m",
        }
    svc = await client.get(SERVICES, "vllm", NS)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "vllm"
    }
    status = lws["status"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (2, 2, 2)
    assert status["hpaPodSelector"] == f"{SELECT},leaderworkerset.sigs.k8s.io/worker-index=0"
    assert condition(lws, "Progressing") == "False"

    # steady state: a full resync of the controller writes nothing
    assert cluster.agents is not None
    writes: list[Any] = []
    cluster.server.store.subscribe(writes.append)
    try:
        cluster.agents.lws.resync()
        await until(lambda: _idle(cluster), "agents idle")
        cluster.agents.lws.resync()
        await until(lambda: _idle(cluster), "agents idle again")
    finally:
        cluster.server.store.unsubscribe(writes.append)
    assert writes == []


async def _idle(cluster: EmbeddedCluster) -> bool:
    assert cluster.agents is not None
    return cluster.agents.idle


async def test_leader_ready_starts_workers_only_after_the_leader_is_ready(
    cluster: EmbeddedCluster, client: InMemoryKubeClient
) -> None:
    assert cluster.agents is not None
    cluster.agents.kubelet.ready_delay = 0.3
    store = cluster.server.store
    early: list[str] = []

    def check(event: Event) -> None:
        """On every committed pod write: a worker is never created before its leader is Ready."""
        labels = event.obj["metadata"].get("labels") or {}
        if event.key == "/pods" and event.type == "ADDED" and labels.get(WORKER) not in (None, "0"):
            leader = store.get("/pods", NS, f"vllm-{labels['leaderworkerset.sigs.k8s.io/group-index']}")
            if leader is None or not pod_ready(leader):
                early.append(event.obj["metadata"]["name"])

    store.subscribe(check)
    try:
        body = lws_body(replicas=2, size=3, startupPolicy="LeaderReady")
        await client.create(LEADERWORKERSETS, body, namespace=NS)
        leader = await until(lambda: _pod(client, "vllm-0"), "leader created")
        assert not (await pods(client)).keys() - {"vllm-0", "vllm-1"}, "workers before the leader is Ready"
        found = await until(lambda: _all(client, 6), "workers after the leaders")
        assert leader["metadata"]["uid"] == found["vllm-0"]["metadata"]["uid"]
        await until(lambda: available(client, 2), "Available")
    finally:
        store.unsubscribe(check)
    assert early == []


async def _pod(client: InMemoryKubeClient, name: str) -> Obj | None:
    return (await pods(client)).get(name)


async def _all(client: InMemoryKubeClient, count: int) -> dict[str, Obj] | None:
    found = await pods(client)
    return found if len(found) == count else None


async def test_scale_down_removes_the_highest_group_and_delete_cascades(client: InMemoryKubeClient) -> None:
    await client.create(LEADERWORKERSETS, lws_body(replicas=3), namespace=NS)
    await until(lambda: available(client, 3), "3 groups")
    await client.patch(LEADERWORKERSETS, "vllm", {"spec": {"replicas": 2}}, namespace=NS)

    async def scaled() -> bool:
        return sorted(await pods(client)) == ["vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1"]

    await until(scaled, "group 2 removed")
    lws = await until(lambda: available(client, 2), "2 groups")
    assert lws["status"]["replicas"] == 2

    await client.patch(LEADERWORKERSETS, "vllm", {"spec": {"replicas": 3}}, namespace=NS)
    await until(lambda: _all(client, 6), "scaled back up")

    await client.delete(LEADERWORKERSETS, "vllm", namespace=NS)

    async def gone() -> bool:
        services = await client.list(SERVICES, NS, label_selector=SELECT)
        return not (await client.list(PODS, NS, label_selector=SELECT))["items"] and not services["items"]

    await until(gone, "pods and service deleted with the LWS")


async def test_a_deleted_worker_recreates_its_group(client: InMemoryKubeClient) -> None:
    await client.create(LEADERWORKERSETS, lws_body(replicas=1), namespace=NS)
    await until(lambda: available(client, 1), "Available")
    before = await pods(client)
    await client.delete(PODS, "vllm-0-1", namespace=NS)

    async def recreated() -> dict[str, Obj] | None:
        found = await pods(client)
        if len(found) != 2 or found["vllm-0"]["metadata"]["uid"] == before["vllm-0"]["metadata"]["uid"]:
            return None
        return found if all(pod_ready(p) for p in found.values()) else None

    await until(recreated, "group recreated with a new leader")


async def test_a_template_change_replaces_every_group(client: InMemoryKubeClient) -> None:
    await client.create(LEADERWORKERSETS, lws_body(replicas=2), namespace=NS)
    await until(lambda: available(client, 2), "Available")
    patch = {
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [{"name": "vllm", "image": "v2"}]}}
            }
        }
    }
    await client.patch(LEADERWORKERSETS, "vllm", patch, namespace=NS)

    async def rolled() -> Obj | None:
        found = await pods(client)
        images = {p["spec"]["containers"][0]["image"] for p in found.values()}
        return await available(client, 2) if len(found) == 4 and images == {"v2"} else None

    lws = await until(rolled, "rolled to v2")
    assert lws["status"]["updatedReplicas"] == 2


async def test_missing_lws_is_404(client: InMemoryKubeClient) -> None:
    with pytest.raises(ApiError):
        await client.get(LEADERWORKERSETS, "nope", NS)


async def test_dynamo_trtllm_leader_reaches_every_pod_of_its_group_by_lws_env_alone(
    client: InMemoryKubeClient, tmp_path: Path
) -> None:
    """LWS injects only LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX (``AddLWSVariables``);
    the mpirun host list Dynamo's TRT-LLM leader builds from them must name each pod's DNS address."""
    main = {
        "name": "main",
        "image": "trtllm",
        "command": ["/bin/sh", "-c"],
        "args": ["python3 -m dynamo.trtllm"],
    }
    base = {"metadata": {"labels": {"app": "trt"}}, "spec": {"containers": [main]}}
    leader_tpl, worker_tpl = multinode_templates(base, MultinodeInput("trtllm", 3, 4, "mpi-ssh"))
    body = lws_body(replicas=1, size=3)
    body["spec"]["leaderWorkerTemplate"].update(leaderTemplate=leader_tpl, workerTemplate=worker_tpl)
    # The SSH keypair Secret the templates mount (the kubelet waits for it, as a real one does).
    ssh = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mpi-ssh"}, "stringData": {"k": "v"}}
    await client.create(SECRETS, ssh, namespace=NS)
    await client.create(LEADERWORKERSETS, body, namespace=NS)
    await until(lambda: available(client, 1), "LWS Available with its group ready")
    found = await pods(client)
    assert sorted(found) == ["vllm-0", "vllm-0-1", "vllm-0-2"]
    for pod in found.values():
        assert {k for k in env(pod) if k.startswith("LWS_")} == {
            "LWS_LEADER_ADDRESS",
            "LWS_GROUP_SIZE",
            "LWS_WORKER_INDEX",
        }
    leader = found["vllm-0"]
    container = leader["spec"]["containers"][0]
    script = expand(container["args"][0], env(leader))
    ran = run_script(script, env(leader), ("ls", "cp", "chmod", "mpirun"), tmp_path)
    hosts = ran[ran.index("-H") + 1].split(",")
    addresses = [f"{p['spec']['hostname']}.{p['spec']['subdomain']}.{NS}" for p in found.values()]
    assert sorted(hosts) == sorted(addresses) and hosts[0] == f"vllm-0.vllm.{NS}"

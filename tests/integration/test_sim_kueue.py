"""Kueue's admission as the embedded cluster plays it, through the API only (these tests say what real
Kueue does on the same objects): gated pods, a Workload per pod group, admission against the
ClusterQueue's nominal quota with Kueue's messages, quota growth admitting, quota shrink evicting
nothing, and a Deployment's pods queued one by one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.kube.resources import CLUSTERQUEUES, DEPLOYMENTS, LOCALQUEUES, PODS, RESOURCEFLAVORS, WORKLOADS
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration.sim_helpers import agent_cluster, events, until

Obj = dict[str, Any]
NS = "default"
GATE = "kueue.x-k8s.io/admission"
FLAVOR = "mi300x"


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=2, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    async with agent_cluster(fleet) as sim:
        yield await queues(sim, gpus=8)


async def queues(sim: EmbeddedCluster, gpus: int) -> InMemoryKubeClient:
    client = InMemoryKubeClient.for_cluster(sim)
    await client.create(
        RESOURCEFLAVORS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {},
        },
    )
    await client.create(CLUSTERQUEUES, cluster_queue(gpus))
    await client.create(
        LOCALQUEUES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": NS},
            "spec": {"clusterQueue": "cq"},
        },
        namespace=NS,
    )
    return client


def cluster_queue(gpus: int) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["amd.com/gpu"],
                    "flavors": [
                        {"name": FLAVOR, "resources": [{"name": "amd.com/gpu", "nominalQuota": str(gpus)}]}
                    ],
                }
            ],
        },
    }


def group_pod(group: str, index: int, total: int, gpus: int = 2) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{index}",
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/pod-group-name": group},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)},
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "vllm", "resources": {"limits": {"amd.com/gpu": str(gpus)}}}
            ]
        },
    }


async def submit(client: InMemoryKubeClient, group: str, total: int, gpus: int = 2) -> list[Obj]:
    """The pods as the API server stored them at creation."""
    return [await client.create(PODS, group_pod(group, i, total, gpus), namespace=NS) for i in range(total)]


def gated(pod: Obj) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def condition(wl: Obj, kind: str) -> Obj | None:
    for cond in (wl.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


async def workload(client: InMemoryKubeClient, name: str) -> Obj | None:
    found = [w for w in (await client.list(WORKLOADS, NS))["items"] if w["metadata"]["name"] == name]
    return found[0] if found else None


async def group_pods(client: InMemoryKubeClient, group: str) -> list[Obj]:
    listed = await client.list(PODS, NS, label_selector=f"kueue.x-k8s.io/pod-group-name={group}")
    return list(listed["items"])


async def running(client: InMemoryKubeClient, group: str) -> bool:
    pods = await group_pods(client, group)
    return bool(pods) and all(p["status"].get("phase") == "Running" and not gated(p) for p in pods)


async def test_a_pod_group_that_fits_is_admitted_and_runs(client: InMemoryKubeClient) -> None:
    pods = await submit(client, "a", total=2)
    assert all(gated(p) for p in pods), "the webhook gates every pod with a queue name"
    assert all(p["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true" for p in pods)

    async def admitted() -> Obj | None:
        wl = await workload(client, "a")
        ok = wl is not None and (condition(wl, "Admitted") or {}).get("status") == "True"
        return wl if ok else None

    wl = await until(admitted, "the group's Workload admitted")
    assert wl["spec"]["queueName"] == "team"
    assert sum(ps["count"] for ps in wl["spec"]["podSets"]) == 2
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"] == {"amd.com/gpu": FLAVOR}
    assert assignment["resourceUsage"] == {"amd.com/gpu": "4"}
    assert (condition(wl, "QuotaReserved") or {})["message"] == "Quota reserved in ClusterQueue cq"
    await until(lambda: running(client, "a"), "the admitted group ungated and Running")


async def test_over_quota_waits_with_kueues_message_and_is_admitted_when_quota_grows(
    client: InMemoryKubeClient,
) -> None:
    await submit(client, "first", total=2, gpus=3)  # 6 of 8
    await until(lambda: running(client, "first"), "the first group running")
    await submit(client, "second", total=2, gpus=2)  # 4 more: 2 over

    async def waiting() -> Obj | None:
        wl = await workload(client, "second")
        cond = condition(wl, "QuotaReserved") if wl else None
        return cond if cond and cond["status"] == "False" else None

    cond = await until(waiting, "the second group waiting for quota")
    podset = (await workload(client, "second") or {})["spec"]["podSets"][0]["name"]
    assert cond["reason"] == "Pending"
    assert cond["message"] == (
        f"couldn't assign flavors to pod set {podset}: insufficient unused quota for amd.com/gpu in flavor "
        f"{FLAVOR}, 2 more needed"
    )
    assert all(gated(p) for p in await group_pods(client, "second"))
    assert await until(lambda: events(client, "second", "Pending"), "a Pending Event on the Workload")

    await client.apply(CLUSTERQUEUES, cluster_queue(16), field_manager="test", force=True)
    await until(lambda: running(client, "second"), "the second group admitted once the quota grows")


async def test_a_group_larger_than_the_quota_says_so(client: InMemoryKubeClient) -> None:
    await submit(client, "big", total=3, gpus=4)  # 12 > 8

    async def message() -> str | None:
        wl = await workload(client, "big")
        cond = condition(wl, "QuotaReserved") if wl else None
        return str(cond["message"]) if cond else None

    text = await until(message, "the big group's reason")
    assert text.endswith(
        f"insufficient quota for amd.com/gpu in flavor {FLAVOR}, previously considered podsets requests (0) + "
        "current podset request (12) > maximum capacity (8)"
    )


async def test_lowering_the_quota_evicts_nothing(client: InMemoryKubeClient) -> None:
    await submit(client, "held", total=2, gpus=3)
    await until(lambda: running(client, "held"), "the group running")
    await client.apply(CLUSTERQUEUES, cluster_queue(2), field_manager="test", force=True)
    await submit(client, "later", total=1, gpus=1)

    async def later_waits() -> bool:
        wl = await workload(client, "later")
        return wl is not None and (condition(wl, "QuotaReserved") or {}).get("status") == "False"

    await until(later_waits, "a new group waits: usage is over the lowered quota")
    held = await workload(client, "held")
    assert held is not None and (condition(held, "Admitted") or {}).get("status") == "True"
    assert await running(client, "held"), "the admitted group keeps running"


async def test_a_missing_local_queue_is_named(client: InMemoryKubeClient) -> None:
    pod = group_pod("lost", 0, 1)
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nowhere"
    await client.create(PODS, pod, namespace=NS)

    async def message() -> str | None:
        wl = await workload(client, "lost")
        cond = condition(wl, "QuotaReserved") if wl else None
        return f"{cond['reason']}: {cond['message']}" if cond else None

    assert await until(message, "the reason") == "Inadmissible: LocalQueue nowhere doesn't exist"


async def test_a_deployments_pods_are_queued_one_by_one(client: InMemoryKubeClient) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"amd.com/gpu": "3"}}}]
                },
            },
        },
    }
    await client.create(DEPLOYMENTS, deployment, namespace=NS)
    stored = await client.get(DEPLOYMENTS, "web", NS)
    assert stored["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"

    async def split() -> tuple[int, int] | None:
        pods = (await client.list(PODS, NS, label_selector="app=web"))["items"]
        run = sum(1 for p in pods if p["status"].get("phase") == "Running")
        waiting = sum(1 for p in pods if gated(p))
        return (run, waiting) if run + waiting == 3 and run == 2 else None

    assert await until(split, "two pods admitted (6 of 8 GPUs), the third waiting") == (2, 1)


async def test_a_replaced_member_joins_its_admitted_group(client: InMemoryKubeClient) -> None:
    """As Kueue v0.17: a deleted member is held by Kueue's finalizer (reported Failed) until its
    replacement is in the group; the replacement is ungated by the admitted Workload, then the old one
    goes."""
    pods = await submit(client, "r", total=2)
    assert all(p["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"] for p in pods)
    await until(lambda: running(client, "r"), "the group running")
    uid = (await workload(client, "r") or {})["metadata"]["uid"]
    for i in range(2):  # every member replaced, one at a time (a recovery)
        await client.delete(PODS, f"r-{i}", namespace=NS)

        async def held(name: str = f"r-{i}") -> bool:
            pod = next((p for p in await group_pods(client, "r") if p["metadata"]["name"] == name), None)
            return pod is not None and pod["status"].get("phase") == "Failed"

        await until(held, "the old member held, Failed")
        replacement = group_pod("r", i, 2)
        replacement["metadata"]["name"] = f"r-{i}-b"
        await client.create(PODS, replacement, namespace=NS)

        async def replaced(name: str = f"r-{i}") -> bool:
            gone = all(p["metadata"]["name"] != name for p in await group_pods(client, "r"))
            return gone and await running(client, "r")

        await until(replaced, "the replacement ungated by the admitted Workload, the old member let go")
    wl = await workload(client, "r")
    assert wl is not None and wl["metadata"]["uid"] == uid, "the same Workload, owned by the new members"


async def test_a_pod_group_deleted_whole_stays_terminating(client: InMemoryKubeClient) -> None:
    """No replacement ever joins, and the group is not finished (retriable, or serving): Kueue keeps its
    finalizer on every member (what a rolled ModelInfer group would hit if its controller did not let
    its own deleted pods go)."""
    await submit(client, "w", total=2)
    await until(lambda: running(client, "w"), "the group running")
    for i in range(2):
        await client.delete(PODS, f"w-{i}", namespace=NS)

    async def failed() -> bool:
        pods = await group_pods(client, "w")
        return len(pods) == 2 and all(p["status"].get("phase") == "Failed" for p in pods)

    await until(failed, "both members Failed")
    pods = await group_pods(client, "w")
    assert all(p["metadata"].get("deletionTimestamp") for p in pods)
    assert all(p["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"] for p in pods)
    # Unretriable now (Kueue's documented way out): the group finishes and its members go.
    await client.patch(
        PODS,
        "w-0",
        {"metadata": {"annotations": {"kueue.x-k8s.io/retriable-in-group": "false"}}},
        namespace=NS,
    )

    async def finished() -> bool:
        wl = await workload(client, "w")
        return not await group_pods(client, "w") and (
            wl is None or (condition(wl, "Finished") or {}).get("status") == "True"
        )

    await until(finished, "the group finished, its members gone")

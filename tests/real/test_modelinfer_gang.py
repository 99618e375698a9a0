"""ModelInfer on the real control plane with a real gang scheduler: the scheduler-plugins scheduler's
Coscheduling plugin (``--gang-scheduler coscheduling``; Volcano cannot be built here, docs/real-cluster.md
says why and what differs). The operator runs as the chart's ServiceAccount; kube-apiserver, the
ReplicaSet-less pod lifecycle, the Eviction API, ``kubectl drain`` and the gang scheduler are upstream's.

The scenarios are the embedded cluster's (tests/integration/test_modelinfer_e2e.py and
test_modelinfer_disruption_e2e.py: the same ModelInfer, the same floors), checked on every pod change a
watch delivers: one moment with fewer available groups than ``replicas - maxUnavailable`` fails a test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import COSCHEDULING_PODGROUPS, NODES, PDBS, PODS
from aiplane.realcluster import RealCluster
from tests.integration.test_modelinfer_e2e import GROUP_LABEL, MI, NAME_LABEL, PODS_PER_GROUP, modelinfer
from tests.polling import eventually
from tests.real import operator as op
from tests.real.test_serving_drain import kubectl
from tests.real.watching import apply, following

pytestmark = pytest.mark.real

GANG = ("--gang-scheduler", "coscheduling")
SCHEDULER = "scheduler-plugins-scheduler"
AMD = "amd.com/gpu"


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


@dataclass
class Groups:
    """A ModelInfer's pods after every change a watch delivers: the fewest fully ready groups once armed,
    the most groups at once, and every pod ever bound to a node."""

    mi: str
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    fewest: int | None = None
    most: int = 0
    changes: int = 0
    bound: set[str] = field(default_factory=set)

    def __call__(self, kind: str, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("labels", {}).get(NAME_LABEL) != self.mi:
            return
        self.changes += 1
        name = pod["metadata"]["name"]
        if kind == "DELETED":
            self.pods.pop(name, None)
        else:
            self.pods[name] = pod
            if pod["spec"].get("nodeName"):
                self.bound.add(name)
        self.most = max(self.most, len(self.groups()))
        if self.fewest is not None:
            self.fewest = min(self.fewest, self.available())

    def groups(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            out.setdefault(pod["metadata"]["labels"][GROUP_LABEL], []).append(pod)
        return out

    def available(self) -> int:
        return sum(
            1
            for members in self.groups().values()
            if len(members) == PODS_PER_GROUP and all(map(_ready, members))
        )

    def arm(self) -> None:
        self.fewest, self.most = self.available(), len(self.groups())


async def _mi(admin: HttpKubeClient, name: str, namespace: str) -> dict[str, Any]:
    return await admin.get(MI, name, namespace)


async def _pods(admin: HttpKubeClient, name: str, namespace: str) -> list[dict[str, Any]]:
    return (await admin.list(PODS, namespace, label_selector=f"{NAME_LABEL}={name}"))["items"]


async def converged(admin: HttpKubeClient, name: str, namespace: str, timeout: float = 90) -> None:
    """The ModelInfer's status says every group is updated and available, and its pods agree."""

    async def done() -> bool:
        mi = await _mi(admin, name, namespace)
        status = mi.get("status") or {}
        want = mi["spec"]["replicas"]
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        pods = await _pods(admin, name, namespace)
        return (
            status.get("observedGeneration") == mi["metadata"]["generation"]
            and status.get("availableReplicas") == want
            and status.get("updatedReplicas") == want
            and conditions.get("Available") == "True"
            and conditions.get("UpdateInProgress") != "True"
            and len(pods) == want * PODS_PER_GROUP
            and all(map(_ready, pods))
        )

    await eventually(done, timeout=timeout, what=f"ModelInfer {name} converged", interval=0.2)


def _in(namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["namespace"] = namespace
    return body


async def _amd_gpus(admin: HttpKubeClient) -> dict[str, int]:
    nodes = (await admin.list(NODES))["items"]
    return {
        n["metadata"]["name"]: int(n["status"]["allocatable"][AMD])
        for n in nodes
        if AMD in n["status"].get("allocatable", {}) and not n["spec"].get("unschedulable")
    }


async def test_a_gang_is_placed_all_or_nothing_and_the_status_says_why_it_waits(
    admin: HttpKubeClient, namespace: str, start_operator: Callable[..., op.Process]
) -> None:
    operator = start_operator("modelinfer", *GANG)
    gpus = await _amd_gpus(admin)
    assert sorted(gpus.values()) == [8] * 6, f"the default fleet's six 8-GPU MI300X nodes: {gpus}"
    # One small group (6 pods of 1 GPU) first; then a gang of 6 pods of 8 GPUs: all 48, 6 of them taken.
    await apply(admin, [_in(namespace, modelinfer("small", replicas=1, gpus=1))])
    await converged(admin, "small", namespace)
    big = Groups("big")
    async with following(admin, PODS, big):
        await apply(admin, [_in(namespace, modelinfer("big", replicas=1, gpus=8))])

        async def waiting() -> str:
            status = (await _mi(admin, "big", namespace)).get("status") or {}
            return str(status.get("waitingFor") or "")

        why = await eventually(waiting, timeout=60, what="big's status naming what holds it", interval=0.2)
        assert why.startswith("PodGroup big-0: 0/"), why
        assert "nodes are available: resource gap: amd.com/gpu 6" in why, why
        pods = await _pods(admin, "big", namespace)
        assert len(pods) == PODS_PER_GROUP
        assert {p["spec"]["schedulerName"] for p in pods} == {SCHEDULER}
        assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in pods} == {"big-0"}
        group = await admin.get(COSCHEDULING_PODGROUPS, "big-0", namespace)
        assert group["spec"] == {"minMember": PODS_PER_GROUP, "minResources": {AMD: "48", "cpu": "6"}}
        mi = await _mi(admin, "big", namespace)
        available = next(c for c in mi["status"]["conditions"] if c["type"] == "Available")
        assert available["status"] == "False"
        assert not big.bound, f"pods of a gang that does not fit were bound: {sorted(big.bound)}"
        # The small one goes: the gang fits, and every member is placed.
        await admin.delete(MI, "small", namespace=namespace)
        await converged(admin, "big", namespace)
    assert len({p["spec"]["nodeName"] for p in await _pods(admin, "big", namespace)}) == 6
    assert operator.alive(), operator.tail()


async def test_an_image_change_rolls_out_within_max_unavailable(
    admin: HttpKubeClient, namespace: str, start_operator: Callable[..., op.Process]
) -> None:
    operator = start_operator("modelinfer", *GANG)
    await apply(admin, [_in(namespace, modelinfer("pd", replicas=3, max_unavailable=1))])
    await converged(admin, "pd", namespace)
    before = (await _mi(admin, "pd", namespace))["status"]["updateRevision"]
    watch = Groups("pd")
    async with following(admin, PODS, watch):
        await eventually(lambda: watch.available() == 3, timeout=30, what="the watch sees 3 groups")
        watch.arm()
        await apply(admin, [_in(namespace, modelinfer("pd", replicas=3, max_unavailable=1, image="vllm:v2"))])
        await converged(admin, "pd", namespace, timeout=120)
    mi = await _mi(admin, "pd", namespace)
    assert mi["status"]["currentRevision"] == mi["status"]["updateRevision"] != before
    assert {p["spec"]["containers"][0]["image"] for p in await _pods(admin, "pd", namespace)} == {"vllm:v2"}
    assert watch.fewest is not None and watch.fewest >= 2, f"fewest available groups {watch.fewest}"
    assert watch.most <= 3
    assert operator.alive(), operator.tail()


async def test_a_deleted_pod_recreates_its_role_replica_and_the_gang_is_placed_again(
    admin: HttpKubeClient, namespace: str, start_operator: Callable[..., op.Process]
) -> None:
    operator = start_operator("modelinfer", *GANG)
    await apply(admin, [_in(namespace, modelinfer("pd", replicas=2))])
    await converged(admin, "pd", namespace)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await _pods(admin, "pd", namespace)}
    await admin.delete(PODS, "pd-1-decode-0-1", namespace=namespace)

    async def replaced() -> bool:
        now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await _pods(admin, "pd", namespace)}
        return all(now.get(n) not in (None, uids[n]) for n in ("pd-1-decode-0-0", "pd-1-decode-0-1"))

    await eventually(replaced, timeout=60, what="role replica decode-0 of pd-1 recreated", interval=0.2)
    await converged(admin, "pd", namespace)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await _pods(admin, "pd", namespace)}
    assert {n for n in uids if uids[n] != after[n]} == {"pd-1-decode-0-0", "pd-1-decode-0-1"}  # RoleRecreate
    assert operator.alive(), operator.tail()


async def test_kubectl_drain_takes_one_gang_at_a_time(
    admin: HttpKubeClient,
    real_cluster: RealCluster,
    namespace: str,
    start_operator: Callable[..., op.Process],
) -> None:
    operator = start_operator("modelinfer", *GANG)
    await apply(admin, [_in(namespace, modelinfer("pd", replicas=2, max_unavailable=1))])
    await converged(admin, "pd", namespace)

    async def protected() -> bool:
        budgets = (await admin.list(PDBS, namespace))["items"]
        return sorted(b["metadata"]["name"] for b in budgets) == ["pd-0", "pd-1"] and all(
            b["spec"].get("minAvailable") == PODS_PER_GROUP for b in budgets
        )

    await eventually(protected, timeout=30, what="both groups protected by their budgets", interval=0.2)
    watch = Groups("pd")
    async with following(admin, PODS, watch):
        await eventually(lambda: watch.available() == 2, timeout=30, what="the watch sees 2 groups")
        # The node holding most of the groups' pods (kube packs GPUs, so both groups share it).
        nodes = [p["spec"]["nodeName"] for p in watch.pods.values()]
        first = max(set(nodes), key=nodes.count)
        watch.arm()
        await kubectl(
            real_cluster, "drain", first, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"
        )
        await converged(admin, "pd", namespace, timeout=120)
        assert first not in {p["spec"]["nodeName"] for p in await _pods(admin, "pd", namespace)}
        await kubectl(real_cluster, "uncordon", first)
    await eventually(protected, timeout=30, what="both groups protected again", interval=0.2)
    assert watch.fewest == 1, f"fewest available groups {watch.fewest} over {watch.changes} pod changes"
    assert operator.alive(), operator.tail()

"""The NodePartitioning controller end to end on the in-memory cluster, with the test playing DCM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiplane.api import kinds
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning.hashing import desired_hash
from aiplane.controllers.partitioning.vocabulary import ADMITTED_ANNOTATION
from aiplane.kube.controller import Request
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NODES, PDBS, PODS
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.polling import eventually as poll

CPX = {"dcmProfileName": "cpx", "expectedResources": {"amd.com/gpu": "64"}}


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    await poll(check, timeout)


@pytest.fixture
async def client() -> AsyncIterator[InMemoryKubeClient]:
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=1, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    c = InMemoryKubeClient.fresh(fleet=fleet)
    yield c
    await c.close()


async def _ready_profile(client: InMemoryKubeClient) -> None:
    profile = await client.create(
        kinds.PARTITIONINGPROFILES,
        {
            "apiVersion": "infrastructure.silogen.ai/v1alpha1",
            "kind": "PartitioningProfile",
            "metadata": {"name": "cpx"},
            "spec": CPX,
        },
    )
    await client.patch(
        kinds.PARTITIONINGPROFILES,
        "cpx",
        {
            "status": {
                "observedGeneration": 1,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "ProfileFound",
                        "message": "ok",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "observedGeneration": profile["metadata"]["generation"],
                    }
                ],
            }
        },
        subresource="status",
    )


@pytest.fixture
async def manager(client: InMemoryKubeClient) -> AsyncIterator[Manager]:
    await _ready_profile(client)
    async with running_operator(client) as m:
        yield m


def np_body(admitted: bool = True) -> dict[str, Any]:
    digest = desired_hash(CPX)
    body: dict[str, Any] = {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "NodePartitioning",
        "metadata": {"name": "plan-mi300x-0"},
        "spec": {
            "planRef": {"name": "plan", "uid": "u"},
            "nodeName": "mi300x-0",
            "desiredHash": digest,
            "profileRef": {"name": "cpx"},
        },
    }
    if admitted:
        body["metadata"]["annotations"] = {ADMITTED_ANNOTATION: digest}
    return body


async def phase(client: InMemoryKubeClient) -> str | None:
    np = await client.get(kinds.NODEPARTITIONINGS, "plan-mi300x-0")
    return (np.get("status") or {}).get("phase")


async def play_dcm(client: InMemoryKubeClient) -> None:
    """What the AMD GPU operator does when the profile label changes to cpx on a drained node."""

    async def labelled() -> bool:
        node = await client.get(NODES, "mi300x-0")
        return bool(node["metadata"]["labels"].get("dcm.amd.com/gpu-config-profile") == "cpx")

    await eventually(labelled)
    node = await client.get(NODES, "mi300x-0")
    node["status"]["capacity"]["amd.com/gpu"] = "64"
    node["status"]["allocatable"]["amd.com/gpu"] = "64"
    await client.replace_status(NODES, node)
    await client.patch(
        NODES, "mi300x-0", {"metadata": {"labels": {"dcm.amd.com/gpu-config-profile-state": "success"}}}
    )


async def test_drain_apply_verify_and_give_the_node_back(
    client: InMemoryKubeClient, manager: Manager
) -> None:
    workload = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w", "namespace": "default", "labels": {"app": "w"}},
        "spec": {
            "nodeName": "mi300x-0",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"amd.com/gpu": "1"}}}],
        },
    }
    await client.create(PODS, workload)
    await client.create(kinds.NODEPARTITIONINGS, np_body())

    async def cordoned_and_drained() -> bool:
        node = await client.get(NODES, "mi300x-0")
        pods = (await client.list(PODS, "default"))["items"]
        tainted = any(t.get("key") == "amd-dcm" for t in node["spec"].get("taints", []))
        return bool(node["spec"].get("unschedulable")) and tainted and not pods

    await eventually(cordoned_and_drained)  # the workload pod was evicted
    await play_dcm(client)

    async def succeeded() -> bool:
        return await phase(client) == "Succeeded"

    await eventually(succeeded)
    node = await client.get(NODES, "mi300x-0")
    assert not node["spec"].get("unschedulable")
    assert not any(t.get("key") == "amd-dcm" for t in node["spec"].get("taints", []))
    np = await client.get(kinds.NODEPARTITIONINGS, "plan-mi300x-0")
    assert np["status"]["currentHash"] == np["spec"]["desiredHash"]
    assert "infrastructure.silogen.ai/node-partitioning" not in (np["metadata"].get("finalizers") or [])
    client.reset_counts()
    informer = manager.informers.informer(kinds.NODEPARTITIONINGS)
    for key in list(informer.keys()):
        for controller in manager.controllers:
            controller.enqueue(Request(None, key))
    await eventually(lambda: _idle(manager))
    assert client.writes == 0  # steady state: nothing to write


async def _idle(manager: Manager) -> bool:
    return all(len(c.queue) == 0 and c.queue.num_processing == 0 for c in manager.controllers)


async def test_a_pdb_holds_the_drain_until_relaxed(client: InMemoryKubeClient, manager: Manager) -> None:
    await _ready_pod(client, "guarded", "mi300x-0", app="g")
    await _budget(client, "g", 1)
    await client.create(kinds.NODEPARTITIONINGS, np_body())

    async def draining() -> bool:
        return await phase(client) == "Draining"

    await eventually(draining)
    assert (await client.list(PODS, "default"))["items"]  # the PDB holds the pod
    await client.patch(PDBS, "g", {"spec": {"minAvailable": 0}}, namespace="default")

    async def evicted() -> bool:
        return not (await client.list(PODS, "default"))["items"]

    await eventually(evicted, timeout=30)


async def test_not_admitted_stays_pending_and_untouched(client: InMemoryKubeClient, manager: Manager) -> None:
    await client.create(kinds.NODEPARTITIONINGS, np_body(admitted=False))

    async def pending() -> bool:
        return await phase(client) in (None, "Pending")

    await eventually(pending)
    node = await client.get(NODES, "mi300x-0")
    assert not node["spec"].get("unschedulable")


async def test_no_cordon_from_a_stale_node_view_until_it_is_fresh_again(
    client: InMemoryKubeClient, manager: Manager
) -> None:
    await manager.cache_synced.wait()
    nodes = manager.informers.informer(NODES)
    nodes.stale_after = -1.0  # the Node watch counts as silent for too long
    assert nodes.stale
    await client.create(kinds.NODEPARTITIONINGS, np_body())
    await asyncio.sleep(0.5)  # a measurement window: admitted, but the view it would cordon from is stale
    node = await client.get(NODES, "mi300x-0")
    assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
    assert await phase(client) in (None, "Pending")

    nodes.stale_after = 90.0  # heard from the server again: the deferred decision goes ahead

    async def cordoned() -> bool:
        return bool((await client.get(NODES, "mi300x-0"))["spec"].get("unschedulable"))

    await eventually(cordoned, 5)


def _tainted(node: dict[str, Any]) -> bool:
    return any(t.get("key") == "amd-dcm" for t in (node.get("spec") or {}).get("taints") or [])


class HeldNodeWatch(InMemoryKubeClient):
    """The operator's client, whose Node watch stops before the first version carrying the drain's
    taint until :attr:`thaw` is set: its Node cache lags the operator's own write, as under load."""

    thaw: asyncio.Event

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        holding = False
        async for event in super().stream(path, query, on_open=on_open):
            holding = holding or (path == NODES.path() and _tainted(event.get("object") or {}))
            if holding:
                await self.thaw.wait()
            yield event


async def test_a_node_cache_behind_our_own_write_is_not_taken_for_dcms_answer(
    client: InMemoryKubeClient,
) -> None:
    """The node left in Verifying with the drain's taint (a 300-node rollout on kube-apiserver).
    No pod had to leave the node, so the taint and the DCM profile label went out in one node update
    and the NodePartitioning moved to WaitingOperator. Its next decision read that status (our own
    write) with a Node cache still one version behind: cordoned, untainted, and labelled ``success``
    by DCM for the node's previous profile. It took that for DCM's answer and moved to Verifying with
    nothing to untaint in that view (no node write, so no resourceVersion to refuse it); the taint
    then kept the device plugin off the node and the partitions never showed."""
    await _ready_profile(client)
    assert client.cluster is not None
    operator = HeldNodeWatch.for_cluster(client.cluster)
    operator.thaw = asyncio.Event()
    try:
        async with running_operator(operator, operator.thaw) as m:
            await client.create(kinds.NODEPARTITIONINGS, np_body())
            nps = m.informers.informer(kinds.NODEPARTITIONINGS)

            async def waiting_seen() -> bool:
                np = nps.get("plan-mi300x-0")
                return (np or {}).get("status", {}).get("phase") == "WaitingOperator" and await _idle(m)

            await eventually(waiting_seen)
            node = await client.get(NODES, "mi300x-0")
            assert _tainted(node) and node["metadata"]["labels"]["dcm.amd.com/gpu-config-profile"] == "cpx"
            cached = m.informers.informer(NODES).get("mi300x-0")
            assert cached is not None and not _tainted(cached)
            assert cached["metadata"]["labels"]["dcm.amd.com/gpu-config-profile-state"] == "success"
            assert await phase(client) == "WaitingOperator"  # DCM has not answered this request yet
            await play_dcm(client)
            operator.thaw.set()

            async def succeeded() -> bool:
                return await phase(client) == "Succeeded"

            await eventually(succeeded)
            node = await client.get(NODES, "mi300x-0")
            assert not _tainted(node) and not node["spec"].get("unschedulable")
    finally:
        await operator.close()


class HeldPodWatch(InMemoryKubeClient):
    """The operator's client, whose Pod watch delivers nothing until :attr:`thaw` is set: its Pod
    cache keeps showing pods that have since been evicted and recreated elsewhere."""

    thaw: asyncio.Event

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        async for event in super().stream(path, query, on_open=on_open):
            if path == PODS.path():
                await self.thaw.wait()
            yield event


async def _ready_pod(
    client: InMemoryKubeClient, name: str, node: str, app: str = "serving"
) -> dict[str, Any]:
    pod = await client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        },
    )
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return await client.replace_status(PODS, pod)


async def _budget(client: InMemoryKubeClient, app: str, min_available: int) -> None:
    await client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        },
    )


async def test_a_pod_recreated_elsewhere_under_its_name_is_not_charged_to_its_budget() -> None:
    """A live repartition once stalled with every group of a ModelInfer available: the drain's Pod
    cache still showed a pod it had evicted moments before, which its ModelInfer had recreated
    under the same name on a repartitioned node. The drain evicted it again, with the old pod's uid
    as precondition. The Eviction API charges the budget and records the *name* as disrupted before
    it checks that precondition (then answers 409), so the new pod counted as disrupted for two
    minutes and the budget refused every eviction the drain needed from that group."""
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=2, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    client = InMemoryKubeClient.fresh(fleet=fleet)
    await _ready_profile(client)
    old = await _ready_pod(client, "serving-0", "mi300x-0")
    await _budget(client, "serving", 0)
    assert client.cluster is not None
    operator = HeldPodWatch.for_cluster(client.cluster)
    operator.thaw = asyncio.Event()
    try:
        async with running_operator(operator, operator.thaw):
            # Evicted and recreated on the other node by its controller; the operator's cache missed both.
            await client.evict("serving-0", "default")
            new = await _ready_pod(client, "serving-0", "mi300x-1")
            assert new["metadata"]["uid"] != old["metadata"]["uid"]

            async def budget_settled() -> bool:
                status = (await client.get(PDBS, "serving", namespace="default")).get("status") or {}
                return status.get("currentHealthy") == 1 and not status.get("disruptedPods")

            await eventually(budget_settled)
            await client.create(kinds.NODEPARTITIONINGS, np_body())

            async def tainted() -> bool:
                return _tainted(await client.get(NODES, "mi300x-0"))

            await eventually(tainted)  # nothing of ours left on the node: drained
            assert await budget_settled()  # the new pod is not charged to the budget
            assert (await client.get(PODS, "serving-0", namespace="default"))["metadata"]["uid"] == new[
                "metadata"
            ]["uid"]
    finally:
        await operator.close()
        await client.close()


@asynccontextmanager
async def running_operator(
    operator: InMemoryKubeClient, thaw: asyncio.Event | None = None
) -> AsyncIterator[Manager]:
    """The NodePartitioning controller on ``operator``, its caches synced; a held watch's ``thaw``
    is set on the way out so the manager can stop. Closing the client is the caller's."""
    m = Manager(
        operator,
        leader_election=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    await node_controller.setup(m)
    task = asyncio.create_task(m.run())
    try:
        await m.cache_synced.wait()
        yield m
    finally:
        if thaw is not None:
            thaw.set()
        m.stop()
        await task

"""The DynamoGraphDeployment controller alone on the embedded cluster.

No DCD controller runs: the test plays it, setting DCD conditions through ``/status`` the way the
DCD controller would (``Available`` with ``observedGeneration``), so what is checked is exactly what
the DGD controller does with DCDs, PVCs and its own status.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from aiplane.controllers.dynamo import graph_controller
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CRDS, EVENTS, NAMESPACES, PVCS, SERVICEACCOUNTS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration import operator_rbac
from tests.polling import eventually
from tests.settle import events_written

DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
NS = "llm"
LWS_CRD = "leaderworkersets.leaderworkerset.x-k8s.io"


def graph(name: str = "g", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "backendFramework": "vllm",
        "services": {
            "Frontend": {"componentType": "frontend", "replicas": 1},
            "VllmWorker": {"componentType": "worker", "replicas": 2, "envs": [{"name": "A", "value": "1"}]},
        },
    }
    body.update(spec)
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": body,
    }


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient
    manager: Manager

    async def dgd(self, name: str = "g") -> dict[str, Any]:
        return await self.client.get(DGD, name, NS)

    async def dcds(self) -> dict[str, dict[str, Any]]:
        items = (await self.client.list(DCD, namespace=NS))["items"]
        return {d["metadata"]["name"]: d for d in items}

    async def ready(self, name: str = "g") -> dict[str, Any] | None:
        dgd = await self.dgd(name)
        return dgd if (dgd.get("status") or {}).get("state") == "successful" else None

    async def state(self, name: str = "g") -> tuple[str | None, str | None, str]:
        status = (await self.dgd(name)).get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        return status.get("state"), ready.get("reason"), str(ready.get("message", ""))

    async def make_available(self, dcd: str, *, observed: int | None = None, status: str = "True") -> None:
        """Play the DCD controller: Available at the DCD's generation (or ``observed``)."""
        current = await self.client.get(DCD, dcd, NS)
        generation = current["metadata"]["generation"]
        condition = {
            "type": "Available",
            "status": status,
            "reason": "Ready" if status == "True" else "PodsNotReady",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": generation if observed is None else observed,
        }
        await self.client.patch(
            DCD,
            dcd,
            {"status": {"conditions": [condition], "observedGeneration": condition["observedGeneration"]}},
            namespace=NS,
            subresource="status",
        )

    async def all_available(self) -> None:
        for dcd in await self.dcds():
            await self.make_available(dcd)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    cluster = operator_rbac.cluster()
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(operator, leader_election=None, handle_signals=False)
    await graph_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    yield World(cluster, client, operator, manager)
    manager.stop()
    assert await task == 0
    await client.close()
    await cluster.stop()


async def _reasons(world: World, reason: str, name: str = "g") -> list[str]:
    listed = await world.client.list(EVENTS, NS, field_selector=f"involvedObject.name={name},reason={reason}")
    return [e["message"] for e in listed["items"]]


async def test_one_dcd_per_service_then_successful_only_when_every_dcd_is_available(world: World) -> None:
    await world.client.create(DGD, graph(), namespace=NS)
    dcds = await eventually(lambda: _both(world), 10, "two DCDs")
    worker = dcds["g-vllmworker"]
    labels = worker["metadata"]["labels"]
    assert labels == {
        "nvidia.com/dynamo-component": "VllmWorker",
        "nvidia.com/dynamo-namespace": "dynamo-g",
        "nvidia.com/dynamo-graph-deployment-name": "g",
    }
    assert worker["spec"]["serviceName"] == "VllmWorker"
    assert worker["spec"]["backendFramework"] == "vllm"
    assert worker["spec"]["replicas"] == 2
    assert worker["metadata"]["annotations"]["nvidia.com/last-applied-hash"]
    owner = worker["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "DynamoGraphDeployment" and owner["controller"] is True
    dgd = await world.dgd()
    assert "nvidia.com/finalizer" in dgd["metadata"]["finalizers"]
    await eventually(lambda: _state_is(world, "pending"), 10, "pending")
    assert (await world.dgd())["status"]["readyServices"] == "0/2"

    await world.make_available("g-frontend")
    await eventually(lambda: _ready_services(world, "1/2"), 10, "1/2 ready")
    _, reason, message = await world.state()
    assert reason == "some_resources_are_not_ready" and "g-vllmworker: Reconciling" in message
    await world.make_available("g-vllmworker")
    dgd = await eventually(world.ready, 10, "successful")
    ready = next(c for c in dgd["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "all_resources_are_ready"
    assert dgd["status"]["observedGeneration"] == dgd["metadata"]["generation"]
    assert dgd["status"]["readyServices"] == "2/2"


async def _both(world: World) -> dict[str, dict[str, Any]] | None:
    dcds = await world.dcds()
    return dcds if set(dcds) == {"g-frontend", "g-vllmworker"} else None


async def _state_is(world: World, state: str, name: str = "g") -> bool:
    return (await world.state(name))[0] == state


async def _ready_services(world: World, value: str) -> bool:
    return ((await world.dgd()).get("status") or {}).get("readyServices") == value


async def test_a_changed_service_is_not_ready_until_its_dcd_observes_the_new_generation(world: World) -> None:
    """Upstream #3567: the DGD stayed successful while a DCD rolled out its new spec."""
    await world.client.create(DGD, graph(), namespace=NS)
    await eventually(lambda: _both(world), 10, "two DCDs")
    await world.all_available()
    await eventually(world.ready, 10, "successful")
    old_generation = (await world.client.get(DCD, "g-vllmworker", NS))["metadata"]["generation"]

    await world.client.patch(
        DGD,
        "g",
        {"spec": {"services": {"VllmWorker": {"envs": [{"name": "A", "value": "2"}]}}}},
        namespace=NS,
    )

    async def updated() -> dict[str, Any] | None:
        dcd = await world.client.get(DCD, "g-vllmworker", NS)
        return dcd if dcd["spec"]["envs"] == [{"name": "A", "value": "2"}] else None

    dcd = await eventually(updated, 10, "DCD updated")
    assert dcd["metadata"]["generation"] > old_generation
    # The DCD still says Available=True, for the old generation: the graph must not be successful.
    await eventually(lambda: _state_is(world, "pending"), 10, "pending while the DCD catches up")
    _, _, message = await world.state()
    assert "g-vllmworker: generation" in message and "not yet observed" in message
    await world.make_available("g-vllmworker", observed=old_generation)
    assert (await world.state())[0] == "pending"
    await world.make_available("g-vllmworker")
    await eventually(world.ready, 10, "successful again")


async def test_pvcs_created_reused_and_missing(world: World) -> None:
    await world.client.create(
        PVCS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "existing"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        namespace=NS,
    )
    pvcs = [
        {
            "name": "models",
            "create": True,
            "size": "10Gi",
            "storageClass": "fast",
            "volumeAccessMode": "ReadWriteMany",
        },
        {"name": "existing"},
        {"name": "absent"},
    ]
    await world.client.create(DGD, graph(pvcs=pvcs), namespace=NS)
    created = await eventually(lambda: _get_or_none(world, PVCS, "models"), 10, "PVC models")
    assert created["spec"]["accessModes"] == ["ReadWriteMany"]
    assert created["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert created["spec"]["storageClassName"] == "fast"
    assert created["metadata"]["ownerReferences"][0]["name"] == "g"
    await eventually(lambda: _state_is(world, "failed"), 10, "failed on the missing claim")
    _, reason, message = await world.state()
    assert reason == "failed_to_reconcile_the_resources"
    assert "spec.pvcs[2]" in message and "'absent'" in message and "existing" not in message
    assert await world.dcds() == {}, "no DCD before every claim is there (upstream's order)"
    assert (await world.dgd())["status"]["conditions"][0]["status"] == "False"

    # Creating the claim brings the graph back (PVCs are watched).
    await world.client.create(
        PVCS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "absent"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        namespace=NS,
    )
    await eventually(lambda: _both(world), 10, "DCDs once the claim exists")
    await eventually(lambda: _state_is(world, "pending"), 10, "pending")


async def _get_or_none(world: World, res: Any, name: str) -> dict[str, Any] | None:
    try:
        return await world.client.get(res, name, NS)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def test_removing_a_service_removes_its_dcd(world: World) -> None:
    await world.client.create(DGD, graph(), namespace=NS)
    await eventually(lambda: _both(world), 10, "two DCDs")
    dgd = await world.dgd()
    dgd["spec"]["services"].pop("VllmWorker")
    await world.client.replace(DGD, dgd)

    async def only_frontend() -> bool:
        return set(await world.dcds()) == {"g-frontend"}

    await eventually(only_frontend, 10, "worker DCD deleted")
    # The Event is posted after the delete it reports: wait for it, do not sample.
    await eventually(lambda: _reasons(world, "DeletedDCD"), 10, "a DeletedDCD Event")


async def test_invalid_names_fail_and_create_nothing(world: World) -> None:
    long_key = "W" + "x" * 70
    await world.client.create(
        DGD, graph(services={long_key: {"componentType": "worker", "replicas": 1}}), namespace=NS
    )
    await eventually(lambda: _state_is(world, "failed"), 10, "failed")
    _, reason, message = await world.state()
    assert reason == "invalid_spec"
    assert f"spec.services[{long_key}]" in message and "63 characters" in message
    assert await world.dcds() == {}
    assert await eventually(lambda: _reasons(world, "invalid_spec"), 10, "a Warning Event")


async def test_multinode_without_leaderworkerset_fails(world: World) -> None:
    await world.client.delete(CRDS, LWS_CRD)

    async def lws_gone() -> bool:
        try:
            await world.client.list(resource_for("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), NS)
        except ApiError as exc:
            return exc.not_found
        return False

    await eventually(lws_gone, 10, "LWS no longer served")
    services = {"Worker": {"componentType": "worker", "replicas": 1, "multinode": {"nodeCount": 2}}}
    await world.client.create(DGD, graph(services=services), namespace=NS)
    await eventually(lambda: _state_is(world, "failed"), 10, "failed")
    _, _, message = await world.state()
    assert message.startswith("no multinode orchestrator available") and "Worker" in message
    assert await world.dcds() == {}


async def test_planner_gets_its_service_account(world: World) -> None:
    services = {"Planner": {"componentType": "planner", "replicas": 1}}
    await world.client.create(DGD, graph(services=services), namespace=NS)
    account = await eventually(
        lambda: _get_or_none(world, SERVICEACCOUNTS, "planner-serviceaccount"), 10, "planner account"
    )
    assert account["metadata"]["name"] == "planner-serviceaccount"
    dcd = await eventually(lambda: _get_or_none(world, DCD, "g-planner"), 10, "planner DCD")
    assert dcd["spec"]["extraPodSpec"]["serviceAccountName"] == "planner-serviceaccount"


async def _scale(world: World, dcd: str, replicas: int) -> None:
    await world.client.patch(DCD, dcd, {"spec": {"replicas": replicas}}, namespace=NS, subresource="scale")


async def test_scaling_through_the_dgd_and_through_the_dcd(world: World) -> None:
    services = {
        "Frontend": {"componentType": "frontend"},  # no replicas: scaling the DCD sticks
        "Worker": {"componentType": "worker", "replicas": 2},  # the DGD owns the count
    }
    await world.client.create(DGD, graph(services=services), namespace=NS)

    async def two() -> dict[str, dict[str, Any]] | None:
        dcds = await world.dcds()
        return dcds if len(dcds) == 2 else None

    dcds = await eventually(two, 10, "two DCDs")
    assert "replicas" not in dcds["g-frontend"]["spec"]

    await _scale(world, "g-frontend", 3)
    await _scale(world, "g-worker", 5)

    async def worker_back() -> bool:
        return (await world.client.get(DCD, "g-worker", NS))["spec"]["replicas"] == 2

    await eventually(worker_back, 10, "the graph's replicas win")
    assert await eventually(lambda: _reasons(world, "ReplicasOverridden"), 10, "an Event says so")
    assert (await world.client.get(DCD, "g-frontend", NS))["spec"]["replicas"] == 3

    # Scaling through the DGD: the worker follows; the frontend keeps its direct scale on other edits.
    await world.client.patch(DGD, "g", {"spec": {"services": {"Worker": {"replicas": 4}}}}, namespace=NS)

    async def worker_four() -> bool:
        return (await world.client.get(DCD, "g-worker", NS))["spec"]["replicas"] == 4

    await eventually(worker_four, 10, "worker scaled through the DGD")
    await world.client.patch(
        DGD, "g", {"spec": {"services": {"Frontend": {"envs": [{"name": "B", "value": "1"}]}}}}, namespace=NS
    )

    async def frontend_updated() -> dict[str, Any] | None:
        dcd = await world.client.get(DCD, "g-frontend", NS)
        return dcd if dcd["spec"].get("envs") else None

    frontend = await eventually(frontend_updated, 10, "frontend updated")
    assert frontend["spec"]["replicas"] == 3


async def test_deleting_the_graph_removes_its_dcds_and_pvcs(world: World) -> None:
    pvcs = [
        {
            "name": "models",
            "create": True,
            "size": "1Gi",
            "storageClass": "fast",
            "volumeAccessMode": "ReadWriteOnce",
        }
    ]
    await world.client.create(DGD, graph(pvcs=pvcs), namespace=NS)
    await eventually(lambda: _both(world), 10, "two DCDs")
    assert await _get_or_none(world, PVCS, "models") is not None
    await world.client.delete(DGD, "g", namespace=NS)

    async def all_gone() -> bool:
        return (
            await _get_or_none(world, DGD, "g") is None
            and await world.dcds() == {}
            and await _get_or_none(world, PVCS, "models") is None
        )

    await eventually(all_gone, 15, "graph, DCDs and PVC gone")


async def test_zero_writes_after_convergence(world: World) -> None:
    """With every kind of thing the controller makes: DCDs (one scaled directly), a PVC, the
    planner's ServiceAccount."""
    services = {
        "Frontend": {"componentType": "frontend"},
        "Planner": {"componentType": "planner", "replicas": 1},
        "Worker": {"componentType": "worker", "replicas": 2},
    }
    pvcs = [
        {
            "name": "m",
            "create": True,
            "size": "1Gi",
            "storageClass": "fast",
            "volumeAccessMode": "ReadWriteOnce",
        }
    ]
    await world.client.create(DGD, graph(services=services, pvcs=pvcs), namespace=NS)

    async def three() -> bool:
        return len(await world.dcds()) == 3

    await eventually(three, 10, "three DCDs")
    await _scale(world, "g-frontend", 2)
    await world.all_available()
    await eventually(world.ready, 10, "successful")
    await events_written(world.manager)
    world.operator.reset_counts()
    before = copy.deepcopy(await world.dgd())
    end = time.monotonic() + 3
    while time.monotonic() < end:
        await asyncio.sleep(0.25)
    assert world.operator.writes == 0
    assert (await world.dgd())["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

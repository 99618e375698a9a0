"""Multinode Dynamo on the real control plane: a DynamoComponentDeployment of two nodes per replica becomes
one LeaderWorkerSet per replica run by LeaderWorkerSet's own controller and webhook (v0.9.0), its pods a
gang of the scheduler-plugins Coscheduling scheduler (``--gang-scheduler coscheduling``: a
``scheduling.x-k8s.io`` PodGroup per replica), and the LeaderWorkerSets' status feeds the component's.

The component is the embedded cluster's scenario (tests/integration/test_dynamo_dcd_e2e.py, ``worker``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import COSCHEDULING_PODGROUPS, LEADERWORKERSETS, PODS, Resource
from tests.integration.test_dynamo_dcd_e2e import DCD, worker
from tests.polling import eventually
from tests.real import operator as op
from tests.real.watching import apply

pytestmark = pytest.mark.real


async def _names(admin: HttpKubeClient, res: Resource, namespace: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in (await admin.list(res, namespace))["items"])


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {
        e["name"]: str(e.get("value")) for e in pod["spec"]["containers"][0].get("env") or [] if "value" in e
    }


async def test_a_multinode_component_runs_on_leaderworkersets_as_coscheduled_gangs(
    admin: HttpKubeClient, namespace: str, start_operator: Callable[..., op.Process]
) -> None:
    operator = start_operator("dynamocomponentdeployment", "--gang-scheduler", "coscheduling")
    body = worker(nodes=2, replicas=2)
    body["metadata"]["namespace"] = namespace
    await apply(admin, [body])

    async def available() -> dict[str, Any] | None:
        dcd = await admin.get(DCD, "dec", namespace)
        conditions = {c["type"]: c for c in (dcd.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Available", {}).get("status") == "True"
        return dcd if ready else None

    dcd = await eventually(available, timeout=90, what="the multinode component Available", interval=0.2)
    # The status is the LeaderWorkerSets' (their controller's readyReplicas), as the twin's.
    assert {c["reason"] for c in dcd["status"]["conditions"] if c["type"] == "Available"} == {
        "AllLeaderWorkerSetsReady"
    }
    assert (dcd["status"]["replicas"], dcd["status"]["readyReplicas"]) == (2, 2)
    assert await _names(admin, LEADERWORKERSETS, namespace) == ["dec-0", "dec-1"]
    for lws in (await admin.list(LEADERWORKERSETS, namespace))["items"]:
        assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
        assert (lws.get("status") or {}).get("readyReplicas") == 1, lws.get("status")
    groups = (await admin.list(COSCHEDULING_PODGROUPS, namespace))["items"]
    assert sorted(g["metadata"]["name"] for g in groups) == ["dec-0", "dec-1"]
    assert {g["spec"]["minMember"] for g in groups} == {2}
    pods = (await admin.list(PODS, namespace, label_selector="instance-id=1"))["items"]
    assert sorted(p["metadata"]["labels"]["role"] for p in pods) == ["leader", "worker"]
    assert {p["spec"]["schedulerName"] for p in pods} == {"scheduler-plugins-scheduler"}
    assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in pods} == {"dec-1"}
    # LeaderWorkerSet's pod webhook gave every pod its group's env (its leader's address, the group size,
    # the pod's index in the group).
    for pod in pods:
        env = _env(pod)
        assert env["LWS_LEADER_ADDRESS"] == f"dec-1-0.dec-1.{namespace}", env
        assert env["LWS_GROUP_SIZE"] == "2", env
        assert env["LWS_WORKER_INDEX"] == ("0" if pod["metadata"]["labels"]["role"] == "leader" else "1"), env
        assert pod["spec"].get("nodeName"), pod["metadata"]["name"]
    # One replica fewer: its LeaderWorkerSet and PodGroup go.
    await apply(admin, [{**body, "spec": {**body["spec"], "replicas": 1}}])

    async def one() -> bool:
        return await _names(admin, LEADERWORKERSETS, namespace) == ["dec-0"] and await _names(
            admin, COSCHEDULING_PODGROUPS, namespace
        ) == ["dec-0"]

    await eventually(one, timeout=60, what="the surplus LeaderWorkerSet and PodGroup deleted", interval=0.2)
    await eventually(available, timeout=60, what="Available at 1 replica", interval=0.2)
    # The replica's pods end Failed, as drained pods do (the kubelet's last status), and the PodGroup's
    # controller turns it Failed, a phase it never leaves; the pods are rebuilt, and the PodGroup, remade,
    # follows them to Running again.
    for pod in (await admin.list(PODS, namespace, label_selector="instance-id=0"))["items"]:
        failed = {"status": {"phase": "Failed", "reason": "Evicted"}}
        await admin.patch(PODS, pod["metadata"]["name"], failed, namespace=namespace, subresource="status")

    async def failed() -> bool:
        group = await admin.get(COSCHEDULING_PODGROUPS, "dec-0", namespace)
        return (group.get("status") or {}).get("phase") == "Failed"

    await eventually(failed, timeout=30, what="the PodGroup Failed", interval=0.1)
    for pod in (await admin.list(PODS, namespace, label_selector="instance-id=0"))["items"]:
        try:
            await admin.delete(PODS, pod["metadata"]["name"], namespace=namespace)
        except ApiError as err:  # its StatefulSet may have replaced it already
            if not err.not_found:
                raise

    async def rebuilt() -> bool:
        try:
            group = await admin.get(COSCHEDULING_PODGROUPS, "dec-0", namespace)
        except ApiError as err:  # between its delete and its new create
            if err.not_found:
                return False
            raise
        return (group.get("status") or {}).get("phase") == "Running" and await available() is not None

    await eventually(rebuilt, timeout=90, what="the rebuilt replica's PodGroup Running", interval=0.2)
    assert operator.alive(), operator.tail()


async def test_a_replica_whose_gang_does_not_fit_places_no_pod_and_the_component_says_why(
    admin: HttpKubeClient, namespace: str, start_operator: Callable[..., op.Process]
) -> None:
    operator = start_operator("dynamocomponentdeployment", "--gang-scheduler", "coscheduling")
    # Two replicas of two 8-GPU nodes: the fleet's two H100 nodes hold one replica's gang, not both.
    body = worker(nodes=2, replicas=2, gpus="8")
    body["metadata"]["namespace"] = namespace
    await apply(admin, [body])

    async def waiting() -> str:
        dcd = await admin.get(DCD, "dec", namespace)
        return str((dcd.get("status") or {}).get("waitingFor") or "")

    why = await eventually(waiting, timeout=90, what="the component naming the gang that waits", interval=0.2)
    pods = (await admin.list(PODS, namespace))["items"]
    bound = {
        p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]: p for p in pods if p["spec"].get("nodeName")
    }
    (placed,) = set(bound)  # one replica's gang placed whole (both its pods), the other's not at all
    assert sum(1 for p in pods if p["spec"].get("nodeName")) == 2
    held = ({"dec-0", "dec-1"} - {placed}).pop()
    assert why.startswith(f"PodGroup {held}: 0/"), why
    assert "resource gap: nvidia.com/gpu" in why, why

    async def one_of_two_ready() -> bool:
        status = (await admin.get(DCD, "dec", namespace)).get("status") or {}
        return (status.get("replicas"), status.get("readyReplicas")) == (2, 1)

    # The placed replica's LeaderWorkerSet turns ready (kwok), and the component counts it; the other waits.
    await eventually(one_of_two_ready, timeout=60, what="1 of 2 replicas ready", interval=0.2)
    assert await waiting() == why
    assert operator.alive(), operator.tail()

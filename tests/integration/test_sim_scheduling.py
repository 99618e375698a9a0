"""The simulated schedulers and pod/node faults of the embedded cluster, over real HTTP.

kube-scheduler-lite binds unbound pods (through ``pods/binding``) or says why not; the Volcano gang
scheduler binds a PodGroup's pods all-or-nothing; the kubelet's faults restart containers, fail pods and
take nodes down. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest

from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import NODES, PODGROUPS, PODS
from aiplane.sim.agents import Agents
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from tests.integration.sim_helpers import agent_cluster, events, http_client, until

Obj = dict[str, Any]

# 2 AMD nodes (8 GPUs each), 1 NVIDIA node, 1 tainted control-plane node.
FLEET = Fleet(
    nodePools=[
        NodePool(
            name="mi300x",
            count=2,
            gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
            cpu="192",
            memory="2Ti",
        ),
        NodePool(name="h100", count=1, gpu=GpuSpec(vendor="nvidia", product="H100-SXM", count=8), cpu="224"),
        NodePool(name="control", count=1, controlPlane=True, cpu="16", memory="64Gi"),
    ]
)
AMD_NODES = {"mi300x-0", "mi300x-1"}


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster(FLEET) as sim:
        yield sim


@pytest.fixture
async def client(cluster: EmbeddedCluster) -> AsyncIterator[HttpKubeClient]:
    async with http_client(cluster) as c:
        yield c


def agents(cluster: EmbeddedCluster) -> Agents:
    assert cluster.agents is not None
    return cluster.agents


def pod_body(
    name: str,
    *,
    gpus: int = 0,
    resource: str = "amd.com/gpu",
    scheduler: str | None = None,
    group: str | None = None,
    spec: Obj | None = None,
) -> Obj:
    container: Obj = {"name": "main", "image": "rocm/pytorch:latest"}
    if gpus:
        container["resources"] = {"limits": {resource: str(gpus)}}
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **(spec or {})},
    }
    if scheduler:
        body["spec"]["schedulerName"] = scheduler
    if group:
        body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return body


async def get_pod(client: HttpKubeClient, name: str) -> Obj:
    return await client.get(PODS, name, "default")


def condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


async def ready(client: HttpKubeClient, name: str) -> Obj | None:
    pod = await get_pod(client, name)
    cond = condition(pod, "Ready")
    return pod if cond is not None and cond["status"] == "True" else None


async def unschedulable(client: HttpKubeClient, name: str) -> Obj | None:
    pod = await get_pod(client, name)
    cond = condition(pod, "PodScheduled")
    return pod if cond is not None and cond["status"] == "False" else None


async def cordon(client: HttpKubeClient, node: str, on: bool = True) -> None:
    await client.patch(NODES, node, {"spec": {"unschedulable": True if on else None}})


# --- pods/binding ---------------------------------------------------------------------------------------


async def test_the_binding_subresource_binds_once(client: HttpKubeClient) -> None:
    await client.create(PODS, pod_body("manual", scheduler="my-scheduler"))  # no scheduler of ours takes it
    path = PODS.path("default", "manual", "binding")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "manual", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "mi300x-1"},
    }
    answer = await client.request("POST", path, body=binding)
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = await get_pod(client, "manual")
    assert pod["spec"]["nodeName"] == "mi300x-1"
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None and scheduled["status"] == "True"
    assert not any(m.get("manager") == "kube-scheduler" for m in pod["metadata"].get("managedFields") or [])

    with pytest.raises(ApiError) as again:
        await client.request("POST", path, body={**binding, "target": {"kind": "Node", "name": "mi300x-0"}})
    assert again.value.status == 409 and again.value.reason == "Conflict"
    assert again.value.message == (
        'Operation cannot be fulfilled on pods/binding "manual": pod manual is already assigned to node "mi300x-1"'
    )
    with pytest.raises(ApiError) as missing:
        await client.request(
            "POST", PODS.path("default", "ghost", "binding"), body={**binding, "metadata": {"name": "ghost"}}
        )
    assert missing.value.status == 404 and missing.value.message == 'pods "ghost" not found'
    with pytest.raises(ApiError) as mismatch:
        await client.request("POST", path, body={**binding, "metadata": {"name": "other"}})
    assert mismatch.value.status == 400
    with pytest.raises(ApiError) as no_target:
        await client.request("POST", path, body={**binding, "target": {}})
    assert no_target.value.status == 500 and no_target.value.message == "target.name: Required value"
    await until(lambda: ready(client, "manual"), "the kubelet runs the bound pod")


# --- kube-scheduler-lite ----------------------------------------------------------------------------------


async def test_gpu_pods_are_scheduled_onto_nodes_with_the_gpus_and_run(client: HttpKubeClient) -> None:
    watched: list[Obj] = []
    since = (await client.list(PODS, "default"))["metadata"]["resourceVersion"]

    async def watch() -> None:
        async for event in client.watch(
            PODS, "default", field_selector="metadata.name=amd", resource_version=since
        ):
            watched.append(event)

    watcher = asyncio.create_task(watch())
    try:
        await client.create(PODS, pod_body("amd", gpus=2))
        await client.create(PODS, pod_body("nv", gpus=1, resource="nvidia.com/gpu"))
        pod = await until(lambda: ready(client, "amd"), "the AMD GPU pod Ready")
        assert pod["spec"]["nodeName"] in AMD_NODES and pod["status"]["phase"] == "Running"
        assert (await until(lambda: ready(client, "nv"), "the NVIDIA GPU pod Ready"))["spec"][
            "nodeName"
        ] == "h100-0"
        [scheduled] = await until(lambda: events(client, "amd", "Scheduled"), "a Scheduled event")
        assert scheduled["message"] == f"Successfully assigned default/amd to {pod['spec']['nodeName']}"
        assert scheduled["source"]["component"] == "default-scheduler" and scheduled["type"] == "Normal"
        # A watcher saw the pod unbound, then bound (the binding), then running.
        seen = [
            (e["type"], e["object"]["spec"].get("nodeName"), e["object"]["status"].get("phase"))
            for e in watched
            if e["type"] != "BOOKMARK"
        ]
        assert seen[:2] == [("ADDED", None, "Pending"), ("MODIFIED", pod["spec"]["nodeName"], "Pending")]
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def test_a_pod_that_fits_nowhere_stays_pending_with_kube_schedulers_message(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    await client.create(PODS, pod_body("huge", gpus=9))
    pod = await until(lambda: unschedulable(client, "huge"), "PodScheduled=False")
    message = (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient amd.com/gpu. "
        "preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
        "3 No preemption victims found for incoming pod."
    )
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None and (scheduled["reason"], scheduled["message"]) == ("Unschedulable", message)
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    [failed] = await until(lambda: events(client, "huge", "FailedScheduling"), "a FailedScheduling event")
    assert (failed["type"], failed["message"], failed["source"]["component"]) == (
        "Warning",
        message,
        "default-scheduler",
    )
    # Retrying changes nothing: no write, no second event.
    scheduler = agents(cluster).scheduler
    for _ in range(3):
        scheduler.process(("retry",))
        scheduler.run_pending()
    again = await get_pod(client, "huge")
    assert again["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert len(await events(client, "huge", "FailedScheduling")) == 1


async def test_cordoned_nodes_are_skipped_and_uncordoning_schedules_at_once(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    for name in sorted(AMD_NODES):
        await cordon(client, name)
    await client.create(PODS, pod_body("waiting", gpus=8))
    pod = await until(lambda: unschedulable(client, "waiting"), "PodScheduled=False on a cordoned fleet")
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None and scheduled["message"].startswith(
        "0/4 nodes are available: 1 Insufficient amd.com/gpu, 1 node(s) had untolerated taint(s), "
        "2 node(s) were unschedulable."
    )
    agents(cluster).scheduler.retry_interval = None  # only the node event can bring it back
    await cordon(client, "mi300x-1", on=False)
    pod = await until(lambda: ready(client, "waiting"), "scheduled once a node is uncordoned", timeout=3.0)
    assert pod["spec"]["nodeName"] == "mi300x-1"
    assert (condition(pod, "PodScheduled") or {}).get("status") == "True"


async def test_node_selector_tolerations_and_capacity_freed_by_a_failed_pod(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    control = {
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ],
    }
    await client.create(PODS, pod_body("ctl", spec=control))
    assert (await until(lambda: ready(client, "ctl"), "a pod on the control plane"))["spec"][
        "nodeName"
    ] == "control-0"
    selector = {"nodeSelector": {"kubernetes.io/hostname": "mi300x-0"}}
    await client.create(PODS, pod_body("first", gpus=8, spec=selector))
    await until(lambda: ready(client, "first"), "the first pod")
    await client.create(PODS, pod_body("second", gpus=8, spec=selector))
    pod = await until(lambda: unschedulable(client, "second"), "the second pod waits for the GPUs")
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None and scheduled["message"].startswith(
        "0/4 nodes are available: 1 Insufficient amd.com/gpu, 1 node(s) had untolerated taint(s), "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    agents(cluster).kubelet.fail_pod("default", "first", exit_code=137, reason="OOMKilled")
    failed = await get_pod(client, "first")
    assert failed["status"]["phase"] == "Failed"
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")
    assert condition(failed, "Ready") == {
        **(condition(failed, "Ready") or {}),
        "status": "False",
        "reason": "PodFailed",
    }
    pod = await until(lambda: ready(client, "second"), "the freed GPUs go to the waiting pod")
    assert pod["spec"]["nodeName"] == "mi300x-0"


# --- the gang scheduler ----------------------------------------------------------------------------------


def podgroup(name: str, min_member: int, gpus: int) -> Obj:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "minResources": {"amd.com/gpu": str(gpus)}},
    }


async def test_a_gang_that_does_not_fit_waits_whole_until_a_node_is_uncordoned(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    phases: list[str] = []
    since = (await client.list(PODGROUPS, "default"))["metadata"]["resourceVersion"]

    async def watch() -> None:
        async for event in client.watch(PODGROUPS, "default", resource_version=since):
            phase = (event["object"].get("status") or {}).get("phase")
            if phase and (not phases or phases[-1] != phase):
                phases.append(phase)

    watcher = asyncio.create_task(watch())
    try:
        await cordon(client, "mi300x-1")
        await client.create(PODGROUPS, podgroup("gang", 4, 16))
        for i in range(4):
            await client.create(PODS, pod_body(f"gang-{i}", gpus=4, scheduler="volcano", group="gang"))
        # Two pods would fit on mi300x-0, the gang needs four: none is bound.
        pods = [
            await until(partial(unschedulable, client, f"gang-{i}"), f"gang-{i} unschedulable")
            for i in range(4)
        ]
        assert not any(p["spec"].get("nodeName") for p in pods)
        reasons = [(condition(p, "PodScheduled") or {}).get("reason") for p in pods]
        assert reasons == ["Schedulable", "Schedulable", "Unschedulable", "Unschedulable"]
        assert (condition(pods[0], "PodScheduled") or {})["message"] == (
            "Pod default/gang-0 can possibly be assigned to mi300x-0, once minAvailable is satisfied"
        )
        origin = "0/4 nodes are unavailable: 1 node(s) were unschedulable, 3 Insufficient amd.com/gpu."
        assert (condition(pods[2], "PodScheduled") or {})["message"] == origin
        job = (
            "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 2 Schedulable, 2 Unschedulable. "
            f"Origin reason is gang-2: {origin}"
        )
        assert (condition(pods[3], "PodScheduled") or {})["message"] == job
        group = await client.get(PODGROUPS, "gang", "default")
        assert group["status"]["phase"] == "Inqueue"
        [unsched] = [c for c in group["status"]["conditions"] if c["type"] == "Unschedulable"]
        assert (unsched["status"], unsched["reason"]) == ("True", "NotEnoughResources")
        assert unsched["message"] == f"2/4 tasks in gang unschedulable: {job}"
        assert unsched["transitionID"]
        assert await events(client, "gang", "Unschedulable")
        assert len(await events(client, "gang-3", "FailedScheduling")) == 1

        await cordon(client, "mi300x-1", on=False)
        for i in range(4):
            await until(partial(ready, client, f"gang-{i}"), f"gang-{i} bound and Ready")
        bound = sorted([(await get_pod(client, f"gang-{i}"))["spec"]["nodeName"] for i in range(4)])
        assert bound == ["mi300x-0", "mi300x-0", "mi300x-1", "mi300x-1"]

        async def running() -> Obj | None:
            pg = await client.get(PODGROUPS, "gang", "default")
            return pg if pg["status"].get("running") == 4 else None

        group = await until(running, "the PodGroup counts 4 running pods")
        assert group["status"]["phase"] == "Running"
        assert any(c["type"] == "Scheduled" and c["status"] == "True" for c in group["status"]["conditions"])
        [ready_event] = await events(client, "gang", "Scheduled")
        assert (
            ready_event["message"] == "pod group is ready" and ready_event["source"]["component"] == "volcano"
        )
        await until(lambda: asyncio.sleep(0, result=phases[-1:] == ["Running"]), "the watch sees Running")
        assert phases == ["Inqueue", "Running"]  # admitted at once (16 of 16 GPUs), then formed
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def test_a_gang_larger_than_the_cluster_is_not_admitted(client: HttpKubeClient) -> None:
    await client.create(PODGROUPS, podgroup("whale", 2, 40))  # 16 AMD GPUs x 1.2 < 40
    for i in range(2):
        await client.create(PODS, pod_body(f"whale-{i}", gpus=8, scheduler="volcano", group="whale"))
    pods = [
        await until(partial(unschedulable, client, f"whale-{i}"), f"whale-{i} unschedulable")
        for i in range(2)
    ]
    message = "pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable"
    for pod in pods:
        assert not pod["spec"].get("nodeName")
        assert (condition(pod, "PodScheduled") or {}).get("message") == message
    group = await client.get(PODGROUPS, "whale", "default")
    assert group["status"]["phase"] == "Pending"
    [cond] = group["status"]["conditions"]
    assert (cond["reason"], cond["message"]) == (
        "NotEnoughResources",
        f"2/2 tasks in gang unschedulable: {message}",
    )
    assert [
        e["message"] for e in await events(client, "whale", "Unschedulable") if e["type"] == "Normal"
    ] == ["resource in cluster is overused"]


async def test_pods_of_other_schedulers_and_volcano_pods_without_a_podgroup_are_left_alone(
    client: HttpKubeClient,
) -> None:
    await client.create(PODS, pod_body("orphan", gpus=1, scheduler="volcano", group="missing"))
    await client.create(PODS, pod_body("foreign", gpus=1, scheduler="other-scheduler"))
    await client.create(PODGROUPS, podgroup("small", 1, 1))
    await client.create(PODS, pod_body("member", gpus=1, scheduler="volcano", group="small"))
    await client.create(PODS, pod_body("plain", gpus=1))
    await until(lambda: ready(client, "member"), "the PodGroup's pod runs")
    await until(lambda: ready(client, "plain"), "the default scheduler's pod runs")
    for name in ("orphan", "foreign"):
        pod = await get_pod(client, name)
        assert not pod["spec"].get("nodeName") and condition(pod, "PodScheduled") is None, name


async def test_a_volcano_pod_without_a_group_gets_one_as_volcanos_controller_gives_it(
    client: HttpKubeClient,
) -> None:
    created = await client.create(PODS, pod_body("solo", gpus=2, scheduler="volcano"))
    group = f"podgroup-{created['metadata']['uid']}"
    pod = await until(partial(ready, client, "solo"), "the pod bound through its own PodGroup and Ready")
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
    pg = await client.get(PODGROUPS, group, "default")
    assert pg["spec"] == {"minMember": 1, "minResources": {"amd.com/gpu": "2"}}
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "solo", True)
    assert [e["source"]["component"] for e in await events(client, "solo", "Scheduled")] == ["volcano"]


# --- faults ----------------------------------------------------------------------------------------------


async def test_container_restarts_and_node_readiness_faults(
    cluster: EmbeddedCluster, client: HttpKubeClient
) -> None:
    await client.create(PODS, pod_body("svc", spec={"nodeSelector": {"kubernetes.io/hostname": "h100-0"}}))
    await until(lambda: ready(client, "svc"), "the pod Ready")

    restarted = await client.request(
        "POST",
        "/_sim/faults/restart-container",
        body={"namespace": "default", "pod": "svc", "notReadyFor": 0.3},
    )
    status = restarted["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1 and status["ready"] is False
    assert (status["lastState"]["terminated"]["exitCode"], status["lastState"]["terminated"]["reason"]) == (
        1,
        "Error",
    )
    for kind in ("Ready", "ContainersReady"):
        cond = condition(restarted, kind)
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ContainersNotReady")
        assert cond["message"] == "containers with unready status: [main]"
    pod = await until(lambda: ready(client, "svc"), "Ready again after the restart")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert "reason" not in (condition(pod, "ContainersReady") or {})

    agents(cluster).kubelet.set_node_ready("h100-0", False)
    node = await client.get(NODES, "h100-0")
    assert (condition(node, "Ready") or {})["status"] == "False"

    async def not_ready() -> bool:
        return (condition(await get_pod(client, "svc"), "Ready") or {}).get("status") == "False"

    await until(not_ready, "the pod NotReady with its node")
    await client.create(PODS, pod_body("later", gpus=1, resource="nvidia.com/gpu"))
    pod = await until(lambda: unschedulable(client, "later"), "nothing schedules onto a NotReady node")
    assert (condition(pod, "PodScheduled") or {})["message"].startswith(
        "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s)."
    )  # the control plane's taint, and the not-ready taint of h100-0
    await client.request("POST", "/_sim/faults/node-ready", body={"node": "h100-0", "ready": True})
    await until(lambda: ready(client, "svc"), "the pod Ready again with its node")
    assert (await until(lambda: ready(client, "later"), "scheduled once the node is Ready"))["spec"][
        "nodeName"
    ] == "h100-0"

    with pytest.raises(ApiError) as gone:
        await client.request("POST", "/_sim/faults/fail-pod", body={"pod": "ghost"})
    assert gone.value.status == 404
    failed = await client.request("POST", "/_sim/faults/fail-pod", body={"pod": "later", "exitCode": 2})
    assert failed["status"]["phase"] == "Failed"
    with pytest.raises(ApiError) as finished:
        await client.request("POST", "/_sim/faults/restart-container", body={"pod": "later"})
    assert finished.value.status == 409

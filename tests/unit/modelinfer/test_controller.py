"""The ModelInfer executor: observation, expectations, bad specs, ownership (in-memory API server, no agents)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiplane.controllers.modelinfer import controller as mic
from aiplane.controllers.modelinfer.observe import pod_view, views
from aiplane.kube.clock import FakeClock
from aiplane.kube.expectations import Expectations
from aiplane.kube.manager import Manager
from aiplane.kube.resources import NAMESPACES, PODGROUPS, PODS, SERVICES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from tests.polling import eventually

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
NS = "ns"


def spec(**extra: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}
    body: dict[str, Any] = {
        "replicas": 2,
        "template": {
            "roles": [
                {
                    "name": "prefill",
                    "replicas": 1,
                    "workerReplicas": 1,
                    "entryTemplate": template,
                    "workerTemplate": template,
                },
                {"name": "decode", "replicas": 1, "workerReplicas": 0, "entryTemplate": template},
            ]
        },
    }
    body.update(extra)
    return body


def modelinfer(name: str = "m", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name},
        "spec": spec(**extra),
    }


@pytest.fixture
async def env() -> AsyncIterator[InMemoryKubeClient]:
    client = InMemoryKubeClient.fresh()
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(client, leader_election=None, handle_signals=False)
    await mic.setup(manager)
    task = asyncio.create_task(manager.run())
    yield client
    manager.stop()
    assert await task == 0
    await client.close()


async def _pods(client: InMemoryKubeClient) -> list[dict[str, Any]]:
    return (await client.list(PODS, namespace=NS))["items"]


async def test_creates_groups_services_revision_and_status(env: InMemoryKubeClient) -> None:
    await env.create(MI, modelinfer(), namespace=NS)

    async def created() -> bool:
        return len(await _pods(env)) == 6  # 2 groups x (prefill entry + worker, decode entry)

    await eventually(created)
    services = (await env.list(SERVICES, namespace=NS))["items"]
    assert sorted(s["metadata"]["name"] for s in services) == [
        "m-0-prefill-0-0",
        "m-1-prefill-0-0",
    ]  # decode has no workers
    revisions = (await env.list(resource_for("apps/v1", "ControllerRevision"), namespace=NS))["items"]
    assert len(revisions) == 1
    mi = await env.get(MI, "m", NS)
    assert (
        mi["status"]["updateRevision"] == revisions[0]["metadata"]["labels"]["modelinfer.volcano.sh/revision"]
    )
    conditions = {c["type"]: c for c in mi["status"]["conditions"]}
    assert conditions["Available"]["status"] == "False"  # no kubelet here: pods stay Pending
    assert conditions["Progressing"]["status"] == "True"
    assert conditions["Valid"]["status"] == "True"
    assert (await env.list(PODGROUPS, namespace=NS))["items"] == []  # no gangSchedule, no PodGroups


async def test_bad_spec_creates_nothing_and_says_which_field(env: InMemoryKubeClient) -> None:
    bad = modelinfer(replicas=1)
    bad["spec"]["template"]["gangSchedule"] = {"minRoleReplicas": {"prefil": 1}}
    await env.create(MI, bad, namespace=NS)

    async def reported() -> bool:
        mi = await env.get(MI, "m", NS)
        return any(c["type"] == "Valid" for c in (mi.get("status") or {}).get("conditions") or [])

    await eventually(reported)
    mi = await env.get(MI, "m", NS)
    valid = next(c for c in mi["status"]["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False" and valid["reason"] == "InvalidSpec"
    assert "spec.template.gangSchedule.minRoleReplicas" in valid["message"] and "prefil" in valid["message"]
    assert await _pods(env) == []
    # Fixing the spec builds the objects.
    await env.patch(
        MI,
        "m",
        {"spec": {"template": {"gangSchedule": {"minRoleReplicas": {"prefil": None, "prefill": 1}}}}},
        namespace=NS,
    )

    async def built() -> bool:
        return len(await _pods(env)) == 3

    await eventually(built)
    assert len((await env.list(PODGROUPS, namespace=NS))["items"]) == 1


async def test_objects_of_another_owner_are_neither_counted_nor_deleted(env: InMemoryKubeClient) -> None:
    stranger = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "m-5-prefill-0-0",
            "labels": {
                "modelinfer.volcano.sh/name": "m",
                "modelinfer.volcano.sh/group-name": "m-5",
                "modelinfer.volcano.sh/role": "prefill",
                "modelinfer.volcano.sh/role-id": "prefill-0",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "img:0"}]},
    }
    await env.create(PODS, stranger, namespace=NS)
    await env.create(MI, modelinfer(), namespace=NS)

    async def created() -> bool:
        return len(await _pods(env)) == 7

    await eventually(created)
    await asyncio.sleep(0.2)  # give a wrong controller time to act on the stranger
    assert any(p["metadata"]["name"] == "m-5-prefill-0-0" for p in await _pods(env))
    assert (await env.get(MI, "m", NS))["status"]["replicas"] == 2


def _pod(name: str, **status: Any) -> dict[str, Any]:
    group = name.rsplit("-", 3)[0]
    role, r = name.split("-")[2], name.split("-")[3]
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {
                "modelinfer.volcano.sh/name": "m",
                "modelinfer.volcano.sh/group-name": group,
                "modelinfer.volcano.sh/role": role,
                "modelinfer.volcano.sh/role-id": f"{role}-{r}",
                "modelinfer.volcano.sh/revision": "rev1",
            },
            "ownerReferences": [{"uid": "mi-uid", "controller": True, "kind": "ModelInfer", "name": "m"}],
        },
        "status": status,
    }


def test_pod_view_reads_ordinals_numerically_and_failure_signals() -> None:
    pod = _pod(
        "m-10-decode-2-1",
        phase="Running",
        conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:10Z"}],
        containerStatuses=[{"name": "c", "restartCount": 2}],
    )
    view = pod_view("m", pod)
    assert view is not None
    assert (view.ordinal, view.role, view.role_index, view.pod_index) == (10, "decode", 2, 1)
    assert view.restarted and not view.ready
    assert view.not_ready_since == 1767225610.0
    assert pod_view("other", pod) is None  # not this ModelInfer's group name


def test_views_keep_only_what_this_modelinfer_controls() -> None:
    mine, theirs = _pod("m-0-prefill-0-0"), _pod("m-1-prefill-0-0")
    theirs["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    pods, services = views({"metadata": {"name": "m", "uid": "mi-uid"}}, [theirs, mine], [])
    assert [p.name for p in pods] == ["m-0-prefill-0-0"] and services == ()


def test_expectations_wait_for_the_cache_then_time_out() -> None:
    clock = FakeClock()
    exp = Expectations(timeout=mic.EXPECTATIONS_TIMEOUT, clock=clock.monotonic)
    created = {"kind": "Pod", "metadata": {"name": "m-0-a-0-0", "resourceVersion": "7", "uid": "u0"}}
    victim = {"kind": "Pod", "metadata": {"name": "m-0-a-0-1", "resourceVersion": "3", "uid": "u1"}}
    exp.wrote("Pod/ns/m-0-a-0-0", None, created, conditional=True, owner="ns/m")
    exp.wrote("Pod/ns/m-0-a-0-1", victim, None, conditional=True, owner="ns/m")
    cache: dict[str, Any] = {"Pod/ns/m-0-a-0-1": victim}
    assert exp.pending("ns/m", cache.get)  # the create is not in the cache yet
    cache["Pod/ns/m-0-a-0-0"] = created
    assert exp.pending("ns/m", cache.get)  # delete not seen yet
    del cache["Pod/ns/m-0-a-0-1"]
    assert not exp.pending("ns/m", cache.get)
    exp.wrote(
        "Pod/ns/m-0-a-0-2",
        None,
        {**created, "metadata": {"name": "x", "resourceVersion": "9"}},
        conditional=True,
        owner="ns/m",
    )
    assert not exp.pending("ns/other", cache.get)  # another owner's writes do not hold this one back
    clock.advance(mic.EXPECTATIONS_TIMEOUT + 1)
    assert not exp.pending("ns/m", cache.get)  # a watch event that never came


async def test_podgroups_go_when_gang_scheduling_is_removed(env: InMemoryKubeClient) -> None:
    body = modelinfer()
    body["spec"]["template"]["gangSchedule"] = {"minRoleReplicas": {"prefill": 1}}
    await env.create(MI, body, namespace=NS)

    async def podgroups(n: int) -> bool:
        return len((await env.list(PODGROUPS, namespace=NS))["items"]) == n

    await eventually(lambda: podgroups(2))
    pods = await _pods(env)
    assert all(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] in ("m-0", "m-1") for p in pods)
    await env.patch(MI, "m", {"spec": {"template": {"gangSchedule": None}}}, namespace=NS)
    await eventually(lambda: podgroups(0))


async def test_without_volcano_the_controller_runs_without_podgroups_and_says_so() -> None:
    from aiplane.kube.resources import CRDS, EVENTS

    client = InMemoryKubeClient.fresh()
    await client.delete(CRDS, "podgroups.scheduling.volcano.sh")
    assert not await client.served(PODGROUPS)
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(client, leader_election=None, handle_signals=False, cache_sync_timeout=10)
    await mic.setup(manager)
    task = asyncio.create_task(manager.run())
    try:
        body = modelinfer(replicas=1)
        body["spec"]["template"]["gangSchedule"] = {"minRoleReplicas": {"prefill": 1}}
        await client.create(MI, body, namespace=NS)

        async def built_and_warned() -> bool:
            events = (await client.list(EVENTS, namespace=NS))["items"]
            return len(await _pods(client)) == 3 and any(
                e["reason"] == "PodGroupsUnavailable" for e in events
            )

        await eventually(built_and_warned)
    finally:
        manager.stop()
        assert await task == 0
        await client.close()


async def test_a_reconcile_waiting_for_its_own_writes_comes_back_when_they_time_out() -> None:
    """A create whose watch event never comes holds the ModelInfer's decisions back; the reconcile asks
    to come back when the wait times out, and after it the ModelInfer is decided again."""
    from aiplane.kube.controller import Request

    clock = FakeClock()
    client = InMemoryKubeClient.fresh()
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(client, leader_election=None, handle_signals=False, clock=clock)
    controller = mic.setup_controller(manager)
    manager.add_controller(controller)
    shape = controller.reconciler.shape
    task = asyncio.create_task(manager.run())
    try:
        await client.create(MI, modelinfer(replicas=1), namespace=NS)
        await eventually(lambda: _count(client, 3))
        request = Request(namespace=NS, name="m")
        await eventually(lambda: _decided(shape, request))  # our own writes reach the cache
        # A pod we "created" whose event the cache never shows.
        ghost = {"kind": "Pod", "metadata": {"name": "m-0-ghost", "namespace": NS, "resourceVersion": "1"}}
        owner = mic._owner(f"{NS}/m")
        shape.expectations.wrote(f"Pod/{NS}/m-0-ghost", None, ghost, conditional=True, owner=owner)
        waiting = await shape.observe(request)
        assert waiting is not None and not waiting.decided
        result = await shape.report(waiting, shape.decide(waiting, clock.now()))
        assert result is not None and result.requeue_after == mic.EXPECTATIONS_TIMEOUT
        clock.advance(mic.EXPECTATIONS_TIMEOUT + 1)
        again = await shape.observe(request)
        assert again is not None and again.decided
    finally:
        manager.stop()
        assert await task == 0
        await client.close()


async def _count(client: InMemoryKubeClient, n: int) -> bool:
    return len(await _pods(client)) == n


async def _decided(shape: Any, request: Any) -> bool:
    observed = await shape.observe(request)
    return observed is not None and bool(observed.decided)

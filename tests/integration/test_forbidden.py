"""A misconfigured role (one permission removed from the chart's ClusterRole): the operator names the
missing permission, reports it once (error log, Warning Event on the object), retries with a capped
backoff instead of a hot loop, and recovers when the role is fixed — without a restart."""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from aiplane.api import kinds
from aiplane.controllers.partitioning import node as node_controller
from aiplane.controllers.partitioning import plan as plan_controller
from aiplane.controllers.partitioning import profile as profile_controller
from aiplane.kube.forbidden import PERMISSION_DENIED
from aiplane.kube.informer import Backoff
from aiplane.kube.manager import Manager
from aiplane.sim.apiserver.access import RBAC
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool
from aiplane.sim.identities import ServiceAccountAccess, apply_objects, grant
from tests.integration import operator_rbac
from tests.integration.sim_helpers import events
from tests.polling import eventually

Obj = dict[str, Any]
GROUP = "infrastructure.silogen.ai"
PRODUCT = "AMD_Instinct_MI300X"


def _without(resource: str, group: str) -> list[Obj]:
    """The chart's RBAC with ``resource`` of ``group`` taken out of every ClusterRole rule."""
    docs = copy.deepcopy(list(operator_rbac.chart_rbac()))
    for doc in docs:
        if doc["kind"] != "ClusterRole":
            continue
        rules = []
        for rule in doc["rules"]:
            if group in rule["apiGroups"]:
                rule["resources"] = [r for r in rule["resources"] if r != resource]
            if rule["resources"]:
                rules.append(rule)
        doc["rules"] = rules
    return docs


def _without_verb(verb: str, resource: str, group: str) -> list[Obj]:
    """The chart's RBAC with ``verb`` on ``resource`` of ``group`` taken out of every ClusterRole rule."""
    docs = copy.deepcopy(list(operator_rbac.chart_rbac()))
    for doc in docs:
        if doc["kind"] != "ClusterRole":
            continue
        rules = []
        for rule in doc["rules"]:
            if not (group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]):
                rules.append(rule)
                continue
            others = [r for r in rule["resources"] if r != resource]
            if others:
                rules.append({**rule, "resources": others})
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                rules.append({**rule, "resources": [resource], "verbs": verbs})
        doc["rules"] = rules
    return docs


def _profile(name: str, product: str = PRODUCT) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "PartitioningProfile",
        "metadata": {"name": name},
        "spec": {
            "dcmProfileName": "cpx",
            "targetSelector": {"matchLabels": {"amd.com/gpu.product-name": product}},
            "expectedResources": {"amd.com/gpu": "64"},
        },
    }


def _plan(name: str, product: str = PRODUCT) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {
            "rollout": {"maxParallel": 1, "maxUnavailable": 1},
            "rules": [
                {
                    "selector": {"matchLabels": {"amd.com/gpu.product-name": product}},
                    "profileRef": {"name": "p"},
                }
            ],
        },
    }


@dataclass
class World:
    cluster: EmbeddedCluster
    admin: InMemoryKubeClient
    access: ServiceAccountAccess
    manager: Manager

    def denied(self, verb: str, resource: str, subresource: str = "") -> int:
        return sum(
            count
            for (_, v, _g, r, sub, _ns, allowed), count in self.access.permissions().items()
            if (v, r, sub, allowed) == (verb, resource, subresource, False)
        )

    async def status(self, res: Any, name: str) -> Obj:
        return dict((await self.admin.get(res, name)).get("status") or {})

    def restore(self) -> None:
        apply_objects(self.cluster, operator_rbac.chart_rbac())


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., Any]]:
    running: list[tuple[EmbeddedCluster, Manager, asyncio.Task[int]]] = []

    async def _start(
        docs: list[Obj], *setups: Any, cluster_kw: dict[str, Any] | None = None, **manager_kw: Any
    ) -> World:
        cluster = EmbeddedCluster(authorization_mode=RBAC, **(cluster_kw or {}))
        await cluster.start()
        namespace, name = operator_rbac.service_account()
        access = grant(cluster, namespace, name, docs)
        manager = Manager(access.client(), leader_election=None, handle_signals=False, **manager_kw)
        for setup in setups:
            await setup(manager)
        running.append((cluster, manager, asyncio.create_task(manager.run())))
        return World(cluster, InMemoryKubeClient.for_cluster(cluster), access, manager)

    yield _start
    for cluster, manager, task in running:
        manager.stop()
        assert await task == 0
        await cluster.stop()


async def test_a_forbidden_write_names_the_permission_backs_off_and_recovers(start: Any) -> None:
    world = await start(_without("partitioningprofiles/status", GROUP), profile_controller.setup)
    with capture_logs() as logs:
        await world.admin.create(kinds.PARTITIONINGPROFILES, _profile("p"))
        (event,) = await eventually(lambda: events(world.admin, "p", "Forbidden"), what="Forbidden Event")
        first = time.monotonic()
        assert event["type"] == "Warning"
        missing = 'patch on "partitioningprofiles/status" in API group "infrastructure.silogen.ai" at the cluster scope'
        assert missing in event["message"]
        assert 'resources: ["partitioningprofiles/status"], verbs: ["patch"]' in event["message"]
        # Observe the retry rate over a window: a capped exponential backoff, not a hot loop.
        await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - first)))
        attempts = world.denied("patch", "partitioningprofiles", "status")
        assert 2 <= attempts <= 12, f"{attempts} forbidden attempts in about 2 s"
        reports = [e for e in logs if e["log_level"] == "error"]
    assert len(reports) == 1, reports  # once per interval, however many retries
    assert reports[0]["missing"] == missing
    assert reports[0]["user"] == "system:serviceaccount:aiplane-system:aiplane"
    assert not await world.status(kinds.PARTITIONINGPROFILES, "p")

    world.restore()
    await eventually(
        lambda: world.status(kinds.PARTITIONINGPROFILES, "p"), timeout=8, what="status after the fix"
    )


async def test_a_forbidden_list_blocks_only_its_controllers_until_the_role_is_fixed(
    start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="aiplane.kube.informer")
    world = await start(
        _without("configmaps", ""),
        profile_controller.setup,
        plan_controller.setup,
        cache_sync_timeout=0.3,
        informer_backoff=lambda: Backoff(initial=0.05, cap=0.5),
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )
    await world.admin.create(kinds.PARTITIONINGPROFILES, _profile("p"))
    await world.admin.create(kinds.PARTITIONINGPLANS, _plan("roll"))
    # The plan controller does not need ConfigMaps: it starts and reports on its plan.
    await eventually(lambda: world.status(kinds.PARTITIONINGPLANS, "roll"), what="the plan controller ran")
    first = time.monotonic()
    assert not await world.status(
        kinds.PARTITIONINGPROFILES, "p"
    )  # the profile controller waits for its cache
    reports = [r.getMessage() for r in caplog.records if "forbidden" in r.getMessage()]
    assert len(reports) == 1, reports
    assert 'list on "configmaps" in API group ""' in reports[0]
    # Observe the relist rate over a window: the informer's capped backoff, not a hot loop.
    await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - first)))
    assert world.denied("list", "configmaps") <= 12
    # Not ready, and the probe and the metric say which view the role refuses and the rule to add.
    manager = world.manager
    assert manager.health_port is not None and manager.metrics_port is not None
    status, body = await _get(manager.health_port, "/readyz?verbose")
    assert status == 500 and "[-]forbidden failed" in body and "[+]informers ok" in body
    status, body = await _get(manager.health_port, "/readyz/forbidden")
    assert status == 500
    # The profile controller's ConfigMaps informer (the AMD GPU operator's namespace) and the rule.
    assert "configmaps/kube-amd-gpu" in body
    assert 'list on "configmaps" in API group "" in namespace "kube-amd-gpu"' in body
    assert 'resources: ["configmaps"], verbs: ["list"]' in body
    forbidden_metric = re.compile(
        r'aiplane_informer_forbidden\{informer="configmaps/kube-amd-gpu[^"]*"\} (\S+)'
    )
    assert forbidden_metric.findall((await _get(manager.metrics_port, "/metrics"))[1]) == ["1.0"]

    world.restore()
    await eventually(
        lambda: world.status(kinds.PARTITIONINGPROFILES, "p"), timeout=5, what="profile status after the fix"
    )
    assert await _get(manager.health_port, "/readyz") == (200, "ok")
    assert forbidden_metric.findall((await _get(manager.metrics_port, "/metrics"))[1]) == ["0.0"]


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


def _permission_denied(obj: Obj) -> Obj | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == PERMISSION_DENIED), None)


async def test_a_forbidden_node_update_shows_on_the_node_partitioning_until_the_role_is_fixed(
    start: Any,
) -> None:
    """A NodePartitioning whose node cannot be updated says so (condition and
    Event naming the verb and resource), instead of sitting Pending with only log lines."""
    fleet = Fleet(
        nodePools=[NodePool(name="mi300x", count=2, gpu=GpuSpec(vendor="amd", product="MI300X", count=8))]
    )
    oam = "AMD_Instinct_MI300X_OAM"
    world = await start(
        _without_verb("update", "nodes", ""),
        profile_controller.setup,
        plan_controller.setup,
        node_controller.setup,
        cluster_kw={"fleet": fleet, "agents": True, "ready_delay": 0.0, "dcm_delay": 0.05},
    )
    await world.admin.create(kinds.PARTITIONINGPROFILES, _profile("p", oam))
    plan = _plan("roll", oam)
    plan["spec"]["rollout"] = {"maxParallel": 2, "maxUnavailable": 2}
    await world.admin.create(kinds.PARTITIONINGPLANS, plan)

    async def denied() -> list[Obj]:
        items = (await world.admin.list(kinds.NODEPARTITIONINGS))["items"]
        return [c for c in map(_permission_denied, items) if c is not None and c["status"] == "True"]

    shown = await eventually(denied, timeout=15, what="PermissionDenied on a NodePartitioning")
    assert shown[0]["reason"] == "Forbidden"
    assert 'update on "nodes" in API group "" at the cluster scope' in shown[0]["message"]
    assert 'resources: ["nodes"], verbs: ["update"]' in shown[0]["message"]
    items = (await world.admin.list(kinds.NODEPARTITIONINGS))["items"]
    name = next(n["metadata"]["name"] for n in items if _permission_denied(n) is not None)
    (event, *_) = await eventually(lambda: events(world.admin, name, "Forbidden"), what="Forbidden Event")
    assert event["type"] == "Warning"
    assert 'update on "nodes"' in event["message"]

    world.restore()

    async def completed() -> bool:
        phase = (await world.status(kinds.PARTITIONINGPLANS, "roll")).get("phase")
        items = (await world.admin.list(kinds.NODEPARTITIONINGS))["items"]
        return phase == "Completed" and not any(_permission_denied(n) for n in items)

    await eventually(completed, timeout=20, what="the rollout completes and the condition is gone")


async def test_a_refused_watch_keeps_readyz_failing_until_the_role_is_fixed(start: Any) -> None:
    """The list is allowed and the watch is not: the informer lists between refused watches, which must
    not read as recovered (readiness does not flap), and a fixed role is picked up."""
    world = await start(
        _without_verb("watch", "configmaps", ""),
        profile_controller.setup,
        cache_sync_timeout=0.3,
        informer_backoff=lambda: Backoff(initial=0.05, cap=0.2),
        health_probe_bind_address="127.0.0.1:0",
    )
    await asyncio.wait_for(world.manager.serving.wait(), 5)
    port = world.manager.health_port
    assert port is not None

    async def refused() -> str | None:
        status, body = await _get(port, "/readyz/forbidden")
        return body if status == 500 else None

    body = await eventually(refused, what="/readyz/forbidden fails")
    assert 'watch on "configmaps" in API group "" in namespace "kube-amd-gpu"' in body
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a window across several list-then-refused-watch rounds
        assert await refused(), "readiness flapped to ok while the watch is still refused"
        await asyncio.sleep(0.05)
    assert world.denied("watch", "configmaps") >= 2  # it did list and retry the watch meanwhile

    world.restore()
    assert await eventually(
        lambda: _ok(port), timeout=10, what="/readyz/forbidden ok once the watch is allowed"
    )


async def _ok(port: int) -> bool:
    return await _get(port, "/readyz/forbidden") == (200, "ok")

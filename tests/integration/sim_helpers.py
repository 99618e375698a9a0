"""Helpers shared by the integration tests of the embedded cluster's simulated agents
(``test_sim_agents.py``, ``test_sim_scheduling.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio.client import Configuration

from aiplane.kube.client import HttpKubeClient, KubeClient
from aiplane.kube.resources import EVENTS
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet
from aiplane.sim.identities import ServiceAccountAccess, grant

T = TypeVar("T")
Obj = dict[str, Any]


async def until(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 5.0) -> T:
    """Poll ``check`` until it returns something truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def agent_cluster(fleet: Fleet | None = None) -> AsyncIterator[EmbeddedCluster]:
    """A started embedded cluster (the default fleet unless ``fleet``) with its agents on fast timers."""
    sim = EmbeddedCluster(fleet=fleet, install_crds=False, agents=True, ready_delay=0.01, dcm_delay=0.05)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


@contextlib.asynccontextmanager
async def http_client(
    cluster: EmbeddedCluster, kubeconfig: Obj | None = None
) -> AsyncIterator[HttpKubeClient]:
    """An ``HttpKubeClient`` for ``cluster`` from its admin kubeconfig (or ``kubeconfig``, e.g. a
    ServiceAccount's: ``grant(cluster, ns, sa, manifests).kubeconfig()``), closed on exit."""
    configuration = Configuration()
    await kconfig.load_kube_config_from_dict(
        kubeconfig or cluster.kubeconfig(), client_configuration=configuration
    )
    client = HttpKubeClient(configuration, qps=1000, burst=1000, user_agent="aiplane-test")
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def rbac_cluster(
    manifests: Iterable[Obj] = (), namespace: str = "default", name: str = "operator", **cluster_kw: Any
) -> AsyncIterator[tuple[EmbeddedCluster, ServiceAccountAccess]]:
    """A started embedded cluster authorizing by RBAC, and ServiceAccount ``namespace/name`` granted
    ``manifests`` (Roles, ClusterRoles, bindings; see ``aiplane.sim.identities.grant``): act as it with
    ``access.client()`` (in-memory) or ``access.kubeconfig()`` (HTTP); ``access.denied()`` and
    ``access.permissions()`` say what it was refused and what it used."""
    sim = EmbeddedCluster(authorization_mode="RBAC", **cluster_kw)
    await sim.start()
    try:
        yield sim, grant(sim, namespace, name, manifests)
    finally:
        await sim.stop()


async def events(client: KubeClient, involved: str, reason: str, namespace: str = "default") -> list[Obj]:
    """The Events in ``namespace`` about the object named ``involved`` with ``reason``."""
    listed = await client.list(
        EVENTS, namespace, field_selector=f"involvedObject.name={involved},reason={reason}"
    )
    return list(listed["items"])

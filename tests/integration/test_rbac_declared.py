"""Each controller's declared PERMISSIONS cover what its setup really asks of the API server: every
informer it starts (list + watch) and every API it probes (a one-item list).

This checks the reads a controller sets up; its writes are declared from reading its act step (see
docs/install.md, "RBAC"), as no RBAC-enforcing cluster here can refuse a missing verb yet.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from aiplane.controllers import registry
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.monitoring.options import MonitoringOptions
from aiplane.kube.client import HttpKubeClient
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import Permission
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import http_client


def _granted(perms: tuple[Permission, ...]) -> set[tuple[str, str, str]]:
    return {(p.group, r, v) for p in perms for r in p.resources for v in p.verbs}


def _probes(client: HttpKubeClient) -> list[str]:
    """Paths the client lists during setup (``served`` checks), recorded by wrapping ``request``."""
    seen: list[str] = []
    original = client.request

    async def request(method: str, path: str, *args: Any, **kw: Any) -> Any:
        if method == "GET":
            seen.append(path)
        return await original(method, path, *args, **kw)

    client.request = request  # type: ignore[method-assign]
    return seen


def _group_resource(path: str) -> tuple[str, str]:
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    return group, rest[0]


@pytest.mark.parametrize("name", sorted(registry.permissions()))
async def test_declared_permissions_cover_every_informer_and_probe(name: str) -> None:
    declared = _granted(registry.permissions([name])[name])
    cluster = EmbeddedCluster()
    await cluster.start()
    try:
        async with http_client(cluster) as client:
            probes = _probes(client)
            manager = Manager(client, handle_signals=False)
            manager.set_options(DynamoOptions(istio_gateway="istio-system/gateway"))
            manager.set_options(MonitoringOptions(enabled=True, endpoint="http://prometheus:9090"))
            result = registry.CONTROLLERS[name](manager)
            if inspect.isawaitable(result):
                await result
            needed = {
                (inf.resource.group, inf.resource.plural, verb)
                for inf in manager.informers.informers
                for verb in ("list", "watch")
            }
            needed |= {(*_group_resource(path), "list") for path in probes}
            assert manager.informers.informers, f"{name} started no informer"
            assert needed <= declared, f"{name} does not declare {sorted(needed - declared)}"
    finally:
        await cluster.stop()

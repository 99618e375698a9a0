"""Fixtures shared by the integration modules that test the runtime over real HTTP (a module that
needs another cluster defines its own ``cluster``/``client`` fixtures, which take precedence)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet
from tests.integration.sim_helpers import http_client


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    """An empty embedded cluster: no nodes, no CRDs."""
    c = EmbeddedCluster(fleet=Fleet(nodePools=[]), install_crds=False)
    await c.start()
    yield c
    await c.stop()


@pytest.fixture
async def client(cluster: EmbeddedCluster) -> AsyncIterator[HttpKubeClient]:
    """An HTTP client of ``cluster`` as the admin."""
    async with http_client(cluster) as c:
        yield c

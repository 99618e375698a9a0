"""The graph controller remembers its own writes of two kinds, DGDs and DCDs, in one place.

A DCD is named ``<graph>-<service>``, so graph ``a`` with service ``b`` owns DCD ``a-b`` while a
second graph may itself be called ``a-b``. Both live in the same namespace: the record of a write
must say which kind it is about, or one graph's write is mistaken for the other's object.
"""

from __future__ import annotations

from typing import Any

from aiplane.api import kinds
from aiplane.controllers.dynamo.graph_controller import GraphController, LwsProbe
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.kube.clock import FakeClock
from aiplane.kube.controller import Request
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.resources import NAMESPACES, PVCS, SERVICEACCOUNTS
from aiplane.kube.shape import Shaped
from aiplane.sim.client import InMemoryKubeClient

NS = "team-a"
Obj = dict[str, Any]


def graph(name: str, service: str) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"services": {service: {"componentType": "frontend", "replicas": 1}}},
    }


async def test_a_graph_named_like_another_graphs_component_is_not_mistaken_for_it() -> None:
    client = InMemoryKubeClient.fresh()
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    dgds = Informer(client, kinds.DGDS)
    dcds = Informer(client, kinds.DCDS)
    clock = FakeClock()
    controller = GraphController(
        client,
        dgds,
        dcds,
        Informer(client, PVCS),
        Informer(client, SERVICEACCOUNTS),
        EventRecorder(client, "test"),
        clock,
        DynamoOptions(),
        LwsProbe(client, clock),
    )
    reconcile = Shaped(controller, clock)
    for body in (graph("a", "b"), graph("a-b", "c")):
        created = await client.create(kinds.DGDS, body, namespace=NS)
        dgds.cache.put(f"{NS}/{body['metadata']['name']}", created)

    # Graph a creates its DCD a-b; the DCD cache has not shown it yet (it never will in this test).
    await reconcile(Request(NS, "a"))
    dcd = await client.get(kinds.DCDS, "a-b", NS)
    assert dcd["metadata"]["ownerReferences"][0]["name"] == "a"
    # Graph a-b is reconciled (its finalizer and status are written) while that DCD is in flight.
    await reconcile(Request(NS, "a-b"))

    # Graph a, reconciled again on the same caches, sees its DCD as it wrote it: nothing to write.
    client.reset_counts()
    await reconcile(Request(NS, "a"))
    assert client.writes == 0, client.requests_by_resource
    after = await client.get(kinds.DCDS, "a-b", NS)
    assert after["metadata"]["resourceVersion"] == dcd["metadata"]["resourceVersion"]
    status = (await client.get(kinds.DGDS, "a", NS)).get("status", {})
    assert "DynamoGraphDeployment" not in str(status)

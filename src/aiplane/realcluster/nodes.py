"""The fleet's Nodes as kwok fakes: the same objects ``aiplane sim --fleet`` registers (GPU capacity,
labels, taints), marked for kwok and without the conditions, which kwok sets and then keeps fresh.

kwok's node-initialize stage only picks up a node that is not Ready yet, and its heartbeat stage only a
node it initialized (phase Running), so a node created Ready would never be heartbeated and would turn
NotReady under the node-lifecycle controller.
"""

from __future__ import annotations

import copy
from typing import Any

from aiplane.sim.fleet import Fleet, node_objects

# kwok manages the nodes carrying this annotation (kwok's own convention, --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


def fake_nodes(fleet: Fleet) -> list[dict[str, Any]]:
    nodes = []
    for template in node_objects(fleet):
        node = copy.deepcopy(template)
        node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION[0]] = KWOK_ANNOTATION[1]
        node["status"].pop("conditions", None)
        node["spec"]["providerID"] = f"kwok://{node['metadata']['name']}"
        nodes.append(node)
    return nodes

"""PartitioningPlan decisions, as pure functions of observed objects: the names the executor uses.

The decisions live in modules named for what they decide, each pure (no I/O, no clock: ``now`` is an
argument) and property-tested:

* :mod:`~aiplane.controllers.partitioning.views` reads the cached objects once into typed views
  (``plan_view``, ``node_views``, ``profile_views``, ``node_partitioning_views``);
* :mod:`~aiplane.controllers.partitioning.selection` — which rule selects which node, and what holds
  it back (profiles not Ready, targetSelector, overlaps, cross-plan conflicts);
* :mod:`~aiplane.controllers.partitioning.identity` — names, ownership, one child per node;
* :mod:`~aiplane.controllers.partitioning.children` — the NodePartitionings to apply and to delete;
* :mod:`~aiplane.controllers.partitioning.admission` — the admission contract (read it if you touch
  the NodePartitioning state machine) and ``maxParallel``/``maxUnavailable``;
* :mod:`~aiplane.controllers.partitioning.plan_status` — summary, phase and conditions.

Reconcile, in the order the controller should run it::

    plan = plan_view(obj); nps = node_partitioning_views(all_nps); profiles = profile_views(...)
    sel = select_nodes(plan, node_views(nodes), profiles, nps)      # who gets what, and problems
    children = children_by_node(plan, nps)                          # this plan's, one per node
    for node, body in desired_node_partitionings(plan, sel, profiles).items():
        if np_needs_update(children.get(node), body): server-side apply body
    for name in stale_node_partitionings(plan, sel, nps): delete name
    for node in revoke(plan, children, eligible=sel.admissible): patch revocation_patch(children[node])
    for node in admit(plan, children, eligible=sel.admissible): patch admission_patch(children[node])
    status, changed = plan_status(plan, sel, nps, now, plan.status)
    if changed: write status

The controller does not call these over the whole fleet on every event: its
:class:`~aiplane.controllers.partitioning.plan_index.PlanIndex` keeps the same results up to date
per Node / NodePartitioning event (``admit_from``, ``status_of`` take what it keeps); the functions
above are the specification it is tested against.

What upstream did (silogen/kaiwo, ``internal/controller/infrastructure/partitioning/
partitioningplan_controller.go``), and the bugs fixed here, are in docs/partitioning.md.
"""

from __future__ import annotations

from aiplane.controllers.partitioning.admission import admission_patch, admit, revocation_patch, revoke
from aiplane.controllers.partitioning.children import (
    desired_node_partitionings,
    np_needs_update,
    stale_node_partitionings,
)
from aiplane.controllers.partitioning.identity import children_by_node
from aiplane.controllers.partitioning.plan_status import (
    NODES_EXCLUDED,
    PAUSED,
    PLAN_READY,
    ROLLOUT_COMPLETED,
    ROLLOUT_DEGRADED,
    plan_status,
)
from aiplane.controllers.partitioning.selection import select_nodes
from aiplane.controllers.partitioning.views import (
    node_partitioning_views,
    node_views,
    plan_view,
    profile_views,
)
from aiplane.controllers.partitioning.vocabulary import API_VERSION, NODE_PARTITIONING_KIND

__all__ = [
    "API_VERSION",
    "NODES_EXCLUDED",
    "NODE_PARTITIONING_KIND",
    "PAUSED",
    "PLAN_READY",
    "ROLLOUT_COMPLETED",
    "ROLLOUT_DEGRADED",
    "admission_patch",
    "admit",
    "children_by_node",
    "desired_node_partitionings",
    "node_partitioning_views",
    "node_views",
    "np_needs_update",
    "plan_status",
    "plan_view",
    "profile_views",
    "revocation_patch",
    "revoke",
    "select_nodes",
    "stale_node_partitionings",
]

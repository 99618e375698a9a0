"""What one plan reconcile costs per target, counted, not timed.

The plan controller compares every target's desired NodePartitioning with the existing one on every
reconcile; building a whole view of each desired body for that comparison was a tenth of the
operator's CPU at 1,000 nodes. These tests count the views built and hold the cheap comparison to
the view-based one it replaces.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aiplane.controllers.partitioning import children
from aiplane.controllers.partitioning.views import node_partitioning_view
from tests.unit.partitioning.test_plan_decide import (
    desired_node_partitionings,
    fleet,
    make_np,
    make_plan,
    profiles,
    select_nodes,
)


def test_comparing_targets_builds_no_view_of_the_desired_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan()
    sel = select_nodes(plan, fleet(), profiles(), [])
    desired = desired_node_partitionings(plan, sel, profiles())
    existing = {
        node: node_partitioning_view(
            make_np(plan, node, "Verifying", profile=body["spec"]["profileRef"]["name"])
        )
        for node, body in desired.items()
    }
    assert len(existing) > 1
    built: list[Any] = []
    real = children.node_partitioning_view
    monkeypatch.setattr(children, "node_partitioning_view", lambda obj: built.append(obj) or real(obj))
    assert not any(children.np_needs_update(existing[node], body) for node, body in desired.items())
    assert built == []


def _variants(body: dict[str, Any]) -> list[dict[str, Any]]:
    edits = [
        lambda o: o["spec"].__setitem__("desiredHash", "other"),
        lambda o: o["spec"].__setitem__("dryRun", True),
        lambda o: o["spec"].__setitem__("dryRun", "true"),
        lambda o: o["spec"].__setitem__("profileRef", {"name": "x"}),
        lambda o: o["spec"].__setitem__("profileRef", None),
        lambda o: o["spec"].__setitem__("planRef", {"name": "p"}),
        lambda o: o["spec"].__setitem__("nodeName", 7),
        lambda o: o["metadata"].pop("labels"),
        lambda o: o["metadata"].pop("ownerReferences"),
        lambda o: o["metadata"]["ownerReferences"][0].__setitem__("controller", False),
    ]
    out = [copy.deepcopy(body)]
    for edit in edits:
        changed = copy.deepcopy(body)
        edit(changed)
        out.append(changed)
    return out


def test_the_cheap_comparison_is_the_view_comparison() -> None:
    plan = make_plan()
    sel = select_nodes(plan, fleet(), profiles(), [])
    for node, body in desired_node_partitionings(plan, sel, profiles()).items():
        existing = node_partitioning_view(make_np(plan, node, "Succeeded"))
        for variant in _variants(body):
            by_view = children._owned_fields(existing) != children._owned_fields(
                node_partitioning_view(variant)
            )
            assert children.np_needs_update(existing, variant) == by_view

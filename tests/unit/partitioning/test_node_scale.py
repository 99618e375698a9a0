"""What one NodePartitioning reconcile costs, counted, not timed.

The executor reconciles each NodePartitioning some ten times in a rollout. Deep-copying the whole Node
and rebuilding the Node, NodePartitioning and profile views (quantity parsing, the profile's hash) on
each of them was a large part of the operator's CPU at 1,000 nodes: the work copy now copies only what
actions write, the views are built once per cached object, and the state machine's view of its work
copy keeps the parsed allocatable.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.partitioning import node as node_module
from aiplane.controllers.partitioning import views
from aiplane.controllers.partitioning.node_actions import (
    Cordon,
    MarkApplied,
    RemoveLabels,
    SetLabels,
    Taint,
    Uncordon,
    UnmarkApplied,
    Untaint,
    apply_node_actions,
)
from aiplane.controllers.partitioning.node_decide import NodeObservation, decide
from tests.unit.partitioning.test_node_decide import NOW, NP_NAME, make_node, make_np, make_profile, ours

ACTIONS = [
    Cordon(NP_NAME),
    Uncordon(NP_NAME),
    Taint(NP_NAME),
    Untaint(NP_NAME),
    SetLabels((("dcm.amd.com/gpu-config-profile", "cpx"), ("x", "y"))),
    RemoveLabels(("dcm.amd.com/gpu-config-profile",)),
    MarkApplied("mark"),
    UnmarkApplied(NP_NAME),
]


@given(st.lists(st.sampled_from(ACTIONS), max_size=8), st.booleans())
def test_actions_on_the_writable_copy_never_touch_the_observed_node(
    actions: list[Any], tainted: bool
) -> None:
    node = ours(make_node()) if tainted else make_node()
    before = copy.deepcopy(node)
    by_deep_copy = copy.deepcopy(node)
    for action in actions:
        action.mutate(by_deep_copy)
    assert apply_node_actions(node, actions) == by_deep_copy
    assert node == before


def test_a_decision_parses_no_quantity_of_a_node_it_already_has_a_view_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Draining cordons and taints the work copy: its view is rebuilt per action without reparsing
    ``status.allocatable`` (the observation's view is reused to start with)."""
    np = make_np(phase="Pending", admitted=True)
    node = make_node()
    observed = views.node_view(node)
    parsed: list[Any] = []
    real = views._amount
    monkeypatch.setattr(views, "_amount", lambda value: parsed.append(value) or real(value))
    seen = NodeObservation(
        np=views.node_partitioning_view(np),
        node=observed,
        profile=views.profile_view(make_profile()),
        pods=(),
        dcm_events=(),
    )
    d = decide(seen, NOW)
    assert d.node_mutations  # it did cordon and taint the work copy
    assert parsed == []


def test_the_executor_builds_one_view_per_cached_object(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    for name in ("node_view", "node_partitioning_view", "profile_view"):
        real = getattr(node_module, name)
        monkeypatch.setattr(
            node_module, name, lambda obj, _real=real, _name=name: built.append(_name) or _real(obj)
        )
    memo = node_module._Views()
    node, np, profile = make_node(), make_np(), make_profile()
    for _ in range(5):  # five reconciles of an unchanged NodePartitioning
        memo.node("mi300x-0", node)
        memo.np("np", np)
        memo.profile(profile)
    assert sorted(built) == ["node_partitioning_view", "node_view", "profile_view"]
    memo.node("mi300x-0", copy.deepcopy(node))  # a new version of the Node: one more view
    assert built.count("node_view") == 2

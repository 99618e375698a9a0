"""The NodePartitionings a plan should have, and the ones it should no longer have.

A plan owns one NodePartitioning per target node, created and updated by server-side apply of the
bodies :func:`desired_node_partitionings` returns and deleted when :func:`stale_node_partitionings`
lists them. Both are silent for an invalid plan ("nothing is applied, nothing is deleted").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiplane.apimachinery.meta import controller_of, controller_owner_reference
from aiplane.controllers.partitioning.identity import children_by_node, is_child, np_name, plan_label_value
from aiplane.controllers.partitioning.selection import Selection
from aiplane.controllers.partitioning.views import (
    NodePartitioningView,
    PlanView,
    ProfileView,
    node_partitioning_view,
)
from aiplane.controllers.partitioning.vocabulary import API_VERSION, NODE_PARTITIONING_KIND, PLAN_LABEL

__all__ = ["desired_node_partitionings", "np_needs_update", "stale_node_partitionings"]


def desired_node_partitionings(
    plan: PlanView,
    selection: Selection,
    profiles_by_name: Mapping[str, ProfileView],
    *,
    nodes: Iterable[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """The NodePartitioning each target node should have, for server-side apply, keyed by node
    (only the target nodes among ``nodes`` when given: the plan controller asks for the nodes an
    event touched).

    Empty for an invalid plan ("nothing is applied"). Held and mismatched nodes get nothing, so
    their existing objects keep their old hash (a profile edit that is not validated yet does not
    reach them). The body never carries the admission annotation (see ``admission``).
    """
    if not selection.valid:
        return {}
    owner = controller_owner_reference(plan.obj)
    label = plan_label_value(plan.name)
    result: dict[str, dict[str, Any]] = {}
    targets = selection.targets
    chosen = (
        sorted(targets.items()) if nodes is None else sorted((n, targets[n]) for n in nodes if n in targets)
    )
    for node, index in chosen:
        profile_name = selection.rules[index].profile_name
        profile = profiles_by_name.get(profile_name)
        if profile is None or profile.desired_hash is None:
            continue
        result[node] = {
            "apiVersion": API_VERSION,
            "kind": NODE_PARTITIONING_KIND,
            "metadata": {
                "name": np_name(plan.name, node),
                "labels": {PLAN_LABEL: label},
                "ownerReferences": [owner],
            },
            "spec": {
                "planRef": {"name": plan.name, "uid": owner["uid"]},
                "dryRun": plan.dry_run,
                "nodeName": node,
                "desiredHash": profile.desired_hash,
                "profileRef": {"name": profile_name},
            },
        }
    return result


def np_needs_update(existing: NodePartitioningView | None, desired: Mapping[str, Any]) -> bool:
    """Must ``desired`` be applied over ``existing``? (Absent objects must be created.)

    Compares exactly the fields the plan owns: the spec (hash, profile, dry-run, node, planRef),
    the plan label and the controller reference. Status, the admission annotation and fields other
    managers own are ignored, so a steady cluster causes no apply at all.
    """
    if existing is None:
        return True
    return _owned_fields(existing) != _desired_owned_fields(desired)


def _owned_fields(np: NodePartitioningView) -> tuple[object, ...]:
    return (
        np.dry_run,
        np.desired_hash,
        np.node_name,
        np.profile_name,
        np.plan_name,
        np.plan_uid,
        np.plan_label,
        np.controller_uid,
    )


def _desired_owned_fields(desired: Mapping[str, Any]) -> tuple[object, ...]:
    """``_owned_fields(node_partitioning_view(desired))`` for a body :func:`desired_node_partitionings`
    built, read directly: the plan compares every target on every reconcile, and building a whole
    view per target per reconcile was a tenth of the operator's CPU at 1,000 nodes."""
    spec = desired.get("spec")
    meta = desired.get("metadata")
    if not isinstance(spec, Mapping) or not isinstance(meta, Mapping):
        return _owned_fields(node_partitioning_view(dict(desired)))
    plan_ref = _mapping(spec.get("planRef"))
    profile_ref = _mapping(spec.get("profileRef"))
    labels = _mapping(meta.get("labels"))
    owner = controller_of(desired)
    return (
        spec.get("dryRun") is True,
        _str(spec.get("desiredHash")),
        _str(spec.get("nodeName")),
        _str(profile_ref.get("name")),
        _str(plan_ref.get("name")),
        plan_ref.get("uid"),
        labels.get(PLAN_LABEL),
        owner.get("uid") if owner is not None else None,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def stale_node_partitionings(
    plan: PlanView, selection: Selection, nps: Iterable[NodePartitioningView]
) -> list[str]:
    """Names of this plan's NodePartitionings to delete, sorted.

    A NodePartitioning is stale when its node is no longer matched by exactly one rule (relabelled,
    rule removed or changed, node became an excluded control-plane node, node deleted), or when it
    duplicates the one ``children_by_node`` keeps for its node. Held and mismatched nodes keep
    theirs. Nothing is deleted while the plan is invalid (upstream did the same): an overlap or a
    conflict is usually a half-finished edit, and deleting would restart nodes.

    Deleting one mid-operation is safe only because the NodePartitioning controller's finalizer
    restores the node (untaint, uncordon) before the object goes away. Objects already being deleted
    are not listed again, so a steady cluster sees no delete calls.
    """
    if not selection.valid:
        return []
    children = [np for np in nps if is_child(plan, np)]
    kept = children_by_node(plan, children)
    return sorted(
        np.name
        for np in children
        if not np.deleting and (np.node_name not in selection.assigned or kept.get(np.node_name) is not np)
    )

"""The PodGroups of a ModelInfer's groups, decided without I/O: one per group that exists or is being
created (surge groups too), none without ``gangSchedule``; created before the pods (a gang member
without its PodGroup waits in either gang scheduler), resized in place, deleted with their group.
A PodGroup in a phase its own controller never leaves (Coscheduling's Failed, once a member failed)
is deleted and created anew when this pass creates pods for its group, so that a rebuilt group's
PodGroup follows it again.

The gang scheduler in use (:class:`~aiplane.controllers.gang.GangBackend`) decides the PodGroup's API and
fields; what is wanted, when, is decided the same way for both. The executor carries out the writes
through the shared child writer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import deep_get
from aiplane.controllers.gang import GangBackend
from aiplane.controllers.modelinfer.objects import build_podgroup, podgroup_needs_update, updated_podgroup
from aiplane.controllers.modelinfer.plan_types import CreateRoleReplica, DeleteGroup, Plan

__all__ = ["PodGroupOp", "PodGroupWrite", "PodGroups", "podgroup_writes", "wanted_groups"]

Obj = dict[str, Any]


class PodGroupOp(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class PodGroupWrite:
    """One PodGroup write: ``body`` to create, or to replace ``live`` with; ``live`` to delete."""

    op: PodGroupOp
    body: Mapping[str, Any] | None = None
    live: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PodGroups:
    """The PodGroup writes of one decision; ``unavailable``: gang scheduling is asked for but the
    gang scheduler's PodGroup API is not served (the ModelInfer is told, pods go without)."""

    writes: tuple[PodGroupWrite, ...] = ()
    unavailable: bool = False


def wanted_groups(the_plan: Plan) -> dict[int, str]:
    """The groups (ordinal → revision) that need a PodGroup: every group not being deleted, and every
    group a create of this plan starts."""
    wanted: dict[int, str] = {g.ordinal: g.revision for g in the_plan.groups if g.state != "Deleting"}
    for action in the_plan.actions:
        if isinstance(action, CreateRoleReplica):
            wanted.setdefault(action.ordinal, action.revision)
        elif isinstance(action, DeleteGroup):
            wanted.pop(action.ordinal, None)
    return wanted


def podgroup_writes(
    gang: GangBackend,
    mi: Mapping[str, Any],
    observed_podgroups: Iterable[Mapping[str, Any]] | None,
    the_plan: Plan,
    roles_for: Callable[[str], Sequence[Mapping[str, Any]]],
) -> PodGroups:
    """Create, resize and delete the ModelInfer's PodGroups (``observed_podgroups`` None: the gang
    scheduler's PodGroup API is not served). ``roles_for`` gives the roles of a revision."""
    gang_spec = deep_get(mi, "spec.template.gangSchedule")
    if observed_podgroups is None:
        return PodGroups(unavailable=gang_spec is not None)
    observed = {objects.name(pg): pg for pg in observed_podgroups}
    desired: dict[str, Obj] = {}
    rebuilt: set[str] = set()  # PodGroups of groups this pass creates pods for
    creating = {a.ordinal for a in the_plan.actions if isinstance(a, CreateRoleReplica)}
    if gang_spec is not None:
        for ordinal, revision in wanted_groups(the_plan).items():
            body = build_podgroup(mi, ordinal, roles_for(revision), gang)
            if body is not None:
                desired[body["metadata"]["name"]] = body
                if ordinal in creating:
                    rebuilt.add(body["metadata"]["name"])
    writes: list[PodGroupWrite] = []
    for name, body in desired.items():
        existing = observed.get(name)
        if existing is not None and name in rebuilt and gang.stuck(existing):
            if not objects.is_deleting(existing):
                writes.append(PodGroupWrite(PodGroupOp.DELETE, live=existing))
            writes.append(PodGroupWrite(PodGroupOp.CREATE, body))  # refused while the old one is there
        elif existing is None:
            writes.append(PodGroupWrite(PodGroupOp.CREATE, body))
        elif podgroup_needs_update(existing, body):
            writes.append(PodGroupWrite(PodGroupOp.UPDATE, updated_podgroup(existing, body), existing))
    writes.extend(
        PodGroupWrite(PodGroupOp.DELETE, live=e)
        for n, e in observed.items()
        if n not in desired and not objects.is_deleting(e)  # already going: nothing to write
    )
    return PodGroups(tuple(writes))

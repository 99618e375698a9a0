"""The PodGroups of a ModelInfer's groups: one per group that exists or is being created (surge groups
too), none without ``gangSchedule``; created before the pods (a gang member without its PodGroup waits
in either gang scheduler), resized in place, deleted with their group.

The gang scheduler in use (:class:`~aiplane.controllers.gang.GangBackend`) decides the PodGroup's API and
fields; what is wanted, when, is decided the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import deep_get
from aiplane.controllers.gang import GangBackend
from aiplane.controllers.modelinfer.decide import CreateRoleReplica, DeleteGroup, Plan
from aiplane.controllers.modelinfer.objects import build_podgroup, podgroup_needs_update, updated_podgroup
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.events import WARNING, EventRecorder

__all__ = ["sync_podgroups"]

Obj = dict[str, Any]


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


async def sync_podgroups(
    client: KubeClient,
    recorder: EventRecorder,
    gang: GangBackend,
    mi: Obj,
    observed_podgroups: Iterable[Obj] | None,
    the_plan: Plan,
    roles_for: Callable[[str], Sequence[Mapping[str, Any]]],
    *,
    field_manager: str,
    delete: Callable[[Obj], Any],
) -> None:
    """Create, resize and delete the ModelInfer's PodGroups (``observed_podgroups`` None: the gang
    scheduler's PodGroup API is not served, which a ModelInfer asking for gang scheduling is told).
    ``roles_for`` gives the roles of a revision; ``delete`` deletes one PodGroup (UID-preconditioned)."""
    gang_spec = deep_get(mi, "spec.template.gangSchedule")
    if observed_podgroups is None:
        if gang_spec is not None:
            recorder.emit(
                mi,
                WARNING,
                "PodGroupsUnavailable",
                f"spec.template.gangSchedule is set but the {gang.title} PodGroup API "
                f"({gang.resource.api_version}) is not served: pods are created without PodGroups",
            )
        return
    observed = {objects.name(pg): pg for pg in observed_podgroups}
    desired: dict[str, Obj] = {}
    if gang_spec is not None:
        for ordinal, revision in wanted_groups(the_plan).items():
            body = build_podgroup(mi, ordinal, roles_for(revision), gang)
            if body is not None:
                desired[body["metadata"]["name"]] = body
    for name, body in desired.items():
        existing = observed.get(name)
        if existing is None:
            try:
                await client.create(gang.resource, body, namespace=objects.namespace(mi))
            except ApiError as exc:
                if not exc.already_exists:
                    raise
        elif podgroup_needs_update(existing, body):
            await client.replace(gang.resource, updated_podgroup(existing, body), field_manager=field_manager)
    for name, existing in observed.items():
        if name not in desired:
            await delete(existing)

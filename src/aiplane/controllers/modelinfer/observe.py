"""From cached Pods and Services to the decision's views (pure).

Why a separate step: the decision reasons about groups, role replicas and pod indices, not about label
strings. Parsing happens once here, and objects that are not ours are dropped here: a pod carrying
our labels but controlled by another ModelInfer (a predecessor of the same name, not yet collected)
is waited out by the garbage collector, never adopted or deleted by us — upstream HEAD's owner-UID
check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_of
from aiplane.controllers.modelinfer.naming import (
    LABEL_GROUP_NAME,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_ROLE_ID,
    group_ordinal,
    parse_ordinal,
    role_replica_ordinal,
)
from aiplane.controllers.modelinfer.objects import role_has_service, role_replicas, worker_count
from aiplane.controllers.modelinfer.plan_types import PodView, RoleShape, ServiceView
from aiplane.controllers.modelinfer.revision import with_current_replicas

Obj = Mapping[str, Any]


def controlled_by(obj: Obj, mi: Obj) -> bool:
    owner = controller_of(obj)
    return owner is not None and owner.get("uid") == objects.uid(mi)


def _identity(mi_name: str, obj: Obj) -> tuple[int, str, int] | None:
    labels = objects.labels(obj)
    group, role, rid = labels.get(LABEL_GROUP_NAME), labels.get(LABEL_ROLE), labels.get(LABEL_ROLE_ID)
    if not (isinstance(group, str) and isinstance(role, str) and isinstance(rid, str)):
        return None
    ordinal = group_ordinal(mi_name, group)
    index = role_replica_ordinal(role, rid)
    if ordinal is None or index is None:
        return None
    return ordinal, role, index


def pod_view(mi_name: str, pod: Obj) -> PodView | None:
    """the decision's view of one pod; ``None`` for a pod whose labels or name are not ours."""
    identity = _identity(mi_name, pod)
    parsed = parse_ordinal(objects.name(pod))
    if identity is None or parsed is None:
        return None
    ordinal, role, index = identity
    status = objects.status(pod)
    ready_condition = next(
        (c for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("type") == "Ready"),
        None,
    )
    ready = bool(ready_condition and ready_condition.get("status") == "True")
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    restarted = any(int(s.get("restartCount") or 0) > 0 for s in statuses if isinstance(s, Mapping))
    since = None
    if not ready:
        moment = objects.parse_time((ready_condition or {}).get("lastTransitionTime"))
        moment = moment or objects.creation_time(pod)
        since = moment.timestamp() if moment is not None else None
    return PodView(
        name=objects.name(pod),
        uid=objects.uid(pod),
        ordinal=ordinal,
        role=role,
        role_index=index,
        pod_index=parsed[1],
        revision=str(objects.labels(pod).get(LABEL_REVISION, "")),
        phase=status.get("phase") or "Pending",
        ready=ready,
        restarted=restarted,
        not_ready_since=since,
        terminating=objects.is_deleting(pod),
    )


def service_view(mi_name: str, service: Obj) -> ServiceView | None:
    identity = _identity(mi_name, service)
    if identity is None:
        return None
    ordinal, role, index = identity
    return ServiceView(
        name=objects.name(service),
        ordinal=ordinal,
        role=role,
        role_index=index,
        terminating=objects.is_deleting(service),
    )


def views(
    mi: Obj, pods: Iterable[Obj], services: Iterable[Obj]
) -> tuple[tuple[PodView, ...], tuple[ServiceView, ...]]:
    """Views of the pods and services this ModelInfer controls (sorted by name: deterministic plans)."""
    name = objects.name(mi)
    pod_views = [v for p in pods if controlled_by(p, mi) and (v := pod_view(name, p)) is not None]
    svc_views = [w for s in services if controlled_by(s, mi) and (w := service_view(name, s)) is not None]
    return (
        tuple(sorted(pod_views, key=lambda v: v.name)),
        tuple(sorted(svc_views, key=lambda v: v.name)),
    )


def shape_of(roles: Sequence[Mapping[str, Any]]) -> tuple[RoleShape, ...]:
    return tuple(
        RoleShape(
            name=str(role.get("name")),
            replicas=role_replicas(role),
            worker_replicas=worker_count(role),
            has_service=role_has_service(role),
        )
        for role in roles
    )


def shapes_of(
    current_roles: Sequence[Mapping[str, Any]], revisions: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, tuple[RoleShape, ...]]:
    """Each known revision's shape, with role ``replicas`` from the current spec (scaling a role is
    not a rollout, so every group follows the current role counts)."""
    return {
        revision: shape_of(with_current_replicas(list(roles), list(current_roles)))
        for revision, roles in revisions.items()
    }

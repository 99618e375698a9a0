"""The Pods, headless Services and Volcano PodGroups of a ModelInfer, built as plain dicts.

Pure functions: the controller reads the ModelInfer from the informer cache and passes it in, with
the roles of the revision a group is on (:mod:`.revision` keeps them in ControllerRevisions; they
may differ from the ModelInfer's current ``spec.template.roles`` while a rollout or a ``partition``
holds the group back). Nothing here mutates its inputs: templates are deep-copied.

The contract (names, labels, annotations, env vars) is upstream's (reference §3 and §4); where upstream
was buggy or silent we decided as follows, and docs/modelinfer.md lists every difference:

* **Controller labels win** over labels of the same key in a template's metadata (upstream let the
  template overwrite them). The Service selector, the group/role bookkeeping and the revision check
  all read those labels; a template that could rename a pod's group or revision would break them.
* **The annotations map always exists** (upstream's nil map panicked on template annotations).
* **Env vars are prepended** (``GROUP_SIZE``, ``ENTRY_ADDRESS``, ``WORKER_INDEX``, in that order) to
  every container and init container, replacing user vars of the same names. Kubernetes expands
  ``$(VAR)`` in an env value only for vars defined *earlier* in the list, so upstream's append made
  ``$(ENTRY_ADDRESS)`` unusable in user env values; LWS prepends too. ``command``/``args`` see the
  whole list either way.
* **Workers need a workerTemplate.** A role without one has no workers whatever ``workerReplicas``
  says (:func:`worker_count`); :mod:`.validation` reports such a spec. Everything that counts pods
  (``GROUP_SIZE``, expected pods, PodGroup sizes, whether a Service exists) uses the same count.
* **``spec.schedulerName``** of the ModelInfer is set on every pod when present (upstream forgot).
* **Topology spread** (``spec.topologySpreadConstraints``, never implemented upstream) becomes a
  pod-level constraint on every entry pod, selecting the entry pods of the same role ID of the same
  ModelInfer: each group's ``prefill-0`` entry spreads against the other groups' ``prefill-0``
  entries. See :func:`topology_spread_constraints`.
* **PodGroup ``minResources``** sums each container's *effective* request: its ``requests``, and for
  a resource with a limit but no request, the limit — the default kube-apiserver applies to the
  pod. Upstream summed the template's ``requests`` only, so a template with only limits (the usual
  way to ask for GPUs, see examples/modelinfer-1p2d.yaml) produced an empty ``minResources``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity, add_resource_lists, resource_lists_equal
from aiplane.controllers.gang import VOLCANO, GangBackend
from aiplane.controllers.modelinfer.naming import (
    ANNOTATION_GROUP_NAME,
    ANNOTATION_QUEUE_NAME,
    API_VERSION,
    ENV_ENTRY_ADDRESS,
    ENV_GROUP_SIZE,
    ENV_WORKER_INDEX,
    INJECTED_ENV_NAMES,
    KIND,
    LABEL_ENTRY,
    LABEL_GROUP_NAME,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_ROLE_ID,
    entry_pod_name,
    group_name,
    pod_name,
    podgroup_name,
    role_id,
    service_name,
)

__all__ = [
    "DEFAULT_MAX_SKEW",
    "DEFAULT_WHEN_UNSATISFIABLE",
    "PODGROUP_API_VERSION",
    "PODGROUP_KIND",
    "build_pod",
    "build_podgroup",
    "build_service",
    "effective_requests",
    "entry_selector",
    "expected_pod_count",
    "expected_pod_names",
    "find_role",
    "group_labels",
    "label_selector",
    "min_role_replicas",
    "owner_reference",
    "pod_labels",
    "podgroup_needs_update",
    "required_name",
    "role_has_service",
    "role_replica_labels",
    "role_replica_pod_names",
    "role_replica_size",
    "role_replicas",
    "topology_spread_constraints",
    "updated_podgroup",
    "worker_count",
]

PODGROUP_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
PODGROUP_KIND: Final = "PodGroup"
#: Defaults for a ``spec.topologySpreadConstraints`` item that leaves them out (the API makes them
#: optional, a pod-level constraint requires them): spread evenly, and mean it.
DEFAULT_MAX_SKEW: Final = 1
DEFAULT_WHEN_UNSATISFIABLE: Final = "DoNotSchedule"

_Obj = dict[str, Any]


# --- the ModelInfer ------------------------------------------------------------------------------


def _template(mi: Mapping[str, Any]) -> Mapping[str, Any]:
    template = objects.spec(mi).get("template")
    return template if isinstance(template, Mapping) else {}


def _gang(mi: Mapping[str, Any]) -> Mapping[str, Any] | None:
    gang = _template(mi).get("gangSchedule")
    return gang if isinstance(gang, Mapping) else None


def required_name(mi: Mapping[str, Any]) -> str:
    """``metadata.name``; :class:`ValueError` without one, since every object built from a ModelInfer
    is named after it (an unnamed one would yield objects named ``-0-…``)."""
    name = objects.name(mi)
    if not name:
        raise ValueError("the ModelInfer has no metadata.name")
    return name


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _object_meta(mi: Mapping[str, Any], name: str, **fields: Any) -> _Obj:
    """``{name, namespace (the ModelInfer's), **fields}``."""
    meta: _Obj = {"name": name}
    namespace = objects.namespace(mi)
    if namespace:
        meta["namespace"] = namespace
    meta.update(fields)
    return meta


def owner_reference(mi: Mapping[str, Any], *, block_owner_deletion: bool = True) -> _Obj:
    """The controller ownerReference to the ModelInfer.

    ``apiVersion``/``kind`` are ours, not read from ``mi``: items of a list response may lack them.
    Pods, Services and ControllerRevisions block the owner's foreground deletion; PodGroups do not
    (``block_owner_deletion=False``, as upstream). Raises :class:`ValueError` without a uid.
    """
    uid = objects.uid(mi)
    if not uid:
        raise ValueError("cannot reference a ModelInfer without metadata.uid")
    ref: _Obj = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": required_name(mi),
        "uid": uid,
        "controller": True,
    }
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


# --- roles ---------------------------------------------------------------------------------------


def find_role(roles: Sequence[Mapping[str, Any]], role_name: str) -> Mapping[str, Any]:
    """The role called ``role_name``; :class:`KeyError` if ``roles`` has none."""
    for role in roles:
        if role.get("name") == role_name:
            return role
    raise KeyError(f"no role {role_name!r}")


def role_replicas(role: Mapping[str, Any]) -> int:
    """``role.replicas`` (default 1, as the CRD defaults it; never negative)."""
    return max(_int(role.get("replicas"), 1), 0)


def worker_count(role: Mapping[str, Any]) -> int:
    """The worker pods of one role replica: ``workerReplicas``, or 0 without a ``workerTemplate``."""
    if not isinstance(role.get("workerTemplate"), Mapping):
        return 0
    return max(_int(role.get("workerReplicas"), 0), 0)


def role_replica_size(role: Mapping[str, Any]) -> int:
    """Pods in one role replica (the entry and its workers): the ``GROUP_SIZE`` env var."""
    return 1 + worker_count(role)


def role_has_service(role: Mapping[str, Any]) -> bool:
    """Does each replica of this role get a headless Service? Only when it has workers to use it."""
    return worker_count(role) > 0


def min_role_replicas(mi: Mapping[str, Any], role: Mapping[str, Any]) -> int:
    """Role replicas a gang needs: ``gangSchedule.minRoleReplicas[role]`` (default all of them),
    capped at ``role.replicas`` and at least 0. Capping (rather than rejecting) keeps a ModelInfer
    valid while a role is scaled below its minimum; the gang then needs every replica there is."""
    replicas = role_replicas(role)
    gang = _gang(mi) or {}
    mins = gang.get("minRoleReplicas")
    wanted = mins.get(role.get("name")) if isinstance(mins, Mapping) else None
    return min(max(_int(wanted, replicas), 0), replicas)


def role_replica_pod_names(mi_name: str, ordinal: int, role: Mapping[str, Any], replica: int) -> list[str]:
    """The pods of role replica ``replica`` of ``role`` in group ``ordinal``: entry first."""
    name = str(role.get("name"))
    return [pod_name(mi_name, ordinal, name, replica, k) for k in range(role_replica_size(role))]


def expected_pod_names(mi_name: str, ordinal: int, roles: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every pod group ``ordinal`` should have with these roles, in creation order."""
    return [
        name
        for role in roles
        for r in range(role_replicas(role))
        for name in role_replica_pod_names(mi_name, ordinal, role, r)
    ]


def expected_pod_count(roles: Sequence[Mapping[str, Any]]) -> int:
    """``len(expected_pod_names(...))``: Σ over roles of (1 + workers) * replicas."""
    return sum(role_replica_size(role) * role_replicas(role) for role in roles)


# --- labels --------------------------------------------------------------------------------------


def group_labels(mi_name: str, ordinal: int) -> dict[str, str]:
    """Labels every object of group ``ordinal`` has (a selector for the whole group)."""
    return {LABEL_NAME: mi_name, LABEL_GROUP_NAME: group_name(mi_name, ordinal)}


def role_replica_labels(mi_name: str, ordinal: int, role_name: str, replica: int) -> dict[str, str]:
    """Labels every object of one role replica has (pods and its Service)."""
    return {
        **group_labels(mi_name, ordinal),
        LABEL_ROLE: role_name,
        LABEL_ROLE_ID: role_id(role_name, replica),
    }


def pod_labels(
    mi_name: str, ordinal: int, role_name: str, replica: int, index: int, revision: str
) -> dict[str, str]:
    """The controller's labels of a pod: the six of reference §3 (``entry`` on the entry only)."""
    labels = {**role_replica_labels(mi_name, ordinal, role_name, replica), LABEL_REVISION: revision}
    if index == 0:
        labels[LABEL_ENTRY] = "true"
    return labels


def entry_selector(mi_name: str, ordinal: int, role_name: str, replica: int) -> dict[str, str]:
    """The Service selector: the entry pod of one role replica and nothing else.

    Not the revision label: the entry pod is recreated on a new revision under the same name, and the
    Service must keep selecting it.
    """
    return {
        LABEL_NAME: mi_name,
        LABEL_GROUP_NAME: group_name(mi_name, ordinal),
        LABEL_ROLE_ID: role_id(role_name, replica),
        LABEL_ENTRY: "true",
    }


def label_selector(mi: Mapping[str, Any]) -> str:
    """``status.labelSelector``: one pod per group (the entry of the first role's replica 0), so
    the scale subresource's selector counts groups for HPA/KEDA."""
    name = required_name(mi)
    roles = _template(mi).get("roles")
    parts = [f"{LABEL_NAME}={name}", f"{LABEL_ENTRY}=true"]
    if isinstance(roles, list) and roles and isinstance(roles[0], Mapping) and roles[0].get("name"):
        parts.append(f"{LABEL_ROLE_ID}={role_id(str(roles[0]['name']), 0)}")
    return ",".join(parts)


# --- pods ----------------------------------------------------------------------------------------


def _with_env(container: Mapping[str, Any], injected: list[_Obj]) -> _Obj:
    out = dict(container)
    user = [
        e
        for e in container.get("env") or []
        if not (isinstance(e, Mapping) and e.get("name") in INJECTED_ENV_NAMES)
    ]
    out["env"] = copy.deepcopy(injected) + user
    return out


def _merge_selector(ours: dict[str, str], user: Mapping[str, Any] | None) -> _Obj:
    """``ours AND user`` as one LabelSelector: user matchLabels join ours; one that names a key of
    ours with another value becomes an ``In`` expression (so the AND stays exact — it then matches
    nothing, which is what the user wrote). User matchExpressions are appended."""
    match_labels = dict(ours)
    expressions: list[_Obj] = []
    if user:
        for key, value in (user.get("matchLabels") or {}).items():
            if key in match_labels and match_labels[key] != value:
                expressions.append({"key": key, "operator": "In", "values": [value]})
            else:
                match_labels[key] = value
        expressions.extend(copy.deepcopy(list(user.get("matchExpressions") or [])))
    selector: _Obj = {"matchLabels": match_labels}
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def topology_spread_constraints(
    mi: Mapping[str, Any], role_name: str, replica: int, template_spec: Mapping[str, Any] | None = None
) -> list[_Obj]:
    """The pod-level constraints ``spec.topologySpreadConstraints`` adds to an entry pod.

    Each item becomes ``{maxSkew, topologyKey, whenUnsatisfiable, labelSelector}`` where the
    selector picks the entry pods of role ID ``<role>-<r>`` of this ModelInfer, ANDed with the item's
    own ``labelSelector`` (:func:`_merge_selector`). ``maxSkew`` defaults to
    :data:`DEFAULT_MAX_SKEW` and ``whenUnsatisfiable`` to :data:`DEFAULT_WHEN_UNSATISFIABLE`. Items
    without a ``topologyKey`` are skipped (validation reports them); so is an item whose
    ``topologyKey`` a constraint in the entry template (``template_spec``) already uses — the
    template is the more specific statement — and a repeated (topologyKey, whenUnsatisfiable) pair,
    which kube would reject.
    """
    items = objects.spec(mi).get("topologySpreadConstraints")
    if not isinstance(items, list):
        return []
    taken = {
        c.get("topologyKey")
        for c in (template_spec or {}).get("topologySpreadConstraints") or []
        if isinstance(c, Mapping)
    }
    ours = {LABEL_NAME: required_name(mi), LABEL_ROLE_ID: role_id(role_name, replica), LABEL_ENTRY: "true"}
    seen: set[tuple[str, str]] = set()
    out: list[_Obj] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key or key in taken:
            continue
        when = item.get("whenUnsatisfiable") or DEFAULT_WHEN_UNSATISFIABLE
        if (key, when) in seen:
            continue
        seen.add((key, when))
        user_selector = item.get("labelSelector")
        out.append(
            {
                "maxSkew": _int(item.get("maxSkew"), DEFAULT_MAX_SKEW),
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": _merge_selector(
                    ours, user_selector if isinstance(user_selector, Mapping) else None
                ),
            }
        )
    return out


def build_pod(
    mi: Mapping[str, Any],
    roles: Sequence[Mapping[str, Any]],
    ordinal: int,
    role_name: str,
    replica: int,
    index: int,
    revision: str,
    gang: GangBackend = VOLCANO,
) -> _Obj:
    """Pod ``index`` (0 = entry, 1…workers) of role replica ``replica`` of group ``ordinal``.

    ``roles`` are the roles of ``revision``, the revision the group is on; with ``gangSchedule`` the pod
    joins its group's PodGroup as ``gang`` (the gang scheduler in use) marks members. Raises
    :class:`KeyError` for an unknown role and :class:`ValueError` for an index the role does not
    have (a worker of a role without ``workerTemplate``, or beyond ``workerReplicas``).
    """
    name = required_name(mi)
    role = find_role(roles, role_name)
    workers = worker_count(role)
    if isinstance(index, bool) or not 0 <= index <= workers:
        raise ValueError(f"role {role_name!r} has pod indices 0..{workers}, not {index!r}")
    template = role.get("entryTemplate") if index == 0 else role.get("workerTemplate")
    if not isinstance(template, Mapping):
        raise ValueError(f"role {role_name!r} has no {'entry' if index == 0 else 'worker'}Template")
    namespace = objects.namespace(mi)

    labels: dict[str, str] = dict(objects.labels(template))
    labels.update(pod_labels(name, ordinal, role_name, replica, index, revision))
    annotations: dict[str, str] = dict(objects.annotations(template))
    spec: _Obj = copy.deepcopy(dict(objects.spec(template)))
    scheduler = objects.spec(mi).get("schedulerName")
    if isinstance(scheduler, str) and scheduler:
        spec["schedulerName"] = gang.scheduler_for(scheduler)
    if _gang(mi) is not None:
        gang.join(labels, annotations, spec, podgroup_name(name, ordinal), role_id(role_name, replica))
    entry = entry_pod_name(name, ordinal, role_name, replica)
    injected: list[_Obj] = [
        {"name": ENV_GROUP_SIZE, "value": str(role_replica_size(role))},
        {"name": ENV_ENTRY_ADDRESS, "value": f"{entry}.{namespace}" if namespace else entry},
        {"name": ENV_WORKER_INDEX, "value": str(index)},
    ]
    for key in ("initContainers", "containers"):
        if isinstance(spec.get(key), list):
            spec[key] = [_with_env(c, injected) if isinstance(c, Mapping) else c for c in spec[key]]
    if index == 0:
        added = topology_spread_constraints(mi, role_name, replica, spec)
        if added:
            spec["topologySpreadConstraints"] = list(spec.get("topologySpreadConstraints") or []) + added

    metadata = _object_meta(
        mi,
        pod_name(name, ordinal, role_name, replica, index),
        labels=labels,
        annotations=annotations,
        ownerReferences=[owner_reference(mi)],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# --- services ------------------------------------------------------------------------------------


def build_service(
    mi: Mapping[str, Any], ordinal: int, role_name: str, replica: int, *, revision: str | None = None
) -> _Obj:
    """The headless Service of a role replica, named like its entry pod (so ``ENTRY_ADDRESS``
    resolves to the entry's IP), selecting only that entry pod.

    ``publishNotReadyAddresses`` lets workers (a Ray cluster joining its head) resolve the entry
    before it is Ready. No ports: a headless Service needs none, DNS returns the pod IP. Create it
    only when :func:`role_has_service`. ``revision``, when given, is recorded as a label (the
    selector never uses it).
    """
    name = required_name(mi)
    labels = role_replica_labels(name, ordinal, role_name, replica)
    if revision:
        labels[LABEL_REVISION] = revision
    metadata = _object_meta(
        mi,
        service_name(name, ordinal, role_name, replica),
        labels=labels,
        ownerReferences=[owner_reference(mi)],
    )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": entry_selector(name, ordinal, role_name, replica),
        },
    }


# --- PodGroups -----------------------------------------------------------------------------------


def effective_requests(pod_spec: Mapping[str, Any] | None) -> dict[str, Quantity]:
    """What a pod built from ``pod_spec`` requests: the sum over its ``containers`` (not init
    containers, as upstream) of each container's requests, a limit standing in for a missing
    request of the same resource (kube-apiserver's defaulting). Raises :class:`ValueError` for a
    malformed quantity."""
    lists = []
    for c in (pod_spec or {}).get("containers") or []:
        resources = c.get("resources") if isinstance(c, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        requests = dict(resources.get("requests") or {})
        for res, amount in (resources.get("limits") or {}).items():
            requests.setdefault(res, amount)
        lists.append(requests)
    return add_resource_lists(*lists)


def build_podgroup(
    mi: Mapping[str, Any], ordinal: int, roles: Sequence[Mapping[str, Any]], gang: GangBackend = VOLCANO
) -> _Obj | None:
    """The PodGroup ``<mi>-<g>`` of group ``ordinal`` for the gang scheduler ``gang``, or ``None`` without
    ``gangSchedule``. Described here for Volcano's; Coscheduling's has ``minMember`` and ``minResources``
    only (its API has no tasks, topology or queues: :class:`~aiplane.controllers.gang.GangBackend`).

    For each role, the first ``m = min_role_replicas`` replicas count: ``minTaskMember`` has
    ``{"<role>-<r>": 1 + workers}`` for r < m, ``minMember`` is their sum, and ``minResources`` the
    effective requests of all their pods (:func:`effective_requests`), in kube's canonical quantity
    spelling. ``networkTopology`` is copied from ``gangSchedule``; ``spec.queue`` comes from the
    ModelInfer annotation ``scheduling.volcano.sh/queue-name`` when present (upstream's later
    behaviour; without it Volcano's admission puts the PodGroup in its default queue).
    """
    gang_spec = _gang(mi)
    if gang_spec is None:
        return None
    name = required_name(mi)
    min_task_member: dict[str, int] = {}
    resources: list[Mapping[str, Quantity]] = []
    for role in roles:
        role_name = str(role.get("name"))
        entry_t = role.get("entryTemplate")
        worker_t = role.get("workerTemplate")
        entry_req = effective_requests(objects.spec(entry_t) if isinstance(entry_t, Mapping) else None)
        workers = worker_count(role)
        worker_req = (
            effective_requests(objects.spec(worker_t)) if workers and isinstance(worker_t, Mapping) else {}
        )
        for r in range(min_role_replicas(mi, role)):
            min_task_member[role_id(role_name, r)] = 1 + workers
            resources.append(entry_req)
            resources.extend([worker_req] * workers)
    total = add_resource_lists(*resources)
    spec: _Obj = {"minMember": sum(min_task_member.values()), "minTaskMember": min_task_member}
    if total:
        spec["minResources"] = {k: total[k].canonical() for k in sorted(total)}
    topology = gang_spec.get("networkTopology")
    if isinstance(topology, Mapping):
        spec["networkTopology"] = {k: v for k, v in topology.items() if v is not None}
    queue = objects.annotations(mi).get(ANNOTATION_QUEUE_NAME)
    if isinstance(queue, str) and queue:
        spec["queue"] = queue
    metadata = _object_meta(
        mi,
        podgroup_name(name, ordinal),
        labels=group_labels(name, ordinal),
        annotations={ANNOTATION_GROUP_NAME: group_name(name, ordinal)},
        ownerReferences=[owner_reference(mi, block_owner_deletion=False)],
    )
    return gang.podgroup(metadata, spec)


def _topology(spec: Mapping[str, Any]) -> dict[str, Any]:
    t = spec.get("networkTopology")
    return {k: v for k, v in t.items() if v is not None} if isinstance(t, Mapping) else {}


def podgroup_needs_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Does the PodGroup in the cluster differ from :func:`build_podgroup`'s in what we own?

    Compares ``minMember``, ``minTaskMember``, ``minResources`` (by value: ``1Gi`` equals
    ``1024Mi``; absent equals empty), ``networkTopology`` and ``queue``. ``queue`` only when we set
    one: without our annotation Volcano fills in its default queue, and that must not look like
    drift (it would make every reconcile write). A malformed observed quantity counts as a change.
    """
    o, d = objects.spec(observed), objects.spec(desired)
    if _int(o.get("minMember"), 0) != _int(d.get("minMember"), 0):
        return True
    if dict(o.get("minTaskMember") or {}) != dict(d.get("minTaskMember") or {}):
        return True
    try:
        if not resource_lists_equal(o.get("minResources") or {}, d.get("minResources") or {}):
            return True
    except ValueError:
        return True
    if _topology(o) != _topology(d):
        return True
    return bool(d.get("queue")) and o.get("queue") != d.get("queue")


def updated_podgroup(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> _Obj:
    """``observed`` (resourceVersion, status and fields others own kept) with our spec fields and
    our labels and annotations from ``desired``: the body of an update."""
    out: _Obj = copy.deepcopy(dict(observed))
    spec = out.setdefault("spec", {})
    d = objects.spec(desired)
    for key in ("minMember", "minTaskMember", "minResources", "networkTopology"):
        if key in d:
            spec[key] = copy.deepcopy(d[key])
        else:
            spec.pop(key, None)
    if d.get("queue"):
        spec["queue"] = d["queue"]
    md = out.setdefault("metadata", {})
    dmd = objects.meta(desired)
    for key in ("labels", "annotations"):
        if dmd.get(key):
            md[key] = {**(md.get(key) or {}), **dmd[key]}
    return out

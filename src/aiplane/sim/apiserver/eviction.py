"""The eviction subresource (``pkg/registry/core/pod/storage/eviction.go``): delete a pod unless a
PodDisruptionBudget forbids it, taking one disruption from the budget when it allows one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.deletion import PDBS, Obj, StatusError, ok_status
from aiplane.sim.apiserver.disruption import (
    PdbError,
    disruption_condition,
    is_pod_ready,
    pdb_selector,
    set_condition,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions, WriteOptions
from aiplane.sim.apiserver.write_defaults import rfc3339

#: The eviction subresource refuses to evict when this many evictions await the disruption controller.
MAX_DISRUPTED_PODS = 2000


def _too_many_requests(message: str, retry_after: int, cause: str) -> ApiError:
    details: Obj = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers: dict[str, str] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message, details=details, headers=headers)


CANNOT_EVICT = "Cannot evict pod as it would violate the pod's disruption budget."


def _still_processing(pdb_name: str) -> ApiError:
    return _too_many_requests(
        CANNOT_EVICT, 10, f"The disruption budget {pdb_name} is still being processed by the server."
    )


def _eviction_options(body: dict[str, Any]) -> DeleteOptions:
    raw = body.get("deleteOptions") or {}
    if not isinstance(raw, dict):
        raise errors.bad_request("deleteOptions must be an object")
    policy = raw.get("propagationPolicy")
    if policy not in (None, "Background", "Foreground", "Orphan"):
        raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}"')
    orphan = raw.get("orphanDependents")
    if orphan is True and not policy:
        policy = "Orphan"
    dry_run = raw.get("dryRun") or []
    if any(v != "All" for v in dry_run):
        raise errors.bad_request('dryRun: Unsupported value: only "All" is supported')
    pre = raw.get("preconditions") or {}
    grace = raw.get("gracePeriodSeconds")
    return DeleteOptions(
        propagation_policy=policy,
        grace_period_seconds=int(grace) if grace is not None else None,
        precondition_uid=pre.get("uid"),
        precondition_rv=pre.get("resourceVersion"),
        dry_run=bool(dry_run),
        orphan_dependents=orphan if isinstance(orphan, bool) else None,
    )


def _can_ignore_pdb(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or objects.is_deleting(pod)


def _should_enforce_resource_version(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not (phase in ("Succeeded", "Failed") or objects.is_deleting(pod))


def _add_condition_and_delete(
    api: Api, rt: ResourceType, namespace: str, name: str, options: DeleteOptions
) -> None:
    """``addConditionAndDeletePod``: mark the pod DisruptionTarget, then delete it."""
    if not options.dry_run:
        pod = api.store.get(rt.storage_key, namespace, name)
        if pod is None:
            raise errors.not_found(rt.plural, rt.group, name)
        meta = objects.meta(pod)
        if options.precondition_uid and options.precondition_uid != meta.get("uid"):
            raise errors.conflict(
                "Pod",
                "",
                name,
                f"the UID in the precondition ({options.precondition_uid}) does not match the UID in record "
                f"({meta.get('uid')}). The object might have been deleted and then recreated",
            )
        if options.precondition_rv and options.precondition_rv != meta.get("resourceVersion"):
            raise errors.conflict(
                "Pod",
                "",
                name,
                f"the ResourceVersion in the precondition ({options.precondition_rv}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
            )
        status = dict(pod.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(api.clock()),
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
        for i, cond in enumerate(conditions):
            if cond.get("type") == "DisruptionTarget":
                if cond.get("status") == "True":
                    condition["lastTransitionTime"] = cond.get("lastTransitionTime")
                conditions[i] = condition
                break
        else:
            conditions.append(condition)
        status["conditions"] = conditions
        updated = api.update(
            rt, namespace, name, {**pod, "status": status}, WriteOptions(), subresource="status"
        ).obj
        if options.precondition_rv:
            options = replace(options, precondition_rv=objects.meta(updated)["resourceVersion"])
    api.delete(rt, namespace, name, options)


def evict(api: Api, rt: ResourceType, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST pods/{name}/eviction: delete the pod unless a PodDisruptionBudget forbids it (``EvictionREST.Create``).

    Returns the ``Status`` the server answers 201 with; raises 404 (no such pod), 429 (the budget allows no
    disruption now), 500 (more than one budget matches the pod), 409 (preconditions).
    """
    kind = body.get("kind")
    if kind not in (None, "Eviction"):
        raise errors.bad_request(f"not a Eviction object: {kind}")
    meta = body.get("metadata") or {}
    if meta.get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    original = _eviction_options(body)
    pod = api.store.get(rt.storage_key, namespace, name)
    if pod is None:
        raise errors.not_found(rt.plural, rt.group, name)
    if _can_ignore_pdb(pod):
        options = original
        if _should_enforce_resource_version(pod) and not original.precondition_rv:
            options = replace(options, precondition_rv=objects.meta(pod)["resourceVersion"])
        _add_condition_and_delete(api, rt, namespace, name, options)
        return ok_status(201)

    pdbs = [
        pdb
        for pdb in api.store.items(PDBS, namespace)
        if _matches_quietly((pdb.get("spec") or {}).get("selector"), objects.meta(pod).get("labels") or {})
    ]
    if len(pdbs) > 1:
        raise StatusError(
            500,
            "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    update_options = False
    pdb_name = ""
    if pdbs:
        pdb = pdbs[0]
        pdb_name = objects.meta(pdb)["name"]
        status = pdb.get("status") or {}
        spec = pdb.get("spec") or {}
        if not is_pod_ready(pod) and (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or (
                int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0)
                and int(status.get("desiredHealthy") or 0) > 0
            )
        ):
            update_options = True
        else:
            _check_and_decrement(api, pdb, name, original.dry_run)
    options = original
    if update_options:
        options = replace(options, precondition_rv=objects.meta(pod)["resourceVersion"])
    try:
        _add_condition_and_delete(api, rt, namespace, name, options)
    except ApiError as err:
        if err.code == 409 and update_options and not original.precondition_rv:
            raise _still_processing(pdb_name) from err
        raise
    return ok_status(201)


def _matches_quietly(selector: Any, labels: dict[str, Any]) -> bool:
    try:
        return pdb_selector(selector).matches(labels)
    except PdbError:
        return False  # an invalid selector matches nothing


def _check_and_decrement(api: Api, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    """``checkAndDecrement``: take one disruption from the budget, recording the pod as disrupted."""
    meta = objects.meta(pdb)
    name = meta["name"]
    status = dict(pdb.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _still_processing(name)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden("poddisruptionbudget", "policy", name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            "poddisruptionbudget",
            "policy",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many_requests(
            CANNOT_EVICT,
            0,
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods and has "
            f"{int(status.get('currentHealthy') or 0)} currently",
        )
    status["disruptionsAllowed"] = allowed - 1
    now = rfc3339(api.clock())
    if allowed - 1 == 0:
        conditions = [dict(c) for c in status.get("conditions") or []]
        set_condition(conditions, disruption_condition(0, int(status.get("observedGeneration") or 0)), now)
        status["conditions"] = conditions
    if dry_run:
        return
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
    rt = api.resource("policy/v1", "PodDisruptionBudget")
    api.update(
        rt, meta.get("namespace"), name, {**pdb, "status": status}, WriteOptions(), subresource="status"
    )

"""The disruption controller (``pkg/controller/disruption``): PodDisruptionBudget status, from the pods a
budget selects and the scale of their controllers. The eviction subresource (``eviction.py``) consults it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.selectors import Selector, compile_selector
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.deletion import PDBS, PODS, Obj
from aiplane.sim.apiserver.ownergraph import OwnerGraph
from aiplane.sim.apiserver.scale import scale_of
from aiplane.sim.apiserver.write_defaults import rfc3339

#: The disruption controller forgets an approved eviction whose pod is still there after this long.
DELETION_TIMEOUT = timedelta(minutes=2)


def group_of(api_version: Any) -> str:
    text = str(api_version or "")
    return text.rpartition("/")[0]


def controller_of(obj: Obj) -> dict[str, Any] | None:
    for ref in objects.meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


class PdbError(Exception):
    """The status of a PDB cannot be computed (the disruption controller's failSafe path)."""


_ATOI = re.compile(r"^[+-]?[0-9]+$")


def scaled_value(value: Any, total: int, *, round_up: bool = True) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` of ``total`` rounded up (or down)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PdbError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise PdbError("invalid value for IntOrString: invalid type: string is not a percentage")
    number = value[:-1]
    if not _ATOI.match(number):
        raise PdbError(
            f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing "{number}": invalid syntax'
        )
    scaled = float(int(number)) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def desired_healthy(
    spec: dict[str, Any], matching: int, expected_scale: Callable[[], int]
) -> tuple[int, int]:
    """(expectedPods, desiredHealthy) as ``getExpectedPodCount`` computes them.

    ``matching`` is the number of pods the selector matches; ``expected_scale`` sums the scale of their
    controllers (and raises :class:`PdbError` when that is impossible). An integer ``minAvailable`` needs
    no controllers; ``maxUnavailable`` and percentages do.
    """
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale()
        return expected, max(0, expected - scaled_value(max_unavailable, expected))
    if min_available is not None:
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            return matching, min_available
        expected = expected_scale()
        return expected, scaled_value(min_available, expected)
    return 0, 0


def disruptions_allowed(current: int, desired: int, expected: int) -> int:
    """``updatePdbStatus``: none while no pods are expected (a PDB that matches nothing is safe)."""
    allowed = current - desired
    return 0 if expected <= 0 or allowed <= 0 else allowed


def is_pod_ready(pod: Obj) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True (the phase is not consulted)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def count_healthy(pods: Iterable[Obj], disrupted: dict[str, datetime], now: datetime) -> int:
    """``countHealthyPods``: ready pods not being deleted and not approved for eviction recently."""
    healthy = 0
    for pod in pods:
        if objects.is_deleting(pod):
            continue
        since = disrupted.get(objects.meta(pod)["name"])
        if since is not None and since + DELETION_TIMEOUT > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def pdb_selector(selector: Any) -> Selector:
    """``metav1.LabelSelectorAsSelector`` of a PDB's ``spec.selector``: nil matches nothing, ``{}``
    everything. A selector kube would refuse to convert raises :class:`PdbError` with kube's text."""
    try:
        return compile_selector(selector, field_paths=False)
    except ValueError as err:
        raise PdbError(str(err)) from None


def set_condition(conditions: list[Obj], new: Obj, now: str) -> bool:
    """``apimeta.SetStatusCondition``: keeps lastTransitionTime unless the status changes."""
    for cond in conditions:
        if cond.get("type") == new["type"]:
            changed = False
            if cond.get("status") != new["status"]:
                cond["status"] = new["status"]
                cond["lastTransitionTime"] = now
                changed = True
            for key in ("reason", "message", "observedGeneration"):
                if cond.get(key) != new.get(key):
                    if new.get(key) is None:
                        cond.pop(key, None)
                    else:
                        cond[key] = new[key]
                    changed = True
            return changed
    conditions.append({**new, "lastTransitionTime": now})
    return True


def disruption_condition(allowed: int, observed_generation: int) -> Obj:
    """``pdbhelper.UpdateDisruptionAllowedCondition``'s condition."""
    cond: Obj = {"type": "DisruptionAllowed", "message": ""}
    if allowed > 0:
        cond.update(status="True", reason="SufficientPods")
    else:
        cond.update(status="False", reason="InsufficientPods")
    if observed_generation:
        cond["observedGeneration"] = observed_generation
    return cond


def _conditions_up_to_date(pdb: Obj) -> bool:
    status = pdb.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    if cond is None or status.get("observedGeneration") != objects.meta(pdb).get("generation"):
        return False
    wanted = (
        ("True", "SufficientPods")
        if int(status.get("disruptionsAllowed") or 0) > 0
        else ("False", "InsufficientPods")
    )
    return (cond.get("status"), cond.get("reason")) == wanted


class DisruptionController(OwnerGraph):
    """Keeps the status of every PodDisruptionBudget of a namespace up to date."""

    # --- the disruption controller -----------------------------------------------------------------

    def _pdbs_for_pod(self, namespace: str, pod: Obj, old: Obj | None) -> list[str]:
        """``getPdbForPod``, for the Pod before and after the event: the PDBs of its namespace whose
        selector matches its labels. A PDB whose selector does not parse is synced too (its status
        says so). kube's controller queues only these; the embedded one synced every PDB of the
        namespace, each over every object of the namespace, on every Pod event."""
        label_sets = [objects.meta(pod).get("labels")]
        if old is not None:
            label_sets.append(objects.meta(old).get("labels"))
        names = []
        for pdb in self._of_kind(PDBS, namespace):
            try:
                selector = pdb_selector((pdb.get("spec") or {}).get("selector"))
            except PdbError:
                names.append(objects.meta(pdb)["name"])
                continue
            if any(selector.matches(labels) for labels in label_sets):
                names.append(objects.meta(pdb)["name"])
        return names

    def _sync_pdbs(self, key: str) -> None:
        """``DisruptionController.sync`` for the PDB ``namespace/name``."""
        namespace, _, name = key.partition("/")
        pdb = self.store.get(PDBS, namespace, name)
        if pdb is None:
            return
        rt = self._rt_for(PDBS, pdb)
        if rt is None:
            return
        now = self.api.clock()
        new_status, recheck = self._pdb_status(pdb, self._of_kind(PODS, namespace), now)
        if recheck is not None:
            self.later((recheck - now).total_seconds() + 0.01, ("pdb", key))
        if new_status is not None:
            self._update(rt, {**pdb, "status": new_status}, subresource="status")

    def _pdb_status(self, pdb: Obj, pods: list[Obj], now: datetime) -> tuple[Obj | None, datetime | None]:
        """The PDB's new status (``None`` if up to date) and when to look again (expiring disruptions)."""
        old = dict(pdb.get("status") or {})
        generation = int(objects.meta(pdb).get("generation") or 0)
        spec = pdb.get("spec") or {}
        stamp = rfc3339(now)
        try:
            selector = pdb_selector(spec.get("selector"))
            matching = [p for p in pods if selector.matches(objects.meta(p).get("labels"))]
            expected, desired = desired_healthy(
                spec,
                len(matching),
                lambda: self._expected_scale(matching, objects.meta(pdb).get("namespace", "")),
            )
        except PdbError as err:
            # failSafe: no disruptions until the PDB can be computed again.
            conditions = [dict(c) for c in old.get("conditions") or []]
            cond: Obj = {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": str(err),
            }
            if old.get("observedGeneration"):
                cond["observedGeneration"] = old["observedGeneration"]
            changed = set_condition(conditions, cond, stamp)
            if not changed and "disruptionsAllowed" in old and int(old["disruptionsAllowed"] or 0) == 0:
                return None, None
            base = {"currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
            return {**base, **old, "disruptionsAllowed": 0, "conditions": conditions}, None
        disrupted: dict[str, datetime] = {}
        recheck: datetime | None = None
        old_disrupted = old.get("disruptedPods") or {}
        for pod in matching:
            since = objects.parse_time(old_disrupted.get(objects.meta(pod)["name"]))
            if since is None or objects.is_deleting(pod):
                continue
            expires = since + DELETION_TIMEOUT
            if expires > now:
                disrupted[objects.meta(pod)["name"]] = since
                recheck = expires if recheck is None or expires < recheck else recheck
        current = count_healthy(matching, disrupted, now)
        allowed = disruptions_allowed(current, desired, expected)
        disrupted_out = {k: old_disrupted[k] for k in disrupted}
        if (
            old.get("currentHealthy") == current
            and old.get("desiredHealthy") == desired
            and old.get("expectedPods") == expected
            and old.get("disruptionsAllowed") == allowed
            and (old.get("disruptedPods") or {}) == disrupted_out
            and old.get("observedGeneration") == generation
            and _conditions_up_to_date(pdb)
        ):
            return None, recheck
        new: Obj = {
            "currentHealthy": current,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
        }
        if disrupted_out:
            new["disruptedPods"] = disrupted_out
        if generation:
            new["observedGeneration"] = generation
        conditions = [dict(c) for c in old.get("conditions") or []]
        set_condition(conditions, disruption_condition(allowed, generation), stamp)
        new["conditions"] = conditions
        return new, recheck

    def _expected_scale(self, pods: list[Obj], namespace: str) -> int:
        """``getExpectedScale``: the sum of the scales of the pods' controllers."""
        scales: dict[str, int] = {}
        seen: set[str] = set()
        for pod in pods:
            ref = controller_of(pod)
            if ref is None:
                continue  # an unmanaged pod (kube emits an UnmanagedPods event and carries on)
            if ref.get("uid") in seen:
                continue
            found = None
            for finder in (
                self._find_deployment,
                self._find_replicaset,
                self._find_statefulset,
                self._find_scale,
            ):
                found = finder(ref, namespace)
                if found is not None:
                    break
            if found is None:
                raise PdbError(f'found no controllers for pod "{objects.meta(pod)["name"]}"')
            seen.add(str(ref.get("uid")))
            scales[found[0]] = found[1]
        return sum(scales.values())

    def _lookup(self, key: str, namespace: str, ref: dict[str, Any]) -> Obj | None:
        obj = self.store.get(key, namespace, str(ref.get("name", "")))
        if obj is None or objects.meta(obj).get("uid") != ref.get("uid"):
            return None
        return obj

    def _find_replicaset(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "ReplicaSet" or group_of(ref.get("apiVersion")) not in ("apps", "extensions"):
            return None
        rs = self._lookup("apps/replicasets", namespace, ref)
        if rs is None:
            return None
        owner = controller_of(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            return None
        return objects.meta(rs)["uid"], int((rs.get("spec") or {}).get("replicas", 1))

    def _find_deployment(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "ReplicaSet" or group_of(ref.get("apiVersion")) not in ("apps", "extensions"):
            return None
        rs = self._lookup("apps/replicasets", namespace, ref)
        owner = None if rs is None else controller_of(rs)
        if owner is None or owner.get("kind") != "Deployment":
            return None
        if group_of(owner.get("apiVersion")) not in ("apps", "extensions"):
            return None
        deployment = self._lookup("apps/deployments", namespace, owner)
        if deployment is None:
            return None
        return objects.meta(deployment)["uid"], int((deployment.get("spec") or {}).get("replicas", 1))

    def _find_statefulset(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        if ref.get("kind") != "StatefulSet" or group_of(ref.get("apiVersion")) != "apps":
            return None
        sts = self._lookup("apps/statefulsets", namespace, ref)
        if sts is None:
            return None
        return objects.meta(sts)["uid"], int((sts.get("spec") or {}).get("replicas", 1))

    def _find_scale(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
        rt = self.api.registry.for_kind(api_version, kind)
        if rt is None:
            raise PdbError(f'no matches for kind "{kind}" in version "{api_version}"')
        resource = errors.qualified(rt.plural, rt.group)
        if "scale" not in rt.subresources:
            raise PdbError(f"{resource} does not implement the scale subresource")
        obj = self._lookup(rt.storage_key, namespace if rt.namespaced else "", ref)
        if obj is None:
            return None

        if rt.scale_paths is None:
            return objects.meta(obj)["uid"], int((obj.get("spec") or {}).get("replicas", 1))
        return objects.meta(obj)["uid"], int(scale_of(rt, obj)["spec"]["replicas"])

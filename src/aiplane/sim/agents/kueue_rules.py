"""Kueue's quota admission, the parts the embedded cluster plays (pure: plain dicts in, decisions out).

Upstream is ``kubernetes-sigs/kueue`` (v0.19): ``pkg/scheduler/flavorassigner/flavorassigner.go`` assigns
a flavor to each pod set and words why it cannot, ``pkg/scheduler/scheduler.go`` admits in queue order,
``pkg/workload`` writes the conditions. What is kept here:

* **Flavor assignment.** The ClusterQueue's resource groups list flavors in order; a pod set gets the
  first flavor of the group covering its resources in which every requested resource fits. A flavor
  with a ``NoSchedule``/``NoExecute`` ``nodeTaints`` entry the pod does not tolerate is skipped
  (``untolerated taint {key value effect <nil>} in flavor F``), so is one whose ``nodeLabels``
  contradict the pod's ``nodeSelector`` (only the keys the flavor names
  count, as Kueue's flavor selector). A resource no group covers: ``resource R unavailable in
  ClusterQueue``.
* **Fit.** ``requested`` = what earlier pod sets of the same workload took from the flavor + this pod
  set's requests * count. Over the flavor's nominal quota (its maximum capacity: one ClusterQueue, no
  cohort to borrow from) it never fits: ``insufficient quota for R in flavor F, previously considered
  podsets requests (A) + current podset request (B) > maximum capacity (C)``; over what is unused
  (nominal - usage of admitted workloads, never below 0): ``insufficient unused quota for R in flavor F,
  N more needed``. Reasons are sorted and joined with ``", "``; pod sets that do not fit are joined with
  ``"; "``, each as ``couldn't assign flavors to pod set <name>: <reasons>``.
* **Order.** BestEffortFIFO (Kueue's default): pending workloads by creation time; one that does not
  fit does not hold back the ones after it.
* **Never evicts.** Admitted workloads keep their admission whatever happens to the quota afterwards;
  usage may then exceed nominal until they finish, and nothing new is admitted meanwhile. (Real Kueue
  preempts only when a pending workload could fit by preempting and the ClusterQueue's ``preemption``
  policy allows it; ours say ``Never``.)

Amounts are integers as the scheduler counts them (millicores for ``cpu``, units otherwise) and are
printed as Kueue's resource formatter does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery.quantity import Quantity, QuantityFormat
from aiplane.sim.agents.scheduler_filters import pod_requests, quantity_int

Obj = dict[str, Any]
#: (flavor, resource) → amount.
Usage = dict[tuple[str, str], int]


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    #: One pod's requests (scheduler units).
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Flavor:
    name: str
    quota: Mapping[str, int]
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[Flavor, ...]


@dataclass(frozen=True)
class Assigned:
    """A pod set's flavor and what it takes from it (requests * count)."""

    podset: str
    #: resource → flavor.
    flavors: Mapping[str, str]
    usage: Mapping[str, int]
    count: int


def amount_string(resource: str, amount: int) -> str:
    """Kueue's ``ResourceFormatter.ResourceQuantityString``."""
    if resource == "cpu":
        return Quantity.from_milli(amount).canonical()
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return Quantity.from_int(amount, QuantityFormat.BINARY_SI).canonical()
    return str(amount)


def podsets_of(workload: Mapping[str, Any]) -> list[PodSet]:
    """The pod sets of a Workload's ``spec.podSets``."""
    out = []
    for ps in (workload.get("spec") or {}).get("podSets") or []:
        spec = (ps.get("template") or {}).get("spec") or {}
        out.append(
            PodSet(
                name=str(ps.get("name")),
                count=int(ps.get("count") or 1),
                requests=pod_requests(spec),
                node_selector=dict(spec.get("nodeSelector") or {}),
                tolerations=tuple(t for t in spec.get("tolerations") or [] if isinstance(t, Mapping)),
            )
        )
    return out


def resource_groups(
    cluster_queue: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> list[ResourceGroup]:
    """The ClusterQueue's resource groups; ``flavors`` are the ResourceFlavors by name (a flavor the
    ClusterQueue names but that does not exist is left out, as Kueue leaves it out of admission)."""
    out = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        fl = []
        for f in group.get("flavors") or []:
            name = str(f.get("name"))
            rf = flavors.get(name)
            if rf is None:
                continue
            quota = {
                str(r.get("name")): quantity_int(str(r.get("name")), r.get("nominalQuota", 0))
                for r in f.get("resources") or []
            }
            rf_spec = rf.get("spec") or {}
            labels = dict(rf_spec.get("nodeLabels") or {})
            taints = tuple(t for t in rf_spec.get("nodeTaints") or [] if isinstance(t, Mapping))
            fl.append(Flavor(name, quota, labels, taints))
        out.append(ResourceGroup(tuple(str(r) for r in group.get("coveredResources") or []), tuple(fl)))
    return out


def usage_of(admissions: Iterable[Mapping[str, Any]]) -> Usage:
    """What admitted workloads hold: the sum of their ``status.admission.podSetAssignments``."""
    total: Usage = {}
    for admission in admissions:
        for psa in admission.get("podSetAssignments") or []:
            flavors = psa.get("flavors") or {}
            for res, amount in (psa.get("resourceUsage") or {}).items():
                key = (str(flavors.get(res, "")), str(res))
                total[key] = total.get(key, 0) + quantity_int(str(res), amount)
    return total


def _selector_conflict(podset: PodSet, flavor: Flavor) -> bool:
    return any(
        k in flavor.node_labels and flavor.node_labels[k] != v for k, v in podset.node_selector.items()
    )


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(toleration.get("key")) and str(toleration.get("value") or "") == str(taint.get("value") or "")


def untolerated(podset: PodSet, flavor: Flavor) -> Mapping[str, Any] | None:
    """The first ``NoSchedule``/``NoExecute`` taint of the flavor the pod set does not tolerate."""
    for taint in flavor.node_taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            _tolerates(t, taint) for t in podset.tolerations
        ):
            return taint
    return None


def _go_taint(taint: Mapping[str, Any]) -> str:
    """How Kueue's ``%s`` prints a ``corev1.Taint`` value: its fields in braces."""
    return f"{{{taint.get('key', '')} {taint.get('value', '') or ''} {taint.get('effect', '')} <nil>}}"


def _try_flavor(
    podset: PodSet, flavor: Flavor, resources: Sequence[str], usage: Usage, assumed: Usage
) -> list[str]:
    """Why ``podset`` does not fit ``flavor`` (empty: it fits)."""
    reasons = []
    for res in resources:
        request = podset.requests[res] * podset.count
        before = assumed.get((flavor.name, res), 0)
        nominal = flavor.quota.get(res, 0)
        wanted = before + request
        if wanted > nominal:
            reasons.append(
                f"insufficient quota for {res} in flavor {flavor.name}, previously considered podsets requests "
                f"({amount_string(res, before)}) + current podset request ({amount_string(res, request)}) > "
                f"maximum capacity ({amount_string(res, nominal)})"
            )
            continue
        # Never below 0 (``ClusterQueueSnapshot.Available``): with the quota lowered under what is admitted,
        # the workload needs its own request, not the overshoot too.
        available = max(0, nominal - usage.get((flavor.name, res), 0))
        if wanted > available:
            reasons.append(
                f"insufficient unused quota for {res} in flavor {flavor.name}, "
                f"{amount_string(res, wanted - available)} more needed"
            )
    return reasons


def _assign_podset(
    podset: PodSet, groups: Sequence[ResourceGroup], usage: Usage, assumed: Usage
) -> Assigned | list[str]:
    wanted = [r for r, v in sorted(podset.requests.items()) if v > 0]
    for res in wanted:
        if not any(res in g.covered for g in groups):
            return [f"resource {res} unavailable in ClusterQueue"]
    reasons: list[str] = []
    chosen: dict[str, str] = {}
    for group in groups:
        mine = [r for r in wanted if r in group.covered]
        if not mine:
            continue
        picked = None
        for flavor in group.flavors:
            taint = untolerated(podset, flavor)
            if taint is not None:
                reasons.append(f"untolerated taint {_go_taint(taint)} in flavor {flavor.name}")
                continue
            if _selector_conflict(podset, flavor):
                reasons.append(f"flavor {flavor.name} doesn't match node affinity")
                continue
            why = _try_flavor(podset, flavor, mine, usage, assumed)
            if not why:
                picked = flavor.name
                break
            reasons.extend(why)
        if picked is None:
            return reasons or ["no flavor in the ClusterQueue"]
        for res in mine:
            chosen[res] = picked
    usage_out = {r: podset.requests[r] * podset.count for r in wanted}
    return Assigned(podset.name, chosen, usage_out, podset.count)


@dataclass(frozen=True)
class Decision:
    """``assigned`` when the workload is admitted now; else ``message`` says why not."""

    assigned: tuple[Assigned, ...] = ()
    message: str = ""

    @property
    def admitted(self) -> bool:
        return not self.message


def assign(podsets: Sequence[PodSet], groups: Sequence[ResourceGroup], usage: Usage) -> Decision:
    """Kueue's flavor assignment of one workload against ``usage`` (pure)."""
    assumed: Usage = {}
    assigned: list[Assigned] = []
    failures: list[str] = []
    for podset in podsets:
        result = _assign_podset(podset, groups, usage, assumed)
        if isinstance(result, Assigned):
            assigned.append(result)
            add_usage(assumed, [result])
            continue
        failures.append(f"couldn't assign flavors to pod set {podset.name}: {', '.join(sorted(result))}")
    if failures:
        return Decision(message="; ".join(failures))
    return Decision(assigned=tuple(assigned))


def admission_of(cluster_queue: str, decision: Decision) -> Obj:
    """The Workload's ``status.admission`` for an admitted decision."""
    return {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [
            {
                "name": a.podset,
                "flavors": dict(sorted(a.flavors.items())),
                "resourceUsage": {res: amount_string(res, v) for res, v in sorted(a.usage.items())},
                "count": a.count,
            }
            for a in decision.assigned
        ],
    }


def add_usage(usage: Usage, assigned: Iterable[Assigned]) -> None:
    """Add what ``assigned`` takes to ``usage`` (in place)."""
    for a in assigned:
        for res, amount in a.usage.items():
            key = (a.flavors[res], res)
            usage[key] = usage.get(key, 0) + amount


def schedule(
    pending: Sequence[tuple[str, Sequence[PodSet]]], groups: Sequence[ResourceGroup], usage: Usage
) -> list[tuple[str, Decision]]:
    """One scheduling pass of one ClusterQueue (BestEffortFIFO): each pending workload in order against
    what the admitted ones and those admitted before it in this pass hold. ``usage`` is not changed."""
    held = dict(usage)
    out = []
    for name, podsets in pending:
        decision = assign(podsets, groups, held)
        if decision.admitted:
            add_usage(held, decision.assigned)
        out.append((name, decision))
    return out

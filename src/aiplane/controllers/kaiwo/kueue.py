"""The Kueue objects the KaiwoConfig asks for, built as plain dicts (pure), and when ours differ.

Shapes follow Kueue's v1beta1 API (``apis/kueue/v1beta1``): one resource group whose flavors list every
covered resource in the same order (the CRD's CEL rule), at most 64 flavors and 64 resources; a
ResourceFlavor with ``topologyName`` has at least one node label and its spec is immutable (so a flavor
of ours that differs is deleted and recreated, never updated); a LocalQueue's ``clusterQueue`` is
immutable too. Topology is written at ``v1beta1`` like the rest: Kueue v0.17 serves it at ``v1beta1``
and ``v1beta2`` (one schema, no conversion webhook), no longer at ``v1alpha1``. Every object carries
:data:`MANAGED_LABEL` and an owner reference to the KaiwoConfig: only objects with both are ever changed
or deleted (upstream deleted every ClusterQueue and ResourceFlavor it did not know).

"Differs" compares only the fields we set, quantities by value, so the fields a real Kueue defaults
(``queueingStrategy``, ``flavorFungibility``, ``stopPolicy``) never cause a write loop; ``preemption``
is written out (:data:`PREEMPTION`, equal to Kueue's defaults).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.apimachinery.quantity import Quantity
from aiplane.controllers.kaiwo.pools import NodeView, Pool, covered_resources, held_quota
from aiplane.controllers.partitioning.vocabulary import TAINT_KEY as PARTITIONING_TAINT

CONFIG_API: Final = "config.kaiwo.silogen.ai/v1alpha1"
KUEUE_API: Final = "kueue.x-k8s.io/v1beta1"
TOPOLOGY_API: Final = "kueue.x-k8s.io/v1beta1"
MANAGED_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_VALUE: Final = "aiplane-kaiwoconfig"
NODEPOOL_LABEL: Final = "kaiwo/nodepool"
WORKER_LABEL: Final = "kaiwo/worker"
GPU_MODEL_LABEL: Final = "kaiwo/gpu-model"
BLOCK_LABEL: Final = "kaiwo/topology-block"
RACK_LABEL: Final = "kaiwo/topology-rack"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
TOPOLOGY_NAME: Final = "default-topology"
TOPOLOGY_LEVELS: Final = (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)
DEFAULT_BLOCK: Final = "block-a"
DEFAULT_RACK: Final = "rack-a"
#: Taints that come and go on a node (not a property of its pool): kube's node lifecycle, cloud
#: providers', the cluster autoscaler's.
PASSING_TAINT_PREFIXES: Final = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
)
#: Kueue never evicts an admitted workload of ours to make room for another: quota lowered below what
#: is admitted (a repartition back to SPX) only holds new workloads back until usage drops. These are
#: Kueue's defaults, written out so that nobody's defaulting can change them.
PREEMPTION: Final = {
    "withinClusterQueue": "Never",
    "reclaimWithinCohort": "Never",
    "borrowWithinCohort": {"policy": "Never"},
}
#: Kueue's finalizer on a ResourceFlavor or ClusterQueue some ClusterQueue or Workload still uses.
IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
#: Spec fields that are ours alone on an object of each kind: present on the cluster but absent from
#: what we want means the object differs.
OWNED_SPEC_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "ResourceFlavor": ("nodeLabels", "nodeTaints", "topologyName"),
}
#: Kueue's limits on one resource group (``MaxItems`` in clusterqueue_types.go).
MAX_FLAVORS: Final = 64
MAX_RESOURCES: Final = 64


def _meta(name: str, owner: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
    ref = controller_owner_reference(
        {"apiVersion": CONFIG_API, "kind": "KaiwoConfig", "metadata": owner.get("metadata") or {}}
    )
    ref["blockOwnerDeletion"] = False
    meta: dict[str, Any] = {"name": name, "labels": {MANAGED_LABEL: MANAGED_VALUE}, "ownerReferences": [ref]}
    if namespace:
        meta["namespace"] = namespace
    return meta


def is_ours(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """Created by this controller for this KaiwoConfig: our label and its owner reference."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return objects.labels(obj).get(MANAGED_LABEL) == MANAGED_VALUE and any(
        isinstance(r, Mapping) and r.get("uid") == owner_uid for r in refs
    )


def topology(owner: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": TOPOLOGY_API,
        "kind": "Topology",
        "metadata": _meta(TOPOLOGY_NAME, owner),
        "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]},
    }


def pool_taints(nodes: Iterable[NodeView]) -> list[dict[str, Any]]:
    """The ``NoSchedule``/``NoExecute`` taints every node of a pool carries, but the passing ones (a
    partitioning rollout's ``amd-dcm``, kube's ``node.kubernetes.io/*``, the cluster autoscaler's).

    They go in the ResourceFlavor's ``nodeTaints``, so Kueue gives a pod a flavor only when the pod
    tolerates them: otherwise a CPU-only pod would be sent to the control-plane pool (first in the
    ClusterQueue) and never scheduled there."""
    common: set[tuple[str, str, str]] | None = None
    for node in nodes:
        mine = {
            (str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
            for t in node.taints
            if t.get("effect") in ("NoSchedule", "NoExecute") and not _passing(str(t.get("key", "")))
        }
        common = mine if common is None else common & mine
    out = []
    for key, value, effect in sorted(common or ()):
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return out


def _passing(key: str) -> bool:
    return key == PARTITIONING_TAINT or key.startswith(PASSING_TAINT_PREFIXES)


def resource_flavor(
    pool: Pool, owner: Mapping[str, Any], taints: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {NODEPOOL_LABEL: pool.name}}
    if taints:
        spec["nodeTaints"] = [dict(t) for t in taints]
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": _meta(pool.name, owner),
        "spec": spec,
    }


def cluster_queue(
    name: str,
    cohort: str,
    pools: Sequence[Pool],
    current: Mapping[str, Mapping[str, Quantity]],
    owner: Mapping[str, Any],
) -> dict[str, Any]:
    """The default ClusterQueue: every pool a flavor, quotas zero-filled over the covered resources."""
    covered = covered_resources(pools)
    flavors = []
    for pool in pools:
        quota = held_quota(pool, current.get(pool.name))
        flavors.append(
            {
                "name": pool.name,
                "resources": [{"name": r, "nominalQuota": str(quota.get(r, Quantity(0)))} for r in covered],
            }
        )
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [],
        "preemption": copy.deepcopy(PREEMPTION),
    }
    if flavors:
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors}]
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(name, owner), "spec": spec}


def local_queue(name: str, namespace: str, owner: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": _meta(name, owner, namespace),
        "spec": {"clusterQueue": name},
    }


def _same(desired: Any, actual: Any) -> bool:
    """``desired`` is contained in ``actual``: maps by key, lists item by item, quantities by value."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(_same(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(_same(d, a) for d, a in zip(desired, actual, strict=True))
        )
    if isinstance(desired, str) and isinstance(actual, str | int) and desired != str(actual):
        try:
            return Quantity(desired) == Quantity(actual)
        except ValueError:
            return False
    return bool(desired == actual)


def spec_differs(desired: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Ours differs from ``desired`` in a field we set, or carries one of :data:`OWNED_SPEC_FIELDS` that
    ``desired`` leaves out (a flavor written by an older release with ``topologyName``, or with the
    ``nodeTaints`` its pool no longer has)."""
    wanted = desired.get("spec") or {}
    spec = objects.spec(actual)
    stale = any(f in spec and f not in wanted for f in OWNED_SPEC_FIELDS.get(str(desired.get("kind")), ()))
    return stale or not _same(wanted, spec)


def check_limits(pools: Sequence[Pool]) -> str | None:
    """Why the ClusterQueue cannot hold these pools (Kueue's limits), or None."""
    if len(pools) > MAX_FLAVORS:
        return f"{len(pools)} node pools exceed Kueue's {MAX_FLAVORS} flavors per resource group"
    covered = covered_resources(pools)
    if len(covered) > MAX_RESOURCES:
        return f"{len(covered)} resources exceed Kueue's {MAX_RESOURCES} covered resources per group"
    return None

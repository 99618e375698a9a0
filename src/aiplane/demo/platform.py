"""What the demo shows of the platform configuration: the Kueue ClusterQueue's GPU quota following the
partitioning rollout (partition-aware, never dipping while nodes are cordoned), and the credentials an
AIMNamespaceConfig gives the workloads' pods (by reference: names of Secrets and keys, never values).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.kube.resources import resource_for
from aiplane.sim.apiserver.store import DELETED, Event

CLUSTERQUEUE_KEY = "kueue.x-k8s.io/clusterqueues"
CLUSTERQUEUES = resource_for("kueue.x-k8s.io/v1beta1", "ClusterQueue")


def gpu_quota(clusterqueue: Mapping[str, Any] | None, resource: str = "amd.com/gpu") -> int:
    """The ClusterQueue's nominal quota of ``resource``, summed over its flavors."""
    total = 0
    for group in objects.spec(clusterqueue).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for item in flavor.get("resources") or []:
                if item.get("name") == resource:
                    total += Quantity(str(item.get("nominalQuota", "0"))).value()
    return total


@dataclass
class QueueWatch:
    """Every committed quota of one ClusterQueue, in order (repeats collapsed)."""

    name: str
    resource: str = "amd.com/gpu"
    quotas: list[int] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if event.key != CLUSTERQUEUE_KEY or objects.name(event.obj) != self.name or event.type == DELETED:
            return
        quota = gpu_quota(event.obj, self.resource)
        if not self.quotas or self.quotas[-1] != quota:
            self.quotas.append(quota)

    def mark(self) -> int:
        """Where the rollout starts: only changes from here on count."""
        self.quotas = self.quotas[-1:]
        return len(self.quotas)

    def describe(self) -> str:
        if not self.quotas:
            return "no ClusterQueue yet"
        steps = " → ".join(str(q) for q in self.quotas)
        never_lower = all(b >= a for a, b in zip(self.quotas, self.quotas[1:], strict=False))
        return f"{steps} ({'never lower on the way' if never_lower else 'it dipped'})"

    def never_lower(self) -> bool:
        return all(b >= a for a, b in zip(self.quotas, self.quotas[1:], strict=False))


def credential_refs(pods: Iterable[Mapping[str, Any]]) -> tuple[int, list[str], list[str]]:
    """(pods carrying them, env var names set from Secrets, image pull secrets) over ``pods``."""
    names: set[str] = set()
    pulls: set[str] = set()
    carrying = 0
    for pod in pods:
        spec = objects.spec(pod)
        found = {
            str(env.get("name"))
            for container in spec.get("containers") or []
            for env in container.get("env") or []
            if (env.get("valueFrom") or {}).get("secretKeyRef")
        }
        if found:
            carrying += 1
        names |= found
        pulls |= {str(s.get("name")) for s in spec.get("imagePullSecrets") or []}
    return carrying, sorted(names), sorted(pulls)

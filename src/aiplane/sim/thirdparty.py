"""CRDs of third-party APIs our controllers create objects of, installed at start without their controllers.

We do not ship those projects' full schemas: each kind is served with an open ``spec``/``status``
(``x-kubernetes-preserve-unknown-fields``), so the objects we write are stored and watched like any
custom resource. docs/sim.md lists this as a difference from a cluster running the real operators.
"""

from __future__ import annotations

from typing import Any

_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

# (group, versions, kind, plural, scope, short names, categories, status subresource, scale subresource)
_KINDS: list[tuple[str, tuple[str, ...], str, str, str, tuple[str, ...], tuple[str, ...], bool, bool]] = [
    (
        "scheduling.volcano.sh",
        ("v1beta1",),
        "PodGroup",
        "podgroups",
        "Namespaced",
        ("pg", "podgroup-v1beta1"),
        (),
        True,
        False,
    ),
    (
        "scheduling.volcano.sh",
        ("v1beta1",),
        "Queue",
        "queues",
        "Cluster",
        ("q", "queue-v1beta1"),
        (),
        True,
        False,
    ),
    (
        "kueue.x-k8s.io",
        ("v1beta1",),
        "ResourceFlavor",
        "resourceflavors",
        "Cluster",
        ("flavor", "flavors", "rf"),
        (),
        False,
        False,
    ),
    ("kueue.x-k8s.io", ("v1beta1",), "ClusterQueue", "clusterqueues", "Cluster", ("cq",), (), True, False),
    ("kueue.x-k8s.io", ("v1beta1",), "LocalQueue", "localqueues", "Namespaced", ("lq",), (), True, False),
    (
        "kueue.x-k8s.io",
        ("v1beta1", "v1beta2"),
        "Workload",
        "workloads",
        "Namespaced",
        ("wl",),
        (),
        True,
        False,
    ),
    (
        "kueue.x-k8s.io",
        ("v1beta1",),
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
        "Cluster",
        (),
        (),
        False,
        False,
    ),
    ("kueue.x-k8s.io", ("v1beta1",), "Topology", "topologies", "Cluster", (), (), False, False),
    (
        "gateway.networking.k8s.io",
        ("v1",),
        "Gateway",
        "gateways",
        "Namespaced",
        ("gtw",),
        ("gateway-api",),
        True,
        False,
    ),
    (
        "gateway.networking.k8s.io",
        ("v1",),
        "HTTPRoute",
        "httproutes",
        "Namespaced",
        (),
        ("gateway-api",),
        True,
        False,
    ),
    (
        "networking.istio.io",
        ("v1", "v1beta1"),
        "VirtualService",
        "virtualservices",
        "Namespaced",
        ("vs",),
        ("istio-io", "networking-istio-io"),
        True,
        False,
    ),
    (
        "leaderworkerset.x-k8s.io",
        ("v1",),
        "LeaderWorkerSet",
        "leaderworkersets",
        "Namespaced",
        ("lws",),
        (),
        True,
        True,
    ),
    ("amd.com", ("v1alpha1",), "DeviceConfig", "deviceconfigs", "Namespaced", ("gpue",), (), True, False),
]


def _approval(group: str) -> dict[str, str]:
    """kube refuses a CRD of a ``k8s.io`` group without its API review (Gateway API's CRDs name theirs)."""
    if group.endswith(".k8s.io"):
        return {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466"}
    return {}


def crds() -> list[dict[str, Any]]:
    out = []
    for group, versions, kind, plural, scope, short, categories, status, scale in _KINDS:
        schema = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": _OPEN,
                "status": _OPEN,
            },
        }
        subresources: dict[str, Any] = {}
        if status:
            subresources["status"] = {}
        if scale:
            subresources["scale"] = {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.hpaPodSelector",
            }
        names: dict[str, Any] = {
            "kind": kind,
            "listKind": f"{kind}List",
            "plural": plural,
            "singular": kind.lower(),
        }
        if short:
            names["shortNames"] = list(short)
        if categories:
            names["categories"] = list(categories)
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}", "annotations": _approval(group)},
                "spec": {
                    "group": group,
                    "names": names,
                    "scope": scope,
                    "versions": [
                        {
                            "name": v,
                            "served": True,
                            "storage": i == 0,
                            "schema": {"openAPIV3Schema": schema},
                            **({"subresources": subresources} if subresources else {}),
                        }
                        for i, v in enumerate(versions)
                    ],
                },
            }
        )
    return out

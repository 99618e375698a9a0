"""What a DynamoGraphDeployment wants on the DCD path: pure decisions over the DGD as cached.

Upstream's DGD controller (ai-dynamo/dynamo ``deploy/cloud/operator/internal/dynamo/graph.go``) turns
each ``spec.services`` entry into one DynamoComponentDeployment. The decisions are kept here, free
of I/O, so the executor only compares and writes: which DCDs should exist and with which body
(:func:`desired_dcds`), which owned ones must go (:func:`stale_dcds`), and whether the graph can be
built at all (:func:`validate_graph`, :func:`multinode_problem`).

Where we depart from upstream: :func:`validate_graph` finds names that would make a child the API
server rejects before anything is created (upstream met them as reconcile errors, #4938), and two
service keys that lower-case to the same DCD name are a problem rather than one DCD overwriting the
other.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference, is_controlled_by
from aiplane.controllers.dynamo.naming import (
    ANNOTATION_ENABLE_METRICS,
    API_VERSION,
    COMPONENT_FRONTEND,
    COMPONENT_PLANNER,
    DCD_KIND,
    DGD_KIND,
    LABEL_COMPONENT,
    LABEL_DYNAMO_NAMESPACE,
    LABEL_GRAPH_NAME,
    LABEL_SELECTOR,
    PLANNER_SERVICE_ACCOUNT,
    REVISION_HASH_SUFFIX,
    dcd_name,
    default_dynamo_namespace,
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    lws_name,
)
from aiplane.controllers.dynamo.options import DynamoOptions

__all__ = [
    "NamespaceConflictError",
    "Problem",
    "dcd_name",
    "default_ingress",
    "desired_dcds",
    "graph_dynamo_namespace",
    "merge_envs",
    "multinode_problem",
    "node_count",
    "replica_count",
    "services",
    "stale_dcds",
    "validate_graph",
]

Obj = Mapping[str, Any]
_Checker = Callable[[str], list[str]]

#: The pod-template-hash-like suffix a StatefulSet's revision label adds (10 characters after a dash).
_REVISION_SUFFIX = "-" + "x" * (REVISION_HASH_SUFFIX - 1)


class NamespaceConflictError(ValueError):
    """Services of one graph name different Dynamo namespaces; upstream refuses such a graph."""


@dataclass(frozen=True, order=True)
class Problem:
    """One reason the graph cannot be built: the field to fix and the rule it breaks."""

    path: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}"


# --- reading the DGD ---------------------------------------------------------------------------------


def services(dgd: Obj) -> dict[str, Obj]:
    """``spec.services`` as key → service spec, skipping entries that are not objects."""
    raw = objects.spec(dgd).get("services")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, Mapping)}


def _component_type(service: Obj) -> str:
    value = service.get("componentType")
    return value if isinstance(value, str) else ""


def node_count(service: Obj) -> int:
    """``multinode.nodeCount``; 1 for a single-node service. The CRD defaults it to 2 when
    ``multinode`` is given without it, and so do we for objects that skipped defaulting."""
    multinode = service.get("multinode")
    if not isinstance(multinode, Mapping):
        return 1
    count = multinode.get("nodeCount", 2)
    return count if isinstance(count, int) and not isinstance(count, bool) else 2


def replica_count(service: Obj) -> int:
    """The most replicas the service may run: ``replicas`` (default 1), or the autoscaler's maximum
    when that is higher — every replica index gets a LeaderWorkerSet, so names must fit for all."""
    replicas = service.get("replicas")
    count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
    autoscaling = service.get("autoscaling")
    if isinstance(autoscaling, Mapping) and autoscaling.get("enabled") is True:
        most = autoscaling.get("maxReplicas")
        if isinstance(most, int) and not isinstance(most, bool):
            count = max(count, most)
    return max(count, 0)


def graph_dynamo_namespace(dgd: Obj) -> str:
    """The one Dynamo namespace of the graph: the value every service that names one agrees on,
    else ``dynamo-<dgd>``. Different values raise :class:`NamespaceConflictError` naming them all."""
    named = {
        key: value
        for key, service in sorted(services(dgd).items())
        if isinstance(value := service.get("dynamoNamespace"), str) and value
    }
    values = sorted(set(named.values()))
    if len(values) > 1:
        listed = ", ".join(f"{key}={value!r}" for key, value in named.items())
        raise NamespaceConflictError(
            f"services name different Dynamo namespaces ({listed}); a graph has one Dynamo namespace"
        )
    return values[0] if values else default_dynamo_namespace(objects.name(dgd))


# --- validation ----------------------------------------------------------------------------------------

_SUBDOMAIN = "a DNS-1123 subdomain (at most 253 characters)"
_LABEL_VALUE = "a label value (at most 63 characters)"
_DNS1123_LABEL = "a DNS-1123 label (at most 63 characters)"
_DNS1035_LABEL = "a DNS-1035 label (at most 63 characters, starting with a letter)"


def _check(path: str, what: str, value: str, checker: _Checker, limit: str) -> list[Problem]:
    errs = checker(value)
    if not errs:
        return []
    return [Problem(path, f"{what} {value!r} must be {limit}: {'; '.join(errs)}")]


def _multinode_problems(path: str, dcd: str, service: Obj) -> list[Problem]:
    """The LeaderWorkerSet children of the highest replica index (the longest names): its headless
    Service, the StatefulSets' revision labels and the last worker pod's name (its hostname)."""
    nodes = node_count(service)
    lws = lws_name(dcd, max(replica_count(service) - 1, 0))
    leader_sts, worker_sts = lws, f"{lws}-0"
    checks: list[tuple[str, str, _Checker, str]] = [
        ("the LeaderWorkerSet and its headless Service are named", lws, dns1035_label_errors, _DNS1035_LABEL),
        (
            "the leader StatefulSet's controller-revision-hash label",
            leader_sts + _REVISION_SUFFIX,
            label_value_errors,
            _LABEL_VALUE,
        ),
        (
            "the worker StatefulSet's controller-revision-hash label",
            worker_sts + _REVISION_SUFFIX,
            label_value_errors,
            _LABEL_VALUE,
        ),
        (
            "the last worker pod (its hostname) is named",
            f"{worker_sts}-{nodes - 1}",
            dns1123_label_errors,
            _DNS1123_LABEL,
        ),
    ]
    return [p for what, value, checker, limit in checks for p in _check(path, what, value, checker, limit)]


def _service_problems(dgd_name: str, key: str, service: Obj) -> list[Problem]:
    path = f"spec.services[{key}]"
    dcd = dcd_name(dgd_name, key)
    problems = [
        *_check(path, f"the {LABEL_COMPONENT} label", key, label_value_errors, _LABEL_VALUE),
        *_check(
            path,
            "the DynamoComponentDeployment and its Deployment are named",
            dcd,
            dns1123_subdomain_errors,
            _SUBDOMAIN,
        ),
        *_check(path, f"the pod selector label {LABEL_SELECTOR}", dcd, label_value_errors, _LABEL_VALUE),
    ]
    if _component_type(service) == COMPONENT_FRONTEND:
        problems += _check(path, "the frontend's Service is named", dcd, dns1035_label_errors, _DNS1035_LABEL)
    if node_count(service) > 1:
        problems += _multinode_problems(path, dcd, service)
    return problems


def _namespace_problems(dgd: Obj) -> list[Problem]:
    try:
        namespace = graph_dynamo_namespace(dgd)
    except NamespaceConflictError as err:
        return [Problem("spec.services", str(err))]
    named = [k for k, s in sorted(services(dgd).items()) if s.get("dynamoNamespace")]
    path = f"spec.services[{named[0]}].dynamoNamespace" if named else "metadata.name"
    return _check(path, f"the {LABEL_DYNAMO_NAMESPACE} label", namespace, label_value_errors, _LABEL_VALUE)


def _collisions(dgd_name: str, keys: Iterable[str]) -> list[Problem]:
    seen: dict[str, str] = {}
    problems = []
    for key in sorted(keys):
        dcd = dcd_name(dgd_name, key)
        if dcd in seen:
            problems.append(
                Problem(
                    f"spec.services[{key}]",
                    f"makes the same DynamoComponentDeployment {dcd!r} as service {seen[dcd]!r}",
                )
            )
        else:
            seen[dcd] = key
    return problems


def validate_graph(dgd: Obj) -> list[Problem]:
    """Every reason the graph's DCDs or their children would be invalid, before anything is created.

    Each problem names the field to change and the limit broken (which child, which DNS-1123 or
    label rule). Empty means every DCD name is a valid DNS-1123 subdomain and label value.
    """
    name = objects.name(dgd)
    by_key = services(dgd)
    problems = _check(
        "metadata.name", f"the {LABEL_GRAPH_NAME} label", name, label_value_errors, _LABEL_VALUE
    )
    if not by_key:
        problems.append(Problem("spec.services", "at least one service is required"))
    problems += _namespace_problems(dgd)
    problems += _collisions(name, by_key)
    for key, service in sorted(by_key.items()):
        problems += _service_problems(name, key, service)
    return problems


def multinode_problem(dgd: Obj, lws_served: bool) -> str | None:
    """Upstream's refusal on the non-Grove path: multinode services need LeaderWorkerSet."""
    if lws_served:
        return None
    multinode = [key for key, service in sorted(services(dgd).items()) if node_count(service) > 1]
    if not multinode:
        return None
    return (
        "no multinode orchestrator available: "
        f"{', '.join(multinode)} {'has' if len(multinode) == 1 else 'have'} multinode.nodeCount > 1 "
        "but LeaderWorkerSet (leaderworkerset.x-k8s.io) is not served"
    )


# --- desired DCDs --------------------------------------------------------------------------------------


def merge_envs(graph_envs: Any, service_envs: Any) -> list[dict[str, Any]]:
    """The graph's envs under the service's: by name, the service wins; sorted by name (upstream's
    ``MergeEnvs``, so the order does not depend on the maps' iteration and the DCD does not churn)."""
    merged: dict[str, dict[str, Any]] = {}
    for envs in (graph_envs, service_envs):
        for env in envs if isinstance(envs, list) else ():
            if isinstance(env, Mapping) and isinstance(env.get("name"), str):
                merged[env["name"]] = copy.deepcopy(dict(env))
    return [merged[name] for name in sorted(merged)]


def default_ingress(dgd_name: str, options: DynamoOptions) -> dict[str, Any]:
    """A frontend's ingress when its spec has none: ``<dgd>.<suffix>``, by the operator's choices."""
    ingress: dict[str, Any] = {
        "enabled": options.ingress_enabled,
        "host": dgd_name,
        "hostSuffix": options.ingress_host_suffix,
    }
    if options.ingress_class:
        ingress["ingressControllerClassName"] = options.ingress_class
    if options.istio_gateway:
        ingress["useVirtualService"] = True
        ingress["virtualServiceGateway"] = options.istio_gateway
    if options.ingress_tls_secret:
        ingress["tls"] = {"secretName": options.ingress_tls_secret}
    return ingress


def _graph_labels(dgd_name: str, key: str, namespace: str) -> dict[str, str]:
    return {LABEL_COMPONENT: key, LABEL_DYNAMO_NAMESPACE: namespace, LABEL_GRAPH_NAME: dgd_name}


def _dcd_spec(dgd: Obj, key: str, service: Obj, namespace: str, options: DynamoOptions) -> dict[str, Any]:
    dgd_spec = objects.spec(dgd)
    spec: dict[str, Any] = copy.deepcopy(dict(service))
    backend = dgd_spec.get("backendFramework")
    if backend:
        spec["backendFramework"] = backend
    spec["serviceName"] = key
    spec["dynamoNamespace"] = namespace
    own_labels = service.get("labels")
    spec["labels"] = {
        **(own_labels if isinstance(own_labels, Mapping) else {}),
        **_graph_labels(objects.name(dgd), key, namespace),
    }
    envs = merge_envs(dgd_spec.get("envs"), service.get("envs"))
    if envs:
        spec["envs"] = envs
    else:
        spec.pop("envs", None)
    metrics = objects.annotations(dgd).get(ANNOTATION_ENABLE_METRICS)
    if isinstance(metrics, str):
        annotations = spec.get("annotations")
        spec["annotations"] = {
            **(annotations if isinstance(annotations, Mapping) else {}),
            ANNOTATION_ENABLE_METRICS: metrics,
        }
    kind = _component_type(service)
    if kind == COMPONENT_PLANNER:
        extra = spec.get("extraPodSpec")
        spec["extraPodSpec"] = {
            **(extra if isinstance(extra, Mapping) else {}),
            "serviceAccountName": PLANNER_SERVICE_ACCOUNT,
        }
    if kind == COMPONENT_FRONTEND and not spec.get("ingress"):
        spec["ingress"] = default_ingress(objects.name(dgd), options)
    return spec


def desired_dcds(dgd: Obj, options: DynamoOptions | None = None) -> dict[str, dict[str, Any]]:
    """DCD name → the full DCD body this graph wants, owned (as controller) by the DGD.

    Call after :func:`validate_graph` reported nothing: a namespace conflict raises
    :class:`NamespaceConflictError`, and colliding keys would yield one DCD for two services.
    """
    options = options or DynamoOptions()
    name = objects.name(dgd)
    namespace = graph_dynamo_namespace(dgd)
    owner = controller_owner_reference(
        {"apiVersion": API_VERSION, "kind": DGD_KIND, "metadata": {"name": name, "uid": objects.uid(dgd)}}
    )
    desired: dict[str, dict[str, Any]] = {}
    for key, service in sorted(services(dgd).items()):
        dcd = dcd_name(name, key)
        metadata: dict[str, Any] = {
            "name": dcd,
            "labels": _graph_labels(name, key, namespace),
            "ownerReferences": [dict(owner)],
        }
        if objects.namespace(dgd):
            metadata["namespace"] = objects.namespace(dgd)
        desired[dcd] = {
            "apiVersion": API_VERSION,
            "kind": DCD_KIND,
            "metadata": metadata,
            "spec": _dcd_spec(dgd, key, service, namespace, options),
        }
    return desired


def stale_dcds(dgd: Obj, existing_dcds: Iterable[Obj]) -> list[str]:
    """Names of DCDs this DGD controls whose service left ``spec.services`` (sorted); DCDs of other
    owners and ones already being deleted are not ours to delete (again)."""
    wanted = {dcd_name(objects.name(dgd), key) for key in services(dgd)}
    uid = objects.uid(dgd)
    return sorted(
        objects.name(dcd)
        for dcd in existing_dcds
        if uid
        and is_controlled_by(dcd, uid)
        and not objects.is_deleting(dcd)
        and objects.name(dcd) not in wanted
    )

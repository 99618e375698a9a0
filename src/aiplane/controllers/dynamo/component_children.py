"""The objects a DynamoComponentDeployment wants to exist, built by pure functions (no I/O, no clock).

Reference ``dynamo.md`` §2 is the contract: a single-node DCD gets a Deployment ``<dcd>``, a Service
``<dcd>`` when it is a frontend, an Ingress and/or an Istio VirtualService when asked for, and an
HPA when autoscaling is on; a multinode DCD (``spec.multinode.nodeCount`` > 1) gets, per replica
``i``, a LeaderWorkerSet and a PodGroup ``<dcd>-<i>`` of the gang scheduler in use (Volcano's, or the
scheduler-plugins Coscheduling one: :mod:`aiplane.controllers.gang`). Every child carries a controller
owner reference and the spec hash ``nvidia.com/last-applied-hash``: the executor rewrites a child
only when that hash differs, so server defaulting and other writers' fields never look like drift.

Where we decided differently from upstream (docs/dynamo.md, "DynamoComponentDeployment controller"):

* ``autoscaling.behavior`` is copied into the HPA (upstream had the field but dropped it).
* With autoscaling on, the Deployment's ``replicas`` is left out of the hash, and the executor keeps
  the live value on updates (:func:`updated`): the HPA owns it, we only set it at creation.
* A multinode DCD without LeaderWorkerSet (or Volcano PodGroup) API is an error, "no multinode
  orchestrator available", as the DGD controller says, instead of a silent single Deployment.
* LeaderWorkerSet pods keep ``nvidia.com/selector``, so the frontend Service (plus ``role=leader``)
  and ``status.labelSelector`` select them; upstream removed it and its Service selected nothing.
* A single-node DCD also gets a PodDisruptionBudget ``<dcd>`` (upstream creates none): a drain may
  take down at most what the component's own rolling update may (:func:`_pdb` says how 0 and
  ``Recreate`` are handled).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.apimachinery.quantity import Quantity, add_resource_lists
from aiplane.controllers.dynamo import multinode
from aiplane.controllers.dynamo.naming import ANNOTATION_LAST_APPLIED_HASH, COMPONENT_FRONTEND, lws_name
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.controllers.dynamo.podtemplate import (
    FRONTEND_PORT,
    GPU_RESOURCE,
    LABEL_SELECTOR,
    MAIN_CONTAINER,
    build_pod_template_and_backend,
    deployment_strategy,
)
from aiplane.controllers.gang import VOLCANO, GangBackend
from aiplane.controllers.platform import Platform, decorate_template, default_gpu_resource
from aiplane.controllers.queueing import QUEUE_LABEL

__all__ = [
    "ANNOTATION_HASH",
    "MIN_PDB_UNAVAILABLE",
    "REASON_INVALID",
    "REASON_NO_ORCHESTRATOR",
    "ChildrenError",
    "ChildrenInput",
    "Desired",
    "child_labels",
    "desired_children",
    "hash_of",
    "needs_update",
    "node_count",
    "updated",
]

Obj = dict[str, Any]

ANNOTATION_HASH: Final = ANNOTATION_LAST_APPLIED_HASH
LABEL_ROLE: Final = "role"
LABEL_INSTANCE: Final = "instance-id"
#: A budget of 0 would block every drain forever; one pod at a time is the least that lets one finish.
MIN_PDB_UNAVAILABLE: Final = 1
REASON_INVALID: Final = "InvalidSpec"
REASON_NO_ORCHESTRATOR: Final = "NoMultinodeOrchestrator"
DEFAULT_CPU_UTILIZATION: Final = 80
#: Service fields the API server allocates or defaults; an update must not drop them (clusterIP is
#: immutable, and the rest would read as a change on every write).
_SERVICE_ALLOCATED: Final = (
    "clusterIP",
    "clusterIPs",
    "ipFamilies",
    "ipFamilyPolicy",
    "internalTrafficPolicy",
    "sessionAffinity",
    "type",
)


class ChildrenError(ValueError):
    """The DCD cannot be turned into children; ``reason`` is the Available condition's reason."""

    def __init__(self, message: str, reason: str = REASON_INVALID) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ChildrenInput:
    """Everything :func:`desired_children` needs; what the executor discovered in the cluster."""

    dcd: Mapping[str, Any]
    options: DynamoOptions = field(default_factory=DynamoOptions)
    #: The parent DGD's ``spec.backendFramework`` (None: no parent in cache, or none declared).
    graph_backend: str | None = None
    #: The first ServiceAccount labelled ``nvidia.com/dynamo-component-pod=true``, if any.
    service_account: str | None = None
    #: Are the LeaderWorkerSet and Volcano PodGroup APIs served? (``None``: yes; else what is missing.)
    missing_multinode_api: str | None = None
    #: Is the Istio VirtualService API served?
    virtual_services: bool = True
    #: The KaiwoConfig + AIMNamespaceConfig in force in the DCD's namespace (controllers/platform.py).
    platform: Platform = field(default_factory=Platform)
    #: The Kueue LocalQueue a new Deployment or LeaderWorkerSet goes to (controllers/queueing.py).
    queue: str | None = None
    #: The gang scheduler a multinode replica's PodGroup and pods are made for (``--gang-scheduler``).
    gang: GangBackend = VOLCANO


@dataclass(frozen=True)
class Desired:
    """The children, each with its hash annotation, in the order they are to be created."""

    children: list[Obj]
    multinode: bool
    #: The HPA owns the Deployment's replicas (autoscaling on, single-node).
    hpa_owns_replicas: bool
    #: The replica count the DCD asks for (Deployment replicas, or number of LeaderWorkerSets).
    replicas: int


# --- hashing and updates -----------------------------------------------------------------------------


def hash_of(obj: Mapping[str, Any], *, ignore_replicas: bool = False) -> str:
    """A stable hash of what we own of ``obj``: spec, labels and annotations (but not the hash)."""
    spec = dict(objects.spec(obj))
    if ignore_replicas:
        spec.pop("replicas", None)
    annotations = {k: v for k, v in objects.annotations(obj).items() if k != ANNOTATION_HASH}
    # The queue is chosen at creation and never changed (queueing.py): it is no reason to update.
    labels = {k: v for k, v in objects.labels(obj).items() if k != QUEUE_LABEL}
    owned = {"spec": spec, "labels": labels, "annotations": annotations}
    text = json.dumps(owned, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def needs_update(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Does the live child carry a different hash than the one we would write?"""
    return objects.annotations(live).get(ANNOTATION_HASH) != objects.annotations(desired).get(ANNOTATION_HASH)


def updated(live: Mapping[str, Any], desired: Mapping[str, Any], *, keep_replicas: bool = False) -> Obj:
    """The body of an update: ``live`` (resourceVersion, status, others' labels and annotations kept)
    with our spec, labels and annotations. ``keep_replicas``: the live ``spec.replicas`` stays (the
    HPA's). A Service keeps the fields the API server allocated."""
    out: Obj = copy.deepcopy(dict(live))
    old_spec = objects.spec(live)
    spec = copy.deepcopy(dict(objects.spec(desired)))
    if keep_replicas and "replicas" in old_spec:
        spec["replicas"] = old_spec["replicas"]
    if desired.get("kind") == "Service":
        for key in _SERVICE_ALLOCATED:
            if key in old_spec and key not in spec:
                spec[key] = copy.deepcopy(old_spec[key])
    out["spec"] = spec
    meta = out.setdefault("metadata", {})
    live_labels = dict(meta.get("labels") or {})
    meta["labels"] = {**live_labels, **objects.labels(desired)}
    # Kueue refuses a queue change on a workload with ready pods: the live object keeps its own.
    meta["labels"].pop(QUEUE_LABEL, None)
    if QUEUE_LABEL in live_labels:
        meta["labels"][QUEUE_LABEL] = live_labels[QUEUE_LABEL]
    meta["annotations"] = {**(meta.get("annotations") or {}), **objects.annotations(desired)}
    return out


# --- the builders ------------------------------------------------------------------------------------


def node_count(dcd: Mapping[str, Any]) -> int:
    """``spec.multinode.nodeCount``, 1 without a multinode section."""
    multi = objects.spec(dcd).get("multinode")
    if not isinstance(multi, Mapping):
        return 1
    try:
        return int(multi.get("nodeCount", 2))
    except (TypeError, ValueError):
        raise ChildrenError("spec.multinode.nodeCount: must be an integer") from None


def _replicas(dcd: Mapping[str, Any]) -> int:
    value = objects.spec(dcd).get("replicas")
    return 1 if value is None else int(value)


def _meta(dcd: Mapping[str, Any], name: str, labels: Mapping[str, str], **extra: Any) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": objects.namespace(dcd),
        "labels": dict(labels),
        "ownerReferences": [controller_owner_reference(dcd)],
    }
    meta.update(extra)
    return meta


def _child_labels(dcd: Mapping[str, Any]) -> dict[str, str]:
    """The DCD's ``spec.labels`` (the DGD's component labels arrive there) and its selector label."""
    given = objects.spec(dcd).get("labels")
    return {**(dict(given) if isinstance(given, Mapping) else {}), LABEL_SELECTOR: objects.name(dcd)}


def child_labels(dcd: Mapping[str, Any]) -> dict[str, str]:
    """What every child of ``dcd`` is labelled with (the replica budgets too)."""
    return _child_labels(dcd)


def _stamp(obj: Obj, *, ignore_replicas: bool = False) -> Obj:
    obj["metadata"].setdefault("annotations", {})[ANNOTATION_HASH] = hash_of(
        obj, ignore_replicas=ignore_replicas
    )
    return obj


def _deployment(dcd: Mapping[str, Any], template: Obj, replicas: int) -> Obj:
    name = objects.name(dcd)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(dcd, name, _child_labels(dcd)),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {LABEL_SELECTOR: name}},
            "strategy": deployment_strategy(dcd),
            "template": template,
        },
    }


def _pdb_max_unavailable(strategy: Mapping[str, Any]) -> int | str | None:
    """The budget's ``maxUnavailable`` for a Deployment ``strategy``; ``None``: no budget.

    A rolling update's ``maxUnavailable`` is what the component's owner accepts losing at once, so a
    drain may take as much. Its 0 (``RampedSlowRollout``) is safe in a rollout only because the surge
    brings a replacement up first; an eviction has no surge, and a budget of 0 would hold every
    drain (``kubectl drain``, the cluster autoscaler, node partitioning) forever, so it becomes 1.
    ``Recreate`` takes every pod down at each rollout: the owner has said the component may be down,
    and a budget would promise more during a drain than the component's own updates keep.
    """
    if strategy.get("type") == "Recreate":
        return None
    rolling = strategy.get("rollingUpdate")
    value = rolling.get("maxUnavailable") if isinstance(rolling, Mapping) else None
    if value is None or value in (0, "0", "0%"):
        return MIN_PDB_UNAVAILABLE
    return int(value) if isinstance(value, int) else str(value)


def _pdb(dcd: Mapping[str, Any]) -> Obj | None:
    """The PodDisruptionBudget of a single-node DCD: the Deployment's pods, its ``maxUnavailable``."""
    max_unavailable = _pdb_max_unavailable(deployment_strategy(dcd))
    if max_unavailable is None:
        return None
    name = objects.name(dcd)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(dcd, name, _child_labels(dcd)),
        "spec": {"selector": {"matchLabels": {LABEL_SELECTOR: name}}, "maxUnavailable": max_unavailable},
    }


def _service(dcd: Mapping[str, Any], multinode_: bool) -> Obj:
    name = objects.name(dcd)
    selector = {LABEL_SELECTOR: name}
    if multinode_:
        selector[LABEL_ROLE] = "leader"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(dcd, name, _child_labels(dcd)),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": FRONTEND_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _ingress_host(dcd: Mapping[str, Any], ingress: Mapping[str, Any], options: DynamoOptions) -> str:
    host = str(ingress.get("host") or objects.name(dcd))
    suffix = str(ingress.get("hostSuffix") or options.ingress_host_suffix or "local")
    return f"{ingress.get('hostPrefix') or ''}{host}.{suffix}"


def _ingress(dcd: Mapping[str, Any], ingress: Mapping[str, Any], cls: str, host: str) -> Obj:
    name = objects.name(dcd)
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": name, "port": {"number": FRONTEND_PORT}}},
    }
    spec: Obj = {"ingressClassName": cls, "rules": [{"host": host, "http": {"paths": [path]}}]}
    tls = ingress.get("tls")
    if isinstance(tls, Mapping) and tls.get("secretName"):
        spec["tls"] = [{"hosts": [host], "secretName": tls["secretName"]}]
    labels = {**_child_labels(dcd), **dict(ingress.get("labels") or {})}
    extra = {"annotations": dict(ingress["annotations"])} if ingress.get("annotations") else {}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _meta(dcd, name, labels, **extra),
        "spec": spec,
    }


def _virtual_service(dcd: Mapping[str, Any], gateway: str, host: str) -> Obj:
    name = objects.name(dcd)
    route = {
        "match": [{"uri": {"prefix": "/"}}],
        "route": [{"destination": {"host": name, "port": {"number": FRONTEND_PORT}}}],
    }
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": _meta(dcd, name, _child_labels(dcd)),
        "spec": {"hosts": [host], "gateways": [gateway], "http": [route]},
    }


def _exposure(inp: ChildrenInput) -> list[Obj]:
    """Ingress and/or VirtualService, as ``spec.ingress`` and the operator's flags allow."""
    dcd, options = inp.dcd, inp.options
    ingress = objects.spec(dcd).get("ingress")
    if not isinstance(ingress, Mapping) or not ingress.get("enabled"):
        return []
    host = _ingress_host(dcd, ingress, options)
    out = []
    cls = str(ingress.get("ingressControllerClassName") or options.ingress_class or "")
    if cls:
        out.append(_ingress(dcd, ingress, cls, host))
    gateway = ingress.get("virtualServiceGateway")
    if options.istio_gateway and ingress.get("useVirtualService") and gateway and inp.virtual_services:
        out.append(_virtual_service(dcd, str(gateway), host))
    return out


def _hpa(dcd: Mapping[str, Any], autoscaling: Mapping[str, Any]) -> Obj:
    name = objects.name(dcd)
    if autoscaling.get("maxReplicas") is None:
        raise ChildrenError("spec.autoscaling.maxReplicas: required when spec.autoscaling.enabled is true")
    spec: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "maxReplicas": int(autoscaling["maxReplicas"]),
        "metrics": copy.deepcopy(autoscaling.get("metrics"))
        or [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION},
                },
            }
        ],
    }
    if autoscaling.get("minReplicas") is not None:
        spec["minReplicas"] = int(autoscaling["minReplicas"])
    if autoscaling.get("behavior"):
        spec["behavior"] = copy.deepcopy(autoscaling["behavior"])  # upstream dropped it
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(dcd, name, _child_labels(dcd)),
        "spec": spec,
    }


def _main(template: Mapping[str, Any]) -> Mapping[str, Any]:
    for container in objects.spec(template).get("containers") or []:
        if container.get("name") == MAIN_CONTAINER:
            return dict(container)
    return {}


def _gpus_per_node(template: Mapping[str, Any], nodes: int) -> int:
    limits = (_main(template).get("resources") or {}).get("limits") or {}
    gpus = [v for k, v in limits.items() if k == GPU_RESOURCE or str(k).endswith("/gpu")]
    try:
        count = int(str(gpus[0])) if gpus else 0
    except ValueError:
        count = 0
    if count < 1:
        raise ChildrenError(
            f"spec.resources.limits.gpu: required for a multinode component (spec.multinode.nodeCount="
            f"{nodes}): its worker pods must have a GPU limit"
        )
    return count


def _effective_requests(template: Mapping[str, Any]) -> dict[str, Quantity]:
    """What a pod of ``template`` requests (a limit stands in for a missing request, as kube defaults)."""
    lists = []
    for container in objects.spec(template).get("containers") or []:
        resources = container.get("resources") or {}
        requests = dict(resources.get("requests") or {})
        for name, amount in (resources.get("limits") or {}).items():
            requests.setdefault(name, amount)
        lists.append(requests)
    return add_resource_lists(*lists)


def _role_template(template: Obj, role: str, index: int, group: str, gang: GangBackend) -> Obj:
    """A leader or worker template, its pods members of PodGroup ``group`` (each LeaderWorkerSet has one
    group, so the marks are static). LeaderWorkerSet v0.9's own gang-scheduling provider knows only
    Volcano; the PodGroup is ours with either scheduler."""
    out = copy.deepcopy(template)
    meta = out.setdefault("metadata", {})
    labels = {**(meta.get("labels") or {}), LABEL_ROLE: role, LABEL_INSTANCE: str(index)}
    annotations = dict(meta.get("annotations") or {})
    spec = out.setdefault("spec", {})
    spec["schedulerName"] = gang.scheduler_name
    gang.join(labels, annotations, spec, group)
    meta["labels"], meta["annotations"] = labels, annotations
    return out


def _multinode(
    inp: ChildrenInput, template: Obj, backend: str | None, nodes: int, replicas: int
) -> list[Obj]:
    if inp.missing_multinode_api is not None:
        raise ChildrenError(
            f"no multinode orchestrator available: spec.multinode.nodeCount={nodes} needs "
            f"{inp.missing_multinode_api}, which the cluster does not serve",
            REASON_NO_ORCHESTRATOR,
        )
    dcd = inp.dcd
    gpus = _gpus_per_node(template, nodes)
    leader, worker = multinode.multinode_templates(
        template, multinode.MultinodeInput(backend, nodes, gpus, inp.options.mpi_ssh_secret)
    )
    out: list[Obj] = []
    for i in range(replicas):
        name = lws_name(objects.name(dcd), i)
        labels = {**_child_labels(dcd), LABEL_INSTANCE: str(i)}
        lead = _role_template(leader, "leader", i, name, inp.gang)
        work = _role_template(worker, "worker", i, name, inp.gang)
        total = add_resource_lists(_effective_requests(lead), *[_effective_requests(work)] * (nodes - 1))
        podgroup_spec: Obj = {"minMember": nodes}
        if total:
            podgroup_spec["minResources"] = {k: total[k].canonical() for k in sorted(total)}
        out.append(inp.gang.podgroup(_meta(dcd, name, {LABEL_INSTANCE: str(i)}), podgroup_spec))
        out.append(
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "metadata": _meta(dcd, name, labels),
                "spec": {
                    "replicas": 1,
                    "startupPolicy": "LeaderCreated",
                    "leaderWorkerTemplate": {"size": nodes, "leaderTemplate": lead, "workerTemplate": work},
                },
            }
        )
    return out


def desired_children(inp: ChildrenInput) -> Desired:
    """Every child ``inp.dcd`` wants, hash-stamped; raises :class:`ChildrenError` naming the field."""
    dcd = inp.dcd
    spec = objects.spec(dcd)
    try:
        options = replace(inp.options.pod_template_options(), gpu_resource=default_gpu_resource(inp.platform))
        template, backend = build_pod_template_and_backend(
            dcd, options, graph_backend=inp.graph_backend, service_account=inp.service_account
        )
        # Before the multinode split: leader and worker templates both inherit the additions, and the
        # children's hash covers them, so a config change rolls out under each child's own strategy.
        template = decorate_template(template, inp.platform)
        if not _main(template).get("image"):
            # kube refuses a pod template whose container has no image (422): say which field, once.
            raise ChildrenError(
                "spec.extraPodSpec.mainContainer.image: required (the main container's image)"
            )
        nodes = node_count(dcd)
        replicas = _replicas(dcd)
    except ChildrenError:
        raise
    except (ValueError, TypeError) as exc:
        raise ChildrenError(str(exc)) from None
    is_multinode = nodes > 1
    children: list[Obj] = []
    autoscaling = spec.get("autoscaling")
    hpa_on = isinstance(autoscaling, Mapping) and bool(autoscaling.get("enabled")) and not is_multinode
    if is_multinode:
        # Only workers get a backend's multinode wiring; upstream gives other components its no-op backend.
        worker_backend = backend if spec.get("componentType") == "worker" else None
        try:
            children.extend(_multinode(inp, template, worker_backend, nodes, replicas))
        except ChildrenError:
            raise
        except ValueError as exc:
            raise ChildrenError(str(exc)) from None
    else:
        children.append(_stamp(_deployment(dcd, template, replicas), ignore_replicas=hpa_on))
        # Multinode replicas are gangs: a budget over single pods would not protect them; the
        # controller gives each replica its own budget (component_disruption).
        pdb = _pdb(dcd)
        if pdb is not None:
            children.append(pdb)
    if spec.get("componentType") == COMPONENT_FRONTEND:
        children.append(_service(dcd, is_multinode))
    children.extend(_exposure(inp))
    if hpa_on:
        assert isinstance(autoscaling, Mapping)
        children.append(_hpa(dcd, autoscaling))
    for child in children:
        if inp.queue and child["kind"] in ("Deployment", "LeaderWorkerSet"):
            child["metadata"]["labels"][QUEUE_LABEL] = inp.queue
        if ANNOTATION_HASH not in objects.annotations(child):
            _stamp(child)
    return Desired(children, is_multinode, hpa_on, replicas)

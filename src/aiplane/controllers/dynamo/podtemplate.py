"""The pod template of a DynamoComponentDeployment, built as a plain dict by a pure function.

Follows upstream's ``GenerateBasePodSpec`` (reference ``dynamo.md`` §2, "Pod template"), step by step
in its order, so "what overrides what" is upstream's: base container; component-type defaults;
``extraPodSpec.mainContainer``; ``envs``; top-level probes; ``resources``; ``envFromSecret``;
image-pull secrets; operator-wide env (user values win); volume mounts (compilation cache);
shared memory; the PodSpec part of ``extraPodSpec``. Backend detection runs on the merged command.

Where we decided differently from upstream (docs list them with the controller):

* Named lists (env, ports, volumeMounts, volumes, imagePullSecrets) merge by name (:mod:`.merge`).
* A probe handler given in ``mainContainer`` replaces the default's handler instead of sitting
  beside it; timings still merge. ``startupProbe`` there replaces the default wholly, as upstream.
* ``gpu`` goes to the resource named by ``gpuType`` when set, as the API field documents (the
  reference notes only the ``nvidia.com/gpu`` mapping), else ``nvidia.com/gpu``.
* Errors are ``ValueError`` naming the spec field to fix.

Nothing here reads the cluster: what upstream discovers (service account, image-pull secrets, the
parent DGD's backend) is passed in by the caller.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiplane.api.dynamo import DynamoComponentDeployment, DynamoComponentDeploymentSpec
from aiplane.controllers.dynamo import backends
from aiplane.controllers.dynamo.merge import deep_merge, merge_named, set_env

MAIN_CONTAINER: Final = "main"
LABEL_SELECTOR: Final = "nvidia.com/selector"
LABEL_COMPONENT_TYPE: Final = "nvidia.com/dynamo-component-type"
LABEL_NAMESPACE: Final = "nvidia.com/dynamo-namespace"
LABEL_GRAPH: Final = "nvidia.com/dynamo-graph-deployment-name"
ANNOTATION_DEPLOYMENT_STRATEGY: Final = "nvidia.com/deployment-strategy"
ANNOTATION_DISABLE_PULL_SECRET_DISCOVERY: Final = "nvidia.com/disable-image-pull-secret-discovery"

GPU_RESOURCE: Final = "nvidia.com/gpu"
PLANNER_SERVICE_ACCOUNT: Final = "planner-serviceaccount"
SHARED_MEMORY_VOLUME: Final = "shared-memory"
SHARED_MEMORY_PATH: Final = "/dev/shm"
SHARED_MEMORY_SIZE: Final = "8Gi"
FRONTEND_PORT: Final = 8000
SYSTEM_PORT: Final = 9090
PLANNER_METRICS_PORT: Final = 9085


@dataclass(frozen=True)
class PodTemplateOptions:
    """Operator-wide settings that reach every component pod; None leaves the env var out.

    Helm's defaults are ``nats://<release>-nats.<ns>:4222`` and ``<release>-etcd.<ns>:2379``.
    """

    nats_server: str | None = None
    etcd_endpoints: str | None = None
    model_express_url: str | None = None
    prometheus_endpoint: str | None = None
    #: The resource ``resources.*.gpu`` goes to without ``gpuType`` (the platform's rule decides it:
    #: ``controllers/platform.default_gpu_resource``; Dynamo's own default otherwise).
    gpu_resource: str = GPU_RESOURCE

    def env(self) -> list[tuple[str, str]]:
        """The env vars these options add, in upstream's order."""
        pairs = (
            ("NATS_SERVER", self.nats_server),
            ("ETCD_ENDPOINTS", self.etcd_endpoints),
            ("MODEL_EXPRESS_URL", self.model_express_url),
            ("PROMETHEUS_ENDPOINT", self.prometheus_endpoint),
        )
        return [(name, value) for name, value in pairs if value is not None]


def as_dcd(dcd: DynamoComponentDeployment | Mapping[str, Any]) -> DynamoComponentDeployment:
    """The typed DCD; the informer cache holds dicts, the tests often build models."""
    if isinstance(dcd, DynamoComponentDeployment):
        return dcd
    return DynamoComponentDeployment.model_validate(dcd)


# --- Deployment-level helpers ------------------------------------------------------------------------


def selector_labels(dcd: DynamoComponentDeployment | Mapping[str, Any]) -> dict[str, str]:
    """The Deployment's selector; also set on every pod, and never overridable by the user."""
    return {LABEL_SELECTOR: as_dcd(dcd).metadata.name or ""}


_STRATEGIES: Final[Mapping[str, dict[str, Any]]] = {
    "Recreate": {"type": "Recreate"},
    "RampedSlowRollout": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    "BestEffortControlledRollout": {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "20%"},
    },
}
_DEFAULT_STRATEGY: Final = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}


def deployment_strategy(dcd: DynamoComponentDeployment | Mapping[str, Any]) -> dict[str, Any]:
    """The Deployment ``strategy`` chosen by the ``nvidia.com/deployment-strategy`` annotation.

    ``Recreate``, ``RampedSlowRollout`` (surge 1, unavailable 0) or ``BestEffortControlledRollout``
    (surge 0, unavailable 20%); anything else, or no annotation, is a 25%/25% rolling update.
    """
    model = as_dcd(dcd)
    annotations = {**(model.metadata.annotations or {}), **(model.spec.annotations or {})}
    chosen = _STRATEGIES.get(annotations.get(ANNOTATION_DEPLOYMENT_STRATEGY, ""), _DEFAULT_STRATEGY)
    return copy.deepcopy(dict(chosen))


# --- Component-type defaults -------------------------------------------------------------------------


def _http_probe(path: str, port: str, **timing: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, **timing}


_FRONTEND_TIMING: Final = {
    "initialDelaySeconds": 60,
    "periodSeconds": 60,
    "timeoutSeconds": 30,
    "failureThreshold": 10,
}
_FRONTEND_READY_CHECK: Final = (
    "curl -s http://localhost:${DYNAMO_PORT}/health | jq -e '.status == \"healthy\"'"
)


def _frontend_defaults() -> dict[str, Any]:
    return {
        "args": ["python3 -m dynamo.frontend"],
        "ports": [{"name": "http", "containerPort": FRONTEND_PORT, "protocol": "TCP"}],
        "env": [
            {"name": "DYNAMO_PORT", "value": str(FRONTEND_PORT)},
            {"name": "DYN_HTTP_PORT", "value": str(FRONTEND_PORT)},
        ],
        "livenessProbe": _http_probe("/health", "http", **_FRONTEND_TIMING),
        "readinessProbe": {"exec": {"command": ["/bin/sh", "-c", _FRONTEND_READY_CHECK]}, **_FRONTEND_TIMING},
    }


def _worker_defaults() -> dict[str, Any]:
    return {
        "ports": [{"name": "system", "containerPort": SYSTEM_PORT, "protocol": "TCP"}],
        "env": [
            {"name": "DYN_SYSTEM_ENABLED", "value": "true"},
            {"name": "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", "value": '["generate"]'},
            {"name": "DYN_SYSTEM_PORT", "value": str(SYSTEM_PORT)},
        ],
        "livenessProbe": _http_probe(
            "/live", "system", periodSeconds=5, timeoutSeconds=30, failureThreshold=1
        ),
        "readinessProbe": _http_probe(
            "/health", "system", periodSeconds=10, timeoutSeconds=30, failureThreshold=60
        ),
        # 720 x 10 s = 2 h: large models take that long to load.
        "startupProbe": _http_probe(
            "/live", "system", periodSeconds=10, timeoutSeconds=5, failureThreshold=720
        ),
    }


def _planner_defaults() -> dict[str, Any]:
    return {
        "ports": [{"name": "metrics", "containerPort": PLANNER_METRICS_PORT, "protocol": "TCP"}],
        "env": [{"name": "PLANNER_PROMETHEUS_PORT", "value": str(PLANNER_METRICS_PORT)}],
    }


_DEFAULTS: Final = {"frontend": _frontend_defaults, "worker": _worker_defaults, "planner": _planner_defaults}


def component_defaults(component_type: str | None) -> dict[str, Any]:
    """The main-container fields a component type starts with (``default`` and others: none)."""
    build = _DEFAULTS.get(component_type or "")
    return build() if build else {}


# --- The builder -------------------------------------------------------------------------------------


def parent_graph_name(dcd: DynamoComponentDeployment) -> str | None:
    """The owning DGD: its ownerReference, else the graph label the DGD controller sets."""
    refs: Any = (dcd.metadata.model_extra or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("kind") == "DynamoGraphDeployment" and ref.get("name"):
            return str(ref["name"])
    return (dcd.metadata.labels or {}).get(LABEL_GRAPH)


def dynamo_namespace(dcd: DynamoComponentDeployment) -> str:
    """``spec.dynamoNamespace``, else ``<namespace>-<parent DGD or DCD name>`` as the DGD sets it."""
    if dcd.spec.dynamoNamespace:
        return dcd.spec.dynamoNamespace
    owner = parent_graph_name(dcd) or dcd.metadata.name or ""
    return f"{dcd.metadata.namespace or 'default'}-{owner}"


def _base_container(dcd: DynamoComponentDeployment) -> dict[str, Any]:
    env = [
        {"name": "DYN_NAMESPACE", "value": dynamo_namespace(dcd)},
        {"name": "DYN_PARENT_DGD_K8S_NAME", "value": parent_graph_name(dcd) or ""},
        {"name": "DYN_PARENT_DGD_K8S_NAMESPACE", "value": dcd.metadata.namespace or ""},
    ]
    return {"name": MAIN_CONTAINER, "command": ["/bin/sh", "-c"], "env": env}


def _resource_list(item: Mapping[str, Any] | None, gpu_resource: str = GPU_RESOURCE) -> dict[str, str]:
    if not item:
        return {}
    out = {key: str(item[key]) for key in ("cpu", "memory") if item.get(key) is not None}
    if item.get("gpu") is not None:
        out[str(item.get("gpuType") or gpu_resource)] = str(item["gpu"])
    out.update({str(k): str(v) for k, v in (item.get("custom") or {}).items()})
    return out


def _apply_resources(
    container: dict[str, Any], spec: DynamoComponentDeploymentSpec, gpu_resource: str = GPU_RESOURCE
) -> None:
    if spec.resources is None:
        return
    given = spec.resources.to_dict()
    resources: dict[str, Any] = container.setdefault("resources", {})
    for part in ("requests", "limits"):
        values = _resource_list(given.get(part), gpu_resource)
        if values:
            resources[part] = {**resources.get(part, {}), **values}
    if given.get("claims"):
        resources["claims"] = merge_named(resources.get("claims", []), given["claims"])


def _apply_env_from_secret(container: dict[str, Any], secret: str | None) -> None:
    if not secret:
        return
    env_from: list[dict[str, Any]] = container.setdefault("envFrom", [])
    entry = {"secretRef": {"name": secret}}
    if entry not in env_from:
        env_from.append(entry)


def _apply_volume_mounts(
    pod: dict[str, Any], container: dict[str, Any], spec: DynamoComponentDeploymentSpec, backend: str | None
) -> None:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for i, mount in enumerate(spec.volumeMounts or []):
        field = f"spec.volumeMounts[{i}].mountPoint"
        if mount.useAsCompilationCache:
            path = backends.compilation_cache_mount(backend, mount.mountPoint, field)
            env_name = backends.COMPILATION_CACHE_ENV.get(backend or "")
            if env_name:
                set_env(container, env_name, path, override=False)
        elif mount.mountPoint:
            path = mount.mountPoint
        else:
            raise ValueError(f"{field}: required unless useAsCompilationCache is true")
        volumes.append({"name": mount.name, "persistentVolumeClaim": {"claimName": mount.name}})
        mounts.append({"name": mount.name, "mountPath": path})
    if volumes:
        pod["volumes"] = merge_named(pod.get("volumes", []), volumes)
        container["volumeMounts"] = merge_named(container.get("volumeMounts", []), mounts)


def _apply_shared_memory(
    pod: dict[str, Any], container: dict[str, Any], spec: DynamoComponentDeploymentSpec
) -> None:
    shm = spec.sharedMemory
    if shm is not None and shm.disabled:
        return
    size = str(shm.size) if shm is not None and shm.size is not None else SHARED_MEMORY_SIZE
    volume = {"name": SHARED_MEMORY_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}
    pod["volumes"] = merge_named(pod.get("volumes", []), [volume])
    mount = {"name": SHARED_MEMORY_VOLUME, "mountPath": SHARED_MEMORY_PATH}
    container["volumeMounts"] = merge_named(container.get("volumeMounts", []), [mount])


def _apply_extra_pod_spec(pod: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """The PodSpec part of ``extraPodSpec``: extra containers are sidecars after ``main``."""
    rest = {k: v for k, v in extra.items() if k not in ("mainContainer", "containers")}
    merged = deep_merge(pod, rest)
    sidecars = [c for c in extra.get("containers") or [] if c.get("name") != MAIN_CONTAINER]
    if sidecars:
        merged["containers"] = merge_named(merged["containers"], sidecars)
    return merged


def _main_container(
    dcd: DynamoComponentDeployment, options: PodTemplateOptions, graph_backend: str | None
) -> tuple[dict[str, Any], str | None]:
    spec = dcd.spec
    extra = spec.extraPodSpec or {}
    container = deep_merge(_base_container(dcd), component_defaults(spec.componentType))
    main_override = dict(extra.get("mainContainer") or {})
    startup = main_override.pop("startupProbe", None)
    container = deep_merge(container, main_override)
    container["name"] = MAIN_CONTAINER
    if startup is not None:
        container["startupProbe"] = copy.deepcopy(startup)
    if spec.envs:
        container["env"] = merge_named(container.get("env", []), spec.envs)
    for probe in ("livenessProbe", "readinessProbe"):
        given = getattr(spec, probe)
        if given is not None:
            container[probe] = copy.deepcopy(given)
    _apply_resources(container, spec, options.gpu_resource)
    _apply_env_from_secret(container, spec.envFromSecret)
    for name, value in options.env():
        set_env(container, name, value, override=False)
    backend = _backend(dcd, container, graph_backend)
    return container, backend


def _backend(
    dcd: DynamoComponentDeployment, container: Mapping[str, Any], graph_backend: str | None
) -> str | None:
    declared_field = "spec.backendFramework"
    declared: str | None = dcd.spec.backendFramework
    if declared is None and graph_backend is not None:
        declared, declared_field = graph_backend, "DynamoGraphDeployment spec.backendFramework"
    if dcd.spec.componentType != "worker":
        return declared
    return backends.worker_backend(
        container.get("command") or [], container.get("args") or [], declared, declared_field
    )


def _pod_metadata(dcd: DynamoComponentDeployment) -> dict[str, Any]:
    spec = dcd.spec
    extra = spec.extraPodMetadata
    labels = {**(spec.labels or {}), **((extra.labels if extra else None) or {})}
    labels[LABEL_NAMESPACE] = dynamo_namespace(dcd)
    if spec.componentType:
        labels[LABEL_COMPONENT_TYPE] = spec.componentType
    labels.update(selector_labels(dcd))
    annotations = {**(spec.annotations or {}), **((extra.annotations if extra else None) or {})}
    annotations.pop(ANNOTATION_DEPLOYMENT_STRATEGY, None)
    metadata: dict[str, Any] = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def build_pod_template(
    dcd: DynamoComponentDeployment | Mapping[str, Any],
    options: PodTemplateOptions,
    *,
    graph_backend: str | None = None,
    service_account: str | None = None,
    image_pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The Deployment's ``spec.template`` for ``dcd``: ``{"metadata": …, "spec": PodSpec}``.

    ``graph_backend`` is the parent DGD's ``backendFramework`` (the fallback when the DCD has none);
    ``service_account`` and ``image_pull_secrets`` are what the caller discovered in the namespace
    (planners always get ``planner-serviceaccount``). Raises ValueError naming the field to fix.
    """
    template, _ = build_pod_template_and_backend(
        dcd,
        options,
        graph_backend=graph_backend,
        service_account=service_account,
        image_pull_secrets=image_pull_secrets,
    )
    return template


def build_pod_template_and_backend(
    dcd: DynamoComponentDeployment | Mapping[str, Any],
    options: PodTemplateOptions,
    *,
    graph_backend: str | None = None,
    service_account: str | None = None,
    image_pull_secrets: Sequence[str] = (),
) -> tuple[dict[str, Any], str | None]:
    """:func:`build_pod_template` and the backend it settled on (``vllm``/``sglang``/``trtllm``/None).

    The multinode injection needs the backend that the template was built for (detected from a
    worker's command, else declared); returning both keeps the two from ever disagreeing.
    """
    model = as_dcd(dcd)
    spec = model.spec
    container, backend = _main_container(model, options, graph_backend)
    pod: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 60,
    }
    account = PLANNER_SERVICE_ACCOUNT if spec.componentType == "planner" else service_account
    if account:
        pod["serviceAccountName"] = account
    annotations = {**(model.metadata.annotations or {}), **(spec.annotations or {})}
    if image_pull_secrets and ANNOTATION_DISABLE_PULL_SECRET_DISCOVERY not in annotations:
        pod["imagePullSecrets"] = [{"name": name} for name in image_pull_secrets]
    _apply_volume_mounts(pod, container, spec, backend)
    _apply_shared_memory(pod, container, spec)
    pod = _apply_extra_pod_spec(pod, spec.extraPodSpec or {})
    return {"metadata": _pod_metadata(model), "spec": pod}, backend

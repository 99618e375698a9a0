"""What the platform configuration does to the pods our workload controllers create (pure, no I/O).

The ModelInfer and DynamoComponentDeployment controllers read the cluster's KaiwoConfig (``kaiwo``)
and their namespace's effective AIMNamespaceConfig from informers, build a :class:`Platform`, and pass
every pod template they build through :func:`decorate_template`. The decorated template is what
their rollout machinery hashes (a ModelInfer's revision, a Deployment's ``last-applied-hash``), so a
config change reaches running pods through the workload's normal rollout and never by a side path.

Rules (docs/kaiwo.md, "AIMNamespaceConfig and what workloads get", is the user-facing statement):

* **Credentials are references.** Every variable comes from ``valueFrom.secretKeyRef`` (or, for GCS,
  a Secret volume); nothing here ever sees a Secret's value. ``Platform.secret_keys`` holds only the
  data *keys* of the namespace's Secrets (the informer cache redacts values).
* **The workload's own variables win.** A name the container sets in ``env``, or brings through an
  ``envFrom`` Secret/ConfigMap whose keys are known, is never injected: Kubernetes gives ``env``
  precedence over ``envFrom``, so injecting would silently override the workload's choice.
* Injected variables are appended after the container's own ``env`` (a workload's ``$(VAR)``
  expansions never depend on them).
* ``schedulerName``: see :func:`scheduler_name`; GPU resource default: :func:`default_gpu_resource`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiplane.api.config import AIMNamespaceConfigSpec, KaiwoConfigSpec, SecretValueReference
from aiplane.apimachinery import objects

__all__ = [
    "DEFAULT_NAMESPACE_CONFIG",
    "GCS_CREDENTIALS_FILE",
    "GCS_MOUNT_PATH",
    "GCS_VOLUME",
    "UPSTREAM_GPU_RESOURCE",
    "UPSTREAM_SCHEDULER_DEFAULT",
    "CredentialEnv",
    "Platform",
    "SecretUse",
    "credential_env",
    "decorate_pod_spec",
    "decorate_template",
    "default_gpu_resource",
    "effective_namespace_config",
    "is_gpu_resource",
    "requests_gpu",
    "scheduler_name",
    "secret_uses",
]

Obj = dict[str, Any]

#: Dynamo's own default GPU resource for a component without ``gpuType``.
UPSTREAM_GPU_RESOURCE: Final = "nvidia.com/gpu"
#: The CRD default of ``scheduling.kubeSchedulerName``: a scheduler most clusters do not run.
UPSTREAM_SCHEDULER_DEFAULT: Final = "kaiwo-scheduler"
GCS_VOLUME: Final = "aimns-gcs-credentials"
GCS_MOUNT_PATH: Final = "/var/secrets/aimns-gcs"
GCS_CREDENTIALS_FILE: Final = "credentials.json"
ENV_GCS: Final = "GOOGLE_APPLICATION_CREDENTIALS"
ENV_HF_HOME: Final = "HF_HOME"


@dataclass(frozen=True)
class Platform:
    """The configuration in force for one namespace, as the controllers observed it."""

    #: The ``kaiwo`` KaiwoConfig's spec (None: no KaiwoConfig, nothing of it applies).
    kaiwo: KaiwoConfigSpec | None = None
    #: The namespace's effective AIMNamespaceConfig spec (None: none applies).
    namespace_config: AIMNamespaceConfigSpec | None = None
    #: Resource names some node advertises in ``status.allocatable`` with a positive amount.
    advertised_resources: frozenset[str] = frozenset()
    #: Data keys of the namespace's Secrets, by Secret name (never values).
    secret_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Data keys of the namespace's ConfigMaps, by name (to see what ``envFrom`` brings).
    configmap_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Does the cluster serve Kueue (its Workload API)? Workloads are queued only then (controllers/queueing.py).
    kueue_served: bool = False
    #: The Kueue ClusterQueues that exist: a workload is queued only when the KaiwoConfig's is one of them.
    cluster_queues: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CredentialEnv:
    """One injected variable: a Secret reference, or a plain (non-secret) value."""

    name: str
    secret: str | None = None
    key: str | None = None
    value: str | None = None

    def to_env(self) -> Obj:
        if self.secret is not None:
            return {"name": self.name, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": self.key}}}
        return {"name": self.name, "value": self.value or ""}


@dataclass(frozen=True)
class SecretUse:
    """A Secret key the config refers to, with the field path that names it (for status and Events)."""

    path: str
    secret: str
    key: str | None


def _ref(ref: SecretValueReference | None) -> tuple[str, str] | None:
    if ref is None or not ref.secretName or not ref.secretKey:
        return None
    return ref.secretName, ref.secretKey


def secret_uses(cfg: AIMNamespaceConfigSpec | None) -> list[SecretUse]:
    """Every Secret (and key) the config refers to, in field order; pull secrets have no key."""
    if cfg is None:
        return []
    out: list[SecretUse] = []

    def add(path: str, ref: SecretValueReference | None) -> None:
        if ref is not None and ref.secretName:
            out.append(SecretUse(path, ref.secretName, ref.secretKey))

    creds = cfg.credentials
    if creds is not None:
        add("spec.credentials.huggingFaceToken", creds.huggingFaceToken)
        for i, s3 in enumerate(creds.s3 or []):
            add(f"spec.credentials.s3[{i}].accessKeyId", s3.accessKeyId)
            add(f"spec.credentials.s3[{i}].secretAccessKey", s3.secretAccessKey)
        for i, gcs in enumerate(creds.gcs or []):
            add(f"spec.credentials.gcs[{i}].applicationCredentials", gcs.applicationCredentials)
        for i, az in enumerate(creds.azureBlob or []):
            add(f"spec.credentials.azureBlob[{i}].connectionString", az.connectionString)
    if cfg.images is not None:
        for i, name in enumerate(cfg.images.imagePullSecrets or []):
            out.append(SecretUse(f"spec.images.imagePullSecrets[{i}]", name, None))
    return out


def credential_env(cfg: AIMNamespaceConfigSpec | None) -> list[CredentialEnv]:
    """The variables the config's credentials become (GCS's path variable included), in a fixed order.

    Only the first S3/GCS/Azure entry is used (one set of process-wide variables cannot name two).
    A reference without both ``secretName`` and ``secretKey`` injects nothing (the status says so).
    """
    creds = cfg.credentials if cfg is not None else None
    if creds is None:
        return []
    out: list[CredentialEnv] = []
    hf = _ref(creds.huggingFaceToken)
    if hf:
        out += [CredentialEnv("HF_TOKEN", *hf), CredentialEnv("HUGGING_FACE_HUB_TOKEN", *hf)]
    if creds.s3:
        s3 = creds.s3[0]
        for name, ref in (
            ("AWS_ACCESS_KEY_ID", s3.accessKeyId),
            ("AWS_SECRET_ACCESS_KEY", s3.secretAccessKey),
        ):
            found = _ref(ref)
            if found:
                out.append(CredentialEnv(name, *found))
        if s3.endpointUrl:
            out.append(CredentialEnv("AWS_ENDPOINT_URL", value=s3.endpointUrl))
    if creds.gcs and _ref(creds.gcs[0].applicationCredentials):
        out.append(CredentialEnv(ENV_GCS, value=f"{GCS_MOUNT_PATH}/{GCS_CREDENTIALS_FILE}"))
    if creds.azureBlob:
        az = _ref(creds.azureBlob[0].connectionString)
        if az:
            out.append(CredentialEnv("AZURE_STORAGE_CONNECTION_STRING", *az))
    return out


#: The AIMNamespaceConfig that applies when a namespace holds several.
DEFAULT_NAMESPACE_CONFIG: Final = "default"


def effective_namespace_config(
    configs: Sequence[Mapping[str, Any]],
) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """Which of a namespace's AIMNamespaceConfigs applies, and which are ignored.

    One: that one. Several: the one named ``default``; without one, none applies (picking by age or
    name would let an unrelated create silently switch every workload's credentials) and all are
    ignored. Deleting configs are not candidates.
    """
    live = sorted((c for c in configs if not objects.is_deleting(c)), key=objects.name)
    if len(live) <= 1:
        return (live[0] if live else None), []
    chosen = next((c for c in live if objects.name(c) == DEFAULT_NAMESPACE_CONFIG), None)
    return chosen, [c for c in live if c is not chosen]


# --- KaiwoConfig rules -------------------------------------------------------------------------------


def default_gpu_resource(platform: Platform) -> str:
    """The GPU resource a generated workload requests when nothing more specific (``gpuType``) decides.

    ``nodes.defaultGpuResourceKey`` when some node advertises it; otherwise Dynamo's own default
    ``nvidia.com/gpu``. So the defaulted KaiwoConfig (``amd.com/gpu``) never moves a workload on an
    NVIDIA-only cluster onto a resource no node has, and no KaiwoConfig means upstream's behaviour.
    """
    if platform.kaiwo is not None:
        key = platform.kaiwo.nodes.defaultGpuResourceKey
        if key and key in platform.advertised_resources:
            return key
    return UPSTREAM_GPU_RESOURCE


def scheduler_name(platform: Platform) -> str | None:
    """The ``schedulerName`` for pods that name none, or None to leave the cluster default.

    ``scheduling.kubeSchedulerName`` applies when it is set to anything but its CRD default
    ``kaiwo-scheduler``: the default value cannot tell "chosen" from "left alone", and most clusters
    do not run that scheduler, so honouring it would leave every new pod Pending. A workload that
    wants ``kaiwo-scheduler`` names it itself (ModelInfer ``spec.schedulerName``, DCD ``extraPodSpec``).
    """
    if platform.kaiwo is None:
        return None
    name = platform.kaiwo.scheduling.kubeSchedulerName
    return name if name and name != UPSTREAM_SCHEDULER_DEFAULT else None


def is_gpu_resource(name: str) -> bool:
    """``amd.com/*`` and ``nvidia.com/*`` extended resources: whole GPUs, partitions, MIG slices."""
    return name.startswith(("amd.com/", "nvidia.com/"))


def requests_gpu(spec: Mapping[str, Any]) -> bool:
    """Does any container (or init container) of the pod spec request or limit a GPU resource?"""
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            resources = c.get("resources") if isinstance(c, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for part in ("requests", "limits"):
                amounts = resources.get(part)
                if isinstance(amounts, Mapping) and any(is_gpu_resource(str(r)) for r in amounts):
                    return True
    return False


# --- decoration --------------------------------------------------------------------------------------


def _own_env_names(container: Mapping[str, Any], platform: Platform) -> set[str]:
    names = {str(e.get("name")) for e in container.get("env") or [] if isinstance(e, Mapping)}
    for source in container.get("envFrom") or []:
        if not isinstance(source, Mapping):
            continue
        prefix = str(source.get("prefix") or "")
        for ref_key, known in (
            ("secretRef", platform.secret_keys),
            ("configMapRef", platform.configmap_keys),
        ):
            ref = source.get(ref_key)
            if isinstance(ref, Mapping):
                names.update(prefix + k for k in known.get(str(ref.get("name")), frozenset()))
    return names


def _decorate_container(
    container: Mapping[str, Any], wanted: Sequence[CredentialEnv], platform: Platform
) -> Obj:
    out = dict(container)
    own = _own_env_names(container, platform)
    added = [v.to_env() for v in wanted if v.name not in own]
    if added:
        out["env"] = list(container.get("env") or []) + added
    if any(v.name == ENV_GCS for v in wanted) and ENV_GCS not in own:
        mounts = list(container.get("volumeMounts") or [])
        if not any(isinstance(m, Mapping) and m.get("name") == GCS_VOLUME for m in mounts):
            mounts.append({"name": GCS_VOLUME, "mountPath": GCS_MOUNT_PATH, "readOnly": True})
        out["volumeMounts"] = mounts
    return out


def _wanted_env(platform: Platform) -> list[CredentialEnv]:
    wanted = credential_env(platform.namespace_config)
    if platform.kaiwo is not None:
        hf_home = platform.kaiwo.effective_storage().defaultHfMountPath
        if hf_home:
            wanted.append(CredentialEnv(ENV_HF_HOME, value=hf_home))
    return wanted


def _gcs_volume(cfg: AIMNamespaceConfigSpec | None) -> Obj | None:
    creds = cfg.credentials if cfg is not None else None
    found = _ref(creds.gcs[0].applicationCredentials) if creds is not None and creds.gcs else None
    if found is None:
        return None
    secret, key = found
    return {
        "name": GCS_VOLUME,
        "secret": {"secretName": secret, "items": [{"key": key, "path": GCS_CREDENTIALS_FILE}]},
    }


def _pull_secrets(spec: Obj, names: Iterable[str]) -> None:
    current = list(spec.get("imagePullSecrets") or [])
    have = {s.get("name") for s in current if isinstance(s, Mapping)}
    added = [{"name": n} for n in names if n and n not in have]
    if added:
        spec["imagePullSecrets"] = current + added


def _tolerate(spec: Obj, key: str) -> None:
    tolerations = list(spec.get("tolerations") or [])
    for t in tolerations:
        if not isinstance(t, Mapping):
            continue
        exists_all = t.get("operator") == "Exists" and not t.get("key")
        if (t.get("key") == key or exists_all) and t.get("effect") in (None, "", "NoSchedule"):
            return
    tolerations.append({"key": key, "operator": "Exists", "effect": "NoSchedule"})
    spec["tolerations"] = tolerations


def decorate_pod_spec(spec: Mapping[str, Any], platform: Platform) -> Obj:
    """A copy of the PodSpec with the platform's additions; ``spec`` is not modified.

    Idempotent: decorating a decorated spec changes nothing (a hypothesis test holds us to it).
    """
    out: Obj = copy.deepcopy(dict(spec))
    wanted = _wanted_env(platform)
    if wanted:
        for key in ("initContainers", "containers"):
            if isinstance(out.get(key), list):
                out[key] = [
                    _decorate_container(c, wanted, platform) if isinstance(c, Mapping) else c
                    for c in out[key]
                ]
    gcs = _gcs_volume(platform.namespace_config)
    if gcs is not None and any(
        m.get("name") == GCS_VOLUME
        for c in out.get("containers") or []
        for m in (c.get("volumeMounts") or [])
        if isinstance(m, Mapping)
    ):
        volumes = [
            v
            for v in out.get("volumes") or []
            if not (isinstance(v, Mapping) and v.get("name") == GCS_VOLUME)
        ]
        out["volumes"] = [*volumes, gcs]
    cfg = platform.namespace_config
    if cfg is not None and cfg.images is not None:
        _pull_secrets(out, cfg.images.imagePullSecrets or [])
    kaiwo = platform.kaiwo
    if (
        kaiwo is not None
        and kaiwo.nodes.addTaintsToGpuNodes
        and kaiwo.nodes.defaultGpuTaintKey
        and requests_gpu(out)
    ):
        _tolerate(out, kaiwo.nodes.defaultGpuTaintKey)
    scheduler = scheduler_name(platform)
    if scheduler and not out.get("schedulerName"):
        out["schedulerName"] = scheduler
    return out


def decorate_template(template: Mapping[str, Any], platform: Platform) -> Obj:
    """A copy of a pod template (``{metadata, spec}``) with :func:`decorate_pod_spec` applied."""
    out: Obj = copy.deepcopy(dict(template))
    spec = template.get("spec")
    if isinstance(spec, Mapping):
        out["spec"] = decorate_pod_spec(spec, platform)
    return out

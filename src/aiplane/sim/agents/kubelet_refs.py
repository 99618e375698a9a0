"""What a kubelet needs to exist before it can start a pod's containers: its Secrets and ConfigMaps.

Why: a real kubelet does not start a container whose ``env``/``envFrom`` names a Secret or ConfigMap
(or a key in one) that is missing — the container waits in ``CreateContainerConfigError`` with
``secret "x" not found`` — and does not start a pod whose ``secret``/``configMap`` volume source is
missing (``ContainerCreating``, ``FailedMount`` Events). It retries until the object appears. Examples
such as ``examples/dynamo-vllm-disagg.yaml`` reference a token Secret the user must create; without
this check the embedded cluster would run such pods as if the Secret were there.

Pure functions over the pod and a lookup, so the rules are testable without the agent. Messages are
the kubelet's (``pkg/kubelet/kubelet_pods.go`` ``makeEnvironmentVariables``, volume manager).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Missing", "missing_for_containers", "missing_for_volumes", "referenced_names"]

#: (kind, namespace, name) -> the object's ``data`` keys (with ``binaryData``/``stringData``), or None if absent.
Lookup = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Missing:
    """Why a container (or, for volumes, the pod) cannot start yet."""

    container: str | None
    message: str


def _keys(obj: Mapping[str, Any]) -> set[str]:
    return {*(obj.get("data") or {}), *(obj.get("binaryData") or {})}


def _env_refs(container: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None, bool]]:
    """(kind, name, key or None for envFrom, optional) for every Secret/ConfigMap reference."""
    for source in container.get("envFrom") or []:
        for field, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
            ref = source.get(field)
            if isinstance(ref, Mapping) and ref.get("name"):
                yield kind, str(ref["name"]), None, bool(ref.get("optional"))
    for env in container.get("env") or []:
        value_from = env.get("valueFrom") or {}
        for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            ref = value_from.get(field)
            if isinstance(ref, Mapping) and ref.get("name"):
                yield kind, str(ref["name"]), str(ref.get("key") or ""), bool(ref.get("optional"))


def missing_for_containers(pod: Mapping[str, Any], lookup: Lookup) -> list[Missing]:
    """The first unmet env reference of each container (init containers first), as the kubelet reports
    it in ``state.waiting.message``."""
    spec = pod.get("spec") or {}
    out: list[Missing] = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for kind, name, key, optional in _env_refs(container):
            if optional:
                continue
            obj = lookup(kind, name)
            noun = "secret" if kind == "Secret" else "configmap"
            if obj is None:
                out.append(Missing(str(container.get("name")), f'{noun} "{name}" not found'))
                break
            if key is not None and key not in _keys(obj):
                out.append(
                    Missing(
                        str(container.get("name")), f"couldn't find key {key} in {kind} {_ns(pod)}/{name}"
                    )
                )
                break
    return out


def missing_for_volumes(pod: Mapping[str, Any], lookup: Lookup) -> list[Missing]:
    """Secret and ConfigMap volumes whose object is missing: the pod cannot be set up at all."""
    out: list[Missing] = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        for field, kind, name_key in (("secret", "Secret", "secretName"), ("configMap", "ConfigMap", "name")):
            source = volume.get(field)
            if not isinstance(source, Mapping) or source.get("optional"):
                continue
            name = str(source.get(name_key) or "")
            if name and lookup(kind, name) is None:
                noun = "secret" if kind == "Secret" else "configmap"
                out.append(
                    Missing(
                        None,
                        f'MountVolume.SetUp failed for volume "{volume.get("name")}" : {noun} "{name}" not found',
                    )
                )
    return out


def referenced_names(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
    """Every (kind, name) the pod's containers and volumes reference: what to wait for."""
    spec = pod.get("spec") or {}
    names = {
        (kind, name)
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for kind, name, _, _ in _env_refs(container)
    }
    for volume in spec.get("volumes") or []:
        if isinstance(volume.get("secret"), Mapping):
            names.add(("Secret", str(volume["secret"].get("secretName") or "")))
        if isinstance(volume.get("configMap"), Mapping):
            names.add(("ConfigMap", str(volume["configMap"].get("name") or "")))
    return names


def _ns(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "")

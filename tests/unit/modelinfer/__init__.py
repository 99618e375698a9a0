"""Unit tests of the ModelInfer controller's pure modules, and small builders of ModelInfer dicts.

The builders return what the controller gets from the informer cache: plain dicts with the CRD
defaults applied (``replicas``, ``recoveryPolicy``, role ``replicas``) and a ``metadata.uid``.
"""

from __future__ import annotations

from typing import Any


def container(
    name: str = "main",
    *,
    image: str = "busybox:1.36",
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    if resources:
        c["resources"] = resources
    if env is not None:
        c["env"] = env
    return c


def template(
    *containers: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    t: dict[str, Any] = {"spec": {"containers": list(containers) or [container()], **spec}}
    if labels is not None:
        t["metadata"] = {"labels": labels}
    return t


def role(
    name: str,
    replicas: int = 1,
    workers: int = 0,
    *,
    entry: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A role; with ``workers > 0`` and no ``worker`` template, a default worker template."""
    r: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "workerReplicas": workers,
        "entryTemplate": entry or template(),
    }
    if worker is not None:
        r["workerTemplate"] = worker
    elif workers > 0:
        r["workerTemplate"] = template(container("worker"))
    return r


def model_infer(
    name: str = "mi",
    *,
    namespace: str = "default",
    replicas: int = 2,
    roles: list[dict[str, Any]] | None = None,
    gang: dict[str, Any] | None = None,
    uid: str = "uid-1",
    **spec: Any,
) -> dict[str, Any]:
    template_: dict[str, Any] = {
        "restartGracePeriodSeconds": 0,
        "roles": roles if roles is not None else [role("prefill", 1, 1), role("decode", 2, 1)],
    }
    if gang is not None:
        template_["gangSchedule"] = gang
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1},
        "spec": {"replicas": replicas, "recoveryPolicy": "RoleRecreate", "template": template_, **spec},
    }

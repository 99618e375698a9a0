"""The scale subresource (autoscaling/v1 Scale), for built-in workloads and CRDs that declare one.

``kubectl scale``, HPA and KEDA read and write replicas here without knowing the kind's schema; for CRDs
the paths come from the CRD's ``subresources.scale``.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.mergepatch import merge_patch
from aiplane.apimachinery.values import json_copy
from aiplane.sim.apiserver import errors, gojson
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api, WriteOptions

_BUILTIN_PATHS = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}


def _paths(rt: ResourceType) -> dict[str, str]:
    return rt.scale_paths or _BUILTIN_PATHS


def _read(obj: dict[str, Any], path: str | None) -> Any:
    node: Any = obj
    for part in (path or "").strip(".").split("."):
        if not part:
            return None
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _write(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _selector_string(selector: Any) -> str:
    if isinstance(selector, str):
        return selector
    if not isinstance(selector, dict):
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            terms.append(f"{expr['key']} in ({values})")
        elif op == "NotIn":
            terms.append(f"{expr['key']} notin ({values})")
        elif op == "Exists":
            terms.append(expr["key"])
        elif op == "DoesNotExist":
            terms.append(f"!{expr['key']}")
    return ",".join(terms)


def scale_of(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    paths = _paths(rt)
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": int(_read(obj, paths["statusReplicasPath"]) or 0)}
    if rt.scale_paths is not None:
        selector = _read(obj, rt.scale_paths.get("labelSelectorPath"))
    else:
        selector = _selector_string(_read(obj, ".spec.selector"))
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(_read(obj, paths["specReplicasPath"]) or 0)},
        "status": status,
    }


def _decode(raw: bytes) -> Any:
    try:
        return gojson.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"error decoding Scale: {exc}") from exc


def _replicas(body: Any, name: str) -> int:
    replicas = (body.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(
            "Scale",
            "autoscaling",
            name,
            [FieldError("spec.replicas", fe.INVALID, replicas, "must be greater than or equal to 0")],
        )
    return replicas


def handle(
    api: Api,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    verb: str,
    *,
    content_type: str = "application/json",
    body: bytes = b"",
    field_manager: str | None = None,
) -> dict[str, Any]:
    """GET, PUT or PATCH ``…/{name}/scale``: the Scale after the request."""
    current = api.get(rt, namespace, name)
    if verb == "get":
        return scale_of(rt, current)
    wanted = _decode(body)
    if verb == "patch":
        if content_type == "application/json-patch+json":
            wanted = jsonpatch.apply_patch(scale_of(rt, current), wanted)
        else:
            wanted = merge_patch(scale_of(rt, current), wanted) if isinstance(wanted, dict) else wanted
    elif verb != "update":
        raise errors.method_not_allowed()
    replicas = _replicas(wanted, name)
    rv = (wanted.get("metadata") or {}).get("resourceVersion")
    if rv and rv != current["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.plural, rt.group, name, errors.MODIFIED)
    updated = json_copy(current)
    _write(updated, _paths(rt)["specReplicasPath"], replicas)
    opts = WriteOptions(field_manager=field_manager)
    result = api.update(rt, namespace, name, updated, opts, operation="Update")
    return scale_of(rt, result.obj)

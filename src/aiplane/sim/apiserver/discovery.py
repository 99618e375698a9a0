"""Discovery: ``/version``, ``/api``, ``/apis`` and the per-group-version resource lists kubectl reads."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from aiplane.sim.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from aiplane.sim.apiserver.server import ApiServer

VERSION = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36",
    "gitVersion": "v1.37.0-aiplane-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.26.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _json(body: Any) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _resources(server: ApiServer, group: str, version: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    types = sorted(
        (rt for rt in server.registry.all() if rt.group == group and rt.version == version),
        key=lambda r: r.plural,
    )
    for rt in types:
        out.append(_resource_entry(rt))
        for sub in sorted(rt.subresources):
            out.append(_subresource_entry(rt, sub))
    return out


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
        "storageVersionHash": hashlib.sha256(
            f"{rt.group}/{rt.storage_version}/{rt.kind}".encode()
        ).hexdigest()[:11],
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def _subresource_entry(rt: ResourceType, sub: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
    if sub == "scale":
        entry.update(group="autoscaling", version="v1", kind="Scale", verbs=["get", "patch", "update"])
    elif sub == "eviction":
        entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
    elif sub == "binding":
        entry.update(kind="Binding", verbs=["create"])
    elif sub == "finalize":
        entry.update(kind=rt.kind, verbs=["update"])
    else:
        entry.update(kind=rt.kind, verbs=["get", "patch", "update"])
    return entry


def _group(server: ApiServer, group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


async def handle(server: ApiServer, request: web.Request, parts: list[str]) -> web.StreamResponse | None:
    """Answer discovery and health paths; ``None`` for anything else (a resource path)."""
    if request.method != "GET":
        return None
    if not parts:
        paths = [
            "/api",
            "/api/v1",
            "/apis",
            "/healthz",
            "/livez",
            "/openapi/v2",
            "/openapi/v3",
            "/readyz",
            "/version",
        ]
        for group, versions in server.registry.groups().items():
            if group:
                paths.append(f"/apis/{group}")
                paths.extend(f"/apis/{group}/{v}" for v in versions)
        return _json({"paths": sorted(paths)})
    if parts == ["version"]:
        return _json(VERSION)
    if parts[0] in ("healthz", "readyz", "livez"):
        return web.Response(text="ok", content_type="text/plain")
    if parts[0] == "openapi":
        from aiplane.sim.apiserver import openapi

        return await openapi.handle(server, request, parts)
    if parts == ["api"]:
        host = request.host
        return _json(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
            }
        )
    if len(parts) == 2 and parts[0] == "api":
        if parts[1] != "v1":
            return None
        return _json(
            {"kind": "APIResourceList", "groupVersion": "v1", "resources": _resources(server, "", "v1")}
        )
    if parts == ["apis"]:
        groups = [_group(server, g, vs) for g, vs in sorted(server.registry.groups().items()) if g]
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    if len(parts) == 2 and parts[0] == "apis":
        versions = server.registry.groups().get(parts[1])
        if not versions:
            return None
        return _json({"kind": "APIGroup", "apiVersion": "v1", **_group(server, parts[1], versions)})
    if len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
        if version not in server.registry.groups().get(group, []):
            return None
        return _json(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}",
                "resources": _resources(server, group, version),
            }
        )
    return None

"""Discovery: ``/version``, ``/api``, ``/apis`` and the per-group-version resource lists kubectl reads.

Two formats, negotiated on ``Accept`` exactly as kube-apiserver 1.37 does:

* aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``) on ``/api`` and ``/apis``,
  when the client asks for ``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``
  (client-go and kubectl do, first). The response's ``Content-Type`` carries the same parameters: that
  is how client-go tells the two formats apart. It has an ``ETag`` and answers ``If-None-Match`` with
  304, as kube's handler does.
* legacy discovery (``APIVersions``, ``APIGroupList``, ``APIGroup``, ``APIResourceList``) otherwise.

Groups are ordered like kube-aggregator orders its APIServices (built-in group priorities, then CRD
groups at priority 1000, by name), versions by kube-aware version order; the first version is the
preferred one. Everything is computed from the :class:`Registry`, so CRDs created or deleted at runtime
show up (or disappear) on the next request.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable
from functools import cmp_to_key
from typing import Any

import orjson

from aiplane.sim.apiserver.context import ServerContext
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, json_response
from aiplane.sim.apiserver.negotiation import not_acceptable, parse_accept
from aiplane.sim.apiserver.resources import ResourceType

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

#: Verbs of a built-in resource (kube lists them sorted); namespaces cannot be deleted as a collection.
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NAMESPACE_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
#: apiextensions-apiserver's verb order for custom resources.
CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
_SUBRESOURCE_VERBS = ["get", "patch", "update"]

AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSION = "v2"
AGGREGATED_KIND = "APIGroupDiscoveryList"
AGGREGATED_CONTENT_TYPE = f"application/json;g={AGGREGATED_GROUP};v={AGGREGATED_VERSION};as={AGGREGATED_KIND}"

#: kube-aggregator's GroupPriorityMinimum of the built-in groups (pkg/controlplane/apiserver and
#: pkg/controlplane/aggregator); CRD groups are registered at 1000.
GROUP_PRIORITY = {
    "": 18000,
    "apps": 17800,
    "events.k8s.io": 17750,
    "authentication.k8s.io": 17700,
    "authorization.k8s.io": 17600,
    "autoscaling": 17500,
    "batch": 17400,
    "certificates.k8s.io": 17300,
    "networking.k8s.io": 17200,
    "policy": 17100,
    "rbac.authorization.k8s.io": 17000,
    "storage.k8s.io": 16800,
    "apiextensions.k8s.io": 16700,
    "admissionregistration.k8s.io": 16700,
    "scheduling.k8s.io": 16600,
    "coordination.k8s.io": 16500,
    "node.k8s.io": 16300,
    "discovery.k8s.io": 16200,
    "resource.k8s.io": 16200,
    "flowcontrol.apiserver.k8s.io": 16100,
}
CRD_GROUP_PRIORITY = 1000

#: Resources whose storage lives in another group-version than the one they are served at.
_STORAGE_GVK = {("events.k8s.io", "Event"): ("", "v1", "Event")}


# --- content negotiation ----------------------------------------------------------------------------


def _negotiate_discovery(request: ApiRequest, allow_aggregated: bool) -> str:
    """``"aggregated"`` or ``"legacy"``; raises 406 when no clause can be served."""
    header = request.accept
    if not header:
        return "legacy"
    for clause in parse_accept(header):
        if not clause.matches_json():
            continue
        convert = clause.convert
        if convert is None:
            return "legacy"
        if allow_aggregated and convert == (AGGREGATED_GROUP, AGGREGATED_VERSION, AGGREGATED_KIND):
            return "aggregated"
    raise not_acceptable()


# --- ordering ---------------------------------------------------------------------------------------

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def compare_kube_aware_versions(v1: str, v2: str) -> int:
    """apimachinery's ``CompareKubeAwareVersionStrings``: > 0 when ``v1`` sorts first (is preferred)."""
    if v1 == v2:
        return 0
    m1, m2 = _KUBE_VERSION.match(v1), _KUBE_VERSION.match(v2)
    if m1 is None and m2 is None:
        return (v2 > v1) - (v2 < v1)
    if m1 is None:
        return -1
    if m2 is None:
        return 1
    stage = {"alpha": 0, "beta": 1, None: 2}
    t1, t2 = stage[m1.group(2)], stage[m2.group(2)]
    if t1 != t2:
        return t1 - t2
    if int(m1.group(1)) != int(m2.group(1)):
        return int(m1.group(1)) - int(m2.group(1))
    return int(m1.group(3) or 0) - int(m2.group(3) or 0)


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Most preferred first."""

    def preferred_first(a: str, b: str) -> int:
        return -compare_kube_aware_versions(a, b)

    return sorted(set(versions), key=cmp_to_key(preferred_first))


def group_priority(group: str, types: list[ResourceType]) -> int:
    if any(rt.is_custom for rt in types):
        return CRD_GROUP_PRIORITY
    return GROUP_PRIORITY.get(group, CRD_GROUP_PRIORITY)


def ordered_groups(server: ServerContext) -> list[tuple[str, list[str]]]:
    """Served (group, versions) pairs in discovery order, the core group first."""
    by_group: dict[str, list[ResourceType]] = {}
    for rt in server.registry.all():
        by_group.setdefault(rt.group, []).append(rt)
    names = sorted(by_group, key=lambda g: (-group_priority(g, by_group[g]), g))
    return [(g, sort_versions(rt.version for rt in by_group[g])) for g in names]


# --- resource entries -------------------------------------------------------------------------------


def storage_version_hash(rt: ResourceType) -> str:
    """apiserver's ``StorageVersionHash``: base64 of the first 8 bytes of sha256("group/version/kind")."""
    group, version, kind = _STORAGE_GVK.get((rt.group, rt.kind), (rt.group, rt.storage_version, rt.kind))
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


#: The verbs apiextensions-apiserver still lists for the resources of a terminating CRD.
CRD_TERMINATING_VERBS = ["delete", "deletecollection", "get", "list", "watch"]
_CRDS = "apiextensions.k8s.io/customresourcedefinitions"


def _terminating(server: ServerContext | None, rt: ResourceType) -> bool:
    """Whether ``rt``'s CRD carries the Terminating condition (set while its objects are being removed)."""
    if server is None or rt.crd_name is None:
        return False
    crd = server.store.get(_CRDS, "", rt.crd_name)
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Terminating" and c.get("status") == "True" for c in conditions)


def verbs_of(rt: ResourceType, server: ServerContext | None = None) -> list[str]:
    if rt.is_custom:
        return list(CRD_TERMINATING_VERBS if _terminating(server, rt) else CRD_VERBS)
    if (rt.group, rt.kind) == ("", "Namespace"):
        return list(_NAMESPACE_VERBS)
    return list(VERBS)


def _types_of(server: ServerContext, group: str, version: str) -> list[ResourceType]:
    return sorted(
        (rt for rt in server.registry.all() if rt.group == group and rt.version == version),
        key=lambda r: r.plural,
    )


def _subresource(rt: ResourceType, sub: str) -> tuple[str, str, str, list[str]]:
    """(group, version, kind, verbs) of a subresource; empty group/version means the parent's."""
    if sub == "scale":
        return "autoscaling", "v1", "Scale", list(_SUBRESOURCE_VERBS)
    if sub == "eviction":
        return "policy", "v1", "Eviction", ["create"]
    if sub == "binding":
        return "", "", "Binding", ["create"]
    if sub == "finalize":
        return "", "", rt.kind, ["update"]
    return "", "", rt.kind, list(_SUBRESOURCE_VERBS)


def _resource_entry(server: ServerContext, rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": verbs_of(rt, server),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    entry["storageVersionHash"] = storage_version_hash(rt)
    return entry


def _subresource_entry(rt: ResourceType, sub: str) -> dict[str, Any]:
    group, version, kind, verbs = _subresource(rt, sub)
    entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
    if group or version:
        entry.update(group=group, version=version)
    entry.update(kind=kind, verbs=verbs)
    return entry


def resource_list(server: ServerContext, group: str, version: str) -> list[dict[str, Any]]:
    """The legacy ``APIResourceList.resources`` of a group-version (subresources after their parent)."""
    out: list[dict[str, Any]] = []
    for rt in _types_of(server, group, version):
        out.append(_resource_entry(server, rt))
        out.extend(_subresource_entry(rt, sub) for sub in sorted(rt.subresources))
    return out


def _aggregated_resource(server: ServerContext, rt: ResourceType) -> dict[str, Any]:
    # Built-ins leave group/version of the response kind empty (it is the one of the list); the CRD
    # discovery controller fills them in.
    gv = {"group": rt.group, "version": rt.version} if rt.is_custom else {"group": "", "version": ""}
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {**gv, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": verbs_of(rt, server),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = []
    for sub in sorted(rt.subresources):
        group, version, kind, verbs = _subresource(rt, sub)
        if rt.is_custom and not group:
            group, version = rt.group, rt.version
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": verbs,
            }
        )
    if subs:
        entry["subresources"] = subs
    return entry


def _aggregated_group(server: ServerContext, group: str, versions: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"creationTimestamp": None}
    if group:
        meta = {"name": group, **meta}
    return {
        "metadata": meta,
        "versions": [
            {
                "version": v,
                "resources": [_aggregated_resource(server, rt) for rt in _types_of(server, group, v)],
                "freshness": "Current",
            }
            for v in versions
        ],
    }


def aggregated(server: ServerContext, legacy_core: bool) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` of ``/api`` (``legacy_core``) or ``/apis``."""
    items = [
        _aggregated_group(server, g, versions)
        for g, versions in ordered_groups(server)
        if (g == "") == legacy_core
    ]
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{AGGREGATED_GROUP}/{AGGREGATED_VERSION}",
        "metadata": {},
        "items": items,
    }


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


# --- responses --------------------------------------------------------------------------------------


def _aggregated_response(request: ApiRequest, body: dict[str, Any]) -> ApiResponse:
    raw = orjson.dumps(body)
    etag = '"' + hashlib.sha512(raw).hexdigest().upper() + '"'
    headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "public"}
    if request.headers.get("If-None-Match") == etag:
        return ApiResponse(304, headers)
    return ApiResponse(200, {**headers, "Content-Type": AGGREGATED_CONTENT_TYPE}, raw)


def _root(server: ServerContext, request: ApiRequest) -> ApiResponse:
    paths = [
        "/api",
        "/api/v1",
        "/apis",
        "/healthz",
        "/livez",
        "/openapi/v2",
        "/openapi/v3",
        "/openapi/v3/",
        "/readyz",
        "/version",
    ]
    for group, versions in ordered_groups(server):
        if group:
            paths.append(f"/apis/{group}")
            paths.extend(f"/apis/{group}/{v}" for v in versions)
    return json_response({"paths": sorted(paths)})


def _health(server: ServerContext, request: ApiRequest) -> ApiResponse:
    return ApiResponse(200, {"Content-Type": "text/plain; charset=utf-8"}, b"ok")


def _core(server: ServerContext, request: ApiRequest) -> ApiResponse:
    if _negotiate_discovery(request, allow_aggregated=True) == "aggregated":
        return _aggregated_response(request, aggregated(server, legacy_core=True))
    return json_response(
        {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}],
        }
    )


def _groups(server: ServerContext, request: ApiRequest) -> ApiResponse:
    if _negotiate_discovery(request, allow_aggregated=True) == "aggregated":
        return _aggregated_response(request, aggregated(server, legacy_core=False))
    groups = [_group(g, vs) for g, vs in ordered_groups(server) if g]
    return json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})


def _core_v1(server: ServerContext, request: ApiRequest) -> ApiResponse:
    _negotiate_discovery(request, allow_aggregated=False)
    return json_response(
        {"kind": "APIResourceList", "groupVersion": "v1", "resources": resource_list(server, "", "v1")}
    )


_FIXED: dict[tuple[str, ...], Callable[[ServerContext, ApiRequest], ApiResponse]] = {
    (): _root,
    ("version",): lambda server, request: json_response(VERSION),
    ("healthz",): _health,
    ("readyz",): _health,
    ("livez",): _health,
    ("api",): _core,
    ("apis",): _groups,
    ("api", "v1"): _core_v1,
}


def _group_paths(server: ServerContext, request: ApiRequest, parts: tuple[str, ...]) -> ApiResponse | None:
    """``/apis/<group>`` and ``/apis/<group>/<version>``; ``None`` for groups not served."""
    if parts[0] != "apis" or len(parts) not in (2, 3) or not parts[1]:
        return None
    group_versions = dict(ordered_groups(server)).get(parts[1]) or []
    if len(parts) == 2:
        if not group_versions:
            return None
        _negotiate_discovery(request, allow_aggregated=False)
        return json_response({"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], group_versions)})
    group, version = parts[1], parts[2]
    if version not in group_versions:
        return None
    _negotiate_discovery(request, allow_aggregated=False)
    return json_response(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": resource_list(server, group, version),
        }
    )


def handle(server: ServerContext, request: ApiRequest) -> ApiResponse | None:
    """Answer discovery and health paths; ``None`` for anything else (a resource path)."""
    if request.method != "GET":
        return None
    parts = request.parts
    fixed = _FIXED.get(parts)
    if fixed is None and parts and parts[0] in ("healthz", "readyz", "livez"):
        fixed = _health
    if fixed is not None:
        return fixed(server, request)
    if len(parts) == 2 and parts[0] == "api":
        return None
    return _group_paths(server, request, parts)

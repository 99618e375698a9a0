"""OpenAPI documents: ``/openapi/v2`` (swagger 2.0) and ``/openapi/v3`` (an index plus one document per
group-version), shaped like kube-apiserver 1.37 publishes them, because kubectl reads them:

* ``kubectl explain`` renders the v3 document of a group-version: it finds the kind through the
  ``x-kubernetes-group-version-kind`` of the resource's path operations, then the schema carrying the
  same extension in ``components.schemas``, and follows ``$ref``/``allOf`` from there.
* ``kubectl apply``/``create`` ask the v3 document whether the PATCH operation of a kind has a
  ``fieldValidation`` parameter before trusting the server with field validation (otherwise they
  validate client-side against v2, or fail).

Built-in kinds come from the Kubernetes definitions (``aiplane.apimachinery.builtin.definitions()``), converted
back to the form kube-openapi serves (nullable type unions dropped, ``$ref`` siblings wrapped in
``allOf`` in v3, IntOrString and Quantity as apimachinery declares them). A CRD version is published as
apiextensions-apiserver builds it: its structural schema with ``metadata`` replaced by a reference to
``ObjectMeta``, ``apiVersion``/``kind`` from ``TypeMeta``, a ``<Kind>List`` schema, the
group-version-kind extension, and for v2 the value validations and ``nullable`` stripped.

Documents are built lazily and cached; the cache is dropped when the registry's generation changes
(a CRD was created, updated or deleted). Every document has an ETag (sha512 of its JSON) and answers
``If-None-Match`` with 304; the v3 index links each group-version as ``?hash=<etag>``, and a request
with a stale hash is redirected (301) to the current one, like kube-openapi's handler3.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

import orjson

from aiplane.apimachinery import builtin
from aiplane.sim.apiserver import discovery, errors, openapi_proto
from aiplane.sim.apiserver.context import ServerContext
from aiplane.sim.apiserver.messages import JSON, ApiRequest, ApiResponse
from aiplane.sim.apiserver.negotiation import parse_accept
from aiplane.sim.apiserver.openapi_paths import PathBuilder
from aiplane.sim.apiserver.openapi_schemas import (
    LIST_META,
    OBJECT_META,
    builtin_definition,
    builtin_definition_name,
    crd_definition_name,
    crd_list_schema,
    crd_schema,
    definition_closure,
)
from aiplane.sim.apiserver.resources import ResourceType


def _list_kind(server: ServerContext, rt: ResourceType) -> str:
    crd = server.store.get("apiextensions.k8s.io/customresourcedefinitions", "", rt.crd_name or "")
    names = ((crd or {}).get("spec") or {}).get("names") or {}
    return str(names.get("listKind") or rt.kind + "List")


# --- documents ----------------------------------------------------------------------------------------


def _types(server: ServerContext, group: str | None = None, version: str | None = None) -> list[ResourceType]:
    return sorted(
        (
            rt
            for rt in server.registry.all()
            if (group is None or rt.group == group) and (version is None or rt.version == version)
        ),
        key=lambda r: (r.group, r.version, r.plural),
    )


def _fill(builder: PathBuilder, server: ServerContext, types: Iterable[ResourceType]) -> None:
    for rt in types:
        if rt.is_custom:
            name = crd_definition_name(rt.group, rt.version, rt.kind)
            list_kind = _list_kind(server, rt)
            list_name = crd_definition_name(rt.group, rt.version, list_kind)
            builder.custom_defs[name] = crd_schema(rt, builder.v3)
            builder.custom_defs[list_name] = crd_list_schema(rt, list_kind, builder.v3)
            builder.builtin_defs.update((OBJECT_META, LIST_META))
            builder.resource(rt, name, list_name)
            continue
        definition = builtin_definition_name(rt)
        if definition is None:
            continue
        list_def = definition + "List"
        builder.builtin_defs.add(definition)
        if list_def in builtin.definitions():
            builder.builtin_defs.add(list_def)
        builder.resource(rt, definition, list_def)


def _schemas(builder: PathBuilder) -> dict[str, Any]:
    schemas = {
        name: builtin_definition(name, builder.v3) for name in definition_closure(builder.builtin_defs)
    }
    schemas.update(builder.custom_defs)
    return dict(sorted(schemas.items()))


def v3_document(server: ServerContext, group: str, version: str) -> dict[str, Any]:
    types = _types(server, group, version)
    crd = any(rt.is_custom for rt in types)
    builder = PathBuilder(v3=True, crd=crd)
    _fill(builder, server, types)
    info = (
        {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}
        if crd
        else {"title": "Kubernetes", "version": "unversioned"}
    )
    return {
        "openapi": "3.0.0",
        "info": info,
        "paths": dict(sorted(builder.paths.items())),
        "components": {
            "schemas": _schemas(builder),
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
        "security": [{"BearerToken": []}],
    }


def v2_document(server: ServerContext) -> dict[str, Any]:
    builder = PathBuilder(v3=False, crd=False)
    builtins = [rt for rt in _types(server) if not rt.is_custom]
    _fill(builder, server, builtins)
    crd_builder = PathBuilder(v3=False, crd=True)
    _fill(crd_builder, server, [rt for rt in _types(server) if rt.is_custom])
    builder.paths.update(crd_builder.paths)
    builder.builtin_defs |= crd_builder.builtin_defs
    builder.custom_defs.update(crd_builder.custom_defs)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery.VERSION["gitVersion"]},
        "paths": dict(sorted(builder.paths.items())),
        "definitions": _schemas(builder),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    }


def gv_path(group: str, version: str) -> str:
    """The key of a group-version in the v3 index (``api/v1``, ``apis/apps/v1``)."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


# --- cache --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    body: bytes
    etag: str  # sha512 hex, upper case, unquoted


def _encode(doc: Any) -> Encoded:
    raw = orjson.dumps(doc)
    return Encoded(raw, hashlib.sha512(raw).hexdigest().upper())


@dataclass
class _Cache:
    generation: int = -1
    v2: Encoded | None = None
    v2_protobuf: Encoded | None = None
    v3: dict[str, Encoded] = field(default_factory=dict)
    index: Encoded | None = None


_CACHES: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()
#: Built-in group-versions never change: their documents are shared by every server.
_BUILTIN_V3: dict[tuple[str, str, tuple[str, ...]], Encoded] = {}


def _cache(server: ServerContext) -> _Cache:
    cache = _CACHES.get(server)
    if cache is None:
        cache = _CACHES[server] = _Cache()
    generation = server.registry.generation
    if cache.generation != generation:
        cache.generation = generation
        cache.v2 = None
        cache.v2_protobuf = None
        cache.v3 = {}
        cache.index = None
    return cache


def served_group_versions(server: ServerContext) -> list[tuple[str, str]]:
    return [(g, v) for g, versions in discovery.ordered_groups(server) for v in versions]


def v3_encoded(server: ServerContext, group: str, version: str) -> Encoded | None:
    if (group, version) not in served_group_versions(server):
        return None
    cache = _cache(server)
    key = gv_path(group, version)
    found = cache.v3.get(key)
    if found is not None:
        return found
    types = _types(server, group, version)
    if not any(rt.is_custom for rt in types):
        builtin_key = (group, version, tuple(rt.plural for rt in types))
        found = _BUILTIN_V3.get(builtin_key)
        if found is None:
            found = _BUILTIN_V3[builtin_key] = _encode(v3_document(server, group, version))
    else:
        found = _encode(v3_document(server, group, version))
    cache.v3[key] = found
    return found


def v3_index(server: ServerContext) -> Encoded:
    cache = _cache(server)
    if cache.index is None:
        paths = {}
        for group, version in sorted(served_group_versions(server), key=lambda gv: gv_path(*gv)):
            doc = v3_encoded(server, group, version)
            assert doc is not None
            key = gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={doc.etag}"}
        cache.index = _encode({"paths": paths})
    return cache.index


def v2_encoded(server: ServerContext) -> Encoded:
    cache = _cache(server)
    if cache.v2 is None:
        cache.v2 = _encode(v2_document(server))
    return cache.v2


# --- HTTP ---------------------------------------------------------------------------------------------


def _accepts_json(request: ApiRequest) -> bool:
    clauses = parse_accept(request.accept or "*/*")
    return any(c.matches_json() for c in clauses)


def _serve(request: ApiRequest, doc: Encoded, headers: dict[str, str] | None = None) -> ApiResponse:
    etag = f'"{doc.etag}"'
    all_headers = {"ETag": etag, "Vary": "Accept", **(headers or {})}
    if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
        return ApiResponse(304, all_headers)
    return ApiResponse(200, {**all_headers, "Content-Type": JSON}, doc.body)


def _group_version(rest: tuple[str, ...]) -> tuple[str, str]:
    """The group-version a ``/openapi/v3/…`` path names (404 for anything else)."""
    if rest[:1] == ("api",) and len(rest) == 2:
        return "", rest[1]
    if rest[:1] == ("apis",) and len(rest) == 3:
        return rest[1], rest[2]
    raise errors.not_found_path()


def _v3_group_version(server: ServerContext, request: ApiRequest, rest: tuple[str, ...]) -> ApiResponse:
    group, version = _group_version(rest)
    doc = v3_encoded(server, group, version)
    if doc is None:
        raise errors.not_found_path()
    if not _accepts_json(request):
        return ApiResponse(406)
    wanted = request.query.get("hash")
    if not wanted:
        return _serve(request, doc)
    if wanted != doc.etag:
        location = f"/openapi/v3/{gv_path(group, version)}?hash={quote(doc.etag)}"
        return ApiResponse(301, {"Location": location})
    return _serve(request, doc, {"Cache-Control": "public, immutable", "Expires": _one_year_from_now()})


def handle(server: ServerContext, request: ApiRequest) -> ApiResponse:
    """Serve ``/openapi/v2``, ``/openapi/v3`` and ``/openapi/v3/<group-version path>``."""
    if request.method not in ("GET", "HEAD"):
        raise errors.method_not_allowed()
    parts = request.parts
    if parts == ("openapi", "v2"):
        if _accepts_json(request):
            return _serve(request, v2_encoded(server))
        if openapi_proto.accepts_v2_protobuf(request.accept):
            return _serve_v2_protobuf(server, request)
        return ApiResponse(406)
    if parts == ("openapi", "v3"):
        return _serve(request, v3_index(server))
    if parts[:2] == ("openapi", "v3") and parts[2:]:
        return _v3_group_version(server, request, parts[2:])
    raise errors.not_found_path()


def _serve_v2_protobuf(server: ServerContext, request: ApiRequest) -> ApiResponse:
    cache = _cache(server)
    if cache.v2_protobuf is None:
        body, etag = openapi_proto.encode_v2(v2_document(server))
        cache.v2_protobuf = Encoded(body, etag)
    response = _serve(request, cache.v2_protobuf)
    if response.status != 200:
        return response
    return ApiResponse(200, {**response.headers, "Content-Type": openapi_proto.V2_PROTOBUF}, response.body)


def _one_year_from_now() -> str:
    return format_datetime(datetime.now(UTC) + timedelta(days=365), usegmt=True)


def iter_schema_refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` under ``node`` (for tests and diagnostics)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from iter_schema_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from iter_schema_refs(value)

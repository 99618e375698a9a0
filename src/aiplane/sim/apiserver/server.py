"""The HTTP front of the embedded API server (aiohttp): routing, auth, content negotiation, verbs.

URL layout, status codes and bodies follow kube-apiserver, because real clients (kubectl, client-go
style libraries, the official Python clients) are what talk to it. Verb semantics live in ``rest.py``;
this module only translates HTTP to those calls and back.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson
import yaml
from aiohttp import web

from aiplane.sim.apiserver import discovery, errors, faults, patch, scale, selectors, table, watch
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions, WriteOptions
from aiplane.sim.apiserver.store import Store

#: kube-apiserver's default limit on a request body (3 MiB, --max-request-bytes aside).
MAX_REQUEST_BYTES = 3 * 1024 * 1024
JSON = "application/json"
_PUBLIC = ("/version", "/healthz", "/readyz", "/livez")


@dataclass
class Target:
    """What a resource URL names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    raw = body if isinstance(body, bytes) else dumps(body)
    return web.Response(body=raw, status=status, content_type=JSON, headers=headers)


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), status=err.code, headers=err.headers)


class ApiServer:
    """One embedded cluster's API: store, registry, verbs, and the aiohttp application serving them."""

    def __init__(self, *, token: str | None = None, history_size: int = 10_000) -> None:
        self.token = token or secrets.token_hex(16)
        self.store = Store(history_size=history_size)
        self.registry = Registry()
        self.api = Api(self.store, self.registry)
        self.faults = faults.Faults()
        self.requests_total = 0
        self._watch_tasks: set[asyncio.Task[Any]] = set()

    # --- application --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES + 1024 * 1024, middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.requests_total += 1
        if not request.path.startswith(_PUBLIC):
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.token}":
                return error_response(errors.unauthorized())
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err)
        except web.HTTPException:
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:  # a bug of ours must still answer like a server, not drop the connection
            return error_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
        handled = await discovery.handle(self, request, parts)
        if handled is not None:
            return handled
        target = self._target(parts)
        return await self._resource(request, target)

    # --- URL parsing --------------------------------------------------------------------------------

    def _target(self, parts: list[str]) -> Target:
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.not_found_path()
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and rest[2] in ("status", "finalize") and len(rest) == 3)
        ):
            namespace, rest = rest[1], rest[2:]
        if not 1 <= len(rest) <= 3:
            raise errors.not_found_path()
        rt = self.registry.lookup(group, version, rest[0])
        if rt is None or (namespace is not None and not rt.namespaced):
            raise errors.not_found_path()
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and sub not in rt.subresources:
            raise errors.not_found_path()
        return Target(rt, namespace, name, sub)

    # --- verbs --------------------------------------------------------------------------------------

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        q = request.query
        if method == "GET":
            if t.name is None:
                verb = "watch" if q.get("watch") in ("1", "true", "True") else "list"
            else:
                verb = "get"
        else:
            verb = {
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete" if t.name else "deletecollection",
            }.get(method, "")
            if not verb:
                raise errors.method_not_allowed()
        await self.faults.before(verb, t.rt, t.subresource)
        if verb == "watch":
            return await watch.serve(self, request, t.rt, t.namespace)
        if verb == "list":
            return self._list(request, t)
        if verb == "get":
            return self._get(request, t)
        if t.subresource == "scale":
            return await scale.handle(self, request, t.rt, t.namespace, t.name or "", verb)
        if t.subresource == "eviction":
            return await self._eviction(request, t)
        if verb == "create":
            if t.name is not None and t.subresource is None:
                raise errors.method_not_allowed()
            body = await self._body(request)
            opts = self._write_options(q)
            result = self.api.create(t.rt, t.namespace, body, opts)
            return self._write_response(result.obj, result.warnings, 201, request, t.rt)
        if verb == "update":
            body = await self._body(request)
            opts = self._write_options(q)
            result = self.api.update(t.rt, t.namespace, t.name or "", body, opts, subresource=t.subresource)
            return self._write_response(result.obj, result.warnings, 200, request, t.rt)
        if verb == "patch":
            raw = await self._raw_body(request)
            opts = self._write_options(q)
            opts.force = q.get("force") in ("true", "1")
            result = patch.patch(
                self.api,
                t.rt,
                t.namespace,
                t.name or "",
                request.content_type,
                raw,
                opts,
                subresource=t.subresource,
            )
            status = 201 if result.created else 200
            return self._write_response(result.obj, result.warnings, status, request, t.rt)
        if verb == "delete":
            options = await self._delete_options(request)
            obj = self.api.delete(t.rt, t.namespace, t.name or "", options)
            exists = self.api.find(t.rt, t.namespace, t.name or "") is not None and not options.dry_run
            return json_response(obj, status=202 if exists else 200)
        if verb == "deletecollection":
            options = await self._delete_options(request)
            label = selectors.label_selector(q.get("labelSelector"))
            fieldsel = selectors.field_selector(t.rt, q.get("fieldSelector"))
            items = [o for o in self.api.items(t.rt, t.namespace) if label(o) and fieldsel(o)]
            for obj in items:
                meta = obj["metadata"]
                with contextlib.suppress(ApiError):
                    self.api.delete(t.rt, meta.get("namespace"), meta["name"], options)
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        raise errors.method_not_allowed()

    def _get(self, request: web.Request, t: Target) -> web.StreamResponse:
        if t.subresource not in (None, "status"):
            raise errors.method_not_allowed()
        if table.wants_table(request):
            obj = self.api.get(t.rt, t.namespace, t.name or "")
            return json_response(
                table.to_table(self, t.rt, [obj], request, list_rv=obj["metadata"]["resourceVersion"])
            )
        ns = (t.namespace or "") if t.rt.namespaced else ""
        stored = self.store.get(t.rt.storage_key, ns, t.name or "")
        if stored is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
        if stored.get("apiVersion") == t.rt.api_version:
            raw = self.store.raw(t.rt.storage_key, ns, t.name or "")
            assert raw is not None
            return json_response(raw)
        return json_response(self.api.served(t.rt, stored))

    def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        items, rv, cont, remaining = selectors.list_objects(
            self.api,
            t.rt,
            t.namespace,
            label=q.get("labelSelector"),
            field=q.get("fieldSelector"),
            limit=int(q["limit"]) if q.get("limit", "").isdigit() and int(q["limit"]) > 0 else None,
            continue_token=q.get("continue") or None,
        )
        if table.wants_table(request):
            return json_response(
                table.to_table(
                    self, t.rt, items, request, list_rv=rv, continue_token=cont, remaining=remaining
                )
            )
        meta: dict[str, Any] = {"resourceVersion": rv}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = dumps({"apiVersion": t.rt.api_version, "kind": f"{t.rt.kind}List", "metadata": meta})
        # Splice the cached encodings of the items into the list without re-encoding them.
        ns_of = lambda o: o["metadata"].get("namespace", "")
        encoded = []
        for obj in items:
            raw = (
                self.store.raw(t.rt.storage_key, ns_of(obj), obj["metadata"]["name"])
                if obj.get("apiVersion") == t.rt.api_version
                and self.store.get(t.rt.storage_key, ns_of(obj), obj["metadata"]["name"]) is obj
                else None
            )
            encoded.append(raw if raw is not None else dumps(obj))
        body = head[:-1] + b',"items":[' + b",".join(encoded) + b"]}"
        return json_response(body)

    async def _eviction(self, request: web.Request, t: Target) -> web.StreamResponse:
        from aiplane.sim.apiserver import gc

        body = await self._body(request)
        return json_response(gc.evict(self.api, t.rt, t.namespace or "", t.name or "", body), status=201)

    # --- request decoding ---------------------------------------------------------------------------

    async def _raw_body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
            raise errors.entity_too_large(MAX_REQUEST_BYTES)
        raw = await request.read()
        if len(raw) > MAX_REQUEST_BYTES:
            raise errors.entity_too_large(MAX_REQUEST_BYTES)
        return raw

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await self._raw_body(request)
        ctype = request.content_type
        if ctype in ("application/vnd.kubernetes.protobuf",):
            raise errors.unsupported_media_type("application/json, application/yaml")
        try:
            body = yaml.safe_load(raw) if ctype == "application/yaml" else orjson.loads(raw)
        except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        return body

    @staticmethod
    def _write_options(q: Any) -> WriteOptions:
        validation = q.get("fieldValidation") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(f"fieldValidation must be one of Strict, Warn, Ignore: {validation!r}")
        dry_run = q.getall("dryRun", []) if hasattr(q, "getall") else []
        if any(v != "All" for v in dry_run):
            raise errors.bad_request('dryRun: Unsupported value: only "All" is supported')
        return WriteOptions(
            dry_run=bool(dry_run), field_manager=q.get("fieldManager"), field_validation=validation
        )

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        q = request.query
        body: dict[str, Any] = {}
        if request.can_read_body:
            raw = await self._raw_body(request)
            if raw.strip():
                try:
                    decoded = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
                if isinstance(decoded, dict):
                    body = decoded
        pre = body.get("preconditions") or {}
        policy = q.get("propagationPolicy") or body.get("propagationPolicy")
        if body.get("orphanDependents") is True and not policy:
            policy = "Orphan"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}"')
        grace = q.get("gracePeriodSeconds") or body.get("gracePeriodSeconds")
        dry = q.getall("dryRun", []) or body.get("dryRun") or []
        return DeleteOptions(
            propagation_policy=policy,
            grace_period_seconds=int(grace) if grace is not None else None,
            precondition_uid=pre.get("uid"),
            precondition_rv=pre.get("resourceVersion"),
            dry_run=bool(dry),
        )

    def _write_response(
        self, obj: dict[str, Any], warnings: list[str], status: int, request: web.Request, rt: ResourceType
    ) -> web.Response:
        headers: dict[str, str] = {}
        if warnings:
            headers["Warning"] = ", ".join(
                f'299 - "{w.replace(chr(34), chr(92) + chr(34))}"' for w in warnings
            )
        if table.wants_table(request):
            return json_response(
                table.to_table(self, rt, [obj], request, list_rv=obj["metadata"].get("resourceVersion", "")),
                status,
                headers,
            )
        return json_response(obj, status=status, headers=headers)

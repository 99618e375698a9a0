"""The HTTP front of the embedded API server (aiohttp): routing, auth, content negotiation, verbs.

URL layout, status codes and bodies follow kube-apiserver, because real clients (kubectl, client-go
style libraries, the official Python clients) are what talk to it. Verb semantics live in ``rest.py``;
this module only translates HTTP to those calls and back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson
import yaml
from aiohttp import web

from aiplane.sim.apiserver import apply, discovery, errors, faults, gc, patch, scale, selectors, table, watch
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions, WriteOptions, delete_options, rfc3339
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


def _token_for(sa: dict[str, Any], seconds: int, expires: datetime.datetime) -> str:
    """A JWT-shaped bound token (unsigned: the embedded server authenticates only its own bearer token)."""
    import base64

    def segment(value: Any) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    meta = sa["metadata"]
    claims = {
        "aud": ["https://kubernetes.default.svc.cluster.local"],
        "exp": int(expires.timestamp()),
        "iat": int(expires.timestamp()) - seconds,
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": f"system:serviceaccount:{meta.get('namespace')}:{meta['name']}",
        "kubernetes.io": {
            "namespace": meta.get("namespace"),
            "serviceaccount": {"name": meta["name"], "uid": meta.get("uid")},
        },
    }
    signature = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    return f"{segment({'alg': 'none', 'typ': 'JWT'})}.{segment(claims)}.{signature}"


def resolve_target(registry: Registry, parts: list[str]) -> Target:
    """What ``/api…``/``/apis…`` path segments name; 404s as kube words them."""
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
    rt = registry.lookup(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise errors.not_found_path()
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) == 3 else None
    if sub is not None and sub not in rt.subresources:
        raise errors.not_found_path()
    return Target(rt, namespace, name, sub)


class ApiServer:
    """One embedded cluster's API: store, registry, verbs, and the aiohttp application serving them."""

    def __init__(self, *, token: str | None = None, history_size: int = 10_000) -> None:
        self.token = token or secrets.token_hex(16)
        self.store = Store(history_size=history_size)
        self.registry = Registry()
        self.api = Api(self.store, self.registry)
        self.gc = gc.install(self.api)  # deletion, garbage collection, namespace/disruption controllers
        apply.install(self.api)  # managedFields on every write (server-side apply's field manager)
        self.faults = faults.Faults()
        #: The simulated agents (``EmbeddedCluster(agents=True)`` sets it), for ``/_sim/faults/<agent fault>``.
        self.agents: Any = None
        self.requests_total = 0
        self.request_stats: collections.Counter[tuple[str, str]] = collections.Counter()
        self._watch_tasks: set[asyncio.Task[Any]] = set()

    # --- application --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES + 1024 * 1024, middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_shutdown.append(watch.shutdown_hook(self))
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.requests_total += 1
        agent = request.headers.get("User-Agent", "").split("/", 1)[0] or "unknown"
        verb = "WATCH" if request.query.get("watch") in ("1", "true") else request.method
        self.request_stats[(verb, agent)] += 1
        apply.REQUEST_USER_AGENT.set(request.headers.get("User-Agent", ""))  # default field manager
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
        if parts == ["_sim", "stats"] and request.method == "GET":
            # Requests by verb and client (User-Agent product): how many writes an operator made.
            stats: dict[str, dict[str, int]] = {}
            for (verb, agent), count in sorted(self.request_stats.items()):
                stats.setdefault(agent, {})[verb] = count
            return json_response({"requests": stats, "resourceVersion": self.store.rv})
        if parts[:1] == ["_sim"]:
            return await faults.handle_http(self, request, parts)
        handled = await discovery.handle(self, request, parts)
        if handled is not None:
            return handled
        target = self._target(parts)
        return await self._resource(request, target)

    # --- URL parsing --------------------------------------------------------------------------------

    def _target(self, parts: list[str]) -> Target:
        return resolve_target(self.registry, parts)

    # --- verbs --------------------------------------------------------------------------------------

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        q = request.query
        if method == "GET":
            if t.name is None:
                verb = "watch" if q.get("watch") in ("1", "true", "True") else "list"
            else:
                verb = "watch" if q.get("watch") in ("1", "true", "True") else "get"
        else:
            verb = {
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete" if t.name else "deletecollection",
            }.get(method, "")
            if not verb:
                raise errors.method_not_allowed()
        await self.faults.before(verb, t.rt, t.subresource, t.namespace, t.name)
        if verb == "watch":
            return await watch.serve(self, request, t.rt, t.namespace, name=t.name)
        if verb == "list":
            return self._list(request, t)
        if t.subresource == "scale":
            return await scale.handle(self, request, t.rt, t.namespace, t.name or "", verb)
        if verb == "get":
            return self._get(request, t)
        if t.subresource == "eviction":
            return await self._eviction(request, t)
        if t.subresource == "binding":
            if verb != "create":
                raise errors.method_not_allowed()
            body = await self._body(request)
            return json_response(
                self.api.bind(t.namespace or "", t.name or "", body, self._write_options(q)), 201
            )
        if t.subresource == "token" and verb == "create":
            return json_response(await self._token(request, t), status=201)
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
            code, answer = gc.delete_response(t.rt, obj, options)  # 200/202 and object/Status as kube
            return json_response(answer, status=code)
        if verb == "deletecollection":
            options = await self._delete_options(request)
            label = selectors.label_selector(q.get("labelSelector"))
            fieldsel = selectors.field_selector(t.rt, q.get("fieldSelector"), store=self.store)
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
            query=q,
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
        encoded = []
        for obj in items:
            meta = obj["metadata"]
            ns, name = meta.get("namespace", ""), meta["name"]
            stored = self.store.get(t.rt.storage_key, ns, name) is obj
            raw = self.store.raw(t.rt.storage_key, ns, name) if stored else None
            encoded.append(raw if raw is not None else dumps(obj))
        body = head[:-1] + b',"items":[' + b",".join(encoded) + b"]}"
        return json_response(body)

    async def _token(self, request: web.Request, t: Target) -> dict[str, Any]:
        """TokenRequest: a bound service-account token (an opaque string here; nothing verifies it)."""
        body = await self._body(request)
        sa = self.api.get(t.rt, t.namespace, t.name or "")
        seconds = int((body.get("spec") or {}).get("expirationSeconds") or 3600)
        expires = self.api.clock() + datetime.timedelta(seconds=seconds)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": sa["metadata"]["name"], "namespace": sa["metadata"].get("namespace")},
            "spec": {**(body.get("spec") or {}), "expirationSeconds": seconds},
            "status": {"token": _token_for(sa, seconds, expires), "expirationTimestamp": rfc3339(expires)},
        }

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
        if ctype == "application/vnd.kubernetes.protobuf":
            from aiplane.sim.apiserver import protobuf

            parts = [unquote(p) for p in request.path.rstrip("/").strip("/").split("/")]
            target = self._target(parts)
            return protobuf.decode_request(raw, target.rt, target.subresource)
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
            if raw and request.content_type == "application/vnd.kubernetes.protobuf":
                from aiplane.sim.apiserver import protobuf

                body = protobuf.decode_delete_options(raw)
            elif raw.strip():
                try:
                    decoded = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
                if isinstance(decoded, dict):
                    body = decoded
        return delete_options(body, q, dry_run_values=q.getall("dryRun", []))

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

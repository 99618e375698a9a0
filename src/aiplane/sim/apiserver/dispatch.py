"""The one request dispatch of the embedded API server: an :class:`ApiRequest` in, an :class:`ApiResponse` out.

Resolving the URL, choosing the kube verb, fault injection, decoding bodies and options, calling the
verbs of ``rest.Api`` (and patch, scale, eviction, binding, token, watch) and encoding the answer all
happen here, on plain data. The aiohttp server (``server.py``) and the in-memory client
(``aiplane.sim.client``) both call :func:`handle`, so whatever one front door answers, the other answers
too; each only adds what its transport needs.

Encoding avoids work on the hot paths: a GET answers the store's cached encoding of the object, a LIST
splices the cached encodings of its items into the list without re-encoding them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson
import yaml
from multidict import MultiMapping

from aiplane.apimachinery import boundedyaml
from aiplane.apimachinery import field as fe
from aiplane.sim.apiserver import (
    apply,
    authn,
    deletion,
    errors,
    eviction,
    gojson,
    patch,
    protobuf,
    scale,
    selectors,
    table,
    watch,
)
from aiplane.sim.apiserver.context import ServerContext
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.goyaml import go_yaml_error
from aiplane.sim.apiserver.messages import JSON, ApiRequest, ApiResponse, error_response, json_response
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import DeleteOptions, WriteOptions, delete_options
from aiplane.sim.apiserver.write_defaults import rfc3339

#: kube-apiserver's default limit on a request body (3 MiB, --max-request-bytes aside).
MAX_REQUEST_BYTES = 3 * 1024 * 1024
PROTOBUF = "application/vnd.kubernetes.protobuf"
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_TRUE = ("1", "true", "True")
_SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


@dataclass(slots=True)
class Target:
    """What a resource URL names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def label(self) -> str:
        """``plural[.group][/subresource]``: how request counts name the resource."""
        base = f"{self.rt.plural}.{self.rt.group}" if self.rt.group else self.rt.plural
        return f"{base}/{self.subresource}" if self.subresource else base


def resolve_target(registry: Registry, parts: tuple[str, ...] | list[str]) -> Target:
    """What ``/api…``/``/apis…`` path segments name; 404s as kube words them."""
    parts = list(parts)
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


def verb_of(method: str, target: Target, query: MultiMapping[str]) -> str:
    """The kube verb of a request (``get``, ``list``, ``watch``, ``create``, …); 405 for other methods."""
    if method == "GET":
        if query.get("watch") in _TRUE:
            return "watch"
        return "get" if target.name is not None else "list"
    if method == "DELETE":
        return "delete" if target.name else "deletecollection"
    verb = _METHOD_VERBS.get(method)
    if verb is None:
        raise errors.method_not_allowed()
    return verb


#: Told the kube verb and the target a request resolved to (``None`` when the URL names no resource).
RouteObserver = Callable[[str, "Target | None"], None]


async def handle(
    ctx: ServerContext, request: ApiRequest, *, observe: RouteObserver | None = None
) -> ApiResponse:
    """Answer one resource request as kube-apiserver would; errors are answered as ``Status`` bodies.

    ``observe`` learns how the request was routed before it is served (the in-memory client counts
    requests by verb and resource with it).
    """
    try:
        target = resolve_target(ctx.registry, request.parts)
    except ApiError as err:
        if observe is not None:
            observe(request.method.lower(), None)
        return error_response(err)
    try:
        verb = verb_of(request.method, target, request.query)
    except ApiError as err:
        return error_response(err)
    if observe is not None:
        observe(verb, target)
    # The default field manager of the writes; the HTTP middleware has usually set it already.
    user_agent = request.user_agent
    token = None if apply.REQUEST_USER_AGENT.get() == user_agent else apply.REQUEST_USER_AGENT.set(user_agent)
    try:
        if ctx.faults is not None:
            await ctx.faults.before(verb, target.rt, target.subresource, target.namespace, target.name)
        return _serve(ctx, request, target, verb)
    except ApiError as err:
        return error_response(err)
    except Exception as exc:  # a bug of ours must still answer like a server
        return error_response(errors.internal(f"{type(exc).__name__}: {exc}"))
    finally:
        if token is not None:
            apply.REQUEST_USER_AGENT.reset(token)


Handler = Callable[[ServerContext, ApiRequest, Target], ApiResponse]


def _serve(ctx: ServerContext, request: ApiRequest, t: Target, verb: str) -> ApiResponse:
    if verb == "watch":
        return _watch(ctx, request, t)
    if verb == "list":
        return _list(ctx, request, t)
    if t.subresource == "scale":
        return _scale(ctx, request, t, verb)
    if verb == "get":
        return _get(ctx, request, t)
    special = _SUBRESOURCES.get(t.subresource or "")
    if special is not None and (t.subresource != "token" or verb == "create"):
        return special(ctx, request, t, verb)
    return _WRITES[verb](ctx, request, t)


# --- reads --------------------------------------------------------------------------------------------


def _watch(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    options = table.negotiate(request.accept, request.query)
    stream = watch.open_stream(ctx, t.rt, t.namespace, request.query, name=t.name, table_options=options)
    return ApiResponse(200, {"Content-Type": JSON, "Cache-Control": "no-cache"}, stream=stream)


def _get(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    if t.subresource not in (None, "status"):
        raise errors.method_not_allowed()
    options = table.negotiate(request.accept, request.query)
    if options is not None:
        obj = ctx.api.get(t.rt, t.namespace, t.name or "")
        rv = obj["metadata"]["resourceVersion"]
        return json_response(table.to_table(ctx.api, t.rt, [obj], options, list_rv=rv))
    store = ctx.store
    ns = (t.namespace or "") if t.rt.namespaced else ""
    stored = store.get(t.rt.storage_key, ns, t.name or "")
    if stored is None:
        raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
    if stored.get("apiVersion") == t.rt.api_version:
        raw = store.raw(t.rt.storage_key, ns, t.name or "")
        assert raw is not None
        return json_response(raw)
    return json_response(ctx.api.served(t.rt, stored))


def _list(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    q = request.query
    limit = q.get("limit", "")
    items, rv, cont, remaining = selectors.list_objects(
        ctx.api,
        t.rt,
        t.namespace,
        label=q.get("labelSelector"),
        field=q.get("fieldSelector"),
        limit=int(limit) if limit.isdigit() and int(limit) > 0 else None,
        continue_token=q.get("continue") or None,
        query=q,
    )
    options = table.negotiate(request.accept, q)
    if options is not None:
        return json_response(
            table.to_table(
                ctx.api, t.rt, items, options, list_rv=rv, continue_token=cont, remaining=remaining
            )
        )
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    head = orjson.dumps({"apiVersion": t.rt.api_version, "kind": f"{t.rt.kind}List", "metadata": meta})
    # Splice the cached encodings of the items into the list without re-encoding them.
    store, key = ctx.store, t.rt.storage_key
    encoded = []
    for obj in items:
        item_meta = obj["metadata"]
        ns, name = item_meta.get("namespace", ""), item_meta["name"]
        raw = store.raw(key, ns, name) if store.get(key, ns, name) is obj else None
        encoded.append(raw if raw is not None else orjson.dumps(obj))
    return json_response(head[:-1] + b',"items":[' + b",".join(encoded) + b"]}")


def _scale(ctx: ServerContext, request: ApiRequest, t: Target, verb: str) -> ApiResponse:
    answer = scale.handle(
        ctx.api,
        t.rt,
        t.namespace,
        t.name or "",
        verb,
        content_type=request.content_type,
        body=_raw(request) if verb != "get" else b"",
        field_manager=request.query.get("fieldManager"),
    )
    return json_response(answer)


# --- writes -------------------------------------------------------------------------------------------


def _create(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    if t.name is not None and t.subresource is None:
        raise errors.method_not_allowed()
    result = ctx.api.create(t.rt, t.namespace, _body(request, t), write_options(request.query))
    return _written(ctx, request, t, result.obj, result.warnings, 201)


def _update(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    body = _body(request, t)
    opts = write_options(request.query)
    result = ctx.api.update(t.rt, t.namespace, t.name or "", body, opts, subresource=t.subresource)
    return _written(ctx, request, t, result.obj, result.warnings, 200)


def _patch(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    raw = _raw(request)
    opts = write_options(request.query)
    opts.force = request.query.get("force") in ("true", "1")
    result = patch.patch(
        ctx.api, t.rt, t.namespace, t.name or "", request.content_type, raw, opts, subresource=t.subresource
    )
    return _written(ctx, request, t, result.obj, result.warnings, 201 if result.created else 200)


def _delete(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    options = _delete_options(request)
    obj = ctx.api.delete(t.rt, t.namespace, t.name or "", options)
    code, answer = deletion.delete_response(t.rt, obj, options)  # 200/202 and object/Status as kube
    return json_response(answer, status=code)


def _delete_collection(ctx: ServerContext, request: ApiRequest, t: Target) -> ApiResponse:
    options = _delete_options(request)
    q = request.query
    label = selectors.label_selector(q.get("labelSelector"))
    fieldsel = selectors.field_selector(t.rt, q.get("fieldSelector"), store=ctx.store)
    for obj in [o for o in ctx.api.items(t.rt, t.namespace) if label(o) and fieldsel(o)]:
        meta = obj["metadata"]
        with contextlib.suppress(ApiError):
            ctx.api.delete(t.rt, meta.get("namespace"), meta["name"], options)
    return json_response(_SUCCESS)


_WRITES: dict[str, Handler] = {
    "create": _create,
    "update": _update,
    "patch": _patch,
    "delete": _delete,
    "deletecollection": _delete_collection,
}


def _written(
    ctx: ServerContext, request: ApiRequest, t: Target, obj: dict[str, Any], warnings: list[str], status: int
) -> ApiResponse:
    headers: dict[str, str] = {}
    if warnings:
        headers["Warning"] = ", ".join(f'299 - "{w.replace(chr(34), chr(92) + chr(34))}"' for w in warnings)
    options = table.negotiate(request.accept, request.query)
    if options is not None:
        rv = obj["metadata"].get("resourceVersion", "")
        return json_response(table.to_table(ctx.api, t.rt, [obj], options, list_rv=rv), status, headers)
    return json_response(obj, status, headers)


# --- subresources with their own body -----------------------------------------------------------------


def _evict(ctx: ServerContext, request: ApiRequest, t: Target, verb: str) -> ApiResponse:
    answer = eviction.evict(ctx.api, t.rt, t.namespace or "", t.name or "", _body(request, t))
    return json_response(answer, status=201)


def _bind(ctx: ServerContext, request: ApiRequest, t: Target, verb: str) -> ApiResponse:
    if verb != "create":
        raise errors.method_not_allowed()
    body = _body(request, t)
    return json_response(
        ctx.api.bind(t.namespace or "", t.name or "", body, write_options(request.query)), 201
    )


def _token(ctx: ServerContext, request: ApiRequest, t: Target, verb: str) -> ApiResponse:
    """TokenRequest: a token the server authenticates as the ServiceAccount (``authn.py``)."""
    body = _body(request, t)
    sa = ctx.api.get(t.rt, t.namespace, t.name or "")
    spec = dict(body.get("spec") or {})
    seconds = spec.get("expirationSeconds")
    seconds = authn.DEFAULT_TOKEN_SECONDS if seconds is None else seconds
    problems = []
    if not isinstance(seconds, int) or seconds < authn.MIN_TOKEN_SECONDS:
        problems.append(
            fe.invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes")
        )
    elif seconds > authn.MAX_TOKEN_SECONDS:
        problems.append(
            fe.invalid(
                "spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds"
            )
        )
    if problems:
        raise errors.invalid("TokenRequest", "authentication.k8s.io", t.name or "", problems)
    spec["expirationSeconds"] = seconds
    spec["audiences"] = spec.get("audiences") or [authn.AUDIENCE]
    spec.setdefault("boundObjectRef", None)
    token, expires = ctx.tokens.mint(sa, ctx.api.clock(), seconds, spec["audiences"])
    answer = {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": sa["metadata"]["name"],
            "namespace": sa["metadata"].get("namespace"),
            "creationTimestamp": None,
        },
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
    }
    return json_response(answer, status=201)


_SUBRESOURCES: dict[str, Callable[[ServerContext, ApiRequest, Target, str], ApiResponse]] = {
    "eviction": _evict,
    "binding": _bind,
    "token": _token,
}


# --- request decoding ---------------------------------------------------------------------------------


def _raw(request: ApiRequest) -> bytes:
    if request.body_too_large or len(request.body) > MAX_REQUEST_BYTES:
        raise errors.entity_too_large(MAX_REQUEST_BYTES)
    return request.body


#: The kind a subresource's body decodes into (``status`` takes the object's own kind).
_SUBRESOURCE_KINDS = {"eviction": "Eviction", "binding": "Binding", "scale": "Scale", "token": "TokenRequest"}


def summarize_data(data: bytes, max_length: int = 30) -> str:
    """kube's ``summarizeData``: how a decode error quotes the body (hex unless it starts with ``{``)."""
    if not data:
        return "<empty>"
    shown = data[:max_length]
    text = shown.decode("utf-8", "replace") if data[:1] == b"{" else shown.hex()
    return text + " ..." if len(data) > max_length else text


#: The struct kube's JSON serializer first decodes a body into, to find its kind (meta.go's Interpret).
_FIND_KIND: Final = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)


def _interpret(body: Any) -> None:
    """``SimpleMetaFactory.Interpret``'s type errors: the body must be an object whose ``apiVersion``
    and ``kind`` (matched as Go matches JSON keys, case-insensitively) are strings or null."""
    if body is None:
        return
    if not isinstance(body, dict):
        raise gojson.GoJSONError(
            f"json: cannot unmarshal {gojson.json_kind(body)} into Go value of type {_FIND_KIND}"
        )
    for key, value in body.items():
        field = {"apiversion": "apiVersion", "kind": "kind"}.get(str(key).lower())
        if field is not None and value is not None and not isinstance(value, str):
            kind = gojson.json_kind(value)
            raise gojson.GoJSONError(
                f"json: cannot unmarshal {kind} into Go struct field .{field} of type string"
            )


def _body(request: ApiRequest, t: Target) -> dict[str, Any]:
    raw = _raw(request)
    ctype = request.content_type
    if ctype == PROTOBUF:
        return protobuf.decode_request(raw, t.rt, t.subresource)
    # kube-apiserver's transformDecodeError: the decoder's words, the kind, the start of the body. A YAML
    # body fails converting to JSON (go-yaml's words); then the serializer looks for the apiVersion and
    # kind (meta.go's Interpret: "couldn't get version/kind; json parse error: …").
    kind = _SUBRESOURCE_KINDS.get(t.subresource or "", t.rt.kind)
    unrecognized = f"the object provided is unrecognized (must be of type {kind})"
    try:
        body = gojson.decode_body(raw, ctype)
    except (boundedyaml.ExcessiveAliasingError, boundedyaml.TooDeepError) as exc:
        raise errors.bad_request(f"{unrecognized}: {exc} ({summarize_data(raw)})") from exc
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"{unrecognized}: {go_yaml_error(exc)} ({summarize_data(raw)})") from exc
    except gojson.GoJSONError as exc:
        words = f"couldn't get version/kind; json parse error: {exc}"
        raise errors.bad_request(f"{unrecognized}: {words} ({summarize_data(raw)})") from exc
    try:
        _interpret(body)
    except gojson.GoJSONError as exc:
        words = f"couldn't get version/kind; json parse error: {exc}"
        raise errors.bad_request(f"{unrecognized}: {words} ({summarize_data(raw)})") from exc
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body


def write_options(q: MultiMapping[str]) -> WriteOptions:
    """The query parameters every write accepts (``dryRun`` may repeat)."""
    validation = q.get("fieldValidation") or "Warn"
    if validation not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f"fieldValidation must be one of Strict, Warn, Ignore: {validation!r}")
    dry_run = q.getall("dryRun", [])
    if any(v != "All" for v in dry_run):
        raise errors.bad_request('dryRun: Unsupported value: only "All" is supported')
    return WriteOptions(
        dry_run=bool(dry_run), field_manager=q.get("fieldManager"), field_validation=validation
    )


def _delete_options(request: ApiRequest) -> DeleteOptions:
    q = request.query
    body: dict[str, Any] = {}
    raw = _raw(request)
    if raw and request.content_type == PROTOBUF:
        body = protobuf.decode_delete_options(raw)
    elif raw.strip():
        try:
            decoded = gojson.loads(raw)
        except ValueError as exc:
            raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
        if isinstance(decoded, dict):
            body = decoded
    return delete_options(body, q, dry_run_values=q.getall("dryRun", []))

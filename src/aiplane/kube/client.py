"""KubeClient: a thin async interface of plain dicts over the Kubernetes API.

Controllers observe from informer caches and write little; what they write must be cheap and honest.
So the client speaks JSON dicts (no model (de)serialisation on hot paths, orjson for encoding), builds
paths from :class:`~aiplane.kube.resources.Resource`, limits its own request rate (QPS/burst, like
client-go) and retries 429s after the server's Retry-After. In-cluster configuration and the common
kubeconfigs (token or client certificate) are read by :mod:`aiplane.kube.kubeconfig`; kubernetes_asyncio,
whose import costs 37 MB, is imported only for kubeconfigs that need what it implements (exec plugins,
auth providers and their refresh, merged files). An aiohttp session configured as its own is the
transport.

**Liveness**: a connection can die without closing (a NAT or conntrack entry dropped, a load
balancer failing over: the packets go nowhere, no RST comes back), and a client waiting on it waits
forever. So every ordinary request has a deadline (``request_timeout``, default 30 s; client-go and
kubectl have none by default and rely on kube-apiserver ending a request after 60 s, which never reaches
a client on a dead connection), with its own connect deadline (``connect_timeout``, 10 s), and every socket has TCP keepalive (idle 30 s,
then 3 probes 10 s apart: a dead peer is found in about a minute even on an idle pooled connection).
A watch has no total deadline (it is meant to stay open), but the server's answer to it (the response
headers) must come within ``request_timeout``, and its read deadline is the informer's (nothing
received within a bound: see :mod:`aiplane.kube.informer`).

**Per request, nothing but the request.** The session does not ``trust_env``: with it, aiohttp reads
``~/.netrc`` and the proxy variables in a worker thread on *every* request (two thread hops per call, a
third of the operator's CPU in the runtime benchmark). The proxy is resolved once, when the client is
built, as client-go does (``http.ProxyFromEnvironment`` reads the environment once): the kubeconfig's
``proxy-url``, else ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY`` exempts the server. A
kubeconfig's credentials never came from netrc.

Two implementations share every verb: :class:`HttpKubeClient` (a real or embedded API server) and
``InMemoryKubeClient`` (``aiplane.sim.client``: the embedded server's verbs without HTTP, for fast tests).
"""

from __future__ import annotations

import abc
import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from aiplane.kube import kubeconfig
from aiplane.kube.ratelimit import TokenBucket
from aiplane.kube.resources import PODS, Resource

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = {"merge": MERGE_PATCH, "json": JSON_PATCH, "strategic": STRATEGIC_PATCH, "apply": APPLY_PATCH}

#: Deadlines of an ordinary request (seconds): the whole request, and the TCP/TLS connect within it.
DEFAULT_REQUEST_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 10.0


@dataclass(frozen=True)
class TcpKeepalive:
    """TCP keepalive on every API connection: probe after ``idle`` quiet seconds, every ``interval``
    seconds, give up after ``count`` unanswered probes (the kernel then fails the socket, and whatever
    waits on it gets an error instead of waiting forever)."""

    idle: int = 30
    interval: int = 10
    count: int = 3

    def configure(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        idle_option = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)
        for option, value in (
            (idle_option, self.idle),
            (getattr(socket, "TCP_KEEPINTVL", None), self.interval),
            (getattr(socket, "TCP_KEEPCNT", None), self.count),
        ):
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)

    def socket_factory(self, addr_info: tuple[Any, ...]) -> socket.socket:
        """aiohttp's ``TCPConnector(socket_factory=...)``: a new socket with keepalive set."""
        family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
        sock = socket.socket(family=family, type=type_, proto=proto)
        self.configure(sock)
        return sock


#: Called after every request with (verb, HTTP status or 0 for a transport error, host).
RequestObserver = Callable[[str, int, str], None]


class ApiError(Exception):
    """A failed API request: the server's ``Status`` (code, reason, message) or a transport failure."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body or {})
        self.retry_after = retry_after

    @classmethod
    def from_response(cls, status: int, raw: bytes, headers: Mapping[str, str]) -> ApiError:
        body: dict[str, Any] = {}
        try:
            decoded = orjson.loads(raw) if raw else {}
            if isinstance(decoded, dict):
                body = decoded
        except orjson.JSONDecodeError:
            pass
        retry_after: float | None = None
        header = headers.get("Retry-After")
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        reason = str(body.get("reason") or _REASONS.get(status, "Unknown"))
        message = str(body.get("message") or raw[:200].decode("utf-8", "replace"))
        return cls(status, reason, message, body, retry_after)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def invalid(self) -> bool:
        return self.status == 422

    @property
    def namespace_terminating(self) -> bool:
        """kube's NamespaceLifecycle admission refusing a create in a namespace being deleted: a 403,
        but no permission is missing (the namespace's deletion takes the object's owner with it)."""
        causes = (self.body.get("details") or {}).get("causes") or []
        # metav1.StatusCause serializes its Type as "reason".
        return self.status == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429

    @property
    def transient(self) -> bool:
        """Worth retrying with backoff: throttling, server errors, timeouts, lost connections, conflicts."""
        return self.status in (0, 409, 429, 500, 502, 503, 504) and not self.already_exists


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _query(**params: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None or value is False:
            continue
        out[key] = "true" if value is True else str(value)
    return out


class KubeClient(abc.ABC):
    """The verbs every controller uses, on plain dicts. Subclasses provide ``request`` and ``stream``."""

    #: Unknown fields in what we write are bugs: ask the server to reject them.
    field_validation = "Strict"

    @abc.abstractmethod
    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        """One API call; the decoded JSON response, or :class:`ApiError`.

        ``retry_throttled=False`` surfaces a 429 at once: for an eviction a 429 is an answer (a
        PodDisruptionBudget says no), not throttling to wait out.
        """

    @abc.abstractmethod
    def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch: decoded ``{"type", "object"}`` events until the server ends the stream.

        ``on_open`` is called once the server has accepted the watch (its 200, before any event): a
        watch of a quiet resource may then say nothing for minutes, and the caller still knows the
        server is there."""

    async def close(self) -> None:
        return None

    # --- reads ------------------------------------------------------------------------------------

    async def get(
        self, res: Resource, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> dict[str, Any]:
        return await self.request("GET", res.path(namespace, name, subresource))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        query = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            resourceVersion=resource_version,
        )
        if continue_token:
            query["continue"] = continue_token
        return await self.request("GET", res.path(namespace), query=query)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch of ``res`` (see :meth:`stream`)."""
        query = _query(
            watch=True,
            resourceVersion=resource_version,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            timeoutSeconds=timeout_seconds,
            allowWatchBookmarks=allow_bookmarks,
        )
        return self.stream(res.path(namespace), query, on_open=on_open)

    # --- writes -----------------------------------------------------------------------------------

    def _write_query(
        self, field_manager: str | None, dry_run: bool = False, force: bool | None = None
    ) -> dict[str, str]:
        query = _query(fieldManager=field_manager, fieldValidation=self.field_validation, force=force)
        if dry_run:
            query["dryRun"] = "All"
        return query

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return await self.request(
            "POST", res.path(ns), query=self._write_query(field_manager, dry_run), body=obj
        )

    async def replace(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        meta = obj["metadata"]
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        return await self.request("PUT", path, query=self._write_query(field_manager), body=obj)

    async def replace_status(
        self, res: Resource, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        return await self.replace(res, obj, subresource="status", field_manager=field_manager)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> dict[str, Any]:
        content_type = PATCH_TYPES[patch_type]
        query = self._write_query(field_manager, force=force)
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            query=query,
            body=patch,
            content_type=content_type,
        )

    async def apply(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (a full or partial object with apiVersion, kind and metadata.name)."""
        meta = obj["metadata"]
        return await self.patch(
            res,
            meta["name"],
            obj,
            namespace=meta.get("namespace"),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self.request("DELETE", res.path(namespace, name), body=options)

    async def evict(
        self, name: str, namespace: str, *, delete_options: Mapping[str, Any] | None = None
    ) -> None:
        """Evict a pod through the Eviction API; a PodDisruptionBudget in the way is ``ApiError`` 429."""
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if delete_options:
            body["deleteOptions"] = dict(delete_options)
        await self.request("POST", PODS.path(namespace, name, "eviction"), body=body, retry_throttled=False)

    async def served(self, res: Resource) -> bool:
        """Does the cluster serve ``res`` (an optional API: Volcano, LeaderWorkerSet, Istio)? A list of at
        most one object, cluster-wide: 404 means it does not. Controllers ask before they start an
        informer on such an API, because an informer on an unserved one never syncs and would hold
        every controller of the manager back."""
        try:
            await self.request("GET", res.path(None), query={"limit": "1"})
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True


def _kubernetes_config() -> tuple[Any, Any]:
    """kubernetes_asyncio's config loaders and a fresh ``Configuration``, imported on first use (see
    :mod:`aiplane.kube.kubeconfig`: the library's import cost is paid only for kubeconfigs that need it)."""
    from kubernetes_asyncio import config  # noqa: PLC0415
    from kubernetes_asyncio.client import Configuration  # noqa: PLC0415

    return config, Configuration()


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a byte stream (a watch: one JSON event per line). A chunk holding many
    events (a busy watch) is split once, not once per event (which copied its tail every time)."""
    parts: list[bytes] = []  # an unfinished line, possibly over many chunks (a large object)
    async for chunk in chunks:
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        parts.append(chunk)
        lines = b"".join(parts).split(b"\n")
        parts = [lines.pop()]
        for line in lines:
            if line.strip():
                yield line
    tail = b"".join(parts)
    if tail.strip():
        yield tail


def _proxy_for(configuration: Any, host: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy every request to ``host`` goes through (module docstring): resolved once."""
    if getattr(configuration, "proxy", None):
        return str(configuration.proxy), None
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:  # no proxy variable for the scheme, or NO_PROXY names the server
        return None, None
    return str(proxy), auth


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    """The TLS settings kubernetes_asyncio's ``RESTClientObject`` derives from a ``Configuration``."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


class HttpKubeClient(KubeClient):
    """The client for a real API server (or ``aiplane sim``), over an aiohttp session configured as
    kubernetes_asyncio's (TLS, pool size, read buffer), plus deadlines and TCP keepalive (module
    docstring). ``request_timeout``/``connect_timeout`` of ``None`` disable that deadline."""

    def __init__(
        self,
        configuration: Any,
        *,
        qps: float = 50.0,
        burst: int = 100,
        max_throttle_retries: int = 5,
        observer: RequestObserver | None = None,
        user_agent: str = "aiplane",
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        keepalive: TcpKeepalive | None = TcpKeepalive(),
    ) -> None:
        self.configuration = configuration
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        connector = aiohttp.TCPConnector(
            limit=configuration.connection_pool_maxsize,
            ssl=_ssl_context(configuration),
            socket_factory=keepalive.socket_factory if keepalive is not None else None,
        )
        # Watch events of large objects exceed aiohttp's default read buffer (etcd allows 1.5 MiB).
        # No trust_env: it costs two thread hops per request; the proxy is resolved here, once.
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21)
        self._timeout = aiohttp.ClientTimeout(total=request_timeout, sock_connect=connect_timeout)
        self._watch_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=None)
        self._host = str(configuration.host).rstrip("/")
        self.proxy, self._proxy_auth = _proxy_for(configuration, self._host)
        self._bucket = TokenBucket(qps, burst) if qps != float("inf") else None
        self._max_retries = max_throttle_retries
        self._observer = observer
        self._user_agent = user_agent

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, **kw: Any
    ) -> HttpKubeClient:
        configuration: Any = kubeconfig.from_kubeconfig(path, context)
        if configuration is None:  # exec plugins, auth providers, merged files: kubernetes_asyncio's loader
            config, configuration = _kubernetes_config()
            await config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration
            )
        return cls(configuration, **kw)

    @classmethod
    def in_cluster(cls, **kw: Any) -> HttpKubeClient:
        return cls(kubeconfig.in_cluster(), **kw)

    @property
    def host(self) -> str:
        return self._host

    async def close(self) -> None:
        await self._session.close()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self._user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        auth = await self.configuration.auth_settings()
        for setting in auth.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def _observe(self, method: str, status: int) -> None:
        if self._observer is not None:
            self._observer(method, status, self._host)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        url = self._host + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        attempt = 0
        while True:
            if self._bucket is not None:
                await self._bucket.acquire()
            headers = await self._headers(content_type if data is not None else None)
            try:
                async with self._session.request(
                    method,
                    url,
                    data=data,
                    headers=headers,
                    timeout=self._timeout,
                    proxy=self.proxy,
                    proxy_auth=self._proxy_auth,
                ) as resp:
                    raw = await resp.read()
                    self._observe(method, resp.status)
                    if resp.status < 400:
                        decoded = orjson.loads(raw) if raw else {}
                        return decoded if isinstance(decoded, dict) else {"items": decoded}
                    error = ApiError.from_response(resp.status, raw, resp.headers)
            except TimeoutError as exc:  # aiohttp's ServerTimeoutError is one too
                self._observe(method, 0)
                raise ApiError(
                    0, "Timeout", f"{method} {path}: no answer within {self.request_timeout} s"
                ) from exc
            except aiohttp.ClientError as exc:
                self._observe(method, 0)
                raise ApiError(0, "ConnectionError", f"{method} {path}: {type(exc).__name__}: {exc}") from exc
            if error.too_many_requests and retry_throttled and attempt < self._max_retries:
                attempt += 1
                await asyncio.sleep(error.retry_after if error.retry_after is not None else 1.0)
                continue
            raise error

    async def stream(
        self, path: str, query: Mapping[str, str], *, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        url = self._host + path + f"?{urlencode(query)}"
        if self._bucket is not None:
            await self._bucket.acquire()
        headers = await self._headers(None)
        # The server's answer (the response headers, or an error) within the request deadline; then
        # none: a watch of a quiet resource is silent for minutes (the informer's read deadline).
        answer = asyncio.timeout(self.request_timeout)
        try:
            async with (
                answer,
                self._session.get(
                    url,
                    headers=headers,
                    timeout=self._watch_timeout,
                    proxy=self.proxy,
                    proxy_auth=self._proxy_auth,
                ) as resp,
            ):
                self._observe("WATCH", resp.status)
                if resp.status >= 400:
                    raise ApiError.from_response(resp.status, await resp.read(), resp.headers)
                answer.reschedule(None)
                if on_open is not None:
                    on_open()
                async for line in _lines(resp.content.iter_any()):
                    yield orjson.loads(line)
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._observe("WATCH", 0)
            if answer.expired():
                raise ApiError(
                    0, "Timeout", f"watch {path}: no answer within {self.request_timeout} s"
                ) from exc
            raise ApiError(0, "ConnectionError", f"watch {path}: {type(exc).__name__}: {exc}") from exc

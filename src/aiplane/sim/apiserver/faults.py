"""Fault injection: make the embedded API server slow, failing or forgetful on purpose.

Reliability tests (controllers' retries, informers' re-watch, client backoff) need the failures a
real cluster produces now and then: latency, 429 with ``Retry-After`` from API priority and fairness,
500s, 409 conflicts on a write, watches that end. A *rule* matches requests by verb, resource and
namespace, and says what happens to the matching ones (all, the n-th, the next N …).

Three ways to program it, all the same rules:

* Python: ``handle = server.faults.add(verb="patch", resource="pods", error=500, nth=3)``;
  ``handle.remove()``, ``server.faults.clear()``, ``server.faults.close_watches("pods")``.
* CLI: ``aiplane sim --fault verb=patch,resource=pods,error=500,count=3`` (``add_spec``).
* HTTP, behind the cluster's bearer token: ``POST /_sim/faults`` with ``{"spec": "…"}`` or the fields
  as JSON, ``GET /_sim/faults``, ``DELETE /_sim/faults[/ID]``, ``POST /_sim/faults/close-watches``.

Spec grammar (``key=value`` pairs separated by commas)::

    verb=get|list|watch|create|update|patch|delete|deletecollection|write|*   (several with "|")
    resource=PLURAL[.GROUP][/SUBRESOURCE|/*]        (PLURAL alone: any group; no /: main resource)
    namespace=NS
    latency=SECONDS            delay matching requests
    error=CODE                 answer CODE (400 403 404 409 410 429 500 503 504 …) with kube's Status
    retry-after=SECONDS        the Retry-After of a 429/503 (default 1)
    message=TEXT               the Status message (no commas)
    close-watches=SECONDS      matching watches end SECONDS after they start
    count=N                    apply to N matching requests (default: all)
    nth=K                      start at the K-th matching request (nth=3 alone: only the 3rd)
    after=K                    skip the first K matching requests
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiplane.sim.apiserver import errors, gojson
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, json_response
from aiplane.sim.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from types import TracebackType

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class WatchLike(Protocol):
    """What faults need of an open watch (``watch.WatchSession``)."""

    rt: ResourceType
    namespace: str | None

    def close(self, reason: str = ...) -> None: ...

    def close_after(self, seconds: float) -> None: ...


@dataclass(frozen=True)
class ResourceMatch:
    """``PLURAL[.GROUP][/SUB]``: which resource (and subresource) a rule is about."""

    plural: str
    group: str | None = None
    subresource: str | None = None  # None: the main resource only; "*": any

    @classmethod
    def parse(cls, text: str) -> ResourceMatch:
        base, slash, sub = text.partition("/")
        plural, dot, group = base.partition(".")
        if not plural or (slash and not sub) or (dot and not group):
            raise ValueError(f"invalid resource {text!r}: expected PLURAL[.GROUP][/SUBRESOURCE]")
        return cls(plural, group if dot else None, sub if slash else None)

    def matches(self, rt: ResourceType, subresource: str | None) -> bool:
        if self.plural not in ("*", rt.plural):
            return False
        if self.group is not None and self.group != rt.group:
            return False
        return self.subresource in ("*", subresource)

    def __str__(self) -> str:
        text = self.plural + (f".{self.group}" if self.group else "")
        return text + (f"/{self.subresource}" if self.subresource else "")


@dataclass
class FaultRule:
    """One rule. ``matched`` counts matching requests seen, ``applied`` the ones it acted on."""

    id: str
    verbs: frozenset[str] | None = None
    resource: ResourceMatch | None = None
    namespace: str | None = None
    latency: float = 0.0
    error: int | None = None
    retry_after: int = 1
    message: str | None = None
    close_watches: float | None = None
    count: int | None = None
    after: int = 0
    matched: int = 0
    applied: int = 0

    def matches(self, verb: str, rt: ResourceType, subresource: str | None, namespace: str | None) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        if self.resource is not None and not self.resource.matches(rt, subresource):
            return False
        return self.namespace is None or self.namespace == namespace

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.applied >= self.count

    def take(self) -> bool:
        """Count one matching request; whether the fault applies to it."""
        self.matched += 1
        if self.matched <= self.after or self.exhausted:
            return False
        self.applied += 1
        return True

    def spec(self) -> str:
        parts: list[str] = []
        if self.verbs is not None:
            parts.append("verb=" + "|".join(v for v in VERBS if v in self.verbs))
        if self.resource is not None:
            parts.append(f"resource={self.resource}")
        if self.namespace is not None:
            parts.append(f"namespace={self.namespace}")
        if self.latency:
            parts.append(f"latency={self.latency:g}")
        if self.error is not None:
            parts.append(f"error={self.error}")
            if self.error in (429, 503):
                parts.append(f"retry-after={self.retry_after}")
        if self.message is not None:
            parts.append(f"message={self.message}")
        if self.close_watches is not None:
            parts.append(f"close-watches={self.close_watches:g}")
        if self.after:
            parts.append(f"after={self.after}")
        if self.count is not None:
            parts.append(f"count={self.count}")
        return ",".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "spec": self.spec(),
            "matched": self.matched,
            "applied": self.applied,
            "exhausted": self.exhausted,
        }

    def api_error(self, verb: str, rt: ResourceType, name: str | None) -> ApiError:
        """The error kube would send for this code, with ``message`` if the rule has one."""
        code = self.error or 500
        msg = self.message
        target = name or ""
        if code == 409:
            err = errors.conflict(rt.plural, rt.group, target, msg or errors.MODIFIED)
        elif code == 429:
            err = errors.too_many_requests(
                msg or "Too many requests, please try again later.", self.retry_after
            )
        elif code == 500:
            err = errors.internal(msg or "injected fault")
        elif code == 404 and target:
            err = errors.not_found(rt.plural, rt.group, target)
        elif code == 403:
            err = errors.forbidden(rt.plural, rt.group, target, msg or "injected fault")
        elif code == 503:
            err = ApiError(
                503,
                "ServiceUnavailable",
                msg or "the server is currently unable to handle the request",
                details={"retryAfterSeconds": self.retry_after},
                headers={"Retry-After": str(self.retry_after)},
            )
        elif code == 504:
            err = ApiError(
                504,
                "Timeout",
                msg or "Timeout: request did not complete within the allotted timeout",
                details={"retryAfterSeconds": self.retry_after},
            )
        else:
            err = ApiError(code, _REASONS.get(code, ""), msg or f"injected fault: {code}")
        return err


class FaultHandle:
    """What :meth:`Faults.add` returns: remove the rule with it (also a context manager)."""

    def __init__(self, faults: Faults, rule: FaultRule) -> None:
        self.faults = faults
        self.rule = rule

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def matched(self) -> int:
        return self.rule.matched

    @property
    def applied(self) -> int:
        return self.rule.applied

    def remove(self) -> bool:
        return self.faults.remove(self.rule.id)

    def __enter__(self) -> FaultHandle:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<fault {self.rule.id}: {self.rule.spec()}>"


_KEYS = {
    "verb": "verb",
    "verbs": "verb",
    "resource": "resource",
    "namespace": "namespace",
    "ns": "namespace",
    "latency": "latency",
    "error": "error",
    "retry-after": "retry_after",
    "retryafter": "retry_after",
    "retry_after": "retry_after",
    "message": "message",
    "close-watches": "close_watches",
    "closewatches": "close_watches",
    "close_watches": "close_watches",
    "count": "count",
    "nth": "nth",
    "after": "after",
}


def parse_spec(spec: str) -> dict[str, Any]:
    """``verb=patch,resource=pods,error=500,count=3`` as keyword arguments of :meth:`Faults.add`."""
    out: dict[str, Any] = {}
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        name = _KEYS.get(key.strip().lower())
        if not eq or name is None:
            raise ValueError(f"expected KEY=VALUE with KEY one of {', '.join(sorted(set(_KEYS)))}: {part!r}")
        value = value.strip()
        if name in out:
            raise ValueError(f"{key} given twice")
        out[name] = value
    if not out:
        raise ValueError("an empty fault spec")
    return out


def _number(name: str, value: Any, kind: type[int] | type[float]) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number: {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must not be negative: {value!r}")
    return number


class Faults:
    """The rules of one API server, and the watches they may close."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._watches: set[WatchLike] = set()

    # --- programming ----------------------------------------------------------------------------------

    def add(
        self,
        *,
        verb: str | Iterable[str] | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        latency: float | str = 0.0,
        error: int | str | None = None,
        retry_after: int | str = 1,
        message: str | None = None,
        close_watches: float | str | None = None,
        count: int | str | None = None,
        nth: int | str | None = None,
        after: int | str = 0,
    ) -> FaultHandle:
        """Add a rule; see the module docstring for what each argument means."""
        verbs = self._verbs(verb)
        match = ResourceMatch.parse(resource) if resource and resource != "*" else None
        lat = float(_number("latency", latency, float))
        code = int(_number("error", error, int)) if error is not None else None
        if code is not None and not 400 <= code <= 599:
            raise ValueError(f"error must be an HTTP error code (400-599): {code}")
        close = float(_number("close-watches", close_watches, float)) if close_watches is not None else None
        skip = int(_number("after", after, int))
        limit = int(_number("count", count, int)) if count is not None else None
        if nth is not None:
            k = int(_number("nth", nth, int))
            if k < 1:
                raise ValueError("nth counts from 1")
            skip += k - 1
            limit = 1 if limit is None else limit
        if close is not None:
            if verbs is not None and verbs != frozenset({"watch"}):
                raise ValueError("close-watches applies to watches: leave verb out or use verb=watch")
            if lat or code is not None:
                raise ValueError("close-watches cannot be combined with latency or error in one rule")
            verbs = frozenset({"watch"})
        elif not lat and code is None:
            raise ValueError("a fault needs an action: latency, error or close-watches")
        rule = FaultRule(
            id=f"f{next(self._ids)}",
            verbs=verbs,
            resource=match,
            namespace=namespace or None,
            latency=lat,
            error=code,
            retry_after=int(_number("retry-after", retry_after, int)),
            message=message or None,
            close_watches=close,
            count=limit,
            after=skip,
        )
        with self._lock:
            self._rules.append(rule)
        return FaultHandle(self, rule)

    @staticmethod
    def _verbs(verb: str | Iterable[str] | None) -> frozenset[str] | None:
        if verb is None:
            return None
        items = verb.split("|") if isinstance(verb, str) else list(verb)
        out: set[str] = set()
        for item in (i.strip().lower() for i in items):
            if item in ("*", "", "any"):
                return None
            if item == "write":
                out.update(WRITE_VERBS)
            elif item in VERBS:
                out.add(item)
            else:
                raise ValueError(f"unknown verb {item!r}: one of {', '.join(VERBS)}, write or *")
        return frozenset(out)

    def add_spec(self, spec: str) -> FaultHandle:
        """Add a rule from a ``--fault`` string (``ValueError`` explains what is wrong with it)."""
        return self.add(**parse_spec(spec))

    def remove(self, rule_id: str) -> bool:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) != before

    def clear(self) -> int:
        with self._lock:
            removed = len(self._rules)
            self._rules = []
            return removed

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    # --- applying -------------------------------------------------------------------------------------

    def _take(
        self, verb: str, rt: ResourceType, subresource: str | None, namespace: str | None
    ) -> list[FaultRule]:
        if not self._rules:
            return []
        with self._lock:
            return [
                r
                for r in self._rules
                if r.close_watches is None and r.matches(verb, rt, subresource, namespace) and r.take()
            ]

    async def before(
        self,
        verb: str,
        rt: ResourceType,
        subresource: str | None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> None:
        """Called before every resource request: sleep and/or raise what the matching rules say."""
        if not self._rules:
            return
        applied = self._take(verb, rt, subresource, namespace)
        delay = sum(r.latency for r in applied)
        if delay:
            await asyncio.sleep(delay)
        for rule in applied:
            if rule.error is not None:
                raise rule.api_error(verb, rt, name)

    def watch_opened(self, session: WatchLike) -> None:
        """A watch started: remember it, and schedule its end if a close-watches rule says so."""
        with self._lock:
            self._watches.add(session)
            rules = [
                r
                for r in self._rules
                if r.close_watches is not None
                and r.matches("watch", session.rt, None, session.namespace)
                and r.take()
            ]
        for rule in rules:
            assert rule.close_watches is not None
            session.close_after(rule.close_watches)

    def watch_closed(self, session: WatchLike) -> None:
        with self._lock:
            self._watches.discard(session)

    def close_watches(self, resource: str | None = None, namespace: str | None = None) -> int:
        """End the open watches of ``resource`` (``PLURAL[.GROUP]``; all if ``None``) now."""
        match = ResourceMatch.parse(resource) if resource and resource != "*" else None
        with self._lock:
            sessions = list(self._watches)
        closed = 0
        for session in sessions:
            if match is not None and not (
                match.plural == session.rt.plural and match.group in (None, session.rt.group)
            ):
                continue
            if namespace is not None and session.namespace != namespace:
                continue
            session.close("closed by a fault")
            closed += 1
        return closed

    # --- HTTP ------------------------------------------------------------------------------------------


_FIELDS = {
    "verb": "verb",
    "resource": "resource",
    "namespace": "namespace",
    "latency": "latency",
    "error": "error",
    "retryAfter": "retry_after",
    "message": "message",
    "closeWatches": "close_watches",
    "count": "count",
    "nth": "nth",
    "after": "after",
}


def _json_body(request: ApiRequest) -> dict[str, Any]:
    raw = request.body
    if not raw.strip():
        return {}
    try:
        body = gojson.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from None
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body


#: Faults of the simulated agents (``server.agents``, set by ``EmbeddedCluster(agents=True)``):
#: ``POST /_sim/faults/<name>`` with the fields, answered with the object as written.
_AGENT_FAULTS = ("restart-container", "fail-pod", "node-ready")


def _agent_fault(agents: Any, name: str, body: dict[str, Any]) -> Any:
    if agents is None:
        raise ApiError(
            409, "Conflict", "the simulated agents are not running (start the cluster with agents)"
        )
    kubelet = agents.kubelet
    allowed = {
        "restart-container": {"namespace", "pod", "container", "notReadyFor", "exitCode", "reason"},
        "fail-pod": {"namespace", "pod", "exitCode", "reason", "message"},
        "node-ready": {"node", "ready"},
    }[name]
    unknown = set(body) - allowed
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}: expected {sorted(allowed)}")
    if name == "node-ready":
        if "node" not in body or body.get("ready") not in (True, False, "True", "False", "Unknown"):
            raise ValueError('give "node" and "ready": true, false or "Unknown"')
        ready = body["ready"] in (True, "True")
        return kubelet.set_node_ready(str(body["node"]), ready, unknown=body["ready"] == "Unknown")
    if "pod" not in body:
        raise ValueError('give "pod" (and "namespace", default "default")')
    namespace, pod = str(body.get("namespace") or "default"), str(body["pod"])
    exit_code = int(body.get("exitCode", 1))
    reason = str(body.get("reason") or "Error")
    if name == "restart-container":
        return kubelet.restart_container(
            namespace,
            pod,
            body.get("container"),
            not_ready_for=float(body.get("notReadyFor", 1.0)),
            exit_code=exit_code,
            reason=reason,
        )
    return kubelet.fail_pod(namespace, pod, exit_code=exit_code, reason=reason, message=body.get("message"))


def _add(faults: Faults, body: dict[str, Any]) -> ApiResponse:
    if "spec" in body:
        if len(body) != 1:
            raise ValueError("give either spec or the fields, not both")
        handle = faults.add_spec(str(body["spec"]))
    else:
        unknown = set(body) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}: expected {sorted(_FIELDS)}")
        handle = faults.add(**{_FIELDS[k]: v for k, v in body.items()})
    return json_response(handle.rule.to_dict(), status=201)


def _rules(faults: Faults, request: ApiRequest) -> ApiResponse:
    """``/_sim/faults``: list, add or clear the rules."""
    if request.method == "GET":
        return json_response({"kind": "FaultList", "items": [r.to_dict() for r in faults.rules]})
    if request.method == "POST":
        return _add(faults, _json_body(request))
    if request.method == "DELETE":
        return json_response({"removed": faults.clear()})
    raise errors.method_not_allowed()


def _named(faults: Faults, agents: Any, request: ApiRequest, name: str) -> ApiResponse:
    """``/_sim/faults/<name>``: an agent fault, closing watches, or one rule."""
    method = request.method
    if name in _AGENT_FAULTS and method == "POST":
        return json_response(_agent_fault(agents, name, _json_body(request)))
    if name == "close-watches" and method == "POST":
        body = _json_body(request)
        return json_response({"closed": faults.close_watches(body.get("resource"), body.get("namespace"))})
    if method == "GET":
        rule = next((r for r in faults.rules if r.id == name), None)
        if rule is None:
            raise ApiError(404, "NotFound", f'fault "{name}" not found')
        return json_response(rule.to_dict())
    if method == "DELETE":
        if not faults.remove(name):
            raise ApiError(404, "NotFound", f'fault "{name}" not found')
        return json_response({"removed": 1})
    raise errors.method_not_allowed()


def handle_http(faults: Faults, agents: Any, request: ApiRequest) -> ApiResponse:
    """``/_sim/faults``: the same rules over HTTP, for tests that run the cluster in another process."""
    parts = request.parts
    if parts[:2] != ("_sim", "faults") or len(parts) > 3:
        raise errors.not_found_path()
    try:
        if len(parts) == 2:
            return _rules(faults, request)
        return _named(faults, agents, request, parts[2])
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from None

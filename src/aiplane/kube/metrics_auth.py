"""``/metrics`` behind the API server's authentication and authorization (``--metrics-secure``).

controller-runtime protects its metrics endpoint by default (``filters.WithAuthenticationAndAuthorization``):
the request's bearer token is reviewed by the API server (a TokenReview), and the user it names must be
allowed ``get`` on the non-resource URL ``/metrics`` (a SubjectAccessReview). So reading the operator's
metrics takes a token of someone an RBAC rule lets read them — the chart's ``<release>-metrics-reader``
ClusterRole, bound to Prometheus' ServiceAccount — and reaching the port is not enough.

Answers are cached as the delegating authenticator and authorizer do (a token for a minute, an allowed
decision for five, a denied one for 30 seconds), so a scrape every few seconds costs the API server two
reviews a few times an hour, not two per scrape. The operator needs ``create`` on ``tokenreviews``
and ``subjectaccessreviews`` (:data:`aiplane.kube.rbac.METRICS_AUTH`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.logging import get_logger
from aiplane.kube.resources import Resource

__all__ = ["SUBJECTACCESSREVIEWS", "TOKENREVIEWS", "Denied", "MetricsAuth"]

TOKENREVIEWS: Final = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
SUBJECTACCESSREVIEWS: Final = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)

_log = get_logger("aiplane.metrics")


@dataclass(frozen=True)
class Denied:
    """The HTTP answer to a request that may not read the metrics (controller-runtime's texts)."""

    status: int
    message: str


@dataclass(frozen=True)
class _User:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


class MetricsAuth:
    """Reviews each request's bearer token and its user's permission through the API server."""

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        authn_ttl: float = 60.0,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
    ) -> None:
        self.client = client
        self._clock = clock
        self._authn_ttl = authn_ttl
        self._allow_ttl = allow_ttl
        self._deny_ttl = deny_ttl
        self._tokens: dict[str, tuple[float, _User | None]] = {}
        self._decisions: dict[tuple[_User, str, str], tuple[float, bool]] = {}

    async def check(self, authorization: str, path: str, verb: str = "get") -> Denied | None:
        """``None`` when the request may proceed, else the answer to send."""
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Denied(401, "Unauthorized")
        try:
            user = await self._authenticate(token)
        except ApiError as exc:
            _log.error("metrics: authentication failed", error=str(exc))
            return Denied(500, "Authentication failed")
        if user is None:
            return Denied(401, "Unauthorized")
        try:
            allowed = await self._authorize(user, path, verb)
        except ApiError as exc:
            message = f"Authorization for user {user.name} failed"
            _log.error(f"metrics: {message}", error=str(exc))
            return Denied(500, message)
        return None if allowed else Denied(403, f"Authorization denied for user {user.name}")

    async def _authenticate(self, token: str) -> _User | None:
        now = self._clock()
        cached = self._tokens.get(token)
        if cached is not None and now - cached[0] < self._authn_ttl:
            return cached[1]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = (await self.client.create(TOKENREVIEWS, review)).get("status") or {}
        user: _User | None = None
        if status.get("authenticated"):
            info: dict[str, Any] = status.get("user") or {}
            extra = tuple(sorted((str(k), tuple(v)) for k, v in (info.get("extra") or {}).items()))
            user = _User(
                str(info.get("username", "")),
                str(info.get("uid", "")),
                tuple(info.get("groups") or ()),
                extra,
            )
        self._remember(self._tokens, token, (now, user))
        return user

    async def _authorize(self, user: _User, path: str, verb: str) -> bool:
        now = self._clock()
        key = (user, path, verb)
        cached = self._decisions.get(key)
        if cached is not None and now - cached[0] < (self._allow_ttl if cached[1] else self._deny_ttl):
            return cached[1]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        status = (await self.client.create(SUBJECTACCESSREVIEWS, review)).get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self._remember(self._decisions, key, (now, allowed))
        return allowed

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
        if len(cache) >= 1024:  # bounded: a flood of distinct tokens must not grow memory
            cache.clear()
        cache[key] = value

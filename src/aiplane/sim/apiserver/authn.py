"""Who a request comes from: the admin token, ServiceAccount tokens, or nobody (anonymous).

kube-apiserver authenticates a bearer token into a user (name, groups); authorization then decides
on that user alone. The embedded server does the same with two kinds of token:

* the cluster's admin token (the admin kubeconfig's), user ``kubernetes-admin`` in ``system:masters``
  — the privileged group kube-apiserver allows everything, whatever the authorizer says;
* ServiceAccount tokens minted by the TokenRequest subresource (``kubectl create token``): a JWT whose
  ``sub`` is ``system:serviceaccount:<ns>:<name>``, authenticated as that user with the groups kube
  gives every ServiceAccount. Like kube's bound tokens they stop working when they expire or when the
  ServiceAccount is deleted (or recreated: the token names the uid it was minted for). They are signed
  with HS256 and a per-server key rather than kube's RS256 keys; only this server verifies them.

A request without credentials is ``system:anonymous`` (group ``system:unauthenticated``), as with
kube-apiserver's default ``--anonymous-auth=true``; an unknown or expired token is a 401.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import Api

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
SA_PREFIX = "system:serviceaccount:"
SA_GROUP = "system:serviceaccounts"
#: The audience kube-apiserver's tokens carry by default (its --api-audiences = the issuer).
AUDIENCE = "https://kubernetes.default.svc.cluster.local"
#: kube's bounds on TokenRequest.spec.expirationSeconds (10 minutes … 2^32 seconds); default one hour.
MIN_TOKEN_SECONDS = 600
MAX_TOKEN_SECONDS = 1 << 32
DEFAULT_TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class UserInfo:
    """An authenticated (or anonymous) user: what RBAC subjects are matched against."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def to_json(self) -> dict[str, Any]:
        """As kube writes ``user`` in audit events and access reviews."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        return out


ADMIN = UserInfo("kubernetes-admin", (MASTERS, AUTHENTICATED))
ANONYMOUS = UserInfo("system:anonymous", (UNAUTHENTICATED,))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a ServiceAccount's token authenticates as (kube's ``serviceaccount.UserInfo``)."""
    return UserInfo(
        f"{SA_PREFIX}{namespace}:{name}", (SA_GROUP, f"{SA_GROUP}:{namespace}", AUTHENTICATED), uid
    )


def split_service_account(username: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a ``system:serviceaccount:<ns>:<name>`` user name, else ``None``."""
    if not username.startswith(SA_PREFIX):
        return None
    namespace, sep, name = username[len(SA_PREFIX) :].partition(":")
    return (namespace, name) if sep and namespace and name and ":" not in name else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenIssuer:
    """Mints and verifies this server's ServiceAccount tokens (a key per server: tokens of one
    embedded cluster mean nothing to another)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _sign(self, signing_input: str) -> str:
        return _b64(hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest())

    def mint(
        self, sa: dict[str, Any], now: datetime.datetime, seconds: int, audiences: list[str]
    ) -> tuple[str, datetime.datetime]:
        """A token for ServiceAccount ``sa`` valid ``seconds`` from ``now``, and when it expires."""
        meta = sa["metadata"]
        issued = int(now.timestamp())
        expires = issued + seconds
        claims = {
            "aud": audiences,
            "exp": expires,
            "iat": issued,
            "nbf": issued,
            "iss": AUDIENCE,
            "jti": secrets.token_hex(16),
            "sub": f"{SA_PREFIX}{meta.get('namespace')}:{meta['name']}",
            "kubernetes.io": {
                "namespace": meta.get("namespace"),
                "serviceaccount": {"name": meta["name"], "uid": meta.get("uid")},
            },
        }
        signing_input = f"{_b64(orjson.dumps({'alg': 'HS256', 'typ': 'JWT'}))}.{_b64(orjson.dumps(claims))}"
        token = f"{signing_input}.{self._sign(signing_input)}"
        return token, datetime.datetime.fromtimestamp(expires, tz=datetime.UTC)

    def verify(self, token: str, api: Api) -> UserInfo | None:
        """The ServiceAccount user ``token`` authenticates, or ``None`` (bad signature, expired, or
        not for this API server's audience, or the ServiceAccount gone or recreated since)."""
        head, dot, signature = token.rpartition(".")
        if not dot or not hmac.compare_digest(self._sign(head), signature):
            return None
        try:
            claims = orjson.loads(_unb64(head.partition(".")[2]))
            info = claims["kubernetes.io"]
            namespace, name, uid = (
                info["namespace"],
                info["serviceaccount"]["name"],
                info["serviceaccount"]["uid"],
            )
            expires = int(claims["exp"])
            audiences = claims["aud"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if api.clock().timestamp() >= expires or AUDIENCE not in audiences:
            return None  # expired, or meant for another audience (``kubectl create token --audience``)
        sa = api.store.get("/serviceaccounts", namespace, name)
        if sa is None or sa["metadata"].get("uid") != uid or sa["metadata"].get("deletionTimestamp"):
            return None
        return service_account_user(namespace, name, uid or "")


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def authenticate(authorization: str, admin_token: str, tokens: TokenIssuer, api: Api) -> UserInfo:
    """The user of a request's ``Authorization`` header; 401 for a bearer token nobody issued."""
    if not authorization:
        return ANONYMOUS
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise unauthorized()
    if hmac.compare_digest(token.encode(), admin_token.encode()):
        return ADMIN
    user = tokens.verify(token, api)
    if user is None:
        raise unauthorized()
    return user

"""Access control of one embedded API server: authentication, the authorization mode, the audit log,
and ``SelfSubjectAccessReview`` (``kubectl auth can-i``).

Both front doors use it: the HTTP middleware for every request (health, discovery, OpenAPI and
``/_sim`` included), and :class:`~aiplane.sim.client.InMemoryKubeClient` for a client given a user —
so an operator running in-process as its ServiceAccount is authorized and audited exactly as over HTTP.

``AlwaysAllow`` (the default) allows every authenticated request, as ``--authorization-mode=AlwaysAllow``;
``RBAC`` authorizes as kube-apiserver's ``--authorization-mode=RBAC`` (``rbac.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from aiplane.apimachinery import field as fe
from aiplane.sim.apiserver import authn, errors, gojson, protobuf, rbac
from aiplane.sim.apiserver.audit import AuditLog
from aiplane.sim.apiserver.authn import TokenIssuer, UserInfo
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, json_response
from aiplane.sim.apiserver.rest import Api

ALWAYS_ALLOW = "AlwaysAllow"
RBAC = "RBAC"
MODES = (ALWAYS_ALLOW, RBAC)
AUTHZ_GROUP = "authorization.k8s.io"
_REVIEWS: dict[tuple[str, ...], str] = {
    ("apis", AUTHZ_GROUP, "v1", "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    ("apis", AUTHZ_GROUP, "v1", "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
    ("apis", "authentication.k8s.io", "v1", "selfsubjectreviews"): "SelfSubjectReview",
    # What a delegating server asks (controller-runtime's protected /metrics, kube-rbac-proxy): who is
    # this bearer token, and may that user do this? The requester needs ``create`` on each.
    ("apis", "authentication.k8s.io", "v1", "tokenreviews"): "TokenReview",
    ("apis", AUTHZ_GROUP, "v1", "subjectaccessreviews"): "SubjectAccessReview",
}
_AUTHN_KINDS = ("SelfSubjectReview", "TokenReview")
_PROTOBUF = "application/vnd.kubernetes.protobuf"
APPLY_PATCH = "application/apply-patch+yaml"


class Access:
    """Who may do what on one server, and the record of what they did."""

    def __init__(
        self, api: Api, admin_token: str, *, mode: str = ALWAYS_ALLOW, audit: AuditLog | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown authorization mode {mode!r}: one of {', '.join(MODES)}")
        self.api = api
        self.admin_token = admin_token
        self.mode = mode
        self.tokens = TokenIssuer()
        self.rbac = rbac.RbacAuthorizer(api.store)
        self.audit = audit if audit is not None else AuditLog()

    def authenticate(self, authorization: str) -> UserInfo:
        """The user of an ``Authorization`` header (anonymous without one); 401 for a bad token."""
        return authn.authenticate(authorization, self.admin_token, self.tokens, self.api)

    def impersonate(self, requestor: UserInfo, headers: Any) -> UserInfo:
        """The user a request acts as: ``Impersonate-User``/``Impersonate-Group`` (``kubectl --as``,
        ``--as-group``), each authorized as kube's impersonation filter does (verb ``impersonate`` on
        ``users``, ``groups`` or, for a ServiceAccount user name, ``serviceaccounts`` in its namespace);
        the requestor itself without those headers."""
        name = headers.get("Impersonate-User", "")
        getall = getattr(headers, "getall", None)
        groups = list(getall("Impersonate-Group", [])) if getall else []
        if not name:
            if groups:
                raise errors.bad_request(f"requested {groups} without impersonating a user")
            return requestor
        # Only what the headers ask for is authorized; a ServiceAccount's implied groups are not.
        targets = [rbac.Attributes("impersonate", True, resource="groups", name=g) for g in groups]
        service_account = authn.split_service_account(name)
        if service_account is not None:
            namespace, sa_name = service_account
            targets.insert(
                0,
                rbac.Attributes(
                    "impersonate", True, namespace=namespace, resource="serviceaccounts", name=sa_name
                ),
            )
            groups = groups or [authn.SA_GROUP, f"{authn.SA_GROUP}:{namespace}"]
        else:
            targets.insert(0, rbac.Attributes("impersonate", True, resource="users", name=name))
        for attrs in targets:
            decision = self.authorize(requestor, attrs)
            if not decision.allowed:
                raise rbac.forbidden(requestor, attrs, decision.reason)
        if name == authn.ANONYMOUS.name:
            return authn.UserInfo(name, tuple(dict.fromkeys([*groups, authn.UNAUTHENTICATED])))
        return authn.UserInfo(
            name, tuple(dict.fromkeys([*groups, authn.AUTHENTICATED])), headers.get("Impersonate-Uid", "")
        )

    def authorize(self, user: UserInfo, attrs: rbac.Attributes) -> rbac.Decision:
        if self.mode == ALWAYS_ALLOW:
            return rbac.Decision(True)
        return self.rbac.authorize(user, attrs)

    def admit(
        self, user: UserInfo, method: str, path: str, query: Mapping[str, str], content_type: str = ""
    ) -> tuple[rbac.Attributes, rbac.Decision, ApiError | None]:
        """The request's attributes, the decision, and the 403 to answer if denied.

        A server-side apply that would create the object needs ``create`` too: kube's patch handler
        authorizes the create (``withAuthorization``) and refuses it with ``NewForbidden(resource, name,
        reason)`` — a message ending in ``is forbidden: `` and RBAC's (usually empty) reason.
        """
        attrs = rbac.attributes(method, path, query)
        decision = self.authorize(user, attrs)
        if not decision.allowed:
            return attrs, decision, rbac.forbidden(user, attrs, decision.reason)
        creating = content_type == APPLY_PATCH and attrs.verb == "patch" and self.mode != ALWAYS_ALLOW
        if creating and self._absent(attrs):
            create = dataclasses.replace(attrs, verb="create")
            created = self.authorize(user, create)
            if not created.allowed:
                resource = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
                details = {"name": attrs.name, "group": attrs.api_group, "kind": attrs.resource}
                message = f'{resource} "{attrs.name}" is forbidden: {created.reason}'
                return (
                    attrs,
                    decision,
                    ApiError(403, "Forbidden", message, details={k: v for k, v in details.items() if v}),
                )
        return attrs, decision, None

    def _absent(self, attrs: rbac.Attributes) -> bool:
        """Whether the object an apply names does not exist (so the apply would create it)."""
        if attrs.subresource or not attrs.name:
            return False
        rt = self.api.registry.lookup(attrs.api_group, attrs.api_version, attrs.resource)
        if rt is None:
            return False
        namespace = attrs.namespace if rt.namespaced else ""
        return self.api.store.get(rt.storage_key, namespace, attrs.name) is None

    def record(
        self,
        user: UserInfo,
        attrs: rbac.Attributes,
        code: int,
        decision: rbac.Decision,
        user_agent: str = "",
        uri: str = "",
    ) -> None:
        self.audit.record(user, attrs, code, decision.allowed, decision.reason, user_agent, uri)

    # --- SelfSubjectAccessReview, SelfSubjectRulesReview ---------------------------------------------------------------

    def review(self, user: UserInfo, request: ApiRequest) -> ApiResponse | None:
        """The answer to ``POST …/selfsubjectaccessreviews`` (``kubectl auth can-i``) or
        ``…/selfsubjectrulesreviews`` (``kubectl auth can-i --list``) or ``authentication.k8s.io``'s
        ``selfsubjectreviews`` (``kubectl auth whoami``); ``None``: not such a request."""
        kind = _REVIEWS.get(request.parts)
        if kind is None:
            return None
        if request.method != "POST":
            raise errors.method_not_allowed()
        body = _decode(request, kind)
        if kind == "TokenReview":
            return self._token_review(body)
        if kind == "SelfSubjectReview":
            answer = {
                "kind": kind,
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None},
                "status": {"userInfo": user.to_json()},
            }
            return json_response(answer, status=201)
        spec = body.get("spec") or {}
        if kind == "SelfSubjectRulesReview":
            return self._rules_review(user, body, spec)
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        problems = []
        if kind == "SubjectAccessReview":
            # kube's ValidateSubjectAccessReviewSpec; the subject is the spec's, not the requester.
            if not spec.get("user") and not spec.get("groups"):
                problems.append(
                    fe.invalid(
                        "spec.user", spec.get("user", ""), "at least one of user or group must be specified"
                    )
                )
            user = UserInfo(
                str(spec.get("user") or ""), tuple(spec.get("groups") or ()), str(spec.get("uid") or "")
            )
        if resource is not None and non_resource is not None:
            problems.append(
                fe.invalid(
                    "spec.nonResourceAttributes",
                    non_resource,
                    "cannot be specified in combination with resourceAttributes",
                )
            )
        if resource is None and non_resource is None:
            problems.append(
                fe.invalid(
                    "spec.resourceAttributes",
                    None,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if problems:
            raise errors.invalid(kind, AUTHZ_GROUP, "", problems)
        attrs = _review_attributes(resource, non_resource)
        decision = self.authorize(user, attrs)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        answer = {
            "kind": kind,
            "apiVersion": f"{AUTHZ_GROUP}/v1",
            "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
            "spec": spec,
            "status": status,
        }
        return json_response(answer, status=201)

    def _token_review(self, body: dict[str, Any]) -> ApiResponse:
        """kube's TokenReview REST (pkg/registry/authentication/tokenreview): authenticate
        ``spec.token`` for ``spec.audiences`` (default: the API server's); a token that does not
        authenticate is an answer (``authenticated`` absent, ``error`` set), not an error."""
        spec = body.get("spec") or {}
        token = str(spec.get("token") or "")
        if not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        audiences = [str(a) for a in spec.get("audiences") or []] or [authn.AUDIENCE]
        status: dict[str, Any] = {"user": {}}
        user: UserInfo | None = None
        if token == self.admin_token:
            user = authn.ADMIN
        elif authn.AUDIENCE in audiences:
            user = self.tokens.verify(token, self.api)
        if user is None:
            status["error"] = "[invalid bearer token, token lookup failed]"
        else:
            status.update(authenticated=True, user=user.to_json(), audiences=audiences)
        answer = {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return json_response(answer, status=201)

    def _rules_review(self, user: UserInfo, body: dict[str, Any], spec: dict[str, Any]) -> ApiResponse:
        """What ``user`` may do in ``spec.namespace``: the rules of every binding that applies to it."""
        status: dict[str, Any] = {"incomplete": False}
        if self.mode == ALWAYS_ALLOW:
            rules: list[Mapping[str, Any]] = [
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ]
            problems: list[str] = []
        else:
            rules, problems = self.rbac.rules_for(user, spec.get("namespace", ""))
        status["resourceRules"] = [
            {
                k: list(rule.get(k) or [])
                for k in ("verbs", "apiGroups", "resources", "resourceNames")
                if rule.get(k) or k == "verbs"
            }
            for rule in rules
            if rule.get("resources")
        ]
        status["nonResourceRules"] = [
            {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])}
            for rule in rules
            if rule.get("nonResourceURLs")
        ]
        if problems:
            status["evaluationError"] = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
        answer = {
            "kind": "SelfSubjectRulesReview",
            "apiVersion": f"{AUTHZ_GROUP}/v1",
            "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
            "spec": spec,
            "status": status,
        }
        return json_response(answer, status=201)


def _review_attributes(
    resource: Mapping[str, Any] | None, non_resource: Mapping[str, Any] | None
) -> rbac.Attributes:
    if resource is not None:
        return rbac.Attributes(
            verb=resource.get("verb", ""),
            resource_request=True,
            namespace=resource.get("namespace", ""),
            api_group=resource.get("group", ""),
            api_version=resource.get("version", ""),
            resource=resource.get("resource", ""),
            subresource=resource.get("subresource", ""),
            name=resource.get("name", ""),
        )
    assert non_resource is not None
    return rbac.Attributes(
        verb=non_resource.get("verb", ""), resource_request=False, path=non_resource.get("path", "")
    )


def _decode(request: ApiRequest, kind: str) -> dict[str, Any]:
    group = "authentication.k8s.io" if kind in _AUTHN_KINDS else AUTHZ_GROUP
    if request.content_type == _PROTOBUF:
        return protobuf.decode_object(request.body, f"{group}/v1", kind)
    try:
        body = gojson.decode_body(request.body, request.content_type)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from exc
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body

"""kube-apiserver's RBAC authorizer: request attributes, rule matching, the 403, the bootstrap policy.

Written from upstream so that a permission the embedded cluster grants or refuses is one a real cluster
grants or refuses:

* :func:`attributes` is apiserver's ``RequestInfoFactory``: the URL (not what the server serves) decides
  resource vs non-resource request, verb, namespace, resource, subresource and name — so an unknown
  resource is a 403 before it is a 404, ``GET /api/v1/namespaces/x`` is authorized in namespace ``x``,
  and a list/watch with ``fieldSelector=metadata.name=N`` is authorized as a request for name ``N``.
* :func:`rule_allows` is ``rbac.RuleAllows`` with ``rbacv1helpers``' matchers (``*``, ``*/status``,
  ``resourceNames``, ``nonResourceURLs`` with a trailing ``*``).
* :class:`RbacAuthorizer` is the ``DefaultRuleResolver`` walk: every ClusterRoleBinding, then the
  RoleBindings of the request's namespace (a RoleBinding to a ClusterRole grants it in that namespace
  only); a missing role is a resolution error reported in the denial reason (``RBAC: role… not found``).
  Members of ``system:masters`` are allowed before RBAC, as kube's privileged-group authorizer does.
* :func:`forbidden` is ``responsewriters.Forbidden``: kube's exact message and ``Status`` details.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiplane.sim.apiserver import authn
from aiplane.sim.apiserver.authn import UserInfo
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.store import Store

_API_PREFIXES = ("api", "apis")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do (kube's ``authorizer.Attributes`` without the user)."""

    verb: str
    resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _name_from_field_selector(selector: str) -> str:
    """``N`` when the selector requires exactly ``metadata.name=N`` (``RequiresExactMatch``)."""
    for term in selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        value = value.strip()
        if op and not key.endswith("!") and key.strip() == "metadata.name":
            # path.IsValidPathSegmentName: a name kube could not put in a URL is not taken
            valid = value not in ("", ".", "..") and "/" not in value and "%" not in value
            return value if valid else ""
    return ""


def attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes kube-apiserver's ``RequestInfoFactory`` reads from a request line."""
    parts = [p for p in path.partition("?")[0].strip("/").split("/") if p] if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in _API_PREFIXES:
        return Attributes(verb=method.lower(), resource_request=False, path=path.partition("?")[0] or "/")
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return Attributes(verb=method.lower(), resource_request=False, path=path.partition("?")[0])
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0") else "list"
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        verb, True, path.partition("?")[0], namespace, group, version, resource, subresource, name
    )


# --- rule matching (rbacv1helpers) --------------------------------------------------------------------


def _verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    return any(v in ("*", verb) for v in rule.get("verbs") or ())


def _group_matches(rule: Mapping[str, Any], group: str) -> bool:
    return any(g in ("*", group) for g in rule.get("apiGroups") or ())


def _resource_matches(rule: Mapping[str, Any], combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or ():
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def _url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*"))):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """Whether one PolicyRule allows the request (``rbac.RuleAllows``)."""
    if not _verb_matches(rule, attrs.verb):
        return False
    if attrs.resource_request:
        return (
            _group_matches(rule, attrs.api_group)
            and _resource_matches(rule, attrs.combined_resource, attrs.subresource)
            and _name_matches(rule, attrs.name)
        )
    return _url_matches(rule, attrs.path)


# --- the rule resolver --------------------------------------------------------------------------------


def _applies(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"{authn.SA_PREFIX}{sa_namespace}:{name}"
    return False


def _describe(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class RbacAuthorizer:
    """Authorizes against the Roles and bindings in the store, read at each request (no cache to
    lag behind a write: a binding applies from the next request on, as soon as kube's informers would)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> list[Mapping[str, Any]]:
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "Role":
            role = self.store.get(f"{GROUP}/roles", namespace, name)
            if role is None:
                raise LookupError(f'role.{GROUP} "{name}" not found')
        elif kind == "ClusterRole":
            role = self.store.get(f"{GROUP}/clusterroles", "", name)
            if role is None:
                raise LookupError(f'clusterrole.{GROUP} "{name}" not found')
        else:
            raise LookupError(f'unsupported role reference kind: "{kind}"')
        return list(role.get("rules") or ())

    def _visit(self, user: UserInfo, namespace: str) -> Iterator[tuple[str, Mapping[str, Any] | None, str]]:
        """(source, rule, error) for every rule that applies to ``user`` in ``namespace``."""
        scopes: list[tuple[str, str]] = [("clusterrolebindings", "")]
        if namespace:
            scopes.append(("rolebindings", namespace))
        for plural, ns in scopes:
            for binding in self.store.items(f"{GROUP}/{plural}", ns or None):
                subjects = binding.get("subjects") or ()
                subject = next((s for s in subjects if _applies(user, s, ns)), None)
                if subject is None:
                    continue
                ref = binding.get("roleRef") or {}
                try:
                    rules = self._role_rules(ref, ns)
                except LookupError as exc:
                    yield "", None, str(exc)
                    continue
                meta = binding["metadata"]
                label = f'RoleBinding "{meta["name"]}/{ns}"' if ns else f'ClusterRoleBinding "{meta["name"]}"'
                source = f'{label} of {ref.get("kind")} "{ref.get("name")}" to {_describe(subject, ns)}'
                for rule in rules:
                    yield source, rule, ""

    def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        if authn.MASTERS in user.groups:
            return Decision(True)
        errors: list[str] = []
        for source, rule, error in self._visit(user, attrs.namespace):
            if rule is not None and rule_allows(attrs, rule):
                return Decision(True, f"RBAC: allowed by {source}")
            if error:
                errors.append(error)
        if not errors:
            return Decision(False)
        return Decision(False, "RBAC: " + (errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"))

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Mapping[str, Any]], list[str]]:
        """Every rule that applies to ``user`` in ``namespace``, and the resolution errors."""
        rules, errors = [], []
        for _source, rule, error in self._visit(user, namespace):
            if rule is not None:
                rules.append(rule)
            if error:
                errors.append(error)
        return rules, errors


def forbidden_message(user: UserInfo, attrs: Attributes) -> str:
    """``responsewriters.forbiddenMessage``."""
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    what = f'User "{user.name}" cannot {attrs.verb} resource "{attrs.combined_resource}" in API group "{attrs.api_group}"'
    if attrs.namespace:
        return f'{what} in the namespace "{attrs.namespace}"'
    return f"{what} at the cluster scope"


def forbidden(user: UserInfo, attrs: Attributes, reason: str) -> ApiError:
    """The 403 kube-apiserver answers a denied request with (``apierrors.NewForbidden``)."""
    why = forbidden_message(user, attrs) + (f": {reason}" if reason else "")
    resource = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.resource:
        details["kind"] = attrs.resource
    if not resource:
        message = f"forbidden: {why}"
    elif attrs.name:
        message = f'{resource} "{attrs.name}" is forbidden: {why}'
    else:
        message = f"{resource} is forbidden: {why}"
    return ApiError(403, "Forbidden", message, details=details)


# --- the bootstrap policy (kube's plugin/pkg/auth/authorizer/rbac/bootstrappolicy) ----------------------

_DISCOVERY_URLS = (
    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
    "/version", "/version/",
)  # fmt: skip
_PUBLIC_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)},
        "rules": rules,
    }


def _binding(name: str, role: str, groups: tuple[str, ...]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> list[dict[str, Any]]:
    """The default ClusterRoles and ClusterRoleBindings kube-apiserver creates that matter here:
    cluster-admin (bound to system:masters), and what lets any user discover the API and review its
    own access (system:discovery, system:basic-user, system:public-info-viewer)."""
    return [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _cluster_role("system:discovery", [{"nonResourceURLs": list(_DISCOVERY_URLS), "verbs": ["get"]}]),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _cluster_role(
            "system:public-info-viewer", [{"nonResourceURLs": list(_PUBLIC_URLS), "verbs": ["get"]}]
        ),
        _binding("cluster-admin", "cluster-admin", (authn.MASTERS,)),
        _binding("system:discovery", "system:discovery", (authn.AUTHENTICATED,)),
        _binding("system:basic-user", "system:basic-user", (authn.AUTHENTICATED,)),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            (authn.AUTHENTICATED, authn.UNAUTHENTICATED),
        ),
    ]

"""Invariants of the RBAC authorizer (hypothesis): RBAC only ever adds permissions, a binding grants
exactly its role's rules, and ``system:masters`` is allowed everything."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import MultiDict, MultiDictProxy

from aiplane.sim.apiserver import authn, dispatch, messages, rbac
from aiplane.sim.apiserver.resources import Registry
from aiplane.sim.apiserver.store import Store

NAMESPACES = ("a", "b")
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
USER = authn.service_account_user("a", "sa")

verbs = st.lists(st.sampled_from((*VERBS, "*")), min_size=1, max_size=3, unique=True)
rules = st.fixed_dictionaries(
    {
        "verbs": verbs,
        "apiGroups": st.lists(st.sampled_from(("", "apps", "*")), min_size=1, max_size=2, unique=True),
        "resources": st.lists(
            st.sampled_from(("pods", "pods/status", "pods/eviction", "deployments", "*/status", "*")),
            min_size=1,
            max_size=3,
            unique=True,
        ),
    },
    optional={"resourceNames": st.lists(st.sampled_from(("web", "db")), min_size=1, max_size=2, unique=True)},
)
subjects = st.sampled_from(
    (
        {"kind": "ServiceAccount", "name": "sa", "namespace": "a"},
        {"kind": "Group", "name": "system:serviceaccounts"},
        {"kind": "User", "name": "someone"},
        {"kind": "Group", "name": "devs"},
    )
)
# (cluster-wide?, namespace, rules, subject)
bindings = st.tuples(
    st.booleans(), st.sampled_from(NAMESPACES), st.lists(rules, min_size=1, max_size=3), subjects
)
requests = st.builds(
    rbac.Attributes,
    verb=st.sampled_from(VERBS),
    resource_request=st.just(True),
    namespace=st.sampled_from(("", *NAMESPACES)),
    api_group=st.sampled_from(("", "apps")),
    resource=st.sampled_from(("pods", "deployments", "configmaps")),
    subresource=st.sampled_from(("", "status", "eviction")),
    name=st.sampled_from(("", "web", "db")),
)


def store_with(granted: list[tuple[bool, str, list[dict[str, Any]], dict[str, str]]]) -> Store:
    store = Store()
    for i, (cluster_wide, namespace, role_rules, subject) in enumerate(granted):
        name = f"r{i}"
        kind = "ClusterRole" if cluster_wide else "Role"
        role_meta = {"name": name} if cluster_wide else {"name": name, "namespace": namespace}
        store.put(f"{rbac.GROUP}/{kind.lower()}s", {"kind": kind, "metadata": role_meta, "rules": role_rules})
        binding_kind = "ClusterRoleBinding" if cluster_wide else "RoleBinding"
        store.put(
            f"{rbac.GROUP}/{binding_kind.lower()}s",
            {
                "kind": binding_kind,
                "metadata": dict(role_meta),
                "roleRef": {"apiGroup": rbac.GROUP, "kind": kind, "name": name},
                "subjects": [subject],
            },
        )
    return store


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=4), st.lists(bindings, max_size=3), requests)
def test_more_bindings_never_take_a_permission_away(
    granted: list[Any], more: list[Any], request: rbac.Attributes
) -> None:
    before = rbac.RbacAuthorizer(store_with(granted)).authorize(USER, request).allowed
    after = rbac.RbacAuthorizer(store_with(granted + more)).authorize(USER, request).allowed
    assert after or not before


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=4), requests)
def test_allowed_exactly_when_a_rule_of_an_applicable_binding_allows(
    granted: list[Any], request: rbac.Attributes
) -> None:
    def applies(cluster_wide: bool, namespace: str, subject: dict[str, str]) -> bool:
        in_scope = cluster_wide or namespace == request.namespace
        matches = subject in (
            {"kind": "ServiceAccount", "name": "sa", "namespace": "a"},
            {"kind": "Group", "name": "system:serviceaccounts"},
        )
        return in_scope and matches

    expected = any(
        rbac.rule_allows(request, rule)
        for cluster_wide, namespace, role_rules, subject in granted
        if applies(cluster_wide, namespace, subject)
        for rule in role_rules
    )
    assert rbac.RbacAuthorizer(store_with(granted)).authorize(USER, request).allowed == expected


@given(requests)
def test_system_masters_is_allowed_everything(request: rbac.Attributes) -> None:
    assert rbac.RbacAuthorizer(Store()).authorize(authn.ADMIN, request).allowed
    assert not rbac.RbacAuthorizer(Store()).authorize(USER, request).allowed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_request_attributes_agree_with_how_the_server_routes_the_request(data: st.DataObject) -> None:
    """What RBAC authorizes is what the request then does: kube's RequestInfo parse of the URL names the
    verb, namespace, resource, subresource and name the server's dispatch resolves it to."""
    registry = Registry()
    rt = data.draw(st.sampled_from(registry.all()))
    namespace = data.draw(st.sampled_from(("team-a", None))) if rt.namespaced else None
    name = data.draw(st.sampled_from((None, "web")))
    sub = data.draw(st.sampled_from((None, *sorted(rt.subresources)))) if name else None
    method = data.draw(st.sampled_from(("GET", "POST", "PUT", "PATCH", "DELETE")))
    # kube's RequestInfo reads ?watch only without a name (a named GET is a get however asked).
    query = data.draw(
        st.sampled_from(({}, {"watch": "0"}) if name else ({}, {"watch": "true"}, {"watch": "0"}))
    )
    path = rt.path(namespace, name) + (f"/{sub}" if sub else "")
    target = dispatch.resolve_target(registry, messages.path_parts(path))
    verb = dispatch.verb_of(method, target, MultiDictProxy(MultiDict(query)))
    attrs = rbac.attributes(method, path, query)
    assert attrs.resource_request
    assert (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, attrs.name) == (
        verb, rt.group, rt.plural, sub or "", name or "",
    )  # fmt: skip
    expected_namespace = name if rt.plural == "namespaces" and name else (namespace or "")
    assert attrs.namespace == expected_namespace

"""Label and field selectors and paginated LIST, against kube-apiserver's parsers and storage rules."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.selectors import parse_selector
from aiplane.sim.apiserver import selectors
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.server import ApiServer

NAMESPACES = ("a", "a-b", "a0", "b", "default")


def _server(history: int = 10_000) -> ApiServer:
    server = ApiServer(history_size=history)
    ns_rt = server.api.resource("v1", "Namespace")
    for name in NAMESPACES:
        server.api.create(ns_rt, None, {"metadata": {"name": name}})
    return server


@pytest.fixture
def server() -> ApiServer:
    return _server()


def cm_rt(server: ApiServer) -> ResourceType:
    return server.api.resource("v1", "ConfigMap")


def make_cm(server: ApiServer, ns: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": labels or {}}, "data": {"k": "v"}}
    return server.api.create(cm_rt(server), ns, body).obj


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def bad(fn: Any, *args: Any, **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        fn(*args, **kw)
    return caught.value


# --- label selectors ---------------------------------------------------------------------------------

LABELS = {"app": "web", "tier": "front", "version": "3", "empty": ""}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("missing", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("  app = web , tier in ( front ) ", True),
        ("empty=", True),
        ("empty in ()", True),
        ("empty in (,x)", True),
        ("version>2", True),
        ("version<3", False),
        ("app>1", False),
        ("missing<5", False),
        ("x in (in, notin)", False),
        ("example.com/role", False),
    ],
)
def test_label_selector_matches_like_kube(text: str, matches: bool) -> None:
    obj = {"metadata": {"name": "o", "labels": LABELS}}
    assert selectors.label_selector(text)(obj) is matches


def test_a_selector_with_values_named_like_operators_parses() -> None:
    sel = selectors.label_selector("in in (in,notin)")
    assert sel({"metadata": {"labels": {"in": "notin"}}})


NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        # ",," stands for "" and consumes both commas, so the ")" is where a value should be.
        ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        (
            "a>b",
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("a=-b", f'unable to parse requirement: values[0][a]: Invalid value: "-b": {VALUE_MSG}'),
        (
            "a=" + "x" * 64,
            f'unable to parse requirement: values[0][a]: Invalid value: "{"x" * 64}": must be no more than 63 characters',
        ),
        ("-a", f'unable to parse requirement: <nil>: Invalid value: "-a": {NAME_PART}'),
        (
            "a/b/c",
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        ("/a", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'),
        (
            "a/",
            f'unable to parse requirement: <nil>: Invalid value: "a/": name part must be non-empty; {NAME_PART}',
        ),
    ],
)
def test_label_selector_errors_are_kubes(text: str, message: str) -> None:
    err = bad(selectors.label_selector, text)
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.message == message


def test_the_query_parameter_is_the_runtimes_selector() -> None:
    """One parser and matcher serves ``?labelSelector=`` and the controllers (``aiplane.apimachinery.selectors``)."""
    sel = selectors.label_selector("tier in (front,back),app=web,!gone")
    assert sel == selectors.LabelSelector(parse_selector("app=web,!gone,tier in (back,front)").requirements)
    assert sel.to_string() == "app=web,!gone,tier in (back,front)"
    assert sel.matches(LABELS) and sel({"metadata": {"labels": LABELS}})
    assert selectors.label_selector(None).empty and selectors.label_selector("")({"metadata": {}})


def test_several_bad_values_are_aggregated_in_sorted_order() -> None:
    err = bad(selectors.label_selector, "a in (-x,-y)")
    assert err.message.startswith('unable to parse requirement: [values[0][a]: Invalid value: "-x"')
    assert 'values[1][a]: Invalid value: "-y"' in err.message


@given(st.text(alphabet="ab=!(),<> \tinot1", max_size=14))
def test_the_label_parser_never_crashes(text: str) -> None:
    try:
        sel = selectors.label_selector(text)
    except ApiError as err:
        assert err.code == 400 and err.message
    else:
        sel({"metadata": {"labels": {"a": "b"}}})


# --- field selectors ---------------------------------------------------------------------------------


def test_field_selectors_use_each_kinds_labels(server: ApiServer) -> None:
    pods = server.api.resource("v1", "Pod")
    pod = {
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"nodeName": "n1", "restartPolicy": "Always", "serviceAccountName": "default"},
        "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "podIP": "10.0.0.1"},
    }
    assert selectors.field_selector(pods, "spec.nodeName=n1,status.phase=Running")(pod)
    assert selectors.field_selector(pods, "spec.host=n1")(pod)  # the legacy alias
    assert selectors.field_selector(pods, "status.podIP=10.0.0.1")(pod)
    assert selectors.field_selector(pods, "spec.hostNetwork=false")(pod)
    assert selectors.field_selector(pods, "status.podIPs=")(pod)  # accepted, never set
    assert not selectors.field_selector(pods, "status.podIPs=10.0.0.1")(pod)
    assert selectors.field_selector(pods, "spec.nodeName!=n2")(pod)
    assert selectors.field_selector(pods, "status.nominatedNodeName=")(pod)
    nodes = server.api.resource("v1", "Node")
    assert selectors.field_selector(nodes, "spec.unschedulable=false")({"metadata": {"name": "n"}})
    assert selectors.field_selector(nodes, "spec.unschedulable==true")(
        {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}
    )
    secrets = server.api.resource("v1", "Secret")
    assert selectors.field_selector(secrets, "type=Opaque")({"metadata": {"name": "s"}})
    events = server.api.resource("v1", "Event")
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Started",
        "type": "Normal",
        "reportingComponent": "kubelet",
    }
    assert selectors.field_selector(
        events, "involvedObject.kind=Pod,involvedObject.name=p,reason=Started,type=Normal,source=kubelet"
    )(event)
    new_events = server.api.resource("events.k8s.io/v1", "Event")
    v1_event = {"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "reportingController": "kubelet"}
    assert selectors.field_selector(new_events, "regarding.kind=Pod,reportingController=kubelet")(v1_event)
    namespaces = server.api.resource("v1", "Namespace")
    assert selectors.field_selector(namespaces, "status.phase=Active")(
        {"metadata": {"name": "x"}, "status": {"phase": "Active"}}
    )
    jobs = server.api.resource("batch/v1", "Job")
    assert selectors.field_selector(jobs, "status.successful=0")({"metadata": {"name": "j"}})


@pytest.mark.parametrize(
    ("api_version", "kind", "text", "message"),
    [
        ("v1", "Pod", "spec.containers=x", "field label not supported: spec.containers"),
        ("v1", "Node", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("v1", "Namespace", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        (
            "v1",
            "ConfigMap",
            "data.a=b",
            '"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "apps/v1",
            "Deployment",
            "status.replicas=1",
            '"status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        ("batch/v1", "Job", "status.active=1", 'field label "status.active" not supported for Job'),
        (
            "events.k8s.io/v1",
            "Event",
            "involvedObject.kind=Pod",
            "field label not supported: involvedObject.kind",
        ),
        ("v1", "Pod", "a", "invalid selector: 'a'; can't understand 'a'"),
        ("v1", "Pod", "metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
        ("v1", "Pod", "metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
        ("v1", "Pod", "metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
        # Terms are checked in sorted order, as kube does.
        ("v1", "Pod", "zzz=1,aaa=2", "field label not supported: aaa"),
    ],
)
def test_field_selector_errors_are_kubes(
    server: ApiServer, api_version: str, kind: str, text: str, message: str
) -> None:
    err = bad(selectors.field_selector, server.api.resource(api_version, kind), text)
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_field_selector_values_can_escape_commas_and_equals(server: ApiServer) -> None:
    sel = selectors.field_selector(cm_rt(server), r"metadata.name=a\,b\=c\\d")
    assert sel({"metadata": {"name": "a,b=c\\d"}})


def test_custom_resources_take_name_namespace_and_their_selectable_fields(server: ApiServer) -> None:
    crd_rt = server.api.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                }
            ],
        },
    }
    server.api.create(crd_rt, None, crd)
    widgets = server.api.resource("example.com/v1", "Widget")
    store = server.store
    assert selectors.field_selector(widgets, "spec.color=red", store=store)(
        {"metadata": {"name": "w"}, "spec": {"color": "red"}}
    )
    err = bad(selectors.field_selector, widgets, "metadata.namespace=x", store=store)
    assert err.message == "field label not supported: metadata.namespace"
    err = bad(selectors.field_selector, widgets, "spec.size=1", store=store)
    assert err.message == "field label not supported: spec.size"


# --- LIST and pagination -----------------------------------------------------------------------------


def list_all(
    server: ApiServer, ns: str | None, limit: int | None, **kw: Any
) -> list[tuple[list[str], str, str | None, int | None]]:
    pages = []
    token = None
    while True:
        items, rv, token, remaining = selectors.list_objects(
            server.api,
            cm_rt(server),
            ns,
            label=kw.get("label"),
            field=kw.get("field"),
            limit=limit,
            continue_token=token,
        )
        pages.append((names(items), rv, token, remaining))
        if token is None:
            return pages


def test_list_orders_by_etcd_key_across_namespaces(server: ApiServer) -> None:
    for ns in ("a", "a-b", "a0"):
        make_cm(server, ns, "x")
    items, _, _, _ = selectors.list_objects(
        server.api, cm_rt(server), None, label=None, field=None, limit=None, continue_token=None
    )
    # "a-b/x" < "a/x" < "a0/x" byte-wise, as etcd lists keys (not ("a", …) < ("a-b", …)).
    assert [i["metadata"]["namespace"] for i in items] == ["a-b", "a", "a0"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    objects=st.sets(
        st.tuples(st.sampled_from(NAMESPACES), st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z0-9]", fullmatch=True)),
        max_size=25,
    ),
    limit=st.integers(min_value=1, max_value=30),
    selector=st.sampled_from([None, "even=true", "even!=true"]),
    namespace=st.sampled_from([None, "a", "a-b"]),
)
def test_paging_returns_every_object_exactly_once_in_order(
    objects: set[tuple[str, str]], limit: int, selector: str | None, namespace: str | None
) -> None:
    server = _server()
    expected = []
    for i, (ns, name) in enumerate(sorted(objects)):
        make_cm(server, ns, name, {"even": str(i % 2 == 0).lower()})
    for ns, name in objects:
        obj = server.store.get("/configmaps", ns, name)
        assert obj is not None
        if namespace not in (None, ns):
            continue
        if selector and not selectors.label_selector(selector)(obj):
            continue
        expected.append((f"{ns}/{name}" if namespace is None else name, name))
    expected.sort()
    pages = list_all(server, namespace, limit, label=selector)
    seen = [n for page, _, _, _ in pages for n in page]
    assert seen == [name for _, name in expected]
    assert all(len(page) <= limit for page, _, _, _ in pages)
    assert len({rv for _, rv, _, _ in pages}) == 1  # every page comes from the first page's snapshot
    for _, _, token, remaining in pages:
        if token is not None and selector is None:
            assert remaining is not None and remaining > 0
        if selector is not None:
            assert remaining is None


def test_a_continued_list_serves_the_first_pages_snapshot(server: ApiServer) -> None:
    for i in range(6):
        make_cm(server, "a", f"cm{i}")
    rt = cm_rt(server)
    first, rv, token, remaining = selectors.list_objects(
        server.api, rt, "a", label=None, field=None, limit=3, continue_token=None
    )
    assert names(first) == ["cm0", "cm1", "cm2"] and remaining == 3 and token
    server.api.delete(rt, "a", "cm4")
    make_cm(server, "a", "cm3a")
    server.api.update(rt, "a", "cm5", {"metadata": {"name": "cm5", "labels": {"changed": "yes"}}, "data": {}})
    rest, rv2, token2, _ = selectors.list_objects(
        server.api, rt, "a", label=None, field=None, limit=10, continue_token=token
    )
    assert rv2 == rv and token2 is None
    assert names(rest) == ["cm3", "cm4", "cm5"]  # cm4 not yet deleted, cm3a not yet created
    assert "labels" not in rest[2]["metadata"] or not rest[2]["metadata"]["labels"]
    fresh, rv3, _, _ = selectors.list_objects(
        server.api, rt, "a", label=None, field=None, limit=None, continue_token=None
    )
    assert names(fresh) == ["cm0", "cm1", "cm2", "cm3", "cm3a", "cm5"] and int(rv3) > int(rv)


def test_a_continue_token_older_than_the_history_is_410_with_an_inconsistent_token() -> None:
    server = _server(history=4)
    rt = cm_rt(server)
    for i in range(4):
        make_cm(server, "a", f"cm{i}")
    _, _, token, _ = selectors.list_objects(
        server.api, rt, "a", label=None, field=None, limit=2, continue_token=None
    )
    assert token
    for i in range(5):
        make_cm(server, "a", f"new{i}")
    err = bad(
        selectors.list_objects, server.api, rt, "a", label=None, field=None, limit=2, continue_token=token
    )
    assert (err.code, err.reason) == (410, "Expired")
    assert err.message == selectors.CONTINUE_EXPIRED
    status = err.status()
    fresh_token = status["metadata"]["continue"]
    decoded = orjson.loads(base64.urlsafe_b64decode(fresh_token + "=" * (-len(fresh_token) % 4)))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": -1, "start": "cm1\u0000"}
    # The inconsistent token continues from the latest state.
    items, rv, _, _ = selectors.list_objects(
        server.api, rt, "a", label=None, field=None, limit=None, continue_token=fresh_token
    )
    assert names(items) == ["cm2", "cm3", "new0", "new1", "new2", "new3", "new4"]
    assert rv == str(server.store.rv)


def test_list_resource_version_semantics(server: ApiServer) -> None:
    rt = cm_rt(server)
    make_cm(server, "a", "one")
    at_one = server.store.rv
    make_cm(server, "a", "two")

    def lst(**q: str) -> tuple[list[str], str]:
        limit = int(q.pop("limit")) if "limit" in q else None
        items, rv, _, _ = selectors.list_objects(
            server.api, rt, "a", label=None, field=None, limit=limit, continue_token=None, query=q
        )
        return names(items), rv

    assert lst(resourceVersion=str(at_one), resourceVersionMatch="Exact") == (["one"], str(at_one))
    assert lst(resourceVersion=str(at_one), limit="5") == (["one"], str(at_one))  # the legacy exact match
    assert lst(resourceVersion=str(at_one)) == (["one", "two"], str(server.store.rv))
    assert lst(resourceVersion="0") == (["one", "two"], str(server.store.rv))
    err = bad(lst, resourceVersion=str(server.store.rv + 5), resourceVersionMatch="NotOlderThan")
    assert (err.code, err.reason, err.headers.get("Retry-After")) == (504, "Timeout", "1")
    assert (
        err.message
        == f"Timeout: Too large resource version: {server.store.rv + 5}, current: {server.store.rv}"
    )
    err = bad(lst, resourceVersion="abc", resourceVersionMatch="Exact")
    assert err.code == 400 and err.message.startswith(
        'invalid resource version: resourceVersion: Invalid value: "abc"'
    )


def test_list_resource_version_too_old_is_410() -> None:
    server = _server(history=2)
    rt = cm_rt(server)
    make_cm(server, "a", "one")
    old = server.store.rv
    for i in range(3):
        make_cm(server, "a", f"more{i}")
    err = bad(
        selectors.list_objects,
        server.api,
        rt,
        "a",
        label=None,
        field=None,
        limit=None,
        continue_token=None,
        query={"resourceVersion": str(old), "resourceVersionMatch": "Exact"},
    )
    assert (err.code, err.reason, err.message) == (
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"resourceVersionMatch": "Exact"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
        ),
        (
            {"resourceVersion": "1", "resourceVersionMatch": "Newest"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"resourceVersion": "0", "resourceVersionMatch": "Exact"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            {"sendInitialEvents": "true"},
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list',
        ),
    ],
)
def test_list_options_are_validated(server: ApiServer, query: dict[str, str], message: str) -> None:
    err = bad(
        selectors.list_objects,
        server.api,
        cm_rt(server),
        "a",
        label=None,
        field=None,
        limit=None,
        continue_token=None,
        query=query,
    )
    assert (err.code, err.reason, err.message) == (422, "Invalid", message)


def _token(payload: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(payload)).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("!!!", "invalid continue token: continue key is not valid: illegal base64 data at input byte 0"),
        (
            _token({"v": "meta.k8s.io/v2", "rv": 1, "start": "a"}),
            "invalid continue token: continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2",
        ),
        (
            _token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),
            "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            _token({"v": "meta.k8s.io/v1", "rv": 1, "start": ""}),
            "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
        ),
        (
            _token({"v": "meta.k8s.io/v1", "rv": 1, "start": "../x"}),
            "invalid continue token: continue key is not valid: ../x",
        ),
    ],
)
def test_bad_continue_tokens_are_400(server: ApiServer, token: str, message: str) -> None:
    err = bad(
        selectors.list_objects,
        server.api,
        cm_rt(server),
        "a",
        label=None,
        field=None,
        limit=1,
        continue_token=token,
    )
    assert (err.code, err.message) == (400, message)


def test_continue_with_a_resource_version_is_refused(server: ApiServer) -> None:
    make_cm(server, "a", "x")
    make_cm(server, "a", "y")
    _, _, token, _ = selectors.list_objects(
        server.api, cm_rt(server), "a", label=None, field=None, limit=1, continue_token=None
    )
    err = bad(
        selectors.list_objects,
        server.api,
        cm_rt(server),
        "a",
        label=None,
        field=None,
        limit=1,
        continue_token=token,
        query={"resourceVersion": "5"},
    )
    assert err.message == "specifying resource version is not allowed when using continue"

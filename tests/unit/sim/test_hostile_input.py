"""Hostile request bodies are refused fast, with kube-apiserver's status, never with a 500 or a stall.

kube-apiserver bounds YAML alias expansion (go-yaml: "document contains excessive aliasing"), JSON
nesting (``encoding/json``: "exceeded max depth") and body size (3 MiB, 413). The embedded server
keeps the same bounds; its nesting bound is lower (``gojson.MAX_DEPTH``), as its code recurses per level.
"""

from __future__ import annotations

import cProfile
import json
import pstats
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.schema import correlation
from aiplane.sim.apiserver import dispatch
from aiplane.sim.apiserver.gojson import MAX_DEPTH
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.server import ApiServer

NS = "default"
WIDGETS = f"/apis/example.com/v1/namespaces/{NS}/widgets"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def laughs(levels: int = 9, fanout: int = 9) -> str:
    """The classic "billion laughs": each anchor a list of ``fanout`` aliases of the one before."""
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  a0: &a0 lol\n"
    text += "x:\n  a0: &b0 [" + ", ".join(["lol"] * fanout) + "]\n"
    for i in range(1, levels):
        text += f"  a{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * fanout) + "]\n"
    return text


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value ``depth`` objects deep (the outermost included)."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer()
    server.api.create(server.api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    server.api.create(server.api.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), None, _CRD)
    return server


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(server.app()), headers={"Authorization": f"Bearer {server.token}"}) as c:
        yield c


async def _send(
    http: TestClient[Any, Any], method: str, path: str, body: bytes | str, ctype: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    resp = await http.request(method, path, data=body, headers={"Content-Type": ctype})
    return resp.status, await resp.json()


def _widget(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


# --- YAML aliases -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "ctype", "message"),
    [
        (
            "POST",
            CMS,
            "application/yaml",
            "the object provided is unrecognized (must be of type ConfigMap): "
            "yaml: document contains excessive aliasing (",
        ),
        (
            "PUT",
            CMS + "/lol",
            "application/yaml",
            "the object provided is unrecognized (must be of type ConfigMap): "
            "yaml: document contains excessive aliasing (",
        ),
        (
            "PATCH",
            CMS + "/lol?fieldManager=m",
            "application/apply-patch+yaml",
            "error encoding patch: yaml: document contains excessive aliasing",
        ),
    ],
)
async def test_a_billion_laughs_is_refused_as_kube_refuses_it(
    http: TestClient[Any, Any], method: str, path: str, ctype: str, message: str
) -> None:
    body = laughs()
    assert len(body) < 600  # a few hundred bytes that expand to 387 million nodes
    status, answer = await _send(http, method, path, body, ctype)
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"].startswith(message)
    # The server is free at once: the next request is answered normally.
    assert (await http.get(CMS)).status == 200


async def test_yaml_with_a_few_aliases_is_accepted_expanded(http: TestClient[Any, Any]) -> None:
    body = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchors\n  labels: &l {app: web}\n"
        "  annotations: *l\ndata: {a: &v hello, b: *v}\n"
    )
    status, created = await _send(http, "POST", CMS, body, "application/yaml")
    assert status == 201, created
    assert created["metadata"]["annotations"] == {"app": "web"} and created["data"] == {
        "a": "hello",
        "b": "hello",
    }


# --- nesting depth ------------------------------------------------------------------------------


async def test_bodies_nested_to_the_limit_work_on_every_write_path(http: TestClient[Any, Any]) -> None:
    """Decode, validation, merge/strategic/JSON patch, apply, managedFields and encoding all take the
    deepest body the server accepts (the object root and ``spec`` are two of its levels)."""
    depth = MAX_DEPTH - 1  # objects under the root
    ok = [
        await _send(http, "POST", WIDGETS, json.dumps(_widget("w", nested(depth - 1)))),
        await _send(http, "PATCH", f"{WIDGETS}/w", json.dumps({"spec": nested(depth - 1, 2)}), MERGE),
        await _send(
            http, "PATCH", f"{WIDGETS}/w/status", json.dumps({"status": nested(depth - 1, 3)}), MERGE
        ),
        await _send(
            http,
            "PATCH",
            f"{WIDGETS}/w",
            json.dumps([{"op": "replace", "path": "/spec", "value": nested(depth - 2, 4)}]),
            "application/json-patch+json",
        ),
        await _send(
            http, "PATCH", f"{WIDGETS}/w2?fieldManager=m", json.dumps(_widget("w2", nested(depth - 1))), APPLY
        ),
        await _send(
            http,
            "PATCH",
            f"{WIDGETS}/w?fieldManager=m2&force=true",
            json.dumps(_widget("w", nested(depth - 1, 5))),
            APPLY,
        ),
        await _send(
            http,
            "POST",
            CMS,
            json.dumps(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "x": nested(depth)}
            ),
        ),
        await _send(
            http, "PATCH", f"{CMS}/c", json.dumps({"x": nested(depth), "data": {"a": "b"}}), STRATEGIC
        ),
        await _send(http, "GET", WIDGETS, b""),
        await _send(http, "GET", f"{WIDGETS}/w", b""),
    ]
    assert [status for status, _ in ok] == [201, 200, 200, 200, 201, 200, 201, 200, 200, 200], ok


@pytest.mark.parametrize("depth", [MAX_DEPTH, 1_000, 20_000])
async def test_json_nested_past_the_limit_is_a_400_not_a_500(http: TestClient[Any, Any], depth: int) -> None:
    text = _deep_text(depth)  # the object root, then ``depth`` levels under spec
    status, answer = await _send(http, "POST", WIDGETS, text)
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"].startswith(
        "the object provided is unrecognized (must be of type Widget): "
        "couldn't get version/kind; json parse error: invalid character '{' exceeded max depth"
    )
    shallow = [
        await _send(http, "POST", WIDGETS, json.dumps(_widget("deep", {}))),
        await _send(
            http,
            "POST",
            CMS,
            json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        ),
    ]
    assert [status for status, _ in shallow] == [201, 201]
    patches = [
        (f"{WIDGETS}/deep", MERGE, "{" + '"spec":' + _nested_text(depth) + "}"),
        (f"{CMS}/c", STRATEGIC, "{" + '"x":' + _nested_text(depth) + "}"),
        (
            f"{WIDGETS}/deep",
            "application/json-patch+json",
            '[{"op":"add","path":"/spec","value":' + _nested_text(depth) + "}]",
        ),
    ]
    for path, ctype, body in patches:
        status, answer = await _send(http, "PATCH", path, body, ctype)
        # Not valid JSON to Go's json.Valid (past its depth): refused before it is decoded (1.37).
        assert (status, answer["message"]) == (400, "invalid JSON patch"), (ctype, answer)
    yaml_body = "x: " + "[" * (depth + 1) + "]" * (depth + 1)
    status, answer = await _send(http, "POST", CMS, yaml_body, "application/yaml")
    assert status == 400 and f"yaml: exceeded max depth of {MAX_DEPTH}" in answer["message"], answer


def _nested_text(depth: int) -> str:
    """``{"a":{"a":…1…}}`` with ``depth`` objects, as text (``json.dumps`` itself recurses)."""
    return '{"a":' * depth + "1" + "}" * depth


def _deep_text(depth: int) -> str:
    return (
        '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"deep"},"spec":'
        + _nested_text(depth)
        + "}"
    )


# --- body size ----------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_body_over_3_mib_is_413_request_entity_too_large(
    http: TestClient[Any, Any], chunked: bool
) -> None:
    big = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "big"},
            "data": {"a": "x" * (5 * 1024 * 1024)},
        }
    ).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(big), 1 << 16):
            yield big[i : i + (1 << 16)]

    resp = await http.post(
        CMS, data=chunks() if chunked else big, headers={"Content-Type": "application/json"}
    )
    answer = await resp.json()
    assert (resp.status, answer["reason"]) == (413, "RequestEntityTooLarge")
    assert answer["message"] == f"Request entity too large: limit is {dispatch.MAX_REQUEST_BYTES}"
    assert dispatch.MAX_REQUEST_BYTES == 3 * 1024 * 1024


# --- large keyed lists --------------------------------------------------------------------------


def _pod(env: int) -> dict[str, Any]:
    env_vars = [{"name": f"E{i}", "value": str(i)} for i in range(env)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "x", "env": env_vars}]},
    }


def _write_work(env: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(list-map key computations, Python function calls) of one status write to a Pod with ``env`` vars."""
    server = ApiServer()
    api = server.api
    api.create(api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    pods = api.resource("v1", "Pod")
    live = api.create(pods, NS, _pod(env)).obj
    keys = 0
    real = correlation._map_key

    def counting(names: list[str], item: Any) -> Any:
        nonlocal keys
        keys += 1
        return real(names, item)

    monkeypatch.setattr(correlation, "_map_key", counting)
    live["metadata"]["labels"] = {"touched": "yes"}
    profile = cProfile.Profile()
    profile.enable()
    api.update(pods, NS, "p", live, WriteOptions())
    profile.disable()
    monkeypatch.setattr(correlation, "_map_key", real)
    return keys, pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def test_a_write_to_a_large_keyed_list_costs_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Correlating list-map items with their old values looks each one up in an index built once per
    validation: doubling the env vars doubles the key computations (a scan per item quadrupled them,
    and 3,000 env vars made every write take seconds). The whole write, managedFields and all, stays
    within n log n in function calls."""
    keys_n, calls_n = _write_work(1_000, monkeypatch)
    keys_2n, calls_2n = _write_work(2_000, monkeypatch)
    assert keys_n <= 4 * 1_000  # old and new list, once each, for each walk that correlates
    assert keys_2n <= 2 * keys_n + 10
    assert calls_2n < 2.4 * calls_n

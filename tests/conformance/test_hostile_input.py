"""Hostile request bodies, through the official Python client, answered as kube-apiserver answers them.

A "billion laughs" of YAML aliases, JSON nested past the decoder's depth limit and a body over the
3 MiB request limit are refused at once with kube's status and words; the server answers the next
request as usual. The embedded server's nesting limit is lower than kube's 10,000 (docs/sim.md), so
the test of that limit itself is ``sim_only``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conformance.conftest import Cluster


def raw(k8s: Any, method: str, path: str, body: str | bytes, ctype: str) -> tuple[int, dict[str, Any]]:
    """A request with its body sent byte for byte (not re-encoded); (status, decoded answer)."""
    _, url, headers, _, post = k8s.param_serialize(
        method,
        path,
        header_params={"Content-Type": ctype, "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    del post
    # The client's own connection pool (TLS and auth as configured): call_api would json.dumps the body.
    resp = k8s.rest_client.pool_manager.request(method, url, body=body, headers=headers, preload_content=True)
    return resp.status, json.loads(resp.data)


def laughs(name: str, levels: int = 9, fanout: int = 9) -> str:
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\nx:\n"
    text += "  a0: &b0 [" + ", ".join(["lol"] * fanout) + "]\n"
    for i in range(1, levels):
        text += f"  a{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * fanout) + "]\n"
    return text


def nested_cm(name: str, depth: int) -> str:
    """A ConfigMap whose unknown field ``x`` holds ``depth`` nested objects (as text: json.dumps recurses)."""
    deep = '{"a":' * depth + "1" + "}" * depth
    return '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"' + name + '"},"x":' + deep + "}"


def test_yaml_aliases_that_expand_a_billionfold_are_a_400(cluster: Cluster, k8s: Any, namespace: str) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    status, answer = raw(k8s, "POST", cms, laughs("lol"), "application/yaml")
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert "yaml: document contains excessive aliasing" in answer["message"]
    status, answer = raw(
        k8s, "PATCH", f"{cms}/lol?fieldManager=conformance", laughs("lol"), "application/apply-patch+yaml"
    )
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"] == ("error encoding patch: yaml: document contains excessive aliasing")
    # A few aliases are fine, and expanded.
    ok = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\ndata: {a: &v hi, b: *v}\n"
    status, answer = raw(k8s, "POST", cms, ok, "application/yaml")
    assert status == 201 and answer["data"] == {"a": "hi", "b": "hi"}, answer


def test_json_nested_20000_deep_is_a_400(cluster: Cluster, k8s: Any, namespace: str) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    body = nested_cm("deep", 20_000)
    status, answer = raw(k8s, "POST", cms, body, "application/json")
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    # The serializer fails looking for apiVersion and kind; transformDecodeError quotes 30 bytes of the body.
    assert answer["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        f"json parse error: invalid character '{{' exceeded max depth ({body[:30]} ...)"
    )
    # A body of ordinary depth is answered as usual afterwards (the unknown field is dropped).
    status, answer = raw(k8s, "POST", cms, nested_cm("shallow", 50), "application/json")
    assert status == 201 and "x" not in answer, answer


@pytest.mark.sim_only
def test_the_embedded_servers_nesting_limit(cluster: Cluster, k8s: Any, namespace: str) -> None:
    """kube stops at 10,000 levels; the embedded server at ``gojson.MAX_DEPTH`` (its code recurses)."""
    from aiplane.sim.apiserver.gojson import MAX_DEPTH

    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    status, answer = raw(k8s, "POST", cms, nested_cm("at-limit", MAX_DEPTH - 1), "application/json")
    assert status == 201, answer
    status, answer = raw(k8s, "POST", cms, nested_cm("over-limit", MAX_DEPTH), "application/json")
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"].startswith(
        "the object provided is unrecognized (must be of type ConfigMap): "
        "couldn't get version/kind; json parse error: invalid character '{' exceeded max depth"
    )


def test_a_body_over_3_mib_is_413(cluster: Cluster, k8s: Any, namespace: str) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    body = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "x" * (3 << 20)}}
    )
    status, answer = raw(k8s, "POST", cms, body, "application/json")
    assert (status, answer["reason"]) == (413, "RequestEntityTooLarge"), answer
    assert answer["message"] == "Request entity too large: limit is 3145728"


_FIND_KIND = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)
_UNRECOGNIZED = "the object provided is unrecognized (must be of type ConfigMap): "
_INTERPRET = "couldn't get version/kind; json parse error: "


@pytest.mark.parametrize(
    ("body", "ctype", "message"),
    [
        (
            '{"a":1,}',
            "application/json",
            f"{_UNRECOGNIZED}{_INTERPRET}invalid character '}}' looking for beginning of object key string "
            '({"a":1,})',
        ),
        (
            '{"apiVersion":5}',
            "application/json",
            f"{_UNRECOGNIZED}{_INTERPRET}json: cannot unmarshal number into Go struct field .apiVersion of type "
            'string ({"apiVersion":5})',
        ),
        (
            "[1]",
            "application/json",
            f"{_UNRECOGNIZED}{_INTERPRET}json: cannot unmarshal array into Go value of type {_FIND_KIND} (5b315d)",
        ),
        (
            "a: b: c\n",
            "application/yaml",
            f"{_UNRECOGNIZED}yaml: mapping values are not allowed in this context (613a20623a20630a)",
        ),
    ],
)
def test_create_bodies_that_do_not_decode(
    k8s: Any, namespace: str, body: str, ctype: str, message: str
) -> None:
    status, answer = raw(k8s, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body, ctype)
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", message)


@pytest.mark.parametrize(
    ("name", "ctype", "body", "status", "message"),
    [
        # Not JSON: refused before the object is looked up (1.37's validateAndTranscodePatch).
        ("missing", "application/merge-patch+json", "{bad", 400, "invalid JSON patch"),
        ("missing", "application/strategic-merge-patch+json", "", 400, "invalid JSON patch"),
        ("cm", "application/json-patch+json", '[{"op":"add"', 400, "invalid JSON patch"),
        # JSON of the wrong shape: decoded after the lookup.
        ("missing", "application/merge-patch+json", "[1]", 404, 'configmaps "missing" not found'),
        (
            "cm",
            "application/merge-patch+json",
            "[1]",
            400,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        # Apply: YAML converted to JSON first, unless it looks like a JSON object.
        (
            "missing",
            "application/apply-patch+yaml",
            "a: b: c\n",
            400,
            "error encoding patch: yaml: mapping values are not allowed in this context",
        ),
        (
            "cm",
            "application/apply-patch+yaml",
            "{a: b: c",
            400,
            "error decoding patch: error converting YAML to JSON: yaml: did not find expected ',' or '}'",
        ),
        (
            "cm",
            "application/apply-patch+yaml",
            "- 1\n",
            400,
            "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array "
            "into Go value of type map[string]interface {}",
        ),
    ],
)
def test_patch_bodies_that_do_not_decode(
    k8s: Any, namespace: str, name: str, ctype: str, body: str, status: int, message: str
) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    assert raw(k8s, "POST", cms, '{"metadata":{"name":"cm"}}', "application/json")[0] == 201
    got, answer = raw(k8s, "PATCH", f"{cms}/{name}?fieldManager=conformance", body, ctype)
    assert (got, answer["message"]) == (status, message)

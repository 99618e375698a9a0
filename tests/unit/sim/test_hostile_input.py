"""Hostile request bodies are refused fast, with kube-apiserver's status, never with a 500 or a stall.

kube-apiserver bounds YAML alias expansion (go-yaml: "document contains excessive aliasing"), JSON
nesting (``encoding/json``: "exceeded max depth") and body size (3 MiB, 413). The embedded server
keeps the same bounds; its nesting bound is lower (``gojson.MAX_DEPTH``), as its code recurses per level.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.sim.apiserver import dispatch
from aiplane.sim.apiserver.gojson import MAX_DEPTH
from aiplane.sim.apiserver.server import ApiServer

NS = "default"
WIDGETS = f"/apis/example.com/v1/namespaces/{NS}/widgets"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
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

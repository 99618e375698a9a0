"""OpenAPI v2/v3 documents and the discovery documents served next to them (``discovery.py``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiplane.sim.apiserver import discovery, openapi, openapi_schemas
from aiplane.sim.apiserver.rest import DeleteOptions
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.cluster import EmbeddedCluster

AGGREGATED = discovery.AGGREGATED_CONTENT_TYPE
CRD_RT = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


@pytest.fixture(scope="module")
def cluster() -> EmbeddedCluster:
    return EmbeddedCluster()


@pytest.fixture(scope="module")
def server(cluster: EmbeddedCluster) -> ApiServer:
    return cluster.server


def v3(server: ApiServer, group: str, version: str) -> dict[str, Any]:
    doc = openapi.v3_encoded(server, group, version)
    assert doc is not None
    parsed: dict[str, Any] = orjson.loads(doc.body)
    return parsed


def widget_crd(group: str, *, versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    schema = {
        "type": "object",
        "description": "A Widget.",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "description": "How big."},
                    "color": {"type": "string", "enum": ["red", "blue"], "nullable": True},
                    "port": {"x-kubernetes-int-or-string": True},
                    "extra": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"a": {"type": "string"}},
                    },
                },
            },
            "metadata": {"type": "object"},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": "Widget",
                "plural": "widgets",
                "listKind": "WidgetCollection",
                "categories": ["toys"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == len(versions) - 1,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {
                        "status": {},
                        "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"},
                    },
                }
                for i, v in enumerate(versions)
            ],
        },
    }


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


# --- documents ------------------------------------------------------------------------------------


def test_every_group_version_document_is_self_contained(server: ApiServer) -> None:
    for group, version in openapi.served_group_versions(server):
        doc = v3(server, group, version)
        schemas = doc["components"]["schemas"]
        for ref in openapi.iter_schema_refs(doc):
            assert ref.startswith(openapi_schemas.V3_PREFIX), ref
            assert ref.removeprefix(openapi_schemas.V3_PREFIX) in schemas, (group, version, ref)
        for node in walk(schemas):
            assert node.get("type") != "null" and not isinstance(node.get("type"), list)
    v2 = orjson.loads(openapi.v2_encoded(server).body)
    assert v2["swagger"] == "2.0"
    for ref in openapi.iter_schema_refs(v2):
        assert ref.removeprefix(openapi_schemas.V2_PREFIX) in v2["definitions"], ref


def test_builtin_schemas_as_kube_publishes_them(server: ApiServer) -> None:
    doc = v3(server, "", "v1")
    schemas = doc["components"]["schemas"]
    pod = schemas["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert pod["properties"]["apiVersion"] == {
        "description": openapi_schemas.API_VERSION_DESCRIPTION,
        "type": "string",
    }
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-type"] == "map"
    assert schemas["io.k8s.api.core.v1.Container"]["required"] == ["name"]
    assert schemas[openapi_schemas.INT_OR_STRING]["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    assert schemas[openapi_schemas.QUANTITY]["description"].startswith("Quantity is a fixed-point")
    assert "type" not in schemas[openapi_schemas.QUANTITY]
    v2 = orjson.loads(openapi.v2_encoded(server).body)["definitions"]
    assert (
        v2["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"]
        == "#/definitions/io.k8s.api.core.v1.PodSpec"
    )
    assert v2[openapi_schemas.INT_OR_STRING] == {
        "description": openapi_schemas.INT_OR_STRING_DESCRIPTION,
        "type": "string",
        "format": "int-or-string",
    }


def test_paths_carry_gvk_actions_and_field_validation(server: ApiServer) -> None:
    paths = v3(server, "", "v1")["paths"]
    item = paths["/api/v1/namespaces/{namespace}/pods/{name}"]
    patch = item["patch"]
    assert patch["operationId"] == "patchCoreV1NamespacedPod"
    assert patch["tags"] == ["core_v1"]
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert {p["name"] for p in patch["parameters"]} == {"dryRun", "fieldManager", "fieldValidation", "force"}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    assert paths["/api/v1/pods"]["get"]["operationId"] == "listCoreV1PodForAllNamespaces"
    assert (
        paths["/api/v1/namespaces/{namespace}/pods"]["delete"]["operationId"]
        == "deleteCoreV1CollectionNamespacedPod"
    )
    eviction = paths["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]
    assert eviction["x-kubernetes-group-version-kind"] == {
        "group": "policy",
        "kind": "Eviction",
        "version": "v1",
    }
    assert paths["/api/v1/nodes/{name}/status"]["get"]["operationId"] == "readCoreV1NodeStatus"
    apps = v3(server, "apps", "v1")["paths"]
    scale = apps["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["get"]
    assert scale["operationId"] == "readAppsV1NamespacedDeploymentScale"
    assert scale["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
    }


def test_crd_documents(server: ApiServer) -> None:
    doc = v3(server, "workload.volcano.sh", "v1alpha1")
    assert doc["info"]["title"] == "Kubernetes CRD Swagger"
    schemas = doc["components"]["schemas"]
    mi = schemas["sh.volcano.workload.v1alpha1.ModelInfer"]
    assert mi["x-kubernetes-group-version-kind"] == [
        {"group": "workload.volcano.sh", "kind": "ModelInfer", "version": "v1alpha1"}
    ]
    assert mi["properties"]["metadata"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "description": openapi_schemas.OBJECT_META_DESCRIPTION,
    }
    assert mi["properties"]["kind"]["description"] == openapi_schemas.KIND_DESCRIPTION
    roles = mi["properties"]["spec"]["properties"]["template"]["properties"]["roles"]
    assert roles["description"].startswith("Roles are the pod roles")
    items = schemas["sh.volcano.workload.v1alpha1.ModelInferList"]
    assert items["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/sh.volcano.workload.v1alpha1.ModelInfer"
    }
    path = "/apis/workload.volcano.sh/v1alpha1/namespaces/{namespace}/modelinfers/{name}"
    patch = doc["paths"][path]["patch"]
    assert patch["operationId"] == "patchWorkloadVolcanoShV1alpha1NamespacedModelInfer"
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert (
        "/apis/workload.volcano.sh/v1alpha1/namespaces/{namespace}/modelinfers/{name}/scale" in doc["paths"]
    )


def test_v2_crd_schemas_are_stripped_like_apiextensions_does(server: ApiServer) -> None:
    crd = widget_crd("strip.example.com")
    server.api.create(server.api.resource(*CRD_RT), None, crd)
    try:
        v2 = orjson.loads(openapi.v2_encoded(server).body)["definitions"]
        spec = v2["com.example.strip.v1.Widget"]["properties"]["spec"]
        assert "required" not in spec
        assert "minimum" not in spec["properties"]["size"]
        assert spec["properties"]["color"] == {"type": "string"}
        assert spec["properties"]["port"] == {"x-kubernetes-int-or-string": True}
        assert spec["properties"]["extra"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        three = v3(server, "strip.example.com", "v1")["components"]["schemas"]["com.example.strip.v1.Widget"]
        spec3 = three["properties"]["spec"]
        assert spec3["required"] == ["size"]
        assert spec3["properties"]["color"]["nullable"] is True
        assert spec3["properties"]["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        assert spec3["properties"]["extra"]["properties"] == {"a": {"type": "string"}}
        list_schema = v3(server, "strip.example.com", "v1")["components"]["schemas"][
            "com.example.strip.v1.WidgetCollection"
        ]
        assert list_schema["x-kubernetes-group-version-kind"][0]["kind"] == "WidgetCollection"
    finally:
        delete_crd(server, "widgets.strip.example.com")


def delete_crd(server: ApiServer, name: str) -> None:
    """Delete a CRD and let the CRD finalizer (the deletion controllers' queue) finish the job."""
    server.api.delete(server.api.resource(*CRD_RT), None, name, DeleteOptions())
    server.gc.run_pending()
    assert server.store.get("apiextensions.k8s.io/customresourcedefinitions", "", name) is None


def test_documents_follow_crd_changes(server: ApiServer) -> None:
    before = orjson.loads(openapi.v3_index(server).body)["paths"]
    generation = server.registry.generation
    crd_rt = server.api.resource(*CRD_RT)
    server.api.create(crd_rt, None, widget_crd("follow.example.com", versions=("v1beta1", "v1")))
    assert server.registry.generation > generation
    after = orjson.loads(openapi.v3_index(server).body)["paths"]
    assert set(after) - set(before) == {"apis/follow.example.com/v1", "apis/follow.example.com/v1beta1"}
    for key, entry in after.items():
        group_version = (
            key.split("/", 1)[1].split("/") if key.startswith("apis/") else ["", key.split("/")[1]]
        )
        doc = openapi.v3_encoded(server, *group_version)
        assert doc is not None
        assert entry["serverRelativeURL"] == f"/openapi/v3/{key}?hash={doc.etag}"
        assert doc.etag == hashlib.sha512(doc.body).hexdigest().upper()
        if key in before:  # unrelated documents keep their hash (clients keep their cache)
            assert before[key] == entry
    delete_crd(server, "widgets.follow.example.com")
    assert orjson.loads(openapi.v3_index(server).body)["paths"] == before


# --- discovery documents --------------------------------------------------------------------------


def test_group_order_and_preferred_versions(server: ApiServer) -> None:
    groups = [g for g, _ in discovery.ordered_groups(server)]
    assert groups[:4] == ["", "apps", "events.k8s.io", "autoscaling"]
    builtin_end = groups.index("coordination.k8s.io")
    assert groups[builtin_end + 1 :] == sorted(groups[builtin_end + 1 :])
    assert dict(discovery.ordered_groups(server))["kueue.x-k8s.io"] == [
        "v1beta2",
        "v1beta1",
    ]  # as Kueue v0.17 serves them
    assert discovery.sort_versions(["v1alpha1", "v2", "v1", "v1beta2", "v1beta1", "foo", "bar"]) == [
        "v2",
        "v1",
        "v1beta2",
        "v1beta1",
        "v1alpha1",
        "bar",
        "foo",
    ]


def test_legacy_and_aggregated_resource_entries(server: ApiServer) -> None:
    core = {r["name"]: r for r in discovery.resource_list(server, "", "v1")}
    assert core["pods"]["storageVersionHash"] == "xPOwRZ+Yhw8="  # what kube-apiserver publishes
    assert core["namespaces"]["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert core["pods/eviction"] == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert core["services"]["categories"] == ["all"]
    events = {r["name"]: r for r in discovery.resource_list(server, "events.k8s.io", "v1")}
    assert events["events"]["storageVersionHash"] == core["events"]["storageVersionHash"]
    doc = discovery.aggregated(server, legacy_core=False)
    assert doc["kind"] == "APIGroupDiscoveryList" and doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    by_group = {item["metadata"]["name"]: item for item in doc["items"]}
    apps = {r["resource"]: r for r in by_group["apps"]["versions"][0]["resources"]}
    assert apps["deployments"]["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert apps["deployments"]["subresources"][0] == {
        "subresource": "scale",
        "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "verbs": ["get", "patch", "update"],
    }
    mi = by_group["workload.volcano.sh"]["versions"][0]
    assert mi["freshness"] == "Current"
    entry = mi["resources"][0]
    assert entry["responseKind"] == {
        "group": "workload.volcano.sh",
        "version": "v1alpha1",
        "kind": "ModelInfer",
    }
    assert entry["verbs"] == discovery.CRD_VERBS and entry["scope"] == "Namespaced"
    assert entry["shortNames"] == ["mi"] and "aiplane" in entry["categories"]
    assert {s["subresource"]: s["responseKind"]["kind"] for s in entry["subresources"]} == {
        "scale": "Scale",
        "status": "ModelInfer",
    }
    core_doc = discovery.aggregated(server, legacy_core=True)
    assert [item["metadata"] for item in core_doc["items"]] == [{"creationTimestamp": None}]


def test_storage_version_hash_is_kubes() -> None:
    digest = hashlib.sha256(b"apps/v1/Deployment").digest()[:8]
    assert base64.b64encode(digest).decode() == "8aSe+NMegvE="


# --- HTTP -----------------------------------------------------------------------------------------


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(server.app())) as test_client:
        test_client.session.headers["Authorization"] = f"Bearer {server.token}"
        yield test_client


async def test_discovery_negotiation(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/apis", headers={"Accept": f"{AGGREGATED},application/json"})
    assert resp.status == 200 and resp.headers["Content-Type"] == AGGREGATED
    etag = resp.headers["ETag"]
    assert resp.headers["Vary"] == "Accept"
    again = await client.get("/apis", headers={"Accept": AGGREGATED, "If-None-Match": etag})
    assert again.status == 304
    nopeer = await client.get("/api", headers={"Accept": f"{AGGREGATED};profile=nopeer"})
    assert nopeer.headers["Content-Type"] == AGGREGATED
    legacy = await client.get("/api", headers={"Accept": "application/json, */*"})
    assert legacy.headers["Content-Type"].startswith("application/json")
    assert (await legacy.json())["kind"] == "APIVersions"
    beta = await client.get("/apis", headers={"Accept": AGGREGATED.replace("v=v2", "v=v2beta1")})
    assert beta.status == 406
    fallback = await client.get(
        "/apis", headers={"Accept": AGGREGATED.replace("v=v2", "v=v2beta1") + ",application/json"}
    )
    assert (await fallback.json())["kind"] == "APIGroupList"
    group = await client.get("/apis/workload.volcano.sh")
    body = await group.json()
    assert body["kind"] == "APIGroup" and body["preferredVersion"]["version"] == "v1alpha1"
    assert (await client.get("/apis/nope.example.com")).status == 404
    assert (await client.get("/apis/apps/v9")).status == 404


async def test_openapi_http(client: TestClient[Any, Any], server: ApiServer) -> None:
    index = await client.get("/openapi/v3")
    assert index.status == 200
    url = (await index.json())["paths"]["apis/apps/v1"]["serverRelativeURL"]
    doc = await client.get(url, headers={"Accept": "application/json"})
    assert doc.status == 200 and doc.headers["Cache-Control"] == "public, immutable"
    etag = doc.headers["ETag"]
    cached = await client.get("/openapi/v3/apis/apps/v1", headers={"If-None-Match": etag})
    assert cached.status == 304
    stale = await client.get("/openapi/v3/apis/apps/v1?hash=0000", allow_redirects=False)
    assert stale.status == 301 and stale.headers["Location"] == url
    assert (await client.get("/openapi/v3/apis/apps/v9")).status == 404
    assert (await client.get("/openapi/v3/apis/apps")).status == 404
    v2 = await client.get("/openapi/v2", headers={"Accept": "application/json"})
    assert v2.status == 200 and (await v2.json())["swagger"] == "2.0"
    proto = await client.get(
        "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    )
    # Protobuf, as client-go asks for it (kubectl's validation falls back to it for unknown kinds):
    # gnostic's Document, field 1 "swagger", under the Content-Type kube-openapi answers with.
    assert proto.status == 200
    assert proto.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert (await proto.read()).startswith(b"\x0a\x032.0\x12")
    assert (await client.get("/openapi/v2", headers={"Accept": "application/xml"})).status == 406
    assert (await client.post("/openapi/v2")).status == 405
    assert (await client.get("/openapi/v3/api/v1")).status == 200
    del server


def test_terminating_crd_loses_its_write_verbs(server: ApiServer) -> None:
    crd_rt = server.api.resource(*CRD_RT)
    crd = widget_crd("ending.example.com")
    crd["metadata"]["finalizers"] = ["example.com/hold"]
    server.api.create(crd_rt, None, crd)
    name = "widgets.ending.example.com"

    def verbs() -> list[str]:
        entries = {r["name"]: r for r in discovery.resource_list(server, "ending.example.com", "v1")}
        return list(entries["widgets"]["verbs"])

    assert verbs() == discovery.CRD_VERBS
    server.api.delete(crd_rt, None, name, DeleteOptions())  # Terminating: instance deletion pending
    assert verbs() == ["delete", "deletecollection", "get", "list", "watch"]
    server.gc.run_pending()  # no instances: Terminating turns False, as kube's CRD finalizer sets it
    assert verbs() == discovery.CRD_VERBS
    stored = server.store.get("apiextensions.k8s.io/customresourcedefinitions", "", name)
    assert stored is not None
    released = {**stored, "metadata": {**stored["metadata"], "finalizers": []}}
    server.api.update(crd_rt, None, name, released)
    server.gc.run_pending()
    assert ("ending.example.com", ["v1"]) not in discovery.ordered_groups(server)

"""PATCH and server-side apply through real clients: kubectl (client- and server-side apply, every
``kubectl patch --type``) and the official Python client.

Objects are created with ``kubectl apply -f -`` or the official client (``kubectl create <generator>``
sends protobuf bodies, another module's business).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.conftest import Cluster

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace, created with ``kubectl apply`` (JSON bodies only), deleted afterwards."""
    name = f"patch-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def get(cluster: Cluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    args = ["get", kind, name, "-o", "json", "--show-managed-fields"]
    if namespace:
        args += ["-n", namespace]
    result: dict[str, Any] = json.loads(cluster.kubectl(*args).stdout)
    return result


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """managedFields by manager name (the tests use one entry per manager)."""
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> str:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    if labels:
        doc["metadata"]["labels"] = labels
    return json.dumps(doc)


# --- kubectl apply (client-side) ------------------------------------------------------------------


def test_client_side_apply_configmap_create_change_remove(cluster: Cluster, ns: str) -> None:
    created = cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"a": "1", "b": "2"}))
    assert "configmap/cm created" in created.stdout
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"a": "3", "b": "2"}))
    assert get(cluster, "configmap", "cm", ns)["data"] == {"a": "3", "b": "2"}
    changed = cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"a": "3"}))
    assert "configmap/cm configured" in changed.stdout
    obj = get(cluster, "configmap", "cm", ns)
    assert obj["data"] == {"a": "3"}
    assert json.loads(obj["metadata"]["annotations"][LAST_APPLIED])["data"] == {"a": "3"}
    entry = managers(obj)["kubectl-client-side-apply"]
    assert entry["operation"] == "Update" and entry["apiVersion"] == "v1"
    assert entry["fieldsV1"]["f:data"] == {"f:a": {}, ".": {}}
    unchanged = cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"a": "3"}))
    assert "configmap/cm unchanged" in unchanged.stdout
    assert (
        get(cluster, "configmap", "cm", ns)["metadata"]["resourceVersion"]
        == obj["metadata"]["resourceVersion"]
    )


def deployment(image: str, env: list[dict[str, str]], *, sidecar: bool = False) -> str:
    containers: list[dict[str, Any]] = [{"name": "app", "image": image, "env": env}]
    if sidecar:
        containers.append({"name": "sidecar", "image": "busybox:1.36"})
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}},
        },
    }
    return json.dumps(doc)


def test_client_side_apply_deployment_merges_containers_and_env_by_name(cluster: Cluster, ns: str) -> None:
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=deployment("nginx:1.25", env))
    # Someone else adds an env var to the container: client-side apply must keep it (3-way merge).
    cluster.kubectl(
        "patch",
        "deployment",
        "web",
        "-n",
        ns,
        "--type",
        "strategic",
        "-p",
        json.dumps(
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "app", "env": [{"name": "EXTRA", "value": "x"}]}]}
                    }
                }
            }
        ),
    )
    new_env = [{"name": "A", "value": "10"}]  # B removed from the configuration, A changed
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=deployment("nginx:1.26", new_env, sidecar=True))
    spec = get(cluster, "deployment", "web", ns)["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["app", "sidecar"]
    app = spec["containers"][0]
    assert app["image"] == "nginx:1.26"
    assert {e["name"]: e["value"] for e in app["env"]} == {"A": "10", "EXTRA": "x"}
    # Removing the sidecar from the configuration removes it from the object.
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=deployment("nginx:1.26", new_env))
    spec = get(cluster, "deployment", "web", ns)["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["app"]


PROFILE = """apiVersion: infrastructure.silogen.ai/v1alpha1
kind: PartitioningProfile
metadata:
  name: {name}
spec:
  description: "{description}"
  dcmProfileName: cpx_nps4
  targetSelector:
    matchLabels:
      amd.com/gpu.product-name: AMD_Instinct_MI300X_OAM
  expectedResources:
{resources}
"""


def profile(name: str, description: str, resources: dict[str, str]) -> str:
    lines = "\n".join(f'    {k}: "{v}"' for k, v in resources.items())
    return PROFILE.format(name=name, description=description, resources=lines)


def test_client_side_apply_custom_resource(cluster: Cluster) -> None:
    name = f"pp-{uuid.uuid4().hex[:8]}"
    try:
        cluster.kubectl(
            "apply", "-f", "-", input=profile(name, "first", {"amd.com/gpu": "64", "amd.com/cpx": "8"})
        )
        cluster.kubectl("apply", "-f", "-", input=profile(name, "second", {"amd.com/gpu": "64"}))
        obj = get(cluster, "partitioningprofile", name)
        assert obj["spec"]["description"] == "second"
        assert obj["spec"]["expectedResources"] == {"amd.com/gpu": "64"}
        entry = managers(obj)["kubectl-client-side-apply"]
        assert entry["apiVersion"] == "infrastructure.silogen.ai/v1alpha1"
        assert "f:description" in entry["fieldsV1"]["f:spec"]
    finally:
        cluster.kubectl("delete", "partitioningprofile", name, "--wait=false", check=False)


# --- kubectl apply --server-side ---------------------------------------------------------------------


def test_server_side_apply_conflict_then_force(cluster: Cluster, ns: str) -> None:
    first = cluster.kubectl(
        "apply", "--server-side", "-n", ns, "-f", "-", input=configmap("cm", {"key": "a"})
    )
    assert "serverside-applied" in first.stdout
    obj = get(cluster, "configmap", "cm", ns)
    entry = managers(obj)["kubectl"]
    assert entry["operation"] == "Apply" and entry["fieldsV1"] == {"f:data": {"f:key": {}}}
    clash = cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=other",
        "-n",
        ns,
        "-f",
        "-",
        input=configmap("cm", {"key": "b"}),
        check=False,
    )
    assert clash.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.key' in clash.stderr
    assert get(cluster, "configmap", "cm", ns)["data"] == {"key": "a"}
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-n",
        ns,
        "-f",
        "-",
        input=configmap("cm", {"key": "b"}),
    )
    obj = get(cluster, "configmap", "cm", ns)
    assert obj["data"] == {"key": "b"}
    owners = managers(obj)
    assert owners["other"]["fieldsV1"] == {"f:data": {"f:key": {}}}
    assert "kubectl" not in owners  # its only field was taken over


def test_server_side_apply_conflicts_with_an_update_manager(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=configmap("cm", {"key": "a"}))
    cluster.kubectl(
        "patch", "configmap", "cm", "-n", ns, "--type", "merge", "-p", '{"data":{"key":"patched"}}'
    )
    clash = cluster.kubectl(
        "apply", "--server-side", "-n", ns, "-f", "-", input=configmap("cm", {"key": "c"}), check=False
    )
    assert 'conflict with "kubectl-patch" using v1: .data.key' in clash.stderr


def test_server_side_apply_removes_fields_it_stops_applying(cluster: Cluster, ns: str) -> None:
    manifest = configmap("cm", {"a": "1", "b": "2"}, labels={"team": "x"})
    cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=manifest)
    rv = get(cluster, "configmap", "cm", ns)["metadata"]["resourceVersion"]
    cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=manifest)  # a no-op
    assert get(cluster, "configmap", "cm", ns)["metadata"]["resourceVersion"] == rv
    # Another manager owns "b" too: it stays when kubectl stops applying it, "team" goes.
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=keeper",
        "-n",
        ns,
        "-f",
        "-",
        input=configmap("cm", {"b": "2"}),
    )
    cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=configmap("cm", {"a": "1"}))
    obj = get(cluster, "configmap", "cm", ns)
    assert obj["data"] == {"a": "1", "b": "2"}
    assert "labels" not in obj["metadata"]
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=keeper",
        "-n",
        ns,
        "-f",
        "-",
        input=configmap("cm", {"c": "3"}),
    )
    assert get(cluster, "configmap", "cm", ns)["data"] == {"a": "1", "c": "3"}


def test_server_side_apply_takes_over_from_client_side_apply(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"key": "a"}))
    cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=configmap("cm", {"key": "b"}))
    obj = get(cluster, "configmap", "cm", ns)
    assert obj["data"] == {"key": "b"}
    assert json.loads(obj["metadata"]["annotations"][LAST_APPLIED])["data"] == {"key": "b"}


def test_server_side_apply_creates_a_deployment_and_reports_typed_errors(cluster: Cluster, ns: str) -> None:
    created = cluster.kubectl(
        "apply",
        "--server-side",
        "-n",
        ns,
        "-f",
        "-",
        input=deployment("nginx:1.25", [{"name": "A", "value": "1"}]),
    )
    assert "deployment.apps/web serverside-applied" in created.stdout
    entry = managers(get(cluster, "deployment", "web", ns))["kubectl"]
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers['k:{"name":"app"}']["f:env"]['k:{"name":"A"}'] == {".": {}, "f:name": {}, "f:value": {}}
    bad = json.loads(deployment("nginx", []))
    bad["spec"]["replicas"] = "two"
    failed = cluster.kubectl(
        "apply", "--server-side", "-n", ns, "-f", "-", input=json.dumps(bad), check=False
    )
    assert failed.returncode != 0
    assert (
        f"failed to create typed patch object ({ns}/web; apps/v1, Kind=Deployment): "
        ".spec.replicas: expected numeric (int or float), got string"
    ) in failed.stderr


# --- kubectl patch -----------------------------------------------------------------------------------


def test_kubectl_patch_every_type_on_a_deployment(cluster: Cluster, ns: str) -> None:
    cluster.kubectl(
        "apply", "-n", ns, "-f", "-", input=deployment("nginx:1.25", [{"name": "A", "value": "1"}])
    )
    cluster.kubectl(
        "patch", "deployment", "web", "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":3}}'
    )
    cluster.kubectl(
        "patch",
        "deployment",
        "web",
        "-n",
        ns,
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]',
    )
    cluster.kubectl(
        "patch",
        "deployment",
        "web",
        "-n",
        ns,
        "--type",
        "strategic",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}}',
    )
    obj = get(cluster, "deployment", "web", ns)
    assert obj["spec"]["replicas"] == 3
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27"
    # kubectl patch sends no $setElementOrder: kube puts an item the live list lacks before the live ones.
    assert [e["name"] for e in container["env"]] == ["B", "A"]
    owners = managers(obj)
    assert "f:replicas" in owners["kubectl-patch"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in owners["kubectl-client-side-apply"]["fieldsV1"]["f:spec"]
    assert obj["metadata"]["generation"] == 4


def env_names(cluster: Cluster, ns: str) -> list[str]:
    container = get(cluster, "deployment", "web", ns)["spec"]["template"]["spec"]["containers"][0]
    return [e["name"] for e in container.get("env") or []]


def smp_env(cluster: Cluster, ns: str, patch: dict[str, Any]) -> None:
    body = {"spec": {"template": {"spec": {"containers": [{"name": "app", **patch}]}}}}
    cluster.kubectl("patch", "deployment", "web", "-n", ns, "--type", "strategic", "-p", json.dumps(body))


def test_strategic_merge_patch_list_order_is_kubes(cluster: Cluster, ns: str) -> None:
    """The order of a merged list, as apimachinery's ``mergeSlice`` and ``normalizeElementOrder`` give it."""
    env = [{"name": n, "value": n} for n in ("A", "X")]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=deployment("nginx:1.25", env))
    # Without $setElementOrder, patch items keep the patch's order and a live-only item goes after a
    # patch item it cannot be ordered against (one the live list lacks): "A" after "C", before "X".
    smp_env(cluster, ns, {"env": [{"name": "C", "value": "c"}, {"name": "X", "value": "x2"}]})
    assert env_names(cluster, ns) == ["C", "A", "X"]
    # With it (client-side apply sends one), patch items take its order, live-only items keep their place.
    smp_env(
        cluster,
        ns,
        {
            "$setElementOrder/env": [{"name": "C"}, {"name": "D"}],
            "env": [{"name": "D", "value": "d"}],
        },
    )
    assert env_names(cluster, ns) == ["C", "D", "A", "X"]
    # Deleting an item: Go's mergeSlice shifts the live list in place and appends the new item into the
    # freed slot, which the order then sees as a live item: "E" lands after "X", not first.
    smp_env(
        cluster,
        ns,
        {
            "$setElementOrder/env": [{"name": "E"}],
            "env": [{"name": "E", "value": "e"}, {"$patch": "delete", "name": "A"}],
        },
    )
    assert env_names(cluster, ns) == ["C", "D", "X", "E"]


def test_kubectl_patch_on_a_custom_resource(cluster: Cluster) -> None:
    name = f"pp-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("apply", "-f", "-", input=profile(name, "first", {"amd.com/gpu": "64"}))
    try:
        cluster.kubectl(
            "patch", "partitioningprofile", name, "--type", "merge", "-p", '{"spec":{"description":"merged"}}'
        )
        cluster.kubectl(
            "patch",
            "partitioningprofile",
            name,
            "--type",
            "json",
            "-p",
            '[{"op":"add","path":"/spec/expectedResources/amd.com~1cpx","value":"8"}]',
        )
        spec = get(cluster, "partitioningprofile", name)["spec"]
        assert spec["description"] == "merged"
        assert spec["expectedResources"] == {"amd.com/gpu": "64", "amd.com/cpx": "8"}
        strategic = cluster.kubectl(
            "patch",
            "partitioningprofile",
            name,
            "--type",
            "strategic",
            "-p",
            '{"spec":{"description":"x"}}',
            check=False,
        )
        assert strategic.returncode != 0
        assert (
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        ) in strategic.stderr
    finally:
        cluster.kubectl("delete", "partitioningprofile", name, "--wait=false", check=False)


def test_json_patch_test_operation_that_fails(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=configmap("cm", {"a": "1"}))
    failed = cluster.kubectl(
        "patch",
        "configmap",
        "cm",
        "-n",
        ns,
        "--type",
        "json",
        "-p",
        '[{"op":"test","path":"/data/a","value":"2"},{"op":"replace","path":"/data/a","value":"3"}]',
        check=False,
    )
    assert failed.returncode != 0
    assert "the server rejected our request due to an error in our request" in failed.stderr
    assert get(cluster, "configmap", "cm", ns)["data"] == {"a": "1"}
    cluster.kubectl(
        "patch",
        "configmap",
        "cm",
        "-n",
        ns,
        "--type",
        "json",
        "-p",
        '[{"op":"test","path":"/data/a","value":"1"},{"op":"replace","path":"/data/a","value":"3"}]',
    )
    assert get(cluster, "configmap", "cm", ns)["data"] == {"a": "3"}


# --- the official Python client ----------------------------------------------------------------------


def test_official_client_patch_namespaced_config_map(k8s: Any, ns: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core: Any = client.CoreV1Api(k8s)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    merged = core.patch_namespaced_config_map(
        "cm", ns, {"data": {"b": "2"}}, _content_type="application/merge-patch+json"
    )
    assert merged.data == {"a": "1", "b": "2"}
    strategic = core.patch_namespaced_config_map(
        "cm", ns, {"data": {"a": None}}, _content_type="application/strategic-merge-patch+json"
    )
    assert strategic.data == {"b": "2"}
    patched = core.patch_namespaced_config_map("cm", ns, [{"op": "add", "path": "/data/c", "value": "3"}])
    assert patched.data == {"b": "2", "c": "3"}
    # The client's default (JSON patch) becomes a strategic merge patch for an object body.
    defaulted = core.patch_namespaced_config_map("cm", ns, {"data": {"d": "4"}})
    assert defaulted.data == {"b": "2", "c": "3", "d": "4"}
    applied = core.patch_namespaced_config_map(
        "cm",
        ns,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"e": "5"}},
        field_manager="python",
        _content_type="application/apply-patch+yaml",
    )
    assert applied.data == {"b": "2", "c": "3", "d": "4", "e": "5"}
    owners = {m.manager: m for m in applied.metadata.managed_fields}
    assert owners["OpenAPI-Generator"].operation == "Update"  # named after the client's User-Agent
    assert owners["python"].operation == "Apply"
    with pytest.raises(ApiException) as missing_manager:
        core.patch_namespaced_config_map(
            "cm",
            ns,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
            _content_type="application/apply-patch+yaml",
        )
    assert missing_manager.value.status == 422
    assert json.loads(missing_manager.value.body or "{}")["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    with pytest.raises(ApiException) as not_found:
        core.patch_namespaced_config_map("nope", ns, [{"op": "add", "path": "/data/c", "value": "3"}])
    assert not_found.value.status == 404


def test_server_side_apply_of_an_empty_map_owns_the_map(cluster: Cluster, ns: str) -> None:
    """An applied ``data: {}`` makes its manager own ``.data`` itself (structured-merge-diff's leaf
    rule for null and empty maps: managedFields ``{"f:data": {}}``). The operator's default KaiwoConfig
    is applied with ``spec: {}`` for this: it owns the map, none of the defaulted fields in it."""
    empty = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {}})
    cluster.kubectl("apply", "--server-side", "--field-manager=creator", "-n", ns, "-f", "-", input=empty)
    managed = get(cluster, "configmap", "cm", ns)["metadata"]["managedFields"]
    (creator,) = [m for m in managed if m["manager"] == "creator"]
    assert creator["operation"] == "Apply" and creator["fieldsV1"] == {"f:data": {}}

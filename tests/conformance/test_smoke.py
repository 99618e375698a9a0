"""The basics every client needs: discovery, auth, CRUD round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conformance.conftest import Cluster


def test_kubectl_sees_nodes_and_our_crds(cluster: Cluster) -> None:
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)
    assert nodes["kind"] == "List" or nodes["kind"] == "NodeList"
    assert nodes["items"]
    crds = cluster.kubectl("get", "crds", "-o", "name").stdout.split()
    assert "customresourcedefinition.apiextensions.k8s.io/modelinfers.workload.volcano.sh" in crds


@pytest.mark.sim_only
def test_requests_without_the_token_get_401(cluster: Cluster) -> None:
    import ssl
    import urllib.error
    import urllib.request

    assert cluster.sim is not None
    context = ssl.create_default_context(cadata=cluster.sim.cluster.tls.ca_pem.decode())
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{cluster.sim.url}/api/v1/namespaces", context=context)
    assert caught.value.code == 401
    body: dict[str, Any] = json.loads(caught.value.read())
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized"


def test_configmap_round_trip_with_the_official_client(k8s: Any, namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(k8s)
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    assert created.metadata.uid and created.metadata.resource_version
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    assert exists.value.status == 409
    stale = created.metadata.resource_version
    created.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("cm", namespace, created)
    assert int(updated.metadata.resource_version) > int(stale)
    created.metadata.resource_version = stale
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("cm", namespace, created)
    assert conflict.value.status == 409
    assert json.loads(conflict.value.body)["reason"] == "Conflict"
    core.delete_namespaced_config_map("cm", namespace)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("cm", namespace)
    assert gone.value.status == 404

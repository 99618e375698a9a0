"""kubectl's generators: ``kubectl create <kind>`` and friends use client-go's typed clients, which send
built-in objects as protobuf (``application/vnd.kubernetes.protobuf``). Each test runs the real command,
checks at ``-v=8`` that the body went out as protobuf, then reads the object back as JSON."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.conftest import Cluster

PROTOBUF_BODY = "Content-Type: application/vnd.kubernetes.protobuf"
RBAC = "rbac.authorization.k8s.io"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(cluster: Cluster, *args: str) -> None:
    """Run a generator and check that its request body was protobuf (what this file is about)."""
    proc = cluster.kubectl("-v=8", *args)
    assert PROTOBUF_BODY in proc.stderr, f"kubectl {' '.join(args)} did not send protobuf"


def get(cluster: Cluster, *args: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return obj


@pytest.fixture
def cluster_scoped(cluster: Cluster) -> Iterator[list[str]]:
    """Cluster-scoped objects (``kind/name``) a test creates, deleted afterwards."""
    made: list[str] = []
    yield made
    for ref in made:
        cluster.kubectl("delete", ref, "--wait=false", check=False)


def test_create_namespace(cluster: Cluster, cluster_scoped: list[str]) -> None:
    name = unique("gen")
    create(cluster, "create", "namespace", name)
    cluster_scoped.append(f"namespace/{name}")
    ns = get(cluster, "namespace", name)
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == name
    assert ns["status"]["phase"] == "Active"


def test_create_configmap_from_literals_and_a_binary_file(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    create(
        cluster,
        "create",
        "configmap",
        "cm",
        "-n",
        namespace,
        "--from-literal=a=1",
        "--from-literal=empty=",
        f"--from-file={blob}",
    )
    cm = get(cluster, "configmap", "cm", "-n", namespace)
    assert cm["data"] == {"a": "1", "empty": ""}
    assert cm["binaryData"] == {"blob.bin": base64.b64encode(bytes(range(256))).decode()}


def test_create_secret_generic_stores_base64_and_never_logs_the_value(
    cluster: Cluster, namespace: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    value = f"s3cr3t-{uuid.uuid4().hex}"
    create(
        cluster, "create", "secret", "generic", "creds", "-n", namespace, f"--from-literal=password={value}"
    )
    secret = get(cluster, "secret", "creds", "-n", namespace)
    assert secret["data"] == {"password": base64.b64encode(value.encode()).decode()}
    assert value not in json.dumps(secret)
    out, err = capfd.readouterr()
    assert value not in caplog.text and value not in out and value not in err


def test_create_serviceaccount(cluster: Cluster, namespace: str) -> None:
    create(cluster, "create", "serviceaccount", "robot", "-n", namespace)
    sa = get(cluster, "serviceaccount", "robot", "-n", namespace)
    assert sa["metadata"]["name"] == "robot" and sa["metadata"]["namespace"] == namespace


def test_create_deployment(cluster: Cluster, namespace: str) -> None:
    proc = cluster.kubectl(
        "create", "deployment", "web", "-n", namespace, "--image=x", "--replicas=2", "-v=8", check=False
    )
    assert PROTOBUF_BODY in proc.stderr
    if proc.returncode != 0 and "list-map key" in proc.stderr:
        # Not the protobuf path: the apps/v1 schemas fail to load in aiplane.apimachinery.builtin for any body.
        pytest.xfail(
            "apps/v1 built-in schema conversion fails (aiplane.apimachinery.builtin list-map key 'type')"
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec = get(cluster, "deployment", "web", "-n", namespace)["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    assert spec["template"]["metadata"]["labels"] == {"app": "web"}
    [container] = spec["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("x", "x")


def test_create_job(cluster: Cluster, namespace: str) -> None:
    create(cluster, "create", "job", "once", "-n", namespace, "--image=busybox", "--", "echo", "hi")
    spec = get(cluster, "job", "once", "-n", namespace)["spec"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    [container] = pod["containers"]
    assert container["name"] == "once" and container["image"] == "busybox"
    assert container["command"] == ["echo", "hi"]


def test_create_service_clusterip(cluster: Cluster, namespace: str) -> None:
    create(cluster, "create", "service", "clusterip", "api", "-n", namespace, "--tcp=80:8080")
    spec = get(cluster, "service", "api", "-n", namespace)["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["selector"] == {"app": "api"}
    [port] = spec["ports"]
    assert {k: port[k] for k in ("name", "port", "protocol", "targetPort")} == {
        "name": "80-8080",
        "port": 80,
        "protocol": "TCP",
        "targetPort": 8080,
    }


def test_create_poddisruptionbudget(cluster: Cluster, namespace: str) -> None:
    create(cluster, "create", "pdb", "guard", "-n", namespace, "--selector=app=x", "--min-available=1")
    spec = get(cluster, "pdb", "guard", "-n", namespace)["spec"]
    assert spec["minAvailable"] == 1
    assert spec["selector"] == {"matchLabels": {"app": "x"}}
    create(cluster, "create", "pdb", "half", "-n", namespace, "--selector=app=x", "--max-unavailable=50%")
    assert get(cluster, "pdb", "half", "-n", namespace)["spec"]["maxUnavailable"] == "50%"


def test_create_role_and_rolebinding(cluster: Cluster, namespace: str) -> None:
    create(
        cluster,
        "create",
        "role",
        "reader",
        "-n",
        namespace,
        "--verb=get,list",
        "--resource=pods,deployments.apps",
    )
    rules = get(cluster, "role", "reader", "-n", namespace)["rules"]
    assert rules == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
    ]
    create(
        cluster,
        "create",
        "rolebinding",
        "readers",
        "-n",
        namespace,
        "--role=reader",
        "--user=alice",
        f"--serviceaccount={namespace}:default",
    )
    binding = get(cluster, "rolebinding", "readers", "-n", namespace)
    assert binding["roleRef"] == {"apiGroup": RBAC, "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [
        {"apiGroup": RBAC, "kind": "User", "name": "alice"},
        {"kind": "ServiceAccount", "name": "default", "namespace": namespace},
    ]


def test_create_clusterrole_and_clusterrolebinding(cluster: Cluster, cluster_scoped: list[str]) -> None:
    role, binding = unique("gen-role"), unique("gen-binding")
    create(
        cluster,
        "create",
        "clusterrole",
        role,
        "--verb=get",
        "--resource=nodes",
        "--non-resource-url=/healthz",
    )
    cluster_scoped.append(f"clusterrole/{role}")
    assert get(cluster, "clusterrole", role)["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
    ]
    create(cluster, "create", "clusterrolebinding", binding, f"--clusterrole={role}", "--group=ops")
    cluster_scoped.append(f"clusterrolebinding/{binding}")
    crb = get(cluster, "clusterrolebinding", binding)
    assert crb["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}
    assert crb["subjects"] == [{"apiGroup": RBAC, "kind": "Group", "name": "ops"}]


def test_create_ingress(cluster: Cluster, namespace: str) -> None:
    create(
        cluster,
        "create",
        "ingress",
        "front",
        "-n",
        namespace,
        "--class=nginx",
        "--rule=example.com/api*=api:http",
        "--default-backend=api:80",
    )
    spec = get(cluster, "ingress", "front", "-n", namespace)["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert spec["defaultBackend"] == {"service": {"name": "api", "port": {"number": 80}}}
    assert spec["rules"] == [
        {
            "host": "example.com",
            "http": {
                "paths": [
                    {
                        "path": "/api",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "api", "port": {"name": "http"}}},
                    }
                ]
            },
        }
    ]


def test_create_token(cluster: Cluster, namespace: str) -> None:
    discovery = json.loads(cluster.kubectl("get", "--raw", "/api/v1").stdout)
    if "serviceaccounts/token" not in {r["name"] for r in discovery["resources"]}:
        pytest.skip("this server does not serve serviceaccounts/token")
    proc = cluster.kubectl("create", "token", "default", "-n", namespace, "--duration=10m", "-v=8")
    assert PROTOBUF_BODY in proc.stderr
    assert proc.stdout.strip().count(".") == 2  # a JWT


def test_cordon_and_uncordon(cluster: Cluster) -> None:
    # cordon/uncordon send a strategic merge patch (JSON), not protobuf; they read the node first.
    node = cluster.kubectl("get", "nodes", "-o", "name").stdout.split()[0]
    proc = cluster.kubectl("cordon", node, check=False)
    if "unknown format" in proc.stderr:  # kubectl cordon exits 0 even when the PATCH fails
        pytest.xfail("this server does not implement strategic merge patch yet")
    try:
        assert proc.returncode == 0 and "error" not in proc.stderr, proc.stderr
        assert get(cluster, node)["spec"].get("unschedulable") is True
    finally:
        cluster.kubectl("uncordon", node, check=False)
    assert not get(cluster, node)["spec"].get("unschedulable", False)

"""What kubectl shows: discovery (api-resources, api-versions, categories), ``kubectl get`` tables and
``kubectl explain``, compared with what a kube-apiserver 1.37 cluster prints."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.conftest import Cluster

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 10.0


def columns(output: str) -> list[list[str]]:
    """kubectl's table output split into cells (columns are separated by at least two spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.splitlines() if line.strip()]


def eventually(check: Callable[[], Any], what: str) -> Any:
    """Poll ``check`` until it returns something truthy, failing after a deadline."""
    deadline = time.monotonic() + DEADLINE
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def ns(cluster: Cluster, k8s: Any) -> Iterator[str]:
    """A fresh namespace, made with the official client (independent of kubectl's protobuf bodies)."""
    from kubernetes import client

    name = f"conf-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def profiles(cluster: Cluster) -> list[str]:
    """The example PartitioningProfiles and PartitioningPlan, applied once for this module."""
    for example in ("partition-profiles.yaml", "partitioning-plan.yaml"):
        cluster.kubectl("apply", "-f", str(ROOT / "examples" / example))
    docs = yaml.safe_load_all((ROOT / "examples" / "partition-profiles.yaml").read_text())
    return [d["metadata"]["name"] for d in docs if d]


# --- discovery ----------------------------------------------------------------------------------


def test_kubectl_uses_aggregated_discovery(cluster: Cluster) -> None:
    proc = cluster.kubectl("api-resources", "-v=6")
    requested = re.findall(r'verb="GET" url="https?://[^/"]+(/apis?[^"?]*)', proc.stderr)
    assert "/api" in requested and "/apis" in requested
    # Aggregated discovery carries every resource list: no per-group-version requests.
    assert not [path for path in requested if path.count("/") >= 3], requested


def test_api_resources_of_a_group(cluster: Cluster) -> None:
    out = cluster.kubectl("api-resources", "--api-group=workload.volcano.sh").stdout
    assert columns(out) == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        ["modelinfers", "mi", "workload.volcano.sh/v1alpha1", "true", "ModelInfer"],
    ]
    wide = columns(
        cluster.kubectl("api-resources", "--api-group=infrastructure.silogen.ai", "-o", "wide").stdout
    )
    assert wide[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
    profiles = next(row for row in wide if row[0] == "partitioningprofiles")
    assert profiles[1:] == [
        "gpuprofile,pp",
        "infrastructure.silogen.ai/v1alpha1",
        "false",
        "PartitioningProfile",
        "delete,deletecollection,get,list,patch,create,update,watch",
        "infrastructure,gpu,aiplane",
    ]


def test_api_resources_of_builtins(cluster: Cluster) -> None:
    rows = {row[0]: row for row in columns(cluster.kubectl("api-resources", "-o", "wide").stdout)}
    assert rows["pods"][1:] == [
        "po",
        "v1",
        "true",
        "Pod",
        "create,delete,deletecollection,get,list,patch,update,watch",
        "all",
    ]
    assert rows["namespaces"][1:6] == [
        "ns",
        "v1",
        "false",
        "Namespace",
        "create,delete,get,list,patch,update,watch",
    ]
    assert rows["customresourcedefinitions"][1] == "crd,crds"
    names = cluster.kubectl("api-resources", "--namespaced=false", "-o", "name").stdout.split()
    assert "nodes" in names and "partitioningplans.infrastructure.silogen.ai" in names
    assert "pods" not in names


def test_api_versions(cluster: Cluster) -> None:
    versions = cluster.kubectl("api-versions").stdout.split()
    assert versions == sorted(versions)
    for expected in (
        "v1",
        "apps/v1",
        "autoscaling/v2",
        "workload.volcano.sh/v1alpha1",
        "kueue.x-k8s.io/v1beta1",
    ):
        assert expected in versions


@pytest.mark.sim_only
def test_discovery_follows_crds_created_and_deleted(cluster: Cluster) -> None:
    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "plural": "gadgets", "shortNames": ["gdg"], "categories": ["gizmos"]},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "description": "What the gadget should do.",
                                    "properties": {
                                        "size": {"type": "integer", "description": "Size in units."}
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))

    def listed() -> bool:
        out = cluster.kubectl("api-resources", f"--api-group={group}", check=False).stdout
        return "gadgets" in out

    eventually(listed, "the new CRD in discovery")
    assert "No resources found" in cluster.kubectl("get", "gizmos", "-A").stderr
    explained = cluster.kubectl("explain", "gdg.spec").stdout
    assert "What the gadget should do." in explained and "size\t<integer>" in explained
    cluster.kubectl("delete", "crd", f"gadgets.{group}")
    eventually(lambda: not listed(), "the CRD to leave discovery")


# --- kubectl get ----------------------------------------------------------------------------------


def test_get_nodes(cluster: Cluster) -> None:
    rows = columns(cluster.kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert all(len(row) == 5 for row in rows)
    # Whatever nodes the cluster has (the embedded fleet, kwok's), each row is printed from the Node.
    nodes = {
        n["metadata"]["name"]: n
        for n in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    assert [row[0] for row in rows[1:]] == sorted(nodes)
    for name, status, roles, age, version in rows[1:]:
        node = nodes[name]
        labels = node["metadata"].get("labels", {})
        # kubectl's findNodeRoles: node-role.kubernetes.io/<role> keys and the kubernetes.io/role value.
        found = {
            k.removeprefix("node-role.kubernetes.io/")
            for k in labels
            if k.startswith("node-role.kubernetes.io/")
        }
        found |= {labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()
        labelled = sorted(found - {""})
        assert roles == (",".join(labelled) or "<none>")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert status.split(",")[0] == {"True": "Ready", "False": "NotReady"}.get(ready["status"], "Unknown")
        assert version == node["status"]["nodeInfo"]["kubeletVersion"]
        assert re.fullmatch(r"\d+[smhdy].*|<invalid>", age)
    assert any(row[1] == "Ready" for row in rows[1:])
    wide = columns(cluster.kubectl("get", "nodes", "-o", "wide").stdout)
    assert wide[0] == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]


def test_cordoned_node_is_scheduling_disabled(cluster: Cluster, k8s: Any) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    name = f"conf-node-{uuid.uuid4().hex[:6]}"
    core.create_node(
        {
            "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": True},
        }
    )
    try:
        row = columns(cluster.kubectl("get", "node", name).stdout)[1]
        assert row[1].endswith("SchedulingDisabled")
        assert row[2] == "worker"
    finally:
        core.delete_node(name)


def test_get_namespaced_builtins(cluster: Cluster, ns: str) -> None:
    manifest = f"""
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: {ns}}}
spec:
  schedulerName: conformance-unscheduled  # no scheduler binds it: Pending on any cluster
  containers: [{{name: c, image: registry.example/web:1}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {ns}}}
data: {{a: "1", b: "2"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: creds, namespace: {ns}}}
type: kubernetes.io/basic-auth
data: {{username: YQ==, password: Yg==}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: {ns}}}
spec:
  minAvailable: 1
  selector: {{matchLabels: {{app: web}}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: reader, namespace: {ns}}}
rules: []
"""
    cluster.kubectl("apply", "-f", "-", input=manifest)
    pods = columns(cluster.kubectl("get", "pods", "-n", ns).stdout)
    assert pods[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1][:4] == ["web", "0/1", "Pending", "0"]
    wide = columns(cluster.kubectl("get", "pods", "-n", ns, "-o", "wide").stdout)
    assert wide[0] == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    cms = columns(cluster.kubectl("get", "cm", "settings", "-n", ns).stdout)
    assert cms[0] == ["NAME", "DATA", "AGE"] and cms[1][:2] == ["settings", "2"]
    secrets = columns(cluster.kubectl("get", "secret", "creds", "-n", ns).stdout)
    assert secrets[0] == ["NAME", "TYPE", "DATA", "AGE"]
    assert secrets[1][:3] == ["creds", "kubernetes.io/basic-auth", "2"]
    svc = columns(cluster.kubectl("get", "svc", "web", "-n", ns).stdout)
    assert svc[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert svc[1][1] == "ClusterIP" and svc[1][4] == "80/TCP"
    pdb = columns(cluster.kubectl("get", "pdb", "-n", ns).stdout)
    assert pdb[0] == ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
    assert pdb[1][:3] == ["web", "1", "N/A"]
    roles = columns(cluster.kubectl("get", "roles", "-n", ns).stdout)
    assert roles[0] == ["NAME", "CREATED AT"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", roles[1][1])
    everything = cluster.kubectl("get", "all", "-n", ns, "-o", "name").stdout.split()
    assert "pod/web" in everything and "service/web" in everything
    all_namespaces = columns(cluster.kubectl("get", "pods", "-A", "--show-labels").stdout)
    assert all_namespaces[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"]
    assert any(row[:2] == [ns, "web"] for row in all_namespaces[1:])


def test_get_crd(cluster: Cluster) -> None:
    # 1.37's CRD table convertor (before it, the default one: NAME, CREATED AT).
    rows = columns(cluster.kubectl("get", "crd", "modelinfers.workload.volcano.sh").stdout)
    assert rows[0] == ["NAME", "SCOPE", "VERSIONS", "CREATED AT"]
    assert rows[1][:3] == ["modelinfers.workload.volcano.sh", "Namespaced", "v1alpha1(storage)"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rows[1][3])
    wide = columns(
        cluster.kubectl("get", "crd", "partitioningplans.infrastructure.silogen.ai", "-o", "wide").stdout
    )
    assert wide[0] == [
        "NAME",
        "SCOPE",
        "VERSIONS",
        "CREATED AT",
        "GROUP",
        "KIND",
        "SHORTNAMES",
        "ESTABLISHED",
    ]
    assert wide[1][:2] == ["partitioningplans.infrastructure.silogen.ai", "Cluster"]
    assert wide[1][4:6] == ["infrastructure.silogen.ai", "PartitioningPlan"] and wide[1][-1] == "true"


def test_printer_columns_of_our_kinds(cluster: Cluster, profiles: list[str]) -> None:
    out = cluster.kubectl("get", "pp").stdout
    lines = out.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["NAME", "DCM-PROFILE", "READY", "AGE"]
    rows = {row[0]: row for row in columns(out)[1:]}
    assert set(profiles) <= set(rows)
    assert rows["mi300x-cpx"][1] == "cpx_nps4"
    wide = columns(cluster.kubectl("get", "gpuplan", "-o", "wide").stdout)
    assert wide[0] == [
        "NAME",
        "PHASE",
        "SUCCEEDED",
        "FAILED",
        "TOTAL",
        "IN-PROGRESS",
        "MAX-PARALLEL",
        "PAUSED",
        "DRY-RUN",
        "AGE",
    ]
    narrow = columns(cluster.kubectl("get", "gpuplan").stdout)
    assert narrow[0] == ["NAME", "PHASE", "SUCCEEDED", "FAILED", "TOTAL", "AGE"]


def test_printer_column_filters_read_status(cluster: Cluster, k8s: Any, profiles: list[str]) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(k8s)
    args = ("infrastructure.silogen.ai", "v1alpha1", "partitioningprofiles", profiles[0])
    current = custom.get_cluster_custom_object(*args)
    current["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ProfileFound",
                "message": "the DCM profile exists",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    custom.replace_cluster_custom_object_status(*args, current)
    row = columns(cluster.kubectl("get", "pp", profiles[0], "-o", "wide").stdout)
    assert row[0] == ["NAME", "DCM-PROFILE", "READY", "REASON", "AGE"]
    assert row[1][2:4] == ["True", "ProfileFound"]


def test_category_lists_our_kinds(cluster: Cluster, profiles: list[str]) -> None:
    out = cluster.kubectl("get", "aiplane", "-o", "name").stdout.split()
    for name in profiles:
        assert f"partitioningprofile.infrastructure.silogen.ai/{name}" in out
    assert any(line.startswith("partitioningplan.infrastructure.silogen.ai/") for line in out)
    table = cluster.kubectl("get", "aiplane").stdout
    assert "partitioningprofile.infrastructure.silogen.ai/mi300x-cpx" in table
    assert re.search(r"NAME\s+DCM-PROFILE\s+READY\s+AGE", table)


# --- kubectl explain ------------------------------------------------------------------------------


def test_explain_builtin_field(cluster: Cluster) -> None:
    out = cluster.kubectl("explain", "pods.spec.containers").stdout
    assert out.startswith("KIND:       Pod\nVERSION:    v1\n")
    assert "FIELD: containers <[]Container>" in out
    assert "List of containers belonging to the pod." in out
    assert re.search(r"^  name\t<string> -required-$", out, re.M)
    assert re.search(r"^  resources\t<ResourceRequirements>$", out, re.M)
    deploy = cluster.kubectl("explain", "deployment.spec.strategy.rollingUpdate").stdout
    assert "GROUP:      apps" in deploy and "maxSurge\t<IntOrString>" in deploy
    limits = cluster.kubectl("explain", "pod.spec.containers.resources.limits").stdout
    assert "FIELD: limits <map[string]Quantity>" in limits


def test_explain_custom_resources(cluster: Cluster) -> None:
    roles = cluster.kubectl("explain", "modelinfers.spec.template.roles").stdout
    assert "GROUP:      workload.volcano.sh\nKIND:       ModelInfer\nVERSION:    v1alpha1" in roles
    assert "FIELD: roles <[]Object>" in roles
    assert "Roles are the pod roles of every InferGroup" in roles
    assert re.search(r"^  name\t<string> -required-$", roles, re.M)
    rollout = cluster.kubectl("explain", "partitioningplans.spec.rollout", "--recursive").stdout
    assert "KIND:       PartitioningPlan" in rollout and "FIELD: rollout <Object>" in rollout
    assert re.search(r"^  maxParallel\t<integer>$", rollout, re.M)
    dgd = cluster.kubectl("explain", "dgd").stdout
    assert "GROUP:      nvidia.com\nKIND:       DynamoGraphDeployment\nVERSION:    v1alpha1" in dgd
    assert "metadata\t<ObjectMeta>" in dgd and "spec\t<Object>" in dgd
    missing = cluster.kubectl("explain", "dgd.spec.nope", check=False)
    assert missing.returncode != 0 and 'field "nope" does not exist' in missing.stderr


def test_kubectl_names_a_kind_the_server_does_not_serve(cluster: Cluster, tmp_path: Path) -> None:
    """An unknown kind: kubectl's validation finds it in no OpenAPI v3 document, falls back to v2 (in
    protobuf), finds nothing to check there either, and the mapping says what is wrong."""
    manifest = tmp_path / "widget.yaml"
    manifest.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n", encoding="utf-8")
    for verb in (("apply",), ("apply", "--server-side"), ("create",)):
        proc = cluster.kubectl(*verb, "-f", str(manifest), check=False)
        assert proc.returncode == 1
        assert 'no matches for kind "Widget" in version "example.com/v1"' in proc.stderr, proc.stderr
        assert "content type" not in proc.stderr

"""Custom resources through real clients: schema and CEL enforcement, subresources, wait, limits."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.apimachinery.builtin import structural
from tests.conformance.conftest import Cluster, eventually

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "infrastructure.silogen.ai", "v1alpha1"


def _plan(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {
            "rules": [{"selector": {"matchLabels": {"conformance": name}}, "profileRef": {"name": "cpx"}}],
            **spec,
        },
    }


def _custom(k8s: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(k8s)


@pytest.fixture
def plan_name(cluster: Cluster) -> Any:
    name = f"conf-plan-{time.monotonic_ns() % 10**8}"
    yield name
    cluster.kubectl("delete", "partitioningplan", name, "--ignore-not-found", "--wait=false", check=False)


def test_invalid_custom_resource_gets_kubes_422_message(cluster: Cluster, plan_name: str) -> None:
    bad = _plan(plan_name, rollout={"maxParallel": 0})
    proc = cluster.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0
    assert (
        f'The PartitioningPlan "{plan_name}" is invalid: spec.rollout.maxParallel: Invalid value: 0: '
        "spec.rollout.maxParallel in body should be greater than or equal to 1"
    ) in proc.stderr


def test_cel_transition_rule_rejects_re_enabling_dry_run(cluster: Cluster, plan_name: str) -> None:
    cluster.kubectl("create", "-f", "-", input=json.dumps(_plan(plan_name, dryRun=False)))
    proc = cluster.kubectl(
        "patch", "partitioningplan", plan_name, "--type=merge", "-p", '{"spec":{"dryRun":true}}', check=False
    )
    assert proc.returncode != 0
    # kube 1.37 leaves an object's value out of a CEL rule's error (no "object" before the message).
    assert (
        f'The PartitioningPlan "{plan_name}" is invalid: spec: Invalid value: dryRun cannot be re-enabled'
        in proc.stderr
    )


def test_unknown_fields_are_rejected_by_kubectl_strict_validation(cluster: Cluster, plan_name: str) -> None:
    bad = _plan(plan_name)
    bad["spec"]["rollout"] = {"maxParalel": 3}
    proc = cluster.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.rollout.maxParalel"' in proc.stderr


def test_status_subresource_generation_and_wait_for_condition(
    cluster: Cluster, k8s: Any, plan_name: str
) -> None:
    api = _custom(k8s)
    created = api.create_cluster_custom_object(GROUP, VERSION, "partitioningplans", _plan(plan_name))
    assert created["metadata"]["generation"] == 1
    waiter = None
    try:
        waiter = __import__("subprocess").Popen(
            [
                *cluster.kubectl_argv(),
                "wait",
                f"partitioningplan/{plan_name}",
                "--for=condition=PlanReady",
                "--timeout=60s",
            ],
            stdout=-1,
            stderr=-1,
            text=True,
        )
        status = {
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PlanReady",
                        "status": "True",
                        "reason": "PlanValid",
                        "message": "ok",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        }
        after_status = api.patch_cluster_custom_object_status(
            GROUP, VERSION, "partitioningplans", plan_name, status
        )
        assert after_status["metadata"]["generation"] == 1  # status writes leave generation alone
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        assert "condition met" in out
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
    spec_change = api.patch_cluster_custom_object(
        GROUP, VERSION, "partitioningplans", plan_name, {"spec": {"paused": True}}
    )
    assert spec_change["metadata"]["generation"] == 2
    assert spec_change["status"]["phase"] == "Pending"  # main-resource writes keep status


def test_kubectl_scale_works_through_the_scale_subresource(cluster: Cluster, namespace: str) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "modelinfer-1p2d.yaml").read_text(encoding="utf-8"))
    doc["metadata"]["namespace"] = namespace
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(doc))
    cluster.kubectl("scale", "modelinfer", doc["metadata"]["name"], "-n", namespace, "--replicas=5")
    got = json.loads(
        cluster.kubectl("get", "mi", doc["metadata"]["name"], "-n", namespace, "-o", "json").stdout
    )
    assert got["spec"]["replicas"] == 5
    scale = json.loads(
        cluster.kubectl(
            "get", "mi", doc["metadata"]["name"], "-n", namespace, "--subresource=scale", "-o", "json"
        ).stdout
    )
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 5


def test_server_side_dry_run_stores_nothing(cluster: Cluster, plan_name: str) -> None:
    out = cluster.kubectl(
        "create", "-f", "-", "--dry-run=server", "-o", "json", input=json.dumps(_plan(plan_name))
    )
    assert json.loads(out.stdout)["metadata"]["name"] == plan_name
    proc = cluster.kubectl("get", "partitioningplan", plan_name, check=False)
    assert proc.returncode != 0 and "NotFound" in proc.stderr


def test_generate_name(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    created = core.create_namespaced_config_map(
        namespace, {"metadata": {"generateName": "cm-"}, "data": {"a": "1"}}
    )
    assert created.metadata.name.startswith("cm-") and len(created.metadata.name) == len("cm-") + 5


def _big_crd() -> dict[str, Any]:
    """A CRD whose schema embeds PodSpec twice: well over the 256 KiB client-side apply can annotate."""
    pod = structural("io.k8s.api.core.v1.PodSpec")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "bigs.conformance.aiplane.io"},
        "spec": {
            "group": "conformance.aiplane.io",
            "scope": "Namespaced",
            "names": {"kind": "Big", "plural": "bigs"},
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
                                    "properties": {"a": copy.deepcopy(pod), "b": copy.deepcopy(pod)},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def wait_established(cluster: Cluster, crd: str) -> None:
    """``kubectl wait --for=condition=Established``, once there are conditions to wait on.

    kube answers a new CRD with ``status.conditions: null`` until its establishing controller has run,
    and ``kubectl wait --for=condition`` fails at once on a null list ("status.conditions accessor
    error"), so a script first waits for the list to appear.
    """

    def conditions() -> Any:
        obj = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json").stdout)
        return (obj.get("status") or {}).get("conditions")

    eventually(conditions, what=f"{crd} to have conditions")
    waited = cluster.kubectl("wait", f"crd/{crd}", "--for=condition=Established", "--timeout=30s")
    assert "condition met" in waited.stdout


def test_a_crd_over_256_kib_needs_server_side_apply(cluster: Cluster) -> None:
    crd = json.dumps(_big_crd())
    assert len(crd) > 256 * 1024
    try:
        client_side = cluster.kubectl("apply", "-f", "-", input=crd, check=False)
        assert client_side.returncode != 0
        assert "metadata.annotations: Too long: may not be more than 262144 bytes" in client_side.stderr or (
            "metadata.annotations: Too long: must have at most 262144 bytes" in client_side.stderr
        )
        server_side = cluster.kubectl("apply", "--server-side", "-f", "-", input=crd)
        assert "serverside-applied" in server_side.stdout
        wait_established(cluster, "bigs.conformance.aiplane.io")
    finally:
        cluster.kubectl("delete", "crd", "bigs.conformance.aiplane.io", "--ignore-not-found", check=False)


def test_request_bodies_over_3_mib_get_413(k8s: Any, namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "huge"}, "data": {"x": "y" * (3 * 1024 * 1024 + 10)}}
        )
    assert caught.value.status == 413
    assert json.loads(caught.value.body)["message"] == "Request entity too large: limit is 3145728"


def test_a_crd_in_a_kubernetes_group_needs_its_api_review(cluster: Cluster) -> None:
    group = f"c{time.monotonic_ns() % 10**8}.conformance.k8s.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Gizmo", "plural": "gizmos"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    refused = cluster.kubectl("create", "-f", "-", input=json.dumps(crd), check=False)
    assert refused.returncode != 0
    assert (
        f'The CustomResourceDefinition "gizmos.{group}" is invalid: '
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have "
        'approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111'
    ) in refused.stderr
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, a conformance test"}
    try:
        cluster.kubectl("create", "-f", "-", input=json.dumps(crd))
    finally:
        cluster.kubectl("delete", "crd", f"gizmos.{group}", "--ignore-not-found", "--wait=false", check=False)


@pytest.mark.parametrize(("state", "refused"), [("Ready", True), ("Profiling", True), ("Failed", False)])
def test_a_dgdr_spec_edit_is_refused_at_admission_once_it_is_planned(
    cluster: Cluster, namespace: str, state: str, refused: bool
) -> None:
    """The DGDR controller ignores spec changes from Profiling on; the CRD's transition rule on the whole
    object refuses them at admission instead, so the edit is not reported "patched" and then ignored."""
    doc = yaml.safe_load((ROOT / "examples" / "dgdr-qwen3-8b-h100.yaml").read_text(encoding="utf-8"))
    doc["metadata"]["namespace"] = namespace
    cluster.kubectl("create", "-f", "-", input=json.dumps(doc))
    name = doc["metadata"]["name"]
    status = json.dumps({"status": {"state": state}})
    cluster.kubectl(
        "patch", "dgdr", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", status
    )
    proc = cluster.kubectl(
        "patch",
        "dgdr",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"sla":{"ttft":400}}}',
        check=False,
    )
    if refused:
        assert proc.returncode == 1
        assert (
            f'The DynamoGraphDeploymentRequest "{name}" is invalid: spec: Invalid value: spec is immutable once'
            in proc.stderr
        )
        assert "spec is immutable once the request is Profiling" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr  # a Failed request may be fixed in place
    # Labels and annotations stay editable in every state.
    cluster.kubectl("label", "dgdr", name, "-n", namespace, "team=a")

"""Platform configuration on the real control plane, as the chart's ServiceAccount: a KaiwoConfig on a
cluster without Kueue says so in its status; an AIMNamespaceConfig gives a Dynamo worker's pods the
team's credentials by Secret reference and its image-pull secret, and says the Gateway API is absent."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiplane.kube.client import HttpKubeClient
from aiplane.kube.resources import PODS, resource_for
from tests.polling import eventually
from tests.real import operator as op
from tests.real.watching import apply

pytestmark = pytest.mark.real

KAIWO = resource_for("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig")
NSCFG = resource_for("config.kaiwo.silogen.ai/v1alpha1", "AIMNamespaceConfig")


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


async def _get(
    admin: HttpKubeClient, res: Any, name: str, namespace: str | None = None
) -> dict[str, Any] | None:
    return next(
        (o for o in (await admin.list(res, namespace))["items"] if o["metadata"]["name"] == name), None
    )


async def test_a_kaiwoconfig_without_kueue_says_kueue_is_not_installed(
    admin: HttpKubeClient, start_operator: Callable[[str], op.Process]
) -> None:
    operator = start_operator("kaiwoconfig")
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"nodes": {"defaultGpuResourceKey": "amd.com/gpu"}},
    }
    await apply(admin, [config])
    try:

        async def reported() -> dict[str, Any] | None:
            ready = _condition(await _get(admin, KAIWO, "kaiwo"), "Ready")
            return ready if ready and ready["reason"] == "KueueNotInstalled" else None

        ready = await eventually(
            reported, timeout=30, what="KaiwoConfig Ready=False KueueNotInstalled", interval=0.2
        )
        assert ready["status"] == "False" and "Kueue" in ready["message"]
    finally:
        await admin.delete(KAIWO, "kaiwo")
    assert operator.alive(), operator.tail()


async def test_an_aimnamespaceconfig_reaches_a_workers_pods_by_reference_and_names_the_absent_gateway_api(
    admin: HttpKubeClient, start_operator: Callable[[str], op.Process], namespace: str
) -> None:
    operator = start_operator("aimnamespaceconfig,dynamocomponentdeployment")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-creds", "namespace": namespace}}
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {
            "gateway": {"name": "kgw-default", "namespace": "gateway-system"},
            "credentials": {"huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"}},
            "images": {"imagePullSecrets": ["aim-registry-creds"]},
        },
    }
    worker = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "dec", "namespace": namespace},
        "spec": {
            "componentType": "worker",
            "serviceName": "Decode",
            "replicas": 1,
            "resources": {"limits": {"gpu": "1"}},
            "extraPodSpec": {"mainContainer": {"image": "vllm:1"}},
        },
    }
    await apply(admin, [{**secret, "stringData": {"token": "hf_x"}}, config, worker])

    async def decorated_pod() -> dict[str, Any] | None:
        pods = (await admin.list(PODS, namespace, label_selector="nvidia.com/selector=dec"))["items"]
        ready = [p for p in pods if _condition(p, "Ready") and _condition(p, "Ready")["status"] == "True"]  # type: ignore[index]
        return ready[0] if ready else None

    pod = await eventually(decorated_pod, timeout=60, what="the worker's pod Ready", interval=0.2)
    env = {e["name"]: e for e in pod["spec"]["containers"][0].get("env") or []}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-creds", "key": "token"}
    assert "value" not in env["HF_TOKEN"]  # by reference: the secret's value is never copied
    assert {"name": "aim-registry-creds"} in pod["spec"]["imagePullSecrets"]

    async def gateway_reported() -> dict[str, Any] | None:
        return _condition(await _get(admin, NSCFG, "default", namespace), "GatewayResolved")

    gateway = await eventually(gateway_reported, timeout=30, what="GatewayResolved reported", interval=0.2)
    assert (gateway["status"], gateway["reason"]) == ("False", "GatewayNotFound")
    assert "the Gateway API is not served" in gateway["message"]
    assert operator.alive(), operator.tail()


async def test_a_users_kaiwoconfig_applies_over_the_operators_default_without_conflict(
    admin: HttpKubeClient, start_operator: Callable[[str], op.Process], real_cluster: Any
) -> None:
    """The operator creates the default KaiwoConfig at start; kube then gives none of its defaulted
    fields to the operator, so ``kubectl apply --server-side`` of examples/kaiwoconfig.yaml (which sets
    some of them) succeeds without --force-conflicts."""
    operator = start_operator("kaiwoconfig")
    try:
        created = await eventually(
            lambda: _get(admin, KAIWO, "kaiwo"), timeout=30, what="the default KaiwoConfig", interval=0.2
        )
        # The operator owns a label of its own and the spec map it applied empty: none of the spec's
        # fields (the defaults belong to nobody).
        ours = [
            m for m in created["metadata"].get("managedFields") or [] if m["manager"] == "aiplane-kaiwoconfig"
        ]
        main = [m.get("fieldsV1", {}) for m in ours if not m.get("subresource")]
        assert main and all(fields.get("f:spec", {}) == {} for fields in main), main
        kubectl = Path(sys.executable).parent / "kubectl"
        example = Path(__file__).resolve().parents[2] / "examples" / "kaiwoconfig.yaml"
        proc = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(real_cluster.kubeconfig),
                "apply",
                "--server-side",
                "-f",
                str(example),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        applied = await _get(admin, KAIWO, "kaiwo")
        assert applied is not None and applied["spec"]["dynamicallyUpdateDefaultClusterQueue"] is True

        async def reconciled() -> dict[str, Any] | None:
            found = await _get(admin, KAIWO, "kaiwo")
            generation = (found or {}).get("metadata", {}).get("generation")
            ready = _condition(found, "Ready")
            return ready if ready and ready.get("observedGeneration") == generation else None

        await eventually(reconciled, timeout=30, what="the user's KaiwoConfig reconciled", interval=0.2)
    finally:
        await admin.delete(KAIWO, "kaiwo")
    assert operator.alive(), operator.tail()

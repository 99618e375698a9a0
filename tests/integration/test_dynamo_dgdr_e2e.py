"""DynamoGraphDeploymentRequests end to end on the embedded cluster: the DGDR, DGD and DCD controllers
with the simulated Deployment controller, scheduler and kubelet, and the real planner.

What a user sees: an offline request planned for the cluster's GPUs, its DGD created with the planned
TPs and replicas and followed to Ready; the spec alone without autoApply; a deleted DGD; a rejected
spec edit; clear failures; an online request whose profiling Job is played by a stand-in; and a
request planned in partitions on a CPX-partitioned MI300X fleet.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.controllers.dynamo import component_controller, graph_controller, request_controller
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.kube.client import ApiError
from aiplane.kube.manager import Manager
from aiplane.kube.resources import CONFIGMAPS, EVENTS, JOBS, NAMESPACES, NODES, PODS, SECRETS, resource_for
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration import operator_rbac
from tests.polling import eventually

DGDR = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeploymentRequest")
DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
NS = "team-a"
MODEL = "Qwen/Qwen3-8B"
PROFILER = "nvcr.io/nvidia/ai-dynamo/profiler:0.6.0"
Obj = dict[str, Any]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient

    async def dgdr(self, name: str) -> Obj:
        return await self.client.get(DGDR, name, NS)

    async def state(self, name: str, state: str) -> Obj | None:
        obj = await self.dgdr(name)
        return obj if (obj.get("status") or {}).get("state") == state else None

    async def reasons(self, name: str) -> list[str]:
        listed = await self.client.list(EVENTS, namespace=NS)
        return [e["reason"] for e in listed["items"] if e["involvedObject"].get("name") == name]

    async def recorded(self, name: str, *reasons: str) -> None:
        """Wait for the Events: the recorder posts them after the status write that shows the state
        (asynchronously, as kube's recorder does), so seeing the state does not mean they are there."""

        async def all_there() -> bool:
            return set(reasons) <= set(await self.reasons(name))

        await eventually(all_there, 10, f"Events {', '.join(reasons)} of {name}")


def request(name: str, **spec: Any) -> Obj:
    body: Obj = {"modelName": MODEL, "backend": "vllm", "sla": {"ttft": 200, "itl": 20}, **spec}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


@pytest.fixture
async def world() -> AsyncIterator[World]:
    cluster = operator_rbac.cluster(agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    manager = Manager(operator, leader_election=None, handle_signals=False)
    manager.set_options(DynamoOptions(profiler_image=PROFILER))
    await graph_controller.setup(manager)
    await component_controller.setup(manager)
    request_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret"}}
    await client.create(SECRETS, {**secret, "stringData": {"HF_TOKEN": "hf_x"}}, namespace=NS)
    yield World(cluster, client, operator)
    manager.stop()
    assert await task == 0
    await client.close()
    await cluster.stop()


def _workers(graph: Obj) -> dict[str, Obj]:
    services = graph["spec"]["services"]
    return {svc["subComponentType"]: svc for svc in services.values() if svc.get("subComponentType")}


async def test_offline_auto_apply_reaches_ready_with_the_planned_graph(world: World) -> None:
    await world.client.create(DGDR, request("qwen", gpu={"type": "h100"}, autoApply=True), namespace=NS)
    ready = await eventually(lambda: world.state("qwen", "Ready"), 60, "request Ready")
    status = ready["status"]
    assert status["deployment"] == {"name": "qwen", "namespace": NS, "state": "successful", "created": True}
    assert status["profilingResults"] == "configmap/dgdr-output-qwen"
    validation = next(c for c in status["conditions"] if c["type"] == "Validation")
    assert "h100_sxm" in validation["message"] and "budget 16 nvidia.com/gpu" in validation["message"]
    output = await world.client.get(CONFIGMAPS, "dgdr-output-qwen", NS)
    plan = yaml.safe_load(output["data"]["plan.json"])["disagg"]
    dgd = await world.client.get(DGD, "qwen", NS)
    assert dgd["status"]["state"] == "successful"
    assert "ownerReferences" not in dgd["metadata"]
    assert dgd["metadata"]["labels"]["dgdr.nvidia.com/name"] == "qwen"
    workers = _workers(dgd)
    for role in ("prefill", "decode"):
        assert workers[role]["replicas"] == plan[role]["workers"]
        assert workers[role]["resources"]["limits"]["gpu"] == str(plan[role]["tp"])
        assert (
            f"--tensor-parallel-size {plan[role]['tp']}"
            in workers[role]["extraPodSpec"]["mainContainer"]["args"][0]
        )
    assert dgd["spec"]["services"]["Planner"]["componentType"] == "planner"
    assert dgd["spec"] == status["generatedDeployment"]["spec"]
    await world.recorded("qwen", "Initialized", "SpecGenerated", "DeploymentCreated", "DeploymentReady")

    await world.client.delete(DGD, "qwen", namespace=NS)
    deleted = await eventually(lambda: world.state("qwen", "DeploymentDeleted"), 20, "DeploymentDeleted")
    assert deleted["status"]["deployment"]["state"] == "Deleted"
    await world.recorded("qwen", "DeploymentDeleted")
    assert await _get(world, DGD, "qwen") is None  # not created again


async def test_without_auto_apply_stops_at_ready_and_rejects_spec_edits(world: World) -> None:
    await world.client.create(DGDR, request("spec-only", gpu={"type": "h100_sxm"}), namespace=NS)
    ready = await eventually(lambda: world.state("spec-only", "Ready"), 30, "request Ready")
    generated = ready["status"]["generatedDeployment"]
    assert generated["kind"] == "DynamoGraphDeployment" and generated["metadata"]["name"] == "spec-only"
    assert (await world.client.list(DGD, namespace=NS))["items"] == []

    obj = await world.dgdr("spec-only")
    obj["spec"]["sla"]["ttft"] = 100
    # Refused at admission by the CRD's transition rule (the controller's SpecChangeRejected condition
    # stays for an edit that slips in while the request is still Pending).
    with pytest.raises(ApiError) as refused:
        await world.client.replace(DGDR, obj)
    assert refused.value.status == 422
    assert "spec is immutable once the request is Profiling, Deploying, Ready" in str(refused.value)
    after = await world.dgdr("spec-only")
    assert after["metadata"]["generation"] == 1
    assert after["status"]["state"] == "Ready"
    assert after["status"]["generatedDeployment"] == generated  # nothing of the edit applied


async def test_unknown_model_and_gpu_type_fail_naming_the_field(world: World) -> None:
    bad_model = request("bad-model", gpu={"type": "h100"})
    bad_model["spec"]["modelName"] = "acme/unknown-70b"
    await world.client.create(DGDR, bad_model, namespace=NS)
    await world.client.create(DGDR, request("bad-gpu", gpu={"type": "tpu-v5"}), namespace=NS)
    failed = await eventually(lambda: world.state("bad-model", "Failed"), 30, "unknown model fails")
    message = next(c for c in failed["status"]["conditions"] if c["type"] == "Validation")["message"]
    assert "acme/unknown-70b" in message and MODEL in message  # the known ones are listed
    failed = await eventually(lambda: world.state("bad-gpu", "Failed"), 10, "unknown GPU fails")
    message = next(c for c in failed["status"]["conditions"] if c["type"] == "Validation")["message"]
    assert message.startswith("spec.gpu.type:") and "tpu-v5" in message and "h100_sxm" in message
    await world.recorded("bad-gpu", "ValidationFailed")


async def test_online_profiling_job_stand_in(world: World) -> None:
    await world.client.create(DGDR, request("online", online=True, autoApply=True), namespace=NS)
    job = await eventually(lambda: _get(world, JOBS, "profile-online-online"), 10, "profiling Job created")
    assert job["metadata"]["labels"]["app"] == "dynamo-profiler"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "DynamoGraphDeploymentRequest"
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dgdr-profiling-job"
    assert pod["containers"][0]["image"] == PROFILER
    assert "--isl" in pod["containers"][0]["args"]
    assert (await world.dgdr("online"))["status"]["state"] == "Profiling"
    # The stand-in: the profiler's output copier applies the ConfigMap, then the Job completes.
    image = {"extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0"}}}
    graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "profiled"},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {"componentType": "frontend", "replicas": 1, **image},
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "subComponentType": "decode",
                    "replicas": 1,
                    **image,
                },
            },
        },
    }
    output = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dgdr-output-online", "labels": {"dgdr.nvidia.com/name": "online"}},
        "data": {"config_with_planner.yaml": yaml.safe_dump(graph)},
    }
    await world.client.create(CONFIGMAPS, output, namespace=NS)
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    await world.client.replace_status(JOBS, job)
    await eventually(lambda: world.state("online", "Ready"), 30, "online request Ready")
    dgd = await world.client.get(DGD, "profiled", NS)
    assert dgd["metadata"]["labels"]["dgdr.nvidia.com/name"] == "online"
    await world.recorded("online", "ProfilingJobCreated")


async def test_partitioned_mi300x_fleet_plans_in_partitions(world: World) -> None:
    for node in (await world.client.list(NODES))["items"]:
        if "amd.com/gpu" in node["status"]["allocatable"]:
            node["status"]["allocatable"]["amd.com/gpu"] = "64"
            node["status"]["capacity"]["amd.com/gpu"] = "64"
            await world.client.replace_status(NODES, node)
    await world.client.create(DGDR, request("cpx"), namespace=NS)  # gpu.type discovered
    ready = await eventually(lambda: world.state("cpx", "Ready"), 30, "request Ready")
    validation = next(c for c in ready["status"]["conditions"] if c["type"] == "Validation")
    assert "mi300x discovered" in validation["message"]
    assert "8 partitions per GPU" in validation["message"]
    output = await world.client.get(CONFIGMAPS, "dgdr-output-cpx", NS)
    plan = yaml.safe_load(output["data"]["plan.json"])
    assert plan["system"].startswith("mi300x")
    for svc in _workers(ready["status"]["generatedDeployment"]).values():
        assert svc["resources"]["limits"]["gpuType"] == "amd.com/gpu"


async def _get(world: World, res: Any, name: str) -> Obj | None:
    try:
        return await world.client.get(res, name, NS)
    except Exception:
        return None


async def test_transient_api_errors_are_retried_never_failed(world: World) -> None:
    """Upstream turned any error into the terminal Failed state; a 500 storm on the writes the request
    makes (its ConfigMap, its DGD, its status) is retried until it passes."""
    faults = world.cluster.server.faults
    storms = [
        faults.add_spec("verb=create,resource=configmaps,error=500,count=3"),
        faults.add_spec("verb=create,resource=dynamographdeployments,error=503,count=2"),
        faults.add_spec("verb=patch,resource=dynamographdeploymentrequests/status,error=500,count=2"),
    ]
    await world.client.create(DGDR, request("flaky", gpu={"type": "h100"}, autoApply=True), namespace=NS)
    ready = await eventually(lambda: world.state("flaky", "Ready"), 60, "request Ready through the faults")
    assert "Failed" not in [c.get("reason") for c in ready["status"]["conditions"]]
    assert await world.client.get(DGD, "flaky", NS)
    assert [h.applied for h in storms] == [3, 2, 2]  # every storm hit the request's writes


async def test_zero_writes_once_ready_and_kubectl_get_dgdr(world: World, tmp_path: Path) -> None:
    await world.client.create(DGDR, request("quiet", gpu={"type": "h100"}, autoApply=True), namespace=NS)
    await eventually(lambda: world.state("quiet", "Ready"), 60, "request Ready")
    await asyncio.sleep(1.0)  # the last Events land
    world.operator.reset_counts()
    await asyncio.sleep(3.0)
    assert world.operator.writes == 0, dict(world.operator.requests_by_resource)
    kubeconfig = tmp_path / "kubeconfig"
    world.cluster.write_kubeconfig(kubeconfig)
    done = await asyncio.to_thread(
        subprocess.run,
        [KUBECTL, "-n", NS, "get", "dgdr"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[0].split(), done.stdout.splitlines()[1].split()
    assert header == ["NAME", "MODEL", "BACKEND", "STATE", "SLA-MET", "DGD-STATE", "AGE"]
    assert row[:6] == ["quiet", MODEL, "vllm", "Ready", "True", "successful"]  # kubectl shows the SLA is met


async def test_a_graph_in_another_namespace_gets_its_planner_profile_there(world: World) -> None:
    other = "team-b"
    await world.client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}
    )
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret"}}
    await world.client.create(SECRETS, {**secret, "stringData": {"HF_TOKEN": "hf_x"}}, namespace=other)
    body = request("moved", gpu={"type": "h100"}, autoApply=True, deploymentOverrides={"namespace": other})
    await world.client.create(DGDR, body, namespace=NS)
    await eventually(lambda: world.state("moved", "Ready"), 60, "request Ready with its graph in team-b")
    dgd = await world.client.get(DGD, "moved", other)
    planner = dgd["spec"]["services"]["Planner"]["extraPodSpec"]
    mounted = {v["name"]: v for v in planner.get("volumes") or []}
    configmap = next(v["configMap"]["name"] for v in mounted.values() if "configMap" in v)
    # The profile data the Planner mounts exists where the Planner runs, and the request's own copy stays.
    assert (await world.client.get(CONFIGMAPS, configmap, other))["data"]["plan.json"]
    assert (await world.client.get(CONFIGMAPS, configmap, NS))["data"]["plan.json"]


async def test_an_unknown_model_is_planned_from_the_config_json_in_the_profiling_configmap(
    world: World,
) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
    }
    unknown = request("ours", modelName="acme/house-model-8b", gpu={"type": "h100"})
    await world.client.create(DGDR, unknown, namespace=NS)
    failed = await eventually(lambda: world.state("ours", "Failed"), 30, "unknown model without config fails")
    assert "acme/house-model-8b" in str(failed["status"]["conditions"])

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "house-model"}}
    await world.client.create(CONFIGMAPS, {**cm, "data": {"config.json": json.dumps(config)}}, namespace=NS)
    described = request(
        "described",
        modelName="acme/house-model-8b",
        gpu={"type": "h100"},
        profilingConfig={"configMapRef": {"name": "house-model"}},
    )
    await world.client.create(DGDR, described, namespace=NS)
    ready = await eventually(lambda: world.state("described", "Ready"), 30, "planned from config.json")
    graph = ready["status"]["generatedDeployment"]
    assert set(_workers(graph)) == {"prefill", "decode"}  # the built-in template: no base graph given
    plan = json.loads((await world.client.get(CONFIGMAPS, "dgdr-output-described", NS))["data"]["plan.json"])
    assert plan["model"] == "acme/house-model-8b" and plan["disagg"]["meetsSla"] is True


async def test_the_budget_is_the_gpus_other_pods_leave_free(world: World) -> None:
    """Another graph's worker holds one H100 node's 8 GPUs: the request plans for the other 8."""
    nodes = await world.client.list(NODES)
    h100 = sorted(
        n["metadata"]["name"]
        for n in nodes["items"]
        if "nvidia.com/gpu" in (n.get("status") or {}).get("allocatable", {})
    )
    holder = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "other-graph-worker"},
        "spec": {
            "nodeName": h100[0],
            "containers": [{"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }
    await world.client.create(PODS, holder, namespace=NS)
    await world.client.create(DGDR, request("squeezed", gpu={"type": "h100"}), namespace=NS)
    ready = await eventually(lambda: world.state("squeezed", "Ready"), 60, "request Ready")
    validation = next(c for c in ready["status"]["conditions"] if c["type"] == "Validation")
    assert "budget 8 nvidia.com/gpu: 8 free of 16 (8 requested by other pods)" in validation["message"]
    output = await world.client.get(CONFIGMAPS, "dgdr-output-squeezed", NS)
    assert json.loads(output["data"]["plan.json"])["disagg"]["gpus"] <= 8


async def test_an_impossible_sla_is_not_auto_applied_and_warns(world: World) -> None:
    body = request("impossible", gpu={"type": "h100"}, autoApply=True)
    body["spec"]["sla"]["ttft"] = 5
    await world.client.create(DGDR, body, namespace=NS)
    ready = await eventually(lambda: world.state("impossible", "Ready"), 60, "request Ready")
    sla = next(c for c in ready["status"]["conditions"] if c["type"] == "SLAMet")
    assert sla["status"] == "False" and "against spec.sla.ttft 5 ms" in sla["message"]
    assert "deployment" not in ready["status"]  # generated, not applied
    await world.recorded("impossible", "SLANotMet")
    listed = await world.client.list(EVENTS, namespace=NS)
    warning = [e for e in listed["items"] if e["reason"] == "SLANotMet"]
    assert warning and warning[0]["type"] == "Warning"
    assert not [
        d
        for d in (await world.client.list(DGD, namespace=NS))["items"]
        if d["metadata"]["name"] == "impossible"
    ]

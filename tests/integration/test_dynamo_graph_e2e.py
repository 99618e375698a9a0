"""Dynamo graphs end to end on the embedded cluster: both Dynamo controllers (DGD → DCD → Deployments,
Services, Ingresses, HPAs, LeaderWorkerSets, PodGroups) with the simulated Deployment, ReplicaSet,
LeaderWorkerSet, HPA and PersistentVolume controllers, kube-scheduler, Volcano and kubelet.

What a user of ``examples/dynamo-vllm-disagg.yaml`` sees: the exact objects upstream's DCD path creates,
``successful`` only when every pod of the current template is available (checked on every committed
change, not sampled), scaling, removal, deletion, ``kubectl get dgd,dcd`` and a quiet cluster after.
"""

from __future__ import annotations

import asyncio
import copy
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

from aiplane.controllers.dynamo import component_controller, graph_controller
from aiplane.controllers.dynamo.options import DynamoOptions
from aiplane.demo.dynamo import GraphWatch
from aiplane.kube.manager import Manager
from aiplane.kube.resources import (
    DEPLOYMENTS,
    HPAS,
    INGRESSES,
    LEADERWORKERSETS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
    resource_for,
)
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration import operator_rbac
from tests.polling import eventually
from tests.settle import events_written

DGD = resource_for("nvidia.com/v1alpha1", "DynamoGraphDeployment")
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
PVCS = resource_for("v1", "PersistentVolumeClaim")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dynamo-vllm-disagg.yaml"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
NS = "team-a"
NAME = "llama-disagg"
GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
Obj = dict[str, Any]


def example() -> Obj:
    return dict(
        next(yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")))
    )  # the graph (its Secret follows)


@dataclass
class World:
    cluster: EmbeddedCluster
    client: InMemoryKubeClient
    operator: InMemoryKubeClient
    watch: GraphWatch
    manager: Manager

    async def names(self, res: Resource) -> list[str]:
        listed = await self.client.list(res, namespace=NS, label_selector=f"{GRAPH_LABEL}={NAME}")
        return sorted(o["metadata"]["name"] for o in listed["items"])

    async def successful(self) -> bool:
        """``successful`` for the current generation with every Deployment rolled out."""
        return self.watch.converged()


@pytest.fixture
async def world() -> AsyncIterator[World]:
    cluster = operator_rbac.cluster(agents=True, ready_delay=0.0)
    await cluster.start()
    client = InMemoryKubeClient.for_cluster(cluster)
    operator = operator_rbac.operator_client(cluster)
    watch = GraphWatch(NS, NAME)
    cluster.server.store.subscribe(watch)
    manager = Manager(operator, leader_election=None, handle_signals=False)
    manager.set_options(DynamoOptions(ingress_class="nginx"))
    await graph_controller.setup(manager)
    await component_controller.setup(manager)
    task = asyncio.create_task(manager.run())
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret"}}
    await client.create(SECRETS, {**secret, "stringData": {"HF_TOKEN": "hf_x"}}, namespace=NS)
    yield World(cluster, client, operator, watch, manager)
    manager.stop()
    assert await task == 0
    cluster.server.store.unsubscribe(watch)
    await client.close()
    await cluster.stop()


async def test_the_example_graph_reaches_successful_with_upstreams_objects(world: World) -> None:
    await world.client.create(DGD, example(), namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    dcds = ["llama-disagg-frontend", "llama-disagg-vllmdecodeworker", "llama-disagg-vllmprefillworker"]
    assert await world.names(DCD) == dcds
    assert await world.names(DEPLOYMENTS) == dcds
    assert await world.names(SERVICES) == ["llama-disagg-frontend"]  # frontends only
    assert await world.names(INGRESSES) == ["llama-disagg-frontend"]
    assert await world.names(HPAS) == ["llama-disagg-vllmdecodeworker"]
    ingress = await world.client.get(INGRESSES, "llama-disagg-frontend", NS)
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["rules"][0]["host"] == "llama-disagg.local"
    pvc = await world.client.get(PVCS, "vllm-compile-cache", NS)
    assert pvc["spec"]["storageClassName"] == "standard-rwx"
    assert pvc["metadata"]["ownerReferences"][0]["kind"] == "DynamoGraphDeployment"
    await eventually(
        lambda: _phase(world, "vllm-compile-cache", "Bound"), 10, "the compilation cache claim bound"
    )

    prefill = await world.client.get(DEPLOYMENTS, "llama-disagg-vllmprefillworker", NS)
    assert prefill["spec"]["selector"]["matchLabels"] == {
        "nvidia.com/selector": "llama-disagg-vllmprefillworker"
    }
    assert prefill["spec"]["replicas"] == 2
    container = prefill["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HF_HOME"] == "/hf_cache"  # the graph's envs reach every service
    assert env["VLLM_CACHE_ROOT"] == "/root/.cache/vllm"
    assert env["DYN_NAMESPACE"] == "dynamo-llama-disagg"
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token-secret"}}]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"vllm-compile-cache": "/root/.cache/vllm", "shared-memory": "/dev/shm"}
    pods = (await world.client.list(PODS, namespace=NS, label_selector=f"{GRAPH_LABEL}={NAME}"))["items"]
    assert len(pods) == 4 and all(
        p["spec"].get("nodeName", "").startswith("h100-")
        for p in pods
        if "nvidia.com/gpu" in str(p["spec"]["containers"][0].get("resources"))
    )
    dgd = await world.client.get(DGD, NAME, NS)
    ready = next(c for c in dgd["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "all_resources_are_ready")
    assert dgd["metadata"]["finalizers"] == ["nvidia.com/finalizer"]


async def _phase(world: World, claim: str, phase: str) -> bool:
    return (await world.client.get(PVCS, claim, NS)).get("status", {}).get("phase") == phase


async def test_a_worker_image_change_is_not_successful_until_its_new_pods_are_available(world: World) -> None:
    doc = example()
    await world.client.create(DGD, doc, namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    world.watch.premature_successful = 0
    # New pods take a moment to become ready, as real ones do: the window in which upstream said
    # "successful" (#3567) is the surge pod starting while the old one still serves.
    assert world.cluster.agents is not None
    world.cluster.agents.kubelet.ready_delay = 0.3
    changed = copy.deepcopy(doc)
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"
    changed["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]["image"] = image
    live = await world.client.get(DGD, NAME, NS)
    await world.client.patch(DGD, NAME, {"spec": changed["spec"]}, namespace=NS)
    assert (await world.client.get(DGD, NAME, NS))["metadata"]["generation"] == live["metadata"][
        "generation"
    ] + 1

    async def rolled() -> bool:
        return world.watch.converged(image=image, component="VllmDecodeWorker")

    await eventually(rolled, 30, "the decode worker rolled to the new image")
    # Checked on every committed change of the DGD, its DCDs, Deployments and pods.
    assert world.watch.premature_successful == 0


async def _kubectl(world: World, tmp_path: Path, *args: str) -> str:
    kubeconfig = tmp_path / "kubeconfig"
    if not kubeconfig.exists():
        world.cluster.write_kubeconfig(kubeconfig)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = await asyncio.to_thread(
        subprocess.run, [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


async def test_scaling_through_the_dgd_and_through_kubectl_scale_dcd(world: World, tmp_path: Path) -> None:
    doc = example()
    del doc["spec"]["services"]["Frontend"]["replicas"]  # not set by the graph: a direct scale sticks
    await world.client.create(DGD, doc, namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    await world.client.patch(
        DGD, NAME, {"spec": {"services": {"VllmPrefillWorker": {"replicas": 1}}}}, namespace=NS
    )
    await eventually(lambda: _replicas(world, "llama-disagg-vllmprefillworker", 1), 20, "prefill scaled to 1")
    out = await _kubectl(world, tmp_path, "-n", NS, "scale", "dcd/llama-disagg-frontend", "--replicas=2")
    assert "scaled" in out
    await eventually(lambda: _replicas(world, "llama-disagg-frontend", 2), 20, "frontend scaled to 2")
    await eventually(world.successful, 30, "graph successful after scaling")
    dcd = await world.client.get(DCD, "llama-disagg-frontend", NS)
    assert dcd["status"]["replicas"] == 2 and dcd["status"]["readyReplicas"] == 2
    assert dcd["status"]["labelSelector"] == "nvidia.com/selector=llama-disagg-frontend"


async def _replicas(world: World, name: str, want: int) -> bool:
    deployment = await world.client.get(DEPLOYMENTS, name, NS)
    pods = await world.client.list(PODS, namespace=NS, label_selector=f"nvidia.com/selector={name}")
    return deployment["spec"]["replicas"] == want and len(pods["items"]) == want


async def test_the_hpa_carries_behavior_and_owns_the_workers_replicas(world: World) -> None:
    doc = example()
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 600,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        }
    }
    doc["spec"]["services"]["VllmDecodeWorker"]["autoscaling"]["behavior"] = behavior
    await world.client.create(DGD, doc, namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    hpa = await world.client.get(HPAS, "llama-disagg-vllmdecodeworker", NS)
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "llama-disagg-vllmdecodeworker",
    }
    # Load arrives (the sim's stand-in for a metric): the HPA scales the Deployment to 2, and neither
    # Dynamo controller scales it back.
    await world.client.patch(
        HPAS,
        "llama-disagg-vllmdecodeworker",
        {"metadata": {"annotations": {"sim.aiplane.io/desired-replicas": "2"}}},
        namespace=NS,
    )
    await eventually(lambda: _replicas(world, "llama-disagg-vllmdecodeworker", 2), 30, "HPA scaled to 2")
    await eventually(world.successful, 30, "graph successful at 2 decode workers")

    async def counts_reported() -> bool:
        # The DCD reports its Deployment's counts in a status write of its own, which may follow the
        # graph's "successful": at rest only once it shows both pods ready (a CI run under load once
        # counted that write inside the quiet window below).
        dcd = await world.client.get(DCD, "llama-disagg-vllmdecodeworker", NS)
        return dcd.get("status", {}).get("readyReplicas") == 2 and await world.successful()

    await eventually(counts_reported, 30, "the decode worker's DCD reports 2 ready replicas")
    # The HPA's scale-up may take the graph through not ready and back; the Event of that last
    # transition can still be on its way (seen under CPU load): it belongs to the change, not to rest.
    await events_written(world.manager)
    world.operator.reset_counts()
    await asyncio.sleep(1.0)
    assert (await world.client.get(DEPLOYMENTS, "llama-disagg-vllmdecodeworker", NS))["spec"]["replicas"] == 2
    assert world.operator.writes == 0


async def test_removing_a_service_removes_its_dcd_and_deleting_the_graph_removes_the_rest(
    world: World,
) -> None:
    await world.client.create(DGD, example(), namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    await world.client.patch(DGD, NAME, {"spec": {"services": {"VllmDecodeWorker": None}}}, namespace=NS)

    async def two_left() -> bool:
        return len(await world.names(DCD)) == 2 and len(await world.names(DEPLOYMENTS)) == 2

    await eventually(two_left, 20, "the decode worker's DCD and Deployment gone")
    assert await world.names(HPAS) == []
    await world.client.delete(DGD, NAME, namespace=NS)

    async def all_gone() -> bool:
        kinds = (DCD, DEPLOYMENTS, SERVICES, INGRESSES, PODS)
        counts = [len(await world.names(res)) for res in kinds]
        claims = (await world.client.list(PVCS, namespace=NS))["items"]
        dgds = (await world.client.list(DGD, namespace=NS))["items"]
        return not any(counts) and not claims and not dgds

    # The PVC the graph created has it as owner (as upstream); the token Secret is the user's and stays.
    await eventually(all_gone, 30, "everything the graph created is gone")
    assert await world.client.get(SECRETS, "hf-token-secret", NS)


def trtllm_graph(replicas: int = 2) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "backendFramework": "trtllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": "trtllm:1"}},
                },
                "TrtllmWorker": {
                    "componentType": "worker",
                    "replicas": replicas,
                    "multinode": {"nodeCount": 2},
                    "resources": {"limits": {"gpu": "4"}},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": "trtllm:1",
                            "command": ["/bin/sh", "-c"],
                            "args": ["python3 -m dynamo.trtllm --model-path m --tensor-parallel-size 8"],
                        }
                    },
                },
            },
        },
    }


async def test_a_two_node_trtllm_worker_gets_one_lws_and_podgroup_per_replica(world: World) -> None:
    ssh = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mpi-run-ssh-secret"}}
    await world.client.create(SECRETS, {**ssh, "stringData": {"id_rsa": "k"}}, namespace=NS)
    await world.client.create(DGD, trtllm_graph(), namespace=NS)
    await eventually(world.successful, 30, "multinode graph successful")
    worker = "llama-disagg-trtllmworker"
    lws_names = sorted(
        o["metadata"]["name"] for o in (await world.client.list(LEADERWORKERSETS, namespace=NS))["items"]
    )
    assert lws_names == [f"{worker}-0", f"{worker}-1"]
    groups = {o["metadata"]["name"]: o for o in (await world.client.list(PODGROUPS, namespace=NS))["items"]}
    assert sorted(groups) == lws_names and all(g["spec"]["minMember"] == 2 for g in groups.values())
    lws = await world.client.get(LEADERWORKERSETS, f"{worker}-1", NS)
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    wtpl = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert leader["metadata"]["labels"]["role"] == "leader" and wtpl["metadata"]["labels"]["role"] == "worker"
    assert leader["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"{worker}-1"
    script = " ".join(leader["spec"]["containers"][0]["args"])
    assert "mpirun --oversubscribe" in script and "-n 8" in script and "trtllm-llmapi-launch" in script
    worker_main = wtpl["spec"]["containers"][0]
    assert (
        "sshd" in " ".join(worker_main["args"]) and worker_main["readinessProbe"]["tcpSocket"]["port"] == 2222
    )
    pods = (
        await world.client.list(PODS, namespace=NS, label_selector="nvidia.com/dynamo-component=TrtllmWorker")
    )["items"]
    assert len(pods) == 4 and all(p["spec"]["schedulerName"] == "volcano" for p in pods)

    await world.client.patch(
        DGD, NAME, {"spec": {"services": {"TrtllmWorker": {"replicas": 1}}}}, namespace=NS
    )

    async def one_group() -> bool:
        names = [
            o["metadata"]["name"] for o in (await world.client.list(LEADERWORKERSETS, namespace=NS))["items"]
        ]
        podgroups = [
            o["metadata"]["name"] for o in (await world.client.list(PODGROUPS, namespace=NS))["items"]
        ]
        return names == [f"{worker}-0"] and podgroups == [f"{worker}-0"]

    await eventually(one_group, 20, "the surplus LWS and PodGroup removed")


async def test_kubectl_get_dgd_dcd_shows_state_readiness_and_age(world: World, tmp_path: Path) -> None:
    await world.client.create(DGD, example(), namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    lines = (await _kubectl(world, tmp_path, "-n", NS, "get", "dgd,dcd")).splitlines()
    dgd_header = lines[0].split()
    assert dgd_header[:2] == ["NAME", "BACKEND"] and "STATE" in dgd_header and "AGE" in dgd_header
    dgd_row = next(line for line in lines if line.startswith("dynamographdeployment"))
    assert "successful" in dgd_row and "3/3" in dgd_row
    dcd_rows = [line.split() for line in lines if line.startswith("dynamocomponentdeployment")]
    prefill = next(r for r in dcd_rows if r[0].endswith("vllmprefillworker"))
    # NAME SERVICE BACKEND REPLICAS READY-REPLICAS AVAILABLE AGE
    assert prefill[1:6] == ["VllmPrefillWorker", "vllm", "2", "2", "True"]


async def test_zero_writes_in_the_ten_seconds_after_convergence(world: World) -> None:
    await world.client.create(DGD, example(), namespace=NS)
    await eventually(world.successful, 30, "graph successful")
    await events_written(world.manager)  # the Events of the last status write belong to the change
    world.operator.reset_counts()
    await asyncio.sleep(10.0)
    assert world.operator.writes == 0, dict(world.operator.requests_by_resource)

"""The simulated HorizontalPodAutoscaler controller on an embedded cluster with agents: bounds before
metrics (min, max, scaling disabled at 0), the metrics-API failures of a cluster without a metrics
server, the sim-only ``sim.aiplane.io/desired-replicas`` recommendation with its stabilisation and
limits, CRD targets through their scale subresource, zero writes at rest, and kubectl. Every wait
polls with a deadline."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiplane.kube.resources import DEPLOYMENTS, LEADERWORKERSETS, Resource
from aiplane.sim.agents.hpa_rules import SIM_DESIRED
from aiplane.sim.apiserver.store import Event
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from tests.integration.sim_helpers import agent_cluster, events, until
from tests.integration.test_sim_deployments import deployment
from tests.integration.test_sim_lws import lws_body

Obj = dict[str, Any]
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True)
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
NO_METRICS = (
    "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics "
    "for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the "
    "requested resource (get pods.metrics.k8s.io)"
)


@pytest.fixture
async def cluster() -> AsyncIterator[EmbeddedCluster]:
    async with agent_cluster() as sim:
        yield sim


@pytest.fixture
def client(cluster: EmbeddedCluster) -> InMemoryKubeClient:
    return InMemoryKubeClient.for_cluster(cluster)


def hpa(
    name: str = "web",
    *,
    low: int | None = 2,
    high: int = 5,
    target: Obj | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    body: Obj = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": high,
            **({"minReplicas": low} if low is not None else {}),
            **spec,
        },
    }
    return body


def conditions(obj: Obj) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"])
        for c in obj.get("status", {}).get("conditions", [])
    }


async def replicas_of(client: InMemoryKubeClient, wanted: int, name: str = "web") -> Obj | None:
    deploy = await client.get(DEPLOYMENTS, name, namespace="default")
    return deploy if deploy["spec"]["replicas"] == wanted else None


async def hpa_where(client: InMemoryKubeClient, check: Any, name: str = "web") -> Obj | None:
    obj = await client.get(HPAS, name, namespace="default")
    return obj if check(obj) else None


async def test_below_min_scales_up_then_reports_missing_metrics(client: InMemoryKubeClient) -> None:
    await client.create(DEPLOYMENTS, deployment(replicas=1), namespace="default")
    await client.create(HPAS, hpa(), namespace="default")
    await until(lambda: replicas_of(client, 2), "the Deployment scaled to minReplicas")
    rescaled = await until(lambda: events(client, "web", "SuccessfulRescale"), "SuccessfulRescale")
    assert rescaled[0]["message"] == "New size: 2; reason: Current number of replicas below Spec.MinReplicas"
    assert rescaled[0]["source"]["component"] == "horizontal-pod-autoscaler"
    # the next sync (the target changed) finds the count within bounds and asks the metrics APIs
    status = (
        await until(
            lambda: hpa_where(client, lambda o: "ScalingActive" in conditions(o)), "metrics tried", timeout=5
        )
    )["status"]
    assert conditions({"status": status})["ScalingActive"] == ("False", "FailedGetResourceMetric", NO_METRICS)
    assert conditions({"status": status})["AbleToScale"][:2] == ("True", "SucceededGetScale")
    assert status["currentReplicas"] == 2 and status["desiredReplicas"] == 2
    assert status["lastScaleTime"] and status["observedGeneration"] == 1
    failed = await until(lambda: events(client, "web", "FailedComputeMetricsReplicas"), "the metrics event")
    assert failed[0]["message"].startswith(
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: "
    )


async def test_above_max_scales_down_and_zero_disables(client: InMemoryKubeClient) -> None:
    await client.create(DEPLOYMENTS, deployment(replicas=6), namespace="default")
    await client.create(HPAS, hpa(high=3), namespace="default")
    await until(lambda: replicas_of(client, 3), "the Deployment scaled to maxReplicas")
    rescaled = await until(lambda: events(client, "web", "SuccessfulRescale"), "SuccessfulRescale")
    assert rescaled[0]["message"] == "New size: 3; reason: Current number of replicas above Spec.MaxReplicas"

    await client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 0}}, namespace="default")
    disabled = await until(
        lambda: hpa_where(
            client, lambda o: conditions(o).get("ScalingActive", ("",) * 3)[1] == "ScalingDisabled"
        ),
        "scaling disabled",
    )
    assert conditions(disabled)["ScalingActive"] == (
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero",
    )
    assert disabled["status"]["desiredReplicas"] == 0
    assert (await client.get(DEPLOYMENTS, "web", namespace="default"))["spec"]["replicas"] == 0


async def test_the_sim_recommendation_scales_within_bounds_and_stabilises(client: InMemoryKubeClient) -> None:
    await client.create(DEPLOYMENTS, deployment(replicas=2), namespace="default")
    await client.create(HPAS, hpa(annotations={SIM_DESIRED: "4"}), namespace="default")
    await until(lambda: replicas_of(client, 4), "scaled up to the recommendation")
    rescaled = await until(lambda: events(client, "web", "SuccessfulRescale"), "SuccessfulRescale")
    assert rescaled[0]["message"] == f"New size: 4; reason: annotation {SIM_DESIRED} above target"

    # more than maxReplicas: clamped, and ScalingLimited says why
    await client.patch(HPAS, "web", {"metadata": {"annotations": {SIM_DESIRED: "9"}}}, namespace="default")
    await until(lambda: replicas_of(client, 5), "clamped to maxReplicas")
    limited = await until(
        lambda: hpa_where(client, lambda o: conditions(o).get("ScalingLimited", ("",) * 3)[0] == "True"),
        "ScalingLimited",
    )
    assert conditions(limited)["ScalingLimited"][1] == "TooManyReplicas"
    assert conditions(limited)["ScalingActive"][:2] == ("True", "ValidMetricFound")

    # without behavior, a lower recommendation waits out the 5-minute downscale stabilisation window
    await client.patch(HPAS, "web", {"metadata": {"annotations": {SIM_DESIRED: "2"}}}, namespace="default")
    held = await until(
        lambda: hpa_where(client, lambda o: conditions(o)["AbleToScale"][1] == "ScaleDownStabilized"),
        "downscale stabilised",
    )
    assert held["status"]["desiredReplicas"] == 5
    assert (await client.get(DEPLOYMENTS, "web", namespace="default"))["spec"]["replicas"] == 5

    # with a zero window it scales down at once; selectPolicy Disabled then stops scaling up
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}, "scaleUp": {"selectPolicy": "Disabled"}}
    await client.patch(HPAS, "web", {"spec": {"behavior": behavior}}, namespace="default")
    await until(lambda: replicas_of(client, 2), "scaled down without a window")
    stored = await client.get(HPAS, "web", namespace="default")
    assert stored["spec"]["behavior"]["scaleUp"]["policies"]  # the API defaulted the rest
    await client.patch(HPAS, "web", {"metadata": {"annotations": {SIM_DESIRED: "4"}}}, namespace="default")
    capped = await until(
        lambda: hpa_where(
            client, lambda o: conditions(o).get("ScalingLimited", ("",) * 3)[1] == "ScaleUpLimit"
        ),
        "scale-up disabled",
    )
    assert capped["status"]["desiredReplicas"] == 2


async def test_a_crd_target_scales_through_its_scale_subresource(client: InMemoryKubeClient) -> None:
    await client.create(LEADERWORKERSETS, lws_body(replicas=1, size=1), namespace="default")
    target = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "vllm"}
    await client.create(HPAS, hpa("vllm", target=target, annotations={SIM_DESIRED: "3"}), namespace="default")

    async def scaled() -> Obj | None:
        lws = await client.get(LEADERWORKERSETS, "vllm", namespace="default")
        return lws if lws["spec"]["replicas"] == 3 else None

    await until(scaled, "the LeaderWorkerSet scaled through /scale")


async def test_a_missing_target_fails_to_get_its_scale(client: InMemoryKubeClient) -> None:
    await client.create(HPAS, hpa(), namespace="default")
    failed = await until(
        lambda: hpa_where(client, lambda o: "AbleToScale" in conditions(o)), "FailedGetScale"
    )
    assert conditions(failed)["AbleToScale"] == (
        "False",
        "FailedGetScale",
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "web" not found',
    )
    # the Deployment appears: the HPA follows it without waiting for its resync
    await client.create(DEPLOYMENTS, deployment(replicas=1), namespace="default")
    await until(lambda: replicas_of(client, 2), "scaled once the target exists")


async def test_no_writes_at_rest(cluster: EmbeddedCluster, client: InMemoryKubeClient) -> None:
    agents = cluster.agents
    assert agents is not None
    await client.create(DEPLOYMENTS, deployment(replicas=2), namespace="default")
    await client.create(HPAS, hpa(), namespace="default")
    await until(
        lambda: hpa_where(client, lambda o: "ScalingActive" in conditions(o)), "the HPA settled", timeout=5
    )
    await until(lambda: _all_ready(client), "the Deployment rolled out")
    agents.hpa.sync_period = 0.02
    agents.hpa.enqueue(("hpa", "default", "web"))
    writes: list[Event] = []
    store = cluster.server.api.store
    store.subscribe(writes.append)
    syncs = {"n": 0}
    original = agents.hpa.process

    def counting(work: tuple[str, ...]) -> None:
        syncs["n"] += 1
        original(work)

    agents.hpa.process = counting  # type: ignore[method-assign]
    try:
        await until(lambda: _at_least(syncs, 10), "ten periodic syncs")
    finally:
        store.unsubscribe(writes.append)
    assert writes == []


async def _at_least(counter: dict[str, int], n: int) -> bool:
    return counter["n"] >= n


async def _all_ready(client: InMemoryKubeClient) -> bool:
    deploy = await client.get(DEPLOYMENTS, "web", namespace="default")
    return bool(deploy.get("status", {}).get("readyReplicas") == 2)


async def kubectl(kubeconfig: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_autoscale_and_get_hpa(
    cluster: EmbeddedCluster, client: InMemoryKubeClient, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster.write_kubeconfig(kubeconfig)
    await client.create(DEPLOYMENTS, deployment(replicas=1), namespace="default")
    await kubectl(kubeconfig, "autoscale", "deployment", "web", "--min=3", "--max=6", "--cpu-percent=70")
    await until(lambda: replicas_of(client, 3), "kubectl's HPA scaled to --min")
    await until(
        lambda: hpa_where(client, lambda o: "ScalingActive" in conditions(o)), "metrics tried", timeout=5
    )
    lines = (await kubectl(kubeconfig, "get", "hpa", "web")).splitlines()
    assert lines[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert lines[1].split()[:7] == ["web", "Deployment/web", "cpu:", "<unknown>/70%", "3", "6", "3"]
    described = await kubectl(kubeconfig, "describe", "hpa", "web")
    assert "FailedGetResourceMetric" in described and "SuccessfulRescale" in described

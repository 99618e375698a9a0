"""What a DynamoComponentDeployment asks to exist (reference dynamo.md §2), built without a cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aiplane.controllers.dynamo.component_children import (
    ANNOTATION_HASH,
    REASON_NO_ORCHESTRATOR,
    ChildrenError,
    ChildrenInput,
    Desired,
    desired_children,
    hash_of,
    needs_update,
    updated,
)
from aiplane.controllers.dynamo.options import DynamoOptions

Obj = dict[str, Any]


def dcd(name: str = "g-frontend", **spec: Any) -> Obj:
    body: Obj = {
        "componentType": "frontend",
        "replicas": 2,
        "extraPodSpec": {"mainContainer": {"image": "fe:1"}},
    }
    body.update(spec)
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": name, "namespace": "llm", "uid": "uid-1", "generation": 1},
        "spec": body,
    }


def worker(name: str = "g-decode", nodes: int | None = None, gpu: str | None = "4", **spec: Any) -> Obj:
    main = {"image": "vllm:1", "args": ["python3 -m dynamo.vllm --model m"]}
    body: Obj = {"componentType": "worker", "extraPodSpec": {"mainContainer": main}, **spec}
    if gpu is not None:
        body["resources"] = {"limits": {"gpu": gpu}, "requests": {"cpu": "2"}}
    if nodes is not None:
        body["multinode"] = {"nodeCount": nodes}
    return dcd(name, **body)


def build(obj: Obj, **kw: Any) -> Desired:
    return desired_children(ChildrenInput(obj, **kw))


def by_kind(desired: Desired) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for child in desired.children:
        out.setdefault(child["kind"], []).append(child)
    return out


def test_frontend_gets_a_deployment_and_a_service_owned_and_hashed() -> None:
    desired = build(dcd())
    kinds = by_kind(desired)
    assert sorted(kinds) == ["Deployment", "PodDisruptionBudget", "Service"]
    deploy, svc = kinds["Deployment"][0], kinds["Service"][0]
    assert deploy["metadata"]["name"] == svc["metadata"]["name"] == "g-frontend"
    assert deploy["spec"]["selector"] == {"matchLabels": {"nvidia.com/selector": "g-frontend"}}
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    assert deploy["spec"]["template"]["metadata"]["labels"]["nvidia.com/selector"] == "g-frontend"
    assert svc["spec"]["selector"] == {"nvidia.com/selector": "g-frontend"}
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    for child in desired.children:
        ref = child["metadata"]["ownerReferences"][0]
        assert (
            ref["uid"] == "uid-1" and ref["controller"] is True and ref["kind"] == "DynamoComponentDeployment"
        )
        assert child["metadata"]["annotations"][ANNOTATION_HASH] == hash_of(child)


def test_a_worker_gets_no_service() -> None:
    assert sorted(by_kind(build(worker()))) == ["Deployment", "PodDisruptionBudget"]


def test_ingress_needs_enabled_and_a_class() -> None:
    ingress = {"enabled": True, "host": "chat", "hostPrefix": "v1-", "tls": {"secretName": "cert"}}
    assert "Ingress" not in by_kind(build(dcd(ingress=ingress)))
    options = DynamoOptions(ingress_class="nginx", ingress_host_suffix="example.com")
    assert "Ingress" not in by_kind(build(dcd(ingress={**ingress, "enabled": False}), options=options))
    ing = by_kind(build(dcd(ingress=ingress), options=options))["Ingress"][0]
    assert ing["spec"]["ingressClassName"] == "nginx"
    rule = ing["spec"]["rules"][0]
    assert rule["host"] == "v1-chat.example.com"
    assert rule["http"]["paths"] == [
        {
            "path": "/",
            "pathType": "Prefix",
            "backend": {"service": {"name": "g-frontend", "port": {"number": 8000}}},
        }
    ]
    assert ing["spec"]["tls"] == [{"hosts": ["v1-chat.example.com"], "secretName": "cert"}]
    plain = by_kind(
        build(dcd(ingress={"enabled": True, "host": "chat"}), options=DynamoOptions(ingress_class="c"))
    )
    assert plain["Ingress"][0]["spec"]["rules"][0]["host"] == "chat.local"
    assert "tls" not in plain["Ingress"][0]["spec"]


def test_virtual_service_only_with_a_gateway_flag_and_the_spec_asking() -> None:
    ingress = {
        "enabled": True,
        "host": "chat",
        "useVirtualService": True,
        "virtualServiceGateway": "istio/gw",
    }
    assert "VirtualService" not in by_kind(build(dcd(ingress=ingress)))
    options = DynamoOptions(istio_gateway="istio/gw")
    vs = by_kind(build(dcd(ingress=ingress), options=options))["VirtualService"][0]
    assert vs["apiVersion"] == "networking.istio.io/v1"
    assert vs["spec"]["gateways"] == ["istio/gw"] and vs["spec"]["hosts"] == ["chat.local"]
    assert vs["spec"]["http"][0]["route"][0]["destination"] == {
        "host": "g-frontend",
        "port": {"number": 8000},
    }
    no_flag = {**ingress, "useVirtualService": False}
    assert "VirtualService" not in by_kind(build(dcd(ingress=no_flag), options=options))
    assert "VirtualService" not in by_kind(
        build(dcd(ingress=ingress), options=options, virtual_services=False)
    )


def test_hpa_applies_behavior_and_defaults_to_cpu_80() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 30}}
    desired = build(
        worker(autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 4, "behavior": behavior})
    )
    hpa = by_kind(desired)["HorizontalPodAutoscaler"][0]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "g-decode",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert hpa["spec"]["behavior"] == behavior  # upstream dropped it
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    assert desired.hpa_owns_replicas
    off = build(worker(autoscaling={"enabled": False, "maxReplicas": 4}))
    assert "HorizontalPodAutoscaler" not in by_kind(off) and not off.hpa_owns_replicas


def test_hpa_without_max_replicas_names_the_field() -> None:
    with pytest.raises(ChildrenError, match=r"spec\.autoscaling\.maxReplicas"):
        build(worker(autoscaling={"enabled": True}))


def test_with_autoscaling_the_replica_count_is_not_part_of_the_deployment_hash() -> None:
    auto = {"enabled": True, "maxReplicas": 9}
    one = by_kind(build(worker(replicas=1, autoscaling=auto)))["Deployment"][0]
    three = by_kind(build(worker(replicas=3, autoscaling=auto)))["Deployment"][0]
    assert not needs_update(one, three)
    manual_one = by_kind(build(worker(replicas=1)))["Deployment"][0]
    manual_three = by_kind(build(worker(replicas=3)))["Deployment"][0]
    assert needs_update(manual_one, manual_three)


def test_update_keeps_hpa_replicas_server_fields_and_foreign_labels() -> None:
    desired = by_kind(build(worker(replicas=1, autoscaling={"enabled": True, "maxReplicas": 9})))[
        "Deployment"
    ][0]
    live = copy.deepcopy(desired)
    live["spec"]["replicas"] = 7
    live["metadata"]["labels"]["other"] = "x"
    live["metadata"]["resourceVersion"] = "42"
    body = updated(live, desired, keep_replicas=True)
    assert body["spec"]["replicas"] == 7
    assert body["metadata"]["labels"]["other"] == "x" and body["metadata"]["resourceVersion"] == "42"
    assert updated(live, desired)["spec"]["replicas"] == 1
    svc = by_kind(build(dcd()))["Service"][0]
    live_svc = copy.deepcopy(svc)
    live_svc["spec"]["clusterIP"] = "10.0.0.9"
    assert updated(live_svc, svc)["spec"]["clusterIP"] == "10.0.0.9"


def test_a_bad_field_is_an_error_naming_it() -> None:
    bad = worker(volumeMounts=[{"name": "models"}])
    with pytest.raises(ChildrenError, match=r"spec\.volumeMounts\[0\]\.mountPoint") as info:
        build(bad)
    assert info.value.reason == "InvalidSpec"


def test_multinode_builds_one_lws_and_podgroup_per_replica() -> None:
    desired = build(worker(nodes=3, replicas=2))
    kinds = by_kind(desired)
    assert sorted(kinds) == ["LeaderWorkerSet", "PodGroup"] and desired.multinode
    assert [o["metadata"]["name"] for o in kinds["LeaderWorkerSet"]] == ["g-decode-0", "g-decode-1"]
    assert [o["metadata"]["name"] for o in kinds["PodGroup"]] == ["g-decode-0", "g-decode-1"]
    lws = kinds["LeaderWorkerSet"][1]
    assert lws["spec"]["replicas"] == 1 and lws["spec"]["startupPolicy"] == "LeaderCreated"
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 3
    for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
        pod = tmpl[key]
        assert pod["metadata"]["labels"]["role"] == role
        assert pod["metadata"]["labels"]["instance-id"] == "1"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "g-decode-1"
        assert pod["spec"]["schedulerName"] == "volcano"
    pg = kinds["PodGroup"][1]
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minResources"] == {"cpu": "6", "nvidia.com/gpu": "12"}


def test_multinode_frontend_service_selects_leaders() -> None:
    fe = dcd(multinode={"nodeCount": 2}, resources={"limits": {"gpu": "1"}})
    svc = by_kind(build(fe))["Service"][0]
    assert svc["spec"]["selector"] == {"nvidia.com/selector": "g-frontend", "role": "leader"}


def test_multinode_needs_a_gpu_limit() -> None:
    with pytest.raises(ChildrenError, match=r"spec\.resources\.limits\.gpu"):
        build(worker(nodes=2, gpu=None))


def test_multinode_without_lws_says_no_orchestrator() -> None:
    with pytest.raises(ChildrenError, match="no multinode orchestrator available") as info:
        build(worker(nodes=2), missing_multinode_api="LeaderWorkerSet API")
    assert info.value.reason == REASON_NO_ORCHESTRATOR
    assert "Deployment" in by_kind(build(worker(), missing_multinode_api="LeaderWorkerSet API"))


def test_zero_replicas_multinode_wants_no_lws() -> None:
    assert by_kind(build(worker(nodes=2, replicas=0))) == {}


def with_strategy(obj: Obj, strategy: str) -> Obj:
    obj["metadata"]["annotations"] = {"nvidia.com/deployment-strategy": strategy}
    return obj


def pdb_of(obj: Obj) -> Obj | None:
    found = by_kind(build(obj)).get("PodDisruptionBudget") or []
    assert len(found) <= 1
    return found[0] if found else None


@pytest.mark.parametrize(
    ("strategy", "max_unavailable"),
    [
        (None, "25%"),  # the default 25%/25% rolling update
        ("BestEffortControlledRollout", "20%"),
        ("RampedSlowRollout", 1),  # its 0 would hold every drain forever: one pod at a time
        ("NoSuchStrategy", "25%"),  # an unknown annotation is the default rolling update
    ],
)
def test_single_node_pdb_takes_the_deployment_strategy_max_unavailable(
    strategy: str | None, max_unavailable: int | str
) -> None:
    obj = worker(gpu="1")
    if strategy is not None:
        with_strategy(obj, strategy)
    deploy = by_kind(build(obj))["Deployment"][0]
    pdb = pdb_of(obj)
    assert pdb is not None
    assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["name"] == "g-decode"
    assert pdb["spec"] == {"selector": deploy["spec"]["selector"], "maxUnavailable": max_unavailable}
    ref = pdb["metadata"]["ownerReferences"][0]
    assert (ref["uid"], ref["controller"]) == ("uid-1", True)
    assert pdb["metadata"]["annotations"][ANNOTATION_HASH] == hash_of(pdb)


def test_recreate_gets_no_pdb_and_multinode_gets_none() -> None:
    assert pdb_of(with_strategy(worker(gpu="1"), "Recreate")) is None
    assert pdb_of(worker(nodes=2)) is None


def test_pdb_hash_is_stable_and_follows_the_strategy_not_the_image_or_replicas() -> None:
    first = pdb_of(worker(gpu="1"))
    again = pdb_of(worker(gpu="1"))
    assert first is not None and again is not None and not needs_update(first, again)
    other_pods = worker(gpu="1", replicas=5)
    other_pods["spec"]["extraPodSpec"]["mainContainer"]["image"] = "vllm:2"
    same = pdb_of(other_pods)
    assert same is not None and not needs_update(first, same)  # a rollout does not touch the budget
    ramped = pdb_of(with_strategy(worker(gpu="1"), "RampedSlowRollout"))
    assert ramped is not None and needs_update(first, ramped)
    assert updated(first, ramped)["spec"]["maxUnavailable"] == 1


def test_a_component_without_an_image_names_the_field_kube_would_refuse() -> None:
    """kube-apiserver refuses a Deployment whose container has no image (422): say so once, in status."""
    with pytest.raises(ChildrenError, match=r"spec\.extraPodSpec\.mainContainer\.image: required"):
        build(dcd(extraPodSpec={}))

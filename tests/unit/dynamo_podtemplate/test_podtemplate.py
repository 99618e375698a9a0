"""The DCD pod template: each rule of upstream's GenerateBasePodSpec, and what overrides what."""

from __future__ import annotations

from typing import Any

import pytest

from aiplane.api.dynamo import DynamoComponentDeployment
from aiplane.controllers.dynamo.podtemplate import (
    PodTemplateOptions,
    build_pod_template,
    deployment_strategy,
    selector_labels,
)

OPTIONS = PodTemplateOptions(
    nats_server="nats://dynamo-nats.ops:4222",
    etcd_endpoints="dynamo-etcd.ops:2379",
    model_express_url="http://mx:8001",
    prometheus_endpoint="http://prom:9090",
)


def dcd(name: str = "agg-worker", annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "llm"}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": metadata,
        "spec": spec,
    }


def main(template: dict[str, Any]) -> dict[str, Any]:
    containers = template["spec"]["containers"]
    assert containers[0]["name"] == "main"
    result: dict[str, Any] = containers[0]
    return result


def env(template: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in main(template).get("env", [])}


def ports(template: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in main(template).get("ports", [])}


def mounts(template: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in main(template).get("volumeMounts", [])}


def volumes(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in template["spec"].get("volumes", [])}


def worker(**spec: Any) -> dict[str, Any]:
    extra = spec.pop(
        "extraPodSpec", {"mainContainer": {"image": "vllm:1", "args": ["python3 -m dynamo.vllm"]}}
    )
    return dcd(componentType="worker", extraPodSpec=extra, **spec)


# --- base container and pod -------------------------------------------------------------------------


def test_base_container_and_pod() -> None:
    owned = dcd(dynamoNamespace="llm-graph")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "name": "graph", "uid": "u"}
    ]
    template = build_pod_template(owned, PodTemplateOptions())
    assert main(template)["command"] == ["/bin/sh", "-c"]
    assert env(template) == {
        "DYN_NAMESPACE": "llm-graph",
        "DYN_PARENT_DGD_K8S_NAME": "graph",
        "DYN_PARENT_DGD_K8S_NAMESPACE": "llm",
    }
    assert template["spec"]["terminationGracePeriodSeconds"] == 60
    assert template["spec"]["restartPolicy"] == "Always"
    assert "serviceAccountName" not in template["spec"]


def test_accepts_the_typed_model() -> None:
    raw = worker()
    assert build_pod_template(DynamoComponentDeployment.model_validate(raw), OPTIONS) == build_pod_template(
        raw, OPTIONS
    )


# --- component-type defaults ------------------------------------------------------------------------


def test_frontend_defaults() -> None:
    template = build_pod_template(dcd(componentType="frontend"), PodTemplateOptions())
    container = main(template)
    assert container["args"] == ["python3 -m dynamo.frontend"]
    assert ports(template) == {"http": 8000}
    assert env(template)["DYNAMO_PORT"] == "8000"
    assert env(template)["DYN_HTTP_PORT"] == "8000"
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert "jq" in container["readinessProbe"]["exec"]["command"][-1]
    for probe in ("livenessProbe", "readinessProbe"):
        timing = {k: container[probe][k] for k in ("initialDelaySeconds", "periodSeconds", "timeoutSeconds")}
        assert timing == {"initialDelaySeconds": 60, "periodSeconds": 60, "timeoutSeconds": 30}
        assert container[probe]["failureThreshold"] == 10
    assert "startupProbe" not in container


def test_worker_defaults() -> None:
    template = build_pod_template(worker(), PodTemplateOptions())
    container = main(template)
    assert ports(template) == {"system": 9090}
    assert env(template)["DYN_SYSTEM_ENABLED"] == "true"
    assert env(template)["DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS"] == '["generate"]'
    assert env(template)["DYN_SYSTEM_PORT"] == "9090"
    assert container["livenessProbe"]["httpGet"]["path"] == "/live"
    assert (container["livenessProbe"]["periodSeconds"], container["livenessProbe"]["failureThreshold"]) == (
        5,
        1,
    )
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["failureThreshold"] == 60
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] == 7200


def test_planner_defaults_and_service_account() -> None:
    template = build_pod_template(dcd(componentType="planner"), PodTemplateOptions(), service_account="found")
    assert ports(template) == {"metrics": 9085}
    assert env(template)["PLANNER_PROMETHEUS_PORT"] == "9085"
    assert template["spec"]["serviceAccountName"] == "planner-serviceaccount"
    other = build_pod_template(dcd(componentType="frontend"), PodTemplateOptions(), service_account="found")
    assert other["spec"]["serviceAccountName"] == "found"


@pytest.mark.parametrize("component_type", [None, "default", "main"])
def test_other_component_types_get_no_defaults(component_type: str | None) -> None:
    template = build_pod_template(dcd(componentType=component_type), PodTemplateOptions())
    assert "ports" not in main(template)
    assert "livenessProbe" not in main(template)


# --- what overrides what ----------------------------------------------------------------------------


def test_main_container_deep_merges_over_defaults() -> None:
    extra = {
        "mainContainer": {
            "image": "fe:2",
            "env": [{"name": "DYNAMO_PORT", "value": "8080"}, {"name": "EXTRA", "value": "1"}],
            "ports": [{"name": "debug", "containerPort": 5678}],
            "livenessProbe": {"periodSeconds": 7},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
        }
    }
    container = main(build_pod_template(dcd(componentType="frontend", extraPodSpec=extra), OPTIONS))
    names = [item["name"] for item in container["env"]]
    assert names.index("DYNAMO_PORT") < names.index("DYN_HTTP_PORT") < names.index("EXTRA")
    assert {e["name"]: e["value"] for e in container["env"]}["DYNAMO_PORT"] == "8080"
    assert {p["name"] for p in container["ports"]} == {"http", "debug"}
    # Timings merge into the default probe...
    assert container["livenessProbe"]["periodSeconds"] == 7
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["livenessProbe"]["failureThreshold"] == 10
    # ...and a handler replaces the default's handler rather than sitting beside it.
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert "exec" not in container["readinessProbe"]
    assert container["readinessProbe"]["periodSeconds"] == 60
    assert container["image"] == "fe:2"


def test_main_container_startup_probe_replaces_the_default_wholly() -> None:
    extra = {"mainContainer": {"args": ["python3 -m dynamo.vllm"], "startupProbe": {"periodSeconds": 3}}}
    container = main(build_pod_template(worker(extraPodSpec=extra), OPTIONS))
    assert container["startupProbe"] == {"periodSeconds": 3}


def test_main_container_cannot_rename_main() -> None:
    extra = {"mainContainer": {"name": "other", "args": ["python3 -m dynamo.vllm"]}}
    assert main(build_pod_template(worker(extraPodSpec=extra), OPTIONS))["name"] == "main"


def test_envs_win_over_main_container_and_defaults() -> None:
    extra = {"mainContainer": {"args": ["x"], "env": [{"name": "A", "value": "main"}]}}
    spec_envs = [{"name": "A", "value": "envs"}, {"name": "DYN_SYSTEM_PORT", "value": "9999"}]
    template = build_pod_template(worker(extraPodSpec=extra, envs=spec_envs), OPTIONS)
    assert env(template)["A"] == "envs"
    assert env(template)["DYN_SYSTEM_PORT"] == "9999"


def test_top_level_probes_replace_wholly() -> None:
    liveness = {"exec": {"command": ["true"]}}
    readiness = {"tcpSocket": {"port": 9090}, "periodSeconds": 2}
    extra = {"mainContainer": {"args": ["x"], "livenessProbe": {"periodSeconds": 99}}}
    container = main(
        build_pod_template(
            worker(extraPodSpec=extra, livenessProbe=liveness, readinessProbe=readiness), OPTIONS
        )
    )
    assert container["livenessProbe"] == liveness
    assert container["readinessProbe"] == readiness
    assert container["startupProbe"]["httpGet"]["path"] == "/live"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"gpu": "2"}, {"nvidia.com/gpu": "2"}),
        ({"gpu": "1", "gpuType": "gpu.intel.com/xe"}, {"gpu.intel.com/xe": "1"}),
        ({"gpu": "8", "gpuType": "amd.com/gpu"}, {"amd.com/gpu": "8"}),
        ({"gpuType": "amd.com/gpu"}, {}),
        ({"cpu": "4", "memory": "16Gi"}, {"cpu": "4", "memory": "16Gi"}),
        ({"custom": {"rdma/ib": "1"}, "cpu": "1"}, {"cpu": "1", "rdma/ib": "1"}),
    ],
)
def test_resources_and_gpu_type(item: dict[str, Any], expected: dict[str, str]) -> None:
    container = main(build_pod_template(worker(resources={"requests": item, "limits": item}), OPTIONS))
    resources = container.get("resources", {})
    assert resources.get("requests", {}) == expected
    assert resources.get("limits", {}) == expected


def test_resources_merge_over_main_container_resources() -> None:
    extra = {
        "mainContainer": {
            "args": ["python3 -m dynamo.vllm"],
            "resources": {"limits": {"cpu": "1", "ephemeral-storage": "10Gi"}},
        }
    }
    container = main(
        build_pod_template(worker(extraPodSpec=extra, resources={"limits": {"cpu": "2"}}), OPTIONS)
    )
    assert container["resources"]["limits"] == {"cpu": "2", "ephemeral-storage": "10Gi"}


def test_env_from_secret() -> None:
    container = main(build_pod_template(worker(envFromSecret="hf-token"), OPTIONS))
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token"}}]


def test_operator_env_is_added_but_user_values_win() -> None:
    template = build_pod_template(
        worker(envs=[{"name": "NATS_SERVER", "value": "nats://mine:4222"}]), OPTIONS
    )
    assert env(template)["NATS_SERVER"] == "nats://mine:4222"
    assert env(template)["ETCD_ENDPOINTS"] == "dynamo-etcd.ops:2379"
    assert env(template)["MODEL_EXPRESS_URL"] == "http://mx:8001"
    assert env(template)["PROMETHEUS_ENDPOINT"] == "http://prom:9090"
    assert "NATS_SERVER" not in env(build_pod_template(worker(), PodTemplateOptions()))


def test_image_pull_secrets_unless_discovery_is_disabled() -> None:
    template = build_pod_template(worker(), OPTIONS, image_pull_secrets=["nvcr"])
    assert template["spec"]["imagePullSecrets"] == [{"name": "nvcr"}]
    disabled = dcd(
        annotations={"nvidia.com/disable-image-pull-secret-discovery": "true"},
        componentType="frontend",
    )
    assert (
        "imagePullSecrets" not in build_pod_template(disabled, OPTIONS, image_pull_secrets=["nvcr"])["spec"]
    )


# --- volumes ----------------------------------------------------------------------------------------


def test_volume_mounts_mount_the_named_pvc() -> None:
    template = build_pod_template(worker(volumeMounts=[{"name": "models", "mountPoint": "/models"}]), OPTIONS)
    assert mounts(template)["models"] == "/models"
    assert volumes(template)["models"]["persistentVolumeClaim"] == {"claimName": "models"}
    assert "VLLM_CACHE_ROOT" not in env(template)


def test_volume_mount_without_mount_point_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"spec\.volumeMounts\[0\]\.mountPoint"):
        build_pod_template(worker(volumeMounts=[{"name": "models"}]), OPTIONS)


@pytest.mark.parametrize(
    ("backend", "mount_point", "path", "cache_env"),
    [
        ("vllm", None, "/root/.cache/vllm", "/root/.cache/vllm"),
        ("vllm", "/cache", "/cache", "/cache"),
        ("sglang", "/cache", "/cache", None),
        ("trtllm", "/cache", "/cache", None),
    ],
)
def test_compilation_cache(backend: str, mount_point: str | None, path: str, cache_env: str | None) -> None:
    mount: dict[str, Any] = {"name": "cache", "useAsCompilationCache": True}
    if mount_point:
        mount["mountPoint"] = mount_point
    extra = {"mainContainer": {"args": [f"python3 -m dynamo.{backend}"]}}
    template = build_pod_template(worker(extraPodSpec=extra, volumeMounts=[mount]), OPTIONS)
    assert mounts(template)["cache"] == path
    assert env(template).get("VLLM_CACHE_ROOT") == cache_env


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_compilation_cache_without_default_mount_is_an_error(backend: str) -> None:
    extra = {"mainContainer": {"args": [f"python3 -m dynamo.{backend}"]}}
    spec = worker(
        extraPodSpec=extra,
        volumeMounts=[{"name": "ok", "mountPoint": "/ok"}, {"name": "c", "useAsCompilationCache": True}],
    )
    with pytest.raises(ValueError, match=rf"spec\.volumeMounts\[1\]\.mountPoint.*{backend}"):
        build_pod_template(spec, OPTIONS)


def test_compilation_cache_env_set_by_the_user_wins() -> None:
    mount = {"name": "cache", "useAsCompilationCache": True}
    template = build_pod_template(
        worker(volumeMounts=[mount], envs=[{"name": "VLLM_CACHE_ROOT", "value": "/x"}]), OPTIONS
    )
    assert env(template)["VLLM_CACHE_ROOT"] == "/x"


@pytest.mark.parametrize(
    ("shared_memory", "size"),
    [(None, "8Gi"), ({"size": "16Gi"}, "16Gi"), ({"disabled": False}, "8Gi"), ({"disabled": True}, None)],
)
def test_shared_memory(shared_memory: dict[str, Any] | None, size: str | None) -> None:
    spec = {"sharedMemory": shared_memory} if shared_memory is not None else {}
    template = build_pod_template(worker(**spec), OPTIONS)
    if size is None:
        assert "shared-memory" not in volumes(template)
        assert "shared-memory" not in mounts(template)
    else:
        assert volumes(template)["shared-memory"]["emptyDir"] == {"medium": "Memory", "sizeLimit": size}
        assert mounts(template)["shared-memory"] == "/dev/shm"


# --- extraPodSpec (pod part) ------------------------------------------------------------------------


def test_extra_pod_spec_overrides_the_pod() -> None:
    extra = {
        "mainContainer": {"args": ["python3 -m dynamo.vllm"]},
        "terminationGracePeriodSeconds": 5,
        "nodeSelector": {"gpu": "h100"},
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [{"name": "sidecar", "image": "s:1"}],
    }
    template = build_pod_template(worker(extraPodSpec=extra), OPTIONS)
    pod = template["spec"]
    assert pod["terminationGracePeriodSeconds"] == 5
    assert pod["nodeSelector"] == {"gpu": "h100"}
    assert set(volumes(template)) == {"shared-memory", "scratch"}
    assert [c["name"] for c in pod["containers"]] == ["main", "sidecar"]
    assert "mainContainer" not in pod


# --- backend detection ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "declared"),
    [
        (["python3", "-m", "dynamo.vllm"], [], "vllm"),
        (["/bin/sh", "-c"], ["python3 -m dynamo.sglang.worker --model m"], "sglang"),
        (["/bin/sh", "-c"], ["python -m dynamo.trtllm"], None),
        (["/bin/sh", "-c"], ["python3.12 -m dynamo.vllm"], None),
        (["/bin/sh", "-c"], ["./start.sh"], "trtllm"),
    ],
)
def test_backend_detection_accepts(command: list[str], args: list[str], declared: str | None) -> None:
    spec: dict[str, Any] = {"extraPodSpec": {"mainContainer": {"command": command, "args": args}}}
    if declared:
        spec["backendFramework"] = declared
    build_pod_template(worker(**spec), OPTIONS)


def test_backend_mismatch_names_the_field() -> None:
    spec = worker(backendFramework="sglang")
    with pytest.raises(ValueError, match=r"spec\.backendFramework.*'sglang'.*dynamo\.vllm"):
        build_pod_template(spec, OPTIONS)


def test_backend_mismatch_with_the_graph_backend() -> None:
    with pytest.raises(ValueError, match=r"DynamoGraphDeployment spec\.backendFramework.*trtllm"):
        build_pod_template(worker(), OPTIONS, graph_backend="trtllm")
    # The DCD's own field is checked first and, when set, is the one that must agree.
    build_pod_template(worker(backendFramework="vllm"), OPTIONS, graph_backend="trtllm")


def test_two_backends_in_one_command_is_an_error() -> None:
    extra = {"mainContainer": {"args": ["python3 -m dynamo.vllm & python3 -m dynamo.sglang"]}}
    with pytest.raises(ValueError, match=r"mainContainer\.command/args.*several"):
        build_pod_template(worker(extraPodSpec=extra), OPTIONS)


def test_non_workers_are_not_checked() -> None:
    spec = dcd(componentType="frontend", backendFramework="sglang")
    build_pod_template(spec, OPTIONS)


def test_graph_backend_is_the_fallback_for_the_compilation_cache() -> None:
    extra = {"mainContainer": {"args": ["./run.sh"]}}
    spec = worker(extraPodSpec=extra, volumeMounts=[{"name": "c", "useAsCompilationCache": True}])
    assert mounts(build_pod_template(spec, OPTIONS, graph_backend="vllm"))["c"] == "/root/.cache/vllm"


# --- labels and the Deployment ----------------------------------------------------------------------


def test_pod_labels_keep_the_selector() -> None:
    spec = worker(
        labels={"team": "a", "nvidia.com/selector": "hijack"},
        extraPodMetadata={"labels": {"extra": "1"}, "annotations": {"note": "x"}},
    )
    template = build_pod_template(spec, OPTIONS)
    labels = template["metadata"]["labels"]
    assert labels["nvidia.com/selector"] == "agg-worker"
    assert labels["team"] == "a"
    assert labels["extra"] == "1"
    assert template["metadata"]["annotations"] == {"note": "x"}
    assert selector_labels(spec) == {"nvidia.com/selector": "agg-worker"}
    assert selector_labels(spec).items() <= labels.items()


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
        ("Recreate", {"type": "Recreate"}),
        (
            "RampedSlowRollout",
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        ),
        (
            "BestEffortControlledRollout",
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "20%"}},
        ),
        ("Bogus", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    ],
)
def test_deployment_strategy(annotation: str | None, expected: dict[str, Any]) -> None:
    annotations = {"nvidia.com/deployment-strategy": annotation} if annotation else None
    strategy = deployment_strategy(dcd(annotations=annotations))
    assert strategy == expected
    strategy["type"] = "mutated"
    assert deployment_strategy(dcd(annotations=annotations)) == expected

"""Hypothesis properties of the pod-template builder.

The DCD controller rebuilds the template on every reconcile and compares its hash with the one on the
Deployment; a builder that were not deterministic, or that mutated the cached DCD, would rewrite the
Deployment forever (and roll its pods). So, for random DCDs:

1. building twice gives equal templates, and building from a deep copy gives an equal template;
2. the input is never mutated, and mutating a result does not leak into the next build;
3. the result is well formed: ``main`` first, unique env/port/volume/mount names, the selector label
   set, every mount backed by a volume.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.dynamo.podtemplate import PodTemplateOptions, build_pod_template, selector_labels

NAMES = st.sampled_from(["A", "B", "NATS_SERVER", "DYN_SYSTEM_PORT", "DYNAMO_PORT", "VLLM_CACHE_ROOT"])
VALUES = st.text(alphabet="abc/:0123456789", max_size=8)
ENVS = st.lists(
    st.fixed_dictionaries({"name": NAMES, "value": VALUES}), max_size=4, unique_by=lambda e: e["name"]
)
PROBE = st.one_of(
    st.fixed_dictionaries({"periodSeconds": st.integers(1, 30)}),
    st.fixed_dictionaries(
        {"httpGet": st.just({"path": "/x", "port": 1234}), "timeoutSeconds": st.integers(1, 9)}
    ),
)
RESOURCE_ITEM = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["1", "500m"]),
        "memory": st.sampled_from(["1Gi", "8Gi"]),
        "gpu": st.sampled_from(["1", "8"]),
        "gpuType": st.sampled_from(["nvidia.com/gpu", "amd.com/gpu"]),
        "custom": st.dictionaries(
            st.sampled_from(["rdma/ib", "x/y"]), st.sampled_from(["1", "2"]), max_size=2
        ),
    },
)
# Distinct ports per name: the API rejects two ports with the same containerPort.
PORTS = st.sampled_from([("http", 8080), ("system", 9091), ("extra", 5678)]).map(
    lambda p: {"name": p[0], "containerPort": p[1]}
)
MOUNTS = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["models", "cache", "scratch"]),
            "mountPoint": st.sampled_from(["/m", "/c", "/s"]),
        },
        optional={"useAsCompilationCache": st.booleans()},
    ),
    max_size=3,
    unique_by=lambda m: m["name"],
)


@st.composite
def dcds(draw: st.DrawFn) -> dict[str, Any]:
    backend = draw(st.sampled_from(["vllm", "sglang", "trtllm"]))
    main: dict[str, Any] = {"image": "img", "args": [f"python3 -m dynamo.{backend} --model m"]}
    main.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "env": ENVS,
                    "ports": st.lists(PORTS, max_size=2, unique_by=lambda p: p["name"]),
                    "livenessProbe": PROBE,
                    "startupProbe": PROBE,
                    "resources": st.just({"limits": {"cpu": "3"}}),
                },
            )
        )
    )
    spec: dict[str, Any] = {
        "componentType": draw(st.sampled_from(["frontend", "worker", "planner", "default"])),
        "extraPodSpec": {
            "mainContainer": main,
            **draw(st.fixed_dictionaries({}, optional={"nodeSelector": st.just({"gpu": "h100"})})),
        },
    }
    spec.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "backendFramework": st.just(backend),
                    "envs": ENVS,
                    "readinessProbe": PROBE,
                    "resources": st.fixed_dictionaries(
                        {}, optional={"requests": RESOURCE_ITEM, "limits": RESOURCE_ITEM}
                    ),
                    "envFromSecret": st.sampled_from(["hf", "token"]),
                    "volumeMounts": MOUNTS,
                    "sharedMemory": st.fixed_dictionaries(
                        {}, optional={"disabled": st.booleans(), "size": st.sampled_from(["1Gi", "16Gi"])}
                    ),
                    "labels": st.dictionaries(
                        st.sampled_from(["team", "nvidia.com/selector"]), VALUES, max_size=2
                    ),
                    "dynamoNamespace": st.sampled_from(["ns-a", "ns-b"]),
                },
            )
        )
    )
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": draw(st.sampled_from(["fe", "worker-0"])), "namespace": "llm"},
        "spec": spec,
    }


OPTIONS = st.builds(
    PodTemplateOptions,
    nats_server=st.one_of(st.none(), st.just("nats://n:4222")),
    etcd_endpoints=st.one_of(st.none(), st.just("etcd:2379")),
)


def unique(items: list[dict[str, Any]]) -> bool:
    names = [item["name"] for item in items]
    return len(names) == len(set(names))


@settings(max_examples=150, deadline=None)
@given(dcd=dcds(), options=OPTIONS)
def test_deterministic_and_pure(dcd: dict[str, Any], options: PodTemplateOptions) -> None:
    before = copy.deepcopy(dcd)
    first = build_pod_template(dcd, options)
    assert dcd == before
    assert build_pod_template(dcd, options) == first
    assert build_pod_template(copy.deepcopy(dcd), options) == first
    # The result shares nothing with the input or with later builds.
    kept = copy.deepcopy(first)
    first["spec"]["containers"][0].setdefault("env", []).append({"name": "LEAK", "value": "1"})
    first["metadata"]["labels"]["leak"] = "1"
    assert build_pod_template(dcd, options) == kept
    assert dcd == before


@settings(max_examples=150, deadline=None)
@given(dcd=dcds(), options=OPTIONS)
def test_well_formed(dcd: dict[str, Any], options: PodTemplateOptions) -> None:
    template = build_pod_template(dcd, options)
    pod = template["spec"]
    main = pod["containers"][0]
    assert main["name"] == "main"
    assert unique(pod["containers"])
    for field in ("env", "ports", "volumeMounts"):
        assert unique(main.get(field, []))
    assert unique(pod.get("volumes", []))
    assert {m["name"] for m in main.get("volumeMounts", [])} <= {v["name"] for v in pod.get("volumes", [])}
    assert selector_labels(dcd).items() <= template["metadata"]["labels"].items()
    env = {e["name"]: e.get("value") for e in main.get("env", [])}
    user = {e["name"]: e["value"] for e in dcd["spec"].get("envs", [])}
    assert user.items() <= env.items()
    if options.nats_server and "NATS_SERVER" not in user:
        assert "NATS_SERVER" in env

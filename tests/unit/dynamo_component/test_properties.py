"""Hypothesis: the children builder is deterministic and pure.

The controller rebuilds the children on every reconcile and writes one only when its hash differs
from the live one's; a builder that were not deterministic would rewrite children (and roll pods)
for ever, and one that mutated the cached DCD would corrupt the informer cache.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.dynamo.component_children import (
    ANNOTATION_HASH,
    ChildrenError,
    ChildrenInput,
    desired_children,
    needs_update,
)
from aiplane.controllers.dynamo.options import DynamoOptions


@st.composite
def dcds(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["frontend", "worker", "planner", "default"]))
    main: dict[str, Any] = {"image": draw(st.sampled_from(["a:1", "b:2"]))}
    if kind == "worker":
        main["args"] = [f"python3 -m dynamo.{draw(st.sampled_from(['vllm', 'sglang', 'trtllm']))} --x"]
    spec: dict[str, Any] = {"componentType": kind, "extraPodSpec": {"mainContainer": main}}
    optional = {
        "replicas": st.integers(0, 4),
        "multinode": st.fixed_dictionaries({"nodeCount": st.integers(2, 4)}),
        "resources": st.just({"limits": {"gpu": "2"}, "requests": {"cpu": "1", "memory": "1Gi"}}),
        "autoscaling": st.fixed_dictionaries(
            {"enabled": st.booleans(), "maxReplicas": st.integers(1, 9)},
            optional={"behavior": st.just({"scaleUp": {"stabilizationWindowSeconds": 0}})},
        ),
        "ingress": st.fixed_dictionaries(
            {"enabled": st.booleans(), "host": st.sampled_from(["a", "b"])},
            optional={"useVirtualService": st.booleans(), "virtualServiceGateway": st.just("gw/gw")},
        ),
        "labels": st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from(["x", "y"]), max_size=2),
        "annotations": st.just({"nvidia.com/deployment-strategy": "Recreate"}),
    }
    spec.update(draw(st.fixed_dictionaries({}, optional=optional)))
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": spec,
    }


OPTIONS = st.builds(
    DynamoOptions,
    ingress_class=st.sampled_from(["", "nginx"]),
    istio_gateway=st.sampled_from(["", "gw/gw"]),
    nats_server=st.sampled_from(["", "nats://n:4222"]),
)


@settings(max_examples=150, deadline=None)
@given(dcd=dcds(), options=OPTIONS, sa=st.sampled_from([None, "sa"]))
def test_building_twice_gives_the_same_children_and_hashes(
    dcd: dict[str, Any], options: DynamoOptions, sa: str | None
) -> None:
    before = copy.deepcopy(dcd)
    try:
        first = desired_children(ChildrenInput(dcd, options, service_account=sa))
    except ChildrenError:
        return
    assert dcd == before
    again = desired_children(ChildrenInput(copy.deepcopy(dcd), options, service_account=sa))
    assert again == first
    for a, b in zip(first.children, again.children, strict=True):
        assert a["metadata"]["annotations"][ANNOTATION_HASH] == b["metadata"]["annotations"][ANNOTATION_HASH]
        assert not needs_update(a, b)
    names = [(c["kind"], c["metadata"]["name"]) for c in first.children]
    assert len(names) == len(set(names))
    # Mutating a result does not leak into the next build.
    for child in first.children:
        child["spec"]["mutated"] = True
    assert desired_children(ChildrenInput(dcd, options, service_account=sa)) == again

"""The generated DGD and the GPU target (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.dynamo.request_graph import (
    GraphPlan,
    generate_graph,
    patch_layout,
    patch_tp,
    worker_services,
)
from aiplane.controllers.dynamo.request_target import Target, find_target
from aiplane.controllers.dynamo.request_templates import base_graph

plans = st.builds(
    GraphPlan,
    backend=st.sampled_from(["vllm", "sglang", "trtllm"]),
    prefill_tp=st.sampled_from([1, 2, 4, 8, 16]),
    prefill_workers=st.integers(1, 32),
    decode_tp=st.sampled_from([1, 2, 4, 8, 16]),
    decode_workers=st.integers(1, 32),
    ttft_ms=st.integers(1, 1000),
    itl_ms=st.integers(1, 100),
    gpu_resource=st.sampled_from(["nvidia.com/gpu", "amd.com/gpu"]),
    profile_configmap=st.sampled_from([None, "dgdr-output-x"]),
    prefill_dp=st.sampled_from([1, 2, 4]),
    prefill_ep=st.sampled_from([1, 4]),
    decode_dp=st.sampled_from([1, 2, 8]),
    decode_ep=st.sampled_from([1, 8]),
)


@given(plans)
def test_generated_graph_is_idempotent_and_replicas_equal_the_plan(plan: GraphPlan) -> None:
    base = base_graph(plan.backend, "Qwen/Qwen3-8B", "x")
    once = generate_graph(base, plan, "x", "ns")
    assert generate_graph(once, plan, "x", "ns") == once
    services = once["spec"]["services"]
    prefill, decode = worker_services(services, plan.backend)
    assert services[prefill]["replicas"] == plan.prefill_workers
    assert services[decode]["replicas"] == plan.decode_workers
    for key, gpus in ((prefill, plan.prefill_gpus), (decode, plan.decode_gpus)):
        nodes = services[key].get("multinode", {}).get("nodeCount", 1)
        assert int(services[key]["resources"]["limits"]["gpu"]) * nodes == gpus
        # Always explicit, NVIDIA's too: an absent gpuType would let KaiwoConfig's
        # defaultGpuResourceKey move a graph planned for H100s onto AMD GPUs.
        for side in ("requests", "limits"):
            assert services[key]["resources"][side]["gpuType"] == plan.gpu_resource
    assert services["Planner"]["componentType"] == "planner"


def test_patch_tp_rewrites_a_shell_line_or_tokens_and_adds_when_absent() -> None:
    assert patch_tp(["python3 -m dynamo.vllm --model m --tensor-parallel-size 2"], "vllm", 4) == [
        "python3 -m dynamo.vllm --model m --tensor-parallel-size 4"
    ]
    assert patch_tp(["--tp", "1", "--x"], "sglang", 8) == ["--tp", "8", "--x"]
    assert patch_tp(["python3 -m dynamo.sglang --model-path m"], "sglang", 2) == [
        "python3 -m dynamo.sglang --model-path m --tp 2"
    ]


def test_moe_layouts_reach_the_worker_arguments() -> None:
    """A decode worker of 1 x TP with 4 data-parallel attention ranks and 4-way experts, per backend."""
    assert patch_layout(["python3 -m dynamo.vllm --model m"], "vllm", 1, 4, 4) == [
        "python3 -m dynamo.vllm --model m --tensor-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel"
    ]
    assert patch_layout(["python3 -m dynamo.sglang --model-path m"], "sglang", 1, 4, 4) == [
        "python3 -m dynamo.sglang --model-path m --tp 4 --dp-size 4 --enable-dp-attention --ep-size 4"
    ]
    # MoE TP only (no EP): vLLM shards experts over its data-parallel ranks without the EP switch.
    assert patch_layout(["--tensor-parallel-size", "2"], "vllm", 1, 4, 1) == [
        "--tensor-parallel-size",
        "1",
        "--data-parallel-size",
        "4",
    ]


def _node(
    name: str, product_label: dict[str, str], resource: str, allocatable: str, **extra: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {**product_label, **extra.get("labels", {})}},
        "spec": {"unschedulable": extra.get("cordoned", False)},
        "status": {
            "allocatable": {resource: allocatable},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _canonical(name: str) -> tuple[str, str, int]:
    table = {"h100": "h100_sxm", "h100_sxm": "h100_sxm", "mi300x": "mi300x"}
    if name.lower() not in table:
        raise ValueError(f"unknown GPU system {name!r}; known: h100, h100_sxm, mi300x")
    system = table[name.lower()]
    return system, "amd.com/gpu" if system == "mi300x" else "nvidia.com/gpu", 8


H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
MI300X = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}


def test_discovery_picks_the_largest_budget_of_schedulable_nodes() -> None:
    nodes = [
        _node("h1", H100, "nvidia.com/gpu", "8"),
        _node("h2", H100, "nvidia.com/gpu", "8", cordoned=True),
        _node("a1", MI300X, "amd.com/gpu", "8"),
        _node("a2", MI300X, "amd.com/gpu", "8"),
    ]
    target = find_target(nodes, None, _canonical)
    assert isinstance(target, Target)
    assert (target.system, target.budget, target.discovered) == ("mi300x", 16, True)
    target = find_target(nodes, "h100", _canonical)
    assert isinstance(target, Target) and target.budget == 8  # the cordoned node does not count


def test_partitioned_amd_nodes_plan_in_partitions() -> None:
    labels = {"beta.amd.com/gpu.family.AI": "8"}
    nodes = [_node(f"a{i}", MI300X, "amd.com/gpu", "64", labels=labels) for i in range(2)]
    target = find_target(nodes, "mi300x", _canonical)
    assert isinstance(target, Target)
    assert (target.partitions_per_gpu, target.budget, target.per_node) == (8, 128, 64)


def test_unknown_or_absent_gpu_type_names_the_field() -> None:
    nodes = [_node("h1", H100, "nvidia.com/gpu", "8")]
    problem = find_target(nodes, "tpu", _canonical)
    assert isinstance(problem, str) and problem.startswith("spec.gpu.type:") and "known:" in problem
    problem = find_target(nodes, "mi300x", _canonical)
    assert isinstance(problem, str) and "h100_sxm" in problem


def _pod(node: str, gpus: int, phase: str = "Running") -> dict[str, object]:
    return {
        "metadata": {"name": f"w-{node}-{gpus}"},
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": phase},
    }


def test_the_budget_is_what_other_pods_have_not_requested() -> None:
    """Another graph holding all 16 H100s leaves nothing: the request is told so, not planned on them."""
    nodes = [_node(f"h{i}", H100, "nvidia.com/gpu", "8") for i in range(2)]
    held = [_pod("h0", 8), _pod("h1", 4), _pod("h1", 4)]
    problem = find_target(nodes, "h100", _canonical, held)
    assert isinstance(problem, str) and "requested by other pods" in problem
    partly = [_pod("h0", 8), _pod("h1", 2), _pod("h1", 4, phase="Succeeded")]
    target = find_target(nodes, "h100", _canonical, partly)
    assert isinstance(target, Target)
    assert (target.budget, target.allocatable, target.in_use) == (6, 16, 10)
    assert "6 free of 16" in target.describe()


def test_spec_gpu_total_gpus_caps_the_budget() -> None:
    nodes = [_node(f"h{i}", H100, "nvidia.com/gpu", "8") for i in range(2)]
    target = find_target(nodes, "h100", _canonical, [], cap=4)
    assert isinstance(target, Target) and target.budget == 4
    assert "capped by spec.gpu.totalGpus 4" in target.describe()


def test_planner_messages_name_the_request_fields_not_cli_flags() -> None:
    import pytest

    from aiplane.planner.models import resolve_model
    from aiplane.planner.report import cr_message, flag_message
    from aiplane.planner.types import PlannerError

    with pytest.raises(PlannerError) as err:
        resolve_model("acme/unknown-70b")
    message = cr_message(str(err.value))
    assert message.startswith("spec.modelName: unknown model")
    assert "spec.profilingConfig.configMapRef (key config.json)" in message and "--" not in message
    assert "(--model-config)" in flag_message(str(err.value))  # the CLI's own spelling

"""Invariants of the multinode injection over generated commands, backends and group sizes."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.dynamo.multinode import MultinodeInput, multinode_templates

Obj = dict[str, Any]
BACKENDS = (None, "vllm", "sglang", "trtllm")


@st.composite
def cases(draw: st.DrawFn) -> tuple[Obj, MultinodeInput]:
    backend = draw(st.sampled_from(BACKENDS))
    module = f"dynamo.{backend or 'frontend'}"
    flags: list[str] = []
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        if draw(st.booleans()):
            flags += [flag, str(draw(st.sampled_from([1, 2, 4, 8, 16])))]
    flags += ["--model", draw(st.sampled_from(["m", "org/model", "/models/a b"]))]
    if draw(st.booleans()):
        command, args = ["python3", "-m", module], flags
    else:
        command, args = ["/bin/sh", "-c"], [" ".join(["python3", "-m", module, *flags])]
    main: Obj = {"name": "main", "image": "img", "command": command, "args": args}
    for probe in draw(st.sets(st.sampled_from(["livenessProbe", "readinessProbe", "startupProbe"]))):
        main[probe] = {"httpGet": {"path": "/health", "port": 9090}}
    if draw(st.booleans()):
        main["env"] = [{"name": "HF_TOKEN", "value": "t"}]
    tpl = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [main], "volumes": []}}
    nodes = draw(st.integers(min_value=2, max_value=8))
    gpus = draw(st.integers(min_value=1, max_value=8))
    return tpl, MultinodeInput(backend, nodes, gpus, "mpi-ssh")


def text(tpl: Obj) -> str:
    main = tpl["spec"]["containers"][0]
    return " ".join([*main["command"], *main["args"]])


@given(cases())
def test_same_input_same_output_and_input_untouched(case: tuple[Obj, MultinodeInput]) -> None:
    tpl, inp = case
    before = copy.deepcopy(tpl)
    first = multinode_templates(tpl, inp)
    assert tpl == before
    assert multinode_templates(tpl, inp) == first
    assert first[0]["metadata"] == first[1]["metadata"] == before["metadata"]


@given(cases())
def test_leader_is_rank_zero_and_workers_carry_their_rank(case: tuple[Obj, MultinodeInput]) -> None:
    tpl, inp = case
    leader, worker = multinode_templates(tpl, inp)
    if inp.backend == "sglang":
        assert "--node-rank 0" in text(leader) and "LWS_WORKER_INDEX" not in text(leader)
        assert "--node-rank $(LWS_WORKER_INDEX)" in text(worker)
        assert f"--nnodes {inp.node_count}" in text(leader)
    if inp.backend == "vllm" and "--data-parallel-start-rank" in text(leader):
        assert "--data-parallel-start-rank 0" in text(leader)
        assert "* $LWS_WORKER_INDEX ))" in text(worker)
    if inp.backend == "trtllm":
        hosts = text(leader).split(" -H ", 1)[1]
        assert hosts.startswith("$(LWS_LEADER_ADDRESS),")
        assert hosts.count("sed 's/") == inp.node_count - 1
        assert f"-n {inp.node_count * inp.gpus_per_node} " in text(leader)


@given(cases())
def test_only_backends_change_pods_and_leader_probes_stay(case: tuple[Obj, MultinodeInput]) -> None:
    tpl, inp = case
    leader, worker = multinode_templates(tpl, inp)
    main = tpl["spec"]["containers"][0]
    given_probes = {k for k in main if k.endswith("Probe")}
    if inp.backend is None:
        assert leader == worker == tpl
        return
    assert {k for k in leader["spec"]["containers"][0] if k.endswith("Probe")} == given_probes
    worker_probes = {k for k in worker["spec"]["containers"][0] if k.endswith("Probe")}
    assert worker_probes == ({"readinessProbe"} if inp.backend == "trtllm" else set())

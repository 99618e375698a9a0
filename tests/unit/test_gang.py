"""The gang-scheduler choice (aiplane.controllers.gang): the same ModelInfer group and multinode Dynamo
replica expressed for Volcano and for the scheduler-plugins Coscheduling plugin, and the Coscheduling
scheduler's words turned into one stable cause per gang; the second scheduler's profile on the real tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aiplane.controllers import causes
from aiplane.controllers.dynamo.component_children import ChildrenInput, desired_children
from aiplane.controllers.gang import COSCHEDULING, VOLCANO, GangOptions, GangScheduler, backend_of
from aiplane.controllers.modelinfer.objects import build_pod, build_podgroup
from aiplane.realcluster import neighbours as nb
from aiplane.realcluster import pki
from aiplane.realcluster.scheduling import coscheduling_config
from aiplane.run import options_from_flags
from tests.integration.test_dynamo_dcd_e2e import worker
from tests.integration.test_modelinfer_e2e import modelinfer

LABEL = "scheduling.x-k8s.io/pod-group"


def _mi() -> dict[str, Any]:
    mi = modelinfer("pd", replicas=1, gpus=2)
    mi["metadata"].update(namespace="serving", uid="u-1")
    return mi


def test_a_modelinfer_group_is_one_podgroup_of_the_chosen_api_with_the_same_counts() -> None:
    mi = _mi()
    roles = mi["spec"]["template"]["roles"]
    volcano = build_podgroup(mi, 0, roles, VOLCANO)
    cosched = build_podgroup(mi, 0, roles, COSCHEDULING)
    assert volcano is not None and cosched is not None
    assert volcano["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert cosched["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert cosched["metadata"] == volcano["metadata"]  # same name, labels, owner
    assert cosched["spec"] == {"minMember": 6, "minResources": {"amd.com/gpu": "12", "cpu": "6"}}
    assert volcano["spec"]["minTaskMember"] == {"prefill-0": 2, "decode-0": 2, "decode-1": 2}


def test_a_member_carries_the_marks_of_the_chosen_scheduler_only() -> None:
    mi = _mi()
    roles = mi["spec"]["template"]["roles"]
    volcano = build_pod(mi, roles, 0, "decode", 1, 1, "r1", VOLCANO)
    cosched = build_pod(mi, roles, 0, "decode", 1, 1, "r1", COSCHEDULING)
    assert volcano["spec"]["schedulerName"] == "volcano"
    assert volcano["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pd-0"
    assert volcano["metadata"]["annotations"]["volcano.sh/task-spec"] == "decode-1"
    assert LABEL not in volcano["metadata"]["labels"]
    assert cosched["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert cosched["metadata"]["labels"][LABEL] == "pd-0"
    assert "scheduling.k8s.io/group-name" not in cosched["metadata"]["annotations"]
    # Not a gang: no marks, and a schedulerName other than volcano stands.
    plain = _mi()
    del plain["spec"]["template"]["gangSchedule"]
    plain["spec"]["schedulerName"] = "default-scheduler"
    pod = build_pod(plain, roles, 0, "decode", 1, 1, "r1", COSCHEDULING)
    assert pod["spec"]["schedulerName"] == "default-scheduler" and LABEL not in pod["metadata"]["labels"]


def test_a_multinode_replica_is_a_leaderworkerset_and_a_podgroup_of_the_chosen_api() -> None:
    dcd = worker(nodes=2, replicas=1)
    dcd["metadata"]["uid"] = "u-2"
    children = desired_children(ChildrenInput(dcd, gang=COSCHEDULING)).children
    (group,) = [c for c in children if c["kind"] == "PodGroup"]
    (lws,) = [c for c in children if c["kind"] == "LeaderWorkerSet"]
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and group["spec"]["minMember"] == 2
    for role in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][role]
        assert template["metadata"]["labels"][LABEL] == "dec-0"
        assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"


def test_the_option_is_one_of_the_two_schedulers() -> None:
    assert GangOptions().backend() is VOLCANO
    assert GangOptions(GangScheduler.COSCHEDULING).backend() is COSCHEDULING
    assert backend_of(GangScheduler.COSCHEDULING, "gang").scheduler_name == "gang"
    with pytest.raises(Exception, match="--gang-scheduler: 'kai' is not one of volcano, coscheduling"):
        options_from_flags({"gang_scheduler": "kai"})


GAP = (
    "0/9 nodes are available: resource gap: map[amd.com/gpu:{{6 0} {<nil>}  DecimalSI}]. no new claims to "
    "deallocate, preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling., PodGroup "
    "serving/pd-0 gets rejected due to Pod pd-0-decode-0-1 is unschedulable even after PostFilter"
)


def _member(name: str, message: str) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {
        "metadata": {"name": name, "labels": {LABEL: "pd-0"}},
        "spec": {},
        "status": {"phase": "Pending", "conditions": [condition]},
    }


def test_the_coscheduling_schedulers_words_are_one_cause_per_gang() -> None:
    podgroup = {"metadata": {"name": "pd-0"}, "spec": {"minMember": 2, "minResources": {"amd.com/gpu": "48"}}}
    held = causes.collect([_member("a", GAP), _member("b", GAP)], podgroups=[podgroup])
    assert [(h.cause.message, h.pods) for h in held] == [
        (
            "PodGroup pd-0: 0/9 nodes are available: resource gap: amd.com/gpu 6 (the gang needs amd.com/gpu 48)",
            ("a", "b"),
        )
    ]
    forming = (
        "0/9 nodes are available: pre-filter pod a cannot find enough sibling pods, current pods number: 1"
    )
    assert causes.collect([_member("a", forming)]) == ()  # still being created: not a cause


def test_the_gang_scheduler_runs_beside_kube_scheduler_with_its_own_profile(tmp_path: Path) -> None:
    config = coscheduling_config(tmp_path / "kc")
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "scheduler-plugins-scheduler"
    assert profile["plugins"]["queueSort"] == {
        "enabled": [{"name": "Coscheduling"}],
        "disabled": [{"name": "*"}],
    }
    fit = next(p for p in profile["pluginConfig"] if p["name"] == "NodeResourcesFit")
    assert fit["args"]["scoringStrategy"]["type"] == "MostAllocated"
    source = tmp_path / "built"
    (source / "scheduler-plugins" / "crds").mkdir(parents=True)
    (source / "scheduler-plugins" / "crds" / "pg.yaml").write_text(
        yaml.safe_dump(
            {"kind": "CustomResourceDefinition", "metadata": {"name": "podgroups.scheduling.x-k8s.io"}}
        )
    )
    state = tmp_path / "state"
    (state / "kubeconfig").mkdir(parents=True)
    keys = pki.generate(state / "pki")
    plan = nb.prepare(("coscheduling",), source, state, keys, "https://127.0.0.1:6443")
    assert [p.name for p in plan.processes] == ["scheduler-plugins", "scheduler-plugins-controller"]
    assert plan.crd_names() == ["podgroups.scheduling.x-k8s.io"] and plan.webhooks == []
    scheduler = plan.processes[0]
    assert "--pod-max-in-unschedulable-pods-duration=30s" in scheduler.argv
    assert scheduler.webhook_port is None and scheduler.health_ca == keys.path("ca.crt")

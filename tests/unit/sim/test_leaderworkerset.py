"""The pure parts of the simulated LeaderWorkerSet controller: names, labels, the webhook's env, status."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.sim.agents import leaderworkerset as lwsmod
from aiplane.sim.agents.leaderworkerset import Group

Obj = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"


def lws(size: int = 3, replicas: int = 2, **spec: Any) -> Obj:
    worker = {
        "metadata": {"labels": {"app": "w"}, "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}]},
    }
    return {
        "apiVersion": lwsmod.API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "ns", "uid": "u-lws", "generation": 3},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size, "workerTemplate": worker},
            **spec,
        },
    }


def env(pod: Obj) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_leader_is_named_after_its_group_and_carries_lws_labels_and_env() -> None:
    pod = lwsmod.leader_pod(lws(), 1, "rev")
    meta = pod["metadata"]
    assert meta["name"] == "vllm-1"
    assert meta["labels"] == {
        "app": "w",
        "leaderworkerset.sigs.k8s.io/name": "vllm",
        "leaderworkerset.sigs.k8s.io/group-index": "1",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "leaderworkerset.sigs.k8s.io/group-key": hashlib.sha1(b"ns/vllm-1").hexdigest(),
        "leaderworkerset.sigs.k8s.io/template-revision-hash": "rev",
        "statefulset.kubernetes.io/pod-name": "vllm-1",
        "apps.kubernetes.io/pod-index": "1",
    }
    assert meta["annotations"] == {"a": "b", "leaderworkerset.sigs.k8s.io/size": "3"}
    assert meta["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    assert pod["spec"]["hostname"] == "vllm-1" and pod["spec"]["subdomain"] == "vllm"
    names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
    assert names == ["LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX", "A"]
    assert env(pod) == {
        "LWS_LEADER_ADDRESS": "vllm-1.vllm.ns",
        "LWS_GROUP_SIZE": "3",
        "LWS_WORKER_INDEX": "0",
        "A": "1",
    }


def test_workers_share_the_group_key_and_leader_revision() -> None:
    leader = lwsmod.leader_pod(lws(), 0, "rev")
    leader["metadata"]["uid"] = "u-leader"
    worker = lwsmod.worker_pod(lws(), leader, 2)
    labels = worker["metadata"]["labels"]
    assert worker["metadata"]["name"] == "vllm-0-2"
    assert labels[lwsmod.WORKER_INDEX_LABEL] == "2"
    assert labels[lwsmod.GROUP_KEY_LABEL] == leader["metadata"]["labels"][lwsmod.GROUP_KEY_LABEL]
    assert labels[lwsmod.REVISION_LABEL] == "rev"
    assert worker["metadata"]["annotations"][lwsmod.LEADER_NAME_ANNOTATION] == "vllm-0"
    assert worker["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "vllm-0",
        "uid": "u-leader",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert env(worker)["LWS_LEADER_ADDRESS"] == "vllm-0.vllm.ns"
    assert env(worker)["LWS_WORKER_INDEX"] == "2"


def test_leader_template_wins_for_the_leader_only() -> None:
    obj = lws()
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "spec": {
            "containers": [{"name": "l", "image": "leader"}],
            "initContainers": [{"name": "i", "image": "i"}],
        }
    }
    leader = lwsmod.leader_pod(obj, 0, "r")
    assert leader["spec"]["containers"][0]["image"] == "leader"
    assert leader["spec"]["initContainers"][0]["env"][0]["name"] == "LWS_LEADER_ADDRESS"
    assert lwsmod.worker_pod(obj, leader, 1)["spec"]["containers"][0]["image"] == "x"


def test_user_env_of_the_same_name_is_replaced() -> None:
    out = lwsmod.inject_env([{"name": "c", "env": [{"name": "LWS_GROUP_SIZE", "value": "9"}]}], "a", 4, 1)
    assert out[0]["env"] == [
        {"name": "LWS_LEADER_ADDRESS", "value": "a"},
        {"name": "LWS_GROUP_SIZE", "value": "4"},
        {"name": "LWS_WORKER_INDEX", "value": "1"},
    ]


def test_unique_per_replica_subdomain_and_service() -> None:
    obj = lws(networkConfig={"subdomainPolicy": "UniquePerReplica"})
    leader = lwsmod.leader_pod(obj, 1, "r")
    assert leader["spec"]["subdomain"] == "vllm-1"
    assert env(leader)["LWS_LEADER_ADDRESS"] == "vllm-1.vllm-1.ns"
    svc = lwsmod.headless_service(obj, leader)
    assert svc["metadata"]["name"] == "vllm-1"
    assert svc["spec"]["selector"] == {lwsmod.NAME_LABEL: "vllm", lwsmod.GROUP_INDEX_LABEL: "1"}


def test_the_shared_headless_service() -> None:
    svc = lwsmod.headless_service(lws())
    assert svc["metadata"]["name"] == "vllm"
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {lwsmod.NAME_LABEL: "vllm"},
        "publishNotReadyAddresses": True,
    }


def test_the_revision_follows_the_template_not_the_replicas() -> None:
    assert lwsmod.revision_key(lws(replicas=1)) == lwsmod.revision_key(lws(replicas=5))
    assert lwsmod.revision_key(lws(size=2)) != lwsmod.revision_key(lws(size=3))


def ready(pod: Obj) -> Obj:
    return {**pod, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def group(obj: Obj, index: int, revision: str = "r", *, up: bool = True) -> Group:
    leader = lwsmod.leader_pod(obj, index, revision)
    workers = [lwsmod.worker_pod(obj, leader, j) for j in range(1, lwsmod.size(obj))]
    if up:
        leader, workers = ready(leader), [ready(w) for w in workers]
    return Group(index, leader, workers, started=True)


def conditions(status: Obj) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_status_available_when_every_group_is_ready() -> None:
    obj = lws(size=2, replicas=2)
    status = lwsmod.lws_status(obj, [group(obj, 0), group(obj, 1)], "r", NOW)
    assert status["readyReplicas"] == 2 and status["updatedReplicas"] == 2 and status["replicas"] == 2
    assert (
        status["hpaPodSelector"]
        == "leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/worker-index=0"
    )
    assert status["observedGeneration"] == 3
    assert conditions(status) == {"Available": "True"}
    assert status["conditions"][0]["reason"] == "AllGroupsReady"
    # one group down: Progressing True, Available turned False
    down = lwsmod.lws_status({**obj, "status": status}, [group(obj, 0), group(obj, 1, up=False)], "r", NOW)
    assert conditions(down) == {"Available": "False", "Progressing": "True"}
    assert down["readyReplicas"] == 1
    # and the same state again changes nothing (no write at steady state)
    assert (
        lwsmod.lws_status({**obj, "status": down}, [group(obj, 0), group(obj, 1, up=False)], "r", "later")
        == down
    )


def test_status_update_in_progress_while_groups_are_outdated() -> None:
    obj = lws(size=2, replicas=2)
    status = lwsmod.lws_status(obj, [group(obj, 0, "old"), group(obj, 1)], "r", NOW)
    assert conditions(status) == {"UpdateInProgress": "True", "Progressing": "True"}
    assert status["updatedReplicas"] == 1


@given(st.lists(st.sampled_from(["Available", "Progressing", "UpdateInProgress"]), max_size=12))
def test_available_is_never_true_with_progressing_or_updating(sequence: list[str]) -> None:
    """Whatever order the conditions are set in, Available excludes the two others (setCondition)."""
    conds: list[Obj] = []
    for kind in sequence:
        reason, message = lwsmod.CONDITIONS[kind]
        new = {"type": kind, "status": "True", "observedGeneration": 1, "reason": reason, "message": message}
        lwsmod.set_condition(conds, new, NOW)
        true = {c["type"] for c in conds if c["status"] == "True"}
        assert kind in true
        assert not ("Available" in true and true & {"Progressing", "UpdateInProgress"})
        assert len({c["type"] for c in conds}) == len(conds)

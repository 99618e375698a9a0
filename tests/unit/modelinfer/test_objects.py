"""Pods, Services and PodGroups of a ModelInfer (reference §3 and §4, with our documented fixes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.apimachinery.quantity import Quantity
from aiplane.apimachinery.selectors import parse_selector, selector_matches
from aiplane.controllers.modelinfer import naming as n
from aiplane.controllers.modelinfer.objects import (
    build_pod,
    build_podgroup,
    build_service,
    effective_requests,
    entry_selector,
    expected_pod_count,
    expected_pod_names,
    find_role,
    label_selector,
    min_role_replicas,
    owner_reference,
    podgroup_needs_update,
    role_has_service,
    role_replica_pod_names,
    role_replica_size,
    topology_spread_constraints,
    updated_podgroup,
    worker_count,
)
from aiplane.controllers.modelinfer.revision import controller_revision, revision_hash
from aiplane.kube.resources import CONTROLLERREVISIONS, PODGROUPS, PODS, SERVICES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from tests.unit.modelinfer import container, model_infer, role, template

REV = "abcdfghjkl"
OWNER = {
    "apiVersion": "workload.volcano.sh/v1alpha1",
    "kind": "ModelInfer",
    "name": "mi",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def all_pods(
    mi: dict[str, Any], ordinal: int, roles: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    roles = roles if roles is not None else mi["spec"]["template"]["roles"]
    return [
        build_pod(mi, roles, ordinal, r["name"], i, k, REV)
        for r in roles
        for i in range(r.get("replicas", 1))
        for k in range(role_replica_size(r))
    ]


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c["env"]}


# --- pods ----------------------------------------------------------------------------------------


def test_entry_pod_metadata() -> None:
    mi = model_infer()
    pod = build_pod(mi, mi["spec"]["template"]["roles"], 1, "decode", 1, 0, REV)
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert pod["metadata"]["name"] == "mi-1-decode-1-0"
    assert pod["metadata"]["namespace"] == "default"
    assert pod["metadata"]["labels"] == {
        n.LABEL_NAME: "mi",
        n.LABEL_GROUP_NAME: "mi-1",
        n.LABEL_ROLE: "decode",
        n.LABEL_ROLE_ID: "decode-1",
        n.LABEL_REVISION: REV,
        n.LABEL_ENTRY: "true",
    }
    assert pod["metadata"]["annotations"] == {}  # always initialised
    assert pod["metadata"]["ownerReferences"] == [OWNER]


def test_workers_have_no_entry_label() -> None:
    mi = model_infer()
    pod = build_pod(mi, mi["spec"]["template"]["roles"], 0, "decode", 0, 1, REV)
    assert pod["metadata"]["name"] == "mi-0-decode-0-1"
    assert n.LABEL_ENTRY not in pod["metadata"]["labels"]
    assert pod["spec"]["containers"][0]["name"] == "worker"  # from the workerTemplate


def test_template_metadata_is_merged_but_controller_labels_win() -> None:
    entry = template(labels={"app": "x", n.LABEL_GROUP_NAME: "hijack", n.LABEL_REVISION: "old"})
    entry["metadata"]["annotations"] = {"note": "kept", n.ANNOTATION_GROUP_NAME: "hijack"}
    mi = model_infer(roles=[role("r", entry=entry)], gang={})
    pod = build_pod(mi, mi["spec"]["template"]["roles"], 0, "r", 0, 0, REV)
    assert pod["metadata"]["labels"]["app"] == "x"
    assert pod["metadata"]["labels"][n.LABEL_GROUP_NAME] == "mi-0"
    assert pod["metadata"]["labels"][n.LABEL_REVISION] == REV
    assert pod["metadata"]["annotations"] == {
        "note": "kept",
        n.ANNOTATION_GROUP_NAME: "mi-0",
        n.ANNOTATION_TASK_SPEC: "r-0",
    }


def test_gang_annotations_only_with_gang_schedule() -> None:
    without = model_infer()
    pod = build_pod(without, without["spec"]["template"]["roles"], 0, "prefill", 0, 1, REV)
    assert n.ANNOTATION_GROUP_NAME not in pod["metadata"]["annotations"]
    with_gang = model_infer(gang={"minRoleReplicas": {"decode": 1}})
    pod = build_pod(with_gang, with_gang["spec"]["template"]["roles"], 3, "decode", 1, 1, REV)
    assert pod["metadata"]["annotations"] == {
        n.ANNOTATION_GROUP_NAME: "mi-3",
        n.ANNOTATION_TASK_SPEC: "decode-1",
    }


def test_spec_is_a_deep_copy_with_the_scheduler_name() -> None:
    mi = model_infer(schedulerName="volcano")
    roles = mi["spec"]["template"]["roles"]
    before = copy.deepcopy(mi)
    pod = build_pod(mi, roles, 0, "prefill", 0, 0, REV)
    assert pod["spec"]["schedulerName"] == "volcano"
    pod["spec"]["containers"][0]["image"] = "mutated"
    pod["metadata"]["labels"]["x"] = "y"
    assert mi == before
    mi_no = model_infer()
    mi_no["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["schedulerName"] = "custom"
    assert build_pod(mi_no, mi_no["spec"]["template"]["roles"], 0, "prefill", 0, 0, REV)["spec"][
        "schedulerName"
    ] == ("custom")


def test_env_is_prepended_to_every_container_and_replaces_user_vars() -> None:
    user_env: list[dict[str, Any]] = [
        {"name": "A", "value": "1"},
        {"name": "ENTRY_ADDRESS", "value": "user-value"},
        {"name": "URL", "value": "http://$(ENTRY_ADDRESS):8000"},
        {"name": "WORKER_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    entry = template(container("a", env=user_env), container("b"), initContainers=[container("init", env=[])])
    worker = template(container("w", env=copy.deepcopy(user_env)))
    mi = model_infer(namespace="team-a", roles=[role("decode", 2, 3, entry=entry, worker=worker)])
    roles = mi["spec"]["template"]["roles"]
    pod = build_pod(mi, roles, 0, "decode", 1, 0, REV)
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert [e["name"] for e in c["env"][:3]] == ["GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX"]
        assert env_of(c)["GROUP_SIZE"] == "4"  # one role replica: entry + 3 workers
        assert env_of(c)["ENTRY_ADDRESS"] == "mi-0-decode-1-0.team-a"
        assert env_of(c)["WORKER_INDEX"] == "0"
    a = pod["spec"]["containers"][0]
    assert [e["name"] for e in a["env"]] == ["GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX", "A", "URL"]
    # The user var referring to $(ENTRY_ADDRESS) comes after it, so kube expands it.
    names = [e["name"] for e in a["env"]]
    assert names.index("ENTRY_ADDRESS") < names.index("URL")
    w = build_pod(mi, roles, 0, "decode", 1, 2, REV)["spec"]["containers"][0]
    assert env_of(w)["WORKER_INDEX"] == "2" and env_of(w)["ENTRY_ADDRESS"] == "mi-0-decode-1-0.team-a"
    assert roles[0]["entryTemplate"]["spec"]["containers"][0]["env"] == user_env  # input untouched


def test_build_pod_rejects_what_the_role_does_not_have() -> None:
    mi = model_infer(roles=[role("solo", 1, 0), {**role("broken"), "workerReplicas": 2}])
    roles = mi["spec"]["template"]["roles"]
    with pytest.raises(KeyError):
        build_pod(mi, roles, 0, "nope", 0, 0, REV)
    with pytest.raises(ValueError, match="indices"):
        build_pod(mi, roles, 0, "solo", 0, 1, REV)
    with pytest.raises(ValueError, match="indices"):  # workerReplicas without workerTemplate: no workers
        build_pod(mi, roles, 0, "broken", 0, 1, REV)
    with pytest.raises(ValueError, match="uid"):
        no_uid = model_infer()
        del no_uid["metadata"]["uid"]
        build_pod(no_uid, no_uid["spec"]["template"]["roles"], 0, "prefill", 0, 0, REV)


def test_roles_of_an_old_revision_are_used() -> None:
    mi = model_infer(roles=[role("r", 1, 0, entry=template(container(image="new")))])
    old_roles = [role("r", 1, 1, entry=template(container(image="old")))]
    pod = build_pod(mi, old_roles, 0, "r", 0, 0, "oldrev")
    assert pod["spec"]["containers"][0]["image"] == "old"
    assert env_of(pod["spec"]["containers"][0])["GROUP_SIZE"] == "2"
    assert pod["metadata"]["labels"][n.LABEL_REVISION] == "oldrev"


def test_worker_count_and_services() -> None:
    assert worker_count(role("a", 1, 2)) == 2 and role_has_service(role("a", 1, 2))
    assert worker_count(role("a", 1, 0, worker=template())) == 0 and not role_has_service(role("a", 1, 0))
    no_template = {**role("a"), "workerReplicas": 3}
    assert (
        worker_count(no_template) == 0
        and role_replica_size(no_template) == 1
        and not role_has_service(no_template)
    )


def test_expected_pod_names() -> None:
    roles = [role("p", 1, 1), role("d", 2, 0), {**role("x"), "replicas": 0}]
    assert expected_pod_names("mi", 4, roles) == ["mi-4-p-0-0", "mi-4-p-0-1", "mi-4-d-0-0", "mi-4-d-1-0"]
    assert expected_pod_count(roles) == 4
    assert role_replica_pod_names("mi", 0, roles[0], 3) == ["mi-0-p-3-0", "mi-0-p-3-1"]
    assert find_role(roles, "d") is roles[1]


def test_label_selector_selects_one_pod_per_group() -> None:
    mi = model_infer(replicas=3)
    text = label_selector(mi)
    assert text == (
        "modelinfer.volcano.sh/name=mi,modelinfer.volcano.sh/entry=true,modelinfer.volcano.sh/role-id=prefill-0"
    )
    selector = parse_selector(text)
    chosen = [
        p["metadata"]["name"]
        for g in range(3)
        for p in all_pods(mi, g)
        if selector.matches(p["metadata"]["labels"])
    ]
    assert chosen == ["mi-0-prefill-0-0", "mi-1-prefill-0-0", "mi-2-prefill-0-0"]


# --- topology spread -----------------------------------------------------------------------------


def test_topology_spread_goes_on_entry_pods_and_selects_same_role_id_entries() -> None:
    mi = model_infer(replicas=3, topologySpreadConstraints=[{"topologyKey": "topology.kubernetes.io/zone"}])
    roles = mi["spec"]["template"]["roles"]
    entry = build_pod(mi, roles, 0, "decode", 1, 0, REV)
    (tsc,) = entry["spec"]["topologySpreadConstraints"]
    assert tsc == {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {
            "matchLabels": {n.LABEL_NAME: "mi", n.LABEL_ROLE_ID: "decode-1", n.LABEL_ENTRY: "true"}
        },
    }
    worker = build_pod(mi, roles, 0, "decode", 1, 1, REV)
    assert "topologySpreadConstraints" not in worker["spec"]
    others = [p for g in range(3) for p in all_pods(mi, g)]
    others.append(build_pod(model_infer("other"), roles, 0, "decode", 1, 0, REV))
    selected = [
        p["metadata"]["name"]
        for p in others
        if selector_matches(tsc["labelSelector"], p["metadata"]["labels"])
    ]
    assert selected == ["mi-0-decode-1-0", "mi-1-decode-1-0", "mi-2-decode-1-0"]


def test_topology_spread_user_selector_is_anded() -> None:
    user = {
        "matchLabels": {"tier": "gold", n.LABEL_ROLE_ID: "other-0"},
        "matchExpressions": [{"key": "zone", "operator": "Exists"}],
    }
    mi = model_infer(
        topologySpreadConstraints=[
            {
                "topologyKey": "kubernetes.io/hostname",
                "maxSkew": 2,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": user,
            }
        ]
    )
    (tsc,) = topology_spread_constraints(mi, "prefill", 0)
    assert tsc["maxSkew"] == 2 and tsc["whenUnsatisfiable"] == "ScheduleAnyway"
    assert tsc["labelSelector"] == {
        "matchLabels": {
            n.LABEL_NAME: "mi",
            n.LABEL_ROLE_ID: "prefill-0",
            n.LABEL_ENTRY: "true",
            "tier": "gold",
        },
        "matchExpressions": [
            {"key": n.LABEL_ROLE_ID, "operator": "In", "values": ["other-0"]},
            {"key": "zone", "operator": "Exists"},
        ],
    }


def test_topology_spread_template_wins_and_duplicates_are_dropped() -> None:
    own = {"maxSkew": 3, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
    entry = template(topologySpreadConstraints=[own])
    mi = model_infer(
        roles=[role("r", entry=entry)],
        topologySpreadConstraints=[
            {"topologyKey": "zone"},
            {"topologyKey": "host"},
            {"topologyKey": "host", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 1},
        ],
    )
    pod = build_pod(mi, mi["spec"]["template"]["roles"], 0, "r", 0, 0, REV)
    assert [c["topologyKey"] for c in pod["spec"]["topologySpreadConstraints"]] == ["zone", "host"]
    assert pod["spec"]["topologySpreadConstraints"][0] == own


# --- services ------------------------------------------------------------------------------------


def test_service_is_headless_and_selects_only_its_entry_pod() -> None:
    mi = model_infer(replicas=2)
    svc = build_service(mi, 1, "decode", 1)
    assert svc["metadata"]["name"] == "mi-1-decode-1-0"
    assert svc["metadata"]["namespace"] == "default"
    assert svc["metadata"]["labels"] == {
        n.LABEL_NAME: "mi",
        n.LABEL_GROUP_NAME: "mi-1",
        n.LABEL_ROLE: "decode",
        n.LABEL_ROLE_ID: "decode-1",
    }
    assert svc["metadata"]["ownerReferences"] == [OWNER]
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": entry_selector("mi", 1, "decode", 1),
    }
    pods = all_pods(mi, 0) + all_pods(mi, 1)
    selected = [
        p["metadata"]["name"]
        for p in pods
        if all(p["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items())
    ]
    assert selected == ["mi-1-decode-1-0"]
    assert build_service(mi, 0, "p", 0, revision=REV)["metadata"]["labels"][n.LABEL_REVISION] == REV


# --- PodGroups -----------------------------------------------------------------------------------


def test_no_podgroup_without_gang_schedule() -> None:
    mi = model_infer()
    assert build_podgroup(mi, 0, mi["spec"]["template"]["roles"]) is None


def test_podgroup_maths() -> None:
    prefill = role(
        "prefill",
        2,
        1,
        entry=template(
            container(requests={"cpu": "500m", "memory": "1Gi"}),
            initContainers=[container(requests={"cpu": "9"})],
        ),
        worker=template(
            container(requests={"cpu": 1, "memory": "512Mi"}, limits={"cpu": "4", "amd.com/gpu": "8"})
        ),
    )
    decode = role("decode", 3, 0, entry=template(container(requests={"cpu": "250m"})))
    mi = model_infer(
        roles=[prefill, decode],
        gang={
            "minRoleReplicas": {"prefill": 1, "decode": 5},
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        },
        namespace="ns",
    )
    mi["metadata"]["annotations"] = {n.ANNOTATION_QUEUE_NAME: "gold"}
    pg = build_podgroup(mi, 2, mi["spec"]["template"]["roles"])
    assert pg is not None
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pg["kind"] == "PodGroup"
    assert pg["metadata"]["name"] == "mi-2" and pg["metadata"]["namespace"] == "ns"
    assert pg["metadata"]["labels"] == {n.LABEL_NAME: "mi", n.LABEL_GROUP_NAME: "mi-2"}
    assert pg["metadata"]["annotations"] == {n.ANNOTATION_GROUP_NAME: "mi-2"}
    assert pg["metadata"]["ownerReferences"] == [
        {k: v for k, v in OWNER.items() if k != "blockOwnerDeletion"}
    ]
    spec = pg["spec"]
    # prefill: min 1 of 2 replicas, 2 pods each; decode: min 5 capped at its 3 replicas, 1 pod each.
    assert spec["minTaskMember"] == {"prefill-0": 2, "decode-0": 1, "decode-1": 1, "decode-2": 1}
    assert spec["minMember"] == 5
    # cpu: 500m (prefill entry; init containers excluded) + 1 (worker) + 3 x 250m = 2250m;
    # memory: 1Gi + 512Mi; amd.com/gpu: the worker's limit stands in for its missing request.
    assert spec["minResources"] == {"amd.com/gpu": "8", "cpu": "2250m", "memory": "1536Mi"}
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["queue"] == "gold"


def test_podgroup_mixed_units() -> None:
    r = role(
        "r",
        1,
        1,
        entry=template(container(requests={"cpu": "500m"})),
        worker=template(container(requests={"cpu": "1"})),
    )
    mi = model_infer(roles=[r], gang={})
    pg = build_podgroup(mi, 0, [r])
    assert pg is not None
    assert pg["spec"] == {"minMember": 2, "minTaskMember": {"r-0": 2}, "minResources": {"cpu": "1500m"}}


def test_min_role_replicas() -> None:
    mi = model_infer(gang={"minRoleReplicas": {"a": 0, "b": 9, "c": -1}})
    assert min_role_replicas(mi, role("a", 3)) == 0
    assert min_role_replicas(mi, role("b", 3)) == 3
    assert min_role_replicas(mi, role("c", 3)) == 0
    assert min_role_replicas(mi, role("d", 2)) == 2
    assert min_role_replicas(model_infer(), role("d", 2)) == 2


def test_effective_requests() -> None:
    spec = template(
        container(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"}),
        container(limits={"memory": "1Gi"}),
    )["spec"]
    assert effective_requests(spec) == {"cpu": Quantity("1"), "memory": Quantity("2Gi")}
    assert effective_requests(None) == {}


def _pg(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "mi-0", "resourceVersion": "7"},
        "spec": spec,
        "status": {"phase": "Running"},
    }


def test_podgroup_needs_update() -> None:
    desired = _pg(minMember=2, minTaskMember={"r-0": 2}, minResources={"cpu": "1500m", "memory": "1Gi"})
    same_value = _pg(
        minMember=2,
        minTaskMember={"r-0": 2},
        minResources={"cpu": "1.5", "memory": "1024Mi"},
        queue="default",
    )
    assert not podgroup_needs_update(same_value, desired)  # Volcano's default queue is not drift
    assert podgroup_needs_update(
        _pg(minMember=3, minTaskMember={"r-0": 2}, minResources=desired["spec"]["minResources"]), desired
    )
    assert podgroup_needs_update(
        _pg(minMember=2, minTaskMember={"r-0": 1}, minResources=desired["spec"]["minResources"]), desired
    )
    assert podgroup_needs_update(
        _pg(minMember=2, minTaskMember={"r-0": 2}, minResources={"cpu": "1"}), desired
    )
    assert podgroup_needs_update(
        _pg(minMember=2, minTaskMember={"r-0": 2}, minResources={"cpu": "x"}), desired
    )
    topo = {**desired, "spec": {**desired["spec"], "networkTopology": {"mode": "soft"}}}
    assert podgroup_needs_update(desired, topo) and podgroup_needs_update(topo, desired)
    queued = {**desired, "spec": {**desired["spec"], "queue": "gold"}}
    assert podgroup_needs_update(same_value, queued)
    assert not podgroup_needs_update(_pg(), _pg(minResources={}))


def test_updated_podgroup_keeps_what_we_do_not_own() -> None:
    observed = _pg(minMember=1, networkTopology={"mode": "hard"}, queue="default", extra=1)
    observed["metadata"]["labels"] = {"keep": "me"}
    desired = _pg(minMember=4, minTaskMember={"a-0": 4}, queue="gold")
    desired["metadata"]["labels"] = {n.LABEL_NAME: "mi"}
    out = updated_podgroup(observed, desired)
    assert out["metadata"]["resourceVersion"] == "7" and out["status"] == {"phase": "Running"}
    assert out["metadata"]["labels"] == {"keep": "me", n.LABEL_NAME: "mi"}
    assert out["spec"] == {"minMember": 4, "minTaskMember": {"a-0": 4}, "queue": "gold", "extra": 1}
    assert not podgroup_needs_update(out, desired)
    assert observed["spec"]["minMember"] == 1


def test_owner_reference() -> None:
    assert owner_reference(model_infer()) == OWNER
    assert "blockOwnerDeletion" not in owner_reference(model_infer(), block_owner_deletion=False)
    bare = model_infer()
    del bare["apiVersion"], bare["kind"]  # list items may lack them
    assert owner_reference(bare) == OWNER


# --- properties ----------------------------------------------------------------------------------

_QTY = st.sampled_from(["100m", "1", "2", "500m", "1Gi", "512Mi", "3", "1.5"])
_RES = st.dictionaries(st.sampled_from(["cpu", "memory", "amd.com/gpu"]), _QTY, max_size=3)


@st.composite
def _roles(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.from_regex(r"[a-z]{1,5}", fullmatch=True), min_size=1, max_size=4, unique=True))
    out = []
    for name in names:
        entry = template(container(requests=draw(_RES), limits=draw(st.none() | _RES)))
        worker = template(container("w", requests=draw(_RES)))
        workers = draw(st.integers(0, 3))
        out.append(role(name, draw(st.integers(0, 4)), workers, entry=entry, worker=worker))
    return out


@settings(max_examples=150)
@given(roles=_roles(), data=st.data())
def test_podgroup_totals_are_consistent(roles: list[dict[str, Any]], data: st.DataObject) -> None:
    mins = data.draw(st.dictionaries(st.sampled_from([r["name"] for r in roles]), st.integers(0, 6)))
    mi = model_infer(roles=roles, gang={"minRoleReplicas": mins})
    pg = build_podgroup(mi, 0, roles)
    assert pg is not None
    spec = pg["spec"]
    assert spec["minMember"] == sum(spec["minTaskMember"].values())
    assert spec["minMember"] <= expected_pod_count(roles)
    # minResources is the effective request of exactly the counted pods, built one by one.
    counted = [
        build_pod(mi, roles, 0, r["name"], i, k, REV)
        for r in roles
        for i in range(min_role_replicas(mi, r))
        for k in range(role_replica_size(r))
    ]
    assert len(counted) == spec["minMember"]
    total: dict[str, Quantity] = {}
    for pod in counted:
        for res, q in effective_requests(pod["spec"]).items():
            total[res] = total[res] + q if res in total else q
    assert {k: Quantity(v) for k, v in spec.get("minResources", {}).items()} == {
        k: v for k, v in total.items()
    }


@settings(max_examples=100)
@given(roles=_roles(), ordinal=st.integers(0, 20))
def test_expected_pods_are_the_built_pods(roles: list[dict[str, Any]], ordinal: int) -> None:
    mi = model_infer(roles=roles)
    built = [p["metadata"]["name"] for p in all_pods(mi, ordinal, roles)]
    assert built == expected_pod_names("mi", ordinal, roles)
    assert len(built) == expected_pod_count(roles) == len(set(built))


# --- the embedded API server accepts every object ------------------------------------------------

EXAMPLE = yaml.safe_load(
    (
        __import__("pathlib").Path(__file__).resolve().parents[3] / "examples" / "modelinfer-1p2d.yaml"
    ).read_text()
)


async def test_the_api_server_accepts_every_object() -> None:
    client = InMemoryKubeClient.fresh()
    try:
        mis = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")
        body = copy.deepcopy(EXAMPLE)
        body["metadata"]["namespace"] = "default"
        body["metadata"]["annotations"] = {n.ANNOTATION_QUEUE_NAME: "default"}
        body["spec"]["template"]["gangSchedule"]["networkTopology"] = {"mode": "soft"}
        body["spec"]["topologySpreadConstraints"] = [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"tier": "gold"}}}
        ]
        mi = await client.create(mis, body)  # the CRD defaults and validates it
        roles = mi["spec"]["template"]["roles"]
        rev = revision_hash(roles)
        await client.create(CONTROLLERREVISIONS, controller_revision(mi, rev, roles, 1))
        name = mi["metadata"]["name"]
        for g in range(mi["spec"]["replicas"]):
            pg = build_podgroup(mi, g, roles)
            assert pg is not None
            await client.create(PODGROUPS, pg)
            for r in roles:
                for i in range(r["replicas"]):
                    if role_has_service(r):
                        await client.create(SERVICES, build_service(mi, g, r["name"], i, revision=rev))
                    for k in range(role_replica_size(r)):
                        await client.create(PODS, build_pod(mi, roles, g, r["name"], i, k, rev))
        pods = (await client.list(PODS, "default", label_selector=f"{n.LABEL_NAME}={name}"))["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(
            x for g in range(mi["spec"]["replicas"]) for x in expected_pod_names(name, g, roles)
        )
        entries = (await client.list(PODS, "default", label_selector=label_selector(mi)))["items"]
        assert len(entries) == mi["spec"]["replicas"]
        svcs = (await client.list(SERVICES, "default", label_selector=f"{n.LABEL_NAME}={name}"))["items"]
        assert len(svcs) == 2 * 3 and all(s["spec"]["clusterIP"] == "None" for s in svcs)
        pgs = (await client.list(PODGROUPS, "default"))["items"]
        assert [p["spec"]["minMember"] for p in pgs] == [6, 6]
        assert (await client.get(CONTROLLERREVISIONS, f"{name}-{rev}", "default"))["revision"] == 1
    finally:
        await client.close()

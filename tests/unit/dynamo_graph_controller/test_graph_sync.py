"""What the DGD controller writes: DCD creates/updates (who owns replicas), PVCs, the planner account."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.controllers.dynamo.graph import desired_dcds
from aiplane.controllers.dynamo.graph_decide import ANNOTATION_LAST_APPLIED_HASH
from aiplane.controllers.dynamo.graph_sync import (
    dcd_hash,
    needs_planner_account,
    plan_dcd,
    plan_pvcs,
    planner_service_account,
    wanted_dcd,
)

UID = "dgd-uid"


def dgd(services: dict[str, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": "ns", "uid": UID},
        "spec": {"services": services, **spec},
    }


def live(body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``body`` as the API server would hold it after our create (plus server fields)."""
    obj = copy.deepcopy(body)
    obj["metadata"].update(resourceVersion="7", generation=1, uid="dcd-uid")
    obj["spec"].update(spec)
    obj["status"] = {"replicas": 1}
    return obj


def one(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (body,) = desired_dcds(dgd(services)).values()
    return body


def test_create_carries_the_hash_of_labels_and_spec() -> None:
    body = one({"W": {"replicas": 2}})
    write = plan_dcd(body, None, UID)
    assert write is not None and write.verb == "create"
    assert write.body["metadata"]["annotations"][ANNOTATION_LAST_APPLIED_HASH] == dcd_hash(body)
    assert "annotations" not in body["metadata"], "the desired body is not modified"


def test_a_converged_dcd_is_not_written_even_with_server_defaults() -> None:
    body = one({"W": {"replicas": 2}})
    created = plan_dcd(body, None, UID)
    assert created is not None
    assert plan_dcd(body, live(created.body, defaultedByServer=True), UID) is None


def test_a_changed_service_updates_the_dcd_keeping_server_fields() -> None:
    old = plan_dcd(one({"W": {"replicas": 2}}), None, UID)
    assert old is not None
    new_body = one({"W": {"replicas": 2, "envs": [{"name": "A", "value": "1"}]}})
    write = plan_dcd(new_body, live(old.body), UID)
    assert write is not None and write.verb == "update" and write.overrode_replicas is None
    assert write.body["spec"]["envs"] == [{"name": "A", "value": "1"}]
    assert write.body["metadata"]["resourceVersion"] == "7" and "status" not in write.body
    assert write.body["metadata"]["annotations"][ANNOTATION_LAST_APPLIED_HASH] == dcd_hash(new_body)


def test_graph_replicas_win_over_a_direct_scale_and_say_so() -> None:
    body = one({"W": {"replicas": 2}})
    created = plan_dcd(body, None, UID)
    assert created is not None
    write = plan_dcd(body, live(created.body, replicas=5), UID)
    assert write is not None and write.body["spec"]["replicas"] == 2 and write.overrode_replicas == 5


def test_without_service_replicas_a_direct_scale_sticks_across_updates() -> None:
    body = one({"W": {}})
    created = plan_dcd(body, None, UID)
    assert created is not None and "replicas" not in created.body["spec"]
    scaled = live(created.body, replicas=4)
    assert plan_dcd(body, scaled, UID) is None
    write = plan_dcd(one({"W": {"envs": [{"name": "A", "value": "1"}]}}), scaled, UID)
    assert write is not None and write.body["spec"]["replicas"] == 4 and write.overrode_replicas is None


def test_a_dcd_controlled_by_someone_else_is_left_alone() -> None:
    body = one({"W": {}})
    created = plan_dcd(body, None, UID)
    assert created is not None
    assert plan_dcd(one({"W": {"replicas": 3}}), live(created.body), "another-uid") is None


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "replicas": st.integers(0, 5),
            "envs": st.lists(
                st.fixed_dictionaries({"name": st.sampled_from("ABC"), "value": st.text(max_size=2)})
            ),
            "componentType": st.sampled_from(["worker", "frontend", "planner"]),
        },
    ),
    st.one_of(st.none(), st.integers(0, 9)),
)
def test_after_one_write_nothing_more_is_written(service: dict[str, Any], scaled: int | None) -> None:
    """Idempotence: whatever the DCD looked like, applying the write once converges it."""
    body = one({"W": service})
    created = plan_dcd(body, None, UID)
    assert created is not None
    existing = live(created.body) if scaled is None else live(created.body, replicas=scaled)
    write = plan_dcd(body, existing, UID)
    after = existing if write is None else live(write.body)
    assert plan_dcd(body, after, UID) is None
    wanted = wanted_dcd(body)
    assert wanted.replicas == service.get("replicas")


def test_pvcs_reused_created_or_reported() -> None:
    graph = dgd(
        {"W": {}},
        pvcs=[
            {
                "name": "models",
                "create": True,
                "size": "10Gi",
                "storageClass": "fast",
                "volumeAccessMode": "ReadWriteMany",
            },
            {"name": "there"},
            {"name": "absent", "create": False},
        ],
    )
    plan = plan_pvcs(graph, lambda name: {"metadata": {"name": name}} if name == "there" else None)
    (pvc,) = plan.create
    assert pvc["metadata"]["name"] == "models" and pvc["metadata"]["namespace"] == "ns"
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == UID
    assert pvc["metadata"]["ownerReferences"][0]["controller"] is True
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "10Gi"}},
        "storageClassName": "fast",
    }
    (missing,) = plan.missing
    assert missing.startswith("spec.pvcs[2]: PersistentVolumeClaim 'absent' does not exist in namespace 'ns'")


def test_planner_account_only_for_graphs_with_a_planner() -> None:
    assert needs_planner_account(dgd({"P": {"componentType": "planner"}}))
    assert not needs_planner_account(dgd({"W": {"componentType": "worker"}}))
    account = planner_service_account("ns")
    assert (
        account["metadata"]["name"] == "planner-serviceaccount"
        and "ownerReferences" not in account["metadata"]
    )


def test_pvc_without_storage_class_gets_the_kaiwoconfig_default() -> None:
    graph = dgd({}, pvcs=[{"name": "a", "create": True, "size": "1Gi", "volumeAccessMode": "ReadWriteOnce"}])
    graph["spec"]["pvcs"].append({**graph["spec"]["pvcs"][0], "name": "b", "storageClass": "fast"})
    plan = plan_pvcs(graph, lambda name: None, "standard-rwo")
    assert [p["spec"]["storageClassName"] for p in plan.create] == ["standard-rwo", "fast"]
    assert plan_pvcs(graph, lambda name: None).create[0]["spec"]["storageClassName"] is None

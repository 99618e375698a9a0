"""The ModelInfer owns the Kueue Workloads of the groups it keeps, and deletes those of groups gone for
good (controllers/modelinfer/queued.py): what a user notices is a rebuilt group Kueue never tears down,
and no Workload left holding quota after a rollout or a scale-down."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.queued import (
    WorkloadWrite,
    kept_pod_groups,
    live_revisions,
    modelinfers_of_workload,
    workload_writes,
    write_workloads,
)
from aiplane.controllers.queueing import pod_group_name
from aiplane.kube.children import ChildWriter
from aiplane.kube.resources import NAMESPACES, PODS, WORKLOADS
from aiplane.sim.client import InMemoryKubeClient
from tests.integration.test_modelinfer_e2e import modelinfer

Obj = dict[str, Any]
MI_RESOURCE = kinds.MODELINFERS
MI: Obj = {
    "apiVersion": "workload.volcano.sh/v1alpha1",
    "kind": "ModelInfer",
    "metadata": {"name": "llama", "namespace": "team-a", "uid": "mi-uid"},
}


def pod(group: int, revision: str, *, deleting: bool = False) -> Obj:
    meta: Obj = {
        "name": f"llama-{group}-serve-0-0",
        "namespace": "team-a",
        "labels": {
            "modelinfer.volcano.sh/name": "llama",
            "modelinfer.volcano.sh/group-name": f"llama-{group}",
            "modelinfer.volcano.sh/revision": revision,
            "kueue.x-k8s.io/pod-group-name": pod_group_name(f"llama-{group}", revision),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta}


def workload(name: str, *owners: str, rv: str = "7", deleting: bool = False) -> Obj:
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": f"p{i}", "uid": uid} for i, uid in enumerate(owners)]
    meta: Obj = {"name": name, "namespace": "team-a", "resourceVersion": rv, "ownerReferences": refs}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta}


def owned(wl: Obj) -> Obj:
    ours = {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "name": "llama",
        "uid": "mi-uid",
    }
    refs = [*wl["metadata"]["ownerReferences"], ours]
    return {**wl, "metadata": {**wl["metadata"], "ownerReferences": refs}}


def test_a_group_being_rebuilt_keeps_its_workload_and_a_rolled_group_does_not() -> None:
    pods = [pod(0, "new"), pod(1, "old", deleting=True), pod(3, "new")]  # 1: rebuilding; 3: a surge group
    live = live_revisions("llama", pods)
    assert live == {0: frozenset({"new"}), 3: frozenset({"new"})}
    kept = kept_pod_groups("llama", 3, ("new", "old"), live)
    assert kept == {"llama-0-new", "llama-1-new", "llama-1-old", "llama-2-new", "llama-2-old", "llama-3-new"}
    assert "llama-0-old" not in kept, "group 0 runs on the new revision: its old Workload is not kept"


def test_the_modelinfer_joins_the_owners_of_a_kept_workload_guarded_by_its_version() -> None:
    kept = frozenset({"llama-0-new"})
    (write,) = workload_writes(MI, [workload("llama-0-new", "a", "b")], kept, frozenset())
    assert write.patch is not None
    meta = write.patch["metadata"]
    assert meta["resourceVersion"] == "7"
    assert [r["uid"] for r in meta["ownerReferences"]] == ["a", "b", "mi-uid"], "the pods stay owners"
    ours = meta["ownerReferences"][-1]
    assert ours["kind"] == "ModelInfer" and ours["name"] == "llama"
    assert "controller" not in ours and "blockOwnerDeletion" not in ours


def test_a_workload_of_a_group_gone_for_good_is_deleted_once_its_pods_are() -> None:
    gone = owned(workload("llama-0-old"))
    kept = frozenset({"llama-0-new"})
    assert workload_writes(MI, [gone], kept, frozenset({"llama-0-old"})) == [], "its pods still there"
    (write,) = workload_writes(MI, [gone], kept, frozenset())
    assert write.patch is None and write.workload["metadata"]["name"] == "llama-0-old"


def test_nothing_is_written_for_workloads_not_ours_or_being_deleted_or_in_step() -> None:
    kept = frozenset({"llama-0-new", "llama-1-new"})
    workloads = [
        workload("other-0-new", "x"),  # not kept, not ours: someone else's
        owned(workload("llama-0-new", "a")),  # in step
        workload("llama-1-new", "b", deleting=True),
    ]
    assert workload_writes(MI, workloads, kept, frozenset()) == []


def test_a_workload_the_modelinfer_owns_maps_back_to_it() -> None:
    assert [r.name for r in modelinfers_of_workload(owned(workload("llama-0-new")), _no_pods())] == ["llama"]


def _no_pods() -> Any:
    class NoPods:
        def get(self, key: str) -> None:
            return None

    return NoPods()


revisions = st.sampled_from(["r1", "r2", "r3"])


@given(
    replicas=st.integers(0, 3),
    live=st.dictionaries(st.integers(0, 4), st.frozensets(revisions, min_size=1, max_size=2), max_size=4),
    present=st.lists(st.tuples(st.integers(0, 4), revisions, st.booleans()), max_size=8),
    pod_groups=st.frozensets(st.tuples(st.integers(0, 4), revisions), max_size=6),
    update=revisions,
    current=revisions,
)
def test_one_pass_leaves_nothing_to_do_and_never_drops_a_kept_or_busy_workload(
    replicas: int,
    live: dict[int, frozenset[str]],
    present: list[tuple[int, str, bool]],
    pod_groups: frozenset[tuple[int, str]],
    update: str,
    current: str,
) -> None:
    """Whatever the Workloads: after the writes, the same decision writes nothing (no flapping, zero writes
    at rest); a kept Workload is owned and never deleted; a Workload with pods is never deleted."""
    kept = kept_pod_groups("llama", replicas, (update, current), live)
    groups = frozenset(pod_group_name(f"llama-{o}", r) for o, r in pod_groups)
    workloads = {}
    for ordinal, revision, ours in present:
        wl = workload(pod_group_name(f"llama-{ordinal}", revision), "p")
        workloads[wl["metadata"]["name"]] = owned(wl) if ours else wl
    writes = workload_writes(MI, list(workloads.values()), kept, groups)
    for write in writes:
        name = write.workload["metadata"]["name"]
        if write.patch is None:
            assert name not in kept and name not in groups
            del workloads[name]
        else:
            assert name in kept
            meta = {**workloads[name]["metadata"], **write.patch["metadata"]}
            workloads[name] = {**workloads[name], "metadata": meta}
    assert workload_writes(MI, list(workloads.values()), kept, groups) == []
    for name in kept & set(workloads):
        assert any(r.get("uid") == "mi-uid" for r in workloads[name]["metadata"]["ownerReferences"])
    # Every live group's own Workload is kept, whatever the revisions say.
    for ordinal, revs in live.items():
        assert {pod_group_name(f"llama-{ordinal}", r) for r in revs} <= kept


async def test_the_executor_patches_and_deletes_and_a_workload_gone_meanwhile_is_no_error() -> None:
    client = InMemoryKubeClient.fresh()
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    # A live pod owns it, so the collector keeps it (the ModelInfer of this test does not exist).
    member: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p0", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    member = await client.create(PODS, member, namespace="team-a")
    body: Obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        **workload("llama-0-new", member["metadata"]["uid"]),
    }
    del body["metadata"]["resourceVersion"]
    made = await client.create(WORKLOADS, body, namespace="team-a")
    mi = modelinfer("llama", replicas=1)
    mi["metadata"]["namespace"] = "team-a"
    mi = await client.create(MI_RESOURCE, mi, namespace="team-a")
    (write,) = workload_writes(mi, [made], frozenset({"llama-0-new"}), frozenset())
    vanished = WorkloadWrite(
        {"metadata": {"name": "gone", "namespace": "team-a", "uid": "u"}}, {"metadata": {}}
    )
    writer = ChildWriter(client, "test")
    await write_workloads(writer, [write, vanished])
    now = await client.get(WORKLOADS, "llama-0-new", namespace="team-a")
    assert [r["uid"] for r in now["metadata"]["ownerReferences"]] == [
        member["metadata"]["uid"],
        objects.uid(mi),
    ]
    await write_workloads(writer, [WorkloadWrite(now)])
    assert not (await client.list(WORKLOADS, namespace="team-a"))["items"]

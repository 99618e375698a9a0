"""The KaiwoConfig's decision as a pure function: node patches, Kueue writes and status, decided first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.api.config import KaiwoConfigSpec
from aiplane.apimachinery.mergepatch import merge_patch
from aiplane.controllers.kaiwo.decide import KueueOp, NodeCheck, Observed, decide
from aiplane.controllers.kaiwo.fleet import Fleet
from aiplane.controllers.kaiwo.nodes import TAINTED_ANNOTATION
from tests.unit.test_kaiwo_pools import node

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG: dict[str, Any] = {
    "metadata": {"name": "kaiwo", "uid": "cfg", "generation": 1},
    "spec": {"nodes": {"addTaintsToGpuNodes": True}},
}


def _observed(
    fleet: Fleet, kueue: dict[str, dict[str, Any]] | None, config: dict[str, Any] = CONFIG
) -> Observed:
    spec = KaiwoConfigSpec.model_validate(config["spec"])
    exclude = spec.nodes.excludeMasterNodesFromNodePools
    live = dict(kueue or {})

    def of(kind: str) -> dict[str, Any]:
        return {k: v for k, v in live.items() if v["kind"] == kind}

    return Observed(
        config,
        ignored=False,
        spec=spec,
        invalid=None,
        pools=tuple(fleet.pools(exclude)),
        dirty=tuple(NodeCheck(n, fleet.views.get(n), fleet.pool_of(n, exclude)) for n in sorted(fleet.dirty)),
        views=fleet.views,
        tainted=fleet.tainted_names(),
        flavors=of("ResourceFlavor") if kueue is not None else None,
        queues=of("ClusterQueue") if kueue is not None else None,
        local_queues={k: v for k, v in live.items() if v["kind"] == "LocalQueue"}
        if kueue is not None
        else None,
        topologies=of("Topology") if kueue is not None else None,
        workload_namespaces=("team",),
    )


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _conditions(status: dict[str, Any] | None) -> dict[str, str]:
    assert status is not None
    return {c["type"]: c["reason"] for c in status["conditions"]}


def test_first_decision_taints_the_gpu_node_and_its_flavor_then_rest_writes_nothing() -> None:
    fleet = Fleet()
    nodes = {"gpu": node("gpu")}
    fleet.put(nodes["gpu"])
    first = decide(_observed(fleet, {}), NOW)
    [(check, patch)] = first.nodes
    assert check.name == "gpu" and patch is not None
    assert patch["metadata"]["annotations"][TAINTED_ANNOTATION]
    created = {_key(w.body): w.body for w in first.kueue if w.op is KueueOp.CREATE}
    assert len(created) == len(first.kueue)  # nothing exists yet: only creates
    flavor = next(o for o in created.values() if o["kind"] == "ResourceFlavor")
    # The flavor carries the GPU taint the same decision adds to its node.
    assert [t["key"] for t in flavor["spec"]["nodeTaints"]] == [patch["spec"]["taints"][0]["key"]]
    assert first.status is not None and first.status["taintedNodes"] == ["gpu"]
    assert first.status["localQueues"] == ["team"]
    assert _conditions(first.status) == {"Ready": "Applied"}

    # Apply the writes as the API server would, then decide again: nothing left to do.
    fleet.dirty.clear()
    fleet.put(
        merge_patch(
            nodes["gpu"],
            {k: v for k, v in patch.items() if k != "metadata"}
            | {"metadata": {k: v for k, v in patch["metadata"].items() if k != "resourceVersion"}},
        )
    )
    fleet.dirty.clear()
    settled = {**CONFIG, "status": first.status}
    again = decide(_observed(fleet, created, settled), NOW)
    assert again.nodes == () and again.kueue == ()
    assert again.status == first.status


def test_ignored_invalid_and_no_kueue() -> None:
    assert decide(Observed(CONFIG, ignored=True, spec=None, invalid=None), NOW).status is None
    invalid = decide(Observed(CONFIG, ignored=False, spec=None, invalid="spec.x: bad"), NOW)
    assert invalid.kueue == () and _conditions(invalid.status) == {"Ready": "InvalidSpec"}
    fleet = Fleet()
    fleet.put(node("gpu"))
    unserved = decide(_observed(fleet, None), NOW)
    assert unserved.kueue == () and len(unserved.nodes) == 1  # the taint is still decided
    assert _conditions(unserved.status) == {"Ready": "KueueNotInstalled"}


def test_a_foreign_cluster_queue_is_never_touched() -> None:
    fleet = Fleet()
    fleet.put(node("gpu"))
    foreign = {"kind": "ClusterQueue", "metadata": {"name": "kaiwo", "uid": "other"}, "spec": {}}
    decision = decide(_observed(fleet, {"kaiwo": foreign}), NOW)
    assert all(w.body["kind"] == "LocalQueue" for w in decision.kueue)  # only the LocalQueues go on
    assert _conditions(decision.status) == {"Ready": "NotOurs"}


def _settled(config: dict[str, Any]) -> tuple[Fleet, dict[str, dict[str, Any]]]:
    """A fleet with one GPU node and the Kueue objects a first decision on ``config`` creates."""
    fleet = Fleet()
    fleet.put(node("gpu"))
    first = decide(_observed(fleet, {}, config), NOW)
    created = {_key(w.body): w.body for w in first.kueue if w.op is KueueOp.CREATE}
    for obj in created.values():
        obj["metadata"]["resourceVersion"] = "7"
    return fleet, created


def test_a_flavor_is_never_topology_aware_and_is_patched_in_place_when_its_taints_go() -> None:
    untainted: dict[str, Any] = {**CONFIG, "spec": {"dynamicallyUpdateDefaultClusterQueue": True}}
    fleet, created = _settled(untainted)
    flavors = [o for o in created.values() if o["kind"] == "ResourceFlavor"]
    assert flavors and all("topologyName" not in f["spec"] for f in flavors)
    # The same flavor still carrying a taint its pool no longer has: a merge patch nulls it out, in place
    # (a delete would hang on Kueue's resource-in-use finalizer while the ClusterQueue lists the flavor).
    stale = {
        **flavors[0],
        "spec": {**flavors[0]["spec"], "nodeTaints": [{"key": "x", "effect": "NoSchedule"}]},
    }
    decision = decide(_observed(fleet, {**created, _key(stale): stale}, untainted), NOW)
    [write] = [w for w in decision.kueue if w.resource.kind == "ResourceFlavor"]
    assert write.op is KueueOp.PATCH
    assert write.body["spec"]["nodeTaints"] is None
    assert merge_patch(stale, write.body)["spec"] == flavors[0]["spec"]


def test_a_topology_aware_flavor_of_ours_is_deleted_to_be_recreated_without_a_topology() -> None:
    dynamic: dict[str, Any] = {
        **CONFIG,
        "spec": {**CONFIG["spec"], "dynamicallyUpdateDefaultClusterQueue": True},
    }
    fleet, created = _settled(dynamic)
    flavor = next(o for o in created.values() if o["kind"] == "ResourceFlavor")
    tas = {**flavor, "spec": {**flavor["spec"], "topologyName": "default-topology"}}
    decision = decide(_observed(fleet, {**created, _key(tas): tas}, dynamic), NOW)
    writes = [w for w in decision.kueue if w.resource.kind == "ResourceFlavor"]
    assert [(w.op, _key(w.body)) for w in writes] == [(KueueOp.RECREATE, _key(tas))]

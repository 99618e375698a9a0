"""The demo's floor watch: it sees the one committed change that takes a ModelInfer below its floor."""

from __future__ import annotations

from typing import Any

from aiplane.demo.serving import MI_KEY, NODE_KEY, PDB_KEY, POD_KEY, FloorWatch, floor_of
from aiplane.sim.apiserver.store import DELETED, Event

NS = "team-a"


def _mi(replicas: int = 2, max_unavailable: Any = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "pd", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": max_unavailable}},
            "template": {
                "roles": [
                    {"name": "decode", "replicas": 1, "workerReplicas": 1, "workerTemplate": {"spec": {}}}
                ]
            },
        },
    }


def _pod(
    group: int, index: int, *, ready: bool = True, node: str = "n0", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"pd-{group}-decode-0-{index}",
        "namespace": NS,
        "labels": {"modelinfer.volcano.sh/name": "pd", "modelinfer.volcano.sh/group-name": f"pd-{group}"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _event(key: str, obj: dict[str, Any], type_: str = "MODIFIED", rv: int = 1) -> Event:
    return Event(type_, key, obj, None, rv)


def _serving() -> FloorWatch:
    watch = FloorWatch(namespace=NS)
    watch(_event(MI_KEY, _mi(), "ADDED"))
    for group in (0, 1):
        for index in (0, 1):
            watch(_event(POD_KEY, _pod(group, index), "ADDED"))
    assert watch.track() == [f"{NS}/pd"]
    return watch


def test_floor_resolves_max_unavailable_like_the_controller() -> None:
    assert floor_of(_mi(3, 1)) == 2
    assert floor_of(_mi(4, "50%")) == 2
    assert floor_of(_mi(1, 2)) == 0


def test_one_group_down_keeps_the_floor_two_break_it() -> None:
    watch = _serving()
    watch(_event(POD_KEY, _pod(0, 1, deleting=True), rv=2))
    assert watch.breaches == [] and watch.minimum[f"{NS}/pd"] == 1
    watch(_event(POD_KEY, _pod(1, 0, ready=False), rv=3))
    assert [(b.available, b.floor, b.rv) for b in watch.breaches] == [(0, 1, 3)]
    assert not watch.kept(f"{NS}/pd")
    assert watch.minimum[f"{NS}/pd"] == 0


def test_a_missing_pod_makes_a_group_unavailable() -> None:
    watch = _serving()
    watch(_event(POD_KEY, _pod(0, 0), DELETED, rv=2))
    assert watch.available(f"{NS}/pd") == 1


def test_not_all_available_at_the_start_is_not_tracked() -> None:
    watch = FloorWatch(namespace=NS)
    watch(_event(MI_KEY, _mi(), "ADDED"))
    watch(_event(POD_KEY, _pod(0, 0), "ADDED"))
    assert watch.track() == []
    watch(_event(POD_KEY, _pod(0, 0, ready=False)))
    assert watch.breaches == []


def test_budgets_and_cordoned_nodes_explain_the_number() -> None:
    watch = _serving()
    budget = {"metadata": {"name": "pd-0", "namespace": NS, "labels": {"modelinfer.volcano.sh/name": "pd"}}}
    watch(_event(PDB_KEY, {**budget, "spec": {"minAvailable": 0}}, "ADDED"))
    watch(_event(NODE_KEY, {"metadata": {"name": "n0"}, "spec": {"unschedulable": True}}))
    assert watch.released(f"{NS}/pd") == ["pd-0"] and watch.protected(f"{NS}/pd") == []
    assert watch.draining_under(f"{NS}/pd") == ["n0"]
    watch(_event(PDB_KEY, {**budget, "spec": {"minAvailable": 2}}))
    watch(_event(NODE_KEY, {"metadata": {"name": "n0"}, "spec": {}}))
    assert watch.released(f"{NS}/pd") == [] and watch.released_ever[f"{NS}/pd"] == {"pd-0"}
    assert watch.draining_under(f"{NS}/pd") == []
    assert "1 protected" in watch.render(f"{NS}/pd").plain

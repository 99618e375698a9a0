"""The DaemonSet controller's incremental work: a node change costs a sync of that node for the
DaemonSets whose placement it changes (kube's ``updateNode``), pod events sync their node, and the
status is written from the cached placement. The controller runs on an embedded cluster's API without
the other agents, its queue drained by hand (``run_pending``), so every write is the controller's."""

from __future__ import annotations

import copy
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from aiplane.sim.agents import PodIndex
from aiplane.sim.agents import daemonsets as ds_mod
from aiplane.sim.agents.daemonsets import DaemonSetController, Placement
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.apiserver.write_defaults import rfc3339
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.sim.fleet import Fleet

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
NODE_COUNT = 40


@dataclass
class Harness:
    api: Api
    pods: PodIndex
    ctrl: DaemonSetController

    @property
    def node_rt(self) -> Any:
        return self.api.resource("v1", "Node")

    @property
    def pod_rt(self) -> Any:
        return self.api.resource("v1", "Pod")

    @property
    def ds_rt(self) -> Any:
        return self.api.resource("apps/v1", "DaemonSet")

    def drain(self) -> None:
        self.ctrl.run_pending()
        assert self.ctrl.idle

    def edit_node(self, name: str, change: Callable[[Obj], None]) -> None:
        node = copy.deepcopy(self.api.get(self.node_rt, None, name))
        change(node)
        self.api.update(self.node_rt, None, name, node)

    def label(self, name: str, key: str, value: str | None) -> None:
        def change(node: Obj) -> None:
            labels = node["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value

        self.edit_node(name, change)

    def taint(self, name: str, taints: list[Obj]) -> None:
        def change(node: Obj) -> None:
            node.setdefault("spec", {})["taints"] = taints

        self.edit_node(name, change)

    def pods_by_node(self, ds_name: str = "agent") -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for pod in self.api.items(self.pod_rt, "default"):
            owner = pod["metadata"]["ownerReferences"][0]["name"]
            if owner == ds_name and not pod["metadata"].get("deletionTimestamp"):
                out.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
        return out

    def status(self, ds_name: str = "agent") -> Obj:
        status: Obj = self.api.get(self.ds_rt, "default", ds_name).get("status") or {}
        return status


def node_body(name: str, labels: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}


def daemonset(name: str = "agent", node_selector: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    **({"nodeSelector": node_selector} if node_selector else {}),
                    "containers": [{"name": "c", "image": "agent:1"}],
                },
            },
            **spec,
        },
    }


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    api = EmbeddedCluster(fleet=Fleet(nodePools=[]), install_crds=False).server.api
    for i in range(NODE_COUNT):
        api.create(api.resource("v1", "Node"), None, node_body(f"n-{i:02d}", {ZONE: "a" if i >= 2 else "b"}))
    pods = PodIndex(api)
    pods.start()
    ctrl = DaemonSetController(api, pods)
    ctrl.start()  # the worker task never runs: the test never yields to the loop; it drains by hand
    try:
        yield Harness(api, pods, ctrl)
    finally:
        await ctrl.stop()
        pods.stop()


class Spy:
    """Counts ``node_should_run`` calls and full syncs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ctrl: DaemonSetController) -> None:
        self.should_run = 0
        self.full_syncs = 0
        self.node_syncs: list[str] = []
        real_should_run, real_sync, real_sync_node = ds_mod.node_should_run, ctrl.sync, ctrl.sync_node

        def should_run(pod_spec: Any, node: Any) -> tuple[bool, bool]:
            self.should_run += 1
            return real_should_run(pod_spec, node)

        def sync(namespace: str, name: str) -> None:
            self.full_syncs += 1
            real_sync(namespace, name)

        def sync_node(namespace: str, name: str, node_name: str) -> None:
            self.node_syncs.append(node_name)
            real_sync_node(namespace, name, node_name)

        monkeypatch.setattr(ds_mod, "node_should_run", should_run)
        monkeypatch.setattr(ctrl, "sync", sync)
        monkeypatch.setattr(ctrl, "sync_node", sync_node)

    def reset(self) -> None:
        self.should_run = self.full_syncs = 0
        self.node_syncs.clear()


def set_ready(h: Harness, pod_name: str, ready: bool = True, since: str = "2024-01-01T00:00:00Z") -> None:
    pod = copy.deepcopy(h.api.get(h.pod_rt, "default", pod_name))
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": str(ready), "lastTransitionTime": since}],
    }
    h.api.update(h.pod_rt, "default", pod_name, pod, subresource="status")


def assert_full_sync_is_a_no_op(h: Harness, ds_name: str = "agent") -> None:
    """The incremental state is what a full sync computes: forcing one writes nothing."""
    before_rv = h.api.store.rv
    cached = h.ctrl.placements[("default", ds_name)]
    h.ctrl.placements.pop(("default", ds_name))
    h.ctrl.enqueue(("ds", "default", ds_name))
    h.drain()
    assert h.api.store.rv == before_rv, "a full sync found work the incremental syncs missed"
    rebuilt = h.ctrl.placements[("default", ds_name)]
    assert (cached.nodes, cached.run, cached.outdated) == (rebuilt.nodes, rebuilt.run, rebuilt.outdated)
    assert (cached.counts, cached.totals) == (rebuilt.counts, rebuilt.totals)


async def test_a_node_change_that_keeps_placement_makes_no_work(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}))
    h.api.create(h.ds_rt, "default", daemonset("everywhere"))
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-01"}
    assert len(h.pods_by_node("everywhere")) == NODE_COUNT

    spy = Spy(monkeypatch, h.ctrl)
    before_rv = h.api.store.rv
    h.label("n-10", "example.com/rack", "r1")  # neither DaemonSet cares
    assert spy.should_run == 2  # once per DaemonSet, for that node only
    assert h.ctrl.idle
    h.taint("n-11", [{"key": "example.com/soft", "effect": "PreferNoSchedule"}])
    assert spy.should_run == 4 and h.ctrl.idle
    h.drain()
    assert h.api.store.rv == before_rv + 2  # the two node writes, nothing of the controller's
    assert spy.full_syncs == 0 and spy.node_syncs == []
    assert_full_sync_is_a_no_op(h)


async def test_a_node_that_starts_matching_gets_a_pod_and_the_counts_move(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}))
    h.drain()
    assert h.status()["desiredNumberScheduled"] == 2
    assert h.status()["currentNumberScheduled"] == 2

    spy = Spy(monkeypatch, h.ctrl)
    h.label("n-20", ZONE, "b")
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-01", "n-20"}
    status = h.status()
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"]) == (3, 3)
    assert (status["numberMisscheduled"], status["numberReady"], status["numberUnavailable"]) == (0, 0, 3)
    assert status["updatedNumberScheduled"] == 3
    assert spy.full_syncs == 0
    assert set(spy.node_syncs) == {"n-20"}  # the relabel, then the new pod's event
    # node_should_run: the event, the node sync for it and the one for the pod's ADDED event
    assert spy.should_run <= 3

    spy.reset()
    h.ctrl.enqueue(("status", "default", "agent"))
    set_ready(h, h.pods_by_node()["n-20"][0])
    assert h.ctrl.run_pending(limit=1) == 1  # a status refresh queued before the pod's node sync …
    assert h.status()["numberReady"] == 1  # … still counts the pods as stored now
    h.drain()
    assert (h.status()["numberReady"], h.status()["numberAvailable"]) == (1, 1)
    assert h.status()["numberUnavailable"] == 2
    assert spy.full_syncs == 0 and set(spy.node_syncs) == {"n-20"}

    spy.reset()
    h.label("n-20", ZONE, None)
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-01"}
    status = h.status()
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberReady"]) == (
        2,
        2,
        0,
    )
    assert "numberAvailable" not in status
    assert spy.full_syncs == 0 and set(spy.node_syncs) == {"n-20"}
    reasons = [e["reason"] for e in h.api.items(h.api.resource("v1", "Event"), "default")]
    assert reasons.count("SuccessfulCreate") == 3 and reasons.count("SuccessfulDelete") == 1
    assert_full_sync_is_a_no_op(h)


async def test_taints_cordons_and_node_deletion(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}))
    h.drain()
    spy = Spy(monkeypatch, h.ctrl)

    # NoSchedule: the pod stays (should_continue) but the node no longer counts as desired
    h.taint("n-00", [{"key": "example.com/maint", "effect": "NoSchedule"}])
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-01"}
    status = h.status()
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"]) == (1, 1)
    # NoExecute: the pod goes
    h.taint("n-00", [{"key": "example.com/maint", "effect": "NoExecute"}])
    h.drain()
    assert set(h.pods_by_node()) == {"n-01"}
    assert h.status()["numberMisscheduled"] == 0
    h.taint("n-00", [])
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-01"}
    # the node goes: so does its pod
    h.api.delete(h.node_rt, None, "n-01")
    h.drain()
    assert set(h.pods_by_node()) == {"n-00"}
    assert (h.status()["desiredNumberScheduled"], h.status()["currentNumberScheduled"]) == (1, 1)
    # a node that comes matching gets one
    h.api.create(h.node_rt, None, node_body("n-99", {ZONE: "b"}))
    h.drain()
    assert set(h.pods_by_node()) == {"n-00", "n-99"}
    assert spy.full_syncs == 0
    assert_full_sync_is_a_no_op(h)


async def test_a_deleted_daemon_pod_is_replaced_by_a_node_sync(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent"))
    h.drain()
    spy = Spy(monkeypatch, h.ctrl)
    victim = h.pods_by_node()["n-05"][0]
    h.api.delete(h.pod_rt, "default", victim)
    h.drain()
    replacement = h.pods_by_node()["n-05"]
    assert len(replacement) == 1 and replacement[0] != victim
    assert spy.full_syncs == 0 and set(spy.node_syncs) == {"n-05"}
    assert spy.should_run <= 2


async def test_template_changes_and_rolling_updates_sync_fully(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}))
    h.drain()
    for pods in h.pods_by_node().values():
        set_ready(h, pods[0])
    h.drain()
    spy = Spy(monkeypatch, h.ctrl)
    ds = copy.deepcopy(h.api.get(h.ds_rt, "default", "agent"))
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    h.api.update(h.ds_rt, "default", "agent", ds)
    assert ("default", "agent") not in h.ctrl.placements
    h.drain()
    assert spy.full_syncs >= 1
    # maxUnavailable 1: one outdated pod replaced, the other waits for the new one to be Ready
    images = {
        p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"]
        for p in h.api.items(h.pod_rt, "default")
        if not p["metadata"].get("deletionTimestamp")
    }
    assert sorted(images.values()) == ["agent:1", "agent:2"]
    assert h.ctrl.placements[("default", "agent")].outdated
    spy.reset()
    new_node = next(n for n, image in images.items() if image == "agent:2")
    set_ready(h, h.pods_by_node()[new_node][0])
    h.drain()
    assert spy.full_syncs >= 1  # a rolling update in progress: pod events sync fully, as before
    new_pod = next(p for n, ps in h.pods_by_node().items() if n != new_node for p in ps)
    set_ready(h, new_pod)
    h.drain()
    status = h.status()
    assert (status["updatedNumberScheduled"], status["numberReady"], status["observedGeneration"]) == (
        2,
        2,
        2,
    )
    assert not h.ctrl.placements[("default", "agent")].outdated
    assert_full_sync_is_a_no_op(h)


async def test_min_ready_seconds_counts_available_pods_and_rechecks_later(harness: Harness) -> None:
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}, minReadySeconds=30))
    h.drain()
    pods = h.pods_by_node()
    set_ready(h, pods["n-00"][0])  # Ready long ago: available
    set_ready(h, pods["n-01"][0], since=rfc3339(h.api.clock()))  # Ready just now: not for 30 s
    h.drain()
    status = h.status()
    assert (status["numberReady"], status["numberAvailable"], status["numberUnavailable"]) == (2, 1, 1)
    assert h.ctrl._timers  # the status is looked at again once the 30 s are over
    assert_full_sync_is_a_no_op(h)


@pytest.mark.parametrize("seed", [1, 7, 42])
async def test_random_node_churn_keeps_the_incremental_state_exact(harness: Harness, seed: int) -> None:
    """Whatever the order of label, taint and pod changes, the pods and status are a full sync's."""
    h = harness
    h.api.create(h.ds_rt, "default", daemonset("agent", {ZONE: "b"}))
    h.api.create(h.ds_rt, "default", daemonset("everywhere", updateStrategy={"type": "OnDelete"}))
    h.drain()
    rng = random.Random(seed)
    taints = [
        [],
        [{"key": "x", "effect": "NoSchedule"}],
        [{"key": "x", "effect": "NoExecute"}],
        [{"key": "x", "effect": "PreferNoSchedule"}],
    ]
    gone: set[str] = set()
    for step in range(400):
        node = f"n-{rng.randrange(NODE_COUNT):02d}"
        action = rng.randrange(6)
        if node in gone:
            h.api.create(h.node_rt, None, node_body(node, {ZONE: rng.choice(["a", "b"])}))
            gone.discard(node)
        elif action == 5:
            h.api.delete(h.node_rt, None, node)
            gone.add(node)
        elif action == 0:
            h.label(node, ZONE, rng.choice(["a", "b", None]))
        elif action == 1:
            h.taint(node, rng.choice(taints))
        elif action == 2:
            pods = h.pods_by_node(rng.choice(["agent", "everywhere"])).get(node)
            if pods:
                set_ready(h, pods[0], ready=rng.random() < 0.8)
        elif action == 4:
            pods = h.pods_by_node(rng.choice(["agent", "everywhere"])).get(node)
            if pods:
                h.api.delete(h.pod_rt, "default", pods[0])
        else:
            h.label(node, "example.com/noise", str(step))
        if rng.random() < 0.3:
            h.drain()
    h.drain()
    for name in ("agent", "everywhere"):
        assert_full_sync_is_a_no_op(h, name)
        placement: Placement = h.ctrl.placements[("default", name)]
        assert set(h.pods_by_node(name)) <= set(placement.nodes)
        assert h.status(name)["desiredNumberScheduled"] == len(placement.run)

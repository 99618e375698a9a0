"""PartitioningPlan controller against the embedded API server (no HTTP): selection, admission, reporting.

The test plays the NodePartitioning controller by hand, moving phases through ``/status`` the way the
admission contract allows (leave Pending only when admitted, conditionally on the resourceVersion it
decided on). A watch on NodePartitionings checks the rollout limits on *every* state the API server
went through, not only on the states the test happened to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from aiplane.api import kinds
from aiplane.apimachinery.conditions import get_condition
from aiplane.controllers.partitioning import admission
from aiplane.controllers.partitioning.hashing import desired_hash
from aiplane.controllers.partitioning.plan import (
    PlanController,
    setup,
    transition_events,
)
from aiplane.controllers.partitioning.views import node_partitioning_view, node_partitioning_views
from aiplane.controllers.partitioning.vocabulary import ADMITTED_ANNOTATION, PLAN_LABEL
from aiplane.kube.client import ApiError
from aiplane.kube.clock import FakeClock
from aiplane.kube.controller import Controller, Request
from aiplane.kube.events import EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.manager import Manager
from aiplane.kube.resources import EVENTS, NODES
from aiplane.kube.shape import Shaped
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.fleet import Fleet, GpuSpec, NodePool, node_objects


def is_admitted(np: Mapping[str, Any]) -> bool:
    return admission.is_admitted(node_partitioning_view(np))


def np_phase(np: Mapping[str, Any]) -> str:
    return admission.np_phase(node_partitioning_view(np))


def rollout_counts(nps: Iterable[Mapping[str, Any]]) -> admission.RolloutCounts:
    return admission.rollout_counts(node_partitioning_views(nps))


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
POOL = "aiplane.io/pool"
PRODUCT = "amd.com/gpu.product-name"
MI300X = "AMD_Instinct_MI300X_OAM"
NPS = kinds.NODEPARTITIONINGS
PLANS = kinds.PARTITIONINGPLANS
PROFILES = kinds.PARTITIONINGPROFILES
DEADLINE = 5.0

_MI300X = GpuSpec(vendor="amd", product="MI300X", count=8)
FLEET = Fleet(
    nodePools=[
        NodePool(name="mi300x", count=4, gpu=_MI300X, labels={POOL: "inference"}),
        NodePool(name="mi300x-train", count=2, gpu=_MI300X, labels={POOL: "training"}),
        # Selected by the inference rule, but the CPX profile's targetSelector wants an MI300X.
        NodePool(
            name="mi250", count=1, gpu=GpuSpec(vendor="amd", product="MI250X"), labels={POOL: "inference"}
        ),
        NodePool(name="h100", count=1, gpu=GpuSpec(vendor="nvidia", product="H100-SXM")),
        # A control-plane node the inference rule would match: excluded by default.
        NodePool(name="cp", count=1, gpu=_MI300X, labels={POOL: "inference"}, controlPlane=True),
    ]
)
INFERENCE = [f"mi300x-{i}" for i in range(4)]
TRAINING = ["mi300x-train-0", "mi300x-train-1"]


def _load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")) if d]


PROFILE_DOCS = {d["metadata"]["name"]: d for d in _load("partition-profiles.yaml")}


def plan_body(name: str = "rollout", **spec: Any) -> dict[str, Any]:
    """The inference pool to CPX, the training pool to SPX; ``spec`` overrides."""
    body: dict[str, Any] = {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {
            "rollout": {"maxParallel": 1, "maxUnavailable": 1},
            "rules": [
                {
                    "description": "inference pool to CPX",
                    "selector": {"matchLabels": {POOL: "inference"}},
                    "profileRef": {"name": "mi300x-cpx"},
                },
                {
                    "description": "training pool stays SPX",
                    "selector": {"matchLabels": {PRODUCT: MI300X, POOL: "training"}},
                    "profileRef": {"name": "mi300x-spx"},
                },
            ],
        },
    }
    body["spec"].update(spec)
    return body


# --- harness -------------------------------------------------------------------------------------


async def make_ready(client: InMemoryKubeClient, name: str) -> None:
    """What the PartitioningProfile controller writes when DCM has the profile."""
    obj = await client.get(PROFILES, name)
    generation = obj["metadata"]["generation"]
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "ProfileFound",
        "message": "found",
        "lastTransitionTime": "2026-11-21T12:00:00Z",
        "observedGeneration": generation,
    }
    await client.patch(
        PROFILES,
        name,
        {"status": {"observedGeneration": generation, "conditions": [condition]}},
        subresource="status",
    )


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > end:
            raise AssertionError(f"not before the deadline: {what}")
        await asyncio.sleep(0.01)


class Cluster:
    """An embedded API server, the plan controller on a real Manager, and the test's hands."""

    def __init__(self, client: InMemoryKubeClient, manager: Manager, controller: Controller) -> None:
        self.client = client
        self.manager = manager
        self.controller = controller
        self.reconciler = cast(PlanController, cast(Shaped[Any, Any], controller.reconciler).shape)
        self.reconciles = 0
        inner = controller.reconciler

        async def counting(request: Request) -> Any:
            try:
                return await inner(request)
            finally:
                self.reconciles += 1

        controller.reconciler = counting

    # --- reads ------------------------------------------------------------------------------------

    async def nps(self, plan: str | None = None) -> dict[str, dict[str, Any]]:
        items = (await self.client.list(NPS))["items"]
        return {
            np["metadata"]["name"]: np
            for np in items
            if plan is None or np["spec"].get("planRef", {}).get("name") == plan
        }

    async def plan(self, name: str = "rollout") -> dict[str, Any]:
        return await self.client.get(PLANS, name)

    async def condition(self, type_: str, plan: str = "rollout") -> dict[str, Any]:
        status = (await self.plan(plan)).get("status") or {}
        found = get_condition(status.get("conditions") or [], type_)
        return dict(found or {})

    async def admitted(self, plan: str = "rollout") -> list[str]:
        return sorted(np["spec"]["nodeName"] for np in (await self.nps(plan)).values() if is_admitted(np))

    async def events(self) -> list[dict[str, Any]]:
        await self.reconciler.recorder.flush()
        items: list[dict[str, Any]] = (await self.client.list(EVENTS, "default"))["items"]
        return items

    # --- writes (the test's, not the controller's) ------------------------------------------------

    async def create_profiles(self, *names: str) -> None:
        for name in names:
            await self.client.create(PROFILES, PROFILE_DOCS[name])
            await self.make_ready(name)

    async def make_ready(self, name: str) -> None:
        await make_ready(self.client, name)

    async def set_phase(self, np: str, phase: str, *, current_hash: bool = False) -> None:
        """Move a NodePartitioning like its controller would: conditional on the version it read, and
        read again after a conflict (the plan may have admitted it meanwhile)."""
        for _ in range(20):
            obj = await self.client.get(NPS, np)
            status: dict[str, Any] = {"phase": phase}
            if current_hash:
                status["currentHash"] = obj["spec"]["desiredHash"]
            try:
                await self.client.patch(
                    NPS,
                    np,
                    {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": status},
                    subresource="status",
                )
                return
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise AssertionError(f"{np}: conflicts all along")

    async def set_node_phase(self, plan: str, node: str, phase: str, *, current_hash: bool = False) -> None:
        await self.set_phase(f"{plan}-{node}", phase, current_hash=current_hash)

    # --- quiescence -------------------------------------------------------------------------------

    async def settle(self) -> None:
        """Until the controller has nothing queued or in flight and no write it waits to see."""
        queue = self.controller.queue
        quiet = 0

        async def idle() -> bool:
            nonlocal quiet
            busy = len(queue) or queue.num_processing or queue.num_delayed
            busy = busy or len(self.reconciler.np_writes) or len(self.reconciler.plan_writes)
            quiet = 0 if busy else quiet + 1
            return quiet >= 5

        await eventually(idle, "the controller goes idle")
        await self.reconciler.recorder.flush()

    async def resync(self) -> int:
        """Reconcile every plan again (what an informer resync does); returns the writes it made."""
        await self.settle()
        self.client.reset_counts()
        plans = [p["metadata"]["name"] for p in (await self.client.list(PLANS))["items"]]
        before = self.reconciles
        for name in plans:
            self.controller.enqueue(Request(None, name))

        async def done() -> bool:
            return self.reconciles >= before + len(plans)

        await eventually(done, "every plan reconciled again")
        await self.settle()
        return self.client.writes


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    client = InMemoryKubeClient.fresh(fleet=FLEET)
    manager = Manager(
        client,
        leader_election=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        handle_signals=False,
    )
    await setup(manager)
    controller = cast(Controller, manager.controllers[-1])
    harness = Cluster(client, manager, controller)
    task = asyncio.create_task(manager.run())
    try:
        await asyncio.wait_for(manager.elected.wait(), DEADLINE)
        yield harness
    finally:
        manager.stop()
        assert await task == 0
        await client.close()


class LimitWatch:
    """Every state of this plan's NodePartitionings the API server went through, checked for the limits."""

    def __init__(
        self, client: InMemoryKubeClient, plan: str, max_parallel: int, max_unavailable: int
    ) -> None:
        self.client = client
        self.plan = plan
        self.limits = (max_parallel, max_unavailable)
        self.state: dict[str, dict[str, Any]] = {}
        self.violations: list[str] = []
        self.peak_in_progress = 0
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        rv = (await self.client.list(NPS))["metadata"]["resourceVersion"]
        self.task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        async for event in self.client.watch(NPS, resource_version=rv):
            obj = event["object"]
            if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            if obj["spec"].get("planRef", {}).get("name") != self.plan:
                continue
            if event["type"] == "DELETED":
                self.state.pop(obj["metadata"]["name"], None)
            else:
                self.state[obj["metadata"]["name"]] = obj
            counts = rollout_counts(self.state.values())
            self.peak_in_progress = max(self.peak_in_progress, counts.in_progress)
            if counts.in_progress > self.limits[0] or counts.unavailable > self.limits[1]:
                self.violations.append(
                    f"at rv {obj['metadata']['resourceVersion']}: {counts} exceeds {self.limits}"
                )

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


# --- tests ---------------------------------------------------------------------------------------


async def test_node_partitionings_for_selected_nodes_only(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    plan = await cluster.client.create(PLANS, plan_body())
    expected = {f"rollout-{n}" for n in INFERENCE + TRAINING}

    async def created() -> bool:
        return set(await cluster.nps()) == expected

    await eventually(created, "one NodePartitioning per selected node")
    cpx = desired_hash(PROFILE_DOCS["mi300x-cpx"]["spec"])
    spx = desired_hash(PROFILE_DOCS["mi300x-spx"]["spec"])
    for name, np in (await cluster.nps()).items():
        node = np["spec"]["nodeName"]
        assert name == f"rollout-{node}"
        assert np["metadata"]["labels"][PLAN_LABEL] == "rollout"
        owner = np["metadata"]["ownerReferences"]
        assert owner == [
            {
                "apiVersion": plan["apiVersion"],
                "kind": "PartitioningPlan",
                "name": "rollout",
                "uid": plan["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert np["spec"]["planRef"] == {"name": "rollout", "uid": plan["metadata"]["uid"]}
        assert np["spec"]["dryRun"] is False
        want = ("mi300x-cpx", cpx) if node in INFERENCE else ("mi300x-spx", spx)
        assert (np["spec"]["profileRef"]["name"], np["spec"]["desiredHash"]) == want

    async def reported() -> bool:
        return (await cluster.condition("NodesExcluded")).get("status") == "True"

    await eventually(reported, "NodesExcluded reported")
    excluded = await cluster.condition("NodesExcluded")
    assert excluded["reason"] == "TargetSelectorMismatch" and "mi250-0" in excluded["message"]
    ready = await cluster.condition("PlanReady")
    assert ready["status"] == "True" and "1 control-plane node excluded" in ready["message"]
    await cluster.settle()
    status = (await cluster.plan())["status"]
    assert status["summary"]["matchingNodes"] == 7  # 4 + 2 + the mismatched MI250X node
    assert status["summary"]["totalNodes"] == 6
    assert status["phase"] == "Progressing"
    assert status["observedGeneration"] == 1
    assert [s["nodeName"] for s in status["nodeStatuses"]] == sorted(INFERENCE + TRAINING)
    assert await cluster.admitted() == ["mi300x-0"]  # maxParallel 1, in node-name order
    assert await cluster.resync() == 0


async def test_overlapping_rules_fail_the_plan_naming_node_and_rules(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    rules = plan_body()["spec"]["rules"]
    rules[0]["selector"] = {"matchLabels": {PRODUCT: MI300X}}  # also matches the training pool
    await cluster.client.create(PLANS, plan_body(rules=rules))

    async def failed() -> bool:
        return (await cluster.condition("PlanReady")).get("reason") == "PlanningFailed"

    await eventually(failed, "PlanReady=False PlanningFailed")
    ready = await cluster.condition("PlanReady")
    assert ready["status"] == "False"
    for name in ("mi300x-train-0", "inference pool to CPX", "training pool stays SPX"):
        assert name in ready["message"]
    assert (await cluster.plan())["status"]["phase"] == "Degraded"
    assert await cluster.resync() == 0
    assert await cluster.nps() == {}
    warnings = [e for e in await cluster.events() if e["reason"] == "PlanningFailed"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and warnings[0]["count"] == 1


async def test_a_node_of_another_plan_is_a_conflict(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    await cluster.client.create(PLANS, plan_body())

    async def first_done() -> bool:
        return len(await cluster.nps("rollout")) == 6

    await eventually(first_done, "the first plan's NodePartitionings")
    other = plan_body("training-dpx")
    other["spec"]["rules"] = [
        {"selector": {"matchLabels": {POOL: "training"}}, "profileRef": {"name": "mi300x-spx"}}
    ]
    await cluster.client.create(PLANS, other)

    async def conflict() -> bool:
        return (await cluster.condition("PlanReady", "training-dpx")).get("reason") == "NodeConflict"

    await eventually(conflict, "NodeConflict on the second plan")
    message = (await cluster.condition("PlanReady", "training-dpx"))["message"]
    assert (
        "node mi300x-train-0 is already targeted by other partitioning plan(s): rollout/rollout-mi300x-train-0"
        in message
    )
    assert await cluster.resync() == 0
    assert await cluster.nps("training-dpx") == {}
    assert (await cluster.plan("training-dpx"))["status"]["phase"] == "Degraded"
    assert (await cluster.condition("PlanReady"))["status"] == "True"  # the first plan is unaffected
    conflicts = [e for e in await cluster.events() if e["reason"] == "NodeConflict"]
    assert len(conflicts) == 1 and conflicts[0]["count"] == 1 and conflicts[0]["type"] == "Warning"

    # The first plan goes away (its NodePartitionings with it): the second one takes the nodes.
    await cluster.client.delete(PLANS, "rollout", propagation_policy="Foreground")

    async def taken_over() -> bool:
        return set(await cluster.nps("training-dpx")) == {f"training-dpx-{n}" for n in TRAINING}

    await eventually(taken_over, "the second plan creates its NodePartitionings")
    # Nothing of the deleted plan stays in memory: no backoff state, no expected write of it or its
    # NodePartitionings (per-object state must be forgotten with the object).
    await cluster.settle()
    assert cluster.controller.queue.num_requeues(Request(None, "rollout")) == 0
    assert len(cluster.reconciler.plan_writes) == len(cluster.reconciler.np_writes) == 0


async def test_admission_never_exceeds_the_rollout_limits(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    watch = LimitWatch(cluster.client, "rollout", max_parallel=2, max_unavailable=2)
    await watch.start()
    await cluster.client.create(PLANS, plan_body(rollout={"maxParallel": 2, "maxUnavailable": 2}))
    targets = sorted(INFERENCE + TRAINING)

    async def admitted(expected: list[str]) -> None:
        """The nodes carrying an admission (it stays after they start), once quiet: nothing more."""

        async def check() -> bool:
            return await cluster.admitted() == expected

        await eventually(check, f"admitted {expected}")
        await cluster.settle()
        assert await cluster.admitted() == expected

    async def phase_is(phase: str) -> bool:
        return bool((await cluster.plan()).get("status", {}).get("phase") == phase)

    try:
        await admitted(targets[:2])
        assert (await cluster.plan())["status"]["phase"] == "Progressing"

        # Both start; nothing else may (maxParallel).
        for node in targets[:2]:
            await cluster.set_node_phase("rollout", node, "Draining")
        await admitted(targets[:2])
        summary = (await cluster.plan())["status"]["summary"]
        assert (summary["applying"], summary["pending"]) == (2, 4)
        progressing = await cluster.condition("RolloutProgressing")
        assert (progressing["status"], progressing["reason"]) == ("True", "NodeOperationsInProgress")

        # One succeeds: exactly one more, the next in node-name order.
        await cluster.set_node_phase("rollout", targets[0], "Succeeded", current_hash=True)
        await admitted(targets[:3])

        # One fails: 1 admitted + 1 failed = maxUnavailable, so nothing more although maxParallel
        # would allow one: a failure is the intended safety stop.
        await cluster.set_node_phase("rollout", targets[1], "Failed")
        await eventually(lambda: phase_is("Degraded"), "a failure degrades the plan")
        degraded = await cluster.condition("RolloutDegraded")
        assert degraded["status"] == "True" and targets[1] in degraded["message"]
        assert (await cluster.plan())["status"]["summary"]["failed"] == 1
        await cluster.set_node_phase("rollout", targets[2], "Draining")
        await admitted(targets[:3])

        # It finishes: 1 failed leaves room for one.
        await cluster.set_node_phase("rollout", targets[2], "Succeeded", current_hash=True)
        await admitted(targets[:4])

        # Deleting the Failed NodePartitioning retries it: recreated, and (first in name order)
        # admitted again as soon as the failure no longer counts.
        await cluster.client.delete(NPS, f"rollout-{targets[1]}")
        await admitted(targets[:4])
        assert (await cluster.plan())["status"]["summary"]["failed"] == 0

        # Drive the rest to completion the way the NodePartitioning controller would.
        async def drive() -> bool:
            nps = await cluster.nps("rollout")
            for name, np in sorted(nps.items()):
                if np_phase(np) == "Pending" and is_admitted(np):
                    await cluster.set_phase(name, "Verifying")
                elif np_phase(np) == "Verifying":
                    await cluster.set_phase(name, "Succeeded", current_hash=True)
            return len(nps) == 6 and all(np_phase(np) == "Succeeded" for np in nps.values())

        await eventually(drive, "every node succeeded", timeout=10)
        await eventually(lambda: phase_is("Completed"), "the plan completes")
    finally:
        await watch.stop()
    assert watch.violations == []
    assert watch.peak_in_progress == 2  # the limit was reached, never exceeded
    completed = await cluster.condition("RolloutCompleted")
    assert (completed["status"], completed["reason"]) == ("True", "AllNodesSucceeded")
    assert (await cluster.condition("RolloutDegraded"))["status"] == "False"
    status = (await cluster.plan())["status"]
    assert status["summary"]["succeeded"] == 6 and status["summary"]["failed"] == 0
    assert await cluster.resync() == 0
    reasons = [e["reason"] for e in await cluster.events()]
    assert reasons.count("RolloutCompleted") == 1 and reasons.count("RolloutDegraded") == 1


async def test_paused_admits_nothing_and_revokes_what_has_not_started(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    await cluster.client.create(PLANS, plan_body(paused=True))

    async def paused() -> bool:
        return bool((await cluster.plan()).get("status", {}).get("phase") == "Paused")

    await eventually(paused, "phase Paused")
    assert await cluster.resync() == 0
    assert len(await cluster.nps()) == 6 and await cluster.admitted() == []
    assert (await cluster.condition("Paused"))["status"] == "True"

    await cluster.client.patch(PLANS, "rollout", {"spec": {"paused": False}})

    async def one() -> bool:
        return await cluster.admitted() == ["mi300x-0"]

    await eventually(one, "resumed: the first node admitted")
    await cluster.client.patch(PLANS, "rollout", {"spec": {"paused": True}})

    async def revoked() -> bool:
        return await cluster.admitted() == []

    await eventually(revoked, "paused again before the node started: admission revoked")
    annotations = (await cluster.client.get(NPS, "rollout-mi300x-0"))["metadata"].get("annotations") or {}
    assert ADMITTED_ANNOTATION not in annotations
    assert await cluster.resync() == 0


async def test_dry_run_creates_dry_run_node_partitionings_and_admits_nothing(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    await cluster.client.create(PLANS, plan_body(dryRun=True))

    async def created() -> bool:
        return len(await cluster.nps()) == 6

    await eventually(created, "dry-run NodePartitionings")
    await cluster.settle()
    assert all(np["spec"]["dryRun"] is True for np in (await cluster.nps()).values())
    assert await cluster.admitted() == []
    for name in await cluster.nps():
        await cluster.set_phase(name, "Skipped")

    async def completed() -> bool:
        return (await cluster.condition("RolloutCompleted")).get("reason") == "DryRunCompleted"

    await eventually(completed, "a skipped dry run completes")
    assert (await cluster.plan())["status"]["phase"] == "Completed"
    assert (await cluster.plan())["status"]["summary"]["skipped"] == 6
    assert await cluster.admitted() == []
    assert await cluster.resync() == 0


async def test_profile_edit_repartitions_its_nodes_under_the_limits(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    await cluster.client.create(PLANS, plan_body())

    async def created() -> bool:
        return len(await cluster.nps()) == 6

    await eventually(created, "NodePartitionings")
    await cluster.settle()
    # Every node already in its desired state (the NodePartitioning controller's short-circuit).
    for node in INFERENCE + TRAINING:
        np = f"rollout-{node}"
        if ADMITTED_ANNOTATION in ((await cluster.client.get(NPS, np))["metadata"].get("annotations") or {}):
            await cluster.set_phase(np, "Draining")
        await cluster.set_phase(np, "Succeeded", current_hash=True)

    async def phase_is(phase: str) -> bool:
        return bool((await cluster.plan()).get("status", {}).get("phase") == phase)

    await eventually(lambda: phase_is("Completed"), "completed")
    before = {n: np["spec"]["desiredHash"] for n, np in (await cluster.nps()).items()}

    await cluster.client.patch(PROFILES, "mi300x-cpx", {"spec": {"expectedResources": {"amd.com/gpu": "32"}}})

    async def held() -> bool:
        return (await cluster.condition("PlanReady")).get("reason") == "ProfileNotReady"

    await eventually(held, "an edit not validated yet holds its nodes")
    assert {n: np["spec"]["desiredHash"] for n, np in (await cluster.nps()).items()} == before

    await cluster.make_ready("mi300x-cpx")
    new_hash = desired_hash(
        {**PROFILE_DOCS["mi300x-cpx"]["spec"], "expectedResources": {"amd.com/gpu": "32"}}
    )

    async def rehashed() -> bool:
        nps = await cluster.nps()
        return all(nps[f"rollout-{n}"]["spec"]["desiredHash"] == new_hash for n in INFERENCE)

    await eventually(rehashed, "every NodePartitioning of the edited profile gets the new hash")
    after = await cluster.nps()
    assert all(after[f"rollout-{n}"]["spec"]["desiredHash"] == before[f"rollout-{n}"] for n in TRAINING)
    await eventually(lambda: phase_is("Progressing"), "a profile edit never reports Completed")
    # Still Succeeded, and the admission of the old hash does not count for the new one.
    assert not set(await cluster.admitted()) & set(INFERENCE)
    # The NodePartitioning controller sends Succeeded ones with a new hash back to Pending …
    for node in INFERENCE:
        await cluster.set_node_phase("rollout", node, "Pending")

    async def one() -> bool:
        return set(await cluster.admitted()) & set(INFERENCE) == {"mi300x-0"}

    await eventually(one, "re-partitioning starts under maxParallel=1")
    await cluster.settle()
    assert set(await cluster.admitted()) & set(INFERENCE) == {"mi300x-0"}
    assert await cluster.resync() == 0


async def test_node_changes_follow_the_selection(cluster: Cluster) -> None:
    await cluster.create_profiles("mi300x-cpx", "mi300x-spx")
    await cluster.client.create(PLANS, plan_body())

    async def names(expected: set[str]) -> None:
        async def check() -> bool:
            return set(await cluster.nps()) == {f"rollout-{n}" for n in expected}

        await eventually(check, f"NodePartitionings for {sorted(expected)}")

    await names(set(INFERENCE + TRAINING))
    # Relabelled out of every rule: its NodePartitioning goes.
    await cluster.client.patch(NODES, "mi300x-3", {"metadata": {"labels": {POOL: "batch"}}})
    await names(set(INFERENCE[:3] + TRAINING))
    # A new node of the pool gets one.
    new = next(
        n
        for n in node_objects(Fleet(nodePools=[NodePool(name="mi300x", count=5, gpu=_MI300X)]))
        if n["metadata"]["name"] == "mi300x-4"
    )
    new["metadata"]["labels"][POOL] = "inference"
    await cluster.client.create(NODES, new)
    await names({*INFERENCE[:3], "mi300x-4", *TRAINING})
    # A deleted node loses its NodePartitioning.
    await cluster.client.delete(NODES, "mi300x-train-1")
    await names({*INFERENCE[:3], "mi300x-4", "mi300x-train-0"})
    await cluster.settle()
    assert (await cluster.plan())["status"]["summary"]["totalNodes"] == 5
    deleted = [e for e in await cluster.events() if e["reason"] == "NodePartitioningDeleted"]
    assert len(deleted) == 2
    assert await cluster.resync() == 0


def test_transition_events_fire_on_flips_only() -> None:
    def status(**conditions: tuple[str, str]) -> dict[str, Any]:
        return {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": f"{t} {r}"}
                for t, (s, r) in conditions.items()
            ]
        }

    conflict = status(PlanReady=("False", "NodeConflict"), RolloutCompleted=("False", "RolloutInProgress"))
    assert transition_events(None, conflict) == [("Warning", "NodeConflict", "PlanReady NodeConflict")]
    assert transition_events(conflict, conflict) == []
    done = status(PlanReady=("True", "PlanValid"), RolloutCompleted=("True", "AllNodesSucceeded"))
    assert transition_events(conflict, done) == [
        ("Normal", "RolloutCompleted", "RolloutCompleted AllNodesSucceeded")
    ]
    assert transition_events(done, done) == []


# --- expectations: a stale cache never admits twice ----------------------------------------------


def _obj(name: str, rv: str, uid: str = "u1", **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "uid": uid, "annotations": annotations}}


def test_expectations_serve_our_writes_until_the_cache_shows_them() -> None:
    exp = Expectations()
    cached = _obj("a", "1")
    admitted = _obj("a", "2", admitted="h")
    exp.wrote("a", cached, admitted, conditional=True)
    assert exp.view("a", cached) is not None and exp.view("a", cached) == admitted
    assert exp.exact("a")
    revoked = _obj("a", "3")
    exp.wrote("a", admitted, revoked, conditional=True)
    assert exp.view("a", admitted) == revoked  # an intermediate version of ours is still stale
    assert exp.view("a", cached) == revoked
    assert exp.view("a", _obj("a", "3")) == _obj("a", "3") and len(exp) == 0  # caught up: dropped
    assert exp.view("a", cached) == cached  # from then on the cache is trusted

    exp.wrote("b", None, _obj("b", "5"), conditional=False)  # created, not yet in the cache
    assert exp.view("b", None) == _obj("b", "5") and not exp.exact("b")
    exp.deleted("b", _obj("b", "6"))  # the informer saw it deleted: no ghost stays behind
    assert exp.view("b", None) is None and len(exp) == 0

    exp.wrote("c", _obj("c", "7"), _obj("c", "7"), conditional=True)  # a no-op write
    assert len(exp) == 0
    exp.wrote("d", _obj("d", "8"), None, conditional=False)  # deleted at once
    assert exp.view("d", _obj("d", "8")) is None
    exp.deleted("d", _obj("d", "8", uid="other"))
    assert len(exp) == 0


Objs = list[dict[str, Any]]
Names = list[str]


class FrozenInformer:
    """An informer whose cache moves only when the test says so (a watch that lags arbitrarily)."""

    def __init__(self, objects: Objs | None = None) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects or []}
        #: Has it heard from the API server lately (``Informer.stale``)?
        self.stale = False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)

    def list(self) -> Objs:
        return list(self.objects.values())

    def keys(self) -> Names:
        return list(self.objects)

    def add_handler(self, **_: Any) -> None:
        return None


async def test_a_lagging_cache_never_admits_twice() -> None:
    client = InMemoryKubeClient.fresh(fleet=FLEET)
    try:
        for name in ("mi300x-cpx", "mi300x-spx"):
            await client.create(PROFILES, PROFILE_DOCS[name])
        profiles = FrozenInformer()
        for name in ("mi300x-cpx", "mi300x-spx"):
            await make_ready(client, name)
            profiles.objects[name] = await client.get(PROFILES, name)
        plan = await client.create(PLANS, plan_body(rollout={"maxParallel": 2, "maxUnavailable": 2}))
        plans = FrozenInformer([plan])
        nodes = FrozenInformer((await client.list(NODES))["items"])
        nps = FrozenInformer()
        reconciler = PlanController(
            client,
            cast(Any, plans),
            cast(Any, nodes),
            cast(Any, profiles),
            cast(Any, nps),
            EventRecorder(client, "test"),
            FakeClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC)),
        )
        reconcile = Shaped(reconciler, reconciler.clock)

        async def admitted() -> list[str]:
            items = (await client.list(NPS))["items"]
            return sorted(np["spec"]["nodeName"] for np in items if is_admitted(np))

        await reconcile(Request(None, "rollout"))  # creates; admits nothing on views it just wrote
        assert len((await client.list(NPS))["items"]) == 6 and await admitted() == []
        nps.objects = {o["metadata"]["name"]: o for o in (await client.list(NPS))["items"]}
        nodes.stale = True  # the Node watch went silent: admitting from it could exceed the limits
        for _ in range(3):
            assert await reconcile(Request(None, "rollout"))  # deferred
        assert await admitted() == []
        nodes.stale = False
        for _ in range(3):  # the cache shows the creates, then never moves again
            assert not await reconcile(Request(None, "rollout"))
        assert await admitted() == ["mi300x-0", "mi300x-1"]
        client.reset_counts()
        await reconcile(Request(None, "rollout"))
        assert client.writes == 0
        await reconciler.recorder.flush()
    finally:
        await client.close()

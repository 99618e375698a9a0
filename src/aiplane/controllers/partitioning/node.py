"""NodePartitioning controller: the thin executor around :func:`node_decide.decide`.

Observe (the NP, its Node, its profile, the pods on the node and DCM's Events, all from informer caches)
→ decide (pure, ``node_decide``) → act in the order the decision module prescribes, stopping at the
first API error so the runtime retries with backoff: (1) add the finalizer with a JSON patch that tests
the NP's resourceVersion (the commit point of the plan's admission), (2) write the Node once, guarded by
its resourceVersion, (3) evict through the Eviction API (a PodDisruptionBudget's 429 and a vanished
pod's 404 are answers, not errors), (4) write status through ``/status``, (5) record Events, (6) remove
the finalizer only after the node write succeeded. An API error never makes a node Failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import finalizer_patch_add, finalizer_patch_remove
from aiplane.apimachinery.selectors import compile_selector
from aiplane.controllers.partitioning.node_actions import Evict, apply_node_actions
from aiplane.controllers.partitioning.node_decide import NodeObservation, Observed, Step, decide_step, taints
from aiplane.controllers.partitioning.node_run import NodeLogicConfig
from aiplane.controllers.partitioning.options import PartitioningOptions
from aiplane.controllers.partitioning.views import (
    BlockedEviction,
    NodePartitioningView,
    NodeView,
    ProfileView,
    dcm_event_for_cache,
    dcm_event_views,
    node_partitioning_view,
    node_view,
    pod_for_drain,
    pod_views,
    profile_view,
)
from aiplane.controllers.partitioning.vocabulary import (
    DCM_EVENT_SOURCE,
    DRAINING,
    FINALIZER,
    RETRY_BACKOFF_CAP,
    STALE_RECHECK,
)
from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import InformerFactory, all_fresh
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import EVENTS, NODES, PDBS, PODS
from aiplane.kube.shape import Shaped
from aiplane.kube.status import StatusWriter

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "nodepartitioning"
FIELD_MANAGER: Final = field_manager_for(NAME)
COMPONENT: Final = event_source_for(NAME)
BY_NODE = "spec.nodeName"
BY_PROFILE = "spec.profileRef.name"
BY_PHASE = "status.phase"
# kube-apiserver's cause for a PodDisruptionBudget with no disruption left (registry/core/pod/storage/eviction.go).
_BUDGET_CAUSE: Final = re.compile(
    r"The disruption budget (?P<name>\S+) (?P<detail>needs \d+ healthy pods and has \d+)"
)


def _node_name(obj: Mapping[str, Any]) -> list[str]:
    name = objects.spec(obj).get("nodeName")
    return [name] if isinstance(name, str) and name else []


def _profile_name(obj: Mapping[str, Any]) -> list[str]:
    ref = objects.spec(obj).get("profileRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return [name] if isinstance(name, str) and name else []


def _phase(obj: Mapping[str, Any]) -> list[str]:
    phase = objects.status(obj).get("phase")
    return [phase] if isinstance(phase, str) and phase else []


def _node_key(name: str) -> str:
    """A Node's key in the overlay of our Node writes (the ChildWriter's scheme)."""
    return expectation_key("Node", None, name)


def _event_node(obj: Mapping[str, Any]) -> list[str]:
    host = (obj.get("source") or {}).get("host")
    involved = obj.get("involvedObject") or {}
    names = [host] if host else []
    if involved.get("kind") == "Node" and involved.get("name"):
        names.append(involved["name"])
    return names


class _Views:
    """The views of the NodePartitionings, Nodes and profiles reconciled, built once per cached object.

    Informer caches replace an object on every change and never mutate one, so an object's identity
    stands for its version. Building the three views on every reconcile (the profile's hash, the
    Node's allocatable quantities) was a fifth of the NodePartitioning controller's CPU.
    """

    def __init__(self) -> None:
        self.nps: dict[str, NodePartitioningView] = {}
        self.nodes: dict[str, NodeView] = {}
        self.profiles: dict[str, tuple[dict[str, Any], ProfileView]] = {}

    def np(self, key: str, obj: dict[str, Any]) -> NodePartitioningView:
        seen = self.nps.get(key)
        if seen is None or seen.obj is not obj:
            seen = self.nps[key] = node_partitioning_view(obj)
        return seen

    def node(self, name: str, obj: dict[str, Any]) -> NodeView:
        seen = self.nodes.get(name)
        if seen is None or seen.obj is not obj:
            seen = self.nodes[name] = node_view(obj)
        return seen

    def profile(self, obj: dict[str, Any]) -> ProfileView:
        name = objects.name(obj)
        seen = self.profiles.get(name)
        if seen is None or seen[0] is not obj:
            if len(self.profiles) > 64:  # profiles are few; a deleted one's view need not stay
                self.profiles.clear()
            seen = self.profiles[name] = (obj, profile_view(obj))
        return seen[1]


@dataclass(frozen=True)
class NodeObserved:
    """One NodePartitioning as observed: the objects the executor writes and the decision's input."""

    key: str
    np: dict[str, Any]
    node: dict[str, Any] | None
    observed: Observed
    #: The pods the decision rests on (LISTed when it disrupts) and the refusals remembered for them.
    pods: tuple[dict[str, Any], ...]
    blocked: tuple[BlockedEviction, ...]


class NodePartitioningExecutor:
    """Runs decisions for one NodePartitioning at a time (the controller guarantees per-key exclusion)."""

    def __init__(
        self,
        client: KubeClient,
        informers: InformerFactory,
        config: NodeLogicConfig,
        clock: Clock,
        recorder: EventRecorder,
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.nps = informers.informer(kinds.NODEPARTITIONINGS)
        self.nps.add_indexer(BY_NODE, _node_name)
        self.nps.add_indexer(BY_PROFILE, _profile_name)
        self.nps.add_indexer(BY_PHASE, _phase)
        self.nodes = informers.informer(NODES)
        self.pods = informers.informer(PODS, transform=pod_for_drain)
        self.pods.add_indexer(BY_NODE, _node_name)
        self.profiles = informers.informer(kinds.PARTITIONINGPROFILES)
        self.events = informers.informer(
            EVENTS, field_selector=f"source={DCM_EVENT_SOURCE}", transform=dcm_event_for_cache
        )
        self.events.add_indexer("node", _event_node)
        self.recorder = recorder
        self.status = StatusWriter(client, kinds.NODEPARTITIONINGS, FIELD_MANAGER)
        # Our own latest write of each NP: the informer lags behind it, and deciding on the older
        # cached copy would replay a step already done (re-tainting a node after the operator step).
        self.writes = Expectations()
        # Our own latest write of each Node, likewise: a decision on a Node cache that lags our own
        # node write sees our marks missing. One that then writes nothing to the node goes through
        # unguarded (its status write carries only the NodePartitioning's resourceVersion): DCM's
        # state label left from the node's previous profile read as the answer to our request
        # (Verifying with the drain's taint left on), a deletion that finds no cordon of ours.
        self.node_writes = Expectations()
        #: The Node write (guarded by the Node's resourceVersion), recorded under its ``Node//name`` key.
        self.node_writer = ChildWriter(client, FIELD_MANAGER, self.node_writes)
        self._views = _Views()
        self.nps.add_handler(on_delete=self._forget)
        self.nodes.add_handler(on_delete=self._forget_node)
        # The Eviction API's last refusal per NP and pod: nothing watches that answer, and the drain
        # reports it (which budget holds which workload). Kept only for pods still on the node.
        self.blocked: dict[str, dict[str, BlockedEviction]] = {}
        #: The NP as ``act`` left it (its finalizer patch), for ``report``'s status write; per key, and
        #: the work queue never runs one key twice at once.
        # The NP as act left it, for report (a second ``writes.view`` with the object the first one
        # served would count the cache as caught up and drop the read-your-writes entry).
        self._acted: dict[str, dict[str, Any]] = {}

    def _forget_node(self, obj: dict[str, Any]) -> None:
        self._views.nodes.pop(objects.name(obj), None)
        self.node_writes.deleted(_node_key(objects.name(obj)), obj)

    def _forget(self, obj: dict[str, Any]) -> None:
        self._views.nps.pop(objects.name(obj), None)
        self.writes.deleted(objects.name(obj), obj)
        self.blocked.pop(objects.name(obj), None)
        self._acted.pop(objects.name(obj), None)

    # --- mapping other kinds to the NodePartitionings they affect -----------------------------------

    def for_node(self, name: str) -> Iterable[Request]:
        return [Request(None, np["metadata"]["name"]) for np in self.nps.by_index(BY_NODE, name)]

    def node_requests(self, node: dict[str, Any]) -> Iterable[Request]:
        return self.for_node(node["metadata"]["name"])

    def pod_requests(self, pod: dict[str, Any]) -> Iterable[Request]:
        name = (pod.get("spec") or {}).get("nodeName")
        return self.for_node(name) if name else ()

    def event_requests(self, event: dict[str, Any]) -> Iterable[Request]:
        return [r for node in _event_node(event) for r in self.for_node(node)]

    def budget_requests(self, pdb: dict[str, Any]) -> Iterable[Request]:
        """A PodDisruptionBudget changed (released by a workload's arbiter, or its status caught up):
        the drains of nodes hosting pods it selects retry their evictions now, not at the next
        eviction retry. A drain waits for budgets one group at a time, so each retry interval saved
        is saved once per group."""
        namespace = objects.namespace(pdb)
        selector = compile_selector(objects.spec(pdb).get("selector"))
        requests = []
        # Only the draining NodePartitionings (an index), not the fleet's: budgets change often while
        # workloads roll, and each change was a pass over every NodePartitioning.
        for np in self.nps.by_index(BY_PHASE, DRAINING):
            node_name = str(objects.spec(np).get("nodeName") or "")
            if any(
                objects.namespace(pod) == namespace and selector.matches(objects.labels(pod))
                for pod in self.pods.by_index(BY_NODE, node_name)
            ):
                requests.append(Request(None, objects.name(np)))
        return requests

    def profile_requests(self, profile: dict[str, Any]) -> Iterable[Request]:
        name = profile["metadata"]["name"]
        return [Request(None, np["metadata"]["name"]) for np in self.nps.by_index(BY_PROFILE, name)]

    # --- the shape: observe → decide → act → report ---------------------------------------------------

    async def observe(self, request: Request) -> NodeObserved | None:
        """The NP (through the overlay of our writes), its Node, profile, pods and DCM's Events; when
        the decision on the caches taints the node or evicts, the node's pods LISTed from the API server
        (see below) and the decision's observation taken from that list instead."""
        np = self.writes.view(request.key, self.nps.get(request.key))
        if np is None:
            return None
        spec = np.get("spec") or {}
        node_name = spec.get("nodeName", "")
        node = self.node_writes.view(_node_key(node_name), self.nodes.get(node_name))
        profile = self.profiles.get(((spec.get("profileRef") or {}).get("name")) or "")
        pods = self.pods.by_index(BY_NODE, node_name)
        dcm_events = self.events.by_index("node", node_name)
        blocked = self._blocked_for(request.key, pods)
        seen = NodeObservation(
            np=self._views.np(request.key, np),
            node=self._views.node(node_name, node) if node is not None else None,
            profile=self._views.profile(profile) if profile is not None else None,
            pods=pod_views(pods),
            dcm_events=dcm_event_views(dcm_events),
            blocked=blocked,
        )
        observed = Observed(seen, self.config, fresh=all_fresh((self.nps, self.nodes, self.pods)))
        first = decide_step(observed, self.clock.now())
        if not first.stale and (taints(first.decision) or first.decision.evictions):
            # The taint evicts without asking PodDisruptionBudgets: "no workload pod left" must hold on
            # the API server, not only in a cache that may lag a pod bound just before the cordon
            # (drain.py). The cordon is committed (the decision saw it), so this LIST is after it.
            # An eviction is confirmed the same way: the Eviction API charges the budget and records
            # the pod's *name* as disrupted before it checks our uid precondition, so evicting a pod
            # the cache still shows here but that was evicted and recreated elsewhere would block
            # its replacement's budget for two minutes (kubernetes pkg/registry/core/pod/storage/
            # eviction.go, checkAndDecrement then addConditionAndDeletePod).
            pods = await self._pods_listed_on(node_name)
            blocked = self._blocked_for(request.key, pods)
            observed = replace(observed, seen=replace(seen, pods=pod_views(pods), blocked=blocked))
        return NodeObserved(request.key, np, node, observed, tuple(pods), blocked)

    def decide(self, observed: NodeObserved, now: datetime) -> Step:
        return decide_step(observed.observed, now)

    async def act(self, observed: NodeObserved, step: Step) -> None:
        """Steps 1-3 of ``node_decide``'s order: the finalizer, the one Node write, the evictions."""
        if step.stale:
            return
        key, decision = observed.key, step.decision
        self._forget_blocked(key, observed.pods)
        current = observed.np
        if decision.finalizer == "add":
            current = await self._patch_finalizer(key, current, finalizer_patch_add(current, FINALIZER))
        self._acted[key] = current
        if decision.node_mutations and observed.node is not None:
            node = observed.node
            updated = apply_node_actions(node, decision.node_mutations)
            await self.node_writer.replace(NODES, node, updated)
        for eviction in decision.evictions:
            await self._evict(key, eviction)

    async def report(self, observed: NodeObserved, step: Step) -> Result | None:
        """Steps 4-6: the status (on the NP as step 1 left it), the Events, then the finalizer's removal
        (only after the Node write of step 2 succeeded); and when to look again."""
        key, decision = observed.key, step.decision
        current = self._acted.pop(key, observed.np)
        if step.stale:
            return Result(requeue_after=STALE_RECHECK)
        if decision.status is not None:
            written = await self.status.write(current, decision.status)
            if written is not None:
                self.writes.wrote(key, current, written, conditional=True)
                current = written
        for event in decision.events:
            self.recorder.emit(current, event.type, event.reason, event.message)
        if decision.finalizer == "remove":
            await self._patch_finalizer(key, current, finalizer_patch_remove(current, FINALIZER))
        if not decision.evictions:
            self.blocked.pop(key, None)
        elif set(self.blocked.get(key, {}).values()) != set(observed.blocked):
            return Result(requeue=True)  # report the Eviction API's new answer now, not a retry later
        return Result(requeue_after=decision.requeue_after) if decision.requeue_after else None

    async def _pods_listed_on(self, node_name: str) -> list[dict[str, Any]]:
        """The node's pods as the API server has them now (a quorum read, as ``kubectl drain`` lists)."""
        listed = await self.client.list(PODS, field_selector=f"spec.nodeName={node_name}")
        return [pod_for_drain(p) for p in listed.get("items") or ()]

    def _blocked_for(self, key: str, pods: Iterable[Mapping[str, Any]]) -> tuple[BlockedEviction, ...]:
        """The remembered refusals for pods still on the node."""
        memory = self.blocked.get(key) or {}
        present = {f"{objects.namespace(p)}/{objects.name(p)}" for p in pods}
        return tuple(b for pod_key, b in memory.items() if pod_key in present)

    def _forget_blocked(self, key: str, pods: Iterable[Mapping[str, Any]]) -> None:
        """Forget the refusals of pods no longer on the node (after the decision: a pod the cache
        lacks but the confirming LIST found keeps its memory)."""
        memory = self.blocked.get(key)
        if memory:
            present = {f"{objects.namespace(p)}/{objects.name(p)}" for p in pods}
            for pod_key in [k for k in memory if k not in present]:
                del memory[pod_key]

    async def _patch_finalizer(
        self, key: str, np: dict[str, Any], patch: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Apply a guarded finalizer JSON patch (nothing when it is empty); the object it returned."""
        if not patch:
            return np
        written = await self.client.patch(kinds.NODEPARTITIONINGS, objects.name(np), patch, patch_type="json")
        self.writes.wrote(key, np, written, conditional=True)
        return written

    async def _evict(self, key: str, eviction: Evict) -> None:
        """Evict one pod; a PodDisruptionBudget's 429 and a vanished pod are answers, not errors.
        The 429's budget is remembered for the drain to report; any other answer forgets it."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if eviction.uid:
            options["preconditions"] = {"uid": eviction.uid}
        pod_key = f"{eviction.namespace}/{eviction.name}"
        memory = self.blocked.setdefault(key, {})
        try:
            await self.client.evict(eviction.name, eviction.namespace, delete_options=options)
        except ApiError as exc:
            # Decided here: a budget's 429 is remembered for the drain to report, a vanished (404) or
            # replaced (409) pod is gone from the node; anything else propagates.
            if not (exc.too_many_requests or exc.not_found or exc.conflict):
                raise
            refusal = _budget_refusal(exc, eviction) if exc.too_many_requests else None
            if refusal is not None:
                memory[pod_key] = refusal
                return
        memory.pop(pod_key, None)


def _budget_refusal(exc: ApiError, eviction: Evict) -> BlockedEviction | None:
    """The PodDisruptionBudget a 429 names in its ``DisruptionBudget`` cause (None: another 429,
    e.g. a budget still being processed, which says nothing lasting)."""
    details = exc.body.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    for cause in causes if isinstance(causes, list) else ():
        if not isinstance(cause, Mapping) or cause.get("reason") != "DisruptionBudget":
            continue
        match = _BUDGET_CAUSE.search(str(cause.get("message") or ""))
        if match:
            return BlockedEviction(
                eviction.namespace, eviction.name, eviction.uid, match["name"], match["detail"]
            )
    return None


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    # Finalizer JSON patches on the NodePartitioning; its status.
    Permission("infrastructure.silogen.ai", ("nodepartitionings",), ("list", "watch", "patch")),
    Permission("infrastructure.silogen.ai", ("nodepartitionings/status",), ("patch",)),
    Permission("infrastructure.silogen.ai", ("partitioningprofiles",), READ),
    # Cordon, taint and the DCM profile label: a guarded replace of the Node.
    Permission("", ("nodes",), ("list", "watch", "update")),
    # The drain: pods on the node, evicted through the Eviction API (never deleted).
    Permission("", ("pods",), READ),
    Permission("", ("pods/eviction",), ("create",)),
    # A budget that changes (released by a workload's arbiter) resumes the drains it held.
    Permission("policy", ("poddisruptionbudgets",), READ),
    # The DCM's Events (source=...) are read to report its failures; ours are written.
    Permission("", ("events",), READ),
    EVENTS_WRITE,
)


def setup_controller(manager: Manager) -> Controller:
    """Four workers by default: node operations are independent and mostly wait on the cluster."""
    drain, operator, verify = manager.options(PartitioningOptions).timeouts()
    config = NodeLogicConfig(drain_timeout=drain, operator_timeout=operator, verify_timeout=verify)
    executor = NodePartitioningExecutor(
        manager.client, manager.informers, config, manager.clock, manager.recorder(NAME)
    )
    return (
        Controller.build(NAME)
        .for_(kinds.NODEPARTITIONINGS)
        .watches(NODES, executor.node_requests)
        .watches(PODS, executor.pod_requests)
        .watches(kinds.PARTITIONINGPROFILES, executor.profile_requests)
        .watches(PDBS, executor.budget_requests)
        .watches(EVENTS, executor.event_requests, field_selector=f"source={DCM_EVENT_SOURCE}")
        .workers(4)
        .max_backoff(RETRY_BACKOFF_CAP)
        .reconcile(Shaped(executor, manager.clock))
    )


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers nodepartitioning`` (also part of ``all``)."""
    manager.add_controller(setup_controller(manager))

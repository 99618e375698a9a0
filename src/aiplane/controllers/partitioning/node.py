"""NodePartitioning controller: the thin executor around :func:`node_logic.decide`.

Observe (the NP, its Node, its profile, the pods on the node and DCM's Events, all from informer caches)
→ decide (pure, ``node_logic``) → act in the order the decision module prescribes, stopping at the
first API error so the runtime retries with backoff: (1) add the finalizer with a JSON patch that tests
the NP's resourceVersion (the commit point of the plan's admission), (2) write the Node once, guarded by
its resourceVersion, (3) evict through the Eviction API (a PodDisruptionBudget's 429 and a vanished
pod's 404 are answers, not errors), (4) write status through ``/status``, (5) record Events, (6) remove
the finalizer only after the node write succeeded. An API error never makes a node Failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from aiplane.apimachinery.meta import finalizer_patch_add, finalizer_patch_remove
from aiplane.controllers.partitioning import node_logic
from aiplane.controllers.partitioning.node_logic import NodeLogicConfig, decide, observe
from aiplane.controllers.partitioning.profile import profiles_resource
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.controller import Controller, Request, Result
from aiplane.kube.events import EventRecorder
from aiplane.kube.resources import EVENTS, NODES, PODS, resource_for

FIELD_MANAGER = "aiplane-nodepartitioning"
BY_NODE = "spec.nodeName"
BY_PROFILE = "spec.profileRef.name"


def node_partitionings_resource() -> Any:
    return resource_for("infrastructure.silogen.ai/v1alpha1", "NodePartitioning")


def _node_name(obj: dict[str, Any]) -> list[str]:
    name = (obj.get("spec") or {}).get("nodeName")
    return [name] if name else []


def _profile_name(obj: dict[str, Any]) -> list[str]:
    name = ((obj.get("spec") or {}).get("profileRef") or {}).get("name")
    return [name] if name else []


def _event_node(obj: dict[str, Any]) -> list[str]:
    host = (obj.get("source") or {}).get("host")
    involved = obj.get("involvedObject") or {}
    names = [host] if host else []
    if involved.get("kind") == "Node" and involved.get("name"):
        names.append(involved["name"])
    return names


def _rv(obj: dict[str, Any]) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


class NodePartitioningExecutor:
    """Runs decisions for one NodePartitioning at a time (the controller guarantees per-key exclusion)."""

    def __init__(self, client: KubeClient, informers: Any, config: NodeLogicConfig) -> None:
        self.client = client
        self.config = config
        self.nps = informers.informer(node_partitionings_resource())
        self.nps.add_indexer(BY_NODE, _node_name)
        self.nps.add_indexer(BY_PROFILE, _profile_name)
        self.nodes = informers.informer(NODES)
        self.pods = informers.informer(PODS)
        self.pods.add_indexer(BY_NODE, _node_name)
        self.profiles = informers.informer(profiles_resource())
        self.events = informers.informer(EVENTS, field_selector=f"source={node_logic.DCM_EVENT_SOURCE}")
        self.events.add_indexer("node", _event_node)
        self.recorder = EventRecorder(client, "nodepartitioning-controller")
        # Our own latest write of each NP: the informer lags behind it, and deciding on the older
        # cached copy would replay a step already done (re-tainting a node after the operator step).
        self._written: dict[str, dict[str, Any]] = {}

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

    def profile_requests(self, profile: dict[str, Any]) -> Iterable[Request]:
        name = profile["metadata"]["name"]
        return [Request(None, np["metadata"]["name"]) for np in self.nps.by_index(BY_PROFILE, name)]

    # --- reconcile ------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        np = self.nps.get(request.key)
        if np is None:
            self._written.pop(request.key, None)
            return None
        mine = self._written.get(request.key)
        if mine is not None:
            if mine["metadata"].get("uid") == np["metadata"].get("uid") and _rv(mine) > _rv(np):
                np = mine
            else:
                del self._written[request.key]  # the cache caught up (or the NP was recreated)
        spec = np.get("spec") or {}
        node_name = spec.get("nodeName", "")
        node = self.nodes.get(node_name)
        profile = self.profiles.get(((spec.get("profileRef") or {}).get("name")) or "")
        pods = self.pods.by_index(BY_NODE, node_name)
        dcm_events = self.events.by_index("node", node_name)
        now = datetime.now(UTC)
        decision = decide(observe(np, node, profile, pods, dcm_events), now, self.config)
        if decision.is_noop and not decision.evictions:
            return Result(requeue_after=decision.requeue_after) if decision.requeue_after else None
        np_res = node_partitionings_resource()
        current = np
        if decision.finalizer == "add":
            patch = finalizer_patch_add(current, node_logic.FINALIZER)
            if patch:
                current = await self.client.patch(
                    np_res, current["metadata"]["name"], patch, patch_type="json"
                )
                self._written[request.key] = current
        if decision.node_mutations and node is not None:
            updated = node_logic.apply_node_actions(node, decision.node_mutations)
            await self.client.replace(NODES, updated, field_manager=FIELD_MANAGER)
        for eviction in decision.evictions:
            options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if eviction.uid:
                options["preconditions"] = {"uid": eviction.uid}
            try:
                await self.client.evict(eviction.name, eviction.namespace, delete_options=options)
            except ApiError as exc:
                if not (exc.too_many_requests or exc.not_found or exc.conflict):
                    raise
        if decision.status is not None:
            body = {**current, "status": decision.status}
            current = await self.client.replace_status(np_res, body, field_manager=FIELD_MANAGER)
            self._written[request.key] = current
        for event in decision.events:
            self.recorder.emit(current, event.type, event.reason, event.message)
        if decision.finalizer == "remove":
            patch = finalizer_patch_remove(current, node_logic.FINALIZER)
            if patch:
                self._written[request.key] = await self.client.patch(
                    np_res, current["metadata"]["name"], patch, patch_type="json"
                )
        return Result(requeue_after=decision.requeue_after) if decision.requeue_after else None


def setup_controller(manager: Any) -> Controller:
    options = manager.controller_options
    config = NodeLogicConfig(
        drain_timeout=timedelta(seconds=options.drain_timeout),
        operator_timeout=timedelta(seconds=options.operator_timeout),
        verify_timeout=timedelta(seconds=options.verify_timeout),
    )
    executor = NodePartitioningExecutor(manager.client, manager.informers, config)
    return (
        Controller.build("nodepartitioning")
        .for_(node_partitionings_resource())
        .watches(NODES, executor.node_requests)
        .watches(PODS, executor.pod_requests)
        .watches(profiles_resource(), executor.profile_requests)
        .watches(EVENTS, executor.event_requests, field_selector=f"source={node_logic.DCM_EVENT_SOURCE}")
        .workers(max(options.max_concurrent_reconciles, 4))
        .reconcile(executor.reconcile)
    )


async def setup(manager: Any) -> None:
    """``aiplane run --controllers nodepartitioning`` (also part of ``all``)."""
    controller = setup_controller(manager)
    controller.bind(
        manager.informers, observer=manager.metrics.controllers, queue_metrics=manager.metrics.workqueue
    )
    manager.add_controller(controller)

"""Simulated agents: the parts of a real cluster that are not the API server and that we do not own.

A real cluster has kubelets running pods, kube-controller-manager's DaemonSet and taint-eviction
controllers, and (on AMD GPU nodes) the AMD GPU operator's device plugin and Device Config Manager.
Our controllers observe their effects (pods Running, DaemonSet pods evicted by a taint and coming
back, ``dcm.amd.com/gpu-config-profile-state``, ``amd.com/gpu`` allocatable), so the embedded cluster
plays them, in-process, on the event loop that serves it:

* :mod:`.scheduler` — kube-scheduler-lite (binds unbound pods of the default scheduler to nodes that
  fit, or says why not);
* :mod:`.gang` — a Volcano gang scheduler (pods of a PodGroup are bound all-or-nothing);
* :mod:`.kubelet` — kubelet-lite (bound pods become Running/Ready; NotReady nodes make their pods
  NotReady; injected container restarts, pod failures and NotReady nodes) and the NoExecute taint
  eviction of kube-controller-manager;
* :mod:`.daemonsets` — the DaemonSet controller;
* :mod:`.replicasets` and :mod:`.deployments` — the ReplicaSet and Deployment controllers (the
  arithmetic of rolling updates in :mod:`.rollout`);
* :mod:`.hpa` — the HorizontalPodAutoscaler controller (bounds only: the sim serves no metrics APIs;
  the sim-only annotation ``sim.aiplane.io/desired-replicas`` stands in for a metric);
* :mod:`.volumes` — the PersistentVolume controller and a hostpath external-provisioner;
* :mod:`.leaderworkerset` — the LeaderWorkerSet controller and its pod webhook;
* :mod:`.kueue` — Kueue's webhooks, Workloads and quota admission (:mod:`.kueue_rules`).

The AMD GPU operator (device plugin, Device Config Manager) and the GPU metrics exporter are not here:
they are the simulated *hardware*, which runs as an API client so that it also runs beside a real
control plane (:mod:`aiplane.sim.hardware`); the embedded cluster starts it on an in-memory client of
its own server and puts the AMD operator at ``agents.amd`` for tests' knobs.

Every agent works like the deletion/GC controllers in ``apiserver/gc.py``: the store calls it
synchronously for every committed write (:meth:`AgentLoop.on_event`), which only queues work; a task on
the event loop does the work through the same ``rest.Api`` verbs HTTP clients use, so clients see the
agents' writes exactly as they would see a kubelet's or a controller's (admission, resourceVersions,
watch events, managedFields with the agent's field manager). Delays are timers on the loop.

docs/sim.md ("Simulated agents") lists how each agent differs from the real component.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiplane.sim.agents.base import AgentLoop, AgentOptions, PodIndex, StoreIndex, record_event, write_status
from aiplane.sim.agents.daemonsets import DaemonSetController
from aiplane.sim.agents.deployments import DeploymentController
from aiplane.sim.agents.gang import GangScheduler
from aiplane.sim.agents.hpa import HorizontalPodAutoscalerController
from aiplane.sim.agents.kubelet import Kubelet
from aiplane.sim.agents.kueue import KueueController
from aiplane.sim.agents.leaderworkerset import LeaderWorkerSetController
from aiplane.sim.agents.replicasets import ReplicaSetController
from aiplane.sim.agents.scheduler import Scheduler, SchedulerCache
from aiplane.sim.agents.volumes import VolumeController

if TYPE_CHECKING:
    from aiplane.sim.apiserver.rest import Api
    from aiplane.sim.hardware import AmdGpuOperator

__all__ = ["AgentLoop", "AgentOptions", "Agents", "PodIndex", "StoreIndex", "record_event", "write_status"]


class Agents:
    """The simulated agents of one embedded cluster: ``scheduler``, ``gang``, ``kubelet``, ``daemonsets``,
    ``replicasets``, ``deployments``, ``hpa``, ``volumes``, ``lws``, ``kueue``; ``amd`` is the simulated AMD GPU
    operator the embedded cluster runs beside them (an API client, :mod:`aiplane.sim.hardware`).

    ``EmbeddedCluster(agents=True)`` builds one and starts it with the cluster; tests reach the knobs
    as ``cluster.agents.amd.fail_nodes``, ``cluster.agents.amd.dcm_delay``,
    ``cluster.agents.kubelet.ready_delay`` …
    """

    def __init__(self, api: Api, options: AgentOptions | None = None) -> None:
        options = options or AgentOptions()
        self.api = api
        self.pods = PodIndex(api)
        #: Nodes and the requests bound to each, shared by both schedulers.
        self.scheduler_cache = SchedulerCache(api)
        self.scheduler: Scheduler = Scheduler(
            api, self.scheduler_cache, retry_interval=options.scheduler_retry_interval
        )
        self.gang: GangScheduler = GangScheduler(
            api,
            self.scheduler_cache,
            retry_interval=options.scheduler_retry_interval,
            overcommit_factor=options.gang_overcommit_factor,
        )
        self.kubelet: Kubelet = Kubelet(api, self.pods, ready_delay=options.ready_delay)
        self.daemonsets: DaemonSetController = DaemonSetController(api, self.pods)
        self.replicasets: ReplicaSetController = ReplicaSetController(api, self.pods)
        self.deployments: DeploymentController = DeploymentController(api, self.pods)
        self.hpa: HorizontalPodAutoscalerController = HorizontalPodAutoscalerController(api)
        self.volumes: VolumeController = VolumeController(api)
        self.lws: LeaderWorkerSetController = LeaderWorkerSetController(api, self.pods)
        self.kueue: KueueController = KueueController(api)
        #: Set by the embedded cluster to its hardware's AMD GPU operator.
        self.amd: AmdGpuOperator | None = None
        self._started = False

    @property
    def loops(self) -> tuple[AgentLoop, ...]:
        return (
            self.scheduler,
            self.gang,
            self.kubelet,
            self.daemonsets,
            self.replicasets,
            self.deployments,
            self.hpa,
            self.volumes,
            self.lws,
            self.kueue,
        )

    def start(self) -> None:
        """Start every agent on the running loop."""
        if self._started:
            return
        self._started = True
        self.pods.start()
        self.scheduler_cache.start()
        for agent in self.loops:
            agent.start()

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for agent in reversed(self.loops):
            await agent.stop()
        self.scheduler_cache.stop()
        self.pods.stop()

    @property
    def idle(self) -> bool:
        """No agent (nor the AMD operator) has queued work (timers may still be pending)."""
        return all(agent.idle for agent in self.loops) and (self.amd is None or self.amd.idle)

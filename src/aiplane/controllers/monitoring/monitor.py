"""The GPU-utilisation monitor: a runnable that polls the metrics endpoint and acts on our workloads.

It is not a reconcile loop: nothing in the cluster says "look again", time does. Every
``RESOURCE_MONITORING_POLLING_INTERVAL`` it

    observe   scrapes the endpoint (5 s timeout; parse with prometheus-client), reads the KaiwoConfig
              ``kaiwo`` (thresholds apply live), the ModelInfers, DGDs, their DCDs and pods from
              informer caches, and attributes every sample to a workload by its pod
    decide    :func:`.decide.decide` per workload (its patch and the status its conditions leave),
              ``now`` from the manager's clock
    act       at most one metadata+spec merge patch (scale to zero / restore), guarded by the
              observed resourceVersion
    report    the two conditions through ``StatusWriter`` (written only when they changed, as a
              merge patch guarded by the resourceVersion, so the owning controller's conditions are
              never overwritten: a race is a 409 and the workload waits for the next poll) and the
              transition Events of :data:`.decide.TRANSITION_EVENTS`

A scrape that fails changes nothing (an outage of the exporter must not mark every workload
underutilised nor reset their streaks); it is logged as a warning once per failure streak.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import aiohttp
import structlog

from aiplane.api import kinds
from aiplane.api.config import KAIWO_CONFIG_NAME, KaiwoConfigSpec
from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_of
from aiplane.controllers.monitoring.decide import (
    DGD,
    MODELINFER,
    TRANSITION_EVENTS,
    Decision,
    Observed,
    Thresholds,
    WorkloadView,
    decide,
    in_target_namespace,
    with_conditions,
)
from aiplane.controllers.monitoring.options import MonitoringOptions, parse_duration
from aiplane.controllers.monitoring.scrape import GpuSample, parse_samples
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, Permission
from aiplane.kube.resources import PODS
from aiplane.kube.status import StatusWriter, emit_transitions

__all__ = ["NAME", "ResourceMonitor", "setup"]

NAME: Final = "resourcemonitor"
FIELD_MANAGER: Final = "aiplane-resourcemonitor"
COMPONENT: Final = "resource-monitor"

#: Pod labels that tie a pod to its workload (ModelInfer directly; a DGD through its DCD).
LABEL_MODELINFER: Final = "modelinfer.volcano.sh/name"
LABEL_DCD: Final = "nvidia.com/selector"
LABEL_GRAPH: Final = "nvidia.com/dynamo-graph-deployment-name"

log = structlog.get_logger("aiplane.resourcemonitor")

Obj = dict[str, Any]


def thresholds_of(config: Mapping[str, Any] | None) -> Thresholds:
    """The KaiwoConfig's ``resourceMonitoring`` (defaults when there is none or it is unreadable)."""
    try:
        spec = KaiwoConfigSpec.model_validate(objects.spec(config) if config else {})
    except ValueError as exc:
        log.warning("KaiwoConfig unreadable: monitoring with defaults", error=str(exc))
        spec = KaiwoConfigSpec.model_validate({})
    rm = spec.resourceMonitoring
    return Thresholds(
        low=float(rm.lowUtilizationThreshold),
        terminate=rm.terminateUnderutilized,
        terminate_after=timedelta(
            seconds=parse_duration(
                rm.terminateUnderutilizedAfter, "resourceMonitoring.terminateUnderutilizedAfter"
            )
        ),
        target_namespaces=tuple(rm.targetNamespaces or ()),
    )


def view_of(kind: str, obj: Mapping[str, Any]) -> WorkloadView:
    """The decision's view of a ModelInfer or DGD from the cache."""
    spec = objects.spec(obj)
    scale: dict[str, Any]
    if kind == MODELINFER:
        scale = {"replicas": int(spec.get("replicas", 1))}
        partition = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get(
            "partition"
        )
        if partition is not None:
            scale["partition"] = partition
    else:
        services = spec.get("services") or {}
        scale = {"services": {name: (s or {}).get("replicas") for name, s in sorted(services.items())}}
    conditions = objects.status(obj).get("conditions")
    return WorkloadView(
        kind=kind,
        namespace=objects.namespace(obj),
        name=objects.name(obj),
        generation=objects.generation(obj) or 0,
        conditions=tuple(c for c in conditions or () if isinstance(c, Mapping)),
        annotations={str(k): str(v) for k, v in objects.annotations(obj).items()},
        scale=scale,
        deleting=objects.is_deleting(obj),
    )


class ResourceMonitor:
    """See the module docstring. ``poll()`` is one tick (tests call it directly)."""

    def __init__(
        self,
        client: KubeClient,
        options: MonitoringOptions,
        *,
        modelinfers: Informer,
        dgds: Informer,
        dcds: Informer,
        pods: Sequence[Informer],
        configs: Informer,
        recorder: EventRecorder,
        clock: Clock,
    ) -> None:
        self.client = client
        self.options = options
        self.modelinfers = modelinfers
        self.dgds = dgds
        self.dcds = dcds
        self.pods = tuple(pods)
        self.configs = configs
        self.recorder = recorder
        self.clock = clock
        self.status = {
            MODELINFER: StatusWriter(client, kinds.MODELINFERS, FIELD_MANAGER),
            DGD: StatusWriter(client, kinds.DGDS, FIELD_MANAGER),
        }
        self._session: aiohttp.ClientSession | None = None
        self._failing = False
        #: Polls completed (successful scrapes), for tests and the debug log.
        self.polls = 0

    @property
    def name(self) -> str:
        return NAME

    # --- observe ----------------------------------------------------------------------------------

    async def scrape(self) -> list[GpuSample] | None:
        """The samples at the endpoint, or ``None`` when it cannot be read (logged once per streak)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.options.timeout))
        try:
            async with self._session.get(self.options.endpoint) as response:
                response.raise_for_status()
                text = await response.text()
            samples = parse_samples(text)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            if not self._failing:
                log.warning("cannot read GPU metrics", endpoint=self.options.endpoint, error=str(exc))
            self._failing = True
            return None
        if self._failing:
            log.info("GPU metrics readable again", endpoint=self.options.endpoint)
        self._failing = False
        return samples

    def _pod(self, namespace: str, name: str) -> Obj | None:
        for informer in self.pods:
            pod = informer.get(f"{namespace}/{name}")
            if pod is not None:
                return pod
        return None

    def owner_of(self, sample: GpuSample) -> tuple[str, str, str] | None:
        """``(kind, namespace, name)`` of the workload running the sample's pod, if it is one of ours."""
        pod = self._pod(sample.namespace, sample.pod)
        if pod is None:
            return None
        labels = objects.labels(pod)
        if labels.get(LABEL_MODELINFER):
            return MODELINFER, sample.namespace, str(labels[LABEL_MODELINFER])
        graph = labels.get(LABEL_GRAPH)
        dcd_name = labels.get(LABEL_DCD)
        if not graph and dcd_name:
            dcd = self.dcds.get(f"{sample.namespace}/{dcd_name}")
            owner = controller_of(dcd) if dcd is not None else None
            if owner is not None and owner.get("kind") == DGD:
                graph = owner.get("name")
            elif dcd is not None:
                graph = objects.labels(dcd).get(LABEL_GRAPH)
        return (DGD, sample.namespace, str(graph)) if graph else None

    # --- the tick -----------------------------------------------------------------------------------

    async def poll(self) -> None:
        """One tick: scrape, attribute, decide and act for every workload in the target namespaces."""
        samples = await self.scrape()
        if samples is None:
            return
        thresholds = thresholds_of(self.configs.get(KAIWO_CONFIG_NAME))
        by_workload: dict[tuple[str, str, str], list[GpuSample]] = {}
        for sample in samples:
            if not in_target_namespace(sample.namespace, thresholds):
                continue
            owner = self.owner_of(sample)
            if owner is not None:
                by_workload.setdefault(owner, []).append(sample)
        now = self.clock.now()
        for kind, informer in ((MODELINFER, self.modelinfers), (DGD, self.dgds)):
            for obj in informer.list():
                namespace = objects.namespace(obj)
                if not in_target_namespace(namespace, thresholds):
                    continue
                view = view_of(kind, obj)
                observed = Observed(
                    view,
                    tuple(by_workload.get((kind, namespace, view.name), [])),
                    thresholds,
                    objects.status(obj),
                    objects.generation(obj) or 0,
                )
                decision = decide(observed, now)
                try:
                    written = await self.act(kind, obj, view, decision)
                    await self.report(kind, obj, written, decision, now)
                except ApiError as exc:
                    # Decided here: a workload that moved on (409) or went (404) waits for the next
                    # poll, and the other workloads of this poll still get theirs.
                    if not (exc.conflict or exc.not_found):
                        raise
                    log.debug(
                        "workload changed meanwhile; next poll", workload=objects.key(obj), status=exc.status
                    )
        self.polls += 1

    # --- act and report ----------------------------------------------------------------------------

    async def act(self, kind: str, obj: Obj, view: WorkloadView, decision: Decision) -> Obj:
        """The scale-to-zero or restore patch, if decided; the workload as it now is."""
        if decision.patch is None:
            return obj
        patch = {**decision.patch}
        patch["metadata"] = {**patch.get("metadata", {}), "resourceVersion": objects.resource_version(obj)}
        resource = kinds.MODELINFERS if kind == MODELINFER else kinds.DGDS
        written = await self.client.patch(
            resource, view.name, patch, namespace=view.namespace, field_manager=FIELD_MANAGER
        )
        log.info(decision.action, workload=f"{kind}/{view.namespace}/{view.name}")
        return written

    async def report(self, kind: str, observed: Obj, obj: Obj, decision: Decision, now: datetime) -> None:
        """The decided conditions, and their transition Events."""
        status = decision.status
        if status is None:
            return
        old = objects.status(obj)
        if obj is not observed:
            # After our patch the status write is guarded by the new resourceVersion, so it must start
            # from the status the patch returned (fresher than the cache), not the observed one.
            status = with_conditions(old, decision.conditions, objects.generation(obj) or 0, now)
        if await self.status[kind].write(obj, status) is not None:
            emit_transitions(self.recorder, obj, TRANSITION_EVENTS, old, status)

    # --- runnable -----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop``; an unexpected error is logged and the next poll tries again."""
        try:
            while not stop.is_set():
                try:
                    await self.poll()
                except Exception as exc:
                    log.error("GPU utilisation poll failed", error=f"{type(exc).__name__}: {exc}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.options.interval)
        finally:
            if self._session is not None:
                await self._session.close()
                self._session = None


def setup_controller(manager: Manager, options: MonitoringOptions) -> ResourceMonitor:
    informers = manager.informers
    return ResourceMonitor(
        manager.client,
        options,
        modelinfers=informers.informer(kinds.MODELINFERS),
        dgds=informers.informer(kinds.DGDS),
        dcds=informers.informer(kinds.DCDS),
        pods=(
            informers.informer(PODS, label_selector=LABEL_MODELINFER),
            informers.informer(PODS, label_selector=LABEL_DCD),
        ),
        configs=informers.informer(kinds.KAIWOCONFIGS),
        recorder=EventRecorder(manager.client, COMPONENT),
        clock=manager.clock,
    )


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    # Scale-down and restore are patches of the workload (replicas and annotations); then its status.
    Permission("workload.volcano.sh", ("modelinfers",), ("list", "watch", "patch")),
    Permission("nvidia.com", ("dynamographdeployments",), ("list", "watch", "patch")),
    Permission("workload.volcano.sh", ("modelinfers/status",), ("patch",)),
    Permission("nvidia.com", ("dynamographdeployments/status",), ("patch",)),
    Permission("nvidia.com", ("dynamocomponentdeployments",), READ),
    Permission("config.kaiwo.silogen.ai", ("kaiwoconfigs",), READ),
    # Utilization samples name pods; their labels name the workload.
    Permission("", ("pods",), READ),
    EVENTS_WRITE,
)


def setup(manager: Manager) -> None:
    """``aiplane run --controllers resourcemonitor`` (part of ``all``): runs only when
    ``RESOURCE_MONITORING_ENABLED=true`` (the composition layer reads the environment into
    :class:`MonitoringOptions`); otherwise registers nothing."""
    options = manager.options(MonitoringOptions)
    if not options.enabled:
        log.debug("resource monitoring disabled (RESOURCE_MONITORING_ENABLED is not true)")
        return
    log.info("resource monitoring enabled", endpoint=options.endpoint, interval=options.interval)
    manager.add_runnable(setup_controller(manager, options), need_leader_election=True)

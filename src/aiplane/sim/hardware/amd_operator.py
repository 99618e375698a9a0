"""The AMD GPU operator on the simulated fleet: its objects, its device plugin, its Device Config Manager.

Why: GPU partitioning (``infrastructure.silogen.ai``) is a conversation with these components — label a
node ``dcm.amd.com/gpu-config-profile=<profile>``, wait for ``dcm.amd.com/gpu-config-profile-state``,
then for ``amd.com/gpu`` allocatable to show the new partition count — and the failure modes that
matter (a GPU held by a pod is "Device busy", an unknown profile, a device plugin that has not
re-registered yet) come from them. This module plays them as faithfully as their sources describe
(ROCm/gpu-operator ``docs/dcm``, ROCm/device-config-manager ``pkg/config_manager``).

At start (:meth:`AmdGpuOperator.install`): namespace ``kube-amd-gpu``; the ``DeviceConfig``
``gpu-operator`` (``spec.configManager.enable: true``, ``config.name: config-manager-config``); the
ConfigMap ``config-manager-config`` whose ``config.json`` holds MI300X profiles (:data:`DEFAULT_CONFIG`);
the DaemonSets ``amd-gpu-device-plugin`` (not tolerating ``amd-dcm=up:NoExecute``, so a partitioning
drain evicts it) and ``gpu-operator-device-config-manager`` (tolerating it, as DCM does). The sim's
DaemonSet controller and kubelet run their pods.

**Device Config Manager** (per AMD node, ``feature.node.kubernetes.io/amd-gpu=true``): when the profile
label changes to a non-empty value, when the trigger label ``dcm.amd.com/apply-gpu-config-profile``
is set, or when the ConfigMap's content changes, DCM reads the profile from the ConfigMap (missing →
``ConfigMapNotPresent``, bad JSON → ``InvalidJSONInConfigMap``, unknown name → ``NonExistentProfile``,
invalid layout → ``InvalidProfileInfo``; all ``failure``), compares it with the GPUs' current modes
(all equal → ``success`` + ``RequestedPartitionConfigAlreadyExists``), fails with ``Device busy`` if a
pod on the node uses a GPU, and otherwise partitions for ``dcm_delay`` seconds, then writes ``success``
and emits ``SuccessfullyPartitioned``. It writes no state while working (newer DCM versions write
``in-progress``: ``in_progress_label=True``).

**Device plugin**: when its pod on a node is Running it registers the node's logical GPUs with the
kubelet (``status.capacity``/``allocatable`` ``amd.com/gpu`` = physical GPUs times partitions per GPU,
``plugin_refresh_delay`` later); when the pod goes (e.g. evicted by the partitioning taint) the kubelet
marks the devices unhealthy (allocatable 0). A partition change is re-registered while the pod runs
(``plugin_refresh="auto"``) or only when the pod restarts (``"on-restart"``: the field problem of
ROCm/gpu-operator#382/#420).

The decisions are pure functions, unit-tested without a cluster: the hardware and the operator's
objects in :mod:`aiplane.sim.hardware.amd_gpu`, DCM's reading of its ConfigMap and its verdict in
:mod:`aiplane.sim.hardware.amd_dcm`. This module is the agent that acts on them.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import format_time
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.informer import Informer, InformerFactory
from aiplane.kube.resources import (
    CONFIGMAPS,
    CRDS,
    DAEMONSETS,
    DEVICECONFIGS,
    EVENTS,
    NAMESPACES,
    NODES,
    PODS,
    Resource,
)
from aiplane.sim.hardware.amd_dcm import DcmError, decide, parse_config, status_message, validate_profile
from aiplane.sim.hardware.amd_gpu import (
    _MIXED_RESOURCE,
    AMD_NODE_LABEL,
    APP_LABEL,
    COMPONENT,
    CONFIG_KEY,
    DCM_DAEMONSET,
    DEFAULT_CONFIG_MAP,
    DEVICE_CONFIG,
    DEVICE_PLUGIN,
    KUBELET,
    NAMESPACE,
    OPERATOR,
    PARTITION_FAILURE,
    PARTITION_IN_PROGRESS,
    PARTITION_RETRYING,
    PHYSICAL_COUNT_LABEL,
    PROFILE_LABEL,
    RESOURCE,
    STATE_FAILURE,
    STATE_IN_PROGRESS,
    STATE_LABEL,
    STATE_SUCCESS,
    SUCCESSFULLY_PARTITIONED,
    TRIGGER_LABEL,
    GpuModel,
    Mode,
    Obj,
    advertised_resources,
    config_map,
    dcm_daemonset,
    device_config,
    device_config_crd,
    device_plugin_daemonset,
    gpu_busy_pods,
    gpu_model,
    initial_modes,
    logical_gpus,
)
from aiplane.sim.hardware.views import node_informer, pod_informer, pods_on
from aiplane.sim.hardware.worker import Worker

log = logging.getLogger(__name__)

#: A unit of queued work: a hashable tuple whose first item says what to do.
Work = tuple[str, ...]
#: How long :meth:`AmdGpuOperator.install` waits for the DeviceConfig CRD it created to be served.
CRD_WAIT: Final = 30.0

_event_seq = itertools.count()


@dataclass
class _Node:
    """What the sim knows about one AMD node beyond its Node object: the GPUs' real modes (the
    "hardware"), DCM's current attempt, and the device plugin's registration."""

    modes: list[Mode]
    model: GpuModel
    attempt: int = 0
    profile: str = ""
    target: tuple[Mode, ...] = ()
    message: str = ""  # the SuccessfullyPartitioned message of the attempt in progress
    timer: asyncio.TimerHandle | None = None
    retry_started: float | None = None
    plugin_uid: str | None = None
    plugin_pod: str = ""  # the registered plugin pod's name (namespace kube-amd-gpu)
    plugin_timer: asyncio.TimerHandle | None = None


class AmdGpuOperator(Worker[Work]):
    """The AMD GPU operator's DCM and device plugin on every AMD node (see the module doc).

    Knobs (attributes, changeable at runtime): ``dcm_delay``, ``plugin_refresh_delay``,
    ``plugin_refresh`` (``"auto"`` | ``"on-restart"``), ``resource_naming_strategy`` (``"single"`` |
    ``"mixed"``), ``retry_interval`` (``None``: no retry loop; else seconds between attempts while a
    retryable failure lasts, up to ``retry_timeout``), ``in_progress_label``, ``event_target``
    (``"node"`` | ``"pod"``: the DCM pod, as the real DCM does) and ``fail_nodes`` (nodes on which
    amd-smi fails: ``failure`` + ``PartitionFailure``).
    """

    name = "amd-gpu-operator"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerFactory,
        *,
        dcm_delay: float = 1.0,
        plugin_refresh_delay: float = 0.0,
        plugin_refresh: Literal["auto", "on-restart"] = "auto",
        resource_naming_strategy: Literal["single", "mixed"] = "single",
        retry_interval: float | None = None,
        retry_timeout: float = 1800.0,
        in_progress_label: bool = False,
        event_target: Literal["node", "pod"] = "node",
    ) -> None:
        super().__init__()
        self.client = client
        self.dcm_delay = dcm_delay
        self.plugin_refresh_delay = plugin_refresh_delay
        self.plugin_refresh = plugin_refresh
        self.resource_naming_strategy = resource_naming_strategy
        self.retry_interval = retry_interval
        self.retry_timeout = retry_timeout
        self.in_progress_label = in_progress_label
        self.event_target = event_target
        #: Nodes on which DCM's amd-smi calls fail (answered ``failure`` + ``PartitionFailure``).
        self.fail_nodes: set[str] = set()
        self.nodes: Informer = node_informer(informers)
        self.pods: Informer = pod_informer(informers)
        self.config_maps: Informer = informers.informer(CONFIGMAPS, NAMESPACE)
        self.device_configs: Informer = informers.informer(DEVICECONFIGS, NAMESPACE)
        self.daemonsets: Informer = informers.informer(DAEMONSETS, NAMESPACE)
        self._nodes: dict[str, _Node] = {}
        self._handlers: list[Any] = []
        self._live = False

    # --- install ----------------------------------------------------------------------------------

    async def install(self) -> None:
        """Create what the operator's install and its user would have created, where missing: the
        DeviceConfig CRD (the operator's chart installs it), namespace, profiles ConfigMap, DeviceConfig
        and DaemonSets. Before the informers start: the DeviceConfig informer needs its CRD."""
        await self._ensure_crd()
        await self._create_missing(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await self._create_missing(CONFIGMAPS, config_map())
        owner = await self._create_missing(DEVICECONFIGS, device_config())
        existing = {name: await self._get(DAEMONSETS, name) for name in (DEVICE_PLUGIN, DCM_DAEMONSET)}
        await self._sync_daemonsets(owner, existing.get)

    async def _ensure_crd(self) -> None:
        if await self.client.served(DEVICECONFIGS):
            return
        await self._create_missing(CRDS, device_config_crd())
        deadline = time.monotonic() + CRD_WAIT
        while not await self.client.served(DEVICECONFIGS):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the DeviceConfig CRD was not served within {CRD_WAIT:g}s")
            await asyncio.sleep(0.1)

    async def _get(self, res: Resource, name: str, namespace: str | None = NAMESPACE) -> Obj | None:
        try:
            return await self.client.get(res, name, namespace)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def _create_missing(self, res: Resource, body: Obj) -> Obj:
        meta = body["metadata"]
        found = await self._get(res, meta["name"], meta.get("namespace"))
        if found is not None:
            return found
        try:
            return await self.client.create(
                res, body, namespace=meta.get("namespace"), field_manager=OPERATOR
            )
        except ApiError as err:
            if not err.already_exists:
                raise
            return await self.client.get(res, meta["name"], meta.get("namespace"))

    @staticmethod
    def _owner_ref(dc: Obj) -> dict[str, Any]:
        meta = objects.meta(dc)
        return {
            "apiVersion": "amd.com/v1alpha1",
            "kind": "DeviceConfig",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    async def _sync_daemonsets(self, dc: Obj | None, cached: Callable[[str], Obj | None]) -> None:
        """The operator's DaemonSets follow the DeviceConfig (owned by it; DCM only while enabled).
        ``cached(name)``: the DaemonSet as last seen (``None``: absent, or unknown before the
        informers run: a create answered 409 is then what was wanted)."""
        if dc is None or objects.is_deleting(dc):
            return
        wanted = {DEVICE_PLUGIN: device_plugin_daemonset(self.resource_naming_strategy)}
        if self._dcm_enabled(dc):
            wanted[DCM_DAEMONSET] = dcm_daemonset(self._config_map_name(dc))
        elif cached(DCM_DAEMONSET) is not None:
            try:
                await self.client.delete(DAEMONSETS, DCM_DAEMONSET, namespace=NAMESPACE)
            except ApiError as err:
                if not err.not_found:
                    raise
        for name, body in wanted.items():
            if cached(name) is None:
                body["metadata"]["ownerReferences"] = [self._owner_ref(dc)]
                try:
                    await self.client.create(DAEMONSETS, body, namespace=NAMESPACE, field_manager=OPERATOR)
                except ApiError as err:
                    if not err.already_exists:
                        raise

    # --- configuration ----------------------------------------------------------------------------

    def _device_config(self) -> Obj | None:
        return self.device_configs.get_by(NAMESPACE, DEVICE_CONFIG)

    @staticmethod
    def _dcm_enabled(dc: Obj | None) -> bool:
        if dc is None or objects.is_deleting(dc):
            return False
        return bool((objects.spec(dc).get("configManager") or {}).get("enable"))

    @staticmethod
    def _config_map_name(dc: Obj | None) -> str:
        config = (((dc or {}).get("spec") or {}).get("configManager") or {}).get("config") or {}
        return str(config.get("name") or DEFAULT_CONFIG_MAP)

    def _config_text(self) -> str | None:
        cm = self.config_maps.get_by(NAMESPACE, self._config_map_name(self._device_config()))
        if cm is None:
            return None
        value = (cm.get("data") or {}).get(CONFIG_KEY)
        return None if value is None else str(value)

    def _is_amd(self, node: Obj) -> bool:
        labels = objects.labels(node)
        dc = self._device_config()
        selector = ((dc or {}).get("spec") or {}).get("selector") or {AMD_NODE_LABEL: "true"}
        return all(labels.get(k) == v for k, v in selector.items())

    def _node(self, name: str) -> Obj | None:
        return self.nodes.get_by(None, name)

    def _state(self, node: Obj) -> _Node:
        """The sim's record of a node's GPUs, made the first time the node is looked at."""
        name = objects.name(node)
        state = self._nodes.get(name)
        if state is None:
            labels = objects.labels(node)
            model = gpu_model(labels)
            capacity = objects.status(node).get("capacity") or {}
            logical = _int(capacity.get(RESOURCE), 0)
            count = _int(labels.get(PHYSICAL_COUNT_LABEL), logical)
            modes = initial_modes(count, logical, model)
            # A node labelled with a known profile whose layout gives its capacity is in that layout.
            try:
                profile = parse_config(self._config_text()).get(labels.get(PROFILE_LABEL, ""))
                if profile is not None:
                    targets = validate_profile(profile, count)
                    guess = [t or m for t, m in zip(targets, modes, strict=True)]
                    if logical_gpus(guess, model) == logical:
                        modes = guess
            except DcmError:
                pass
            state = self._nodes[name] = _Node(modes=modes, model=model)
        return state

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker and listen to the (synced) informers; every AMD node's device plugin is
        looked at once, as the kubelet does when it starts."""
        if self.running:
            return
        self.start_worker()
        self._handlers = [
            self.nodes.add_handler(self._node_added, self._node_updated, self._node_deleted),
            self.pods.add_handler(self._pod_changed, self._pod_changed, self._pod_changed),
            self.config_maps.add_handler(self._config_added, self._config_updated),
            self.device_configs.add_handler(
                self._dc_changed, lambda old, new: self._dc_changed(new), self._dc_changed
            ),
            self.daemonsets.add_handler(on_delete=self._ds_deleted),
        ]
        self._live = True

    async def stop(self) -> None:
        self._live = False
        for registration in self._handlers:
            registration.remove()
        self._handlers = []
        await self.stop_worker()
        self._nodes.clear()

    # --- events (informer callbacks: they only queue work) -----------------------------------------

    def _node_added(self, node: Obj) -> None:
        if self._is_amd(node):
            self._state(node)
            self.enqueue(("plugin", objects.name(node)))
            # DCM's node informer hands it its node when it starts, and it applies the profile the
            # label selects: a request written while DCM was down (or before its cache synced) is
            # served, not lost. A node whose state already reads success is left alone.
            labels = objects.labels(node)
            profile = labels.get(PROFILE_LABEL, "")
            if profile and labels.get(STATE_LABEL) != STATE_SUCCESS:
                self.enqueue(("trigger", objects.name(node), profile))

    def _node_deleted(self, node: Obj) -> None:
        state = self._nodes.pop(objects.name(node), None)
        if state is not None:
            self.cancel(state.timer)
            self.cancel(state.plugin_timer)

    def _node_updated(self, old: Obj, node: Obj) -> None:
        if not self._is_amd(node):
            return
        new_labels, old_labels = objects.labels(node), objects.labels(old)
        profile = new_labels.get(PROFILE_LABEL, "")
        changed = bool(profile) and profile != old_labels.get(PROFILE_LABEL, "")
        trigger = new_labels.get(TRIGGER_LABEL, "")
        triggered = bool(trigger) and trigger != old_labels.get(TRIGGER_LABEL, "")
        if changed or triggered:
            self.enqueue(("trigger", objects.name(node), profile))

    @staticmethod
    def _is_plugin_pod(pod: Obj) -> bool:
        return bool(
            objects.meta(pod).get("namespace") == NAMESPACE
            and objects.labels(pod).get(APP_LABEL) == DEVICE_PLUGIN
        )

    def _pod_changed(self, *pods: Obj) -> None:
        for pod in pods:
            if self._is_plugin_pod(pod):
                node = objects.spec(pod).get("nodeName")
                if node:
                    self.enqueue(("plugin", str(node)))

    def _ours(self, cm: Obj) -> bool:
        return objects.name(cm) == self._config_map_name(self._device_config())

    def _config_added(self, cm: Obj) -> None:
        if self._live and self._ours(cm):
            self.enqueue(("configmap",))  # DCM's file watcher: the file appeared

    def _config_updated(self, old: Obj, cm: Obj) -> None:
        if self._ours(cm) and (old.get("data") or {}) != (cm.get("data") or {}):
            self.enqueue(("configmap",))  # DCM's file watcher: re-apply every node's profile

    def _dc_changed(self, dc: Obj) -> None:
        if objects.name(dc) == DEVICE_CONFIG:
            self.enqueue(("deviceconfig",))

    def _ds_deleted(self, ds: Obj) -> None:
        if objects.name(ds) in (DEVICE_PLUGIN, DCM_DAEMONSET):
            self.enqueue(("deviceconfig",))  # the operator owns its DaemonSets: it puts them back

    # --- work -------------------------------------------------------------------------------------

    async def process(self, work: Work) -> None:
        kind = work[0]
        if kind == "trigger":
            await self._trigger(work[1], work[2])
        elif kind == "attempt":
            await self._attempt(work[1], int(work[2]))
        elif kind == "finish":
            await self._finish(work[1], int(work[2]))
        elif kind == "plugin":
            await self._plugin(work[1])
        elif kind == "report":
            await self._report(work[1], work[2])
        elif kind == "configmap":
            for node in self.nodes.list():
                profile = objects.labels(node).get(PROFILE_LABEL, "")
                if profile and self._is_amd(node):
                    await self._trigger(objects.name(node), profile)
        elif kind == "deviceconfig":
            await self._sync_daemonsets(
                self._device_config(), lambda name: self.daemonsets.get_by(NAMESPACE, name)
            )

    async def _trigger(self, node_name: str, profile: str) -> None:
        """A new request: any attempt in progress (or retry loop) is abandoned, as DCM's worker does."""
        node = self._node(node_name)
        if node is None or not self._dcm_enabled(self._device_config()):
            return
        if not profile:
            log.info("dcm %s: no profile selected, nothing to apply", node_name)
            return
        state = self._state(node)
        self.cancel(state.timer)
        state.timer = None
        state.attempt += 1
        state.profile = profile
        state.retry_started = None
        if self.in_progress_label:
            await self._set_labels(node_name, {STATE_LABEL: STATE_IN_PROGRESS})
            await self._event(
                node_name,
                "Normal",
                PARTITION_IN_PROGRESS,
                status_message(profile, "", f"Starting partition process for profile: {profile}"),
            )
        await self._attempt(node_name, state.attempt)

    async def _busy_pods(self, node_name: str) -> list[str]:
        """The pods holding the node's GPUs. The cache may be behind the hardware (a drained pod's
        deletion not seen yet): a busy answer is confirmed with a fresh list of the node's pods."""
        if not gpu_busy_pods(pods_on(self.pods, node_name)):
            return []
        listed = await self.client.list(PODS, field_selector=f"spec.nodeName={node_name}")
        return gpu_busy_pods(listed.get("items") or [])

    async def _attempt(self, node_name: str, attempt: int) -> None:
        state = self._nodes.get(node_name)
        if self._node(node_name) is None or state is None or attempt != state.attempt:
            return
        state.timer = None
        busy = await self._busy_pods(node_name)
        if attempt != state.attempt:  # a newer request came while we listed
            return
        outcome = decide(
            state.profile,
            self._config_text(),
            state.modes,
            state.model,
            busy=busy,
            fail=node_name in self.fail_nodes,
        )
        if outcome.kind == "partition":
            state.target, state.message = outcome.target, outcome.message
            state.timer = self.later(self.dcm_delay, ("finish", node_name, str(attempt)))
            return
        if outcome.kind == "success":
            state.modes = list(outcome.target)
            await self._conclude(
                node_name, STATE_SUCCESS, outcome.event_type, outcome.reason, outcome.message
            )
            return
        if outcome.retryable and self.retry_interval is not None:
            now = time.monotonic()
            if state.retry_started is None:
                state.retry_started = now
                await self._set_labels(node_name, {STATE_LABEL: STATE_FAILURE})
                await self._event(
                    node_name,
                    "Warning",
                    PARTITION_RETRYING,
                    status_message(
                        state.profile,
                        "Partition failed, retrying.",
                        f"Partition retrying for profile: {state.profile}",
                        outcome.gpu_status,
                    ),
                )
            if now + self.retry_interval - state.retry_started <= self.retry_timeout:
                state.timer = self.later(self.retry_interval, ("attempt", node_name, str(attempt)))
                return
            reason = PARTITION_FAILURE  # the retry loop expired
        else:
            reason = outcome.reason
        await self._conclude(node_name, STATE_FAILURE, "Warning", reason, outcome.message)

    async def _finish(self, node_name: str, attempt: int) -> None:
        """The partitioning took ``dcm_delay``: the GPUs are in their new modes."""
        state = self._nodes.get(node_name)
        if state is None or attempt != state.attempt or self._node(node_name) is None:
            return
        state.timer = None
        state.modes = list(state.target)
        if self.plugin_refresh == "auto" and state.plugin_uid is not None:
            self.cancel(state.plugin_timer)
            if self.plugin_refresh_delay <= 0:
                await self._report(node_name, state.plugin_uid)
            else:
                state.plugin_timer = self.later(
                    self.plugin_refresh_delay, ("report", node_name, state.plugin_uid)
                )
        await self._conclude(node_name, STATE_SUCCESS, "Normal", SUCCESSFULLY_PARTITIONED, state.message)

    async def _conclude(
        self, node_name: str, state_value: str, event_type: str, reason: str, message: str
    ) -> None:
        """Write the state label (and take the trigger label away), then tell the world."""
        state = self._nodes.get(node_name)
        if state is not None:
            state.retry_started = None
        await self._set_labels(node_name, {STATE_LABEL: state_value}, remove=(TRIGGER_LABEL,))
        await self._event(node_name, event_type, reason, message)

    # --- device plugin ----------------------------------------------------------------------------

    async def _plugin(self, node_name: str) -> None:
        """(Un)register the node's device plugin with the kubelet as its pod comes and goes."""
        node = self._node(node_name)
        if node is None or not self._is_amd(node):
            return
        state = self._state(node)
        running = [
            p
            for p in pods_on(self.pods, node_name)
            if self._is_plugin_pod(p)
            and not objects.is_deleting(p)
            and objects.status(p).get("phase") == "Running"
        ]
        uid = objects.uid(running[0]) if running else None
        if uid == state.plugin_uid:
            return
        self.cancel(state.plugin_timer)
        state.plugin_timer = None
        registered = state.plugin_uid is not None
        state.plugin_uid = uid
        state.plugin_pod = objects.name(running[0]) if running else ""
        if uid is None:
            if registered:
                await self._write_resources(node_name, None)
            return
        state.plugin_timer = self.later(self.plugin_refresh_delay, ("report", node_name, uid))

    async def _plugin_alive(self, state: _Node) -> bool:
        """Whether the registered plugin's pod still runs, asked of the API server: a kubelet knows
        at once when its device plugin's connection drops, while the pod cache may not have seen the
        eviction yet (pods and nodes are separate watches), and registering devices of a plugin that
        is gone would let a partitioning be verified before the plugin restarted."""
        try:
            pod = await self.client.get(PODS, state.plugin_pod, NAMESPACE)
        except ApiError as err:
            if err.not_found:
                return False
            raise
        return bool(
            objects.uid(pod) == state.plugin_uid
            and not objects.is_deleting(pod)
            and objects.status(pod).get("phase") == "Running"
        )

    async def _report(self, node_name: str, uid: str) -> None:
        state = self._nodes.get(node_name)
        if state is None or state.plugin_uid != uid:
            return
        state.plugin_timer = None
        if not await self._plugin_alive(state):
            if state.plugin_uid == uid:  # gone meanwhile: its devices are unhealthy
                state.plugin_uid, state.plugin_pod = None, ""
                await self._write_resources(node_name, None)
            return
        if state.plugin_uid != uid:
            return
        await self._write_resources(
            node_name, advertised_resources(state.modes, state.model, self.resource_naming_strategy)
        )

    async def _write_resources(self, node_name: str, resources: Mapping[str, int] | None) -> None:
        """The kubelet's node status: the plugin's devices (``None``: plugin gone, devices unhealthy).

        A merge patch of ``status.capacity``/``allocatable`` through the ``nodes/status`` subresource,
        naming only the GPU resources: what the kubelet's device manager changes, and nothing a node
        heartbeat (the kubelet's, kwok's) writes, so neither overwrites the other.
        """
        node = self._node(node_name)
        if node is None:
            return
        status = objects.status(node)
        capacity = dict(status.get("capacity") or {})
        allocatable = dict(status.get("allocatable") or {})
        ours = {k for k in capacity if k == RESOURCE or _MIXED_RESOURCE.match(k)}
        cap_patch: dict[str, str] = {}
        alloc_patch: dict[str, str] = {}
        if resources is None:
            alloc_patch = {key: "0" for key in ours}
        else:
            for key in ours - set(resources):
                cap_patch[key] = alloc_patch[key] = "0"
            for key, value in resources.items():
                cap_patch[key] = alloc_patch[key] = str(value)
        cap_patch = {k: v for k, v in cap_patch.items() if capacity.get(k) != v}
        alloc_patch = {k: v for k, v in alloc_patch.items() if allocatable.get(k) != v}
        if not cap_patch and not alloc_patch:
            return
        patch: Obj = {"status": {}}
        if cap_patch:
            patch["status"]["capacity"] = cap_patch
        if alloc_patch:
            patch["status"]["allocatable"] = alloc_patch
        try:
            await self.client.patch(NODES, node_name, patch, subresource="status", field_manager=KUBELET)
        except ApiError as err:
            if not err.not_found:
                raise

    # --- writes -----------------------------------------------------------------------------------

    async def _set_labels(
        self, node_name: str, labels: Mapping[str, str], remove: Sequence[str] = ()
    ) -> None:
        """DCM's ``AddNodeLabel``, as a merge patch of the labels it sets and removes (so it conflicts
        with no other writer of the Node)."""
        current = objects.labels(self._node(node_name))
        patch: dict[str, str | None] = {k: None for k in remove if k in current}
        patch.update(labels)
        try:
            await self.client.patch(
                NODES, node_name, {"metadata": {"labels": patch}}, field_manager=COMPONENT
            )
        except ApiError as err:
            if not err.not_found:
                raise

    async def _event(self, node_name: str, type_: str, reason: str, message: str) -> None:
        node = self._node(node_name)
        if node is None:
            return
        involved: Obj = node
        if self.event_target == "pod":
            dcm_pods = [
                p for p in pods_on(self.pods, node_name) if objects.labels(p).get(APP_LABEL) == DCM_DAEMONSET
            ]
            if dcm_pods:
                involved = dcm_pods[0]
        await record_event(self.client, involved, type_, reason, message, component=COMPONENT, host=node_name)


async def record_event(
    client: KubeClient,
    involved: Obj,
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str | None = None,
) -> None:
    """Create a core/v1 Event about ``involved`` the way client-go's recorder names and fills it (one
    Event per call: DCM does not aggregate).

    The Event lives in the involved object's namespace, ``default`` for cluster-scoped objects (a
    Node), as kube's recorder puts it. Failures (e.g. a namespace being deleted) are logged, never
    raised: an agent must not stop because it could not report.
    """
    meta = objects.meta(involved)
    namespace = str(meta.get("namespace") or "default")
    now = format_time(datetime.now(UTC))
    ref = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{time.time_ns() + next(_event_seq):x}",
            "namespace": namespace,
        },
        "involvedObject": {k: v for k, v in ref.items() if v},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component, **({"host": host} if host else {})},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    try:
        await client.create(EVENTS, body, namespace=namespace, field_manager=component)
    except ApiError as err:
        log.info("%s: could not record event %s on %s: %s", component, reason, meta.get("name"), err)


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default

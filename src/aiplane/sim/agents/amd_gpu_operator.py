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
objects in :mod:`aiplane.sim.agents.amd_gpu`, DCM's reading of its ConfigMap and its verdict in
:mod:`aiplane.sim.agents.amd_dcm`. This module is the agent that acts on them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from aiplane.apimachinery import objects
from aiplane.sim.agents.amd_dcm import (
    DcmError,
    decide,
    parse_config,
    status_message,
    validate_profile,
)
from aiplane.sim.agents.amd_gpu import (
    _MIXED_RESOURCE,
    AMD_NODE_LABEL,
    APP_LABEL,
    COMPONENT,
    CONFIG_KEY,
    CONFIG_MAP,
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
    advertised_resources,
    config_map,
    dcm_daemonset,
    device_config,
    device_plugin_daemonset,
    gpu_busy_pods,
    gpu_model,
    initial_modes,
    logical_gpus,
)
from aiplane.sim.agents.base import (
    NODES,
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    record_event,
    write_status,
)
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

# --- the agent ----------------------------------------------------------------------------------------


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
    plugin_timer: asyncio.TimerHandle | None = None


class AmdGpuOperator(AgentLoop):
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
        api: Api,
        pods: PodIndex,
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
        super().__init__(api)
        self.pods = pods
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
        self.node_rt = api.resource("v1", "Node")
        self.dc_rt = api.resource("amd.com/v1alpha1", "DeviceConfig")
        self.cm_rt = api.resource("v1", "ConfigMap")
        self.ds_rt = api.resource("apps/v1", "DaemonSet")
        self._nodes: dict[str, _Node] = {}

    # --- install ----------------------------------------------------------------------------------

    def install(self) -> None:
        """Create what the operator's install and its user would have created (idempotently)."""
        opts = WriteOptions(field_manager=OPERATOR)
        ns_rt = self.api.resource("v1", "Namespace")
        if self.store.get("/namespaces", "", NAMESPACE) is None:
            self.api.create(
                ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, opts
            )
        if self.store.get(self.cm_rt.storage_key, NAMESPACE, CONFIG_MAP) is None:
            self.api.create(self.cm_rt, NAMESPACE, config_map(), opts)
        owner = self.store.get(self.dc_rt.storage_key, NAMESPACE, DEVICE_CONFIG)
        if owner is None:
            owner = self.api.create(self.dc_rt, NAMESPACE, device_config(), opts).obj
        self._sync_daemonsets(owner)

    def _owner_ref(self, dc: Obj) -> dict[str, Any]:
        meta = objects.meta(dc)
        return {
            "apiVersion": "amd.com/v1alpha1",
            "kind": "DeviceConfig",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _sync_daemonsets(self, dc: Obj | None) -> None:
        """The operator's DaemonSets follow the DeviceConfig (owned by it; DCM only while enabled)."""
        if dc is None or objects.is_deleting(dc):
            return
        opts = WriteOptions(field_manager=OPERATOR)
        wanted = {DEVICE_PLUGIN: device_plugin_daemonset(self.resource_naming_strategy)}
        if self._dcm_enabled(dc):
            wanted[DCM_DAEMONSET] = dcm_daemonset(self._config_map_name(dc))
        elif self.store.get(self.ds_rt.storage_key, NAMESPACE, DCM_DAEMONSET) is not None:
            try:
                self.api.delete(self.ds_rt, NAMESPACE, DCM_DAEMONSET)
            except ApiError as err:
                if err.code != 404:
                    raise
        for name, body in wanted.items():
            if self.store.get(self.ds_rt.storage_key, NAMESPACE, name) is None:
                body["metadata"]["ownerReferences"] = [self._owner_ref(dc)]
                self.api.create(self.ds_rt, NAMESPACE, body, opts)

    # --- configuration ----------------------------------------------------------------------------

    def _device_config(self) -> Obj | None:
        return self.store.get(self.dc_rt.storage_key, NAMESPACE, DEVICE_CONFIG)

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
        cm = self.store.get(self.cm_rt.storage_key, NAMESPACE, self._config_map_name(self._device_config()))
        if cm is None:
            return None
        value = (cm.get("data") or {}).get(CONFIG_KEY)
        return None if value is None else str(value)

    def _is_amd(self, node: Obj) -> bool:
        labels = objects.labels(node)
        dc = self._device_config()
        selector = ((dc or {}).get("spec") or {}).get("selector") or {AMD_NODE_LABEL: "true"}
        return all(labels.get(k) == v for k, v in selector.items())

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

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for node in self.store.items(NODES):
            if self._is_amd(node):
                self._state(node)
                self.enqueue(("plugin", objects.name(node)))

    def on_event(self, event: Event) -> None:
        if event.key == NODES:
            self._on_node(event)
        elif event.key == PODS:
            for obj in (event.obj, event.old):
                if obj is not None and self._is_plugin_pod(obj):
                    node = objects.spec(obj).get("nodeName")
                    if node:
                        self.enqueue(("plugin", str(node)))
        elif event.key == self.cm_rt.storage_key:
            meta = objects.meta(event.obj)
            if (
                meta.get("namespace") == NAMESPACE
                and meta["name"] == self._config_map_name(self._device_config())
                and event.type != DELETED
                and (event.old is None or (event.old.get("data") or {}) != (event.obj.get("data") or {}))
            ):
                self.enqueue(("configmap",))  # DCM's file watcher: re-apply every node's profile
        elif event.key == self.dc_rt.storage_key:
            meta = objects.meta(event.obj)
            if meta.get("namespace") == NAMESPACE and meta["name"] == DEVICE_CONFIG:
                self.enqueue(("deviceconfig",))
        elif event.key == self.ds_rt.storage_key and event.type == DELETED:
            meta = objects.meta(event.obj)
            if meta.get("namespace") == NAMESPACE and meta["name"] in (DEVICE_PLUGIN, DCM_DAEMONSET):
                self.enqueue(("deviceconfig",))  # the operator owns its DaemonSets: it puts them back

    def _on_node(self, event: Event) -> None:
        name = objects.name(event.obj)
        if event.type == DELETED:
            state = self._nodes.pop(name, None)
            if state is not None:
                self.cancel(state.timer)
                self.cancel(state.plugin_timer)
            return
        if event.type != "MODIFIED" or event.old is None or not self._is_amd(event.obj):
            return
        new, old = objects.labels(event.obj), objects.labels(event.old)
        profile = new.get(PROFILE_LABEL, "")
        changed = bool(profile) and profile != old.get(PROFILE_LABEL, "")
        trigger = new.get(TRIGGER_LABEL, "")
        triggered = bool(trigger) and trigger != old.get(TRIGGER_LABEL, "")
        if changed or triggered:
            self.enqueue(("trigger", name, profile))

    @staticmethod
    def _is_plugin_pod(pod: Obj) -> bool:
        return bool(
            objects.meta(pod).get("namespace") == NAMESPACE
            and objects.labels(pod).get(APP_LABEL) == DEVICE_PLUGIN
        )

    # --- work -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        kind = work[0]
        if kind == "trigger":
            self._trigger(work[1], work[2])
        elif kind == "attempt":
            self._attempt(work[1], int(work[2]))
        elif kind == "finish":
            self._finish(work[1], int(work[2]))
        elif kind == "plugin":
            self._plugin(work[1])
        elif kind == "report":
            self._report(work[1], work[2])
        elif kind == "configmap":
            for node in self.store.items(NODES):
                profile = objects.labels(node).get(PROFILE_LABEL, "")
                if profile and self._is_amd(node):
                    self._trigger(objects.name(node), profile)
        elif kind == "deviceconfig":
            self._sync_daemonsets(self._device_config())

    def _trigger(self, node_name: str, profile: str) -> None:
        """A new request: any attempt in progress (or retry loop) is abandoned, as DCM's worker does."""
        node = self.store.get(NODES, "", node_name)
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
            self._set_labels(node_name, {STATE_LABEL: STATE_IN_PROGRESS})
            self._event(
                node_name,
                "Normal",
                PARTITION_IN_PROGRESS,
                status_message(profile, "", f"Starting partition process for profile: {profile}"),
            )
        self._attempt(node_name, state.attempt)

    def _attempt(self, node_name: str, attempt: int) -> None:
        node = self.store.get(NODES, "", node_name)
        state = self._nodes.get(node_name)
        if node is None or state is None or attempt != state.attempt:
            return
        state.timer = None
        outcome = decide(
            state.profile,
            self._config_text(),
            state.modes,
            state.model,
            busy=gpu_busy_pods(self.pods.on_node(node_name)),
            fail=node_name in self.fail_nodes,
        )
        if outcome.kind == "partition":
            state.target, state.message = outcome.target, outcome.message
            state.timer = self.later(self.dcm_delay, ("finish", node_name, str(attempt)))
            return
        if outcome.kind == "success":
            state.modes = list(outcome.target)
            self._conclude(node_name, STATE_SUCCESS, outcome.event_type, outcome.reason, outcome.message)
            return
        if outcome.retryable and self.retry_interval is not None:
            now = time.monotonic()
            first = state.retry_started is None
            if first:
                state.retry_started = now
                self._set_labels(node_name, {STATE_LABEL: STATE_FAILURE})
                self._event(
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
            assert state.retry_started is not None
            if now + self.retry_interval - state.retry_started <= self.retry_timeout:
                state.timer = self.later(self.retry_interval, ("attempt", node_name, str(attempt)))
                return
            reason = PARTITION_FAILURE  # the retry loop expired
        else:
            reason = outcome.reason
        self._conclude(node_name, STATE_FAILURE, "Warning", reason, outcome.message)

    def _finish(self, node_name: str, attempt: int) -> None:
        """The partitioning took ``dcm_delay``: the GPUs are in their new modes."""
        state = self._nodes.get(node_name)
        if state is None or attempt != state.attempt or self.store.get(NODES, "", node_name) is None:
            return
        state.timer = None
        state.modes = list(state.target)
        if self.plugin_refresh == "auto" and state.plugin_uid is not None:
            self.cancel(state.plugin_timer)
            if self.plugin_refresh_delay <= 0:
                self._report(node_name, state.plugin_uid)
            else:
                state.plugin_timer = self.later(
                    self.plugin_refresh_delay, ("report", node_name, state.plugin_uid)
                )
        self._conclude(node_name, STATE_SUCCESS, "Normal", SUCCESSFULLY_PARTITIONED, state.message)

    def _conclude(self, node_name: str, state_value: str, event_type: str, reason: str, message: str) -> None:
        """Write the state label (and take the trigger label away), then tell the world."""
        state = self._nodes.get(node_name)
        if state is not None:
            state.retry_started = None
        self._set_labels(node_name, {STATE_LABEL: state_value}, remove=(TRIGGER_LABEL,))
        self._event(node_name, event_type, reason, message)

    # --- device plugin ----------------------------------------------------------------------------

    def _plugin(self, node_name: str) -> None:
        """(Un)register the node's device plugin with the kubelet as its pod comes and goes."""
        node = self.store.get(NODES, "", node_name)
        if node is None or not self._is_amd(node):
            return
        state = self._state(node)
        running = [
            p
            for p in self.pods.on_node(node_name)
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
        if uid is None:
            if registered:
                self._write_resources(node_name, None)
            return
        state.plugin_timer = self.later(self.plugin_refresh_delay, ("report", node_name, uid))

    def _report(self, node_name: str, uid: str) -> None:
        state = self._nodes.get(node_name)
        if state is None or state.plugin_uid != uid:
            return
        state.plugin_timer = None
        self._write_resources(
            node_name, advertised_resources(state.modes, state.model, self.resource_naming_strategy)
        )

    def _write_resources(self, node_name: str, resources: dict[str, int] | None) -> None:
        """The kubelet's node status: the plugin's devices (``None``: plugin gone, devices unhealthy)."""
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        status = dict(objects.status(node))
        capacity = dict(status.get("capacity") or {})
        allocatable = dict(status.get("allocatable") or {})
        ours = {k for k in capacity if k == RESOURCE or _MIXED_RESOURCE.match(k)}
        if resources is None:
            for key in ours:
                allocatable[key] = "0"
        else:
            for key in ours - set(resources):
                capacity[key] = allocatable[key] = "0"
            for key, value in resources.items():
                capacity[key] = allocatable[key] = str(value)
        if capacity == status.get("capacity") and allocatable == status.get("allocatable"):
            return
        status["capacity"], status["allocatable"] = capacity, allocatable
        try:
            write_status(self.api, self.node_rt, node, status, KUBELET)
        except ApiError as err:
            if err.code != 404:
                raise

    # --- writes -----------------------------------------------------------------------------------

    def _set_labels(self, node_name: str, labels: Mapping[str, str], remove: Sequence[str] = ()) -> None:
        """DCM's ``AddNodeLabel``: a get-modify-update of the Node's labels."""
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        meta = dict(objects.meta(node))
        current = dict(meta.get("labels") or {})
        wanted = {**{k: v for k, v in current.items() if k not in remove}, **labels}
        if wanted == current:
            return
        meta["labels"] = wanted
        try:
            self.api.update(
                self.node_rt,
                None,
                node_name,
                {**node, "metadata": meta},
                WriteOptions(field_manager=COMPONENT),
            )
        except ApiError as err:
            if err.code != 404:
                raise

    def _event(self, node_name: str, type_: str, reason: str, message: str) -> None:
        node = self.store.get(NODES, "", node_name)
        if node is None:
            return
        involved: Obj = node
        if self.event_target == "pod":
            dcm_pods = [
                p for p in self.pods.on_node(node_name) if objects.labels(p).get(APP_LABEL) == DCM_DAEMONSET
            ]
            if dcm_pods:
                involved = dcm_pods[0]
        record_event(self.api, involved, type_, reason, message, component=COMPONENT, host=node_name)


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default

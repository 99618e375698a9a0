"""Row printers of the core (``/api/v1``) kinds, as ``pkg/printers/internalversion`` prints them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.apimachinery.objects import meta
from aiplane.sim.apiserver.printing import (
    Row,
    age,
    as_int,
    condition_true,
    format_labels,
    get_path,
    human_duration,
    is_restartable,
    latest,
    quantity,
    since,
)

#: The row conditions kube's pod printer adds for a finished pod.
_COMPLETED: dict[str, tuple[dict[str, str], ...]] = {
    "Succeeded": (
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        },
    ),
    "Failed": ({"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."},),
}


@dataclass
class _PodTally:
    """What ``printPod`` accumulates over the container statuses."""

    reason: str
    ready: int = 0
    restarts: int = 0
    last_restart: datetime | None = None
    init_restarts: int = 0
    last_init_restart: datetime | None = None


def _last_finished(status: Any) -> Any:
    """When a container's previous run ended (``lastState.terminated.finishedAt``), if it did."""
    terminated = get_path(status, "lastState", "terminated")
    return terminated.get("finishedAt") if isinstance(terminated, dict) else None


def _exit_text(terminated: dict[str, Any], prefix: str) -> str:
    signal = as_int(terminated.get("signal"))
    return f"{prefix}Signal:{signal}" if signal else f"{prefix}ExitCode:{as_int(terminated.get('exitCode'))}"


def _init_reason(status: Any, index: int, count: int) -> str:
    """The ``Init:…`` reason of the init container that keeps the pod initializing."""
    terminated = get_path(status, "state", "terminated")
    waiting = get_path(status, "state", "waiting")
    if isinstance(terminated, dict):
        return (
            "Init:" + str(terminated["reason"])
            if terminated.get("reason")
            else _exit_text(terminated, "Init:")
        )
    if isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
        return "Init:" + str(waiting["reason"])
    return f"Init:{index}/{count}"


def _tally_init(status: dict[str, Any], init_specs: list[Any], tally: _PodTally) -> bool:
    """Count init containers' restarts and ready sidecars; whether one still keeps the pod initializing."""
    init_by_name = {c.get("name"): c for c in init_specs if isinstance(c, dict)}
    for index, cs in enumerate(status.get("initContainerStatuses") or []):
        count = as_int(cs.get("restartCount"))
        finished = _last_finished(cs)
        tally.restarts += count
        tally.last_restart = latest(tally.last_restart, finished)
        restartable = is_restartable(init_by_name.get(cs.get("name")))
        if restartable:
            tally.init_restarts += count
            tally.last_init_restart = latest(tally.last_init_restart, finished)
        terminated = get_path(cs, "state", "terminated")
        if isinstance(terminated, dict) and as_int(terminated.get("exitCode")) == 0:
            continue
        if restartable and cs.get("started") is True:
            tally.ready += 1 if cs.get("ready") else 0
            continue
        tally.reason = _init_reason(cs, index, len(init_specs))
        return True
    return False


def _container_reason(status: Any) -> str | None:
    """The reason a container's state gives the pod (waiting or terminated), if any."""
    waiting = get_path(status, "state", "waiting")
    terminated = get_path(status, "state", "terminated")
    if isinstance(waiting, dict) and waiting.get("reason"):
        return str(waiting["reason"])
    if isinstance(terminated, dict):
        return str(terminated["reason"]) if terminated.get("reason") else _exit_text(terminated, "")
    return None


def _tally_containers(status: dict[str, Any], tally: _PodTally) -> None:
    """Count the app containers (sidecar restarts included), last one first as kube does."""
    tally.restarts = tally.init_restarts
    tally.last_restart = tally.last_init_restart
    has_running = False
    for cs in reversed(status.get("containerStatuses") or []):
        tally.restarts += as_int(cs.get("restartCount"))
        tally.last_restart = latest(tally.last_restart, _last_finished(cs))
        reason = _container_reason(cs)
        if reason is not None:
            tally.reason = reason
        elif cs.get("ready") and isinstance(get_path(cs, "state", "running"), dict):
            has_running = True
            tally.ready += 1
    if tally.reason == "Completed" and has_running:
        tally.reason = "Running" if condition_true(status.get("conditions"), "Ready") else "NotReady"


def _readiness_gates(spec: dict[str, Any], status: dict[str, Any]) -> str:
    gates = spec.get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = status.get("conditions") or []
    true_count = 0
    for gate in gates:
        found = next((c for c in conditions if c.get("type") == gate.get("conditionType")), None)
        if found is not None and found.get("status") == "True":
            true_count += 1
    return f"{true_count}/{len(gates)}"


def _pod_ip(status: dict[str, Any]) -> Any:
    pod_ips = status.get("podIPs") or []
    return (pod_ips[0].get("ip") if pod_ips and isinstance(pod_ips[0], dict) else None) or status.get("podIP")


def print_pod(pod: dict[str, Any], now: datetime) -> Row:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    init_specs = spec.get("initContainers") or []
    phase = str(status.get("phase") or "")
    tally = _PodTally(reason=str(status.get("reason") or phase))
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            tally.reason = "SchedulingGated"
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs if is_restartable(c))
    initializing = _tally_init(status, init_specs, tally)
    if not initializing or condition_true(status.get("conditions"), "Initialized"):
        _tally_containers(status, tally)
    deleting = meta(pod).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        tally.reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        tally.reason = "Terminating"
    restarts_text = str(tally.restarts)
    if tally.restarts and tally.last_restart is not None:
        ago = human_duration((now - tally.last_restart).total_seconds())
        restarts_text = f"{tally.restarts} ({ago} ago)"
    cells = [
        meta(pod).get("name", ""),
        f"{tally.ready}/{total}",
        tally.reason,
        restarts_text,
        age(pod, now),
        _pod_ip(status) or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(spec, status),
    ]
    return cells, [dict(c) for c in _COMPLETED.get(phase, ())]


def print_node(node: dict[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    states: list[str] = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            states = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    return [
        meta(node).get("name", ""),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        age(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def print_namespace(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [meta(obj).get("name", ""), str(get_path(obj, "status", "phase") or ""), age(obj, now)]


def print_configmap(obj: dict[str, Any], now: datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [meta(obj).get("name", ""), count, age(obj, now)]


def print_secret(obj: dict[str, Any], now: datetime) -> list[Any]:
    # kube defaults an empty type to Opaque on create; show what a real server would have stored.
    kind = obj.get("type") or "Opaque"
    return [meta(obj).get("name", ""), kind, len(obj.get("data") or {}), age(obj, now)]


def print_service_account(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [meta(obj).get("name", ""), len(obj.get("secrets") or []), age(obj, now)]


def lb_ingress(status: Any, wide: bool) -> str:
    found = set()
    for ingress in get_path(status, "loadBalancer", "ingress") or []:
        if ingress.get("ip"):
            found.add(str(ingress["ip"]))
        elif ingress.get("hostname"):
            found.add(str(ingress["hostname"]))
    text = ",".join(sorted(found))
    if not wide and len(text) > 16:
        text = text[:13] + "..."
    return text


def print_service(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    external_ips = [str(ip) for ip in spec.get("externalIPs") or []]
    if kind in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) or "<none>"
    elif kind == "LoadBalancer":
        lb = lb_ingress(obj.get("status"), True)
        if external_ips:
            external = ",".join([*(lb.split(",") if lb else []), *external_ips])
        else:
            external = lb or "<pending>"
    elif kind == "ExternalName":
        external = str(spec.get("externalName") or "")
    else:
        external = "<unknown>"
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        if as_int(port.get("nodePort")) > 0:
            ports.append(f"{port.get('port')}:{port.get('nodePort')}/{protocol}")
        else:
            ports.append(f"{port.get('port')}/{protocol}")
    return [
        meta(obj).get("name", ""),
        kind,
        cluster_ips[0] if cluster_ips else "<none>",
        external,
        ",".join(ports) or "<none>",
        age(obj, now),
        format_labels(spec.get("selector")),
    ]


def print_endpoints(obj: dict[str, Any], now: datetime) -> list[Any]:
    subsets = obj.get("subsets") or []
    if not subsets:
        text = "<none>"
    else:
        items: list[str] = []
        count = 0
        more = False
        for subset in subsets:
            addresses = subset.get("addresses") or []
            ports = subset.get("ports") or []
            if not ports:
                count += len(addresses)
                for address in addresses:
                    if len(items) == 3:
                        more = True
                        break
                    items.append(str(address.get("ip", "")))
                continue
            for port in ports:
                count += len(addresses)
                for address in addresses:
                    if len(items) == 3:
                        more = True
                        break
                    ip = str(address.get("ip", ""))
                    host = f"[{ip}]" if ":" in ip else ip
                    items.append(f"{host}:{port.get('port')}")
        text = ",".join(items)
        if more:
            text = f"{text} + {count - 3} more..."
    return [meta(obj).get("name", ""), text, age(obj, now)]


def print_event(obj: dict[str, Any], now: datetime) -> list[Any]:
    """Core v1 events and events.k8s.io/v1 events (converted to the core fields first, as kube does)."""
    if str(obj.get("apiVersion", "")).startswith("events.k8s.io/"):
        obj = {
            "metadata": obj.get("metadata"),
            "involvedObject": obj.get("regarding") or {},
            "reason": obj.get("reason"),
            "message": obj.get("note"),
            "source": obj.get("deprecatedSource") or {},
            "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
            "lastTimestamp": obj.get("deprecatedLastTimestamp"),
            "count": obj.get("deprecatedCount"),
            "type": obj.get("type"),
            "eventTime": obj.get("eventTime"),
            "series": obj.get("series"),
            "reportingComponent": obj.get("reportingController"),
            "reportingInstance": obj.get("reportingInstance"),
        }
    first = (
        since(obj.get("firstTimestamp"), now)
        if obj.get("firstTimestamp")
        else since(obj.get("eventTime"), now)
    )
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = as_int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = as_int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return [
        last,
        str(obj.get("type") or ""),
        str(obj.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        f"{component}, {instance}" if instance else str(component),
        str(obj.get("message") or "").strip(),
        first,
        count,
        meta(obj).get("name", ""),
    ]


def print_pvc(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = "Terminating" if meta(obj).get("deletionTimestamp") else str(status.get("phase") or "")
    capacity = ""
    modes = ""
    if spec.get("volumeName"):
        modes = access_modes(status.get("accessModes"))
        capacity = quantity((status.get("capacity") or {}).get("storage"))
    storage_class = spec.get("storageClassName")
    if storage_class is None:
        storage_class = (meta(obj).get("annotations") or {}).get(
            "volume.beta.kubernetes.io/storage-class", ""
        )
    return [
        meta(obj).get("name", ""),
        phase,
        str(spec.get("volumeName") or ""),
        capacity,
        modes,
        str(storage_class or ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        age(obj, now),
        spec.get("volumeMode") or "<unset>",
    ]


def access_modes(modes: Any) -> str:
    present = set(modes or [])
    short = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    return ",".join(s for mode, s in short if mode in present)


def print_pv(obj: dict[str, Any], now: datetime) -> list[Any]:
    """``printPersistentVolume``."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""
    phase = "Terminating" if meta(obj).get("deletionTimestamp") else str(status.get("phase") or "")
    return [
        meta(obj).get("name", ""),
        quantity((spec.get("capacity") or {}).get("storage")),
        access_modes(spec.get("accessModes")),
        str(spec.get("persistentVolumeReclaimPolicy") or ""),
        phase,
        claim,
        str(spec.get("storageClassName") or ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        str(status.get("reason") or ""),
        age(obj, now),
        str(spec.get("volumeMode") or "Filesystem"),
    ]

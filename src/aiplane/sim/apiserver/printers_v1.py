"""Row printers of the core (``/api/v1``) kinds, as ``pkg/printers/internalversion`` prints them."""

from __future__ import annotations

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


def print_pod(pod: dict[str, Any], now: datetime) -> Row:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = spec.get("containers") or []
    init_specs = spec.get("initContainers") or []
    restarts = 0
    init_restarts = 0
    total = len(containers)
    ready = 0
    last_restart: datetime | None = None
    last_init_restart: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    conditions: list[dict[str, Any]] = []
    if phase == "Succeeded":
        conditions = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    elif phase == "Failed":
        conditions = [
            {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
        ]
    init_by_name = {c.get("name"): c for c in init_specs if isinstance(c, dict)}
    total += sum(1 for c in init_specs if is_restartable(c))
    initializing = False
    for index, cs in enumerate(status.get("initContainerStatuses") or []):
        count = as_int(cs.get("restartCount"))
        restarts += count
        terminated_last = get_path(cs, "lastState", "terminated")
        if isinstance(terminated_last, dict):
            last_restart = latest(last_restart, terminated_last.get("finishedAt"))
        restartable = is_restartable(init_by_name.get(cs.get("name")))
        if restartable:
            init_restarts += count
            if isinstance(terminated_last, dict):
                last_init_restart = latest(last_init_restart, terminated_last.get("finishedAt"))
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(terminated, dict) and as_int(terminated.get("exitCode")) == 0:
            continue
        if restartable and cs.get("started") is True:
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, dict):
            if not terminated.get("reason"):
                signal = as_int(terminated.get("signal"))
                reason = (
                    f"Init:Signal:{signal}"
                    if signal
                    else f"Init:ExitCode:{as_int(terminated.get('exitCode'))}"
                )
            else:
                reason = "Init:" + str(terminated["reason"])
        elif (
            isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing"
        ):
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or condition_true(status.get("conditions"), "Initialized"):
        restarts = init_restarts
        last_restart = last_init_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += as_int(cs.get("restartCount"))
            terminated_last = get_path(cs, "lastState", "terminated")
            if isinstance(terminated_last, dict):
                last_restart = latest(last_restart, terminated_last.get("finishedAt"))
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif isinstance(terminated, dict):
                signal = as_int(terminated.get("signal"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{as_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if condition_true(status.get("conditions"), "Ready") else "NotReady"
    deleting = meta(pod).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips and isinstance(pod_ips[0], dict) else None) or status.get(
        "podIP"
    )
    gates = spec.get("readinessGates") or []
    readiness = "<none>"
    if gates:
        true_count = 0
        for gate in gates:
            for condition in status.get("conditions") or []:
                if condition.get("type") == gate.get("conditionType"):
                    if condition.get("status") == "True":
                        true_count += 1
                    break
        readiness = f"{true_count}/{len(gates)}"
    cells = [
        meta(pod).get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_text,
        age(pod, now),
        pod_ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness,
    ]
    return cells, conditions


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

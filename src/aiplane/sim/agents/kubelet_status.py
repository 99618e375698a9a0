"""The kubelet-lite's pod statuses, as pure functions (split from :mod:`.kubelet`, which writes them)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.sim.agents.base import (
    Obj,
)
from aiplane.sim.agents.daemonsets import toleration_tolerates_taint
from aiplane.sim.agents.kubelet_refs import Missing

if TYPE_CHECKING:
    pass


#: The containerd the fleet's nodes report (``containerRuntimeVersion: containerd://2.1.4``).
RUNTIME = "containerd"

_CONDITION_ORDER = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


def internal_ip(node: Obj | None) -> str | None:
    for address in ((node or {}).get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return None


def running_status(pod: Obj, *, host_ip: str | None, pod_ip: str, now: str, ready: bool) -> dict[str, Any]:
    """The status a kubelet reports for ``pod`` once its containers have started (pure)."""
    spec = objects.spec(pod)
    old = objects.status(pod)
    seed = objects.uid(pod)

    def container_id(name: str) -> str:
        return f"{RUNTIME}://" + hashlib.sha256(f"{seed}/{name}".encode()).hexdigest()

    def image_id(image: str) -> str:
        return f"{image.split('@', 1)[0]}@sha256:" + hashlib.sha256(image.encode()).hexdigest()

    def image_of(container: Obj) -> str:
        image = str(container.get("image") or "")
        return image if ("/" in image.split(":", 1)[0]) else f"docker.io/library/{image}"

    def container_status(c: Obj, state: dict[str, Any], *, started: bool) -> dict[str, Any]:
        return {
            "name": c["name"],
            "state": state,
            "lastState": {},
            "ready": True,
            "restartCount": 0,
            "image": image_of(c),
            "imageID": image_id(image_of(c)),
            "containerID": container_id(c["name"]),
            "started": started,
        }

    ready_text = "True" if ready else "False"
    conditions = {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": ready_text,
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    out_conditions = []
    for kind in _CONDITION_ORDER:
        value = conditions[kind]
        before = previous.get(kind)
        since = before.get("lastTransitionTime") if before and before.get("status") == value else now
        out_conditions.append(
            {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": since or now}
        )
    containers = [
        container_status(c, {"running": {"startedAt": now}}, started=True)
        for c in spec.get("containers") or []
    ]
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": out_conditions,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": old.get("startTime") or now,
        "containerStatuses": containers,
    }
    if host_ip:
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}]
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [
            container_status(c, {"terminated": _completed(now, container_id(c["name"]))}, started=False)
            for c in spec["initContainers"]
        ]
    if old.get("qosClass"):
        status["qosClass"] = old["qosClass"]
    return status


def _completed(now: str, container_id: str) -> dict[str, Any]:
    """The ``terminated`` state of an init container that ran to completion at once."""
    return {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": now,
        "finishedAt": now,
        "containerID": container_id,
    }


def with_ready(status: dict[str, Any], ready: bool, now: str) -> dict[str, Any]:
    """``status`` with its ``Ready`` condition set to ``ready`` (transition time moves on a flip only)."""
    wanted = "True" if ready else "False"
    conditions = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != wanted:
            conditions.append({**cond, "status": wanted, "lastTransitionTime": now})
        else:
            conditions.append(cond)
    return {**status, "conditions": conditions}


def with_container_readiness(status: dict[str, Any], node_is_ready: bool, now: str) -> dict[str, Any]:
    """``status`` with ``ContainersReady`` and ``Ready`` derived from its container statuses, as the
    kubelet's status manager computes them: ``ContainersReady`` is ``False`` (``ContainersNotReady``,
    "containers with unready status: [a b]") while a container is not ready; ``Ready`` also needs the node
    to be Ready (a NotReady node's pods get a bare ``Ready=False``, as the node lifecycle controller
    writes it). Transition times move on a flip only."""
    unready = [str(c.get("name")) for c in status.get("containerStatuses") or [] if not c.get("ready")]
    detail = {
        "reason": "ContainersNotReady",
        "message": f"containers with unready status: [{' '.join(unready)}]",
    }
    wanted: dict[str, tuple[str, dict[str, str]]] = {
        "ContainersReady": ("False", detail) if unready else ("True", {}),
        "Ready": ("False", detail) if unready else (("True", {}) if node_is_ready else ("False", {})),
    }
    conditions = []
    for cond in status.get("conditions") or []:
        kind = cond.get("type")
        if kind not in wanted:
            conditions.append(cond)
            continue
        value, extra = wanted[kind]
        new = {k: v for k, v in cond.items() if k not in ("reason", "message")}
        new.update(extra)
        new["status"] = value
        if cond.get("status") != value:
            new["lastTransitionTime"] = now
        conditions.append(new)
    return {**status, "conditions": conditions}


def waiting_status(pod: Obj, missing: list[Missing], *, now: str) -> dict[str, Any]:
    """A Pending pod's status while the kubelet cannot start it: every container ``waiting`` —
    ``CreateContainerConfigError`` with the message for one whose env reference is missing,
    ``ContainerCreating`` otherwise (also for all of them while a volume cannot be mounted)."""
    old = objects.status(pod)
    by_container = {m.container: m.message for m in missing if m.container is not None}
    statuses = []
    for container in objects.spec(pod).get("containers") or []:
        name = str(container.get("name"))
        if name in by_container:
            waiting = {"reason": "CreateContainerConfigError", "message": by_container[name]}
        else:
            waiting = {"reason": "ContainerCreating"}
        statuses.append(
            {
                "name": name,
                "state": {"waiting": waiting},
                "lastState": {},
                "ready": False,
                "restartCount": 0,
                "image": container.get("image"),
                "imageID": "",
                "started": False,
            }
        )
    unready = " ".join(str(s["name"]) for s in statuses)
    detail = {"reason": "ContainersNotReady", "message": f"containers with unready status: [{unready}]"}
    wanted = {
        "PodReadyToStartContainers": ("False" if not by_container else "True", {}),
        "Initialized": ("True", {}),
        "Ready": ("False", detail),
        "ContainersReady": ("False", detail),
        "PodScheduled": ("True", {}),
    }
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    conditions = []
    for kind in _CONDITION_ORDER:
        value, extra = wanted[kind]
        before = previous.get(kind)
        since = before.get("lastTransitionTime") if before and before.get("status") == value else now
        conditions.append(
            {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": since, **extra}
        )
    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k in ("hostIP", "hostIPs", "qosClass", "startTime")},
        "phase": "Pending",
        "conditions": conditions,
        "containerStatuses": statuses,
    }
    status.setdefault("startTime", now)
    return status


def terminated_state(
    container_status: Obj, *, exit_code: int, reason: str, now: str, message: str | None = None
) -> Obj:
    """``state.terminated`` of a container that exits now (started when its ``running`` state says)."""
    started = ((container_status.get("state") or {}).get("running") or {}).get("startedAt") or now
    terminated: Obj = {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": now}
    if message:
        terminated["message"] = message
    if container_status.get("containerID"):
        terminated["containerID"] = container_status["containerID"]
    return terminated


def min_toleration_seconds(taints: list[Obj], tolerations: list[Obj]) -> float | None:
    """``getMinTolerationTime``: the smallest ``tolerationSeconds`` among the tolerations used for
    ``taints`` (``None``: tolerated forever; negative values count as 0)."""
    best: float | None = None
    for taint in taints:
        for toleration in tolerations:
            if not toleration_tolerates_taint(toleration, taint):
                continue
            seconds = toleration.get("tolerationSeconds")
            if seconds is None:
                continue
            value = max(float(seconds), 0.0)
            best = value if best is None else min(best, value)
    return best

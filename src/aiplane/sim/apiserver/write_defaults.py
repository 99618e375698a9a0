"""What kube-apiserver fills in on a write, apart from schema defaults: a Secret's ``stringData`` folded
into ``data``, a Pod's QoS class, and the status a CRD gets from kube's establishing controller."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from aiplane.sim.apiserver.resources import ResourceType


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Conversions kube applies on every write: a Secret's ``stringData`` is merged into ``data``."""
    if (rt.group, rt.kind) == ("", "Secret") and "stringData" in obj:
        string_data = obj.pop("stringData") or {}
        data = dict(obj.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def crd_status(crd: dict[str, Any]) -> dict[str, Any]:
    spec = crd["spec"]
    previous = {c["type"]: c for c in (crd.get("status") or {}).get("conditions", [])}
    now = rfc3339(utcnow())

    def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        old = previous.get(kind)
        since = old["lastTransitionTime"] if old and old.get("status") == "True" else now
        return {
            "type": kind,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    stored = list((crd.get("status") or {}).get("storedVersions", []))
    storage = next((v["name"] for v in spec["versions"] if v.get("storage")), spec["versions"][0]["name"])
    if storage not in stored:
        stored.append(storage)
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    return {
        "acceptedNames": names,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": stored,
    }


def qos_class(spec: dict[str, Any]) -> str:
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_seen = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            requests_seen = True
        for res in ("cpu", "memory"):
            if res not in limits or requests.get(res, limits[res]) != limits[res]:
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_seen else "BestEffort"

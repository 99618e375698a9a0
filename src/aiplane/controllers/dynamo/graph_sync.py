"""What the DGD controller writes, decided without I/O: DCD creates and updates, PVCs, the
ServiceAccount of Dynamo's Planner service.

**Who owns a DCD's ``spec.replicas``.** Upstream the DGD is the source of truth (#4420): the
service's ``replicas`` is copied into the DCD and a direct ``kubectl scale dcd`` is overwritten.
We keep that when the service *sets* ``replicas`` — the DGD wins, and the executor records an Event
saying so. When the service sets no ``replicas``, the graph does not own the count: the DCD is
created without it (its controller runs one replica), and later syncs keep whatever the DCD has,
so ``kubectl scale dcd`` (or Dynamo's Planner service scaling the DCD) sticks.

**When a DCD is rewritten.** Each DCD carries ``nvidia.com/last-applied-hash``, the hash of the
labels and spec the graph wants (replicas only when owned). The DCD is updated when that hash
differs, or when owned replicas drifted; an edit to any other DCD field is left alone until the
graph changes (upstream's ``SyncResource`` behaves the same way). Comparing hashes rather than
specs keeps API-server defaulting from looking like drift, so a converged graph writes nothing.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference, is_controlled_by
from aiplane.controllers.dynamo.graph import services
from aiplane.controllers.dynamo.naming import (
    ANNOTATION_LAST_APPLIED_HASH,
    API_VERSION,
    COMPONENT_PLANNER,
    DGD_KIND,
    PLANNER_SERVICE_ACCOUNT,
)

__all__ = [
    "DcdVerb",
    "DcdWrite",
    "PvcPlan",
    "WantedDcd",
    "dcd_hash",
    "needs_planner_account",
    "plan_dcd",
    "plan_pvcs",
    "planner_service_account",
    "wanted_dcd",
]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class WantedDcd:
    """One DCD the graph wants: its name, the hash of the body we write, and the replicas the graph
    owns (``None``: the service sets none, so whoever scales the DCD decides)."""

    name: str
    hash: str
    replicas: int | None = None


def dcd_hash(desired: Obj) -> str:
    """The hash of what the graph owns in a DCD: its labels and spec (replicas only when present)."""
    owned = {"labels": objects.labels(desired), "spec": objects.spec(desired)}
    text = json.dumps(owned, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def wanted_dcd(desired: Obj) -> WantedDcd:
    replicas = objects.spec(desired).get("replicas")
    owned = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
    return WantedDcd(objects.name(desired), dcd_hash(desired), owned)


class DcdVerb(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"


@dataclass(frozen=True)
class DcdWrite:
    """One DCD write: create or update with the full body; ``overrode_replicas`` is the count a
    direct scale had set when the graph's replicas win over it (for the Event)."""

    verb: DcdVerb
    body: dict[str, Any]
    overrode_replicas: int | None = None


def _with_hash(metadata: Mapping[str, Any], digest: str) -> dict[str, Any]:
    annotations = metadata.get("annotations")
    return {**(annotations if isinstance(annotations, Mapping) else {}), ANNOTATION_LAST_APPLIED_HASH: digest}


def plan_dcd(desired: Obj, existing: Obj | None, owner_uid: str) -> DcdWrite | None:
    """The write that makes ``existing`` what the graph wants (module docstring), or ``None``.

    A DCD of that name controlled by someone else (a predecessor DGD of the same name the garbage
    collector has not removed yet) is never written: the status reports it instead.
    """
    wanted = wanted_dcd(desired)
    if existing is None:
        body = copy.deepcopy(dict(desired))
        body["metadata"]["annotations"] = _with_hash(body["metadata"], wanted.hash)
        return DcdWrite(DcdVerb.CREATE, body)
    if not (owner_uid and is_controlled_by(existing, owner_uid)):
        return None
    current = objects.spec(existing).get("replicas")
    applied = objects.annotations(existing).get(ANNOTATION_LAST_APPLIED_HASH)
    replicas_drifted = wanted.replicas is not None and current != wanted.replicas
    if applied == wanted.hash and not replicas_drifted:
        return None
    body = copy.deepcopy(dict(existing))
    metadata = body.setdefault("metadata", {})
    metadata["labels"] = {**objects.labels(existing), **objects.labels(desired)}
    metadata["annotations"] = _with_hash(metadata, wanted.hash)
    metadata.pop("managedFields", None)
    spec = copy.deepcopy(dict(objects.spec(desired)))
    if wanted.replicas is None and "replicas" in objects.spec(existing):
        spec["replicas"] = current  # not the graph's to set: a direct scale sticks
    body["spec"] = spec
    body.pop("status", None)
    overrode = current if applied == wanted.hash and replicas_drifted and isinstance(current, int) else None
    return DcdWrite(DcdVerb.UPDATE, body, overrode)


# --- PVCs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PvcPlan:
    """PVC bodies to create, and the entries that name a missing PVC the graph may not create."""

    create: list[dict[str, Any]]
    missing: list[str]


def _owner(dgd: Obj) -> dict[str, Any]:
    return controller_owner_reference(
        {
            "apiVersion": API_VERSION,
            "kind": DGD_KIND,
            "metadata": {"name": objects.name(dgd), "uid": objects.uid(dgd)},
        }
    )


def _pvc_body(dgd: Obj, entry: Obj, default_storage_class: str | None = None) -> dict[str, Any]:
    """Upstream's ``ConstructPVC``: name, one access mode, the size as the storage request, the
    storage class; controlled by the DGD, so deleting the graph deletes the claim. An entry without
    ``storageClass`` gets the KaiwoConfig's ``storage.defaultStorageClass`` when one is set (else
    none: the cluster's default class), docs/kaiwo.md."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": str(entry["name"]),
            "namespace": objects.namespace(dgd),
            "ownerReferences": [_owner(dgd)],
        },
        "spec": {
            "accessModes": [entry.get("volumeAccessMode")],
            "resources": {"requests": {"storage": str(entry.get("size"))}},
            "storageClassName": entry.get("storageClass") or default_storage_class,
        },
    }


def plan_pvcs(
    dgd: Obj, lookup: Callable[[str], Obj | None], default_storage_class: str | None = None
) -> PvcPlan:
    """Each ``spec.pvcs`` entry: reused when the claim exists (``lookup`` by name, in the DGD's
    namespace), created when missing and ``create: true``, else reported by its path."""
    raw = objects.spec(dgd).get("pvcs")
    create: list[dict[str, Any]] = []
    missing: list[str] = []
    for i, entry in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
            continue
        if lookup(entry["name"]) is not None:
            continue
        if entry.get("create") is True:
            create.append(_pvc_body(dgd, entry, default_storage_class))
        else:
            missing.append(
                f"spec.pvcs[{i}]: PersistentVolumeClaim {entry['name']!r} does not exist in namespace "
                f"{objects.namespace(dgd)!r} and create is not true (create the claim, or set create: true "
                "with size, storageClass and volumeAccessMode)"
            )
    return PvcPlan(create, missing)


# --- the Planner service's ServiceAccount ---------------------------------------------------------

#: Marks the ServiceAccount as ours (it is shared by every graph of the namespace, so it has no owner).
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"


def needs_planner_account(dgd: Obj) -> bool:
    return any(s.get("componentType") == COMPONENT_PLANNER for s in services(dgd).values())


def planner_service_account(namespace: str) -> dict[str, Any]:
    """``planner-serviceaccount``: upstream also binds it to a Helm-installed ClusterRole; we create
    the account only (the RBAC Dynamo's Planner service needs is the installer's to grant)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": PLANNER_SERVICE_ACCOUNT,
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: "aiplane"},
        },
    }

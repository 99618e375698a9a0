"""kube-controller-manager's PersistentVolume controller (``pkg/controller/volume/persistentvolume``)
with an external-provisioner (``sigs.k8s.io/sig-storage-lib-external-provisioner``) for every
StorageClass, lite.

A claim is bound to the smallest Available volume of its class that fits (capacity, access modes), or,
when its class names a provisioner, to a volume provisioned for it: ``pvc-<claim uid>``, the claim's
request as capacity, its access modes and volume mode, a ``claimRef``, the class's reclaim policy and
mount options, ``pv.kubernetes.io/provisioned-by`` and a ``hostPath`` source. ``Immediate`` classes
provision at once; ``WaitForFirstConsumer`` ones once the scheduler has named a node in the claim's
``volume.kubernetes.io/selected-node`` (the volume then has that node as its node affinity). A claim of
a missing class stays ``Pending`` with a ``ProvisioningFailed`` Event. A volume whose claim is gone is
``Released``, and deleted when its reclaim policy is ``Delete``. Each write is made only when it
changes something, so a cluster at rest sees none.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.sim.agents.base import AgentLoop, Obj, Work, record_event, write_status
from aiplane.sim.agents.scheduler_filters import SELECTED_NODE
from aiplane.sim.apiserver.defaults import default_class_name
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import DeleteOptions, WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

COMPONENT = "persistentvolume-controller"
FIELD_MANAGER = "kube-controller-manager"
#: The provisioner of the embedded cluster's classes.
HOSTPATH_PROVISIONER = "sim.aiplane.io/hostpath"
HOSTPATH_ROOT = "/var/lib/aiplane-sim/volumes"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"


def request_of(claim: Obj) -> str:
    return str(((objects.spec(claim).get("resources") or {}).get("requests") or {}).get("storage") or "0")


def _bytes(value: Any) -> int:
    try:
        return Quantity(value).value()
    except (ValueError, TypeError, ArithmeticError):
        return 0


def volume_fits(volume: Obj, claim: Obj) -> bool:
    """``findMatchingVolume`` without selectors: same class and volume mode, enough capacity, every
    requested access mode."""
    vspec, cspec = objects.spec(volume), objects.spec(claim)
    return bool(
        (vspec.get("storageClassName") or "") == (cspec.get("storageClassName") or "")
        and (vspec.get("volumeMode") or "Filesystem") == (cspec.get("volumeMode") or "Filesystem")
        and _bytes((vspec.get("capacity") or {}).get("storage")) >= _bytes(request_of(claim))
        and set(cspec.get("accessModes") or []) <= set(vspec.get("accessModes") or [])
        and not cspec.get("selector")
    )


def provisioned_volume(claim: Obj, storage_class: Obj) -> Obj:
    """The volume the hostpath provisioner makes for ``claim`` (as an external-provisioner fills it)."""
    meta, spec = objects.meta(claim), objects.spec(claim)
    name = f"pvc-{meta['uid']}"
    volume_spec: Obj = {
        "capacity": {"storage": request_of(claim)},
        "accessModes": list(spec.get("accessModes") or []),
        "claimRef": {
            "kind": "PersistentVolumeClaim",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion"),
        },
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": objects.name(storage_class),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "hostPath": {"path": f"{HOSTPATH_ROOT}/{name}", "type": "DirectoryOrCreate"},
    }
    if storage_class.get("mountOptions"):
        volume_spec["mountOptions"] = list(storage_class["mountOptions"])
    node = objects.annotations(claim).get(SELECTED_NODE)
    if node:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: str(storage_class.get("provisioner"))}},
        "spec": volume_spec,
    }


class VolumeController(AgentLoop):
    """Binds claims to volumes, provisioning them (see the module doc)."""

    name = "persistentvolume-controller"

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.pvc_rt: ResourceType = api.resource("v1", "PersistentVolumeClaim")
        self.pv_rt: ResourceType = api.resource("v1", "PersistentVolume")
        self.sc_rt: ResourceType = api.resource("storage.k8s.io/v1", "StorageClass")
        #: claim uid → the last Event reason reported for it (each is recorded once per cause).
        self._reported: dict[str, str] = {}

    def resync(self) -> None:
        for claim in self.store.items(self.pvc_rt.storage_key):
            self.enqueue(("pvc", objects.namespace(claim), objects.name(claim)))
        for volume in self.store.items(self.pv_rt.storage_key):
            self.enqueue(("pv", objects.name(volume)))

    def on_event(self, event: Event) -> None:
        obj = event.obj
        if event.key == self.pvc_rt.storage_key:
            if event.type == DELETED:
                self._reported.pop(objects.uid(obj), None)
                if objects.spec(obj).get("volumeName"):
                    self.enqueue(("pv", str(objects.spec(obj)["volumeName"])))
            else:
                self.enqueue(("pvc", objects.namespace(obj), objects.name(obj)))
        elif event.key == self.pv_rt.storage_key:
            ref = objects.spec(obj).get("claimRef") or {}
            if ref.get("name"):
                self.enqueue(("pvc", str(ref.get("namespace") or ""), str(ref["name"])))
            if event.type != DELETED:
                self.enqueue(("pv", objects.name(obj)))
            elif not ref:
                self._retry_unbound()
        elif event.key == self.sc_rt.storage_key and event.type != DELETED:
            self._retry_unbound()

    def _retry_unbound(self) -> None:
        for claim in self.store.items(self.pvc_rt.storage_key):
            if not objects.spec(claim).get("volumeName"):
                self.enqueue(("pvc", objects.namespace(claim), objects.name(claim)))

    def process(self, work: Work) -> None:
        if work[0] == "pvc":
            self._sync_claim(work[1], work[2])
        else:
            self._sync_volume(work[1])

    # --- claims -----------------------------------------------------------------------------------

    def _sync_claim(self, namespace: str, name: str) -> None:
        claim = self.store.get(self.pvc_rt.storage_key, namespace, name)
        if claim is None or objects.is_deleting(claim):
            return
        volume_name = objects.spec(claim).get("volumeName")
        if volume_name:
            volume = self.store.get(self.pv_rt.storage_key, "", str(volume_name))
            if volume is None:
                if self._set_claim_phase(claim, "Lost"):
                    record_event(
                        self.api,
                        claim,
                        "Warning",
                        "ClaimLost",
                        "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                        component=COMPONENT,
                    )
                return
            self._bind(claim, volume)
            return
        self._set_claim_phase(claim, "Pending")
        claim = self.store.get(self.pvc_rt.storage_key, namespace, name) or claim
        match = self._find_volume(claim)
        if match is not None:
            self._bind(claim, match)
            return
        self._provision(claim)

    def _find_volume(self, claim: Obj) -> Obj | None:
        uid = objects.uid(claim)
        fits = []
        for volume in self.store.items(self.pv_rt.storage_key):
            ref = objects.spec(volume).get("claimRef") or {}
            if ref.get("uid") == uid or (
                ref.get("name") == objects.name(claim)
                and ref.get("namespace") == objects.namespace(claim)
                and not ref.get("uid")
            ):
                return volume  # pre-bound to this claim
            if not ref and objects.status(volume).get("phase") == "Available" and volume_fits(volume, claim):
                fits.append(volume)
        fits.sort(
            key=lambda v: (_bytes((objects.spec(v).get("capacity") or {}).get("storage")), objects.name(v))
        )
        return fits[0] if fits else None

    def _provision(self, claim: Obj) -> None:
        class_name = objects.spec(claim).get("storageClassName")
        if class_name is None:  # no default class when it was made: retroactively assign one
            default = default_class_name(self.store.items(self.sc_rt.storage_key))
            if default is not None:
                self._update_claim(claim, spec={"storageClassName": default})
            return
        if not class_name:
            return  # "" asks for a volume without class: only a matching volume binds it
        storage_class = self.store.get(self.sc_rt.storage_key, "", str(class_name))
        if storage_class is None:
            self._report(
                claim,
                "Warning",
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{class_name}" not found',
            )
            return
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not objects.annotations(
            claim
        ).get(SELECTED_NODE):
            self._report(
                claim,
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
            return
        provisioner = str(storage_class.get("provisioner") or "")
        if objects.annotations(claim).get(STORAGE_PROVISIONER) != provisioner:
            claim = self._update_claim(
                claim, annotations={STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}
            )
            record_event(
                self.api,
                claim,
                "Normal",
                "ExternalProvisioning",
                f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually "
                "by the system administrator. If volume creation is delayed, please verify that the provisioner "
                "is running and correctly registered.",
                component=COMPONENT,
            )
        if provisioner != HOSTPATH_PROVISIONER:
            return  # another provisioner's claim: nothing in the sim provisions it
        component = f"{provisioner}_aiplane-sim"
        key = f"{objects.namespace(claim)}/{objects.name(claim)}"
        record_event(
            self.api,
            claim,
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{key}"',
            component=component,
        )
        body = provisioned_volume(claim, storage_class)
        try:
            volume = self.api.create(self.pv_rt, None, body, WriteOptions(field_manager=component)).obj
        except ApiError as err:
            if err.code != 409:
                raise
            volume = self.api.get(self.pv_rt, None, objects.name(body))
        record_event(
            self.api,
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {objects.name(volume)}",
            component=component,
        )
        self._bind(claim, volume)

    def _bind(self, claim: Obj, volume: Obj) -> None:
        """``bind``: the volume's claimRef and phase, then the claim's volumeName, annotations and status."""
        ref = objects.spec(volume).get("claimRef") or {}
        if ref and ref.get("uid") not in (None, objects.uid(claim)):
            return  # the volume is someone else's
        if ref.get("uid") != objects.uid(claim):
            meta = objects.meta(claim)
            claim_ref = {
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion"),
            }
            body = {**volume, "spec": {**objects.spec(volume), "claimRef": claim_ref}}
            body["metadata"] = {
                **objects.meta(volume),
                "annotations": {**objects.annotations(volume), BOUND_BY_CONTROLLER: "yes"},
            }
            volume = self.api.update(
                self.pv_rt, None, objects.name(volume), body, WriteOptions(field_manager=FIELD_MANAGER)
            ).obj
        if objects.status(volume).get("phase") != "Bound":
            pv_status = {"phase": "Bound", "lastPhaseTransitionTime": rfc3339(self.api.clock())}
            volume = write_status(self.api, self.pv_rt, volume, pv_status, FIELD_MANAGER)
        wanted = {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}
        if objects.spec(claim).get("volumeName") != objects.name(volume) or any(
            objects.annotations(claim).get(k) != v for k, v in wanted.items()
        ):
            if objects.spec(claim).get("volumeName") == objects.name(volume):
                wanted.pop(BOUND_BY_CONTROLLER)  # the user named the volume: only bind-completed
            claim = self._update_claim(claim, spec={"volumeName": objects.name(volume)}, annotations=wanted)
        vspec = objects.spec(volume)
        status: Obj = {
            "phase": "Bound",
            "accessModes": list(vspec.get("accessModes") or []),
            "capacity": dict(vspec.get("capacity") or {}),
        }
        if dict(objects.status(claim)) != status:
            write_status(self.api, self.pvc_rt, claim, status, FIELD_MANAGER)

    def _update_claim(
        self, claim: Obj, *, spec: Obj | None = None, annotations: dict[str, str] | None = None
    ) -> Obj:
        body = {**claim, "spec": {**objects.spec(claim), **(spec or {})}}
        if annotations:
            body["metadata"] = {
                **objects.meta(claim),
                "annotations": {**objects.annotations(claim), **annotations},
            }
        return self.api.update(
            self.pvc_rt,
            objects.namespace(claim),
            objects.name(claim),
            body,
            WriteOptions(field_manager=FIELD_MANAGER),
        ).obj

    def _set_claim_phase(self, claim: Obj, phase: str) -> bool:
        if objects.status(claim).get("phase") == phase:
            return False
        write_status(self.api, self.pvc_rt, claim, {**objects.status(claim), "phase": phase}, FIELD_MANAGER)
        return True

    def _report(self, claim: Obj, type_: str, reason: str, message: str) -> None:
        if self._reported.get(objects.uid(claim)) != message:
            self._reported[objects.uid(claim)] = message
            record_event(self.api, claim, type_, reason, message, component=COMPONENT)

    # --- volumes ----------------------------------------------------------------------------------

    def _sync_volume(self, name: str) -> None:
        """``syncVolume``: Available without a claim, Released when its claim is gone, then reclaimed."""
        volume = self.store.get(self.pv_rt.storage_key, "", name)
        if volume is None or objects.is_deleting(volume):
            return
        ref = objects.spec(volume).get("claimRef") or {}
        phase = objects.status(volume).get("phase")
        if not ref:
            if phase != "Available":
                write_status(
                    self.api,
                    self.pv_rt,
                    volume,
                    {"phase": "Available", "lastPhaseTransitionTime": rfc3339(self.api.clock())},
                    FIELD_MANAGER,
                )
            return
        claim = self.store.get(
            self.pvc_rt.storage_key, str(ref.get("namespace") or ""), str(ref.get("name") or "")
        )
        if claim is not None and (not ref.get("uid") or objects.uid(claim) == ref.get("uid")):
            return  # bound, or being bound by the claim's sync
        if phase != "Released":
            volume = write_status(
                self.api,
                self.pv_rt,
                volume,
                {"phase": "Released", "lastPhaseTransitionTime": rfc3339(self.api.clock())},
                FIELD_MANAGER,
            )
        if objects.spec(volume).get("persistentVolumeReclaimPolicy") == "Delete":
            try:
                self.api.delete(self.pv_rt, None, name, DeleteOptions(precondition_uid=objects.uid(volume)))
            except ApiError as err:
                if err.code not in (404, 409):
                    raise

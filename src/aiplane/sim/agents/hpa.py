"""The HorizontalPodAutoscaler controller of kube-controller-manager (``pkg/controller/podautoscaler``),
for a cluster without metrics APIs.

Every autoscaling/v2 HPA is synced when it or its target changes and every :data:`SYNC_PERIOD` seconds
(``--horizontal-pod-autoscaler-sync-period``), as upstream's rate-limited queue does. A sync reads the
target's scale (``scaleTargetRef``: any kind served with a ``scale`` subresource, built-in or CRD),
decides in :mod:`.hpa_rules` and writes only what differs: the target's ``/scale`` when it rescales,
the HPA's ``/status`` when it changed, and Events when it did either (so an idle cluster sees no writes;
upstream repeats its Warning Events every sync, aggregated by the recorder into one Event's count).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from aiplane.apimachinery import objects
from aiplane.sim.agents import hpa_rules
from aiplane.sim.agents.base import AgentLoop, Obj, Work, record_event, write_status
from aiplane.sim.apiserver import scale as scale_mod
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    import asyncio

    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

COMPONENT = "horizontal-pod-autoscaler"
FIELD_MANAGER = "kube-controller-manager"
#: ``--horizontal-pod-autoscaler-sync-period`` (seconds).
SYNC_PERIOD = 15.0

Key = tuple[str, str]


class HorizontalPodAutoscalerController(AgentLoop):
    """Scales the targets of HPAs within their bounds (see the module doc)."""

    name = "horizontal-pod-autoscaler"

    def __init__(self, api: Api, *, sync_period: float = SYNC_PERIOD) -> None:
        super().__init__(api)
        self.sync_period = sync_period
        self.hpa_rt: ResourceType = api.resource("autoscaling/v2", "HorizontalPodAutoscaler")
        self._memory: dict[Key, hpa_rules.Memory] = {}
        #: (target storage key, namespace, name) → the HPAs that scale it.
        self._by_target: dict[tuple[str, str, str], set[Key]] = {}
        self._target_of: dict[Key, tuple[str, str, str]] = {}
        self._resyncs: dict[Key, asyncio.TimerHandle | None] = {}

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for hpa in self.store.items(self.hpa_rt.storage_key):
            self._track(hpa)

    def _target_key(self, hpa: Obj) -> tuple[str, str, str] | None:
        rt = self._target_type(hpa)
        ref = objects.spec(hpa).get("scaleTargetRef") or {}
        return None if rt is None else (rt.storage_key, objects.namespace(hpa), str(ref.get("name") or ""))

    def _track(self, hpa: Obj) -> None:
        key = (objects.namespace(hpa), objects.name(hpa))
        self._untrack(key)
        target = self._target_key(hpa)
        if target is not None:
            self._target_of[key] = target
            self._by_target.setdefault(target, set()).add(key)
        self.enqueue(("hpa", *key))

    def _untrack(self, key: Key) -> None:
        target = self._target_of.pop(key, None)
        if target is not None:
            keys = self._by_target.get(target, set())
            keys.discard(key)
            if not keys:
                self._by_target.pop(target, None)

    def on_event(self, event: Event) -> None:
        if event.key == self.hpa_rt.storage_key:
            key = (objects.namespace(event.obj), objects.name(event.obj))
            if event.type == DELETED:
                self._untrack(key)
                self._memory.pop(key, None)
                self.cancel(self._resyncs.pop(key, None))
            elif (
                event.old is None
                or objects.spec(event.old) != objects.spec(event.obj)
                or (objects.annotations(event.old) != objects.annotations(event.obj))
            ):
                self._track(event.obj)
            return
        for hpa in self._by_target.get(
            (event.key, objects.namespace(event.obj), objects.name(event.obj)), ()
        ):
            self.enqueue(("hpa", *hpa))

    # --- sync -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        _, namespace, name = work
        key = (namespace, name)
        hpa = self.store.get(self.hpa_rt.storage_key, namespace, name)
        if hpa is None:
            return
        self.cancel(self._resyncs.pop(key, None))
        self._resyncs[key] = self.later(self.sync_period, work)
        if objects.is_deleting(hpa):
            return
        hpa = self.api.served(self.hpa_rt, hpa)
        if self._target_of.get(key) != self._target_key(hpa):
            self._track(hpa)  # a CRD served after the HPA was made
        now = self.api.clock()
        stamp = rfc3339(now)
        memory = self._memory.setdefault(key, hpa_rules.Memory())
        rt, scale, error = self._read_scale(hpa)
        if rt is None or scale is None:
            decision = hpa_rules.target_unreachable(hpa, error, stamp)
        else:
            decision = hpa_rules.reconcile(hpa, scale, memory, now, stamp)
            if decision.scale_to is not None:
                current = int((scale.get("spec") or {}).get("replicas") or 0)
                try:
                    self._write_scale(rt, hpa, scale, decision.scale_to)
                    behavior = objects.spec(hpa).get("behavior")
                    hpa_rules.store_scale_event(memory, behavior, current, decision.scale_to, now)
                except ApiError as err:
                    decision = hpa_rules.rescale_failed(hpa, decision, current, str(err), stamp)
        if decision.status == dict(objects.status(hpa)) and decision.scale_to is None:
            return
        for type_, reason, message in decision.events:
            record_event(self.api, hpa, type_, reason, message, component=COMPONENT)
        try:
            write_status(self.api, self.hpa_rt, hpa, decision.status, FIELD_MANAGER)
        except ApiError as err:
            if err.code not in (404, 409):
                raise

    def _target_type(self, hpa: Obj) -> ResourceType | None:
        """The served resource of the target's group and kind with a scale subresource (upstream's
        RESTMapper tries every version of the group-kind)."""
        ref = objects.spec(hpa).get("scaleTargetRef") or {}
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        kind = str(ref.get("kind") or "")
        found = [rt for rt in self.api.registry.all() if rt.group == group and rt.kind == kind]
        found.sort(key=lambda rt: rt.version != (rt.storage_version or rt.version))
        return found[0] if found else None

    def _read_scale(self, hpa: Obj) -> tuple[ResourceType | None, Obj | None, str]:
        ref = objects.spec(hpa).get("scaleTargetRef") or {}
        rt = self._target_type(hpa)
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        if rt is None:
            return None, None, f'no matches for kind "{ref.get("kind")}" in group "{group}"'
        if "scale" not in rt.subresources:
            return rt, None, "the server could not find the requested resource"
        target = self.store.get(rt.storage_key, objects.namespace(hpa), str(ref.get("name") or ""))
        if target is None:
            qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            return rt, None, f'{qualified} "{ref.get("name")}" not found'
        return rt, scale_mod.scale_of(rt, target), ""

    def _write_scale(self, rt: ResourceType, hpa: Obj, scale: Obj, replicas: int) -> None:
        body = {**scale, "spec": {**(scale.get("spec") or {}), "replicas": replicas}}
        scale_mod.handle(
            self.api,
            rt,
            objects.namespace(hpa),
            objects.name(scale),
            "update",
            body=orjson.dumps(body),
            field_manager=FIELD_MANAGER,
        )

"""The Deployment controller of kube-controller-manager (``pkg/controller/deployment``), lite.

For every apps/v1 Deployment: the ReplicaSet of its current template, ``<deploy>-<pod-template-hash>``,
with the ``pod-template-hash`` label added to its selector and template labels, and the older
ReplicaSets it owns. ``RollingUpdate`` scales the new one up within ``maxSurge`` and the old ones down
within ``maxUnavailable`` (:mod:`.rollout`); ``Recreate`` scales the old ones to 0, waits for their pods
to go, then scales the new one up. A scaling event mid-rollout (or while ``paused``) scales the
ReplicaSets proportionally; ``paused`` stops the rollout. Old ReplicaSets at 0 are kept up to
``revisionHistoryLimit``. Revisions go in ``deployment.kubernetes.io/revision`` and the status
(counters, ``Available`` and ``Progressing``) is written through ``/status`` when it differs.

The ReplicaSet controller (:mod:`.replicasets`) makes the pods.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiplane.apimachinery import objects
from aiplane.apimachinery.meta import controller_owner_reference
from aiplane.sim.agents import rollout
from aiplane.sim.agents.base import (
    PODS,
    AgentLoop,
    Obj,
    PodIndex,
    Work,
    controller_uid,
    record_event,
    write_status,
)
from aiplane.sim.agents.daemonsets import template_hash
from aiplane.sim.agents.replicasets import available_in, live_pods
from aiplane.sim.agents.rollout import RsView
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import WriteOptions
from aiplane.sim.apiserver.store import DELETED, Event
from aiplane.sim.apiserver.write_defaults import rfc3339

if TYPE_CHECKING:
    from aiplane.sim.apiserver.resources import ResourceType
    from aiplane.sim.apiserver.rest import Api

log = logging.getLogger(__name__)

COMPONENT = "deployment-controller"
FIELD_MANAGER = "kube-controller-manager"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
DEFAULT_HISTORY = 10


def without_hash(template: Obj) -> Obj:
    """``EqualIgnoreHash``'s view of a ReplicaSet's template: without the ``pod-template-hash`` label."""
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return {**template, "metadata": meta} if meta else {k: v for k, v in template.items() if k != "metadata"}


def revision(rs: Obj) -> int:
    try:
        return int(objects.annotations(rs).get(REVISION) or 0)
    except ValueError:
        return 0


def complete(spec: dict[str, Any], status: dict[str, Any], generation: int) -> bool:
    """``DeploymentComplete``: every replica updated and available, none left over."""
    replicas = rollout.desired(spec)
    return bool(
        status.get("updatedReplicas", 0) == replicas
        and status.get("replicas", 0) == replicas
        and status.get("availableReplicas", 0) == replicas
        and status.get("observedGeneration", 0) >= generation
    )


def progressing(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """``DeploymentProgressing``: more updated, ready or available pods, or fewer old ones."""
    old_old = old.get("replicas", 0) - old.get("updatedReplicas", 0)
    new_old = new.get("replicas", 0) - new.get("updatedReplicas", 0)
    return bool(
        new.get("updatedReplicas", 0) > old.get("updatedReplicas", 0)
        or new_old < old_old
        or new.get("readyReplicas", 0) > old.get("readyReplicas", 0)
        or new.get("availableReplicas", 0) > old.get("availableReplicas", 0)
    )


def set_condition(
    conditions: list[Obj], type_: str, status: str, reason: str, message: str, now: str
) -> None:
    """``SetDeploymentCondition``: unchanged when status and reason are; the transition time kept when
    only the reason changes."""
    current = next((c for c in conditions if c.get("type") == type_), None)
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return
    since = current["lastTransitionTime"] if current is not None and current.get("status") == status else now
    cond = {
        "type": type_,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }
    conditions[:] = [c for c in conditions if c.get("type") != type_] + [cond]


class DeploymentController(AgentLoop):
    """Rolls Deployments out through ReplicaSets (see the module doc)."""

    name = "deployment-controller"

    def __init__(self, api: Api, pods: PodIndex) -> None:
        super().__init__(api)
        self.pods = pods
        self.deploy_rt: ResourceType = api.resource("apps/v1", "Deployment")
        self.rs_rt: ResourceType = api.resource("apps/v1", "ReplicaSet")
        self._by_uid: dict[str, tuple[str, str]] = {}
        #: ReplicaSet uid → its Deployment's uid (pod events reach the Deployment through it).
        self._rs_owner: dict[str, str] = {}

    # --- events -----------------------------------------------------------------------------------

    def resync(self) -> None:
        for rs in self.store.items(self.rs_rt.storage_key):
            self._track_rs(rs, deleted=False)
        for deploy in self.store.items(self.deploy_rt.storage_key):
            self._track(deploy)

    def _track(self, deploy: Obj) -> None:
        meta = objects.meta(deploy)
        self._by_uid[str(meta.get("uid"))] = (meta["namespace"], meta["name"])
        self.enqueue(("deploy", meta["namespace"], meta["name"]))

    def _track_rs(self, rs: Obj, *, deleted: bool) -> None:
        uid, owner = objects.uid(rs), controller_uid(rs)
        if deleted or owner is None:
            self._rs_owner.pop(uid, None)
        else:
            self._rs_owner[uid] = owner
        where = self._by_uid.get(owner or "")
        if where is not None:
            self.enqueue(("deploy", *where))

    def on_event(self, event: Event) -> None:
        if event.key == self.deploy_rt.storage_key:
            if event.type == DELETED:
                self._by_uid.pop(objects.uid(event.obj), None)
            else:
                self._track(event.obj)
        elif event.key == self.rs_rt.storage_key:
            self._track_rs(event.obj, deleted=event.type == DELETED)
        elif event.key == PODS:
            for obj in (event.obj, event.old):
                owner = self._rs_owner.get(controller_uid(obj) or "") if obj is not None else None
                where = self._by_uid.get(owner or "")
                if where is not None:
                    self.enqueue(("deploy", *where))

    # --- sync -------------------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        _, namespace, name = work
        deploy = self.store.get(self.deploy_rt.storage_key, namespace, name)
        if deploy is None or objects.is_deleting(deploy):
            return
        spec = dict(objects.spec(deploy))
        owned = self._owned(deploy)
        template = spec.get("template") or {}
        new = next(
            (rs for rs in owned if without_hash(objects.spec(rs).get("template") or {}) == template), None
        )
        old = [rs for rs in owned if rs is not new]
        if spec.get("paused") or self._scaling_event(spec, new, old):
            self._scale(deploy, new, old)
        elif rollout.strategy_type(spec) == "Recreate":
            self._recreate(deploy, new, old)
        else:
            self._rolling(deploy, new, old)
        self._sync_status(namespace, name)

    def _owned(self, deploy: Obj) -> list[Obj]:
        """Its ReplicaSets (controller owner reference), oldest first."""
        uid = objects.uid(deploy)
        found = [
            rs
            for rs in self.store.items(self.rs_rt.storage_key, objects.namespace(deploy))
            if controller_uid(rs) == uid and not objects.is_deleting(rs)
        ]
        return sorted(
            found, key=lambda rs: (str(objects.meta(rs).get("creationTimestamp", "")), objects.name(rs))
        )

    def _view(self, rs: Obj) -> RsView:
        spec = objects.spec(rs)
        pods = live_pods(self.pods.owned_by(objects.uid(rs)))
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.api.clock()
        available = sum(1 for p in pods if available_in(p, min_ready, now) == 0.0)
        return RsView(objects.name(rs), int(spec.get("replicas", 1) or 0), len(pods), available)

    @staticmethod
    def _scaling_event(spec: dict[str, Any], new: Obj | None, old: list[Obj]) -> bool:
        """``isScalingEvent``: an active ReplicaSet was sized for another ``replicas``."""
        wanted = str(rollout.desired(spec))
        for rs in ([new] if new is not None else []) + old:
            if int(objects.spec(rs).get("replicas", 1) or 0) > 0:
                annotated = objects.annotations(rs).get(DESIRED)
                if annotated is not None and annotated != wanted:
                    return True
        return False

    def _rolling(self, deploy: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``rolloutRolling``: scale up the new ReplicaSet, else down the old ones, else clean up."""
        spec = dict(objects.spec(deploy))
        if new is None:
            new = self._create_new(deploy, old)
            if new is None:
                return
        new = self._sync_new(deploy, new, old)
        new_view = self._view(new)
        views = [self._view(rs) for rs in old]
        target = rollout.new_rs_replicas(spec, new_view, [*views, new_view])
        if target != new_view.replicas:
            self._scale_rs(deploy, new, target)
            return
        cuts = rollout.old_rs_scale_down(spec, new_view, views)
        for rs in old:
            if objects.name(rs) in cuts:
                self._scale_rs(deploy, rs, cuts[objects.name(rs)])
        if not cuts and new_view.available >= rollout.desired(spec) and not any(v.replicas for v in views):
            self._cleanup(deploy, old)

    def _recreate(self, deploy: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``rolloutRecreate``: old ReplicaSets to 0, wait for their pods to go, then the new one up."""
        active = [rs for rs in old if int(objects.spec(rs).get("replicas", 1) or 0) > 0]
        for rs in active:
            self._scale_rs(deploy, rs, 0)
        if active or any(self._view(rs).pods for rs in old):
            return
        if new is None:
            new = self._create_new(deploy, old)
            if new is None:
                return
        new = self._sync_new(deploy, new, old)
        replicas = rollout.desired(objects.spec(deploy))
        if int(objects.spec(new).get("replicas", 1) or 0) != replicas:
            self._scale_rs(deploy, new, replicas)
        elif self._view(new).available >= replicas:
            self._cleanup(deploy, old)

    def _scale(self, deploy: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``sync``/``scale``: no rollout, only sizes (while paused, or on a scaling event)."""
        spec = dict(objects.spec(deploy))
        if new is not None:
            new = self._sync_new(deploy, new, old)
        candidates = ([new] if new is not None else []) + list(reversed(old))
        active = [rs for rs in candidates if int(objects.spec(rs).get("replicas", 1) or 0) > 0]
        replicas = rollout.desired(spec)
        if len(active) <= 1:
            target = active[0] if active else (candidates[0] if candidates else None)
            if target is not None and int(objects.spec(target).get("replicas", 1) or 0) != replicas:
                self._scale_rs(deploy, target, replicas)
        else:
            sizes = rollout.proportional_scale(spec, [self._view(rs) for rs in active])
            for rs in active:
                if objects.name(rs) in sizes:
                    self._scale_rs(deploy, rs, sizes[objects.name(rs)])
        if spec.get("paused"):
            self._cleanup(deploy, old)

    # --- ReplicaSets ------------------------------------------------------------------------------

    def _annotations(self, deploy: Obj, rs_revision: int, existing: dict[str, str]) -> dict[str, str]:
        spec = objects.spec(deploy)
        return {
            **existing,
            DESIRED: str(rollout.desired(spec)),
            MAX_REPLICAS: str(rollout.desired(spec) + rollout.max_surge(spec)),
            REVISION: str(rs_revision),
        }

    def _create_new(self, deploy: Obj, old: list[Obj]) -> Obj | None:
        """``getNewReplicaSet`` creating it: ``<deploy>-<hash>`` at 0 replicas (the rollout sizes it)."""
        meta, spec = objects.meta(deploy), objects.spec(deploy)
        template = dict(spec.get("template") or {})
        pod_hash = template_hash(template, int(objects.status(deploy).get("collisionCount") or 0))
        tmeta = dict(template.get("metadata") or {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: pod_hash}
        selector = dict(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_hash}
        next_revision = max((revision(rs) for rs in old), default=0) + 1
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta["namespace"],
                "labels": dict(tmeta["labels"]),
                "annotations": self._annotations(deploy, next_revision, {}),
                "ownerReferences": [controller_owner_reference(deploy)],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": {**template, "metadata": tmeta},
            },
        }
        try:
            created = self.api.create(
                self.rs_rt, meta["namespace"], body, WriteOptions(field_manager=FIELD_MANAGER)
            ).obj
        except ApiError as err:
            if err.code == 403:
                return None
            if err.code == 409:  # a hash collision (or our own earlier create): kube bumps collisionCount
                self._bump_collision(deploy)
                return None
            raise
        message = f'Created new replica set "{objects.name(created)}"'
        self._set_progressing(deploy, "True", "NewReplicaSetCreated", message)
        return created

    def _sync_new(self, deploy: Obj, new: Obj, old: list[Obj]) -> Obj:
        """The new ReplicaSet's revision (above every old one) and ``minReadySeconds`` kept current."""
        rs_revision = revision(new)
        max_old = max((revision(rs) for rs in old), default=0)
        if rs_revision <= max_old:
            rs_revision = max_old + 1
        annotations = dict(objects.annotations(new))
        wanted = {**annotations, REVISION: str(rs_revision)}
        min_ready = int(objects.spec(deploy).get("minReadySeconds") or 0)
        if wanted != annotations or int(objects.spec(new).get("minReadySeconds") or 0) != min_ready:
            body = {
                **new,
                "metadata": {**new["metadata"], "annotations": wanted},
                "spec": {**new["spec"], "minReadySeconds": min_ready},
            }
            new = self._update_rs(body) or new
        fresh = self.store.get(self.deploy_rt.storage_key, objects.namespace(deploy), objects.name(deploy))
        if not any(c.get("type") == "Progressing" for c in objects.status(fresh).get("conditions") or []):
            self._set_progressing(
                deploy, "True", "FoundNewReplicaSet", f'Found new replica set "{objects.name(new)}"'
            )
        return new

    def _update_rs(self, body: Obj) -> Obj | None:
        try:
            return self.api.update(
                self.rs_rt,
                objects.namespace(body),
                objects.name(body),
                body,
                WriteOptions(field_manager=FIELD_MANAGER),
            ).obj
        except ApiError as err:
            if err.code in (404, 409):
                return None  # changed or gone meanwhile: its event syncs again
            raise

    def _scale_rs(self, deploy: Obj, rs: Obj, replicas: int) -> None:
        """``scaleReplicaSet``: ``spec.replicas`` with the size annotations, and kube's Event."""
        old = int(objects.spec(rs).get("replicas", 1) or 0)
        annotations = self._annotations(deploy, revision(rs), dict(objects.annotations(rs)))
        if old == replicas and annotations == objects.annotations(rs):
            return
        body = {
            **rs,
            "metadata": {**rs["metadata"], "annotations": annotations},
            "spec": {**rs["spec"], "replicas": replicas},
        }
        if self._update_rs(body) is None or old == replicas:
            return
        direction = "up" if replicas > old else "down"
        record_event(
            self.api,
            deploy,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {objects.name(rs)} from {old} to {replicas}",
            component=COMPONENT,
        )

    def _cleanup(self, deploy: Obj, old: Iterable[Obj]) -> None:
        """``cleanupDeployment``: delete the oldest empty old ReplicaSets beyond ``revisionHistoryLimit``."""
        limit = objects.spec(deploy).get("revisionHistoryLimit")
        limit = DEFAULT_HISTORY if limit is None else int(limit)
        empty = [
            rs
            for rs in old
            if int(objects.spec(rs).get("replicas", 1) or 0) == 0
            and int(objects.status(rs).get("replicas") or 0) == 0
            and int(objects.status(rs).get("observedGeneration") or 0)
            >= int(objects.meta(rs).get("generation", 1))
        ]
        empty.sort(key=revision)
        for rs in empty[: max(len(empty) - limit, 0)]:
            try:
                self.api.delete(self.rs_rt, objects.namespace(rs), objects.name(rs))
            except ApiError as err:
                if err.code not in (404, 409):
                    raise

    def _bump_collision(self, deploy: Obj) -> None:
        fresh = self.store.get(self.deploy_rt.storage_key, objects.namespace(deploy), objects.name(deploy))
        if fresh is None:
            return
        status = dict(fresh.get("status") or {})
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        self._write_status(fresh, status)

    # --- status -----------------------------------------------------------------------------------

    def _set_progressing(self, deploy: Obj, status: str, reason: str, message: str) -> None:
        fresh = self.store.get(self.deploy_rt.storage_key, objects.namespace(deploy), objects.name(deploy))
        if fresh is None:
            return
        current = dict(fresh.get("status") or {})
        conditions = [dict(c) for c in current.get("conditions") or []]
        set_condition(conditions, "Progressing", status, reason, message, rfc3339(self.api.clock()))
        if conditions != current.get("conditions"):
            self._write_status(fresh, {**current, "conditions": conditions})

    def _sync_status(self, namespace: str, name: str) -> None:
        """``calculateStatus`` and ``syncRolloutStatus``, from the ReplicaSets' status as kube does."""
        deploy = self.store.get(self.deploy_rt.storage_key, namespace, name)
        if deploy is None:
            return
        spec = dict(objects.spec(deploy))
        owned = self._owned(deploy)
        template = spec.get("template") or {}
        new = next(
            (rs for rs in owned if without_hash(objects.spec(rs).get("template") or {}) == template), None
        )
        old_status = dict(deploy.get("status") or {})
        replicas = rollout.desired(spec)

        def total(field: str, sets: Iterable[Obj]) -> int:
            return sum(int(objects.status(rs).get(field) or 0) for rs in sets)

        available = total("availableReplicas", owned)
        status: dict[str, Any] = {
            "observedGeneration": int(objects.meta(deploy).get("generation", 1)),
            "replicas": total("replicas", owned),
            "updatedReplicas": total("replicas", [new] if new is not None else []),
            "readyReplicas": total("readyReplicas", owned),
            "availableReplicas": available,
            "unavailableReplicas": max(
                sum(int(objects.spec(rs).get("replicas", 1) or 0) for rs in owned) - available, 0
            ),
        }
        if "collisionCount" in old_status:
            status["collisionCount"] = old_status["collisionCount"]
        now = rfc3339(self.api.clock())
        conditions = [dict(c) for c in old_status.get("conditions") or []]
        if available >= replicas - rollout.max_unavailable(spec):
            set_condition(
                conditions,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            )
        else:
            set_condition(
                conditions,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            )
        self._progress_condition(spec, status, old_status, new, conditions, now)
        if conditions:
            status["conditions"] = conditions
        for key in (
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "replicas",
        ):
            if not status[key]:
                del status[key]  # omitempty
        if status != old_status:
            self._write_status(deploy, status)
        self._sync_revision(deploy, new)

    def _progress_condition(
        self,
        spec: dict[str, Any],
        status: dict[str, Any],
        old: dict[str, Any],
        new: Obj | None,
        conditions: list[Obj],
        now: str,
    ) -> None:
        if spec.get("paused"):
            set_condition(
                conditions, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", now
            )
            return
        current = next((c for c in conditions if c.get("type") == "Progressing"), None)
        if current is not None and current.get("reason") == "DeploymentPaused":
            set_condition(
                conditions, "Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", now
            )
        if new is None:
            return
        rs_name = objects.name(new)
        if complete(spec, status, status["observedGeneration"]):
            set_condition(
                conditions,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.',
                now,
            )
        elif progressing(status, old):
            # a new ReplicaSetUpdated message each time, as kube refreshes lastUpdateTime on progress
            conditions[:] = [
                c
                for c in conditions
                if not (c.get("type") == "Progressing" and c.get("reason") == "ReplicaSetUpdated")
            ]
            set_condition(
                conditions,
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                f'ReplicaSet "{rs_name}" is progressing.',
                now,
            )
            previous = current if current is not None and current.get("status") == "True" else None
            if previous is not None:
                conditions[-1]["lastTransitionTime"] = previous["lastTransitionTime"]

    def _sync_revision(self, deploy: Obj, new: Obj | None) -> None:
        """The Deployment's ``deployment.kubernetes.io/revision`` is its new ReplicaSet's."""
        if new is None:
            return
        wanted = objects.annotations(new).get(REVISION)
        if wanted is None or objects.annotations(deploy).get(REVISION) == wanted:
            return
        fresh = self.store.get(self.deploy_rt.storage_key, objects.namespace(deploy), objects.name(deploy))
        if fresh is None:
            return
        body = {
            **fresh,
            "metadata": {
                **fresh["metadata"],
                "annotations": {**objects.annotations(fresh), REVISION: wanted},
            },
        }
        try:
            self.api.update(
                self.deploy_rt,
                objects.namespace(fresh),
                objects.name(fresh),
                body,
                WriteOptions(field_manager=FIELD_MANAGER),
            )
        except ApiError as err:
            if err.code not in (404, 409):
                raise

    def _write_status(self, deploy: Obj, status: Obj) -> None:
        try:
            write_status(self.api, self.deploy_rt, deploy, status, FIELD_MANAGER)
        except ApiError as err:
            if err.code not in (404, 409):
                raise

"""ModelInfer controller: the executor around :mod:`decide` (what to do) and :mod:`objects` (what to build).

::

    observe   the ModelInfer, its Pods, Services, PodGroups, ControllerRevisions and
              PodDisruptionBudgets from informer caches (filtered server-side by the
              ``modelinfer.volcano.sh/name`` label, as upstream does; only objects *controlled* by
              this ModelInfer's uid count), and the Nodes under its pods (cordoned or not)
    decide    validation.validate → revision_hash → disruption.decide (which groups a drain may
              take) → decide.plan (scaling, rolling update, recovery) → status.compute_status
    act       ControllerRevision for a new revision; PodGroups before pods (a gang member without its
              PodGroup stays pending in Volcano); PodDisruptionBudgets before any pod delete;
              creates (entry → Service → workers, AlreadyExists ignored) and deletes with UID
              preconditions; old unused ControllerRevisions pruned
    report    /status merge patch only when it changed; Events for group creation, deletion and
              recovery, and for disruption (see :mod:`.disruption`)

Why the pieces are the way they are:

* **Expectations.** The decision assumes its view is complete: a pod it does not see is a pod that
  was deleted out from under us, which triggers recovery. Right after our own creates the cache
  has not caught up, so deciding then would "recover" pods we just made. Each ModelInfer therefore
  records the pods and Services it created and the pods it deleted in the shared
  :class:`~aiplane.kube.expectations.Expectations`; until the cache shows all of them (or
  ``EXPECTATIONS_TIMEOUT`` passes, for a watch event that never comes) the reconcile only
  refreshes status. The watch events of our own writes bring the ModelInfer back.
* **Read your own status.** A pod event can reconcile a ModelInfer before the watch has delivered
  our previous status write; its next status patch, guarded by the cached resourceVersion, would be
  refused with a conflict (and retried). Each status write is recorded (``own``) and the ModelInfer
  is observed through :meth:`~aiplane.kube.expectations.Expectations.view` until the cache shows it,
  so the next reconcile decides on, and guards with, the object as written.
* **Deletion completion** is recomputed from the cache on every reconcile (the decision waits for a
  unit's pods and Services to be gone before rebuilding it), and Service deletions are watched too,
  so a lost delete event never stalls a recreate (upstream issues #517, #716).
* **Zero writes at steady state**: every write is guarded by a "does it differ" check
  (``podgroup_needs_update``, the status writer's comparison, a converged plan has no actions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, Final

import structlog

from aiplane.api import kinds
from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition
from aiplane.apimachinery.meta import deep_get
from aiplane.controllers import causes, queueing
from aiplane.controllers.disruption import HELD_EVENT
from aiplane.controllers.gang import VOLCANO, GangBackend, GangOptions
from aiplane.controllers.modelinfer.decide import (
    CreateRoleReplica,
    DeleteGroup,
    DeletePods,
    DeleteRoleReplica,
    ModelInferDecision,
    ModelInferObserved,
    Plan,
    arbitrate_and_plan,
    decide,
    kept_workloads,
)
from aiplane.controllers.modelinfer.disruption import (
    BY_NODE,
    GroupBudgets,
    pods_by_node,
    spends_floor,
    unschedulable_changed,
)
from aiplane.controllers.modelinfer.naming import (
    KIND,
    LABEL_GROUP_NAME,
    LABEL_NAME,
    LABEL_ROLE_ID,
    group_name,
    role_id,
    service_name,
)
from aiplane.controllers.modelinfer.objects import build_pod, build_service, expected_pod_count
from aiplane.controllers.modelinfer.observe import controlled_by
from aiplane.controllers.modelinfer.podgroups import PodGroupOp
from aiplane.controllers.modelinfer.queued import (
    BY_OWNER,
    KueueRelease,
    modelinfer_owners,
    modelinfers_of_workload,
    queue_view,
    write_workloads,
)
from aiplane.controllers.modelinfer.revision import (
    revision_hash,
    revision_of,
    roles_from_controller_revision,
    with_current_replicas,
)
from aiplane.controllers.modelinfer.validation import format_problems, validate
from aiplane.controllers.platform import decorate_template
from aiplane.controllers.platform_source import PERMISSIONS as PLATFORM_PERMISSIONS
from aiplane.controllers.platform_source import PlatformSource, platform_source, watch_platform
from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.client import KubeClient
from aiplane.kube.clock import Clock
from aiplane.kube.controller import Controller, Request, Result, field_manager_for
from aiplane.kube.events import NORMAL, WARNING, EventRecorder
from aiplane.kube.expectations import Expectations
from aiplane.kube.informer import Informer
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import EVENTS_WRITE, READ, WRITE_CHILD, Permission
from aiplane.kube.resources import (
    CONTROLLERREVISIONS,
    COSCHEDULING_PODGROUPS,
    NODES,
    PDBS,
    PODGROUPS,
    PODS,
    SERVICES,
    Resource,
)
from aiplane.kube.shape import Shaped
from aiplane.kube.status import ConditionEvent, StatusWriter, emit_transitions

Obj = dict[str, Any]

#: The controller's name; its field manager and Event source follow from it (kube.controller).
NAME: Final = "modelinfer"
FIELD_MANAGER: Final = field_manager_for(NAME)
#: How long to wait for the cache to show our own creates/deletes before deciding anyway.
EXPECTATIONS_TIMEOUT: Final = 30.0
#: Index of the owned-object informers: ``<namespace>/<ModelInfer name>``.
BY_MODELINFER: Final = "modelinfer"

log = structlog.get_logger("aiplane.modelinfer")


def _key(namespace: Any, name: Any) -> str:
    return f"{namespace}/{name}"


def _owner(key: str) -> str:
    """The expectation key of the ModelInfer ``namespace/name``: what its children's writes are grouped by."""
    namespace, _, name = key.partition("/")
    return expectation_key(KIND, namespace, name)


def _by_modelinfer(obj: Mapping[str, Any]) -> list[str]:
    name = objects.labels(obj).get(LABEL_NAME)
    return [_key(objects.namespace(obj), name)] if name else []


def _to_modelinfer(obj: Obj) -> Iterable[Request]:
    name = objects.labels(obj).get(LABEL_NAME)
    return [Request(objects.namespace(obj) or None, name)] if name else []


class ModelInferController:
    """The ModelInfer controller's four steps (:class:`~aiplane.kube.shape.Shape`)."""

    def __init__(
        self,
        client: KubeClient,
        modelinfers: Informer,
        pods: Informer,
        services: Informer,
        podgroups: Informer | None,
        revisions: Informer,
        recorder: EventRecorder,
        clock: Clock,
        platform: PlatformSource | None = None,
        *,
        pdbs: Informer,
        nodes: Informer,
        gang: GangBackend = VOLCANO,
    ) -> None:
        self.client = client
        self.gang = gang
        self.modelinfers = modelinfers
        self.pods = pods
        self.services = services
        self.podgroups = podgroups
        self.revisions = revisions
        self.recorder = recorder
        self.clock = clock
        self.platform = platform
        self.status = StatusWriter(client, kinds.MODELINFERS, FIELD_MANAGER)
        #: Our status writes, as returned, served in place of the cached ModelInfer until the cache
        #: shows them (module docstring). No timeout: a view only waits for a watch event or a re-list.
        self.own = Expectations()
        # Keyed "Kind/namespace/name", owned by the ModelInfer's key (see the module docstring).
        self.expectations = Expectations(
            timeout=EXPECTATIONS_TIMEOUT, clock=clock.monotonic, keep_objects=False
        )
        #: Pods and Services: recorded, the next decision waits for the cache to show them.
        self.writer = ChildWriter(client, FIELD_MANAGER, self.expectations)
        #: ControllerRevisions and PodGroups: guarded by "does it differ" alone, nobody waits for them.
        self.untracked = ChildWriter(client, FIELD_MANAGER)
        self.nodes = nodes
        self.pdbs = pdbs
        # PodDisruptionBudget writes, with the objects: decisions read our own release back (view).
        self.budgets = GroupBudgets(
            client,
            pdbs,
            recorder,
            Expectations(timeout=EXPECTATIONS_TIMEOUT, clock=clock.monotonic),
            FIELD_MANAGER,
        )
        for informer in (pods, services, podgroups, revisions, pdbs):
            if informer is not None:
                informer.add_indexer(BY_MODELINFER, _by_modelinfer)
        pods.add_indexer(BY_NODE, pods_by_node)
        modelinfers.add_handler(on_delete=self._forget)
        # A pod we created may be deleted by someone else before our cache shows it (kube's taint manager
        # deletes by name): its delete event ends the wait for it, not the timeout.
        for resource, informer in ((PODS, pods), (SERVICES, services)):
            informer.add_handler(on_delete=partial(self._child_deleted, resource.kind))

    def _child_deleted(self, kind: str, obj: Obj) -> None:
        self.expectations.deleted(expectation_key(kind, objects.namespace(obj), objects.name(obj)), obj)

    def _forget(self, obj: Obj) -> None:
        owner = _owner(objects.key(obj))
        self.own.deleted(owner, obj)
        self.expectations.forget_owner(owner)
        self.budgets.expectations.forget_owner(owner)

    def modelinfers_on_node(self, node: Obj) -> list[Request]:
        """The ModelInfers with a pod on ``node`` (for cordon and uncordon)."""
        keys = {
            (objects.namespace(p), name)
            for p in self.pods.by_index(BY_NODE, objects.name(node))
            if (name := objects.labels(p).get(LABEL_NAME))
        }
        return [Request(ns or None, str(name)) for ns, name in sorted(keys)]

    def workload_to_modelinfer(self, workload: Obj) -> list[Request]:
        return modelinfers_of_workload(workload, self.pods)

    # --- observe ----------------------------------------------------------------------------------

    def _cordoned(self, pods: Iterable[Obj]) -> frozenset[str]:
        names = {str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")}
        out = set()
        for name in names:
            node = self.nodes.get(name)
            if node is not None and (node.get("spec") or {}).get("unschedulable"):
                out.add(name)
        return frozenset(out)

    def _owned(self, informer: Informer, mi: Mapping[str, Any], key: str) -> list[Obj]:
        return [o for o in informer.by_index(BY_MODELINFER, key) if controlled_by(o, mi)]

    def _cached_child(self, child: str) -> Obj | None:
        """The cached Pod or Service an expectation key ``Kind/namespace/name`` names."""
        kind, _, rest = child.partition("/")
        return (self.pods if kind == "Pod" else self.services).get(rest)

    async def observe(self, request: Request) -> ModelInferObserved | None:
        namespace, name = request.namespace or "", request.name
        key = _key(namespace, name)
        mi = self.own.view(_owner(key), self.modelinfers.get(key))
        if mi is None or objects.is_deleting(mi):
            return None  # owner references cascade the deletion
        problems = validate(mi)
        if problems:
            return ModelInferObserved(mi, problems=format_problems(problems))
        pods = self._owned(self.pods, mi, key)
        roles = self._decorated_roles(namespace, list(deep_get(mi, "spec.template.roles") or []))
        update_revision = revision_hash(roles)
        owned_revisions = self._owned(self.revisions, mi, key)
        revisions = self._known_revisions(owned_revisions)
        recorded = update_revision in revisions
        revisions[update_revision] = [dict(r) for r in roles]
        current_revision = str(objects.status(mi).get("currentRevision") or "")
        if not current_revision or current_revision not in revisions:
            # New ModelInfer, or the old revision's record is gone: nothing older to rebuild on.
            current_revision = update_revision
        owner = _owner(key)
        live_budgets = self.budgets.live(mi, self._owned(self.pdbs, mi, key))
        podgroups = self._owned(self.podgroups, mi, key) if self.podgroups is not None else None
        workloads = self.platform.workloads if self.platform is not None else None
        observed = ModelInferObserved(
            mi,
            pods=tuple(pods),
            services=tuple(self._owned(self.services, mi, key)),
            roles=tuple(roles),
            revisions=revisions,
            recorded=recorded,
            owned_revisions=tuple(owned_revisions),
            update_revision=update_revision,
            current_revision=current_revision,
            decided=not self.expectations.pending(owner, self._cached_child)
            and not self.budgets.pending(owner),
            budgets=live_budgets,
            released=self.budgets.released(mi, live_budgets),
            cordoned_nodes=self._cordoned(pods),
            podgroups=tuple(podgroups) if podgroups is not None else None,
            gang=self.gang,
            waiting=causes.collect(pods, podgroups=podgroups or ()),
            queue=queue_view(self.pods.by_index(BY_MODELINFER, key), workloads),
            platform_queue=queueing.queue_for(self.platform.platform(objects.namespace(mi)), mi)
            if self.platform is not None
            else None,
        )
        if workloads is not None:
            observed = replace(observed, workloads=self._workloads(workloads, observed))
        if observed.decided:
            arbitration, the_plan = arbitrate_and_plan(observed, self.clock.now())
            if spends_floor(arbitration, the_plan, observed.released, pods):
                # A release or delete that takes serving capacity is decided on the pods as the API
                # server has them: the Pod cache may lag the Node cache (a group a drain already
                # evicted, shown available on a node shown uncordoned), and evictions are not our
                # writes to expect.
                listed = await self._listed_pods(mi)
                observed = replace(observed, pods=tuple(listed), cordoned_nodes=self._cordoned(listed))
        return observed

    def _known_revisions(self, owned: Iterable[Obj]) -> dict[str, list[dict[str, Any]]]:
        """Every recorded revision's roles (an unreadable record is skipped)."""
        known: dict[str, list[dict[str, Any]]] = {}
        for cr in owned:
            rev = revision_of(cr)
            if rev is None:
                continue
            try:
                known[rev] = roles_from_controller_revision(cr)
            except ValueError:
                log.warning("unreadable ControllerRevision ignored", name=objects.name(cr))
        return known

    @staticmethod
    def _workloads(workloads: Informer, observed: ModelInferObserved) -> tuple[Obj, ...]:
        """The Workloads the ModelInfer owns, and those of the groups it keeps (``queued``)."""
        namespace = objects.namespace(observed.mi)
        owned = workloads.by_index(BY_OWNER, objects.uid(observed.mi))
        kept = (workloads.get(f"{namespace}/{name}") for name in sorted(kept_workloads(observed)))
        return (*owned, *(w for w in kept if w is not None))

    async def _listed_pods(self, mi: Obj) -> list[Obj]:
        """The ModelInfer's pods from the API server (a quorum read), those it controls."""
        listed = await self.client.list(
            PODS, objects.namespace(mi), label_selector=f"{LABEL_NAME}={objects.name(mi)}"
        )
        return [p for p in listed.get("items") or () if controlled_by(p, mi)]

    def _decorated_roles(self, namespace: str, roles: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The roles with the platform's additions in their templates. The revision hashes these, so
        a KaiwoConfig or AIMNamespaceConfig change is a new revision, rolled under maxUnavailable."""
        if self.platform is None:
            return roles
        platform = self.platform.platform(namespace)
        out: list[Mapping[str, Any]] = []
        for role in roles:
            decorated = dict(role)
            for key in ("entryTemplate", "workerTemplate"):
                template = role.get(key)
                if isinstance(template, Mapping):
                    decorated[key] = decorate_template(template, platform)
            out.append(decorated)
        return out

    def decide(self, observed: ModelInferObserved, now: datetime) -> ModelInferDecision:
        return decide(observed, now)

    # --- act --------------------------------------------------------------------------------------

    async def act(self, observed: ModelInferObserved, decision: ModelInferDecision) -> None:
        """The ControllerRevision of a new revision first (a later partition-protected recreate finds
        its template even if this process restarts); then, once the caches show our own writes,
        PodGroups before pods (a gang member without its PodGroup stays pending), budgets before any
        pod delete, the plan in its order, and the unused revisions pruned."""
        mi = dict(observed.mi)
        if decision.revision is not None:
            await self.untracked.create(
                CONTROLLERREVISIONS, decision.revision, namespace=objects.namespace(mi)
            )
        if decision.invalid or not observed.decided or decision.plan is None or decision.arbitration is None:
            return
        await self._write_podgroups(mi, decision)
        await write_workloads(self.untracked, decision.workloads)
        key = objects.key(mi)
        await self.budgets.sync(mi, decision.budgets, decision.arbitration)
        await self._act(mi, key, observed, decision.plan, decision.spared, decision.queues)
        for cr in decision.prune:
            await self._delete(CONTROLLERREVISIONS, cr)

    async def _write_podgroups(self, mi: Obj, decision: ModelInferDecision) -> None:
        podgroups = decision.podgroups
        if podgroups is None:
            return
        if podgroups.unavailable:
            self.recorder.emit(
                mi,
                WARNING,
                "PodGroupsUnavailable",
                f"spec.template.gangSchedule is set but the {self.gang.title} PodGroup API "
                f"({self.gang.resource.api_version}) is not served: pods are created without PodGroups",
            )
        for write in podgroups.writes:
            if write.op is PodGroupOp.CREATE and write.body is not None:
                await self.untracked.create(self.gang.resource, write.body, namespace=objects.namespace(mi))
            elif write.op is PodGroupOp.UPDATE and write.body is not None and write.live is not None:
                await self.untracked.replace(self.gang.resource, write.live, write.body)
            elif write.op is PodGroupOp.DELETE and write.live is not None:
                await self._delete(self.gang.resource, write.live)

    async def _delete(self, res: Resource, obj: Mapping[str, Any], *, owner: str | None = None) -> bool:
        """Delete ``obj`` (UID precondition); with ``owner``, wait for the cache to show it going."""
        if objects.is_deleting(obj):
            return False
        if owner is None:
            return await self.untracked.delete(res, obj)
        return await self.writer.delete(res, obj, owner=_owner(owner))

    async def _create(self, res: Resource, key: str, body: Obj) -> bool:
        return await self.writer.create(res, body, owner=_owner(key)) is not None

    async def _act(
        self,
        mi: Obj,
        key: str,
        observed: ModelInferObserved,
        the_plan: Plan,
        spared: frozenset[str],
        queues: Mapping[tuple[int, str], str | None],
    ) -> None:
        """Carry out the plan in its order. A new group gets one ``CreatedGroup`` Event (after all
        its role replicas), not one per role replica. Pods in ``spared`` are left to the drain
        evicting them (see :func:`~.disruption.left_to_the_drain`)."""
        name = objects.name(mi)
        pods, services, roles = list(observed.pods), list(observed.services), list(observed.roles)
        # Groups with any pod in the cache (plan.groups also lists groups about to be created).
        existing_groups = {objects.labels(p).get(LABEL_GROUP_NAME) for p in pods}
        created_groups: dict[int, str] = {}
        for action in the_plan.actions:
            if isinstance(action, CreateRoleReplica):
                group_roles = with_current_replicas(
                    observed.revisions.get(action.revision) or [dict(r) for r in roles], roles
                )
                made = await self._create_role_replica(mi, key, action, group_roles, queues)
                if f"{name}-{action.ordinal}" not in existing_groups:
                    created_groups[action.ordinal] = action.revision
                elif made:
                    self.recorder.emit(
                        mi,
                        NORMAL,
                        "CreatedRoleReplica",
                        f"Group {name}-{action.ordinal}: created {made} object(s) of role replica "
                        f"{role_id(action.role, action.role_index)} on revision {action.revision}",
                    )
            elif isinstance(action, DeletePods):
                await self._delete_pods(mi, key, action, [p for p in pods if objects.name(p) not in spared])
            elif isinstance(action, DeleteRoleReplica):
                rid = role_id(action.role, action.role_index)
                group = f"{name}-{action.ordinal}"
                if await self._delete_matching(key, pods, services, _labels_match(group, rid), spared):
                    self.recorder.emit(
                        mi,
                        NORMAL,
                        "DeletingRoleReplica",
                        f"Deleting role replica {rid} of group {group}: {action.reason}",
                    )
            elif isinstance(action, DeleteGroup):
                group = f"{name}-{action.ordinal}"
                if await self._delete_matching(key, pods, services, _labels_match(group), spared):
                    self.recorder.emit(
                        mi, NORMAL, "DeletingGroup", f"Deleting group {group}: {action.reason}"
                    )
        for ordinal, revision in sorted(created_groups.items()):
            self.recorder.emit(
                mi, NORMAL, "CreatedGroup", f"Created group {name}-{ordinal} on revision {revision}"
            )

    async def _create_role_replica(
        self,
        mi: Obj,
        key: str,
        action: CreateRoleReplica,
        group_roles: list[dict[str, Any]],
        queues: Mapping[tuple[int, str], str | None],
    ) -> int:
        """Create the action's pods and Service: entry → Service → workers, as upstream, so workers
        find the entry's address as soon as they start. Returns how many objects were created
        (AlreadyExists is not an error, and not counted)."""
        indices = sorted(action.pod_indices)
        workers = [k for k in indices if k != 0]
        made = 0

        queue = queues.get((action.ordinal, action.revision))
        kueue_group = queueing.pod_group_name(group_name(objects.name(mi), action.ordinal), action.revision)

        def new_pod(k: int) -> Obj:
            pod = build_pod(
                mi, group_roles, action.ordinal, action.role, action.role_index, k, action.revision, self.gang
            )
            if queue is None:
                return pod
            return queueing.queue_pod(pod, queue, kueue_group, expected_pod_count(group_roles))

        if 0 in indices:
            made += await self._create(PODS, key, new_pod(0))
        svc_name = service_name(objects.name(mi), action.ordinal, action.role, action.role_index)
        if action.service and self.services.get(_key(objects.namespace(mi), svc_name)) is None:
            service = build_service(
                mi, action.ordinal, action.role, action.role_index, revision=action.revision
            )
            made += await self._create(SERVICES, key, service)
        for k in workers:
            made += await self._create(PODS, key, new_pod(k))
        return made

    async def _delete_pods(self, mi: Obj, key: str, action: DeletePods, pods: list[Obj]) -> None:
        """Delete the listed pods still in the cache under the uid the decision saw."""
        by_uid = {objects.uid(p): p for p in pods}
        gone = []
        for pod_name, uid in action.pods:
            victim = by_uid.get(uid)
            if victim is not None and await self._delete(PODS, victim, owner=key):
                gone.append(pod_name)
        if gone:
            self.recorder.emit(mi, WARNING, "DeletedPod", f"Deleted pod {', '.join(gone)}: {action.reason}")

    async def _delete_matching(
        self,
        key: str,
        pods: list[Obj],
        services: list[Obj],
        match: Callable[[Mapping[str, Any]], bool],
        spared: frozenset[str] = frozenset(),
    ) -> int:
        """Delete the matching pods (but the spared ones) and Services; how many went."""
        deleted = 0
        for pod in pods:
            if match(objects.labels(pod)) and objects.name(pod) not in spared:
                deleted += await self._delete(PODS, pod, owner=key)
        for svc in services:
            if match(objects.labels(svc)):
                deleted += await self._delete(SERVICES, svc)
        return deleted

    # --- report -----------------------------------------------------------------------------------

    async def report(self, observed: ModelInferObserved, decision: ModelInferDecision) -> Result | None:
        mi = dict(observed.mi)
        old = objects.status(mi)
        written = await self.status.write(mi, decision.status)
        if written is not None:
            self.own.wrote(_owner(objects.key(mi)), mi, written, conditional=True)
        if decision.invalid:
            if written is not None and _valid(old) != _valid(decision.status):
                self.recorder.emit(mi, WARNING, "InvalidSpec", decision.invalid)
            return None
        if written is not None:
            emit_transitions(self.recorder, mi, TRANSITION_EVENTS, old, decision.status)
            causes.emit_new(
                self.recorder,
                mi,
                old.get("waitingFor"),
                observed.waiting if decision.status.get("waitingFor") else (),
            )
        requeue = decision.plan.requeue_after if decision.plan is not None else None
        if not observed.decided:
            # Waiting for our own writes in the cache: if their events never come, the expectations time
            # out, and this brings the ModelInfer back to decide then.
            requeue = min(requeue or EXPECTATIONS_TIMEOUT, EXPECTATIONS_TIMEOUT)
        return Result(requeue_after=requeue) if requeue is not None else None


def _valid(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``Valid`` condition (an InvalidSpec Event follows a change of it)."""
    conditions = status.get("conditions")
    return get_condition(conditions if isinstance(conditions, list) else None, "Valid")


def _labels_match(group: str, rid: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    def match(labels: Mapping[str, Any]) -> bool:
        return labels.get(LABEL_GROUP_NAME) == group and (rid is None or labels.get(LABEL_ROLE_ID) == rid)

    return match


#: Events for the conditions a human watches flipping (Available, UpdateInProgress).
TRANSITION_EVENTS: Final = (
    ConditionEvent("Available", "True", NORMAL, reason="Available"),
    ConditionEvent("UpdateInProgress", "True", NORMAL, reason="RollingUpdate"),
    ConditionEvent(
        "UpdateInProgress",
        "False",
        NORMAL,
        reason="RolloutComplete",
        message="Every group is on the update revision",
        from_absent=False,
    ),
    # A drain waits for a group: the message names the group, its budget, the node and the floor.
    HELD_EVENT,
    # A group starts waiting for Kueue's quota: Kueue's reason, once per wait.
    ConditionEvent(queueing.CONDITION, "False", WARNING, reason=queueing.REASON_PENDING),
)


#: What this controller needs (kube/rbac.py; ``aiplane rbac`` and the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("workload.volcano.sh", ("modelinfers",), READ),
    Permission("workload.volcano.sh", ("modelinfers/status",), ("patch",)),
    Permission("workload.volcano.sh", ("modelinfers/finalizers",), ("update",)),
    # Children: pods, services and revisions are created and deleted, never updated; a pod being deleted
    # is patched once, to remove Kueue's finalizer (queued.KueueRelease).
    Permission("", ("pods",), ("list", "watch", "create", "delete", "patch")),
    Permission("", ("services",), ("list", "watch", "create", "delete")),
    Permission("apps", ("controllerrevisions",), ("list", "watch", "create", "delete")),
    # Gang scheduling (when the gang scheduler's API is served; Volcano's or scheduler-plugins'
    # Coscheduling, --gang-scheduler): one PodGroup per group, resized in place.
    *(
        Permission(res.group, (res.plural,), ("list", "watch", "create", "update", "delete"))
        for res in (PODGROUPS, COSCHEDULING_PODGROUPS)
    ),
    # Disruption: one budget per group (released and protected in place), and the nodes a drain cordons.
    Permission("policy", ("poddisruptionbudgets",), WRITE_CHILD),
    Permission("", ("nodes",), READ),
    # Kueue's Workloads of its groups: the ModelInfer's owner reference added; deleted once the group is
    # gone for good (queued.py).
    Permission("kueue.x-k8s.io", ("workloads",), ("patch", "delete")),
    *PLATFORM_PERMISSIONS,
    EVENTS_WRITE,
)


def setup_controller(
    manager: Manager,
    *,
    with_podgroups: bool = True,
    platform: PlatformSource | None = None,
    gang: GangBackend = VOLCANO,
) -> Controller:
    """Pods, Services, PodGroups and ControllerRevisions map to their ModelInfer by the name label
    (informers filtered server-side by that label's existence, as upstream does)."""
    client = manager.client
    informers = manager.informers
    mis = informers.informer(kinds.MODELINFERS)
    pods = informers.informer(PODS, label_selector=LABEL_NAME)
    services = informers.informer(SERVICES, label_selector=LABEL_NAME)
    podgroups = informers.informer(gang.resource, label_selector=LABEL_NAME) if with_podgroups else None
    revisions = informers.informer(CONTROLLERREVISIONS, label_selector=LABEL_NAME)
    pdbs = informers.informer(PDBS, label_selector=LABEL_NAME)
    nodes = informers.informer(NODES)
    shape = ModelInferController(
        client,
        mis,
        pods,
        services,
        podgroups,
        revisions,
        manager.recorder(NAME),
        manager.clock,
        platform,
        pdbs=pdbs,
        nodes=nodes,
        gang=gang,
    )
    builder = (
        Controller.build(NAME)
        .for_(kinds.MODELINFERS)
        .watches(PODS, _to_modelinfer, label_selector=LABEL_NAME)
        .watches(SERVICES, _to_modelinfer, label_selector=LABEL_NAME)
        .watches(CONTROLLERREVISIONS, _to_modelinfer, label_selector=LABEL_NAME)
        .watches(PDBS, _to_modelinfer, label_selector=LABEL_NAME)
        # Cordon and uncordon only (a status heartbeat reconciles nothing), for the ModelInfers
        # with a pod on the node.
        .watches(NODES, shape.modelinfers_on_node, predicates=[unschedulable_changed])
    )
    if with_podgroups:
        builder = builder.watches(gang.resource, _to_modelinfer, label_selector=LABEL_NAME)
    if platform is not None and platform.workloads is not None:
        platform.workloads.add_indexer(BY_OWNER, modelinfer_owners)
        builder = builder.watches(platform.workloads.resource, shape.workload_to_modelinfer)
    if platform is not None:
        builder = watch_platform(
            builder,
            platform,
            lambda: [Request.for_object(o) for o in mis.list()],
            lambda ns: [Request.for_object(o) for o in mis.list(ns)],
        )
    # Four workers by default: ModelInfers are independent; --max-concurrent-reconciles overrides it.
    return builder.workers(4).reconcile(Shaped(shape, manager.clock))


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers modelinfer`` (also part of ``all``)."""
    # Without the gang scheduler's PodGroup API the controller runs without a PodGroup informer (one on an
    # unserved API would never sync); gang scheduling then cannot be asked for.
    gang = manager.options(GangOptions).backend()
    with_podgroups = await manager.client.served(gang.resource)
    if not with_podgroups:
        log.warning(
            "the gang scheduler's PodGroup API is not served: ModelInfers are run without PodGroups",
            gang_scheduler=gang.scheduler.value,
            api=gang.resource.label,
        )
    platform = await platform_source(manager)
    manager.add_controller(
        setup_controller(manager, with_podgroups=with_podgroups, platform=platform, gang=gang)
    )
    manager.add_controller(setup_release_controller(manager))


#: Releases our deleted pods from Kueue's finalizer (queued.KueueRelease).
RELEASE_NAME: Final = "modelinfer-kueue-release"


def setup_release_controller(manager: Manager) -> Controller:
    """One reconcile per pod of ours (the ModelInfer controller's pod informer, shared), acting only on
    a pod being deleted that Kueue's finalizer holds."""
    pods = manager.informers.informer(PODS, label_selector=LABEL_NAME)
    shape = KueueRelease(
        manager.client, pods, manager.recorder(RELEASE_NAME), manager.field_manager(RELEASE_NAME)
    )
    return (
        Controller.build(RELEASE_NAME)
        .for_(PODS, label_selector=LABEL_NAME)
        .workers(1)
        .reconcile(Shaped(shape, manager.clock))
    )

"""Invariant checkers for the chaos suite and the soak (``benchmarks/chaos_soak.py``).

Each checker is a store listener of the embedded cluster: it sees EVERY committed change (not a
sample), counts the checks it ran, and records violations as they happen; ``end_state`` then checks
the exact state a user expects once the faults stopped and the rollout converged. The same classes
run under pytest and in the soak, so a soak violation reproduces as a test with the printed seed.

What "transient" means here: every fault the chaos injects is recoverable (a killed or stopped
operator comes back, a storm ends, a connection is replaced), so nothing may end ``Failed`` because
of one; a terminal failure is a violation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.naming import LABEL_NAME, LABEL_REVISION
from aiplane.demo.dynamo import GraphWatch
from aiplane.demo.platform import credential_refs, gpu_quota
from aiplane.demo.request import RequestWatch
from aiplane.demo.serving import FloorWatch
from aiplane.sim.apiserver.store import DELETED, Event, Store

NP_KEY = "infrastructure.silogen.ai/nodepartitionings"
PLAN_KEY = "infrastructure.silogen.ai/partitioningplans"
PROFILE_KEY = "infrastructure.silogen.ai/partitioningprofiles"
MI_KEY = "workload.volcano.sh/modelinfers"
DCD_KEY = "nvidia.com/dynamocomponentdeployments"
CLUSTERQUEUE_KEY = "kueue.x-k8s.io/clusterqueues"
NODE_KEY = "/nodes"
POD_KEY = "/pods"
IN_PROGRESS = frozenset({"Draining", "Applying", "WaitingOperator", "Verifying"})
DCM_TAINT = "amd-dcm"
GPU = "amd.com/gpu"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Leader election renews its Lease while at rest: that write is the protocol, not a reconcile.
AT_REST_EXEMPT = frozenset({"leases"})
Obj = dict[str, Any]


@dataclass
class Checker:
    """What every checker has: a name, how many checks ran, and the violations (kept short)."""

    name: str = ""
    checks: int = 0
    violations: list[str] = field(default_factory=list)

    def violate(self, message: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(f"{self.name}: {message}")

    def __call__(self, event: Event) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def problems(self, store: Store) -> list[str]:  # pragma: no cover - overridden
        """What is not as it should be now, once converged (pure: polling it counts no check)."""
        raise NotImplementedError

    def end_state(self, store: Store) -> list[str]:
        """The end-state check: ``problems``, counted as one check."""
        self.checks += 1
        return self.problems(store)


def _phase(np: Mapping[str, Any]) -> str:
    return str(objects.status(np).get("phase") or "Pending")


def marked_nodes(store: Store) -> list[str]:
    """Nodes cordoned or carrying the DCM taint (none may be left once a rollout ended)."""
    return sorted(
        objects.name(n)
        for n in store.items(NODE_KEY)
        if objects.spec(n).get("unschedulable")
        or any(t.get("key") == DCM_TAINT for t in objects.spec(n).get("taints") or [])
    )


@dataclass
class PartitioningInvariants(Checker):
    """One PartitioningPlan: limits on every change, no second drain, no Failed, exact end state."""

    plan: str = ""
    succeeded: set[tuple[str, int]] = field(default_factory=set)  # (NodePartitioning, its generation)
    phases: dict[str, str] = field(default_factory=dict)
    store: Store | None = None
    worst_in_progress: int = 0
    worst_unavailable: int = 0

    def __post_init__(self) -> None:
        self.name = self.name or f"partitioning {self.plan}"

    def __call__(self, event: Event) -> None:
        if (
            event.key != NP_KEY
            or objects.labels(event.obj).get("infrastructure.silogen.ai/plan") != self.plan
        ):
            return
        self.checks += 1
        np_name = objects.name(event.obj)
        if event.type == DELETED:
            self.phases.pop(np_name, None)
            self.succeeded = {s for s in self.succeeded if s[0] != np_name}  # a new one starts at 1
            return
        phase = _phase(event.obj)
        desired = str(objects.spec(event.obj).get("desiredHash", ""))
        generation = objects.generation(event.obj)
        before = self.phases.get(np_name)
        self.phases[np_name] = phase
        if phase == "Draining" and before != "Draining" and (np_name, generation) in self.succeeded:
            self.violate(f"{np_name} drained again after Succeeded (generation {generation}, rv {event.rv})")
        # Succeeded for THIS spec (a new spec briefly shows the last one's Succeeded): a new desired
        # state is a new generation, which may drain again (CPX, SPX, CPX: the hash comes back).
        if phase == "Succeeded" and objects.status(event.obj).get("currentHash") == desired:
            self.succeeded.add((np_name, generation))
        if phase == "Failed" and before != "Failed":
            message = objects.status(event.obj).get("message") or objects.status(event.obj).get("conditions")
            self.violate(f"{np_name} Failed on a transient fault: {message}")
        self._limits(event.rv)

    def _limits(self, rv: int) -> None:
        assert self.store is not None, "bind the checker to the store (PartitioningInvariants(store=…))"
        plan = self.store.get(PLAN_KEY, "", self.plan)
        rollout = objects.spec(plan).get("rollout") or {}
        max_parallel = int(rollout.get("maxParallel", 1))
        max_unavailable = int(rollout.get("maxUnavailable", 1))
        phases = list(self.phases.values())
        busy = sum(1 for p in phases if p in IN_PROGRESS)
        down = busy + phases.count("Failed")
        self.worst_in_progress = max(self.worst_in_progress, busy)
        self.worst_unavailable = max(self.worst_unavailable, down)
        if busy > max_parallel:
            self.violate(f"{busy} nodes in progress > maxParallel {max_parallel} at rv {rv}")
        if down > max_unavailable:
            self.violate(f"{down} nodes unavailable > maxUnavailable {max_unavailable} at rv {rv}")

    def settled(self, store: Store) -> bool:
        plan = store.get(PLAN_KEY, "", self.plan)
        status = objects.status(plan)
        return (
            plan is not None
            and status.get("observedGeneration") == objects.generation(plan)
            and status.get("phase") in ("Completed", "Degraded", "Failed")
        )

    def problems(self, store: Store) -> list[str]:
        problems = []
        plan = store.get(PLAN_KEY, "", self.plan)
        if objects.status(plan).get("phase") != "Completed":
            problems.append(f"plan {self.plan} ended {objects.status(plan).get('phase')!r}, not Completed")
        for np in store.items(NP_KEY):
            if objects.labels(np).get("infrastructure.silogen.ai/plan") != self.plan:
                continue
            spec = objects.spec(np)
            node = store.get(NODE_KEY, "", str(spec.get("nodeName")))
            profile = store.get(PROFILE_KEY, "", str((spec.get("profileRef") or {}).get("name")))
            want = (objects.spec(profile).get("expectedResources") or {}).get(GPU)
            have = (objects.status(node).get("allocatable") or {}).get(GPU)
            if _phase(np) != "Succeeded":
                problems.append(f"{objects.name(np)} ended {_phase(np)}")
            elif want is not None and str(have) != str(want):
                problems.append(f"node {spec.get('nodeName')} has {have} {GPU}, its profile expects {want}")
        left = marked_nodes(store)
        if left:
            problems.append(f"nodes left cordoned or tainted: {', '.join(left)}")
        return [f"{self.name}: {p}" for p in problems]


@dataclass
class ServingInvariants(Checker):
    """ModelInfers' serving floors (replicas - maxUnavailable available groups) on every pod change,
    drains of their pool included; end state: every group available on the update revision."""

    namespace: str | None = None
    floors: FloorWatch = field(default_factory=FloorWatch)

    def __post_init__(self) -> None:
        self.name = self.name or "serving"
        self.floors = FloorWatch(namespace=self.namespace)

    def seed(self, store: Store) -> None:
        self.floors.seed(store)

    def track(self) -> list[str]:
        """Measure from now on the ModelInfers whose groups are all available."""
        return self.floors.track()

    def __call__(self, event: Event) -> None:
        before = len(self.floors.breaches)
        changes = self.floors.changes
        self.floors(event)
        self.checks += self.floors.changes - changes
        for breach in self.floors.breaches[before:]:
            self.violate(f"below its floor: {breach}")

    def converged(self, store: Store, mi: Mapping[str, Any]) -> list[str]:
        status = objects.status(mi)
        replicas = int(objects.spec(mi).get("replicas", 1))
        key = f"{objects.namespace(mi)}/{objects.name(mi)}"
        problems = []
        if status.get("observedGeneration") != objects.generation(mi):
            problems.append("status not of the latest generation")
        for field_name in ("replicas", "availableReplicas", "updatedReplicas"):
            if status.get(field_name) != replicas:
                problems.append(f"status.{field_name} {status.get(field_name)} != {replicas}")
        revision = status.get("updateRevision")
        pods = [
            p
            for p in store.items(POD_KEY, objects.namespace(mi))
            if objects.labels(p).get(LABEL_NAME) == objects.name(mi)
        ]
        stale = [objects.name(p) for p in pods if objects.labels(p).get(LABEL_REVISION) != revision]
        if stale:
            problems.append(f"pods not on the update revision {revision}: {', '.join(sorted(stale))}")
        if self.floors.available(key) != replicas:
            problems.append(f"{self.floors.available(key)} of {replicas} groups available")
        return [f"{key}: {p}" for p in problems]

    def problems(self, store: Store) -> list[str]:
        problems = []
        for mi in store.items(MI_KEY, self.namespace):
            problems += self.converged(store, mi)
        return [f"{self.name}: {p}" for p in problems]


@dataclass
class GraphInvariants(Checker):
    """A DynamoGraphDeployment: never ``successful`` while a Deployment rolls, never ``failed``; end
    state ``successful`` with one DCD per service, every Deployment rolled out."""

    namespace: str = ""
    graph: str = ""
    watch: GraphWatch | None = None

    def __post_init__(self) -> None:
        self.name = self.name or f"graph {self.namespace}/{self.graph}"
        self.watch = self.watch or GraphWatch(self.namespace, self.graph)

    def __call__(self, event: Event) -> None:
        assert self.watch is not None
        premature = self.watch.premature_successful
        failed = objects.status(self.watch.dgd).get("state") == "failed"
        self.watch(event)
        if self.watch.dgd is None or objects.namespace(event.obj) != self.namespace:
            return
        self.checks += 1
        if self.watch.premature_successful > premature:
            self.violate(f"successful while a Deployment was rolling (rv {event.rv})")
        if objects.status(self.watch.dgd).get("state") == "failed" and not failed:
            self.violate(f"failed on a transient fault: {objects.status(self.watch.dgd).get('conditions')}")

    def problems(self, store: Store) -> list[str]:
        assert self.watch is not None
        dgd = self.watch.dgd
        if dgd is None:
            return [f"{self.name}: gone"]
        problems = []
        if not self.watch.converged():
            problems.append(f"not converged (state {objects.status(dgd).get('state')!r})")
        services = set(objects.spec(dgd).get("services") or {})
        dcds = {
            str(objects.spec(d).get("serviceName") or objects.name(d))
            for d in store.items(DCD_KEY, self.namespace)
            if objects.labels(d).get("nvidia.com/dynamo-graph-deployment-name") == self.graph
        }
        if len(dcds) != len(services):
            problems.append(f"{len(dcds)} DynamoComponentDeployments for {len(services)} services")
        return [f"{self.name}: {p}" for p in problems]


@dataclass
class RequestInvariants(Checker):
    """A DynamoGraphDeploymentRequest: never ``Failed`` on a transient fault; ends Ready with its graph."""

    namespace: str = ""
    request: str = ""
    graph: str = ""
    watch: RequestWatch | None = None
    graph_checker: GraphInvariants | None = None

    def __post_init__(self) -> None:
        self.name = self.name or f"request {self.namespace}/{self.request}"
        self.graph_checker = GraphInvariants(namespace=self.namespace, graph=self.graph)
        self.graph_checker.violations = self.violations  # one list: the graph's are the request's
        self.watch = RequestWatch(self.namespace, self.request, GraphWatch(self.namespace, self.graph))

    def __call__(self, event: Event) -> None:
        assert self.watch is not None and self.graph_checker is not None
        states = len(self.watch.states)
        self.watch(event)
        self.graph_checker(event)
        self.checks = self.graph_checker.checks + len(self.watch.states)
        for state in self.watch.states[states:]:
            if state == "Failed":
                self.violate(
                    f"Failed on a transient fault: {objects.status(self.watch.request).get('conditions')}"
                )

    def problems(self, store: Store) -> list[str]:
        assert self.watch is not None and self.graph_checker is not None
        problems = (
            [] if self.watch.state == "Ready" else [f"{self.name}: ended {self.watch.state!r}, not Ready"]
        )
        deployed = objects.status(self.watch.request).get("deployment") or {}
        if deployed.get("name") != self.graph:
            problems.append(f"{self.name}: status.deployment {deployed}, not graph {self.graph}")
        return problems + self.graph_checker.problems(store)


@dataclass
class PlatformInvariants(Checker):
    """KaiwoConfig's default ClusterQueue quota = the GPUs the nodes advertise; AIMNamespaceConfig's
    credentials and pull secret on every ModelInfer pod of its namespace (end state)."""

    queue: str = "kaiwo"
    decorated_namespace: str | None = None
    pull_secret: str | None = None

    def __post_init__(self) -> None:
        self.name = self.name or "platform"

    def __call__(self, event: Event) -> None:
        return  # end-state only: quotas follow the nodes, decorations are made at pod creation

    def problems(self, store: Store) -> list[str]:
        problems = []
        queue = store.get(CLUSTERQUEUE_KEY, "", self.queue)
        want = sum(
            int(str((objects.status(n).get("allocatable") or {}).get(GPU, "0")))
            for n in store.items(NODE_KEY)
        )
        if queue is None or gpu_quota(queue) != want:
            problems.append(f"ClusterQueue {self.queue} quota {gpu_quota(queue)} != {want} {GPU} allocatable")
        if self.decorated_namespace is not None:
            pods = [
                p for p in store.items(POD_KEY, self.decorated_namespace) if objects.labels(p).get(LABEL_NAME)
            ]
            carrying, _, pulls = credential_refs(pods)
            if carrying != len(pods):
                problems.append(f"{len(pods) - carrying} of {len(pods)} pods without the credentials")
            if self.pull_secret is not None and pods and self.pull_secret not in pulls:
                problems.append(f"pods without image pull secret {self.pull_secret}")
        return [f"{self.name}: {p}" for p in problems]


def operator_writes(records: Iterable[Any], since: float = 0.0) -> list[str]:
    """The operator's writes (User-Agent ``aiplane/…``) in the API server's audit records after
    ``since`` (a POSIX time), Lease renewals aside, as ``VERB resource/name``."""
    out = []
    for record in records:
        if not str(record.user_agent).startswith("aiplane/") or record.verb not in WRITE_VERBS:
            continue
        if record.resource in AT_REST_EXEMPT or record.time.timestamp() < since:
            continue
        out.append(f"{record.verb} {record.resource}/{record.name} -> {record.code}")
    return out

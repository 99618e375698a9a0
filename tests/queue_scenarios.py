"""The KaiwoConfig's Kueue queue governing our workloads: scenarios written against API behaviour only
(our status, Events, Deployments, pods, Kueue's Workloads), run on both tiers — the embedded twin with its
Kueue stand-in (tests/integration/test_queue_e2e.py) and the real control plane with upstream Kueue v0.17
and LeaderWorkerSet (tests/real/test_queue.py). Where the two disagree, the twin is wrong.

The cluster each runs on: two MI300X nodes in SPX (16 ``amd.com/gpu``), the partitioning, KaiwoConfig and
DynamoComponentDeployment controllers, the KaiwoConfig ``kaiwo`` with ``dynamicallyUpdateDefaultClusterQueue``
on, so the ClusterQueue ``kaiwo`` holds 16 GPUs of quota (128 once both nodes are CPX).
"""

from __future__ import annotations

from typing import Any, Protocol

from aiplane.controllers.queueing import (
    GATE,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL_COUNT,
    QUEUE_LABEL,
    SKIP_QUEUE_ANNOTATION,
)
from aiplane.kube.resources import (
    CLUSTERQUEUES,
    DEPLOYMENTS,
    EVENTS,
    LEADERWORKERSETS,
    LOCALQUEUES,
    NODES,
    PODS,
    WORKLOADS,
    Resource,
    resource_for,
)
from tests.integration.test_partitioning_e2e import profile
from tests.polling import eventually

Obj = dict[str, Any]
DCD = resource_for("nvidia.com/v1alpha1", "DynamoComponentDeployment")
PLANS = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningPlan")
PROFILES = resource_for("infrastructure.silogen.ai/v1alpha1", "PartitioningProfile")
PRODUCT = "AMD_Instinct_MI300X_OAM"
QUEUE = "kaiwo"
NODES_IN_POOL = 2
SPX_QUOTA = 8 * NODES_IN_POOL
CPX_QUOTA = 64 * NODES_IN_POOL
#: Scheduling, a CPX rollout of two nodes and Kueue's passes: generous for a shared 2-core machine.
TIMEOUT = 120.0


class Client(Protocol):
    """What the scenarios use of a client: the embedded cluster's and kube-apiserver's alike."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj: ...

    async def list(self, resource: Resource, namespace: str | None = None, **kwargs: Any) -> Obj: ...

    async def create(
        self, resource: Resource, obj: Obj, namespace: str | None = None, **kwargs: Any
    ) -> Obj: ...

    async def patch(
        self, resource: Resource, name: str, patch: Any, namespace: str | None = None, **kwargs: Any
    ) -> Obj: ...

    async def delete(self, resource: Resource, name: str, **kwargs: Any) -> Any: ...


def component(name: str, namespace: str, gpus: int, *, replicas: int = 1, skip: bool = False) -> Obj:
    """A single-node vLLM worker component: ``replicas`` pods of ``gpus`` AMD GPUs (one Deployment)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if skip:
        meta["annotations"] = {SKIP_QUEUE_ANNOTATION: "true"}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": meta,
        "spec": {
            "componentType": "worker",
            "replicas": replicas,
            "resources": {"limits": {"gpu": str(gpus)}},
            "extraPodSpec": {"mainContainer": {"image": "vllm:v1"}},
        },
    }


def plan(name: str, profile_name: str) -> Obj:
    """Every MI300X node to ``profile_name``, one at a time."""
    return {
        "apiVersion": "infrastructure.silogen.ai/v1alpha1",
        "kind": "PartitioningPlan",
        "metadata": {"name": name},
        "spec": {
            "rollout": {"maxParallel": 1, "maxUnavailable": 1},
            "rules": [
                {
                    "selector": {"matchLabels": {"amd.com/gpu.product-name": PRODUCT}},
                    "profileRef": {"name": profile_name},
                }
            ],
        },
    }


def gpu_quota(cq: Obj) -> int:
    total = 0
    for group in cq["spec"].get("resourceGroups") or []:
        for flavor in group["flavors"]:
            total += sum(int(r["nominalQuota"]) for r in flavor["resources"] if r["name"] == "amd.com/gpu")
    return total


async def quota(client: Client) -> int | None:
    cqs = (await client.list(CLUSTERQUEUES))["items"]
    return next((gpu_quota(cq) for cq in cqs if cq["metadata"]["name"] == QUEUE), None)


async def quota_is(client: Client, gpus: int, what: str) -> None:
    async def check() -> bool:
        return await quota(client) == gpus

    await eventually(check, TIMEOUT, f"the ClusterQueue's amd.com/gpu quota at {gpus} ({what})")


async def condition(client: Client, namespace: str, name: str, kind: str = "Available") -> Obj | None:
    dcd = await client.get(DCD, name, namespace=namespace)
    for cond in (dcd.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


async def pods(client: Client, namespace: str, component_name: str) -> list[Obj]:
    listed = (await client.list(PODS, namespace=namespace))["items"]
    return [
        p
        for p in listed
        if p["metadata"]["name"].startswith(f"{component_name}-")
        and not p["metadata"].get("deletionTimestamp")
    ]


async def running(client: Client, namespace: str, component_name: str, count: int) -> bool:
    got = await pods(client, namespace, component_name)
    return len(got) == count and all(p["status"].get("phase") == "Running" for p in got)


async def events(client: Client, namespace: str, name: str, reason: str) -> list[Obj]:
    items = (await client.list(EVENTS, namespace=namespace))["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


async def waiting(client: Client, namespace: str, name: str) -> Obj:
    """The component's ``Available=False QuotaPending`` condition, once it shows."""

    async def check() -> Obj | None:
        cond = await condition(client, namespace, name)
        return cond if cond and cond["status"] == "False" and cond["reason"] == "QuotaPending" else None

    found: Obj = await eventually(check, TIMEOUT, f"component {name} reports the quota wait")
    return found


async def available(client: Client, namespace: str, name: str) -> None:
    async def check() -> bool:
        cond = await condition(client, namespace, name)
        return bool(cond and cond["status"] == "True")

    await eventually(check, TIMEOUT, f"component {name} Available")


def gated(pod: Obj) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


async def admitted_workloads(client: Client, namespace: str) -> list[str]:
    out = []
    for wl in (await client.list(WORKLOADS, namespace=namespace))["items"]:
        if any(
            c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"].get("conditions") or []
        ):
            out.append(wl["metadata"]["name"])
    return sorted(out)


async def repartition(client: Client, dcm: str, gpus: str, wanted: int) -> None:
    """Both MI300X nodes to DCM profile ``dcm`` (``gpus`` each), unless the quota says they are: the other
    plans deleted (a completed plan leaves its nodes as they are), then a plan named ``dcm``; wait for the
    ClusterQueue's quota that follows (``wanted``)."""
    if await quota(client) == wanted:
        return
    for existing in (await client.list(PLANS))["items"]:
        if existing["metadata"]["name"] != dcm:
            await client.delete(PLANS, existing["metadata"]["name"])

    async def others_gone() -> bool:
        return all(p["metadata"]["name"] == dcm for p in (await client.list(PLANS))["items"])

    await eventually(others_gone, TIMEOUT, "the other PartitioningPlans deleted")
    profiles = {p["metadata"]["name"] for p in (await client.list(PROFILES))["items"]}
    if f"mi300x-{dcm}" not in profiles:
        await client.create(PROFILES, profile(f"mi300x-{dcm}", dcm, gpus))
    if not (await client.list(PLANS))["items"]:
        await client.create(PLANS, plan(dcm, f"mi300x-{dcm}"))
    await quota_is(client, wanted, f"both nodes in {dcm}")


async def to_cpx(client: Client) -> None:
    await repartition(client, "cpx", "64", CPX_QUOTA)


async def to_spx(client: Client) -> None:
    await repartition(client, "spx", "8", SPX_QUOTA)


# --- the scenarios --------------------------------------------------------------------------------------


async def over_quota_waits_in_kueues_words_until_cpx(client: Client, namespace: str) -> None:
    """A 24-GPU worker on 16 GPUs of SPX quota waits: our status carries Kueue's message, one Warning
    Event says so, its pod stays gated; the repartition to CPX raises the quota and Kueue admits it."""
    await to_spx(client)
    await client.create(DCD, component("big", namespace, gpus=24), namespace=namespace)
    cond = await waiting(client, namespace, "big")
    assert f"waits in Kueue LocalQueue {QUEUE}" in cond["message"]
    assert "insufficient quota for amd.com/gpu in flavor amd-mi300x-8gpu-" in cond["message"]
    assert f"> maximum capacity ({SPX_QUOTA})" in cond["message"]
    deployment = await client.get(DEPLOYMENTS, "big", namespace=namespace)
    assert deployment["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    (pod,) = await pods(client, namespace, "big")
    assert gated(pod) and not pod["spec"].get("nodeName")
    found = await eventually(lambda: events(client, namespace, "big", "QuotaPending"), TIMEOUT, "the Event")
    assert [e["type"] for e in found] == ["Warning"]

    await to_cpx(client)
    await eventually(lambda: running(client, namespace, "big", 1), TIMEOUT, "the worker admitted and running")
    await available(client, namespace, "big")
    (pod,) = await pods(client, namespace, "big")
    assert not gated(pod)
    assert pod["spec"]["nodeSelector"]["kaiwo/nodepool"].startswith("amd-mi300x-8gpu-")
    assert len(await admitted_workloads(client, namespace)) == 1
    assert len(await events(client, namespace, "big", "QuotaPending")) == 1, (
        "one Warning when it started waiting"
    )


async def lowering_the_quota_evicts_nothing(client: Client, namespace: str) -> None:
    """On CPX (128 GPUs of quota) two workers of 24 and 48 GPUs are admitted and run; a node cordoned by
    someone else leaves the pool, the quota drops to 64, below the 72 admitted: both keep their admission
    and their pods, and a new 8-GPU worker waits until the node is back."""
    await to_cpx(client)
    await client.create(DCD, component("a", namespace, gpus=24), namespace=namespace)
    await client.create(DCD, component("b", namespace, gpus=48), namespace=namespace)
    for name in ("a", "b"):
        await eventually(lambda n=name: running(client, namespace, n, 1), TIMEOUT, f"worker {name} running")
    before = {name: (await pods(client, namespace, name))[0]["metadata"]["uid"] for name in ("a", "b")}
    admitted = await admitted_workloads(client, namespace)
    assert len(admitted) == 2

    nodes = sorted(
        n["metadata"]["name"]
        for n in (await client.list(NODES))["items"]
        if n["metadata"].get("labels", {}).get("amd.com/gpu.product-name") == PRODUCT
    )
    await client.patch(NODES, nodes[0], {"spec": {"unschedulable": True}})
    try:
        await quota_is(client, CPX_QUOTA // 2, "one node cordoned")
        await client.create(DCD, component("c", namespace, gpus=8), namespace=namespace)
        cond = await waiting(client, namespace, "c")
        assert "insufficient unused quota for amd.com/gpu in flavor amd-mi300x-8gpu-" in cond["message"]
        # Kueue counts the unused quota as 0, not 64 - 72: the worker needs its own 8 GPUs.
        assert cond["message"].endswith(", 8 more needed")
        assert await admitted_workloads(client, namespace) == admitted, "an admitted workload was evicted"
        for name in ("a", "b"):
            (pod,) = await pods(client, namespace, name)
            assert pod["metadata"]["uid"] == before[name] and pod["status"].get("phase") == "Running"
    finally:
        await client.patch(NODES, nodes[0], {"spec": {"unschedulable": None}})
    await eventually(lambda: running(client, namespace, "c", 1), TIMEOUT, "the waiting worker admitted")
    assert set(admitted) < set(await admitted_workloads(client, namespace))


async def opt_out_is_never_queued(client: Client, namespace: str) -> None:
    """The ``aiplane.silogen.ai/skip-queue`` annotation: no queue label, no gate, no Workload."""
    await client.create(DCD, component("free", namespace, gpus=1, skip=True), namespace=namespace)
    await eventually(lambda: running(client, namespace, "free", 1), TIMEOUT, "the opted-out worker runs")
    deployment = await client.get(DEPLOYMENTS, "free", namespace=namespace)
    assert QUEUE_LABEL not in (deployment["metadata"].get("labels") or {})
    (pod,) = await pods(client, namespace, "free")
    assert QUEUE_LABEL not in pod["metadata"].get("labels", {})
    assert (await client.list(WORKLOADS, namespace=namespace))["items"] == []
    await available(client, namespace, "free")


async def leaderworkerset_groups_are_admitted_whole(client: Client, namespace: str) -> None:
    """A LeaderWorkerSet naming a queue, as our multinode components' do (Kueue's
    ``leaderworkerset.x-k8s.io/leaderworkerset`` integration): one Workload per group, leader and worker
    together. On CPX (128 GPUs) two groups of 2 x 40 GPUs: the first is admitted and both its pods run,
    the second waits whole (neither pod runs), in Kueue's words, 32 GPUs short."""
    await to_cpx(client)
    await client.create(
        LOCALQUEUES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "multinode", "namespace": namespace},
            "spec": {"clusterQueue": QUEUE},
        },
        namespace=namespace,
    )
    container = {
        "name": "vllm",
        "image": "vllm:v1",
        "resources": {"limits": {"amd.com/gpu": "40"}, "requests": {"cpu": "1", "amd.com/gpu": "40"}},
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "mn", "namespace": namespace, "labels": {QUEUE_LABEL: "multinode"}},
        "spec": {
            "replicas": 2,
            # A leader template of its own, as our multinode components have: pod sets leader and worker.
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": {"containers": [container]}},
                "workerTemplate": {"spec": {"containers": [container]}},
            },
        },
    }
    await client.create(LEADERWORKERSETS, lws, namespace=namespace)

    async def split() -> tuple[list[Obj], Obj] | None:
        wls = (await client.list(WORKLOADS, namespace=namespace))["items"]
        admitted = [
            w
            for w in wls
            if any(
                c["type"] == "Admitted" and c["status"] == "True" for c in w["status"].get("conditions") or []
            )
        ]
        pending = [
            w
            for w in wls
            if any(
                c["type"] == "QuotaReserved" and c["status"] == "False"
                for c in w["status"].get("conditions") or []
            )
        ]
        return (admitted, pending[0]) if len(wls) == 2 and len(admitted) == 1 and len(pending) == 1 else None

    admitted, pending = await eventually(split, TIMEOUT, "one group admitted, the other waiting")
    for wl in (*admitted, pending):
        assert wl["metadata"]["name"].startswith("leaderworkerset-mn-")
        assert sorted((ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]) == [
            ("leader", 1),
            ("worker", 1),
        ]
        assert [r["kind"] for r in wl["metadata"]["ownerReferences"]] == ["LeaderWorkerSet"]
    (cond,) = [c for c in pending["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert cond["reason"] == "Pending"
    assert "insufficient unused quota for amd.com/gpu in flavor amd-mi300x-8gpu-" in cond["message"]
    assert cond["message"].endswith("32 more needed")

    # Workloads are named leaderworkerset-mn-<group>-<hash>: the admitted group's pods run.
    group_of = {w["metadata"]["name"].split("-")[2]: w for w in (*admitted, pending)}
    (running_group,) = [g for g, w in group_of.items() if w in admitted]
    (waiting_group,) = [g for g in group_of if g != running_group]

    async def pods_of_groups() -> dict[str, list[Obj]] | None:
        listed = (await client.list(PODS, namespace=namespace))["items"]
        groups: dict[str, list[Obj]] = {}
        for pod in listed:
            group = pod["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/group-index", "")
            groups.setdefault(group, []).append(pod)
        ready = groups.get(running_group, [])
        if len(ready) == 2 and all(p["status"].get("phase") == "Running" for p in ready):
            return groups
        return None

    groups = await eventually(pods_of_groups, TIMEOUT, f"group {running_group}'s leader and worker running")
    # The waiting group's pods (its leader; LWS makes the worker once the leader's StatefulSet has it) stay
    # gated and unbound.
    assert groups.get(waiting_group), f"group {waiting_group}'s leader exists"
    for pod in groups[waiting_group]:
        assert gated(pod) and not pod["spec"].get("nodeName")


# --- ModelInfer: a group is one Kueue pod group ---------------------------------------------------------

MI = resource_for("workload.volcano.sh/v1alpha1", "ModelInfer")


def modelinfer(name: str, namespace: str, gpus: int, *, skip: bool = False) -> Obj:
    """One group of one role replica: an entry and two workers of ``gpus`` GPUs each. No
    ``gangSchedule`` and no ``schedulerName``: kube's scheduler places the pods once Kueue admitted the
    group whole (so it runs where Volcano is not installed)."""
    template = {
        "spec": {
            "containers": [
                {"name": "vllm", "image": "vllm:v1", "resources": {"limits": {"amd.com/gpu": str(gpus)}}}
            ]
        }
    }
    meta: Obj = {"name": name, "namespace": namespace}
    if skip:
        meta["annotations"] = {SKIP_QUEUE_ANNOTATION: "true"}
    return {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {
                        "name": "serve",
                        "replicas": 1,
                        "workerReplicas": 2,
                        "entryTemplate": template,
                        "workerTemplate": template,
                    }
                ]
            },
        },
    }


async def mi_condition(client: Client, namespace: str, name: str, kind: str) -> Obj | None:
    mi = await client.get(MI, name, namespace=namespace)
    for cond in (mi.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


async def mi_pods(client: Client, namespace: str, name: str) -> list[Obj]:
    listed = (await client.list(PODS, namespace=namespace))["items"]
    return [
        p
        for p in listed
        if p["metadata"].get("labels", {}).get("modelinfer.volcano.sh/name") == name
        and not p["metadata"].get("deletionTimestamp")
    ]


async def mi_running(client: Client, namespace: str, name: str, count: int) -> bool:
    got = await mi_pods(client, namespace, name)
    return len(got) == count and all(p["status"].get("phase") == "Running" for p in got)


async def modelinfer_group_waits_in_kueues_words_until_cpx(client: Client, namespace: str) -> None:
    """A group needing 24 GPUs on 16 of SPX quota waits whole: ``QuotaReserved=False QuotaPending`` with
    Kueue's message and one Warning Event, every pod labelled into one pod group and gated; CPX admits it."""
    await to_spx(client)
    await client.create(MI, modelinfer("big", namespace, gpus=8), namespace=namespace)

    async def waiting_mi() -> Obj | None:
        cond = await mi_condition(client, namespace, "big", "QuotaReserved")
        return cond if cond and cond["status"] == "False" else None

    cond = await eventually(waiting_mi, TIMEOUT, "the ModelInfer reports the quota wait")
    assert cond["reason"] == "QuotaPending"
    assert f"waits in Kueue LocalQueue {QUEUE}" in cond["message"]
    assert "insufficient quota for amd.com/gpu in flavor amd-mi300x-8gpu-" in cond["message"]
    assert f"> maximum capacity ({SPX_QUOTA})" in cond["message"]
    pods = await mi_pods(client, namespace, "big")
    assert len(pods) == 3
    assert all(p["metadata"]["labels"][QUEUE_LABEL] == QUEUE for p in pods)
    revision = pods[0]["metadata"]["labels"]["modelinfer.volcano.sh/revision"]
    assert {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods} == {f"big-0-{revision}"}
    assert all(p["metadata"]["annotations"][POD_GROUP_TOTAL_COUNT] == "3" for p in pods)
    assert all(gated(p) and not p["spec"].get("nodeName") for p in pods)
    found = await eventually(lambda: events(client, namespace, "big", "QuotaPending"), TIMEOUT, "the Event")
    assert [e["type"] for e in found] == ["Warning"]

    await to_cpx(client)
    await eventually(
        lambda: mi_running(client, namespace, "big", 3), TIMEOUT, "the group admitted and running"
    )

    async def admitted_mi() -> Obj | None:
        cond = await mi_condition(client, namespace, "big", "QuotaReserved")
        return cond if cond and cond["status"] == "True" else None

    await eventually(admitted_mi, TIMEOUT, "QuotaReserved=True")
    assert await admitted_workloads(client, namespace) == [f"big-0-{revision}"], "one Workload, the group's"
    assert len(await events(client, namespace, "big", "QuotaPending")) == 1, (
        "one Warning when it started waiting"
    )


async def modelinfer_opt_out_is_never_queued(client: Client, namespace: str) -> None:
    await client.create(MI, modelinfer("free", namespace, gpus=2, skip=True), namespace=namespace)
    await eventually(lambda: mi_running(client, namespace, "free", 3), TIMEOUT, "the opted-out group runs")
    pods = await mi_pods(client, namespace, "free")
    assert not any(QUEUE_LABEL in p["metadata"]["labels"] for p in pods)
    assert await mi_condition(client, namespace, "free", "QuotaReserved") is None


# --- a queued ModelInfer's groups replaced: rolling update and recovery ---------------------------------

GROUP_NAME_LABEL = "modelinfer.volcano.sh/group-name"
#: The rolling ModelInfer's shape (tests/integration/test_modelinfer_e2e.py's: prefill 1 x 2 pods, decode
#: 2 x 2 pods, one GPU each, gang scheduled), three groups, one unavailable at a time.
ROLL_REPLICAS = 3
ROLL_PODS_PER_GROUP = 6
ROLL_FLOOR = ROLL_REPLICAS - 1


def _ready(pod: Obj) -> bool:
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or []
    )


class GroupFloor:
    """The ModelInfer's pods after every change a watch delivers: the fewest fully ready groups once
    armed, and every pod that was ever Terminating (``deletionTimestamp`` set)."""

    def __init__(self, mi: str) -> None:
        self.mi = mi
        self.pods: dict[str, Obj] = {}
        self.fewest: int | None = None
        self.changes = 0

    def __call__(self, kind: str, pod: Obj) -> None:
        if pod["metadata"].get("labels", {}).get("modelinfer.volcano.sh/name") != self.mi:
            return
        self.changes += 1
        if kind == "DELETED":
            self.pods.pop(pod["metadata"]["name"], None)
        else:
            self.pods[pod["metadata"]["name"]] = pod
        if self.fewest is not None:
            self.fewest = min(self.fewest, self.available())

    def available(self) -> int:
        groups: dict[str, list[Obj]] = {}
        for pod in self.pods.values():
            groups.setdefault(pod["metadata"]["labels"][GROUP_NAME_LABEL], []).append(pod)
        return sum(1 for m in groups.values() if len(m) == ROLL_PODS_PER_GROUP and all(map(_ready, m)))

    def arm(self) -> None:
        self.fewest = self.available()


async def _all_mi_pods(client: Client, namespace: str, name: str) -> list[Obj]:
    """Every pod of the ModelInfer, Terminating ones included."""
    listed = (await client.list(PODS, namespace=namespace))["items"]
    return [p for p in listed if p["metadata"].get("labels", {}).get("modelinfer.volcano.sh/name") == name]


async def queued_converged(client: Client, namespace: str, name: str) -> list[Obj]:
    """Every group updated and available, ``QuotaReserved=True``, and the pods agree: the right number,
    none Terminating (a pod Kueue's finalizer holds counts), every one Running, Ready and ungated, and
    Kueue's Workloads exactly the groups' pod groups, each admitted. Returns the pods."""

    async def done() -> list[Obj] | None:
        mi = await client.get(MI, name, namespace=namespace)
        status = mi.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        pods = await _all_mi_pods(client, namespace, name)
        groups = {p["metadata"]["labels"].get(POD_GROUP_LABEL) for p in pods}
        if not (
            status.get("observedGeneration") == mi["metadata"]["generation"]
            and status.get("availableReplicas") == status.get("updatedReplicas") == ROLL_REPLICAS
            and conditions.get("Available") == "True"
            and conditions.get("UpdateInProgress") != "True"
            and conditions.get("QuotaReserved") == "True"
            and len(pods) == ROLL_REPLICAS * ROLL_PODS_PER_GROUP
            and all(_ready(p) and not gated(p) for p in pods)
            and len(groups) == ROLL_REPLICAS
            and await admitted_workloads(client, namespace) == sorted(str(g) for g in groups)
        ):
            return None
        workloads = {
            w["metadata"]["name"] for w in (await client.list(WORKLOADS, namespace=namespace))["items"]
        }
        return pods if workloads == groups else None

    try:
        found: list[Obj] = await eventually(
            done, TIMEOUT, f"ModelInfer {name} converged, its groups admitted"
        )
    except AssertionError as exc:
        pods = await _all_mi_pods(client, namespace, name)
        held = sorted(p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp"))
        workloads = sorted(
            w["metadata"]["name"] for w in (await client.list(WORKLOADS, namespace=namespace))["items"]
        )
        mi = await client.get(MI, name, namespace=namespace)
        unready = [
            (
                p["metadata"]["name"],
                p["status"].get("phase"),
                [g["name"] for g in p["spec"].get("schedulingGates") or []],
            )
            for p in pods
            if not _ready(p) or gated(p)
        ]
        raise AssertionError(
            f"{exc}: Terminating {held}; Workloads {workloads}, admitted {await admitted_workloads(client, namespace)};"
            f" not ready or gated {unready}; status {mi.get('status')}"
        ) from None
    return found


async def queued_modelinfer_groups_are_replaced(client: Client, namespace: str, follow: Any) -> None:
    """A queued, gang-scheduled ModelInfer of three groups (its groups Kueue pod groups) rolls to a new
    image: every group is replaced by a new pod group on the new revision, never fewer than
    ``replicas - maxUnavailable`` groups available on any pod change the watch delivers, and it ends
    with no pod Terminating and every group admitted and Running. Then, as in a drain, a gang member's node
    cordoned and its role replica's pods deleted: the replica is recreated on another node into its gang
    and its pod group, which Kueue keeps admitted. ``follow(client, PODS, callback)`` is the tier's
    watch (an async context manager calling back on every pod change)."""
    from tests.integration.test_modelinfer_e2e import modelinfer as build

    await to_cpx(client)
    body = build("roll", replicas=ROLL_REPLICAS, max_unavailable=1)
    body["metadata"]["namespace"] = namespace
    await client.create(MI, body, namespace=namespace)
    pods = await queued_converged(client, namespace, "roll")
    assert all(p["metadata"]["labels"][QUEUE_LABEL] == QUEUE for p in pods)
    before = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods}

    watch = GroupFloor("roll")
    async with follow(client, PODS, watch):
        await eventually(lambda: watch.available() == ROLL_REPLICAS, TIMEOUT, "the watch sees every group")
        watch.arm()
        for role in body["spec"]["template"]["roles"]:
            for which in ("entryTemplate", "workerTemplate"):
                role[which]["spec"]["containers"][0]["image"] = "vllm:v2"
        await client.patch(MI, "roll", {"spec": {"template": body["spec"]["template"]}}, namespace=namespace)
        pods = await queued_converged(client, namespace, "roll")
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {"vllm:v2"}
    after = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods}
    assert not after & before, f"every group replaced by a new pod group: {sorted(before)} -> {sorted(after)}"
    assert watch.fewest is not None and watch.fewest >= ROLL_FLOOR, (
        f"fewest available groups {watch.fewest} over {watch.changes} pod changes"
    )

    # The ModelInfer deleted: the garbage collector deletes its pods, and none stays Terminating.
    await client.delete(MI, "roll", namespace=namespace)

    async def all_gone() -> bool:
        return not await _all_mi_pods(client, namespace, "roll")

    await eventually(all_gone, TIMEOUT, "the deleted ModelInfer's pods gone")

    # A gang member's node cordoned and its role replica's pods deleted, as a drain does: RoleRecreate
    # replaces the replica (the same names) on another node, and it rejoins its running gang and its
    # admitted pod group. Were our flavors topology-aware, Kueue would pin the replica to the node it was
    # admitted on, and it could never come back elsewhere.
    body = build("heal", replicas=ROLL_REPLICAS)
    body["metadata"]["namespace"] = namespace
    await client.create(MI, body, namespace=namespace)
    pods = await queued_converged(client, namespace, "heal")
    groups = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods}
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    replica = ("heal-1-decode-0-0", "heal-1-decode-0-1")
    node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] == replica[1])
    await client.patch(NODES, node, {"spec": {"unschedulable": True}})
    try:
        for name in replica:  # the drain's evictions of the replica's two pods
            await client.delete(PODS, name, namespace=namespace)

        async def replaced() -> bool:
            now = {
                p["metadata"]["name"]: p["metadata"]["uid"]
                for p in await _all_mi_pods(client, namespace, "heal")
            }
            return all(now.get(n) not in (None, uids[n]) for n in replica)

        await eventually(replaced, TIMEOUT, "role replica decode-0 of heal-1 recreated")
        pods = await queued_converged(client, namespace, "heal")
    finally:
        await client.patch(NODES, node, {"spec": {"unschedulable": None}})
    assert {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods} == groups, "the same pod groups"
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert node not in {placed[n] for n in replica}, f"the recreated replica left cordoned {node}: {placed}"


class Terminated:
    """Every pod (name, uid) of a ModelInfer that a watch ever saw Terminating, and why Kueue said so."""

    def __init__(self, mi: str) -> None:
        self.mi = mi
        self.seen: dict[tuple[str, str], str] = {}

    def __call__(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta.get("labels", {}).get("modelinfer.volcano.sh/name") != self.mi:
            return
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            why = [
                f"{c.get('reason')}: {c.get('message')}"
                for c in pod.get("status", {}).get("conditions") or []
                if c.get("type") == "TerminationTarget"
            ]
            self.seen.setdefault((meta["name"], meta["uid"]), "; ".join(why) or kind)


def _dangling(workload: Obj, pods: list[Obj]) -> list[str]:
    """The Pod owner references of ``workload`` that name no live pod (by name and uid)."""
    live = {(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods}
    return [
        r["name"]
        for r in workload["metadata"].get("ownerReferences") or []
        if r.get("kind") == "Pod" and (r["name"], r["uid"]) not in live
    ]


async def a_wholly_replaced_group_keeps_its_workload(client: Client, namespace: str, follow: Any) -> None:
    """Every pod of one queued group deleted at once, as a drain evicting a whole group does: the group is
    rebuilt under the same pod names into the same admitted Workload, and nothing deletes the rebuilt pods.

    Kueue records a replacement pod as an owner of its Workload only when the count of owners grows, so a
    same-named replacement never is; once every original member is gone, only the ModelInfer's own
    reference keeps the garbage collector from deleting the Workload, after which Kueue deletes every pod
    of the group ("Workload is deleted"), taking a rebuilt, available group down behind every budget's
    back. The collector instead prunes the dead pods' references, which this waits for."""
    from tests.integration.test_modelinfer_e2e import modelinfer as build

    await to_cpx(client)
    body = build("whole", replicas=ROLL_REPLICAS)
    body["metadata"]["namespace"] = namespace
    mi = await client.create(MI, body, namespace=namespace)
    pods = await queued_converged(client, namespace, "whole")
    group = [p for p in pods if p["metadata"]["labels"][GROUP_NAME_LABEL] == "whole-1"]
    (pod_group,) = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in group}

    async def owned() -> Obj | None:
        wl = await client.get(WORKLOADS, pod_group, namespace=namespace)
        refs = wl["metadata"].get("ownerReferences") or []
        return wl if any(r.get("uid") == mi["metadata"]["uid"] for r in refs) else None

    workload: Obj = await eventually(
        owned, TIMEOUT, f"ModelInfer whole among the owners of Workload {pod_group}"
    )
    watch = Terminated("whole")
    async with follow(client, PODS, watch):
        for pod in group:
            await client.delete(PODS, pod["metadata"]["name"], namespace=namespace)
        originals = {(p["metadata"]["name"], p["metadata"]["uid"]) for p in group}
        pods = await queued_converged(client, namespace, "whole")
        rebuilt = [p for p in pods if p["metadata"]["labels"][GROUP_NAME_LABEL] == "whole-1"]
        assert not {(p["metadata"]["name"], p["metadata"]["uid"]) for p in rebuilt} & originals

        async def pruned() -> Obj | None:
            wl = await client.get(WORKLOADS, pod_group, namespace=namespace)
            live = await _all_mi_pods(client, namespace, "whole")
            return wl if not _dangling(wl, live) else None

        after: Obj = await eventually(pruned, TIMEOUT, f"no reference to a deleted pod left on {pod_group}")
        pods = await queued_converged(client, namespace, "whole")
    assert after["metadata"]["uid"] == workload["metadata"]["uid"], f"Workload {pod_group} was deleted"
    killed = {k: why for k, why in watch.seen.items() if k not in originals}
    assert not killed, f"rebuilt pods deleted: {killed}"
    await client.delete(MI, "whole", namespace=namespace)

"""Kueue's flavor assignment as the embedded cluster plays it: Kueue's messages, word for word, and the
invariants (admission never exceeds the quota at admission time; lowering the quota evicts nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.sim.agents import kueue_rules as rules
from aiplane.sim.agents.kueue import default_deployment, default_pod, workload_name

GPU = "amd.com/gpu"


def groups(
    *quotas: tuple[str, int], labels: dict[str, dict[str, str]] | None = None
) -> list[rules.ResourceGroup]:
    flavors = tuple(rules.Flavor(name, {GPU: q}, (labels or {}).get(name, {})) for name, q in quotas)
    return [rules.ResourceGroup((GPU,), flavors)]


def podset(name: str = "main", count: int = 1, gpus: int = 8, **selector: str) -> rules.PodSet:
    return rules.PodSet(name, count, {GPU: gpus}, selector)


def test_a_fitting_workload_gets_the_first_flavor_with_room() -> None:
    decision = rules.assign([podset(count=2)], groups(("a", 8), ("b", 32)), {("a", GPU): 4})
    assert decision.admitted
    (assigned,) = decision.assigned
    assert assigned.flavors == {GPU: "b"} and assigned.usage == {GPU: 16}
    admission = rules.admission_of("cq", decision)
    assert admission == {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {GPU: "b"}, "resourceUsage": {GPU: "16"}, "count": 2}
        ],
    }


def test_kueues_words_when_nothing_fits() -> None:
    decision = rules.assign([podset(count=3)], groups(("a", 16), ("b", 32)), {("b", GPU): 20})
    assert decision.message == (
        "couldn't assign flavors to pod set main: "
        "insufficient quota for amd.com/gpu in flavor a, previously considered podsets requests (0) + "
        "current podset request (24) > maximum capacity (16), "
        "insufficient unused quota for amd.com/gpu in flavor b, 12 more needed"
    )


def test_a_quota_lowered_under_what_is_admitted_asks_only_for_the_request() -> None:
    # Kueue's unused quota is never negative (ClusterQueueSnapshot.Available), as upstream Kueue v0.17 says
    # on the real tier: 72 admitted, quota lowered to 64, a request of 8 needs 8 more, not 16.
    decision = rules.assign([podset()], groups(("a", 64)), {("a", GPU): 72})
    assert decision.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in flavor a, 8 more needed"
    )


def test_earlier_pod_sets_count_against_later_ones_and_failures_are_joined() -> None:
    decision = rules.assign([podset("leader", 1, 8), podset("worker", 2, 8)], groups(("a", 16)), {})
    assert decision.message == (
        "couldn't assign flavors to pod set worker: insufficient quota for amd.com/gpu in flavor a, "
        "previously considered podsets requests (8) + current podset request (16) > maximum capacity (16)"
    )


def test_uncovered_resources_and_node_affinity() -> None:
    uncovered = rules.assign([rules.PodSet("main", 1, {"nvidia.com/gpu": 1})], groups(("a", 8)), {})
    assert (
        uncovered.message
        == "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
    )
    pinned = rules.assign(
        [podset(**{"pool": "x"})],
        groups(("a", 8), ("b", 8), labels={"a": {"pool": "y"}, "b": {"pool": "x"}}),
        {},
    )
    assert pinned.admitted and pinned.assigned[0].flavors == {GPU: "b"}
    none = rules.assign([podset(**{"pool": "z"})], groups(("a", 8), labels={"a": {"pool": "y"}}), {})
    assert none.message == "couldn't assign flavors to pod set main: flavor a doesn't match node affinity"


def test_amounts_print_as_kueues_resource_formatter() -> None:
    assert rules.amount_string("cpu", 1500) == "1500m"
    assert rules.amount_string("cpu", 2000) == "2"
    assert rules.amount_string("memory", 2 * 1024**3) == "2Gi"
    assert rules.amount_string(GPU, 64) == "64"


def test_the_webhooks_gate_queued_pods_and_carry_the_queue_to_templates() -> None:
    pod = {"metadata": {"namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {}}
    default_pod(pod)
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    system = {
        "metadata": {"namespace": "kube-system", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {},
    }
    default_pod(system)
    assert "schedulingGates" not in system["spec"]
    plain = {"metadata": {"namespace": "a"}, "spec": {}}
    default_pod(plain)
    assert plain == {"metadata": {"namespace": "a"}, "spec": {}}
    deployment = {
        "metadata": {"namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"template": {}},
    }
    default_deployment(deployment)
    meta = deployment["spec"]["template"]["metadata"]
    assert meta["labels"] == {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "q"}
    assert meta["annotations"] == {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}


def test_workload_names_follow_kueues_formula() -> None:
    # jobframework.GetWorkloadNameForOwnerWithGVK: <kind>-<name>-<5 hex of sha1(kind, group, name, uid)>.
    name = workload_name("web-7d9f-abcde", "0b5c2a1e-0000-4000-8000-000000000001", "Pod", "")
    assert name.startswith("pod-web-7d9f-abcde-") and len(name.rsplit("-", 1)[1]) == 5
    long = workload_name("x" * 80, "u", "Pod", "")
    assert len(long) <= 63


# --- invariants --------------------------------------------------------------------------------------

FLAVORS = ("a", "b")

podsets_st = st.lists(
    st.builds(
        lambda i, count, gpus: rules.PodSet(f"ps{i}", count, {GPU: gpus}),
        st.integers(0, 3),
        st.integers(1, 4),
        st.integers(0, 16),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda p: p.name,
)
quota_st = st.tuples(st.integers(0, 64), st.integers(0, 64))
ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), podsets_st),
        st.tuples(st.just("quota"), quota_st),
        st.tuples(st.just("finish"), st.integers(0, 20)),
    ),
    max_size=25,
)


@dataclass
class Queue:
    quota: tuple[int, int]
    pending: list[tuple[str, list[rules.PodSet]]] = field(default_factory=list)
    admitted: dict[str, rules.Decision] = field(default_factory=dict)

    def groups(self) -> list[rules.ResourceGroup]:
        return groups(*zip(FLAVORS, self.quota, strict=True))

    def usage(self) -> rules.Usage:
        held: rules.Usage = {}
        for decision in self.admitted.values():
            rules.add_usage(held, decision.assigned)
        return held


@settings(max_examples=300, deadline=None)
@given(quota_st, ops_st)
def test_admission_never_exceeds_the_quota_and_lowering_it_evicts_nothing(
    start: tuple[int, int], ops: list[tuple[str, object]]
) -> None:
    queue = Queue(start)
    for step, (op, arg) in enumerate(ops):
        if op == "submit":
            assert isinstance(arg, list)
            queue.pending.append((f"wl{step}", arg))
        elif op == "quota":
            assert isinstance(arg, tuple)
            queue.quota = arg
        elif queue.admitted:
            assert isinstance(arg, int)
            victim = sorted(queue.admitted)[arg % len(queue.admitted)]
            del queue.admitted[victim]
        before = dict(queue.admitted)
        nominal = dict(zip(FLAVORS, queue.quota, strict=True))
        held = queue.usage()
        for name, decision in rules.schedule(queue.pending, queue.groups(), held):
            if not decision.admitted:
                continue
            # At the moment of admission, what is held plus what it takes fits every flavor it uses.
            rules.add_usage(held, decision.assigned)
            for (flavor, res), amount in held.items():
                if any(a.flavors.get(res) == flavor for a in decision.assigned):
                    assert amount <= nominal[flavor], (name, flavor, amount, nominal)
            queue.admitted[name] = decision
        queue.pending = [(n, p) for n, p in queue.pending if n not in queue.admitted]
        # Nothing admitted before this step is gone but what was finished (quota changes evict nothing).
        assert set(before) <= set(queue.admitted)


def test_a_flavor_with_a_taint_the_pod_does_not_tolerate_is_skipped() -> None:
    taint = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    control = rules.Flavor("control", {GPU: 8}, {}, (taint,))
    gpus = rules.Flavor("gpus", {GPU: 8})
    plain = rules.assign([podset(gpus=0)], [rules.ResourceGroup((GPU,), (control, gpus))], {})
    assert plain.admitted and rules.admission_of("cq", plain)["podSetAssignments"][0]["flavors"] == {}
    decision = rules.assign([podset()], [rules.ResourceGroup((GPU,), (control, gpus))], {})
    assert decision.assigned[0].flavors == {GPU: "gpus"}
    only = rules.assign([podset()], [rules.ResourceGroup((GPU,), (control,))], {})
    assert only.message == (
        "couldn't assign flavors to pod set main: untolerated taint "
        "{node-role.kubernetes.io/control-plane  NoSchedule <nil>} in flavor control"
    )
    tolerant = rules.PodSet("main", 1, {GPU: 8}, {}, ({"key": taint["key"], "operator": "Exists"},))
    assert rules.assign([tolerant], [rules.ResourceGroup((GPU,), (control,))], {}).admitted

"""Deletion, garbage collection, namespaces, eviction and PDBs on ``Api`` directly (no HTTP, no event loop:
``Deletion.run_pending`` does the controllers' queued work)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiplane.sim.apiserver import cleanup, deletion, disruption, eviction, gc
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.resources import Registry, ResourceType
from aiplane.sim.apiserver.rest import Api, DeleteOptions
from aiplane.sim.apiserver.store import Store

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Env:
    """An Api with deletion installed, a ``default`` namespace and helpers."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.api = Api(Store(), Registry(), clock=self.clock)
        self.gc = gc.install(self.api)
        self.ns_rt = self.rt("v1", "Namespace")
        self.cm = self.rt("v1", "ConfigMap")
        self.pod = self.rt("v1", "Pod")
        self.pdb = self.rt("policy/v1", "PodDisruptionBudget")
        self.namespace("default")

    def rt(self, api_version: str, kind: str) -> ResourceType:
        return self.api.resource(api_version, kind)

    def namespace(self, name: str) -> dict[str, Any]:
        return self.api.create(self.ns_rt, None, {"metadata": {"name": name}}).obj

    def create(self, rt: ResourceType, body: dict[str, Any], ns: str | None = "default") -> dict[str, Any]:
        return self.api.create(rt, ns if rt.namespaced else None, body).obj

    def configmap(
        self,
        name: str,
        owners: list[dict[str, Any]] = (),  # type: ignore[assignment]
        *,
        finalizers: list[str] = (),  # type: ignore[assignment]
        block: bool = True,
        ns: str = "default",
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if owners:
            meta["ownerReferences"] = [ref(o, block=block) for o in owners]
        if finalizers:
            meta["finalizers"] = list(finalizers)
        return self.create(self.cm, {"metadata": meta, "data": {}}, ns)

    def find(self, rt: ResourceType, name: str, ns: str = "default") -> dict[str, Any] | None:
        return self.api.find(rt, ns if rt.namespaced else None, name)

    def delete(self, rt: ResourceType, name: str, ns: str | None = "default", **opts: Any) -> dict[str, Any]:
        return self.api.delete(rt, ns, name, DeleteOptions(**opts))

    def release(self, rt: ResourceType, name: str, ns: str = "default", finalizer: str | None = None) -> None:
        obj = copy.deepcopy(self.find(rt, name, ns))
        assert obj is not None
        obj["metadata"]["finalizers"] = [
            f for f in obj["metadata"].get("finalizers", []) if finalizer not in (None, f)
        ]
        self.api.update(rt, ns if rt.namespaced else None, name, obj)

    def settle(self) -> None:
        self.gc.run_pending()
        assert self.gc.idle


def ref(owner: dict[str, Any], *, block: bool = True, controller: bool = False) -> dict[str, Any]:
    out = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": block,
    }
    if controller:
        out["controller"] = True
    return out


@pytest.fixture
def env() -> Env:
    return Env()


# --- PDB arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        (3, 10, 3),
        (0, 10, 0),
        ("50%", 3, 2),  # 1.5 rounds up
        ("33%", 10, 4),  # 3.3 rounds up
        ("30%", 10, 3),  # exact
        ("100%", 7, 7),
        ("0%", 7, 0),
        ("1%", 1, 1),  # any positive fraction rounds up to one
        ("50%", 0, 0),
        ("150%", 2, 3),
    ],
)
def test_scaled_value_rounds_up_like_intstr(value: Any, total: int, expected: int) -> None:
    assert disruption.scaled_value(value, total) == expected


def test_scaled_value_can_round_down() -> None:
    assert disruption.scaled_value("50%", 3, round_up=False) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "invalid value for IntOrString: invalid type: string is not a percentage"),
        (
            "x%",
            'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax',
        ),
        (True, "invalid value for IntOrString: invalid type: neither int nor percentage"),
        (None, "invalid value for IntOrString: invalid type: neither int nor percentage"),
    ],
)
def test_scaled_value_errors(value: Any, message: str) -> None:
    with pytest.raises(disruption.PdbError) as caught:
        disruption.scaled_value(value, 10)
    assert str(caught.value) == message


def test_desired_healthy_branches() -> None:
    scale = lambda: 4  # noqa: E731
    assert disruption.desired_healthy({"minAvailable": 2}, 7, scale) == (7, 2)  # int: no controllers needed
    assert disruption.desired_healthy({"minAvailable": "50%"}, 7, scale) == (4, 2)
    assert disruption.desired_healthy({"minAvailable": "60%"}, 7, scale) == (4, 3)  # 2.4 rounds up
    assert disruption.desired_healthy({"maxUnavailable": 1}, 7, scale) == (4, 3)
    assert disruption.desired_healthy({"maxUnavailable": "30%"}, 7, scale) == (4, 2)  # 1.2 -> 2 unavailable
    assert disruption.desired_healthy({"maxUnavailable": 9}, 7, scale) == (4, 0)  # never negative
    assert disruption.desired_healthy({}, 7, scale) == (0, 0)


def test_disruptions_allowed() -> None:
    assert disruption.disruptions_allowed(3, 2, 3) == 1
    assert disruption.disruptions_allowed(2, 2, 3) == 0
    assert disruption.disruptions_allowed(1, 2, 3) == 0  # never negative
    assert disruption.disruptions_allowed(3, 0, 0) == 0  # nothing expected: nothing allowed


def pod_obj(name: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "status": status}


def test_count_healthy_skips_unready_deleting_and_recently_disrupted() -> None:
    pods = [pod_obj("a"), pod_obj("b", ready=False), pod_obj("c", deleting=True), pod_obj("d"), pod_obj("e")]
    disrupted = {"d": NOW - timedelta(seconds=30), "e": NOW - timedelta(minutes=3)}  # e's approval expired
    assert disruption.count_healthy(pods, disrupted, NOW) == 2  # a and e


def test_pdb_selector_is_label_selector_as_selector() -> None:
    labels = {"app": "web", "tier": "front"}
    assert not disruption.pdb_selector(None).matches(labels)  # nil selects nothing
    assert disruption.pdb_selector({}).matches(labels)  # empty selects everything
    assert disruption.pdb_selector({"matchLabels": {"app": "web"}}).matches(labels)
    assert not disruption.pdb_selector({"matchLabels": {"app": "db"}}).matches(labels)

    def expr(op: str, *values: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": "tier", "operator": op, "values": list(values)}]}

    assert disruption.pdb_selector(expr("In", "front", "back")).matches(labels)
    assert not disruption.pdb_selector(expr("NotIn", "front")).matches(labels)
    assert disruption.pdb_selector(expr("Exists")).matches(labels)
    assert not disruption.pdb_selector(expr("DoesNotExist")).matches(labels)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
        ),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["x"]}]},
            '"Near" is not a valid label selector operator',
        ),
        (
            {"matchLabels": {"app": "-web"}},
            'values[0][app]: Invalid value: "-web": a valid label must be an empty string or consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ],
)
def test_pdb_selector_errors_are_label_selector_as_selectors(selector: dict[str, Any], message: str) -> None:
    """The disruption controller reports ``LabelSelectorAsSelector``'s error as is: no field path."""
    with pytest.raises(disruption.PdbError) as caught:
        disruption.pdb_selector(selector)
    assert str(caught.value) == message


# --- propagation policy and responses ------------------------------------------------------------


def test_propagation_finalizers(env: Env) -> None:
    job = env.rt("batch/v1", "Job")
    opts = DeleteOptions
    assert deletion.gc_finalizers(env.cm, [], opts()) == (False, [])  # background by default
    assert deletion.gc_finalizers(job, [], opts()) == (True, ["orphan"])  # batch/v1 Job orphans by default
    assert deletion.gc_finalizers(job, [], opts(propagation_policy="Background")) == (False, [])
    assert deletion.gc_finalizers(env.cm, ["x"], opts(propagation_policy="Foreground")) == (
        True,
        ["x", "foregroundDeletion"],
    )
    # Changing the policy of an object already being deleted swaps the finalizers.
    assert deletion.gc_finalizers(env.cm, ["orphan"], opts(propagation_policy="Foreground")) == (
        True,
        ["foregroundDeletion"],
    )
    # Without options, the finalizers already there decide.
    assert deletion.gc_finalizers(job, ["foregroundDeletion"], opts()) == (False, ["foregroundDeletion"])
    # The deprecated orphanDependents wins over everything.
    assert deletion.gc_finalizers(env.cm, [], opts(orphan_dependents=True)) == (True, ["orphan"])
    assert deletion.gc_finalizers(job, ["orphan"], opts(orphan_dependents=False)) == (True, [])


def test_delete_response_codes_and_bodies(env: Env) -> None:
    plain = env.configmap("plain")
    gone = env.delete(env.cm, "plain")
    code, body = deletion.delete_response(env.cm, gone, DeleteOptions())
    assert code == 200 and body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "plain", "kind": "configmaps", "uid": plain["metadata"]["uid"]},
    }
    env.configmap("held", finalizers=["x/y"])
    lingering = env.delete(env.cm, "held")
    assert deletion.delete_response(env.cm, lingering, DeleteOptions()) == (200, lingering)
    assert deletion.delete_response(env.cm, lingering, DeleteOptions(orphan_dependents=False))[0] == 202
    env.create(env.pod, pod_spec("p"))
    code, body = deletion.delete_response(env.pod, env.delete(env.pod, "p"), DeleteOptions())
    assert code == 200 and body["kind"] == "Pod"


def test_dry_run_changes_nothing(env: Env) -> None:
    owner = env.configmap("owner", finalizers=["x/y"])
    env.configmap("child", [owner])
    out = env.delete(env.cm, "owner", dry_run=True, propagation_policy="Foreground")
    assert out["metadata"]["deletionTimestamp"] and "foregroundDeletion" in out["metadata"]["finalizers"]
    env.settle()
    stored = env.find(env.cm, "owner")
    assert stored is not None and "deletionTimestamp" not in stored["metadata"]
    assert env.find(env.cm, "child") is not None


def test_second_delete_is_idempotent_and_may_change_policy(env: Env) -> None:
    owner = env.configmap("owner", finalizers=["x/y"])
    env.configmap("child", [owner])
    first = env.delete(env.cm, "owner", propagation_policy="Orphan")
    again = env.delete(env.cm, "owner", propagation_policy="Orphan")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # no write
    swapped = env.delete(env.cm, "owner", propagation_policy="Foreground")
    assert swapped["metadata"]["finalizers"] == ["x/y", "foregroundDeletion"]
    assert swapped["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]


def test_immortal_namespaces(env: Env) -> None:
    with pytest.raises(ApiError) as caught:
        env.delete(env.ns_rt, "default", ns=None)
    assert caught.value.code == 403


# --- garbage collection --------------------------------------------------------------------------


def test_foreground_chain_and_blocking(env: Env) -> None:
    a = env.configmap("a")
    b = env.configmap("b", [a])
    env.configmap("c", [b], finalizers=["x/keep"])
    env.configmap("loose", [a], block=False, finalizers=["x/keep"])
    env.delete(env.cm, "a", propagation_policy="Foreground")
    env.settle()
    # b has dependents of its own, so it is deleted in foreground too; c holds the chain.
    assert env.find(env.cm, "b")["metadata"]["finalizers"] == ["foregroundDeletion"]  # type: ignore[index]
    assert env.find(env.cm, "c")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    assert env.find(env.cm, "a") is not None
    env.release(env.cm, "c")
    env.settle()
    assert env.find(env.cm, "a") is None and env.find(env.cm, "b") is None
    # A non-blocking dependent does not hold the owner, but is deleted all the same.
    loose = env.find(env.cm, "loose")
    assert loose is not None and loose["metadata"]["deletionTimestamp"]


def test_mutual_owners_do_not_deadlock_foreground_deletion(env: Env) -> None:
    a = env.configmap("a")
    b = env.configmap("b", [a])
    a2 = copy.deepcopy(a)
    a2["metadata"]["ownerReferences"] = [ref(b)]
    env.api.update(env.cm, "default", "a", a2)
    env.settle()
    env.delete(env.cm, "a", propagation_policy="Foreground")
    env.settle()
    assert env.find(env.cm, "a") is None and env.find(env.cm, "b") is None


def test_dangling_references_are_dropped_when_another_owner_remains(env: Env) -> None:
    keep = env.configmap("keep")
    going = env.configmap("going")
    env.configmap("child", [keep, going])
    env.delete(env.cm, "going")
    env.settle()
    child = env.find(env.cm, "child")
    assert child is not None and [r["name"] for r in child["metadata"]["ownerReferences"]] == ["keep"]


def test_owner_is_looked_up_in_the_dependents_namespace(env: Env) -> None:
    env.namespace("other")
    owner = env.configmap("owner", ns="other")
    env.configmap("same-ns", [owner], ns="other")
    env.configmap("cross-ns", [owner])  # an owner reference never crosses namespaces
    env.settle()
    assert env.find(env.cm, "cross-ns") is None
    assert env.find(env.cm, "same-ns", "other") is not None


def test_cluster_scoped_owners_and_dependents(env: Env) -> None:
    cluster_role = env.rt("rbac.authorization.k8s.io/v1", "ClusterRole")
    owner_ns = env.namespace("owner-ns")
    env.configmap("child", [owner_ns])  # namespaced dependent, cluster-scoped owner: fine
    cm_owner = env.configmap("cm-owner")
    env.create(cluster_role, {"metadata": {"name": "bad", "ownerReferences": [ref(cm_owner)]}}, ns=None)
    env.delete(env.cm, "cm-owner")
    env.settle()
    # A cluster-scoped object naming a namespaced owner is never collected (kube's GC gives up on it).
    assert env.find(cluster_role, "bad", ns="") is not None
    assert env.find(env.cm, "child") is not None
    env.delete(env.ns_rt, "owner-ns", ns=None)
    env.settle()
    assert env.find(env.ns_rt, "owner-ns") is None
    assert env.find(env.cm, "child") is None


def test_owner_of_an_unserved_kind_waits_for_its_crd(env: Env) -> None:
    body = {
        "metadata": {
            "name": "child",
            "ownerReferences": [
                {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u-1"}
            ],
        }
    }
    env.create(env.cm, body)
    env.settle()
    assert env.find(env.cm, "child") is not None  # the kind cannot be resolved: kept, as kube's GC does
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    env.create(env.rt("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd, ns=None)
    env.settle()
    assert env.find(env.cm, "child") is None


def test_crd_deletion_removes_instances_first(env: Env) -> None:
    crd_rt = env.rt("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    crd = {
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    env.create(crd_rt, crd, ns=None)
    gadget = env.rt("example.com/v1", "Gadget")
    env.create(gadget, {"metadata": {"name": "g1"}})
    env.create(gadget, {"metadata": {"name": "g2", "finalizers": ["x/keep"]}})
    marked = env.delete(crd_rt, "gadgets.example.com", ns=None)
    assert marked["metadata"]["finalizers"] == [deletion.CRD_FINALIZER]
    env.settle()
    terminating = env.find(crd_rt, "gadgets.example.com")
    assert terminating is not None
    cond = next(c for c in terminating["status"]["conditions"] if c["type"] == "Terminating")
    assert (cond["status"], cond["reason"]) == ("True", "InstanceDeletionInProgress")
    assert env.find(gadget, "g1") is None and env.find(gadget, "g2") is not None
    env.release(gadget, "g2")
    env.settle()
    assert env.find(crd_rt, "gadgets.example.com") is None
    assert env.api.registry.for_kind("example.com/v1", "Gadget") is None


# --- pods ----------------------------------------------------------------------------------------


def pod_spec(name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {"containers": [{"name": "c", "image": "img"}], "nodeName": "node-1"},
    }


class Kubelet:
    def __init__(self) -> None:
        self.claimed: list[str] = []

    def claims(self, pod: dict[str, Any]) -> bool:
        self.claimed.append(pod["metadata"]["name"])
        return True


def test_pods_go_at_once_without_a_kubelet(env: Env) -> None:
    env.create(env.pod, pod_spec("p"))
    last = env.delete(env.pod, "p")
    assert env.find(env.pod, "p") is None
    assert last["metadata"]["deletionGracePeriodSeconds"] == 0


def test_a_kubelet_can_claim_graceful_termination(env: Env) -> None:
    kubelet = Kubelet()
    env.gc.pod_terminator = kubelet
    env.create(env.pod, pod_spec("p"))
    marked = env.delete(env.pod, "p")
    assert kubelet.claimed == ["p"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["deletionTimestamp"] == "2026-03-01T12:00:30Z"
    assert deletion.lingers(marked)
    # Deleting again without a shorter grace period changes nothing; a status update does not remove it.
    assert env.delete(env.pod, "p")["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    pod = copy.deepcopy(env.find(env.pod, "p"))
    pod["status"]["phase"] = "Running"  # type: ignore[index]
    env.api.update(env.pod, "default", "p", pod, subresource="status")  # type: ignore[arg-type]
    assert env.find(env.pod, "p") is not None
    shorter = env.delete(env.pod, "p", grace_period_seconds=10)
    assert shorter["metadata"]["deletionTimestamp"] == "2026-03-01T12:00:10Z"
    env.delete(env.pod, "p", grace_period_seconds=0)  # what the kubelet does once containers stopped
    assert env.find(env.pod, "p") is None


# --- namespaces ----------------------------------------------------------------------------------


def test_namespace_pods_go_first_and_finalizers_hold_the_rest(env: Env) -> None:
    env.namespace("doomed")
    env.create(env.pod, pod_spec("p", finalizers=["x/pod"]), "doomed")
    env.configmap("cm", ns="doomed")
    marked = env.delete(env.ns_rt, "doomed", ns=None)
    assert marked["status"]["phase"] == "Terminating" and deletion.lingers(marked)
    env.settle()
    # OrderedNamespaceDeletion: while a pod remains, nothing else is deleted.
    cm = env.find(env.cm, "cm", "doomed")
    assert cm is not None and "deletionTimestamp" not in cm["metadata"]
    ns = env.find(env.ns_rt, "doomed")
    conds = {c["type"]: c for c in ns["status"]["conditions"]}  # type: ignore[index]
    assert (
        conds["NamespaceContentRemaining"]["message"]
        == "Some resources are remaining: pods. has 1 resource instances"
    )
    assert conds["NamespaceFinalizersRemaining"]["message"] == (
        "Some content in the namespace has finalizers remaining: x/pod in 1 resource instances"
    )
    env.release(env.pod, "p", "doomed")
    env.settle()
    assert env.find(env.cm, "cm", "doomed") is None
    assert env.find(env.ns_rt, "doomed") is None


def test_namespace_spec_finalizers_change_only_through_finalize(env: Env) -> None:
    ns = copy.deepcopy(env.namespace("edit"))
    ns["spec"]["finalizers"] = []
    updated = env.api.update(env.ns_rt, None, "edit", ns).obj
    assert updated["spec"]["finalizers"] == ["kubernetes"]
    finalized = env.api.update(env.ns_rt, None, "edit", ns, subresource="finalize").obj
    assert finalized["spec"]["finalizers"] == []


def test_namespace_conditions_transitions() -> None:
    first = cleanup.namespace_conditions([], {"pods.": 2}, {"x/y": 1}, "t1")
    assert first is not None and [c["status"] for c in first] == ["False", "False", "False", "True", "True"]
    assert cleanup.namespace_conditions(first, {"pods.": 2}, {"x/y": 1}, "t2") is None  # unchanged
    done = cleanup.namespace_conditions(first, {}, {}, "t3")
    assert done is not None
    remaining = next(c for c in done if c["type"] == "NamespaceContentRemaining")
    assert remaining == {
        "type": "NamespaceContentRemaining",
        "status": "False",
        "lastTransitionTime": "t3",
        "reason": "ContentRemoved",
        "message": "All content successfully removed",
    }
    assert (
        next(c for c in done if c["type"] == "NamespaceDeletionDiscoveryFailure")["lastTransitionTime"]
        == "t1"
    )


# --- the disruption controller and eviction ------------------------------------------------------


def ready(env: Env, name: str, ns: str = "default", *, is_ready: bool = True) -> None:
    pod = copy.deepcopy(env.find(env.pod, name, ns))
    assert pod is not None
    pod["status"]["phase"] = "Running"
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if is_ready else "False"}]
    env.api.update(env.pod, ns, name, pod, subresource="status")


def pdb_body(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": labels}, **spec}}


def status_of(env: Env, name: str) -> dict[str, Any]:
    pdb = env.find(env.pdb, name)
    assert pdb is not None
    return dict(pdb.get("status") or {})


def test_pdb_status_with_controllers_and_percentages(env: Env) -> None:
    rs_rt, deploy_rt = env.rt("apps/v1", "ReplicaSet"), env.rt("apps/v1", "Deployment")
    selector = {"matchLabels": {"app": "web"}}
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deploy = env.create(
        deploy_rt,
        {"metadata": {"name": "web"}, "spec": {"replicas": 4, "selector": selector, "template": template}},
    )
    rs = env.create(
        rs_rt,
        {
            "metadata": {"name": "web-1", "ownerReferences": [ref(deploy, controller=True)]},
            "spec": {"replicas": 3, "selector": selector, "template": template},
        },
    )
    for i in range(3):
        env.create(env.pod, pod_spec(f"web-{i}", {"app": "web"}, ownerReferences=[ref(rs, controller=True)]))
        ready(env, f"web-{i}")
    env.create(env.pdb, pdb_body("web", {"app": "web"}, maxUnavailable="50%"))
    env.settle()
    st_ = status_of(env, "web")
    # The Deployment's scale (4) counts, not the ReplicaSet's: 4 - ceil(2.0) = 2 desired.
    assert (st_["expectedPods"], st_["desiredHealthy"], st_["currentHealthy"], st_["disruptionsAllowed"]) == (
        4,
        2,
        3,
        1,
    )
    assert st_["observedGeneration"] == 1
    cond = st_["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
        "",
    )
    pdb = copy.deepcopy(env.find(env.pdb, "web"))
    pdb["spec"] = {"selector": selector, "minAvailable": "60%"}  # type: ignore[index]
    env.api.update(env.pdb, "default", "web", pdb)  # type: ignore[arg-type]
    env.settle()
    st_ = status_of(env, "web")
    assert (st_["observedGeneration"], st_["desiredHealthy"], st_["disruptionsAllowed"]) == (
        2,
        3,
        0,
    )  # ceil(2.4)


def test_pdb_fails_safe_when_controllers_cannot_be_scaled(env: Env) -> None:
    job = env.create(
        env.rt("batch/v1", "Job"),
        {
            "metadata": {"name": "j"},
            "spec": {
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}
            },
        },
    )
    env.create(env.pod, pod_spec("j-0", {"app": "job"}, ownerReferences=[ref(job, controller=True)]))
    ready(env, "j-0")
    env.create(env.pdb, pdb_body("job", {"app": "job"}, maxUnavailable=1))
    env.settle()
    st_ = status_of(env, "job")
    assert st_["disruptionsAllowed"] == 0
    assert st_["conditions"][0]["reason"] == "SyncFailed"
    assert st_["conditions"][0]["message"] == "jobs.batch does not implement the scale subresource"
    # An integer minAvailable needs no controller at all.
    pdb = copy.deepcopy(env.find(env.pdb, "job"))
    pdb["spec"] = {"selector": {"matchLabels": {"app": "job"}}, "minAvailable": 0}  # type: ignore[index]
    env.api.update(env.pdb, "default", "job", pdb)  # type: ignore[arg-type]
    env.settle()
    assert status_of(env, "job")["disruptionsAllowed"] == 1


def test_eviction_decrements_the_budget_and_marks_the_pod(env: Env) -> None:
    events: list[dict[str, Any]] = []
    env.api.store.subscribe(lambda e: events.append(e.obj) if e.key == "/pods" else None)
    for i in range(3):
        env.create(env.pod, pod_spec(f"p{i}", {"app": "a"}))
        ready(env, f"p{i}")
    env.create(env.pdb, pdb_body("a", {"app": "a"}, minAvailable=2))
    env.settle()
    assert status_of(env, "a")["disruptionsAllowed"] == 1
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p0"}}
    assert eviction.evict(env.api, env.pod, "default", "p0", body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    # The eviction API took the disruption before the controller could recompute it.
    recorded = status_of(env, "a")
    assert recorded["disruptionsAllowed"] == 0 and "p0" in recorded["disruptedPods"]
    marked = [e for e in events if e["metadata"]["name"] == "p0"][-1]
    target = next(c for c in marked["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["reason"], target["message"]) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    env.settle()
    assert "disruptedPods" not in status_of(env, "a")  # the pod is gone: the controller forgets it
    with pytest.raises(ApiError) as caught:
        eviction.evict(env.api, env.pod, "default", "p1", {"metadata": {"name": "p1"}})
    err = caught.value
    assert (err.code, err.reason, err.message) == (429, "TooManyRequests", eviction.CANNOT_EVICT)
    assert err.details == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget a needs 2 healthy pods and has 2 currently",
            }
        ]
    }
    assert "Retry-After" not in err.headers


def test_eviction_edge_cases(env: Env) -> None:
    env.create(env.pod, pod_spec("p", {"app": "b"}))
    ready(env, "p")
    with pytest.raises(ApiError) as caught:
        eviction.evict(env.api, env.pod, "default", "p", {"metadata": {"name": "other"}})
    assert caught.value.code == 400
    env.create(env.pdb, pdb_body("b", {"app": "b"}, minAvailable=1))
    with pytest.raises(ApiError) as caught:  # not yet observed by the disruption controller
        eviction.evict(env.api, env.pod, "default", "p", {"metadata": {"name": "p"}})
    assert caught.value.code == 429 and caught.value.headers == {"Retry-After": "10"}
    details = caught.value.details or {}
    assert (
        details["causes"][0]["message"] == "The disruption budget b is still being processed by the server."
    )
    env.settle()
    # Unready pod with AlwaysAllow: evicted without touching the budget.
    ready(env, "p", is_ready=False)
    pdb = copy.deepcopy(env.find(env.pdb, "b"))
    pdb["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"  # type: ignore[index]
    env.api.update(env.pdb, "default", "b", pdb)  # type: ignore[arg-type]
    env.settle()
    dry = {"metadata": {"name": "p"}, "deleteOptions": {"dryRun": ["All"]}}
    eviction.evict(env.api, env.pod, "default", "p", dry)
    assert env.find(env.pod, "p") is not None
    eviction.evict(env.api, env.pod, "default", "p", {"metadata": {"name": "p"}})
    assert env.find(env.pod, "p") is None


# --- an invariant over random ownership forests ----------------------------------------------------

KEEP = "example.com/keep"


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[list[tuple[list[int], bool, bool]], list[tuple[str, int, str | None, int]]]:
    size = draw(st.integers(1, 8))
    nodes = []
    for i in range(size):
        owners = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        nodes.append((owners, draw(st.booleans()), draw(st.booleans())))  # owners, blocking, held
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["delete", "delete", "release"]),
                st.integers(0, size - 1),
                st.sampled_from([None, "Background", "Foreground", "Orphan"]),
                st.integers(0, 4),  # how much queued work runs before the next operation
            ),
            min_size=1,
            max_size=8,
        )
    )
    return nodes, ops


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_deletion_invariants(
    scenario: tuple[list[tuple[list[int], bool, bool]], list[tuple[str, int, str | None, int]]],
) -> None:
    nodes, ops = scenario
    env = Env()
    violations: list[str] = []
    client_delete = [False]  # a client's later Background/Orphan DELETE may legitimately end a foreground one

    def watch_foreground(event: Any) -> None:
        # The controllers let a foreground owner go only once no dependent blocks it.
        if client_delete[0]:
            return
        if event.type == "DELETED" and "foregroundDeletion" in (
            event.old["metadata"].get("finalizers") or []
        ):
            uid = event.old["metadata"]["uid"]
            for dep in env.api.items(env.cm, "default"):
                if any(
                    r["uid"] == uid and r.get("blockOwnerDeletion")
                    for r in dep["metadata"].get("ownerReferences") or []
                ):
                    violations.append(
                        f"{event.old['metadata']['name']} went before {dep['metadata']['name']}"
                    )

    env.api.store.subscribe(watch_foreground)
    objs: list[dict[str, Any]] = []
    for i, (owners, blocking, held) in enumerate(nodes):
        objs.append(
            env.configmap(
                f"n{i}", [objs[o] for o in owners], finalizers=[KEEP] if held else [], block=blocking
            )
        )
    env.settle()
    holding = {i for i, (_, _, h) in enumerate(nodes) if h}
    deleted_directly: set[int] = set()

    def present(i: int) -> dict[str, Any] | None:
        return env.find(env.cm, f"n{i}")

    def check_finalizers_honoured() -> None:
        for i in holding:
            assert present(i) is not None, f"n{i} vanished while holding a finalizer"

    for op, i, prop, steps in ops:
        if op == "delete":
            deleted_directly.add(i)
            client_delete[0] = True
            try:
                env.delete(env.cm, f"n{i}", propagation_policy=prop)
            except ApiError as err:
                assert err.code == 404
            finally:
                client_delete[0] = False
        elif i in holding and present(i) is not None:
            env.release(env.cm, f"n{i}", finalizer=KEEP)
            holding.discard(i)
        env.gc.run_pending(limit=steps)
        check_finalizers_honoured()
    env.settle()
    check_finalizers_honoured()
    assert not violations

    alive = {o["metadata"]["uid"]: o for o in env.api.items(env.cm, "default")}
    for obj in alive.values():
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        assert "orphan" not in finalizers, f"{meta['name']} kept the orphan finalizer"
        if not meta.get("deletionTimestamp"):
            # Nothing that is not being deleted keeps a reference to a gone owner.
            for r in meta.get("ownerReferences") or []:
                assert r["uid"] in alive, f"{meta['name']} references gone {r['name']}"
        if "foregroundDeletion" in finalizers:
            blockers = [
                d
                for d in alive.values()
                if any(
                    r["uid"] == meta["uid"] and r.get("blockOwnerDeletion")
                    for r in d["metadata"].get("ownerReferences") or []
                )
            ]
            assert blockers, f"{meta['name']} waits for dependents that are gone"
    # No spurious deletion: what nobody deleted, and whose owners nobody deleted, is still there.
    for i, (owners, _, _) in enumerate(nodes):
        if (
            i not in deleted_directly
            and not (set(owners) & deleted_directly)
            and not _has_deleted_ancestor(nodes, i, deleted_directly)
        ):
            assert present(i) is not None, f"n{i} was collected although no ancestor was deleted"


def _has_deleted_ancestor(nodes: list[tuple[list[int], bool, bool]], i: int, deleted: set[int]) -> bool:
    stack = list(nodes[i][0])
    while stack:
        j = stack.pop()
        if j in deleted:
            return True
        stack.extend(nodes[j][0])
    return False


def test_a_pod_event_syncs_only_the_pdbs_that_select_it(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """``getPdbForPod``: a Pod event queues the PDBs whose selector matches the Pod (before or after
    the event), and a sync reads only the namespace's Pods. The embedded controller synced every PDB
    of the namespace, each over every object of the namespace, on every Pod event (5 times the CPU for 3
    times the ModelInfers in the ModelInfer benchmark). (A PDB's own status write queues it once more.)"""
    for i in range(20):
        env.create(env.pdb, pdb_body(f"pdb-{i}", {"app": f"a{i}"}, minAvailable=0))
        env.create(env.pod, pod_spec(f"p-{i}", {"app": f"a{i}"}))
    for i in range(50):
        env.configmap(f"cm-{i}")
    env.settle()
    synced: list[str] = []
    scanned = 0
    real = env.gc._pdb_status

    def counting(pdb: dict[str, Any], pods: list[dict[str, Any]], now: Any) -> Any:
        nonlocal scanned
        synced.append(pdb["metadata"]["name"])
        scanned += len(pods)
        return real(pdb, pods, now)

    monkeypatch.setattr(env.gc, "_pdb_status", counting)
    ready(env, "p-3")
    env.settle()
    assert synced == ["pdb-3", "pdb-3"]
    assert scanned == 2 * 20  # the namespace's Pods, not its 20 PDBs and 50 ConfigMaps too
    assert status_of(env, "pdb-3")["currentHealthy"] == 1
    pod = copy.deepcopy(env.find(env.pod, "p-3"))
    assert pod is not None
    pod["metadata"]["labels"] = {"app": "a4"}  # leaves pdb-3, joins pdb-4
    env.api.update(env.pod, "default", "p-3", pod)
    synced.clear()
    env.settle()
    assert set(synced) == {"pdb-3", "pdb-4"}
    assert status_of(env, "pdb-3")["currentHealthy"] == 0
    assert status_of(env, "pdb-4")["currentHealthy"] == 1

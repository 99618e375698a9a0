"""Deletion through real clients: propagation policies, finalizers, garbage collection, namespace deletion,
eviction and PodDisruptionBudgets — what kube-apiserver and kube-controller-manager do together.

Objects are made with the official client (or ``kubectl apply -f -``); waiting is polling with a deadline.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conformance.conftest import Cluster, eventually

CANNOT_EVICT = "Cannot evict pod as it would violate the pod's disruption budget."


def core(k8s: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(k8s)


def policy(k8s: Any) -> Any:
    from kubernetes import client

    return client.PolicyV1Api(k8s)


def raw(k8s: Any, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """A request through the official client's transport and auth; (status, decoded body), errors included."""
    _, url, headers, payload, post = k8s.param_serialize(
        method,
        path,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = k8s.call_api(method, url, header_params=headers, body=payload, post_params=post)
    resp.read()
    return resp.status, json.loads(resp.data)


def cm_body(
    name: str, owners: list[Any] | None = None, finalizers: list[str] | None = None, block: bool = True
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": o.metadata.name,
                "uid": o.metadata.uid,
                "blockOwnerDeletion": block,
            }
            for o in owners
        ]
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def make_cm(k8s: Any, ns: str, name: str, **kw: Any) -> Any:
    return core(k8s).create_namespaced_config_map(ns, cm_body(name, **kw))


def find_cm(k8s: Any, ns: str, name: str) -> Any:
    from kubernetes.client.exceptions import ApiException

    try:
        return core(k8s).read_namespaced_config_map(name, ns)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def gone(k8s: Any, ns: str, *names: str) -> Callable[[], bool]:
    return lambda: all(find_cm(k8s, ns, n) is None for n in names)


def drop_finalizers(cluster: Cluster, k8s: Any, ns: str, name: str) -> None:
    """``kubectl patch`` the finalizers away (the official client's replace while PATCH is not served)."""
    proc = cluster.kubectl(
        "patch",
        "configmap",
        name,
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":null}}',
        check=False,
    )
    if proc.returncode == 0:
        return
    assert "UnsupportedMediaType" in proc.stderr or "is not supported" in proc.stderr, proc.stderr
    current = core(k8s).read_namespaced_config_map(name, ns)
    current.metadata.finalizers = []
    core(k8s).replace_namespaced_config_map(name, ns, current)


# --- propagation policies ------------------------------------------------------------------------


def test_kubectl_delete_background_collects_dependents(cluster: Cluster, k8s: Any, namespace: str) -> None:
    owner = make_cm(k8s, namespace, "owner")
    child = make_cm(k8s, namespace, "child", owners=[owner])
    make_cm(k8s, namespace, "grandchild", owners=[child], block=False)
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=background")
    assert find_cm(k8s, namespace, "owner") is None  # background: the owner goes at once
    eventually(gone(k8s, namespace, "child", "grandchild"), what="dependents to be collected")


def test_kubectl_delete_foreground_waits_for_blocking_dependents(
    cluster: Cluster, k8s: Any, namespace: str
) -> None:
    owner = make_cm(k8s, namespace, "owner")
    make_cm(k8s, namespace, "held", owners=[owner], finalizers=["example.com/hold"])
    make_cm(k8s, namespace, "free", owners=[owner])
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=foreground", "--wait=false")

    lingering = find_cm(k8s, namespace, "owner")
    assert lingering is not None and lingering.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in lingering.metadata.finalizers
    eventually(gone(k8s, namespace, "free"), what="the free dependent to be deleted")
    held: Any = eventually(
        lambda: (h := find_cm(k8s, namespace, "held")) is not None and h.metadata.deletion_timestamp and h,
        what="the held dependent to be marked for deletion",
    )
    assert held.metadata.finalizers == ["example.com/hold"]
    assert find_cm(k8s, namespace, "owner") is not None  # blocked by "held"

    drop_finalizers(cluster, k8s, namespace, "held")
    eventually(gone(k8s, namespace, "held", "owner"), what="dependent then owner to go")


def test_kubectl_delete_orphan_keeps_dependents_without_the_owner_reference(
    cluster: Cluster, k8s: Any, namespace: str
) -> None:
    owner = make_cm(k8s, namespace, "owner")
    other = make_cm(k8s, namespace, "other")
    make_cm(k8s, namespace, "kept", owners=[owner, other])
    make_cm(k8s, namespace, "kept-too", owners=[owner])
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=orphan", "--wait=false")
    eventually(gone(k8s, namespace, "owner"), what="the owner to go once its dependents are orphaned")
    kept = find_cm(k8s, namespace, "kept")
    assert [r.name for r in kept.metadata.owner_references] == ["other"]
    assert find_cm(k8s, namespace, "kept-too").metadata.owner_references is None


def test_dependent_of_a_missing_owner_is_collected(cluster: Cluster, k8s: Any, namespace: str) -> None:
    ghost = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "orphaned",
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": str(uuid.uuid4())}
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(ghost))
    eventually(gone(k8s, namespace, "orphaned"), what="the dependent of a missing owner to be collected")


def test_owner_reference_with_a_wrong_uid_is_dangling(k8s: Any, namespace: str) -> None:
    make_cm(k8s, namespace, "owner")
    body = cm_body("child")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": str(uuid.uuid4())}
    ]
    core(k8s).create_namespaced_config_map(namespace, body)
    eventually(gone(k8s, namespace, "child"), what="a dependent whose owner uid does not match")
    assert find_cm(k8s, namespace, "owner") is not None


def test_namespaced_dependent_of_a_cluster_scoped_owner(k8s: Any, namespace: str) -> None:
    owner = core(k8s).create_namespace({"metadata": {"name": f"owner-{uuid.uuid4().hex[:8]}"}})
    try:
        body = cm_body("child")
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Namespace", "name": owner.metadata.name, "uid": owner.metadata.uid}
        ]
        core(k8s).create_namespaced_config_map(namespace, body)
        assert find_cm(k8s, namespace, "child") is not None  # its owner exists: a solid reference
    finally:
        core(k8s).delete_namespace(owner.metadata.name)
    eventually(
        gone(k8s, namespace, "child"), timeout=30, what="the dependent of a deleted cluster-scoped owner"
    )


# --- finalizers and DELETE responses -------------------------------------------------------------


def test_finalizer_keeps_object_until_removed(cluster: Cluster, k8s: Any, namespace: str) -> None:
    make_cm(k8s, namespace, "kept", finalizers=["example.com/keep"])
    path = f"/api/v1/namespaces/{namespace}/configmaps/kept"
    status, body = raw(k8s, "DELETE", path)
    assert status == 200
    assert body["kind"] == "ConfigMap" and body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["finalizers"] == ["example.com/keep"]
    # Deleting again is idempotent; the deprecated orphanDependents=false asks for 202 while it lingers.
    status, again = raw(k8s, "DELETE", path, {"orphanDependents": False})
    assert status == 202 and again["metadata"]["deletionTimestamp"] == body["metadata"]["deletionTimestamp"]
    # Finalizers may be removed but not added while the object is being deleted.
    from kubernetes.client.exceptions import ApiException

    current = core(k8s).read_namespaced_config_map("kept", namespace)
    current.metadata.finalizers = ["example.com/keep", "example.com/late"]
    with pytest.raises(ApiException) as refused:
        core(k8s).replace_namespaced_config_map("kept", namespace, current)
    assert refused.value.status == 422
    assert find_cm(k8s, namespace, "kept") is not None
    drop_finalizers(cluster, k8s, namespace, "kept")
    eventually(gone(k8s, namespace, "kept"), what="the object to go with its last finalizer")


def test_delete_answers_status_or_object_as_kube(k8s: Any, namespace: str) -> None:
    make_cm(k8s, namespace, "plain")
    status, body = raw(k8s, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/plain")
    assert status == 200
    assert body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "plain" and body["details"]["kind"] == "configmaps"
    core(k8s).create_namespaced_pod(namespace, pod_body("solo", {"app": "solo"}))
    status, body = raw(k8s, "DELETE", f"/api/v1/namespaces/{namespace}/pods/solo")
    assert status == 200 and body["kind"] == "Pod"  # pods answer with the deleted object


def test_dry_run_delete_deletes_nothing(k8s: Any, namespace: str) -> None:
    owner = make_cm(k8s, namespace, "owner")
    make_cm(k8s, namespace, "child", owners=[owner])
    status, body = raw(k8s, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/owner?dryRun=All")
    assert status == 200 and body["kind"] == "Status"
    # A barrier: once a later dangling dependent has been collected, the collector has seen the dry run.
    barrier = cm_body("barrier")
    barrier["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": str(uuid.uuid4())}
    ]
    core(k8s).create_namespaced_config_map(namespace, barrier)
    eventually(gone(k8s, namespace, "barrier"), what="the barrier to be collected")
    assert find_cm(k8s, namespace, "owner") is not None and find_cm(k8s, namespace, "child") is not None


# --- namespaces ----------------------------------------------------------------------------------


def test_namespace_deletion_empties_it_then_goes(cluster: Cluster, k8s: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    name = f"doomed-{uuid.uuid4().hex[:8]}"
    core(k8s).create_namespace({"metadata": {"name": name}})
    make_cm(k8s, name, "plain")
    make_cm(k8s, name, "held", finalizers=["example.com/hold"])
    core(k8s).create_namespaced_pod(name, pod_body("p", {"app": "p"}))
    cluster.kubectl("delete", "namespace", name, "--wait=false")

    ns = core(k8s).read_namespace(name)
    assert ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as refused:
        make_cm(k8s, name, "late")
    assert refused.value.status == 403

    def stuck_on_finalizer() -> Any:
        ns = core(k8s).read_namespace(name)
        conds = {c.type: c for c in ns.status.conditions or []}
        fin = conds.get("NamespaceFinalizersRemaining")
        return fin is not None and fin.status == "True" and conds

    conds = eventually(stuck_on_finalizer, what="the namespace to report the finalizer holding it")
    assert conds["NamespaceFinalizersRemaining"].message == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    assert conds["NamespaceContentRemaining"].message == (
        "Some resources are remaining: configmaps. has 1 resource instances"
    )
    assert conds["NamespaceDeletionDiscoveryFailure"].status == "False"
    assert find_cm(k8s, name, "plain") is None
    assert core(k8s).list_namespaced_pod(name).items == []
    held = find_cm(k8s, name, "held")
    assert held is not None and held.metadata.deletion_timestamp is not None

    drop_finalizers(cluster, k8s, name, "held")

    def namespace_gone() -> bool:
        try:
            core(k8s).read_namespace(name)
        except ApiException as err:
            return bool(err.status == 404)
        return False

    eventually(namespace_gone, what="the namespace to go once empty")


def test_finalize_subresource_releases_a_stuck_namespace(cluster: Cluster, k8s: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    name = f"stuck-{uuid.uuid4().hex[:8]}"
    core(k8s).create_namespace({"metadata": {"name": name}})
    make_cm(k8s, name, "held", finalizers=["example.com/hold"])
    core(k8s).delete_namespace(name)
    ns = eventually(
        lambda: (n := core(k8s).read_namespace(name)).status.conditions and n,
        what="the namespace controller to report",
    )
    assert ns.spec.finalizers == ["kubernetes"]
    ns.spec.finalizers = []
    core(k8s).replace_namespace_finalize(name, ns)  # what "force-deleting" a namespace does

    def namespace_gone() -> bool:
        try:
            core(k8s).read_namespace(name)
        except ApiException as err:
            return bool(err.status == 404)
        return False

    eventually(namespace_gone, what="the finalized namespace to go")
    # The content stays behind. NamespaceLifecycle refuses a create in a namespace that is gone, but
    # since 1.37 lets updates through (1.36 answered them 404 too), so the finalizer can be dropped.
    held = core(k8s).read_namespaced_config_map("held", name)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as refused:
        make_cm(k8s, name, "new")
    assert refused.value.status == 404
    assert json.loads(refused.value.body)["message"] == f'namespaces "{name}" not found'
    drop_finalizers(cluster, k8s, name, "held")
    eventually(gone(k8s, name, "held"), what="the leftover ConfigMap to go once its finalizer is dropped")


def test_immortal_namespace_cannot_be_deleted(k8s: Any) -> None:
    status, body = raw(k8s, "DELETE", "/api/v1/namespaces/default?dryRun=All")
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


# --- eviction and disruption budgets -------------------------------------------------------------


#: A scheduler nobody runs: kube-scheduler leaves the pods unbound, so no kubelet (kwok's fake nodes on a
#: real control plane) writes their status, and the tests set it as a kubelet would report it.
UNSCHEDULED = "conformance-unscheduled"


def pod_body(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": UNSCHEDULED,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def report_status(k8s: Any, ns: str, name: str, *, ready: bool) -> None:
    """Running, Ready or not, through the status subresource: a merge patch, so no read-then-replace
    races another writer of the pod (a 409 on a real control plane)."""
    status = "True" if ready else "False"
    body = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }
    }
    core(k8s).patch_namespaced_pod_status(name, ns, body, _content_type="application/merge-patch+json")


def running_pods(k8s: Any, ns: str, count: int, labels: dict[str, str], prefix: str = "web") -> list[str]:
    """Pods made Running and Ready, as a kubelet would report them."""
    names = []
    for i in range(count):
        name = f"{prefix}-{i}"
        core(k8s).create_namespaced_pod(ns, pod_body(name, labels))
        report_status(k8s, ns, name, ready=True)
        names.append(name)
    return names


def make_pdb(k8s: Any, ns: str, name: str, labels: dict[str, str], **spec: Any) -> Any:
    return policy(k8s).create_namespaced_pod_disruption_budget(
        ns,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, **spec},
        },
    )


def settled_pdb(k8s: Any, ns: str, name: str, **expected: int) -> Any:
    """The PDB once the disruption controller has observed its generation and shows ``expected``."""

    def check() -> Any:
        pdb = policy(k8s).read_namespaced_pod_disruption_budget(name, ns)
        st = pdb.status
        if st is None or st.observed_generation != pdb.metadata.generation:
            return None
        got = {
            "current_healthy": st.current_healthy,
            "desired_healthy": st.desired_healthy,
            "expected_pods": st.expected_pods,
            "disruptions_allowed": st.disruptions_allowed,
        }
        return pdb if all(got[k] == v for k, v in expected.items()) else None

    return eventually(check, what=f"PDB {name} status {expected}")


def pod_leaving(k8s: Any, ns: str, name: str) -> bool:
    """Gone, or terminating (a kubelet would be stopping it)."""
    from kubernetes.client.exceptions import ApiException

    try:
        pod = core(k8s).read_namespaced_pod(name, ns)
    except ApiException as err:
        return bool(err.status == 404)
    return pod.metadata.deletion_timestamp is not None


def evict(k8s: Any, ns: str, pod: str, **delete_options: Any) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
    }
    if delete_options:
        body["deleteOptions"] = delete_options
    return raw(k8s, "POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", body)


def test_eviction_respects_the_disruption_budget(cluster: Cluster, k8s: Any, namespace: str) -> None:
    labels = {"app": "web"}
    pods = running_pods(k8s, namespace, 2, labels)
    make_pdb(k8s, namespace, "web", labels, minAvailable=2)
    pdb = settled_pdb(
        k8s, namespace, "web", current_healthy=2, desired_healthy=2, expected_pods=2, disruptions_allowed=0
    )
    cond = next(c for c in pdb.status.conditions if c.type == "DisruptionAllowed")
    assert (cond.status, cond.reason) == ("False", "InsufficientPods")
    allowed = cluster.kubectl(
        "get", "pdb", "web", "-n", namespace, "-o", "jsonpath={.status.disruptionsAllowed}"
    ).stdout
    assert allowed == "0"

    status, body = evict(k8s, namespace, pods[0])
    assert status == 429, body
    assert body["reason"] == "TooManyRequests" and body["message"] == CANNOT_EVICT
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
        }
    ]
    assert core(k8s).read_namespaced_pod(pods[0], namespace).metadata.deletion_timestamp is None

    # Relax the budget: one disruption is allowed, the eviction goes through, and no second one.
    # A patch: the disruption controller writes the budget's status meanwhile (read-then-replace may 409).
    policy(k8s).patch_namespaced_pod_disruption_budget(
        "web", namespace, {"spec": {"minAvailable": 1}}, _content_type="application/merge-patch+json"
    )
    settled_pdb(k8s, namespace, "web", desired_healthy=1, disruptions_allowed=1)
    status, body = evict(k8s, namespace, pods[0])
    assert status == 201 and body["status"] == "Success", body
    assert pod_leaving(k8s, namespace, pods[0])
    settled_pdb(k8s, namespace, "web", current_healthy=1, disruptions_allowed=0)
    status, body = evict(k8s, namespace, pods[1])
    assert (
        status == 429
        and "needs 1 healthy pods and has 1 currently" in body["details"]["causes"][0]["message"]
    )


def test_eviction_of_missing_pod_is_404(k8s: Any, namespace: str) -> None:
    status, body = evict(k8s, namespace, "nobody")
    assert status == 404 and body["reason"] == "NotFound" and body["message"] == 'pods "nobody" not found'


def test_eviction_with_two_budgets_is_500(k8s: Any, namespace: str) -> None:
    labels = {"app": "twice"}
    [pod] = running_pods(k8s, namespace, 1, labels, prefix="twice")
    make_pdb(k8s, namespace, "one", labels, maxUnavailable=1)
    make_pdb(k8s, namespace, "two", {"app": "twice"}, minAvailable=0)
    status, body = evict(k8s, namespace, pod)
    assert status == 500
    assert body["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )


def test_pending_and_unready_pods_are_evicted_despite_the_budget(k8s: Any, namespace: str) -> None:
    labels = {"app": "mixed"}
    running_pods(k8s, namespace, 2, labels, prefix="ready")
    core(k8s).create_namespaced_pod(namespace, pod_body("pending", labels))
    core(k8s).create_namespaced_pod(namespace, pod_body("unready", labels))
    report_status(k8s, namespace, "unready", ready=False)
    make_pdb(k8s, namespace, "mixed", labels, minAvailable=2)
    settled_pdb(
        k8s, namespace, "mixed", current_healthy=2, desired_healthy=2, expected_pods=4, disruptions_allowed=0
    )
    # A Pending pod never counts against the budget; an unready one not while the budget is met.
    assert evict(k8s, namespace, "pending")[0] == 201
    assert evict(k8s, namespace, "unready")[0] == 201
    assert evict(k8s, namespace, "ready-0")[0] == 429
    assert pod_leaving(k8s, namespace, "pending") and pod_leaving(k8s, namespace, "unready")
    assert not pod_leaving(k8s, namespace, "ready-0")


def test_max_unavailable_over_bare_pods_allows_nothing(k8s: Any, namespace: str) -> None:
    labels = {"app": "bare"}
    running_pods(k8s, namespace, 2, labels, prefix="bare")
    make_pdb(k8s, namespace, "bare", labels, maxUnavailable=1)
    # maxUnavailable needs the pods' controllers to know how many are expected; bare pods have none.
    settled_pdb(
        k8s, namespace, "bare", current_healthy=2, expected_pods=0, desired_healthy=0, disruptions_allowed=0
    )

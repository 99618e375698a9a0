"""AIMNamespaceConfig decisions: which config applies, its conditions and Warning Events, its HTTPRoutes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.aimns.logic import decide_config, desired_routes, route_needs_update
from aiplane.controllers.platform import effective_namespace_config

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _cfg(
    name: str, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "generation": 2, "uid": f"u-{name}"},
        "spec": spec if spec is not None else {},
    }
    if status is not None:
        obj["status"] = status
    return obj


def _conds(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_effective_config_one_default_or_none() -> None:
    a, default, b = _cfg("a"), _cfg("default"), _cfg("b")
    assert effective_namespace_config([a]) == (a, [])
    assert effective_namespace_config([a, default, b]) == (default, [a, b])
    chosen, ignored = effective_namespace_config([a, b])
    assert chosen is None and ignored == [a, b]  # ambiguous: none applies


def test_missing_secret_and_key_name_the_field_and_fire_once() -> None:
    spec = {
        "credentials": {
            "huggingFaceToken": {"secretName": "hf", "secretKey": "token"},
            "s3": [{"accessKeyId": {"secretName": "s3", "secretKey": "id"}}],
        }
    }
    config = _cfg("default", spec)
    first = decide_config(config, [config], {"s3": frozenset({"other"})}, frozenset(), [], NOW)
    assert _conds(first.status)["SecretsResolved"] == ("False", "SecretNotFound")
    reasons = [(e.reason, e.message) for e in first.events]
    assert ("SecretNotFound", "spec.credentials.huggingFaceToken: Secret 'hf' does not exist") in reasons
    assert ("SecretKeyNotFound", "spec.credentials.s3[0].accessKeyId: Secret 's3' has no key 'id'") in reasons
    again = decide_config(
        {**config, "status": first.status}, [config], {"s3": frozenset({"other"})}, None, [], NOW
    )
    assert not again.changed and again.events == []  # steady state: no write, no repeated Event
    fixed = decide_config(
        {**config, "status": first.status},
        [config],
        {"hf": frozenset({"token"}), "s3": frozenset({"id"})},
        None,
        [],
        NOW,
    )
    assert _conds(fixed.status)["SecretsResolved"] == ("True", "SecretsFound") and fixed.events == []


def test_gateway_not_found_and_ignored_config() -> None:
    config = _cfg("other", {"gateway": {"name": "gw"}})
    decision = decide_config(config, [config, _cfg("default")], {}, frozenset({"ns/elsewhere"}), [], NOW)
    conds = _conds(decision.status)
    assert conds["Applied"] == ("False", "NotDefault")
    assert conds["GatewayResolved"] == ("False", "GatewayNotFound")
    assert {e.reason for e in decision.events} == {"NotDefault", "GatewayNotFound"}
    assert decision.status["observedGeneration"] == 2


def test_routes_for_dgd_frontends_and_modelinfer_entry_services() -> None:
    config = _cfg("default", {"gateway": {"name": "gw", "namespace": "infra"}})
    dgd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": "ns", "uid": "d"},
        "spec": {
            "services": {"Frontend": {"componentType": "frontend"}, "Worker": {"componentType": "worker"}}
        },
    }
    entry = {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 9000}]}]}}
    mi = {
        "apiVersion": "workload.volcano.sh/v1alpha1",
        "kind": "ModelInfer",
        "metadata": {"name": "m", "namespace": "ns", "uid": "m"},
        "spec": {
            "replicas": 2,
            "template": {"roles": [{"name": "p", "entryTemplate": entry, "workerTemplate": {}}]},
        },
    }
    no_workers = {**mi, "metadata": {**mi["metadata"], "name": "solo"}}
    no_workers["spec"] = {"template": {"roles": [{"name": "p", "entryTemplate": entry}]}}
    routes = desired_routes(config, [dgd], [mi, no_workers])
    assert [r["metadata"]["name"] for r in routes] == ["g-dgd", "m-modelinfer"]
    assert routes[0]["spec"]["rules"][0]["backendRefs"] == [{"name": "g-frontend", "port": 8000}]
    assert routes[1]["spec"]["rules"][0]["backendRefs"] == [
        {"name": "m-0-p-0-0", "port": 9000},
        {"name": "m-1-p-0-0", "port": 9000},
    ]
    assert routes[0]["spec"]["parentRefs"][0]["namespace"] == "infra"
    assert routes[0]["metadata"]["ownerReferences"][0]["uid"] == "d"
    assert not route_needs_update(routes[0], routes[0])
    assert desired_routes(_cfg("default", {}), [dgd], [mi]) == []  # no gateway, no routes

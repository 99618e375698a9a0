"""AIMNamespaceConfig decisions: which config applies, its conditions and Warning Events, its HTTPRoutes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.controllers.aimns.decide import (
    LABEL_ROUTE,
    Observed,
    decide,
    decide_config,
    desired_routes,
    route_needs_update,
)
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


def _dgd(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {"services": {"Frontend": {"componentType": "frontend"}}},
    }


def _observed(configs: list[dict[str, Any]], live: list[dict[str, Any]], served: bool = True) -> Observed:
    return Observed(
        namespace="ns",
        configs=tuple(configs),
        secret_keys={},
        gateways=frozenset({"ns/gw"}),
        routes_served=served,
        live_routes={r["metadata"]["name"]: r for r in live},
        dgds=(_dgd("a"), _dgd("b")),
        modelinfers=(),
    )


def test_decide_routes_first_then_the_status_names_them() -> None:
    config = _cfg("default", {"gateway": {"name": "gw"}})
    stale = {"metadata": {"name": "gone-dgd", "namespace": "ns", "uid": "x", "labels": {LABEL_ROUTE: "true"}}}
    foreign = {"metadata": {"name": "theirs", "namespace": "ns", "uid": "y", "labels": {LABEL_ROUTE: "no"}}}
    decision = decide(_observed([config], [stale, foreign]), NOW)
    assert [(c.desired["metadata"]["name"], c.live) for c in decision.ensure] == [
        ("a-dgd", None),
        ("b-dgd", None),
    ]
    assert decision.delete == (stale,)  # only what carries our label
    [(decided_config, status)] = decision.configs
    assert decided_config is config and status.status["routes"] == ["a-dgd", "b-dgd"]
    # The Gateway API not served: no routes wanted, none removed, none named in the status.
    unserved = decide(_observed([config], [stale], served=False), NOW)
    assert unserved.ensure == () and unserved.delete == ()
    assert "routes" not in unserved.configs[0][1].status


def test_decide_at_rest_writes_nothing() -> None:
    config = _cfg("default", {"gateway": {"name": "gw"}})
    first = decide(_observed([config], []), NOW)
    live = [c.desired for c in first.ensure]
    settled = {**config, "status": first.configs[0][1].status}
    again = decide(_observed([settled], live), NOW)
    assert all(not route_needs_update(c.live, c.desired) for c in again.ensure if c.live is not None)
    assert again.delete == () and not again.configs[0][1].changed and again.configs[0][1].events == []

"""validate(): what the CRD lets through but would make broken objects; int-or-percent resolution."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aiplane.controllers.modelinfer.naming import MAX_NAME_LENGTH
from aiplane.controllers.modelinfer.objects import (
    build_pod,
    build_service,
    role_has_service,
    role_replica_size,
)
from aiplane.controllers.modelinfer.validation import (
    Problem,
    format_problems,
    resolve_max_surge,
    resolve_max_unavailable,
    rolling_update_configuration,
    validate,
)
from aiplane.kube.client import ApiError
from aiplane.kube.resources import SERVICES, resource_for
from aiplane.sim.client import InMemoryKubeClient
from tests.unit.modelinfer import model_infer, role, template

EXAMPLE = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "examples" / "modelinfer-1p2d.yaml").read_text()
)
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"


def rollout(mi: dict[str, Any], **ruc: Any) -> dict[str, Any]:
    mi["spec"]["rolloutStrategy"] = {"type": "InferGroupRollingUpdate", "rollingUpdateConfiguration": ruc}
    return mi


def fields(problems: list[Problem]) -> list[str]:
    return [p.field for p in problems]


def test_valid_specs_have_no_problems() -> None:
    assert validate(EXAMPLE) == []
    assert validate(model_infer()) == []
    assert validate(model_infer(replicas=0)) == []


def test_problem_str() -> None:
    p = Problem("spec.template.roles[1].name", "bad")
    assert str(p) == "spec.template.roles[1].name: bad"
    assert format_problems([p, Problem("a", "b")]) == "spec.template.roles[1].name: bad; a: b"


# --- names ---------------------------------------------------------------------------------------


def test_longest_pod_name_is_reported_with_its_length() -> None:
    # "<49 chars>-9-decode-1-2": 49 + 2 + 7 + 2 + 2 = 62 characters; fine.
    name = "m" * 49
    mi = model_infer(name, replicas=10, roles=[role("decode", 2, 2)])
    assert validate(mi) == []
    # One more group makes the ordinal two digits: 63 characters, still fine.
    mi["spec"]["replicas"] = 11
    assert validate(mi) == []
    # maxSurge 91 makes the largest ordinal 101: 64 characters.
    rollout(mi, maxSurge=91)
    (problem,) = validate(mi)
    longest = f"{name}-101-decode-1-2"
    assert len(longest) == 64
    assert problem.field == "spec.template.roles[0]"
    assert repr(longest) in problem.message and "64 characters" in problem.message
    assert f"{MAX_NAME_LENGTH}" in problem.message


def test_percent_surge_counts_for_names() -> None:
    mi = rollout(model_infer("m" * 51, replicas=10, roles=[role("d", 1, 9)]), maxSurge="1%")  # ceil -> 1
    # largest: m*51 + "-10-d-0-9" = 60
    assert validate(mi) == []
    mi["metadata"]["name"] = "m" * 55
    assert fields(validate(mi)) == ["spec.template.roles[0]"]


def test_modelinfer_name_must_be_a_dns_1035_label() -> None:
    for bad in ("1abc", "a.b", "Abc"):
        problems = validate(model_infer(bad))
        assert fields(problems) == ["metadata.name"], bad
        assert "DNS-1035" in problems[0].message


def test_role_names_must_be_lower_case() -> None:
    problems = validate(model_infer(roles=[role("ok"), role("Decode")]))
    assert fields(problems) == ["spec.template.roles[1].name"]
    assert "'Decode'" in problems[0].message and "lower case" in problems[0].message


async def test_the_api_server_would_reject_what_validate_reports() -> None:
    # The CRD accepts an upper-case role name; the Service named after its entry pod is refused.
    client = InMemoryKubeClient.fresh()
    try:
        mi = model_infer(roles=[role("Decode", 1, 1)])
        del mi["metadata"]["uid"]
        mi = await client.create(resource_for("workload.volcano.sh/v1alpha1", "ModelInfer"), mi)
        assert fields(validate(mi)) == ["spec.template.roles[0].name"]
        with pytest.raises(ApiError) as err:
            await client.create(SERVICES, build_service(mi, 0, "Decode", 0))
        assert err.value.status == 422
    finally:
        await client.close()


# --- roles and gang ------------------------------------------------------------------------------


def test_workers_need_a_template() -> None:
    broken = {**role("decode"), "workerReplicas": 2}
    problems = validate(model_infer(roles=[role("p"), broken]))
    assert fields(problems) == ["spec.template.roles[1].workerTemplate"]
    assert "workerReplicas is 2" in problems[0].message


def test_roles_required_and_unique() -> None:
    assert fields(validate(model_infer(roles=[]))) == ["spec.template.roles"]
    assert fields(validate(model_infer(roles=[role("a"), role("a")]))) == ["spec.template.roles[1].name"]


def test_min_role_replicas() -> None:
    mi = model_infer(gang={"minRoleReplicas": {"prefill": 1, "foo": 1, "decode": -1}})
    problems = validate(mi)
    assert fields(problems) == [
        "spec.template.gangSchedule.minRoleReplicas.foo",
        "spec.template.gangSchedule.minRoleReplicas.decode",
    ]
    assert "names no role" in problems[0].message and "prefill, decode" in problems[0].message
    # Above role.replicas is capped, not an error.
    assert validate(model_infer(gang={"minRoleReplicas": {"decode": 99}})) == []


def test_template_metadata_keys_and_values() -> None:
    entry = template(labels={"ok": "yes", "bad key": "v", "k": "bad value!"})
    entry["metadata"]["annotations"] = {"also bad": "x", "fine/key": "any value at all!"}
    problems = validate(model_infer(roles=[role("r", entry=entry)]))
    assert fields(problems) == [
        "spec.template.roles[0].entryTemplate.metadata.labels[bad key]",
        "spec.template.roles[0].entryTemplate.metadata.labels[k]",
        "spec.template.roles[0].entryTemplate.metadata.annotations[also bad]",
    ]
    assert "annotation key" in problems[2].message


# --- rollout -------------------------------------------------------------------------------------


def test_max_unavailable_and_max_surge_not_both_zero() -> None:
    problems = validate(rollout(model_infer(replicas=5), maxUnavailable=0, maxSurge=0))
    assert fields(problems) == [f"{RUC}.maxUnavailable"]
    assert "may not be 0 when maxSurge is 0" in problems[0].message
    # 10% of 5 rounds down to 0; maxSurge defaults to 0.
    assert fields(validate(rollout(model_infer(replicas=5), maxUnavailable="10%"))) == [
        f"{RUC}.maxUnavailable"
    ]
    assert validate(rollout(model_infer(replicas=10), maxUnavailable="10%")) == []
    assert validate(rollout(model_infer(replicas=5), maxUnavailable=0, maxSurge="1%")) == []  # rounds up to 1
    assert validate(rollout(model_infer(replicas=0), maxUnavailable="10%")) == []  # nothing rolls at 0


@pytest.mark.parametrize(
    ("field", "value"), [("maxUnavailable", "x"), ("maxSurge", "101%"), ("maxSurge", -1)]
)
def test_malformed_rollout_values(field: str, value: Any) -> None:
    problems = validate(rollout(model_infer(), **{field: value}))
    assert fields(problems) == [f"{RUC}.{field}"]


@pytest.mark.parametrize(
    ("value", "replicas", "unavailable", "surge"),
    [
        (None, 10, 1, 0),
        (3, 10, 3, 3),
        (0, 10, 0, 0),
        (20, 3, 20, 20),  # not capped
        ("0%", 10, 0, 0),
        ("25%", 10, 2, 3),
        ("100%", 7, 7, 7),
        ("33%", 3, 0, 1),
        ("50%", 0, 0, 0),
    ],
)
def test_resolve(value: Any, replicas: int, unavailable: int, surge: int) -> None:
    assert resolve_max_unavailable(value, replicas) == unavailable
    if value is not None:
        assert resolve_max_surge(value, replicas) == surge
    else:
        assert resolve_max_surge(value, replicas) == 0


@pytest.mark.parametrize("value", ["1", "1.5%", "101%", "-1%", " 5%", "05%", -1, True, 1.5, "%"])
def test_resolve_rejects(value: Any) -> None:
    with pytest.raises(ValueError):
        resolve_max_unavailable(value, 10)
    with pytest.raises(ValueError):
        resolve_max_surge(value, 10)


def test_resolve_rejects_bad_replicas() -> None:
    with pytest.raises(ValueError):
        resolve_max_surge(1, -1)


@given(pct=st.integers(0, 100), replicas=st.integers(0, 10_000))
def test_percent_rounding(pct: int, replicas: int) -> None:
    down = resolve_max_unavailable(f"{pct}%", replicas)
    up = resolve_max_surge(f"{pct}%", replicas)
    exact = pct * replicas / 100
    assert down <= exact <= up and up - down <= 1
    assert (up == down) == (pct * replicas % 100 == 0)


def test_rolling_update_configuration() -> None:
    assert rolling_update_configuration(model_infer()) == {}
    assert rolling_update_configuration(rollout(model_infer(), maxSurge=1)) == {"maxSurge": 1}


# --- topology spread -----------------------------------------------------------------------------


def test_topology_spread_problems() -> None:
    mi = model_infer(
        topologySpreadConstraints=[
            {"topologyKey": "zone"},
            {"maxSkew": 0, "whenUnsatisfiable": "Maybe"},
            {"topologyKey": "bad key!"},
            {"topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"topologyKey": "host", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Foo"}]}},
        ]
    )
    assert fields(validate(mi)) == [
        "spec.topologySpreadConstraints[1].topologyKey",
        "spec.topologySpreadConstraints[1].maxSkew",
        "spec.topologySpreadConstraints[1].whenUnsatisfiable",
        "spec.topologySpreadConstraints[2].topologyKey",
        "spec.topologySpreadConstraints[3]",
        "spec.topologySpreadConstraints[4].labelSelector",
    ]


def test_the_example_with_a_bad_edit() -> None:
    mi = copy.deepcopy(EXAMPLE)
    mi["spec"]["template"]["gangSchedule"]["minRoleReplicas"]["decoder"] = 1
    (p,) = validate(mi)
    assert str(p).startswith("spec.template.gangSchedule.minRoleReplicas.decoder: names no role")


# --- property: no problems => every name the controller builds is valid -------------------------

_DNS1035_RE = r"[a-z]([-a-z0-9]*[a-z0-9])?"


@st.composite
def _specs(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(
        st.from_regex(r"[a-z]([-a-z0-9]{20,58}[a-z0-9])?", fullmatch=True)
        | st.from_regex(r"[a-zA-Z0-9][-a-z0-9.]{0,45}", fullmatch=True)
    )
    names = draw(
        st.lists(
            st.from_regex(r"[a-zA-Z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    roles = [role(r, draw(st.integers(0, 12)), draw(st.integers(0, 12))) for r in names]
    mi = model_infer(name, replicas=draw(st.integers(0, 120)), roles=roles)
    surge = draw(st.none() | st.integers(0, 20) | st.sampled_from(["0%", "10%", "50%", "100%"]))
    if surge is not None:
        rollout(mi, maxSurge=surge, maxUnavailable=1)
    return mi


@settings(max_examples=300)
@given(mi=_specs())
def test_no_problems_means_every_name_is_valid(mi: dict[str, Any]) -> None:
    import re

    if validate(mi):
        return
    spec = mi["spec"]
    surge = resolve_max_surge(rolling_update_configuration(mi).get("maxSurge"), spec["replicas"])
    roles = spec["template"]["roles"]
    for g in {0, max(spec["replicas"] + surge - 1, 0)}:
        for r in roles:
            for i in {0, max(r["replicas"] - 1, 0)}:
                if role_has_service(r):
                    svc = build_service(mi, g, r["name"], i)["metadata"]["name"]
                    assert len(svc) <= MAX_NAME_LENGTH and re.fullmatch(_DNS1035_RE, svc)
                for k in range(role_replica_size(r)):
                    pod = build_pod(mi, roles, g, r["name"], i, k, "rev")
                    assert len(pod["metadata"]["name"]) <= MAX_NAME_LENGTH
                    assert re.fullmatch(_DNS1035_RE, pod["metadata"]["name"])
                    assert all(len(v) <= MAX_NAME_LENGTH for v in pod["metadata"]["labels"].values())

"""What is wrong with a ModelInfer that the CRD schema cannot reject, and the rollout parameters.

The CRD (deploy/crds/workload.volcano.sh_modelinfers.yaml) already enforces types, ``minimum: 0`` on
the counts, 1 to 4 roles with unique names (CEL), role names of at most 12 characters matching
``^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$``, ``partition < replicas`` (CEL) and the percent pattern
of ``maxUnavailable``/``maxSurge``. Upstream's validating webhook checked more (reference §1); we have
no webhook, so :func:`validate` is run by the controller, which reports the problems (a condition
and an Event naming each field) instead of creating objects the API server or the cluster would
refuse. It checks what would otherwise produce broken objects:

* **Names.** Every pod name the spec can produce — ordinals up to ``replicas + maxSurge - 1``, role
  replicas up to ``role.replicas - 1``, pod indices up to the worker count — must be a DNS-1035
  label of at most 63 characters, because the entry pod's name is also its headless Service's name
  (and ``<mi>-<g>`` a label value). So ``metadata.name`` must start with a letter and have no dots
  (a custom resource name may), and role names must be lower case (the CRD pattern allows upper
  case). The message names the longest name and its length. Upstream checked
  ``<mi>-<replicas>-<role>-<roleReplicas>-<workerReplicas>`` — counts, not the largest indices.
  Groups are assumed to be numbered densely from 0; scaling ``replicas`` up to a longer number is
  caught on the reconcile that sees it.
* **Workers without a template.** ``workerReplicas > 0`` with no ``workerTemplate``: there is nothing
  to build the workers from (the builders then make no workers; see :mod:`.objects`).
* **Gang minimums.** A ``minRoleReplicas`` key that names no role, or a negative value. A value
  above ``role.replicas`` is *not* an error: it is capped (:func:`.objects.min_role_replicas`), so
  scaling a role below its minimum (an autoscaler may) keeps the ModelInfer valid. Upstream's
  webhook allowed up to ``replicas + workerReplicas``, which mixes two different units.
* **Rollout parameters.** ``maxUnavailable``/``maxSurge`` must parse (:func:`resolve_max_unavailable`,
  :func:`resolve_max_surge`), and must not both resolve to 0 against ``replicas`` — a rollout
  could then never make progress. Not checked at ``replicas: 0``, where nothing rolls (an MI
  scaled to zero with ``maxUnavailable: 10%`` stays valid).
* **Topology spread.** Each ``spec.topologySpreadConstraints`` item needs a valid ``topologyKey``,
  ``maxSkew >= 1`` and ``whenUnsatisfiable`` ``DoNotSchedule`` or ``ScheduleAnyway`` when set, a valid
  ``labelSelector``, and no repeated (topologyKey, whenUnsatisfiable) pair (kube rejects pods with
  one).
* **Template metadata.** Label keys and values, and annotation keys, must be valid: the CRD types
  them as plain strings, and one bad key would make every pod creation fail.

Duplicate role names and an empty role list are reported too, defensively (the CRD rejects them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.selectors import compile_selector, validate_label_key, validate_label_value
from aiplane.controllers.modelinfer.naming import MAX_NAME_LENGTH, pod_name
from aiplane.controllers.modelinfer.objects import role_replicas, worker_count

__all__ = [
    "DEFAULT_MAX_SURGE",
    "DEFAULT_MAX_UNAVAILABLE",
    "Problem",
    "format_problems",
    "resolve_max_surge",
    "resolve_max_unavailable",
    "rolling_update_configuration",
    "validate",
]

DEFAULT_MAX_UNAVAILABLE: Final = 1
DEFAULT_MAX_SURGE: Final = 0

_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LOWER_ROLE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a ModelInfer: the field path (as ``kubectl explain`` spells it, with
    list indices and map keys: ``spec.template.roles[1].name``,
    ``spec.template.gangSchedule.minRoleReplicas.foo``) and what is wrong with it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def format_problems(problems: Sequence[Problem]) -> str:
    """All problems on one line, ``; ``-separated (for a condition message or an Event)."""
    return "; ".join(str(p) for p in problems)


# --- int-or-percent ------------------------------------------------------------------------------


def _percent(value: str) -> int:
    m = _PERCENT.match(value)
    if m is None:
        raise ValueError(f"{value!r} is neither an integer nor a percentage such as '25%'")
    pct = int(m.group(1))
    if pct > 100:
        raise ValueError(f"{value!r} is more than 100%")
    return pct


def _check_replicas(replicas: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ValueError(f"replicas must be a non-negative integer, not {replicas!r}")


def _resolve(value: int | str | None, replicas: int, default: int, round_up: bool) -> int:
    _check_replicas(replicas)
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is neither an integer nor a percentage")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} must not be negative")
        return value
    if isinstance(value, str):
        scaled = _percent(value) * replicas
        return -(-scaled // 100) if round_up else scaled // 100
    raise ValueError(f"{value!r} is neither an integer nor a percentage")


def resolve_max_unavailable(value: int | str | None, replicas: int) -> int:
    """``maxUnavailable`` as a number of groups: an int as is, ``"N%"`` of ``replicas`` rounded
    DOWN, ``None`` (absent) the default 1. Not capped at ``replicas``. Raises :class:`ValueError`
    for a negative number, a percentage above 100% or anything else (``"1"``, ``"1.5%"``)."""
    return _resolve(value, replicas, DEFAULT_MAX_UNAVAILABLE, round_up=False)


def resolve_max_surge(value: int | str | None, replicas: int) -> int:
    """``maxSurge`` as a number of groups: an int as is, ``"N%"`` of ``replicas`` rounded UP,
    ``None`` (absent) the default 0. Raises :class:`ValueError` like :func:`resolve_max_unavailable`."""
    return _resolve(value, replicas, DEFAULT_MAX_SURGE, round_up=True)


def rolling_update_configuration(mi: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec.rolloutStrategy.rollingUpdateConfiguration``, or ``{}`` when absent."""
    strategy = _mapping(objects.spec(mi).get("rolloutStrategy"))
    return _mapping(strategy.get("rollingUpdateConfiguration"))


# --- validate ------------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _rollout(mi: Mapping[str, Any], replicas: int, out: list[Problem]) -> int:
    """Check maxUnavailable/maxSurge; return the resolved maxSurge (0 when malformed)."""
    ruc = rolling_update_configuration(mi)
    unavailable: int | None = None
    surge: int | None = None
    try:
        unavailable = resolve_max_unavailable(ruc.get("maxUnavailable"), replicas)
    except ValueError as exc:
        out.append(Problem(f"{_RUC}.maxUnavailable", str(exc)))
    try:
        surge = resolve_max_surge(ruc.get("maxSurge"), replicas)
    except ValueError as exc:
        out.append(Problem(f"{_RUC}.maxSurge", str(exc)))
    if replicas > 0 and unavailable == 0 and surge == 0:
        out.append(
            Problem(
                f"{_RUC}.maxUnavailable",
                f"may not be 0 when maxSurge is 0: maxUnavailable {ruc.get('maxUnavailable')!r} and maxSurge "
                f"{ruc.get('maxSurge', DEFAULT_MAX_SURGE)!r} both resolve to 0 groups against replicas "
                f"{replicas}, so a rolling update could never start",
            )
        )
    return surge or 0


def _metadata_problems(path: str, template: Mapping[str, Any], out: list[Problem]) -> None:
    for key, value in objects.labels(template).items():
        try:
            validate_label_key(str(key))
            validate_label_value(str(value))
        except ValueError as exc:
            out.append(Problem(f"{path}.metadata.labels[{key}]", str(exc)))
    for key in objects.annotations(template):
        try:
            validate_label_key(str(key))
        except ValueError as exc:
            out.append(
                Problem(f"{path}.metadata.annotations[{key}]", str(exc).replace("label", "annotation"))
            )


def _role_problems(i: int, role: Mapping[str, Any], out: list[Problem]) -> None:
    path = f"spec.template.roles[{i}]"
    name = role.get("name")
    if isinstance(name, str) and name and not _LOWER_ROLE.match(name):
        out.append(
            Problem(
                f"{path}.name",
                f"{name!r} must be lower case alphanumeric characters or '-': the role name is part of "
                "pod, Service and PodGroup task names, which kube requires in lower case",
            )
        )
    workers = _int(role.get("workerReplicas"), 0)
    if workers > 0 and not isinstance(role.get("workerTemplate"), Mapping):
        out.append(
            Problem(
                f"{path}.workerTemplate",
                f"Required value: workerReplicas is {workers}, and worker pods are built from the workerTemplate",
            )
        )
    for key in ("entryTemplate", "workerTemplate"):
        template = role.get(key)
        if isinstance(template, Mapping):
            _metadata_problems(f"{path}.{key}", template, out)


def _name_problems(
    mi_name: str, roles: Sequence[Mapping[str, Any]], max_ordinal: int, out: list[Problem]
) -> None:
    if not _DNS1035.match(mi_name):
        out.append(
            Problem(
                "metadata.name",
                f"{mi_name!r} must be a DNS-1035 label (lower case alphanumeric characters or '-', starting "
                "with a letter): it starts every pod name, and the entry pods' names are also Service names",
            )
        )
    for i, role in enumerate(roles):
        role_name = role.get("name")
        if not isinstance(role_name, str) or not role_name:
            continue
        longest = pod_name(
            mi_name, max_ordinal, role_name, max(role_replicas(role) - 1, 0), worker_count(role)
        )
        if len(longest) > MAX_NAME_LENGTH:
            out.append(
                Problem(
                    f"spec.template.roles[{i}]",
                    f"pod name {longest!r} would be {len(longest)} characters, more than the "
                    f"{MAX_NAME_LENGTH} a Service name (a DNS-1035 label) may have: shorten metadata.name "
                    "or the role name, or lower replicas, maxSurge, the role's replicas or workerReplicas",
                )
            )


def _gang_problems(gang: Mapping[str, Any], roles: Sequence[Mapping[str, Any]], out: list[Problem]) -> None:
    mins = gang.get("minRoleReplicas")
    if not isinstance(mins, Mapping):
        return
    names = [r.get("name") for r in roles]
    for key, value in mins.items():
        path = f"spec.template.gangSchedule.minRoleReplicas.{key}"
        if key not in names:
            known = ", ".join(str(n) for n in names)
            out.append(Problem(path, f"names no role of spec.template.roles (roles: {known})"))
        elif _int(value, 0) < 0:
            out.append(Problem(path, f"{value} must not be negative"))


def _topology_problems(items: Sequence[Any], out: list[Problem]) -> None:
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        path = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(item, Mapping):
            continue
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            out.append(Problem(f"{path}.topologyKey", "Required value: the node label to spread over"))
        else:
            try:
                validate_label_key(key)
            except ValueError as exc:
                out.append(Problem(f"{path}.topologyKey", str(exc)))
        skew = item.get("maxSkew")
        if skew is not None and _int(skew, 0) < 1:
            out.append(Problem(f"{path}.maxSkew", f"{skew} must be greater than 0"))
        when = item.get("whenUnsatisfiable")
        if when is not None and when not in _WHEN_UNSATISFIABLE:
            out.append(
                Problem(
                    f"{path}.whenUnsatisfiable", f"{when!r} must be one of {', '.join(_WHEN_UNSATISFIABLE)}"
                )
            )
        if isinstance(key, str) and key:
            pair = (key, when or "DoNotSchedule")
            if pair in seen:
                out.append(Problem(path, f"duplicate topologyKey {key!r} with whenUnsatisfiable {pair[1]!r}"))
            seen.add(pair)
        selector = item.get("labelSelector")
        if selector is not None:
            try:
                compile_selector(selector)
            except ValueError as exc:
                out.append(Problem(f"{path}.labelSelector", str(exc)))


def validate(mi: Mapping[str, Any]) -> list[Problem]:
    """Everything wrong with ``mi`` that the API server let through (in a stable order: roles,
    gang, rollout, names, topology spread); ``[]`` if the controller can build every object the
    spec describes."""
    out: list[Problem] = []
    spec = objects.spec(mi)
    template = _mapping(spec.get("template"))
    raw_roles = template.get("roles")
    roles = [r for r in raw_roles if isinstance(r, Mapping)] if isinstance(raw_roles, list) else []
    replicas = max(_int(spec.get("replicas"), 1), 0)

    if not roles:
        out.append(Problem("spec.template.roles", "Required value: at least one role"))
    seen: set[Any] = set()
    for i, role in enumerate(roles):
        if role.get("name") in seen:
            out.append(Problem(f"spec.template.roles[{i}].name", f"Duplicate value: {role.get('name')!r}"))
        seen.add(role.get("name"))
        _role_problems(i, role, out)

    gang = template.get("gangSchedule")
    if isinstance(gang, Mapping):
        _gang_problems(gang, roles, out)

    surge = _rollout(mi, replicas, out)

    name = objects.name(mi)
    if not name:
        out.append(Problem("metadata.name", "Required value"))
    else:
        _name_problems(name, roles, max(replicas + surge - 1, 0), out)

    tsc = spec.get("topologySpreadConstraints")
    if isinstance(tsc, list):
        _topology_problems(tsc, out)
    return out

"""AIMNamespaceConfig decisions, pure: its status, its Warning Events, and the HTTPRoutes of a namespace.

Inputs are cache views (plain dicts) and ``now``; nothing here does I/O. A Secret is seen only as
its data keys (the informer empties values), and every message names a field path, a Secret and a
key — never a value.

:func:`decide` takes a namespace's :class:`Observed` and returns its :class:`Decision`: the
HTTPRoutes wanted and those to remove, then each config's status, which names the routes wanted
(so the status is decided from what will be, not read back from what was written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from aiplane.api.config import AIMNamespaceConfigSpec
from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import set_condition
from aiplane.controllers.dynamo.naming import COMPONENT_FRONTEND, dcd_name
from aiplane.controllers.dynamo.podtemplate import FRONTEND_PORT
from aiplane.controllers.modelinfer.naming import service_name
from aiplane.controllers.platform import DEFAULT_NAMESPACE_CONFIG, effective_namespace_config, secret_uses

__all__ = [
    "APPLIED",
    "GATEWAY_RESOLVED",
    "LABEL_ROUTE",
    "ROUTES_READY",
    "SECRETS_RESOLVED",
    "ConfigDecision",
    "Decision",
    "Observed",
    "Problem",
    "RouteChange",
    "decide",
    "decide_config",
    "desired_routes",
    "route_needs_update",
]

Obj = dict[str, Any]

APPLIED: Final = "Applied"
SECRETS_RESOLVED: Final = "SecretsResolved"
GATEWAY_RESOLVED: Final = "GatewayResolved"
ROUTES_READY: Final = "RoutesReady"
#: On every HTTPRoute we create: only objects carrying it are ours to update or delete.
LABEL_ROUTE: Final = "config.kaiwo.silogen.ai/aimnamespaceconfig-route"
GATEWAY_GROUP: Final = "gateway.networking.k8s.io"
#: A ModelInfer entry container without a containerPort is reached on vLLM's default port.
DEFAULT_MODELINFER_PORT: Final = 8000


@dataclass(frozen=True)
class Problem:
    """A Warning Event: ``reason`` is SecretNotFound / SecretKeyNotFound / GatewayNotFound / …"""

    reason: str
    message: str


@dataclass(frozen=True)
class ConfigDecision:
    status: Obj
    changed: bool
    #: Warning Events to emit when the status write lands (they fire once per new problem).
    events: list[Problem]


def _parse(config: Mapping[str, Any]) -> tuple[AIMNamespaceConfigSpec | None, str | None]:
    try:
        return AIMNamespaceConfigSpec.model_validate(objects.spec(config)), None
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in ("spec", *first["loc"]))
        return None, f"{path}: {first['msg']}"


def _secret_problems(
    spec: AIMNamespaceConfigSpec, secret_keys: Mapping[str, frozenset[str]]
) -> list[Problem]:
    out: list[Problem] = []
    for use in secret_uses(spec):
        if use.secret not in secret_keys:
            out.append(Problem("SecretNotFound", f"{use.path}: Secret {use.secret!r} does not exist"))
        elif use.key is None and not use.path.startswith("spec.images"):
            out.append(
                Problem("SecretKeyNotFound", f"{use.path}.secretKey: required (Secret {use.secret!r})")
            )
        elif use.key is not None and use.key not in secret_keys[use.secret]:
            out.append(
                Problem("SecretKeyNotFound", f"{use.path}: Secret {use.secret!r} has no key {use.key!r}")
            )
    return out


def _gateway_problem(
    spec: AIMNamespaceConfigSpec, namespace: str, gateways: frozenset[str] | None
) -> tuple[str, str, str] | None:
    """(status, reason, message) of GatewayResolved, or None when no gateway is configured."""
    gw = spec.gateway
    if gw is None or not gw.name:
        return None
    where = f"{gw.namespace or namespace}/{gw.name}"
    if gateways is None:
        return "False", "GatewayNotFound", f"spec.gateway: Gateway {where}: the Gateway API is not served"
    if where not in gateways:
        return "False", "GatewayNotFound", f"spec.gateway: Gateway {where} does not exist"
    return "True", "GatewayFound", f"Gateway {where} exists"


def decide_config(
    config: Mapping[str, Any],
    siblings: Sequence[Mapping[str, Any]],
    secret_keys: Mapping[str, frozenset[str]],
    gateways: frozenset[str] | None,
    routes: Sequence[str],
    now: datetime,
) -> ConfigDecision:
    """The status of one AIMNamespaceConfig and the Warning Events a new problem deserves.

    ``siblings`` are all configs of the namespace (this one included); ``gateways`` the
    ``namespace/name`` of every Gateway (None: API not served); ``routes`` the HTTPRoutes we keep.
    """
    current = dict(objects.status(config))
    generation = objects.generation(config)
    conds: list[Obj] = list(current.get("conditions") or [])
    changed = False
    events: list[Problem] = []

    def put(type_: str, status: str, reason: str, message: str, *, warn: bool = False) -> None:
        nonlocal conds, changed
        before = next((c for c in conds if c.get("type") == type_), None)
        conds, did = set_condition(
            conds, type_, status, reason, message, observed_generation=generation, now=now
        )
        changed = changed or did
        fresh = before is None or before.get("status") != status or before.get("message") != message
        if warn and status == "False" and fresh:
            events.append(Problem(reason, message))

    chosen, _ = effective_namespace_config(siblings)
    name = objects.name(config)
    if chosen is not None and objects.name(chosen) == name:
        put(APPLIED, "True", "Effective", "this config applies to the namespace's workloads")
    elif chosen is not None:
        put(
            APPLIED,
            "False",
            "NotDefault",
            f"ignored: AIMNamespaceConfig {objects.name(chosen)!r} applies",
            warn=True,
        )
    else:
        put(
            APPLIED,
            "False",
            "Ambiguous",
            f"ignored: the namespace holds several AIMNamespaceConfigs and none is named {DEFAULT_NAMESPACE_CONFIG!r}",
            warn=True,
        )
    spec, invalid = _parse(config)
    if spec is None:
        put(SECRETS_RESOLVED, "False", "InvalidSpec", invalid or "invalid spec", warn=True)
    else:
        problems = _secret_problems(spec, secret_keys)
        if problems:
            # One condition, the first problem as its reason; an Event for each problem that is new.
            message = "; ".join(p.message for p in problems)
            put(SECRETS_RESOLVED, "False", problems[0].reason, message)
            old: Mapping[str, Any] = next(
                (c for c in current.get("conditions") or [] if c.get("type") == SECRETS_RESOLVED), {}
            )
            events.extend(p for p in problems if p.message not in str(old.get("message", "")))
        else:
            put(SECRETS_RESOLVED, "True", "SecretsFound", "every referenced Secret and key exists")
        gateway = _gateway_problem(spec, objects.namespace(config), gateways)
        if gateway is not None:
            put(GATEWAY_RESOLVED, *gateway, warn=True)
        else:
            conds = [c for c in conds if c.get("type") != GATEWAY_RESOLVED]
    desired: Obj = {**current, "conditions": conds}
    if generation is not None:
        desired["observedGeneration"] = generation
    if chosen is not None and objects.name(chosen) == name and routes:
        desired["routes"] = sorted(routes)
    else:
        desired.pop("routes", None)
    return ConfigDecision(desired, changed or desired != current, events)


# --- HTTPRoutes ----------------------------------------------------------------------------------------


def _owner(workload: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": str(workload.get("apiVersion")),
        "kind": str(workload.get("kind")),
        "name": objects.name(workload),
        "uid": objects.uid(workload),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _route(workload: Mapping[str, Any], suffix: str, gateway: Mapping[str, str], backends: list[Obj]) -> Obj:
    namespace, name = objects.namespace(workload), objects.name(workload)
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": f"{name}-{suffix}",
            "namespace": namespace,
            "labels": {LABEL_ROUTE: "true"},
            "ownerReferences": [_owner(workload)],
        },
        "spec": {
            "parentRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", **gateway}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{namespace}/{name}"}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                        }
                    ],
                    "backendRefs": backends,
                }
            ],
        },
    }


def _dgd_backends(dgd: Mapping[str, Any]) -> list[Obj]:
    services = objects.spec(dgd).get("services")
    if not isinstance(services, Mapping):
        return []
    return [
        {"name": dcd_name(objects.name(dgd), str(key)), "port": FRONTEND_PORT}
        for key, svc in sorted(services.items())
        if isinstance(svc, Mapping) and svc.get("componentType") == COMPONENT_FRONTEND
    ]


def _modelinfer_backends(mi: Mapping[str, Any]) -> list[Obj]:
    spec = objects.spec(mi)
    roles = (spec.get("template") or {}).get("roles") or []
    if (
        not roles
        or not isinstance(roles[0], Mapping)
        or not isinstance(roles[0].get("workerTemplate"), Mapping)
    ):
        return []  # only a role with workers has an entry Service (modelinfer/objects.role_has_service)
    role = roles[0]
    port = DEFAULT_MODELINFER_PORT
    for c in objects.spec(role.get("entryTemplate") or {}).get("containers") or []:
        ports = [p.get("containerPort") for p in c.get("ports") or [] if isinstance(p, Mapping)]
        if ports and isinstance(ports[0], int):
            port = ports[0]
            break
    replicas = spec.get("replicas", 1)
    groups = replicas if isinstance(replicas, int) else 1
    name = objects.name(mi)
    return [{"name": service_name(name, g, str(role.get("name")), 0), "port": port} for g in range(groups)]


def desired_routes(
    config: Mapping[str, Any] | None,
    dgds: Sequence[Mapping[str, Any]],
    modelinfers: Sequence[Mapping[str, Any]],
) -> list[Obj]:
    """The HTTPRoutes the effective config's gateway wants: one per DGD with a frontend, one per
    ModelInfer whose first role has an entry Service; none without a gateway."""
    spec, _ = _parse(config) if config is not None else (None, None)
    if spec is None or spec.gateway is None or not spec.gateway.name:
        return []
    gateway = {
        "name": spec.gateway.name,
        "namespace": spec.gateway.namespace or objects.namespace(config or {}),
    }
    out: list[Obj] = []
    for dgd in dgds:
        backends = _dgd_backends(dgd)
        if backends and not objects.is_deleting(dgd) and objects.uid(dgd):
            out.append(_route(dgd, "dgd", gateway, backends))
    for mi in modelinfers:
        backends = _modelinfer_backends(mi)
        if backends and not objects.is_deleting(mi) and objects.uid(mi):
            out.append(_route(mi, "modelinfer", gateway, backends))
    return out


def route_needs_update(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Ours differ in spec, owner or labels (the API server's defaults in the spec are compared away)."""
    if objects.meta(live).get("ownerReferences") != objects.meta(desired).get("ownerReferences"):
        return True
    if objects.labels(live).get(LABEL_ROUTE) != "true":
        return True
    return _strip_defaults(objects.spec(live)) != _strip_defaults(objects.spec(desired))


def _strip_defaults(spec: Mapping[str, Any]) -> Obj:
    rules = []
    for rule in spec.get("rules") or []:
        rules.append(
            {
                "matches": rule.get("matches"),
                "filters": rule.get("filters"),
                "backendRefs": [
                    {"name": b.get("name"), "port": b.get("port")} for b in rule.get("backendRefs") or []
                ],
            }
        )
    parents = [{"name": p.get("name"), "namespace": p.get("namespace")} for p in spec.get("parentRefs") or []]
    return {"parentRefs": parents, "rules": rules}


# --- One namespace -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """A namespace as the caches show it."""

    namespace: str
    #: Its AIMNamespaceConfigs that are not being deleted.
    configs: tuple[Obj, ...]
    #: Secret name → its data keys (never values).
    secret_keys: Mapping[str, frozenset[str]]
    #: ``namespace/name`` of every Gateway; ``None`` when the Gateway API is not served.
    gateways: frozenset[str] | None
    #: Whether we manage HTTPRoutes at all (the Gateway API is served).
    routes_served: bool
    #: Our HTTPRoutes in the namespace (by the route label), by name.
    live_routes: Mapping[str, Obj]
    dgds: tuple[Obj, ...]
    modelinfers: tuple[Obj, ...]


@dataclass(frozen=True)
class RouteChange:
    """An HTTPRoute to create or replace (``live`` is the object it replaces, if any)."""

    desired: Obj
    live: Obj | None


@dataclass(frozen=True)
class Decision:
    #: Routes wanted, each with the live route of that name (``ChildWriter.ensure`` writes only a difference).
    ensure: tuple[RouteChange, ...]
    #: Our routes no longer wanted.
    delete: tuple[Obj, ...]
    #: Each config with its decided status.
    configs: tuple[tuple[Obj, ConfigDecision], ...]


def decide(observed: Observed, now: datetime) -> Decision:
    """The routes of the effective config's gateway, and every config's status naming them."""
    ensure: list[RouteChange] = []
    delete: list[Obj] = []
    wanted: list[Obj] = []
    if observed.routes_served:
        chosen, _ = effective_namespace_config(observed.configs)
        wanted = desired_routes(chosen, observed.dgds, observed.modelinfers)
        live = dict(observed.live_routes)
        ensure = [RouteChange(route, live.pop(objects.name(route), None)) for route in wanted]
        delete = [
            stale
            for stale in live.values()
            if objects.labels(stale).get(LABEL_ROUTE) == "true" and not objects.is_deleting(stale)
        ]
    names = [objects.name(r) for r in wanted]
    configs = tuple(
        (
            config,
            decide_config(config, observed.configs, observed.secret_keys, observed.gateways, names, now),
        )
        for config in observed.configs
    )
    return Decision(tuple(ensure), tuple(delete), configs)

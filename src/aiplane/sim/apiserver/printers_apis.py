"""Row printers of the kinds of named groups (apps, batch, policy, autoscaling, networking, rbac,
coordination), as ``pkg/printers/internalversion`` prints them, and the default printer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiplane.apimachinery.objects import meta
from aiplane.apimachinery.selectors import format_label_selector
from aiplane.sim.apiserver.printers_v1 import lb_ingress
from aiplane.sim.apiserver.printing import (
    age,
    as_int,
    condition_true,
    containers_of,
    format_labels,
    get_path,
    human_duration,
    int_or_string,
    parse_time,
    quantity,
    selector_string,
)


def print_deployment(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = containers_of(get_path(spec, "template", "spec"))
    return [
        meta(obj).get("name", ""),
        f"{as_int(status.get('readyReplicas'))}/{as_int(spec.get('replicas'), 1)}",
        as_int(status.get("updatedReplicas")),
        as_int(status.get("availableReplicas")),
        age(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def print_statefulset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    names, images = containers_of(get_path(spec, "template", "spec"))
    return [
        meta(obj).get("name", ""),
        f"{as_int(get_path(obj, 'status', 'readyReplicas'))}/{as_int(spec.get('replicas'), 1)}",
        age(obj, now),
        names,
        images,
    ]


def print_daemonset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = containers_of(get_path(spec, "template", "spec"))
    return [
        meta(obj).get("name", ""),
        as_int(status.get("desiredNumberScheduled")),
        as_int(status.get("currentNumberScheduled")),
        as_int(status.get("numberReady")),
        as_int(status.get("updatedNumberScheduled")),
        as_int(status.get("numberAvailable")),
        format_labels(get_path(spec, "template", "spec", "nodeSelector")),
        age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_replicaset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = containers_of(get_path(spec, "template", "spec"))
    return [
        meta(obj).get("name", ""),
        as_int(spec.get("replicas"), 1),
        as_int(status.get("replicas")),
        as_int(status.get("readyReplicas")),
        age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_controller_revision(obj: dict[str, Any], now: datetime) -> list[Any]:
    controller = "<none>"
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", ""))
            group_kind = f"{kind}.{group}" if group else kind
            controller = f"{group_kind.lower()}/{ref.get('name', '')}" if kind else str(ref.get("name", ""))
            break
    return [meta(obj).get("name", ""), controller, as_int(obj.get("revision")), age(obj, now)]


def print_job(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    succeeded = as_int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{as_int(spec.get('completions'))}"
    else:
        parallelism = as_int(spec.get("parallelism"))
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    duration = ""
    try:
        start = parse_time(status.get("startTime"))
        end = parse_time(status.get("completionTime"))
    except ValueError:
        start = end = None
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    conditions = status.get("conditions")
    if condition_true(conditions, "Complete"):
        state = "Complete"
    elif condition_true(conditions, "Failed"):
        state = "Failed"
    elif meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif condition_true(conditions, "Suspended"):
        state = "Suspended"
    elif condition_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = containers_of(get_path(spec, "template", "spec"))
    return [
        meta(obj).get("name", ""),
        state,
        completions,
        duration,
        age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_pdb(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    return [
        meta(obj).get("name", ""),
        "N/A" if min_available is None else int_or_string(min_available),
        "N/A" if max_unavailable is None else int_or_string(max_unavailable),
        as_int(get_path(obj, "status", "disruptionsAllowed")),
        age(obj, now),
    ]


def print_lease(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [meta(obj).get("name", ""), str(get_path(obj, "spec", "holderIdentity") or ""), age(obj, now)]


def _hpa_metrics(specs: Any, statuses: Any) -> str:
    specs = specs or []
    statuses = statuses or []
    if not specs:
        return "<none>"
    items: list[str] = []
    for index, metric in enumerate(specs):
        status = statuses[index] if index < len(statuses) else {}
        kind = metric.get("type")
        if kind == "External":
            target = get_path(metric, "external", "target") or {}
            current_metric = get_path(status, "external", "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    quantity(current_metric.get("averageValue"))
                    if current_metric.get("averageValue") is not None
                    else "<unknown>"
                )
                items.append(f"{current}/{quantity(target.get('averageValue'))} (avg)")
            else:
                current = (
                    quantity(current_metric.get("value")) if get_path(status, "external") else "<unknown>"
                )
                items.append(f"{current}/{quantity(target.get('value'))}")
        elif kind == "Pods":
            target = get_path(metric, "pods", "target") or {}
            current = (
                quantity(get_path(status, "pods", "current", "averageValue"))
                if get_path(status, "pods")
                else "<unknown>"
            )
            items.append(f"{current}/{quantity(target.get('averageValue'))}")
        elif kind == "Object":
            target = get_path(metric, "object", "target") or {}
            current_metric = get_path(status, "object", "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    quantity(current_metric.get("averageValue"))
                    if current_metric.get("averageValue") is not None
                    else "<unknown>"
                )
                items.append(f"{current}/{quantity(target.get('averageValue'))} (avg)")
            else:
                current = quantity(current_metric.get("value")) if get_path(status, "object") else "<unknown>"
                items.append(f"{current}/{quantity(target.get('value'))}")
        elif kind in ("Resource", "ContainerResource"):
            field_name = "resource" if kind == "Resource" else "containerResource"
            source = metric.get(field_name) or {}
            target = source.get("target") or {}
            current_metric = get_path(status, field_name, "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    quantity(current_metric.get("averageValue"))
                    if get_path(status, field_name)
                    else "<unknown>"
                )
                items.append(f"{source.get('name')}: {current}/{quantity(target.get('averageValue'))}")
            else:
                utilization = current_metric.get("averageUtilization")
                current = f"{as_int(utilization)}%" if utilization is not None else "<unknown>"
                wanted = target.get("averageUtilization")
                goal = f"{as_int(wanted)}%" if wanted is not None else "<auto>"
                items.append(f"{source.get('name')}: {current}/{goal}")
        else:
            items.append("<unknown type>")
    if len(items) > 2:
        return ", ".join(items[:2]) + f" + {len(items) - 2} more..."
    return ", ".join(items)


def print_hpa(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    ref = spec.get("scaleTargetRef") or {}
    min_replicas = spec.get("minReplicas")
    return [
        meta(obj).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _hpa_metrics(spec.get("metrics"), get_path(obj, "status", "currentMetrics")),
        "<unset>" if min_replicas is None else str(as_int(min_replicas)),
        as_int(spec.get("maxReplicas")),
        as_int(get_path(obj, "status", "currentReplicas")),
        age(obj, now),
    ]


def print_ingress(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    rules = spec.get("rules") or []
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and rule.get("host"):
            hosts.append(str(rule["host"]))
    host_text = ",".join(hosts) if hosts else "*"
    if hosts and more:
        host_text = f"{host_text} + {len(rules) - 3} more..."
    return [
        meta(obj).get("name", ""),
        spec.get("ingressClassName") or "<none>",
        host_text,
        lb_ingress(obj.get("status"), True),
        "80, 443" if spec.get("tls") else "80",
        age(obj, now),
    ]


def _subjects(obj: dict[str, Any]) -> tuple[str, str, str]:
    users, groups, sas = [], [], []
    for subject in obj.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "User":
            users.append(str(subject.get("name", "")))
        elif kind == "Group":
            groups.append(str(subject.get("name", "")))
        elif kind == "ServiceAccount":
            sas.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
    return ", ".join(users), ", ".join(groups), ", ".join(sas)


def print_binding(obj: dict[str, Any], now: datetime) -> list[Any]:
    ref = obj.get("roleRef") or {}
    users, groups, sas = _subjects(obj)
    return [
        meta(obj).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        age(obj, now),
        users,
        groups,
        sas,
    ]


def print_default(obj: dict[str, Any], now: datetime) -> list[Any]:
    """The default table convertor: name and the creation time in RFC 3339 (UTC)."""
    try:
        created = parse_time(meta(obj).get("creationTimestamp"))
    except ValueError:
        created = None
    stamp = (created or datetime(1, 1, 1, tzinfo=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [meta(obj).get("name", ""), stamp]


def print_storage_class(obj: dict[str, Any], now: datetime) -> list[Any]:
    """``printStorageClass``: the default class's name carries `` (default)``."""
    annotations = meta(obj).get("annotations") or {}
    name = str(meta(obj).get("name", ""))
    if "true" in (
        annotations.get("storageclass.kubernetes.io/is-default-class"),
        annotations.get("storageclass.beta.kubernetes.io/is-default-class"),
    ):
        name += " (default)"
    return [
        name,
        str(obj.get("provisioner") or ""),
        str(obj.get("reclaimPolicy") or "Delete"),
        str(obj.get("volumeBindingMode") or "Immediate"),
        bool(obj.get("allowVolumeExpansion") or False),
        age(obj, now),
    ]


def print_crd(obj: dict[str, Any], now: datetime) -> list[Any]:
    """apiextensions' CRD table convertor (1.37): scope, served versions (sorted, the storage one
    marked), creation time; wide: group, kind, short names, whether Established."""
    spec = obj.get("spec") or {}
    versions = sorted(
        str(v.get("name", "")) + ("(storage)" if v.get("storage") else "")
        for v in spec.get("versions") or []
        if v.get("served")
    )
    names = spec.get("names") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    established = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
    name, created = print_default(obj, now)
    return [
        name,
        str(spec.get("scope") or ""),
        ",".join(versions),
        created,
        str(spec.get("group") or ""),
        str(names.get("kind") or ""),
        ",".join(names.get("shortNames") or []),
        established,
    ]

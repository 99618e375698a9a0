"""What every Table printer shares: ages (``HumanDuration``), timestamps, labels, selectors, numbers,
and the column definitions built from the API's field descriptions.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from aiplane.apimachinery import builtin
from aiplane.apimachinery.objects import meta
from aiplane.apimachinery.selectors import compile_selector


def _pair(big: int, big_unit: str, small: int, small_unit: str) -> str:
    """``5m`` or ``5m12s``: the smaller unit only when it is not zero."""
    return f"{big}{big_unit}" if small == 0 else f"{big}{big_unit}{small}{small_unit}"


def _hours_or_more(hours: int) -> str:
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _pair(hours // 24, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return _pair(hours // 24 // 365, "y", (hours // 24) % 365, "d")
    return f"{hours // 24 // 365}y"


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration`` (what kubectl shows as AGE: ``5m12s``, ``3d``, ``2y``)."""
    secs = math.trunc(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60 * 2:
        return f"{secs}s"
    minutes, hours = secs // 60, secs // 3600
    if minutes < 10:
        return _pair(minutes, "m", secs % 60, "s")
    if minutes < 60 * 3:
        return f"{minutes}m"
    if hours < 8:
        return _pair(hours, "h", minutes % 60, "m")
    return _hours_or_more(hours)


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (as ``metav1.Time`` accepts it); ``None`` if unset; ValueError if malformed."""
    if value in (None, "", "null"):
        return None
    match = _RFC3339.match(str(value))
    if match is None:
        raise ValueError(f"invalid timestamp {value!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micro = int((match.group(7) or ".0")[1:7].ljust(6, "0"))
    moment = datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    if match.group(9):
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        moment -= offset if match.group(9) == "+" else -offset
    return moment


def since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when unset."""
    try:
        moment = parse_time(value)
    except ValueError:
        return "<invalid>"
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


def object_meta_doc(field_name: str) -> str:
    return doc("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", field_name)


@functools.cache
def doc(definition: str, field_name: str) -> str:
    """The API description of a field, which is what kube's printers use as column description."""
    props = builtin.definitions().get(definition, {}).get("properties", {})
    return str((props.get(field_name) or {}).get("description", ""))


def column(name: str, kind: str, description: str, *, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


def name_column() -> dict[str, Any]:
    return column("Name", "string", object_meta_doc("name"), fmt="name")


def age_column() -> dict[str, Any]:
    return column("Age", "string", object_meta_doc("creationTimestamp"))


Row = tuple[list[Any], list[dict[str, Any]]]
Printer = Callable[[dict[str, Any], datetime], list[Any] | Row]


def get_path(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def age(obj: dict[str, Any], now: datetime) -> str:
    return since(meta(obj).get("creationTimestamp"), now)


def format_labels(labels: Any) -> str:
    """apimachinery's ``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def selector_string(selector: Any) -> str:
    """printDeployment's ``LabelSelectorAsSelector(...).String()``: empty for nil or empty selectors.
    (Where kube's printer fails on a selector that does not convert, this prints ``<error>``, as
    :func:`format_label_selector` does.)"""
    try:
        return compile_selector(selector).to_string(unique_values=False)
    except ValueError:
        return "<error>"


def containers_of(template_spec: Any) -> tuple[str, str]:
    containers = (template_spec or {}).get("containers") or [] if isinstance(template_spec, dict) else []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def as_int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return default


def int_or_string(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def quantity(value: Any) -> str:
    if value is None:
        return "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def latest(current: datetime | None, value: Any) -> datetime | None:
    try:
        moment = parse_time(value)
    except ValueError:
        return current
    if moment is None:
        return current
    return moment if current is None or moment > current else current


def is_restartable(container: Any) -> bool:
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def condition_true(conditions: Any, kind: str) -> bool:
    for condition in conditions or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False

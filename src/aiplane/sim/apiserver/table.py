"""Server-side printing: the ``meta.k8s.io`` ``Table`` kubectl asks for with
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

kube-apiserver prints built-in kinds with the handlers of ``pkg/printers/internalversion`` (always with
the wide columns; kubectl hides ``priority > 0`` columns unless ``-o wide``), kinds without a handler
with the default table convertor (Name, Created At), and custom resources with apiextensions'
table convertor: the CRD version's ``additionalPrinterColumns`` evaluated with client-go's JSONPath
(Name + Age when there are none). This module does the same on plain dicts.

Each row carries ``object`` as the request's ``includeObject`` asks: ``Metadata`` (the default, a
``PartialObjectMetadata``), ``Object`` (the whole object) or ``None``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from aiohttp import web

from aiplane.apimachinery import builtin
from aiplane.apimachinery.selectors import compile_selector, format_label_selector
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.discovery import parse_accept
from aiplane.sim.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from aiplane.sim.apiserver.server import ApiServer

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("", "Metadata", "None", "Object")


# --- negotiation ----------------------------------------------------------------------------------


def table_version(request: web.Request) -> str | None:
    """``v1``/``v1beta1`` when the best acceptable ``Accept`` clause asks for a Table, else ``None``."""
    for clause in parse_accept(request.headers.get("Accept")):
        if not clause.matches_json():
            continue
        convert = clause.convert
        if convert is None:
            return None
        group, version, kind = convert
        if kind == "Table" and group == TABLE_GROUP and version in TABLE_VERSIONS:
            return version
    return None


def wants_table(request: web.Request) -> bool:
    """Whether the response must be a ``Table`` (kube's ``as=Table;v=v1;g=meta.k8s.io`` negotiation)."""
    return table_version(request) is not None


def include_object(request: web.Request) -> str:
    """The ``includeObject`` table option (``Metadata`` when unset); 400 for an unknown value."""
    value = request.query.get("includeObject", "")
    if value not in INCLUDE_OBJECT_VALUES:
        supported = ", ".join(f'"{v}"' for v in INCLUDE_OBJECT_VALUES)
        raise errors.bad_request(
            "Unable to convert to Table as requested: includeObject: Unsupported value: "
            f'"{value}": supported values: {supported}'
        )
    return value or "Metadata"


# --- time -----------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration`` (what kubectl shows as AGE: ``5m12s``, ``3d``, ``2y``)."""
    secs = math.trunc(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60 * 2:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        rem = secs % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


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


# --- JSONPath (client-go's util/jsonpath subset used by printer columns) ---------------------------


class JSONPathError(ValueError):
    pass


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Recursive:
    pass


@dataclass(frozen=True)
class _Wildcard:
    pass


@dataclass(frozen=True)
class _Slice:
    start: int | None
    end: int | None
    step: int | None
    single: bool


@dataclass(frozen=True)
class _Union:
    keys: tuple[_Field | _Slice, ...]


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Filter:
    left: tuple[Any, ...]
    op: str  # ==, !=, <, >, <=, >=, exists
    right: tuple[Any, ...]


_FILTER_SPLIT = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.S)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")


class JSONPath:
    """One printer-column JSONPath (``.status.conditions[?(@.type=="Ready")].status``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        source = text.strip()
        if source.startswith("{") and source.endswith("}"):
            source = source[1:-1]
        self.nodes = _parse_path(source)

    def find(self, data: Any) -> list[Any]:
        """Every value the path selects (missing keys select nothing). Raises JSONPathError."""
        return _evaluate(self.nodes, [data], data)


def _parse_path(text: str) -> tuple[Any, ...]:
    nodes: list[Any] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or (ch in "$@" and not nodes):
            i += 1
        elif text.startswith("..", i):
            nodes.append(_Recursive())
            i += 2
            i = _parse_field(text, i, nodes)
        elif ch == ".":
            i = _parse_field(text, i + 1, nodes)
        elif ch == "[":
            i = _parse_bracket(text, i, nodes)
        elif ch in ("'", '"') and not nodes:
            end = text.find(ch, i + 1)
            if end < 0:
                raise JSONPathError(f"unterminated quoted string in {text!r}")
            nodes.append(_Literal(text[i + 1 : end]))
            i = end + 1
        elif not nodes and (_NUMBER.match(text[i:].strip()) or text[i:].strip() in ("true", "false")):
            literal = text[i:].strip()
            if literal in ("true", "false"):
                nodes.append(_Literal(literal == "true"))
            elif re.fullmatch(r"-?\d+", literal):
                nodes.append(_Literal(int(literal)))
            else:
                nodes.append(_Literal(float(literal)))
            i = n
        else:
            raise JSONPathError(f"unrecognized character in action: {ch!r} in {text!r}")
    return tuple(nodes)


def _parse_field(text: str, i: int, nodes: list[Any]) -> int:
    name: list[str] = []
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            name.append(text[i + 1])
            i += 2
            continue
        if ch.isspace() or ch in ".,[]$@{}":
            break
        name.append(ch)
        i += 1
    value = "".join(name)
    nodes.append(_Wildcard() if value == "*" else _Field(value))
    return i


def _parse_bracket(text: str, i: int, nodes: list[Any]) -> int:
    if text.startswith("[?(", i):
        end = text.find(")]", i)
        if end < 0:
            raise JSONPathError(f"unclosed filter in {text!r}")
        nodes.append(_parse_filter(text[i + 3 : end]))
        return end + 2
    depth_quote: str | None = None
    j = i + 1
    while j < len(text):
        ch = text[j]
        if depth_quote:
            if ch == depth_quote:
                depth_quote = None
        elif ch in ("'", '"'):
            depth_quote = ch
        elif ch == "]":
            break
        j += 1
    else:
        raise JSONPathError(f"unclosed array expect ] in {text!r}")
    inner = text[i + 1 : j].strip()
    if inner == "*":
        nodes.append(_Wildcard())
        return j + 1
    keys: list[_Field | _Slice] = []
    for raw in _split_union(inner):
        part = raw.strip()
        if len(part) >= 2 and part[0] == part[-1] and part[0] in ("'", '"'):
            keys.append(_Field(part[1:-1]))
            continue
        pieces = part.split(":")
        if len(pieces) > 3:
            raise JSONPathError(f"invalid array index {part!r}")
        try:
            values = [int(p) if p.strip() else None for p in pieces]
        except ValueError as exc:
            raise JSONPathError(f"invalid array index {part!r}") from exc
        if len(values) == 1:
            keys.append(_Slice(values[0], None, None, True))
        else:
            keys.append(_Slice(values[0], values[1], values[2] if len(values) > 2 else None, False))
    if len(keys) == 1:
        nodes.append(keys[0])
    else:
        nodes.append(_Union(tuple(keys)))
    return j + 1


def _split_union(text: str) -> list[str]:
    parts, current, quote = [], [], None
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
            current.append(ch)
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse_filter(text: str) -> _Filter:
    match = _FILTER_SPLIT.match(text)
    if match is None:
        return _Filter(_parse_path(text), "exists", ())
    op = match.group(2)
    if op not in ("==", "!=", "<", ">", "<=", ">="):
        raise JSONPathError(f"unrecognized filter operator {op}")
    return _Filter(_parse_path(match.group(1)), op, _parse_path(match.group(3)))


def _evaluate(nodes: tuple[Any, ...], current: list[Any], root: Any) -> list[Any]:
    for node in nodes:
        current = _step(node, current, root)
    return current


def _step(node: Any, values: list[Any], root: Any) -> list[Any]:
    out: list[Any] = []
    if isinstance(node, _Literal):
        return [node.value]
    if isinstance(node, _Field):
        for value in values:
            if node.name == "":
                out.append(value)
            elif isinstance(value, dict) and node.name in value and value[node.name] is not None:
                out.append(value[node.name])
        return out
    if isinstance(node, _Wildcard):
        for value in values:
            if isinstance(value, dict):
                out.extend(v for _, v in sorted(value.items()))
            elif isinstance(value, list):
                out.extend(value)
        return out
    if isinstance(node, _Recursive):
        for value in values:
            out.extend(_descendants(value))
        return out
    if isinstance(node, _Slice):
        for value in values:
            if not isinstance(value, list):
                raise JSONPathError(f"{_go_print(value)} is not array or slice")
            out.extend(_slice(value, node))
        return out
    if isinstance(node, _Union):
        for key in node.keys:
            out.extend(_step(key, values, root))
        return out
    if isinstance(node, _Filter):
        for value in values:
            if not isinstance(value, list):
                raise JSONPathError(f"{_go_print(value)} is not array or slice and cannot be filtered")
            out.extend(item for item in value if _filter_passes(node, item, root))
        return out
    raise JSONPathError(f"unexpected node {node!r}")


def _descendants(value: Any) -> list[Any]:
    out = [value]
    if isinstance(value, dict):
        for _, sub in sorted(value.items()):
            out.extend(_descendants(sub))
    elif isinstance(value, list):
        for sub in value:
            out.extend(_descendants(sub))
    return out


def _slice(value: list[Any], node: _Slice) -> list[Any]:
    length = len(value)
    start = node.start if node.start is not None else 0
    if start < 0:
        start += length
    if node.single:
        end = start + 1
    else:
        end = node.end if node.end is not None else length
        if end < 0:
            end += length
    if end == start:
        return []
    if start >= length or start < 0:
        raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
    if end > length or end < 0:
        raise JSONPathError(f"array index out of bounds: index {end - 1}, length {length}")
    if start > end:
        raise JSONPathError(f"starting index {start} is greater than ending index {end}")
    step = node.step if node.step is not None else 1
    if step <= 0:
        raise JSONPathError("step must be > 0")
    return value[start:end:step]


def _filter_passes(node: _Filter, item: Any, root: Any) -> bool:
    lefts = _evaluate(node.left, [item], root)
    if node.op == "exists":
        return bool(lefts)
    if not lefts:
        return False
    if len(lefts) > 1:
        raise JSONPathError("can only compare one element at a time")
    rights = _evaluate(node.right, [item], root)
    if not rights:
        return False
    if len(rights) > 1:
        raise JSONPathError("can only compare one element at a time")
    return _compare(lefts[0], node.op, rights[0])


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "other"


def _compare(left: Any, op: str, right: Any) -> bool:
    """text/template's eq/ne/lt/le/gt/ge: same basic kind only (int and float do not mix)."""
    kind = _kind(left)
    if kind != _kind(right) or kind == "other":
        raise JSONPathError("incompatible types for comparison")
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if kind == "bool":
        raise JSONPathError("invalid type for comparison")
    results: dict[str, bool] = {
        "<": left < right,
        ">": left > right,
        "<=": left <= right,
        ">=": left >= right,
    }
    return results[op]


def _go_float(value: float) -> str:
    """Go's ``%v`` of a float64: the shortest digits, in exponent form below 1e-4 and from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple)
    point = len(digits) + exponent  # value = 0.<digits> * 10**point
    prefix = "-" if sign else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return prefix + digits + "0" * (point - len(digits))
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def go_print(value: Any) -> str:
    """How client-go's JSONPath prints a value (Go's ``fmt.Fprint`` of the decoded JSON)."""
    return _go_print(value)


def _go_print(value: Any) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(_go_print(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_print(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)


# --- custom resources -----------------------------------------------------------------------------


def _object_meta_doc(field_name: str) -> str:
    return _doc("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", field_name)


@functools.cache
def _doc(definition: str, field_name: str) -> str:
    """The API description of a field, which is what kube's printers use as column description."""
    props = builtin.definitions().get(definition, {}).get("properties", {})
    return str((props.get(field_name) or {}).get("description", ""))


def _column(name: str, kind: str, description: str, *, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


def _name_column() -> dict[str, Any]:
    return _column("Name", "string", _object_meta_doc("name"), fmt="name")


def _age_column() -> dict[str, Any]:
    return _column("Age", "string", _object_meta_doc("creationTimestamp"))


def crd_columns(rt: ResourceType) -> tuple[list[dict[str, Any]], list[JSONPath | None]]:
    """apiextensions' table convertor columns (Name first) and their compiled paths."""
    columns = [_name_column()]
    paths: list[JSONPath | None] = []
    printer = list(rt.printer_columns) or [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": _object_meta_doc("creationTimestamp"),
        }
    ]
    for col in printer:
        json_path = str(col.get("jsonPath", ""))
        try:
            paths.append(JSONPath(json_path))
        except JSONPathError:
            paths.append(None)
        columns.append(
            _column(
                str(col.get("name", "")),
                str(col.get("type", "string")),
                str(
                    col.get("description")
                    or f"Custom resource definition column (in JSONPath format): {json_path}"
                ),
                priority=int(col.get("priority", 0) or 0),
                fmt=str(col.get("format", "") or ""),
            )
        )
    return columns, paths


def cell_for_json_value(kind: str, value: Any, now: datetime) -> Any:
    """apiextensions' ``cellForJSONValue`` for non-string columns."""
    if value is None:
        return None
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return int(value)
        return None
    if kind == "number":
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return float(value)
        return None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "string":
        return value if isinstance(value, str) else None
    if kind == "date":
        if not isinstance(value, str):
            return None
        try:
            moment = parse_time(value)
        except ValueError:
            return "<invalid>"
        if moment is None:
            return "<unknown>"
        return human_duration((now - moment).total_seconds())
    return None


def _custom_cells(
    obj: dict[str, Any], columns: list[dict[str, Any]], paths: list[JSONPath | None], now: datetime
) -> list[Any]:
    cells: list[Any] = [obj.get("metadata", {}).get("name", "")]
    for column, path in zip(columns[1:], paths, strict=True):
        if path is None:
            cells.append(None)
            continue
        try:
            results = path.find(obj)
        except JSONPathError:
            results = []
        if not results:
            cells.append(None)
            continue
        value = results[0]
        if column["type"] == "string":
            cells.append(None if value is None else _go_print(value))
        else:
            cells.append(cell_for_json_value(column["type"], value, now))
    return cells


# --- built-in printers ----------------------------------------------------------------------------

Row = tuple[list[Any], list[dict[str, Any]]]
Printer = Callable[[dict[str, Any], datetime], list[Any] | Row]


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _age(obj: dict[str, Any], now: datetime) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


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


def _containers(template_spec: Any) -> tuple[str, str]:
    containers = (template_spec or {}).get("containers") or [] if isinstance(template_spec, dict) else []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return default


def _int_or_string(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _quantity(value: Any) -> str:
    if value is None:
        return "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _latest(current: datetime | None, value: Any) -> datetime | None:
    try:
        moment = parse_time(value)
    except ValueError:
        return current
    if moment is None:
        return current
    return moment if current is None or moment > current else current


def _restartable(container: Any) -> bool:
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _condition_true(conditions: Any, kind: str) -> bool:
    for condition in conditions or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False


def print_pod(pod: dict[str, Any], now: datetime) -> Row:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = spec.get("containers") or []
    init_specs = spec.get("initContainers") or []
    restarts = 0
    init_restarts = 0
    total = len(containers)
    ready = 0
    last_restart: datetime | None = None
    last_init_restart: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    conditions: list[dict[str, Any]] = []
    if phase == "Succeeded":
        conditions = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    elif phase == "Failed":
        conditions = [
            {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
        ]
    init_by_name = {c.get("name"): c for c in init_specs if isinstance(c, dict)}
    total += sum(1 for c in init_specs if _restartable(c))
    initializing = False
    for index, cs in enumerate(status.get("initContainerStatuses") or []):
        count = _int(cs.get("restartCount"))
        restarts += count
        terminated_last = _get(cs, "lastState", "terminated")
        if isinstance(terminated_last, dict):
            last_restart = _latest(last_restart, terminated_last.get("finishedAt"))
        restartable = _restartable(init_by_name.get(cs.get("name")))
        if restartable:
            init_restarts += count
            if isinstance(terminated_last, dict):
                last_init_restart = _latest(last_init_restart, terminated_last.get("finishedAt"))
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if restartable and cs.get("started") is True:
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, dict):
            if not terminated.get("reason"):
                signal = _int(terminated.get("signal"))
                reason = (
                    f"Init:Signal:{signal}" if signal else f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
                )
            else:
                reason = "Init:" + str(terminated["reason"])
        elif (
            isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing"
        ):
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        restarts = init_restarts
        last_restart = last_init_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += _int(cs.get("restartCount"))
            terminated_last = _get(cs, "lastState", "terminated")
            if isinstance(terminated_last, dict):
                last_restart = _latest(last_restart, terminated_last.get("finishedAt"))
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif isinstance(terminated, dict):
                signal = _int(terminated.get("signal"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(status.get("conditions"), "Ready") else "NotReady"
    deleting = _meta(pod).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips and isinstance(pod_ips[0], dict) else None) or status.get(
        "podIP"
    )
    gates = spec.get("readinessGates") or []
    readiness = "<none>"
    if gates:
        true_count = 0
        for gate in gates:
            for condition in status.get("conditions") or []:
                if condition.get("type") == gate.get("conditionType"):
                    if condition.get("status") == "True":
                        true_count += 1
                    break
        readiness = f"{true_count}/{len(gates)}"
    cells = [
        _meta(pod).get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        pod_ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness,
    ]
    return cells, conditions


def print_node(node: dict[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    states: list[str] = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            states = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    return [
        _meta(node).get("name", ""),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def print_namespace(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), str(_get(obj, "status", "phase") or ""), _age(obj, now)]


def print_configmap(obj: dict[str, Any], now: datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [_meta(obj).get("name", ""), count, _age(obj, now)]


def print_secret(obj: dict[str, Any], now: datetime) -> list[Any]:
    # kube defaults an empty type to Opaque on create; show what a real server would have stored.
    kind = obj.get("type") or "Opaque"
    return [_meta(obj).get("name", ""), kind, len(obj.get("data") or {}), _age(obj, now)]


def print_service_account(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), len(obj.get("secrets") or []), _age(obj, now)]


def _lb_ingress(status: Any, wide: bool) -> str:
    found = set()
    for ingress in _get(status, "loadBalancer", "ingress") or []:
        if ingress.get("ip"):
            found.add(str(ingress["ip"]))
        elif ingress.get("hostname"):
            found.add(str(ingress["hostname"]))
    text = ",".join(sorted(found))
    if not wide and len(text) > 16:
        text = text[:13] + "..."
    return text


def print_service(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    external_ips = [str(ip) for ip in spec.get("externalIPs") or []]
    if kind in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) or "<none>"
    elif kind == "LoadBalancer":
        lb = _lb_ingress(obj.get("status"), True)
        if external_ips:
            external = ",".join([*(lb.split(",") if lb else []), *external_ips])
        else:
            external = lb or "<pending>"
    elif kind == "ExternalName":
        external = str(spec.get("externalName") or "")
    else:
        external = "<unknown>"
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        if _int(port.get("nodePort")) > 0:
            ports.append(f"{port.get('port')}:{port.get('nodePort')}/{protocol}")
        else:
            ports.append(f"{port.get('port')}/{protocol}")
    return [
        _meta(obj).get("name", ""),
        kind,
        cluster_ips[0] if cluster_ips else "<none>",
        external,
        ",".join(ports) or "<none>",
        _age(obj, now),
        format_labels(spec.get("selector")),
    ]


def print_endpoints(obj: dict[str, Any], now: datetime) -> list[Any]:
    subsets = obj.get("subsets") or []
    if not subsets:
        text = "<none>"
    else:
        items: list[str] = []
        count = 0
        more = False
        for subset in subsets:
            addresses = subset.get("addresses") or []
            ports = subset.get("ports") or []
            if not ports:
                count += len(addresses)
                for address in addresses:
                    if len(items) == 3:
                        more = True
                        break
                    items.append(str(address.get("ip", "")))
                continue
            for port in ports:
                count += len(addresses)
                for address in addresses:
                    if len(items) == 3:
                        more = True
                        break
                    ip = str(address.get("ip", ""))
                    host = f"[{ip}]" if ":" in ip else ip
                    items.append(f"{host}:{port.get('port')}")
        text = ",".join(items)
        if more:
            text = f"{text} + {count - 3} more..."
    return [_meta(obj).get("name", ""), text, _age(obj, now)]


def print_event(obj: dict[str, Any], now: datetime) -> list[Any]:
    """Core v1 events and events.k8s.io/v1 events (converted to the core fields first, as kube does)."""
    if str(obj.get("apiVersion", "")).startswith("events.k8s.io/"):
        obj = {
            "metadata": obj.get("metadata"),
            "involvedObject": obj.get("regarding") or {},
            "reason": obj.get("reason"),
            "message": obj.get("note"),
            "source": obj.get("deprecatedSource") or {},
            "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
            "lastTimestamp": obj.get("deprecatedLastTimestamp"),
            "count": obj.get("deprecatedCount"),
            "type": obj.get("type"),
            "eventTime": obj.get("eventTime"),
            "series": obj.get("series"),
            "reportingComponent": obj.get("reportingController"),
            "reportingInstance": obj.get("reportingInstance"),
        }
    first = (
        since(obj.get("firstTimestamp"), now)
        if obj.get("firstTimestamp")
        else since(obj.get("eventTime"), now)
    )
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return [
        last,
        str(obj.get("type") or ""),
        str(obj.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        f"{component}, {instance}" if instance else str(component),
        str(obj.get("message") or "").strip(),
        first,
        count,
        _meta(obj).get("name", ""),
    ]


def print_pvc(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = "Terminating" if _meta(obj).get("deletionTimestamp") else str(status.get("phase") or "")
    capacity = ""
    modes = ""
    if spec.get("volumeName"):
        modes = access_modes(status.get("accessModes"))
        capacity = _quantity((status.get("capacity") or {}).get("storage"))
    storage_class = spec.get("storageClassName")
    if storage_class is None:
        storage_class = (_meta(obj).get("annotations") or {}).get(
            "volume.beta.kubernetes.io/storage-class", ""
        )
    return [
        _meta(obj).get("name", ""),
        phase,
        str(spec.get("volumeName") or ""),
        capacity,
        modes,
        str(storage_class or ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(obj, now),
        spec.get("volumeMode") or "<unset>",
    ]


def access_modes(modes: Any) -> str:
    present = set(modes or [])
    short = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    return ",".join(s for mode, s in short if mode in present)


def print_deployment(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(obj).get("name", ""),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'), 1)}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def print_statefulset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(obj).get("name", ""),
        f"{_int(_get(obj, 'status', 'readyReplicas'))}/{_int(spec.get('replicas'), 1)}",
        _age(obj, now),
        names,
        images,
    ]


def print_daemonset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(obj).get("name", ""),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        format_labels(_get(spec, "template", "spec", "nodeSelector")),
        _age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_replicaset(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(obj).get("name", ""),
        _int(spec.get("replicas"), 1),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_controller_revision(obj: dict[str, Any], now: datetime) -> list[Any]:
    controller = "<none>"
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", ""))
            group_kind = f"{kind}.{group}" if group else kind
            controller = f"{group_kind.lower()}/{ref.get('name', '')}" if kind else str(ref.get("name", ""))
            break
    return [_meta(obj).get("name", ""), controller, _int(obj.get("revision")), _age(obj, now)]


def print_job(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    else:
        parallelism = _int(spec.get("parallelism"))
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
    if _condition_true(conditions, "Complete"):
        state = "Complete"
    elif _condition_true(conditions, "Failed"):
        state = "Failed"
    elif _meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif _condition_true(conditions, "Suspended"):
        state = "Suspended"
    elif _condition_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _meta(obj).get("name", ""),
        state,
        completions,
        duration,
        _age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_pdb(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    return [
        _meta(obj).get("name", ""),
        "N/A" if min_available is None else _int_or_string(min_available),
        "N/A" if max_unavailable is None else _int_or_string(max_unavailable),
        _int(_get(obj, "status", "disruptionsAllowed")),
        _age(obj, now),
    ]


def print_lease(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), str(_get(obj, "spec", "holderIdentity") or ""), _age(obj, now)]


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
            target = _get(metric, "external", "target") or {}
            current_metric = _get(status, "external", "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    _quantity(current_metric.get("averageValue"))
                    if current_metric.get("averageValue") is not None
                    else "<unknown>"
                )
                items.append(f"{current}/{_quantity(target.get('averageValue'))} (avg)")
            else:
                current = _quantity(current_metric.get("value")) if _get(status, "external") else "<unknown>"
                items.append(f"{current}/{_quantity(target.get('value'))}")
        elif kind == "Pods":
            target = _get(metric, "pods", "target") or {}
            current = (
                _quantity(_get(status, "pods", "current", "averageValue"))
                if _get(status, "pods")
                else "<unknown>"
            )
            items.append(f"{current}/{_quantity(target.get('averageValue'))}")
        elif kind == "Object":
            target = _get(metric, "object", "target") or {}
            current_metric = _get(status, "object", "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    _quantity(current_metric.get("averageValue"))
                    if current_metric.get("averageValue") is not None
                    else "<unknown>"
                )
                items.append(f"{current}/{_quantity(target.get('averageValue'))} (avg)")
            else:
                current = _quantity(current_metric.get("value")) if _get(status, "object") else "<unknown>"
                items.append(f"{current}/{_quantity(target.get('value'))}")
        elif kind in ("Resource", "ContainerResource"):
            field_name = "resource" if kind == "Resource" else "containerResource"
            source = metric.get(field_name) or {}
            target = source.get("target") or {}
            current_metric = _get(status, field_name, "current") or {}
            if target.get("averageValue") is not None:
                current = (
                    _quantity(current_metric.get("averageValue")) if _get(status, field_name) else "<unknown>"
                )
                items.append(f"{source.get('name')}: {current}/{_quantity(target.get('averageValue'))}")
            else:
                utilization = current_metric.get("averageUtilization")
                current = f"{_int(utilization)}%" if utilization is not None else "<unknown>"
                wanted = target.get("averageUtilization")
                goal = f"{_int(wanted)}%" if wanted is not None else "<auto>"
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
        _meta(obj).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _hpa_metrics(spec.get("metrics"), _get(obj, "status", "currentMetrics")),
        "<unset>" if min_replicas is None else str(_int(min_replicas)),
        _int(spec.get("maxReplicas")),
        _int(_get(obj, "status", "currentReplicas")),
        _age(obj, now),
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
        _meta(obj).get("name", ""),
        spec.get("ingressClassName") or "<none>",
        host_text,
        _lb_ingress(obj.get("status"), True),
        "80, 443" if spec.get("tls") else "80",
        _age(obj, now),
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
        _meta(obj).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        users,
        groups,
        sas,
    ]


def print_default(obj: dict[str, Any], now: datetime) -> list[Any]:
    """The default table convertor: name and the creation time in RFC 3339 (UTC)."""
    try:
        created = parse_time(_meta(obj).get("creationTimestamp"))
    except ValueError:
        created = None
    stamp = (created or datetime(1, 1, 1, tzinfo=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [_meta(obj).get("name", ""), stamp]


_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."


@functools.cache
def _builtin_printers() -> dict[tuple[str, str], tuple[tuple[dict[str, Any], ...], Printer]]:
    """Column definitions and row printer of each built-in kind kube has a print handler for."""
    name, age = _name_column(), _age_column()
    core = "io.k8s.api.core.v1."
    apps = "io.k8s.api.apps.v1."

    def c(col: str, kind: str, doc: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
        return _column(col, kind, doc, priority=priority, fmt=fmt)

    wide_workload = (
        c("Containers", "string", _CONTAINERS_DOC, 1),
        c("Images", "string", _IMAGES_DOC, 1),
    )
    binding_columns = (
        name,
        c("Role", "string", _doc("io.k8s.api.rbac.v1.RoleBinding", "roleRef")),
        age,
        c("Users", "string", "Users in the roleBinding", 1),
        c("Groups", "string", "Groups in the roleBinding", 1),
        c("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", 1),
    )
    cluster_binding_columns = (
        name,
        c("Role", "string", _doc("io.k8s.api.rbac.v1.ClusterRoleBinding", "roleRef")),
        age,
        c("Users", "string", "Users in the clusterRoleBinding", 1),
        c("Groups", "string", "Groups in the clusterRoleBinding", 1),
        c("ServiceAccounts", "string", "ServiceAccounts in the clusterRoleBinding", 1),
    )
    event_columns = (
        c("Last Seen", "string", _doc(core + "Event", "lastTimestamp")),
        c("Type", "string", _doc(core + "Event", "type")),
        c("Reason", "string", _doc(core + "Event", "reason")),
        c("Object", "string", _doc(core + "Event", "involvedObject")),
        c("Subobject", "string", _doc(core + "ObjectReference", "fieldPath"), 1),
        c("Source", "string", _doc(core + "Event", "source"), 1),
        c("Message", "string", _doc(core + "Event", "message")),
        c("First Seen", "string", _doc(core + "Event", "firstTimestamp"), 1),
        c("Count", "string", _doc(core + "Event", "count"), 1),
        c("Name", "string", _object_meta_doc("name"), 1, "name"),
    )
    return {
        ("", "Pod"): (
            (
                name,
                c("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
                c("Status", "string", "The aggregate status of the containers in this pod."),
                c(
                    "Restarts",
                    "string",
                    "The number of times the containers in this pod have been restarted and when the last "
                    "container in this pod has restarted.",
                ),
                age,
                c("IP", "string", _doc(core + "PodStatus", "podIP"), 1),
                c("Node", "string", _doc(core + "PodSpec", "nodeName"), 1),
                c("Nominated Node", "string", _doc(core + "PodStatus", "nominatedNodeName"), 1),
                c("Readiness Gates", "string", _doc(core + "PodSpec", "readinessGates"), 1),
            ),
            print_pod,
        ),
        ("", "Node"): (
            (
                name,
                c("Status", "string", "The status of the node"),
                c("Roles", "string", "The roles of the node"),
                age,
                c("Version", "string", _doc(core + "NodeSystemInfo", "kubeletVersion")),
                c("Internal-IP", "string", _doc(core + "NodeStatus", "addresses"), 1),
                c("External-IP", "string", _doc(core + "NodeStatus", "addresses"), 1),
                c("OS-Image", "string", _doc(core + "NodeSystemInfo", "osImage"), 1),
                c("Kernel-Version", "string", _doc(core + "NodeSystemInfo", "kernelVersion"), 1),
                c("Container-Runtime", "string", _doc(core + "NodeSystemInfo", "containerRuntimeVersion"), 1),
            ),
            print_node,
        ),
        ("", "Namespace"): (
            (name, c("Status", "string", "The status of the namespace"), age),
            print_namespace,
        ),
        ("", "ConfigMap"): (
            (name, c("Data", "string", _doc(core + "ConfigMap", "data")), age),
            print_configmap,
        ),
        ("", "Secret"): (
            (
                name,
                c("Type", "string", _doc(core + "Secret", "type")),
                c("Data", "string", _doc(core + "Secret", "data")),
                age,
            ),
            print_secret,
        ),
        ("", "ServiceAccount"): (
            (name, c("Secrets", "string", _doc(core + "ServiceAccount", "secrets")), age),
            print_service_account,
        ),
        ("", "Service"): (
            (
                name,
                c("Type", "string", _doc(core + "ServiceSpec", "type")),
                c("Cluster-IP", "string", _doc(core + "ServiceSpec", "clusterIP")),
                c("External-IP", "string", _doc(core + "ServiceSpec", "externalIPs")),
                c("Port(s)", "string", _doc(core + "ServiceSpec", "ports")),
                age,
                c("Selector", "string", _doc(core + "ServiceSpec", "selector"), 1),
            ),
            print_service,
        ),
        ("", "Endpoints"): (
            (name, c("Endpoints", "string", _doc(core + "Endpoints", "subsets")), age),
            print_endpoints,
        ),
        ("", "Event"): (event_columns, print_event),
        ("events.k8s.io", "Event"): (event_columns, print_event),
        ("", "PersistentVolumeClaim"): (
            (
                name,
                c("Status", "string", _doc(core + "PersistentVolumeClaimStatus", "phase")),
                c("Volume", "string", _doc(core + "PersistentVolumeClaimSpec", "volumeName")),
                c("Capacity", "string", _doc(core + "PersistentVolumeClaimStatus", "capacity")),
                c("Access Modes", "string", _doc(core + "PersistentVolumeClaimStatus", "accessModes")),
                c("StorageClass", "string", "StorageClass of the pvc"),
                c("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
                age,
                c("VolumeMode", "string", _doc(core + "PersistentVolumeClaimSpec", "volumeMode"), 1),
            ),
            print_pvc,
        ),
        ("apps", "Deployment"): (
            (
                name,
                c("Ready", "string", "Number of the pod with ready state"),
                c("Up-to-date", "string", _doc(apps + "DeploymentStatus", "updatedReplicas")),
                c("Available", "string", _doc(apps + "DeploymentStatus", "availableReplicas")),
                age,
                *wide_workload,
                c("Selector", "string", _doc(apps + "DeploymentSpec", "selector"), 1),
            ),
            print_deployment,
        ),
        ("apps", "StatefulSet"): (
            (name, c("Ready", "string", "Number of the pod with ready state"), age, *wide_workload),
            print_statefulset,
        ),
        ("apps", "DaemonSet"): (
            (
                name,
                c("Desired", "integer", _doc(apps + "DaemonSetStatus", "desiredNumberScheduled")),
                c("Current", "integer", _doc(apps + "DaemonSetStatus", "currentNumberScheduled")),
                c("Ready", "integer", _doc(apps + "DaemonSetStatus", "numberReady")),
                c("Up-to-date", "integer", _doc(apps + "DaemonSetStatus", "updatedNumberScheduled")),
                c("Available", "integer", _doc(apps + "DaemonSetStatus", "numberAvailable")),
                c("Node Selector", "string", _doc(core + "PodSpec", "nodeSelector")),
                age,
                *wide_workload,
                c("Selector", "string", _doc(apps + "DaemonSetSpec", "selector"), 1),
            ),
            print_daemonset,
        ),
        ("apps", "ReplicaSet"): (
            (
                name,
                c("Desired", "integer", _doc(apps + "ReplicaSetSpec", "replicas")),
                c("Current", "integer", _doc(apps + "ReplicaSetStatus", "replicas")),
                c("Ready", "integer", _doc(apps + "ReplicaSetStatus", "readyReplicas")),
                age,
                *wide_workload,
                c("Selector", "string", _doc(apps + "ReplicaSetSpec", "selector"), 1),
            ),
            print_replicaset,
        ),
        ("apps", "ControllerRevision"): (
            (
                name,
                c("Controller", "string", "Controller of the object"),
                c("Revision", "string", _doc(apps + "ControllerRevision", "revision")),
                age,
            ),
            print_controller_revision,
        ),
        ("batch", "Job"): (
            (
                name,
                c("Status", "string", "Status of the job."),
                c("Completions", "string", _doc("io.k8s.api.batch.v1.JobStatus", "succeeded")),
                c("Duration", "string", "Time required to complete the job."),
                age,
                *wide_workload,
                c("Selector", "string", _doc("io.k8s.api.batch.v1.JobSpec", "selector"), 1),
            ),
            print_job,
        ),
        ("policy", "PodDisruptionBudget"): (
            (
                name,
                c("Min Available", "string", "The minimum number of pods that must be available."),
                c("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
                c(
                    "Allowed Disruptions",
                    "integer",
                    "Calculated number of pods that may be disrupted at this time.",
                ),
                age,
            ),
            print_pdb,
        ),
        ("coordination.k8s.io", "Lease"): (
            (
                name,
                c("Holder", "string", _doc("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")),
                age,
            ),
            print_lease,
        ),
        ("autoscaling", "HorizontalPodAutoscaler"): (
            (
                name,
                c(
                    "Reference",
                    "string",
                    _doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "scaleTargetRef"),
                ),
                c(
                    "Targets",
                    "string",
                    _doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "metrics"),
                ),
                c(
                    "MinPods",
                    "string",
                    _doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "minReplicas"),
                ),
                c(
                    "MaxPods",
                    "string",
                    _doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", "maxReplicas"),
                ),
                c(
                    "Replicas",
                    "string",
                    _doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "currentReplicas"),
                ),
                age,
            ),
            print_hpa,
        ),
        ("networking.k8s.io", "Ingress"): (
            (
                name,
                c(
                    "Class",
                    "string",
                    "The name of the IngressClass resource that should be used for additional configuration",
                ),
                c(
                    "Hosts",
                    "string",
                    "Hosts that incoming requests are matched against before the ingress rule",
                ),
                c("Address", "string", "Address is a list containing ingress points for the load-balancer"),
                c("Ports", "string", "Ports of TLS configurations that open"),
                age,
            ),
            print_ingress,
        ),
        ("rbac.authorization.k8s.io", "RoleBinding"): (binding_columns, print_binding),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (cluster_binding_columns, print_binding),
    }


def default_columns() -> list[dict[str, Any]]:
    """The default table convertor's columns (kinds without a print handler: roles, CRDs, ...)."""
    return [_name_column(), _column("Created At", "date", _object_meta_doc("creationTimestamp"))]


def columns_for(rt: ResourceType) -> list[dict[str, Any]]:
    """The column definitions of a kind's Table."""
    if rt.is_custom:
        return crd_columns(rt)[0]
    found = _builtin_printers().get((rt.group, rt.kind))
    return [dict(c) for c in found[0]] if found else default_columns()


# --- the Table ------------------------------------------------------------------------------------


def partial_object_metadata(obj: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{TABLE_GROUP}/{version}", "metadata": _meta(obj)}


def rows_for(
    rt: ResourceType, objs: list[dict[str, Any]], now: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(column definitions, rows without ``object``) for ``objs`` of type ``rt``."""
    rows: list[dict[str, Any]] = []
    if rt.is_custom:
        columns, paths = crd_columns(rt)
        for obj in objs:
            rows.append({"cells": _custom_cells(obj, columns, paths, now)})
        return columns, rows
    found = _builtin_printers().get((rt.group, rt.kind))
    if found is None:
        return default_columns(), [{"cells": print_default(obj, now)} for obj in objs]
    column_defs, printer = found
    for obj in objs:
        printed = printer(obj, now)
        if isinstance(printed, tuple):
            cells, conditions = printed
            row: dict[str, Any] = {"cells": cells}
            if conditions:
                row["conditions"] = conditions
        else:
            row = {"cells": printed}
        rows.append(row)
    return [dict(c) for c in column_defs], rows


def to_table(
    server: ApiServer,
    rt: ResourceType,
    objs: list[dict[str, Any]],
    request: web.Request,
    *,
    list_rv: str,
    continue_token: str | None = None,
    remaining: int | None = None,
    include_column_definitions: bool = True,
) -> dict[str, Any]:
    """The ``Table`` kube-apiserver answers a GET/LIST/write (or sends per watch event) with.

    ``include_column_definitions=False`` is kube's ``noHeaders`` (watch events after the first):
    ``columnDefinitions`` is then ``null``.
    """
    version = table_version(request) or "v1"
    include = include_object(request)
    now = server.api.clock()
    columns, rows = rows_for(rt, objs, now)
    for row, obj in zip(rows, objs, strict=True):
        if include == "Object":
            row["object"] = obj
        elif include == "None":
            row["object"] = None
        else:
            row["object"] = partial_object_metadata(obj, version)
    meta: dict[str, Any] = {"resourceVersion": list_rv}
    if continue_token:
        meta["continue"] = continue_token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": meta,
        "columnDefinitions": columns if include_column_definitions else None,
        "rows": rows,
    }

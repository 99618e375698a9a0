"""Server-side printing: the ``meta.k8s.io`` ``Table`` kubectl asks for with
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

kube-apiserver prints built-in kinds with the handlers of ``pkg/printers/internalversion`` (always with
the wide columns; kubectl hides ``priority > 0`` columns unless ``-o wide``; see ``columns.py`` and the
``printers_*`` modules), kinds without a handler with the default table convertor (Name, Created At),
and custom resources with apiextensions' table convertor: the CRD version's
``additionalPrinterColumns`` evaluated with client-go's JSONPath (Name + Age when there are none). This
module negotiates the Table and assembles it, on plain dicts.

Each row carries ``object`` as the request's ``includeObject`` asks: ``Metadata`` (the default, a
``PartialObjectMetadata``), ``Object`` (the whole object) or ``None``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiplane.apimachinery.objects import meta
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.columns import builtin_printers
from aiplane.sim.apiserver.jsonpath import JSONPath, JSONPathError, go_print
from aiplane.sim.apiserver.negotiation import parse_accept
from aiplane.sim.apiserver.printers_apis import print_default
from aiplane.sim.apiserver.printing import (
    column,
    human_duration,
    name_column,
    object_meta_doc,
    parse_time,
)
from aiplane.sim.apiserver.resources import ResourceType
from aiplane.sim.apiserver.rest import Api

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("", "Metadata", "None", "Object")


# --- negotiation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableOptions:
    """A request's answer as a Table: the ``meta.k8s.io`` version and what each row's ``object`` holds."""

    version: str = "v1"
    include: str = "Metadata"


@functools.lru_cache(maxsize=128)
def table_version(accept: str | None) -> str | None:
    """``v1``/``v1beta1`` when the best acceptable ``Accept`` clause asks for a Table, else ``None``.

    Cached: clients send the same few ``Accept`` headers on every request.
    """
    for clause in parse_accept(accept):
        if not clause.matches_json():
            continue
        convert = clause.convert
        if convert is None:
            return None
        group, version, kind = convert
        if kind == "Table" and group == TABLE_GROUP and version in TABLE_VERSIONS:
            return version
    return None


def wants_table(accept: str | None) -> bool:
    """Whether the response must be a ``Table`` (kube's ``as=Table;v=v1;g=meta.k8s.io`` negotiation)."""
    return table_version(accept) is not None


def include_object(query: Mapping[str, str]) -> str:
    """The ``includeObject`` table option (``Metadata`` when unset); 400 for an unknown value."""
    value = query.get("includeObject", "")
    if value not in INCLUDE_OBJECT_VALUES:
        supported = ", ".join(f'"{v}"' for v in INCLUDE_OBJECT_VALUES)
        raise errors.bad_request(
            "Unable to convert to Table as requested: includeObject: Unsupported value: "
            f'"{value}": supported values: {supported}'
        )
    return value or "Metadata"


def negotiate(accept: str | None, query: Mapping[str, str]) -> TableOptions | None:
    """The Table a request asks for, or ``None`` for the object itself."""
    version = table_version(accept)
    if version is None:
        return None
    return TableOptions(version, include_object(query))


# --- custom resources -----------------------------------------------------------------------------


def crd_columns(rt: ResourceType) -> tuple[list[dict[str, Any]], list[JSONPath | None]]:
    """apiextensions' table convertor columns (Name first) and their compiled paths."""
    columns = [name_column()]
    paths: list[JSONPath | None] = []
    printer = list(rt.printer_columns) or [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": object_meta_doc("creationTimestamp"),
        }
    ]
    for col in printer:
        json_path = str(col.get("jsonPath", ""))
        try:
            paths.append(JSONPath(json_path))
        except JSONPathError:
            paths.append(None)
        columns.append(
            column(
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


def _integer_cell(value: Any) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) else None


def _number_cell(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _date_cell(value: Any, now: datetime) -> Any:
    if not isinstance(value, str):
        return None
    try:
        moment = parse_time(value)
    except ValueError:
        return "<invalid>"
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


_CELLS: dict[str, Callable[[Any, datetime], Any]] = {
    "integer": lambda value, _now: _integer_cell(value),
    "number": lambda value, _now: _number_cell(value),
    "boolean": lambda value, _now: value if isinstance(value, bool) else None,
    "string": lambda value, _now: value if isinstance(value, str) else None,
    "date": _date_cell,
}


def cell_for_json_value(kind: str, value: Any, now: datetime) -> Any:
    """apiextensions' ``cellForJSONValue`` for non-string columns."""
    convert = _CELLS.get(kind)
    if value is None or convert is None:
        return None
    return convert(value, now)


def _custom_cells(
    obj: dict[str, Any], columns: list[dict[str, Any]], paths: list[JSONPath | None], now: datetime
) -> list[Any]:
    cells: list[Any] = [obj.get("metadata", {}).get("name", "")]
    for definition, path in zip(columns[1:], paths, strict=True):
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
        if definition["type"] == "string":
            cells.append(None if value is None else go_print(value))
        else:
            cells.append(cell_for_json_value(definition["type"], value, now))
    return cells


def default_columns() -> list[dict[str, Any]]:
    """The default table convertor's columns (kinds without a print handler: roles, ...)."""
    return [name_column(), column("Created At", "date", object_meta_doc("creationTimestamp"))]


def columns_for(rt: ResourceType) -> list[dict[str, Any]]:
    """The column definitions of a kind's Table."""
    if rt.is_custom:
        return crd_columns(rt)[0]
    found = builtin_printers().get((rt.group, rt.kind))
    return [dict(c) for c in found[0]] if found else default_columns()


# --- the Table ------------------------------------------------------------------------------------


def partial_object_metadata(obj: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{TABLE_GROUP}/{version}", "metadata": meta(obj)}


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
    found = builtin_printers().get((rt.group, rt.kind))
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
    api: Api,
    rt: ResourceType,
    objs: list[dict[str, Any]],
    options: TableOptions,
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
    version, include = options.version, options.include
    now = api.clock()
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

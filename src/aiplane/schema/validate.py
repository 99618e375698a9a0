"""Validation of an object against a structural schema, in kube-apiserver's order and words.

kube-apiserver validates a custom resource in four passes (apiextensions ``customResourceStrategy``):

1. the OpenAPI schema, through kube-openapi's validator — type, format, bounds, lengths, pattern,
   ``required``, item and property counts, ``enum``, ``anyOf``/``allOf``/``oneOf``/``not``;
2. ``x-kubernetes-embedded-resource`` objects: ``apiVersion`` and ``kind`` present and well formed;
3. ``x-kubernetes-list-type`` ``set``/``map``: no duplicate items or keys;
4. ``x-kubernetes-validations`` CEL rules — skipped, with a notice, when an earlier error means the
   object does not have the shape the rules were written for.

:func:`validate` runs the same passes and reproduces kube-openapi's quirks that surface to users:
messages name the field (``spec.x in body should match '…'``), a float with an integral value is an
integer, formats kube does not support (``int32``, ``int64``…) are ignored, ``minProperties`` stops
the checks of an object, and on update errors in unchanged parts of the object are forgiven
(ratcheting, on by default since Kubernetes 1.30). :func:`admit` chains pruning, defaulting and
validation the way a write does.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from aiplane.apimachinery import builtin
from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import SAME, FieldError
from aiplane.apimachinery.values import (
    child,
    deep_equal,
    go_float,
    go_json,
    go_quote,
    index,
    is_int,
    is_json_integer,
    is_number,
    json_type,
    key,
    scalar_key,
)
from aiplane.schema import _formats
from aiplane.schema._walkcache import VALID_ITEMS, has_list_map
from aiplane.schema.cel import has_rules, validate_rules
from aiplane.schema.correlation import ABSENT, Correlation
from aiplane.schema.defaults import apply_defaults
from aiplane.schema.prune import prune, prune_with_field_paths

Schema = Mapping[str, Any]

#: The error kube adds instead of running CEL rules on an object with blocking errors.
RULES_SKIPPED: Final = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)

# --- OpenAPI (kube-openapi) ----------------------------------------------------------------------


class _At(NamedTuple):
    """Where a value sits: kube-openapi's name (map keys joined with dots) and the field path."""

    name: str
    field: str

    def prop(self, k: str) -> _At:
        return _At(child(self.name, k), child(self.field, k))

    def map_key(self, k: str) -> _At:
        # kube-openapi joins additionalProperties keys with a dot even at the root (".key").
        return _At(f"{self.name}.{k}", key(self.field, k) if self.field else f"[{k}]")

    def required(self, k: str) -> _At:
        return _At(f"{self.name}.{k}", child(self.field, k))

    def item(self, i: int) -> _At:
        return _At(index(self.name, i), index(self.field, i))


@dataclass
class _Ctx:
    """Per-run settings: where errors land and whether unchanged values are forgiven."""

    fld_prefix: str = ""
    ratcheting: bool = True
    out: list[FieldError] = field(default_factory=list)
    #: Errors found, ratcheted ones included, and subtrees not walked (ratcheted whole): an item is
    #: known valid only if it was walked whole and no error was found (:class:`ValidItems`).
    found: int = 0
    skipped: int = 0

    def path(self, name: str) -> str:
        """``kubeOpenAPIResultToFieldErrors``: the field path kube prints for an error named ``name``."""
        if name and name != ".":
            return child(self.fld_prefix, name.removeprefix("."))
        return self.fld_prefix

    def error(
        self,
        at: _At,
        type_: str,
        value: Any,
        detail: str,
        *,
        rule: str | None = None,
        keyword: str = "",
        limit: Any = None,
        bad_value: Any = SAME,
    ) -> FieldError:
        """A FieldError at ``at``: ``path`` is the field path, ``kube_field`` what kube prints."""
        kube = self.path(at.name)
        path = child(self.fld_prefix, at.field) if at.field else self.fld_prefix
        return FieldError(
            path, type_, value, detail, rule, keyword, limit, bad_value, None if kube == path else kube
        )

    def emit(self, corr: Correlation, err: FieldError) -> None:
        self.found += 1
        if self.ratcheting and corr.unchanged():
            return  # ratcheted: kube returns it as a warning
        self.out.append(err)


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str] | str:
    """The compiled pattern, or the compilation error text."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        return str(exc)


def _types(s: Schema) -> list[str]:
    if s.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    t = s.get("type")
    return [t] if isinstance(t, str) and t else []


def _schema_info(value: Any) -> tuple[str, str]:
    """kube-openapi's ``schemaInfoForType``: (type, format) of a decoded value."""
    kind = json_type(value)
    if kind == "integer":
        return kind, "int64"
    if kind == "number":
        return kind, "float64"
    return kind, ""


def _bytes_word(n: int) -> str:
    return "byte" if n == 1 else "bytes"


def _items_word(n: int) -> str:
    return "item" if n == 1 else "items"


def _enum_matches(data: Any, candidate: Any) -> bool:
    """``basicCommonValidator``: equal after Go's ``reflect.Value.Convert`` to the enum value's type."""
    if candidate is None or data is None:
        return False
    if deep_equal(data, candidate):
        return True
    if is_int(candidate) and is_number(data) and math.isfinite(float(data)):
        return bool(int(float(data)) == candidate)
    if is_number(candidate) and is_int(data):
        return float(data) == float(candidate)
    if isinstance(candidate, str) and is_int(data):
        return (chr(data) if 0 <= data <= 0x10FFFF else "\ufffd") == candidate
    return False


def _enum_words(values: list[Any]) -> str:
    return ", ".join(go_quote(v if isinstance(v, str) else go_json(v)) for v in values)


def _check_type(value: Any, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``typeValidator`` for a non-null value."""
    types = _types(s)
    fmt = _formats.effective_format(s.get("format"))
    if not types and not fmt:
        return
    sch_type, data_format = _schema_info(value)
    is_string_or_slice = isinstance(value, str | list)
    float_int = sch_type == "number" and "integer" in types and is_json_integer(float(value))
    int_float = sch_type == "integer" and "number" in types
    name = at.name
    if (
        not is_string_or_slice
        and fmt
        and not (sch_type in types or data_format == fmt or float_int or int_float)
    ):
        detail = f"{name} in body must be of type {fmt}: {go_quote(data_format)}"
        ctx.emit(
            corr,
            ctx.error(at, fe.TYPE_INVALID, value, detail, keyword="type", limit=fmt, bad_value=data_format),
        )
        return
    if fmt and "number" not in types and "integer" not in types and is_string_or_slice:
        return
    if not (sch_type in types or float_int or int_float):
        wanted = ",".join(types)
        detail = f"{name} in body must be of type {wanted}: {go_quote(sch_type)}"
        limit = " or ".join(types)
        ctx.emit(
            corr,
            ctx.error(at, fe.TYPE_INVALID, value, detail, keyword="type", limit=limit, bad_value=sch_type),
        )


def _composite(value: Any, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``schemaPropsValidator``: anyOf, oneOf, allOf and not."""
    name = at.name

    def run(branch: Schema) -> list[FieldError]:
        sub = _Ctx(ctx.fld_prefix, ratcheting=False)
        _node(value, branch, at, Correlation(value), sub)
        return sub.out

    def composite_error(text: str, keyword: str) -> None:
        ctx.emit(corr, FieldError(ctx.fld_prefix, fe.INVALID, value, text, keyword=keyword, bad_value=""))

    def emit_all(errs: list[FieldError]) -> None:
        for err in errs:
            ctx.emit(corr, err)

    any_of = s.get("anyOf") or []
    if any_of:
        results: list[list[FieldError]] = []
        for branch in any_of:
            errs = run(branch)
            if not errs:
                results = []
                break
            results.append(errs)
        if results:
            composite_error(f"{go_quote(name)} must validate at least one schema (anyOf)", "anyOf")
            emit_all(min(results, key=len))
    one_of = s.get("oneOf") or []
    if one_of:
        outcomes = [run(branch) for branch in one_of]
        valid = sum(1 for errs in outcomes if not errs)
        if valid != 1:
            extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            composite_error(
                f"{go_quote(name)} must validate one and only one schema (oneOf). {extra}", "oneOf"
            )
            if valid == 0:
                emit_all(min(outcomes, key=len))
    all_of = s.get("allOf") or []
    if all_of:
        outcomes = [run(branch) for branch in all_of]
        for errs in outcomes:
            emit_all(errs)
        valid = sum(1 for errs in outcomes if not errs)
        if valid != len(all_of):
            extra = ". None validated" if valid == 0 else ""
            composite_error(f"{go_quote(name)} must validate all the schemas (allOf){extra}", "allOf")
    not_schema = s.get("not")
    if isinstance(not_schema, Mapping) and not run(not_schema):
        composite_error(f"{go_quote(name)} must not validate the schema (not)", "not")


def _check_string(value: str, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``stringValidator``: only the first failing check is reported."""
    name = at.name
    max_length = s.get("maxLength")
    if max_length is not None and len(value) > max_length:
        detail = f"may not be more than {max_length} {_bytes_word(max_length)}"
        ctx.emit(
            corr,
            ctx.error(
                at,
                fe.TOO_LONG,
                value,
                detail,
                keyword="maxLength",
                limit=max_length,
                bad_value="<value omitted>",
            ),
        )
        return
    min_length = s.get("minLength")
    if min_length is not None and len(value) < min_length:
        detail = f"{name} in body should be at least {min_length} chars long"
        ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword="minLength", limit=min_length))
        return
    pattern = s.get("pattern")
    if pattern:
        compiled = _regex(pattern)
        if isinstance(compiled, str):
            detail = f"{name} in body should match '{pattern}, but pattern is invalid: {compiled}'"
            ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, rule=pattern, keyword="pattern"))
        elif not compiled.search(value):
            detail = f"{name} in body should match '{pattern}'"
            ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, rule=pattern, keyword="pattern"))


def _check_format(value: str, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    fmt = _formats.effective_format(s.get("format"))
    if fmt and not _formats.check(fmt, value):
        detail = f"{at.name} in body must be of type {fmt}: {go_quote(value)}"
        ctx.emit(corr, ctx.error(at, fe.TYPE_INVALID, value, detail, keyword="format", limit=fmt))


def _bound(value: int | float, bound: float) -> tuple[int | float, str]:
    """The bound as kube compares it (truncated to int64 for integer data) and prints it."""
    if is_int(value):
        as_int = int(bound) if math.isfinite(bound) else 0
        return as_int, str(as_int)
    return bound, go_float(bound)


def _check_number(value: int | float, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``numberValidator`` (multipleOf, then minimum, then maximum)."""
    name = at.name
    multiple = s.get("multipleOf")
    if multiple is not None:
        factor = float(multiple)
        if factor < 0:
            detail = f"factor MultipleOf declared for {name} must be positive: {go_float(factor)}"
            ctx.emit(
                corr,
                ctx.error(
                    at, fe.INVALID, value, detail, keyword="multipleOf", limit=multiple, bad_value=factor
                ),
            )
        elif is_int(value):
            int_factor = int(factor)
            if int_factor and value % int_factor != 0:
                detail = f"{name} in body should be a multiple of {int_factor}"
                ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword="multipleOf", limit=multiple))
        elif factor > 0:
            ratio = (1 / factor * value) if factor < 1 else (value / factor)
            if not is_json_integer(float(ratio)):
                detail = f"{name} in body should be a multiple of {go_float(factor)}"
                ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword="multipleOf", limit=multiple))
    minimum = s.get("minimum")
    if minimum is not None:
        bound, shown = _bound(value, float(minimum))
        exclusive = bool(s.get("exclusiveMinimum"))
        if value < bound or (exclusive and value <= bound):
            words = "greater than" if exclusive else "greater than or equal to"
            detail = f"{name} in body should be {words} {shown}"
            keyword = "exclusiveMinimum" if exclusive else "minimum"
            ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword=keyword, limit=minimum))
    maximum = s.get("maximum")
    if maximum is not None:
        bound, shown = _bound(value, float(maximum))
        exclusive = bool(s.get("exclusiveMaximum"))
        if value > bound or (exclusive and value >= bound):
            words = "less than" if exclusive else "less than or equal to"
            detail = f"{name} in body should be {words} {shown}"
            keyword = "exclusiveMaximum" if exclusive else "maximum"
            ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword=keyword, limit=maximum))


def _check_array(value: list[Any], s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``schemaSliceValidator``: items first, then counts and uniqueness."""
    items = s.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            key = VALID_ITEMS.key(items, item)
            if VALID_ITEMS.known(items, key):
                continue  # validated before with no error found: it cannot have one now
            before = (ctx.found, ctx.skipped)
            _node(item, items, at.item(i), corr.item(i, item, s), ctx)
            if (ctx.found, ctx.skipped) == before:
                VALID_ITEMS.add(items, key)
    name = at.name
    size = len(value)
    min_items = s.get("minItems")
    if min_items is not None and size < min_items:
        detail = f"{name} in body should have at least {min_items} items"
        ctx.emit(
            corr,
            ctx.error(at, fe.INVALID, value, detail, keyword="minItems", limit=min_items, bad_value=size),
        )
    max_items = s.get("maxItems")
    if max_items is not None and size > max_items:
        detail = f"must have at most {max_items} {_items_word(max_items)}"
        ctx.emit(
            corr,
            ctx.error(at, fe.TOO_MANY, value, detail, keyword="maxItems", limit=max_items, bad_value=size),
        )
    if s.get("uniqueItems"):
        seen: list[Any] = []
        for item in value:
            if any(deep_equal(item, other) for other in seen):
                detail = f"{name} in body shouldn't contain duplicates"
                ctx.emit(corr, ctx.error(at, fe.INVALID, value, detail, keyword="uniqueItems", bad_value=""))
                break
            seen.append(item)


def _check_enum(value: Any, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    enum = s.get("enum")
    if not enum or any(_enum_matches(value, candidate) for candidate in enum):
        return
    detail = f"supported values: {_enum_words(list(enum))}"
    ctx.emit(corr, ctx.error(at, fe.NOT_SUPPORTED, value, detail, keyword="enum", limit=list(enum)))


def _check_object(value: dict[str, Any], s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``objectValidator``."""
    name = at.name
    count = len(value)
    min_props = s.get("minProperties")
    if min_props is not None and count < min_props:
        detail = f"{name} in body should have at least {min_props} properties"
        ctx.emit(
            corr,
            ctx.error(
                at, fe.INVALID, value, detail, keyword="minProperties", limit=min_props, bad_value=count
            ),
        )
        return
    max_props = s.get("maxProperties")
    if max_props is not None and count > max_props:
        detail = f"must have at most {max_props} {_items_word(max_props)}"
        ctx.emit(
            corr,
            ctx.error(
                at, fe.TOO_MANY, value, detail, keyword="maxProperties", limit=max_props, bad_value=count
            ),
        )
        return
    props: Mapping[str, Any] = s.get("properties") or {}
    additional = s.get("additionalProperties")
    if additional is False:
        for k in value:
            if k not in props:
                detail = f"{name}.{k} in body is a forbidden property"
                ctx.emit(corr, ctx.error(at, fe.INVALID, k, detail, keyword="additionalProperties"))
    elif isinstance(additional, Mapping):
        for k, v in value.items():
            if k not in props:
                _node(v, additional, at.map_key(k), corr.field(k, v), ctx)
    for k, sub in props.items():
        if k in value:
            _node(value[k], sub, at.prop(k), corr.field(k, value[k]), ctx)
    for k in s.get("required") or []:
        if k not in value:
            ctx.emit(corr, ctx.error(at.required(k), fe.REQUIRED, None, "", keyword="required", bad_value=""))


def _node(value: Any, s: Schema, at: _At, corr: Correlation, ctx: _Ctx) -> None:
    """kube-openapi ``SchemaValidator.Validate`` for one value.

    With ratcheting, a correlated value equal to its old one is not walked: kube-openapi's
    ``ratchetingValueValidator`` turns every error found under such a node into a warning, so its
    subtree can add no error (and the embedded server does not return ratcheting warnings). A status
    write of a plan with 1,000 ``nodeStatuses`` walked all of them to change one. Not below a keyed
    list: kube correlates a duplicate item with the first of its key, which can differ, and that
    inequality reaches every ancestor (``CachedDeepEqual`` asks the explored children first).
    """
    if ctx.ratcheting and corr.correlated and value == corr.old and corr.unchanged() and not has_list_map(s):
        ctx.skipped += 1
        return  # ``==`` (in C) refutes most changed values before ``deep_equal`` walks them
    if value is None:
        types = _types(s)
        if types and "null" not in types and not s.get("nullable"):
            detail = f"{at.name} in body must be of type {','.join(types)}: {go_quote('null')}"
            ctx.emit(
                corr,
                ctx.error(
                    at,
                    fe.TYPE_INVALID,
                    None,
                    detail,
                    keyword="type",
                    limit=" or ".join(types),
                    bad_value="null",
                ),
            )
        _check_enum(value, s, at, corr, ctx)
        return
    _check_type(value, s, at, corr, ctx)
    if any(k in s for k in ("anyOf", "oneOf", "allOf", "not")):
        _composite(value, s, at, corr, ctx)
    if isinstance(value, str):
        _check_string(value, s, at, corr, ctx)
        _check_format(value, s, at, corr, ctx)
    if is_int(value) or is_number(value):
        _check_number(value, s, at, corr, ctx)
    if isinstance(value, list):
        _check_array(value, s, at, corr, ctx)
    _check_enum(value, s, at, corr, ctx)
    if isinstance(value, dict):
        _check_object(value, s, at, corr, ctx)


def validate_openapi(
    obj: Any,
    schema: Schema,
    *,
    old: Any = ABSENT,
    name: str = "",
    fld_prefix: str = "",
    ratcheting: bool = True,
) -> list[FieldError]:
    """Only the OpenAPI pass (kube's ``ValidateCustomResource[Update]``).

    ``name`` is the path of ``obj`` inside the validated document (it prefixes every message, as
    kube-openapi's root path does); ``fld_prefix`` is kube's ``fldPath`` argument.
    """
    ctx = _Ctx(fld_prefix, ratcheting)
    _node(obj, schema, _At(name, name), Correlation(obj, old), ctx)
    return ctx.out


# --- embedded resources (objectmeta.Validate) ----------------------------------------------------

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def _dns1035_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1035.match(value):
        errs.append(_DNS1035_MESSAGE)
    return errs


def _embedded_resource(x: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kw = "x-kubernetes-embedded-resource"
    for meta in ("apiVersion", "kind"):
        if meta not in x:
            errs.append(
                FieldError(child(path, meta), fe.REQUIRED, None, "", keyword="required", bad_value="")
            )
    for k, v in x.items():
        p = child(path, k)
        if k == "apiVersion":
            if not isinstance(v, str):
                errs.append(FieldError(p, fe.INVALID, v, "must be a string", keyword=kw))
            elif not v:
                errs.append(FieldError(p, fe.REQUIRED, v, "", keyword="required", bad_value=""))
            elif v != "/" and v.count("/") > 1:
                errs.append(FieldError(p, fe.INVALID, v, f"unexpected GroupVersion string: {v}", keyword=kw))
        elif k == "kind":
            if not isinstance(v, str):
                errs.append(FieldError(p, fe.INVALID, v, "must be a string", keyword=kw))
            elif not v:
                errs.append(FieldError(p, fe.REQUIRED, v, "", keyword="required", bad_value=""))
            elif dns := _dns1035_errors(v.lower()):
                detail = "may have mixed case, but should otherwise match: " + ",".join(dns)
                errs.append(FieldError(p, fe.INVALID, v, detail, keyword=kw))
        elif k == "metadata" and not isinstance(v, dict):
            errs.append(FieldError(p, fe.INVALID, v, "must be an object", keyword=kw))
    return errs


def validate_embedded(obj: Any, schema: Schema | None, *, path: str = "") -> list[FieldError]:
    """``objectmeta.Validate``: type meta of every ``x-kubernetes-embedded-resource`` object."""
    errs: list[FieldError] = []
    _embedded(obj, schema, path, errs)
    return errs


def _embedded(x: Any, s: Schema | None, path: str, errs: list[FieldError]) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        if s.get("x-kubernetes-embedded-resource"):
            errs.extend(_embedded_resource(x, path))
        props: Mapping[str, Any] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        for k, v in x.items():
            if k in props:
                _embedded(v, props[k], child(path, k), errs)
            elif isinstance(additional, Mapping):
                _embedded(v, additional, key(path, k), errs)
    elif isinstance(x, list):
        items = s.get("items")
        for i, v in enumerate(x):
            _embedded(v, items if isinstance(items, Mapping) else None, index(path, i), errs)


# --- list types (listtype.ValidateListSetsAndMaps) -----------------------------------------------


def validate_list_types(obj: Any, schema: Schema | None, *, path: str = "") -> list[FieldError]:
    """Uniqueness of ``x-kubernetes-list-type: set`` items and ``map`` keys."""
    errs: list[FieldError] = []
    if schema is not None:
        _list_types(obj, schema, path, errs)
    return errs


def _first_duplicates(keys: list[tuple[str, Any]]) -> list[int]:
    """Indices of the second appearance of each repeated key (``validateListSet``)."""
    counts: dict[tuple[str, Any], int] = {}
    dups = []
    for i, k in enumerate(keys):
        counts[k] = counts.get(k, 0) + 1
        if counts[k] == 2:
            dups.append(i)
    return dups


_UNSPECIFIED: Final = ("unspecified", None)


def _list_types(x: Any, s: Schema, path: str, errs: list[FieldError]) -> None:
    if isinstance(x, dict):
        props: Mapping[str, Any] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        if isinstance(additional, Mapping):
            for k, v in x.items():
                _list_types(v, additional, key(path, k), errs)
        for k, v in x.items():
            if k in props:
                _list_types(v, props[k], child(path, k), errs)
        return
    if not isinstance(x, list):
        return
    list_type = s.get("x-kubernetes-list-type")
    kw = "x-kubernetes-list-type"
    if list_type == "set" and len(x) > 1:
        for i in _first_duplicates([scalar_key(v) for v in x]):
            errs.append(FieldError(index(path, i), fe.DUPLICATE, x[i], "", keyword=kw, limit="set"))
    elif list_type == "map":
        errs.extend(_list_map_errors(x, s, path))
    items = s.get("items")
    if isinstance(items, Mapping):
        for i, v in enumerate(x):
            _list_types(v, items, index(path, i), errs)


def _list_map_errors(x: list[Any], s: Schema, path: str) -> list[FieldError]:
    kw = "x-kubernetes-list-type"
    for i, item in enumerate(x):
        if item is not None and not isinstance(item, dict):
            detail = "must be an object for an array of list-type map"
            return [FieldError(index(path, i), fe.INVALID, item, detail, keyword=kw)]
    if len(x) <= 1:
        return []
    names: list[str] = list(s.get("x-kubernetes-list-map-keys") or [])
    key_values: list[dict[str, Any]] = []
    for item in x:
        present = {n: item[n] for n in names if isinstance(item, dict) and n in item}
        key_values.append(present)
    if len(names) == 1:
        keys = [scalar_key(kv[names[0]]) if names[0] in kv else _UNSPECIFIED for kv in key_values]
    else:
        keys = [("object", go_json(kv)) for kv in key_values]
    return [
        FieldError(index(path, i), fe.DUPLICATE, x[i], "", keyword=kw, limit="map", bad_value=key_values[i])
        for i in _first_duplicates(keys)
    ]


# --- the whole pipeline --------------------------------------------------------------------------


def validate(
    obj: Any,
    schema: Schema,
    *,
    old: Any = None,
    path: str = "",
    resource_root: bool | None = None,
    ratcheting: bool = True,
) -> list[FieldError]:
    """Validate ``obj`` against the structural ``schema`` like kube-apiserver validates a write.

    ``old`` is the stored object on update (``None`` on create): it enables transition rules and
    ratcheting. ``path`` locates ``obj`` in its resource (``""`` for a whole object); errors are
    reported with full paths, as kube would report them for the whole resource. ``resource_root``
    (default: ``path == ""``) makes CEL rules at the top see only ``apiVersion``, ``kind`` and
    ``metadata.name``/``generateName``, as at a resource root. ``ratcheting=False`` turns off kube's
    forgiveness of errors in unchanged values. The object is not modified.
    """
    if resource_root is None:
        resource_root = path == ""
    old_value: Any = ABSENT if old is None else old
    errs = validate_openapi(obj, schema, old=old_value, name=path, ratcheting=ratcheting)
    errs += validate_embedded(obj, schema, path=path)
    if old is None or not validate_list_types(old, schema, path=path):
        errs += validate_list_types(obj, schema, path=path)
    if has_rules(schema):
        if any(e.type in fe.BLOCKING_TYPES for e in errs):
            errs.append(FieldError("", fe.INVALID, None, RULES_SKIPPED, keyword="rules-skipped"))
        else:
            errs += validate_rules(
                obj, schema, old=old_value, path=path, resource_root=resource_root, ratcheting=ratcheting
            )
    return errs


def admit(
    obj: Any, schema: Schema, *, old: Any = None, ratcheting: bool = True
) -> tuple[dict[str, Any], list[str], list[FieldError]]:
    """What a create (``old=None``) or update of the resource ``obj`` does, without storing it.

    Deep-copies ``obj``, prunes unknown fields and non-nullable nulls, applies defaults, then
    validates (in kube's order). Returns ``(admitted object, pruned paths, errors)``; with errors
    kube would reject the write with a 422.
    """
    result = copy.deepcopy(obj)
    pruned = prune(result, schema)
    apply_defaults(result, schema)
    errors = validate(result, schema, old=old, ratcheting=ratcheting)
    return result, pruned, errors


# --- built-in types ------------------------------------------------------------------------------


@functools.cache
def _builtin_schema(definition: str) -> tuple[Schema, bool]:
    schema = builtin.structural(definition)
    return schema, has_rules(schema)


def check_value(value: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], list[FieldError]]:
    """Check a value embedded in one of our objects against ``schema``, as the API server would store it.

    Returns the pruned and defaulted copy (what kube-apiserver would keep) and the errors: fields the
    schema does not know are reported as ``unknown field`` (kube would silently drop them), then the copy
    is validated after defaulting, so a port without ``protocol`` is fine (it defaults to ``TCP``) while
    two ports with the same ``containerPort`` are duplicates. ``value`` itself is not modified. Paths
    are relative to ``value``.
    """
    probe = copy.deepcopy(value)
    unknown = prune_with_field_paths(probe, schema, root=False)
    errs = [
        FieldError(
            fld,
            fe.FORBIDDEN,
            None,
            "unknown field",
            keyword="unknown",
            kube_field=None if kube == fld else kube,
        )
        for kube, fld in unknown
    ]
    apply_defaults(probe, schema, root=False)
    return probe, errs + validate(probe, schema, resource_root=False)


def validate_builtin(value: dict[str, Any], definition: str) -> list[FieldError]:
    """Validate a value of a Kubernetes built-in type (``io.k8s.api.core.v1.PodSpec`` …), see :func:`check_value`.

    The structural schema of each definition is built once and cached.
    """
    schema, _ = _builtin_schema(definition)
    return check_value(value, schema)[1]

"""``x-kubernetes-validations``: CEL rules evaluated the way kube-apiserver evaluates them.

The expressions run on the ``cel`` module (common-expression-language, cel-rust underneath). What
this module adds is kube's contract around them (apiextensions ``schema/cel/validation.go``):

* ``self`` is the value at the schema node; property names are escaped (``foo-bar`` is
  ``self.foo__dash__bar``), ``date-time`` strings are timestamps, and at a resource root only
  ``apiVersion``, ``kind``, ``metadata.name`` and ``metadata.generateName`` are visible;
* a rule that references ``oldSelf`` is a transition rule: it runs only on update and only where an
  old value correlates with the new one (object properties, map values, list-map items by key —
  never items of atomic lists or sets), unless ``optionalOldSelf`` makes ``oldSelf`` an optional;
* failures become field errors with kube's reasons, messages, ``messageExpression`` and ``fieldPath``;
  evaluation errors read ``<error> evaluating rule: <message or rule>``;
* with ratcheting (kube's default since CRDValidationRatcheting), a failing rule that is not a
  transition rule is forgiven when the value did not change.

Rules are compiled once per expression (:func:`compile_rule` is cached).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import cel
from cel import stdlib as cel_stdlib

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import deep_equal, key, scalar_key

Schema = Mapping[str, Any]

#: Reasons a rule may carry (``supportedValidationReason``).
SUPPORTED_REASONS: Final = (fe.DUPLICATE, fe.FORBIDDEN, fe.INVALID, fe.REQUIRED)
#: ``celconfig.MaxEvaluatedMessageExpressionSizeBytes``.
MAX_MESSAGE_EXPRESSION_BYTES: Final = 5 * 1024

_RESERVED: Final = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9\-./_])")
_ESCAPES: Final = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """kube's ``cel.Escape``: the CEL identifier of a property name, or ``None`` if not reachable."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    bad = False

    def repl(match: re.Match[str]) -> str:
        nonlocal bad
        text = match.group(0)
        if text in _ESCAPES:
            return _ESCAPES[text]
        bad = True
        return ""

    escaped = _EXPAND.sub(repl, name)
    return None if bad else escaped


# --- function library ----------------------------------------------------------------------------


def _index_of(container: Any, item: Any, *rest: Any) -> int:
    if isinstance(container, list):
        for i, v in enumerate(container):
            if deep_equal(v, item):
                return i
        return -1
    return int(cel_stdlib.index_of(container, item, *rest))


def _last_index_of(container: Any, item: Any, *rest: Any) -> int:
    if isinstance(container, list):
        for i in range(len(container) - 1, -1, -1):
            if deep_equal(container[i], item):
                return i
        return -1
    return int(cel_stdlib.last_index_of(container, item, *rest))


def _is_sorted(items: list[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


#: cel-go/kube library functions the cel module does not ship, written here.
_KUBE_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "isSorted": _is_sorted,
    "find": _find,
    "findAll": _find_all,
}
FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {**cel_stdlib.STDLIB_FUNCTIONS, **_KUBE_FUNCTIONS}

#: Functions the cel module evaluates natively.
_NATIVE_FUNCTIONS: Final = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "timestamp",
        "duration",
        "dyn",
        "type",
        "getFullYear",
        "getMonth",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        "hasValue",
        "value",
        "orValue",
        "or",
        "optional.of",
        "optional.none",
        "optional.ofNonZeroValue",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
    }
)
#: Kubernetes CEL library functions that kube accepts but this evaluator does not implement.
_KUBE_ONLY_FUNCTIONS: Final = frozenset(
    {
        "quantity",
        "isQuantity",
        "url",
        "isURL",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "semver",
        "isSemver",
        "format",
        "strings.format",
        "authorizer",
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "compareTo",
        "isLessThan",
        "isGreaterThan",
        "add",
        "sub",
        "asInteger",
        "asApproximateFloat",
        "sign",
        "isInteger",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "prefixLength",
        "masked",
        "containsIP",
        "containsCIDR",
        "major",
        "minor",
        "patch",
        "named",
        "validate",
        "quote",
        "transformList",
        "transformMap",
        "transformMapEntry",
    }
)
_KNOWN_FUNCTIONS: Final = _NATIVE_FUNCTIONS | frozenset(FUNCTIONS) | _KUBE_ONLY_FUNCTIONS
_TYPE_IDENTIFIERS: Final = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "optional"}
)
_COMPREHENSION_VAR = re.compile(
    r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,"
    r"(?:\s*([A-Za-z_][A-Za-z0-9_]*)\s*,)?"
)


@dataclass(frozen=True)
class CompiledRule:
    """A parsed CEL expression and what kube derives from it at compile time."""

    source: str
    program: cel.Program | None
    error: str | None
    uses_old_self: bool
    needs_functions: bool


def _issue_text(exc: Exception, source: str) -> str:
    """The parser's message in cel-go's layout (``ERROR: <input>:l:c: …`` then `` | `` source lines)."""
    text = str(exc)
    prefix = f"Failed to parse expression '{source}': "
    text = text[len(prefix) :] if text.startswith(prefix) else text
    return text.replace("\n| ", "\n | ")


def _undeclared(program: cel.Program, source: str) -> str | None:
    """The first identifier kube's type checker would reject as undeclared, if any."""
    bound = {"self", "oldSelf"} | _TYPE_IDENTIFIERS
    for match in _COMPREHENSION_VAR.finditer(source):
        bound.update(g for g in match.groups() if g)
    for name in program.variables():
        if name not in bound:
            return name
    for name in program.functions():
        if name[0] in "_@!-" or name in _KNOWN_FUNCTIONS:
            continue
        return name
    return None


@functools.lru_cache(maxsize=4096)
def compile_rule(source: str) -> CompiledRule:
    """Compile ``source`` once; parse errors are kept as kube-style ``compilation failed`` details."""
    try:
        program = cel.compile(source)
    except Exception as exc:  # the extension raises ValueError, but be robust to its variants
        return CompiledRule(source, None, f"compilation failed: {_issue_text(exc, source)}", False, False)
    undeclared = _undeclared(program, source)
    if undeclared is not None:
        column = source.find(undeclared) + 1
        detail = (
            f"compilation failed: ERROR: <input>:1:{column}: "
            f"undeclared reference to '{undeclared}' (in container '')"
        )
        return CompiledRule(source, None, detail, False, False)
    uses_old_self = "oldSelf" in program.variables()
    needs_functions = any(f in FUNCTIONS for f in program.functions())
    return CompiledRule(source, program, None, uses_old_self, needs_functions)


def _execute(compiled: CompiledRule, variables: dict[str, Any]) -> Any:
    assert compiled.program is not None
    if not compiled.needs_functions:
        return compiled.program.execute(variables)
    context = cel.Context(variables=variables, functions=FUNCTIONS)
    return compiled.program.execute(context)


# --- values --------------------------------------------------------------------------------------


def _parse_time(text: str) -> dt.datetime | None:
    match = re.fullmatch(
        r"(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2}))?", text
    )
    if not match:
        return None
    date, clock, fraction, zone = match.groups()
    iso = date + ("T" + clock + (fraction or "")[:7] if clock else "T00:00:00")
    iso += "+00:00" if zone is None or zone in "Zz" else zone
    try:
        return dt.datetime.fromisoformat(iso)
    except ValueError:
        return None


def to_cel(value: Any, schema: Schema | None, *, resource_root: bool = False) -> Any:
    """The CEL view of ``value`` under ``schema`` (kube's ``UnstructuredToVal``)."""
    if value is None or schema is None:
        return value
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        embedded = resource_root or bool(schema.get("x-kubernetes-embedded-resource"))
        out: dict[str, Any] = {}
        for k, v in value.items():
            if embedded and k == "metadata":
                if isinstance(v, dict):
                    out[k] = {m: v[m] for m in ("name", "generateName") if m in v}
                continue
            if embedded and k in ("apiVersion", "kind"):
                out[k] = v
                continue
            if k in props:
                name = escape(k)
                if name is not None:
                    out[name] = to_cel(v, props[k])
            elif isinstance(additional, Mapping):
                out[k] = to_cel(v, additional)
            elif schema.get("x-kubernetes-preserve-unknown-fields"):
                out[k] = v
        return out
    if isinstance(value, list):
        items = schema.get("items")
        return [to_cel(v, items if isinstance(items, Mapping) else None) for v in value]
    if isinstance(value, str) and schema.get("type") == "string":
        fmt = schema.get("format")
        if fmt in ("date-time", "date"):
            parsed = _parse_time(value)
            return value if parsed is None else parsed
        if fmt == "byte":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return value
    return value


# --- correlation ---------------------------------------------------------------------------------


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class Correlation:
    """A new value paired with its old value, for transition rules and ratcheting.

    Mirrors ``common.CorrelatedObject`` plus the "nearest correlatable parent" of kube's ratcheting
    options: an error at an uncorrelated node is forgiven iff its nearest correlated ancestor did not
    change.
    """

    __slots__ = ("_equal", "_parent", "old", "value")

    def __init__(self, value: Any, old: Any = ABSENT, parent: Correlation | None = None) -> None:
        self.value = value
        self.old = old
        self._parent = parent
        self._equal: bool | None = None

    @property
    def correlated(self) -> bool:
        return self.old is not ABSENT

    def unchanged(self) -> bool:
        """``shouldRatchetError``: the nearest correlated node equals its old value."""
        if self.correlated:
            if self._equal is None:
                self._equal = deep_equal(self.value, self.old)
            return self._equal
        return self._parent.unchanged() if self._parent is not None else False

    def _nearest(self) -> Correlation | None:
        return self if self.correlated else self._parent

    def field(self, name: str, value: Any) -> Correlation:
        """The correlation of an object property or map value."""
        if self.correlated and isinstance(self.old, dict) and name in self.old:
            return Correlation(value, self.old[name], self)
        return Correlation(value, ABSENT, self._nearest())

    def item(self, i: int, value: Any, schema: Schema) -> Correlation:
        """The correlation of a list item: only list-map items correlate, by their keys."""
        old_item: Any = ABSENT
        if self.correlated and isinstance(self.old, list) and schema.get("x-kubernetes-list-type") == "map":
            old_item = _map_list_lookup(schema, self.old, value)
        if old_item is ABSENT:
            return Correlation(value, ABSENT, self._nearest())
        return Correlation(value, old_item, self)


def _map_key(keys: list[str], item: Any) -> tuple[Any, ...] | None:
    if not isinstance(item, dict) or any(k not in item for k in keys):
        return None
    return tuple(scalar_key(item[k]) for k in keys)


def _map_list_lookup(schema: Schema, old: list[Any], item: Any) -> Any:
    keys = list(schema.get("x-kubernetes-list-map-keys") or [])
    wanted = _map_key(keys, item)
    if wanted is None:
        return ABSENT
    for candidate in old:
        if _map_key(keys, candidate) == wanted:
            return candidate
    return ABSENT


# --- field paths ---------------------------------------------------------------------------------

_PATH_TOKENS = re.compile(r"'(?:[^'\\]|\\.)*'|[.\[\]]|[^.\[\]]+")
_UNESCAPE = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    "\\": "\\",
}


def _unquote(token: str) -> str:
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _UNESCAPE:
                raise ValueError(f"invalid escape char \\{nxt}")
            out.append(_UNESCAPE[nxt])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def field_path(json_path: str, schema: Schema) -> str:
    """kube's ``ValidFieldPath``: ``.spec.foo['bar']`` -> ``spec.foo[bar]`` (raises ``ValueError``)."""
    tokens: Iterator[str] = iter(_PATH_TOKENS.findall(json_path))
    out = ""
    node: Schema | None = schema

    def step(name: str) -> None:
        nonlocal out, node
        if node is None:
            raise ValueError("does not refer to a valid field")
        props = node.get("properties")
        additional = node.get("additionalProperties")
        if props is not None:
            if name not in props:
                raise ValueError("does not refer to a valid field")
            out = f"{out}.{name}" if out else name
            node = props[name]
        elif isinstance(additional, Mapping):
            out = key(out, name) if out else f"[{name}]"
            node = additional
        else:
            raise ValueError("does not refer to a valid field")

    for tok in tokens:
        if tok == ".":
            nxt = next(tokens, None)
            if nxt is None:
                raise ValueError("unexpected end of JSON path")
            step(nxt)
        elif tok == "[":
            nxt = next(tokens, None)
            if nxt is None:
                raise ValueError("unexpected end of JSON path")
            if len(nxt) < 2 or nxt[0] != "'" or nxt[-1] != "'":
                raise ValueError(f"expected single quoted string but got {nxt}")
            step(_unquote(nxt))
            if next(tokens, None) != "]":
                raise ValueError("expected ] but got end")
        else:
            raise ValueError(f"expected [ or . but got: {tok}")
    return out


# --- evaluation ----------------------------------------------------------------------------------


def _rule_error_string(rule: Mapping[str, Any]) -> str:
    message = str(rule.get("message") or "").strip()
    return message or str(rule.get("rule", "")).strip()


def _evaluation_detail(exc: Exception, rule: Mapping[str, Any]) -> str:
    text = str(exc)
    what = _rule_error_string(rule)
    if isinstance(exc, KeyError):
        name = exc.args[0] if exc.args else text
        return f"no such key: {name} evaluating rule: {what}"
    undefined = _UNDEFINED_FUNCTION.search(text)
    overload = undefined is not None and undefined.group(1) in _KNOWN_FUNCTIONS
    if (
        overload
        or isinstance(exc, TypeError)
        or "No such overload" in text
        or "Unsupported operation" in text
    ):
        return (
            "'no such overload': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {what}"
        )
    if isinstance(exc, ZeroDivisionError):
        return f"division by zero evaluating rule: {what}"
    if isinstance(exc, OverflowError):
        return f"integer overflow evaluating rule: {what}"
    return f"{text} evaluating rule: {what}"


_UNDEFINED_FUNCTION = re.compile(r"Undefined variable or function: '([^']+)'")


def undefined_fields(source: str, schema: Schema, *, resource_root: bool = False) -> list[str]:
    """Fields ``self.x``/``oldSelf.x`` names that the node's type does not declare.

    kube's type checker rejects such rules (``undefined field 'x'``); this covers the first level,
    which is where typos usually are.
    """
    if schema.get("type") != "object" or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(schema.get("additionalProperties"), Mapping):
        return []
    declared = {escape(k) for k in (schema.get("properties") or {})}
    if resource_root or schema.get("x-kubernetes-embedded-resource"):
        declared |= {"apiVersion", "kind", "metadata"}
    found = []
    for match in re.finditer(
        r"(?<![\w.])(?:self|oldSelf)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)", _strip_strings(source)
    ):
        name = match.group(1)
        if (
            name not in declared
            and name not in found
            and name not in _NATIVE_FUNCTIONS | frozenset(FUNCTIONS)
        ):
            found.append(name)
    return found


def _strip_strings(source: str) -> str:
    """``source`` with string literal contents blanked, so ``'self.x'`` is not read as code."""
    return re.sub(
        r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", lambda m: "'" + " " * (len(m.group(0)) - 2) + "'", source
    )


def _message_expression(
    rule: Mapping[str, Any], variables: dict[str, Any]
) -> str | None:  # None: fall back to the static message
    source = rule.get("messageExpression")
    if not source:
        return None
    compiled = compile_rule(str(source))
    if compiled.program is None:
        return None
    try:
        result = _execute(compiled, variables)
    except Exception:
        return None
    if not isinstance(result, str):
        return None
    text = result.strip()
    if not text or "\n" in text or len(text.encode()) > MAX_MESSAGE_EXPRESSION_BYTES:
        return None
    return text


def _reason_error(
    path: str, node_type: str, message: str, reason: Any, *, value: Any, rule: str
) -> FieldError:
    """``fieldErrorForReason``: Forbidden and Required keep the message, Duplicate keeps none."""
    kind = reason if reason in (fe.FORBIDDEN, fe.REQUIRED, fe.DUPLICATE) else fe.INVALID
    detail = "" if kind == fe.DUPLICATE else message
    bad_value = "" if kind in (fe.FORBIDDEN, fe.REQUIRED) else node_type
    return FieldError(path, kind, value, detail, rule, "x-kubernetes-validations", message, bad_value)


def node_errors(
    value: Any,
    schema: Schema,
    path: str,
    corr: Correlation,
    *,
    resource_root: bool = False,
    ratcheting: bool = True,
) -> list[FieldError]:
    """Evaluate the rules of one schema node against ``value``."""
    rules = schema.get("x-kubernetes-validations")
    if not rules or value is None:
        return []
    node_type = str(schema.get("type", ""))
    compiled_rules = [compile_rule(str(r.get("rule", ""))) for r in rules]
    any_old_self = any(c.uses_old_self for c in compiled_rules)
    self_value = to_cel(value, schema, resource_root=resource_root)
    old_value: Any = ABSENT
    if any_old_self and corr.correlated and corr.old is not None:
        old_value = to_cel(corr.old, schema, resource_root=resource_root)
    errs: list[FieldError] = []
    for rule, compiled in zip(rules, compiled_rules, strict=True):
        source = str(rule.get("rule", ""))
        if not source.strip():
            continue  # kube compiles an empty rule to nothing and skips it
        if compiled.error is not None:
            errs.append(
                FieldError(
                    path,
                    fe.INVALID,
                    value,
                    f"rule compile error: {compiled.error}",
                    source,
                    "x-kubernetes-validations",
                    bad_value=node_type,
                )
            )
            continue
        optional = bool(rule.get("optionalOldSelf"))
        if compiled.uses_old_self and old_value is ABSENT and not optional:
            continue
        variables: dict[str, Any] = {"self": self_value}
        if any_old_self and old_value is not ABSENT:
            variables["oldSelf"] = old_value
        rule_variables = dict(variables)
        if optional:
            rule_variables["oldSelf"] = (
                cel.OptionalValue.none() if old_value is ABSENT else cel.OptionalValue.of(old_value)
            )
        try:
            result = _execute(compiled, rule_variables)
        except Exception as exc:
            errs.append(
                FieldError(
                    path,
                    fe.INVALID,
                    value,
                    _evaluation_detail(exc, rule),
                    source,
                    "x-kubernetes-validations",
                    bad_value=node_type,
                )
            )
            continue
        if result is True:
            continue
        if not compiled.uses_old_self and ratcheting and corr.unchanged():
            continue  # kube turns this into a warning
        err_path = path
        if rule.get("fieldPath"):
            try:
                relative = field_path(str(rule["fieldPath"]), schema)
            except ValueError:
                relative = ""
            if relative:
                err_path = f"{path}.{relative}" if path else relative
        message = _message_expression(rule, variables)
        if message is None:
            message = str(rule.get("message") or "").strip() or f"failed rule: {_rule_error_string(rule)}"
        errs.append(_reason_error(err_path, node_type, message, rule.get("reason"), value=value, rule=source))
    return errs


def validate_rules(
    obj: Any,
    schema: Schema | None,
    *,
    old: Any = ABSENT,
    path: str = "",
    resource_root: bool = False,
    ratcheting: bool = True,
) -> list[FieldError]:
    """Evaluate every ``x-kubernetes-validations`` rule of ``schema`` over ``obj``.

    ``old`` is the previous version of ``obj`` on update (leave it out on create).
    """
    if schema is None:
        return []
    errs: list[FieldError] = []
    _walk(obj, schema, path, Correlation(obj, old), errs, resource_root=resource_root, ratcheting=ratcheting)
    return errs


def _walk(
    value: Any,
    schema: Schema,
    path: str,
    corr: Correlation,
    errs: list[FieldError],
    *,
    resource_root: bool,
    ratcheting: bool,
) -> None:
    if value is None:
        return
    errs.extend(node_errors(value, schema, path, corr, resource_root=resource_root, ratcheting=ratcheting))
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for k, v in value.items():
                if k not in props:
                    _walk(
                        v,
                        additional,
                        key(path, k),
                        corr.field(k, v),
                        errs,
                        resource_root=bool(additional.get("x-kubernetes-embedded-resource")),
                        ratcheting=ratcheting,
                    )
        for k, v in value.items():
            sub = props.get(k)
            if sub is not None:
                _walk(
                    v,
                    sub,
                    f"{path}.{k}" if path else k,
                    corr.field(k, v),
                    errs,
                    resource_root=bool(sub.get("x-kubernetes-embedded-resource")),
                    ratcheting=ratcheting,
                )
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            embedded = bool(items.get("x-kubernetes-embedded-resource"))
            for i, v in enumerate(value):
                _walk(
                    v,
                    items,
                    f"{path}[{i}]",
                    corr.item(i, v, schema),
                    errs,
                    resource_root=embedded,
                    ratcheting=ratcheting,
                )


#: has_rules results by schema identity; the schema is kept alive so its id cannot be reused.
_HAS_RULES: dict[int, tuple[Schema, bool]] = {}
_HAS_RULES_MAX = 512


def has_rules(schema: Schema | None) -> bool:
    """Whether any node of ``schema`` carries ``x-kubernetes-validations``.

    kube builds no CEL validator otherwise, and then never reports skipped rules. Results are cached
    per schema object (schemas are treated as immutable once used for validation).
    """
    if not isinstance(schema, Mapping):
        return False
    cached = _HAS_RULES.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    found = _has_rules(schema)
    if len(_HAS_RULES) >= _HAS_RULES_MAX:
        _HAS_RULES.clear()
    _HAS_RULES[id(schema)] = (schema, found)
    return found


def _has_rules(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    props: Mapping[str, Any] = schema.get("properties") or {}
    if any(_has_rules(p) for p in props.values()):
        return True
    return _has_rules(schema.get("items")) or _has_rules(schema.get("additionalProperties"))

"""Compiling ``x-kubernetes-validations`` rules, and the CEL values they run on.

kube's CEL environment, on the ``cel`` module (common-expression-language, cel-rust underneath):
property names escaped as kube escapes them (``foo-bar`` is ``self.foo__dash__bar``), the cel-go and
Kubernetes library functions the module lacks, the compile-time checks kube's type checker makes
(undeclared references, undefined fields), and kube's ``UnstructuredToVal`` view of a value
(``date-time`` strings are timestamps, at a resource root only ``apiVersion``, ``kind``,
``metadata.name`` and ``metadata.generateName`` are visible). Evaluating rules against objects is
:mod:`aiplane.schema.cel`.

Rules are compiled once per expression (:func:`compile_rule` is cached).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import cel
from cel import stdlib as cel_stdlib

from aiplane.apimachinery.values import deep_equal

__all__ = [
    "FUNCTIONS",
    "KNOWN_FUNCTIONS",
    "CompiledRule",
    "compile_rule",
    "escape",
    "execute",
    "to_cel",
    "undefined_fields",
]

Schema = Mapping[str, Any]

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
NATIVE_FUNCTIONS: Final = frozenset(
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
KNOWN_FUNCTIONS: Final = NATIVE_FUNCTIONS | frozenset(FUNCTIONS) | _KUBE_ONLY_FUNCTIONS
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
        if name[0] in "_@!-" or name in KNOWN_FUNCTIONS:
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


def execute(compiled: CompiledRule, variables: dict[str, Any]) -> Any:
    """Run a rule that compiled, with the library functions only when it calls one (a cheaper call)."""
    assert compiled.program is not None
    if not compiled.needs_functions:
        return compiled.program.execute(variables)
    context = cel.Context(variables=variables, functions=FUNCTIONS)
    return compiled.program.execute(context)


# --- values --------------------------------------------------------------------------------------


def _parse_time(text: str) -> dt.datetime | None:
    """A CEL timestamp from a ``date-time`` or ``date`` string, or ``None`` if kube would keep it a string.

    Not :func:`aiplane.apimachinery.objects.parse_time`: kube reads exactly RFC 3339 here (``t``/``z`` in
    either case, a space for ``T``, a bare date at midnight UTC, fractions cut to microseconds), where
    ``datetime.fromisoformat`` accepts forms kube does not (``20240101``, ``2024-01-01T10``).
    """
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
        if name not in declared and name not in found and name not in NATIVE_FUNCTIONS | frozenset(FUNCTIONS):
            found.append(name)
    return found


def _strip_strings(source: str) -> str:
    """``source`` with string literal contents blanked, so ``'self.x'`` is not read as code."""
    return re.sub(
        r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", lambda m: "'" + " " * (len(m.group(0)) - 2) + "'", source
    )

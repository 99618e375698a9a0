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

Compiling rules and the values they see is :mod:`aiplane.schema.celprogram`; pairing old values with
new ones is :mod:`aiplane.schema.correlation`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import cel

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.values import key
from aiplane.schema.celprogram import KNOWN_FUNCTIONS, compile_rule, execute, to_cel
from aiplane.schema.correlation import ABSENT, Correlation

__all__ = [
    "MAX_MESSAGE_EXPRESSION_BYTES",
    "SUPPORTED_REASONS",
    "field_path",
    "has_rules",
    "node_errors",
    "validate_rules",
]

Schema = Mapping[str, Any]

#: Reasons a rule may carry (``supportedValidationReason``).
SUPPORTED_REASONS: Final = (fe.DUPLICATE, fe.FORBIDDEN, fe.INVALID, fe.REQUIRED)
#: ``celconfig.MaxEvaluatedMessageExpressionSizeBytes``.
MAX_MESSAGE_EXPRESSION_BYTES: Final = 5 * 1024

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
    overload = undefined is not None and undefined.group(1) in KNOWN_FUNCTIONS
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
        result = execute(compiled, variables)
    except Exception:
        return None
    if not isinstance(result, str):
        return None
    text = result.strip()
    if not text or "\n" in text or len(text.encode()) > MAX_MESSAGE_EXPRESSION_BYTES:
        return None
    return text


def _reason_error(
    path: str, node_type: str, message: str, reason: Any, *, value: Any, rule: str, from_expression: bool
) -> FieldError:
    """``fieldErrorForReason``: Forbidden and Required keep the message, Duplicate keeps none. The bad
    value is the node's own, left out for an object or a list ("spec: Invalid value: <message>", as
    kube-apiserver 1.37 prints it; compared on the real tier) and for a ``messageExpression``'s
    message, which embeds what it wants of the value."""
    kind = reason if reason in (fe.FORBIDDEN, fe.REQUIRED, fe.DUPLICATE) else fe.INVALID
    detail = "" if kind == fe.DUPLICATE else message
    if kind in (fe.FORBIDDEN, fe.REQUIRED):
        bad_value: Any = ""
    elif kind == fe.DUPLICATE:
        bad_value = node_type
    elif from_expression or isinstance(value, dict | list):
        bad_value = fe.OMIT
    else:
        bad_value = value
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
            result = execute(compiled, rule_variables)
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
        from_expression = message is not None
        if message is None:
            message = str(rule.get("message") or "").strip() or f"failed rule: {_rule_error_string(rule)}"
        errs.append(
            _reason_error(
                err_path,
                node_type,
                message,
                rule.get("reason"),
                value=value,
                rule=source,
                from_expression=from_expression,
            )
        )
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

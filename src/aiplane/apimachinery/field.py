"""Field errors, rendered both for people and exactly the way kube-apiserver reports them.

Every check in :mod:`aiplane.schema` produces a :class:`FieldError`, the Python twin of apimachinery's
``field.Error``. Two renderings exist because the error has two audiences: ``aiplane validate`` and
the pydantic models speak to a person editing YAML (:meth:`FieldError.render`), while the embedded
API server must answer clients byte-for-byte like kube-apiserver does, because tools and tests match
on those strings (:meth:`FieldError.render_kube`, :meth:`FieldError.cause`,
:func:`kube_invalid_message`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiplane.apimachinery.values import friendly, go_quote, go_value

# The field.ErrorType values kube puts in Status causes.
INVALID: Final = "FieldValueInvalid"
REQUIRED: Final = "FieldValueRequired"
NOT_SUPPORTED: Final = "FieldValueNotSupported"
TOO_LONG: Final = "FieldValueTooLong"
TOO_MANY: Final = "FieldValueTooMany"
FORBIDDEN: Final = "FieldValueForbidden"
DUPLICATE: Final = "FieldValueDuplicate"
TYPE_INVALID: Final = "FieldValueTypeInvalid"
NOT_FOUND: Final = "FieldValueNotFound"
INTERNAL: Final = "InternalError"

#: ``ErrorType.String()``: the words kube prints after the field path.
ERROR_TYPE_WORDS: Final[dict[str, str]] = {
    INVALID: "Invalid value",
    REQUIRED: "Required value",
    NOT_SUPPORTED: "Unsupported value",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
    FORBIDDEN: "Forbidden",
    DUPLICATE: "Duplicate value",
    TYPE_INVALID: "Invalid value",
    NOT_FOUND: "Not found",
    INTERNAL: "Internal error",
}

#: Error types whose body never shows the value (``ErrorBody`` prints only the type words).
_VALUELESS: Final = frozenset({REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL})

#: Error types that make kube skip CEL rules (``hasBlockingErr`` in the customresource strategy).
BLOCKING_TYPES: Final = frozenset({NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID})


class _Same:
    """Marker: the kube bad value is the offending value itself."""

    def __repr__(self) -> str:
        return "SAME"


SAME: Final = _Same()


class _Omit:
    """Marker: kube's ``field.OmitValueType{}``, a bad value the error body leaves out."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()

#: Errors kube reports without a field: anyOf/oneOf/allOf/not failures and the "rules not checked" notice.
_PATHLESS_KEYWORDS: Final = frozenset({"anyOf", "oneOf", "allOf", "not", "rules-skipped"})

#: What kube prints as the path of an error without a field (``(*field.Path)(nil).String()``).
NIL_PATH: Final = "<nil>"


@dataclass(frozen=True)
class FieldError:
    """One validation failure at one field.

    ``value`` is the offending value as found in the object (``None`` when a required field is
    missing). ``detail`` is kube's detail text. ``rule`` is the violated constraint (pattern, CEL
    expression, …). ``keyword`` names the schema keyword that failed and ``limit`` its bound; both
    only shape :meth:`render`. ``bad_value`` is what kube shows as the value when that differs from
    the offending value (a type name for type errors, ``"object"`` for CEL rules, a count for
    ``minItems``). ``kube_field`` is the path kube prints when it differs from ``path``: kube-openapi
    joins map keys with dots (``spec.labels.app``) where ``path`` uses ``spec.labels[app]``.
    """

    path: str
    type: str
    value: Any
    detail: str
    rule: str | None = None
    keyword: str = ""
    limit: Any = None
    bad_value: Any = SAME
    kube_field: str | None = None

    @property
    def kube_value(self) -> Any:
        """The ``BadValue`` kube stores in its ``field.Error``."""
        return self.value if self.bad_value is SAME else self.bad_value

    @property
    def kube_path(self) -> str:
        """The path kube prints (``<nil>`` for the root)."""
        path = self.path if self.kube_field is None else self.kube_field
        return path or NIL_PATH

    def body(self) -> str:
        """``field.Error.ErrorBody()``: the message without the leading ``path: ``."""
        words = ERROR_TYPE_WORDS.get(self.type, self.type)
        valueless = self.type in _VALUELESS or self.kube_value is OMIT
        text = words if valueless else f"{words}: {go_value(self.kube_value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def render_kube(self) -> str:
        """Exactly what kube-apiserver prints for this error (``field.Error.Error()``)."""
        return f"{self.kube_path}: {self.body()}"

    def cause(self) -> dict[str, str]:
        """The ``details.causes`` entry of the 422 Status kube returns."""
        return {"reason": self.type, "message": self.body(), "field": self.kube_path}

    def render(self) -> str:
        """A short line for people: path, offending value and the violated constraint."""
        if not self.path and self.keyword in _PATHLESS_KEYWORDS:
            return self._reason()  # the detail names the field already (or there is none)
        return f"{self.path or '<root>'}: {self._reason()}"

    def _reason(self) -> str:
        reason = _REASONS.get(self.keyword)
        if reason is not None:
            return reason(self, friendly(self.value))
        return self.detail or ERROR_TYPE_WORDS.get(self.type, self.type)

    def _size_reason(self) -> str:
        kw = self.keyword
        noun = "items" if kw.endswith("Items") else "properties"
        count = len(self.value) if isinstance(self.value, list | dict) else self.kube_value
        bound = "fewer than the minimum" if kw.startswith("min") else "more than the maximum"
        return f"has {count} {noun}, {bound} {self.limit}"

    def _list_type_reason(self, value: str) -> str:
        if self.limit == "map":
            return f"duplicate entry for key {friendly(self.kube_value)}"
        return f"duplicate value {value}"

    def _rule_reason(self) -> str:
        # ``limit`` keeps the rule's message: kube drops it from Duplicate errors.
        text = str(self.limit or self.detail or "failed")
        return f"{text} (rule: {self.rule})" if self.rule else text


#: :meth:`FieldError.render`'s reason, by schema keyword: ``(error, the offending value as shown)``.
_REASONS: Final[dict[str, Callable[[FieldError, str], str]]] = {
    "pattern": lambda e, v: f"{v} does not match {e.rule}",
    "type": lambda e, v: f"{v} is not of type {e.limit}",
    "format": lambda e, v: f"{v} is not a valid {e.limit}",
    "enum": lambda e, v: f"{v} is not one of {', '.join(friendly(x) for x in e.limit or ())}",
    "minimum": lambda e, v: f"{v} is less than the minimum {friendly(e.limit)}",
    "exclusiveMinimum": lambda e, v: f"{v} is not greater than the exclusive minimum {friendly(e.limit)}",
    "maximum": lambda e, v: f"{v} is greater than the maximum {friendly(e.limit)}",
    "exclusiveMaximum": lambda e, v: f"{v} is not less than the exclusive maximum {friendly(e.limit)}",
    "multipleOf": lambda e, v: f"{v} is not a multiple of {friendly(e.limit)}",
    "minLength": lambda e, v: f"{v} is shorter than the minimum length {e.limit}",
    "maxLength": lambda e, v: f"{v} is longer than the maximum length {e.limit}",
    "minItems": lambda e, _: e._size_reason(),
    "maxItems": lambda e, _: e._size_reason(),
    "minProperties": lambda e, _: e._size_reason(),
    "maxProperties": lambda e, _: e._size_reason(),
    "required": lambda e, _: "required field is missing",
    "unknown": lambda e, _: "unknown field",
    "x-kubernetes-list-type": lambda e, v: e._list_type_reason(v),
    "x-kubernetes-validations": lambda e, _: e._rule_reason(),
}


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """``field.Invalid(path, value, detail)``."""
    return FieldError(path, INVALID, value, detail)


def required(path: str, detail: str) -> FieldError:
    """``field.Required(path, detail)``."""
    return FieldError(path, REQUIRED, None, detail, bad_value="")


def forbidden(path: str, detail: str) -> FieldError:
    """``field.Forbidden(path, detail)``."""
    return FieldError(path, FORBIDDEN, None, detail, bad_value="")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    """``field.NotSupported(path, value, supported)``."""
    allowed = list(supported)
    detail = "supported values: " + ", ".join(go_quote(s) for s in allowed)
    return FieldError(path, NOT_SUPPORTED, value, detail, keyword="enum", limit=allowed)


def invalid_message(path: str, value: Any, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()`` (``<nil>`` for the root path)."""
    return invalid(path, value, detail).render_kube()


def not_supported_message(path: str, value: Any, supported: Iterable[str]) -> str:
    """``field.NotSupported(path, value, supported).Error()``."""
    return not_supported(path, value, supported).render_kube()


def aggregate(messages: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()`` after ``ErrorList.ToAggregate``'s de-duplication: one
    message as is, several in ``[a, b]``."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def kube_invalid_message(kind_group: str, name: str, errors: Iterable[FieldError]) -> str:
    """The ``message`` of kube's 422 Status (``apierrors.NewInvalid``).

    ``kind_group`` is ``schema.GroupKind.String()``: ``Kind.group`` (just ``Kind`` for the core group).
    """
    messages = [e.render_kube() for e in errors]
    if not messages:
        return f"{kind_group} {go_quote(name)} is invalid"
    return f"{kind_group} {go_quote(name)} is invalid: {aggregate(messages)}"


def invalid_status(kind: str, group: str, name: str, errors: Iterable[FieldError]) -> dict[str, Any]:
    """The full 422 ``Status`` object kube-apiserver returns for ``errors``."""
    errs = list(errors)
    kind_group = f"{kind}.{group}" if group else kind
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": kube_invalid_message(kind_group, name, errs),
        "reason": "Invalid",
        "details": {"name": name, "group": group, "kind": kind, "causes": [e.cause() for e in errs]},
        "code": 422,
    }

"""API errors as kube-apiserver reports them: a ``Status`` object with code, reason, message and details.

Clients branch on these (client-go's ``IsConflict``, ``IsNotFound``; kubectl prints ``message``), so the
codes, reasons and message texts follow kube-apiserver's ``k8s.io/apimachinery/pkg/api/errors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiplane.apimachinery.field import FieldError, kube_invalid_message


class ApiError(Exception):
    """An error answered with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str | None, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def qualified(plural: str, group: str) -> str:
    """``plural.group`` as kube prints resources in messages (``pods``, ``modelinfers.workload.volcano.sh``)."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        details=_details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        details=_details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        details=_details(name, group, plural),
    )


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, errors: Iterable[FieldError]) -> ApiError:
    errs = list(errors)
    details = _details(name, group, kind)
    details["causes"] = [e.cause() for e in errs]
    return ApiError(
        422,
        "Invalid",
        kube_invalid_message(f"{kind}.{group}" if group else kind, name, errs),
        details=details,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(plural: str, group: str, name: str, why: str) -> ApiError:
    target = f'{qualified(plural, group)} "{name}"' if name else qualified(plural, group)
    return ApiError(403, "Forbidden", f"{target} is forbidden: {why}", details=_details(name, group, plural))


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {content_type}",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str, retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        message,
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def entity_too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})

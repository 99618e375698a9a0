"""Telling the operator's user which permission its role lacks, when the API server refuses (403).

A 403 on a cluster is almost always a misconfigured role (a chart edited by hand, a ClusterRole from an
older release, ``--controllers`` widened without the matching rules). Retrying cannot fix it and
logging ``403 Forbidden`` at every retry buries the one fact the reader needs: which verb on which
resource, in which namespace. kube-apiserver says exactly that in the Status message
(``responsewriters.forbiddenMessage``); :func:`missing_permission` reads it back, and
:class:`ReportLimiter` keeps the report to once per interval per place and permission, however fast the
(capped, exponential) retries come.

The object a refused reconcile concerns also says so where its user looks (:class:`PermissionConditions`):
a condition ``PermissionDenied`` (status True, reason ``Forbidden``, the permission and the rule in its
message) on its status, removed by the next reconcile that succeeds. Only kinds we serve carry it (every
one of them has ``status.conditions`` of ``metav1.Condition``); a built-in kind's conditions mean
something else (a Node's are the kubelet's). When the role refuses the status write too, the Warning
Event and the error log are all there is.
"""

from __future__ import annotations

import functools
import re
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.apimachinery.conditions import get_condition, remove_condition
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.resources import Resource
from aiplane.kube.status import StatusWriter, condition

__all__ = [
    "PERMISSION_DENIED",
    "REPORT_INTERVAL",
    "MissingPermission",
    "PermissionConditions",
    "ReportLimiter",
    "accepts_permission_condition",
    "forbidden_message",
    "missing_permission",
]

#: The condition a refused reconcile sets on its object (True, reason ``Forbidden``).
PERMISSION_DENIED: Final = "PermissionDenied"

#: How often one place reports the same missing permission (seconds).
REPORT_INTERVAL: Final = 60.0

# forbiddenMessage in k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go.
_RESOURCE = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)" in API group '
    r'"(?P<group>[^"]*)"(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)'
)
_PATH = re.compile(r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) path "(?P<path>[^"]*)"')


@dataclass(frozen=True)
class MissingPermission:
    """What a 403 says the requester may not do: ``verb`` on ``resource`` (``plural/subresource``) of
    ``group`` in ``namespace`` ("" = cluster scope), or on the non-resource ``path``."""

    user: str
    verb: str
    group: str = ""
    resource: str = ""
    namespace: str = ""
    path: str = ""

    def __str__(self) -> str:
        if self.path:
            return f'{self.verb} on the non-resource URL "{self.path}"'
        where = f'in namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'{self.verb} on "{self.resource}" in API group "{self.group}" {where}'

    def rule(self) -> str:
        """The RBAC rule that would allow it, as a ClusterRole/Role rule reads."""
        if self.path:
            return f'nonResourceURLs: ["{self.path}"], verbs: ["{self.verb}"]'
        return f'apiGroups: ["{self.group}"], resources: ["{self.resource}"], verbs: ["{self.verb}"]'


def missing_permission(err: BaseException) -> MissingPermission | None:
    """The permission a 403 names, or ``None`` for anything else. A 403 whose message is not kube's
    (an admission webhook's, a proxy's) still yields what its ``details`` say (kind = resource)."""
    if not isinstance(err, ApiError) or err.status != 403:
        return None
    match = _RESOURCE.search(err.message)
    if match:
        return MissingPermission(
            match["user"], match["verb"], match["group"], match["resource"], match["namespace"] or ""
        )
    match = _PATH.search(err.message)
    if match:
        return MissingPermission(match["user"], match["verb"], path=match["path"])
    details = err.body.get("details") or {}
    return MissingPermission("", "?", str(details.get("group") or ""), str(details.get("kind") or ""))


class ReportLimiter:
    """Lets one report per key through per ``interval`` (monotonic seconds from ``clock``)."""

    def __init__(
        self, interval: float = REPORT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[object, float] = {}

    def allow(self, key: object) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        if len(self._last) > 1024:
            self._last.clear()
        self._last[key] = now
        return True


def forbidden_message(missing: MissingPermission) -> str:
    """What the Event and the condition say: the permission and the rule that grants it."""
    return f"Forbidden to {missing}: the operator's role needs the rule {{{missing.rule()}}}"


#: What a ``conditions`` list of ``metav1.Condition`` declares its items as (``aiplane.api.base``).
METAV1_CONDITION: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"


@functools.cache
def accepts_permission_condition(resource: Resource) -> bool:
    """Whether ``resource`` is a kind we serve whose status subresource holds ``metav1.Condition``
    conditions, so that a kind without them is skipped, not broken.

    Read from the pydantic model's declared types, not from its generated CRD: generating the CRD at
    start-up loaded the CRD generator and Kubernetes' OpenAPI definitions into the operator (7 MB that
    it never used again). A test checks the two answers agree for every kind we serve. The
    API models are imported here, not with this module: every controller imports the runtime, and one
    that serves none of our kinds (``echo``) need not pay for all of them at start-up."""
    from aiplane.api.registry import model_for  # noqa: PLC0415

    model = model_for(resource.api_version, resource.kind)
    if model is None or model.crd.version != resource.version:
        return False
    status = model.model_fields.get("status")  # a status field is what gives the CRD /status
    if status is None:
        return False
    for status_type in _types_in(status.annotation):
        fields = getattr(status_type, "model_fields", None)
        conditions = fields.get("conditions") if isinstance(fields, Mapping) else None
        if conditions is not None and METAV1_CONDITION in _builtin_names(conditions.annotation):
            return True
    return False


def _types_in(annotation: object) -> list[object]:
    """``annotation`` and every type argument nested in it (``X | None``, ``list[X]``, ``Annotated``)."""
    found = [annotation]
    for arg in typing.get_args(annotation):
        found.extend(_types_in(arg))
    return found


def _builtin_names(annotation: object) -> set[str]:
    """The ``x-aiplane-builtin`` definitions named by ``Annotated`` JSON schemas in ``annotation``."""
    names: set[str] = set()
    for found in _types_in(annotation):
        for meta in getattr(found, "__metadata__", ()):
            schema = getattr(meta, "json_schema", None)
            if isinstance(schema, Mapping) and isinstance(schema.get("x-aiplane-builtin"), str):
                names.add(schema["x-aiplane-builtin"])
    return names


class PermissionConditions:
    """Sets and clears ``PermissionDenied`` on the objects of one kind (see the module docstring).

    Writes go through :class:`~aiplane.kube.status.StatusWriter` (only on change, guarded by the
    observed resourceVersion), so an object already showing the permission is not written again at
    every retry, and one that never lacked a permission is never written. A refused status write is
    not retried for ``interval`` (the reconcile's own retries would otherwise double the 403s).
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        field_manager: str,
        now: Callable[[], datetime],
        *,
        interval: float = REPORT_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = StatusWriter(client, resource, field_manager)
        self._now = now
        self._interval = interval
        self._monotonic = monotonic
        self._refused: dict[str, float] = {}

    async def set(self, obj: Mapping[str, Any], missing: MissingPermission) -> str:
        """Show ``missing`` on ``obj``; returns ``"set"``, ``"unchanged"``, ``"refused"`` (the status
        write is forbidden too) or ``"failed"`` (a race: the next retry tries again)."""
        key = f"{objects.namespace(obj)}/{objects.name(obj)}"
        refused_at = self._refused.get(key)
        if refused_at is not None and self._monotonic() - refused_at < self._interval:
            return "refused"
        generation = obj.get("metadata", {}).get("generation")
        mutate = condition(
            PERMISSION_DENIED,
            "True",
            "Forbidden",
            forbidden_message(missing),
            observed_generation=generation if isinstance(generation, int) else None,
            now=self._now(),
        )
        try:
            written = await self.writer.apply(obj, mutate)
        except ApiError as exc:
            if exc.status != 403:
                return "failed"
            if len(self._refused) > 1024:
                self._refused.clear()
            self._refused[key] = self._monotonic()
            return "refused"
        except Exception:  # a broken connection: the reconcile's own retry is what matters here
            return "failed"
        self._refused.pop(key, None)
        return "unchanged" if written is None else "set"

    async def clear(self, obj: Mapping[str, Any]) -> bool:
        """Remove the condition if ``obj`` shows it (no write otherwise); a conflict is raised, so
        the reconcile is retried on a fresher cache."""
        status = objects.status(obj)
        if get_condition(status.get("conditions"), PERMISSION_DENIED) is None:
            return False
        kept, _ = remove_condition(status.get("conditions"), PERMISSION_DENIED)
        await self.writer.write(obj, {**status, "conditions": kept})
        return True

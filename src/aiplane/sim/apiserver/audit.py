"""The audit log: one record per request — who, what, and what the server answered.

Kept in memory (the newest ``capacity`` records, for tests: which permissions did the operator use?)
and, when a path is given, appended to a file as JSON lines shaped like kube-apiserver's
``audit.k8s.io/v1`` Events at level ``Metadata``, stage ``ResponseComplete`` (no request or response
bodies, so no Secret value reaches the log), with the authorization decision and reason in the
``authorization.k8s.io/decision`` and ``authorization.k8s.io/reason`` annotations as kube writes them.
"""

from __future__ import annotations

import collections
import datetime
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from aiplane.sim.apiserver.authn import UserInfo
from aiplane.sim.apiserver.rbac import Attributes

DEFAULT_CAPACITY = 10_000

#: What :meth:`AuditLog.permissions` counts: (user, verb, apiGroup, resource, subresource, namespace,
#: allowed) — resource ``""`` and the path in place of the namespace for a non-resource request.
Permission = tuple[str, str, str, str, str, str, bool]


@dataclass(frozen=True)
class AuditRecord:
    """One request as the audit log keeps it."""

    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    #: The request URI, query included (kube's ``requestURI``).
    path: str
    code: int
    allowed: bool
    reason: str = ""
    user_agent: str = ""
    time: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)

    def to_event(self) -> dict[str, Any]:
        """The kube ``audit.k8s.io/v1`` Event of this record (level Metadata)."""
        stamp = self.time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": self.path,
            "verb": self.verb,
            "user": {"username": self.user, "groups": list(self.groups)},
            "userAgent": self.user_agent,
            "responseStatus": {"metadata": {}, "code": self.code},
            "requestReceivedTimestamp": stamp,
            "stageTimestamp": stamp,
            "annotations": {"authorization.k8s.io/decision": "allow" if self.allowed else "forbid"},
        }
        if self.reason:
            event["annotations"]["authorization.k8s.io/reason"] = self.reason
        if self.resource:
            ref = {"resource": self.resource, "namespace": self.namespace, "name": self.name,
                   "apiGroup": self.api_group, "subresource": self.subresource}  # fmt: skip
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        return event


class AuditLog:
    """The newest ``capacity`` records in memory; every record also as a JSON line in ``path`` if set.

    ``permissions`` counts every request ever recorded by what authorization decided on (not bounded
    by ``capacity``: its keys are few), which is what a least-privilege check compares a role with.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, path: Path | None = None) -> None:
        self.records: collections.deque[AuditRecord] = collections.deque(maxlen=capacity)
        self.permissions: collections.Counter[Permission] = collections.Counter()
        self.path = path
        self._file: IO[bytes] | None = None

    def record(
        self,
        user: UserInfo,
        attrs: Attributes,
        code: int,
        allowed: bool,
        reason: str = "",
        user_agent: str = "",
        uri: str = "",
    ) -> AuditRecord:
        """Record one request; ``uri`` is the request URI with its query (the path if not given)."""
        entry = AuditRecord(
            user.name,
            user.groups,
            attrs.verb,
            attrs.api_group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
            uri or attrs.path,
            code,
            allowed,
            reason,
            user_agent,
        )
        self.records.append(entry)
        where = attrs.namespace if attrs.resource_request else attrs.path
        self.permissions[
            (user.name, attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, where, allowed)
        ] += 1
        if self.path is not None:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab")
            self._file.write(orjson.dumps(entry.to_event()) + b"\n")
            self._file.flush()
        return entry

    def for_user(self, name: str) -> list[AuditRecord]:
        """The records of one user (``system:serviceaccount:<ns>:<name>`` for a ServiceAccount)."""
        return [r for r in self.records if r.user == name]

    def permissions_of(self, name: str) -> dict[Permission, int]:
        """How often user ``name`` made each kind of request (see :data:`Permission`)."""
        return {key: count for key, count in self.permissions.items() if key[0] == name}

    def clear(self) -> None:
        self.records.clear()
        self.permissions.clear()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
